//! Traceability of functions on the real distribution binaries: for (module, function), can a
//! fexit program attach, and what does BTF say the signature is.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::btf::{Attach, BaseBtf, BtfError, BtfSignature, ModuleBinary};

/// Attach verdict as written in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttachVerdict {
    /// Symbol + BTF FUNC + ftrace site.
    Fexit,
    /// Only a compiler clone (`name.isra.0`) exists.
    CloneOnly { symbol: String },
    /// No symbol: inlined into its callers (or a header `static inline`).
    Inlined,
    /// The config does not build the module.
    NotBuilt,
    /// Symbol without BTF FUNC.
    NoBtf,
    /// Symbol and BTF FUNC, but `notrace`.
    NoFtrace,
    /// More arguments than the x86 BPF trampoline takes on this kernel (6 before 6.6).
    TooManyArgs { nargs: usize },
}

impl AttachVerdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            AttachVerdict::Fexit => "fexit",
            AttachVerdict::CloneOnly { .. } => "clone-only",
            AttachVerdict::Inlined => "inlined",
            AttachVerdict::NotBuilt => "not-built",
            AttachVerdict::NoBtf => "no-btf",
            AttachVerdict::NoFtrace => "no-ftrace",
            AttachVerdict::TooManyArgs { .. } => "too-many-args",
        }
    }

    pub fn is_attachable(&self) -> bool {
        matches!(self, AttachVerdict::Fexit)
    }
}

/// The binaries that `scripts/fetch-kernel.sh` placed: `vmlinux` and `modules/*.ko`.
pub struct Binaries {
    modules: BTreeMap<String, ModuleBinary>,
    /// Most arguments a fexit trampoline takes on this kernel: 6 on x86 before 6.6 (the
    /// kernel refuses `rxe_qp_from_init`, 7 args, on 6.1 with ENOTSUPP), 12 since.
    max_trampoline_args: usize,
}

impl Binaries {
    /// Load `<dir>/vmlinux` and every `<dir>/modules/*.ko`. `Ok(None)` when the directory has
    /// no binaries at all (a source-only tree).
    pub fn load(dir: &Path) -> Result<Option<Self>, BtfError> {
        let vmlinux = dir.join("vmlinux");
        let mods = dir.join("modules");
        if !vmlinux.is_file() || !mods.is_dir() {
            return Ok(None);
        }
        let base = BaseBtf::from_vmlinux(&vmlinux)?;
        let mut modules = BTreeMap::new();
        let mut entries: Vec<_> = std::fs::read_dir(&mods)
            .map_err(|e| BtfError::Io {
                file: mods.display().to_string(),
                source: e,
            })?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "ko"))
            .collect();
        entries.sort();
        for p in entries {
            let m = ModuleBinary::load(&p, &base)?;
            modules.insert(m.name.clone(), m);
        }
        let version = std::fs::read_to_string(dir.join("KERNEL_VERSION")).unwrap_or_default();
        Ok(Some(Self {
            modules,
            max_trampoline_args: max_trampoline_args(version.trim()),
        }))
    }

    /// Binaries given apart from the source tree (`--btf DIR`): `DIR/vmlinux` (ELF or raw
    /// BTF) and the modules, as `DIR/*.ko`, `DIR/modules/*.ko`, or raw split BTF files named
    /// after the module as in `/sys/kernel/btf` on a running host. The kernel version (for
    /// the trampoline limit) comes from the source tree.
    pub fn load_dir(dir: &Path, kernel_src: &Path) -> Result<Self, BtfError> {
        let io = |file: &Path, source| BtfError::Io {
            file: file.display().to_string(),
            source,
        };
        let vmlinux = dir.join("vmlinux");
        let base = BaseBtf::from_vmlinux(&vmlinux)?;
        let mut modules = BTreeMap::new();
        let mods = if dir.join("modules").is_dir() {
            dir.join("modules")
        } else {
            dir.to_path_buf()
        };
        let mut entries: Vec<_> = std::fs::read_dir(&mods)
            .map_err(|e| io(&mods, e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "vmlinux"))
            .collect();
        entries.sort();
        for p in entries {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(stem) = name.strip_suffix(".ko") {
                let m = ModuleBinary::load(&p, &base)?;
                modules.insert(stem.to_string(), m);
            } else if !name.contains('.') {
                // /sys/kernel/btf/<module>: raw split BTF.
                let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
                let m = ModuleBinary::from_raw_split(
                    &bytes,
                    &p.display().to_string(),
                    name.clone(),
                    &base,
                )?;
                modules.insert(name, m);
            }
        }
        let version = std::fs::read_to_string(kernel_src.join("KERNEL_VERSION"))
            .or_else(|_| std::fs::read_to_string(dir.join("KERNEL_VERSION")))
            .unwrap_or_default();
        Ok(Self {
            modules,
            max_trampoline_args: max_trampoline_args(version.trim()),
        })
    }

    pub fn module(&self, name: &str) -> Option<&ModuleBinary> {
        self.modules.get(name)
    }

    /// Verdict for a function of `module` (`None` module: a header inline).
    pub fn verdict(&self, module: Option<&str>, function: &str) -> AttachVerdict {
        let Some(module) = module else {
            return AttachVerdict::Inlined;
        };
        let Some(bin) = self.modules.get(module) else {
            // No such module among the distribution's binaries: the config does not build it
            // (fetch-kernel.sh lists those in modules/MISSING), or it was not fetched.
            return AttachVerdict::NotBuilt;
        };
        match bin.attach(function) {
            Attach::Fexit => match bin.btf_signature(function) {
                Some(sig) if sig.nargs > self.max_trampoline_args => {
                    AttachVerdict::TooManyArgs { nargs: sig.nargs }
                }
                _ => AttachVerdict::Fexit,
            },
            Attach::CloneOnly { symbol } => AttachVerdict::CloneOnly { symbol },
            Attach::NoBtf => AttachVerdict::NoBtf,
            Attach::NoFtrace => AttachVerdict::NoFtrace,
            Attach::Inlined => AttachVerdict::Inlined,
        }
    }

    pub fn signature(&self, module: Option<&str>, function: &str) -> Option<BtfSignature> {
        self.modules.get(module?)?.btf_signature(function)
    }
}

/// x86-64 BPF trampolines pass at most 6 arguments before Linux 6.6, 12 since. An unknown
/// version gets the conservative limit.
fn max_trampoline_args(version: &str) -> usize {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) >= (6, 6) {
        12
    } else {
        6
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn trampoline_argument_limit_follows_the_version() {
        assert_eq!(super::max_trampoline_args("6.1.192"), 6);
        assert_eq!(super::max_trampoline_args("6.12.117"), 12);
        assert_eq!(super::max_trampoline_args(""), 6);
    }
}

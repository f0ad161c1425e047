//! The running kernel's BTF, read from `/sys/kernel/btf` (world-readable: no capability
//! needed), checked against each fexit probe before its program is loaded.
//!
//! Why: a fexit program reads the return value at `ctx[nargs]` and tests it as its manifest's
//! `returns` (an int sign-extended from `ret_size` bytes, or an `ERR_PTR`). A set chosen for
//! another point release of the series (or another gcc: the same source may be built with
//! other clones) may meet a function whose prototype differs: the verifier would accept the
//! read of an argument slot as the "return value", and every count would be wrong in silence.
//! So a probe whose function is missing from its module's BTF, or has another argument count
//! or return kind, is skipped with the difference as its reason, never loaded blind.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};

use libbpf_rs::libbpf_sys;
use manifest::ReturnKind;

use manifest::btf_kind::{
    INT_BOOL, KIND_CONST, KIND_ENUM, KIND_ENUM64, KIND_FLOAT, KIND_FUNC, KIND_FUNC_PROTO, KIND_INT,
    KIND_PTR, KIND_RESTRICT, KIND_STRUCT, KIND_TYPEDEF, KIND_TYPE_TAG, KIND_UNION, KIND_VOLATILE,
};
/// Typedef and qualifier chains longer than this are a damaged BTF.
const MAX_RESOLVE_DEPTH: usize = 32;

/// A function's prototype as the probes care about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signature {
    pub nargs: usize,
    pub returns: ReturnKind,
    /// bytes of the return value (0 for void)
    pub ret_size: u32,
}

/// One parsed BTF (libbpf's `struct btf`), freed on drop.
struct BtfHandle(*mut libbpf_sys::btf);

impl Drop for BtfHandle {
    fn drop(&mut self) {
        // SAFETY: the pointer came from btf__parse / btf__parse_split and is freed once;
        // split BTFs are dropped before their base (HostBtf's field order).
        unsafe { libbpf_sys::btf__free(self.0) }
    }
}

/// The running kernel's BTF: vmlinux and, parsed on first use, each module's split BTF.
pub(crate) struct HostBtf {
    // modules before vmlinux: a split BTF must be freed before its base
    modules: RefCell<BTreeMap<String, Option<BtfHandle>>>,
    vmlinux: Option<BtfHandle>,
    dir: PathBuf,
}

/// What the running kernel says about one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup {
    Found(Signature),
    /// The BTF is there and has no FUNC of that name.
    NoFunction,
    /// No BTF to ask (no vmlinux BTF, or the module's file is missing or unreadable).
    NoBtf,
}

fn parse(path: &Path, base: Option<&BtfHandle>) -> Option<BtfHandle> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: c is a valid C string; base (when given) outlives the split BTF (HostBtf).
    let p = unsafe {
        match base {
            Some(b) => libbpf_sys::btf__parse_split(c.as_ptr(), b.0),
            None => libbpf_sys::btf__parse(c.as_ptr(), std::ptr::null_mut()),
        }
    };
    // libbpf 1.x returns NULL (errno set) on error
    (!p.is_null()).then_some(BtfHandle(p))
}

impl HostBtf {
    /// The BTF under `dir` (`/sys/kernel/btf`); modules are read when first asked for.
    pub(crate) fn open(dir: &Path) -> Self {
        HostBtf {
            modules: RefCell::new(BTreeMap::new()),
            vmlinux: parse(&dir.join("vmlinux"), None),
            dir: dir.to_path_buf(),
        }
    }

    /// Whether this kernel has fsession programs: `BPF_TRACE_FSESSION` in its `enum
    /// bpf_attach_type` (7.0+). No vmlinux BTF, or a damaged one: no.
    pub(crate) fn has_fsession(&self) -> bool {
        self.vmlinux
            .as_ref()
            .is_some_and(|b| has_enum_value(b, "bpf_attach_type", "BPF_TRACE_FSESSION"))
    }

    /// Whether this kernel has task storage maps (5.11+; not Debian's 5.10): the baseline's
    /// `bl_task`. No vmlinux BTF: assume so, and let the load decide.
    pub(crate) fn has_task_storage(&self) -> bool {
        self.vmlinux
            .as_ref()
            .is_none_or(|b| has_enum_value(b, "bpf_map_type", "BPF_MAP_TYPE_TASK_STORAGE"))
    }

    /// `function` in `module`'s BTF (`vmlinux` for a built-in function).
    pub(crate) fn lookup(&self, module: &str, function: &str) -> Lookup {
        let Some(base) = self.vmlinux.as_ref() else {
            return Lookup::NoBtf;
        };
        if module == "vmlinux" {
            return find(base, function);
        }
        let path = self.dir.join(module);
        let mut modules = self.modules.borrow_mut();
        let entry = modules
            .entry(module.to_string())
            .or_insert_with(|| parse(&path, Some(base)));
        match entry {
            Some(b) => find(b, function),
            None => Lookup::NoBtf,
        }
    }
}

/// Whether the ENUM `enum_name` of `btf` has a member `value`.
fn has_enum_value(btf: &BtfHandle, enum_name: &str, value: &str) -> bool {
    let Ok(name) = CString::new(enum_name) else {
        return false;
    };
    // SAFETY: btf is a live parsed BTF, name a valid C string.
    let id = unsafe { libbpf_sys::btf__find_by_name_kind(btf.0, name.as_ptr(), KIND_ENUM.into()) };
    let Some((KIND_ENUM, vlen, _, t)) = u32::try_from(id).ok().and_then(|id| type_at(btf, id))
    else {
        return false;
    };
    (0..vlen as usize).any(|i| {
        // SAFETY: an ENUM's `vlen` btf_enum members follow its btf_type record (BTF layout).
        let name_off = unsafe { (*t.add(1).cast::<libbpf_sys::btf_enum>().add(i)).name_off };
        // SAFETY: btf is live; libbpf returns NULL for an offset out of range.
        let n = unsafe { libbpf_sys::btf__name_by_offset(btf.0, name_off) };
        // SAFETY: a non-NULL name is a NUL-terminated string inside btf's data.
        !n.is_null() && unsafe { std::ffi::CStr::from_ptr(n) }.to_bytes() == value.as_bytes()
    })
}

/// The FUNC `function` of `btf` and its prototype.
fn find(btf: &BtfHandle, function: &str) -> Lookup {
    let Ok(name) = CString::new(function) else {
        return Lookup::NoFunction;
    };
    // SAFETY: btf is a live parsed BTF, name a valid C string.
    let id = unsafe { libbpf_sys::btf__find_by_name_kind(btf.0, name.as_ptr(), KIND_FUNC.into()) };
    let Ok(id) = u32::try_from(id) else {
        return Lookup::NoFunction;
    };
    signature(btf, id).map_or(Lookup::NoFunction, Lookup::Found)
}

/// (kind, vlen, size-or-type) of type `id`, or `None` out of range.
fn type_at(btf: &BtfHandle, id: u32) -> Option<(u8, u32, u32, *const libbpf_sys::btf_type)> {
    // SAFETY: btf is live; libbpf returns NULL for an id out of range.
    let t = unsafe { libbpf_sys::btf__type_by_id(btf.0, id) };
    if t.is_null() {
        return None;
    }
    // SAFETY: t points at a btf_type record inside btf's data.
    let (info, size_or_type) = unsafe { ((*t).info, (*t).__bindgen_anon_1.size) };
    // the kind is 5 bits: the cast keeps it whole
    Some((((info >> 24) & 0x1f) as u8, info & 0xffff, size_or_type, t))
}

/// The FUNC `id`'s prototype: its parameter count and return kind.
fn signature(btf: &BtfHandle, id: u32) -> Option<Signature> {
    let (kind, _, proto, _) = type_at(btf, id)?;
    if kind != KIND_FUNC {
        return None;
    }
    let (kind, vlen, ret, _) = type_at(btf, proto)?;
    if kind != KIND_FUNC_PROTO {
        return None;
    }
    let (returns, ret_size) = return_kind(btf, ret)?;
    Some(Signature {
        nargs: vlen as usize,
        returns,
        ret_size,
    })
}

/// The return type `id` as the manifest names it (the analyzer's reading of the same BTF).
fn return_kind(btf: &BtfHandle, mut id: u32) -> Option<(ReturnKind, u32)> {
    for _ in 0..MAX_RESOLVE_DEPTH {
        if id == 0 {
            return Some((ReturnKind::Void, 0));
        }
        let (kind, _, size_or_type, t) = type_at(btf, id)?;
        match kind {
            KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                id = size_or_type;
            }
            KIND_PTR => return Some((ReturnKind::Ptr, 8)),
            KIND_INT => {
                // SAFETY: an INT record is followed by its u32 encoding word.
                let enc = unsafe { std::ptr::read_unaligned(t.add(1).cast::<u32>()) } >> 24;
                let kind = if enc & INT_BOOL != 0 {
                    ReturnKind::Bool
                } else {
                    ReturnKind::Int
                };
                return Some((kind, size_or_type));
            }
            KIND_ENUM | KIND_ENUM64 | KIND_STRUCT | KIND_UNION | KIND_FLOAT => {
                return Some((ReturnKind::Int, size_or_type))
            }
            _ => return Some((ReturnKind::Int, 0)),
        }
    }
    None
}

/// Why the running kernel's `have` cannot carry a program built for `want`, or `None`.
pub(crate) fn mismatch(want: Signature, have: Signature) -> Option<String> {
    let show = |s: Signature| match s.returns {
        ReturnKind::Void => format!("{} args, void", s.nargs),
        r => format!("{} args, {} of {} bytes", s.nargs, r.as_str(), s.ret_size),
    };
    // the manifest's ret_size is 0 where BTF gave none (a bool or void)
    let size_differs = matches!(want.returns, ReturnKind::Int | ReturnKind::Ptr)
        && want.ret_size != 0
        && want.ret_size != have.ret_size;
    (want.nargs != have.nargs || want.returns != have.returns || size_differs).then(|| {
        format!(
            "this kernel's BTF prototype differs: {} here, the set was built for {}",
            show(have),
            show(want)
        )
    })
}

/// The compiler clones of `function` among `symbols` (`f.constprop.0`, `f.isra.0`,
/// `f.part.0`; not `f.cold`, a split-off tail that is never entered by a call), sorted.
pub(crate) fn clones_of<'a>(function: &str, symbols: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = symbols
        .filter(|s| {
            s.strip_prefix(function)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|suffix| {
                    !suffix.split('.').any(|p| p == "cold")
                        && suffix.split('.').all(|p| {
                            matches!(p, "constprop" | "isra" | "part" | "lto_priv")
                                || p.chars().all(|c| c.is_ascii_digit())
                        })
                })
        })
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `name` without its clone suffixes (`f.constprop.0` -> `f`).
pub(crate) fn clone_base(name: &str) -> &str {
    name.split_once('.').map_or(name, |(b, _)| b)
}

#[cfg(test)]
pub(crate) mod fixture {
    use std::path::{Path, PathBuf};

    /// A directory laid out as /sys/kernel/btf (vmlinux, ib_core, ib_uverbs, rdma_rxe) whose
    /// entries link to Debian's real 6.12 ELF files (`scripts/fetch-kernel.sh 6.12`); libbpf reads
    /// their BTF as it reads the raw sysfs files. Panics, naming the fetch, when they are missing.
    pub(crate) fn debian_6_12_btf_dir(tag: &str) -> PathBuf {
        let tree = std::env::var_os("PROBEGEN_KERNEL_6_12")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/probegen/linux-6.12"))
            })
            .expect("PROBEGEN_KERNEL_6_12 or HOME");
        assert!(
            tree.join("vmlinux").exists(),
            "{}: no vmlinux: run scripts/fetch-kernel.sh 6.12",
            tree.display()
        );
        let dir = std::env::temp_dir().join(format!("pg-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("tmp");
        std::os::unix::fs::symlink(tree.join("vmlinux"), dir.join("vmlinux")).expect("link");
        for m in ["ib_core", "ib_uverbs", "rdma_rxe"] {
            let ko = tree.join(format!("modules/{m}.ko"));
            std::os::unix::fs::symlink(ko, dir.join(m)).expect("link");
        }
        dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fsession is read off the kernel's own BTF: Debian's 7.2 has it, 6.12 has not.
    #[test]
    fn fsession_is_in_7_2_btf_and_not_in_6_12() {
        for (var, series, want) in [
            ("PROBEGEN_KERNEL_6_12", "6.12", false),
            ("PROBEGEN_KERNEL_7_2", "7.2", true),
        ] {
            let tree = std::env::var_os(var)
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME")
                        .map(|h| Path::new(&h).join(format!(".cache/probegen/linux-{series}")))
                })
                .expect("kernel tree variable or HOME");
            assert!(
                tree.join("vmlinux").exists(),
                "{}: no vmlinux: run scripts/fetch-kernel.sh {series}",
                tree.display()
            );
            let dir =
                std::env::temp_dir().join(format!("pg-fsession-{series}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("tmp");
            std::os::unix::fs::symlink(tree.join("vmlinux"), dir.join("vmlinux")).expect("link");
            assert_eq!(HostBtf::open(&dir).has_fsession(), want, "{series}");
            let _ = std::fs::remove_dir_all(&dir);
        }
        assert!(!HostBtf::open(Path::new("/nonexistent")).has_fsession());
    }

    #[test]
    fn clones_are_found_by_name_and_tails_are_not() {
        let syms = [
            "ib_resolve_unicast_gid_dmac",
            "ib_resolve_unicast_gid_dmac.constprop.1",
            "ib_resolve_unicast_gid_dmac.isra.0",
            "ib_resolve_unicast_gid_dmac.cold",
            "ib_resolve_unicast_gid_dmac_other",
            "ib_resolve_unicast_gid_dmac.part.0.constprop.0",
        ];
        assert_eq!(
            clones_of("ib_resolve_unicast_gid_dmac", syms.iter().copied()),
            [
                "ib_resolve_unicast_gid_dmac.constprop.1",
                "ib_resolve_unicast_gid_dmac.isra.0",
                "ib_resolve_unicast_gid_dmac.part.0.constprop.0",
            ]
        );
        assert_eq!(clone_base("f.constprop.0"), "f");
        assert_eq!(clone_base("f"), "f");
    }

    #[test]
    fn prototypes_that_differ_are_named() {
        let s = |nargs, returns, ret_size| Signature {
            nargs,
            returns,
            ret_size,
        };
        assert_eq!(
            mismatch(s(3, ReturnKind::Int, 4), s(3, ReturnKind::Int, 4)),
            None
        );
        let m = mismatch(s(3, ReturnKind::Int, 4), s(4, ReturnKind::Int, 4));
        assert_eq!(
            m.as_deref(),
            Some("this kernel's BTF prototype differs: 4 args, int of 4 bytes here, the set was built for 3 args, int of 4 bytes")
        );
        assert!(mismatch(s(2, ReturnKind::Ptr, 8), s(2, ReturnKind::Int, 4)).is_some());
        assert!(mismatch(s(2, ReturnKind::Int, 4), s(2, ReturnKind::Int, 8)).is_some());
        assert_eq!(
            mismatch(s(1, ReturnKind::Bool, 0), s(1, ReturnKind::Bool, 1)),
            None
        );
    }

    /// Debian's real 6.12 binaries (`scripts/fetch-kernel.sh 6.12`; libbpf reads the BTF out
    /// of the ELF files as it reads /sys/kernel/btf's raw ones): every fexit probe of the
    /// checked-in 6.12 rxe set has the prototype its manifest was generated with, a probe
    /// whose manifest says otherwise is named, and a missing function or module is told apart.
    #[test]
    fn debian_6_12_btf_matches_the_checked_in_set() {
        let dir = super::fixture::debian_6_12_btf_dir("hostbtf");
        let text = include_str!("../../../generated/linux-6.12/rxe/manifest.yaml");
        let m = manifest::Manifest::from_yaml(text, "rxe").expect("manifest");
        let h = HostBtf::open(&dir);
        let mut checked = 0;
        for p in m
            .probes
            .iter()
            .filter(|p| p.attach == manifest::Attach::Fexit)
        {
            let want = Signature {
                nargs: p.nargs,
                returns: p.returns,
                ret_size: p.ret_size,
            };
            match h.lookup(&p.module, &p.function) {
                Lookup::Found(have) => assert_eq!(mismatch(want, have), None, "{}", p.function),
                other => panic!("{}:{}: {other:?}", p.module, p.function),
            }
            let more = Signature {
                nargs: p.nargs + 1,
                ..want
            };
            if let Lookup::Found(have) = h.lookup(&p.module, &p.function) {
                assert!(mismatch(more, have).is_some(), "{}", p.function);
            }
            checked += 1;
        }
        assert!(checked >= 40, "{checked} fexit probes checked");
        assert_eq!(
            h.lookup("ib_core", "probegen_no_such_function"),
            Lookup::NoFunction
        );
        assert_eq!(h.lookup("probegen_no_module", "f"), Lookup::NoBtf);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

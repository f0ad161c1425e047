//! Kbuild: which `.c` files the config builds, and into which module each is linked.
//!
//! `ib_umem_get` lives in umem.c, which `ib_uverbs-$(CONFIG_INFINIBAND_USER_MEM) += umem.o`
//! links into ib_uverbs.ko, not ib_core.ko: probes are keyed by (module, function), so the
//! module must come from the Makefiles, not from the directory name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::error::Warning;
use crate::kconfig::KernelConfig;

/// `.c` path (relative to the source root, with `/`) -> module name (`vmlinux` when built in).
#[derive(Debug, Default, Clone)]
pub struct BuildMap {
    pub modules: BTreeMap<String, String>,
    /// Directories Kbuild descended into.
    pub dirs: BTreeSet<String>,
    /// Files the Makefiles name but the config does not build, with the module they would
    /// belong to (bnxt_re on Debian's 6.1): lets a vendor set report them as `not-built`.
    pub unbuilt: BTreeMap<String, String>,
    pub unbuilt_dirs: BTreeSet<String>,
}

impl BuildMap {
    pub fn module_of(&self, file: &str) -> Option<&str> {
        self.modules.get(file).map(String::as_str)
    }

    /// The module of a built file, or the one an unbuilt file would be linked into.
    pub fn module_or_unbuilt(&self, file: &str) -> Option<&str> {
        self.module_of(file)
            .or_else(|| self.unbuilt.get(file).map(String::as_str))
    }
}

/// Walk the Makefiles from `top` (e.g. `drivers/infiniband`) under `root`.
pub(crate) fn read_build_map(
    root: &Path,
    top: &str,
    config: &KernelConfig,
    warnings: &mut Vec<Warning>,
) -> BuildMap {
    let mut map = BuildMap::default();
    visit(root, top, config, &mut map, warnings, 0, true);
    map
}

/// Makefiles nested deeper than this below `top` are not read: drivers/infiniband nests 2
/// levels (hw/mlx5); the bound only stops a cycle of directories through symlinks.
const MAX_KBUILD_DEPTH: usize = 16;

/// One object a Makefile names in `obj-y`, `obj-m` or `obj-` (`obj-$(CONFIG_X)` evaluated).
struct KbuildObject {
    name: String,
    /// Linked into vmlinux (`obj-y`) rather than a module of its own name.
    builtin: bool,
    /// The config builds it (and the directory's Makefile is read because it is built).
    built: bool,
}

fn visit(
    root: &Path,
    dir: &str,
    config: &KernelConfig,
    map: &mut BuildMap,
    warnings: &mut Vec<Warning>,
    depth: usize,
    built: bool,
) {
    let dirs = if built {
        &mut map.dirs
    } else {
        &mut map.unbuilt_dirs
    };
    if depth > MAX_KBUILD_DEPTH || !dirs.insert(dir.to_string()) {
        return;
    }
    let Some(text) = read_makefile(root, dir, built, warnings) else {
        return;
    };
    let assignments = parse_assignments(&text, config);
    let (objects, subdirs) = built_objects(&assignments, built);
    for obj in objects {
        map_object_sources(map, dir, &assignments, &obj);
    }
    for (sub, sub_built) in subdirs {
        let sub = format!("{dir}/{sub}");
        visit(root, &sub, config, map, warnings, depth + 1, sub_built);
    }
}

/// The text of a directory's Kbuild (else Makefile). A directory without one is a warning
/// when Kbuild descends into it for a built object; unread, it is a warning too.
fn read_makefile(
    root: &Path,
    dir: &str,
    built: bool,
    warnings: &mut Vec<Warning>,
) -> Option<String> {
    let makefile = ["Kbuild", "Makefile"]
        .iter()
        .map(|n| root.join(dir).join(n))
        .find(|p| p.is_file());
    let Some(makefile) = makefile else {
        if built {
            warnings.push(Warning {
                file: format!("{dir}/Makefile"),
                line: 0,
                message: "no Makefile or Kbuild in a directory Kbuild descends into".into(),
            });
        }
        return None;
    };
    match std::fs::read(&makefile) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(e) => {
            warnings.push(Warning {
                file: makefile.display().to_string(),
                line: 0,
                message: format!("unreadable: {e}"),
            });
            None
        }
    }
}

/// The objects and subdirectories a Makefile's `obj-y` / `obj-m` (and left-out `obj-`)
/// lines name, in order: whether each is built, given whether the directory is.
fn built_objects(
    assignments: &[(String, Vec<String>)],
    dir_built: bool,
) -> (Vec<KbuildObject>, Vec<(String, bool)>) {
    let mut objects = Vec::new();
    let mut subdirs = Vec::new();
    for (lhs, rhs) in assignments {
        let (builtin, on) = match lhs.as_str() {
            "obj-y" => (true, true),
            "obj-m" => (false, true),
            "obj-" | "obj-n" => (false, false),
            _ => continue,
        };
        for tok in rhs {
            if let Some(sub) = tok.strip_suffix('/') {
                subdirs.push((sub.to_string(), dir_built && on));
            } else if let Some(o) = tok.strip_suffix(".o") {
                objects.push(KbuildObject {
                    name: o.to_string(),
                    builtin,
                    built: dir_built && on,
                });
            }
        }
    }
    (objects, subdirs)
}

/// Map the `.c` files of one object to its module: its parts (`obj-y`, `obj-m`, `obj-objs`
/// lines), or the object's own `.c` when it has none.
fn map_object_sources(
    map: &mut BuildMap,
    dir: &str,
    assignments: &[(String, Vec<String>)],
    obj: &KbuildObject,
) {
    let name = &obj.name;
    let module = if obj.builtin {
        "vmlinux".to_string()
    } else {
        module_name(name)
    };
    let parts: Vec<&String> = assignments
        .iter()
        .filter(|(lhs, _)| {
            lhs == &format!("{name}-y")
                || lhs == &format!("{name}-m")
                || lhs == &format!("{name}-objs")
        })
        .flat_map(|(_, rhs)| rhs.iter())
        .collect();
    let target = if obj.built {
        &mut map.modules
    } else {
        &mut map.unbuilt
    };
    if parts.is_empty() {
        target.insert(format!("{dir}/{name}.c"), module);
    } else {
        for part in parts {
            if let Some(p) = part.strip_suffix(".o") {
                target.insert(format!("{dir}/{p}.c"), module.clone());
            }
        }
    }
}

fn module_name(obj: &str) -> String {
    obj.rsplit('/').next().unwrap_or(obj).replace('-', "_")
}

/// Logical lines of the form `lhs op rhs` with `$(CONFIG_X)` substituted in the left side.
/// Conditionals (`ifdef`, `ifeq`) are rare in drivers/infiniband and are ignored.
fn parse_assignments(text: &str, config: &KernelConfig) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut logical = String::new();
    for raw in text.lines() {
        let line = raw.split('#').next().unwrap_or("");
        if let Some(stripped) = line.trim_end().strip_suffix('\\') {
            logical.push_str(stripped);
            logical.push(' ');
            continue;
        }
        logical.push_str(line);
        let full = std::mem::take(&mut logical);
        let Some((lhs, rhs)) = split_assignment(&full) else {
            continue;
        };
        let lhs = substitute(lhs.trim(), config);
        let rhs = rhs
            .split_whitespace()
            .map(|t| substitute(t, config))
            .collect();
        out.push((lhs, rhs));
    }
    out
}

fn split_assignment(line: &str) -> Option<(&str, &str)> {
    for op in [":=", "+=", "?="] {
        if let Some(pos) = line.find(op) {
            return Some((&line[..pos], &line[pos + op.len()..]));
        }
    }
    let pos = line.find('=')?;
    Some((&line[..pos], &line[pos + 1..]))
}

fn substitute(s: &str, config: &KernelConfig) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(pos) = rest.find("$(") {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        let Some(end) = after.find(')') else {
            out.push_str(&rest[pos..]);
            return out;
        };
        let var = &after[..end];
        if var.starts_with("CONFIG_") {
            out.push_str(config.kbuild_letter(var));
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kconfig::ConfigValue;

    #[test]
    fn composite_modules_follow_the_config() {
        let dir = std::env::temp_dir().join(format!("pg-kbuild-{}", std::process::id()));
        let core = dir.join("ib/core");
        std::fs::create_dir_all(&core).expect("mkdir");
        std::fs::write(
            dir.join("ib/Makefile"),
            "obj-$(CONFIG_IB) += core/\nobj-$(CONFIG_NOPE) += hw/\n",
        )
        .expect("write");
        std::fs::write(
            core.join("Makefile"),
            "obj-$(CONFIG_IB) += ib_core.o ib_uverbs.o\nib_core-y := verbs.o \\\n  device.o\nib_core-$(CONFIG_SEC) += security.o\nib_uverbs-y := uverbs_main.o\nib_uverbs-$(CONFIG_UMEM) += umem.o\n",
        )
        .expect("write");
        let mut cfg = KernelConfig::default();
        cfg.set("CONFIG_IB", ConfigValue::Module);
        cfg.set("CONFIG_UMEM", ConfigValue::BuiltIn);
        let mut w = Vec::new();
        let map = read_build_map(&dir, "ib", &cfg, &mut w);
        assert_eq!(map.module_of("ib/core/umem.c"), Some("ib_uverbs"));
        assert_eq!(map.module_of("ib/core/device.c"), Some("ib_core"));
        assert_eq!(map.module_of("ib/core/security.c"), None);
        assert!(!map.dirs.contains("ib/hw"));
        assert!(w.is_empty(), "{w:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Which directories of the kernel tree the analyzer reads. The analyzer knows no vendor: the
//! caller names the directories (probegen's from `source:` and the vendors' `dirs` of
//! heuristics/rules.yaml), so a vendor the rules add is read without a change here.

/// The directories read under the source root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLayout {
    /// The Kbuild root (`drivers/infiniband`): its Makefiles decide which `.c` files are
    /// built, its Kconfig which options matter; every file below it is read.
    pub kbuild_top: String,
    /// Further directories read for their headers' `static inline` functions and macros
    /// (`include/rdma`, `include/linux/mlx5`), in the order given.
    pub include_dirs: Vec<String>,
}

impl SourceLayout {
    /// A layout of `kbuild_top` and `include_dirs`, written with or without a trailing `/`
    /// (kept without one: `format!("{top}/Kconfig")` must not double it); an include directory
    /// below `kbuild_top` or named twice is read once.
    pub fn new(kbuild_top: &str, include_dirs: &[String]) -> Self {
        let kbuild_top = kbuild_top.trim_end_matches('/').to_string();
        let mut dirs: Vec<String> = Vec::new();
        for d in include_dirs {
            let d = d.trim_end_matches('/').to_string();
            if !is_within(&d, &kbuild_top) && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        Self {
            kbuild_top,
            include_dirs: dirs,
        }
    }

    /// Every directory read: the Kbuild root, then the include directories.
    pub fn scan_dirs(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.kbuild_top.as_str())
            .chain(self.include_dirs.iter().map(String::as_str))
    }

    /// Whether the tree-relative `path` lies in a directory read.
    pub fn contains(&self, path: &str) -> bool {
        self.scan_dirs().any(|d| is_within(path, d))
    }
}

/// `path` is `dir` or below it (`include/linux/mlx5x` is not below `include/linux/mlx5`).
fn is_within(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_slashes_and_nested_dirs_are_normalised() {
        let l = SourceLayout::new(
            "drivers/infiniband/",
            &[
                "include/rdma/".into(),
                "drivers/infiniband/hw/mlx5/".into(),
                "include/rdma".into(),
            ],
        );
        assert_eq!(l.kbuild_top, "drivers/infiniband");
        assert_eq!(l.include_dirs, vec!["include/rdma".to_string()]);
        assert!(l.contains("include/rdma/ib_verbs.h"));
        assert!(!l.contains("include/rdmax/a.h"));
        assert!(l.contains("drivers/infiniband/core/verbs.c"));
    }
}

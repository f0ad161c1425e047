//! The provider libraries the host's processes have mapped, with each one's build-id.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::elf::{build_id, ErrorPath};

/// One provider library file some processes mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedProvider {
    /// The path as the processes see it (their mount namespace).
    pub path: String,
    /// `None`: the file could not be read or has no build-id.
    pub build_id: Option<String>,
    pub pids: Vec<u32>,
}

/// Every file named like `path.library_prefix` mapped by a process under `proc_root`
/// (`/proc`), read through the first mapping process's root so a container's library is the
/// one measured. Processes that vanish or deny their maps are passed over.
pub fn loaded_providers(proc_root: &Path, path: &ErrorPath) -> Vec<LoadedProvider> {
    let mut by_file: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let Ok(entries) = fs::read_dir(proc_root) else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(maps) = fs::read_to_string(entry.path().join("maps")) else {
            continue;
        };
        for file in mapped_files(&maps, path.library_prefix) {
            let pids = by_file.entry(file).or_default();
            if !pids.contains(&pid) {
                pids.push(pid);
            }
        }
    }
    by_file
        .into_iter()
        .map(|(file, mut pids)| {
            pids.sort_unstable();
            let inside = proc_root
                .join(pids[0].to_string())
                .join("root")
                .join(file.trim_start_matches('/'));
            let bytes = fs::read(&inside).or_else(|_| fs::read(&file)).ok();
            LoadedProvider {
                build_id: bytes.and_then(|b| build_id(&b).ok()),
                path: file,
                pids,
            }
        })
        .collect()
}

/// The paths in one `/proc/PID/maps` whose file name starts with `prefix`. A mapping of a file
/// removed or replaced since (a package upgrade renames a new build over it) reads
/// `PATH (deleted)`: it is taken as PATH, the path the job loaded, so the library whose file
/// changed under the job is the one known at that path (its build-id is then the file's there
/// now, or none).
fn mapped_files(maps: &str, prefix: &str) -> Vec<String> {
    let mut files: Vec<String> = maps
        .lines()
        // address perms offset dev inode path: the path is the sixth field and may hold spaces
        .filter_map(|line| line.splitn(6, ' ').nth(5).map(str::trim))
        .map(|p| p.strip_suffix(" (deleted)").unwrap_or(p))
        .filter(|p| p.starts_with('/'))
        .filter(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(str::to_string)
        .collect();
    files.sort();
    files.dedup();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_provider_library_of_a_maps_file_is_taken() {
        let maps = "\
7f00-7f10 r--p 00000000 08:01 1234   /usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.44.0
7f10-7f20 r-xp 00008000 08:01 1234   /usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.44.0
7f20-7f30 r-xp 00000000 08:01 99     /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0
7f30-7f40 rw-p 00000000 00:00 0      [heap]
7f40-7f50 r-xp 00000000 08:01 77     /opt/my dir/libmlx5.so.1.25.0 (deleted)
7f50-7f60 r-xp 00000000 08:01 78     /opt/my dir/libmlx5.so.1.25.0
";
        // the replaced file's mapping and the new file's are one library at one path
        assert_eq!(
            mapped_files(maps, "libmlx5.so.1."),
            [
                "/opt/my dir/libmlx5.so.1.25.0",
                "/usr/lib/x86_64-linux-gnu/libmlx5.so.1.24.44.0"
            ]
        );
    }

    /// A job that maps a library whose file was replaced since (`PATH (deleted)` in its maps)
    /// has the library at PATH, with the build-id of the file there now: what the stage
    /// reports as a file changed under the running jobs, not as a library no process maps.
    #[test]
    fn a_replaced_file_is_the_library_at_its_path_with_the_new_build_id() {
        let root = std::env::temp_dir().join(format!("probegen-host-{}", std::process::id()));
        let lib = "/opt/lib/libmlx5.so.1.25.0";
        let inside = root.join("4242/root").join(lib.trim_start_matches('/'));
        let dir = inside.parent().expect("a directory");
        fs::create_dir_all(dir).expect("made");
        // the new build at the path: this test's own binary, which has a build-id
        let new = fs::read(std::env::current_exe().expect("the test binary")).expect("read");
        fs::write(&inside, &new).expect("written");
        fs::write(
            root.join("4242/maps"),
            format!("7f40-7f50 r-xp 00000000 08:01 77     {lib} (deleted)\n"),
        )
        .expect("written");
        let loaded = loaded_providers(&root, &crate::MLX5_ERROR_PATH);
        let _ = fs::remove_dir_all(&root);
        assert_eq!(loaded.len(), 1, "{loaded:?}");
        assert_eq!(loaded[0].path, lib);
        assert_eq!(loaded[0].pids, [4242]);
        assert_eq!(loaded[0].build_id, build_id(&new).ok());
        assert!(
            loaded[0].build_id.is_some(),
            "the test binary has a build-id"
        );
    }
}

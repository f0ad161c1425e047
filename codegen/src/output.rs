//! Atomic file output: write to a temporary file beside the target, then rename, so a failed
//! run never leaves a half-written file in place of a good one.

use std::io::Write;
use std::path::{Path, PathBuf};

pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Why a probe set could not be written; each names the path.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: expected a directory name for --out", .0.display())]
    NoDirectoryName(PathBuf),
    #[error("{}: not a file of a probe set: expected --out to be a new directory or an earlier probe set", .0.display())]
    NotASetFile(PathBuf),
    #[error("{}: not a directory: expected --out to be a new directory or an earlier probe set", .0.display())]
    NotADirectory(PathBuf),
}

impl OutputError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Write a whole probe set (`files`: name, contents) into `out` so that `out` holds either the
/// earlier set or the new one, never a mix: the files go to a temporary directory beside `out`,
/// which then takes the place of `out` (an atomic exchange where the filesystem supports it,
/// else two renames), and the earlier set is removed. Other plain files in `out` (a compiled
/// `probes.bpf.o`) are carried over; a directory or anything else in `out` that is not part of
/// a set is refused before anything is written, so `--out ~` cannot replace a home directory.
pub fn write_set_atomic(out: &Path, files: &[(String, String)]) -> Result<(), OutputError> {
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| OutputError::NoDirectoryName(out.to_path_buf()))?;
    let carried = files_to_carry(out, files)?;
    std::fs::create_dir_all(parent).map_err(|e| OutputError::io(parent, e))?;
    let tmp = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    if let Err(e) = stage_set(&tmp, out, files, &carried) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let swapped = if out.exists() {
        exchange(&tmp, out).map(|()| true)
    } else {
        std::fs::rename(&tmp, out).map(|()| false)
    };
    match swapped {
        Ok(true) => {
            // `tmp` now holds the earlier set.
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        Ok(false) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(OutputError::io(out, e))
        }
    }
}

/// The plain files of an earlier set in `out` that are not part of the new one (a compiled
/// `probes.bpf.o`): they are carried over. Anything that is not a plain file is refused.
fn files_to_carry(out: &Path, files: &[(String, String)]) -> Result<Vec<String>, OutputError> {
    let mut carried = Vec::new();
    match std::fs::symlink_metadata(out) {
        Ok(meta) if meta.is_dir() => {
            let entries = std::fs::read_dir(out).map_err(|e| OutputError::io(out, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| OutputError::io(out, e))?;
                let fname = entry.file_name().to_string_lossy().into_owned();
                let path = out.join(&fname);
                let ty = entry.file_type().map_err(|e| OutputError::io(&path, e))?;
                if !ty.is_file() {
                    return Err(OutputError::NotASetFile(path));
                }
                let replaced = files.iter().any(|(n, _)| *n == fname)
                    || (fname.starts_with('.') && fname.ends_with(".tmp"));
                if !replaced {
                    carried.push(fname);
                }
            }
            Ok(carried)
        }
        Ok(_) => Err(OutputError::NotADirectory(out.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(carried),
        Err(e) => Err(OutputError::io(out, e)),
    }
}

/// The new set in `tmp`: its files (synced) and the carried files of `out` (hard links).
fn stage_set(
    tmp: &Path,
    out: &Path,
    files: &[(String, String)],
    carried: &[String],
) -> Result<(), OutputError> {
    std::fs::create_dir(tmp).map_err(|e| OutputError::io(tmp, e))?;
    for (fname, contents) in files {
        let p = tmp.join(fname);
        let mut f = std::fs::File::create(&p).map_err(|e| OutputError::io(&p, e))?;
        f.write_all(contents.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| OutputError::io(&p, e))?;
    }
    for fname in carried {
        let (from, to) = (out.join(fname), tmp.join(fname));
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).map_err(|e| OutputError::io(&from, e))?;
        }
    }
    Ok(())
}

/// Swap two directories: `renameat2(RENAME_EXCHANGE)` (atomic), or where the filesystem
/// refuses it, `b` aside, `a` into place, the old `b` back into `a`'s name.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let ca = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let cb = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two valid NUL-terminated paths; renameat2 only reads them.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if !matches!(
        err.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::ENOTSUP)
    ) {
        return Err(err);
    }
    let aside = a.with_extension("old");
    std::fs::rename(b, &aside)?;
    if let Err(e) = std::fs::rename(a, b) {
        let _ = std::fs::rename(&aside, b);
        return Err(e);
    }
    std::fs::rename(&aside, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("pg-atomic-{}", std::process::id()));
        let p = dir.join("a/b.txt");
        write_atomic(&p, b"one").expect("write");
        write_atomic(&p, b"two").expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.join("a"))
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn set(v: &str) -> Vec<(String, String)> {
        ["manifest.yaml", "report.md", "probes.bpf.c", "record.rs"]
            .iter()
            .map(|n| (n.to_string(), format!("{v} {n}")))
            .collect()
    }

    #[test]
    fn set_replaces_the_whole_directory_and_keeps_other_files() {
        let dir = std::env::temp_dir().join(format!("pg-set-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = dir.join("mlx5");
        write_set_atomic(&out, &set("one")).expect("first");
        std::fs::write(out.join("probes.bpf.o"), b"obj").expect("write");
        write_set_atomic(&out, &set("two")).expect("second");
        assert_eq!(
            std::fs::read_to_string(out.join("record.rs"))
                .ok()
                .as_deref(),
            Some("two record.rs")
        );
        assert_eq!(
            std::fs::read(out.join("probes.bpf.o")).ok().as_deref(),
            Some(&b"obj"[..])
        );
        let names: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("mlx5")],
            "no temporary left"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_set_leaves_the_earlier_one_whole() {
        let dir = std::env::temp_dir().join(format!("pg-set-fail-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = dir.join("set");
        write_set_atomic(&out, &set("one")).expect("first");
        // The 4th file cannot be written (a name the filesystem refuses).
        let mut bad = set("two");
        bad[3].0 = "no/such/dir/record.rs".into();
        assert!(write_set_atomic(&out, &bad).is_err());
        for (n, _) in set("one") {
            assert_eq!(
                std::fs::read_to_string(out.join(&n)).expect("kept"),
                format!("one {n}")
            );
        }
        // A directory that is not a set is refused before anything is written.
        std::fs::create_dir_all(out.join("sub")).expect("mkdir");
        assert!(write_set_atomic(&out, &set("three")).is_err());
        assert_eq!(
            std::fs::read_to_string(out.join("manifest.yaml")).expect("kept"),
            "one manifest.yaml"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn failure_keeps_the_old_file() {
        let dir = std::env::temp_dir().join(format!("pg-atomic-fail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        // A directory where the file should go: rename fails, nothing is lost.
        let p = dir.join("x");
        std::fs::create_dir_all(p.join("keep")).expect("mkdir");
        assert!(write_atomic(&p, b"data").is_err());
        assert!(p.join("keep").is_dir());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Atomic file output: write to a temporary file beside the target, then rename, so a failed
//! run never leaves a half-written file in place of a good one.

use std::io::Write;
use std::path::Path;

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

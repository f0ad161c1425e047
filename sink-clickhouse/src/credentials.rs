//! The ClickHouse password: read from a file (`--clickhouse-password-file FILE`) or a systemd
//! credential (`$CREDENTIALS_DIRECTORY/clickhouse-password`, from `LoadCredential=` or
//! `SetCredential=`), never from the command line (any local user reads argv) or the
//! environment (inherited by children, kept in /proc), and never shown in a message: an error
//! names the file and what is wrong with it, not what it holds.

use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The credential's name under `$CREDENTIALS_DIRECTORY` (systemd's `LoadCredential=NAME:...`).
pub const PASSWORD_CREDENTIAL: &str = "clickhouse-password";
/// Set by systemd for a unit with credentials: the directory is not a secret, its files are.
const CREDENTIALS_DIRECTORY_ENV: &str = "CREDENTIALS_DIRECTORY";
/// Longest password file read: a password is short; a larger file is the wrong file.
const MAX_PASSWORD_BYTES: u64 = 4096;

/// The password: from `file` when given, else the systemd credential when the unit has one,
/// else none (empty).
pub fn read_password(file: Option<&Path>) -> Result<String, crate::ClickhouseError> {
    read_password_text(file).map_err(crate::ClickhouseError::Password)
}

fn read_password_text(file: Option<&Path>) -> Result<String, String> {
    if let Some(f) = file {
        return read_secret_file(f, "--clickhouse-password-file");
    }
    let Some(dir) = std::env::var_os(CREDENTIALS_DIRECTORY_ENV).filter(|d| !d.is_empty()) else {
        return Ok(String::new());
    };
    let path = PathBuf::from(dir).join(PASSWORD_CREDENTIAL);
    // a unit may carry other credentials and no password
    if std::fs::symlink_metadata(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(String::new());
    }
    // the packaged unit's `SetCredential=clickhouse-password:` (systemd's fallback when
    // /etc/probegen/clickhouse-password is absent, which would otherwise fail the start): an
    // empty credential is the unit's "no password", not a password
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        return Ok(String::new());
    }
    read_secret_file(&path, "the systemd credential")
}

/// One line from `path`, its trailing newline trimmed. Refused (a message naming `flag` and
/// the file, never its contents): not a regular file, readable or writable by group or
/// others, empty, over 4 KiB, not UTF-8, more than one line.
fn read_secret_file(path: &Path, flag: &str) -> Result<String, String> {
    let bad = |why: &str| format!("{flag} {}: {why}", path.display());
    // O_NONBLOCK: a FIFO planted under the name must not hang the open (it is refused below)
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| bad(&e.to_string()))?;
    // the checks are on the opened file, not the name: nothing can be swapped in between
    let meta = f.metadata().map_err(|e| bad(&e.to_string()))?;
    if !meta.file_type().is_file() {
        return Err(bad("not a regular file"));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(bad(&format!(
            "mode {mode:04o} lets group or others read or change it: chmod 600 it"
        )));
    }
    let mut raw = Vec::new();
    f.by_ref()
        .take(MAX_PASSWORD_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(|e| bad(&e.to_string()))?;
    if raw.len() as u64 > MAX_PASSWORD_BYTES {
        return Err(bad(&format!(
            "longer than {MAX_PASSWORD_BYTES} bytes: expected one line, the password"
        )));
    }
    let text = String::from_utf8(raw).map_err(|_| bad("not UTF-8"))?;
    let line = text.strip_suffix('\n').unwrap_or(&text);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.contains(['\n', '\r']) {
        return Err(bad("more than one line: expected one line, the password"));
    }
    if line.is_empty() {
        return Err(bad(
            "empty (without a password, give no --clickhouse-password-file)",
        ));
    }
    Ok(line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &[u8], mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        p
    }

    #[test]
    fn password_files() {
        let dir = std::env::temp_dir().join(format!("pg-pwfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let ok = write(&dir, "ok", b"s3cret-Mark\n", 0o600);
        assert_eq!(
            read_password(Some(&ok)).ok().as_deref(),
            Some("s3cret-Mark")
        );
        let crlf = write(&dir, "crlf", b"s3cret-Mark\r\n", 0o400);
        assert_eq!(
            read_password(Some(&crlf)).ok().as_deref(),
            Some("s3cret-Mark")
        );
        let bare = write(&dir, "bare", b"s3cret-Mark", 0o600);
        assert_eq!(
            read_password(Some(&bare)).ok().as_deref(),
            Some("s3cret-Mark")
        );
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.display().to_string()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (p, want) in [
            (write(&dir, "group", b"s3cret-Mark\n", 0o640), "mode 0640"),
            (write(&dir, "other", b"s3cret-Mark\n", 0o604), "mode 0604"),
            (
                write(&dir, "two", b"s3cret-Mark\nx\n", 0o600),
                "more than one",
            ),
            (write(&dir, "empty", b"\n", 0o600), "empty"),
            (write(&dir, "bin", b"s3cret-Mark\xff\n", 0o600), "not UTF-8"),
            (
                write(&dir, "big", &[b'a'; 5000], 0o600),
                "longer than 4096 bytes",
            ),
            (fifo, "not a regular file"),
            (dir.clone(), "not a regular file"),
            (dir.join("missing"), "No such file"),
        ] {
            let e = read_password(Some(&p))
                .expect_err(&p.display().to_string())
                .to_string();
            assert!(e.contains(want), "{}: {e}", p.display());
            assert!(e.starts_with("--clickhouse-password-file "), "{e}");
            assert!(e.contains(&p.display().to_string()), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

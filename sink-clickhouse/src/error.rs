//! The ClickHouse sink's one error type: what its face returns (the URL, the password, the
//! schema's options, the spool at start and per snapshot). Each value displays as the one line
//! the operator reads; none shows a secret (the URL's userinfo is redacted before any message
//! is made, a password file is named, never quoted).

/// Why the ClickHouse sink cannot be set up, or did not take a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum ClickhouseError {
    /// `--clickhouse URL` is not one the sink takes (the message shows the URL redacted).
    #[error("{0}")]
    Url(String),
    /// `$PROBEGEN_CLICKHOUSE_PASSWORD` is set: a password is never read from the environment.
    #[error(
        "${env} is set: the password is not read from the environment; put it in \
         --clickhouse-password-file FILE (mode 0600) or the systemd credential `{credential}`, \
         and unset the variable"
    )]
    PasswordInEnvironment {
        env: &'static str,
        credential: &'static str,
    },
    /// The password file or systemd credential is refused (named, never quoted).
    #[error("{0}")]
    Password(String),
    /// `schema --clickhouse` options the DDL cannot be written for.
    #[error("{0}")]
    Schema(String),
    /// The spool directory cannot be opened, locked or written.
    #[error("{0}")]
    Spool(String),
    /// The sender thread cannot be started.
    #[error("clickhouse sender thread: {0}")]
    Thread(std::io::Error),
}

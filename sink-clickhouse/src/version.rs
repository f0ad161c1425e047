//! The ClickHouse server's release (`SELECT version()`, `--server-version`): what the DDL may
//! use and how the sender inserts.

/// A release as `major.minor` (`18.16.1` -> 18.16, `26.9.2.1` -> 26.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServerVersion {
    pub major: u32,
    pub minor: u32,
}

impl ServerVersion {
    /// Debian bookworm's `clickhouse-server`, the oldest release the tables support.
    pub const DEBIAN_BOOKWORM: ServerVersion = ServerVersion::new(18, 16);

    pub const fn new(major: u32, minor: u32) -> Self {
        ServerVersion { major, minor }
    }

    /// `MAJOR.MINOR[.anything]` (what `SELECT version()` answers, first line); `None` when
    /// the text is not a version.
    pub fn parse(text: &str) -> Option<Self> {
        let mut it = text.trim().split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it
            .next()?
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()?;
        Some(ServerVersion { major, minor })
    }

    /// Server-side asynchronous inserts (`async_insert`, 21.11): the server gathers many
    /// small inserts into one part.
    pub fn has_async_insert(self) -> bool {
        self >= ServerVersion::new(21, 11)
    }

    /// Column codecs (`CODEC(Delta, ZSTD)`, 19.1 for the general ones).
    pub fn has_codecs(self) -> bool {
        self >= ServerVersion::new(19, 10)
    }

    /// `LowCardinality(String)` without the experimental setting (19.x; 18.16 needs
    /// `allow_experimental_low_cardinality_type`).
    pub fn has_low_cardinality(self) -> bool {
        self >= ServerVersion::new(19, 10)
    }

    /// `ALTER TABLE ... ADD COLUMN IF NOT EXISTS`: 18.16 refuses it (checked: a syntax
    /// error at `EXISTS`), 26.9 takes it (checked). It came in 19.1 (ClickHouse PR 3900) and
    /// still failed on an existing column with several in one ALTER in 19.3 (issue 4565):
    /// 20.1 is past both (releases between not checked).
    pub fn has_add_column_if_not_exists(self) -> bool {
        self >= ServerVersion::new(20, 1)
    }

    /// Table TTL (19.6).
    pub fn has_ttl(self) -> bool {
        self >= ServerVersion::new(19, 6)
    }
}

impl std::fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// How the sender's INSERTs ask the server to store rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InsertMode {
    /// one part per INSERT (18.16, or a version the sender could not read)
    Plain,
    /// `async_insert=1`, `wait_for_async_insert=1`: the server buffers the rows of many
    /// collectors into one part and answers once they are written, so a 200 still means stored
    Async,
}

impl InsertMode {
    pub(crate) fn for_version(v: ServerVersion) -> Self {
        if v.has_async_insert() {
            InsertMode::Async
        } else {
            InsertMode::Plain
        }
    }

    /// The settings as HTTP query parameters (after `query=...`).
    pub(crate) fn url_settings(self) -> &'static str {
        match self {
            InsertMode::Plain => "",
            InsertMode::Async => "&async_insert=1&wait_for_async_insert=1",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            ServerVersion::parse("18.16.1\n"),
            Some(ServerVersion::new(18, 16))
        );
        assert_eq!(
            ServerVersion::parse("26.9.2.1"),
            Some(ServerVersion::new(26, 9))
        );
        assert_eq!(
            ServerVersion::parse("21.11"),
            Some(ServerVersion::new(21, 11))
        );
        for bad in ["", "<html>", "18", "x.1", "Code: 1"] {
            assert_eq!(ServerVersion::parse(bad), None, "{bad}");
        }
        assert_eq!(
            InsertMode::for_version(ServerVersion::DEBIAN_BOOKWORM),
            InsertMode::Plain
        );
        assert_eq!(
            InsertMode::for_version(ServerVersion::new(26, 9)),
            InsertMode::Async
        );
        assert!(!ServerVersion::new(21, 10).has_async_insert());
        assert!(ServerVersion::new(22, 1).has_async_insert());
    }
}

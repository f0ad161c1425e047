//! The sink's log lines (stderr, the agent's prefix): never a batch's content, never the
//! password.

/// One line about the ClickHouse sink.
pub(crate) fn note(args: std::fmt::Arguments<'_>) {
    eprintln!("probegen collect: clickhouse: {args}");
}

//! What a command reports on the way, for the caller to print.

/// What a command reports besides its result, in the order it happens; the CLI prints each
/// as its line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A written probe set's summary line (stdout).
    Wrote(String),
    /// Something the output lacks or the input lost, the run going on (`probegen: warning: `).
    Warning(String),
    /// A line about the input that is not a warning: a vendor skipped, a malformed row
    /// (`probegen: `).
    Line(String),
    /// A parse warning, `file:line: message` (`graph --warnings`).
    ParseWarning(String),
    /// How the facts cache did (`graph`).
    CacheStats(String),
    /// How long loading took (`PROBEGEN_TIMINGS`).
    Timing(String),
}

//! Replay: the file format of recorded records and counters ([`file`]: read and write) and
//! a replay file as the run's [`crate::source::Source`] ([`source`]).

pub(crate) mod file;
pub(crate) mod source;

pub use file::read;
pub(crate) use file::{Header, Recorder, REPLAY_SCHEMA};
pub(crate) use source::{sleep_unless_stopped, ReplayOptions, ReplaySource};

//! Live collection: load and attach the BPF object ([`loader`]), then read its ring buffer
//! and counters as the run's [`crate::source::Source`] ([`source`]).

pub(crate) mod activity;
mod btf;
pub(crate) mod cost;
pub(crate) mod entries;
pub(crate) mod loader;
pub(crate) mod modules;
pub(crate) mod source;
pub(crate) mod trace;

pub(crate) use loader::{load, LoadOptions, Loaded};
pub(crate) use modules::Control;
pub(crate) use source::{LiveSource, Timing};

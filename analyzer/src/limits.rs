//! Bounds on what any input may cost: nesting depth of recursive descents, and (re-exported
//! from `manifest::input`, which the runtime shares) the size of the text files the commands
//! read and the checks every text input gets before it is parsed. Each limit
//! is far above what a real input uses and far below what exhausts the stack or the memory,
//! and breaking one is an error naming `file:line`, never a crash or a silent cut.

pub use manifest::{
    check_text, check_yaml_nesting, read_bounded, read_text, MAX_CSV_BYTES, MAX_MANIFEST_BYTES,
    MAX_RULES_BYTES, MAX_YAML_FLOW_DEPTH,
};

/// Deepest nesting a recursive descent follows (an `#if` expression, a parenthesised callee,
/// nested file-scope blocks). Real kernel code stays below 10; each level costs at most a few
/// hundred bytes of stack, so 256 levels fit in the 2 MiB stack of a worker thread.
pub const MAX_NESTING: usize = 256;

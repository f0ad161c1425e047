//! Bounds on what any input may cost: the nesting depth of recursive descents. (The size of
//! the text files the commands read and the checks every text input gets before it is parsed
//! are `manifest`'s, which the runtime shares.) Each limit is far above what a real input uses
//! and far below what exhausts the stack or the memory, and breaking one is an error naming
//! `file:line`, never a crash or a silent cut.

/// Deepest nesting a recursive descent follows (an `#if` expression, a parenthesised callee,
/// nested file-scope blocks). Real kernel code stays below 10; each level costs at most a few
/// hundred bytes of stack, so 256 levels fit in the 2 MiB stack of a worker thread.
pub const MAX_NESTING: usize = 256;

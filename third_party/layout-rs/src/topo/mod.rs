//! A module that implements the topological-based layout.

pub mod layout;
pub mod optimizer;
pub mod placer;

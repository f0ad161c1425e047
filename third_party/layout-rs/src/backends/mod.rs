//! Defines and keeps the implementation of the rendering backends.
pub mod svg;

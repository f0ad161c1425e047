//! A module contain the interfaces, utilities and data-structures that are shared by the other
//! modules.

pub mod base;
pub mod color;
pub mod format;
pub mod geometry;
pub mod style;
pub mod utils;

//! The bundle of probe sets a package ships: written from the checked-in sets (`probegen
//! bundle`, with the compile step passed in), read and checked against its index, and one set
//! chosen for the running host's kernel and drivers (`collect --bundle`). The command line
//! writes it, the agent reads and chooses; neither owns the format, this crate does.
//!
//! The face is this file's `pub use` list; every module is private.

mod choose;
mod error;
mod read;
mod write;

pub use choose::{nearest, select, Chosen, Fallback, HostKernel, Match, Selection};
pub use error::BundleError;
pub use read::{
    flavor_of_release, read_bundle, sha256_tag, Bundle, BundleIndex, BundleSet, KernelVersion,
    BUNDLE_INDEX, BUNDLE_SCHEMA, DEFAULT_FLAVOR, SET_MANIFEST, SET_OBJECT,
};
pub use write::{write_bundle, CompileJob, Toolchain};

//! User-space RDMA providers. mlx5, bnxt_re and irdma write completions straight into the
//! job's memory, so an error completion is seen only by the provider library (libmlx5...),
//! never by the kernel. Debian strips those libraries and exports no error function; the one
//! function that runs only for an error completion (`dump_cqe` in libmlx5) is static. This
//! crate finds it anyway, per build-id and without debug symbols: Debian's static archive
//! (`libmlx5.a`, libibverbs-dev) keeps the function's local symbol and bytes, and those bytes,
//! with the archive's relocations as wildcards, occur exactly once in the shared library's
//! code. The result is a [`ProviderTable`] keyed by build-id, checked in and shipped; on a
//! host, [`loaded_providers`] lists the libraries the jobs mapped and [`ProviderTable::plan`]
//! says for each whether it is probed (file offset) or skipped (path and build-id, never
//! probed blind).
//!
//! Flow: `resolve` (generator side, from a fetched rdma-core) -> `ProviderTable` (the boundary,
//! YAML) -> `loaded_providers` + `plan` (host side).

mod elf;
mod host;
mod table;

pub use elf::{build_id, resolve, ErrorPath, ResolveError, Resolved, MLX5_ERROR_PATH};
pub use host::{loaded_providers, LoadedProvider};
pub use table::{ProviderEntry, ProviderPlan, ProviderTable, TableError};

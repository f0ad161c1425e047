//! The failure record and the errno key, as the BPF programs write them: defined once in the
//! `manifest` crate (with the C side rendered from the same field table).

pub use manifest::{PgErrnoKey, PgRecord, RECORD_SIZE};

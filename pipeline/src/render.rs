//! The BPF C of a set built outside the selection (the bundle's union sets), rendered as
//! `generate` renders any set.

use manifest::Manifest;

use crate::Error;

/// `m`'s `probes.bpf.c`, headed with `refresh` (the command that writes it again).
pub fn render_bpf(m: &Manifest, refresh: &str) -> Result<String, Error> {
    codegen::render_bpf(m, refresh).map_err(|e| Error::Input(format!("{}: {e}", m.vendor)))
}

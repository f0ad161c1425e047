//! Runtime collector: loads a probe set's BPF object, attaches it per its manifest, drains the
//! failure records continuously and writes one per-host snapshot per interval.
//!
//! The pure pipeline (decode, batch, counters, snapshot, invariant, sinks, exposition) has no
//! BPF in it and is fed either by the live loader ([`live`], libbpf-rs) or by a replay file
//! ([`replay`]); both are a [`source::Source`] of the one loop in [`run`], which feeds
//! [`pipeline::Pipeline`] and writes to the [`outputs`].
//!
//! Modules depend one way: [`relation`], [`kernel_state`], [`shared`], [`timings`] and
//! [`activity`] are leaves; the input sources ([`live`], [`replay`]) know them but not the
//! pipeline; [`source`] adapts them to the pipeline; [`run`] drives it all.
//!
//! Record layout: [`record`] re-exports the `manifest` crate's `PgRecord`, the one Rust mirror
//! of the C `struct pg_record` (checked against the shared field table there).

pub mod activity;
pub mod chains;
pub mod clickhouse;
pub mod decode;
pub mod errno;
pub mod error;
pub mod kernel_state;
pub mod live;
pub mod metrics;
pub mod options;
pub mod outputs;
pub mod owner;
pub mod pipeline;
pub mod probes;
pub mod procinfo;
pub mod record;
pub mod relation;
pub mod replay;
pub mod run;
pub mod shared;
pub mod sink;
pub mod snapshot_line;
pub mod source;
pub mod stop;
pub mod timefmt;
pub mod timings;

pub use error::CollectError;
pub use kernel_state::{AttachStatus, KernelTotals};
pub use pipeline::{check_invariant, Invariant, Pipeline};
pub use record::{PgErrnoKey, PgRecord, RECORD_SIZE};

#[cfg(test)]
mod tests {
    /// The module graph stays one way: the leaves import no collector module, the input
    /// sources do not import the processing stage, the probe table does not import chains.
    #[test]
    fn module_dependencies_point_one_way() {
        let forbidden: &[(&str, &str, &[&str])] = &[
            ("relation.rs", include_str!("relation.rs"), &["crate::"]),
            (
                "kernel_state.rs",
                include_str!("kernel_state.rs"),
                &["crate::"],
            ),
            ("shared.rs", include_str!("shared.rs"), &["crate::"]),
            ("timings.rs", include_str!("timings.rs"), &["crate::"]),
            ("activity.rs", include_str!("activity.rs"), &["crate::"]),
            (
                "live.rs",
                include_str!("live.rs"),
                &["crate::pipeline", "crate::run"],
            ),
            (
                "replay.rs",
                include_str!("replay.rs"),
                &["crate::pipeline", "crate::run"],
            ),
            (
                "probes.rs",
                include_str!("probes.rs"),
                &["crate::chains", "crate::pipeline"],
            ),
            (
                "source/mod.rs",
                include_str!("source/mod.rs"),
                &["crate::run"],
            ),
            (
                "source/live.rs",
                include_str!("source/live.rs"),
                &["crate::run"],
            ),
            (
                "source/replay.rs",
                include_str!("source/replay.rs"),
                &["crate::run"],
            ),
            ("outputs.rs", include_str!("outputs.rs"), &["crate::run"]),
        ];
        for (file, text, imports) in forbidden {
            // code, not the doc comments that link to other modules
            let code: Vec<&str> = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect();
            for import in *imports {
                assert!(
                    !code.iter().any(|l| l.contains(import)),
                    "{file} uses {import}"
                );
            }
        }
    }
}

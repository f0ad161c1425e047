//! The bundle's set a run was chosen from (`collect --bundle`): how it matched the running
//! kernel and how many of its probes are attached, per layer. The snapshot carries it, the
//! exposition shows it and the agent's status line says it: a host running the nearest
//! series' set (`match: nearest`) states the coverage it really has.

use std::fmt;

use manifest::Layer;
use serde::Serialize;

use crate::kernel_state::AttachStatus;
use crate::probes::{AttachKind, ProbeTable};

/// How the bundle's set matched the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SetMatch {
    /// Generated from this very release.
    Exact,
    /// The newest set of the running kernel's series (another point release).
    Series,
    /// No set of this series: the nearest series' set, each probe checked against this
    /// kernel's BTF and kallsyms, those that match attached.
    Nearest,
}

impl SetMatch {
    /// The value of `match` in the snapshot and the exposition.
    pub fn label(self) -> &'static str {
        match self {
            SetMatch::Exact => "exact",
            SetMatch::Series => "series",
            SetMatch::Nearest => "nearest",
        }
    }
}

/// The set that runs: its bundle directory and how it matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningSet {
    pub dir: String,
    pub matched: SetMatch,
}

/// Probes of one layer: attached now, and in the set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LayerAttached {
    pub attached: usize,
    pub probes: usize,
}

/// Each layer's probes: the verbs core's and the vendor driver's error-path probes (fexit, or
/// the kprobe path) and the data plane's (fentry) probes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AttachedByLayer {
    pub core: LayerAttached,
    pub vendor: LayerAttached,
    pub data_plane: LayerAttached,
}

impl AttachedByLayer {
    /// Counted from the attach statuses of `table`'s probes (a status of no probe of the
    /// table is not counted: it cannot be placed in a layer).
    pub fn of(table: &ProbeTable, statuses: &[AttachStatus]) -> Self {
        let mut by = AttachedByLayer::default();
        for s in statuses {
            let Some(p) = table.get(s.probe) else {
                continue;
            };
            let layer = match (&p.kind, p.layer) {
                (AttachKind::Fentry { .. }, _) => &mut by.data_plane,
                (_, Layer::Core) => &mut by.core,
                (_, Layer::Vendor) => &mut by.vendor,
            };
            layer.probes += 1;
            layer.attached += usize::from(s.attached);
        }
        by
    }

    /// All layers together.
    pub fn total(&self) -> LayerAttached {
        let all = [self.core, self.vendor, self.data_plane];
        LayerAttached {
            attached: all.iter().map(|l| l.attached).sum(),
            probes: all.iter().map(|l| l.probes).sum(),
        }
    }

    /// (label, counts) of each layer, in the order the status line and `/metrics` use.
    pub fn layers(&self) -> [(&'static str, LayerAttached); 3] {
        [
            ("core", self.core),
            ("vendor", self.vendor),
            ("data_plane", self.data_plane),
        ]
    }
}

impl fmt::Display for AttachedByLayer {
    /// `core 40/45, vendor 10/12, data plane 3/4`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [c, v, d] = self.layers().map(|(_, l)| l);
        write!(
            f,
            "core {}/{}, vendor {}/{}, data plane {}/{}",
            c.attached, c.probes, v.attached, v.probes, d.attached, d.probes
        )
    }
}

/// The snapshot's `set`: the running set and its probes attached per layer at the window's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetOut {
    pub dir: String,
    #[serde(rename = "match")]
    pub matched: SetMatch,
    pub attached: AttachedByLayer,
}

impl SetOut {
    pub fn of(set: &RunningSet, table: &ProbeTable, statuses: &[AttachStatus]) -> Self {
        SetOut {
            dir: set.dir.clone(),
            matched: set.matched,
            attached: AttachedByLayer::of(table, statuses),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_layer_from_the_statuses() {
        // from_triples: an `ib_` module is the core's, another the vendor's
        let t = ProbeTable::from_triples(&[(1, "a", "ib_core"), (2, "b", "rdma_rxe")]);
        let st = |probe: u32, attached: bool| AttachStatus {
            probe,
            function: String::new(),
            module: String::new(),
            attached,
            reason: None,
            mechanism: None,
            symbols: Vec::new(),
        };
        let by = AttachedByLayer::of(&t, &[st(1, true), st(2, false), st(9, true)]);
        assert_eq!(by.to_string(), "core 1/1, vendor 0/1, data plane 0/0");
        assert_eq!(
            by.total(),
            LayerAttached {
                attached: 1,
                probes: 2
            }
        );
        let out = SetOut::of(
            &RunningSet {
                dir: "linux-6.12/rxe".into(),
                matched: SetMatch::Nearest,
            },
            &t,
            &[st(1, true), st(2, true)],
        );
        assert_eq!(
            serde_json::to_string(&out).expect("json"),
            r#"{"dir":"linux-6.12/rxe","match":"nearest","attached":{"core":{"attached":1,"probes":1},"vendor":{"attached":1,"probes":1},"data_plane":{"attached":0,"probes":0}}}"#
        );
    }
}

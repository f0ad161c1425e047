//! The stage itself: started with the object and the table, a scan every few windows, the
//! records of each window into the per-QP table, the snapshot's `providers` part.

use std::path::PathBuf;

use collector::{PeerLookup, ProcCache, Stage};
use providers::{ProviderTable, MLX5_ERROR_PATH};
use wire::{ProvidersOut, Snapshot};

use crate::error::StageError;
use crate::probe::Probe;
use crate::qps::{QpTable, QP_CAPACITY};
use crate::scan::Libraries;

/// The largest provider table read (the shipped one is a few KB).
const MAX_TABLE_BYTES: u64 = 4 << 20;

/// What `collect --provider-probes` starts the stage with.
#[derive(Debug, Clone)]
pub struct ProviderStageOptions {
    /// The compiled `providers/bpf/mlx5_cqe.bpf.c`.
    pub object: PathBuf,
    /// The provider table (`generated/providers.yaml`).
    pub table: PathBuf,
    /// `/proc`: the processes whose mapped libraries are scanned, and their jobs.
    pub proc_root: PathBuf,
    pub job_vars: Vec<String>,
    /// Scan for libraries every this many windows (the first window scans): a uprobe holds the
    /// library's file, so every later process mapping it is covered at once.
    pub rescan_windows: u64,
}

pub struct ProviderStage {
    probe: Probe,
    libraries: Libraries,
    qps: QpTable,
    procs: ProcCache,
    rescan_windows: u64,
    windows: u64,
    received: u64,
    undecodable: u64,
    by_status: std::collections::BTreeMap<&'static str, u64>,
    lines: Vec<String>,
    last: Option<ProvidersOut>,
}

impl ProviderStage {
    /// Reads the table, loads the object and makes the first scan (its lines are the first
    /// window's).
    pub fn start(opts: &ProviderStageOptions) -> Result<Self, StageError> {
        let table = read_table(&opts.table)?;
        let mut probe = Probe::load(&opts.object)?;
        let mut libraries = Libraries::new(table, MLX5_ERROR_PATH, opts.proc_root.clone());
        let lines = libraries.scan(&mut probe);
        Ok(ProviderStage {
            probe,
            libraries,
            qps: QpTable::new(QP_CAPACITY),
            procs: ProcCache::new(Some(opts.proc_root.clone()), opts.job_vars.clone(), 4096)
                .with_cgroup_root(PathBuf::from("/sys/fs/cgroup")),
            rescan_windows: opts.rescan_windows.max(1),
            windows: 0,
            received: 0,
            undecodable: 0,
            by_status: Default::default(),
            lines,
            last: None,
        })
    }
}

fn read_table(path: &std::path::Path) -> Result<ProviderTable, StageError> {
    let err = |error: String| StageError::Table {
        path: path.display().to_string(),
        error,
    };
    let len = std::fs::metadata(path)
        .map_err(|e| err(e.to_string()))?
        .len();
    if len > MAX_TABLE_BYTES {
        return Err(err(format!(
            "{len} bytes, more than the {MAX_TABLE_BYTES} a table may have"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    ProviderTable::parse(&text, &path.display().to_string()).map_err(|e| StageError::Table {
        path: path.display().to_string(),
        error: e.to_string(),
    })
}

impl Stage for ProviderStage {
    fn window(&mut self, s: &mut Snapshot, peers: &dyn PeerLookup) -> Vec<String> {
        self.windows += 1;
        if self.windows > 1 && (self.windows - 1).is_multiple_of(self.rescan_windows) {
            let lines = self.libraries.scan(&mut self.probe);
            self.lines.extend(lines);
        }
        // the counters first: a completion seen after them is read now or next window, so
        // seen <= received + dropped mid-run and equal once the jobs are quiet
        let (seen, dropped) = self.probe.counts();
        for r in self.probe.drain() {
            self.received += 1;
            match r {
                Some(r) => {
                    *self
                        .by_status
                        .entry(wire::mlx5_status(r.syndrome))
                        .or_default() += 1;
                    let made = (MLX5_ERROR_PATH.provider, s.snapshot);
                    self.qps.add(&r, made, &mut self.procs, peers);
                }
                None => self.undecodable += 1,
            }
        }
        let out = ProvidersOut {
            libraries: self.libraries.list(),
            qps: self.qps.entries(),
            seen,
            received: self.received,
            dropped,
            by_status: self.by_status.clone(),
            evicted: self.qps.evicted,
            capacity: self.qps.capacity() as u64,
        };
        s.idle &= self.last.as_ref() == Some(&out);
        s.errors.decode += std::mem::take(&mut self.undecodable);
        self.last = Some(out.clone());
        s.providers = Some(out);
        std::mem::take(&mut self.lines)
    }
}

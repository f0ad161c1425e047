//! The port stage of a live run (a [`collector::Stage`] the agent adds): each window, the error counters of every RDMA port
//! (`/sys/class/infiniband/<dev>/ports/<n>/hw_counters/` and `counters/`, world-readable,
//! no privilege and no configuration), turned into the snapshot's `port_counters` deltas by
//! [`wire::PortCounters`] (which counters, and how a reset reads: there).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use collector::{PeerLookup, Stage};
use wire::{is_port_error_counter, PortCounterKey, PortCounters, PortReading, Snapshot};

/// Where the kernel lists the RDMA devices.
pub const SYSFS_INFINIBAND: &str = "/sys/class/infiniband";

/// The counter directories of a port, in the order a name is taken from (a name in both is
/// the vendor's `hw_counters/` one).
const COUNTER_DIRS: [&str; 2] = ["hw_counters", "counters"];

pub struct PortStage {
    root: PathBuf,
    counters: PortCounters,
}

impl PortStage {
    /// The stage with its first reading: the base the first window's deltas are taken from.
    pub fn new(root: PathBuf) -> Self {
        let mut counters = PortCounters::default();
        counters.update(read_ports(&root));
        PortStage { root, counters }
    }
}

impl Stage for PortStage {
    /// Reads the counters now and puts the window's changes into `s` (a change makes the
    /// window not idle), and every counter's value into its totals for the exposition.
    fn window(&mut self, s: &mut Snapshot, _peers: &dyn PeerLookup) -> Vec<String> {
        s.port_counters = self.counters.update(read_ports(&self.root));
        s.idle &= s.port_counters.is_empty();
        s.totals.ports = std::sync::Arc::new(self.counters.totals());
        Vec::new()
    }
}

/// Names of the entries of `dir` (none when it cannot be listed: a device going away).
fn names(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    v.sort_unstable();
    v
}

/// Every error counter file under `root` (devices, their ports, the counter directories).
fn read_ports(root: &Path) -> BTreeMap<PortCounterKey, PortReading> {
    let mut out = BTreeMap::new();
    for dev in names(root) {
        let ports = root.join(&dev).join("ports");
        for port in names(&ports) {
            let Ok(n) = port.parse::<u32>() else {
                continue;
            };
            for dir in COUNTER_DIRS {
                let d = ports.join(&port).join(dir);
                for c in names(&d).into_iter().filter(|c| is_port_error_counter(c)) {
                    let key = (dev.clone(), n, c);
                    if out.contains_key(&key) {
                        continue;
                    }
                    let r = std::fs::read_to_string(d.join(&key.2))
                        .ok()
                        .and_then(|t| t.trim().parse::<u64>().ok())
                        .map_or(PortReading::Unreadable, PortReading::Value);
                    out.insert(key, r);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    #[test]
    fn reads_the_error_counters_of_every_port_and_only_those() {
        let dir = std::env::temp_dir().join(format!("pg-ports-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(&dir, "rxe0/ports/1/hw_counters/retry_exceeded_err", "3\n");
        write(&dir, "rxe0/ports/1/hw_counters/sent_pkts", "900\n");
        write(&dir, "rxe0/ports/1/hw_counters/lifespan", "10\n");
        write(&dir, "mlx5_0/ports/1/hw_counters/link_downed", "1\n");
        write(&dir, "mlx5_0/ports/1/counters/link_downed", "8\n");
        write(&dir, "mlx5_0/ports/1/counters/port_rcv_errors", "N/A\n");
        write(&dir, "mlx5_0/ports/2/counters/symbol_error", "5\n");
        write(&dir, "mlx5_0/ports/notaport/counters/symbol_error", "5\n");
        let got = read_ports(&dir);
        let k = |d: &str, p, c: &str| (d.to_string(), p, c.to_string());
        let want: BTreeMap<PortCounterKey, PortReading> = [
            (k("mlx5_0", 1, "link_downed"), PortReading::Value(1)),
            (k("mlx5_0", 1, "port_rcv_errors"), PortReading::Unreadable),
            (k("mlx5_0", 2, "symbol_error"), PortReading::Value(5)),
            (k("rxe0", 1, "retry_exceeded_err"), PortReading::Value(3)),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, want);
        // through the stage: a rise is the window's delta
        let mut stage = PortStage::new(dir.clone());
        write(&dir, "rxe0/ports/1/hw_counters/retry_exceeded_err", "4\n");
        let out = stage.counters.update(read_ports(&dir));
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].counter.as_str(), out[0].delta),
            ("retry_exceeded_err", 1)
        );
        assert!(
            read_ports(&dir.join("none")).is_empty(),
            "no RDMA device: nothing"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! The per-QP table of the provider stage: a QP that dies floods error completions (one per
//! outstanding work request), so each (QP number, process) keeps its first and a count of all,
//! never a record each; the table is bounded, and an entry it drops to stay so is counted.

use std::collections::BTreeMap;

use collector::{comm_str, PeerLookup, ProcCache};
use wire::{mlx5_side, mlx5_status, ProviderQpError};

use crate::probe::ProviderCqe;

/// Entries kept at most (a host's QPs that died during the run).
pub(crate) const QP_CAPACITY: usize = 4096;

pub(crate) struct QpTable {
    by_qp: BTreeMap<(u32, u32), ProviderQpError>,
    /// the order entries were made in: the oldest is dropped first
    made: std::collections::VecDeque<(u32, u32)>,
    capacity: usize,
    pub(crate) evicted: u64,
}

impl QpTable {
    pub(crate) fn new(capacity: usize) -> Self {
        QpTable {
            by_qp: BTreeMap::new(),
            made: std::collections::VecDeque::new(),
            capacity: capacity.max(1),
            evicted: 0,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Counts `r` in its QP's entry, making the entry (with the process's job and the QP's
    /// peer) for a QP's first error. Whether an entry was made.
    pub(crate) fn add(
        &mut self,
        r: &ProviderCqe,
        (provider, snapshot): (&str, u64),
        procs: &mut ProcCache,
        peers: &dyn PeerLookup,
    ) -> bool {
        let key = (r.qpn, r.tgid);
        if let Some(e) = self.by_qp.get_mut(&key) {
            e.count += 1;
            return false;
        }
        if self.by_qp.len() >= self.capacity {
            if let Some(old) = self.made.pop_front() {
                self.by_qp.remove(&old);
                self.evicted += 1;
            }
        }
        // the job as /proc tells it now; a process gone keeps its cgroup (by its id)
        let info = procs.lookup(r.tgid, &r.comm, r.cgroup_id);
        self.by_qp.insert(
            key,
            ProviderQpError {
                provider: provider.to_string(),
                qpn: r.qpn,
                pid: r.tgid,
                comm: comm_str(&r.comm).into_owned(),
                status: mlx5_status(r.syndrome),
                syndrome: r.syndrome,
                vendor_syndrome: r.vendor_syndrome,
                side: mlx5_side(r.opcode),
                first_ts_ns: r.ts_ns,
                snapshot,
                count: 1,
                cgroup: info.as_ref().map(|i| i.cgroup.clone()).unwrap_or_default(),
                job: info.map(|i| i.job.clone()).unwrap_or_default(),
                peer: peers.peer(r.qpn, r.tgid, r.ts_ns),
            },
        );
        self.made.push_back(key);
        true
    }

    /// The entries, by QP number and process.
    pub(crate) fn entries(&self) -> Vec<ProviderQpError> {
        self.by_qp.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cqe(qpn: u32, tgid: u32, ts_ns: u64) -> ProviderCqe {
        ProviderCqe {
            tgid,
            qpn,
            syndrome: 0x05,
            vendor_syndrome: 0xf9,
            opcode: 0xe,
            ts_ns,
            cgroup_id: 0,
            comm: *b"job\0\0\0\0\0\0\0\0\0\0\0\0\0",
        }
    }

    #[test]
    fn a_flood_is_one_entry_per_qp_and_the_table_stays_bounded() {
        let mut t = QpTable::new(2);
        let mut procs = ProcCache::disabled();
        // a dying QP's flush completions: one entry, counted
        for i in 0..1000 {
            t.add(&cqe(7, 100, i), ("mlx5", 0), &mut procs, &());
        }
        let e = t.entries();
        assert_eq!(e.len(), 1);
        assert_eq!(
            (e[0].count, e[0].first_ts_ns, e[0].status, e[0].side),
            (1000, 0, "IBV_WC_WR_FLUSH_ERR", "responder")
        );
        // thousands of QPs at once: the oldest entries go, counted
        for q in 0..3000 {
            t.add(&cqe(1000 + q, 100, 5), ("mlx5", 1), &mut procs, &());
        }
        assert_eq!(t.entries().len(), 2);
        assert_eq!(t.evicted, 2999);
        let qpns: Vec<u32> = t.entries().iter().map(|e| e.qpn).collect();
        assert_eq!(qpns, [3998, 3999]);
    }
}

//! Layered evidence: the failure records of one thread within one syscall, grouped into a
//! chain ordered by call depth, with the deepest probed function that failed as its origin
//! (`EFAULT origin ib_umem_get (ib_uverbs) <- rxe_mr_init_user <- rxe_reg_user_mr <-
//! ib_uverbs_reg_mr`).
//!
//! A record carries no syscall id, so one syscall is delimited by what the records do carry
//! and by the caller/callee relation among probes ([`CallRelation`], the transitive closure
//! of the manifest's `calls`, taken through every probe, also those without a program such
//! as the inline `ib_security_modify_qp`). The fexit of the innermost failing function fires
//! first and the outermost handler's last, so the rule is:
//!
//! > Records are taken per thread (tid) in `ts_ns` order (arrival order breaks ties). A record
//! > extends the thread's current chain when it has the same pid, its probe is a (transitive)
//! > caller of the previous record's probe, it comes at most `gap_ns` after it, and the chain
//! > is shorter than [`MAX_CHAIN_LEN`]. Otherwise the current chain ends and the record starts
//! > a new one.
//!
//! Every kept record therefore belongs to exactly one chain (a lone failure is a chain of one).
//! A chain whose outermost probe can still be extended (some attachable probe calls it, and
//! its last record is within `gap_ns` of "now") is held back at a snapshot and reported in a
//! later one, so a syscall whose records straddle a window boundary still gives one chain;
//! the final snapshot reports everything. Limits are in `docs/collector.md`.

pub(crate) use wire::{monotonic_ns, ChainClock, Chains, ChainsOut, Link};
use wire::{CallRelation, PgRecord};

/// Default bound between two consecutive records of one chain (100 ms): in-syscall gaps are
/// microseconds on hardware and up to ~2 ms in the TCG guest; the bound leaves room for a
/// caller's cleanup (freeing a large pinned region) after its callee failed.
pub(crate) const DEFAULT_GAP_NS: u64 = 100_000_000;

/// Longest chain (a cycle in the call relation cannot make one grow without bound).
pub(crate) const MAX_CHAIN_LEN: usize = 64;

/// Open chains held across windows, at most (oldest are closed first past it).
const MAX_HELD_LINKS: usize = 1 << 16;

/// Groups records into chains across windows (see the module doc for the rule).
#[derive(Debug, Clone)]
pub(crate) struct ChainBuilder {
    pub gap_ns: u64,
    pub clock: ChainClock,
    /// records of this window
    links: Vec<Link>,
    /// records of chains held open from earlier windows
    held: Vec<Link>,
    arrivals: u64,
    latest_ts: u64,
}

impl Default for ChainBuilder {
    fn default() -> Self {
        Self::new(DEFAULT_GAP_NS, ChainClock::LastRecord)
    }
}

impl ChainBuilder {
    pub(crate) fn new(gap_ns: u64, clock: ChainClock) -> Self {
        ChainBuilder {
            gap_ns,
            clock,
            links: Vec::new(),
            held: Vec::new(),
            arrivals: 0,
            latest_ts: 0,
        }
    }

    /// One kept record, in arrival order.
    #[inline]
    pub(crate) fn push(&mut self, r: &PgRecord) {
        self.latest_ts = self.latest_ts.max(r.ts_ns);
        self.links.push(Link {
            probe: r.probe_id,
            err: r.err as u32,
            pid: r.pid,
            tid: r.tid,
            ts_ns: r.ts_ns,
            comm: r.comm,
            order: self.arrivals,
        });
        self.arrivals += 1;
    }

    /// The chains that are complete (all of them when `is_final`); open chains are held for
    /// the next call.
    pub(crate) fn take(&mut self, rel: &CallRelation, is_final: bool) -> Chains {
        let now = match self.clock {
            ChainClock::Monotonic => monotonic_ns().unwrap_or(self.latest_ts),
            ChainClock::LastRecord => self.latest_ts,
        };
        let mut all = std::mem::take(&mut self.held);
        all.append(&mut self.links);
        // `order` is unique: the unstable sort is deterministic
        all.sort_unstable_by_key(|l| (l.tid, l.ts_ns, l.order));
        let mut done: Vec<(u32, u32)> = Vec::new();
        let mut open: Vec<(u32, u32)> = Vec::new();
        let mut start = 0usize;
        for i in 1..all.len() {
            let (prev, l) = (&all[i - 1], &all[i]);
            let same_thread = prev.tid == l.tid;
            if same_thread && i - start < MAX_CHAIN_LEN && self.extends(rel, prev, l) {
                continue;
            }
            self.close(
                rel,
                &all,
                start,
                i,
                !same_thread,
                now,
                is_final,
                &mut done,
                &mut open,
            );
            start = i;
        }
        if start < all.len() {
            self.close(
                rel,
                &all,
                start,
                all.len(),
                true,
                now,
                is_final,
                &mut done,
                &mut open,
            );
        }
        // bound what is held: the oldest open chains are reported as they are
        let last_ts = |&(s, n): &(u32, u32)| all[(s + n - 1) as usize].ts_ns;
        open.sort_unstable_by_key(last_ts);
        let mut n_open: usize = open.iter().map(|&(_, n)| n as usize).sum();
        let mut keep = 0;
        for &(s, n) in &open {
            if n_open > MAX_HELD_LINKS {
                n_open -= n as usize;
                done.push((s, n));
                keep += 1;
            } else {
                break;
            }
        }
        self.held = open[keep..]
            .iter()
            .flat_map(|&(s, n)| all[s as usize..(s + n) as usize].iter().copied())
            .collect();
        let first = |&(s, _): &(u32, u32)| {
            let l = &all[s as usize];
            (l.ts_ns, l.tid, l.order)
        };
        done.sort_unstable_by_key(first);
        Chains::collapse(all, done)
    }

    #[inline]
    fn extends(&self, rel: &CallRelation, prev: &Link, l: &Link) -> bool {
        l.pid == prev.pid
            && l.ts_ns.saturating_sub(prev.ts_ns) <= self.gap_ns
            && rel.calls(l.probe, prev.probe)
    }

    /// `all[start..end]` is a chain. The last chain of a thread is held when it may still grow;
    /// any other is done.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn close(
        &self,
        rel: &CallRelation,
        all: &[Link],
        start: usize,
        end: usize,
        last_of_thread: bool,
        now: u64,
        is_final: bool,
        done: &mut Vec<(u32, u32)>,
        open: &mut Vec<(u32, u32)>,
    ) {
        let span = (start as u32, (end - start) as u32);
        let last = &all[end - 1];
        let may_grow = last_of_thread
            && !is_final
            && end - start < MAX_CHAIN_LEN
            && rel.has_probed_caller(last.probe)
            && now.saturating_sub(last.ts_ns) <= self.gap_ns;
        if may_grow {
            open.push(span);
        } else {
            done.push(span);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use serde_json::Value;
    use wire::ProbeTable;

    impl ChainBuilder {
        /// Records of chains held open for a later window.
        pub(crate) fn held(&self) -> usize {
            self.held.len()
        }
    }

    // ids as in a small rxe set: 0 handler -> 1 rxe_reg_user_mr -> 2 rxe_mr_init_user ->
    // 3 ib_umem_get; 4 modify handler -> 5 inline (no program) -> 6 rxe_modify_qp;
    // 7 unrelated
    const HANDLER: u32 = 0;
    const REG: u32 = 1;
    const INIT: u32 = 2;
    const UMEM: u32 = 3;
    const MODIFY: u32 = 4;
    const RXE_MODIFY: u32 = 6;
    const OTHER: u32 = 7;

    fn table() -> Arc<ProbeTable> {
        let t = ProbeTable::from_triples(&[
            (HANDLER, "ib_uverbs_reg_mr", "ib_uverbs"),
            (REG, "rxe_reg_user_mr", "rdma_rxe"),
            (INIT, "rxe_mr_init_user", "rdma_rxe"),
            (UMEM, "ib_umem_get", "ib_uverbs"),
            (MODIFY, "ib_uverbs_modify_qp", "ib_uverbs"),
            (RXE_MODIFY, "rxe_modify_qp", "rdma_rxe"),
            (OTHER, "rdma_set_cq_moderation", "ib_core"),
        ]);
        let t = t
            .with_focus(HANDLER, manifest::FocusKind::Handler)
            .with_focus(MODIFY, manifest::FocusKind::Handler)
            .with_pins_user_memory(UMEM);
        Arc::new(t.with_calls(8, &[(0, 1), (1, 2), (2, 3), (4, 5), (5, 6)]))
    }

    fn rec(probe: u32, err: i32, tid: u32, ts_ns: u64) -> PgRecord {
        let mut r = PgRecord {
            seq: 0,
            ts_ns,
            probe_id: probe,
            err,
            pid: tid,
            tid,
            cgroup_id: 1,
            cpu: 0,
            nargs: 0,
            args: [0; 4],
            ..PgRecord::default()
        };
        r.comm[..10].copy_from_slice(b"verbs_fail");
        r
    }

    /// The chains of one window, as their JSON; each checked against its log line.
    fn run(b: &mut ChainBuilder, t: &Arc<ProbeTable>, recs: &[PgRecord], fin: bool) -> Vec<Value> {
        for r in recs {
            b.push(r);
        }
        let out = ChainsOut::new(b.take(&t.relation, fin), t.clone(), wire::owner_of);
        let v = serde_json::to_value(&out).expect("json");
        let cs = v.as_array().cloned().unwrap_or_default();
        assert_eq!(cs.len(), out.len());
        for (c, view) in cs.iter().zip(out.iter()) {
            let line = format!(
                "pid={} tid={} comm={}: {}",
                c["pid"],
                c["tid"],
                c["comm"].as_str().unwrap_or(""),
                c["summary"].as_str().unwrap_or("")
            );
            assert_eq!(view.log_line(), line);
        }
        cs
    }

    fn summaries(c: &[Value]) -> Vec<String> {
        c.iter()
            .map(|c| format!("{} {}", c["tid"], c["summary"].as_str().unwrap_or("")))
            .collect()
    }

    /// An RTR whose source GID index names no GID (the `NCCL_IB_GID_INDEX` mistake) on the
    /// checked-in 6.12 rxe set: the modify path's records, innermost first, as the kernel
    /// sends them; the GID table lookup's ENODATA is the application's, with the site.
    #[test]
    fn an_rtr_whose_gid_index_names_no_gid_is_the_application_s_with_the_site() {
        const ENODATA: i32 = 61;
        let m = include_str!("../../generated/linux-6.12/rxe/manifest.yaml");
        let t = Arc::new(ProbeTable::from_manifest_text(m, "6.12 rxe").expect("the 6.12 rxe set"));
        let id = |f: &str| {
            t.probes
                .iter()
                .find(|p| p.function == f)
                .map(|p| p.id)
                .unwrap_or_else(|| panic!("{f} is a probe of the 6.12 rxe set"))
        };
        let path = [
            "rdma_fill_sgid_attr",
            "_ib_modify_qp",
            "ib_modify_qp_with_udata",
            "modify_qp",
            "ib_uverbs_modify_qp",
        ];
        let recs: Vec<PgRecord> = path
            .iter()
            .enumerate()
            .map(|(i, f)| rec(id(f), ENODATA, 300, 1_000 + 100 * i as u64))
            .collect();
        let mut b = ChainBuilder::default();
        let c = run(&mut b, &t, &recs, false);
        assert_eq!(c.len(), 1, "{:?}", summaries(&c));
        let c = &c[0];
        assert_eq!(c["origin"]["function"], "rdma_fill_sgid_attr", "{c}");
        assert_eq!(c["errno_name"], "ENODATA", "{c}");
        assert_eq!(c["owner"], "application", "{c}");
        let site = c["owner_site"].as_str().unwrap_or("");
        assert!(site.starts_with("cache.c:"), "{c}");
        let reason = c["owner_reason"].as_str().unwrap_or("");
        assert!(
            reason.starts_with("ENODATA at rdma_fill_sgid_attr: the caller named an entry"),
            "{reason}"
        );
        assert!(
            reason.contains(&format!("({site} via rdma_get_gid_attr)")),
            "{reason}"
        );
    }

    #[test]
    fn relation_is_transitive_through_unattached_probes() {
        let t = table();
        let r = &t.relation;
        assert!(r.calls(HANDLER, UMEM) && r.calls(REG, UMEM) && r.calls(HANDLER, REG));
        assert!(!r.calls(UMEM, HANDLER) && !r.calls(UMEM, UMEM));
        // 5 has no program: 4 reaches 6 through it
        assert!(r.calls(MODIFY, RXE_MODIFY));
        assert!(!r.calls(HANDLER, RXE_MODIFY) && !r.calls(OTHER, UMEM));
        assert!(r.has_probed_caller(UMEM) && r.has_probed_caller(RXE_MODIFY));
        assert!(!r.has_probed_caller(HANDLER) && !r.has_probed_caller(OTHER));
        assert!(!r.calls(100, 1) && !r.calls(1, 100) && !r.has_probed_caller(100));
    }

    #[test]
    fn nested_chain_innermost_first_gives_one_chain() {
        let t = table();
        let mut b = ChainBuilder::default();
        let c = run(
            &mut b,
            &t,
            &[
                rec(UMEM, 14, 272, 1_000),
                rec(INIT, 14, 272, 1_500),
                rec(REG, 14, 272, 1_900),
                rec(HANDLER, 14, 272, 2_100),
            ],
            false,
        );
        assert_eq!(c.len(), 1, "{:?}", summaries(&c));
        assert_eq!(
            c[0],
            serde_json::json!({
                "errno": 14,
                "errno_name": "EFAULT",
                "pid": 272,
                "tid": 272,
                "comm": "verbs_fail",
                "functions": ["ib_uverbs_reg_mr", "rxe_reg_user_mr", "rxe_mr_init_user",
                    "ib_umem_get"],
                "modules": ["ib_uverbs", "rdma_rxe", "rdma_rxe", "ib_uverbs"],
                "origin": {"function": "ib_umem_get", "module": "ib_uverbs", "probe": 3,
                    "errno": 14, "errno_name": "EFAULT"},
                "owner": "application",
                "owner_reason": "no site data: generated by an older probegen",
                "owner_site": "",
                "owner_candidates": [{"owner": "application",
                    "reason": "no site data: generated by an older probegen", "site": ""}],
                "start_ns": 1000,
                "end_ns": 2100,
                "count": 1,
                "last_end_ns": 2100,
                "summary": "EFAULT origin ib_umem_get (ib_uverbs) <- rxe_mr_init_user <- rxe_reg_user_mr <- ib_uverbs_reg_mr"
            })
        );
        assert_eq!(b.held(), 0, "a chain ending in a root is complete");
    }

    #[test]
    fn two_interleaved_threads() {
        let t = table();
        let mut b = ChainBuilder::default();
        // thread 10 registers an MR, thread 11 modifies a QP, their returns interleave
        let c = run(
            &mut b,
            &t,
            &[
                rec(UMEM, 14, 10, 100),
                rec(RXE_MODIFY, 22, 11, 110),
                rec(INIT, 14, 10, 120),
                rec(MODIFY, 22, 11, 130),
                rec(REG, 14, 10, 140),
                rec(HANDLER, 14, 10, 150),
            ],
            false,
        );
        assert_eq!(
            summaries(&c),
            [
                "10 EFAULT origin ib_umem_get (ib_uverbs) <- rxe_mr_init_user <- rxe_reg_user_mr <- ib_uverbs_reg_mr",
                "11 EINVAL origin rxe_modify_qp (rdma_rxe) <- ib_uverbs_modify_qp",
            ]
        );
    }

    #[test]
    fn two_syscalls_back_to_back_are_two_chains_counted_once() {
        let t = table();
        let mut b = ChainBuilder::default();
        // the second reg_mr's ib_umem_get does not call the first's handler: a new chain
        let c = run(
            &mut b,
            &t,
            &[
                rec(UMEM, 14, 5, 100),
                rec(REG, 14, 5, 110),
                rec(HANDLER, 14, 5, 120),
                rec(UMEM, 14, 5, 130),
                rec(REG, 14, 5, 140),
                rec(HANDLER, 14, 5, 150),
                // a third one, failing only in the handler (ENOMEM), then the modify path
                rec(HANDLER, 12, 5, 160),
                rec(RXE_MODIFY, 22, 5, 170),
                rec(MODIFY, 22, 5, 180),
            ],
            false,
        );
        // The two identical reg_mr failures are two chains, listed once with count 2.
        let s = "EFAULT origin ib_umem_get (ib_uverbs) <- rxe_reg_user_mr <- ib_uverbs_reg_mr";
        assert_eq!(
            summaries(&c),
            [
                format!("5 {s}"),
                "5 ENOMEM origin ib_uverbs_reg_mr (ib_uverbs)".into(),
                "5 EINVAL origin rxe_modify_qp (rdma_rxe) <- ib_uverbs_modify_qp".into(),
            ]
        );
        assert_eq!(c[0]["end_ns"], 120, "first occurrence");
        assert_eq!(
            (c[0]["count"].as_u64(), c[0]["last_end_ns"].as_u64()),
            (Some(2), Some(150))
        );
        assert_eq!(c[1]["count"], 1);
        // who gets the ticket: the caller's bad address, exhaustion, the driver's check
        let owners: Vec<_> = c.iter().map(|c| c["owner"].as_str()).collect();
        assert_eq!(
            owners,
            [
                Some("application"),
                Some("resources"),
                Some("vendor-driver")
            ]
        );
    }

    #[test]
    fn unrelated_probe_is_its_own_chain() {
        let t = table();
        let mut b = ChainBuilder::default();
        let c = run(
            &mut b,
            &t,
            &[
                rec(UMEM, 14, 5, 100),
                rec(OTHER, 22, 5, 105),
                rec(REG, 14, 5, 110),
                rec(HANDLER, 14, 5, 120),
            ],
            true,
        );
        // the unrelated failure cuts the chain: ib_umem_get alone, the rest on its own
        assert_eq!(
            summaries(&c),
            [
                "5 EFAULT origin ib_umem_get (ib_uverbs)",
                "5 EINVAL origin rdma_set_cq_moderation (ib_core)",
                "5 EFAULT origin rxe_reg_user_mr (rdma_rxe) <- ib_uverbs_reg_mr",
            ]
        );
        // an id outside the table and relation still gives a chain of one
        let c = run(&mut b, &t, &[rec(99, 5, 5, 200)], true);
        assert_eq!(summaries(&c), ["5 EIO origin ? (?)"]);
    }

    #[test]
    fn gap_bound_and_translated_errno() {
        let t = table();
        let mut b = ChainBuilder::new(1_000, ChainClock::LastRecord);
        let c = run(
            &mut b,
            &t,
            &[
                rec(UMEM, 14, 5, 10_000),
                rec(REG, 12, 5, 10_500),
                // 5 us later than allowed: a separate syscall
                rec(HANDLER, 22, 5, 12_000),
            ],
            true,
        );
        assert_eq!(
            summaries(&c),
            [
                "5 ENOMEM origin ib_umem_get (ib_uverbs) [EFAULT] <- rxe_reg_user_mr",
                "5 EINVAL origin ib_uverbs_reg_mr (ib_uverbs)",
            ]
        );
        assert_eq!(c[0]["errno_name"], "ENOMEM");
        assert_eq!(c[0]["origin"]["errno_name"], "EFAULT");
        // the owner follows the origin's errno (EFAULT while pinning), not the syscall's
        assert_eq!(c[0]["owner"], "application");
        assert_eq!(c[1]["owner"], "application");
    }

    #[test]
    fn open_chain_is_held_into_the_next_window() {
        let t = table();
        let mut b = ChainBuilder::default();
        // window 1 ends after rxe_reg_user_mr: the handler may still fail
        let c = run(
            &mut b,
            &t,
            &[rec(UMEM, 14, 5, 1_000), rec(REG, 14, 5, 2_000)],
            false,
        );
        assert!(c.is_empty(), "{:?}", summaries(&c));
        assert_eq!(b.held(), 2);
        // window 2: the handler's record arrives; also a late record of another thread
        let c = run(
            &mut b,
            &t,
            &[rec(HANDLER, 14, 5, 3_000), rec(UMEM, 14, 6, 3_500)],
            false,
        );
        assert_eq!(
            summaries(&c),
            ["5 EFAULT origin ib_umem_get (ib_uverbs) <- rxe_reg_user_mr <- ib_uverbs_reg_mr"]
        );
        assert_eq!(b.held(), 1);
        // window 3: no record, the clock (newest record) is still within the gap: held;
        // a record far later moves the clock past the gap: reported as it is
        assert!(run(&mut b, &t, &[], false).is_empty());
        let c = run(
            &mut b,
            &t,
            &[rec(OTHER, 22, 7, 3_500 + DEFAULT_GAP_NS + 1)],
            false,
        );
        assert_eq!(
            summaries(&c),
            [
                "6 EFAULT origin ib_umem_get (ib_uverbs)",
                "7 EINVAL origin rdma_set_cq_moderation (ib_core)",
            ]
        );
        assert_eq!(b.held(), 0);
        // the final window reports open chains too
        let c = run(&mut b, &t, &[rec(UMEM, 14, 8, u64::MAX / 2)], true);
        assert_eq!(c.len(), 1);
        assert_eq!(b.held(), 0);
    }

    #[test]
    fn records_out_of_order_are_sorted_per_thread() {
        let t = table();
        let mut b = ChainBuilder::default();
        let c = run(
            &mut b,
            &t,
            &[
                rec(REG, 14, 5, 110),
                rec(HANDLER, 14, 5, 120),
                rec(UMEM, 14, 5, 100),
            ],
            true,
        );
        assert_eq!(
            summaries(&c),
            ["5 EFAULT origin ib_umem_get (ib_uverbs) <- rxe_reg_user_mr <- ib_uverbs_reg_mr"]
        );
    }

    #[test]
    fn cycles_are_bounded() {
        // 0 <-> 1 call each other: a chain of alternating records stops at MAX_CHAIN_LEN
        let t = Arc::new(
            ProbeTable::from_triples(&[(0, "a", "m"), (1, "b", "m")])
                .with_calls(2, &[(0, 1), (1, 0)]),
        );
        let mut b = ChainBuilder::default();
        let recs: Vec<PgRecord> = (0..100)
            .map(|i| rec(i % 2, 22, 5, 1_000 + i as u64))
            .collect();
        let c = run(&mut b, &t, &recs, true);
        assert_eq!(c.len(), 2);
        let len = |c: &Value| c["functions"].as_array().map_or(0, |a| a.len());
        assert_eq!(len(&c[0]), MAX_CHAIN_LEN);
        assert_eq!(len(&c[1]), 100 - MAX_CHAIN_LEN);
    }

    #[test]
    fn manifest_relation_of_the_rxe_sets() {
        for (set, text) in [
            (
                "6.12",
                include_str!("../../generated/linux-6.12/rxe/manifest.yaml"),
            ),
            (
                "6.1",
                include_str!("../../generated/linux-6.1/rxe/manifest.yaml"),
            ),
        ] {
            let t = ProbeTable::from_manifest_text(text, set).expect("manifest");
            let id = |f: &str, m: &str| {
                t.probes
                    .iter()
                    .find(|p| p.function == f && p.module == m)
                    .map(|p| p.id)
                    .unwrap_or_else(|| panic!("{set}: {m}:{f}"))
            };
            let r = &t.relation;
            let chain = |fs: &[(&str, &str)]| {
                for w in fs.windows(2) {
                    assert!(
                        r.calls(id(w[0].0, w[0].1), id(w[1].0, w[1].1)),
                        "{set}: {:?} -> {:?}",
                        w[0],
                        w[1]
                    );
                }
            };
            chain(&[
                ("ib_uverbs_reg_mr", "ib_uverbs"),
                ("rxe_reg_user_mr", "rdma_rxe"),
                ("rxe_mr_init_user", "rdma_rxe"),
                ("ib_umem_get", "ib_uverbs"),
            ]);
            chain(&[
                ("ib_uverbs_handler_UVERBS_METHOD_QP_CREATE", "ib_uverbs"),
                ("ib_create_qp_user", "ib_core"),
                ("create_qp", "ib_core"),
                ("rxe_create_qp", "rdma_rxe"),
                ("rxe_qp_chk_init", "rdma_rxe"),
            ]);
            // through the inline ib_security_modify_qp (no program)
            chain(&[
                ("ib_uverbs_modify_qp", "ib_uverbs"),
                ("modify_qp", "ib_uverbs"),
                ("ib_modify_qp_with_udata", "ib_core"),
                ("_ib_modify_qp", "ib_core"),
                ("rxe_modify_qp", "rdma_rxe"),
                ("rxe_qp_chk_attr", "rdma_rxe"),
            ]);
            assert!(r.calls(
                id("rxe_modify_qp", "rdma_rxe"),
                id("rxe_qp_from_attr", "rdma_rxe")
            ));
            assert!(!r.calls(
                id("ib_uverbs_reg_mr", "ib_uverbs"),
                id("rxe_modify_qp", "rdma_rxe")
            ));
            assert!(!r.has_probed_caller(id("ib_uverbs_reg_mr", "ib_uverbs")));
        }
    }
}

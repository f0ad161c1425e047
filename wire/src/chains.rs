//! A snapshot's failure chains as they go on the wire: the links (the part of a record a
//! chain needs), the chains of a window as spans of one vector, and their serialisation with
//! the probe table. How records are grouped into chains is `crate::chains` (processing); the
//! owner of each chain is decided there too and handed in, so this module decides nothing.

use std::sync::Arc;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::baseline::ChainNote;
use crate::decode::comm_str;
use crate::errno::errno_label;
use crate::owner::Owner;
use crate::probes::{ProbeInfo, ProbeTable};
use crate::sites::OwnerDecision;

/// The part of a record a chain needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub probe: u32,
    /// positive errno (0: a failure without errno, a NULL pointer)
    pub err: u32,
    pub pid: u32,
    pub tid: u32,
    pub ts_ns: u64,
    pub comm: [u8; 16],
    /// arrival order (ties of `ts_ns`)
    pub order: u64,
}

/// "Now" on the records' clock (`bpf_ktime_get_ns`, CLOCK_MONOTONIC), to decide whether an
/// open chain may still grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainClock {
    /// CLOCK_MONOTONIC of this host (live: the records come from this kernel)
    Monotonic,
    /// the newest record's `ts_ns` (replay, tests: deterministic)
    LastRecord,
}

/// CLOCK_MONOTONIC in ns (the clock of `bpf_ktime_get_ns`).
pub fn monotonic_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (rc == 0).then(|| (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64)
}

/// Chains as spans of one vector of links sorted per thread and time; each span is one chain,
/// innermost record first.
#[derive(Debug, Clone, Default)]
pub struct Chains {
    links: Vec<Link>,
    /// (start, len) in `links` of the first occurrence of each distinct chain
    spans: Vec<(u32, u32)>,
    /// per span: how many times the same chain (same thread, same probes and errnos) occurred
    /// in the window, and the outermost time of the last occurrence
    repeats: Vec<(u32, u64)>,
}

impl Chains {
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The chains, each innermost first, in the order of their innermost record's time.
    pub fn iter(&self) -> impl Iterator<Item = &[Link]> + '_ {
        self.spans
            .iter()
            .map(|&(s, n)| &self.links[s as usize..(s + n) as usize])
    }

    /// With [`Chains::iter`]: occurrences of each chain and the end of its last occurrence.
    pub fn repeats(&self) -> &[(u32, u64)] {
        &self.repeats
    }

    /// A thread that fails the same way in a loop (a retry storm) yields one chain with a
    /// count, not thousands of copies: group identical chains (same pid, tid, probes and
    /// errnos), keeping the first occurrence, in first-occurrence order.
    pub fn collapse(links: Vec<Link>, spans: Vec<(u32, u32)>) -> Self {
        use std::collections::HashMap;
        use std::hash::{Hash, Hasher};
        let key_of = |&(s, n): &(u32, u32)| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            for l in &links[s as usize..(s + n) as usize] {
                (l.pid, l.tid, l.probe, l.err).hash(&mut h);
            }
            h.finish()
        };
        let same = |a: (u32, u32), b: (u32, u32)| {
            a.1 == b.1
                && links[a.0 as usize..(a.0 + a.1) as usize]
                    .iter()
                    .zip(&links[b.0 as usize..(b.0 + b.1) as usize])
                    .all(|(x, y)| (x.pid, x.tid, x.probe, x.err) == (y.pid, y.tid, y.probe, y.err))
        };
        let mut firsts: HashMap<u64, Vec<usize>> = HashMap::with_capacity(spans.len());
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(spans.len());
        let mut repeats: Vec<(u32, u64)> = Vec::with_capacity(spans.len());
        for span in spans {
            let end = links[(span.0 + span.1 - 1) as usize].ts_ns;
            let bucket = firsts.entry(key_of(&span)).or_default();
            match bucket.iter().copied().find(|&i| same(out[i], span)) {
                Some(i) => {
                    repeats[i].0 += 1;
                    repeats[i].1 = repeats[i].1.max(end);
                }
                None => {
                    bucket.push(out.len());
                    out.push(span);
                    repeats.push((1, end));
                }
            }
        }
        Chains {
            links,
            spans: out,
            repeats,
        }
    }
}

/// The chains of a snapshot, serialised with the probe table (no copies of names).
#[derive(Debug)]
pub struct ChainsOut {
    chains: Chains,
    table: Arc<ProbeTable>,
    /// per chain: who gets the ticket and why, decided by the processing stage
    owners: Vec<OwnerDecision>,
    /// per chain, with the baseline on: where it left the success path, whether expected
    notes: Vec<ChainNote>,
}

impl ChainsOut {
    /// `chains` with the owner of each, `decide`d from its origin probe and errno (a chain
    /// without links, which `Chains` never holds, is the verbs core's).
    pub fn new(
        chains: Chains,
        table: Arc<ProbeTable>,
        decide: impl Fn(Option<&ProbeInfo>, u32) -> OwnerDecision,
    ) -> Self {
        let owners = chains
            .iter()
            .map(|links| match links.first() {
                Some(l) => decide(table.get(l.probe), l.err),
                None => decide(None, 0),
            })
            .collect();
        ChainsOut {
            chains,
            table,
            owners,
            notes: Vec::new(),
        }
    }

    /// The baseline's note of each chain, in [`ChainsOut::iter`]'s order (the processing
    /// stage's; public so a sink's tests can give chains notes without a live trace).
    pub fn set_notes(&mut self, notes: Vec<ChainNote>) {
        self.notes = notes;
    }

    pub fn len(&self) -> usize {
        self.chains.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chains.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = ChainView<'_>> + '_ {
        self.chains
            .iter()
            .zip(self.chains.repeats())
            .zip(&self.owners)
            .enumerate()
            .map(
                |(i, ((links, &(count, last_end_ns)), decision))| ChainView {
                    links,
                    table: &self.table,
                    count,
                    last_end_ns,
                    owner: decision.owner(),
                    decision,
                    note: self.notes.get(i),
                },
            )
    }
}

impl Serialize for ChainsOut {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// One chain (`links` innermost first, never empty) with the names of its probes. Serialised
/// as `{errno, errno_name, pid, tid, comm, functions [outermost ... innermost], modules,
/// origin {function, module, probe, errno, errno_name}, owner, owner_reason, owner_site,
/// owner_candidates [{owner, reason, site}], start_ns, end_ns, summary}`;
/// `errno` is what the outermost probed function returned (the syscall's error), the origin
/// is the innermost record (the deepest probed function that failed).
#[derive(Debug, Clone, Copy)]
pub struct ChainView<'a> {
    pub links: &'a [Link],
    pub table: &'a ProbeTable,
    /// occurrences of this chain in the window (identical chains of one thread are grouped)
    pub count: u32,
    /// outermost time of the last occurrence
    pub last_end_ns: u64,
    /// who gets the ticket (decided from the origin probe's error sites and its errno)
    pub owner: Owner,
    /// the owner's reason, its deciding site and the ranked candidates
    pub decision: &'a OwnerDecision,
    /// with the baseline on: where the call left the success path, whether it is expected
    pub note: Option<&'a ChainNote>,
}

const UNKNOWN: &str = "?";

impl<'a> ChainView<'a> {
    /// Function and module of a link's probe (`?` when the table lacks it).
    pub fn names_of(&self, l: &Link) -> (&'a str, &'a str) {
        self.table.get(l.probe).map_or((UNKNOWN, UNKNOWN), |p| {
            (p.function.as_str(), p.module.as_str())
        })
    }

    /// The origin (innermost) link.
    pub fn origin(&self) -> Option<&'a Link> {
        self.links.first()
    }

    /// The outermost link (its errno is the syscall's).
    pub fn outermost(&self) -> Option<&'a Link> {
        self.links.last()
    }

    /// `EFAULT origin ib_umem_get (ib_uverbs) <- rxe_mr_init_user <- ... <- ib_uverbs_reg_mr`;
    /// a layer that returned another errno than the outermost is marked `[ENOMEM]`.
    pub fn summary(&self) -> String {
        let mut s = String::with_capacity(32 + 24 * self.links.len());
        self.write_summary(&mut s);
        s
    }

    fn write_summary(&self, s: &mut String) {
        let (Some(inner), Some(outer)) = (self.origin(), self.outermost()) else {
            return;
        };
        let mark = |s: &mut String, l: &Link| {
            if l.err != outer.err {
                s.push_str(" [");
                s.push_str(&errno_label(l.err));
                s.push(']');
            }
        };
        let (func, module) = self.names_of(inner);
        s.push_str(&errno_label(outer.err));
        s.push_str(" origin ");
        s.push_str(func);
        s.push_str(" (");
        s.push_str(module);
        s.push(')');
        mark(s, inner);
        for l in &self.links[1..] {
            s.push_str(" <- ");
            s.push_str(self.names_of(l).0);
            mark(s, l);
        }
    }

    /// The stderr line: `pid=.. tid=.. comm=..: <summary>`.
    pub fn log_line(&self) -> String {
        match self.outermost() {
            Some(o) => format!(
                "pid={} tid={} comm={}: {}",
                o.pid,
                o.tid,
                comm_str(&o.comm),
                self.summary()
            ),
            None => String::new(),
        }
    }
}

/// Function or module names of a chain, outermost first.
struct Names<'a>(ChainView<'a>, bool);

impl Serialize for Names<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = &self.0;
        s.collect_seq(v.links.iter().rev().map(|l| {
            let (f, m) = v.names_of(l);
            if self.1 {
                m
            } else {
                f
            }
        }))
    }
}

struct OriginOut<'a>(ChainView<'a>, &'a Link);

impl Serialize for OriginOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (f, m) = self.0.names_of(self.1);
        let mut st = s.serialize_struct("Origin", 5)?;
        st.serialize_field("function", f)?;
        st.serialize_field("module", m)?;
        st.serialize_field("probe", &self.1.probe)?;
        st.serialize_field("errno", &self.1.err)?;
        st.serialize_field("errno_name", &errno_label(self.1.err))?;
        st.end()
    }
}

impl Serialize for ChainView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (Some(inner), Some(outer)) = (self.origin(), self.outermost()) else {
            return s.serialize_none();
        };
        let mut st = s.serialize_struct("Chain", 17)?;
        st.serialize_field("errno", &outer.err)?;
        st.serialize_field("errno_name", &errno_label(outer.err))?;
        st.serialize_field("pid", &outer.pid)?;
        st.serialize_field("tid", &outer.tid)?;
        st.serialize_field("comm", &comm_str(&outer.comm))?;
        st.serialize_field("functions", &Names(*self, false))?;
        st.serialize_field("modules", &Names(*self, true))?;
        st.serialize_field("origin", &OriginOut(*self, inner))?;
        st.serialize_field("owner", &self.owner)?;
        st.serialize_field("owner_reason", self.decision.reason())?;
        st.serialize_field("owner_site", self.decision.site())?;
        st.serialize_field("owner_candidates", &self.decision.candidates)?;
        st.serialize_field("start_ns", &inner.ts_ns)?;
        st.serialize_field("end_ns", &outer.ts_ns)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("last_end_ns", &self.last_end_ns)?;
        st.serialize_field("summary", &self.summary())?;
        if let Some(n) = self.note {
            match &n.bifurcation {
                Ok(b) => st.serialize_field("bifurcation", b)?,
                Err(why) => st.serialize_field("bifurcation", why)?,
            }
            st.serialize_field("expected", &n.expected)?;
            st.serialize_field("expected_why", &n.expected_why)?;
        }
        st.end()
    }
}

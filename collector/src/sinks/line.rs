//! A snapshot's JSON line with the parts that rarely change serialised once: the probe list
//! in `counters` (the same in every idle window: all zero) and `attached` (changed only when a
//! module comes or goes),
//! the `host`, `kernel` and `manifest_hash` that open every line, and in an idle window all
//! that follows `window`. An idle window at `--interval 1s` spent most of its time escaping
//! the same function and module names again; [`LineCache::parts`] gives the same bytes as
//! [`Snapshot::to_line`] (a test holds them equal) in two parts, the line up to `window` and
//! the rest, which in an idle window is the last line's rest as it was: the sink writes both
//! with one `writev`, and nothing copies the ~10 KB of all-zero counters again.

use std::io::Write;

use serde::Serialize;

use wire::{
    AttachStatus, BaselineOut, CounterOut, Drops, Errors, Invariant, PortCounterOut, ProvidersOut,
    QpErrors, SharedPart, SinkStatus, Snapshot,
};

/// One part's last value and its JSON.
struct Cached<T> {
    value: T,
    json: Vec<u8>,
}

/// What a line's rest (everything after `window`) was written from, when its window had no
/// records and no chains: the next line with the same values has the same rest.
struct RestKey {
    port_counters: Vec<PortCounterOut>,
    counters: SharedPart<Vec<CounterOut>>,
    attached: SharedPart<Vec<AttachStatus>>,
    drops: Drops,
    seq_gaps: u64,
    errors: Errors,
    invariant: Invariant,
    qp_errors: Option<QpErrors>,
    providers: Option<ProvidersOut>,
    sinks: Vec<SinkStatus>,
    baseline: Option<BaselineOut>,
}

impl RestKey {
    /// `s`'s key, or `None` when it has records or chains (those are not kept).
    fn of(s: &Snapshot) -> Option<Self> {
        (s.records.is_empty() && s.chains.is_empty()).then(|| RestKey {
            port_counters: s.port_counters.clone(),
            counters: s.counters.clone(),
            attached: s.attached.clone(),
            drops: s.drops.clone(),
            seq_gaps: s.seq_gaps,
            errors: s.errors.clone(),
            invariant: s.invariant.clone(),
            qp_errors: s.qp_errors.clone(),
            providers: s.providers.clone(),
            sinks: s.sinks.clone(),
            baseline: s.baseline.clone(),
        })
    }

    /// Whether `s`'s rest is the one written from this key (the lists: the same allocations).
    fn matches(&self, s: &Snapshot) -> bool {
        s.records.is_empty()
            && s.chains.is_empty()
            && SharedPart::same(&self.counters, &s.counters)
            && self.port_counters == s.port_counters
            && SharedPart::same(&self.attached, &s.attached)
            && self.drops == s.drops
            && self.seq_gaps == s.seq_gaps
            && self.errors == s.errors
            && self.invariant == s.invariant
            && self.qp_errors == s.qp_errors
            && self.providers == s.providers
            && self.sinks == s.sinks
            && self.baseline == s.baseline
    }
}

/// The serialised `counters` and `attached` of the last line, its opening fields and its
/// rest, and the buffers of the parts.
#[derive(Default)]
pub(crate) struct LineCache {
    counters: Option<Cached<SharedPart<Vec<CounterOut>>>>,
    attached: Option<Cached<SharedPart<Vec<AttachStatus>>>>,
    /// `{"host":..,"kernel":..,"manifest_hash":..` for these three values
    opening: Option<Cached<[String; 3]>>,
    /// the last line's rest (after `window`, with the closing `}` and newline) and, when its
    /// window had no records and no chains, what it was written from
    rest: Vec<u8>,
    rest_key: Option<RestKey>,
    /// the line up to and including `window`
    head: Vec<u8>,
}

/// `value`'s JSON from `slot` when `value` is what it holds, else serialised (and kept).
fn cached<'a, T: Serialize + PartialEq + Clone>(
    slot: &'a mut Option<Cached<T>>,
    value: &T,
) -> serde_json::Result<&'a [u8]> {
    if slot.as_ref().is_none_or(|c| c.value != *value) {
        *slot = Some(Cached {
            json: serde_json::to_vec(value)?,
            value: value.clone(),
        });
    }
    Ok(slot.as_ref().map_or(&[][..], |c| c.json.as_slice()))
}

/// Writes `"name":value`.
fn member(v: &mut Vec<u8>, name: &str, value: &dyn erased::Json) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *v, name)?;
    v.push(b':');
    value.write(v)
}

/// Writes `,"name":value` (a field after the first).
fn field(v: &mut Vec<u8>, name: &str, value: &dyn erased::Json) -> serde_json::Result<()> {
    v.push(b',');
    member(v, name, value)
}

impl LineCache {
    /// `snap` as one JSON line (with the trailing newline) in two parts, which joined are
    /// byte for byte [`Snapshot::to_line`]; valid until the next line.
    pub(crate) fn parts(&mut self, snap: &Snapshot) -> [&[u8]; 2] {
        let mut head = std::mem::take(&mut self.head);
        head.clear();
        let written = self.write_head(snap, &mut head).and_then(|()| {
            if !self.rest_key.as_ref().is_some_and(|k| k.matches(snap)) {
                let mut rest = std::mem::take(&mut self.rest);
                rest.clear();
                let r = self.write_rest(snap, &mut rest);
                self.rest = rest;
                self.rest_key = if r.is_ok() { RestKey::of(snap) } else { None };
                r?;
            }
            Ok(())
        });
        if written.is_err() {
            head = snap.to_line();
            self.rest.clear();
            self.rest_key = None;
        }
        self.head = head;
        [&self.head, &self.rest]
    }

    /// The fields up to `window`, in [`Snapshot`]'s order (serde writes them so).
    fn write_head(&mut self, s: &Snapshot, v: &mut Vec<u8>) -> serde_json::Result<()> {
        let opening = [&s.host, &s.kernel, &s.manifest_hash];
        if self
            .opening
            .as_ref()
            .is_none_or(|c| c.value.iter().zip(opening).any(|(a, b)| a != b))
        {
            let mut json = vec![b'{'];
            member(&mut json, "host", &s.host)?;
            field(&mut json, "kernel", &s.kernel)?;
            field(&mut json, "manifest_hash", &s.manifest_hash)?;
            self.opening = Some(Cached {
                value: opening.map(String::clone),
                json,
            });
        }
        v.extend_from_slice(self.opening.as_ref().map_or(&[][..], |c| &c.json));
        field(v, "snapshot", &s.snapshot)?;
        field(v, "final", &s.is_final)?;
        field(v, "window", &s.window)?;
        if let Some(a) = &s.agent {
            field(v, "agent", a)?;
        }
        match &s.set {
            Some(set) => field(v, "set", set),
            None => Ok(()),
        }
    }

    /// The fields after `window`, the closing `}` and the newline.
    fn write_rest(&mut self, s: &Snapshot, v: &mut Vec<u8>) -> serde_json::Result<()> {
        v.reserve(8192 + s.counters.len() * 160 + s.records.len() * 300 + s.chains.len() * 400);
        field(v, "records", &s.records)?;
        field(v, "chains", &s.chains)?;
        let counters = cached(&mut self.counters, &s.counters)?;
        field(v, "counters", &erased::Raw(counters))?;
        if !s.port_counters.is_empty() {
            field(v, "port_counters", &s.port_counters)?;
        }
        field(v, "drops", &s.drops)?;
        field(v, "seq_gaps", &s.seq_gaps)?;
        let attached = cached(&mut self.attached, &s.attached)?;
        field(v, "attached", &erased::Raw(attached))?;
        field(v, "errors", &s.errors)?;
        field(v, "invariant", &s.invariant)?;
        if let Some(q) = &s.qp_errors {
            field(v, "qp_errors", q)?;
        }
        if let Some(p) = &s.providers {
            field(v, "providers", p)?;
        }
        if let Some(b) = &s.baseline {
            field(v, "baseline", b)?;
        }
        for st in &s.sinks {
            field(v, &st.sink, st)?;
        }
        v.extend_from_slice(b"}\n");
        Ok(())
    }
}

/// A value that writes itself as JSON: any `Serialize`, or JSON already written.
mod erased {
    use super::{Serialize, Write};

    pub(super) trait Json {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    }

    impl<T: Serialize> Json for T {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }

    /// Serialised JSON, written as it is.
    pub(super) struct Raw<'a>(pub &'a [u8]);

    impl Json for Raw<'_> {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
            out.write_all(self.0).map_err(serde_json::Error::io)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use super::*;
    use crate::pipeline::tests::{pipe, rec, totals};

    #[test]
    fn cached_lines_are_the_snapshot_lines() {
        let mut p = pipe(100);
        let mut cache = LineCache::default();
        p.ingest(&rec(3, 14, 0, 0, 288));
        p.ingest(&rec(1, 22, 1, 0, 288));
        let k1 = Arc::new(totals(&[(1, 1), (3, 1)], &[((1, 22), 1), ((3, 14), 1)], 0));
        let k2 = Arc::new(totals(&[(1, 1), (3, 1)], &[((1, 22), 1), ((3, 14), 1)], 0));
        let mut lines = 0;
        // records and counters, then idle windows (the cached parts reused), then a change
        for (i, k) in [&k1, &k2, &k2, &k2, &k1].into_iter().enumerate() {
            if i == 4 {
                p.ingest(&rec(4, 14, 0, 1, 288));
            }
            let mut s = p.snapshot(k, SystemTime::now(), i == 4);
            if i == 3 {
                s.sinks = vec![SinkStatus {
                    sink: "spool".into(),
                    sent_batches: 2,
                    metrics: vec![wire::SinkMetric {
                        name: "spool_bytes",
                        kind: wire::MetricKind::Gauge,
                        help: "h",
                        value: 9,
                    }],
                    ..SinkStatus::default()
                }];
            }
            if i >= 2 {
                s.agent = Some(wire::AgentCost {
                    cpu_ns: i as u64,
                    rss_bytes: 4096,
                    bpf_run_ns: (i == 4).then_some(7),
                    bpf_runs: (i == 4).then_some(1),
                });
            }
            let want = s.to_line();
            assert_eq!(
                String::from_utf8_lossy(&cache.parts(&s).concat()),
                String::from_utf8_lossy(&want),
                "window {i}"
            );
            lines += 1;
        }
        assert_eq!(lines, 5);
        // a new attach status is not taken from the cache
        p.set_attached(Vec::new());
        let s = p.snapshot(&k2, SystemTime::now(), false);
        assert_eq!(cache.parts(&s).concat(), s.to_line());
    }

    #[test]
    fn an_idle_lines_rest_is_the_last_idle_lines() {
        let mut p = pipe(100);
        let mut cache = LineCache::default();
        p.ingest(&rec(3, 14, 0, 0, 288));
        let k = Arc::new(totals(&[(3, 1)], &[((3, 14), 1)], 0));
        for i in 0..4 {
            let s = p.snapshot(&k, SystemTime::now(), false);
            let [head, rest] = cache.parts(&s);
            assert_eq!([head, rest].concat(), s.to_line(), "window {i}");
            assert!(head.ends_with(b"}") && rest.starts_with(b",\"records\":"));
        }
        // windows without records or chains: the rest is kept with what it was written from
        assert!(cache.rest_key.is_some());
        let before = cache.rest.clone();
        let s = p.snapshot(&k, SystemTime::now(), false);
        let [head, rest] = cache.parts(&s);
        assert_eq!(rest, &before[..]);
        assert_eq!([head, rest].concat(), s.to_line());
        // another sink error count: the rest is written anew
        let mut s = p.snapshot(&k, SystemTime::now(), false);
        s.errors.sink += 1;
        assert_eq!(cache.parts(&s).concat(), s.to_line());
        assert_ne!(cache.rest, before);
    }
}

//! A snapshot's JSON line with the parts that rarely change serialised once: the probe list
//! in `counters` (the same in every idle window: all zero) and `attached` (fixed for a run).
//! An idle window at `--interval 1s` spent most of its time escaping the same function and
//! module names again; [`LineCache::line`] writes the same bytes as [`Snapshot::to_line`]
//! (a test holds them equal) and reuses those two parts while they are unchanged (the same
//! [`Shared`] allocation as last time: no comparison at all).

use std::io::Write;

use serde::Serialize;

use crate::kernel_state::AttachStatus;
use crate::pipeline::{CounterOut, Snapshot};
use crate::shared::Shared;

/// One part's last value and its JSON.
struct Cached<T> {
    value: T,
    json: Vec<u8>,
}

/// The serialised `counters` and `attached` of the last line, and the line's buffer.
#[derive(Default)]
pub struct LineCache {
    counters: Option<Cached<Shared<Vec<CounterOut>>>>,
    attached: Option<Cached<Shared<Vec<AttachStatus>>>>,
    buf: Vec<u8>,
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

impl LineCache {
    /// `snap` as one JSON line (with the trailing newline), byte for byte
    /// [`Snapshot::to_line`]; valid until the next line.
    pub fn line(&mut self, snap: &Snapshot) -> &[u8] {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        if self.write_line(snap, &mut buf).is_err() {
            buf = snap.to_line();
        }
        self.buf = buf;
        &self.buf
    }

    /// The fields in [`Snapshot`]'s order (serde writes them so).
    fn write_line(&mut self, s: &Snapshot, v: &mut Vec<u8>) -> serde_json::Result<()> {
        v.reserve(8192 + s.counters.len() * 160 + s.records.len() * 300 + s.chains.len() * 400);
        let field = |v: &mut Vec<u8>, name: &str, value: &dyn erased::Json| {
            v.push(if v.is_empty() { b'{' } else { b',' });
            serde_json::to_writer(&mut *v, name)?;
            v.push(b':');
            value.write(v)
        };
        field(v, "host", &s.host)?;
        field(v, "kernel", &s.kernel)?;
        field(v, "manifest_hash", &s.manifest_hash)?;
        field(v, "snapshot", &s.snapshot)?;
        field(v, "final", &s.is_final)?;
        field(v, "window", &s.window)?;
        field(v, "records", &s.records)?;
        field(v, "chains", &s.chains)?;
        let counters = cached(&mut self.counters, &s.counters)?;
        field(v, "counters", &erased::Raw(counters))?;
        field(v, "drops", &s.drops)?;
        field(v, "seq_gaps", &s.seq_gaps)?;
        let attached = cached(&mut self.attached, &s.attached)?;
        field(v, "attached", &erased::Raw(attached))?;
        field(v, "errors", &s.errors)?;
        field(v, "invariant", &s.invariant)?;
        if let Some(c) = &s.clickhouse {
            field(v, "clickhouse", c)?;
        }
        v.extend_from_slice(b"}\n");
        Ok(())
    }
}

/// A value that writes itself as JSON: any `Serialize`, or JSON already written.
mod erased {
    use super::{Serialize, Write};

    pub trait Json {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
    }

    impl<T: Serialize> Json for T {
        fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }

    /// Serialised JSON, written as it is.
    pub struct Raw<'a>(pub &'a [u8]);

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
                s.clickhouse = Some(crate::clickhouse::SinkStatus::default());
            }
            let want = s.to_line();
            assert_eq!(
                String::from_utf8_lossy(cache.line(&s)),
                String::from_utf8_lossy(&want),
                "window {i}"
            );
            lines += 1;
        }
        assert_eq!(lines, 5);
        // a new attach status is not taken from the cache
        p.set_attached(Vec::new());
        let s = p.snapshot(&k2, SystemTime::now(), false);
        assert_eq!(cache.line(&s), s.to_line());
    }
}

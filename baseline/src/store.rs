//! The baseline store: per handler, the distinct success shapes (probe ids in call order)
//! with their counts, recent durations for quantiles and the first few exemplars. Bounded:
//! at most `MAX_SHAPES` shapes per handler (later new shapes only counted in `other`), the
//! last `DURATIONS` durations and `EXEMPLARS` exemplars per shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use wire::LOG2_BUCKETS;

use crate::trace::{untoken, Trace};

const MAX_SHAPES: usize = 32;
const DURATIONS: usize = 512;
const EXEMPLARS: usize = 3;

/// One success shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Shape {
    pub count: u64,
    /// the last `DURATIONS` durations, a ring
    pub durations: Vec<u64>,
    pub next: usize,
    pub exemplars: Vec<Trace>,
    /// every success's duration in log2 buckets ([`log2_bucket`]), trailing empty buckets
    /// left out: unlike the ring of `durations`, counts that hosts and runs can add up (the
    /// fleet's quantiles). A state file of an earlier version has none: its successes before
    /// the upgrade are in `count`, not here.
    #[serde(default)]
    pub hist: Vec<u64>,
}

/// The [`Shape::hist`] bucket of a duration in ns.
pub(crate) fn log2_bucket(ns: u64) -> usize {
    ((63 - (ns | 1).leading_zeros()) as usize).min(LOG2_BUCKETS - 1)
}

impl Shape {
    fn add(&mut self, t: &Trace) {
        self.count += 1;
        let b = log2_bucket(t.duration_ns);
        self.hist.resize(self.hist.len().max(b + 1), 0);
        self.hist[b] += 1;
        if self.durations.len() < DURATIONS {
            self.durations.push(t.duration_ns);
        } else {
            self.durations[self.next] = t.duration_ns;
            self.next = (self.next + 1) % DURATIONS;
        }
        if self.exemplars.len() < EXEMPLARS {
            self.exemplars.push(t.clone());
        }
    }

    /// Adds `other`'s counts, durations and exemplars (two shapes of an earlier version's
    /// file that are one in call order).
    fn merge(&mut self, mut other: Shape) {
        self.count += other.count;
        self.hist.resize(self.hist.len().max(other.hist.len()), 0);
        for (a, b) in self.hist.iter_mut().zip(&other.hist) {
            *a = a.saturating_add(*b);
        }
        // oldest first, then the last DURATIONS of both
        let oldest = self.next.min(self.durations.len());
        self.durations.rotate_left(oldest);
        let theirs = other.next.min(other.durations.len());
        other.durations.rotate_left(theirs);
        self.durations.append(&mut other.durations);
        let cut = self.durations.len().saturating_sub(DURATIONS);
        self.durations.drain(..cut);
        self.next = 0;
        let room = EXEMPLARS.saturating_sub(self.exemplars.len());
        self.exemplars
            .extend(other.exemplars.into_iter().take(room));
    }

    /// The q-quantile (nearest rank) of the kept durations.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        let mut d = self.durations.clone();
        d.sort_unstable();
        if d.is_empty() {
            return 0;
        }
        let rank = ((q * d.len() as f64).ceil() as usize).clamp(1, d.len());
        d[rank - 1]
    }
}

/// One handler's successes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct HandlerBase {
    pub successes: u64,
    /// successes whose shape was new past `MAX_SHAPES`
    pub other: u64,
    #[serde(with = "super::persist::pairs")]
    pub shapes: BTreeMap<Vec<u32>, Shape>,
}

impl HandlerBase {
    /// The shapes with their counts, most common first (ties: by path), for alignment.
    pub(crate) fn ranked(&self) -> Vec<(&[u32], u64)> {
        let mut v: Vec<(&[u32], u64)> = self
            .shapes
            .iter()
            .map(|(p, s)| (p.as_slice(), s.count))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        v
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Store {
    pub handlers: BTreeMap<u32, HandlerBase>,
}

impl Store {
    /// The same store with shapes keyed in return order (a state file of version 1) keyed in
    /// call order (`calls`: the manifest's call graph), their exemplars too; shapes that are
    /// one in call order are merged. Returns it and how many shapes were merged away.
    pub(crate) fn into_call_order(self, calls: &dyn Fn(u32, u32) -> bool) -> (Self, usize) {
        let mut merged = 0;
        let handlers = self
            .handlers
            .into_iter()
            .map(|(id, h)| {
                let mut shapes: BTreeMap<Vec<u32>, Shape> = BTreeMap::new();
                for (path, mut shape) in h.shapes {
                    let key = Trace {
                        steps: path.iter().map(|&t| (t >> 12, untoken(t), 0)).collect(),
                        ..Trace::default()
                    }
                    .into_call_order(calls)
                    .path();
                    shape.exemplars = std::mem::take(&mut shape.exemplars)
                        .into_iter()
                        .map(|t| t.into_call_order(calls))
                        .collect();
                    match shapes.get_mut(&key) {
                        Some(s) => {
                            s.merge(shape);
                            merged += 1;
                        }
                        None => {
                            shapes.insert(key, shape);
                        }
                    }
                }
                (id, HandlerBase { shapes, ..h })
            })
            .collect();
        (Store { handlers }, merged)
    }

    /// Adds a successful trace (its steps in call order).
    pub(crate) fn add(&mut self, t: &Trace) {
        let h = self.handlers.entry(t.handler).or_default();
        h.successes += 1;
        let path = t.path();
        if let Some(s) = h.shapes.get_mut(&path) {
            s.add(t);
        } else if h.shapes.len() < MAX_SHAPES {
            h.shapes.entry(path).or_default().add(t);
        } else {
            h.other += 1;
        }
    }
}

/// A shape's name: FNV-1a of its probe ids, 12 hex digits (stable across runs and hosts of
/// one manifest).
pub(crate) fn shape_id(path: &[u32]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for id in path {
        for b in id.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{:012x}", h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(handler: u32, path: &[u32], dur: u64) -> Trace {
        Trace {
            handler,
            duration_ns: dur,
            steps: path.iter().map(|&p| (p, 0, 0)).collect(),
            ..Trace::default()
        }
    }

    #[test]
    fn shapes_are_counted_bounded_and_quantiled() {
        let mut s = Store::default();
        for i in 0..100u64 {
            s.add(&trace(7, &[1, 2, 3], 1000 + i));
        }
        s.add(&trace(7, &[1, 3], 5));
        for i in 0..40u32 {
            s.add(&trace(7, &[9, i], 5));
        }
        let h = &s.handlers[&7];
        assert_eq!(h.successes, 141);
        assert_eq!(h.shapes.len(), MAX_SHAPES);
        assert_eq!(h.other, 141 - 100 - 1 - (MAX_SHAPES as u64 - 2));
        let main = &h.shapes[&trace(0, &[1, 2, 3], 0).path()];
        assert_eq!((main.count, main.exemplars.len()), (100, EXEMPLARS));
        assert_eq!(main.quantile(0.5), 1049);
        assert_eq!(main.quantile(0.99), 1098);
        assert_eq!(h.ranked()[0], (&trace(0, &[1, 2, 3], 0).path()[..], 100));
        assert_ne!(shape_id(&[1, 2, 3]), shape_id(&[1, 3, 2]));
        assert_eq!(shape_id(&[1, 2, 3]).len(), 12);
        // every success in the log2 histogram: 1000..1099 ns are all in [2^9, 2^10) but
        // 1024..1099 in [2^10, 2^11); the 5 ns one in [4, 8)
        assert_eq!(main.hist.iter().sum::<u64>(), 100);
        assert_eq!((main.hist.len(), main.hist[9], main.hist[10]), (11, 24, 76));
        assert_eq!(h.shapes[&trace(0, &[1, 3], 0).path()].hist, [0, 0, 1]);
    }

    #[test]
    fn log2_buckets_cover_every_duration() {
        let b: Vec<usize> = [0, 1, 2, 3, 4, 1023, 1024, 1 << 39, u64::MAX]
            .into_iter()
            .map(log2_bucket)
            .collect();
        assert_eq!(b, [0, 0, 1, 1, 2, 9, 10, 39, 39]);
    }
}

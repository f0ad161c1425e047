//! The baseline's live side at run time: the `baseline` ring buffer with its counters read
//! behind the same kind of fence as the failure records (`tracing`/`traced` in `activity`,
//! `bl_seq` per CPU): a trace at or past its CPU's fenced seq waits for the next window, so
//! `received + dropped == produced` holds for traces in every snapshot, as it does for
//! failures. Which programs trace is `entries`.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use libbpf_rs::{RingBuffer, RingBufferBuilder};

use super::activity::{Activity, Tracing};
use super::loader::Loaded;
use wire::TraceCounts;

use crate::error::CollectError;
use crate::pipeline::Pipeline;

/// The `baseline` ring and the traces a fenced read held back.
pub(crate) struct TraceRing {
    ring: RingBuffer<'static>,
    samples: Rc<RefCell<Vec<Vec<u8>>>>,
    held: Vec<Vec<u8>>,
}

/// Reads of a fence before a half-counted trace is carried as in flight (as for failures).
const FENCE_READS: u32 = 8;

/// (cpu, seq) of a trace record (`struct pg_trace`: seq at 0, cpu at 52).
fn cpu_seq(sample: &[u8]) -> Option<(u32, u64)> {
    let seq = u64::from_ne_bytes(sample.get(0..8)?.try_into().ok()?);
    let cpu = u32::from_ne_bytes(sample.get(52..56)?.try_into().ok()?);
    Some((cpu, seq))
}

impl TraceRing {
    pub(crate) fn new(loaded: &Loaded) -> Result<Self, CollectError> {
        let map = loaded.map("baseline")?;
        let samples: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
        let sink = samples.clone();
        let libbpf = |source| CollectError::Libbpf {
            what: "baseline ring buffer".into(),
            source,
        };
        let mut b = RingBufferBuilder::new();
        b.add(&map, move |data: &[u8]| {
            if let Ok(mut s) = sink.try_borrow_mut() {
                s.push(data.to_vec());
            }
            0
        })
        .map_err(libbpf)?;
        Ok(TraceRing {
            ring: b.build().map_err(libbpf)?,
            samples,
            held: Vec::new(),
        })
    }

    /// Consumes the ring into `pipe`, after what was held; with `fence`, a trace at or past
    /// its CPU's seq there is held for the next window.
    pub(crate) fn drain(&mut self, pipe: &mut Pipeline, fence: Option<&[u64]>) {
        let _ = self.ring.consume();
        let mut all = std::mem::take(&mut self.held);
        all.append(&mut self.samples.borrow_mut());
        for s in all {
            let beyond = fence.is_some_and(|f| {
                cpu_seq(&s).is_some_and(|(cpu, seq)| f.get(cpu as usize).is_some_and(|&x| seq >= x))
            });
            if beyond {
                self.held.push(s);
            } else {
                pipe.ingest_trace(&s);
            }
        }
    }

    /// The kernel's trace counters behind the fence, and each CPU's `bl_seq` read with them.
    pub(crate) fn read(
        loaded: &Loaded,
        activity: Option<&Activity>,
    ) -> Result<(TraceCounts, Vec<u64>), CollectError> {
        let mut wait = Duration::from_micros(20);
        let mut reads = 0;
        loop {
            let done = activity
                .and_then(|a| a.tracing(Tracing::Ended))
                .unwrap_or(0);
            let k = TraceCounts {
                produced: loaded.total("bl_produced")?,
                dropped: loaded.total("bl_dropped")?,
                budget_skipped: loaded.total("bl_skipped")?,
                slow: loaded.total("bl_slow")?,
                ..TraceCounts::default()
            };
            let fence = loaded.seq_next_of("bl_seq")?;
            let entered = activity
                .and_then(|a| a.tracing(Tracing::Entered))
                .unwrap_or(0);
            reads += 1;
            let in_flight = entered.wrapping_sub(done);
            if in_flight == 0 || reads >= FENCE_READS {
                return Ok((TraceCounts { in_flight, ..k }, fence));
            }
            std::thread::sleep(wait);
            wait *= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_seq_are_read_at_the_records_offsets() {
        let t = manifest::PgTrace {
            seq: 41,
            cpu: 3,
            ..Default::default()
        };
        // SAFETY: PgTrace is repr(C), plain integers and arrays.
        let bytes: [u8; manifest::TRACE_SIZE] = unsafe { std::mem::transmute(t) };
        assert_eq!(cpu_seq(&bytes), Some((3, 41)));
        assert_eq!(cpu_seq(&bytes[..10]), None);
    }
}

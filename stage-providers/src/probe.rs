//! The uprobe's BPF object: loaded once, one link per probed library, its ring buffer of
//! error completions and its counters (`providers/bpf/mlx5_cqe.bpf.c`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder, RingBuffer, RingBufferBuilder};

use crate::error::StageError;

/// The program and maps the object must have.
const PROGRAM: &str = "pg_mlx5_dump_cqe";
const RING: &str = "provider_cqes";
const COUNTS: &str = "provider_counts";

/// One error completion as the program wrote it (`struct pg_provider_cqe`, 48 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProviderCqe {
    pub(crate) tgid: u32,
    pub(crate) qpn: u32,
    pub(crate) syndrome: u8,
    pub(crate) vendor_syndrome: u8,
    pub(crate) opcode: u8,
    pub(crate) ts_ns: u64,
    pub(crate) cgroup_id: u64,
    pub(crate) comm: [u8; 16],
}

impl ProviderCqe {
    pub(crate) const SIZE: usize = 48;

    /// The record from its bytes; `None` when it is not one (a shorter sample).
    pub(crate) fn decode(b: &[u8]) -> Option<Self> {
        let b = b.get(..Self::SIZE)?;
        let u32_at = |i: usize| {
            b.get(i..i + 4)
                .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
        };
        let u64_at = |i: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(b.get(i..i + 8)?.try_into().ok()?))
        };
        Some(ProviderCqe {
            tgid: u32_at(0)?,
            qpn: u32_at(4)?,
            syndrome: *b.get(8)?,
            vendor_syndrome: *b.get(9)?,
            opcode: *b.get(10)?,
            ts_ns: u64_at(16)?,
            cgroup_id: u64_at(24)?,
            comm: b.get(32..48)?.try_into().ok()?,
        })
    }
}

/// The loaded object, the links of the libraries it probes and the records read.
pub(crate) struct Probe {
    // dropped first: the ring buffer reads the object's map, the links run its program
    ring: RingBuffer<'static>,
    links: BTreeMap<String, Link>,
    read: Rc<RefCell<Vec<Option<ProviderCqe>>>>,
    obj: Object,
}

impl Probe {
    pub(crate) fn load(object: &Path) -> Result<Self, StageError> {
        let bpf = |what: &str, e: libbpf_rs::Error| StageError::Bpf {
            object: object.display().to_string(),
            what: what.to_string(),
            error: e.to_string(),
        };
        let open = ObjectBuilder::default()
            .open_file(object)
            .map_err(|e| bpf("open", e))?;
        let obj = open.load().map_err(|e| bpf("load", e))?;
        if !obj.progs().any(|p| p.name() == PROGRAM) {
            return Err(bpf(
                "find",
                libbpf_rs::Error::from(std::io::Error::other(format!("no program {PROGRAM}"))),
            ));
        }
        let read = Rc::new(RefCell::new(Vec::new()));
        let sink = read.clone();
        let ring = {
            let map = obj.maps().find(|m| m.name() == RING).ok_or_else(|| {
                bpf(
                    "find",
                    std::io::Error::other(format!("no map {RING}")).into(),
                )
            })?;
            let mut b = RingBufferBuilder::new();
            b.add(&map, move |data: &[u8]| {
                if let Ok(mut v) = sink.try_borrow_mut() {
                    v.push(ProviderCqe::decode(data));
                }
                0
            })
            .map_err(|e| bpf("ring buffer", e))?;
            b.build().map_err(|e| bpf("ring buffer", e))?
        };
        Ok(Probe {
            ring,
            links: BTreeMap::new(),
            read,
            obj,
        })
    }

    /// A uprobe at file offset `offset` of `file` (the path as this process reaches it: through
    /// `/proc/PID/root` for a container's library), kept under `key` (the path the jobs see).
    pub(crate) fn attach(&mut self, key: &str, file: &Path, offset: u64) -> Result<(), String> {
        let prog = self
            .obj
            .progs_mut()
            .find(|p| p.name() == PROGRAM)
            .ok_or_else(|| format!("no program {PROGRAM}"))?;
        let link = prog
            .attach_uprobe(false, -1, file, offset as usize)
            .map_err(|e| e.to_string())?;
        self.links.insert(key.to_string(), link);
        Ok(())
    }

    /// Detaches the uprobe of `key` (dropping its link); whether one was attached.
    pub(crate) fn detach(&mut self, key: &str) -> bool {
        self.links.remove(key).is_some()
    }

    /// The samples in the ring now, each an error completion or `None` for one of the wrong
    /// size (what the program could not put in the ring is in [`Self::counts`]).
    pub(crate) fn drain(&mut self) -> Vec<Option<ProviderCqe>> {
        let _ = self.ring.consume();
        std::mem::take(&mut *self.read.borrow_mut())
    }

    /// (seen, dropped) so far, summed over CPUs.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let Some(map) = self.obj.maps().find(|m| m.name() == COUNTS) else {
            return (0, 0);
        };
        let sum = |k: u32| -> u64 {
            map.lookup_percpu(&k.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .map(|cpus| {
                    cpus.iter()
                        .filter_map(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
                        .map(u64::from_ne_bytes)
                        .fold(0u64, u64::wrapping_add)
                })
                .unwrap_or(0)
        };
        (sum(0), sum(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_a_short_one_is_none() {
        let mut b = Vec::new();
        b.extend_from_slice(&4242u32.to_ne_bytes());
        b.extend_from_slice(&0x123456u32.to_ne_bytes());
        b.extend_from_slice(&[0x04, 0x99, 0xd, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&77u64.to_ne_bytes());
        b.extend_from_slice(&9u64.to_ne_bytes());
        b.extend_from_slice(b"mlx5_cqe_call\0\0\0");
        assert_eq!(b.len(), ProviderCqe::SIZE);
        let r = ProviderCqe::decode(&b).expect("decodes");
        assert_eq!(
            (
                r.tgid,
                r.qpn,
                r.syndrome,
                r.vendor_syndrome,
                r.opcode,
                r.ts_ns
            ),
            (4242, 0x123456, 4, 0x99, 0xd, 77)
        );
        assert_eq!((r.cgroup_id, &r.comm[..13]), (9, &b"mlx5_cqe_call"[..]));
        assert_eq!(ProviderCqe::decode(&b[..40]), None);
    }
}

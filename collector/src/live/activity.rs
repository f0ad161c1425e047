//! The object's `activity` map read from memory: how many programs have ended, summed over
//! its per-CPU slots, without a syscall.
//!
//! Every program adds one to its CPU's slot as the last thing it does, after all of its
//! counting (`pg_exit` in probegen.bpf.h, an atomic add). So when the sum is the one read
//! before the last read of the counter maps, no program has ended since: whatever was counted
//! after that read belongs to a program still running, whose end will move the sum, and an
//! idle window reads no map at all (see `source::live::WindowReads`). The map is
//! a `BPF_F_MMAPABLE` array mapped read-only here; an object without it (compiled from an older
//! header) has no [`Activity`] and the counters are read every window as before.
//!
//! A failing program also brackets its failure counting in the slot (`failing` before,
//! `failed` after its record or drop): a window that reads `failed`, the maps, then `failing`
//! and finds them equal read no failure half counted (the fence of `source::live`). Slots of
//! an older header end after `ended`: [`Activity::failing_failed`] is `None` there.
//!
//! A leaf module: it knows libbpf-rs and libc, no other collector module.

use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use libbpf_rs::MapCore;

/// The map's name in the object.
pub(crate) const ACTIVITY_MAP: &str = "activity";

/// `BPF_F_MMAPABLE` (linux/bpf.h): the array's values can be mapped into user memory.
const BPF_F_MMAPABLE: u32 = 1 << 10;

/// The `activity` map mapped read-only: values of `stride` bytes, each starting with its
/// slot's count (a u64 the programs add to atomically), of which the first `used` can move.
pub(crate) struct Activity {
    base: NonNull<u8>,
    len: usize,
    /// CPU n adds to slot n % slots: with fewer CPUs than slots the rest stay zero, unread
    used: usize,
    stride: usize,
}

impl Activity {
    /// Maps `map` (a loaded object's `activity`), or `None` when it is not an mmapable array
    /// of values starting with a u64, or the mapping is refused.
    pub(crate) fn map(map: &libbpf_rs::Map<'_>) -> Option<Self> {
        if map.map_type() != libbpf_rs::MapType::Array
            || map.value_size() < 8
            || map.info().map_or(0, |i| i.info.map_flags) & BPF_F_MMAPABLE == 0
        {
            return None;
        }
        // the kernel lays the values out at a multiple of 8 bytes, from a page boundary
        let stride = (map.value_size() as usize).next_multiple_of(8);
        let slots = map.max_entries() as usize;
        // SAFETY: sysconf takes no pointer.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|&p| p > 0)?;
        if slots == 0 {
            return None;
        }
        let len = slots.checked_mul(stride)?.next_multiple_of(page);
        // SAFETY: a new read-only shared mapping of the map's fd (no address hint); the
        // kernel checks `len` against the map's size. The mapping holds the map alive until
        // it is unmapped (Drop), whatever becomes of the fd.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.as_fd().as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        let cpus = libbpf_rs::num_possible_cpus().unwrap_or(slots);
        Some(Activity {
            base: NonNull::new(ptr.cast())?,
            len,
            used: slots.min(cpus.max(1)),
            stride,
        })
    }

    /// Programs ended so far, summed over the slots (wrapping: only equality matters).
    pub(crate) fn ended(&self) -> u64 {
        self.sum(Count::Ended)
    }

    /// Failing programs that entered / ended their failure counting so far, summed over the
    /// slots; `None` for an object whose slots do not carry them (an older header).
    pub(crate) fn failing_failed(&self, which: Failing) -> Option<u64> {
        let count = match which {
            Failing::Entered => Count::Failing,
            Failing::Ended => Count::Failed,
        };
        (self.stride >= (count as usize + 1) * 8).then(|| self.sum(count))
    }

    /// Handler exits that entered / ended the counting of a trace (`tracing`, `traced`);
    /// `None` for slots too short to carry them.
    pub(crate) fn tracing(&self, which: Tracing) -> Option<u64> {
        let count = match which {
            Tracing::Entered => Count::Tracing,
            Tracing::Ended => Count::Traced,
        };
        (self.stride >= (count as usize + 1) * 8).then(|| self.sum(count))
    }

    fn sum(&self, count: Count) -> u64 {
        let offset = count as usize * 8;
        if offset + 8 > self.stride {
            return 0;
        }
        (0..self.used)
            .map(|i| {
                // SAFETY: the 8 bytes at `offset` of slot i lie within the mapping (used <=
                // slots, slots * stride <= len, offset + 8 <= stride), 8-byte aligned
                // (page-aligned base, stride and offset multiples of 8), and only ever changed
                // atomically (the programs' adds). Acquire: the counter-map reads that follow
                // see the counting that came before the adds seen here.
                let count = unsafe {
                    AtomicU64::from_ptr(self.base.as_ptr().add(i * self.stride + offset).cast())
                };
                count.load(Ordering::Acquire)
            })
            .fold(0u64, u64::wrapping_add)
    }
}

/// The counts of a slot, by their position in `struct pg_activity`.
#[derive(Clone, Copy)]
enum Count {
    Ended = 0,
    Failing = 1,
    Failed = 2,
    Tracing = 3,
    Traced = 4,
}

/// Which end of a trace's counting (`tracing`, `traced` in `struct pg_activity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tracing {
    Entered,
    Ended,
}

/// Which end of the failure counting (`failing`, `failed` in `struct pg_activity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failing {
    Entered,
    Ended,
}

impl Drop for Activity {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made; nothing refers to it afterwards.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

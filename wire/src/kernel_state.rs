//! What an input source (the live loader, a replay file) tells the processing stage about
//! the kernel side: the cumulative counters and the attach outcome of each probe. Sources and
//! the pipeline both depend on this module; sources do not import the pipeline.

use std::collections::BTreeMap;

use serde::Serialize;

/// Cumulative kernel counters, summed over CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelTotals {
    pub calls: BTreeMap<u32, u64>,
    pub failures: BTreeMap<u32, u64>,
    /// (probe id, errno) -> failures
    pub errnos: BTreeMap<(u32, u32), u64>,
    /// records the ring buffer could not take
    pub drops: u64,
    /// the same per probe id (empty for recordings that only carry the total)
    pub drops_by_probe: BTreeMap<u32, u64>,
    /// Read behind a fence (live, an object with `failing`/`failed` in `activity`): these
    /// counters cover exactly the records with a seq below the one each CPU had taken at the
    /// read, and later records wait for the next window.
    pub fenced: bool,
    /// Failing programs half counted while the maps were read (the fence never closed): the
    /// counters and the records may differ by at most this many, a loss or not.
    pub in_flight: u64,
    /// Runs of a probe's exit (or data-plane entry) programs that the kernel skipped, by
    /// probe id (`recursion_misses` of `bpf_prog_info`, 5.12+): the program was already
    /// running on that CPU (a task preempted inside it, on a preemptible kernel), so a return
    /// went unseen and uncounted. Failures the invariant cannot see; reported beside it. Live
    /// runs only (a recording carries none).
    pub missed: BTreeMap<u32, u64>,
    /// The data plane's per-QP table (`qp_errors`), read with the counters; `None` for an
    /// object without one, or while no QP has had an error.
    pub qp: Option<QpErrors>,
}

/// Per QP, the first error and a count of the rest (`qp_errors` in probegen.bpf.h): the first
/// error of a (probe, QP, owner) is a record, every later one only counts in its entry, so a
/// dying QP's flush completions cost one record. Cumulative over the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QpErrors {
    /// The entries the kernel holds now, by (probe, QP number, owner pid).
    pub qps: Vec<QpError>,
    /// Entries made (first errors, each also a record).
    pub firsts: u64,
    /// Errors counted in their QP's entry instead of recorded: not failures, so the record
    /// accounting (received + dropped == failures) stays exact.
    pub repeats: u64,
    /// Entries the kernel's LRU evicted (made - held): that QP's next error is a record again.
    pub evicted: u64,
    /// The table's size: memory stays bounded however many QPs die.
    pub capacity: u64,
}

/// One QP's errors at one data-plane probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QpError {
    pub probe: u32,
    pub function: String,
    pub qpn: u32,
    /// The owner's pid (the QP's or CQ's creator).
    pub pid: u32,
    /// The first error's name (`IB_WC_LOC_PROT_ERR`).
    pub status: String,
    /// bpf_ktime_get_ns() of the first error (the records' clock).
    pub first_ts_ns: u64,
    /// Errors at this probe on this QP: the first and the repeats.
    pub count: u64,
    /// The QP's peer when its first error came (kept at its last RTR); absent when none is
    /// known (a QP never moved to RTR while the agent ran, a UD QP, a set without a peer
    /// probe, or an entry the peer table evicted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<QpPeer>,
}

/// A QP's peer as the kernel last set it (`struct pg_peer` in probegen.bpf.h).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QpPeer {
    /// The remote QP number.
    pub qpn: u32,
    /// The destination GID as IPv6 text (RoCE v2 over IPv4: `::ffff:10.0.0.2`); absent
    /// without a global route header (an IB QP within its subnet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gid: Option<String>,
    pub gid_type: GidType,
    /// `RC`, `UC`, `UD`, `XRC_INI`, `XRC_TGT`, ... (`other (n)` for a number the uapi does not
    /// name).
    pub qp_type: String,
    /// From the RTR that set the peer to the QP's first error: a QP that dies within seconds
    /// of RTR points at its configuration (a GID of the wrong type, an unreachable subnet).
    pub since_rtr_ns: u64,
}

/// The type of a QP's source GID, which decides how the peer is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GidType {
    /// InfiniBand.
    Ib,
    /// RoCE v1: Ethernet only, not routable across subnets.
    RoceV1,
    /// RoCE v2: UDP/IP.
    RoceV2,
    Unknown,
}

impl QpPeer {
    /// The peer in a `qp_errors` value (`pg_qp_val`: first_ts_ns u64 at 0, `struct pg_peer` from
    /// offset 24); `None` when none was kept or the value is shorter (an older object).
    pub fn of_entry(val: &[u8]) -> Option<QpPeer> {
        let first_ts_ns = u64::from_ne_bytes(val.get(0..8)?.try_into().ok()?);
        QpPeer::from_bytes(val.get(24..)?, first_ts_ns)
    }

    /// The peer from `struct pg_peer`'s bytes: rtr_ns u64, dgid [u8; 16], dest_qpn u32,
    /// gid_type u8, qp_type u8; `None` when none was kept (rtr_ns 0) or the bytes are short.
    pub fn from_bytes(b: &[u8], first_ts_ns: u64) -> Option<QpPeer> {
        let rtr_ns = u64::from_ne_bytes(b.get(0..8)?.try_into().ok()?);
        if rtr_ns == 0 {
            return None;
        }
        let dgid: [u8; 16] = b.get(8..24)?.try_into().ok()?;
        let qpn = u32::from_ne_bytes(b.get(24..28)?.try_into().ok()?);
        let gid_type = match b.get(28)? {
            1 => GidType::Ib,
            2 => GidType::RoceV1,
            3 => GidType::RoceV2,
            _ => GidType::Unknown,
        };
        // include/uapi/rdma/ib_user_verbs.h `enum ib_uverbs_qp_type`
        let qp_type = match b.get(29)? {
            2 => "RC".to_string(),
            3 => "UC".to_string(),
            4 => "UD".to_string(),
            8 => "RAW_PACKET".to_string(),
            9 => "XRC_INI".to_string(),
            10 => "XRC_TGT".to_string(),
            n => format!("other ({n})"),
        };
        Some(QpPeer {
            qpn,
            gid: (dgid != [0; 16]).then(|| std::net::Ipv6Addr::from(dgid).to_string()),
            gid_type,
            qp_type,
            since_rtr_ns: first_ts_ns.saturating_sub(rtr_ns),
        })
    }
}

impl KernelTotals {
    /// Sum of one key's per-CPU u64 values (one `Vec<u8>` per CPU, as libbpf returns them).
    /// A value that is not 8 bytes long counts as 0.
    pub fn sum_percpu(values: &[Vec<u8>]) -> u64 {
        values
            .iter()
            .map(|v| {
                <[u8; 8]>::try_from(v.as_slice())
                    .map(u64::from_ne_bytes)
                    .unwrap_or(0)
            })
            .fold(0u64, u64::wrapping_add)
    }
}

/// Attach outcome of one probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttachStatus {
    pub probe: u32,
    pub function: String,
    pub module: String,
    pub attached: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How the probe attaches (or was meant to); absent in older outputs and before a load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<Mechanism>,
    /// The symbols it attached at on this kernel when they are not the manifest's: a compiler
    /// clone resolved by name (`f.constprop.1` for the set's `f.constprop.0`, or the plain
    /// `f`); empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub symbols: Vec<String>,
}

/// How a probe's programs attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// `fexit` on the function, resolved in its module's (or vmlinux's) BTF.
    Fexit,
    /// The kprobe/kretprobe fallback: the module has no BTF.
    Kprobe,
    /// `kretprobe` on the compiler clone of a clone-only function.
    KretprobeClone,
    /// `fsession` on a uverbs handler with the baseline on (7.0+): one program at its entry
    /// (the baseline's sampling) and its exit (the failure probe).
    Fsession,
    /// `fentry` on a data-plane function (manifest `data_plane`): its in-kernel filter records
    /// only error events and error completions.
    Fentry,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `pg_qp_val` as the kernel holds it: first error at 5 ms, its QP's RTR at 2 ms towards
    /// QP 0x21 at ::ffff:10.0.0.2 over RoCE v2, an RC QP.
    fn entry(rtr_ns: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend(5_000_000u64.to_ne_bytes());
        v.extend(20u64.to_ne_bytes());
        v.extend(10i32.to_ne_bytes());
        v.extend(0u32.to_ne_bytes());
        v.extend(rtr_ns.to_ne_bytes());
        v.extend([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2]);
        v.extend(0x21u32.to_ne_bytes());
        v.extend([3, 2, 0, 0]);
        v
    }

    #[test]
    fn the_peer_of_a_qp_errors_entry() {
        let p = QpPeer::of_entry(&entry(2_000_000)).expect("a peer");
        assert_eq!(
            p,
            QpPeer {
                qpn: 0x21,
                gid: Some("::ffff:10.0.0.2".into()),
                gid_type: GidType::RoceV2,
                qp_type: "RC".into(),
                since_rtr_ns: 3_000_000,
            }
        );
        // none kept (no RTR seen), an older object's 24-byte value, a short one
        assert_eq!(QpPeer::of_entry(&entry(0)), None);
        assert_eq!(QpPeer::of_entry(&entry(2_000_000)[..24]), None);
        assert_eq!(QpPeer::of_entry(&entry(2_000_000)[..40]), None);
    }
}

//! The RDMA ports' error counters, where only the NIC knows: an mlx5, bnxt_re or irdma
//! completion error is written straight into user memory and never passes the kernel, but the
//! port counts it (`/sys/class/infiniband/<dev>/ports/<n>/hw_counters/`, and the IB
//! performance counters in `counters/`). The collector reads them each window; this module
//! decides which are error counters and turns two readings into deltas.
//!
//! A delta is never negative and never invented. A counter that goes backwards started again
//! from zero (a driver reload, a device re-created): its delta is what it shows now, the
//! reset is reported. A counter that goes absent or unreadable is reported once as a reset
//! with no delta; when it comes back its value is a new base (what it counted while unseen is
//! not known), reported as a reset again. A counter first seen (the agent's start, a new
//! device) is a base, not a delta: the errors of the past are not this window's.

use std::collections::BTreeMap;

use serde::Serialize;

/// The error counters, by file name, with why each is one (the rest of `hw_counters/` counts
/// traffic: packets, requests, congestion notifications). A name in both directories is read
/// from `hw_counters/`.
pub const PORT_ERROR_COUNTERS: &[(&str, &str)] = &[
    // Soft-RoCE (rxe_hw_counters.c), also names a hardware vendor may share
    ("retry_exceeded_err", "rxe: a requester gave up after retry_cnt transport retries (IBV_WC_RETRY_EXC_ERR: no ACK from the peer, a link, a switch or a dead host)"),
    ("retry_rnr_exceeded_err", "rxe: a requester gave up after rnr_retry RNR NAKs (IBV_WC_RNR_RETRY_EXC_ERR: the peer posted no receive)"),
    ("rcvd_rnr_err", "rxe: RNR NAKs received: the peer had no receive posted"),
    ("send_rnr_err", "rxe: RNR NAKs sent: this host had no receive posted"),
    ("rcvd_seq_err", "rxe: PSN sequence NAKs received: packets lost on the way"),
    ("completer_retry_err", "rxe: retries the completer started after a lost packet"),
    ("out_of_seq_request", "rxe: requests out of sequence at the responder: packets lost"),
    ("duplicate_request", "rxe, mlx5: duplicate requests at the responder: a retry after a lost ACK"),
    ("send_err", "rxe: packets the network stack refused to send"),
    ("link_downed", "rxe, IB: the link under the port went down"),
    // mlx5 (counters.c), each group behind a firmware capability
    ("out_of_buffer", "mlx5: packets dropped for lack of a posted receive"),
    ("out_of_sequence", "mlx5: packets out of sequence: packets lost"),
    ("rnr_nak_retry_err", "mlx5: RNR NAKs received past the retries (the peer posted no receive)"),
    ("packet_seq_err", "mlx5: PSN sequence NAKs received: packets lost"),
    ("implied_nak_seq_err", "mlx5: implied NAKs (a read or atomic response skipped): packets lost"),
    ("local_ack_timeout_err", "mlx5: the ACK timer expired on a requester: packets or ACKs lost"),
    ("resp_local_length_error", "mlx5: a responder's local length error (receive buffer too small)"),
    ("resp_cqe_error", "mlx5: error completions on responders"),
    ("req_cqe_error", "mlx5: error completions on requesters"),
    ("req_remote_invalid_request", "mlx5: the peer NAKed a request as invalid"),
    ("req_remote_access_errors", "mlx5: the peer NAKed a request for its access rights (rkey, bounds)"),
    ("resp_remote_access_errors", "mlx5: this responder refused a request for its access rights"),
    ("resp_cqe_flush_error", "mlx5: responder completions flushed after a QP error"),
    ("req_cqe_flush_error", "mlx5: requester completions flushed after a QP error"),
    ("req_transport_retries_exceeded", "mlx5: requesters that gave up after the transport retries (IBV_WC_RETRY_EXC_ERR)"),
    ("req_rnr_retries_exceeded", "mlx5: requesters that gave up after the RNR retries (IBV_WC_RNR_RETRY_EXC_ERR)"),
    ("rx_icrc_encapsulated", "mlx5: RoCE packets received with a bad ICRC"),
    // the IB performance counters (counters/, from the port's PMA: devices with MADs)
    ("symbol_error", "IB: minor link errors on the physical lane"),
    ("link_error_recovery", "IB: link error recoveries completed"),
    ("port_rcv_errors", "IB: packets received with errors"),
    ("port_rcv_remote_physical_errors", "IB: packets received marked bad by an earlier hop"),
    ("port_rcv_switch_relay_errors", "IB: packets a switch could not forward"),
    ("port_xmit_discards", "IB: outbound packets discarded (port down or congestion)"),
    ("port_xmit_constraint_errors", "IB: outbound packets dropped by partition or raw constraints"),
    ("port_rcv_constraint_errors", "IB: inbound packets dropped by partition or raw constraints"),
    ("local_link_integrity_errors", "IB: local link integrity threshold errors"),
    ("excessive_buffer_overrun_errors", "IB: consecutive receive buffer overruns"),
    ("VL15_dropped", "IB: subnet management packets dropped"),
];

/// Whether the file `name` of a port's counter directories is an error counter.
pub fn is_port_error_counter(name: &str) -> bool {
    PORT_ERROR_COUNTERS.iter().any(|(n, _)| *n == name)
}

/// One counter of one port: (device, port, counter file name).
pub type PortCounterKey = (String, u32, String);

/// What reading one counter file gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortReading {
    Value(u64),
    /// present but not read or not a number (a driver that fails the query)
    Unreadable,
}

/// Why a counter's deltas start again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterReset {
    /// lower than the last reading: it started again from zero (its delta is its value)
    Backwards,
    /// its file (or its port, or its device) is gone
    Absent,
    /// its file is there but did not read as a number
    Unreadable,
    /// read again after absent or unreadable: its value is a new base, no delta
    Returned,
}

impl CounterReset {
    pub fn as_str(self) -> &'static str {
        match self {
            CounterReset::Backwards => "backwards",
            CounterReset::Absent => "absent",
            CounterReset::Unreadable => "unreadable",
            CounterReset::Returned => "returned",
        }
    }
}

/// One error counter of one port that moved or reset in a window (the snapshot's
/// `port_counters`; a healthy window has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortCounterOut {
    pub device: String,
    pub port: u32,
    pub counter: String,
    /// the rise over the window (never negative; after a `backwards` reset, the value)
    pub delta: u64,
    /// the value read at the window's end; none when absent or unreadable
    pub total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset: Option<CounterReset>,
}

/// The last reading of a counter the deltas are taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Value(u64),
    /// absent or unreadable (already reported): its next value is a new base
    Gone,
}

/// The error counters' last readings, from one window to the next.
#[derive(Debug, Default)]
pub struct PortCounters {
    last: BTreeMap<PortCounterKey, Last>,
}

impl PortCounters {
    /// The window's changes from this window's readings (`now`: every error counter file
    /// found), in key order; the readings become the last ones.
    pub fn update(&mut self, now: BTreeMap<PortCounterKey, PortReading>) -> Vec<PortCounterOut> {
        let mut out = Vec::new();
        let mut emit = |k: &PortCounterKey, delta, total, reset| {
            out.push(PortCounterOut {
                device: k.0.clone(),
                port: k.1,
                counter: k.2.clone(),
                delta,
                total,
                reset,
            });
        };
        for (k, last) in &mut self.last {
            if !now.contains_key(k) && *last != Last::Gone {
                *last = Last::Gone;
                emit(k, 0, None, Some(CounterReset::Absent));
            }
        }
        for (k, r) in now {
            let before = self.last.get(&k).copied();
            let (next, change) = match (before, r) {
                // never read: nothing to reset (a file a driver always fails stays quiet)
                (None | Some(Last::Gone), PortReading::Unreadable) => (Last::Gone, None),
                (Some(Last::Value(_)), PortReading::Unreadable) => {
                    (Last::Gone, Some((0, None, CounterReset::Unreadable)))
                }
                // first seen: the base
                (None, PortReading::Value(v)) => (Last::Value(v), None),
                (Some(Last::Gone), PortReading::Value(v)) => {
                    (Last::Value(v), Some((0, Some(v), CounterReset::Returned)))
                }
                (Some(Last::Value(p)), PortReading::Value(v)) if v < p => {
                    (Last::Value(v), Some((v, Some(v), CounterReset::Backwards)))
                }
                (Some(Last::Value(p)), PortReading::Value(v)) => {
                    if v > p {
                        emit(&k, v - p, Some(v), None);
                    }
                    (Last::Value(v), None)
                }
            };
            if let Some((delta, total, reset)) = change {
                emit(&k, delta, total, Some(reset));
            }
            self.last.insert(k, next);
        }
        out.sort_by(|a, b| (&a.device, a.port, &a.counter).cmp(&(&b.device, b.port, &b.counter)));
        out
    }

    /// Every error counter's value as last read (the exposition's counters), in key order.
    pub fn totals(&self) -> Vec<(PortCounterKey, u64)> {
        self.last
            .iter()
            .filter_map(|(k, l)| match l {
                Last::Value(v) => Some((k.clone(), *v)),
                Last::Gone => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(dev: &str, port: u32, c: &str) -> PortCounterKey {
        (dev.to_string(), port, c.to_string())
    }

    fn read(values: &[(&str, u32, &str, Option<u64>)]) -> BTreeMap<PortCounterKey, PortReading> {
        values
            .iter()
            .map(|&(d, p, c, v)| {
                let r = v.map_or(PortReading::Unreadable, PortReading::Value);
                (key(d, p, c), r)
            })
            .collect()
    }

    fn brief(out: &[PortCounterOut]) -> Vec<(String, u64, Option<u64>, Option<&'static str>)> {
        out.iter()
            .map(|o| {
                let name = format!("{}/{}/{}", o.device, o.port, o.counter);
                (name, o.delta, o.total, o.reset.map(CounterReset::as_str))
            })
            .collect()
    }

    #[test]
    fn a_first_reading_is_a_base_and_a_rise_is_its_delta() {
        let mut p = PortCounters::default();
        let r = |a, b| {
            read(&[
                ("rxe0", 1, "retry_exceeded_err", Some(a)),
                ("rxe0", 1, "send_err", Some(b)),
            ])
        };
        assert!(
            p.update(r(7, 3)).is_empty(),
            "the past is not this window's"
        );
        assert!(
            p.update(r(7, 3)).is_empty(),
            "a healthy window reports nothing"
        );
        let out = p.update(r(9, 3));
        assert_eq!(
            brief(&out),
            [("rxe0/1/retry_exceeded_err".into(), 2, Some(9), None)]
        );
        let totals = p.totals();
        assert_eq!(totals.len(), 2);
        assert_eq!(totals[0], (key("rxe0", 1, "retry_exceeded_err"), 9));
    }

    #[test]
    fn backwards_absent_unreadable_and_returned_are_resets_never_negative() {
        let mut p = PortCounters::default();
        let one = |v| read(&[("mlx5_0", 1, "req_cqe_error", v)]);
        p.update(one(Some(100)));
        // a driver reload: it counts from zero again, what it shows now is new
        let out = p.update(one(Some(4)));
        assert_eq!(
            brief(&out),
            [(
                "mlx5_0/1/req_cqe_error".into(),
                4,
                Some(4),
                Some("backwards")
            )]
        );
        // unreadable: reported once, no delta
        let out = p.update(one(None));
        assert_eq!(
            brief(&out),
            [("mlx5_0/1/req_cqe_error".into(), 0, None, Some("unreadable"))]
        );
        assert!(p.update(one(None)).is_empty());
        // back: a new base, whatever it shows
        let out = p.update(one(Some(50)));
        assert_eq!(
            brief(&out),
            [(
                "mlx5_0/1/req_cqe_error".into(),
                0,
                Some(50),
                Some("returned")
            )]
        );
        // the port disappears (device removed) and comes back
        let out = p.update(BTreeMap::new());
        assert_eq!(
            brief(&out),
            [("mlx5_0/1/req_cqe_error".into(), 0, None, Some("absent"))]
        );
        assert!(p.update(BTreeMap::new()).is_empty(), "reported once");
        assert!(p.totals().is_empty());
        let out = p.update(one(Some(0)));
        assert_eq!(
            brief(&out),
            [(
                "mlx5_0/1/req_cqe_error".into(),
                0,
                Some(0),
                Some("returned")
            )]
        );
        let out = p.update(one(Some(1)));
        assert_eq!(
            brief(&out),
            [("mlx5_0/1/req_cqe_error".into(), 1, Some(1), None)]
        );
    }

    #[test]
    fn the_error_counters_name_their_reason_and_leave_traffic_out() {
        for (name, why) in PORT_ERROR_COUNTERS {
            assert!(why.contains(':') && why.len() > 20, "{name}: {why}");
        }
        let mut names: Vec<&str> = PORT_ERROR_COUNTERS.iter().map(|(n, _)| *n).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a counter listed twice");
        for traffic in [
            "sent_pkts",
            "rcvd_pkts",
            "rdma_sends",
            "ack_deferred",
            "lifespan",
            "np_cnp_sent",
        ] {
            assert!(!is_port_error_counter(traffic), "{traffic}");
        }
        assert!(is_port_error_counter("retry_rnr_exceeded_err"));
    }

    #[test]
    fn the_line_names_the_reset_and_leaves_it_out_when_none() {
        let o = PortCounterOut {
            device: "rxe0".into(),
            port: 1,
            counter: "send_err".into(),
            delta: 1,
            total: Some(5),
            reset: None,
        };
        let json = serde_json::to_string(&o).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"device":"rxe0","port":1,"counter":"send_err","delta":1,"total":5}"#
        );
        let o = PortCounterOut {
            reset: Some(CounterReset::Absent),
            total: None,
            delta: 0,
            ..o
        };
        let json = serde_json::to_string(&o).unwrap_or_default();
        assert!(
            json.ends_with(r#""delta":0,"total":null,"reset":"absent"}"#),
            "{json}"
        );
    }
}

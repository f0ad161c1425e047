//! The spool's counters ([`SpoolStatus`]) and how the collector's snapshot and exposition see
//! them: a `collector::SinkStatus` with the four counters every sink has and the spool's own
//! as named metrics (`probegen_sink_spool_bytes{sink="clickhouse"}`, the line's
//! `"clickhouse":{"spool_bytes":..}`). The line's object has the fields it had when the
//! collector held this struct (`tests` below holds it).

use collector::{MetricKind, SinkMetric, SinkStatus};

/// What the ClickHouse sink sent and what waits in its spool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpoolStatus {
    /// batches the server took, this run
    pub sent_batches: u64,
    /// rows of the `records` table in those batches
    pub sent_records: u64,
    /// batches waiting in the spool (including this snapshot's)
    pub spool_batches: u64,
    pub spool_bytes: u64,
    /// batches dropped (oldest first) past the spool limit, this run
    pub spool_dropped: u64,
    /// failed send attempts, this run
    pub send_errors: u64,
    /// batches set aside in the spool's quarantine, this run: unreadable (torn, corrupt, not
    /// a file) or refused by the server for good; kept for a person, never resent
    pub quarantined_batches: u64,
    /// snapshots that never reached the spool (the write failed: disk full, I/O error), this run
    pub unspooled_batches: u64,
    /// rows of the `records` table in batches dropped, quarantined or never spooled, this
    /// run, as far as they could be counted: what ClickHouse will never hold
    pub lost_records: u64,
}

/// The sink's name: its key in the snapshot's line, its `sink` label.
pub const SINK_NAME: &str = "clickhouse";

/// The spool's largest size this run, in the final status (`Summary::sinks`).
pub const PEAK_BYTES: &str = "spool_peak_bytes";
pub const PEAK_BATCHES: &str = "spool_peak_batches";

fn metric(name: &'static str, kind: MetricKind, help: &'static str, value: u64) -> SinkMetric {
    SinkMetric {
        name,
        kind,
        help,
        value,
    }
}

impl SpoolStatus {
    /// As the collector carries it; `limit`: the spool's limit (`--clickhouse-spool-bytes`).
    pub fn sink_status(&self, limit: u64) -> SinkStatus {
        use MetricKind::{Counter, Gauge, Setting};
        SinkStatus {
            sink: SINK_NAME.to_string(),
            sent_batches: self.sent_batches,
            sent_records: self.sent_records,
            send_errors: self.send_errors,
            lost_records: self.lost_records,
            metrics: vec![
                metric(
                    "spool_batches",
                    Gauge,
                    "Batches waiting in the on-disk spool.",
                    self.spool_batches,
                ),
                metric(
                    "spool_bytes",
                    Gauge,
                    "Bytes waiting in the on-disk spool.",
                    self.spool_bytes,
                ),
                metric(
                    "spool_dropped",
                    Counter,
                    "Batches dropped, oldest first, past the spool limit.",
                    self.spool_dropped,
                ),
                metric(
                    "quarantined_batches",
                    Counter,
                    "Batches set aside unsent (unreadable, or refused by the server for good).",
                    self.quarantined_batches,
                ),
                metric(
                    "unspooled_batches",
                    Counter,
                    "Snapshots that never reached the spool (write failed).",
                    self.unspooled_batches,
                ),
                metric(
                    "spool_limit_bytes",
                    Setting,
                    "The spool's limit: past it the oldest batches are dropped.",
                    limit,
                ),
            ],
        }
    }

    /// The spool's counters back from the collector's form (`None`: not this sink's).
    pub fn of(s: &SinkStatus) -> Option<Self> {
        let m = |name| s.metric(name).unwrap_or(0);
        (s.sink == SINK_NAME).then(|| SpoolStatus {
            sent_batches: s.sent_batches,
            sent_records: s.sent_records,
            spool_batches: m("spool_batches"),
            spool_bytes: m("spool_bytes"),
            spool_dropped: m("spool_dropped"),
            send_errors: s.send_errors,
            quarantined_batches: m("quarantined_batches"),
            unspooled_batches: m("unspooled_batches"),
            lost_records: s.lost_records,
        })
    }
}

/// The final status with the spool's peak: (bytes, batches).
pub(crate) fn with_peak(mut s: SinkStatus, peak: (u64, usize)) -> SinkStatus {
    s.metrics.push(metric(
        PEAK_BYTES,
        MetricKind::Setting,
        "The spool's largest size this run, bytes.",
        peak.0,
    ));
    s.metrics.push(metric(
        PEAK_BATCHES,
        MetricKind::Setting,
        "The spool's largest size this run, batches.",
        peak.1 as u64,
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line's `clickhouse` object has the fields and values the collector's own
    /// `SinkStatus` struct wrote before the sinks were generic (equal as data).
    #[test]
    fn the_lines_object_is_the_old_one() {
        let s = SpoolStatus {
            sent_batches: 1,
            sent_records: 2,
            spool_batches: 3,
            spool_bytes: 4,
            spool_dropped: 5,
            send_errors: 6,
            quarantined_batches: 7,
            unspooled_batches: 8,
            lost_records: 9,
        };
        let st = s.sink_status(1000);
        let got: serde_json::Value = serde_json::to_value(&st).expect("json");
        let old = serde_json::json!({
            "sent_batches": 1, "sent_records": 2, "spool_batches": 3, "spool_bytes": 4,
            "spool_dropped": 5, "send_errors": 6, "quarantined_batches": 7,
            "unspooled_batches": 8, "lost_records": 9,
        });
        assert_eq!(got, old);
        assert_eq!(SpoolStatus::of(&st), Some(s));
        assert_eq!(st.metric("spool_limit_bytes"), Some(1000));
        let peak = with_peak(st, (10, 11));
        assert_eq!(peak.metric(PEAK_BYTES), Some(10));
        assert_eq!(peak.metric(PEAK_BATCHES), Some(11));
        // settings are the exposition's, never the line's
        assert_eq!(serde_json::to_value(&peak).expect("json"), old);
    }
}

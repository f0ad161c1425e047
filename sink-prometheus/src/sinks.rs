//! `probegen_sink_*{sink="NAME"}`: the state of every sink that has one, from its
//! `collector::SinkStatus` alone, so a sink added to the run shows here without a change to
//! this crate. The four counters every sink has, then each sink's own metrics, one family per
//! name (`_total` for a counter), one series per sink.

use std::fmt::Write as _;

use collector::{MetricKind, SinkStatus};

use crate::label::esc;

/// How a generic counter is read off a status.
type Counter = fn(&SinkStatus) -> u64;

/// The counters every sink has: (line key, help, value).
const GENERIC: [(&str, &str, Counter); 4] = [
    (
        "sent_batches",
        "Snapshot batches the sink's destination took.",
        |s| s.sent_batches,
    ),
    (
        "sent_records",
        "Records in the batches the sink's destination took.",
        |s| s.sent_records,
    ),
    (
        "send_errors",
        "Failed attempts to deliver to the sink's destination.",
        |s| s.send_errors,
    ),
    (
        "lost_records",
        "Records the sink's destination will never hold (dropped, set aside, never queued).",
        |s| s.lost_records,
    ),
];

/// The exposition's name of a sink metric: `probegen_sink_<name>`, `_total` for a counter.
fn family(name: &str, kind: MetricKind) -> String {
    match kind {
        MetricKind::Counter => format!("probegen_sink_{name}_total"),
        MetricKind::Gauge | MetricKind::Setting => format!("probegen_sink_{name}"),
    }
}

fn header(o: &mut String, family: &str, kind: MetricKind, help: &str) {
    let t = match kind {
        MetricKind::Counter => "counter",
        MetricKind::Gauge | MetricKind::Setting => "gauge",
    };
    let _ = writeln!(o, "# HELP {family} {help}\n# TYPE {family} {t}");
}

fn sample(o: &mut String, family: &str, sink: &str, v: u64) {
    let _ = writeln!(o, "{family}{{sink=\"{}\"}} {v}", esc(sink));
}

/// Renders every sink's status (nothing without one).
pub(crate) fn render_sinks(o: &mut String, sinks: &[SinkStatus]) {
    if sinks.is_empty() {
        return;
    }
    for (name, help, get) in GENERIC {
        let f = family(name, MetricKind::Counter);
        header(o, &f, MetricKind::Counter, help);
        for s in sinks {
            sample(o, &f, &s.sink, get(s));
        }
    }
    // each sink-specific family once, in the order first met; a name another sink already
    // uses as a generic counter or with another kind would be a second family of one name:
    // left out
    let mut seen: Vec<(&str, MetricKind)> = GENERIC
        .iter()
        .map(|(n, ..)| (*n, MetricKind::Counter))
        .collect();
    for (i, s) in sinks.iter().enumerate() {
        for m in &s.metrics {
            if seen.iter().any(|(n, _)| *n == m.name) {
                continue;
            }
            seen.push((m.name, m.kind));
            let f = family(m.name, m.kind);
            header(o, &f, m.kind, m.help);
            for t in &sinks[i..] {
                if let Some(v) = t
                    .metrics
                    .iter()
                    .find(|x| x.name == m.name && x.kind == m.kind)
                {
                    sample(o, &f, &t.sink, v.value);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use collector::SinkMetric;

    use super::*;

    #[test]
    fn any_sink_by_its_name() {
        let spool = SinkMetric {
            name: "spool_bytes",
            kind: MetricKind::Gauge,
            help: "Bytes.",
            value: 7,
        };
        let sinks = [
            SinkStatus {
                sink: "a".into(),
                sent_batches: 3,
                metrics: vec![spool.clone()],
                ..SinkStatus::default()
            },
            SinkStatus {
                sink: "b\"".into(),
                lost_records: 2,
                metrics: vec![
                    SinkMetric { value: 9, ..spool },
                    SinkMetric {
                        name: "rows",
                        kind: MetricKind::Counter,
                        help: "Rows.",
                        value: 4,
                    },
                ],
                ..SinkStatus::default()
            },
        ];
        let mut o = String::new();
        render_sinks(&mut o, &sinks);
        for line in [
            "# TYPE probegen_sink_sent_batches_total counter\n",
            "probegen_sink_sent_batches_total{sink=\"a\"} 3\n",
            "probegen_sink_lost_records_total{sink=\"b\\\"\"} 2\n",
            "# TYPE probegen_sink_spool_bytes gauge\n",
            "probegen_sink_spool_bytes{sink=\"a\"} 7\n",
            "probegen_sink_spool_bytes{sink=\"b\\\"\"} 9\n",
            "# TYPE probegen_sink_rows_total counter\n",
            "probegen_sink_rows_total{sink=\"b\\\"\"} 4\n",
        ] {
            assert!(o.contains(line), "{line} in {o}");
        }
        assert_eq!(o.matches("# TYPE probegen_sink_spool_bytes ").count(), 1);
        let mut none = String::new();
        render_sinks(&mut none, &[]);
        assert!(none.is_empty());
    }
}

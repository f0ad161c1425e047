//! A sink the collector does not know: a plain file of rows (one JSON object per record, the
//! shape ClickHouse's `JSONEachRow` takes), written here in the test and handed to the real
//! run loop (`collector::run`, replaying the guest recording
//! `collector/tests/data/rxe-6.12.replay.jsonl`) through `Hooks::sinks`, beside the Prometheus
//! exposition. Its status appears in every snapshot's line under its name and in `/metrics`
//! as `probegen_sink_*{sink="rows-file"}`, and the run's summary ends with it: adding a sink
//! touches no file of the collector or of the exposition (the recipe "Add a sink" in
//! docs/recipes.md, which this test follows).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use collector::{
    ChainClock, CollectError, Hooks, MetricKind, Options, Sink, SinkError, SinkMetric, SinkStatus,
    Snapshot,
};
use serde_json::Value;
use sink_prometheus::PrometheusSink;

const NAME: &str = "rows-file";

/// The third sink: each record of a snapshot as one row appended to a file.
struct RowsFile {
    file: std::fs::File,
    batches: u64,
    rows: u64,
    bytes: u64,
}

impl RowsFile {
    fn status(&self) -> SinkStatus {
        SinkStatus {
            sink: NAME.into(),
            sent_batches: self.batches,
            sent_records: self.rows,
            send_errors: 0,
            lost_records: 0,
            metrics: vec![SinkMetric {
                name: "file_bytes",
                kind: MetricKind::Gauge,
                help: "Bytes of the rows file.",
                value: self.bytes,
            }],
        }
    }
}

impl Sink for RowsFile {
    fn name(&self) -> &str {
        NAME
    }

    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError> {
        let mut out = Vec::new();
        for r in &snap.records.recs {
            let p = snap.records.table.get(r.raw.probe_id);
            let row = serde_json::json!({
                "host": snap.host,
                "snapshot": snap.snapshot,
                "probe": r.raw.probe_id,
                "function": p.map_or("", |p| p.function.as_str()),
                "module": p.map_or("", |p| p.module.as_str()),
                "errno": r.raw.err as u32,
                "ts_ns": r.raw.ts_ns,
            });
            serde_json::to_writer(&mut out, &row).map_err(std::io::Error::from)?;
            out.push(b'\n');
        }
        self.file.write_all(&out)?;
        self.batches += 1;
        self.rows += snap.records.len() as u64;
        self.bytes += out.len() as u64;
        Ok(Some(self.status()))
    }

    fn status(&self) -> Option<SinkStatus> {
        Some(RowsFile::status(self))
    }

    fn finish(&mut self, _flush: Duration) -> Option<SinkStatus> {
        Some(RowsFile::status(self))
    }
}

/// The embedder: the rows file and the exposition (its address kept to scrape it after).
struct Embedder {
    rows: PathBuf,
    metrics: Option<SocketAddr>,
    /// a name for the rows file other than [`NAME`] (the refusal test)
    name: Option<&'static str>,
}

/// [`RowsFile`] under another name.
struct Renamed(RowsFile, &'static str);

impl Sink for Renamed {
    fn name(&self) -> &str {
        self.1
    }

    fn write(&mut self, snap: &Snapshot) -> Result<Option<SinkStatus>, SinkError> {
        self.0.write(snap)
    }
}

impl Hooks for Embedder {
    fn sinks(&mut self, _clock: ChainClock) -> Result<Vec<Box<dyn Sink>>, CollectError> {
        let file = std::fs::File::create(&self.rows).expect("rows file");
        let rows = RowsFile {
            file,
            batches: 0,
            rows: 0,
            bytes: 0,
        };
        let metrics =
            PrometheusSink::serve(SocketAddr::from(([127, 0, 0, 1], 0))).expect("metrics bind");
        self.metrics = Some(metrics.addr());
        let rows: Box<dyn Sink> = match self.name {
            Some(n) => Box::new(Renamed(rows, n)),
            None => Box::new(rows),
        };
        Ok(vec![rows, Box::new(metrics)])
    }
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("collector/tests/data")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pg-third-sink-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

fn options(dir: &Path) -> Options {
    Options {
        manifest: data("rxe-6.12.manifest.yaml"),
        replay: Some(data("rxe-6.12.replay.jsonl")),
        out: dir.join("snapshots.jsonl"),
        proc_root: None,
        ..Options::default()
    }
}

fn scrape(addr: SocketAddr) -> String {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").expect("send");
    let mut s = String::new();
    c.read_to_string(&mut s).expect("read");
    s
}

#[test]
fn a_sink_the_collector_does_not_name_is_in_every_line_and_in_the_exposition() {
    let d = tmp("rows");
    let opts = options(&d);
    let mut hooks = Embedder {
        rows: d.join("rows.jsonl"),
        metrics: None,
        name: None,
    };
    let summary = collector::run(&opts, &mut hooks).expect("run");
    let lines: Vec<Value> = std::fs::read_to_string(&opts.out)
        .expect("snapshots")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert!(lines.len() >= 2, "{} lines", lines.len());

    // each line: the sink's object under its name, after that line's batch
    let mut records = 0;
    for (i, l) in lines.iter().enumerate() {
        records += l["records"].as_array().expect("records").len() as u64;
        let st = &l[NAME];
        assert_eq!(st["sent_batches"], i as u64 + 1, "line {i}: {st}");
        assert_eq!(st["sent_records"], records, "line {i}: {st}");
        assert_eq!(st["send_errors"], 0);
        assert_eq!(st["lost_records"], 0);
        assert!(st["file_bytes"].is_u64(), "line {i}: {st}");
    }
    assert!(records > 0, "the recording has records");

    // the file holds one row per record of the lines
    let rows = std::fs::read_to_string(&hooks.rows).expect("rows");
    assert_eq!(rows.lines().count() as u64, records);
    let last = lines.last().expect("last");
    assert_eq!(last[NAME]["file_bytes"], rows.len() as u64);
    for row in rows.lines() {
        let v: Value = serde_json::from_str(row).expect("row");
        assert!(!v["function"].as_str().expect("function").is_empty(), "{v}");
    }

    // the summary ends with its final status
    let fin = summary
        .sinks
        .iter()
        .find(|s| s.sink == NAME)
        .expect("the summary has the sink");
    assert_eq!(fin.sent_batches, lines.len() as u64);
    assert_eq!(fin.sent_records, records);

    // the exposition shows it by name, and nothing of a sink that is not there
    let page = scrape(hooks.metrics.expect("metrics served"));
    for want in [
        format!(
            "probegen_sink_sent_batches_total{{sink=\"{NAME}\"}} {}\n",
            lines.len()
        ),
        format!("probegen_sink_sent_records_total{{sink=\"{NAME}\"}} {records}\n"),
        format!("probegen_sink_lost_records_total{{sink=\"{NAME}\"}} 0\n"),
        "# TYPE probegen_sink_file_bytes gauge\n".to_string(),
        format!(
            "probegen_sink_file_bytes{{sink=\"{NAME}\"}} {}\n",
            rows.len()
        ),
    ] {
        assert!(page.contains(&want), "{want} in {page}");
    }
    assert!(!page.contains("sink=\"clickhouse\""), "{page}");
}

#[test]
fn a_sink_named_like_a_snapshot_field_is_refused() {
    let d = tmp("refused");
    let opts = options(&d);
    let mut hooks = Embedder {
        rows: d.join("rows.jsonl"),
        metrics: None,
        name: Some("records"),
    };
    let err = collector::run(&opts, &mut hooks).expect_err("refused");
    assert!(
        matches!(err, CollectError::SinkName(ref n) if n == "records"),
        "{err}"
    );
    assert!(err.to_string().contains("`records`"), "{err}");
}

//! A stage the collector does not know, written here in the test and handed to the real run
//! loop (`collector::run`, replaying the guest recording
//! `collector/tests/data/rxe-6.12.replay.jsonl`) through `Hooks::stages`: each window it adds
//! its part to the snapshot (here, a counter of the records the window carried, as a port
//! counter row) and a line for the operator, which reaches the embedder as a warning. Adding a
//! stage touches no file of the collector (the recipe "Add a stage" in docs/recipes.md, which
//! this test follows).

use std::path::{Path, PathBuf};

use collector::{CollectError, Event, Hooks, Options, PeerLookup, PortCounterOut, Snapshot, Stage};
use serde_json::Value;

/// The third stage: the records of each window, as the counter `records` of device `stage0`.
struct RecordCount {
    windows: u64,
    total: u64,
}

impl Stage for RecordCount {
    fn window(&mut self, s: &mut Snapshot, peers: &dyn PeerLookup) -> Vec<String> {
        self.windows += 1;
        let n = s.records.len() as u64;
        self.total += n;
        s.port_counters.push(PortCounterOut {
            device: "stage0".into(),
            port: 1,
            counter: "records".into(),
            delta: n,
            total: Some(self.total),
            reset: None,
        });
        s.idle = false;
        // a replay knows no peer
        assert!(peers.peer(1, 1, 0).is_none());
        vec![format!("record-count: window {} carried {n}", self.windows)]
    }
}

struct Embedder {
    lines: Vec<String>,
}

impl Hooks for Embedder {
    fn stages(&mut self) -> Result<Vec<Box<dyn Stage>>, CollectError> {
        Ok(vec![Box::new(RecordCount {
            windows: 0,
            total: 0,
        })])
    }

    fn event(&mut self, event: Event<'_>) {
        if let Event::Warning(w) = event {
            self.lines.push(w.to_string());
        }
    }
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("collector/tests/data")
        .join(name)
}

#[test]
fn a_stage_the_collector_does_not_name_adds_its_part_and_its_lines() {
    let dir = std::env::temp_dir().join(format!("pg-third-stage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let opts = Options {
        manifest: data("rxe-6.12.manifest.yaml"),
        replay: Some(data("rxe-6.12.replay.jsonl")),
        replay_window: 5,
        out: dir.join("snapshots.jsonl"),
        proc_root: None,
        ..Options::default()
    };
    let mut hooks = Embedder { lines: Vec::new() };
    collector::run(&opts, &mut hooks).expect("run");
    let lines: Vec<Value> = std::fs::read_to_string(&opts.out)
        .expect("snapshots")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert!(lines.len() >= 2, "{} snapshots", lines.len());
    let mut total = 0;
    for (i, l) in lines.iter().enumerate() {
        let n = l["records"].as_array().expect("records").len() as u64;
        total += n;
        let part = l["port_counters"]
            .as_array()
            .and_then(|v| v.iter().find(|c| c["device"] == "stage0"))
            .unwrap_or_else(|| panic!("snapshot {i}: no stage0 row: {l}"));
        assert_eq!(
            (part["delta"].as_u64(), part["total"].as_u64()),
            (Some(n), Some(total))
        );
        let want = format!("record-count: window {} carried {n}", i + 1);
        assert!(
            hooks.lines.contains(&want),
            "no line '{want}': {:?}",
            hooks.lines
        );
    }
    assert!(total > 0, "the recording has records");
    let _ = std::fs::remove_dir_all(&dir);
}

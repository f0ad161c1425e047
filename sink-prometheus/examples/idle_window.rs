//! The user-space work of idle windows, on the host (no BPF, no sleep): the pipeline's
//! snapshot, the line and its write, the exposition's update, for windows in which nothing
//! happened, as the live loop does them after each wake-up.
//!
//!   cargo run --release -p sink-prometheus --example idle_window -- MANIFEST WINDOWS OUT.jsonl
//!
//! Count its instructions with `valgrind --tool=callgrind` (deterministic, unlike times in the
//! TCG guest) at two window counts: the difference over the difference of windows is the
//! user-space cost of one idle window (the kernel's part, the wake-up and the write, is not in
//! it). Prints the wall time per window as well.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use collector::{
    AttachStatus, JsonlSink, KernelTotals, Pipeline, PipelineConfig, ProbeTable, Sink,
};
use sink_prometheus::PrometheusSink;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, manifest, windows, out] = &args[..] else {
        return Err("usage: idle_window MANIFEST WINDOWS OUT.jsonl".into());
    };
    let windows: u64 = windows.parse()?;
    let text = std::fs::read_to_string(manifest)?;
    let table = Arc::new(ProbeTable::from_manifest_text(&text, manifest)?);
    let mut pipe = Pipeline::new(
        table.clone(),
        PipelineConfig {
            batch_cap: 10_000,
            host: "guest".into(),
            kernel: "6.12.117+deb12-amd64".into(),
            seq_from_zero: true,
            derive_counters: false,
        },
    );
    pipe.set_attached(
        table
            .probes
            .iter()
            .map(|p| AttachStatus {
                probe: p.id,
                function: p.function.clone(),
                module: p.module.clone(),
                attached: true,
                reason: None,
                mechanism: None,
                symbols: Vec::new(),
            })
            .collect(),
    );
    // the sinks of a run with `--out OUT --metrics 127.0.0.1:0`, in the run loop's order
    let mut jsonl = JsonlSink::new(std::path::Path::new(out), 64 << 20, 5);
    let mut metrics = PrometheusSink::serve("127.0.0.1:0".parse()?)?;
    // counters that moved once (the first window), then stand still: the live source hands
    // on the same allocation while nothing ends
    let k = Arc::new(KernelTotals {
        calls: table.probes.iter().map(|p| (p.id, 3)).collect(),
        failures: table.probes.iter().map(|p| (p.id, 0)).collect(),
        ..KernelTotals::default()
    });
    pipe.start_window(SystemTime::now());
    let t0 = Instant::now();
    for n in 0..windows {
        let mut s = pipe.snapshot(&k, SystemTime::now(), false);
        jsonl.write(&s)?;
        s.totals.snapshots = n + 1;
        metrics.write(&s)?;
    }
    let per = t0.elapsed().as_secs_f64() * 1e6 / windows.max(1) as f64;
    println!("{windows} windows, {per:.2} us each (the first one busy)");
    Ok(())
}

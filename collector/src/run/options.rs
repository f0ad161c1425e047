//! What `probegen collect` is asked to do (the CLI fills it; tests and embedders too). The
//! options of a sink added by the embedder (ClickHouse) are that sink's own.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Options {
    pub manifest: PathBuf,
    /// compiled probes.bpf.o (live)
    pub object: Option<PathBuf>,
    /// replay file instead of BPF
    pub replay: Option<PathBuf>,
    /// replay without counters: records per window (0: one window)
    pub replay_window: usize,
    pub interval: Duration,
    /// ring buffer drain period while records keep coming
    pub drain: Duration,
    /// longest sleep while idle: the first record after an idle spell wakes the collector at
    /// once, so this only bounds the sleep (the next window bounds it too)
    pub idle_wait: Duration,
    /// JSONL path, `-` for stdout
    pub out: PathBuf,
    pub rotate_bytes: u64,
    pub rotate_keep: usize,
    pub strict: bool,
    pub duration: Option<Duration>,
    pub ringbuf_bytes: Option<u32>,
    pub batch_cap: usize,
    pub job_vars: Vec<String>,
    /// write a replay file of what was read (live)
    pub record: Option<PathBuf>,
    /// keep serving metrics this long after a replay ended (or until a signal)
    pub linger: Option<Duration>,
    /// /proc for job correlation (None: off; the default for replay)
    pub proc_root: Option<PathBuf>,
    /// at exit, how long the sinks that queue (ClickHouse) keep sending
    pub sink_flush: Duration,
    /// the host name the snapshots carry (default: this host's, or the recording's)
    pub host: Option<String>,
    /// replay: pause this long after each window (a recording played out over time)
    pub replay_pace: Option<Duration>,
    /// live: the control socket (`release MODULE` before a driver unloads)
    pub control: Option<PathBuf>,
    /// `--baseline`: trace sampled successes of the uverbs handlers (live only)
    pub baseline: Option<baseline::BaselineConfig>,
    /// `--bundle`: the set chosen and how it matched (each snapshot's `set`, live)
    pub set: Option<wire::RunningSet>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            manifest: PathBuf::new(),
            object: None,
            replay: None,
            replay_window: 0,
            interval: Duration::from_secs(5),
            drain: Duration::from_millis(10),
            idle_wait: Duration::from_secs(60),
            out: PathBuf::from("probegen-snapshots.jsonl"),
            rotate_bytes: 64 << 20,
            rotate_keep: 5,
            strict: false,
            duration: None,
            ringbuf_bytes: Some(4 << 20),
            batch_cap: 10_000,
            job_vars: crate::procinfo::DEFAULT_JOB_VARS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            record: None,
            linger: None,
            proc_root: Some(PathBuf::from("/proc")),
            sink_flush: Duration::from_secs(5),
            host: None,
            replay_pace: None,
            control: None,
            baseline: None,
            set: None,
        }
    }
}

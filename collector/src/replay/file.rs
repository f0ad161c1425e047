//! Replay files: recorded ring-buffer samples (and optionally the kernel counters) fed through
//! the same pipeline, with no BPF at all. `probegen collect --record FILE` writes them live;
//! `probegen collect --replay FILE` reads them.
//!
//! Two formats, told apart by the file name:
//!
//! **JSONL** (any name but `*.bin` / `*.raw`), one object per line; blank lines and `#` lines are ignored:
//! ```text
//! {"replay":"probegen/v1","host":"h","kernel":"6.12.117+deb12-amd64","manifest_hash":"sha256:..."}
//! {"rec":"<192 hex digits: the 96-byte struct pg_record exactly as the ring buffer gave it>"}
//! {"counters":{"calls":{"25":3},"failures":{"25":1},"errnos":{"25:14":1},"drops":0}}
//! ```
//! The header is optional (it supplies `host`, `kernel`, `manifest_hash` of the snapshots). A
//! `counters` line holds the kernel's cumulative totals (summed over CPUs; `errnos` keyed
//! `probe:errno`) and closes a window: one snapshot per `counters` line. Records after the last
//! one go into a final snapshot. A file without any `counters` line gets its counters derived
//! from the records (calls = failures = records per probe) and is cut into windows of
//! `--replay-window` records (default: one window).
//!
//! **Raw** (`*.bin` or `*.raw`): concatenated 96-byte records, counters derived as above.

/// Whether a replay file name denotes the raw format.
pub(crate) fn is_raw_name(path: &std::path::Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("bin" | "raw")
    )
}

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufWriter, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use wire::{hex, unhex, KernelTotals, RECORD_SIZE};

use crate::error::ReplayError;

pub(crate) const REPLAY_SCHEMA: &str = "probegen/v1";

/// Longest JSONL line read: a record line is 203 bytes, a counters line for every probe of
/// the largest set a few KB. A longer line (or a file without newlines, `/dev/zero`) is an
/// error, never a buffer grown to the size of the file.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub replay: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub kernel: String,
    #[serde(default)]
    pub manifest_hash: String,
}

/// Counters as they appear in a replay file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CountersJson {
    #[serde(default)]
    pub calls: BTreeMap<String, u64>,
    #[serde(default)]
    pub failures: BTreeMap<String, u64>,
    #[serde(default)]
    pub errnos: BTreeMap<String, u64>,
    #[serde(default)]
    pub drops: u64,
    /// Kernel drops per probe id (absent in recordings made before it existed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub drops_by_probe: BTreeMap<String, u64>,
    /// How the live window read them (absent in older recordings: not fenced).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fenced: bool,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_flight: u64,
    /// Runs the kernel skipped per probe id (absent when none, and in older recordings).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub missed: BTreeMap<String, u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl CountersJson {
    pub(crate) fn from_totals(k: &KernelTotals) -> Self {
        let m = |x: &BTreeMap<u32, u64>| x.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        CountersJson {
            calls: m(&k.calls),
            failures: m(&k.failures),
            errnos: k
                .errnos
                .iter()
                .map(|(&(p, e), &v)| (format!("{p}:{e}"), v))
                .collect(),
            drops: k.drops,
            drops_by_probe: m(&k.drops_by_probe),
            fenced: k.fenced,
            in_flight: k.in_flight,
            missed: m(&k.missed),
        }
    }

    pub(crate) fn to_totals(&self) -> Result<KernelTotals, CounterKeyError> {
        let num = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| CounterKeyError::NotProbeId(s.to_string()))
        };
        let m = |x: &BTreeMap<String, u64>| -> Result<BTreeMap<u32, u64>, CounterKeyError> {
            x.iter().map(|(k, v)| Ok((num(k)?, *v))).collect()
        };
        let mut errnos = BTreeMap::new();
        for (k, v) in &self.errnos {
            let (p, e) = k
                .split_once(':')
                .ok_or_else(|| CounterKeyError::NotErrnoKey(k.clone()))?;
            errnos.insert((num(p)?, num(e)?), *v);
        }
        Ok(KernelTotals {
            calls: m(&self.calls)?,
            failures: m(&self.failures)?,
            errnos,
            drops: self.drops,
            drops_by_probe: m(&self.drops_by_probe)?,
            fenced: self.fenced,
            in_flight: self.in_flight,
            missed: m(&self.missed)?,
        })
    }
}

/// One item of a replay file.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    Header(Header),
    Record(&'a [u8]),
    Counters(KernelTotals),
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    rec: Option<String>,
    #[serde(default)]
    counters: Option<CountersJson>,
    #[serde(default)]
    replay: Option<String>,
}

/// A counters key that is not a probe id (or `probe:errno`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum CounterKeyError {
    #[error("counter key `{0}` is not a probe id")]
    NotProbeId(String),
    #[error("errnos key `{0}`: expected probe:errno")]
    NotErrnoKey(String),
}

/// Reads a replay stream one event at a time ([`Reader::next_event`]).
pub(crate) struct Reader<R: Read> {
    input: io::BufReader<R>,
    raw: bool,
    /// raw: the chunk read last, the next record in it, bytes before it, input exhausted
    chunk: Vec<u8>,
    chunk_len: usize,
    chunk_pos: usize,
    offset: u64,
    eof: bool,
    /// JSONL: the current line, a record's bytes, the line number
    line: Vec<u8>,
    bytes: Vec<u8>,
    line_no: usize,
}

impl<R: Read> Reader<R> {
    /// `raw`: concatenated records (see [`is_raw_name`]); else JSON lines.
    pub(crate) fn new(input: R, raw: bool) -> Self {
        Reader {
            input: io::BufReader::with_capacity(1 << 16, input),
            raw,
            chunk: if raw {
                vec![0u8; RECORD_SIZE * 1024]
            } else {
                Vec::new()
            },
            chunk_len: 0,
            chunk_pos: 0,
            offset: 0,
            eof: false,
            line: Vec::new(),
            bytes: Vec::with_capacity(RECORD_SIZE),
            line_no: 0,
        }
    }

    /// The next event, `None` at the end. Errors name the line (JSONL) or offset (raw).
    pub(crate) fn next_event(&mut self) -> Result<Option<Event<'_>>, ReplayError> {
        if self.raw {
            self.next_raw()
        } else {
            self.next_line()
        }
    }

    fn next_raw(&mut self) -> Result<Option<Event<'_>>, ReplayError> {
        if self.chunk_pos >= self.chunk_len {
            if self.eof {
                return Ok(None);
            }
            let n = read_full(&mut self.input, &mut self.chunk)?;
            if n % RECORD_SIZE != 0 {
                return Err(ReplayError::TrailingBytes {
                    bytes: n % RECORD_SIZE,
                    offset: self.offset + (n - n % RECORD_SIZE) as u64,
                });
            }
            self.offset += n as u64;
            self.eof = n < self.chunk.len();
            (self.chunk_len, self.chunk_pos) = (n, 0);
            if n == 0 {
                return Ok(None);
            }
        }
        let at = self.chunk_pos;
        self.chunk_pos += RECORD_SIZE;
        Ok(Some(Event::Record(&self.chunk[at..at + RECORD_SIZE])))
    }

    /// Reads lines up to the next one that is not blank or a comment; `false` at the end.
    fn read_line(&mut self) -> Result<bool, ReplayError> {
        loop {
            self.line.clear();
            let n = (&mut self.input)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut self.line)?;
            if n == 0 {
                return Ok(false);
            }
            self.line_no += 1;
            let no = self.line_no;
            let err = |reason: &str| ReplayError::Line {
                line: no,
                reason: reason.to_string(),
            };
            if self.line.len() > MAX_LINE_BYTES {
                return Err(err(&format!(
                    "longer than {MAX_LINE_BYTES} bytes: expected one JSON object per line"
                )));
            }
            let l = std::str::from_utf8(&self.line)
                .map_err(|_| err("not valid UTF-8: expected one JSON object per line"))?
                .trim();
            if no == 1 && l.starts_with('\u{feff}') {
                return Err(err(
                    "starts with a UTF-8 byte-order mark: expected JSON lines without a BOM",
                ));
            }
            if !(l.is_empty() || l.starts_with('#')) {
                return Ok(true);
            }
        }
    }

    fn next_line(&mut self) -> Result<Option<Event<'_>>, ReplayError> {
        if !self.read_line()? {
            return Ok(None);
        }
        let no = self.line_no;
        let at = |reason: String| ReplayError::Line { line: no, reason };
        // read_line checked the line is UTF-8
        let l = std::str::from_utf8(&self.line).unwrap_or_default().trim();
        // fast path for the common record line
        if let Some(h) = l
            .strip_prefix("{\"rec\":\"")
            .and_then(|s| s.strip_suffix("\"}"))
        {
            self.bytes.clear();
            self.bytes
                .extend(unhex(h).ok_or_else(|| at("rec: not hex".into()))?);
            return Ok(Some(Event::Record(&self.bytes)));
        }
        let parsed: Line = serde_json::from_str(l).map_err(|e| at(e.to_string()))?;
        if let Some(h) = parsed.rec {
            self.bytes.clear();
            self.bytes
                .extend(unhex(&h).ok_or_else(|| at("rec: not hex".into()))?);
            Ok(Some(Event::Record(&self.bytes)))
        } else if let Some(c) = parsed.counters {
            let k = c.to_totals().map_err(|e| at(e.to_string()))?;
            Ok(Some(Event::Counters(k)))
        } else if parsed.replay.is_some() {
            header(l).map_err(at).map(Some)
        } else {
            Err(at("expected a rec, counters or replay line".into()))
        }
    }
}

fn header(l: &str) -> Result<Event<'static>, String> {
    let h: Header = serde_json::from_str(l).map_err(|e| e.to_string())?;
    if h.replay != REPLAY_SCHEMA {
        return Err(format!("replay `{}`: expected `{REPLAY_SCHEMA}`", h.replay));
    }
    Ok(Event::Header(h))
}

/// Reads a replay stream, calling `f` for each event (stops at `f`'s first error).
pub fn read<R: Read>(
    input: R,
    raw: bool,
    mut f: impl FnMut(Event<'_>) -> Result<(), ReplayError>,
) -> Result<(), ReplayError> {
    let mut r = Reader::new(input, raw);
    while let Some(e) = r.next_event()? {
        f(e)?;
    }
    Ok(())
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// How long the `counters` lines of idle windows may wait in the recorder's buffer.
pub(crate) const IDLE_FLUSH_EVERY: Duration = Duration::from_secs(30);

/// Writes a JSONL replay file (`--record`).
///
/// Every window's records and `counters` line are written out (flushed) when the window
/// closes, except in a window in which nothing happened (no record, the counters as before):
/// its `counters` line, the last one again, waits in the buffer until a window that recorded
/// something, until the oldest waiting line is [`IDLE_FLUSH_EVERY`] old, or [`Recorder::flush`]
/// (at exit). So a crash of the collector can lose at most those repeated lines of the last
/// [`IDLE_FLUSH_EVERY`] and one `--interval` (idle windows at the end of the recording), never a
/// record or a counter that moved.
pub(crate) struct Recorder<W: Write> {
    out: BufWriter<W>,
    /// the last counters written and their line (idle windows write the same line again)
    last_counters: Option<(Arc<KernelTotals>, Vec<u8>)>,
    /// records written since the last flush
    records_pending: bool,
    /// when the oldest idle `counters` line still in the buffer was written
    idle_since: Option<Instant>,
}

impl<W: Write> Recorder<W> {
    pub(crate) fn new(w: W, header: &Header) -> io::Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 16, w);
        serde_json::to_writer(&mut out, header)?;
        out.write_all(b"\n")?;
        Ok(Recorder {
            out,
            last_counters: None,
            records_pending: false,
            idle_since: None,
        })
    }

    pub(crate) fn record(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.records_pending = true;
        self.out.write_all(b"{\"rec\":\"")?;
        self.out.write_all(hex(bytes).as_bytes())?;
        self.out.write_all(b"\"}\n")
    }

    /// Writes a `counters` line (closing a window) and flushes, unless nothing happened in the
    /// window (see [`Recorder`]).
    pub(crate) fn counters(&mut self, k: &Arc<KernelTotals>) -> io::Result<()> {
        let mut unchanged = true;
        let line = match self.last_counters.take() {
            Some((last, line)) if Arc::ptr_eq(&last, k) || last == *k => (last, line),
            _ => {
                unchanged = false;
                let mut line = b"{\"counters\":".to_vec();
                serde_json::to_writer(&mut line, &CountersJson::from_totals(k))?;
                line.extend_from_slice(b"}\n");
                (k.clone(), line)
            }
        };
        let written = self.out.write_all(&line.1);
        self.last_counters = Some(line);
        written?;
        if unchanged && !self.records_pending {
            let now = Instant::now();
            let oldest = *self.idle_since.get_or_insert(now);
            if now.duration_since(oldest) < IDLE_FLUSH_EVERY {
                return Ok(());
            }
        }
        self.flush()
    }

    /// Writes out everything buffered.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        // on an error what was not written stays buffered, and the next window tries again
        self.out.flush()?;
        self.records_pending = false;
        self.idle_since = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_jsonl_and_raw() {
        let rec = [7u8; RECORD_SIZE];
        let k = KernelTotals {
            calls: [(25, 3)].into(),
            failures: [(25, 1)].into(),
            errnos: [((25, 14), 1)].into(),
            drops: 2,
            fenced: true,
            in_flight: 1,
            ..KernelTotals::default()
        };
        let h = Header {
            replay: REPLAY_SCHEMA.into(),
            host: "guest".into(),
            ..Default::default()
        };
        let mut buf = Vec::new();
        {
            let mut r = Recorder::new(&mut buf, &h).expect("rec");
            r.record(&rec).expect("w");
            r.counters(&Arc::new(k.clone())).expect("w");
            r.record(&rec).expect("w");
            r.flush().expect("f");
        }
        let text = String::from_utf8(buf.clone()).expect("utf8");
        assert!(text.contains("\"errnos\":{\"25:14\":1}"), "{text}");
        let mut seen = Vec::new();
        read(&buf[..], false, |e| {
            seen.push(match e {
                Event::Header(h) => format!("H{}", h.host),
                Event::Record(b) => format!("R{}", b.len()),
                Event::Counters(c) => format!("C{}", c == k),
            });
            Ok(())
        })
        .expect("read");
        assert_eq!(seen, ["Hguest", "R96", "Ctrue", "R96"]);

        let raw: Vec<u8> = (0..3).flat_map(|_| rec).collect();
        let mut n = 0;
        read(&raw[..], true, |e| {
            assert_eq!(e, Event::Record(&rec));
            n += 1;
            Ok(())
        })
        .expect("raw");
        assert_eq!(n, 3);
        assert!(read(&raw[..100], true, |_| Ok(())).is_err());
    }

    #[test]
    fn repeated_counters_write_the_same_line() {
        let k = KernelTotals {
            calls: [(25, 3)].into(),
            failures: [(25, 1)].into(),
            errnos: [((25, 14), 1)].into(),
            drops: 0,
            drops_by_probe: [(25, 0)].into(),
            ..KernelTotals::default()
        };
        let h = Header::default();
        let mut once = Vec::new();
        Recorder::new(&mut once, &h)
            .and_then(|mut r| r.counters(&Arc::new(k.clone())))
            .expect("write");
        let line = &once[once.iter().position(|&b| b == b'\n').expect("header") + 1..];
        let mut buf = Vec::new();
        {
            let mut r = Recorder::new(&mut buf, &h).expect("rec");
            let shared = Arc::new(k.clone());
            r.counters(&shared).expect("w");
            r.counters(&shared).expect("w");
            r.counters(&Arc::new(k.clone())).expect("w");
        }
        let text = String::from_utf8(buf).expect("utf8");
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(lines.len(), 3);
        for l in lines {
            assert_eq!(format!("{l}\n").as_bytes(), line);
        }
    }

    /// The bytes a recorder wrote out so far (past its buffer).
    #[derive(Clone, Default)]
    struct WrittenOut(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl Write for WrittenOut {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl WrittenOut {
        fn lines(&self) -> usize {
            self.0.borrow().iter().filter(|&&b| b == b'\n').count()
        }
    }

    #[test]
    fn idle_counters_lines_wait_in_the_buffer() {
        let k = Arc::new(KernelTotals {
            calls: [(25, 3)].into(),
            ..Default::default()
        });
        let out = WrittenOut::default();
        let mut r = Recorder::new(out.clone(), &Header::default()).expect("rec");
        // the first counters line is written out (header + counters)
        r.counters(&k).expect("w");
        assert_eq!(out.lines(), 2);
        // idle windows: the same line again, buffered
        r.counters(&k).expect("w");
        r.counters(&k).expect("w");
        assert_eq!(out.lines(), 2);
        // a window with a record: written out with the idle lines before it
        r.record(&[7u8; RECORD_SIZE]).expect("w");
        r.counters(&k).expect("w");
        assert_eq!(out.lines(), 6);
        // counters that moved: written out
        r.counters(&k).expect("w");
        let moved = Arc::new(KernelTotals {
            calls: [(25, 4)].into(),
            ..Default::default()
        });
        r.counters(&moved).expect("w");
        assert_eq!(out.lines(), 8);
        // the oldest idle line is IDLE_FLUSH_EVERY old: written out
        r.counters(&moved).expect("w");
        r.idle_since = Instant::now().checked_sub(IDLE_FLUSH_EVERY);
        r.counters(&moved).expect("w");
        assert_eq!(out.lines(), 10);
        // at exit
        r.counters(&moved).expect("w");
        assert_eq!(out.lines(), 10);
        r.flush().expect("flush");
        assert_eq!(out.lines(), 11);
    }

    #[test]
    fn endless_line_is_an_error_not_an_allocation() {
        let zeros = std::io::repeat(0).take(8 * MAX_LINE_BYTES as u64);
        let e = read(zeros, false, |_| Ok(()))
            .expect_err("too long")
            .to_string();
        assert!(e.starts_with("line 1: longer than"), "{e}");
    }

    #[test]
    fn errors_name_the_line() {
        let e = read(
            &b"{\"replay\":\"probegen/v1\"}\n{\"rec\":\"zz\"}\n"[..],
            false,
            |_| Ok(()),
        );
        assert_eq!(
            e.map_err(|e| e.to_string()),
            Err("line 2: rec: not hex".into())
        );
        let e = read(&b"\n# c\n{\"what\":1}\n"[..], false, |_| Ok(()));
        assert!(e.is_err_and(|e| e.to_string().starts_with("line 3:")));
        let e = read(
            &b"{\"counters\":{\"calls\":{\"x\":1}}}\n"[..],
            false,
            |_| Ok(()),
        );
        assert!(e.is_err_and(|e| e.to_string().contains("not a probe id")));
        assert!(read(&b""[..], false, |_| Ok(())).is_ok());
    }
}

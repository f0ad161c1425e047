//! The per-file facts cache: what [`crate::source`] extracts from one file (definitions, calls,
//! macros, ops initializers, uverbs tables, and the file's own gaps), kept on disk so that a
//! second run over an unchanged tree parses nothing.
//!
//! An entry's key is an XXH3-128 hash over everything the extraction reads: the analyzer's own
//! build (a hash of its sources, so a changed parser never trusts old facts), the file's path
//! (headers and `.c` files are treated differently), its bytes, and the value of every `CONFIG_`
//! symbol its text mentions (a superset of the symbols its `#if`s read: the preprocessor looks up
//! no other name). A changed file or a changed symbol is a different key, so the stale entry is
//! simply not found; the bound evicts it later.
//!
//! XXH3-128, not a cryptographic hash (SHA-256 until format 3), for the keys and the checksums:
//! a key tells a changed input from an unchanged one and a checksum a damaged record from a whole
//! one, and 128 bits leave an accidental collision out of reach. Neither guards against an
//! attacker: whoever can write the kernel tree already decides its facts, and whoever can write
//! this directory can write any entry with a matching checksum. SHA-256 of every file's bytes and
//! every payload was 8 ms of a cold load's 1.1 s summed on 6.12 (SHA-NI, 1.8 GB/s); XXH3 reads
//! them at memory speed.
//!
//! Entries live in packs, `<dir>/<id>.pack`: one file per run that parsed something (or a few,
//! see [`pack_bytes`]), so a cold run creates one inode instead of one per source file (on the
//! 6.12 tree, 556 files and up to 256 directories: a fifth of a cold run's CPU went to ext4
//! creating them). A pack is written under a temporary name and renamed, then never changed:
//! concurrent runs each add their own pack and see either nothing or a whole one.
//!
//! ```text
//! probegen-facts-pack 3 <records> <index bytes> <XXH3-128 of the index>\n
//! <key> <offset> <length> <XXH3-128 of the payload>\n    (one index line per record, by key)
//! <payloads: postcard, back to back; offsets from the end of the index>
//! ```
//!
//! Payloads are [postcard](https://docs.rs/postcard) (serde's compact binary form), not JSON
//! (format 1): encoding them as JSON was 34 ms of a cold load's 1.6 s summed on 6.12, as much as
//! the error sites; nothing but this cache reads them. A pack of another format (an older
//! probegen's) fails the header check and is removed quietly, not counted as damaged.
//!
//! A pack whose header or index fails its check is dropped (deleted; its files are parsed
//! again). A record that fails any check (short, checksum, decoding, path) is counted as damaged and
//! never used; the file is parsed again and its entry goes into this run's pack. The bound
//! evicts whole packs, least recently used first: entries still needed come back in the next
//! run's pack, which is also how many small packs get compacted.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{xxh3_128, Xxh3};

use crate::completeness::Degradation;
use crate::kconfig::KernelConfig;
use crate::model::FileFacts;

/// The analyzer build the facts come from (set by build.rs from the crate's sources).
const ANALYZER_BUILD: &str = env!("PROBEGEN_ANALYZER_BUILD");
const MAGIC: &str = "probegen-facts-pack 3";
/// The default bound on the cache directory (the 6.12 tree's facts take about 7 MB).
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024 * 1024;
/// Eviction goes down to this fraction of the bound, so a run just over it does not evict again.
const EVICT_TO_PERCENT: u64 = 80;
/// Most packs kept: every run that parses something adds one, and each is opened (its index
/// read) by every run; past this the least recently used go, and their live entries come back
/// in the next run's pack.
const MAX_PACKS: usize = 256;
/// A hit in a pack older than this refreshes its mtime, which orders eviction (least recently
/// used first) without a write per hit.
const TOUCH_AFTER: Duration = Duration::from_secs(24 * 3600);
/// Temporary files older than this were left by a run that died; the bound removes them.
const STALE_TEMP: Duration = Duration::from_secs(3600);
/// Longest index line accepted: `<32 hex> <offset> <length> <32 hex>`.
const MAX_INDEX_LINE: usize = 200;
/// A key's and a checksum's length: XXH3-128 in hex.
const HEX_LEN: usize = 32;

/// A load's packs being written ([`FactsCache::finish_in_background`]): what the cache did, once
/// asked, and the write awaited at the latest when this is dropped, so a run never ends before
/// its pack is in place.
#[derive(Debug)]
pub(crate) struct CacheWrite {
    /// The writer, until its stats are asked for.
    thread: Mutex<Option<std::thread::JoinHandle<CacheStats>>>,
    stats: std::sync::OnceLock<CacheStats>,
}

impl CacheWrite {
    /// What the cache did in the load, the write awaited.
    pub(crate) fn stats(&self) -> CacheStats {
        *self.stats.get_or_init(|| {
            let thread = self.thread.lock().ok().and_then(|mut t| t.take());
            // A panic in the writer ends the process (the binary's hook) before this.
            thread.and_then(|t| t.join().ok()).unwrap_or_default()
        })
    }
}

impl Drop for CacheWrite {
    fn drop(&mut self) {
        self.stats();
    }
}

/// The cache out of its shared slot, once.
fn take(cache: &Mutex<Option<FactsCache>>) -> Option<FactsCache> {
    cache.lock().ok().and_then(|mut c| c.take())
}

/// What one file's extraction produced: its facts and its gaps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FileEntry {
    pub facts: FileFacts,
    pub gaps: Vec<Degradation>,
}

/// Where the cache lives and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheLocation {
    pub dir: PathBuf,
    pub max_bytes: u64,
}

/// The cache during one load: the packs found at the start, the entries this run adds, and what
/// it did so far (shared by the parse threads).
#[derive(Debug)]
pub(crate) struct FactsCache {
    dir: PathBuf,
    max_bytes: u64,
    packs: Vec<Pack>,
    /// Key -> where its record is, newest pack first.
    index: HashMap<String, Vec<Slot>>,
    /// Entries parsed in this run, written as packs by [`Self::finish`].
    pending: Mutex<Vec<Pending>>,
    stats: CacheCounters,
}

/// One entry of this run's packs: its key, encoded payload and the payload's checksum (taken on
/// the parse thread that made it, so the serial pack write only copies bytes).
#[derive(Debug)]
struct Pending {
    key: String,
    payload: Vec<u8>,
    sum: String,
}

/// One pack opened for reading.
#[derive(Debug)]
struct Pack {
    path: PathBuf,
    file: File,
    /// Where the payloads start.
    data_start: u64,
    /// A record of it was used in this run.
    used: AtomicBool,
}

/// Where one record is: its pack, offset and length in the payloads, and the payload's checksum.
#[derive(Debug, Clone)]
struct Slot {
    pack: usize,
    offset: u64,
    len: u64,
    sum: String,
}

#[derive(Debug, Default)]
struct CacheCounters {
    reused: AtomicUsize,
    parsed: AtomicUsize,
    damaged: AtomicUsize,
    damaged_packs: AtomicUsize,
    /// Entries that could not be serialized (added to the pack writes that failed).
    unserializable: AtomicUsize,
}

/// What the cache did in one load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Files whose facts came from the cache.
    pub reused: usize,
    /// Files parsed (no entry, or a damaged one).
    pub parsed: usize,
    /// Records that failed a check and were rebuilt.
    pub damaged: usize,
    /// Packs whose header or index failed its check, deleted.
    pub damaged_packs: usize,
    /// Entries written.
    pub written: usize,
    /// Entries that could not be written (the run goes on without them).
    pub write_errors: usize,
    /// Entries removed (with their packs) to keep the directory under its bound.
    pub evicted: usize,
}

impl std::fmt::Display for CacheStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reused, {} parsed, {} damaged entries rebuilt, {} written, {} evicted",
            self.reused, self.parsed, self.damaged, self.written, self.evicted
        )?;
        if self.damaged_packs > 0 {
            write!(f, ", {} damaged packs dropped", self.damaged_packs)?;
        }
        if self.write_errors > 0 {
            write!(f, ", {} not writable", self.write_errors)?;
        }
        Ok(())
    }
}

/// The key of one file's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntryKey(String);

impl FactsCache {
    /// Opens every pack under the location (reads their indexes; payloads are read on use).
    pub(crate) fn open(location: &CacheLocation) -> Self {
        let mut cache = Self {
            dir: location.dir.clone(),
            max_bytes: location.max_bytes,
            packs: Vec::new(),
            index: HashMap::new(),
            pending: Mutex::new(Vec::new()),
            stats: CacheCounters::default(),
        };
        for (_, path) in packs_newest_first(&cache.dir) {
            cache.add_pack(path);
        }
        cache
    }

    fn add_pack(&mut self, path: PathBuf) {
        let Ok(file) = File::open(&path) else {
            return; // evicted by a concurrent run since the listing
        };
        let Some((data_start, records)) = read_index(&file) else {
            // A pack of another format (an older probegen's) is stale, not damaged: removed
            // quietly, its files parsed again once.
            if !is_other_format(&file) {
                self.stats.damaged_packs.fetch_add(1, Ordering::Relaxed);
            }
            let _ = std::fs::remove_file(&path);
            return;
        };
        let pack = self.packs.len();
        for (key, mut slot) in records {
            slot.pack = pack;
            self.index.entry(key).or_default().push(slot);
        }
        self.packs.push(Pack {
            path,
            file,
            data_start,
            used: AtomicBool::new(false),
        });
    }

    /// The key of `rel` with contents `bytes` (as decoded to `text`) under `config`.
    pub(crate) fn key(rel: &str, bytes: &[u8], text: &str, config: &KernelConfig) -> EntryKey {
        let mut h = Xxh3::new();
        for part in [MAGIC.as_bytes(), ANALYZER_BUILD.as_bytes(), rel.as_bytes()] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
        for name in config_symbols(text) {
            // `IS_MODULE(CONFIG_X)` reads CONFIG_X_MODULE, which is CONFIG_X=m.
            let base = name.strip_suffix("_MODULE").unwrap_or(name);
            // `{name}={letter};{base letter}\n`, fed in parts
            for part in [
                name,
                "=",
                config.kbuild_letter(name),
                ";",
                config.kbuild_letter(base),
                "\n",
            ] {
                h.update(part.as_bytes());
            }
        }
        EntryKey(hex(&h.digest128().to_be_bytes()))
    }

    /// The entry for `key`, when a record of it passes every check (newest pack first).
    pub(crate) fn get(&self, key: &EntryKey, rel: &str) -> Option<FileEntry> {
        for slot in self.index.get(&key.0)? {
            match self.read_record(slot).filter(|e| e.facts.path == rel) {
                Some(entry) => {
                    self.stats.reused.fetch_add(1, Ordering::Relaxed);
                    self.packs[slot.pack].used.store(true, Ordering::Relaxed);
                    return Some(entry);
                }
                None => {
                    self.stats.damaged.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        None
    }

    fn read_record(&self, slot: &Slot) -> Option<FileEntry> {
        let pack = &self.packs[slot.pack];
        let mut payload = vec![0u8; usize::try_from(slot.len).ok()?];
        pack.file
            .read_exact_at(&mut payload, pack.data_start.checked_add(slot.offset)?)
            .ok()?;
        if checksum(&payload) != slot.sum {
            return None;
        }
        postcard::from_bytes(&payload).ok()
    }

    /// Counts a file parsed and keeps its entry for this run's pack; an entry that cannot be
    /// serialized only costs the next run a parse.
    pub(crate) fn put(&self, key: &EntryKey, entry: &FileEntry) {
        self.stats.parsed.fetch_add(1, Ordering::Relaxed);
        let kept = postcard::to_allocvec(entry).ok().and_then(|payload| {
            let sum = checksum(&payload);
            let mut pending = self.pending.lock().ok()?;
            pending.push(Pending {
                key: key.0.clone(),
                payload,
                sum,
            });
            Some(())
        });
        if kept.is_none() {
            self.stats.unserializable.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// [`Self::finish`] on a thread of its own: the last serial step of a cold load, which the
    /// caller's next step (the call graph's build) overlaps.
    pub(crate) fn finish_in_background(self) -> CacheWrite {
        let cache = std::sync::Arc::new(Mutex::new(Some(self)));
        let theirs = std::sync::Arc::clone(&cache);
        let spawned = std::thread::Builder::new()
            .name("facts-cache".into())
            .spawn(move || take(&theirs).map(FactsCache::finish).unwrap_or_default());
        match spawned {
            Ok(thread) => CacheWrite {
                thread: Mutex::new(Some(thread)),
                stats: std::sync::OnceLock::new(),
            },
            // no thread: written here, now
            Err(_) => CacheWrite {
                thread: Mutex::new(None),
                stats: std::sync::OnceLock::from(
                    take(&cache).map(FactsCache::finish).unwrap_or_default(),
                ),
            },
        }
    }

    /// Ends a load: writes this run's entries as packs, refreshes the packs it used, keeps the
    /// directory under its bound, and returns what the cache did.
    pub(crate) fn finish(self) -> CacheStats {
        let pending = self.pending.into_inner().unwrap_or_default();
        let (written, write_errors) = write_packs(&self.dir, pending, pack_bytes(self.max_bytes));
        for pack in self.packs.iter().filter(|p| p.used.load(Ordering::Relaxed)) {
            touch_if_old(&pack.path);
        }
        let evicted = if written > 0 {
            enforce_bound(&self.dir, self.max_bytes)
        } else {
            0
        };
        CacheStats {
            reused: self.stats.reused.load(Ordering::Relaxed),
            parsed: self.stats.parsed.load(Ordering::Relaxed),
            damaged: self.stats.damaged.load(Ordering::Relaxed),
            damaged_packs: self.stats.damaged_packs.load(Ordering::Relaxed),
            written,
            write_errors: write_errors + self.stats.unserializable.load(Ordering::Relaxed),
            evicted,
        }
    }
}

/// Largest pack written: an eighth of the bound (at least 64 KiB, at most 64 MiB), so that
/// eviction, which removes whole packs, stays fine-grained under a small bound.
fn pack_bytes(max_bytes: u64) -> u64 {
    (max_bytes / 8).clamp(64 * 1024, 64 * 1024 * 1024)
}

/// The `.pack` files of `dir` with their mtimes, newest first (then by name).
fn packs_newest_first(dir: &Path) -> Vec<(SystemTime, PathBuf)> {
    let mut packs: Vec<(SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .map(|e| {
            let modified = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            (modified, e.path())
        })
        .collect();
    packs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    packs
}

/// Whether the pack's header names another format of these packs (`probegen-facts-pack N`, N not
/// this build's).
fn is_other_format(file: &File) -> bool {
    // by offset: reading the index moved the file's position
    let mut buf = [0u8; MAX_INDEX_LINE];
    let Ok(n) = file.read_at(&mut buf, 0) else {
        return false;
    };
    let Some(header) = std::str::from_utf8(&buf[..n])
        .ok()
        .and_then(|t| t.split_once('\n'))
        .map(|(line, _)| line)
    else {
        return false;
    };
    let prefix = MAGIC.rsplit_once(' ').map_or(MAGIC, |(p, _)| p);
    header
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix(' '))
        .and_then(|rest| rest.split(' ').next())
        .is_some_and(|version| {
            !version.is_empty()
                && version.bytes().all(|b| b.is_ascii_digit())
                && Some(version) != MAGIC.rsplit_once(' ').map(|(_, v)| v)
        })
}

/// A pack's header fields: records, index length, index checksum.
fn parse_header(line: &str) -> Option<(usize, usize, &str)> {
    let rest = line.strip_prefix(MAGIC)?.strip_prefix(' ')?;
    let mut f = rest.split(' ');
    let records = f.next()?.parse().ok()?;
    let index_len = f.next()?.parse().ok()?;
    let sum = f.next()?;
    (f.next().is_none() && sum.len() == HEX_LEN).then_some((records, index_len, sum))
}

/// A pack's header line, at most [`MAX_INDEX_LINE`] bytes, with its line break.
fn read_header_line(reader: &mut impl BufRead) -> Option<String> {
    let mut header = String::new();
    reader
        .take(MAX_INDEX_LINE as u64)
        .read_line(&mut header)
        .ok()?;
    header.ends_with('\n').then_some(header)
}

/// The payloads' start and the records of a pack whose header and index pass their checks.
fn read_index(file: &File) -> Option<(u64, Vec<(String, Slot)>)> {
    let mut reader = BufReader::new(file);
    let header = read_header_line(&mut reader)?;
    let (records, index_len, sum) = parse_header(header.strip_suffix('\n')?)?;
    let file_len = file.metadata().ok()?.len();
    if index_len > records.checked_mul(MAX_INDEX_LINE)? || index_len as u64 > file_len {
        return None;
    }
    let mut index = vec![0u8; index_len];
    reader.read_exact(&mut index).ok()?;
    if checksum(&index) != sum {
        return None;
    }
    let text = std::str::from_utf8(&index).ok()?;
    let slots: Vec<(String, Slot)> = text.lines().map(parse_index_line).collect::<Option<_>>()?;
    (slots.len() == records).then_some(((header.len() + index_len) as u64, slots))
}

fn parse_index_line(line: &str) -> Option<(String, Slot)> {
    let mut f = line.split(' ');
    let key = f.next()?.to_string();
    let slot = Slot {
        pack: 0,
        offset: f.next()?.parse().ok()?,
        len: f.next()?.parse().ok()?,
        sum: f.next()?.to_string(),
    };
    (f.next().is_none() && key.len() == HEX_LEN).then_some((key, slot))
}

/// Writes `entries` (sorted by key) as packs of at most `max_pack` bytes of payload each.
/// Returns (entries written, entries not written).
fn write_packs(dir: &Path, mut entries: Vec<Pending>, max_pack: u64) -> (usize, usize) {
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    let (mut written, mut failed) = (0, 0);
    let mut rest = entries.as_slice();
    while !rest.is_empty() {
        let mut size = 0u64;
        let n = rest
            .iter()
            .take_while(|e| {
                size += e.payload.len() as u64;
                size <= max_pack
            })
            .count()
            .max(1);
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        match write_pack(dir, chunk) {
            Ok(()) => written += chunk.len(),
            Err(_) => failed += chunk.len(),
        }
    }
    (written, failed)
}

/// One pack: built in memory, written to a temporary name, renamed into place.
fn write_pack(dir: &Path, entries: &[Pending]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut index = String::new();
    let mut offset = 0usize;
    for Pending { key, payload, sum } in entries {
        index.push_str(&format!("{key} {offset} {} {sum}\n", payload.len()));
        offset += payload.len();
    }
    let header = format!(
        "{MAGIC} {} {} {}\n",
        entries.len(),
        index.len(),
        checksum(index.as_bytes())
    );
    let name = format!("{:08x}{:016x}", std::process::id(), unique_suffix());
    let tmp = dir.join(format!(".{name}.tmp"));
    let result = (|| {
        let mut f = std::io::BufWriter::new(File::create(&tmp)?);
        f.write_all(header.as_bytes())?;
        f.write_all(index.as_bytes())?;
        for e in entries {
            f.write_all(&e.payload)?;
        }
        f.into_inner().map_err(|e| e.into_error())?;
        std::fs::rename(&tmp, dir.join(format!("{name}.pack")))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Every `CONFIG_` identifier in `text`, sorted and unique.
fn config_symbols(text: &str) -> BTreeSet<&str> {
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = BTreeSet::new();
    let mut from = 0;
    // memmem's SIMD scan: every file's key reads all of its text for these.
    let finder = memchr::memmem::Finder::new("CONFIG_");
    while let Some(at) = bytes.get(from..).and_then(|rest| finder.find(rest)) {
        let start = from + at;
        let mut end = start + "CONFIG_".len();
        while end < bytes.len() && is_ident(bytes[end]) {
            end += 1;
        }
        if start == 0 || !is_ident(bytes[start - 1]) {
            out.insert(&text[start..end]);
        }
        from = end;
    }
    out
}

/// A record's, an index's checksum: XXH3-128 in hex.
fn checksum(bytes: &[u8]) -> String {
    hex(&xxh3_128(bytes).to_be_bytes())
}

/// Lower-case hex, two digits a byte (a key and a checksum per file: `format!` per byte was a
/// tenth of the cache's time).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

fn unique_suffix() -> u64 {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (NEXT.fetch_add(1, Ordering::Relaxed) as u64) << 32 | u64::from(nanos)
}

fn touch_if_old(path: &Path) {
    let old = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > TOUCH_AFTER);
    if old {
        if let Ok(f) = std::fs::File::options().append(true).open(path) {
            let _ = f.set_modified(SystemTime::now());
        }
    }
}

/// Removes left-over temporary files and entries of the older one-file-per-entry layout, then
/// the least recently used packs until the directory holds at most [`EVICT_TO_PERCENT`] of
/// `max_bytes` and at most [`MAX_PACKS`] packs. Returns the entries removed.
fn enforce_bound(dir: &Path, max_bytes: u64) -> usize {
    let mut packs: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    let mut total = 0u64;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = e.metadata() else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let name = e.file_name().to_string_lossy().into_owned();
        if meta.is_dir() && name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
            // `<2 hex>/<62 hex>.facts`: never read by this build.
            let _ = std::fs::remove_dir_all(e.path());
        } else if name.ends_with(".tmp") {
            if modified.elapsed().is_ok_and(|age| age > STALE_TEMP) {
                let _ = std::fs::remove_file(e.path());
            }
        } else if name.ends_with(".pack") {
            total += meta.len();
            packs.push((modified, meta.len(), e.path()));
        }
    }
    packs.sort();
    let target = max_bytes / 100 * EVICT_TO_PERCENT;
    let over_count = packs.len().saturating_sub(MAX_PACKS);
    if total <= max_bytes && over_count == 0 {
        return 0;
    }
    let mut evicted = 0;
    for (i, (_, len, path)) in packs.iter().enumerate() {
        if total <= target && i >= over_count {
            break;
        }
        let records = File::open(path).ok().map_or(0, |f| pack_records(&f));
        if std::fs::remove_file(path).is_ok() {
            total = total.saturating_sub(*len);
            evicted += records;
        }
    }
    evicted
}

/// The record count a pack's header claims (0 when unreadable).
fn pack_records(file: &File) -> usize {
    read_header_line(&mut BufReader::new(file))
        .and_then(|h| Some(parse_header(h.strip_suffix('\n')?)?.0))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_symbols_are_whole_identifiers() {
        let text = "#if IS_ENABLED(CONFIG_A) && defined(CONFIG_B_MODULE)\nXCONFIG_C CONFIG_A\n";
        let got: Vec<&str> = config_symbols(text).into_iter().collect();
        assert_eq!(got, ["CONFIG_A", "CONFIG_B_MODULE"]);
    }

    #[test]
    fn a_changed_symbol_changes_the_key() {
        let text = "#ifdef CONFIG_A\nint f(void) { return 0; }\n#endif\n";
        let y = KernelConfig::parse("CONFIG_A=y\n");
        let m = KernelConfig::parse("CONFIG_A=m\n");
        let other = KernelConfig::parse("CONFIG_A=y\nCONFIG_Z=y\n");
        let k = |c: &KernelConfig| FactsCache::key("a.c", text.as_bytes(), text, c);
        assert_ne!(k(&y), k(&m));
        // A symbol the file does not mention does not matter.
        assert_eq!(k(&y), k(&other));
        assert_ne!(
            k(&y),
            FactsCache::key("b.c", text.as_bytes(), text, &y),
            "the path is part of the key"
        );
    }

    fn entry(path: &str) -> FileEntry {
        FileEntry {
            facts: FileFacts {
                path: path.into(),
                ..FileFacts::default()
            },
            gaps: Vec::new(),
        }
    }

    fn location(dir: &Path) -> CacheLocation {
        CacheLocation {
            dir: dir.to_path_buf(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// The one pack under `dir`.
    fn only_pack(dir: &Path) -> PathBuf {
        let packs = packs_newest_first(dir);
        assert_eq!(packs.len(), 1, "{packs:?}");
        packs[0].1.clone()
    }

    #[test]
    fn damaged_records_and_packs_are_refused() {
        let dir = std::env::temp_dir().join(format!("facts-cache-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = KernelConfig::default();
        let key = FactsCache::key("x.c", b"int x;", "int x;", &config);
        let other = FactsCache::key("y.c", b"int y;", "int y;", &config);
        let first = FactsCache::open(&location(&dir));
        first.put(&key, &entry("x.c"));
        first.put(&other, &entry("y.c"));
        let s = first.finish();
        assert_eq!((s.parsed, s.written), (2, 2));
        let pack = only_pack(&dir);

        let reading = FactsCache::open(&location(&dir));
        assert!(reading.get(&key, "x.c").is_some());
        assert!(
            reading.get(&key, "y.c").is_none(),
            "a record for another path"
        );
        let s = reading.finish();
        assert_eq!((s.reused, s.damaged, s.written), (1, 1, 0));

        // The records are sorted by key; the last payload byte belongs to the last one.
        let (last, last_path) = if key.0 > other.0 {
            (&key, "x.c")
        } else {
            (&other, "y.c")
        };
        let mut bytes = std::fs::read(&pack).unwrap();
        let at = bytes.len() - 2;
        bytes[at] ^= 0x20;
        std::fs::write(&pack, &bytes).unwrap();
        let flipped = FactsCache::open(&location(&dir));
        assert!(flipped.get(last, last_path).is_none(), "a flipped bit");
        std::fs::write(&pack, &bytes[..bytes.len() - 5]).unwrap();
        assert!(
            FactsCache::open(&location(&dir))
                .get(last, last_path)
                .is_none(),
            "a truncated pack"
        );
        let at = MAGIC.len() + 10;
        bytes[at] ^= 0x01;
        std::fs::write(&pack, &bytes).unwrap();
        let dropped = FactsCache::open(&location(&dir));
        assert!(dropped.get(&key, "x.c").is_none(), "a damaged header");
        assert_eq!(dropped.finish().damaged_packs, 1);
        assert!(!pack.exists(), "a damaged pack is deleted");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A pack of `records` records and about `len` bytes, last modified `age` ago.
    fn fake_pack(path: &Path, records: usize, len: usize, age: Duration) {
        let mut bytes = format!("{MAGIC} {records} 0 {}\n", "0".repeat(HEX_LEN)).into_bytes();
        bytes.resize(len, b'x');
        std::fs::write(path, bytes).unwrap();
        let f = std::fs::File::options().append(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - age).unwrap();
    }

    #[test]
    fn the_bound_evicts_the_least_recently_used_packs() {
        let dir = std::env::temp_dir().join(format!("facts-cache-bound-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ab")).unwrap();
        std::fs::write(dir.join("ab").join("old-layout.facts"), b"x").unwrap();
        for i in 0..10u64 {
            let p = dir.join(format!("{i:016}.pack"));
            fake_pack(&p, 3, 1000, Duration::from_secs(100 - i));
        }
        assert_eq!(
            enforce_bound(&dir, 5000),
            18,
            "six packs: down to 80% of 5000 bytes"
        );
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let newest: Vec<String> = (6..10).map(|i| format!("{i:016}.pack")).collect();
        assert_eq!(left, newest, "the newest four stay, the old layout goes");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_pack_count_is_bounded_too() {
        let dir = std::env::temp_dir().join(format!("facts-cache-count-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..(MAX_PACKS as u64 + 4) {
            let p = dir.join(format!("{i:016}.pack"));
            fake_pack(&p, 1, 100, Duration::from_secs(10_000 - i));
        }
        assert_eq!(enforce_bound(&dir, DEFAULT_MAX_BYTES), 4);
        assert!(!dir.join(format!("{:016}.pack", 3)).exists());
        assert!(dir.join(format!("{:016}.pack", 4)).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

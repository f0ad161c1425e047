//! The per-file facts cache: what [`crate::source`] extracts from one file (definitions, calls,
//! macros, ops initializers, uverbs tables, and the file's own gaps), kept on disk so that a
//! second run over an unchanged tree parses nothing.
//!
//! An entry's key is a SHA-256 over everything the extraction reads: the analyzer's own build
//! (a hash of its sources, so a changed parser never trusts old facts), the file's path (headers
//! and `.c` files are treated differently), its bytes, and the value of every `CONFIG_` symbol
//! its text mentions (a superset of the symbols its `#if`s read: the preprocessor looks up no
//! other name). A changed file or a changed symbol is a different key, so the stale entry is
//! simply not found; the bound evicts it later.
//!
//! An entry is one file `<dir>/<2 hex>/<62 hex>.facts`: a header line with the format and the
//! SHA-256 of the payload, then the JSON payload. It is written to a temporary name and renamed,
//! so concurrent runs see either nothing or a whole entry. An entry that fails any check (header,
//! checksum, JSON, path) is counted as damaged, never used, and rewritten.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::completeness::Degradation;
use crate::kconfig::KernelConfig;
use crate::model::FileFacts;

/// The analyzer build the facts come from (set by build.rs from the crate's sources).
const ANALYZER_BUILD: &str = env!("PROBEGEN_ANALYZER_BUILD");
const MAGIC: &str = "probegen-facts 1";
/// The default bound on the cache directory (the 6.12 tree's facts take about 20 MB).
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024 * 1024;
/// Eviction goes down to this fraction of the bound, so a run just over it does not evict again.
const EVICT_TO_PERCENT: u64 = 80;
/// A hit on an entry older than this refreshes its mtime, which orders eviction (least recently
/// used first) without a write per hit.
const TOUCH_AFTER: Duration = Duration::from_secs(24 * 3600);
/// Temporary files older than this were left by a run that died; the bound removes them.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// What one file's extraction produced: its facts and its gaps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEntry {
    pub facts: FileFacts,
    pub gaps: Vec<Degradation>,
}

/// Where the cache lives and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheLocation {
    pub dir: PathBuf,
    pub max_bytes: u64,
}

/// The cache during one load: its location and what it did so far (shared by the parse threads).
#[derive(Debug)]
pub struct FactsCache {
    dir: PathBuf,
    max_bytes: u64,
    stats: CacheCounters,
}

#[derive(Debug, Default)]
struct CacheCounters {
    reused: AtomicUsize,
    parsed: AtomicUsize,
    damaged: AtomicUsize,
    written: AtomicUsize,
    write_errors: AtomicUsize,
}

/// What the cache did in one load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Files whose facts came from the cache.
    pub reused: usize,
    /// Files parsed (no entry, or a damaged one).
    pub parsed: usize,
    /// Entries that failed a check and were rebuilt.
    pub damaged: usize,
    /// Entries written.
    pub written: usize,
    /// Entries that could not be written (the run goes on without them).
    pub write_errors: usize,
    /// Entries removed to keep the directory under its bound.
    pub evicted: usize,
}

impl std::fmt::Display for CacheStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reused, {} parsed, {} damaged entries rebuilt, {} written, {} evicted",
            self.reused, self.parsed, self.damaged, self.written, self.evicted
        )?;
        if self.write_errors > 0 {
            write!(f, ", {} not writable", self.write_errors)?;
        }
        Ok(())
    }
}

/// The key of one file's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryKey(String);

impl FactsCache {
    pub fn open(location: &CacheLocation) -> Self {
        Self {
            dir: location.dir.clone(),
            max_bytes: location.max_bytes,
            stats: CacheCounters::default(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of `rel` with contents `bytes` (as decoded to `text`) under `config`.
    pub fn key(rel: &str, bytes: &[u8], text: &str, config: &KernelConfig) -> EntryKey {
        let mut h = Sha256::new();
        for part in [MAGIC.as_bytes(), ANALYZER_BUILD.as_bytes(), rel.as_bytes()] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
        for name in config_symbols(text) {
            // `IS_MODULE(CONFIG_X)` reads CONFIG_X_MODULE, which is CONFIG_X=m.
            let base = name.strip_suffix("_MODULE").unwrap_or(name);
            let line = format!(
                "{name}={};{}\n",
                config.kbuild_letter(name),
                config.kbuild_letter(base)
            );
            h.update(line.as_bytes());
        }
        EntryKey(hex(&h.finalize()))
    }

    fn entry_path(&self, key: &EntryKey) -> PathBuf {
        let (a, b) = key.0.split_at(2);
        self.dir.join(a).join(format!("{b}.facts"))
    }

    /// The entry for `key`, when there is one and it passes every check.
    pub fn get(&self, key: &EntryKey, rel: &str) -> Option<FileEntry> {
        let path = self.entry_path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(_) => return None,
        };
        match decode(&bytes).filter(|e| e.facts.path == rel) {
            Some(entry) => {
                self.stats.reused.fetch_add(1, Ordering::Relaxed);
                touch_if_old(&path);
                Some(entry)
            }
            None => {
                self.stats.damaged.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Counts a file parsed and stores its entry; a failed write only costs the next run a parse.
    pub fn put(&self, key: &EntryKey, entry: &FileEntry) {
        self.stats.parsed.fetch_add(1, Ordering::Relaxed);
        match self.write_entry(key, entry) {
            Ok(()) => self.stats.written.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.stats.write_errors.fetch_add(1, Ordering::Relaxed),
        };
    }

    fn write_entry(&self, key: &EntryKey, entry: &FileEntry) -> std::io::Result<()> {
        let payload = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        let path = self.entry_path(key);
        let parent = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(parent)?;
        let tmp = parent.join(format!(
            ".{}.{}.{}.tmp",
            key.0,
            std::process::id(),
            unique_suffix()
        ));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            writeln!(f, "{MAGIC} {}", hex(&Sha256::digest(&payload)))?;
            f.write_all(&payload)?;
            drop(f);
            std::fs::rename(&tmp, &path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Ends a load: keeps the directory under its bound when this run wrote to it, and returns
    /// what the cache did.
    pub fn finish(&self) -> CacheStats {
        let evicted = if self.stats.written.load(Ordering::Relaxed) > 0 {
            enforce_bound(&self.dir, self.max_bytes)
        } else {
            0
        };
        CacheStats {
            reused: self.stats.reused.load(Ordering::Relaxed),
            parsed: self.stats.parsed.load(Ordering::Relaxed),
            damaged: self.stats.damaged.load(Ordering::Relaxed),
            written: self.stats.written.load(Ordering::Relaxed),
            write_errors: self.stats.write_errors.load(Ordering::Relaxed),
            evicted,
        }
    }
}

/// The payload of a whole, intact entry.
fn decode(bytes: &[u8]) -> Option<FileEntry> {
    let nl = bytes.iter().position(|b| *b == b'\n')?;
    let header = std::str::from_utf8(&bytes[..nl]).ok()?;
    let sum = header.strip_prefix(MAGIC)?.strip_prefix(' ')?;
    let payload = &bytes[nl + 1..];
    if hex(&Sha256::digest(payload)) != sum {
        return None;
    }
    serde_json::from_slice(payload).ok()
}

/// Every `CONFIG_` identifier in `text`, sorted and unique.
fn config_symbols(text: &str) -> BTreeSet<&str> {
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("CONFIG_") {
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

/// Removes left-over temporary files, then the least recently used entries until the directory
/// holds at most [`EVICT_TO_PERCENT`] of `max_bytes`. Returns the entries removed.
fn enforce_bound(dir: &Path, max_bytes: u64) -> usize {
    let mut entries: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    let mut total = 0u64;
    for e in walkdir::WalkDir::new(dir).min_depth(2).max_depth(2) {
        let Ok(e) = e else { continue };
        let Ok(meta) = e.metadata() else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let name = e.file_name().to_string_lossy();
        if name.ends_with(".tmp") {
            if modified.elapsed().is_ok_and(|age| age > STALE_TEMP) {
                let _ = std::fs::remove_file(e.path());
            }
            continue;
        }
        if name.ends_with(".facts") {
            total += meta.len();
            entries.push((modified, meta.len(), e.path().to_path_buf()));
        }
    }
    if total <= max_bytes {
        return 0;
    }
    entries.sort();
    let target = max_bytes / 100 * EVICT_TO_PERCENT;
    let mut evicted = 0;
    for (_, len, path) in entries {
        if total <= target {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(len);
            evicted += 1;
        }
    }
    evicted
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

    #[test]
    fn damaged_payloads_are_refused() {
        let dir = std::env::temp_dir().join(format!("facts-cache-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = FactsCache::open(&CacheLocation {
            dir: dir.clone(),
            max_bytes: DEFAULT_MAX_BYTES,
        });
        let config = KernelConfig::default();
        let key = FactsCache::key("x.c", b"int x;", "int x;", &config);
        let entry = FileEntry {
            facts: FileFacts {
                path: "x.c".into(),
                ..FileFacts::default()
            },
            gaps: Vec::new(),
        };
        cache.put(&key, &entry);
        assert!(cache.get(&key, "x.c").is_some());
        assert!(
            cache.get(&key, "y.c").is_none(),
            "an entry for another path"
        );
        let path = cache.entry_path(&key);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&key, "x.c").is_none(), "a flipped bit");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        assert!(cache.get(&key, "x.c").is_none(), "a truncated entry");
        let stats = cache.finish();
        assert_eq!((stats.reused, stats.damaged, stats.parsed), (1, 3, 1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_bound_evicts_the_oldest_entries() {
        let dir = std::env::temp_dir().join(format!("facts-cache-bound-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ab")).unwrap();
        let now = SystemTime::now();
        for i in 0..10u64 {
            let p = dir.join("ab").join(format!("{i:062}.facts"));
            std::fs::write(&p, vec![b'x'; 1000]).unwrap();
            let f = std::fs::File::options().append(true).open(&p).unwrap();
            f.set_modified(now - Duration::from_secs(100 - i)).unwrap();
        }
        assert_eq!(enforce_bound(&dir, 5000), 6, "down to 80% of 5000 bytes");
        let mut left: Vec<String> = std::fs::read_dir(dir.join("ab"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left.len(), 4);
        assert!(left[0].starts_with("000000"), "{left:?}");
        assert!(
            left[0].ends_with("6.facts"),
            "the newest four stay: {left:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

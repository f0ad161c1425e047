//! The kernel source tree as the analyzer sees it: config, Kbuild map and per-file facts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use walkdir::WalkDir;

use crate::completeness::{self, Degradation, DegradedKind};
use crate::cparse;
use crate::error::{AnalyzerError, Warning};
use crate::facts_cache::{CacheLocation, CacheStats, CacheWrite, FactsCache, FileEntry};
use crate::kbuild::{read_build_map, BuildMap};
use crate::kconfig::KernelConfig;
use crate::model::FileFacts;
use crate::preproc::preprocess;
use crate::timings::{ExtractTimes, FileTimes, LoadTimings};
use crate::tree_heap::HeapParser;

pub(crate) use crate::layout::SourceLayout;

/// How to load a tree. No `Default`: the directories read come from the caller's rules
/// ([`LoadOptions::new`]), never from a list kept here.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The directories read under the source root.
    pub layout: SourceLayout,
    /// Use this `.config` instead of `<root>/.config`.
    pub kconfig: Option<PathBuf>,
    /// Also parse the files under these directory prefixes that the config does not build
    /// (their functions are marked not built): the selected vendor's driver on a kernel whose
    /// config leaves it out, so the set can say `not-built` instead of being silently empty.
    pub unbuilt_dirs: Vec<String>,
    /// Reuse and keep per-file facts here (None: parse every file).
    pub facts_cache: Option<CacheLocation>,
}

impl LoadOptions {
    /// Read `layout` with the tree's own `.config`, no unbuilt directories and no facts cache.
    pub fn new(layout: SourceLayout) -> Self {
        Self {
            layout,
            kconfig: None,
            unbuilt_dirs: Vec::new(),
            facts_cache: None,
        }
    }
}

#[derive(Debug)]
pub struct SourceTree {
    pub root: PathBuf,
    /// Upstream version (`6.12.117`) when known.
    pub version: Option<String>,
    pub config: KernelConfig,
    pub build: BuildMap,
    /// Built `.c` files and all headers, sorted by path.
    pub files: Vec<FileFacts>,
    pub warnings: Vec<Warning>,
    /// `.c` files (and driver headers) found but not built by the config.
    pub skipped_unbuilt: usize,
    /// What could not be read or evaluated (see [`completeness`]), sorted.
    pub degraded: Vec<Degradation>,
    /// The `.config` as the user named it (`.config` when it is the tree's own).
    config_name: String,
    /// The directories read.
    layout: SourceLayout,
    /// This load's facts cache packs, written while the caller goes on (None without a cache).
    cache_write: Option<CacheWrite>,
    /// Where the load's time went (`PROBEGEN_TIMINGS`).
    pub timings: LoadTimings,
}

impl SourceTree {
    pub fn load(root: &Path, opts: &LoadOptions) -> Result<Self, AnalyzerError> {
        let t0 = std::time::Instant::now();
        let mut timings = LoadTimings::default();
        let config_path = check_tree(root, opts)?;
        let config_name = match &opts.kconfig {
            Some(p) => p.display().to_string(),
            None => ".config".to_string(),
        };
        let layout = &opts.layout;
        // The config and Kbuild on one core, the directories listed on the other: the
        // listing reads only the file system, what it keeps is decided after.
        let (configured, (found, walk_warnings)) = rayon::join(
            || -> Result<_, AnalyzerError> {
                let config = KernelConfig::load(&config_path)?;
                let mut warnings = Vec::new();
                let build = read_build_map(root, &layout.kbuild_top, &config, &mut warnings);
                let degraded = completeness::config_gaps(root, layout, &config, &config_name);
                Ok((config, build, warnings, degraded))
            },
            || find_sources(root, opts),
        );
        let (config, build, mut warnings, mut degraded) = configured?;
        warnings.extend(walk_warnings);
        let (paths, sizes, skipped_unbuilt) = built_files(found, &build, opts);
        let cache = opts.facts_cache.as_ref().map(FactsCache::open);
        let t1 = std::time::Instant::now();
        timings.setup = t1 - t0;
        let extracted = extract_files(&paths, &sizes, &config, cache.as_ref());
        let t2 = std::time::Instant::now();
        timings.extract = t2 - t1;
        let mut files = Vec::with_capacity(paths.len());
        for (r, times) in extracted {
            timings.add_file(&times);
            match r? {
                Ok(entry) => {
                    files.push(entry.facts);
                    degraded.extend(entry.gaps);
                }
                Err(w) => {
                    degraded.push(Degradation {
                        kind: DegradedKind::Unreadable,
                        file: w.file.clone(),
                        line: 0,
                        detail: w.message.clone(),
                    });
                    warnings.push(w);
                }
            }
        }
        degraded.extend(completeness::kbuild_gaps(&warnings));
        // By kind and file; equal keys keep their order (config gaps in Kconfig order, so the
        // first names the first option the file lost).
        degraded.sort_by(|a, b| (a.kind, &a.file, a.line).cmp(&(b.kind, &b.file, b.line)));
        degraded.dedup();
        resolve_handler_names(&mut files);
        let t3 = std::time::Instant::now();
        timings.merge = t3 - t2;
        let cache_write = cache.map(FactsCache::finish_in_background);
        timings.cache_write = t3.elapsed();
        timings.total = t0.elapsed();
        Ok(Self {
            root: root.to_path_buf(),
            version: read_version(root),
            config,
            build,
            files,
            warnings,
            skipped_unbuilt,
            degraded,
            config_name,
            layout: layout.clone(),
            cache_write,
            timings,
        })
    }

    /// What the facts cache did in this load (None without a cache), its packs written: the
    /// first call waits for the write, which the load left running.
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache_write.as_ref().map(CacheWrite::stats)
    }

    /// The directories this tree was read from.
    pub fn layout(&self) -> &SourceLayout {
        &self.layout
    }

    /// The `.config` as named in messages (`.config`, or the `--kconfig` path).
    pub fn config_name(&self) -> String {
        self.config_name.clone()
    }

    pub fn parse_errors(&self) -> usize {
        self.files.iter().map(|f| f.parse_errors).sum()
    }

    /// All warnings: tree-level and per-file, in path order.
    pub fn all_warnings(&self) -> impl Iterator<Item = &Warning> {
        self.warnings
            .iter()
            .chain(self.files.iter().flat_map(|f| f.warnings.iter()))
    }
}

/// The `.config` path once `root` looks like a kernel tree.
fn check_tree(root: &Path, opts: &LoadOptions) -> Result<PathBuf, AnalyzerError> {
    if !root.is_dir() {
        return Err(AnalyzerError::NotKernelTree(
            root.to_path_buf(),
            "an existing directory (the output of scripts/fetch-kernel.sh)",
        ));
    }
    if !root.join(&opts.layout.kbuild_top).join("core").is_dir() {
        return Err(AnalyzerError::NotKernelTree(
            root.to_path_buf(),
            "drivers/infiniband/core/ inside it",
        ));
    }
    let config_path = opts.kconfig.clone().unwrap_or_else(|| root.join(".config"));
    if !config_path.is_file() {
        return Err(AnalyzerError::NotKernelTree(
            config_path,
            "a kernel .config file (scripts/fetch-kernel.sh places Debian's; or pass --kconfig)",
        ));
    }
    Ok(config_path)
}

/// A `.c` or `.h` file under the scanned directories: its path relative to the root, its
/// path, its size.
struct FoundFile {
    rel: String,
    path: PathBuf,
    len: u64,
}

/// Every `.c` and `.h` file of the scanned directories, sorted by path, and what could not be
/// read on the way (symlink loops, unreadable directories).
fn find_sources(root: &Path, opts: &LoadOptions) -> (Vec<FoundFile>, Vec<Warning>) {
    let mut found = Vec::new();
    let mut warnings = Vec::new();
    for dir in opts.layout.scan_dirs() {
        let base = root.join(dir);
        if !base.is_dir() {
            continue;
        }
        for entry in WalkDir::new(&base).follow_links(true).sort_by_file_name() {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    // Symlink loops and unreadable directories: report and go on.
                    warnings.push(Warning {
                        file: e
                            .path()
                            .map(|p| p.display().to_string())
                            .unwrap_or_else(|| base.display().to_string()),
                        line: 0,
                        message: format!("skipped: {e}"),
                    });
                    continue;
                }
            };
            if !entry.file_type().is_file() {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(root) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if !(rel.ends_with(".c") || rel.ends_with(".h")) {
                continue;
            }
            // the size orders the extraction (largest first); an unreadable one is 0 here and
            // reported when the file is read
            let len = entry.metadata().map_or(0, |m| m.len());
            found.push(FoundFile {
                rel,
                path: entry.into_path(),
                len,
            });
        }
    }
    (found, warnings)
}

/// The files to parse, sorted by path (relative, absolute), their sizes, and how many were
/// left out because the config does not build them.
fn built_files(
    found: Vec<FoundFile>,
    build: &BuildMap,
    opts: &LoadOptions,
) -> (Vec<(String, PathBuf)>, Vec<u64>, usize) {
    let mut paths = Vec::with_capacity(found.len());
    let mut sizes = Vec::with_capacity(found.len());
    let mut skipped_unbuilt = 0;
    for f in found {
        match file_role(&f.rel, build, opts) {
            FileRole::Parsed => {
                paths.push((f.rel, f.path));
                sizes.push(f.len);
            }
            FileRole::NotBuilt => skipped_unbuilt += 1,
            FileRole::NotSource => {}
        }
    }
    (paths, sizes, skipped_unbuilt)
}

enum FileRole {
    Parsed,
    NotBuilt,
    NotSource,
}

/// Whether the config builds `rel` (a `.c` file, or a driver header compiled with its directory).
fn file_role(rel: &str, build: &BuildMap, opts: &LoadOptions) -> FileRole {
    let wanted_unbuilt = opts
        .unbuilt_dirs
        .iter()
        .any(|d| rel.starts_with(d.as_str()));
    if rel.ends_with(".c") {
        let built =
            build.module_of(rel).is_some() || (wanted_unbuilt && build.unbuilt.contains_key(rel));
        return if built {
            FileRole::Parsed
        } else {
            FileRole::NotBuilt
        };
    }
    if !rel.ends_with(".h") {
        return FileRole::NotSource;
    }
    if rel.starts_with(&opts.layout.kbuild_top) {
        // A driver header is compiled only with its directory: the inlines of a driver the
        // config does not build (bnxt_re on 6.1) must not enter the graph.
        let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
        let dir_parsed =
            build.dirs.contains(dir) || (wanted_unbuilt && build.unbuilt_dirs.contains(dir));
        if !dir_parsed {
            return FileRole::NotBuilt;
        }
    }
    FileRole::Parsed
}

/// Per file: its facts and gaps, a warning when unreadable, or a fatal error, and where its
/// time went. In parallel; through the facts cache when there is one.
fn extract_files(
    paths: &[(String, PathBuf)],
    sizes: &[u64],
    config: &KernelConfig,
    cache: Option<&FactsCache>,
) -> Vec<(FileResult, FileTimes)> {
    let mut results: Vec<(usize, (FileResult, FileTimes))> = tasks(sizes)
        .par_iter()
        .with_max_len(1)
        .flat_map_iter(|task| {
            let mut group = HeapParser::new();
            let done: Vec<_> = task
                .iter()
                .map(|&i| {
                    let (rel, path) = &paths[i];
                    let t0 = std::time::Instant::now();
                    let mut times = FileTimes {
                        thread: rayon::current_thread_index(),
                        ..FileTimes::default()
                    };
                    let r = PARSER.with(|parser| {
                        let mut parser = parser.borrow_mut();
                        let parsers = Parsers {
                            own: &mut parser,
                            group: &mut group,
                        };
                        extract_or_reuse(parsers, rel, path, config, cache, &mut times)
                    });
                    times.total = t0.elapsed();
                    (i, (r, times))
                })
                .collect();
            // the group's parser and trees go here, with its heap
            drop(group);
            done
        })
        .collect();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Files of at least this many bytes are a task alone; smaller ones are grouped, largest first,
/// until a group holds this many bytes (on 6.12: 223 tasks of 563 files, so a heap and a parser
/// each instead of one per file; the last task takes about 3 ms).
const GROUP_BYTES: u64 = 32 * 1024;

/// The files (indices into `sizes`) each task extracts, largest task first: the last task a
/// thread takes is a small one, so the threads finish together (hfi1's chip.c alone is 3% of
/// the 6.12 tree).
fn tasks(sizes: &[u64]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]).then(a.cmp(&b)));
    let mut tasks: Vec<(u64, Vec<usize>)> = Vec::new();
    let mut group: (u64, Vec<usize>) = (0, Vec::new());
    for i in order {
        if sizes[i] >= GROUP_BYTES {
            tasks.push((sizes[i], vec![i]));
            continue;
        }
        group.0 += sizes[i];
        group.1.push(i);
        if group.0 >= GROUP_BYTES {
            tasks.push(std::mem::take(&mut group));
        }
    }
    if !group.1.is_empty() {
        tasks.push(group);
    }
    // stable: equal sizes keep the order above
    tasks.sort_by_key(|t| std::cmp::Reverse(t.0));
    tasks.into_iter().map(|(_, files)| files).collect()
}

/// The parsers a file may be parsed with: its task's, in the task's heap, or (without heaps)
/// the thread's own.
struct Parsers<'a> {
    own: &'a mut tree_sitter::Parser,
    group: &'a mut HeapParser,
}

thread_local! {
    /// One parser per thread, kept across files and loads (`map_init` would make one per
    /// rayon job, which is one per file here).
    static PARSER: std::cell::RefCell<tree_sitter::Parser> =
        std::cell::RefCell::new(cparse::new_parser());
}

type FileResult = Result<Result<FileEntry, Warning>, AnalyzerError>;

/// One file: its entry from the cache, else extracted (and stored); a warning when unreadable.
fn extract_or_reuse(
    parsers: Parsers,
    rel: &str,
    path: &Path,
    config: &KernelConfig,
    cache: Option<&FactsCache>,
    times: &mut FileTimes,
) -> FileResult {
    let t0 = std::time::Instant::now();
    let read = std::fs::read(path);
    times.read = t0.elapsed();
    let bytes = match read {
        Ok(b) => b,
        Err(e) => {
            return Ok(Err(Warning {
                file: rel.to_string(),
                line: 0,
                message: format!("unreadable, skipped: {e}"),
            }))
        }
    };
    let (text, lossy) = decode_text(&bytes);
    let Some(cache) = cache else {
        return extract_file(parsers, rel, &bytes, &text, lossy, config, times).map(Ok);
    };
    let t1 = std::time::Instant::now();
    let key = FactsCache::key(rel, &bytes, &text, config);
    let hit = cache.get(&key, rel);
    times.cache_lookup = t1.elapsed();
    if let Some(entry) = hit {
        return Ok(Ok(entry));
    }
    let entry = extract_file(parsers, rel, &bytes, &text, lossy, config, times)?;
    let t2 = std::time::Instant::now();
    cache.put(&key, &entry);
    times.cache_store = t2.elapsed();
    Ok(Ok(entry))
}

/// The text of a file (borrowed when it is valid UTF-8), and the line of its first invalid
/// UTF-8 byte (decoded lossily).
fn decode_text(bytes: &[u8]) -> (std::borrow::Cow<'_, str>, Option<usize>) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (std::borrow::Cow::Borrowed(s), None),
        Err(e) => {
            let valid = e.valid_up_to();
            let line = crate::preproc::count_newlines(&bytes[..valid]) + 1;
            (String::from_utf8_lossy(bytes), Some(line))
        }
    }
}

/// One file's facts and gaps: preprocess against the config, parse, check completeness.
fn extract_file(
    parsers: Parsers,
    rel: &str,
    bytes: &[u8],
    text: &str,
    lossy: Option<usize>,
    config: &KernelConfig,
    times: &mut FileTimes,
) -> Result<FileEntry, AnalyzerError> {
    let t0 = std::time::Instant::now();
    let mut pre = preprocess(text, config);
    if let Some(line) = pre.too_deep {
        return Err(AnalyzerError::Syntax {
            file: rel.to_string(),
            line,
            message: format!(
                "#if expression nested deeper than {} levels: expected a kernel source file",
                crate::limits::MAX_NESTING
            ),
        });
    }
    // The ops struct is read before header type bodies are blanked.
    let is_header = rel.ends_with(".h");
    let ops_struct = is_header
        .then(|| crate::opsdecl::ops_struct_members(&pre.text))
        .flatten();
    if is_header {
        crate::preproc::blank_type_bodies(&mut pre.text);
    }
    times.preprocess = t0.elapsed();
    let mut ext = ExtractTimes::default();
    let mut facts = match parsers.group.get(cparse::new_parser) {
        Some((parser, heap)) => cparse::extract_timed(parser, rel, &pre.text, &mut ext, Some(heap)),
        None => cparse::extract_timed(parsers.own, rel, &pre.text, &mut ext, None),
    };
    (times.parse, times.facts, times.error_sites) = (ext.parse, ext.facts, ext.error_sites);
    let t1 = std::time::Instant::now();
    facts.ops_struct = ops_struct;
    let warn = |line: usize, message: &str| Warning {
        file: rel.to_string(),
        line,
        message: message.to_string(),
    };
    if let Some(line) = lossy {
        facts
            .warnings
            .push(warn(line, "not valid UTF-8: decoded lossily"));
    }
    for &l in &pre.unbalanced {
        facts.warnings.push(warn(l, "unbalanced #else/#endif"));
    }
    for &l in &pre.unterminated {
        facts.warnings.push(warn(
            l,
            "unterminated #if: no #endif before the end of the file",
        ));
    }
    let gaps =
        completeness::file_gaps(&facts, bytes, &pre.text, &pre.unterminated, &pre.unbalanced);
    times.gaps = t1.elapsed();
    Ok(FileEntry { facts, gaps })
}

/// `UVERBS_HANDLER(X)` is `UVERBS_MODULE_NAME ## _handler_ ## X`; the module name is defined
/// in the file itself (mlx5) or in a local header it includes (core/uverbs.h: `ib_uverbs`).
fn resolve_handler_names(files: &mut [FileFacts]) {
    let header_names: BTreeMap<String, String> = files
        .iter()
        .filter(|f| f.is_header())
        .filter_map(|f| Some((f.path.clone(), f.uverbs_module_name.clone()?)))
        .collect();
    for f in files.iter_mut() {
        let dir = f.path.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        let module_name = f.uverbs_module_name.clone().or_else(|| {
            f.local_includes
                .iter()
                .find_map(|inc| header_names.get(&format!("{dir}/{inc}")).cloned())
        });
        let path = f.path.clone();
        for func in f.functions.iter_mut() {
            if let Some(id) = &func.uverbs_handler_id {
                match &module_name {
                    Some(m) => func.name = format!("{m}_handler_{id}"),
                    None => f.warnings.push(Warning {
                        file: path.clone(),
                        line: func.line,
                        message: format!(
                            "UVERBS_HANDLER({id}) but no UVERBS_MODULE_NAME in the file or its local headers"
                        ),
                    }),
                }
            }
        }
    }
}

fn read_version(root: &Path) -> Option<String> {
    if let Ok(v) = std::fs::read_to_string(root.join("KERNEL_VERSION")) {
        let v = v.trim();
        if !v.is_empty() {
            return Some(v.to_string());
        }
    }
    let text = std::fs::read_to_string(root.join("Makefile")).ok()?;
    let get = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    Some(format!(
        "{}.{}.{}",
        get("VERSION")?,
        get("PATCHLEVEL")?,
        get("SUBLEVEL")?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file in exactly one task; a large file alone; small ones grouped up to
    /// [`GROUP_BYTES`] (but the last group); the largest task first.
    #[test]
    fn tasks_group_the_small_files_and_keep_the_large_ones_alone() {
        let k = GROUP_BYTES;
        let sizes = [k / 4, 3 * k, k / 2, k, k / 4, 0, k / 8, 2 * k, k / 2];
        let tasks = tasks(&sizes);
        let mut seen: Vec<usize> = tasks.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..sizes.len()).collect::<Vec<_>>());
        let bytes = |t: &Vec<usize>| t.iter().map(|&i| sizes[i]).sum::<u64>();
        for t in &tasks {
            if t.iter().any(|&i| sizes[i] >= k) {
                assert_eq!(t.len(), 1, "a large file shares {t:?}");
            }
        }
        let totals: Vec<u64> = tasks.iter().map(bytes).collect();
        assert!(totals.windows(2).all(|w| w[0] >= w[1]), "{totals:?}");
        assert_eq!(tasks[0], [1], "the largest first");
        // k/2 + k/2 make a group; k/4 + k/4 + k/8 + 0 is the last, short of k
        assert_eq!(
            tasks.iter().filter(|t| bytes(t) < k).count(),
            1,
            "{tasks:?}"
        );
        assert_eq!(totals, [3 * k, 2 * k, k, k, k / 4 + k / 4 + k / 8]);
        assert!(self::tasks(&[]).is_empty());
    }
}

//! Where one load's time went (`PROBEGEN_TIMINGS`): the serial steps by wall time, each
//! per-file phase summed over the threads, and how busy each thread was, so that a slower cold
//! run says whether the per-file work grew or the threads stopped overlapping.

use std::time::Duration;

/// One file's phases, measured on the thread that extracted it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FileTimes {
    /// The rayon thread (`None`: outside the pool).
    pub thread: Option<usize>,
    pub read: Duration,
    /// The cache key and the lookup (with a hit: its read and decode).
    pub cache_lookup: Duration,
    pub preprocess: Duration,
    pub parse: Duration,
    /// The walk of the tree: definitions, calls, field writes, macros, tables, and what the
    /// error sites read from each body (one walk per body).
    pub facts: Duration,
    /// The error sites decided from what the walk collected.
    pub error_sites: Duration,
    pub gaps: Duration,
    /// The entry serialized for this run's pack.
    pub cache_store: Duration,
    /// The whole file, from its read to its entry.
    pub total: Duration,
}

/// What [`crate::extract`] spends on one file besides the parse itself.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ExtractTimes {
    pub parse: Duration,
    pub facts: Duration,
    pub error_sites: Duration,
}

/// Where a [`crate::SourceTree::load`] spent its time.
#[derive(Debug, Clone, Default)]
pub struct LoadTimings {
    /// Wall: the tree checked, `.config` and Kbuild read beside the files listed and sized.
    pub setup: Duration,
    /// Wall: the parallel extraction of every file.
    pub extract: Duration,
    /// Files extracted (from the cache or parsed).
    pub files: usize,
    /// Busy time of each thread that took a file, by thread index.
    pub busy: Vec<Duration>,
    /// Per-file phases summed over the threads.
    pub read: Duration,
    pub cache_lookup: Duration,
    pub preprocess: Duration,
    pub parse: Duration,
    pub facts: Duration,
    pub error_sites: Duration,
    pub gaps: Duration,
    pub cache_store: Duration,
    /// Wall: the results merged in path order, the gaps sorted, uverbs handler names resolved.
    pub merge: Duration,
    /// Wall: this run's cache packs handed to the thread that writes them (and enforces the
    /// bound) while the caller builds the graph.
    pub cache_write: Duration,
    /// Wall: the whole load.
    pub total: Duration,
}

impl LoadTimings {
    pub(crate) fn add_file(&mut self, t: &FileTimes) {
        self.files += 1;
        if let Some(i) = t.thread {
            if self.busy.len() <= i {
                self.busy.resize(i + 1, Duration::ZERO);
            }
            self.busy[i] += t.total;
        }
        self.read += t.read;
        self.cache_lookup += t.cache_lookup;
        self.preprocess += t.preprocess;
        self.parse += t.parse;
        self.facts += t.facts;
        self.error_sites += t.error_sites;
        self.gaps += t.gaps;
        self.cache_store += t.cache_store;
    }

    /// The per-file work summed over the threads.
    pub fn summed(&self) -> Duration {
        self.busy.iter().sum()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

impl std::fmt::Display for LoadTimings {
    /// One line: `load <wall> = setup .., extract .. (N threads, busy ..), merge .., cache
    /// write ..; summed over threads: read .., parse .., ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let busy: Vec<String> = self.busy.iter().map(|d| ms(*d)).collect();
        write!(
            f,
            "load {} = setup {}, extract {} ({} files on {} threads, busy {}), merge {}, cache write {}; ",
            ms(self.total),
            ms(self.setup),
            ms(self.extract),
            self.files,
            self.busy.len(),
            busy.join(" + "),
            ms(self.merge),
            ms(self.cache_write),
        )?;
        write!(
            f,
            "summed over threads {}: read {}, cache lookup {}, preprocess {}, parse {}, facts walk {}, error sites {}, gaps {}, cache store {}",
            ms(self.summed()),
            ms(self.read),
            ms(self.cache_lookup),
            ms(self.preprocess),
            ms(self.parse),
            ms(self.facts),
            ms(self.error_sites),
            ms(self.gaps),
            ms(self.cache_store),
        )
    }
}

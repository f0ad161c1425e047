//! The inputs of a run: the options every source-reading command shares, the rules (parsed
//! once), the vendors they name (resolved in one place) and the tree with its call graph.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use analyzer::CacheLocation;
use analyzer::{CallGraph, VendorScope};
use analyzer::{LoadOptions, SourceTree};

use crate::{Error, Notice};

/// What every source-reading command is given (the CLI's `--kernel-src`, `--vendor`, ...).
#[derive(Clone, Debug, Default)]
pub struct SourceOptions {
    pub kernel_src: PathBuf,
    /// `.config` to use instead of `kernel_src/.config`.
    pub kconfig: Option<PathBuf>,
    /// One vendor, `a,b,c` or `all` (`generate` only takes the last two).
    pub vendor: Option<String>,
    /// Go on with a degraded input; the outputs list what was lost.
    pub allow_degraded: bool,
    /// Write the set of a vendor whose driver is missing or not built.
    pub not_built: bool,
    /// A rules file instead of the built-in rules.
    pub rules: Option<PathBuf>,
    /// A directory with vmlinux and modules instead of the tree's own.
    pub btf: Option<PathBuf>,
    /// Parse every file instead of reusing the facts cache.
    pub no_cache: bool,
}

/// The rules of a run: `path` or the built-in ones.
pub fn load_rules(path: Option<&Path>) -> Result<heuristics::Rules, Error> {
    match path {
        None => Ok(heuristics::Rules::builtin()?),
        Some(p) => {
            let origin = p.display().to_string();
            let text = manifest::read_text(p, manifest::MAX_RULES_BYTES, "a probegen rules file")
                .map_err(|e| Error::Input(e.to_string()))?;
            manifest::check_yaml_nesting(&text, &origin)
                .map_err(|e| Error::Input(e.to_string()))?;
            Ok(heuristics::Rules::parse(&text, &origin)?)
        }
    }
}

/// Every source directory the rules name, one entry each: the Kbuild root, then the include
/// directories and the vendors' (`probegen rules --source-dirs`, which `scripts/fetch-kernel.sh`
/// extracts from a kernel's source package: the analyzer's list, no second parser of the rules).
pub fn source_dirs(rules: Option<&Path>) -> Result<Vec<String>, Error> {
    let rules = load_rules(rules)?;
    Ok(rules
        .source_layout()
        .scan_dirs()
        .map(str::to_string)
        .collect())
}

/// The one check of a vendor name against the rules: `flag` is the option that named it and
/// `list` the whole `--vendor a,b` value when it came from a list.
pub(crate) fn resolve_vendor<'r>(
    rules: &'r heuristics::Rules,
    flag: &'static str,
    name: &str,
    list: Option<&str>,
) -> Result<&'r heuristics::Vendor, Error> {
    rules
        .vendor(name)
        .filter(|_| !name.is_empty())
        .ok_or_else(|| Error::UnknownVendor {
            flag,
            name: name.to_string(),
            list: list.map(str::to_string),
            known: rules.vendor_names(),
        })
}

/// What `--vendor` asks for.
pub(crate) enum VendorRequest {
    /// No `--vendor` (an error where a selection needs one) or one vendor of the rules.
    Single,
    /// `a,b,c`, or `all` (every vendor of the rules whose driver the config builds).
    Many { names: Vec<String>, all: bool },
}

/// `--vendor` checked against the rules: every name it gives is a vendor of the rules.
pub(crate) fn vendor_request(
    rules: &heuristics::Rules,
    vendor: Option<&str>,
) -> Result<VendorRequest, Error> {
    let Some(v) = vendor else {
        return Ok(VendorRequest::Single);
    };
    if v != "all" && !v.contains(',') {
        resolve_vendor(rules, "--vendor", v, None)?;
        return Ok(VendorRequest::Single);
    }
    let all = v == "all";
    let names: Vec<String> = if all {
        rules.vendor_names()
    } else {
        v.split(',').map(|s| s.trim().to_string()).collect()
    };
    for n in &names {
        resolve_vendor(rules, "--vendor", n, Some(v))?;
    }
    Ok(VendorRequest::Many { names, all })
}

/// Where the per-file facts cache lives: `$PROBEGEN_CACHE/facts` (the kernel cache's root),
/// else `$XDG_CACHE_HOME/probegen/facts`, else `~/.cache/probegen/facts`; none with `--no-cache`
/// or without a home directory.
pub(crate) fn facts_cache(opts: &SourceOptions) -> Result<Option<CacheLocation>, Error> {
    if opts.no_cache {
        return Ok(None);
    }
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let root = env("PROBEGEN_CACHE")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("probegen")))
        .or_else(|| env("HOME").map(|d| d.join(".cache").join("probegen")));
    let max_bytes = match std::env::var("PROBEGEN_FACTS_CACHE_MB") {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(mb) if mb > 0 => mb.saturating_mul(1024 * 1024),
            _ => return Err(Error::CacheSize(v)),
        },
        Err(_) => analyzer::DEFAULT_FACTS_CACHE_BYTES,
    };
    Ok(root.map(|r| CacheLocation {
        dir: r.join("facts"),
        max_bytes,
    }))
}

/// Parse the tree once (through the facts cache). `unbuilt_dirs`: vendor directories to read
/// even where the config does not build them.
pub(crate) fn load_tree(
    opts: &SourceOptions,
    rules: &heuristics::Rules,
    unbuilt_dirs: Vec<String>,
) -> Result<Arc<SourceTree>, Error> {
    let tree = SourceTree::load(
        &opts.kernel_src,
        &LoadOptions {
            kconfig: opts.kconfig.clone(),
            unbuilt_dirs,
            facts_cache: facts_cache(opts)?,
            ..LoadOptions::new(rules.source_layout())
        },
    )?;
    Ok(Arc::new(tree))
}

/// A parsed tree and the call graph of one vendor scope over it.
pub struct Loaded {
    /// Shared by the vendors of one multi-vendor run (one parse).
    pub tree: Arc<SourceTree>,
    pub graph: CallGraph,
}

/// The tree and the graph of `--vendor` (one vendor or none: the whole tree).
pub(crate) fn load(
    opts: &SourceOptions,
    rules: &heuristics::Rules,
    notify: &mut dyn FnMut(Notice),
) -> Result<Loaded, Error> {
    let t0 = std::time::Instant::now();
    let dirs = match opts.vendor.as_deref() {
        Some(v) => resolve_vendor(rules, "--vendor", v, None)?.dirs.clone(),
        None => Vec::new(),
    };
    let scope = if opts.vendor.is_some() {
        rules.scope_of(&dirs)
    } else {
        VendorScope::default()
    };
    let tree = load_tree(opts, rules, dirs)?;
    let t1 = t0.elapsed();
    let graph = CallGraph::build(&tree, &scope);
    if timings_wanted() {
        notify(Notice::Timing(format!(
            "{}; graph {:.1} ms",
            tree.timings,
            (t0.elapsed() - t1).as_secs_f64() * 1e3
        )));
    }
    Ok(Loaded { tree, graph })
}

/// `PROBEGEN_TIMINGS` set: report how long loading took.
pub(crate) fn timings_wanted() -> bool {
    std::env::var_os("PROBEGEN_TIMINGS").is_some()
}

/// The entry functions of a run: the given ones, else the uverbs entries.
pub(crate) fn entry_names(entries: &[String]) -> Vec<String> {
    if entries.is_empty() {
        analyzer::DEFAULT_ENTRIES
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        entries.to_vec()
    }
}

/// The binaries that give attach verdicts: `--btf DIR`, else the kernel tree's own
/// `vmlinux` and `modules/` (fetch-kernel.sh). `None` for a source-only tree.
pub(crate) fn binaries_of(opts: &SourceOptions) -> Result<Option<Arc<analyzer::Binaries>>, Error> {
    let b = match &opts.btf {
        Some(dir) => Some(analyzer::Binaries::load_dir(dir, &opts.kernel_src)?),
        None => analyzer::Binaries::load(&opts.kernel_src)?,
    };
    Ok(b.map(Arc::new))
}

//! `collect --bundle DIR`: the set for this host, or one line and a recheck every interval.
//!
//! Without a set of the running kernel's series the nearest series' set runs (`bundle::nearest`;
//! `--nearest-set=false` keeps it off); the collector checks each of its probes against this
//! kernel's BTF and kallsyms and attaches those that match, the count per layer in the
//! attached line, the snapshot's `set` and `/metrics`. The host's inputs (vmlinux BTF,
//! kallsyms) are judged for the chosen set (`host.rs`): what is missing is one line, and
//! with nothing attachable no set runs, `probegen_no_set{reason}` saying why.
//!
//! The service's choice when nothing matches (no vendor driver of the bundle loaded, or none
//! for this kernel's series): it stays up and rechecks every `--interval`, printing the line
//! once, so a driver that udev loads later is picked up and systemd's `Restart=` never sees a
//! crash loop; `--strict` makes it exit 2 instead, `--duration` bounds the wait (exit 0).
//! With `--metrics` the port serves why no set runs while it waits (`WaitingMetrics`), so the
//! fleet sees a host without probes rather than a dead target.
//! A host with two vendor drivers loaded runs their union set (`bundle::select`); with three
//! or more, the first chosen set (hardware before Soft-RoCE), the others reported as not
//! watched (one collector runs one set).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sink_prometheus::{NoSet, RunningSet, SetMatch, WaitingMetrics};

use crate::host::{judge, HostInputs, SetProbes, Verdict};
use crate::AgentError;
use bundle::{read_bundle, select, Fallback, HostKernel, Match};

/// What `collect --bundle` asks for (from its flags).
pub(crate) struct BundleQuery<'a> {
    pub(crate) dir: &'a Path,
    /// `uname -r` unless a test gives one
    pub(crate) kernel_release: Option<&'a str>,
    /// where `sys/module/<driver>` is looked up
    pub(crate) sys_root: &'a Path,
    /// whether a host without a set of its series takes the nearest series' set
    pub(crate) fallback: Fallback,
    pub(crate) strict: bool,
    /// live (not a replay): the host's BTF and kallsyms are judged for the chosen set
    pub(crate) live: bool,
    pub(crate) interval: Duration,
    pub(crate) duration: Option<Duration>,
}

/// The set chosen for this host: its files and what the exposition says of it.
pub(crate) struct ChosenSet {
    pub(crate) manifest: PathBuf,
    pub(crate) object: PathBuf,
    pub(crate) running: RunningSet,
}

/// One look's answer: a set, or why none applies now (and the kernel, for the exposition).
enum Look {
    Set(ChosenSet),
    NoSet(NoSet, String),
}

/// The chosen set, or `None` when `--duration` ran out with no set. While it waits,
/// `metrics` (bound by the caller) serves why from this thread.
pub(crate) fn choose(
    a: &BundleQuery<'_>,
    mut metrics: Option<&mut WaitingMetrics>,
) -> Result<Option<ChosenSet>, AgentError> {
    let dir = a.dir;
    if a.interval.is_zero() {
        return Err(AgentError::Usage("--interval must be positive".into()));
    }
    let start = Instant::now();
    let mut said = BTreeSet::new();
    let mut say = |line: String| {
        if said.insert(line.clone()) {
            eprintln!("probegen collect: bundle {}: {line}", dir.display());
        }
    };
    loop {
        let (why, kernel) = match choose_once(a, dir, &mut say)? {
            Look::Set(found) => return Ok(Some(found)),
            Look::NoSet(why, kernel) => (why, kernel),
        };
        let wait = match a.duration {
            Some(d) if start.elapsed() >= d => {
                say("no set attached within --duration".into());
                return Ok(None);
            }
            Some(d) => a.interval.min(d.saturating_sub(start.elapsed())),
            None => a.interval,
        };
        match metrics.as_deref_mut() {
            Some(m) => m.serve_for(why, &kernel, wait),
            None => std::thread::sleep(wait),
        }
    }
}

/// One look at the bundle and the host; a set, or why none applies now (said).
fn choose_once(
    a: &BundleQuery<'_>,
    dir: &Path,
    say: &mut impl FnMut(String),
) -> Result<Look, AgentError> {
    let bundle = read_bundle(dir)?;
    for line in &bundle.skipped {
        if a.strict {
            return Err(AgentError::Usage(line.clone()));
        }
        say(line.clone());
    }
    let modules: BTreeSet<String> = bundle
        .sets
        .iter()
        .flat_map(|s| s.driver_modules.iter().cloned())
        .collect();
    let host = match HostKernel::probe(a.kernel_release, a.sys_root, &modules) {
        Ok(host) => host,
        Err(e) => return unknown_release(a, dir, &e, say),
    };
    let sel = select(&bundle.sets, &host, a.fallback);
    let kernel = format!("kernel {} ({})", host.version, host.release);
    let uncovered = (!sel.uncovered.is_empty()).then(|| {
        format!(
            "{kernel}: no set of this series for the loaded driver {}",
            sel.uncovered.join(", ")
        )
    });
    let nothing = sel
        .chosen
        .is_empty()
        .then(|| no_set(&host, &modules, a.fallback, &kernel));
    if a.strict {
        let nothing = nothing.as_ref().map(|(_, line)| line.as_str());
        if let Some(line) = strict_refusal(&sel, uncovered.as_deref(), nothing, &kernel) {
            return Err(AgentError::Usage(format!(
                "bundle {}: {line}",
                dir.display()
            )));
        }
    }
    if let Some(line) = uncovered {
        say(line);
    }
    let Some(first) = sel.chosen.first() else {
        let (why, line) = nothing.unwrap_or((NoSet::NoSetForKernel, String::new()));
        say(format!("{line}; rechecking every {:?}", a.interval));
        return Ok(Look::NoSet(why, host.release.clone()));
    };
    say(chosen_line(&kernel, first, &host.flavor));
    for other in &sel.chosen[1..] {
        say(format!(
            "{kernel}: set {} for {} not attached: one set per run (its core probes are the first set's; its driver probes are not watched)",
            other.set.dir, other.module
        ));
    }
    let manifest = first.set.manifest(dir);
    let verdict = if a.live {
        inputs_verdict(a.sys_root, &manifest, &first.set.dir)?
    } else {
        Verdict::Attach(Vec::new())
    };
    match verdict {
        Verdict::Attach(lines) => lines.into_iter().for_each(&mut *say),
        Verdict::Nothing(why, line) => {
            say(format!(
                "{kernel}: {line}; rechecking every {:?}",
                a.interval
            ));
            return Ok(Look::NoSet(why, host.release.clone()));
        }
    }
    Ok(Look::Set(ChosenSet {
        manifest,
        object: first.set.object(dir),
        running: RunningSet {
            dir: first.set.dir.clone(),
            matched: set_match(first.how),
        },
    }))
}

/// With `--strict`, what refuses the choice: a driver without a set, no set at all, or a
/// nearest set (its probes may not all attach, and strict fails rather than skips).
fn strict_refusal(
    sel: &bundle::Selection,
    uncovered: Option<&str>,
    nothing: Option<&str>,
    kernel: &str,
) -> Option<String> {
    let nearest = sel.chosen.first().filter(|c| c.how == Match::Nearest);
    let refused = nearest.map(|c| {
        format!(
            "{kernel}: no set of this series; --strict takes no nearest set ({})",
            c.set.dir
        )
    });
    uncovered.or(nothing).map(str::to_string).or(refused)
}

/// Why no set runs when the selection chose none, and the line that says it.
fn no_set(
    host: &HostKernel,
    modules: &BTreeSet<String>,
    fallback: Fallback,
    kernel: &str,
) -> (NoSet, String) {
    if host.loaded.is_empty() {
        let names: Vec<&str> = modules.iter().map(String::as_str).collect();
        let line = format!(
            "{kernel}: no driver of its usable sets loaded ({})",
            names.join(", ")
        );
        (NoSet::NoDriverLoaded, line)
    } else if fallback == Fallback::SeriesOnly {
        let line = format!("{kernel}: no set of this series for the loaded drivers, and nearest-set = false takes no other");
        (NoSet::NoExactSet, line)
    } else {
        let line = format!("{kernel}: no set for the loaded drivers");
        (NoSet::NoSetForKernel, line)
    }
}

/// What the host's BTF and kallsyms allow of the set whose manifest is `manifest`.
fn inputs_verdict(sys_root: &Path, manifest: &Path, dir: &str) -> Result<Verdict, AgentError> {
    let text = std::fs::read_to_string(manifest).map_err(|source| bundle::BundleError::Io {
        path: manifest.to_path_buf(),
        source,
    })?;
    let m = manifest::Manifest::from_yaml(&text, &manifest.display().to_string())
        .map_err(bundle::BundleError::from)?;
    Ok(judge(&HostInputs::read(sys_root), dir, SetProbes::of(&m)))
}

/// A release the agent cannot read: one line, no set (`probegen_no_set{reason="unknown_release"}`),
/// the service up and rechecking; with `--strict`, exit 2.
fn unknown_release(
    a: &BundleQuery<'_>,
    dir: &Path,
    e: &bundle::BundleError,
    say: &mut impl FnMut(String),
) -> Result<Look, AgentError> {
    if a.strict {
        return Err(AgentError::Usage(format!("bundle {}: {e}", dir.display())));
    }
    say(format!(
        "{e}: no series to choose a set by: nothing attached; rechecking every {:?}",
        a.interval
    ));
    let release = a.kernel_release.map_or_else(
        || {
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        },
        str::to_string,
    );
    Ok(Look::NoSet(NoSet::UnknownRelease, release))
}

/// The snapshot's and the exposition's `match` for the bundle's.
fn set_match(how: Match) -> SetMatch {
    match how {
        Match::Exact => SetMatch::Exact,
        Match::Series => SetMatch::Series,
        Match::Nearest => SetMatch::Nearest,
    }
}

/// The line that names the chosen set, how it matched and, when the set is of another flavor
/// than the running kernel's (an rt kernel runs the amd64 set), that flavor.
fn chosen_line(kernel: &str, first: &bundle::Chosen, host_flavor: &str) -> String {
    let flavor = if first.set.flavor == host_flavor {
        String::new()
    } else {
        format!(
            "; the {} set for this {host_flavor} kernel",
            first.set.flavor
        )
    };
    format!(
        "{kernel}: set {} for {} ({}{flavor}; match=\"{}\"; {})",
        first.set.dir,
        first.module,
        first.how.describe(),
        first.how.label(),
        first.set.manifest_sha256
    )
}

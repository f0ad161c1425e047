//! `collect --bundle DIR`: the set for this host, or one line and a recheck every interval.
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

use sink_prometheus::{NoSet, RunningSet, WaitingMetrics};

use crate::AgentError;
use bundle::{read_bundle, select, HostKernel, Match};

/// What `collect --bundle` asks for (from its flags).
pub(crate) struct BundleQuery<'a> {
    pub(crate) dir: &'a Path,
    /// `uname -r` unless a test gives one
    pub(crate) kernel_release: Option<&'a str>,
    /// where `sys/module/<driver>` is looked up
    pub(crate) sys_root: &'a Path,
    pub(crate) strict: bool,
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
    let host = HostKernel::probe(a.kernel_release, a.sys_root, &modules)?;
    let sel = select(&bundle.sets, &host);
    let kernel = format!("kernel {} ({})", host.version, host.release);
    let uncovered = (!sel.uncovered.is_empty()).then(|| {
        format!(
            "{kernel}: no set of this series for the loaded driver {}",
            sel.uncovered.join(", ")
        )
    });
    let nothing = sel.chosen.is_empty().then(|| {
        if host.loaded.is_empty() {
            let names: Vec<&str> = modules.iter().map(String::as_str).collect();
            format!(
                "{kernel}: no driver of its usable sets loaded ({})",
                names.join(", ")
            )
        } else {
            format!("{kernel}: no set for the loaded drivers")
        }
    });
    if a.strict {
        if let Some(line) = uncovered.as_ref().or(nothing.as_ref()) {
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
        let line = nothing.unwrap_or_default();
        say(format!("{line}; rechecking every {:?}", a.interval));
        let why = if host.loaded.is_empty() {
            NoSet::NoDriverLoaded
        } else {
            NoSet::NoSetForKernel
        };
        return Ok(Look::NoSet(why, host.release.clone()));
    };
    let matched = match first.how {
        Match::Exact => "exact",
        Match::Series => "series",
    };
    say(chosen_line(&kernel, first, &host.flavor));
    for other in &sel.chosen[1..] {
        say(format!(
            "{kernel}: set {} for {} not attached: one set per run (its core probes are the first set's; its driver probes are not watched)",
            other.set.dir, other.module
        ));
    }
    Ok(Look::Set(ChosenSet {
        manifest: first.set.manifest(dir),
        object: first.set.object(dir),
        running: RunningSet {
            dir: first.set.dir.clone(),
            matched,
        },
    }))
}

/// The line that names the chosen set, how it matched and, when the set is of another flavor
/// than the running kernel's (an rt kernel runs the amd64 set), that flavor.
fn chosen_line(kernel: &str, first: &bundle::Chosen, host_flavor: &str) -> String {
    let how = match first.how {
        Match::Exact => "built for this release",
        Match::Series => "the newest of this series",
    };
    let flavor = if first.set.flavor == host_flavor {
        String::new()
    } else {
        format!(
            "; the {} set for this {host_flavor} kernel",
            first.set.flavor
        )
    };
    format!(
        "{kernel}: set {} for {} ({how}{flavor}; {})",
        first.set.dir, first.module, first.set.manifest_sha256
    )
}

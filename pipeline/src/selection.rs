//! The selection every command that needs one shares: `generate` (one vendor or several from
//! one parse), `check`, `explain` and `port` all select through [`select_vendors`] or
//! [`select`], so their sets cannot disagree.

use std::sync::Arc;

use analyzer::CallGraph;
use analyzer::{AttachVerdict, Binaries};

use crate::degraded::{missing_entry, vendor_present};
use crate::source::{binaries_of, entry_names, load, load_tree, resolve_vendor, timings_wanted};
use crate::{Error, Loaded, Notice, SourceOptions};

/// One vendor's selection with everything that produced it: graph, rules, binaries.
pub struct Selected {
    pub loaded: Loaded,
    /// The vendor selected for.
    pub vendor: String,
    /// The rules of this run (parsed once).
    pub rules: heuristics::Rules,
    pub selection: heuristics::Selection,
    pub binaries: Option<Arc<Binaries>>,
    pub entries: Vec<String>,
    /// What the analysis could not read or evaluate (sources, config, binaries).
    pub degraded: Vec<analyzer::Degradation>,
}

/// The selection of `opts.vendor` (exactly one vendor) from `entries` (none: the uverbs ones).
pub fn select(
    opts: &SourceOptions,
    entries: &[String],
    notify: &mut dyn FnMut(Notice),
) -> Result<Selected, Error> {
    let rules = crate::load_rules(opts.rules.as_deref())?;
    select_with_rules(opts, rules, entries, notify)
}

pub(crate) fn select_with_rules(
    opts: &SourceOptions,
    rules: heuristics::Rules,
    entries: &[String],
    notify: &mut dyn FnMut(Notice),
) -> Result<Selected, Error> {
    let Some(vendor) = opts.vendor.clone() else {
        return Err(Error::VendorRequired);
    };
    let vendor = resolve_vendor(&rules, "--vendor", &vendor, None)?.clone();
    let loaded = load(opts, &rules, notify)?;
    let binaries = binaries_of(opts)?;
    select_loaded(opts, rules, loaded, binaries, &vendor, entries)
}

/// What a multi-vendor run does with each vendor's selection, in two steps: `finish` on a
/// thread of its own (beside the next vendor's), its notices kept in the buffer it is given;
/// `take` on the calling thread in the list's order, after those notices.
pub struct EachSelection<'a, R> {
    /// Everything a selection needs that does not touch the run's outputs: checked, rendered.
    pub finish: &'a Finish<'a, R>,
    /// What is done in the list's order (written, kept); an error here stops the run before
    /// any later vendor is taken.
    pub take: &'a mut Take<'a, R>,
}

/// [`EachSelection::finish`]: a selection to what is taken, its notices into the buffer.
pub type Finish<'a, R> = dyn Fn(Selected, &mut Vec<Notice>) -> Result<R, Error> + Sync + 'a;

/// [`EachSelection::take`]: a finished selection taken, with the run's notices.
pub type Take<'a, R> = dyn FnMut(R, &mut dyn FnMut(Notice)) -> Result<(), Error> + 'a;

/// How many vendors of a list are worked on at once (selected and finished; a finished one
/// waiting to be taken holds its rendered set, not its graph): the two cores of a small machine
/// stay busy without every vendor's graph alive.
const VENDORS_AT_ONCE: usize = 2;

/// Several vendors from one parse of the tree and one read of the binaries, each selection
/// the same as a single-vendor run's. `all` keeps only the vendors whose driver the config
/// builds (and reads no unbuilt directory); the others are skipped with a notice. Each vendor
/// is selected and finished on a thread of its own, two at a time; each outcome is taken in the
/// list's order, after the notices its vendor had: notices, errors and outputs come as a serial
/// run's would. Returns how many vendors were selected.
pub fn select_vendors<R: Send>(
    opts: &SourceOptions,
    rules: &heuristics::Rules,
    vendors: &[String],
    all: bool,
    entries: &[String],
    notify: &mut dyn FnMut(Notice),
    each: EachSelection<R>,
) -> Result<usize, Error> {
    let mut resolved = Vec::with_capacity(vendors.len());
    for v in vendors {
        resolved.push((v, resolve_vendor(rules, "--vendor", v, None)?));
    }
    let t0 = std::time::Instant::now();
    // `all` asks for what the config builds; a list names vendors to report even when not
    // built (bnxt_re on 6.1: its probes are `not-built`).
    let unbuilt_dirs = if all {
        Vec::new()
    } else {
        resolved
            .iter()
            .flat_map(|(_, v)| v.dirs.iter().cloned())
            .collect()
    };
    let tree = load_tree(opts, rules, unbuilt_dirs)?;
    let binaries = binaries_of(opts)?;
    if timings_wanted() {
        notify(Notice::Timing(format!(
            "{} (once for {} vendors); with the binaries {:.1} ms",
            tree.timings,
            vendors.len(),
            t0.elapsed().as_secs_f64() * 1e3
        )));
    }
    let EachSelection { finish, take } = each;
    let work = |(name, vendor): &(&String, &heuristics::Vendor)| -> Outcome<R> {
        let mut notices = Vec::new();
        let result = prepare_vendor(opts, rules, &tree, &binaries, name, vendor, all, entries)
            .and_then(|p| match p {
                Prepared::Ready(s) => finish(*s, &mut notices).map(Some),
                Prepared::Skipped(line) => {
                    notices.push(Notice::Line(line));
                    Ok(None)
                }
            });
        Outcome { notices, result }
    };
    let mut selected = 0;
    in_list_order(&resolved, &work, |outcome| {
        outcome.notices.into_iter().for_each(&mut *notify);
        match outcome.result? {
            Some(r) => take(r, notify).map(|()| selected += 1),
            None => Ok(()),
        }
    })?;
    Ok(selected)
}

/// `work` on each item on a thread of its own, [`VENDORS_AT_ONCE`] at a time, and `take` of
/// each result on the calling thread in the items' order. A thread says when its work is done:
/// the next item starts then, not when the calling thread has taken the items before it, so
/// one that finishes first frees its core while the one before it still runs. The first error
/// of `take` stops the run: the items already started are waited for, none is taken, and a
/// panic of one of them (a bug, printed by the hook) does not replace the error, as a serial
/// run would never have started them.
fn in_list_order<T: Sync, O: Send>(
    items: &[T],
    work: &(dyn Fn(&T) -> O + Sync),
    mut take: impl FnMut(O) -> Result<(), Error>,
) -> Result<(), Error> {
    std::thread::scope(|scope| {
        let (done_tx, done_rx) = std::sync::mpsc::channel::<usize>();
        let mut started = std::collections::VecDeque::with_capacity(items.len());
        let mut done = vec![false; items.len()];
        let (mut running, mut next, mut taken) = (0, 0, 0);
        loop {
            while running < VENDORS_AT_ONCE {
                let Some(item) = items.get(next) else { break };
                let said = SaysDone(done_tx.clone(), next);
                started.push_back(scope.spawn(move || {
                    let _said = said;
                    work(item)
                }));
                running += 1;
                next += 1;
            }
            if !done.get(taken).copied().unwrap_or(true) {
                // Wait for one to finish (every thread says so, a panicking one too; the
                // sender kept here means the wait ends only that way).
                if let Ok(i) = done_rx.recv() {
                    if let Some(d) = done.get_mut(i) {
                        *d = true;
                    }
                    running -= 1;
                    continue;
                }
            }
            let Some(oldest) = started.pop_front() else {
                return Ok(());
            };
            taken += 1;
            let outcome = oldest
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            if let Err(e) = take(outcome) {
                for later in started {
                    let _ = later.join();
                }
                return Err(e);
            }
        }
    })
}

/// Sends its item's index when dropped: at the end of the item's thread of [`in_list_order`],
/// whether its work returned or panicked.
struct SaysDone(std::sync::mpsc::Sender<usize>, usize);

impl Drop for SaysDone {
    fn drop(&mut self) {
        // The receiver lives until every thread is joined.
        let _ = self.0.send(self.1);
    }
}

/// What one vendor's thread of [`select_vendors`] hands back: the notices it had, in order,
/// and its finished selection (`None`: skipped, its notice says why).
struct Outcome<R> {
    notices: Vec<Notice>,
    result: Result<Option<R>, Error>,
}

/// One vendor of a multi-vendor run: its selection, or why `all` skips it.
enum Prepared {
    Ready(Box<Selected>),
    Skipped(String),
}

/// The graph and the selection of one vendor of [`select_vendors`] over the shared tree.
#[allow(clippy::too_many_arguments)]
fn prepare_vendor(
    opts: &SourceOptions,
    rules: &heuristics::Rules,
    tree: &Arc<analyzer::SourceTree>,
    binaries: &Option<Arc<Binaries>>,
    name: &str,
    vendor: &heuristics::Vendor,
    all: bool,
    entries: &[String],
) -> Result<Prepared, Error> {
    let built = tree.files.iter().any(|f| {
        vendor.dirs.iter().any(|d| f.path.starts_with(d.as_str()))
            && tree.build.module_of(&f.path).is_some()
    });
    if all && !built {
        return Ok(Prepared::Skipped(format!(
            "{name}: not built by this config, skipped (--vendor all)"
        )));
    }
    let loaded = Loaded {
        tree: tree.clone(),
        graph: CallGraph::build(tree, &rules.scope_of(&vendor.dirs)),
    };
    let one = SourceOptions {
        vendor: Some(name.to_string()),
        ..opts.clone()
    };
    let s = select_loaded(
        &one,
        rules.clone(),
        loaded,
        binaries.clone(),
        vendor,
        entries,
    )?;
    Ok(Prepared::Ready(Box::new(s)))
}

/// The selection of `vendor` on a tree already loaded (and binaries already read).
fn select_loaded(
    opts: &SourceOptions,
    rules: heuristics::Rules,
    loaded: Loaded,
    binaries: Option<Arc<Binaries>>,
    vendor: &heuristics::Vendor,
    entries: &[String],
) -> Result<Selected, Error> {
    let named_by_user = !entries.is_empty();
    let entries = entry_names(entries);
    let ids = loaded
        .graph
        .entries(&entries)
        .map_err(|n| missing_entry(&loaded.tree, &n.0, named_by_user))?;
    // A degraded tree (a truncated .config) fails on that first, unless allowed: it is the
    // cause, an unbuilt vendor only its consequence.
    if loaded.tree.degraded.is_empty() || opts.allow_degraded {
        vendor_present(opts, vendor, &loaded.tree)?;
    }
    let g = &loaded.graph;
    // Functions the binary inlined are wrappers for the selection's depth limits.
    let inlined = |id: analyzer::FnId| {
        let n = g.node(id);
        binaries.as_ref().is_some_and(|b| {
            n.module.is_some() && b.verdict(n.module.as_deref(), &n.name) == AttachVerdict::Inlined
        })
    };
    let selection = heuristics::select_with(g, &rules, vendor, &ids, &inlined)?;
    let mut degraded = loaded.tree.degraded.clone();
    degraded.extend(analyzer::module_gaps(
        &opts.kernel_src,
        &loaded.tree.build,
        binaries.as_deref(),
        selection
            .verdicts
            .iter()
            .filter(|v| v.keep)
            .map(|v| g.node(v.id).file.as_str()),
    ));
    Ok(Selected {
        loaded,
        vendor: vendor.name.clone(),
        rules,
        selection,
        binaries,
        entries,
        degraded,
    })
}

/// The manifest of a selection, with what the input lost.
pub fn manifest_of(opts: &SourceOptions, s: &Selected) -> manifest::Manifest {
    let config = match &opts.kconfig {
        Some(p) => p.display().to_string(),
        None => ".config".to_string(),
    };
    let mut m = codegen::build_manifest(
        &s.loaded.graph,
        &s.selection,
        s.binaries.as_deref(),
        manifest::KernelInfo {
            version: s
                .loaded
                .tree
                .version
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            config,
        },
        &s.entries,
    );
    m.degraded = s.degraded.iter().map(codegen::degraded_entry).collect();
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::sync::Mutex;
    use std::time::Duration;

    /// The third item starts while the first still runs (the second finished, not taken): the
    /// first waits for word from the third, which would never come if a slot were freed only
    /// when the items before it are taken. The results are taken in the items' order.
    #[test]
    fn the_next_item_starts_when_one_finishes_and_results_come_in_order() {
        let (tx, rx) = channel::<()>();
        let (tx, rx) = (Mutex::new(tx), Mutex::new(rx));
        let work = |i: &usize| -> Result<usize, String> {
            match *i {
                0 => rx
                    .lock()
                    .map_err(|_| "lock".to_string())?
                    .recv_timeout(Duration::from_secs(20))
                    .map(|()| 0)
                    .map_err(|_| "the third item never started while the first ran".into()),
                2 => {
                    let sent = tx.lock().map_err(|_| "lock".to_string())?.send(());
                    sent.map(|()| 2)
                        .map_err(|_| "the first item is gone".into())
                }
                i => Ok(i),
            }
        };
        let mut taken = Vec::new();
        let r = in_list_order(&[0usize, 1, 2, 3], &work, |o| {
            taken.push(o.map_err(Error::Output)?);
            Ok(())
        });
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(taken, vec![0, 1, 2, 3]);
    }

    /// An error taking an item stops the run: nothing after it is taken, whatever finished.
    #[test]
    fn an_error_stops_the_run_in_its_order() {
        let work = |i: &usize| *i;
        let mut taken = Vec::new();
        let r = in_list_order(&[0usize, 1, 2, 3, 4], &work, |i| {
            if i == 2 {
                return Err(Error::Output("the third".into()));
            }
            taken.push(i);
            Ok(())
        });
        assert!(r.is_err());
        assert_eq!(taken, vec![0, 1]);
    }
}

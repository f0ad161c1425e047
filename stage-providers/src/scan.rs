//! The libraries of a scan and what the stage does with each: probe a build the provider table
//! resolves, name and skip one it does not, detach one whose file changed under the jobs or
//! that no process maps any more. Each decision that changes is one line naming the path and
//! the build-id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use providers::{loaded_providers, ErrorPath, ProviderPlan, ProviderTable};
use wire::{LibraryState, ProviderLibrary};

use crate::probe::Probe;

pub(crate) struct Libraries {
    table: ProviderTable,
    path: ErrorPath,
    proc_root: PathBuf,
    /// by the path the jobs see
    known: BTreeMap<String, ProviderLibrary>,
}

impl Libraries {
    pub(crate) fn new(table: ProviderTable, path: ErrorPath, proc_root: PathBuf) -> Self {
        Libraries {
            table,
            path,
            proc_root,
            known: BTreeMap::new(),
        }
    }

    pub(crate) fn list(&self) -> Vec<ProviderLibrary> {
        self.known.values().cloned().collect()
    }

    /// Lists the libraries the processes map now and brings the probes in line: the lines
    /// of what changed.
    pub(crate) fn scan(&mut self, probe: &mut Probe) -> Vec<String> {
        let loaded = loaded_providers(&self.proc_root, &self.path);
        let plans = self.table.plan(&loaded);
        let mut lines = Vec::new();
        let mut seen = Vec::new();
        for plan in plans {
            let (path, build_id, pids) = match &plan {
                ProviderPlan::Probe { path, entry, pids } => (path, Some(&entry.build_id), pids),
                ProviderPlan::Unresolved {
                    path,
                    build_id,
                    pids,
                } => (path, build_id.as_ref(), pids),
            };
            seen.push(path.clone());
            if let Some(lib) = self.known.get_mut(path) {
                if lib.build_id.as_ref() == build_id {
                    lib.processes = pids.len();
                    continue;
                }
                if let Some(line) = changed(lib, build_id, probe) {
                    lines.push(line);
                }
            }
            let lib = self.decide(&plan, probe, &mut lines);
            self.known.insert(path.clone(), lib);
        }
        self.forget_unmapped(&seen, probe, &mut lines);
        lines
    }

    /// What to do with a library met for the first time (or again, changed).
    fn decide(
        &self,
        plan: &ProviderPlan,
        probe: &mut Probe,
        lines: &mut Vec<String>,
    ) -> ProviderLibrary {
        match plan {
            ProviderPlan::Probe { path, entry, pids } => {
                let file = reachable(&self.proc_root, path, pids);
                let state = match probe.attach(path, &file, entry.offset) {
                    Ok(()) => {
                        lines.push(plan.line());
                        LibraryState::Probed {
                            provider: entry.provider.clone(),
                            rdma_core: entry.rdma_core.clone(),
                            function: entry.function.clone(),
                            offset: entry.offset,
                        }
                    }
                    Err(why) => {
                        lines.push(format!(
                            "provider {path}: build-id {}: the uprobe at file offset {:#x} was refused: {why}",
                            entry.build_id, entry.offset
                        ));
                        LibraryState::Failed { why }
                    }
                };
                ProviderLibrary {
                    path: path.clone(),
                    build_id: Some(entry.build_id.clone()),
                    state,
                    processes: pids.len(),
                }
            }
            ProviderPlan::Unresolved {
                path,
                build_id,
                pids,
            } => {
                lines.push(plan.line());
                ProviderLibrary {
                    path: path.clone(),
                    build_id: build_id.clone(),
                    state: LibraryState::Unresolved,
                    processes: pids.len(),
                }
            }
        }
    }

    /// Libraries no process maps any more: detached (the uprobe holds the file's inode) and
    /// forgotten.
    fn forget_unmapped(&mut self, seen: &[String], probe: &mut Probe, lines: &mut Vec<String>) {
        let gone: Vec<String> = self
            .known
            .keys()
            .filter(|p| !seen.contains(p))
            .cloned()
            .collect();
        for path in gone {
            if probe.detach(&path) {
                lines.push(format!(
                    "provider {path}: no process maps it any more, detached"
                ));
            }
            self.known.remove(&path);
        }
    }
}

/// A probed library whose file now has another build-id (or none): its uprobe is detached,
/// never left on bytes it was not resolved for.
fn changed(lib: &ProviderLibrary, now: Option<&String>, probe: &mut Probe) -> Option<String> {
    if !probe.detach(&lib.path) {
        return None;
    }
    Some(format!(
        "provider {}: its file changed under the running jobs (build-id {} -> {}), detached",
        lib.path,
        lib.build_id.as_deref().unwrap_or("(none)"),
        now.map_or("(none)", String::as_str)
    ))
}

/// The library as this process reaches it: through the first mapping process's root (a
/// container's own file), else the path itself.
fn reachable(proc_root: &Path, path: &str, pids: &[u32]) -> PathBuf {
    pids.first()
        .map(|pid| {
            proc_root
                .join(pid.to_string())
                .join("root")
                .join(path.trim_start_matches('/'))
        })
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from(path))
}

//! The baseline entries at load: which handlers get their baseline entry (`pg_<id>_bl`, an
//! fentry whose fexit is the handler's failure probe), and the `bl_config` the collector
//! writes after load.
//!
//! Mechanism: fentry on the handler and the fexit programs the set already has, per-task state
//! in task storage, on every kernel. fsession (7.0+, Debian 7.2) is not used: its cookie lives
//! for one call of one function, and a trace spans the calls of every probed function inside
//! the handler, so the per-task state is needed anyway; it would save one trampoline per
//! traced handler call only, and libbpf-rs 0.27 names its type Unknown and has no cookie option.

use std::collections::BTreeSet;
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags, Object, OpenObject};

use crate::baseline::BaselineConfig;
use crate::kernel_state::AttachStatus;
use crate::probes::ProbeTable;

/// How calls are traced in this kernel.
pub(crate) const MECHANISM: &str = "fentry+fexit, task storage (fsession not used: its per-call cookie cannot carry a trace across the inner functions)";

/// The handlers whose baseline entry is attached, and how.
#[derive(Debug, Clone)]
pub(crate) struct Traced {
    pub handlers: BTreeSet<u32>,
    pub mechanism: String,
}

/// Before load: turns on the baseline entry of every handler whose fexit program loads,
/// retargeted at `module:function` as the fexit is, and sizes the `baseline` ring. Returns
/// (probe id, program name).
pub(crate) fn pick_entries(
    open: &mut OpenObject,
    table: &ProbeTable,
    cfg: &BaselineConfig,
) -> Vec<(u32, String)> {
    if let Some(n) = cfg.ring_bytes {
        if let Some(mut m) = open.maps_mut().find(|m| m.name() == "baseline") {
            // a size the kernel refuses fails the load, which then goes on without the baseline
            let _ = m.set_max_entries(n);
        }
    }
    let loading: BTreeSet<String> = open
        .progs()
        .filter(|p| p.autoload())
        .map(|p| p.name().to_string_lossy().into_owned())
        .collect();
    let mut picked = Vec::new();
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let Some(p) = table
            .probes
            .iter()
            .find(|p| manifest::baseline_entry_name(p.id) == name)
        else {
            continue;
        };
        if !loading.contains(&p.program_name()) {
            continue;
        }
        if prog.set_attach_target(0, Some(p.target())).is_ok() {
            prog.set_autoload(true);
            picked.push((p.id, name));
        }
    }
    picked
}

/// After load: writes `bl_config` and attaches the picked entries of the handlers whose fexit
/// attached; `Err` is the "baseline unavailable: <why>" line.
pub(crate) fn attach_entries(
    obj: &Object,
    table: &ProbeTable,
    cfg: &BaselineConfig,
    entries: Vec<(u32, String)>,
    attached: &[AttachStatus],
    links: &mut Vec<(u32, Link)>,
) -> Result<Traced, String> {
    if entries.is_empty() {
        return Err("baseline unavailable: the object has no baseline entry for an attached handler (compiled from an older probegen.bpf.h?)".into());
    }
    write_config(obj, cfg).map_err(|e| format!("baseline unavailable: bl_config: {e}"))?;
    let mut handlers = BTreeSet::new();
    let mut failed = Vec::new();
    for (id, name) in entries {
        if !attached.iter().any(|s| s.probe == id && s.attached) {
            continue;
        }
        let Some(prog) = obj.progs_mut().find(|p| p.name().to_string_lossy() == name) else {
            continue;
        };
        match prog.attach() {
            Ok(link) => {
                links.push((id, link));
                handlers.insert(id);
            }
            Err(e) => failed.push(format!(
                "{}: {e}",
                table.get(id).map_or("?", |p| p.function.as_str())
            )),
        }
    }
    if handlers.is_empty() {
        return Err(format!(
            "baseline unavailable: no baseline entry attached ({})",
            failed.join("; ")
        ));
    }
    let mut mechanism = MECHANISM.to_string();
    if !failed.is_empty() {
        mechanism.push_str(&format!("; not traced: {}", failed.join("; ")));
    }
    Ok(Traced {
        handlers,
        mechanism,
    })
}

/// `struct pg_bl_config`: sample, budget (u32), interval_ns, max_ns (u64).
fn write_config(obj: &Object, cfg: &BaselineConfig) -> Result<(), String> {
    let map = obj
        .maps()
        .find(|m| m.name() == "bl_config")
        .ok_or("no map bl_config")?;
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&cfg.sample.max(1).to_ne_bytes());
    v.extend_from_slice(&cfg.budget.to_ne_bytes());
    v.extend_from_slice(&ns(cfg.interval).to_ne_bytes());
    v.extend_from_slice(&ns(cfg.max).to_ne_bytes());
    map.update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
        .map_err(|e| e.to_string())
}

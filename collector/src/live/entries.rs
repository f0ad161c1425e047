//! The baseline entries at load: which handlers get their baseline entry, how, and the
//! `bl_config` the collector writes after load.
//!
//! Mechanism, chosen per kernel: where the kernel has fsession (7.0+, `BPF_TRACE_FSESSION` in
//! its BTF), a handler's session program (`pg_<id>_bs`) replaces both its fexit and its fentry:
//! one program runs at the handler's entry (the sampling decision, the trace's start kept in
//! the call's cookie) and at its exit (the failure probe; an unsampled call's exit does not
//! look for a trace). Elsewhere, the fentry `pg_<id>_bl` beside the handler's fexit. Either
//! way the trace across the inner functions is per-task state in task storage, appended by
//! their fexit programs: a cookie lives for one call of one function.

use std::collections::BTreeSet;
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags, Object, OpenObject};

use wire::{AttachStatus, Mechanism, ProbeTable};

use crate::warning::Warning;
use baseline::BaselineConfig;

/// How calls are traced on a kernel without fsession (or where it was refused).
const FENTRY: &str = "fentry+fexit, task storage";
/// How calls are traced on a kernel with fsession.
const SESSION: &str = "fsession on the handlers (entry and exit in one program, the trace's start in the call's cookie), fexit on the inner functions, task storage";

/// The handlers whose baseline entry is attached, and how.
#[derive(Debug, Clone)]
pub(crate) struct Traced {
    pub handlers: BTreeSet<u32>,
    pub mechanism: String,
}

/// One handler's baseline program picked before load.
#[derive(Debug, Clone)]
pub(crate) struct Picked {
    pub probe: u32,
    pub program: String,
    /// the session program, loaded instead of the handler's fexit
    pub session: bool,
}

/// Before load: turns on the baseline program of every handler whose fexit program loads,
/// retargeted at `module:function` as the fexit is: its session program in place of the fexit
/// when `session` (the kernel has fsession) and the object has one, its fentry otherwise. Sizes
/// the `baseline` ring.
pub(crate) fn pick_entries(
    open: &mut OpenObject,
    table: &ProbeTable,
    cfg: &BaselineConfig,
    session: bool,
) -> Vec<Picked> {
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
    let handlers: Vec<&wire::ProbeInfo> = table
        .probes
        .iter()
        .filter(|p| loading.contains(&p.program_name()))
        .collect();
    let mut picked = Vec::new();
    // sessions first: a handler's fexit is turned off only once its session is set to load
    if session {
        for mut prog in open.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let p = handlers
                .iter()
                .find(|p| manifest::baseline_session_name(p.id) == name);
            picked.extend(p.and_then(|p| turn_on(&mut prog, p, true)));
        }
    }
    let in_session: BTreeSet<String> = picked
        .iter()
        .filter_map(|s| table.get(s.probe).map(|p| p.program_name()))
        .collect();
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        if in_session.contains(&name) {
            prog.set_autoload(false);
            continue;
        }
        let p = handlers.iter().find(|p| {
            manifest::baseline_entry_name(p.id) == name && !in_session.contains(&p.program_name())
        });
        picked.extend(p.and_then(|p| turn_on(&mut prog, p, false)));
    }
    picked
}

/// What a module's attach fills in: its probes' status, the links it holds, its warnings.
pub(crate) struct Attaching<'a> {
    pub attached: &'a mut [AttachStatus],
    pub links: &'a mut Vec<(u32, Link)>,
    pub warnings: &'a mut Vec<Warning>,
}

/// Sets `prog`, the baseline program of handler `p`, to load at the handler's target.
fn turn_on(
    prog: &mut libbpf_rs::OpenProgramMut<'_>,
    p: &wire::ProbeInfo,
    session: bool,
) -> Option<Picked> {
    prog.set_attach_target(0, Some(p.target())).ok()?;
    prog.set_autoload(true);
    Some(Picked {
        probe: p.id,
        program: prog.name().to_string_lossy().into_owned(),
        session,
    })
}

/// After load: writes `bl_config` and attaches the picked programs: a session (the handler's
/// failure probe as well: its status is set here) or the entry of a handler whose fexit
/// attached. `refused`: why fsession is not used on a kernel that has it. `Err` is the
/// "baseline unavailable: <why>" line.
pub(crate) fn attach_entries(
    obj: &Object,
    table: &ProbeTable,
    cfg: &BaselineConfig,
    picked: Vec<Picked>,
    into: Attaching<'_>,
    refused: Option<&str>,
) -> Result<Traced, String> {
    let Attaching {
        attached,
        links,
        warnings,
    } = into;
    if picked.is_empty() {
        return Err("baseline unavailable: the object has no baseline entry for an attached handler (compiled from an older probegen.bpf.h?)".into());
    }
    write_config(obj, cfg).map_err(|e| format!("baseline unavailable: bl_config: {e}"))?;
    let mut handlers = BTreeSet::new();
    let mut sessions = 0;
    let mut failed = Vec::new();
    for pick in picked {
        let Some(st) = attached.iter_mut().find(|s| s.probe == pick.probe) else {
            continue;
        };
        if !pick.session && !st.attached {
            continue;
        }
        let Some(prog) = obj
            .progs_mut()
            .find(|p| p.name().to_string_lossy() == pick.program)
        else {
            continue;
        };
        match prog.attach() {
            Ok(link) => {
                links.push((pick.probe, link));
                handlers.insert(pick.probe);
                if pick.session {
                    st.attached = true;
                    st.mechanism = Some(Mechanism::Fsession);
                    sessions += 1;
                }
            }
            Err(e) => {
                let function = table.get(pick.probe).map_or("?", |p| p.function.as_str());
                failed.push(format!("{function}: {e}"));
                if pick.session {
                    // the session was the handler's failure probe too: not attached, as an
                    // fexit that does not attach
                    let reason = format!("fsession: {e}");
                    st.attached = false;
                    st.reason = Some(reason.clone());
                    warnings.push(Warning::ProbeNotAttached {
                        probe: st.probe,
                        module: st.module.clone(),
                        function: st.function.clone(),
                        reason,
                    });
                }
            }
        }
    }
    if handlers.is_empty() {
        return Err(format!(
            "baseline unavailable: no baseline entry attached ({})",
            failed.join("; ")
        ));
    }
    let mut mechanism = if sessions == handlers.len() {
        SESSION.to_string()
    } else if sessions > 0 {
        format!(
            "{SESSION} ({sessions} of {} handlers; the others {FENTRY})",
            handlers.len()
        )
    } else {
        FENTRY.to_string()
    };
    if let Some(why) = refused {
        mechanism.push_str(&format!(" (fsession not used: {why})"));
    }
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

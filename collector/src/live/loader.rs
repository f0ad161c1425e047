//! Live loading with libbpf-rs: open the probe object, check it against the manifest, skip
//! targets the running kernel lacks, retarget every fexit program at `module:function` (the
//! manifest may hold the same name in two modules, e.g. `create_qp` in ib_core and ib_uverbs),
//! resize the ring buffer, load, attach, and read the per-CPU counters. A probe whose module has
//! no BTF (an out-of-tree build) attaches by its kprobe/kretprobe fallback programs instead.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder, OpenObject};

use super::btf::{clone_base, clones_of, mismatch, HostBtf, Lookup, Signature};
use wire::{
    AttachKind, AttachStatus, KernelTotals, Mechanism, PgErrnoKey, ProbeTable, QpError, QpErrors,
};

use crate::error::CollectError;
use crate::warning::Warning;

/// Maps the collector reads, with their key and value sizes.
const MAPS: &[(&str, u32, u32)] = &[
    ("calls", 4, 8),
    ("failures", 4, 8),
    ("errnos", 8, 8),
    ("seq", 4, 8),
    ("drops", 4, 8),
];

/// One `qp_errors` entry: key {probe_id, qpn, pid, pad} (4 x u32), value {first_ts_ns u64,
/// repeats u64, code s32, pad, peer (32 bytes, absent in objects built before it)}
/// (probegen.bpf.h `pg_qp_key`, `pg_qp_val`).
fn qp_error(table: &ProbeTable, key: &[u8], val: &[u8]) -> Option<QpError> {
    let u32_at = |b: &[u8], o: usize| b.get(o..o + 4)?.try_into().ok().map(u32::from_ne_bytes);
    let u64_at = |b: &[u8], o: usize| b.get(o..o + 8)?.try_into().ok().map(u64::from_ne_bytes);
    let probe = u32_at(key, 0)?;
    let code = u32_at(val, 16)? as i32;
    let p = table.get(probe);
    Some(QpError {
        probe,
        function: p.map_or_else(String::new, |p| p.function.clone()),
        qpn: u32_at(key, 4)?,
        pid: u32_at(key, 8)?,
        status: p
            .and_then(|p| p.data_plane_status(code))
            .unwrap_or_else(|| format!("other ({code})")),
        first_ts_ns: u64_at(val, 0)?,
        count: u64_at(val, 8)?.saturating_add(1),
        peer: wire::QpPeer::of_entry(val),
    })
}

/// Every difference between an object's program table and a manifest's probes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ProgramTableDiff(pub Vec<String>);

impl std::fmt::Display for ProgramTableDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the object's probe table differs from the manifest ({} differences): {}",
            self.0.len(),
            self.0.join("; ")
        )
    }
}

impl std::error::Error for ProgramTableDiff {}

/// The object's program table against the manifest's attachable probes: `Err` names every
/// difference (missing program, extra program, different section). Kprobe fallback programs
/// may be missing (an object from before them), not differ.
pub(crate) fn compare_programs(
    table: &ProbeTable,
    programs: &[(String, String)],
) -> Result<(), ProgramTableDiff> {
    let want: BTreeMap<String, String> = table
        .probes
        .iter()
        .map(|p| (p.program_name(), p.section()))
        .collect();
    let have: BTreeMap<&str, &str> = programs
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_str()))
        .collect();
    let mut diffs = Vec::new();
    for (name, sec) in &want {
        match have.get(name.as_str()) {
            None => diffs.push(format!("manifest probe {name} ({sec}) has no program")),
            Some(s) if s != sec => {
                diffs.push(format!("{name}: object section `{s}`, manifest `{sec}`"))
            }
            _ => {}
        }
    }
    let optional: BTreeMap<String, String> = table
        .probes
        .iter()
        .flat_map(|p| {
            p.fallback
                .iter()
                .cloned()
                .chain([baseline_program(p), baseline_session(p)])
        })
        .collect();
    for (name, sec) in &have {
        match optional.get(*name) {
            _ if want.contains_key(*name) => {}
            // libbpf drops the `?` (autoload off) from the section name it reports
            Some(s) if s.trim_start_matches('?') == sec.trim_start_matches('?') => {}
            Some(s) => diffs.push(format!("{name}: object section `{sec}`, manifest `{s}`")),
            None => diffs.push(format!(
                "object program {name} ({sec}) is not in the manifest"
            )),
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(ProgramTableDiff(diffs))
    }
}

/// A probe's baseline session program as (name, section); only handlers' exist in an object.
fn baseline_session(p: &wire::ProbeInfo) -> (String, String) {
    (
        manifest::baseline_session_name(p.id),
        manifest::baseline_session_section(&p.function),
    )
}

/// A probe's baseline entry program as (name, section); only handlers' exist in an object.
fn baseline_program(p: &wire::ProbeInfo) -> (String, String) {
    (
        manifest::baseline_entry_name(p.id),
        manifest::baseline_entry_section(&p.function),
    )
}

/// Where a probe attaches in the running kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Attach, retargeted at this `module:function` or function (`None`: as the section says).
    Attach(Option<String>),
    /// Attach the kprobe fallback pair at `module:<symbol>`: the module has no BTF, or the
    /// function is only a compiler clone here (`Some`: that clone symbol).
    Kprobe(Option<String>),
    /// A clone-only probe whose manifest symbol this build names otherwise: its kretprobe
    /// attaches at each of these (the clones of the function here, or the plain function).
    Kretprobes(Vec<String>),
    /// The running kernel lacks it, or has it with another prototype (the reason): skipped.
    Missing(String),
}

/// What the running kernel offers: kallsyms entries of the wanted names and their compiler
/// clones, and the BTF under /sys/kernel/btf (each fexit probe's prototype is checked there).
pub(crate) struct KernelSymbols {
    /// None: kallsyms unreadable, assume everything is there and let the load decide.
    syms: Option<HashSet<(String, String)>>,
    btf_dir: std::path::PathBuf,
    btf: HostBtf,
}

impl KernelSymbols {
    pub(crate) fn read(table: &ProbeTable) -> Self {
        let wanted: HashSet<String> = table
            .probes
            .iter()
            .map(|p| match &p.kind {
                AttachKind::Fexit | AttachKind::Fentry { .. } => p.function.clone(),
                AttachKind::Kretprobe(s) => clone_base(s).to_string(),
            })
            .collect();
        let syms = std::fs::read_to_string("/proc/kallsyms")
            .ok()
            .map(|t| parse_kallsyms(&t, &wanted));
        Self::with(syms.filter(|s| !s.is_empty()), "/sys/kernel/btf".into())
    }

    fn with(syms: Option<HashSet<(String, String)>>, btf_dir: std::path::PathBuf) -> Self {
        KernelSymbols {
            syms,
            btf: HostBtf::open(&btf_dir),
            btf_dir,
        }
    }

    /// The compiler clones of `function` kallsyms lists in `module`.
    fn clones(&self, function: &str, module: &str) -> Vec<String> {
        let Some(s) = &self.syms else {
            return Vec::new();
        };
        clones_of(
            function,
            s.iter()
                .filter(|(_, m)| m == module)
                .map(|(n, _)| n.as_str()),
        )
    }

    /// Where to attach `p`, or why the running kernel cannot have it.
    pub(crate) fn target(&self, p: &wire::ProbeInfo) -> Target {
        match &p.kind {
            AttachKind::Kretprobe(sym) => self.clone_target(p, sym),
            AttachKind::Fexit | AttachKind::Fentry { .. } => {
                let in_module = self.btf_dir.join(&p.module).exists();
                let known = |m: &str| {
                    self.syms
                        .as_ref()
                        .is_none_or(|s| s.contains(&(p.function.clone(), m.to_string())))
                };
                let listed = |m: &str| {
                    let key = (p.function.clone(), m.to_string());
                    self.syms.as_ref().is_some_and(|s| s.contains(&key))
                };
                if in_module && known(&p.module) {
                    let t = Target::Attach(Some(p.target()));
                    self.verified(p, &p.module.clone(), t)
                } else if !in_module && !p.fallback.is_empty() && listed(&p.module) {
                    Target::Kprobe(None)
                } else if !in_module
                    && listed(&p.module)
                    && matches!(p.kind, AttachKind::Fentry { .. })
                {
                    // a module loaded without BTF (DKMS, OFED): an entry program needs it
                    Target::Missing(format!(
                        "{} has no BTF: a data-plane entry program needs it",
                        p.module
                    ))
                } else if known("vmlinux") && self.syms.is_some() {
                    // built into this kernel: resolve in vmlinux BTF by name
                    self.verified(p, "vmlinux", Target::Attach(Some(p.function.clone())))
                } else if !in_module {
                    Target::Missing(format!(
                        "module {} not loaded (no /sys/kernel/btf/{})",
                        p.module, p.module
                    ))
                } else {
                    self.only_clones(p)
                }
            }
        }
    }

    /// `t` when `p`'s function in `module`'s BTF has the prototype the program was built
    /// for; else why not.
    fn verified(&self, p: &wire::ProbeInfo, module: &str, t: Target) -> Target {
        if matches!(p.kind, AttachKind::Fentry { .. }) {
            // an entry program reads its arguments by CO-RE, relocated (or refused) at load:
            // only the function's presence matters here
            return match self.btf.lookup(module, &p.function) {
                Lookup::NoFunction => {
                    Target::Missing(format!("{} is not in {module}'s BTF", p.function))
                }
                _ => t,
            };
        }
        let want = Signature {
            nargs: p.nargs,
            returns: p.returns,
            ret_size: p.ret_size,
        };
        match self.btf.lookup(module, &p.function) {
            Lookup::Found(have) => mismatch(want, have).map_or(t, Target::Missing),
            // no BTF to ask: the load's own BTF resolution decides, as before this check
            Lookup::NoBtf => t,
            Lookup::NoFunction => {
                let clones = self.clones(&p.function, module);
                match clones.first() {
                    Some(c) if !p.fallback.is_empty() => Target::Kprobe(Some(c.clone())),
                    _ => Target::Missing(format!(
                        "{} is not in {module}'s BTF{}",
                        p.function,
                        clone_note(&clones)
                    )),
                }
            }
        }
    }

    /// A fexit probe whose function kallsyms does not list in its loaded module: a clone of
    /// it may be there (another gcc), reached by the kprobe fallback when the probe has one.
    fn only_clones(&self, p: &wire::ProbeInfo) -> Target {
        let clones = self.clones(&p.function, &p.module);
        match clones.first() {
            Some(c) if !p.fallback.is_empty() => Target::Kprobe(Some(c.clone())),
            _ => Target::Missing(format!(
                "{} not in /proc/kallsyms for [{}]{}",
                p.function,
                p.module,
                clone_note(&clones)
            )),
        }
    }

    /// A clone-only probe: its symbol as the manifest names it, else the clones this build
    /// has of the same function (or the plain function), resolved by name.
    fn clone_target(&self, p: &wire::ProbeInfo, sym: &str) -> Target {
        let Some(s) = &self.syms else {
            return Target::Attach(None);
        };
        if s.iter().any(|(n, _)| n == sym) {
            return Target::Attach(None);
        }
        let base = clone_base(sym);
        let mut here = self.clones(base, &p.module);
        if here.is_empty() && p.module == "vmlinux" {
            here = clones_of(base, s.iter().map(|(n, _)| n.as_str()));
        }
        if s.contains(&(base.to_string(), p.module.clone())) {
            here.push(base.to_string());
        }
        if here.is_empty() {
            Target::Missing(format!(
                "kprobe symbol {sym} not in /proc/kallsyms, nor another clone of {base}"
            ))
        } else {
            Target::Kretprobes(here)
        }
    }
}

fn clone_note(clones: &[String]) -> String {
    if clones.is_empty() {
        String::new()
    } else {
        format!(
            " (only as {} here, and the probe has no kprobe fallback)",
            clones.join(", ")
        )
    }
}

/// (name, module) of the kallsyms text symbols whose name, without compiler-clone suffixes,
/// is wanted; built-in ones get module `vmlinux`.
pub(crate) fn parse_kallsyms(text: &str, wanted: &HashSet<String>) -> HashSet<(String, String)> {
    let mut out = HashSet::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(_addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !matches!(kind, "t" | "T") || !wanted.contains(clone_base(name)) {
            continue;
        }
        let module = it
            .next()
            .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
            .unwrap_or("vmlinux");
        out.insert((name.to_string(), module.to_string()));
    }
    out
}

pub(crate) struct LoadOptions {
    pub strict: bool,
    /// events ring buffer size (power of two, multiple of the page size)
    pub ringbuf_bytes: Option<u32>,
    /// `--baseline`: load and attach the handlers' baseline entries
    pub baseline: Option<baseline::BaselineConfig>,
}

/// A loaded, attached probe set. `obj` owns the maps and no program; each module's programs
/// are an object of their own that reuses those maps, so one module's probes can be detached
/// and their programs closed (a loaded fexit program holds a reference on its target module,
/// and its link another) while the others run on, and loaded again against the module's new
/// BTF when it is back. The counters stay in the shared maps, keyed by probe id, throughout.
pub(crate) struct Loaded {
    pub obj: Object,
    object: std::path::PathBuf,
    strict: bool,
    modules: BTreeMap<String, ModulePrograms>,
    /// run time and runs of the programs closed so far (detached modules)
    retired_run: (u64, u64),
    /// skipped runs of those programs, by probe id (their counts outlive them)
    retired_missed: BTreeMap<u32, u64>,
    pub attached: Vec<AttachStatus>,
    /// What loading skipped or could not attach, for the run to report.
    pub warnings: Vec<Warning>,
    /// `--baseline`, until an object does not load with its entries
    baseline_cfg: Option<baseline::BaselineConfig>,
    /// With `--baseline`: the handlers traced and how, or why the baseline is unavailable
    pub baseline: Option<Result<crate::live::entries::Traced, String>>,
    /// With `--baseline`: the kernel has fsession and no object refused it yet
    session: bool,
    /// why fsession is not used on a kernel that has it (the pin, or a module's object that
    /// did not load with its session programs)
    session_refused: Option<String>,
}

/// The `qp_peers` map of the set (`struct pg_peer_key` {qpn, pid}); none without a peer probe.
impl crate::stage::PeerLookup for Loaded {
    fn peer(&self, qpn: u32, pid: u32, at_ns: u64) -> Option<wire::QpPeer> {
        let m = self.map("qp_peers").ok()?;
        let mut key = [0u8; 8];
        key[..4].copy_from_slice(&qpn.to_ne_bytes());
        key[4..].copy_from_slice(&pid.to_ne_bytes());
        let val = m.lookup(&key, MapFlags::ANY).ok()??;
        wire::QpPeer::from_bytes(&val, at_ns)
    }
}

/// One module's attached programs (the links drop before their object).
struct ModulePrograms {
    /// held: dropping a link detaches it
    _links: Vec<(u32, Link)>,
    obj: Object,
}

fn print_libbpf(level: libbpf_rs::PrintLevel, msg: String) {
    if level != libbpf_rs::PrintLevel::Debug {
        eprint!("{msg}");
    }
}

fn object_error(object: &Path, reason: impl std::fmt::Display) -> CollectError {
    CollectError::Object {
        object: object.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Opens `object` and checks it against `table`: the same programs in the same sections, the
/// maps the collector reads; resizes the ring buffer.
fn open_checked(
    table: &ProbeTable,
    object: &Path,
    ringbuf_bytes: Option<u32>,
) -> Result<OpenObject, CollectError> {
    let mut open = ObjectBuilder::default()
        .open_file(object)
        .map_err(|e| object_error(object, e))?;
    let programs: Vec<(String, String)> = open
        .progs()
        .map(|p| {
            (
                p.name().to_string_lossy().into_owned(),
                p.section().to_string_lossy().into_owned(),
            )
        })
        .collect();
    compare_programs(table, &programs).map_err(|e| object_error(object, e))?;
    let names: BTreeSet<String> = open
        .maps()
        .map(|m| m.name().to_string_lossy().into_owned())
        .collect();
    for (m, _, _) in MAPS.iter().chain(&[("events", 0, 0)]) {
        if !names.contains(*m) {
            return Err(object_error(object, format!("no map `{m}`")));
        }
    }
    if let Some(n) = ringbuf_bytes {
        if !n.is_power_of_two() || n < 4096 {
            return Err(CollectError::Option(format!(
                "--ringbuf-bytes {n}: must be a power of two of at least 4096"
            )));
        }
        let mut events = open.maps_mut().filter(|m| m.name() == "events");
        match events.next() {
            Some(mut m) => m
                .set_max_entries(n)
                .map_err(|source| CollectError::Libbpf {
                    what: format!("resizing events to {n}"),
                    source,
                })?,
            None => return Err(object_error(object, "no ring buffer `events`")),
        }
    }
    Ok(open)
}

/// Retargets every program at what the running kernel has; a program whose target is missing
/// is not loaded (or, with `strict`, the load fails). Returns each probe's attach status.
fn resolve_targets(
    open: &mut OpenObject,
    table: &ProbeTable,
    module: &str,
    ksyms: &KernelSymbols,
    strict: bool,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<AttachStatus>, CollectError> {
    let mut attached = Vec::new();
    let mut skipped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // functions to attach by kprobe, by module
    let mut kprobe: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // and their fallback programs, loaded instead of the fexit ones
    let mut picked: BTreeSet<String> = BTreeSet::new();
    let names: BTreeSet<String> = open
        .progs()
        .map(|p| p.name().to_string_lossy().into_owned())
        .collect();
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let Some(p) = table.probes.iter().find(|p| p.program_name() == name) else {
            continue;
        };
        if p.module != module {
            // another module's object loads it
            prog.set_autoload(false);
            continue;
        }
        let mut st = unattached(p);
        let target = match ksyms.target(p) {
            Target::Kprobe(_) if !p.fallback.iter().all(|(n, _)| names.contains(n)) => {
                Target::Missing(format!("module {} has no BTF and the object no kprobe fallback for it (an older probes.bpf.c)", p.module))
            }
            t => t,
        };
        match target {
            Target::Attach(None) => {}
            Target::Kretprobes(symbols) => st.symbols = symbols,
            Target::Kprobe(clone) => {
                prog.set_autoload(false);
                st.mechanism = Some(Mechanism::Kprobe);
                st.symbols = clone.into_iter().collect();
                picked.extend(p.fallback.iter().map(|(n, _)| n.clone()));
                let probes = kprobe.entry(p.module.clone()).or_default();
                probes.push(p.kprobe_label());
            }
            Target::Attach(Some(t)) => {
                prog.set_attach_target(0, Some(t.clone()))
                    .map_err(|source| CollectError::Libbpf {
                        what: format!("{name}: set_attach_target({t})"),
                        source,
                    })?
            }
            Target::Missing(reason) => {
                if strict {
                    return Err(strict_error(p.id, &p.module, &p.function, reason));
                }
                prog.set_autoload(false);
                skipped
                    .entry(reason.clone())
                    .or_default()
                    .push(format!("{}:{}", p.module, p.function));
                st.reason = Some(reason);
            }
        }
        attached.push(st);
    }
    for (reason, probes) in skipped {
        warnings.push(Warning::ProbesSkipped { reason, probes });
    }
    warnings.extend(clones_resolved(&attached));
    for mut prog in open.progs_mut() {
        if picked.contains(prog.name().to_string_lossy().as_ref()) {
            prog.set_autoload(true);
        }
    }
    for (module, probes) in kprobe {
        warnings.push(Warning::KprobeFallback { module, probes });
    }
    Ok(attached)
}

/// The probes attached at compiler clones this build names otherwise, if any.
fn clones_resolved(attached: &[AttachStatus]) -> Option<Warning> {
    let resolved: Vec<(String, String)> = attached
        .iter()
        .filter(|st| !st.symbols.is_empty())
        .map(|st| {
            (
                format!("{}:{}", st.module, st.function),
                st.symbols.join(" "),
            )
        })
        .collect();
    (!resolved.is_empty()).then_some(Warning::ClonesResolved(resolved))
}

/// `p`'s status before its target is known.
fn unattached(p: &wire::ProbeInfo) -> AttachStatus {
    AttachStatus {
        probe: p.id,
        function: p.function.clone(),
        module: p.module.clone(),
        attached: false,
        reason: None,
        mechanism: Some(match p.kind {
            AttachKind::Fexit => Mechanism::Fexit,
            AttachKind::Kretprobe(_) => Mechanism::KretprobeClone,
            AttachKind::Fentry { .. } => Mechanism::Fentry,
        }),
        symbols: Vec::new(),
    }
}

fn strict_error(probe: u32, module: &str, function: &str, reason: String) -> CollectError {
    CollectError::Strict {
        probe,
        module: module.to_string(),
        function: function.to_string(),
        reason,
    }
}

/// Attaches every loaded program; a failure is named (or, with `strict`, fatal).
fn attach_all(
    obj: &Object,
    table: &ProbeTable,
    attached: &mut [AttachStatus],
    strict: bool,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<(u32, Link)>, CollectError> {
    let mut links = Vec::new();
    for prog in obj.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        // the probe, and for a fallback program its section
        let Some((p, fallback)) = table.probes.iter().find_map(|p| {
            let fb = p.fallback.iter().find(|(n, _)| *n == name);
            (p.program_name() == name || fb.is_some()).then_some((p, fb))
        }) else {
            continue;
        };
        let Some(st) = attached.iter_mut().find(|s| s.probe == p.id) else {
            continue;
        };
        if st.reason.is_some() || !prog.autoload() {
            continue;
        }
        let link = match (fallback, st.symbols.as_slice()) {
            // at `module:function`, so a name two modules have resolves in this one; a kernel
            // that does not take that form gets the bare name
            (Some((_, sec)), symbols) => {
                let ret = sec.starts_with("?kretprobe");
                let f = symbols.first().unwrap_or(&p.function);
                (prog.attach_kprobe(ret, format!("{}:{f}", p.module)))
                    .or_else(|_| prog.attach_kprobe(ret, f))
                    .map(|l| vec![l])
            }
            (None, []) => prog.attach().map(|l| vec![l]),
            // a clone-only probe's kretprobe at every clone this build has of its function
            (None, symbols) => symbols
                .iter()
                .map(|sym| prog.attach_kprobe(true, sym))
                .collect::<Result<Vec<_>, _>>(),
        };
        match link {
            Ok(new) => {
                st.attached = true;
                links.extend(new.into_iter().map(|l| (st.probe, l)));
            }
            Err(e) => {
                st.attached = false;
                let nargs = table.get(st.probe).map_or(0, |p| p.nargs);
                let reason = attach_reason(&e, &st.function, nargs);
                if strict {
                    return Err(strict_error(st.probe, &st.module, &st.function, reason));
                }
                warnings.push(Warning::ProbeNotAttached {
                    probe: st.probe,
                    module: st.module.clone(),
                    function: st.function.clone(),
                    reason: reason.clone(),
                });
                st.reason = Some(reason);
            }
        }
    }
    Ok(links)
}

/// Opens, checks, loads and attaches `object` per `table`: the maps first, then each
/// module's programs (see [`Loaded`]). With the baseline on, a module's object that does not
/// load with its baseline entries is loaded again without them ("baseline unavailable:
/// <why>"): the failure path never depends on the baseline.
pub(crate) fn load(
    table: &ProbeTable,
    object: &Path,
    opts: &LoadOptions,
) -> Result<Loaded, CollectError> {
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, print_libbpf)));
    let mut open = open_checked(table, object, opts.ringbuf_bytes)?;
    for mut prog in open.progs_mut() {
        prog.set_autoload(false);
    }
    // the kprobe fallback keeps each call's arguments in `saved_args`: when every probe's
    // module is loaded now with BTF none will, and the table need not hold 4096 calls (a
    // module loaded later without BTF then keeps one call's; should the resize fail, it keeps
    // them all)
    let btf = |m: &str| Path::new("/sys/kernel/btf").join(m).exists();
    if table.probes.iter().all(|p| btf(&p.module)) {
        if let Some(mut m) = open.maps_mut().find(|m| m.name() == "saved_args") {
            let _ = m.set_max_entries(1);
        }
    }
    // /proc/kallsyms and the kernel's BTF read once for every module (a module loaded later
    // reads them again)
    let ksyms = KernelSymbols::read(table);
    // a kernel without task storage (5.10) cannot create the baseline's task map: without it
    // libbpf poisons the baseline programs' references (they stay unloaded), the rest loads
    if !ksyms.btf.has_task_storage() {
        if let Some(mut m) = open.maps_mut().find(|m| m.name() == "bl_task") {
            let _ = m.set_autocreate(false);
        }
    }
    if let Some(n) = opts.baseline.as_ref().and_then(|c| c.ring_bytes) {
        if let Some(mut m) = open.maps_mut().find(|m| m.name() == "baseline") {
            // a size the kernel refuses fails the maps' load: the caller loads without it
            let _ = m.set_max_entries(n);
        }
    }
    let obj = open.load().map_err(|e| CollectError::Load {
        object: object.to_path_buf(),
        reason: format!("{e:#}"),
    })?;
    let mut loaded = Loaded {
        obj,
        object: object.to_path_buf(),
        strict: opts.strict,
        modules: BTreeMap::new(),
        retired_run: (0, 0),
        retired_missed: BTreeMap::new(),
        attached: table.probes.iter().map(unattached).collect(),
        warnings: Vec::new(),
        baseline_cfg: opts.baseline.clone(),
        baseline: None,
        session: false,
        session_refused: None,
    };
    let modules: BTreeSet<&str> = table.probes.iter().map(|p| p.module.as_str()).collect();
    if let Some(c) = &opts.baseline {
        if ksyms.btf.has_fsession() {
            loaded.session = c.entry == baseline::EntryChoice::Auto;
            if !loaded.session {
                loaded.session_refused = Some("--baseline-entry fentry".into());
            }
        }
    }
    for m in modules {
        loaded.attach_module_with(table, m, &ksyms)?;
    }
    if loaded.baseline_cfg.is_some() && loaded.baseline.is_none() {
        let why = baseline::unavailable(ksyms.btf.has_task_storage(), &loaded.attached);
        loaded.baseline = Some(Err(why));
    }
    Ok(loaded)
}

impl Loaded {
    /// Loads and attaches the programs of `module`'s probes against the running kernel (its
    /// BTF as it is now), in an object of their own that shares the maps. Returns (attached,
    /// probes of the module); what it skipped or could not attach is in `warnings`.
    pub(crate) fn attach_module(
        &mut self,
        table: &ProbeTable,
        module: &str,
    ) -> Result<(usize, usize), CollectError> {
        self.attach_module_with(table, module, &KernelSymbols::read(table))
    }

    fn attach_module_with(
        &mut self,
        table: &ProbeTable,
        module: &str,
        ksyms: &KernelSymbols,
    ) -> Result<(usize, usize), CollectError> {
        self.modules.remove(module);
        let mut open = open_checked(table, &self.object, None)?;
        self.share_maps(&mut open)?;
        let mut st = resolve_targets(
            &mut open,
            table,
            module,
            ksyms,
            self.strict,
            &mut self.warnings,
        )?;
        let probes = st.len();
        if !open.progs().any(|p| p.autoload()) {
            self.set_status(st);
            return Ok((0, probes));
        }
        // the baseline entries of this module's handlers (ib_uverbs), loaded with its probes
        let cfg = self.baseline_cfg.clone();
        let picked = cfg
            .as_ref()
            .map(|c| crate::live::entries::pick_entries(&mut open, table, c, self.session))
            .unwrap_or_default();
        let obj = match open.load() {
            Ok(obj) => obj,
            // fsession is newer than the rest: without it, fentry beside the fexit
            Err(e) if picked.iter().any(|p| p.session) => {
                self.session = false;
                self.session_refused = Some(format!("{module}: {e:#}"));
                return self.attach_module_with(table, module, ksyms);
            }
            Err(e) if !picked.is_empty() => {
                self.baseline = Some(Err(format!(
                    "baseline unavailable: the object does not load with its baseline entries: {module}: {e:#}"
                )));
                self.baseline_cfg = None;
                return self.attach_module_with(table, module, ksyms);
            }
            Err(e) => {
                return Err(CollectError::Load {
                    object: self.object.clone(),
                    reason: format!("{module}: {e:#}"),
                })
            }
        };
        let mut links = attach_all(&obj, table, &mut st, self.strict, &mut self.warnings)?;
        if let (Some(c), false) = (&cfg, picked.is_empty()) {
            let traced = crate::live::entries::attach_entries(
                &obj,
                table,
                c,
                picked,
                crate::live::entries::Attaching {
                    attached: &mut st,
                    links: &mut links,
                    warnings: &mut self.warnings,
                },
                self.session_refused.as_deref(),
            );
            self.baseline = Some(match (self.baseline.take(), traced) {
                (Some(Ok(mut was)), Ok(t)) => {
                    was.handlers.extend(t.handlers);
                    Ok(was)
                }
                (Some(Ok(was)), Err(_)) => Ok(was),
                (_, t) => t,
            });
        }
        let n = links.len();
        self.set_status(st);
        if n > 0 {
            self.modules
                .insert(module.to_string(), ModulePrograms { _links: links, obj });
        }
        Ok((st_attached(&self.attached, module), probes))
    }

    /// Points a module's object at the shared maps (the counters outlive its programs).
    fn share_maps(&self, open: &mut libbpf_rs::OpenObject) -> Result<(), CollectError> {
        for mut m in open.maps_mut() {
            let name = m.name().to_owned();
            if let Some(shared) = self.obj.maps().find(|s| s.name() == name) {
                use std::os::fd::AsFd;
                m.reuse_fd(shared.as_fd())
                    .map_err(|source| CollectError::Libbpf {
                        what: format!("sharing map {}", name.to_string_lossy()),
                        source,
                    })?;
            }
        }
        Ok(())
    }

    /// Detaches `module`'s probes and closes their programs (the module is free to unload);
    /// their status says `why`. Returns how many were attached.
    pub(crate) fn detach_module(&mut self, module: &str, why: &str) -> usize {
        if let Some(m) = self.modules.remove(module) {
            let (ns, runs) = crate::live::cost::bpf_run(&m.obj);
            self.retired_run.0 += ns;
            self.retired_run.1 += runs;
            crate::live::cost::missed_runs(&m.obj, &mut self.retired_missed);
        }
        let n = st_attached(&self.attached, module);
        for s in self.attached.iter_mut().filter(|s| s.module == module) {
            if s.attached || s.reason.is_none() {
                s.reason = Some(why.to_string());
            }
            s.attached = false;
        }
        n
    }

    /// Run time (ns) and runs of every program loaded this run (`kernel.bpf_stats_enabled`).
    pub(crate) fn bpf_run(&self) -> (u64, u64) {
        self.modules
            .values()
            .map(|m| crate::live::cost::bpf_run(&m.obj))
            .fold(self.retired_run, |(a, b), (c, d)| (a + c, b + d))
    }

    /// Runs the kernel skipped of every exit program loaded this run, by probe id.
    pub(crate) fn missed_runs(&self) -> BTreeMap<u32, u64> {
        let mut m = self.retired_missed.clone();
        for p in self.modules.values() {
            crate::live::cost::missed_runs(&p.obj, &mut m);
        }
        m
    }

    /// Whether programs of `module` are attached.
    pub(crate) fn holds(&self, module: &str) -> bool {
        self.modules.contains_key(module)
    }

    fn set_status(&mut self, st: Vec<AttachStatus>) {
        for s in st {
            match self.attached.iter_mut().find(|a| a.probe == s.probe) {
                Some(a) => *a = s,
                None => self.attached.push(s),
            }
        }
        self.attached.sort_by_key(|s| s.probe);
    }
}

fn st_attached(attached: &[AttachStatus], module: &str) -> usize {
    attached
        .iter()
        .filter(|s| s.module == module && s.attached)
        .count()
}

/// The libbpf error with its errno name, and the likely cause of the ones we know.
fn attach_reason(e: &libbpf_rs::Error, function: &str, nargs: usize) -> String {
    let text = format!("{e:#}");
    // libbpf-rs ends the chain with the io::Error: "... (os error 524)"
    let errno = text
        .rsplit_once("(os error ")
        .and_then(|(_, n)| n.trim_end_matches(')').parse::<i32>().ok());
    let mut r = format!("attach: {text}");
    if let Some(n) = errno.and_then(|n| u32::try_from(n.abs()).ok()) {
        r.push_str(&format!(" ({})", wire::errno_label(n)));
        if n == 524 && nargs > 6 {
            r.push_str(&format!(
                "; {function} has {nargs} arguments and this kernel's x86 BPF trampoline takes at most 6 (more since Linux 6.6)"
            ));
        }
    }
    r
}

/// Every key of a per-CPU map of u64 values with the value summed over CPUs.
pub(crate) struct PercpuSums {
    key_size: usize,
    keys: Vec<u8>,
    sums: Vec<u64>,
}

impl PercpuSums {
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.keys
            .chunks_exact(self.key_size.max(1))
            .zip(self.sums.iter().copied())
    }
}

/// Reads all of per-CPU array `map` with `BPF_MAP_LOOKUP_BATCH`: a few syscalls for the whole
/// map instead of one per key (libbpf-rs refuses batch lookups on per-CPU maps, libbpf does
/// them). `None` for other map kinds, or when the kernel refuses (the caller reads key by
/// key). Not for the sparse `errnos` hash: a batch walks every one of its 4096 buckets under
/// a lock, slower than the few keys it holds (measured in the qemu guest).
fn batch_sums(map: &libbpf_rs::Map<'_>) -> Option<PercpuSums> {
    if map.map_type() != libbpf_rs::MapType::PercpuArray {
        return None;
    }
    use std::os::fd::{AsFd, AsRawFd};
    // SAFETY: reads sysfs, no arguments.
    let ncpus = usize::try_from(unsafe { libbpf_rs::libbpf_sys::libbpf_num_possible_cpus() })
        .ok()
        .filter(|&n| n > 0)?;
    let (key_size, max) = (map.key_size() as usize, map.max_entries() as usize);
    if map.value_size() != 8 || key_size == 0 || key_size > 8 || max == 0 {
        return None;
    }
    let mut keys = vec![0u8; key_size * max];
    let mut values = vec![0u8; 8 * ncpus * max];
    let mut out = PercpuSums {
        key_size,
        keys: Vec::with_capacity(key_size * max),
        sums: Vec::with_capacity(max),
    };
    // the batch position: a key for arrays, a bucket (u32) for hashes
    let (mut pos_in, mut pos_out) = ([0u8; 8], [0u8; 8]);
    let opts = libbpf_rs::libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_batch_opts>() as _,
        elem_flags: 0,
        flags: 0,
    };
    let fd = map.as_fd().as_raw_fd();
    let mut first = true;
    while out.sums.len() < max {
        let mut count = (max - out.sums.len()) as u32;
        // SAFETY: keys holds `max` keys and values `max` per-CPU values (8 bytes per CPU),
        // count is at most the room left; the positions hold a key (<= 8 bytes) or a u32.
        let rc = unsafe {
            libbpf_rs::libbpf_sys::bpf_map_lookup_batch(
                fd,
                if first {
                    std::ptr::null_mut()
                } else {
                    pos_in.as_mut_ptr().cast()
                },
                pos_out.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        if rc < 0 && rc != -libc::ENOENT {
            return None;
        }
        let n = (count as usize).min(max - out.sums.len());
        out.keys.extend_from_slice(&keys[..n * key_size]);
        out.sums
            .extend(values[..n * 8 * ncpus].chunks_exact(8 * ncpus).map(|v| {
                v.chunks_exact(8)
                    .map(|b| <[u8; 8]>::try_from(b).map_or(0, u64::from_ne_bytes))
                    .fold(0u64, u64::wrapping_add)
            }));
        if rc < 0 || n == 0 {
            break;
        }
        pos_in = pos_out;
        first = false;
    }
    Some(out)
}

impl Loaded {
    /// Detaches every program (the links are destroyed, the programs closed).
    pub(crate) fn detach(&mut self) {
        // their skipped runs stay counted for the final read
        for m in self.modules.values() {
            crate::live::cost::missed_runs(&m.obj, &mut self.retired_missed);
        }
        self.modules.clear();
    }

    pub(crate) fn map(&self, name: &str) -> Result<libbpf_rs::Map<'_>, CollectError> {
        self.obj
            .maps()
            .find(|m| m.name() == name)
            .ok_or_else(|| CollectError::NoMap(name.to_string()))
    }

    /// Every key of map `name` with its value summed over CPUs: one batch lookup, or (when the
    /// kernel refuses it) one lookup per key.
    fn sums(&self, name: &str) -> Result<PercpuSums, CollectError> {
        let m = self.map(name)?;
        if let Some(s) = batch_sums(&m) {
            return Ok(s);
        }
        let key_size = m.key_size() as usize;
        let mut out = PercpuSums {
            key_size,
            keys: Vec::new(),
            sums: Vec::new(),
        };
        for key in m.keys() {
            let v =
                m.lookup_percpu(&key, MapFlags::ANY)
                    .map_err(|source| CollectError::Libbpf {
                        what: name.to_string(),
                        source,
                    })?;
            if key.len() == key_size {
                out.keys.extend_from_slice(&key);
                out.sums
                    .push(v.map(|v| KernelTotals::sum_percpu(&v)).unwrap_or(0));
            }
        }
        Ok(out)
    }

    /// Map `name`'s values summed over CPUs and keys.
    pub(crate) fn total(&self, name: &str) -> Result<u64, CollectError> {
        Ok(self
            .sums(name)?
            .iter()
            .map(|(_, s)| s)
            .fold(0, u64::wrapping_add))
    }

    /// Map `name` (keyed by probe id) as a vector indexed by probe id.
    fn by_id(&self, table: &ProbeTable, name: &str) -> Result<Vec<u64>, CollectError> {
        let mut v = vec![0u64; table.id_limit()];
        for (key, sum) in self.sums(name)?.iter() {
            let id = <[u8; 4]>::try_from(key).map_or(u32::MAX, u32::from_ne_bytes);
            if let Some(slot) = v.get_mut(id as usize) {
                *slot = sum;
            }
        }
        Ok(v)
    }

    /// Reads the cumulative per-CPU counters, summed over CPUs.
    pub(crate) fn read_counters(&self, table: &ProbeTable) -> Result<KernelTotals, CollectError> {
        let mut k = self.read_calls_failures(table)?;
        self.read_failure_details(table, &mut k)?;
        Ok(k)
    }

    /// The object's `activity` map read from memory, or `None` when the object has none that
    /// can be mapped (an object compiled from an older header: its counters are then read
    /// every window).
    pub(crate) fn activity(&self) -> Option<crate::live::activity::Activity> {
        let m = self.map(crate::live::activity::ACTIVITY_MAP).ok()?;
        crate::live::activity::Activity::map(&m)
    }

    /// `calls` by probe id. The programs count a call before anything else (`pg_exit` in
    /// probegen.bpf.h), so when `calls` has not moved, no other counter has either.
    pub(crate) fn read_calls(&self, table: &ProbeTable) -> Result<Vec<u64>, CollectError> {
        self.by_id(table, "calls")
    }

    /// Reads `calls` and `failures` only: `drops` and `errnos` stay empty. The programs count
    /// a failure before its errno and before a drop (`pg_exit` in probegen.bpf.h), so when
    /// `failures` has not moved, neither have they (see [`Loaded::read_failure_details`]).
    pub(crate) fn read_calls_failures(
        &self,
        table: &ProbeTable,
    ) -> Result<KernelTotals, CollectError> {
        let calls = self.read_calls(table)?;
        self.read_failures_with(table, &calls)
    }

    /// Reads `failures` and takes `calls` (by probe id, read just before): `drops` and
    /// `errnos` stay empty.
    pub(crate) fn read_failures_with(
        &self,
        table: &ProbeTable,
        calls: &[u64],
    ) -> Result<KernelTotals, CollectError> {
        let failures = self.by_id(table, "failures")?;
        let mut k = KernelTotals::default();
        for p in &table.probes {
            let i = p.id as usize;
            k.calls.insert(p.id, calls.get(i).copied().unwrap_or(0));
            k.failures.insert(p.id, failures[i]);
        }
        // with the calls: a repeat counted in its QP's entry moves `calls`, not `failures`
        k.qp = self.read_qp_errors(table)?;
        Ok(k)
    }

    /// The data plane's per-QP table (`qp_errors`, `qp_firsts`, `qp_repeats`); `None` for an
    /// object without it or while it is empty.
    fn read_qp_errors(&self, table: &ProbeTable) -> Result<Option<QpErrors>, CollectError> {
        let Ok(m) = self.map("qp_errors") else {
            return Ok(None);
        };
        let firsts: u64 = self.by_id(table, "qp_firsts")?.iter().sum();
        if firsts == 0 {
            return Ok(None);
        }
        let mut q = QpErrors {
            firsts,
            repeats: self.by_id(table, "qp_repeats")?.iter().sum(),
            capacity: u64::from(m.max_entries()),
            ..QpErrors::default()
        };
        for key in m.keys() {
            let Ok(Some(val)) = m.lookup(&key, MapFlags::ANY) else {
                continue; // evicted between the two calls
            };
            if let Some(e) = qp_error(table, &key, &val) {
                q.qps.push(e);
            }
        }
        q.qps.sort_by_key(|e| (e.probe, e.qpn, e.pid));
        q.evicted = firsts.saturating_sub(q.qps.len() as u64);
        Ok(Some(q))
    }

    /// Adds `drops` and `errnos` to counters from [`Loaded::read_calls_failures`] (read after
    /// them, so no errno or drop is newer than the failures it belongs to).
    pub(crate) fn read_failure_details(
        &self,
        table: &ProbeTable,
        k: &mut KernelTotals,
    ) -> Result<(), CollectError> {
        let drops = self.by_id(table, "drops")?;
        for p in &table.probes {
            let i = p.id as usize;
            k.drops += drops[i];
            k.drops_by_probe.insert(p.id, drops[i]);
        }
        for (key, sum) in self.sums("errnos")?.iter() {
            let Ok(raw) = <[u8; 8]>::try_from(key) else {
                continue;
            };
            // SAFETY: PgErrnoKey is repr(C) of two u32, 8 bytes, any bit pattern valid.
            let ek: PgErrnoKey = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast()) };
            if sum > 0 {
                k.errnos.insert((ek.probe_id, ek.err), sum);
            }
        }
        Ok(())
    }

    /// Next sequence number of each CPU (records taken so far, kept or dropped).
    pub(crate) fn seq_next(&self) -> Result<Vec<u64>, CollectError> {
        self.seq_next_of("seq")
    }

    /// Next sequence number of each CPU in the per-CPU counter `name` (`seq`, `bl_seq`).
    pub(crate) fn seq_next_of(&self, name: &str) -> Result<Vec<u64>, CollectError> {
        let m = self.map(name)?;
        let v = m
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| CollectError::Libbpf {
                what: name.into(),
                source,
            })?
            .unwrap_or_default();
        Ok(v.iter()
            .map(|b| {
                <[u8; 8]>::try_from(b.as_slice())
                    .map(u64::from_ne_bytes)
                    .unwrap_or(0)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_table_differences_are_named() {
        let t = ProbeTable::from_triples(&[(1, "a", "m"), (2, "b", "m")]);
        let ok = vec![
            ("pg_1".to_string(), "fexit/a".to_string()),
            ("pg_2".to_string(), "fexit/b".to_string()),
        ];
        assert!(compare_programs(&t, &ok).is_ok());
        let bad = vec![
            ("pg_1".to_string(), "fexit/x".to_string()),
            ("pg_3".to_string(), "fexit/c".to_string()),
        ];
        let e = compare_programs(&t, &bad).unwrap_err().to_string();
        assert!(
            e.contains("pg_1: object section `fexit/x`, manifest `fexit/a`"),
            "{e}"
        );
        assert!(
            e.contains("manifest probe pg_2 (fexit/b) has no program"),
            "{e}"
        );
        assert!(
            e.contains("object program pg_3 (fexit/c) is not in the manifest"),
            "{e}"
        );
        assert!(e.contains("3 differences"));
    }

    #[test]
    fn a_module_without_btf_gets_the_kprobe_fallback() {
        let mut t = ProbeTable::from_triples(&[(1, "rxe_f", "rdma_rxe"), (2, "ib_g", "ib_core")]);
        t.probes[0].fallback = vec![("pg_1_ret".into(), "?kretprobe/rxe_f".into())];
        let dir = std::env::temp_dir().join(format!("pg-btf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("ib_core")).expect("dir");
        let syms = [("rxe_f", "rdma_rxe"), ("ib_g", "ib_core")];
        let k = KernelSymbols::with(
            Some(
                syms.iter()
                    .map(|(f, m)| (f.to_string(), m.to_string()))
                    .collect(),
            ),
            dir.clone(),
        );
        assert_eq!(k.target(&t.probes[0]), Target::Kprobe(None));
        assert_eq!(
            k.target(&t.probes[1]),
            Target::Attach(Some("ib_core:ib_g".into()))
        );
        std::fs::create_dir_all(dir.join("rdma_rxe")).expect("dir");
        assert_eq!(
            k.target(&t.probes[0]),
            Target::Attach(Some("rdma_rxe:rxe_f".into()))
        );
        let _ = std::fs::remove_dir_all(&dir);
        let bad = vec![
            ("pg_1".to_string(), "fexit/rxe_f".to_string()),
            ("pg_2".to_string(), "fexit/ib_g".to_string()),
            ("pg_1_ret".to_string(), "kprobe/rxe_f".to_string()),
        ];
        let e = compare_programs(&t, &bad).unwrap_err().to_string();
        assert!(
            e.contains("pg_1_ret: object section `kprobe/rxe_f`, manifest `?kretprobe/rxe_f`"),
            "{e}"
        );
    }

    /// The checked-in 6.12 rxe set against Debian's real 6.12 BTF (the ELF files of
    /// `scripts/fetch-kernel.sh 6.12`, read as /sys/kernel/btf would be) and a kallsyms of
    /// another build: a prototype that differs is skipped with both, a clone with another
    /// suffix (or none) is resolved by name, a function only a clone here goes by kprobe.
    #[test]
    fn probes_are_verified_and_clones_resolved_by_name() {
        let dir = super::super::btf::fixture::debian_6_12_btf_dir("verify");
        let text = include_str!("../../../generated/linux-6.12/rxe/manifest.yaml");
        let mut t = ProbeTable::from_manifest_text(text, "rxe").expect("manifest");
        let by = |t: &ProbeTable, f: &str| t.probes.iter().position(|p| p.function == f);
        let reg = by(&t, "ib_uverbs_reg_mr").expect("reg_mr probe");
        let gid = by(&t, "ib_resolve_unicast_gid_dmac").expect("clone-only probe");
        let rxe = t
            .probes
            .iter()
            .position(|p| p.module == "rdma_rxe" && !p.fallback.is_empty())
            .expect("an rxe probe with a kprobe fallback");
        let rxe_f = t.probes[rxe].function.clone();
        // kallsyms of another build: the clone has another suffix, and rxe's function is
        // only a clone
        let mut syms: HashSet<(String, String)> = t
            .probes
            .iter()
            .filter(|p| p.kind == AttachKind::Fexit && p.function != rxe_f)
            .map(|p| (p.function.clone(), p.module.clone()))
            .collect();
        for (n, m) in [
            ("ib_resolve_unicast_gid_dmac.constprop.1", "ib_core"),
            ("ib_resolve_unicast_gid_dmac", "ib_core"),
            ("ib_resolve_unicast_gid_dmac.cold", "ib_core"),
        ] {
            syms.insert((n.into(), m.into()));
        }
        syms.insert((format!("{rxe_f}.isra.0"), "rdma_rxe".into()));
        let k = KernelSymbols::with(Some(syms), dir.clone());
        // every fexit probe of the set matches its kernel's prototypes
        let mut verified = 0;
        for p in t
            .probes
            .iter()
            .filter(|p| p.kind == AttachKind::Fexit && p.function != rxe_f)
        {
            match k.target(p) {
                Target::Attach(Some(_)) => verified += 1,
                other => panic!("{}: {other:?}", p.function),
            }
        }
        assert!(verified >= 40, "{verified}");
        assert_eq!(
            k.target(&t.probes[gid]),
            Target::Kretprobes(vec![
                "ib_resolve_unicast_gid_dmac.constprop.1".into(),
                "ib_resolve_unicast_gid_dmac".into()
            ])
        );
        // rdma_rxe's BTF has the function (the set's build), kallsyms only its clone: the
        // BTF check passes and the load attaches it; without the function in BTF the clone
        // goes by the kprobe fallback
        let gone = t.probes[rxe].clone();
        let _ = std::fs::remove_file(dir.join("rdma_rxe"));
        std::fs::create_dir_all(dir.join("rdma_rxe")).expect("no-BTF stand-in");
        assert_eq!(
            k.target(&gone),
            Target::Kprobe(Some(format!("{rxe_f}.isra.0")))
        );
        // a prototype that differs: skipped, with both
        t.probes[reg].nargs += 1;
        match k.target(&t.probes[reg]) {
            Target::Missing(why) => assert!(why.contains("BTF prototype differs"), "{why}"),
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn kallsyms() {
        let text = "ffffffffc0a01000 t ib_umem_get\t[ib_uverbs]\n\
                    ffffffffc0a02000 T create_qp\t[ib_uverbs]\n\
                    ffffffffc0b02000 t create_qp.part.0\t[ib_core]\n\
                    ffffffff81000000 T do_sys_open\n\
                    ffffffffc0a03000 d ib_umem_get_data\t[ib_uverbs]\n";
        let wanted: HashSet<String> = [
            "ib_umem_get",
            "create_qp",
            "do_sys_open",
            "create_qp.part.0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = parse_kallsyms(text, &wanted);
        assert!(s.contains(&("ib_umem_get".into(), "ib_uverbs".into())));
        assert!(s.contains(&("do_sys_open".into(), "vmlinux".into())));
        assert!(s.contains(&("create_qp.part.0".into(), "ib_core".into())));
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn generated_objects_match_their_manifests_by_name() {
        // the section names codegen writes are the ones compare_programs expects
        for set in ["linux-6.12/rxe", "linux-6.1/rxe", "linux-6.12/mlx5"] {
            let dir = format!("{}/../generated/{set}", env!("CARGO_MANIFEST_DIR"));
            let m = std::fs::read_to_string(format!("{dir}/manifest.yaml")).expect("manifest");
            let c = std::fs::read_to_string(format!("{dir}/probes.bpf.c")).expect("bpf.c");
            let t = ProbeTable::from_manifest_text(&m, set).expect("table");
            let mut progs = Vec::new();
            let mut sec = None;
            for l in c.lines() {
                if let Some(s) = l.strip_prefix("SEC(\"").and_then(|s| s.strip_suffix("\")")) {
                    sec = Some(s.to_string());
                } else if let (Some(s), Some(rest)) = (sec.as_ref(), l.strip_prefix("int ")) {
                    let name: String = rest.chars().take_while(|&c| c != '(').collect();
                    progs.push((name, s.clone()));
                    sec = None;
                }
            }
            let fallbacks: usize = t.probes.iter().map(|p| p.fallback.len()).sum();
            assert!(fallbacks > 0, "{set}: vendor probes have kprobe fallbacks");
            let entries = progs.iter().filter(|(n, _)| n.ends_with("_bl")).count();
            assert!(
                entries >= 10,
                "{set}: the uverbs handlers have baseline entries"
            );
            let sessions = progs
                .iter()
                .filter(|(n, s)| n.ends_with("_bs") && s.starts_with("?fsession/"))
                .count();
            assert_eq!(
                sessions, entries,
                "{set}: every handler has its fsession program"
            );
            assert_eq!(
                progs.len(),
                t.probes.len() + fallbacks + entries + sessions,
                "{set}"
            );
            compare_programs(&t, &progs).expect(set);
            // an object from before the fallbacks and the baseline programs still matches
            progs.retain(|(n, _)| {
                !n.ends_with("_ret")
                    && !n.ends_with("_entry")
                    && !n.ends_with("_bl")
                    && !n.ends_with("_bs")
            });
            compare_programs(&t, &progs).expect(set);
        }
    }
}

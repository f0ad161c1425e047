//! Live loading with libbpf-rs: open the probe object, check it against the manifest, skip
//! targets the running kernel lacks, retarget every fexit program at `module:function` (the
//! manifest may hold the same name in two modules, e.g. `create_qp` in ib_core and ib_uverbs),
//! resize the ring buffer, load, attach, and read the per-CPU counters.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder};

use crate::pipeline::{AttachStatus, KernelTotals};
use crate::probes::{AttachKind, ProbeTable};
use crate::record::PgErrnoKey;

/// Maps the collector reads, with their key and value sizes.
const MAPS: &[(&str, u32, u32)] = &[
    ("calls", 4, 8),
    ("failures", 4, 8),
    ("errnos", 8, 8),
    ("seq", 4, 8),
    ("drops", 4, 8),
];

/// The object's program table against the manifest's attachable probes: `Err` names every
/// difference (missing program, extra program, different section).
pub fn compare_programs(table: &ProbeTable, programs: &[(String, String)]) -> Result<(), String> {
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
    for (name, sec) in &have {
        if !want.contains_key(*name) {
            diffs.push(format!(
                "object program {name} ({sec}) is not in the manifest"
            ));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the object's probe table differs from the manifest ({} differences): {}",
            diffs.len(),
            diffs.join("; ")
        ))
    }
}

/// What the running kernel offers: kallsyms entries of the wanted names and the modules with
/// BTF under /sys/kernel/btf.
pub struct KernelSymbols {
    /// None: kallsyms unreadable, assume everything is there and let the load decide.
    syms: Option<HashSet<(String, String)>>,
    btf_dir: std::path::PathBuf,
}

impl KernelSymbols {
    pub fn read(table: &ProbeTable) -> Self {
        let wanted: HashSet<String> = table
            .probes
            .iter()
            .map(|p| match &p.kind {
                AttachKind::Fexit => p.function.clone(),
                AttachKind::Kretprobe(s) => s.clone(),
            })
            .collect();
        let syms = std::fs::read_to_string("/proc/kallsyms")
            .ok()
            .map(|t| parse_kallsyms(&t, &wanted));
        KernelSymbols {
            syms: syms.filter(|s| !s.is_empty()),
            btf_dir: "/sys/kernel/btf".into(),
        }
    }

    /// `Ok(target)` to attach to, or `Err(reason)` when the running kernel lacks it.
    pub fn target(&self, p: &crate::probes::ProbeInfo) -> Result<Option<String>, String> {
        match &p.kind {
            AttachKind::Kretprobe(sym) => match &self.syms {
                Some(s) if !s.iter().any(|(n, _)| n == sym) => {
                    Err(format!("kprobe symbol {sym} not in /proc/kallsyms"))
                }
                _ => Ok(None),
            },
            AttachKind::Fexit => {
                let in_module = self.btf_dir.join(&p.module).exists();
                let known = |m: &str| {
                    self.syms
                        .as_ref()
                        .is_none_or(|s| s.contains(&(p.function.clone(), m.to_string())))
                };
                if in_module && known(&p.module) {
                    Ok(Some(p.target()))
                } else if known("vmlinux") && self.syms.is_some() {
                    // built into this kernel: resolve in vmlinux BTF by name
                    Ok(Some(p.function.clone()))
                } else if !in_module {
                    Err(format!(
                        "module {} not loaded (no /sys/kernel/btf/{})",
                        p.module, p.module
                    ))
                } else {
                    Err(format!(
                        "{} not in /proc/kallsyms for [{}]",
                        p.function, p.module
                    ))
                }
            }
        }
    }
}

/// (name, module) of the wanted kallsyms text symbols; built-in ones get module `vmlinux`.
pub fn parse_kallsyms(text: &str, wanted: &HashSet<String>) -> HashSet<(String, String)> {
    let mut out = HashSet::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(_addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !matches!(kind, "t" | "T") || !wanted.contains(name) {
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

pub struct LoadOptions {
    pub strict: bool,
    /// events ring buffer size (power of two, multiple of the page size)
    pub ringbuf_bytes: Option<u32>,
}

/// A loaded, attached probe set.
pub struct Loaded {
    pub obj: Object,
    links: Vec<(u32, Link)>,
    pub attached: Vec<AttachStatus>,
}

fn print_libbpf(level: libbpf_rs::PrintLevel, msg: String) {
    if level != libbpf_rs::PrintLevel::Debug {
        eprint!("{msg}");
    }
}

/// Opens, checks, loads and attaches `object` per `table`.
pub fn load(table: &ProbeTable, object: &Path, opts: &LoadOptions) -> Result<Loaded, String> {
    libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, print_libbpf)));
    let obj_name = object.display();
    let mut open = ObjectBuilder::default()
        .open_file(object)
        .map_err(|e| format!("{obj_name}: {e}"))?;
    let programs: Vec<(String, String)> = open
        .progs()
        .map(|p| {
            (
                p.name().to_string_lossy().into_owned(),
                p.section().to_string_lossy().into_owned(),
            )
        })
        .collect();
    compare_programs(table, &programs).map_err(|e| format!("{obj_name}: {e}"))?;
    {
        let names: BTreeSet<String> = open
            .maps()
            .map(|m| m.name().to_string_lossy().into_owned())
            .collect();
        for (m, _, _) in MAPS.iter().chain(&[("events", 0, 0)]) {
            if !names.contains(*m) {
                return Err(format!("{obj_name}: no map `{m}`"));
            }
        }
    }
    if let Some(n) = opts.ringbuf_bytes {
        if !n.is_power_of_two() || n < 4096 {
            return Err(format!(
                "--ringbuf-bytes {n}: must be a power of two of at least 4096"
            ));
        }
        let mut done = false;
        for mut m in open.maps_mut() {
            if m.name() == "events" {
                m.set_max_entries(n)
                    .map_err(|e| format!("resizing events to {n}: {e}"))?;
                done = true;
            }
        }
        if !done {
            return Err(format!("{obj_name}: no ring buffer `events`"));
        }
    }

    let ksyms = KernelSymbols::read(table);
    let mut attached = Vec::new();
    let mut skipped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let Some(p) = table.probes.iter().find(|p| p.program_name() == name) else {
            continue;
        };
        let mut st = AttachStatus {
            probe: p.id,
            function: p.function.clone(),
            module: p.module.clone(),
            attached: false,
            reason: None,
        };
        match ksyms.target(p) {
            Ok(target) => {
                if let Some(t) = target {
                    prog.set_attach_target(0, Some(t.clone()))
                        .map_err(|e| format!("{name}: set_attach_target({t}): {e}"))?;
                }
            }
            Err(reason) => {
                if opts.strict {
                    return Err(format!(
                        "--strict: probe {} {}:{}: {reason}",
                        p.id, p.module, p.function
                    ));
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
    for (reason, names) in &skipped {
        eprintln!(
            "probegen collect: skipping {} probe(s): {reason}: {}",
            names.len(),
            names.join(", ")
        );
    }
    let obj = open
        .load()
        .map_err(|e| format!("loading {obj_name}: {e:#}"))?;
    let mut links = Vec::new();
    for prog in obj.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let Some(st) = attached
            .iter_mut()
            .find(|s| manifest::naming::program_name(s.probe) == name)
        else {
            continue;
        };
        if st.reason.is_some() {
            continue;
        }
        match prog.attach() {
            Ok(link) => {
                st.attached = true;
                links.push((st.probe, link));
            }
            Err(e) => {
                let nargs = table
                    .probes
                    .iter()
                    .find(|p| p.id == st.probe)
                    .map_or(0, |p| p.nargs);
                let reason = attach_reason(&e, &st.function, nargs);
                if opts.strict {
                    return Err(format!(
                        "--strict: probe {} {}:{}: {reason}",
                        st.probe, st.module, st.function
                    ));
                }
                eprintln!(
                    "probegen collect: probe {} {}:{} not attached: {reason}",
                    st.probe, st.module, st.function
                );
                st.reason = Some(reason);
            }
        }
    }
    attached.sort_by_key(|s| s.probe);
    Ok(Loaded {
        obj,
        links,
        attached,
    })
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
        r.push_str(&format!(" ({})", crate::errno::errno_label(n)));
        if n == 524 && nargs > 6 {
            r.push_str(&format!(
                "; {function} has {nargs} arguments and this kernel's x86 BPF trampoline takes at most 6 (more since Linux 6.6)"
            ));
        }
    }
    r
}

impl Loaded {
    /// Detaches every program (the links are destroyed).
    pub fn detach(&mut self) {
        self.links.clear();
    }

    pub fn links(&self) -> usize {
        self.links.len()
    }

    fn map(&self, name: &str) -> Result<libbpf_rs::Map<'_>, String> {
        self.obj
            .maps()
            .find(|m| m.name() == name)
            .ok_or_else(|| format!("no map `{name}`"))
    }

    /// Reads the cumulative per-CPU counters, summed over CPUs.
    pub fn read_counters(&self, table: &ProbeTable) -> Result<KernelTotals, String> {
        let mut k = KernelTotals::default();
        let calls = self.map("calls")?;
        let failures = self.map("failures")?;
        let sum = |m: &libbpf_rs::Map<'_>, key: &[u8]| -> Result<u64, String> {
            let v = m
                .lookup_percpu(key, MapFlags::ANY)
                .map_err(|e| format!("{}: {e}", m.name().to_string_lossy()))?;
            Ok(v.map(|v| KernelTotals::sum_percpu(&v)).unwrap_or(0))
        };
        for p in &table.probes {
            let key = p.id.to_ne_bytes();
            k.calls.insert(p.id, sum(&calls, &key)?);
            k.failures.insert(p.id, sum(&failures, &key)?);
        }
        let errnos = self.map("errnos")?;
        for key in errnos.keys() {
            let Ok(raw) = <[u8; 8]>::try_from(key.as_slice()) else {
                continue;
            };
            // SAFETY: PgErrnoKey is repr(C) of two u32, 8 bytes, any bit pattern valid.
            let ek: PgErrnoKey = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast()) };
            let v = sum(&errnos, &key)?;
            if v > 0 {
                k.errnos.insert((ek.probe_id, ek.err), v);
            }
        }
        let drops = self.map("drops")?;
        for p in &table.probes {
            let d = sum(&drops, &p.id.to_ne_bytes())?;
            k.drops += d;
            k.drops_by_probe.insert(p.id, d);
        }
        Ok(k)
    }

    /// Next sequence number of each CPU (records taken so far, kept or dropped).
    pub fn seq_next(&self) -> Result<Vec<u64>, String> {
        let m = self.map("seq")?;
        let v = m
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| format!("seq: {e}"))?
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
        let e = compare_programs(&t, &bad).unwrap_err();
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
                } else if let (Some(s), Some(rest)) = (sec.as_ref(), l.strip_prefix("int pg_")) {
                    let id: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                    progs.push((format!("pg_{id}"), s.clone()));
                    sec = None;
                }
            }
            assert_eq!(progs.len(), t.probes.len(), "{set}");
            compare_programs(&t, &progs).expect(set);
        }
    }
}

//! The probe sets on the real Debian kernels: the heuristics' acceptance checks, and the
//! staleness check of `generated/` (regenerated into a temp dir and compared byte for byte).

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use manifest::Manifest;

fn out_root() -> PathBuf {
    common::generated_root()
}

/// Generate a set once per test process; returns its directory.
fn generated(ver: &str, vendor: &str) -> PathBuf {
    common::generated_set(ver, vendor)
}

fn manifest(ver: &str, vendor: &str) -> Manifest {
    let path = generated(ver, vendor).join("manifest.yaml");
    let text = std::fs::read_to_string(&path).expect("read manifest");
    Manifest::from_yaml(&text, &path.display().to_string()).expect("parse manifest")
}

fn probe<'a>(m: &'a Manifest, function: &str) -> Option<&'a manifest::Probe> {
    m.probes.iter().find(|p| p.function == function)
}

fn excluded_rule(m: &Manifest, function: &str) -> Option<String> {
    m.excluded
        .iter()
        .find(|e| e.function == function)
        .map(|e| e.rule.to_string())
}

fn assert_kept(m: &Manifest, functions: &[&str]) {
    let missing: Vec<_> = functions
        .iter()
        .filter(|f| probe(m, f).is_none())
        .map(|f| format!("{f} (excluded as {:?})", excluded_rule(m, f)))
        .collect();
    assert!(
        missing.is_empty(),
        "{} on {}: not kept: {missing:?}",
        m.vendor,
        m.kernel.version
    );
}

#[test]
fn modify_qp_path_mlx5_keeps_the_failing_helpers() {
    for ver in ["6.12", "6.1"] {
        let m = manifest(ver, "mlx5");
        assert_kept(
            &m,
            &[
                "ib_uverbs_modify_qp",
                "ib_uverbs_ex_modify_qp",
                "modify_qp",
                "_ib_modify_qp",
                "rdma_fill_sgid_attr",
                "ib_resolve_eth_dmac",
                "rdma_lag_get_ah_roce_slave",
                "rdma_counter_bind_qp_auto",
                "alloc_and_bind",
                "mlx5_ib_modify_qp",
            ],
        );
        let dmac = probe(&m, "ib_resolve_eth_dmac").expect("kept");
        assert_eq!(dmac.attach.as_str(), "clone-only", "{ver}");
        assert!(dmac
            .attach_symbol
            .as_deref()
            .is_some_and(|s| s.starts_with("ib_resolve_eth_dmac.")));
        let fw = probe(&m, "mlx5_core_qp_modify").expect("the firmware command issuer is kept");
        assert_eq!(
            (fw.layer.as_str(), fw.focus.map(|f| f.as_str())),
            ("vendor", Some("hardware"))
        );
        // Lookups, puts and validators around the path are dropped with their rule.
        assert_eq!(
            excluded_rule(&m, "rdma_lookup_get_uobject").as_deref(),
            Some("generic")
        );
        assert_eq!(
            excluded_rule(&m, "rdma_lookup_put_uobject").as_deref(),
            Some("cleanup")
        );
        assert_eq!(
            excluded_rule(&m, "ib_modify_qp_is_ok").as_deref(),
            Some("read-only")
        );
        let p = probe(&m, "mlx5_ib_modify_qp").expect("kept");
        assert!(
            m.entries.contains(&p.path[0]),
            "path starts at an entry: {:?}",
            p.path
        );
        assert!(
            p.path.iter().any(|f| f == "ib_uverbs_modify_qp"),
            "{:?}",
            p.path
        );
        assert_eq!(p.path.last().map(String::as_str), Some("mlx5_ib_modify_qp"));
    }
}

#[test]
fn registration_cascade_is_kept_at_every_layer() {
    for ver in ["6.12", "6.1"] {
        let m = manifest(ver, "mlx5");
        assert_kept(
            &m,
            &[
                "ib_uverbs_reg_mr",
                "mlx5_ib_reg_user_mr",
                "ib_umem_get",
                "ib_uverbs_handler_UVERBS_METHOD_REG_DMABUF_MR",
                "mlx5_ib_reg_user_mr_dmabuf",
            ],
        );
        let umem = probe(&m, "ib_umem_get").expect("kept");
        assert_eq!(
            (umem.module.as_str(), umem.attach.as_str()),
            ("ib_uverbs", "fexit")
        );
        assert_eq!(umem.object.as_str(), "MR");
    }
}

/// The checked-in set of (`ver`, `vendor`), as the collector loads it (no kernel needed).
fn checked_in(ver: &str, vendor: &str) -> (Manifest, collector::ProbeTable) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("generated")
        .join(format!("linux-{ver}"))
        .join(vendor)
        .join("manifest.yaml");
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(&path).expect("read checked-in manifest");
    let m = Manifest::from_yaml(&text, &origin).expect("parse checked-in manifest");
    let t = collector::ProbeTable::from_manifest_text(&text, &origin).expect("table");
    (m, t)
}

/// The owner fact comes from the graph: in every checked-in set exactly the function whose
/// body calls pin_user_pages_fast is marked (6.x `ib_umem_get` in ib_uverbs, 7.2
/// `__ib_umem_get_va` in ib_core, five wrappers below the driver), not the other `ib_umem_*`
/// probes 7.2 keeps; and the collector routes its EFAULT (the application's unmapped buffer,
/// the reg_mr case of the testbed) to the application on every series.
/// Whether `ver`'s Debian modules carry BTF (not 5.10's: module BTF came with 5.11).
fn modules_have_btf(ver: &str) -> bool {
    let dir = common::kernel_dir(ver);
    let bins = analyzer::Binaries::load(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .unwrap_or_else(|| panic!("{}: no vmlinux/modules", dir.display()));
    bins.module("ib_core")
        .unwrap_or_else(|| panic!("{}: no ib_core.ko", dir.display()))
        .has_btf()
}

#[test]
fn checked_in_sets_mark_the_user_memory_pinning_for_the_owner() {
    use collector::{owner_of as decide_for, Owner};
    const EFAULT: u32 = 14;
    for &(ver, vendor) in common::checked_in_sets() {
        let (m, t) = checked_in(ver, vendor);
        let (pin, module) = if ver.starts_with("7.") {
            ("__ib_umem_get_va", "ib_core")
        } else {
            ("ib_umem_get", "ib_uverbs")
        };
        let marked: Vec<(&str, &str)> = m
            .probes
            .iter()
            .filter(|p| p.pins_user_memory)
            .map(|p| (p.function.as_str(), p.module.as_str()))
            .collect();
        if !modules_have_btf(ver) {
            // 5.10: no fexit program reaches a module, so no probe stops the pinning's mark
            // at itself: the pinning and every probe above it on the verbs' paths are marked
            assert!(
                marked.contains(&(pin, module)),
                "{ver} {vendor}: {marked:?}"
            );
            let p = m.probes.iter().find(|p| p.function == pin).expect("marked");
            assert_eq!(p.attach.as_str(), "no-btf", "{ver} {vendor}");
            continue;
        }
        assert_eq!(marked, [(pin, module)], "{ver} {vendor}");
        let p = t
            .probes
            .iter()
            .find(|p| p.function == pin)
            .unwrap_or_else(|| panic!("{ver} {vendor}: {pin} has no program"));
        assert!(p.pins_user_memory, "{ver} {vendor}: {pin}");
        let d = decide_for(t.get(p.id), EFAULT);
        assert_eq!(d.owner(), Owner::Application, "{ver} {vendor}: {d:?}");
        // from its error sites: the pinning's error passed on
        assert!(
            d.reason().contains("pin_user_pages"),
            "{ver} {vendor}: {d:?}"
        );
        // 7.2's descriptor wrappers reach the pinning only through that probe: their own
        // failures are their own sites' (copying the caller's descriptor: its EFAULT is the
        // application's), never the pinning's
        for w in t
            .probes
            .iter()
            .filter(|w| w.function.starts_with("ib_umem_get_"))
        {
            assert!(!w.pins_user_memory, "{ver} {vendor}: {}", w.function);
            let d = decide_for(Some(w), EFAULT);
            assert!(
                !d.reason().contains("pin_user_pages"),
                "{}: {d:?}",
                w.function
            );
        }
    }
}

#[test]
fn read_only_and_cleanup_handlers_are_excluded_with_their_rule() {
    for (ver, vendor) in common::checked_in_sets() {
        let m = manifest(ver, vendor);
        for (f, rule) in [
            ("ib_uverbs_query_port", "read-only"),
            ("ib_uverbs_dealloc_pd", "cleanup"),
            ("ib_uverbs_destroy_qp", "cleanup"),
            ("rdma_lookup_put_uobject", "cleanup"),
        ] {
            assert_eq!(
                excluded_rule(&m, f).as_deref(),
                Some(rule),
                "{f} on {ver} {vendor}"
            );
            assert!(probe(&m, f).is_none());
        }
    }
}

#[test]
fn every_vendor_set_is_small_and_has_its_own_ops() {
    let own: &[(&str, &str, &[&str])] = &[
        (
            "6.12",
            "bnxt_re",
            &[
                "bnxt_re_create_qp",
                "bnxt_re_modify_qp",
                "bnxt_re_reg_user_mr",
            ],
        ),
        (
            "6.12",
            "irdma",
            &[
                "irdma_create_qp",
                "irdma_modify_qp",
                "irdma_modify_qp_roce",
                "irdma_reg_user_mr",
            ],
        ),
        (
            "6.12",
            "rxe",
            &["rxe_create_qp", "rxe_modify_qp", "rxe_reg_user_mr"],
        ),
        (
            "6.1",
            "rxe",
            &["rxe_create_qp", "rxe_modify_qp", "rxe_reg_user_mr"],
        ),
        (
            "6.12",
            "mlx5",
            &[
                "mlx5_ib_create_qp",
                "mlx5_ib_modify_qp",
                "mlx5_ib_reg_user_mr",
            ],
        ),
    ];
    for (ver, vendor, ops) in own {
        let m = manifest(ver, vendor);
        assert_kept(&m, ops);
        assert!(
            (20..=120).contains(&m.probes.len()),
            "{vendor} on {ver}: {} probes, expected tens",
            m.probes.len()
        );
        if *vendor != "mlx5" {
            let foreign: Vec<_> = m
                .probes
                .iter()
                .filter(|p| p.function.starts_with("mlx5_"))
                .collect();
            assert!(foreign.is_empty(), "{vendor}: {foreign:?}");
        }
        // Every kept function has an attach verdict, and every unattachable one a reason.
        for p in &m.probes {
            assert!(
                [
                    "fexit",
                    "clone-only",
                    "inlined",
                    "not-built",
                    "no-btf",
                    "no-ftrace",
                    "too-many-args"
                ]
                .contains(&p.attach.as_str()),
                "{}: {}",
                p.function,
                p.attach
            );
            assert!(!p.evidence.is_empty() && !p.path.is_empty());
        }
        eprintln!(
            "{vendor} on {ver}: {} probes, {} attachable, {} excluded",
            m.probes.len(),
            m.stats.attachable,
            m.excluded.len()
        );
    }
}

#[test]
fn attachable_probes_match_the_real_binaries() {
    // BTF of the Debian modules agrees with the source on argument count and return kind.
    for (ver, vendor) in common::checked_in_sets() {
        let m = manifest(ver, vendor);
        let fexit: Vec<_> = m
            .probes
            .iter()
            .filter(|p| p.attach.as_str() == "fexit")
            .collect();
        // 5.10's modules have no BTF: none of their functions is fexit, each is `no-btf`
        assert_eq!(
            fexit.is_empty(),
            !modules_have_btf(ver),
            "{ver} {vendor}: fexit probes {}",
            fexit.len()
        );
        for p in fexit {
            assert!(["int", "ptr", "bool", "void"].contains(&p.returns.as_str()));
            assert!(
                p.module != "inline",
                "{}: a header inline cannot be fexit",
                p.function
            );
        }
    }
}

#[test]
fn output_is_deterministic() {
    let a = generated("6.12", "rxe");
    let b = out_root().join("again/rxe");
    let status = Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(["generate", "--vendor", "rxe", "--out"])
        .arg(&b)
        .arg("--kernel-src")
        .arg(common::kernel_dir("6.12"))
        .status()
        .expect("run");
    assert!(status.success());
    for f in files_in(&a) {
        assert_eq!(
            std::fs::read(a.join(&f)).ok(),
            std::fs::read(b.join(&f)).ok(),
            "{f} differs between two runs"
        );
    }
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(Result::ok)
                .filter(|e| e.path().is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// rust-analyzer style: the checked-in generated files (every set and the shared BPF header)
/// must equal a fresh run, or the test fails with the diff and the command that refreshes them.
#[test]
fn generated_files_are_fresh() {
    let mut files = Vec::new();
    for (ver, vendor) in common::checked_in_sets() {
        let fresh = generated(ver, vendor);
        let checked_in = common::checked_in_set(ver, vendor);
        let mut names = files_in(&fresh);
        names.extend(files_in(&checked_in));
        names.sort();
        names.dedup();
        for name in names {
            files.push((
                checked_in.join(&name),
                std::fs::read(fresh.join(&name)).ok(),
            ));
        }
    }
    let header = codegen::HEADER_NAME;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    files.push((
        repo.join("generated").join(header),
        std::fs::read(out_root().join(header)).ok(),
    ));
    common::assert_fresh(&files);
}

fn tool(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` not found: run `scripts/install-deps.sh` (Debian packages clang, llvm, bpftool, libbpf-dev)");
}

/// Every probe set's BPF C compiles with Debian's clang, its BTF loads, and it has one program
/// per attachable probe.
#[test]
fn generated_bpf_compiles_with_one_program_per_probe() {
    for (ver, vendor) in common::checked_in_sets() {
        let dir = generated(ver, vendor);
        let m = manifest(ver, vendor);
        let objdir = out_root().join("objects");
        std::fs::create_dir_all(&objdir).expect("mkdir");
        let obj = objdir.join(format!("{ver}-{vendor}.bpf.o"));
        let out = Command::new(tool("clang"))
            .args([
                "-target",
                "bpf",
                "-O2",
                "-g",
                "-Wall",
                "-Werror",
                "-D__TARGET_ARCH_x86",
                "-I/usr/include/x86_64-linux-gnu",
                "-c",
            ])
            .arg("-I")
            .arg(out_root())
            .arg(dir.join("probes.bpf.c"))
            .arg("-o")
            .arg(&obj)
            .output()
            .expect("run clang");
        assert!(
            out.status.success(),
            "{ver} {vendor}: clang failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let btf = Command::new(tool("bpftool"))
            .args(["btf", "dump", "file"])
            .arg(&obj)
            .output()
            .expect("run bpftool");
        assert!(
            btf.status.success(),
            "{ver} {vendor}: bpftool btf dump failed"
        );
        let record = format!("STRUCT 'pg_record' size={}", manifest::RECORD_SIZE);
        assert!(String::from_utf8_lossy(&btf.stdout).contains(&record));
        let headers = Command::new(tool("llvm-objdump"))
            .arg("-h")
            .arg(&obj)
            .output()
            .expect("run llvm-objdump");
        let text = String::from_utf8_lossy(&headers.stdout);
        let fexit = text.matches(" fexit/").count();
        let kret = text.matches(" kretprobe/").count();
        // one section per fexit function name: two probes of one name in two modules (the
        // cloud flavor's `create_qp` of ib_uverbs and ib_core) share `fexit/create_qp`, and
        // the collector retargets each at its module:function
        // a no-btf probe (5.10's modules) has the fexit program too, for a rebuilt module
        let want_fexit = m
            .probes
            .iter()
            .filter(|p| matches!(p.attach.as_str(), "fexit" | "no-btf"))
            .map(|p| p.function.as_str())
            // the data plane's peer program reads the call's outcome: an fexit program (in
            // the section of the function's control-path probe when it has one)
            .chain(
                m.data_plane
                    .iter()
                    .filter(|d| d.class == manifest::DataPlaneClass::Peer)
                    .filter(|d| d.attach.as_str() == "fexit")
                    .map(|d| d.function.as_str()),
            )
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let want_kret = m
            .probes
            .iter()
            .filter(|p| p.attach.as_str() == "clone-only")
            .count();
        assert_eq!(
            (fexit, kret),
            (want_fexit, want_kret),
            "{ver} {vendor}: programs per probe"
        );
        // the data plane's entry programs (the baseline's are `?fentry`, autoload off)
        let want_fentry = m
            .data_plane
            .iter()
            .filter(|d| d.attach.as_str() == "fexit" && d.class != manifest::DataPlaneClass::Peer)
            .count();
        assert_eq!(
            text.matches(" fentry/").count(),
            want_fentry,
            "{ver} {vendor}: one entry program per data-plane probe"
        );
        // the kprobe fallbacks for a module without BTF, every layer (autoload off: `?`)
        // one section per name, as for fexit above (the cloud flavor's two `create_qp`)
        let fallback: std::collections::BTreeSet<String> = m
            .probes
            .iter()
            .flat_map(|p| p.kprobe_fallback())
            .map(|(_, section)| section)
            .collect();
        let want_entry = fallback
            .iter()
            .filter(|s| s.starts_with("?kprobe/"))
            .count();
        assert_eq!(
            (
                text.matches(" ?kprobe/").count(),
                text.matches(" ?kretprobe/").count()
            ),
            (want_entry, fallback.len() - want_entry),
            "{ver} {vendor}: kprobe fallback programs"
        );
        // every probe with an fexit program, core and vendor, has its kretprobe: a kernel
        // without module BTF (5.10) or an OFED ib_core without it keeps every layer
        let with_fexit = m
            .probes
            .iter()
            .filter(|p| matches!(p.attach.as_str(), "fexit" | "no-btf"))
            .map(|p| p.function.as_str())
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(
            fallback.len() - want_entry,
            with_fexit.len(),
            "{ver} {vendor}: one kretprobe per probe with an fexit program"
        );
    }
}

/// bnxt_re is not built by Debian's 6.1 config: its ops still appear, as `not-built`, and get no
/// BPF program; the set does not silently shrink to the core.
#[test]
fn unbuilt_vendor_is_reported_not_built() {
    let dir = common::generated_set_with("6.1", "bnxt_re", &["--not-built"]);
    let path = dir.join("manifest.yaml");
    let text = std::fs::read_to_string(&path).expect("read manifest");
    let m = Manifest::from_yaml(&text, &path.display().to_string()).expect("parse manifest");
    let vendor: Vec<_> = m
        .probes
        .iter()
        .filter(|p| p.layer.as_str() == "vendor")
        .collect();
    assert!(
        vendor.iter().any(|p| p.function == "bnxt_re_create_qp"),
        "{vendor:?}"
    );
    for p in &vendor {
        assert_eq!(p.attach.as_str(), "not-built", "{}", p.function);
        assert_eq!(p.module, "bnxt_re");
    }
    let c = std::fs::read_to_string(dir.join("probes.bpf.c")).expect("read");
    assert!(
        !c.contains("fexit/bnxt_re_"),
        "no program for an unbuilt module"
    );
}

/// The published JSON Schema of the manifest matches the Rust types.
#[test]
fn manifest_schema_is_fresh() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/manifest.schema.json");
    common::assert_fresh(&[(path, Some(manifest::json_schema().into_bytes()))]);
    // Every checked-in manifest parses with the types the schema comes from, and writes back
    // byte for byte (the vocabulary enums change nothing on disk).
    for (ver, vendor) in common::checked_in_sets() {
        let p = common::checked_in_set(ver, vendor).join("manifest.yaml");
        let text = std::fs::read_to_string(&p).expect("read");
        let m = Manifest::from_yaml(&text, &p.display().to_string())
            .expect("checked-in manifest parses");
        assert!(
            m.to_yaml().ok() == Some(text),
            "{} changes on a round trip",
            p.display()
        );
    }
}

/// `generate --vendor mlx5,bnxt_re,irdma,rxe` parses the tree once and writes the four sets
/// byte for byte as four single-vendor runs do (the checked-in ones, kept fresh above).
#[test]
fn four_vendors_from_one_parse_equal_four_runs() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for ver in ["7.2", "6.1"] {
        let out = out_root().join(format!("multi-{ver}"));
        let src = common::kernel_dir(ver);
        let (src, out_s) = (src.to_string_lossy(), out.to_string_lossy());
        let mut args = vec![
            "generate",
            "--kernel-src",
            &src,
            "--vendor",
            "mlx5,bnxt_re,irdma,rxe",
            "--out",
            &out_s,
        ];
        // A vendor the config does not build is asked for as such (bnxt_re on 6.1).
        if common::not_built().iter().any(|(v, _)| *v == ver) {
            args.push("--not-built");
        }
        let o = common::probegen(&args);
        assert!(o.status.success(), "{}", common::stderr(&o));
        assert_eq!(
            common::stdout(&o).lines().count(),
            4,
            "{}",
            common::stdout(&o)
        );
        for vendor in ["mlx5", "bnxt_re", "irdma", "rxe"] {
            let checked_in = repo.join(format!("generated/linux-{ver}/{vendor}"));
            for name in files_in(&checked_in) {
                assert!(
                    std::fs::read(checked_in.join(&name)).ok()
                        == std::fs::read(out.join(vendor).join(&name)).ok(),
                    "{ver} {vendor} {name} differs from a single-vendor run"
                );
            }
        }
    }
}

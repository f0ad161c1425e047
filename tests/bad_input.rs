//! Bad input is loud, bounded and crash-free (issue 13): every damaged input of the issue, on a
//! copy of the real Debian 6.12 tree (or a fixture), gives one clear line and exit 2 (or, with
//! `--allow-degraded`, a set that lists what was lost), never a smaller set in silence, never a
//! crash, never unbounded time or memory. The real trees themselves are complete.

mod common;

use common::write;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{stderr, stdout};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_probegen"))
}

/// Run probegen with an address-space limit (bytes) and a wall-clock limit; the limits are the
/// test's assertion that the input costs bounded memory and time.
fn run_bounded(args: &[&str], max_bytes: u64, max_time: Duration) -> Output {
    let mut cmd = bin();
    cmd.args(args);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: max_bytes,
                rlim_max: max_bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let t0 = Instant::now();
    let o = cmd.output().expect("run probegen");
    let took = t0.elapsed();
    assert!(
        took < max_time,
        "probegen {args:?} took {took:?} (limit {max_time:?}); stderr: {}",
        stderr(&o)
    );
    o
}

fn run(args: &[&str]) -> Output {
    run_bounded(args, 4 << 30, Duration::from_secs(120))
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Exit 2 and exactly one line on stderr; the line is returned.
fn one_error_line(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(2),
        "expected exit 2; stdout {} stderr {}",
        stdout(o),
        stderr(o)
    );
    let e = stderr(o);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got:\n{e}");
    lines[0].to_string()
}

/// A damaged copy of a tree, removed when the test ends (each copy of the real tree is 15 MB).
struct TempTree(PathBuf);

impl std::ops::Deref for TempTree {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A copy of the real 6.12 tree's sources, `.config` and version, with `vmlinux` and every
/// `modules/*.ko` linked (so a test can remove modules from the copy without touching the cache).
fn real_copy(tag: &str) -> TempTree {
    let real = common::kernel_dir("6.12");
    let dir = common::temp_dir(&format!("bad-{tag}"));
    for d in ["drivers", "include"] {
        common::copy_dir(&real.join(d), &dir.join(d));
    }
    for f in [".config", "Makefile", "KERNEL_VERSION"] {
        std::fs::copy(real.join(f), dir.join(f)).expect("copy");
    }
    std::os::unix::fs::symlink(real.join("vmlinux"), dir.join("vmlinux")).expect("link");
    std::fs::create_dir(dir.join("modules")).expect("mkdir");
    for e in std::fs::read_dir(real.join("modules")).expect("modules") {
        let e = e.expect("entry");
        std::os::unix::fs::symlink(e.path(), dir.join("modules").join(e.file_name()))
            .expect("link");
    }
    TempTree(dir)
}

fn generate(tree: &Path, vendor: &str, out: &Path, extra: &[&str]) -> Output {
    let (t, o) = (s(tree), s(out));
    let mut args = vec![
        "generate",
        "--kernel-src",
        &t,
        "--vendor",
        vendor,
        "--out",
        &o,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// `generate` on a damaged tree: exit 2 with one line naming `names`; with `--allow-degraded`
/// exit 0 and a manifest and report that list the damage.
fn assert_degraded(tree: &Path, names: &str, kind: &str, with_allow: bool) {
    let out = tree.join("out");
    let line = one_error_line(&generate(tree, "mlx5", &out, &[]));
    assert!(
        line.contains("degraded input") && line.contains(names) && line.contains(kind),
        "{line}"
    );
    assert!(!out.exists(), "nothing written on a degraded input");
    if !with_allow {
        return;
    }
    let o = generate(tree, "mlx5", &out, &["--allow-degraded"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("warning: degraded input"),
        "{}",
        stderr(&o)
    );
    let text = std::fs::read_to_string(out.join("manifest.yaml")).expect("manifest");
    let m = manifest::Manifest::from_yaml(&text, "manifest.yaml").expect("valid manifest");
    assert!(
        m.degraded
            .iter()
            .any(|d| d.kind.as_str() == kind && d.file.contains(names)),
        "{:?}",
        m.degraded
    );
    let report = std::fs::read_to_string(out.join("report.md")).expect("report");
    assert!(report.contains("## Degraded input") && report.contains(names));
}

// ------------------------------------------------------------------- the real trees

/// The baseline: no real tree (7.2, 6.12, 6.1) is degraded (their ~1590 tree-sitter error nodes are the
/// kernel's macros, not damage), and the generated set is the checked-in one.
#[test]
fn real_trees_are_complete() {
    for ver in ["7.2", "6.12", "6.1"] {
        let tree = common::kernel_dir(ver);
        let o = run(&["graph", "--kernel-src", &s(&tree)]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            !stderr(&o).contains("degraded"),
            "{ver} is degraded: {}",
            stderr(&o)
        );
    }
}

// ------------------------------------------------------------- silent shrinkage

#[test]
fn unreadable_source_files_are_degraded() {
    let tree = real_copy("unreadable");
    let core = tree.join("drivers/infiniband/core");
    let unreadable = ["uverbs_cmd.c", "uverbs_std_types_qp.c"];
    for f in unreadable {
        std::fs::set_permissions(
            core.join(f),
            std::os::unix::fs::PermissionsExt::from_mode(0o000),
        )
        .expect("chmod");
    }
    // root reads a mode-0 file: drop to `nobody` (65534) as an unprivileged user would be.
    let as_root = unsafe { libc::geteuid() } == 0;
    let out = std::env::temp_dir().join(format!("probegen-unreadable-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).expect("mkdir");
    std::fs::set_permissions(&out, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    let set = out.join("mlx5");
    let mut cmd = bin();
    cmd.args([
        "generate",
        "--kernel-src",
        &s(&tree),
        "--vendor",
        "mlx5",
        "--out",
    ])
    .arg(&set);
    if as_root {
        cmd.uid(65534).gid(65534);
    }
    let o = cmd.output().expect("run");
    let line = one_error_line(&o);
    assert!(
        line.contains("unreadable") && line.contains("drivers/infiniband/core/uverbs_cmd.c"),
        "{line}"
    );
    assert!(line.contains("2 unreadable"), "{line}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn random_bytes_in_a_source_file_are_degraded() {
    let tree = real_copy("random");
    let f = tree.join("drivers/infiniband/core/uverbs_cmd.c");
    let mut text = std::fs::read(&f).expect("read");
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let at = text.len() / 3;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    text.splice(at..at, noise);
    std::fs::write(&f, text).expect("write");
    assert_degraded(
        &tree,
        "drivers/infiniband/core/uverbs_cmd.c",
        "undecodable",
        true,
    );
}

#[test]
fn unterminated_if_is_degraded() {
    let tree = real_copy("if0");
    let f = tree.join("drivers/infiniband/core/uverbs_cmd.c");
    let text = std::fs::read_to_string(&f).expect("read");
    let at = text.find("\nstatic int ib_uverbs_reg_mr").expect("anchor");
    std::fs::write(&f, format!("{}\n#if 0{}", &text[..at], &text[at..])).expect("write");
    assert_degraded(
        &tree,
        "drivers/infiniband/core/uverbs_cmd.c",
        "unbalanced-conditional",
        false,
    );
}

#[test]
fn truncated_config_is_degraded() {
    let tree = real_copy("config-cut");
    let text = std::fs::read_to_string(tree.join(".config")).expect("read");
    let at = text.find("CONFIG_MLX5_INFINI").expect("option");
    std::fs::write(tree.join(".config"), &text[..at]).expect("write");
    let line = one_error_line(&generate(&tree, "mlx5", &tree.join("out"), &[]));
    assert!(
        line.contains("config-missing") && line.contains("CONFIG_MLX5_INFINIBAND"),
        "{line}"
    );
}

#[test]
fn empty_modules_dir_is_degraded() {
    let tree = real_copy("no-modules");
    for e in std::fs::read_dir(tree.join("modules")).expect("modules") {
        std::fs::remove_file(e.expect("entry").path()).expect("rm");
    }
    assert_degraded(&tree, "modules/", "module-missing", false);
}

#[test]
fn missing_vendor_module_is_degraded() {
    let tree = real_copy("no-mlx5-ko");
    std::fs::remove_file(tree.join("modules/mlx5_ib.ko")).expect("rm");
    assert_degraded(&tree, "modules/mlx5_ib.ko", "module-missing", true);
}

/// `check` enforces and reports completeness like `generate`.
#[test]
fn check_refuses_or_reports_a_degraded_tree() {
    let tree = real_copy("check-no-ko");
    std::fs::remove_file(tree.join("modules/mlx5_ib.ko")).expect("rm");
    let against =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/linux-6.12/mlx5/manifest.yaml");
    let (t, a) = (s(&tree), s(&against));
    let line = one_error_line(&run(&["check", "--kernel-src", &t, "--against", &a]));
    assert!(
        line.contains("modules/mlx5_ib.ko: module-missing"),
        "{line}"
    );
    let o = run(&[
        "check",
        "--kernel-src",
        &t,
        "--against",
        &a,
        "--allow-degraded",
    ]);
    // The vendor's attach verdicts all became `not-built`: drift, and the report says why.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("## Degraded input") && stdout(&o).contains("modules/mlx5_ib.ko"),
        "{}",
        stdout(&o)
    );
}

// ------------------------------------------------------------------ the real cause

#[test]
fn missing_entry_names_the_damaged_file() {
    let tree = real_copy("main-damaged");
    let f = tree.join("drivers/infiniband/core/uverbs_main.c");
    let text = std::fs::read_to_string(&f).expect("read");
    // Cut the file inside ib_uverbs_write's body: the definition is lost.
    let at = text
        .find("static ssize_t ib_uverbs_write(")
        .expect("anchor");
    std::fs::write(&f, format!("{}\x01\x02garbage {{ {{ (", &text[..at + 200])).expect("write");
    let o = run(&["graph", "--kernel-src", &s(&tree)]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let last = e.lines().last().unwrap_or("");
    assert!(
        last.contains("default entry `ib_uverbs_write`")
            && last.contains("drivers/infiniband/core/uverbs_main.c")
            && !last.contains("--entry"),
        "{e}"
    );
}

#[test]
fn missing_entry_names_the_config_or_makefile() {
    let tree = real_copy("config-empty");
    std::fs::write(tree.join(".config"), "").expect("write");
    // graph warns of the degraded input, then names the cause of the missing entry.
    let o = run(&["graph", "--kernel-src", &s(&tree)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.starts_with("probegen: warning: degraded input"), "{e}");
    let line = e.lines().last().unwrap_or("").to_string();
    assert!(
        line.contains("default entry `ib_uverbs_ioctl`")
            && line.contains("CONFIG_INFINIBAND")
            && line.contains(".config"),
        "{line}"
    );

    let tree = real_copy("config-truncated");
    let text = std::fs::read_to_string(tree.join(".config")).expect("read");
    let at = text.find("CONFIG_INFINIBAND_USER_ACCESS").expect("option");
    std::fs::write(tree.join(".config"), &text[..at]).expect("write");
    let o = run(&["graph", "--kernel-src", &s(&tree)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.lines()
            .last()
            .unwrap_or("")
            .contains("CONFIG_INFINIBAND_USER_ACCESS"),
        "{e}"
    );

    let tree = real_copy("no-makefile");
    std::fs::remove_file(tree.join("drivers/infiniband/Makefile")).expect("rm");
    let o = run(&["graph", "--kernel-src", &s(&tree)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("makefile-missing")
            && e.lines()
                .last()
                .unwrap_or("")
                .contains("drivers/infiniband/Makefile is missing"),
        "{e}"
    );
}

#[test]
fn warnings_are_printed_before_a_missing_entry() {
    let tree = common::temp_dir("warn-entry");
    common::copy_dir(&common::fixture("bad-input"), &tree);
    let o = run(&[
        "graph",
        "--kernel-src",
        &s(&tree),
        "--warnings",
        "--entry",
        "no_such_entry",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.lines().any(|l| l.starts_with("warning: ")), "{e}");
    assert!(e.contains("--entry `no_such_entry` not found"), "{e}");
}

#[test]
fn vendor_without_its_driver_is_an_error_unless_not_built() {
    let tree = common::temp_dir("no-mlx5");
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &tree);
    std::fs::remove_dir_all(tree.join("drivers/infiniband/hw/mlx5")).expect("rm");
    let out = tree.join("out");
    let entry = ["--entry", "ib_uverbs_ioctl"];
    // The directory Kbuild descends into is gone: the input is degraded.
    let line = one_error_line(&generate(&tree, "mlx5", &out, &entry));
    assert!(
        line.contains("drivers/infiniband/hw/mlx5/Makefile: makefile-missing"),
        "{line}"
    );
    // Going on anyway, the vendor's absence is still an error...
    let allow = ["--entry", "ib_uverbs_ioctl", "--allow-degraded"];
    let line = one_error_line(&generate(&tree, "mlx5", &out, &allow));
    assert!(
        line.contains("--vendor mlx5: drivers/infiniband/hw/mlx5 is not in"),
        "{line}"
    );
    // ...unless asked for as not built.
    let o = generate(
        &tree,
        "mlx5",
        &out,
        &[
            "--entry",
            "ib_uverbs_ioctl",
            "--allow-degraded",
            "--not-built",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

// ------------------------------------------------------------------------ crashes

fn fixture_with(tag: &str, file: &str, contents: &str) -> PathBuf {
    let tree = common::temp_dir(tag);
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &tree);
    std::fs::write(tree.join(file), contents).expect("write");
    tree
}

#[test]
fn deep_if_expressions_are_an_error_naming_the_line() {
    for (tag, expr) in [
        ("not", "!".repeat(10_000) + "1"),
        ("paren", "(".repeat(10_000) + "1" + &")".repeat(10_000)),
        ("ternary", "1 ? 1 : ".repeat(10_000) + "0"),
    ] {
        let tree = fixture_with(
            &format!("deep-{tag}"),
            "drivers/infiniband/core/deep.h",
            &format!("/* deep */\n#if {expr}\nint x;\n#endif\n"),
        );
        let line = one_error_line(&run(&["graph", "--kernel-src", &s(&tree)]));
        assert!(
            line.contains("drivers/infiniband/core/deep.h:2: #if expression nested deeper than"),
            "{tag}: {line}"
        );
    }
}

#[test]
fn deep_parenthesised_callee_does_not_crash() {
    let body = format!(
        "{}ib_alloc_pd_user{}(x)",
        "(".repeat(10_000),
        ")".repeat(10_000)
    );
    let tree = fixture_with(
        "deep-callee",
        "drivers/infiniband/core/deep.h",
        &format!("static inline int deep(int x)\n{{\n\treturn {body};\n}}\n"),
    );
    let o = run(&[
        "graph",
        "--kernel-src",
        &s(&tree),
        "--entry",
        "ib_uverbs_ioctl",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

fn rxe_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("generated/linux-6.12/rxe/manifest.yaml")
}

#[test]
fn huge_durations_are_an_error() {
    let dir = common::temp_dir("durations");
    let replay = dir.join("r.jsonl");
    std::fs::write(&replay, "").expect("write");
    let m = s(&rxe_manifest());
    for flag in ["--interval", "--duration", "--drain", "--linger"] {
        let o = run(&[
            "collect",
            "--manifest",
            &m,
            "--replay",
            &s(&replay),
            "--out",
            &s(&dir.join("o.jsonl")),
            flag,
            "1e20s",
        ]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("longer than 100 years"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn replay_of_dev_zero_is_bounded() {
    let dir = common::temp_dir("dev-zero");
    let o = run_bounded(
        &[
            "collect",
            "--manifest",
            &s(&rxe_manifest()),
            "--replay",
            "/dev/zero",
            "--out",
            &s(&dir.join("o.jsonl")),
        ],
        1 << 30,
        Duration::from_secs(30),
    );
    let line = one_error_line(&o);
    assert!(line.contains("/dev/zero: line 1: longer than"), "{line}");
}

#[test]
fn collect_errors_are_printed_once() {
    let dir = common::temp_dir("collect-once");
    let replay = dir.join("r.jsonl");
    std::fs::write(&replay, "{\"what\": 1}\n").expect("write");
    let o = run(&[
        "collect",
        "--manifest",
        &s(&rxe_manifest()),
        "--replay",
        &s(&replay),
        "--out",
        &s(&dir.join("o.jsonl")),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(
        e.matches("expected a rec, counters or replay line").count(),
        1,
        "{e}"
    );
}

// --------------------------------------------------------- linear time and memory

/// 20,000 unclosed `DECLARE_UVERBS_NAMED_METHOD((` lines took 68 s and 17.1 GB: now each
/// ends with its declaration, under a 2 GiB address-space limit and in seconds.
#[test]
fn unclosed_method_declarations_are_linear() {
    let text = "DECLARE_UVERBS_NAMED_METHOD((UVERBS_METHOD_X,\n".repeat(20_000);
    // A file the fixture builds (an unbuilt one is never read).
    let tree = fixture_with("unclosed", "drivers/infiniband/core/uverbs_main.c", &text);
    let o = run_bounded(
        &[
            "graph",
            "--kernel-src",
            &s(&tree),
            "--entry",
            "ib_alloc_pd_user",
        ],
        2 << 30,
        Duration::from_secs(30),
    );
    assert!(
        matches!(o.status.code(), Some(0 | 2)),
        "exit {:?}: {}",
        o.status.code(),
        stderr(&o)
    );
}

// --------------------------------------------------------------------- atomic sets

#[test]
fn failed_generate_leaves_the_earlier_set_whole() {
    let tree = common::temp_dir("atomic");
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &tree);
    let out = tree.join("out");
    let entry = ["--entry", "ib_uverbs_ioctl"];
    let o = generate(&tree, "bnxt_re", &out, &entry);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before: Vec<(String, Vec<u8>)> = ["manifest.yaml", "report.md", "probes.bpf.c"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(out.join(f)).expect("read")))
        .collect();
    // The 4th file of the set cannot be written: a directory stands in its place.
    std::fs::remove_file(out.join("probegen.bpf.h")).expect("rm");
    std::fs::create_dir_all(out.join("probegen.bpf.h/x")).expect("mkdir");
    let o = generate(&tree, "mlx5", &out, &entry);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    for (f, bytes) in before {
        assert_eq!(
            std::fs::read(out.join(&f)).expect("read"),
            bytes,
            "{f} was replaced by a failed generate"
        );
    }
}

/// The vendors of a list are rendered two at a time, but written in the list's order: a set
/// that cannot be written stops the run with every earlier set written and no later one (nor
/// its notices), as a run of one vendor after another would.
#[test]
fn a_list_stops_at_the_set_that_fails_in_its_order() {
    let tree = common::temp_dir("list-order");
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &tree);
    let entry = ["--entry", "ib_uverbs_ioctl"];
    for (list, written) in [("bnxt_re,mlx5", true), ("mlx5,bnxt_re", false)] {
        let out = tree.join(format!("out-{written}"));
        std::fs::create_dir_all(&out).expect("mkdir");
        // mlx5's set cannot be written: a plain file stands where its directory goes.
        std::fs::write(out.join("mlx5"), "not a set").expect("write");
        let o = generate(&tree, list, &out, &entry);
        assert_eq!(o.status.code(), Some(2), "{list}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("mlx5: not a directory"),
            "{list}: {}",
            stderr(&o)
        );
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            out.join("bnxt_re/manifest.yaml").is_file(),
            written,
            "{list}: bnxt_re's set"
        );
        assert_eq!(stdout.starts_with("bnxt_re: "), written, "{list}: {stdout}");
        assert_eq!(
            stdout.lines().count(),
            usize::from(written),
            "{list}: {stdout}"
        );
        // One vendor's warnings (no binaries in a fixture): bnxt_re's only when it was taken.
        let warnings = stderr(&o).matches("no vmlinux/modules").count();
        assert_eq!(warnings, 1 + usize::from(written), "{list}: {}", stderr(&o));
    }
}

// ---------------------------------------------------------------- smaller ones

#[test]
fn manifests_are_validated_by_every_command() {
    let dir = common::temp_dir("validate");
    let good = std::fs::read_to_string(rxe_manifest()).expect("read");
    let cases = [
        (
            "teleport",
            good.replacen("attach: fexit", "attach: teleport", 1),
            "attach `teleport`",
        ),
        (
            "layer",
            good.replacen("layer: core", "layer: 7", 1),
            "layer `7`",
        ),
        (
            "dup",
            good.replacen("- id: 1\n", "- id: 0\n", 1),
            "appears twice",
        ),
        ("bom", format!("\u{feff}{good}"), "byte-order mark"),
    ];
    let csv = dir.join("f.csv");
    write(&csv, "create_qp,EINVAL,1\n");
    let tree = s(&common::kernel_dir("6.12"));
    for (tag, text, want) in cases {
        let bad = dir.join(format!("{tag}.yaml"));
        write(&bad, &text);
        let b = s(&bad);
        let good_path = s(&rxe_manifest());
        for args in [
            vec!["diff", &good_path, &b],
            vec!["coverage", "--manifest", &b, "--failures", &s(&csv)],
            vec!["check", "--kernel-src", &tree, "--against", &b],
            vec![
                "collect",
                "--manifest",
                &b,
                "--replay",
                &s(&csv),
                "--out",
                "/dev/null",
            ],
        ] {
            let line = one_error_line(&run(&args));
            assert!(line.contains(want) && line.contains(&b), "{args:?}: {line}");
        }
    }
}

#[test]
fn coverage_refuses_an_infinite_total() {
    let dir = common::temp_dir("inf");
    let csv = dir.join("f.csv");
    write(&csv, "create_qp,EINVAL,1e308\nreg_mr,ENOMEM,1e308\n");
    let line = one_error_line(&run(&[
        "coverage",
        "--manifest",
        &s(&rxe_manifest()),
        "--failures",
        &s(&csv),
    ]));
    assert!(
        line.contains("f.csv:2: the weights sum to infinity"),
        "{line}"
    );
}

#[test]
fn many_malformed_rows_print_20_and_a_count() {
    let dir = common::temp_dir("malformed");
    let csv = dir.join("f.csv");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&csv).expect("create"));
    for _ in 0..100_000 {
        f.write_all(b"not a row\n").expect("write");
    }
    drop(f);
    let o = run(&[
        "coverage",
        "--manifest",
        &s(&rxe_manifest()),
        "--failures",
        &s(&csv),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 22, "{e}");
    assert!(e.contains("... and 99980 more malformed row(s)"), "{e}");
}

#[test]
fn bracket_rules_file_is_rejected_fast() {
    let dir = common::temp_dir("brackets");
    let rules = dir.join("rules.yaml");
    write(&rules, &"[".repeat(200_000));
    let tree = common::temp_dir("brackets-tree");
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &tree);
    let o = run_bounded(
        &[
            "generate",
            "--kernel-src",
            &s(&tree),
            "--vendor",
            "mlx5",
            "--out",
            &s(&tree.join("out")),
            "--rules",
            &s(&rules),
        ],
        2 << 30,
        Duration::from_secs(3),
    );
    let line = one_error_line(&o);
    assert!(
        line.contains("rules.yaml:1:33: `[` nested deeper than 32"),
        "{line}"
    );
}

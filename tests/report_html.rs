//! The review pictures as a person sees them: Debian's `chromium`, headless, loads the real
//! 6.12 mlx5 set's `report.html` (generated from the real tree: tests/probe_sets.rs keeps it
//! fresh), takes a screenshot that must be the size asked for and far from blank, and dumps
//! the rendered DOM, which must hold every probe of the set and every rule that dropped a
//! function. A missing browser fails the test naming the package.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 1800;

fn chromium() -> PathBuf {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("chromium not found: install Debian's `chromium` (scripts/install-deps.sh)")
        })
}

/// Headless Chromium on `page` with `args`; its stdout.
fn headless(page: &Path, args: &[String], profile: &Path) -> Vec<u8> {
    let url = format!("file://{}", page.display());
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            // nothing from the network: the page must be self-contained
            "--host-resolver-rules=MAP * ~NOTFOUND",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(&url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium {args:?} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The classes of every node drawn for function `f` in `dom`.
fn classes_of(dom: &str, f: &str) -> Vec<String> {
    let key = format!("\" data-fn=\"{f}\"");
    dom.match_indices(&key)
        .filter_map(|(i, _)| {
            let start = dom[..i].rfind("class=\"")? + "class=\"".len();
            Some(dom[start..i].to_string())
        })
        .collect()
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&png[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

fn screenshot(page: &Path, png: &Path, profile: &Path) -> Vec<u8> {
    headless(
        page,
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={WIDTH},{HEIGHT}"),
        ],
        profile,
    );
    std::fs::read(png).unwrap_or_else(|e| panic!("{}: {e}", png.display()))
}

#[test]
fn the_mlx5_picture_renders_in_chromium_with_every_probe_and_rule() {
    let g = common::servers::Guard::new("pg-report-html");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = repo.join("generated/linux-6.12/mlx5/report.html");
    let manifest: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo.join("generated/linux-6.12/mlx5/manifest.yaml"))
            .expect("manifest"),
    )
    .expect("yaml");

    // a blank page of the same size, for what "not blank" is measured against
    let blank = g.dir.join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").expect("blank");
    let blank_png = screenshot(&blank, &g.dir.join("blank.png"), &g.dir.join("profile"));
    let png = screenshot(&page, &g.dir.join("mlx5.png"), &g.dir.join("profile"));
    assert_eq!(png_size(&png), (WIDTH, HEIGHT));
    println!(
        "screenshot {WIDTH}x{HEIGHT}: {} bytes (a blank page: {} bytes)",
        png.len(),
        blank_png.len()
    );
    assert!(
        png.len() > 10 * blank_png.len(),
        "the screenshot is about as small as a blank page's: {} vs {} bytes",
        png.len(),
        blank_png.len()
    );

    let dom = String::from_utf8(headless(
        &page,
        &["--dump-dom".into()],
        &g.dir.join("profile"),
    ))
    .expect("utf-8 DOM");
    let probes = manifest["probes"].as_sequence().expect("probes");
    let missing: Vec<&str> = probes
        .iter()
        .filter_map(|p| p["function"].as_str())
        .filter(|f| !dom.contains(&format!("data-fn=\"{f}\"")))
        .collect();
    assert!(
        missing.is_empty(),
        "probes not in the rendered DOM: {missing:?}"
    );
    let rules = manifest["stats"]["excluded"].as_mapping().expect("rules");
    for (rule, _) in rules {
        let rule = rule.as_str().expect("rule");
        assert!(
            dom.contains(&format!("<td>{rule}</td>")),
            "rule {rule} not in the DOM"
        );
        assert!(
            dom.contains(&format!("dropped: {rule}:")),
            "no function dropped by {rule} on hover"
        );
    }
    println!(
        "DOM: {} bytes, {} probes and {} rules found",
        dom.len(),
        probes.len(),
        rules.len()
    );
}

/// `check --html` of the checked-in 6.12 rxe set against the real 7.2 tree (the kernel-upgrade
/// job's check): the rendered page holds every probe of the regenerated 7.2 set, draws the
/// added ones green and each removed one red with its fate, as Chromium renders it.
#[test]
fn the_6_12_to_7_2_check_draws_the_drift_in_chromium() {
    let g = common::servers::Guard::new("pg-report-check");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = g.dir.join("check.html");
    let src = common::kernel_dir("7.2");
    let against = repo.join("generated/linux-6.12/rxe/manifest.yaml");
    let out = common::probegen(&[
        "check",
        "--kernel-src",
        src.to_str().expect("utf-8 path"),
        "--against",
        against.to_str().expect("utf-8 path"),
        "--format",
        "json",
        "--html",
        page.to_str().expect("utf-8 path"),
    ]);
    assert_eq!(out.status.code(), Some(1), "6.12 -> 7.2 drifts: {out:?}");
    let drift: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let dom = String::from_utf8(headless(
        &page,
        &["--dump-dom".into()],
        &g.dir.join("profile"),
    ))
    .expect("utf-8 DOM");
    let new: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo.join("generated/linux-7.2/rxe/manifest.yaml"))
            .expect("manifest"),
    )
    .expect("yaml");
    for p in new["probes"].as_sequence().expect("probes") {
        let f = p["function"].as_str().expect("function");
        assert!(
            dom.contains(&format!("data-fn=\"{f}\"")),
            "7.2 probe {f} not drawn"
        );
    }
    let added = drift["added"].as_array().expect("added");
    let removed = drift["removed"].as_array().expect("removed");
    assert!(!added.is_empty() && !removed.is_empty(), "{drift}");
    for a in added {
        let f = a["function"].as_str().expect("function");
        let classes = classes_of(&dom, f);
        assert!(
            !classes.is_empty() && classes.iter().all(|c| c.split(' ').any(|w| w == "added")),
            "added probe {f} not drawn as added: {classes:?}"
        );
    }
    for r in removed {
        let f = r["function"].as_str().expect("function");
        let classes = classes_of(&dom, f);
        assert!(
            !classes.is_empty() && classes.iter().all(|c| c.starts_with("fn removed")),
            "removed probe {f} not drawn as removed: {classes:?}"
        );
    }
    let png = screenshot(&page, &g.dir.join("check.png"), &g.dir.join("profile"));
    assert_eq!(png_size(&png), (WIDTH, HEIGHT));
    println!(
        "check 6.12 -> 7.2: {} added, {} removed drawn; screenshot {} bytes",
        added.len(),
        removed.len(),
        png.len()
    );
}

/// `diff --html` and `coverage --html` write pages Chromium renders with what they claim.
#[test]
fn diff_and_coverage_pages_render() {
    let g = common::servers::Guard::new("pg-report-diff");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let m = |v: &str| repo.join(format!("generated/linux-{v}/mlx5/manifest.yaml"));
    let diff = g.dir.join("diff.html");
    let out = common::probegen(&[
        "diff",
        m("6.12").to_str().expect("path"),
        m("7.2").to_str().expect("path"),
        "--html",
        diff.to_str().expect("path"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let dom = String::from_utf8(headless(
        &diff,
        &["--dump-dom".into()],
        &g.dir.join("profile"),
    ))
    .expect("utf-8");
    assert!(
        dom.contains("class=\"fn removed\""),
        "no removed probe drawn"
    );
    assert!(
        dom.match_indices("class=\"fn probe")
            .any(|(i, _)| dom[i..i + 60].contains(" added")),
        "no added probe drawn"
    );
    let cov = g.dir.join("coverage.html");
    let out = common::probegen(&[
        "coverage",
        "--manifest",
        m("6.12").to_str().expect("path"),
        "--failures",
        repo.join("kernel-fixtures/failures/table2.csv")
            .to_str()
            .expect("path"),
        "--html",
        cov.to_str().expect("path"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let dom = String::from_utf8(headless(
        &cov,
        &["--dump-dom".into()],
        &g.dir.join("profile"),
    ))
    .expect("utf-8");
    assert!(dom.contains("73.0% of the failure log covered"), "{dom}");
    for verb in ["ibv_create_qp", "ibv_destroy_qp", "cleanup", "covered"] {
        assert!(
            dom.contains(&format!(">{verb}</text>")),
            "{verb} has no bar"
        );
    }
}

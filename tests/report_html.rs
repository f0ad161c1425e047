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

//! `scripts/fetch-kernel.sh` on what a user may type: the list of available kernels, and
//! unknown series, versions and flavors (one line listing what is available, exit 2). Uses
//! the script's own apt lists under the cache (fetched on first use).

use std::path::Path;
use std::process::{Command, Output};

fn fetch(args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fetch-kernel.sh");
    Command::new("bash")
        .arg(script)
        .args(args)
        .output()
        .expect("bash runs")
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn list_marks_the_default_version_of_each_series() {
    let o = fetch(&["--list"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for series in ["6.1", "6.12", "7.2"] {
        let marked: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with('*') && l.split_whitespace().nth(1) == Some(series))
            .collect();
        assert_eq!(marked.len(), 1, "one default for {series}:\n{out}");
    }
    // bookworm's own 6.12 wins over trixie's newer one on a Debian 12 machine.
    assert!(
        out.lines()
            .any(|l| l.starts_with('*') && l.contains("6.12.117-1~deb12u1")),
        "{out}"
    );
}

#[test]
fn unknown_series_version_and_flavor_list_what_exists() {
    let o = fetch(&["9.9"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("unknown kernel series 9.9") && e.contains("7.2"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");

    let o = fetch(&["7.2.99-1"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("7.2.13-1"), "{}", err(&o));

    let o = fetch(&["--flavor", "gaming", "7.2"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("amd64 cloud rt"), "{}", err(&o));

    let o = fetch(&["seven"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
}

/// The script extracts the directories the analyzer reads, derived from heuristics/rules.yaml
/// (no second list): the Kbuild root, the include directories and every vendor's outside it.
#[test]
fn source_dirs_are_the_rules_directories() {
    let o = fetch(&["--source-dirs"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let printed: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let rules = heuristics::Rules::builtin().expect("built-in rules");
    let mut expected: Vec<String> = rules
        .source_layout()
        .scan_dirs()
        .map(str::to_string)
        .collect();
    expected.push("Makefile".into());
    // The script lists vendors in file order, the rules by name: the same set.
    let (mut printed_sorted, mut expected) = (printed.clone(), expected);
    printed_sorted.sort();
    expected.sort();
    assert_eq!(printed_sorted, expected);
    assert!(
        printed.iter().any(|d| d == "include/linux/mlx4"),
        "{printed:?}"
    );
}

//! The docs a newcomer reads stay readable and true: README.md is a page (at most
//! [`README_MAX_LINES`]), every relative link of README.md, ARCHITECTURE.md and docs/ reaches a
//! file (and a heading, when it names one), no doc quotes the collector's code-line budget
//! (they name `COLLECTOR_CODE_LINES_BUDGET`, the constant of `tests/agent_size.rs`), and each
//! recipe of docs/recipes.md names the test that follows it.

use std::path::{Path, PathBuf};

/// Issue 33: what it is, the two commands, a picture, the five commands, where to read on.
const README_MAX_LINES: usize = 250;

/// Recipe tests another branch adds; the entry goes when the test lands.
/// <!-- check: the coordinator removes `third_sink` once sinks33's tests/third_sink.rs is merged -->
const RECIPE_TESTS_PENDING: &[&str] = &[];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, ARCHITECTURE.md and every markdown file under docs/.
fn docs() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md"), repo().join("ARCHITECTURE.md")];
    let mut under: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    under.sort();
    files.extend(under);
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `(line, target)` of every markdown link `[text](target)` and image `![alt](target)`
/// outside code blocks.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn the_readme_is_a_page() {
    let n = read(&repo().join("README.md")).lines().count();
    assert!(
        n <= README_MAX_LINES,
        "README.md has {n} lines, at most {README_MAX_LINES}: move the rest into docs/"
    );
}

#[test]
fn every_relative_link_reaches_a_file_and_its_heading() {
    let mut broken = Vec::new();
    for doc in docs() {
        let text = read(&doc);
        let dir = doc.parent().expect("a doc's directory");
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, frag) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.clone()
            } else {
                dir.join(file)
            };
            let name = format!(
                "{}:{line}: {target}",
                doc.strip_prefix(repo()).unwrap_or(&doc).display()
            );
            if !path.exists() {
                broken.push(format!("{name}: no such file"));
                continue;
            }
            if let Some(frag) = frag.filter(|_| path.extension().is_some_and(|x| x == "md")) {
                if !anchors(&read(&path)).iter().any(|a| a == frag) {
                    broken.push(format!("{name}: no heading `#{frag}`"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The budget's value as `tests/agent_size.rs` declares it.
fn collector_budget() -> usize {
    let text = read(&repo().join("tests/agent_size.rs"));
    let line = text
        .lines()
        .find(|l| l.starts_with("const COLLECTOR_CODE_LINES_BUDGET: usize ="))
        .expect("COLLECTOR_CODE_LINES_BUDGET in tests/agent_size.rs");
    let value: String = line
        .split('=')
        .nth(1)
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    value.parse().expect("the budget is a number")
}

/// `n` as a doc could write it: 5000, 5,000, 5_000.
fn spellings(n: usize) -> Vec<String> {
    let plain = n.to_string();
    let mut grouped = String::new();
    for (i, c) in plain.chars().enumerate() {
        if i > 0 && (plain.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let underscored = grouped.replace(',', "_");
    vec![plain, grouped, underscored]
}

/// Whether `needle` occurs in `text` as a number of its own (not inside a longer one).
fn has_number(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        let rest = &text[at + needle.len()..];
        let digitish =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit() || c == ',' || c == '_');
        // a longer number before it, a digit after it, or a group after it (5,000,000)
        let longer = digitish(text[..at].chars().next_back())
            || rest.starts_with(|c: char| c.is_ascii_digit())
            || rest
                .strip_prefix(',')
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
        !longer
    })
}

#[test]
fn no_doc_quotes_the_collector_budget() {
    let budget = collector_budget();
    let mut quoted = Vec::new();
    for doc in docs() {
        let text = read(&doc);
        for (i, line) in text.lines().enumerate() {
            for s in spellings(budget) {
                if has_number(line, &s) {
                    quoted.push(format!("{}:{}: {line}", doc.display(), i + 1));
                }
            }
        }
    }
    assert!(
        quoted.is_empty(),
        "a doc quotes the collector budget ({budget}); name COLLECTOR_CODE_LINES_BUDGET instead:\n{}",
        quoted.join("\n")
    );
    let arch = read(&repo().join("ARCHITECTURE.md"));
    assert!(
        arch.contains("COLLECTOR_CODE_LINES_BUDGET"),
        "ARCHITECTURE.md names the collector's budget by its constant"
    );
}

#[test]
fn spellings_and_numbers_are_told_apart() {
    assert_eq!(spellings(5000), ["5000", "5,000", "5_000"]);
    assert!(has_number("at most 5,000 code lines", "5,000"));
    assert!(!has_number("15,000 lines", "5,000"));
    assert!(!has_number("5,0001", "5,000"));
    assert!(!has_number("5,000,000 rows", "5,000"));
}

/// Each recipe says which test follows it ("Kept true by `tests/x.rs`"); that test exists and
/// names docs/recipes.md.
#[test]
fn every_recipe_names_the_test_that_follows_it() {
    let text = read(&repo().join("docs/recipes.md"));
    let recipes: Vec<&str> = text.split("\n## ").skip(1).collect();
    assert_eq!(recipes.len(), 4, "four recipes");
    for recipe in recipes {
        let title = recipe.lines().next().unwrap_or("");
        let test = recipe
            .split("Kept true by `")
            .nth(1)
            .and_then(|s| s.split('`').next())
            .unwrap_or_else(|| panic!("recipe `{title}` names no test (Kept true by `tests/...`)"));
        let path = repo().join(test);
        if RECIPE_TESTS_PENDING.contains(&test) && !path.exists() {
            continue;
        }
        assert!(
            read(&path).contains("docs/recipes.md"),
            "{test} (the test of recipe `{title}`) names docs/recipes.md"
        );
    }
}

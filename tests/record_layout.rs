//! The recipe "Change the record layout" of `docs/recipes.md` is the whole change: every file
//! that names the failure record is one the recipe lists (to edit, or following the table with
//! no edit), the generated C struct is `manifest::RECORD_FIELDS` in order, and no file but the
//! table's writes the record's size as a number (each says `RECORD_SIZE`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What names the record: the Rust mirror, the C struct, the table and its size.
const RECORD_NAMES: &[&str] = &["PgRecord", "pg_record", "RECORD_FIELDS", "RECORD_SIZE"];

/// Where the layout itself is written: the only file that may spell its size.
const TABLE: &str = "manifest/src/record.rs";

/// Skipped: build output, the vendored grammar, the generated sets (`scripts/regenerate.sh`
/// rewrites them; the recipe names it), the docs, this test.
const SKIPPED_DIRS: &[&str] = &["target", ".git", "third_party", "generated", "docs"];
const THIS_TEST: &str = "tests/record_layout.rs";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The recipe's section of docs/recipes.md.
fn recipe() -> String {
    let text = read(&repo().join("docs/recipes.md"));
    text.split("\n## Change the record layout\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/recipes.md has a section `## Change the record layout`")
        .to_string()
}

/// Every repository path the recipe names in backquotes (`dir/file.ext`).
fn named_paths(recipe: &str) -> BTreeSet<String> {
    recipe
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.contains('/') && s.contains('.') && !s.contains(' '))
        .map(str::to_string)
        .collect()
}

/// Source files of the repository (Rust, C, headers, scripts), relative to it.
fn source_files() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !SKIPPED_DIRS.contains(&name.as_str()) {
                    walk(&p, out);
                }
            } else if ["rs", "c", "h", "sh", "py"]
                .iter()
                .any(|x| p.extension().is_some_and(|e| e == *x))
            {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(repo(), &mut files);
    let mut rel: Vec<String> = files
        .iter()
        .filter_map(|p| p.strip_prefix(repo()).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| p != THIS_TEST)
        .collect();
    rel.sort();
    rel
}

fn names_the_record(text: &str) -> bool {
    RECORD_NAMES.iter().any(|n| text.contains(n))
}

#[test]
fn every_file_naming_the_record_is_in_the_recipe() {
    let named = named_paths(&recipe());
    let missing: Vec<String> = source_files()
        .into_iter()
        .filter(|f| names_the_record(&read(&repo().join(f))))
        .filter(|f| !named.contains(f))
        .collect();
    assert!(
        missing.is_empty(),
        "these files name the record ({RECORD_NAMES:?}) but docs/recipes.md's \"Change the record \
         layout\" does not list them (to edit, or following the table):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_file_the_recipe_names_exists() {
    let gone: Vec<String> = named_paths(&recipe())
        .into_iter()
        .filter(|f| !repo().join(f).exists())
        .collect();
    assert!(
        gone.is_empty(),
        "docs/recipes.md names missing files: {gone:?}"
    );
}

/// The field names of `struct pg_record` in C text, in order.
fn c_struct_fields(text: &str) -> Vec<String> {
    let body = text
        .split("struct pg_record {")
        .nth(1)
        .and_then(|s| s.split("};").next())
        .expect("struct pg_record { ... };");
    body.lines()
        .filter_map(|l| l.split(';').next().filter(|_| l.contains(';')))
        .filter_map(|decl| decl.split_whitespace().last())
        .map(|name| name.split('[').next().unwrap_or(name).to_string())
        .collect()
}

#[test]
fn the_generated_struct_is_the_field_table() {
    let table: Vec<String> = manifest::RECORD_FIELDS
        .iter()
        .map(|f| f.name.to_string())
        .collect();
    let header = read(&repo().join("generated/probegen.bpf.h"));
    assert_eq!(c_struct_fields(&header), table, "generated/probegen.bpf.h");
    // the template renders the struct from the table: it names no field itself
    let template = read(&repo().join("codegen/templates/probegen.bpf.h"));
    let body = template
        .split("struct pg_record {")
        .nth(1)
        .and_then(|s| s.split("};").next())
        .expect("struct pg_record in the template");
    assert!(
        body.contains("{%- for") && !body.contains(';'),
        "the template's struct is a loop over the table:\n{body}"
    );
}

/// Code lines of `text` (comments dropped) where `n` stands as a number of its own.
fn lines_with_number(text: &str, n: usize) -> Vec<String> {
    let n = n.to_string();
    text.lines()
        .map(str::trim)
        .filter(|l| !(l.starts_with("//") || l.starts_with('*') || l.starts_with("/*")))
        .filter(|l| {
            l.match_indices(n.as_str()).any(|(at, _)| {
                let ok = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                ok(l[..at].chars().next_back()) && ok(l[at + n.len()..].chars().next())
            })
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn only_the_table_spells_the_record_size() {
    let mut spelled = Vec::new();
    for f in source_files() {
        let text = read(&repo().join(&f));
        if f == TABLE || !names_the_record(&text) {
            continue;
        }
        for l in lines_with_number(&text, manifest::RECORD_SIZE) {
            spelled.push(format!("{f}: {l}"));
        }
    }
    assert!(
        spelled.is_empty(),
        "the record's size ({}) written as a number; say RECORD_SIZE:\n{}",
        manifest::RECORD_SIZE,
        spelled.join("\n")
    );
}

#[test]
fn the_number_finder_sees_a_size_and_not_its_neighbours() {
    assert_eq!(
        lines_with_number("x.chunks_exact(96)\n// 96 bytes\ny = 960;", 96),
        ["x.chunks_exact(96)"]
    );
}

//! ClickHouse 26.9 in process: `chdb-core` from PyPI in the venv `scripts/install-chdb.sh`
//! makes (`$PROBEGEN_CHDB_PYTHON` names another python with it), driven by
//! `tests/common/chdb_questions.py`. Missing, a test fails naming the script; it never skips.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::fake_clickhouse::Request;

/// The python that has chdb 26.9: `$PROBEGEN_CHDB_PYTHON`, else the venv
/// `scripts/install-chdb.sh` makes.
pub(crate) fn chdb_python() -> PathBuf {
    if let Some(p) = std::env::var_os("PROBEGEN_CHDB_PYTHON").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("PROBEGEN_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/probegen")
        });
    let p = cache.join("chdb-venv/bin/python");
    assert!(
        p.is_file(),
        "{} not found: run `bash scripts/install-chdb.sh` (a venv with chdb-core 26.9 from \
         PyPI) or point $PROBEGEN_CHDB_PYTHON at a python that has it",
        p.display()
    );
    p
}

/// The DDL of `probegen schema --clickhouse ARGS`.
pub(crate) fn schema(args: &[&str]) -> String {
    let o = super::probegen(&[&["schema", "--clickhouse"], args].concat());
    assert!(o.status.success(), "{}", super::stderr(&o));
    super::stdout(&o)
}

/// Loads `inserts` (the fake's bodies) into chdb with `ddl`, runs every question; the
/// directory of its answers (`<question>.tsv`, `counts.tsv`, `parts.tsv`).
pub(crate) fn chdb_answers(dir: &Path, ddl: &str, inserts: &[Request]) -> PathBuf {
    chdb_run(dir, ddl, inserts, true)
}

/// [`chdb_answers`], the questions only when `questions`; `dir` is made for the run.
pub(crate) fn chdb_run(dir: &Path, ddl: &str, inserts: &[Request], questions: bool) -> PathBuf {
    let in_dir = dir.join("inserts");
    std::fs::create_dir_all(&in_dir).expect("mkdir inserts");
    for (i, r) in inserts.iter().enumerate() {
        let t = r.table.as_deref().expect("an insert");
        std::fs::write(in_dir.join(format!("{i:06}-{t}.jsonl")), &r.body).expect("write body");
    }
    let ddl_file = dir.join("ddl.sql");
    std::fs::write(&ddl_file, ddl).expect("ddl");
    let out = dir.join("answers");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(chdb_python())
        .arg(root.join("tests/common/chdb_questions.py"))
        .arg(dir.join("chdb"))
        .arg(&ddl_file)
        .arg(&in_dir)
        .arg(if questions {
            root.join("deploy/clickhouse")
        } else {
            PathBuf::from("-")
        })
        .arg(&out)
        .arg(super::fleet_scenario::JOB)
        .output()
        .expect("run chdb");
    assert!(
        o.status.success(),
        "chdb: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

pub(crate) fn tsv(p: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

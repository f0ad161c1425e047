//! With [`analyzer::use_mimalloc_for_trees`], each file's parser and tree live in a heap of
//! their own that is destroyed whole after the file. The facts of the real 6.12 tree must be
//! the ones the same load finds without it: this test runs itself again, in a child process
//! that never installs the allocator (tree-sitter then frees every tree node by node), and
//! compares the two. It is the only test of this binary: nothing may allocate through
//! tree-sitter before the install.

use std::path::PathBuf;
use std::process::Command;

use analyzer::{LoadOptions, SourceLayout, SourceTree};

/// Set in the child: where it writes its facts.
const CHILD_OUT: &str = "PROBEGEN_TREE_HEAP_CHILD_OUT";

/// The 6.12 tree of the cache; a test failure when it was not fetched.
fn kernel_6_12() -> PathBuf {
    let root = match std::env::var_os("PROBEGEN_CACHE").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").expect("neither PROBEGEN_CACHE nor HOME is set"))
                .join(".cache/probegen")
        }
    };
    let dir = root.join("linux-6.12");
    assert!(
        dir.join(".complete").is_file(),
        "{} is missing or incomplete: run `scripts/fetch-kernel.sh 6.12` first",
        dir.display()
    );
    dir
}

/// Every file's facts, one JSON line per file (path first), in path order.
fn facts_lines() -> Vec<String> {
    let layout = SourceLayout::new(
        "drivers/infiniband",
        &["include/rdma".to_string(), "include/uapi/rdma".to_string()],
    );
    let tree =
        SourceTree::load(&kernel_6_12(), &LoadOptions::new(layout)).expect("the 6.12 tree loads");
    tree.files
        .iter()
        .map(|f| serde_json::to_string(f).expect("facts serialize"))
        .collect()
}

#[test]
fn facts_from_a_heap_per_file_equal_facts_freed_node_by_node() {
    if let Some(out) = std::env::var_os(CHILD_OUT) {
        std::fs::write(out, facts_lines().join("\n")).expect("the child writes its facts");
        return;
    }
    // SAFETY: the first tree-sitter allocation of this process comes after this (the only
    // test of the binary).
    unsafe { analyzer::use_mimalloc_for_trees() };
    let with_heaps = facts_lines();
    assert!(with_heaps.len() > 400, "{} files", with_heaps.len());
    let out = std::env::temp_dir().join(format!("probegen-tree-heap-{}.jsonl", std::process::id()));
    let status = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "facts_from_a_heap_per_file_equal_facts_freed_node_by_node",
            "--test-threads=1",
        ])
        .env(CHILD_OUT, &out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the child runs");
    assert!(status.success(), "the child failed: {status}");
    let without = std::fs::read_to_string(&out).expect("the child's facts");
    let _ = std::fs::remove_file(&out);
    let without: Vec<&str> = without.split('\n').collect();
    assert_eq!(with_heaps.len(), without.len(), "file counts differ");
    for (a, b) in with_heaps.iter().zip(&without) {
        assert!(a == b, "facts differ: {}", a.get(..120).unwrap_or(a));
    }
}

//! The vendored C grammar (third_party/tree-sitter-c) is the crates.io release plus the two
//! documented changes in its `parser.h` (PROBEGEN.md there): a re-vendoring or an edit that
//! goes further fails here.

use sha2::{Digest, Sha256};

const GRAMMAR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../third_party/tree-sitter-c/src"
);
/// sha256 of tree-sitter-c 0.24.2's `src/parser.c`.
const UPSTREAM_PARSER_C: &str = "f2883ff9b21f4a5bd5553c1b10366c418947d17a7bc6bf256124a7542f079dd2";
/// sha256 of tree-sitter-c 0.24.2's `src/tree_sitter/parser.h`.
const UPSTREAM_PARSER_H: &str = "180b893c8734778fd32f372dfbc27bd6ad1cd2221f26150b31256ff6716320d2";

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn read(rel: &str) -> Vec<u8> {
    let path = format!("{GRAMMAR}/{rel}");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn parser_c_is_the_release_file() {
    assert_eq!(sha256(&read("parser.c")), UPSTREAM_PARSER_C);
}

/// The release's `ADVANCE_MAP`, which the second change replaces.
const UPSTREAM_ADVANCE_MAP: &str =
    "#define ADVANCE_MAP(...)                                              \\
  {                                                                   \\
    static const uint16_t map[] = { __VA_ARGS__ };                    \\
    for (uint32_t i = 0; i < sizeof(map) / sizeof(map[0]); i += 2) {  \\
      if (map[i] == lookahead) {                                      \\
        state = map[i + 1];                                           \\
        goto next_state;                                              \\
      }                                                               \\
    }                                                                 \\
  }
";

/// `text` with the part from `start` up to (not including) `end` replaced by `with`.
fn splice(text: &str, start: &str, end: &str, with: &str) -> String {
    let a = text
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} in parser.h"));
    let b = text[a..]
        .find(end)
        .map(|e| a + e)
        .unwrap_or_else(|| panic!("{end:?} after {start:?} in parser.h"));
    format!("{}{with}{}", &text[..a], &text[b..])
}

#[test]
fn parser_h_is_the_release_file_plus_the_probegen_blocks() {
    let patched = String::from_utf8(read("tree_sitter/parser.h")).expect("parser.h is UTF-8");
    assert!(patched.contains("if (lookahead < 128)"));
    assert!(patched.contains("switch (lookahead) {"));
    let set_contains = splice(&patched, "  // probegen:", "  uint32_t index = 0;", "");
    let upstream = splice(
        &set_contains,
        "// probegen: ADVANCE_MAP",
        "\n#define SKIP(",
        UPSTREAM_ADVANCE_MAP,
    );
    assert_eq!(sha256(upstream.as_bytes()), UPSTREAM_PARSER_H);
}

//! The manifest's YAML without an emitter call per scalar: the same bytes as
//! `serde_yaml::to_string`, written directly for the shapes a manifest has.
//!
//! Why: serde_yaml passes every scalar through libyaml's emitter (an analysis of the string, a
//! trial parse of it as a number or a boolean, the write byte by byte): some 3,400 instructions
//! each, and a four-vendor set's manifests hold about 100,000 scalars, the largest single cost
//! of rendering a set after its pictures. Here the document is first made a `serde_yaml::Value`
//! (serde_yaml's own serializer, so the values are exactly what it would emit), then written in
//! libyaml's block style. A string that is a plain word (`[A-Za-z_][A-Za-z0-9_./-]*`, not one of
//! YAML's null or boolean words) is written as it is; any other string is rendered once by
//! serde_yaml itself and that text reused for each of its occurrences. Whatever this writer
//! does not reproduce (a tag, a float, a key that is not a plain word, a string that serde_yaml
//! writes over several lines) makes [`block_yaml`] return `None`, and the caller emits with
//! serde_yaml. The tests compare both on every checked-in manifest and on generated documents.

use std::collections::HashMap;

use serde_yaml::Value;

/// `value` as `serde_yaml::to_string(value)` writes it, or `None` where this writer does not
/// reproduce serde_yaml (the caller then uses it).
pub(crate) fn block_yaml(value: &Value) -> Option<String> {
    let mut w = Writer {
        out: String::with_capacity(1 << 16),
        quoted: HashMap::new(),
    };
    w.node(value, 0, false)?;
    Some(w.out)
}

struct Writer<'v> {
    out: String,
    /// serde_yaml's rendering of each string that is not a plain word, by its text.
    quoted: HashMap<&'v str, String>,
}

impl<'v> Writer<'v> {
    /// `v` at `indent`; `inline`: the current line already holds a `- ` that this node's first
    /// line continues.
    fn node(&mut self, v: &'v Value, indent: usize, inline: bool) -> Option<()> {
        match v {
            Value::Mapping(m) if !m.is_empty() => {
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 || !inline {
                        self.indent(indent);
                    }
                    let Value::String(k) = k else {
                        self.scalar_key(k)?;
                        self.value(v, indent)?;
                        continue;
                    };
                    if !is_plain_word(k) {
                        return None;
                    }
                    self.out.push_str(k);
                    self.value(v, indent)?;
                }
                Some(())
            }
            Value::Sequence(s) if !s.is_empty() => {
                for (i, item) in s.iter().enumerate() {
                    if i > 0 || !inline {
                        self.indent(indent);
                    }
                    self.out.push_str("- ");
                    if is_collection(item) {
                        self.node(item, indent + 2, true)?;
                    } else {
                        self.scalar(item)?;
                        self.out.push('\n');
                    }
                }
                Some(())
            }
            _ => {
                self.scalar(v)?;
                self.out.push('\n');
                Some(())
            }
        }
    }

    /// The rest of a mapping entry after its key at `indent`: `: scalar`, or the collection on
    /// the next lines (a mapping indented, a sequence at the key's column, as libyaml does).
    fn value(&mut self, v: &'v Value, indent: usize) -> Option<()> {
        match v {
            Value::Mapping(m) if !m.is_empty() => {
                self.out.push_str(":\n");
                self.node(v, indent + 2, false)
            }
            Value::Sequence(s) if !s.is_empty() => {
                self.out.push_str(":\n");
                self.node(v, indent, false)
            }
            _ => {
                self.out.push_str(": ");
                self.scalar(v)?;
                self.out.push('\n');
                Some(())
            }
        }
    }

    /// A key that is not a string: a number only (a boolean or null key is left to serde_yaml).
    fn scalar_key(&mut self, k: &'v Value) -> Option<()> {
        match k {
            Value::Number(_) => self.scalar(k),
            _ => None,
        }
    }

    fn scalar(&mut self, v: &'v Value) -> Option<()> {
        match v {
            Value::Null => self.out.push_str("null"),
            Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) if n.is_u64() || n.is_i64() => {
                use std::fmt::Write as _;
                let _ = write!(self.out, "{n}");
            }
            Value::String(s) if is_plain_word(s) => self.out.push_str(s),
            Value::String(s) => {
                let line = match self.quoted.entry(s.as_str()) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        let text = serde_yaml::to_string(s).ok()?;
                        // One line and its newline; a literal block (`|-` and indented lines)
                        // is indented by its context, left to serde_yaml.
                        let line = text.strip_suffix('\n').filter(|l| !l.contains('\n'))?;
                        e.insert(line.to_string())
                    }
                };
                self.out.push_str(line);
            }
            Value::Mapping(m) if m.is_empty() => self.out.push_str("{}"),
            Value::Sequence(s) if s.is_empty() => self.out.push_str("[]"),
            _ => return None,
        }
        Some(())
    }

    fn indent(&mut self, n: usize) {
        self.out.extend(std::iter::repeat_n(' ', n));
    }
}

fn is_collection(v: &Value) -> bool {
    match v {
        Value::Mapping(m) => !m.is_empty(),
        Value::Sequence(s) => !s.is_empty(),
        _ => false,
    }
}

/// A string libyaml writes plain and serde_yaml reads back as the same string: a letter or `_`
/// first (no indicator, no number), then letters, digits, `_`, `.`, `/`, `-` (no `: `, ` #`,
/// space or quote), and not one of YAML's null or boolean words in any case (serde_yaml quotes
/// those it would read as null or a boolean; the ones it would not are left to it too).
fn is_plain_word(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(first) = b.first() else {
        return false;
    };
    (first.is_ascii_alphabetic() || *first == b'_')
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'/' | b'-'))
        && !(b.len() <= 5
            && ["null", "true", "false", "yes", "no", "on", "off", "y", "n"]
                .iter()
                .any(|w| w.eq_ignore_ascii_case(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(v: &Value) {
        let want = serde_yaml::to_string(v).unwrap();
        if let Some(got) = block_yaml(v) {
            assert_eq!(got, want, "block_yaml differs from serde_yaml on {v:?}");
        }
    }

    /// Strings on each side of the plain-word test, and the ones libyaml quotes or escapes.
    const STRINGS: &[&str] = &[
        "",
        "a",
        "ib_core",
        "drivers/infiniband/core/cq.c",
        "not-focus",
        "null",
        "Null",
        "NULL",
        "~",
        "true",
        "True",
        "FALSE",
        "yes",
        "no",
        "on",
        "off",
        "y",
        "n",
        "1",
        "0x10",
        "1.5",
        "1e3",
        "-1",
        ".inf",
        "-.inf",
        ".nan",
        "inf",
        "nan",
        "007",
        "1_000",
        "-x",
        "- x",
        "a: b",
        "a:b",
        "a #b",
        "#a",
        "a#b",
        " a",
        "a ",
        "'a'",
        "\"a\"",
        "a'b",
        "a\"b",
        "a\\b",
        "`a`",
        "a, b",
        "[a]",
        "{a}",
        "&a",
        "*a",
        "!a",
        "|a",
        ">a",
        "%a",
        "@a",
        "?a",
        "? a",
        ":a",
        "a\tb",
        "é",
        "naïve",
        "a\u{7f}b",
        "a\u{85}b",
        "a\nb",
        "a\n",
        "\n",
        "a\rb",
        "x_y.z/w-v",
        "_",
        "__x",
        "2024-01-01",
        "12:30",
        "0o7",
        "+1",
        "+.inf",
        "a--",
        "a..",
        "a//",
    ];

    /// Strings on each side of the plain-word test: serde_yaml's own text for each, in every
    /// position (a value, a sequence item, a nested item).
    #[test]
    fn every_kind_of_string_as_serde_yaml_writes_it() {
        for s in STRINGS {
            let v = Value::String(s.to_string());
            same(&v);
            let mut m = serde_yaml::Mapping::new();
            m.insert(Value::String("key".into()), v.clone());
            m.insert(
                Value::String("list".into()),
                Value::Sequence(vec![v.clone(), Value::Sequence(vec![v.clone(), v.clone()])]),
            );
            same(&Value::Mapping(m));
        }
    }

    /// Random documents of mappings, sequences (empty, nested, in mappings and in sequences)
    /// and scalars: the writer either declines or writes serde_yaml's bytes; it must not
    /// decline the shapes a manifest has.
    #[test]
    fn random_documents_as_serde_yaml_writes_them() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % m
        };
        let words = [
            "a",
            "ib_uverbs",
            "x.c",
            "a b",
            "true",
            "1",
            "",
            "a: b",
            "k-v",
        ];
        fn build(next: &mut dyn FnMut(u64) -> u64, words: &[&str], depth: u32) -> Value {
            match if depth == 0 { 3 + next(4) } else { next(7) } {
                0 | 1 => {
                    let mut m = serde_yaml::Mapping::new();
                    for i in 0..next(4) {
                        m.insert(
                            Value::String(format!("k{i}")),
                            build(next, words, depth.saturating_sub(1)),
                        );
                    }
                    Value::Mapping(m)
                }
                2 => Value::Sequence(
                    (0..next(4))
                        .map(|_| build(next, words, depth.saturating_sub(1)))
                        .collect(),
                ),
                3 => Value::String(words[next(words.len() as u64) as usize].to_string()),
                4 => Value::Number(next(100_000).into()),
                5 => Value::Bool(next(2) == 1),
                _ => Value::Null,
            }
        }
        let mut written = 0;
        for _ in 0..2000 {
            let v = build(&mut next, &words, 4);
            same(&v);
            written += usize::from(block_yaml(&v).is_some());
        }
        assert!(
            written > 1900,
            "the writer declined {} of 2000 documents",
            2000 - written
        );
    }

    #[test]
    fn plain_words() {
        assert!(is_plain_word("drivers/infiniband/hw/mlx5/qp.c"));
        assert!(is_plain_word("read-only"));
        for s in ["", "1a", "-a", "a b", "a:", "True", "off", ".a"] {
            assert!(!is_plain_word(s), "{s:?}");
        }
    }
}

#[cfg(test)]
mod checked_in {
    use super::*;

    /// Every manifest checked in under `generated/`: written by this writer (not declined) and
    /// byte-identical to serde_yaml's text of the same manifest.
    #[test]
    fn checked_in_manifests_as_serde_yaml_writes_them() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../generated");
        let mut found = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.file_name().is_some_and(|n| n == "manifest.yaml") {
                    found.push(p);
                }
            }
        }
        assert!(
            found.len() >= 20,
            "{} manifests under {}",
            found.len(),
            root.display()
        );
        for p in found {
            let text = std::fs::read_to_string(&p).unwrap();
            let m: crate::Manifest = serde_yaml::from_str(&text).unwrap();
            let value = serde_yaml::to_value(&m).unwrap();
            let got = block_yaml(&value).unwrap_or_else(|| panic!("declined {}", p.display()));
            assert_eq!(got, serde_yaml::to_string(&m).unwrap(), "{}", p.display());
            assert_eq!(got, text, "{} is not what it reads back as", p.display());
        }
    }
}

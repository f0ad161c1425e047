//! Bounded reads of the text inputs (rules, manifests, failure logs) and the checks every
//! text input gets before it is parsed (a byte-order mark, flow-collection nesting in YAML).
//! Each limit is far above what a real input uses and far below what exhausts the stack or the
//! memory, and breaking one is an error naming `file:line`, never a crash or a silent cut.
//!
//! Here rather than in the analyzer because the runtime reads manifests too and must not
//! depend on the C front end; `analyzer::limits` re-exports it.

use std::io::Read;
use std::path::Path;

/// Largest rules file read: the built-in one is 7 KB.
pub const MAX_RULES_BYTES: u64 = 1 << 20;
/// Largest manifest read: the 6.12 mlx5 manifest is about 1 MB.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;
/// Largest failure log (`coverage --failures`) read.
pub const MAX_CSV_BYTES: u64 = 256 << 20;
/// Deepest `[`/`{` nesting accepted in a YAML input: the manifest and the rules nest flow
/// collections at most 2 deep. libyaml is quadratic in deeply nested flow collections (a
/// 200 KB file of `[` took 19 s to reject), so they are refused before parsing.
pub const MAX_YAML_FLOW_DEPTH: usize = 32;

/// Why a text input is refused before it is parsed; each displays as one line naming
/// `file[:line[:column]]` and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file cannot be opened or read.
    #[error("{origin}: {source}")]
    Read {
        origin: String,
        source: std::io::Error,
    },
    /// Longer than the limit for its kind.
    #[error("{origin}: longer than {limit} bytes: expected {what}")]
    TooLong {
        origin: String,
        limit: u64,
        what: String,
    },
    /// Not UTF-8 from `line` on.
    #[error("{origin}:{line}: not valid UTF-8: expected {what}")]
    NotUtf8 {
        origin: String,
        line: usize,
        what: String,
    },
    /// Starts with a byte-order mark.
    #[error("{origin}:1: starts with a UTF-8 byte-order mark: expected {what} without a BOM")]
    ByteOrderMark { origin: String, what: String },
    /// YAML flow collections nested deeper than [`MAX_YAML_FLOW_DEPTH`].
    #[error(
        "{origin}:{line}:{column}: `{bracket}` nested deeper than {MAX_YAML_FLOW_DEPTH} levels: \
         expected YAML nested at most {MAX_YAML_FLOW_DEPTH} deep"
    )]
    TooDeep {
        origin: String,
        line: usize,
        column: usize,
        bracket: char,
    },
}

/// The line as a message, for callers whose errors are text.
impl From<InputError> for String {
    fn from(e: InputError) -> Self {
        e.to_string()
    }
}

/// Read at most `limit` bytes of `path`; a longer file is an error naming the limit (a
/// manifest path given as `/dev/zero` must not exhaust the memory).
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, InputError> {
    let origin = || path.display().to_string();
    let f = std::fs::File::open(path).map_err(|source| InputError::Read {
        origin: origin(),
        source,
    })?;
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| InputError::Read {
            origin: origin(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooLong {
            origin: origin(),
            limit,
            what: what.to_string(),
        });
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text, with [`check_text`] applied.
pub fn read_text(path: &Path, limit: u64, what: &str) -> Result<String, InputError> {
    let bytes = read_bounded(path, limit, what)?;
    let origin = path.display().to_string();
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let b = e.as_bytes();
            let line = b[..valid].iter().filter(|c| **c == b'\n').count() + 1;
            return Err(InputError::NotUtf8 {
                origin,
                line,
                what: what.to_string(),
            });
        }
    };
    check_text(&text, &origin, what)?;
    Ok(text)
}

/// Refuse a byte-order mark by name (serde would report the first key as missing).
pub fn check_text(text: &str, origin: &str, what: &str) -> Result<(), InputError> {
    if text.starts_with('\u{feff}') {
        return Err(InputError::ByteOrderMark {
            origin: origin.to_string(),
            what: what.to_string(),
        });
    }
    Ok(())
}

/// Refuse YAML whose flow collections (`[`, `{`) nest deeper than [`MAX_YAML_FLOW_DEPTH`],
/// naming the line and column where the limit is crossed. Quoted scalars and comments are
/// skipped, so brackets inside strings do not count.
pub fn check_yaml_nesting(text: &str, origin: &str) -> Result<(), InputError> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, l) in text.lines().enumerate() {
        let mut prev = ' ';
        let mut chars = l.char_indices().peekable();
        while let Some((col, c)) = chars.next() {
            match quote {
                Some('"') if c == '\\' => {
                    chars.next();
                }
                Some(q) if c == q => {
                    // `''` inside a single-quoted scalar is an escaped quote.
                    if q == '\'' && chars.peek().map(|p| p.1) == Some('\'') {
                        chars.next();
                    } else {
                        quote = None;
                    }
                }
                Some(_) => {}
                None => match c {
                    '#' if prev.is_whitespace() => break,
                    '"' | '\'' if prev.is_whitespace() || "[{,:".contains(prev) => quote = Some(c),
                    '[' | '{' => {
                        depth += 1;
                        if depth > MAX_YAML_FLOW_DEPTH {
                            return Err(InputError::TooDeep {
                                origin: origin.to_string(),
                                line: i + 1,
                                column: col + 1,
                                bracket: c,
                            });
                        }
                    }
                    ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                },
            }
            prev = c;
        }
        // A double-quoted scalar may span lines; a single-quoted one too. Plain scalars end.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_refused_with_its_position() {
        let deep = format!("a: {}\n", "[".repeat(200_000));
        let t0 = std::time::Instant::now();
        let e = check_yaml_nesting(&deep, "r.yaml")
            .expect_err("too deep")
            .to_string();
        assert!(
            e.starts_with("r.yaml:1:36: `[` nested deeper than 32"),
            "{e}"
        );
        assert!(t0.elapsed().as_secs() < 2);
        assert!(check_yaml_nesting("a: [b, {c: d}] # [[[[\nx: \"[[[[[\"\n", "ok").is_ok());
        let quoted = format!("a: '{}'\n", "[".repeat(100));
        assert!(check_yaml_nesting(&quoted, "q").is_ok());
    }

    #[test]
    fn bom_is_named() {
        let e = check_text("\u{feff}schema: x", "m.yaml", "a manifest")
            .expect_err("bom")
            .to_string();
        assert!(e.contains("byte-order mark"), "{e}");
    }
}

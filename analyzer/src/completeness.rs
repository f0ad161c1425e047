//! Completeness: what the analysis could not read or evaluate. A probe set built from a tree
//! with an unreadable file, a file of random bytes, an `#if` that never ends, a truncated
//! `.config` or missing module binaries is smaller than the real one, and nothing in the set
//! itself would say so. Every such gap becomes a [`Degradation`] naming the file (and line),
//! which `generate` and `check` print, write into the manifest and the report, and fail on
//! unless told to go on.
//!
//! The criteria are chosen so that the real Debian 6.12 and 6.1 trees with their own `.config`
//! and modules have none (tests/bad_input.rs checks both), while each damage the tests make
//! is caught.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::kbuild::BuildMap;
use crate::kconfig::{ConfigValue, KernelConfig};
use crate::layout::SourceLayout;
use crate::limits::MAX_NESTING;
use crate::model::FileFacts;
use crate::traceability::Binaries;

/// What kind of input was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DegradedKind {
    /// A source file or directory that could not be read.
    Unreadable,
    /// A source file with bytes that are not text (invalid UTF-8 or control characters).
    Undecodable,
    /// An `#if` without its `#endif`, or an `#else`/`#endif` without its `#if`.
    UnbalancedConditional,
    /// A file whose parse errors are far denser than any real kernel file's.
    ParseErrors,
    /// A `#if` expression or declaration that the analyzer refused to follow further.
    TooDeep,
    /// A Kconfig option whose dependencies hold but that the `.config` does not mention.
    ConfigMissing,
    /// A directory Kbuild descends into without a Makefile.
    MakefileMissing,
    /// A module the config builds, with probes, but without its `.ko` in `modules/`.
    ModuleMissing,
}

impl DegradedKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DegradedKind::Unreadable => "unreadable",
            DegradedKind::Undecodable => "undecodable",
            DegradedKind::UnbalancedConditional => "unbalanced-conditional",
            DegradedKind::ParseErrors => "parse-errors",
            DegradedKind::TooDeep => "too-deep",
            DegradedKind::ConfigMissing => "config-missing",
            DegradedKind::MakefileMissing => "makefile-missing",
            DegradedKind::ModuleMissing => "module-missing",
        }
    }

    pub const ALL: &'static [DegradedKind] = &[
        DegradedKind::Unreadable,
        DegradedKind::Undecodable,
        DegradedKind::UnbalancedConditional,
        DegradedKind::ParseErrors,
        DegradedKind::TooDeep,
        DegradedKind::ConfigMissing,
        DegradedKind::MakefileMissing,
        DegradedKind::ModuleMissing,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.as_str() == s)
    }
}

/// One gap in the input.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Degradation {
    pub kind: DegradedKind,
    /// The file that lost something (relative to the source root when inside it).
    pub file: String,
    /// 1-based line, 0 when the whole file is concerned.
    pub line: usize,
    /// What was lost and why.
    pub detail: String,
}

impl std::fmt::Display for Degradation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: ", self.file, self.line)?;
        } else {
            write!(f, "{}: ", self.file)?;
        }
        write!(f, "{}: {}", self.kind.as_str(), self.detail)
    }
}

/// One line for stderr: the count by kind and the first gap.
pub fn summary(list: &[Degradation]) -> String {
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for d in list {
        *by_kind.entry(d.kind.as_str()).or_default() += 1;
    }
    let kinds: Vec<String> = by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    match list.first() {
        Some(first) => format!(
            "degraded input: {} problem(s) ({}); first: {first}",
            list.len(),
            kinds.join(", ")
        ),
        None => "complete input".into(),
    }
}

/// When parse errors count as damage. Measured on the real Debian 6.12 and 6.1 trees (about
/// 1590 tree-sitter error nodes over ~660 files, all from kernel macros):
/// - lost definitions: a `{` alone at column 0 (kernel style for a function body) that starts
///   no definition the parser found. At most 3 in any real file (sa_query.c, sdma.h); deleting
///   one `}` from uverbs_cmd.c loses 54 (with only 12 errors per 1000 lines, which no density
///   threshold would catch). Damage at [`MAX_LOST_DEFINITIONS`] + 1.
/// - density: the tracepoint headers (TRACE_EVENT arguments are not C) reach 340 errors per
///   1000 lines (hfi1/trace_tid.h), ordinary files 55. A file above
///   [`MAX_PARSE_ERRORS_PER_KLINE`] (with at least [`MIN_PARSE_ERRORS`]) is damage: garbage
///   text that hides calls without losing a definition.
pub(crate) const MAX_LOST_DEFINITIONS: usize = 4;
pub(crate) const MAX_PARSE_ERRORS_PER_KLINE: usize = 500;
pub(crate) const MIN_PARSE_ERRORS: usize = 20;

/// The gaps one parsed file shows: undecodable bytes, unbalanced conditionals, parse-error
/// density. `bytes` is the file as read.
pub fn file_gaps(
    facts: &FileFacts,
    bytes: &[u8],
    preprocessed: &str,
    unterminated: &[usize],
    unbalanced: &[usize],
) -> Vec<Degradation> {
    let mut out = Vec::new();
    let path = &facts.path;
    if let Some((line, what)) = first_non_text(bytes) {
        out.push(Degradation {
            kind: DegradedKind::Undecodable,
            file: path.clone(),
            line,
            detail: format!("{what}: the file is not C source text"),
        });
    }
    if let Some(&l) = unterminated.first() {
        out.push(Degradation {
            kind: DegradedKind::UnbalancedConditional,
            file: path.clone(),
            line: l,
            detail: "`#if` without `#endif`: the rest of the file is evaluated under it".into(),
        });
    }
    if let Some(&l) = unbalanced.first() {
        out.push(Degradation {
            kind: DegradedKind::UnbalancedConditional,
            file: path.clone(),
            line: l,
            detail: "`#else`/`#endif` without `#if`".into(),
        });
    }
    if facts.parse_abandoned {
        out.push(Degradation {
            kind: DegradedKind::ParseErrors,
            file: path.clone(),
            line: 0,
            detail: "the parser gave up on the file (its time limit ran out): every definition in it is lost".into(),
        });
        return out;
    }
    let lost = lost_definitions(facts, preprocessed);
    let lines = crate::preproc::count_newlines(bytes).max(1);
    if lost.len() > MAX_LOST_DEFINITIONS {
        let first: Vec<String> = lost.iter().take(5).map(usize::to_string).collect();
        out.push(Degradation {
            kind: DegradedKind::ParseErrors,
            file: path.clone(),
            line: lost[0],
            detail: format!(
                "{} function bodies (lines {}{}) start no definition the parser found ({} parse errors): their functions are lost",
                lost.len(),
                first.join(", "),
                if lost.len() > 5 { ", ..." } else { "" },
                facts.parse_errors
            ),
        });
    } else if facts.parse_errors >= MIN_PARSE_ERRORS
        && facts.parse_errors * 1000 > MAX_PARSE_ERRORS_PER_KLINE * lines
    {
        out.push(Degradation {
            kind: DegradedKind::ParseErrors,
            file: path.clone(),
            line: 0,
            detail: format!(
                "{} parse errors in {lines} lines (more than {MAX_PARSE_ERRORS_PER_KLINE} per 1000 lines): calls in it are lost",
                facts.parse_errors
            ),
        });
    }
    out
}

/// Lines where kernel style opens a function body (a `{` alone at column 0, in the text the
/// config compiles) that start no definition the parser found: definitions lost to parse
/// errors.
fn lost_definitions(facts: &FileFacts, preprocessed: &str) -> Vec<usize> {
    // The definitions' first lines, sorted: a `{` line is a found body when one of them is at
    // most 8 lines before it (a binary search per `{` line, not a set of every nearby line).
    let mut starts: Vec<usize> = facts.functions.iter().map(|f| f.line).collect();
    starts.sort_unstable();
    let found = |line: usize| {
        let i = starts.partition_point(|&s| s < line.saturating_sub(8));
        starts.get(i).is_some_and(|&s| s <= line)
    };
    // The `{` lines (`str::lines`' lines equal to "{": a `\r` before the `\n` is dropped), from
    // the `{` bytes; the newlines before each counted once.
    let b = preprocessed.as_bytes();
    let mut out = Vec::new();
    let (mut counted, mut line) = (0usize, 1usize);
    for (p, _) in preprocessed.match_indices('{') {
        let alone = (p == 0 || b[p - 1] == b'\n')
            && match b.get(p + 1) {
                None | Some(b'\n') => true,
                Some(b'\r') => b.get(p + 2) == Some(&b'\n'),
                _ => false,
            };
        if !alone {
            continue;
        }
        line += crate::preproc::count_newlines(&b[counted..p]);
        counted = p;
        if !found(line) {
            out.push(line);
        }
    }
    out
}

/// The first byte that no kernel source file holds: invalid UTF-8, or a control character
/// other than tab, newline, carriage return, form feed, vertical tab. None of the 665 files
/// of the real 6.12 tree has one.
fn first_non_text(bytes: &[u8]) -> Option<(usize, String)> {
    let line_of = |at: usize| crate::preproc::count_newlines(&bytes[..at]) + 1;
    let invalid = std::str::from_utf8(bytes).err().map(|e| e.valid_up_to());
    let control = first_control(bytes);
    match (invalid, control) {
        (Some(i), Some(c)) if c < i => {
            Some((line_of(c), format!("control byte 0x{:02x}", bytes[c])))
        }
        (Some(i), _) => Some((line_of(i), "invalid UTF-8".into())),
        (None, Some(c)) => Some((line_of(c), format!("control byte 0x{:02x}", bytes[c]))),
        (None, None) => None,
    }
}

/// The first control byte other than tab, newline, carriage return, form feed, vertical tab.
/// By blocks of 64 with no early exit inside one, which the compiler turns into vector compares
/// (a byte-by-byte search with an exit per byte reads 1 byte a cycle; every file is read).
fn first_control(bytes: &[u8]) -> Option<usize> {
    let control =
        |b: u8| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) || b == 0x7f;
    let block = bytes
        .chunks(64)
        .position(|c| c.iter().fold(false, |any, &b| any | control(b)))?;
    let start = block * 64;
    bytes
        .get(start..)?
        .iter()
        .position(|&b| control(b))
        .map(|i| start + i)
}

/// Kbuild warnings that mean a lost directory.
pub(crate) fn kbuild_gaps(warnings: &[crate::Warning]) -> Vec<Degradation> {
    warnings
        .iter()
        .filter_map(|w| {
            let kind = if w.message.starts_with("no Makefile") {
                DegradedKind::MakefileMissing
            } else if w.message.starts_with("unreadable") || w.message.starts_with("skipped") {
                DegradedKind::Unreadable
            } else {
                return None;
            };
            Some(Degradation {
                kind,
                file: w.file.clone(),
                line: w.line,
                detail: w.message.clone(),
            })
        })
        .collect()
}

// ----------------------------------------------------------------------------- the .config

/// Options of the tree's RDMA Kconfig files that have a prompt and whose dependencies hold
/// under `config`, but that `config` does not mention. Kconfig writes every visible option with
/// a prompt, as `CONFIG_X=...` or `# CONFIG_X is not set`, so such an option means the file
/// was cut short or was generated for another tree. An empty `.config` is reported as such
/// (under it no dependency holds).
pub(crate) fn config_gaps(
    root: &Path,
    layout: &SourceLayout,
    config: &KernelConfig,
    config_name: &str,
) -> Vec<Degradation> {
    let mut out = Vec::new();
    if config.is_empty() {
        out.push(Degradation {
            kind: DegradedKind::ConfigMissing,
            file: config_name.to_string(),
            line: 0,
            detail: "sets no option at all: expected the kernel's .config".into(),
        });
        return out;
    }
    let mut reader = KconfigReader {
        root,
        layout,
        scope: Vec::new(),
        entries: Vec::new(),
        visited: BTreeSet::new(),
    };
    reader.read(&format!("{}/Kconfig", layout.kbuild_top), 0);
    for e in reader.entries {
        let name = format!("CONFIG_{}", e.name);
        if !e.prompt || config.mentions(&name) {
            continue;
        }
        let holds = e
            .deps
            .iter()
            .all(|d| eval_kconfig(d, config).is_some_and(|v| v > 0));
        if holds {
            out.push(Degradation {
                kind: DegradedKind::ConfigMissing,
                file: config_name.to_string(),
                line: 0,
                detail: format!(
                    "lacks {name} ({}:{}) although its dependencies hold: the file is cut short or not this tree's",
                    e.file, e.line
                ),
            });
        }
    }
    out
}

struct KconfigEntry {
    name: String,
    file: String,
    line: usize,
    prompt: bool,
    /// Every condition the option's visibility needs: enclosing `if`/`menu` blocks, its own
    /// `depends on` lines and the prompt's `if`.
    deps: Vec<String>,
}

/// Kconfig `source` nesting deeper than this is not followed: drivers/infiniband's Kconfig
/// sources one level of driver Kconfigs; the bound only stops a pathological chain.
const MAX_KCONFIG_DEPTH: usize = 16;

/// Reads Kconfig files into entries, following `source` lines within the scanned
/// directories.
struct KconfigReader<'r> {
    root: &'r Path,
    /// `source` lines are followed into the directories read, no further.
    layout: &'r SourceLayout,
    /// Conditions of the enclosing `if` and `menu` blocks.
    scope: Vec<String>,
    entries: Vec<KconfigEntry>,
    visited: BTreeSet<String>,
}

/// Where the reader stands within one Kconfig file.
struct KconfigFileState {
    rel: String,
    /// `source` nesting of this file.
    depth: usize,
    /// Block stack: each `if`/`menu` pushes the length of `scope` before it.
    blocks: Vec<usize>,
    /// The `config` entry whose attributes are being read.
    current: Option<KconfigEntry>,
    /// A `menu` whose `depends on` lines are still being read.
    menu_open: bool,
    in_help: bool,
    in_choice: usize,
}

impl KconfigReader<'_> {
    /// Read one Kconfig file (and the files it `source`s within the tree).
    fn read(&mut self, rel: &str, depth: usize) {
        if depth > MAX_KCONFIG_DEPTH || !self.visited.insert(rel.to_string()) {
            return;
        }
        let Ok(bytes) = std::fs::read(self.root.join(rel)) else {
            return;
        };
        let text = String::from_utf8_lossy(&bytes);
        let mut st = KconfigFileState {
            rel: rel.to_string(),
            depth,
            blocks: Vec::new(),
            current: None,
            menu_open: false,
            in_help: false,
            in_choice: 0,
        };
        for (i, raw) in text.lines().enumerate() {
            let indented = raw.starts_with([' ', '\t']);
            let line = raw.split(" #").next().unwrap_or("").trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if st.in_help {
                if indented {
                    continue;
                }
                st.in_help = false;
            }
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            self.statement(&mut st, i + 1, indented, word, rest.trim());
        }
        self.flush(&mut st);
    }

    /// The entry being read is complete.
    fn flush(&mut self, st: &mut KconfigFileState) {
        if let Some(e) = st.current.take() {
            self.entries.push(e);
        }
    }

    /// A `config NAME` entry under the enclosing blocks' conditions.
    fn entry(&self, st: &KconfigFileState, name: &str, line_no: usize) -> KconfigEntry {
        let mut deps = self.scope.clone();
        if st.in_choice > 0 {
            // Choice members are written by the choice's own rules: not checked.
            deps.push("n".into());
        }
        KconfigEntry {
            name: name.to_string(),
            file: st.rel.clone(),
            line: line_no,
            prompt: false,
            deps,
        }
    }

    /// One statement: `word rest` at `line_no`.
    fn statement(
        &mut self,
        st: &mut KconfigFileState,
        line_no: usize,
        indented: bool,
        word: &str,
        rest: &str,
    ) {
        match word {
            "config" | "menuconfig" => {
                self.flush(st);
                st.menu_open = false;
                st.current = Some(self.entry(st, rest, line_no));
            }
            "if" if !indented => {
                self.flush(st);
                st.menu_open = false;
                st.blocks.push(self.scope.len());
                self.scope.push(rest.to_string());
            }
            "endif" | "endmenu" => {
                self.flush(st);
                st.menu_open = false;
                if let Some(n) = st.blocks.pop() {
                    self.scope.truncate(n);
                }
            }
            "menu" => {
                self.flush(st);
                st.blocks.push(self.scope.len());
                st.menu_open = true;
            }
            "choice" => {
                self.flush(st);
                st.in_choice += 1;
            }
            "endchoice" => {
                self.flush(st);
                st.in_choice = st.in_choice.saturating_sub(1);
            }
            "comment" | "mainmenu" => {
                self.flush(st);
                st.menu_open = false;
            }
            "source" | "rsource" | "osource" => {
                self.flush(st);
                st.menu_open = false;
                self.source(st, word, rest);
            }
            "help" | "---help---" => st.in_help = true,
            "depends" => {
                let expr = rest.strip_prefix("on").unwrap_or(rest).trim().to_string();
                if let Some(e) = st.current.as_mut() {
                    e.deps.push(expr);
                } else if st.menu_open {
                    self.scope.push(expr);
                }
            }
            "bool" | "tristate" | "string" | "int" | "hex" | "prompt" => {
                if let Some(e) = st.current.as_mut() {
                    type_or_prompt(e, rest);
                }
            }
            _ => {}
        }
    }

    /// `source "path"` (relative to the tree, `rsource`: to this file), followed when it
    /// lies in a scanned directory.
    fn source(&mut self, st: &KconfigFileState, word: &str, rest: &str) {
        let path = rest.trim_matches('"');
        let path = if word == "rsource" {
            match st.rel.rsplit_once('/') {
                Some((dir, _)) => format!("{dir}/{path}"),
                None => path.to_string(),
            }
        } else {
            path.to_string()
        };
        if self.layout.contains(&path) {
            self.read(&path, st.depth + 1);
        }
    }
}

/// A type or `prompt` line: a quoted text makes the option visible (`bool "text" if EXPR`
/// only under EXPR).
fn type_or_prompt(e: &mut KconfigEntry, rest: &str) {
    if rest.starts_with('"') {
        e.prompt = true;
        if let Some(cond) = rest
            .rfind('"')
            .and_then(|q| rest[q + 1..].trim().strip_prefix("if "))
        {
            e.deps.push(cond.trim().to_string());
        }
    }
}

/// Tristate value of a Kconfig expression under `config`: 0 (n), 1 (m), 2 (y); `None` when it
/// cannot be evaluated (then no conclusion is drawn).
fn eval_kconfig(expr: &str, config: &KernelConfig) -> Option<u8> {
    let toks = kconfig_tokens(expr);
    let mut p = KconfigParser {
        toks: &toks,
        pos: 0,
        config,
        depth: 0,
    };
    let v = p.or()?;
    (p.pos == toks.len()).then_some(v)
}

fn kconfig_tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(s[st..i].to_string());
        } else if c == b'"' {
            let st = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
            i += 1;
            out.push(s[st..i.min(b.len())].to_string());
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            if ["&&", "||", "!=", "<=", ">="].contains(&two) {
                out.push(two.to_string());
                i += 2;
            } else {
                out.push((c as char).to_string());
                i += 1;
            }
        }
    }
    out
}

struct KconfigParser<'a> {
    toks: &'a [String],
    pos: usize,
    config: &'a KernelConfig,
    depth: usize,
}

impl KconfigParser<'_> {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(String::as_str)
    }

    fn or(&mut self) -> Option<u8> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return None;
        }
        let mut v = self.and()?;
        while self.peek() == Some("||") {
            self.pos += 1;
            v = v.max(self.and()?);
        }
        self.depth -= 1;
        Some(v)
    }

    fn and(&mut self) -> Option<u8> {
        let mut v = self.not()?;
        while self.peek() == Some("&&") {
            self.pos += 1;
            v = v.min(self.not()?);
        }
        Some(v)
    }

    fn not(&mut self) -> Option<u8> {
        let mut negations = 0usize;
        while self.peek() == Some("!") {
            self.pos += 1;
            negations += 1;
        }
        let v = self.comparison()?;
        Some(if negations % 2 == 1 { 2 - v } else { v })
    }

    fn comparison(&mut self) -> Option<u8> {
        if self.peek() == Some("(") {
            self.pos += 1;
            let v = self.or()?;
            if self.peek() != Some(")") {
                return None;
            }
            self.pos += 1;
            return Some(v);
        }
        let lhs = self.peek()?.to_string();
        self.pos += 1;
        match self.peek() {
            Some(op @ ("=" | "!=")) => {
                let op = op.to_string();
                self.pos += 1;
                let rhs = self.peek()?.to_string();
                self.pos += 1;
                let equal = self.string_value(&lhs) == self.string_value(&rhs);
                Some(if equal == (op == "=") { 2 } else { 0 })
            }
            Some("<" | ">" | "<=" | ">=") => None,
            _ => self.tristate(&lhs),
        }
    }

    fn string_value(&self, tok: &str) -> String {
        if let Some(s) = tok.strip_prefix('"') {
            return s.trim_end_matches('"').to_string();
        }
        if matches!(tok, "y" | "m" | "n") || tok.starts_with(|c: char| c.is_ascii_digit()) {
            return tok.to_string();
        }
        match self.config.get(&format!("CONFIG_{tok}")) {
            Some(ConfigValue::BuiltIn) => "y".into(),
            Some(ConfigValue::Module) => "m".into(),
            Some(ConfigValue::Other(v)) => v.clone(),
            None => "n".into(),
        }
    }

    fn tristate(&self, tok: &str) -> Option<u8> {
        match tok {
            "y" => return Some(2),
            "m" => return Some(1),
            "n" => return Some(0),
            _ => {}
        }
        if !tok.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return None;
        }
        Some(match self.config.get(&format!("CONFIG_{tok}")) {
            Some(ConfigValue::BuiltIn) => 2,
            Some(ConfigValue::Module) => 1,
            Some(ConfigValue::Other(_)) => 2,
            None => 0,
        })
    }
}

// ------------------------------------------------------------------------------ binaries

/// Modules that the config builds and that hold a probe (`modules` of the probes' files),
/// whose `.ko` is not among the binaries: their probes would all be `not-built`. Also a
/// `vmlinux` without a `modules/` directory. Nothing when the tree has no binaries at all (a
/// source-only tree: attach verdicts are then unchecked, which `generate` says).
pub fn module_gaps<'a>(
    root: &Path,
    build: &BuildMap,
    binaries: Option<&Binaries>,
    probe_files: impl Iterator<Item = &'a str>,
) -> Vec<Degradation> {
    let Some(b) = binaries else {
        if root.join("vmlinux").is_file() && !root.join("modules").is_dir() {
            return vec![Degradation {
                kind: DegradedKind::ModuleMissing,
                file: "modules".into(),
                line: 0,
                detail: "vmlinux is present but modules/ is not: no attach verdict can be checked"
                    .into(),
            }];
        }
        return Vec::new();
    };
    let mut wanted: BTreeMap<&str, usize> = BTreeMap::new();
    for f in probe_files {
        if let Some(m) = build.module_of(f).filter(|m| *m != "vmlinux") {
            *wanted.entry(m).or_default() += 1;
        }
    }
    wanted
        .into_iter()
        .filter(|(m, _)| b.module(m).is_none())
        .map(|(m, n)| Degradation {
            kind: DegradedKind::ModuleMissing,
            file: format!("modules/{m}.ko"),
            line: 0,
            detail: format!(
                "missing although the config builds {m}: the attach verdicts of its {n} probe(s) are unknown (`not-built`)"
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`first_control`] finds what a byte-by-byte search finds, at every offset in and
    /// across its 64-byte blocks, for every byte value.
    #[test]
    fn first_control_equals_the_plain_search() {
        let plain = |t: &[u8]| {
            t.iter().position(|&b| {
                (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) || b == 0x7f
            })
        };
        for len in [0usize, 1, 63, 64, 65, 200] {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut t = vec![b'a'; len];
                    t[at] = b;
                    if len > 2 && at + 1 < len {
                        t[len - 1] = 0x01;
                    }
                    assert_eq!(
                        first_control(&t),
                        plain(&t),
                        "len {len} at {at} byte {b:#x}"
                    );
                }
            }
        }
    }
    /// [`lost_definitions`]' scan of the `{` bytes finds the lines `str::lines` gives as "{".
    #[test]
    fn brace_lines_are_the_lines_of_one_brace() {
        let texts = [
            "{",
            "{\n",
            "{\r\n",
            "{\r",
            "a\n{\nb\n{ x\n {\n{{\n\r{\n{\r\r\n{",
            "\n\n{\n\n{\r\n",
            "x{\n{",
            "",
        ];
        for t in texts {
            let facts = FileFacts::default();
            let want: Vec<usize> = t
                .lines()
                .enumerate()
                .filter(|(_, l)| *l == "{")
                .map(|(i, _)| i + 1)
                .collect();
            assert_eq!(lost_definitions(&facts, t), want, "{t:?}");
        }
    }

    fn cfg(text: &str) -> KernelConfig {
        KernelConfig::parse(text)
    }

    #[test]
    fn kconfig_expressions() {
        let c = cfg("CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\nCONFIG_IPV6=y\n");
        let v = |e: &str| eval_kconfig(e, &c);
        assert_eq!(v("A && B"), Some(1));
        assert_eq!(v("A && C"), Some(0));
        assert_eq!(v("!C"), Some(2));
        assert_eq!(v("m || IPV6 != m"), Some(2));
        assert_eq!(v("(IPV6 || IPV6=n) && !(A=y && B=m)"), Some(0));
        assert_eq!(v("B != n"), Some(2));
        assert_eq!(v("X < 3"), None);
        assert_eq!(v(&"(".repeat(10_000)), None);
    }

    #[test]
    fn non_text_bytes() {
        assert_eq!(first_non_text(b"int x;\n\tok\x0c\n"), None);
        assert_eq!(first_non_text(b"a\nb\x00c").map(|x| x.0), Some(2));
        assert_eq!(first_non_text(b"a\n\nb\xffc").map(|x| x.0), Some(3));
    }
}

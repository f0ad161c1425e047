//! A small, line-preserving C preprocessor pass run before tree-sitter.
//!
//! It
//! 1. evaluates `#if/#ifdef/#ifndef/#elif/#else/#endif` against the kernel config and blanks the
//!    inactive branches (and the directive lines themselves), so that config stubs such as the
//!    `ib_security_modify_qp` inline in core_priv.h appear exactly when the kernel compiles them,
//!    and reports unbalanced conditionals and expressions nested deeper than the limit;
//! 2. blanks kernel annotations (`__user`, `__must_check`, `__printf(1, 2)`, ...) that the C
//!    grammar does not know and that otherwise derail tree-sitter;
//! 3. rewrites macro idioms tree-sitter cannot parse (`list_for_each_entry(...)` loops,
//!    `container_of(p, struct T, m)`) into C of the same length (2 and 3 in one scan:
//!    `blank_and_rewrite`);
//! 4. for headers, blanks type bodies (`blank_type_bodies`), whose fields are not calls.
//!
//! Blanking replaces bytes with spaces, never removes them, so every line number and byte
//! offset reported later is the one in the real file.

use std::borrow::Cow;

use rustc_hash::FxHashMap;

use crate::kconfig::{parse_c_int, KernelConfig};
use crate::limits::MAX_NESTING;

/// Annotations that are a single identifier.
const BARE_ANNOTATIONS: &[&str] = &[
    "__user",
    "__iomem",
    "__rcu",
    "__force",
    "__must_check",
    "__always_inline",
    "noinline",
    "noinline_for_stack",
    "__init",
    "__exit",
    "__cold",
    "__attribute_const__",
    "__maybe_unused",
    "__always_unused",
    "__percpu",
    "__bitwise",
    "__nocast",
    "__read_mostly",
    "__ro_after_init",
    "__initdata",
    "__initconst",
    "__exitdata",
    "__weak",
    "__noreturn",
    "__visible",
    "__packed",
    "__latent_entropy",
    "__randomize_layout",
    "__sched",
    "__pure",
    "__cacheline_aligned",
    "__cacheline_aligned_in_smp",
    "____cacheline_aligned",
    "____cacheline_aligned_in_smp",
    "__kernel",
    "__safe",
    "__private",
    "__flatten",
    "__ref",
    "__nonstring",
    "__cpuidle",
    "__deprecated",
];

/// Annotations followed by a parenthesised argument list.
const CALL_ANNOTATIONS: &[&str] = &[
    "__printf",
    "__scanf",
    "__aligned",
    "__acquires",
    "__releases",
    "__must_hold",
    "__counted_by",
    "__counted_by_le",
    "__counted_by_be",
    "__free",
    "__cleanup",
    "__section",
    "__alloc_size",
    "__guarded_by",
    "__assume_aligned",
    "__cond_acquires",
    "__cond_releases",
];

/// Result of preprocessing one file.
#[derive(Debug)]
pub struct Preprocessed {
    pub text: String,
    /// Directives whose condition we could not fully evaluate (1-based line, text); they are
    /// evaluated with unknown macros as 0, as cpp does.
    pub unknown_conditions: Vec<(usize, String)>,
    /// Unbalanced `#endif`/`#else` lines (1-based): reported as warnings.
    pub unbalanced: Vec<usize>,
    /// `#if` lines (1-based) still open at the end of the file: everything after the first one
    /// was evaluated under a condition that never ends.
    pub unterminated: Vec<usize>,
    /// The first directive whose expression nests deeper than [`MAX_NESTING`]: the file is
    /// refused (a deeper descent would overflow the stack).
    pub too_deep: Option<usize>,
}

#[derive(Clone, Copy)]
struct Frame {
    /// 1-based line of the opening `#if`.
    line: usize,
    /// Whether the enclosing region is active.
    parent_active: bool,
    /// Whether some branch of this `#if` chain was already taken.
    taken: bool,
    /// Whether the current branch is active.
    active: bool,
}

pub fn preprocess(src: &str, config: &KernelConfig) -> Preprocessed {
    let mut out: Vec<u8> = Vec::with_capacity(src.len());
    let mut cond = Conditionals::new(config);
    let mut span_lines: Vec<&str> = Vec::new();
    // From one directive line to the next, found from the `#` bytes: the lines between them
    // are all active or all inactive (only a directive changes that), so they are copied or
    // blanked at once, never looked at one by one.
    let mut done = 0;
    let mut line_no = 1;
    let mut search = 0;
    while let Some(hash) = src.get(search..).and_then(|rest| rest.find('#')) {
        let hash = search + hash;
        let line_start = src
            .get(..hash)
            .and_then(|h| h.rfind('\n'))
            .map_or(0, |p| p + 1);
        // A directive: the `#` is the first of its line but for white space (as
        // `str::trim_start` defines it).
        if !src
            .get(line_start..hash)
            .is_some_and(|p| p.trim_start().is_empty())
        {
            search = hash + 1;
            continue;
        }
        let between = src.get(done..line_start).unwrap_or("");
        copy_or_blank(&mut out, between, cond.active());
        line_no += count_newlines(between.as_bytes());
        let mut lines = src.get(line_start..).unwrap_or("").split_inclusive('\n');
        let Some(first) = lines.next() else {
            break;
        };
        let logical = logical_directive(first, &mut lines, &mut span_lines);
        let keep = cond.directive(&logical, line_no);
        for l in span_lines.iter().copied() {
            copy_or_blank(&mut out, l, keep);
        }
        line_no += span_lines.len();
        done = line_start + span_lines.iter().map(|l| l.len()).sum::<usize>();
        search = done;
    }
    copy_or_blank(&mut out, src.get(done..).unwrap_or(""), cond.active());
    finish(out, cond)
}

/// The text with its conditionals decided (`out`) rewritten for tree-sitter, and what the
/// conditionals found.
fn finish(mut out: Vec<u8>, cond: Conditionals<'_>) -> Preprocessed {
    blank_and_rewrite(&mut out);
    // Only whole lines were blanked, and only ASCII bytes replaced by ASCII bytes: still the
    // valid UTF-8 the source was.
    let mut text = String::from_utf8(out).unwrap_or_default();
    blank_tracepoint_definitions(&mut text);
    Preprocessed {
        text,
        unknown_conditions: cond.unknown_conditions,
        unbalanced: cond.unbalanced,
        unterminated: cond.stack.iter().map(|f| f.line).collect(),
        too_deep: cond.too_deep,
    }
}

/// `text` as it is (active), or blanked keeping its length and line ends (inactive).
fn copy_or_blank(out: &mut Vec<u8>, text: &str, active: bool) {
    if active {
        out.extend_from_slice(text.as_bytes());
    } else {
        // Keep byte length: a multi-byte char becomes as many spaces as it had bytes (none of
        // its bytes is ASCII).
        out.extend(text.bytes().map(|b| match b {
            b'\n' | b'\r' => b,
            _ => b' ',
        }));
    }
}

/// The `\n` bytes of `bytes`. Summed as bytes over blocks of 255 (no block can overflow one),
/// which the compiler turns into 32 compares and adds an instruction; counting into a `usize`
/// per byte unpacks each compare to 64-bit lanes, 4 bytes an instruction. Every file's lines
/// are counted more than once.
pub(crate) fn count_newlines(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|block| {
            usize::from(
                block
                    .iter()
                    .fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b'\n'))),
            )
        })
        .sum()
}

/// The directive whose first line is `first` with its backslash continuations (taken from
/// `rest`) joined into one logical line; `span` gets its physical lines.
fn logical_directive<'s>(
    first: &'s str,
    rest: &mut impl Iterator<Item = &'s str>,
    span: &mut Vec<&'s str>,
) -> Cow<'s, str> {
    span.clear();
    span.push(first);
    let first = first.trim_end_matches(['\n', '\r']);
    if !first.ends_with('\\') {
        // most directives are one line: the line itself
        return Cow::Borrowed(first);
    }
    let mut logical = first.to_string();
    while logical.ends_with('\\') {
        let Some(next) = rest.next() else {
            break;
        };
        logical.pop();
        logical.push(' ');
        logical.push_str(next.trim_end_matches(['\n', '\r']));
        span.push(next);
    }
    Cow::Owned(logical)
}

/// The `#if` nesting of one file as its directives are read in order, the file's own
/// `#define`s, and what could not be evaluated.
struct Conditionals<'a> {
    config: &'a KernelConfig,
    stack: Vec<Frame>,
    /// Each `#define`d name, with its value when that is an integer (all `#if` reads of it).
    local_defines: FxHashMap<String, Option<i64>>,
    unknown_conditions: Vec<(usize, String)>,
    unbalanced: Vec<usize>,
    too_deep: Option<usize>,
}

impl<'a> Conditionals<'a> {
    fn new(config: &'a KernelConfig) -> Self {
        Self {
            config,
            stack: Vec::new(),
            local_defines: FxHashMap::default(),
            unknown_conditions: Vec::new(),
            unbalanced: Vec::new(),
            too_deep: None,
        }
    }

    /// Whether the current region is compiled.
    fn active(&self) -> bool {
        self.stack.last().is_none_or(|f| f.active)
    }

    /// Applies one directive (1-based `line_no`); whether its lines are kept in the output
    /// (conditionals never are; `#define` and others are when active).
    fn directive(&mut self, logical: &str, line_no: usize) -> bool {
        let active = self.active();
        let body = strip_comments(logical.trim_start().trim_start_matches('#'));
        let (word, rest) = split_word(body.trim());
        match word {
            "if" | "ifdef" | "ifndef" => {
                let value = active && self.condition(word, rest, line_no);
                self.stack.push(Frame {
                    line: line_no,
                    parent_active: active,
                    taken: value,
                    active: value,
                });
                false
            }
            "elif" | "elifdef" | "elifndef" => {
                match self.stack.last().copied() {
                    Some(top) => {
                        let value =
                            top.parent_active && !top.taken && self.condition(word, rest, line_no);
                        if let Some(f) = self.stack.last_mut() {
                            f.active = value;
                            f.taken |= value;
                        }
                    }
                    None => self.unbalanced.push(line_no),
                }
                false
            }
            "else" => {
                match self.stack.last_mut() {
                    Some(f) => {
                        f.active = f.parent_active && !f.taken;
                        f.taken = true;
                    }
                    None => self.unbalanced.push(line_no),
                }
                false
            }
            "endif" => {
                if self.stack.pop().is_none() {
                    self.unbalanced.push(line_no);
                }
                false
            }
            "define" if active => {
                let (name, value) = split_word(rest);
                let name = name.split('(').next().unwrap_or(name);
                self.local_defines
                    .insert(name.to_string(), parse_c_int(value));
                true
            }
            "undef" if active => {
                self.local_defines.remove(split_word(rest).0);
                true
            }
            _ => active,
        }
    }

    /// The value of a conditional directive (`if`/`elif` expression, `[el]ifdef`, `[el]ifndef`).
    fn condition(&mut self, word: &str, rest: &str, line_no: usize) -> bool {
        match word {
            "if" | "elif" => self.eval(rest, line_no),
            "ifdef" | "elifdef" => is_defined(split_word(rest).0, self.config, &self.local_defines),
            _ => !is_defined(split_word(rest).0, self.config, &self.local_defines),
        }
    }

    fn eval(&mut self, expr: &str, line_no: usize) -> bool {
        let mut ev = Evaluator {
            config: self.config,
            defines: &self.local_defines,
            unknown: false,
            depth: 0,
            too_deep: false,
        };
        let v = ev.eval(expr) != 0;
        if ev.too_deep && self.too_deep.is_none() {
            self.too_deep = Some(line_no);
        }
        if ev.unknown {
            self.unknown_conditions.push((line_no, expr.to_string()));
        }
        v
    }
}

fn split_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    // by byte: no byte of a multi-byte character is ASCII, so the word ends where the
    // character search would end it
    let end = s
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || b == b'_'))
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

fn strip_comments(s: &str) -> Cow<'_, str> {
    // every comment opens with a `/`: most directives have none, and are returned as they are
    if memchr::memchr(b'/', s.as_bytes()).is_none() {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find("/*").or_else(|| rest.find("//")) {
        out.push_str(&rest[..pos]);
        if rest[pos..].starts_with("//") {
            return Cow::Owned(out);
        }
        match rest[pos + 2..].find("*/") {
            Some(end) => {
                out.push(' ');
                rest = &rest[pos + 2 + end + 2..];
            }
            None => return Cow::Owned(out),
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn is_defined(name: &str, config: &KernelConfig, local: &FxHashMap<String, Option<i64>>) -> bool {
    if name.starts_with("CONFIG_") {
        return config.defines(name);
    }
    local.contains_key(name) || PREDEFINED.contains(&name)
}

/// Macros the kernel build defines on the command line for every x86_64 object.
const PREDEFINED: &[&str] = &["__KERNEL__", "__x86_64__", "__LITTLE_ENDIAN", "__GNUC__"];

struct Evaluator<'a> {
    config: &'a KernelConfig,
    defines: &'a FxHashMap<String, Option<i64>>,
    unknown: bool,
    /// Current recursion depth of the descent.
    depth: usize,
    /// Set when the expression nests deeper than [`MAX_NESTING`]; evaluation stops.
    too_deep: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Ident(String),
    Op(&'static str),
}

const OPS: &[&str] = &[
    "||", "&&", "==", "!=", "<=", ">=", "<<", ">>", "(", ")", "!", "~", "<", ">", "+", "-", "*",
    "/", "%", "&", "|", "^", "?", ":", ",",
];

impl Evaluator<'_> {
    fn eval(&mut self, expr: &str) -> i64 {
        let toks = tokenize(expr);
        let mut pos = 0;
        let v = self.ternary(&toks, &mut pos);
        if pos < toks.len() {
            self.unknown = true;
        }
        v
    }

    /// Enter one level of the descent; false (and the rest of the expression skipped) past
    /// [`MAX_NESTING`] levels: `!!!!...`, `((((...` and `a ? b : c ? ...` recurse once per
    /// level and would otherwise overflow the stack.
    fn enter(&mut self, t: &[Tok], p: &mut usize) -> bool {
        if self.too_deep || self.depth >= MAX_NESTING {
            self.too_deep = true;
            *p = t.len();
            return false;
        }
        self.depth += 1;
        true
    }

    fn ternary(&mut self, t: &[Tok], p: &mut usize) -> i64 {
        if !self.enter(t, p) {
            return 0;
        }
        let v = self.ternary_inner(t, p);
        self.depth -= 1;
        v
    }

    fn binary(&mut self, t: &[Tok], p: &mut usize, min_prec: u8) -> i64 {
        if !self.enter(t, p) {
            return 0;
        }
        let v = self.binary_inner(t, p, min_prec);
        self.depth -= 1;
        v
    }

    fn unary(&mut self, t: &[Tok], p: &mut usize) -> i64 {
        if !self.enter(t, p) {
            return 0;
        }
        let v = self.unary_inner(t, p);
        self.depth -= 1;
        v
    }

    fn ternary_inner(&mut self, t: &[Tok], p: &mut usize) -> i64 {
        let c = self.binary(t, p, 0);
        if t.get(*p) == Some(&Tok::Op("?")) {
            *p += 1;
            let a = self.ternary(t, p);
            if t.get(*p) == Some(&Tok::Op(":")) {
                *p += 1;
            }
            let b = self.ternary(t, p);
            return if c != 0 { a } else { b };
        }
        c
    }

    fn binary_inner(&mut self, t: &[Tok], p: &mut usize, min_prec: u8) -> i64 {
        let mut lhs = self.unary(t, p);
        while let Some(Tok::Op(op)) = t.get(*p) {
            let prec = match *op {
                "||" => 1,
                "&&" => 2,
                "|" => 3,
                "^" => 4,
                "&" => 5,
                "==" | "!=" => 6,
                "<" | ">" | "<=" | ">=" => 7,
                "<<" | ">>" => 8,
                "+" | "-" => 9,
                "*" | "/" | "%" => 10,
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            *p += 1;
            let rhs = self.binary(t, p, prec + 1);
            lhs = match *op {
                "||" => ((lhs != 0) || (rhs != 0)) as i64,
                "&&" => ((lhs != 0) && (rhs != 0)) as i64,
                "|" => lhs | rhs,
                "^" => lhs ^ rhs,
                "&" => lhs & rhs,
                "==" => (lhs == rhs) as i64,
                "!=" => (lhs != rhs) as i64,
                "<" => (lhs < rhs) as i64,
                ">" => (lhs > rhs) as i64,
                "<=" => (lhs <= rhs) as i64,
                ">=" => (lhs >= rhs) as i64,
                "<<" => lhs.wrapping_shl(rhs as u32),
                ">>" => lhs.wrapping_shr(rhs as u32),
                "+" => lhs.wrapping_add(rhs),
                "-" => lhs.wrapping_sub(rhs),
                "*" => lhs.wrapping_mul(rhs),
                "/" => lhs.checked_div(rhs).unwrap_or(0),
                _ => lhs.checked_rem(rhs).unwrap_or(0),
            };
        }
        lhs
    }

    /// `defined NAME` or `defined(NAME)`, the operator already read.
    fn defined_operator(&mut self, t: &[Tok], p: &mut usize) -> i64 {
        let paren = t.get(*p) == Some(&Tok::Op("("));
        if paren {
            *p += 1;
        }
        let v = match t.get(*p) {
            Some(Tok::Ident(n)) => is_defined(n, self.config, self.defines) as i64,
            _ => {
                self.unknown = true;
                0
            }
        };
        *p += 1;
        if paren && t.get(*p) == Some(&Tok::Op(")")) {
            *p += 1;
        }
        v
    }

    /// `IS_ENABLED(CONFIG_X)` and its siblings, the `(` already read; skips to the matching `)`.
    fn config_helper(&mut self, name: &str, t: &[Tok], p: &mut usize) -> i64 {
        let arg = match t.get(*p) {
            Some(Tok::Ident(a)) => a.clone(),
            _ => String::new(),
        };
        let mut depth = 1;
        while let Some(tk) = t.get(*p) {
            *p += 1;
            match tk {
                Tok::Op("(") => depth += 1,
                Tok::Op(")") => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        let c = self.config;
        match name {
            "IS_ENABLED" | "IS_REACHABLE" => c.is_enabled(&arg) as i64,
            "IS_BUILTIN" => c.defines(&arg) as i64,
            "IS_MODULE" => c.defines(&format!("{arg}_MODULE")) as i64,
            _ => {
                self.unknown = true;
                0
            }
        }
    }

    /// A bare identifier: a config symbol, a local `#define` with a number, else 0 (unknown
    /// unless the kernel build predefines it).
    fn identifier(&mut self, name: &str) -> i64 {
        if name.starts_with("CONFIG_") {
            return self.config.int_value(name);
        }
        match self.defines.get(name).copied().flatten() {
            Some(v) => v,
            None => {
                if !PREDEFINED.contains(&name) {
                    self.unknown = true;
                }
                0
            }
        }
    }

    fn unary_inner(&mut self, t: &[Tok], p: &mut usize) -> i64 {
        let Some(tok) = t.get(*p).cloned() else {
            self.unknown = true;
            return 0;
        };
        *p += 1;
        match tok {
            Tok::Num(n) => n,
            Tok::Op("!") => (self.unary(t, p) == 0) as i64,
            Tok::Op("~") => !self.unary(t, p),
            Tok::Op("-") => self.unary(t, p).wrapping_neg(),
            Tok::Op("+") => self.unary(t, p),
            Tok::Op("(") => {
                let v = self.ternary(t, p);
                if t.get(*p) == Some(&Tok::Op(")")) {
                    *p += 1;
                }
                v
            }
            Tok::Ident(name) if name == "defined" => self.defined_operator(t, p),
            Tok::Ident(name) if t.get(*p) == Some(&Tok::Op("(")) => {
                // Function-like macro in a condition: the kconfig.h helpers.
                *p += 1;
                self.config_helper(&name, t, p)
            }
            Tok::Ident(name) => self.identifier(&name),
            Tok::Op(_) => {
                self.unknown = true;
                0
            }
        }
    }
}

fn tokenize(s: &str) -> Vec<Tok> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    'outer: while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            out.push(Tok::Num(parse_c_int(&s[start..i]).unwrap_or(0)));
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
            continue;
        }
        for op in OPS {
            if s[i..].starts_with(op) {
                out.push(Tok::Op(op));
                i += op.len();
                continue 'outer;
            }
        }
        i += 1;
    }
    out
}

/// Blank kernel annotations and rewrite the macro idioms tree-sitter cannot parse, in place
/// and in one scan of the words (same byte length):
/// - annotations (`__user`, `__printf(1, 2)`: [`BARE_ANNOTATIONS`], [`CALL_ANNOTATIONS`] with
///   their arguments closed on the same line) become spaces;
/// - loop macros at the start of a statement, `list_for_each_entry(pos, head, member) {`, become
///   `while              (pos, head, member) {`;
/// - a type passed as a macro argument after a comma, `container_of(p, struct ib_qp, dev)`,
///   loses its `struct`/`union` keyword (`container_of(p,        ib_qp, dev)`). Casts follow `(`,
///   never a comma, so they are untouched.
///
/// The idioms are decided on the text as it reads with every annotation blanked: what is
/// behind a word is already final, and the look-ahead past a word ([`skip_blanked`]) takes the
/// annotations after it for spaces.
fn blank_and_rewrite(bytes: &mut [u8]) {
    // Every annotation starts `__` or is `noinline*`, and every idiom holds `for_each` or is
    // `struct`/`union`: the words are found from those bytes, not by reading every word. The
    // annotations go first, so an idiom reads the text as it is with every annotation blanked
    // (what the word-by-word scan saw behind a word; [`skip_blanked`] still looks past those
    // after it).
    for_each_word(bytes, b"__", |bytes, start, end| {
        let end = annotation_end(bytes, start, end)?;
        bytes[start..end].fill(b' ');
        Some(end)
    });
    for_each_word(bytes, b"noinline", |bytes, start, end| {
        let end = annotation_end(bytes, start, end)?;
        bytes[start..end].fill(b' ');
        Some(end)
    });
    for_each_word(bytes, b"for_each", |bytes, start, end| {
        let at_statement_start = bytes[..start]
            .iter()
            .rev()
            .take_while(|&&b| b != b'\n')
            .all(|&b| b == b' ' || b == b'\t');
        rewrite_idiom(bytes, start, end, at_statement_start);
        None
    });
    for word in [b"struct".as_slice(), b"union"] {
        for_each_word(bytes, word, |bytes, start, end| {
            if end - start == word.len() {
                rewrite_idiom(bytes, start, end, false);
            }
            None
        });
    }
}

/// Call `visit(bytes, start, end)` on each word (`bytes[start..end]`: a run of identifier
/// bytes that starts with a letter or `_` after a byte that is none) that holds `needle`, at
/// its start when `needle` starts with `_` or a letter that must begin it (`__`, `noinline`,
/// `struct`), anywhere for `for_each`; once per word. `visit` returns where to go on when it
/// changed the text past the word.
fn for_each_word(
    bytes: &mut [u8],
    needle: &[u8],
    mut visit: impl FnMut(&mut [u8], usize, usize) -> Option<usize>,
) {
    let finder = memchr::memmem::Finder::new(needle);
    let anywhere = needle == b"for_each";
    let mut from = 0;
    while let Some(at) = bytes.get(from..).and_then(|rest| finder.find(rest)) {
        let at = from + at;
        from = at + 1;
        let start = if anywhere {
            bytes[..at]
                .iter()
                .rposition(|&b| !is_ident(b))
                .map_or(0, |p| p + 1)
        } else {
            at
        };
        if start > 0 && is_ident(bytes[start - 1]) {
            continue;
        }
        if !(bytes[start].is_ascii_alphabetic() || bytes[start] == b'_') {
            continue;
        }
        let end = word_end(bytes, start);
        from = visit(bytes, start, end).unwrap_or(end).max(from);
    }
}

/// The idiom rewrite of the word `bytes[start..end]` (not an annotation), if it is one.
fn rewrite_idiom(bytes: &mut [u8], start: usize, end: usize, at_statement_start: bool) {
    let n = bytes.len();
    let word = &bytes[start..end];
    if at_statement_start
        && word.len() >= 8
        && word.windows(8).any(|w| w == b"for_each")
        && bytes.get(skip_blanked(bytes, end, |b| b == b' ' || b == b'\t')) == Some(&b'(')
    {
        bytes[start..start + 5].copy_from_slice(b"while");
        bytes[start + 5..end].fill(b' ');
    } else if word == b"struct" || word == b"union" {
        let prev = bytes[..start]
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map(|p| bytes[p]);
        if prev == Some(b',') {
            // Followed by `ident` and then `,` or `)`: a type as a macro argument.
            let id_start = skip_blanked(bytes, end, |b| b.is_ascii_whitespace());
            let id_end = word_end(bytes, id_start);
            let j = skip_blanked(bytes, id_end, |b| b.is_ascii_whitespace());
            if id_end > id_start && j < n && (bytes[j] == b',' || bytes[j] == b')') {
                bytes[start..end].fill(b' ');
            }
        }
    }
}

fn is_ident(b: u8) -> bool {
    IDENT[usize::from(b)]
}

/// [`is_ident`] by byte, one load instead of three compares (every byte of a word is asked).
static IDENT: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    t
};

/// The end of the run of identifier bytes that starts at `i`.
fn word_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && is_ident(bytes[i]) {
        i += 1;
    }
    i
}

/// The end of the blanked range when the word `bytes[start..end]` is an annotation that is
/// blanked: a bare one, or a call one whose `(` follows (after spaces) and closes on the line.
fn annotation_end(bytes: &[u8], start: usize, end: usize) -> Option<usize> {
    let word = &bytes[start..end];
    if word.first() != Some(&b'_') && word != b"noinline" && word != b"noinline_for_stack" {
        return None;
    }
    let w = std::str::from_utf8(word).ok()?;
    if BARE_ANNOTATIONS.contains(&w) {
        return Some(end);
    }
    if !CALL_ANNOTATIONS.contains(&w) {
        return None;
    }
    let mut j = end;
    while bytes.get(j) == Some(&b' ') {
        j += 1;
    }
    if bytes.get(j) != Some(&b'(') {
        return None;
    }
    let mut depth = 0usize;
    for (k, &b) in bytes.iter().enumerate().skip(j) {
        match b {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k + 1);
                }
            }
            b'\n' => return None,
            _ => {}
        }
    }
    None
}

/// The first index at or after `j` (the end of a word, or what follows one) that holds neither
/// a `space` byte nor an annotation that [`blank_and_rewrite`] blanks when it gets there.
fn skip_blanked(bytes: &[u8], mut j: usize, space: impl Fn(u8) -> bool) -> usize {
    loop {
        while j < bytes.len() && space(bytes[j]) {
            j += 1;
        }
        let word_start = j < bytes.len()
            && (bytes[j].is_ascii_alphabetic() || bytes[j] == b'_')
            && !(j > 0 && is_ident(bytes[j - 1]));
        if word_start {
            if let Some(end) = annotation_end(bytes, j, word_end(bytes, j)) {
                j = end;
                continue;
            }
        }
        return j;
    }
}

/// The index after the comment, string or character literal (or, when `directives`, the
/// preprocessor line with its continuations) that starts at `i`; None when code starts there.
fn skip_non_code(bytes: &[u8], i: usize, directives: bool) -> Option<usize> {
    let n = bytes.len();
    match bytes[i] {
        b'/' if bytes.get(i + 1) == Some(&b'*') => Some(
            bytes[i + 2..]
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(n, |p| i + 2 + p + 2),
        ),
        b'/' if bytes.get(i + 1) == Some(&b'/') => Some(
            bytes[i..]
                .iter()
                .position(|b| *b == b'\n')
                .map_or(n, |p| i + p),
        ),
        q @ (b'"' | b'\'') => {
            let mut j = i + 1;
            while j < n && bytes[j] != q && bytes[j] != b'\n' {
                if bytes[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            Some(j + 1)
        }
        b'#' if directives => {
            let mut j = i;
            while j < n && bytes[j] != b'\n' {
                if bytes[j] == b'\\' && bytes.get(j + 1) == Some(&b'\n') {
                    j += 1;
                }
                j += 1;
            }
            Some(j)
        }
        _ => None,
    }
}

/// The kernel's tracepoint definition macros. Their arguments are the trace event DSL
/// (`TP_STRUCT__entry(__field(u32, qpn) ...)`, `TP_fast_assign(__entry->qpn = qp->qpn;)`), not C:
/// tree-sitter reads them as hundreds of errors (hfi1's trace_tid.h: 559) and slowly, and what it
/// finds there is never a definition, a call inside a function or an ops table.
const TRACEPOINT_DEFINERS: &[&[u8]] = &[
    b"TRACE_EVENT",
    b"TRACE_EVENT_CONDITION",
    b"TRACE_EVENT_FN",
    b"TRACE_EVENT_FN_COND",
    b"DECLARE_EVENT_CLASS",
    b"DEFINE_EVENT",
    b"DEFINE_EVENT_PRINT",
    b"DEFINE_EVENT_CONDITION",
    b"DEFINE_EVENT_FN",
    b"DECLARE_TRACE",
    b"TRACE_DEFINE_ENUM",
    b"TRACE_DEFINE_SIZEOF",
];

/// Blank every top-level invocation of a [`TRACEPOINT_DEFINERS`] macro, its arguments and its
/// `;` (newlines kept). Preprocessor lines are left as they are, so a `#define` that wraps one
/// of these macros is still a macro the graph sees.
fn blank_tracepoint_definitions(text: &mut String) {
    // The definers come from <linux/tracepoint.h>, which every trace header of the tree
    // includes itself; the other files (nearly all) are not scanned.
    if !text.contains("linux/tracepoint.h") {
        return;
    }
    let mut bytes = std::mem::take(text).into_bytes();
    let n = bytes.len();
    let mut depth = 0usize;
    let mut i = 0;
    while i < n {
        if let Some(next) = skip_non_code(&bytes, i, true) {
            i = next;
            continue;
        }
        match bytes[i] {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < n && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if depth == 0 && TRACEPOINT_DEFINERS.contains(&&bytes[start..i]) {
                    if let Some(end) = invocation_end(&bytes, i) {
                        blank_keeping_newlines(&mut bytes[start..end]);
                        i = end;
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Each blanked range starts at an identifier and ends after `)` or `;`: every byte inside
    // (a multi-byte character whole) became a space, so the text is still UTF-8.
    *text = String::from_utf8(bytes).unwrap_or_default();
}

/// Every byte of `range` but its newlines becomes a space, so line numbers stay put. `range`
/// must begin and end on character boundaries (then the text stays valid UTF-8).
fn blank_keeping_newlines(range: &mut [u8]) {
    for b in range {
        if *b != b'\n' {
            *b = b' ';
        }
    }
}

/// The index after the parenthesized arguments that follow `i` (whitespace allowed before the
/// `(`) and after the `;` that ends the statement, if any; None when no `(` follows or the
/// parentheses do not close.
fn invocation_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    let n = bytes.len();
    while i < n && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if bytes.get(i) != Some(&b'(') {
        return None;
    }
    let mut parens = 0usize;
    while i < n {
        if let Some(next) = skip_non_code(bytes, i, false) {
            i = next;
            continue;
        }
        match bytes[i] {
            b'(' => parens += 1,
            b')' => {
                parens -= 1;
                if parens == 0 {
                    let mut j = i + 1;
                    while j < n && matches!(bytes[j], b' ' | b'\t') {
                        j += 1;
                    }
                    return Some(if bytes.get(j) == Some(&b';') {
                        j + 1
                    } else {
                        i + 1
                    });
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The bytes [`blank_type_bodies`] stops at inside braces: braces, and the starts of comments,
/// literals and (`BODY_STOPS` only: not while blanking) directives.
const BODY_STOPS: [bool; 256] = byte_set(b"{}/\"'#");
const BLANKING_STOPS: [bool; 256] = byte_set(b"{}/\"'");

const fn byte_set(bytes: &[u8]) -> [bool; 256] {
    let mut set = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        set[bytes[i] as usize] = true;
        i += 1;
    }
    set
}

/// In a header, the bodies of top-level `struct`/`union`/`enum` definitions hold no calls the
/// graph needs, yet they are most of the bytes (mlx5_ifc.h: 300 KB of field layouts). Blank them
/// (newlines kept) so tree-sitter parses only what matters: inline functions and macros.
pub fn blank_type_bodies(text: &mut String) {
    blank_type_bodies_with(text, true);
}

/// [`blank_type_bodies`]; `skip_in_braces` false reads every byte inside braces too (the
/// loop before the skip, kept as the test's reference).
fn blank_type_bodies_with(text: &mut String, skip_in_braces: bool) {
    let mut bytes = std::mem::take(text).into_bytes();
    let n = bytes.len();
    let mut depth = 0usize;
    let mut i = 0;
    // Start of the body being blanked (index after `{`) and the depth it opened at.
    let mut blanking: Option<(usize, usize)> = None;
    let mut pending_type = false;
    while i < n {
        if depth > 0 && skip_in_braces {
            // Inside braces only braces, comments, literals and (when not blanking)
            // directives change anything: words and `;()=` count at the top level only.
            let stops = if blanking.is_none() {
                &BODY_STOPS
            } else {
                &BLANKING_STOPS
            };
            while i < n && !stops[usize::from(bytes[i])] {
                i += 1;
            }
            if i == n {
                break;
            }
        }
        let c = bytes[i];
        if let Some(next) = skip_non_code(&bytes, i, blanking.is_none()) {
            i = next;
            continue;
        }
        match c {
            b'{' => {
                if depth == 0 && pending_type && blanking.is_none() {
                    blanking = Some((i + 1, depth));
                }
                pending_type = false;
                depth += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                if let Some((start, d)) = blanking {
                    if depth == d {
                        blank_keeping_newlines(&mut bytes[start..i]);
                        blanking = None;
                    }
                }
            }
            b';' | b'(' | b')' | b'=' if depth == 0 => pending_type = false,
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < n && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if depth == 0 {
                    let w = &bytes[start..i];
                    if w == b"struct" || w == b"union" || w == b"enum" {
                        pending_type = true;
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Only ASCII bytes outside strings/comments were replaced by spaces.
    *text = String::from_utf8(bytes).unwrap_or_default();
}

/// The two passes [`blank_and_rewrite`] replaced, kept as its reference.
#[cfg(test)]
mod two_passes {
    use super::{BARE_ANNOTATIONS, CALL_ANNOTATIONS};

    /// Replace kernel annotations with spaces, in place (same byte length).
    pub(super) fn blank_annotations(text: &mut String) {
        // Work on bytes: annotations and parentheses are ASCII, so replacing ASCII bytes with
        // spaces keeps the string valid UTF-8.
        let mut bytes = std::mem::take(text).into_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if !(c.is_ascii_alphabetic() || c == b'_') {
                i += 1;
                continue;
            }
            let prev_ident =
                i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if prev_ident {
                continue;
            }
            let word = &bytes[start..i];
            if word.first() != Some(&b'_') && word != b"noinline" && word != b"noinline_for_stack" {
                continue;
            }
            let Ok(w) = std::str::from_utf8(word) else {
                continue;
            };
            if BARE_ANNOTATIONS.contains(&w) {
                bytes[start..i].fill(b' ');
            } else if CALL_ANNOTATIONS.contains(&w) {
                let mut j = i;
                while j < bytes.len() && bytes[j] == b' ' {
                    j += 1;
                }
                if bytes.get(j) == Some(&b'(') {
                    let mut depth = 0usize;
                    let mut k = j;
                    while k < bytes.len() {
                        match bytes[k] {
                            b'(' => depth += 1,
                            b')' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            b'\n' => break,
                            _ => {}
                        }
                        k += 1;
                    }
                    if bytes.get(k) == Some(&b')') {
                        bytes[start..=k].fill(b' ');
                        i = k + 1;
                    }
                }
            }
        }
        // Only ASCII bytes were replaced by ASCII spaces.
        *text = String::from_utf8(bytes).unwrap_or_default();
    }

    /// Two kernel macro idioms that are not C and cost tree-sitter most of its error recovery (and
    /// most of its time) are rewritten in place, same length, so the code around them parses:
    /// - loop macros at the start of a statement, `list_for_each_entry(pos, head, member) {`, become
    ///   `while              (pos, head, member) {`;
    /// - a type passed as a macro argument after a comma, `container_of(p, struct ib_qp, dev)`,
    ///   loses its `struct`/`union` keyword (`container_of(p,        ib_qp, dev)`). Casts follow `(`,
    ///   never a comma, so they are untouched.
    pub(super) fn rewrite_macro_idioms(text: &mut String) {
        let mut bytes = std::mem::take(text).into_bytes();
        let n = bytes.len();
        let mut i = 0;
        let mut line_start = true;
        while i < n {
            let c = bytes[i];
            if c == b'\n' {
                line_start = true;
                i += 1;
                continue;
            }
            if c == b' ' || c == b'\t' {
                i += 1;
                continue;
            }
            if !(c.is_ascii_alphabetic() || c == b'_') {
                line_start = false;
                i += 1;
                continue;
            }
            let prev_ident =
                i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
            let start = i;
            while i < n && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if prev_ident {
                line_start = false;
                continue;
            }
            let word = &bytes[start..i];
            let at_statement_start = line_start;
            line_start = false;
            let next_non_space = bytes[i..]
                .iter()
                .position(|b| *b != b' ' && *b != b'\t')
                .map(|p| i + p);
            if at_statement_start
                && word.len() >= 8
                && word.windows(8).any(|w| w == b"for_each")
                && next_non_space.is_some_and(|p| bytes[p] == b'(')
            {
                bytes[start..start + 5].copy_from_slice(b"while");
                bytes[start + 5..i].fill(b' ');
            } else if word == b"struct" || word == b"union" {
                let prev = bytes[..start]
                    .iter()
                    .rposition(|b| !b.is_ascii_whitespace())
                    .map(|p| bytes[p]);
                if prev == Some(b',') {
                    // Followed by `ident` and then `,` or `)`: a type as a macro argument.
                    let mut j = i;
                    while j < n && bytes[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    let id_start = j;
                    while j < n && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
                        j += 1;
                    }
                    while j < n && bytes[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if j > id_start && j < n && (bytes[j] == b',' || bytes[j] == b')') {
                        bytes[start..i].fill(b' ');
                    }
                }
            }
        }
        // Only ASCII bytes were replaced by ASCII bytes.
        *text = String::from_utf8(bytes).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kconfig::ConfigValue;

    fn cfg() -> KernelConfig {
        let mut c = KernelConfig::default();
        c.set("CONFIG_ON", ConfigValue::BuiltIn);
        c.set("CONFIG_MOD", ConfigValue::Module);
        c
    }

    #[test]
    fn branches_follow_the_config_and_keep_line_numbers() {
        let src = "a\n#if IS_ENABLED(CONFIG_MOD)\nb\n#else\nc\n#endif\n#ifdef CONFIG_OFF\nd\n#elif defined(CONFIG_ON) && !IS_BUILTIN(CONFIG_MOD)\ne\n#endif\n";
        let p = preprocess(src, &cfg());
        let kept: Vec<&str> = p.text.lines().map(str::trim).collect();
        assert_eq!(kept, ["a", "", "b", "", "", "", "", "", "", "e", ""]);
        assert_eq!(p.text.len(), src.len());
    }

    #[test]
    fn nested_inactive_regions_stay_inactive() {
        let src = "#if 0\n#if 1\nx\n#else\ny\n#endif\n#endif\nz\n";
        let p = preprocess(src, &cfg());
        assert!(!p.text.contains('x') && !p.text.contains('y'));
        assert!(p.text.contains('z'));
    }

    #[test]
    fn include_guards_and_local_defines() {
        let src = "#ifndef G_H\n#define G_H\n#define N 3\n#if N > 2\nyes\n#endif\n#endif\n";
        let p = preprocess(src, &cfg());
        assert!(p.text.contains("yes"));
    }

    /// 20,000 texts of up to `longest - 1` tokens drawn from `tokens` (a fixed LCG from `seed`:
    /// the same texts every run), the i-th of `i % longest` tokens.
    fn token_soup(
        tokens: &'static [&'static str],
        longest: usize,
        seed: u64,
    ) -> impl Iterator<Item = String> {
        let mut seed = seed;
        (0..20_000usize).map(move |case| {
            let mut src = String::new();
            for _ in 0..(case % longest) {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let k = usize::try_from(seed >> 33).unwrap_or(0) % tokens.len();
                src.push_str(tokens[k]);
            }
            src
        })
    }

    /// [`blank_and_rewrite`] against the two passes it replaced, on token soup built from what
    /// either pass reads (annotations next to idioms, on one line and across lines).
    #[test]
    fn one_scan_equals_the_two_passes() {
        const TOKENS: &[&str] = &[
            "struct",
            "union",
            ",",
            ")",
            "(",
            " ",
            "  ",
            "\t",
            "\n",
            "\r",
            "__user",
            "__rcu",
            "noinline",
            "__printf",
            "__aligned",
            "(8)",
            "list_for_each_entry",
            "for_each_x",
            "x",
            "ib_qp",
            "1",
            "_",
            "__",
            "a__user",
            "{",
            ";",
            "é",
            "__counted_by(n)",
            "__printf(1, (2))",
            "__free(kfree)",
            "__must_check",
            "0x__user",
        ];
        for src in token_soup(TOKENS, 24, 0x9e37_79b9_7f4a_7c15) {
            let mut two = src.clone();
            two_passes::blank_annotations(&mut two);
            two_passes::rewrite_macro_idioms(&mut two);
            let mut one = src.clone().into_bytes();
            blank_and_rewrite(&mut one);
            let one = String::from_utf8(one).unwrap_or_default();
            assert_eq!(one, two, "{src:?}");
        }
    }

    /// The line-by-line loop [`preprocess`] replaced (every line split off and asked whether it
    /// is a directive), the reference its directive-to-directive loop is checked against.
    fn line_by_line(src: &str, config: &KernelConfig) -> Preprocessed {
        let mut out: Vec<u8> = Vec::with_capacity(src.len());
        let mut cond = Conditionals::new(config);
        let mut lines = src.split_inclusive('\n');
        let mut line_no = 0;
        let mut span_lines: Vec<&str> = Vec::new();
        while let Some(first) = lines.next() {
            line_no += 1;
            if !first.trim_start().starts_with('#') {
                copy_or_blank(&mut out, first, cond.active());
                continue;
            }
            let logical = logical_directive(first, &mut lines, &mut span_lines);
            let keep = cond.directive(&logical, line_no);
            for l in span_lines.iter().copied() {
                copy_or_blank(&mut out, l, keep);
            }
            line_no += span_lines.len() - 1;
        }
        finish(out, cond)
    }

    /// [`preprocess`] against [`line_by_line`] on directive soup: nesting, continuations, `#`
    /// behind code, behind Unicode white space, at the end without a newline, `\r\n` lines.
    #[test]
    fn directive_to_directive_equals_line_by_line() {
        const TOKENS: &[&str] = &[
            "#if 0\n",
            "#if 1\n",
            "  #ifdef CONFIG_ON\n",
            "#ifndef CONFIG_MOD\n",
            "#elif defined(CONFIG_ON)\n",
            "#else\n",
            "#endif\n",
            "\t# endif\n",
            "#define N 3\n",
            "#if N > \\\n 2\n",
            "#if UNKNOWN\n",
            "x = 1;\n",
            "a # b\n",
            "\u{a0}#if 0\n",
            "\u{3000}#endif\n",
            "é\n",
            "\r\n",
            "#if 1\r\n",
            "\n",
            "__user int f(void);\n",
            "#",
            "y",
        ];
        for src in token_soup(TOKENS, 30, 0x2545_f491_4f6c_dd1d) {
            let (new, old) = (preprocess(&src, &cfg()), line_by_line(&src, &cfg()));
            assert_eq!(new.text, old.text, "{src:?}");
            assert_eq!(new.unknown_conditions, old.unknown_conditions, "{src:?}");
            assert_eq!(new.unbalanced, old.unbalanced, "{src:?}");
            assert_eq!(new.unterminated, old.unterminated, "{src:?}");
            assert_eq!(new.too_deep, old.too_deep, "{src:?}");
        }
    }

    #[test]
    fn newlines_are_counted_across_blocks() {
        for len in [0usize, 1, 254, 255, 256, 511, 600, 2000] {
            for every in [1usize, 2, 7, 300] {
                let t: Vec<u8> = (0..len)
                    .map(|i| if i % every == 0 { b'\n' } else { b'x' })
                    .collect();
                let plain = t.iter().filter(|&&b| b == b'\n').count();
                assert_eq!(count_newlines(&t), plain, "len {len} every {every}");
            }
        }
    }

    #[test]
    fn annotations_are_blanked_in_place() {
        let src = "static __printf(2, 3) int __must_check f(void __user *p) __acquires(x);\n";
        let p = preprocess(src, &cfg());
        assert_eq!(p.text.len(), src.len());
        assert!(!p.text.contains("__user") && !p.text.contains("__printf"));
        assert!(p.text.contains("int") && p.text.contains("void  "));
    }

    #[test]
    fn loop_macros_and_type_arguments_become_c() {
        let src = "\tlist_for_each_entry(p, &h, l) {\n\tq = container_of(w, struct ib_qp, dev);\n\tx = f(a, (struct s *)b);\n";
        let p = preprocess(src, &cfg());
        assert_eq!(p.text.len(), src.len());
        assert!(
            p.text.starts_with("\twhile              (p, &h, l) {"),
            "{}",
            p.text
        );
        assert!(
            p.text.contains("container_of(w,        ib_qp, dev)"),
            "{}",
            p.text
        );
        assert!(
            p.text.contains("(struct s *)b"),
            "casts are kept: {}",
            p.text
        );
    }

    #[test]
    fn type_bodies_skipped_to_the_next_stop_equal_byte_by_byte() {
        const TOKENS: &[&str] = &[
            "struct a ",
            "union ",
            "enum ",
            "{",
            "}",
            ";",
            "(",
            ")",
            "=",
            " x ",
            "f(p)",
            "/* } */",
            "/*",
            "*/",
            "// { x\n",
            "\n",
            "\"}\"",
            "'{'",
            "'\\''",
            "\"\\\"\"",
            "#define X {\n",
            "# if }\\\n }\n",
            "a # b",
            "é",
            "struct_x ",
            "1'0",
        ];
        for src in token_soup(TOKENS, 40, 0x9e37_79b9_7f4a_7c15) {
            let (mut new, mut old) = (src.clone(), src.clone());
            blank_type_bodies(&mut new);
            blank_type_bodies_with(&mut old, false);
            assert_eq!(new, old, "{src:?}");
        }
    }

    #[test]
    fn header_type_bodies_are_blanked_but_functions_kept() {
        let mut t = String::from("struct a {\n\tint x; /* } */\n};\nstatic inline int f(struct a *p)\n{\n\treturn g(p);\n}\nenum { B = 1 };\n");
        let len = t.len();
        blank_type_bodies(&mut t);
        assert_eq!(t.len(), len);
        assert!(!t.contains("int x") && !t.contains("B = 1"), "{t}");
        assert!(
            t.contains("return g(p);") && t.contains("struct a *p"),
            "{t}"
        );
        assert_eq!(t.lines().count(), 8);
    }

    #[test]
    fn deep_expressions_stop_at_the_limit_and_name_the_line() {
        for expr in [
            "!".repeat(10_000) + "1",
            "(".repeat(10_000) + "1" + &")".repeat(10_000),
            "1 ? 1 : ".repeat(10_000) + "0",
        ] {
            let src = format!("x\n#if {expr}\ny\n#endif\n");
            let p = preprocess(&src, &cfg());
            assert_eq!(p.too_deep, Some(2));
        }
        let shallow = format!("#if {}1\ny\n#endif\n", "!".repeat(100));
        assert_eq!(preprocess(&shallow, &cfg()).too_deep, None);
    }

    #[test]
    fn unterminated_if_is_reported() {
        let p = preprocess("#ifdef CONFIG_ON\n#if 0\nx\n#endif\n", &cfg());
        assert_eq!(p.unterminated, vec![1]);
    }

    #[test]
    fn unbalanced_endif_is_reported_not_fatal() {
        let p = preprocess("#endif\nx\n", &cfg());
        assert_eq!(p.unbalanced, vec![1]);
    }

    #[test]
    fn tracepoint_definitions_are_blanked_and_their_wrappers_kept() {
        let src = "#include <linux/tracepoint.h>\n\
#define DEF_QP_EVENT(name) DEFINE_EVENT(qp_class, name, TP_PROTO(u32 q), TP_ARGS(q))\n\
DECLARE_EVENT_CLASS(qp_class,\n\
\tTP_PROTO(u32 q),\n\
\tTP_fast_assign(__entry->q = q; /* ) */),\n\
\tTP_printk(\"qp %u (%s)\", __entry->q, \")\")\n\
);\n\
DEF_QP_EVENT(modify);\n\
static inline int keep(void) { return rdma_call(TRACE_EVENT); }\n\
TRACE_EVENT_CONDITION (unterminated,\n";
        let p = preprocess(src, &cfg());
        assert_eq!(p.text.len(), src.len());
        let lines: Vec<&str> = p.text.lines().map(str::trim).collect();
        assert_eq!(
            lines,
            [
                "#include <linux/tracepoint.h>",
                "#define DEF_QP_EVENT(name) DEFINE_EVENT(qp_class, name, TP_PROTO(u32 q), TP_ARGS(q))",
                "",
                "",
                "",
                "",
                "",
                // A wrapper's use is an ordinary macro call: the graph's macro expansion sees it.
                "DEF_QP_EVENT(modify);",
                "static inline int keep(void) { return rdma_call(TRACE_EVENT); }",
                // Unclosed arguments are left for the parser to report.
                "TRACE_EVENT_CONDITION (unterminated,",
            ]
        );
        // A file that does not include the definers' header is left as it is.
        let other = src.replacen(
            "#include <linux/tracepoint.h>",
            "#include <linux/kernel.h>   ",
            1,
        );
        assert_eq!(preprocess(&other, &cfg()).text, other);
    }
}

//! Cell formatting the markdown templates in `maintain/templates/` share. The templates call
//! these as `self::name(...)` (each report module imports the ones it uses); askama passes
//! fields and variables by reference, method results by value.

use std::borrow::Borrow;

/// Markdown table cell: no pipes or newlines. Owned or borrowed: askama passes a method's
/// result by value, a field by reference.
pub(crate) fn cell(s: impl AsRef<str>) -> String {
    s.as_ref().replace('|', "\\|").replace('\n', " ")
}

/// `1 item`, `3 items`.
pub(crate) fn count(n: impl Borrow<usize>, what: &str) -> String {
    match *n.borrow() {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// `` `a`, `b` `` of names, for a table cell or a sentence.
pub(crate) fn code_list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|c| format!("`{c}`")).collect();
    quoted.join(", ")
}

/// [`code_list`], `-` when there is no name.
pub(crate) fn code_list_or_dash(names: &[String]) -> String {
    if names.is_empty() {
        "-".to_string()
    } else {
        code_list(names)
    }
}

/// The optional value of a table cell, `-` when absent.
pub(crate) fn or_dash<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "-".to_string(), T::to_string)
}

/// An optional function name as code, `—` when absent (the verb tables' handler column).
pub(crate) fn code_or_em_dash(name: Option<&str>) -> String {
    name.map_or_else(|| "—".to_string(), |h| format!("`{h}`"))
}

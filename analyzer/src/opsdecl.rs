//! The declaration of `struct ib_device_ops` in the tree being analysed: which members exist
//! and what their signatures say. The selection derives its focus members from these types
//! (a member that returns or takes a `struct ib_qp *` works on a QP), so a renamed or added
//! member (`.resize_cq` -> `.resize_user_cq` in 7.x) is followed without a rules change.
//!
//! Read from the config-evaluated text of the header before its type bodies are blanked; a
//! declaration list needs no parser: members are `;`-separated function-pointer declarators.

use serde::{Deserialize, Serialize};

/// One function-pointer member of `struct ib_device_ops`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpsMemberDecl {
    pub name: String,
    /// 1-based line in the header.
    pub line: usize,
    /// Return type as written, whitespace collapsed (`struct ib_mr *`).
    pub returns: String,
    /// Parameter types as written, whitespace collapsed, names included (`struct ib_qp *qp`).
    pub params: Vec<String>,
}

/// The members of `struct ib_device_ops` when `text` defines it.
pub fn ops_struct_members(text: &str) -> Option<Vec<OpsMemberDecl>> {
    let start = find_definition(text)?;
    let body_start = start + text[start..].find('{')? + 1;
    let body_end = body_start + matching_brace(&text[body_start..])?;
    let body = &text[body_start..body_end];
    let first_line = text[..body_start].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut offset = 0usize;
    for decl in split_top_level(body, ';') {
        // The member's line is where its `(*name)` is, past any comment before it.
        let at = decl.find("(*").unwrap_or(0);
        let line =
            first_line + body[..offset].matches('\n').count() + decl[..at].matches('\n').count();
        offset += decl.len() + 1;
        if let Some(m) = member(&strip_comments(decl), line) {
            out.push(m);
        }
    }
    Some(out)
}

/// Byte offset of `struct ib_device_ops {` (any whitespace before the brace).
fn find_definition(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find("struct ib_device_ops") {
        let at = from + i;
        let rest = text[at + "struct ib_device_ops".len()..].trim_start();
        if rest.starts_with('{') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Index of the `}` closing a body that starts just after its `{`.
fn matching_brace(body: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn split_top_level(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut last) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&s[last..i]);
                last = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[last..]);
    out
}

fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => {
                out.push_str(&rest[..b]);
                match rest[b + 2..].find("*/") {
                    Some(e) => rest = &rest[b + 2 + e + 2..],
                    None => return out,
                }
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                match rest[l..].find('\n') {
                    Some(e) => rest = &rest[l + e..],
                    None => return out,
                }
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `RET (*name)(PARAMS)` -> the member; anything else (a plain field, a macro) -> None.
fn member(decl: &str, line: usize) -> Option<OpsMemberDecl> {
    let decl = collapse(decl);
    let star = decl.find("(*")?;
    let close = star + decl[star..].find(')')?;
    let name = decl[star + 2..close].trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let params_open = close + decl[close..].find('(')?;
    let params_close = decl.rfind(')')?;
    if params_close <= params_open {
        return None;
    }
    let params: Vec<String> = split_top_level(&decl[params_open + 1..params_close], ',')
        .into_iter()
        .map(collapse)
        .filter(|p| !p.is_empty() && p != "void")
        .collect();
    Some(OpsMemberDecl {
        name: name.to_string(),
        line,
        returns: collapse(&decl[..star]),
        params,
    })
}

/// The struct a type names, when it is a pointer to one: `const struct ib_qp *qp` -> `ib_qp`.
pub fn struct_pointee(ty: &str) -> Option<&str> {
    if !ty.contains('*') {
        return None;
    }
    let after = ty.split("struct ").nth(1)?;
    let end = after
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(after.len());
    Some(&after[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "struct ib_device;\n\
struct ib_device_ops {\n\
\tstruct module *owner;\n\
\tenum rdma_driver_id driver_id;\n\
\tint (*post_send)(struct ib_qp *qp, const struct ib_send_wr *send_wr,\n\
\t\t\t const struct ib_send_wr **bad_send_wr);\n\
\t/* create a CQ */\n\
\tint (*create_cq)(struct ib_cq *cq, const struct ib_cq_init_attr *attr,\n\
\t\t\t struct uverbs_attr_bundle *attrs);\n\
\tstruct ib_mr *(*reg_user_mr)(struct ib_pd *pd, u64 start, u64 length,\n\
\t\t\t\t     u64 virt_addr, int mr_access_flags,\n\
\t\t\t\t     struct ib_udata *udata);\n\
\tvoid (*dealloc_driver)(struct ib_device *dev);\n\
\tDECLARE_RDMA_OBJ_SIZE(ib_ah);\n\
};\n\
struct ib_device_ops *ops;\n";

    #[test]
    fn members_with_types_and_lines() {
        let m = ops_struct_members(HEADER).expect("struct found");
        let names: Vec<&str> = m.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["post_send", "create_cq", "reg_user_mr", "dealloc_driver"]
        );
        assert_eq!(m[1].line, 8);
        assert_eq!(m[2].returns, "struct ib_mr *");
        assert_eq!(m[2].params.len(), 6);
        assert_eq!(m[2].params[0], "struct ib_pd *pd");
        assert_eq!(struct_pointee(&m[2].returns), Some("ib_mr"));
        assert_eq!(struct_pointee(&m[0].params[1]), Some("ib_send_wr"));
        assert_eq!(struct_pointee("u64 start"), None);
    }

    #[test]
    fn no_definition_no_members() {
        assert_eq!(ops_struct_members("struct ib_device_ops *ops;"), None);
        assert_eq!(
            ops_struct_members("struct ib_device_ops { int (*x)(void);"),
            None
        );
    }
}

//! Why a name the user asked for is not in the graph: the file that defines it on disk and
//! what lost it (the config does not build it, and which option; unreadable; damaged). Apart
//! from [`crate::completeness`], which the load itself uses: this reads a loaded
//! [`SourceTree`], so the load does not depend on it.

use std::path::Path;

use crate::completeness::{Degradation, DegradedKind};
use crate::kconfig::KernelConfig;
use crate::layout::SourceLayout;
use crate::source::SourceTree;

/// Why no built source defines `name`: the file that defines it on disk and what lost it
/// (not built by the config, and which option; unreadable; damaged), or that no file under the
/// scanned directories defines it. One clause, for "entry `x` not found: <clause>".
pub fn why_missing(tree: &SourceTree, name: &str) -> String {
    let unreadable: Vec<&Degradation> = tree
        .degraded
        .iter()
        .filter(|d| d.kind == DegradedKind::Unreadable)
        .collect();
    let layout = tree.layout();
    let Some((file, line)) = find_definition(&tree.root, layout, name) else {
        let dirs: Vec<&str> = layout.scan_dirs().collect();
        let mut s = format!("no file under {} defines it", dirs.join(", "));
        if let Some(u) = unreadable.first() {
            s.push_str(&format!(
                " that could be read ({} unreadable, first {u})",
                unreadable.len()
            ));
        }
        return s;
    };
    let at = format!("{file}:{line} defines it");
    if let Some(u) = unreadable.iter().find(|d| d.file == file) {
        return format!("{at}, but it could not be read ({})", u.detail);
    }
    if file.ends_with(".c") && tree.build.module_of(&file).is_none() {
        return format!(
            "{at}, but the config does not build it: {}",
            why_missing_file(tree, &file)
        );
    }
    let damage: Vec<String> = tree
        .degraded
        .iter()
        .filter(|d| d.file == file)
        .map(|d| d.to_string())
        .collect();
    if !damage.is_empty() {
        return format!("{at}, but the file is damaged: {}", damage.join("; "));
    }
    match tree.files.iter().find(|f| f.path == file) {
        Some(f) => format!(
            "{at}, but the parser did not see the definition there ({} parse errors in the file, or an inactive #if)",
            f.parse_errors
        ),
        None => format!("{at}, but the file was not parsed"),
    }
}

/// Why Kbuild does not build the `.c` file `file` under this tree's config.
pub fn why_missing_file(tree: &SourceTree, file: &str) -> String {
    unbuilt_reason(
        &tree.root,
        &tree.layout().kbuild_top,
        file,
        &tree.config,
        &tree.config_name(),
    )
}

/// The first `(file, line)` under the scanned directories where a line at column 0 names
/// `name(`: kernel style puts a definition's return type and name at the start of the line.
fn find_definition(root: &Path, layout: &SourceLayout, name: &str) -> Option<(String, usize)> {
    let needle = format!("{name}(");
    let mut files = Vec::new();
    for dir in layout.scan_dirs() {
        for e in walkdir::WalkDir::new(root.join(dir))
            .sort_by_file_name()
            .into_iter()
            .filter_map(Result::ok)
        {
            let p = e.path();
            if e.file_type().is_file() && p.extension().is_some_and(|x| x == "c" || x == "h") {
                files.push(p.to_path_buf());
            }
        }
    }
    for p in files {
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for (i, l) in text.lines().enumerate() {
            if l.starts_with(|c: char| c.is_whitespace() || c == '#' || c == '/' || c == '*') {
                continue;
            }
            let Some(pos) = l.find(&needle) else {
                continue;
            };
            let before = l[..pos].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                || l.trim_end().ends_with(';')
            {
                continue;
            }
            let rel = p
                .strip_prefix(root)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_else(|_| p.display().to_string());
            return Some((rel, i + 1));
        }
    }
    None
}

/// Why Kbuild does not build `file`: walking down from `drivers/infiniband`, the Makefile line
/// that names the next directory or the object and the options on it the config leaves unset;
/// or the missing Makefile.
fn unbuilt_reason(
    root: &Path,
    kbuild_top: &str,
    file: &str,
    config: &KernelConfig,
    config_name: &str,
) -> String {
    let Some(rest) = file.strip_prefix(&format!("{kbuild_top}/")) else {
        return format!("it is outside {kbuild_top}");
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let mut dir = kbuild_top.to_string();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let makefile = ["Kbuild", "Makefile"]
            .iter()
            .map(|n| format!("{dir}/{n}"))
            .find(|p| root.join(p).is_file());
        let Some(makefile) = makefile else {
            return format!("{dir}/Makefile is missing");
        };
        let text = std::fs::read(root.join(&makefile))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let logical = logical_lines(&text);
        let wanted = if last {
            format!("{}.o", part.trim_end_matches(".c"))
        } else {
            format!("{part}/")
        };
        let mut unset = Vec::new();
        let mut named = false;
        for (n, l) in &logical {
            if !l.split_whitespace().any(|t| t == wanted) {
                continue;
            }
            named = true;
            // The option of this line, and for `mod-y += x.o` the option of `obj-$(..) += mod.o`.
            let mut lines = vec![(*n, l.clone())];
            let lhs = l.split(['+', ':', '=']).next().unwrap_or("").trim();
            let composite = lhs.split('-').next().unwrap_or("");
            if last && !composite.is_empty() && composite != "obj" {
                let target = format!("{composite}.o");
                if let Some((m, ml)) = logical.iter().find(|(_, x)| {
                    x.starts_with("obj-") && x.split_whitespace().any(|t| t == target)
                }) {
                    lines.push((*m, ml.clone()));
                }
            }
            for (ln, l) in lines {
                for opt in config_refs(&l) {
                    if config.kbuild_letter(&opt).is_empty() {
                        unset.push(format!(
                            "{makefile}:{ln} needs {opt}, which {config_name} does not set"
                        ));
                    }
                }
            }
        }
        if !unset.is_empty() {
            unset.dedup();
            return unset.join("; ");
        }
        if !named {
            return format!("{makefile} does not name {wanted}");
        }
        dir = format!("{dir}/{part}");
    }
    format!("Kbuild does not reach it with {config_name}")
}

/// Makefile lines with their `\` continuations joined, each with its first line number.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("");
        let (body, more) = match line.trim_end().strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        let entry = cur.get_or_insert_with(|| (i + 1, String::new()));
        entry.1.push_str(body);
        entry.1.push(' ');
        if !more {
            out.extend(cur.take());
        }
    }
    out.extend(cur);
    out
}

/// `CONFIG_X` names in `$(CONFIG_X)` references of a Makefile line.
fn config_refs(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(p) = rest.find("$(CONFIG_") {
        let after = &rest[p + 2..];
        let end = after.find(')').unwrap_or(after.len());
        out.push(after[..end].to_string());
        rest = &after[end..];
    }
    out
}

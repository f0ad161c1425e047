//! Coverage of a probe set against a failure log: which share of the failures (weighted, for
//! example by GPU-hours lost) lands in a verb whose kernel handler is probed, and for the rest
//! the rule that excluded the handler. Pure: CSV text and a manifest in.
//!
//! The CSV has the columns `verb,errno,weight` (an optional header line with those names;
//! blank lines and `#` comments are skipped). `verb` is a libibverbs verb (`ibv_create_qp`,
//! or `create_qp`); `errno` a number (`-22`, `22`) or a name (`EINVAL`); `weight` a
//! non-negative number. Shares are of the total weight, unknown verbs included, so
//! `covered_share + sum(uncovered) + unknown_share = 1`.
//!
//! The data plane: a row of `ibv_poll_cq` with a completion status (`12`, `IBV_WC_RETRY_EXC_ERR`:
//! NCCL's "completion with error 12") or of `ibv_get_async_event` with an event
//! (`IBV_EVENT_QP_FATAL`) is covered when a data-plane probe of the set sees that status or
//! event (rule `data-plane`); a completion no kernel probe sees is `nic-only` (the provider
//! writes it into user memory: mlx5, bnxt_re, irdma; the port's error counters count it).
//! `data_plane_share` is the log's share of such rows, `data_plane_covered_share` the part of
//! it covered.

use askama::Template;
use serde::Serialize;
use std::collections::BTreeMap;

use crate::markdown::{code_list, code_or_em_dash};
use crate::verbs::{self, VerbStatus};
use manifest::Manifest;

/// One failure row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailureRow {
    /// 1-based line in the file.
    pub line: usize,
    pub verb: String,
    pub errno: String,
    pub weight: f64,
}

/// A row that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Malformed {
    pub line: usize,
    pub error: String,
}

fn unquote(s: &str) -> &str {
    let t = s.trim();
    t.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .unwrap_or(t)
        .trim()
}

/// `enum ibv_wc_status` (= the kernel's `ib_wc_status`, a user ABI) by number.
const WC_STATUSES: [&str; 22] = [
    "SUCCESS",
    "LOC_LEN_ERR",
    "LOC_QP_OP_ERR",
    "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",
    "WR_FLUSH_ERR",
    "MW_BIND_ERR",
    "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",
    "REM_INV_REQ_ERR",
    "REM_ACCESS_ERR",
    "REM_OP_ERR",
    "RETRY_EXC_ERR",
    "RNR_RETRY_EXC_ERR",
    "LOC_RDD_VIOL_ERR",
    "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",
    "INV_EECN_ERR",
    "INV_EEC_STATE_ERR",
    "FATAL_ERR",
    "RESP_TIMEOUT_ERR",
    "GENERAL_ERR",
];

/// A data-plane row's verb and the kernel's name of its status or event
/// (`IB_WC_RETRY_EXC_ERR`, `IB_EVENT_QP_FATAL`); `None` for a control-path row.
fn data_plane_status(verb: &str, code: &str) -> Option<(&'static str, String)> {
    let v = verb.strip_prefix("ibv_").unwrap_or(verb);
    let kernel_name = |prefix: &str| {
        let bare = code
            .strip_prefix(&format!("IBV_{prefix}_"))
            .or_else(|| code.strip_prefix(&format!("IB_{prefix}_")))?;
        Some(format!("IB_{prefix}_{bare}"))
    };
    match v {
        "poll_cq" => {
            let name = match code.trim_start_matches('-').parse::<usize>() {
                Ok(n) => WC_STATUSES.get(n).map(|s| format!("IB_WC_{s}")),
                Err(_) => kernel_name("WC"),
            }?;
            Some(("ibv_poll_cq", name))
        }
        "get_async_event" => Some(("ibv_get_async_event", kernel_name("EVENT")?)),
        _ => None,
    }
}

/// The set's verdict on a data-plane row: covered by the data-plane probe that sees `status`
/// (its function), else why not.
fn data_plane_verdict(
    m: &Manifest,
    verb: &str,
    status: &str,
) -> (bool, &'static str, Option<String>) {
    use manifest::{Attach, DataPlaneClass};
    let class = if verb == "ibv_poll_cq" {
        DataPlaneClass::Completion
    } else {
        DataPlaneClass::AsyncEvent
    };
    let seen = m.data_plane.iter().find(|d| {
        d.class == class && d.attach == Attach::Fexit && d.errors.iter().any(|e| e == status)
    });
    match seen {
        Some(d) => (true, "data-plane", Some(d.function.clone())),
        // the provider writes the completion into user memory: no kernel function sees it
        None if class == DataPlaneClass::Completion => (false, "nic-only", None),
        None => (false, "not-probed", None),
    }
}

fn valid_errno(s: &str) -> bool {
    if ["IBV_WC_", "IB_WC_", "IBV_EVENT_", "IB_EVENT_"]
        .iter()
        .any(|p| s.starts_with(p))
    {
        return s
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    }
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    let number = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let name = s.len() > 1
        && s.starts_with('E')
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    number || name
}

/// Parse the CSV: good rows and malformed rows, each with its line number.
pub fn parse_failures(text: &str) -> (Vec<FailureRow>, Vec<Malformed>) {
    let mut rows = Vec::new();
    let mut bad = Vec::new();
    let mut seen_data = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = l.split(',').map(unquote).collect();
        if !seen_data {
            seen_data = true;
            let lower: Vec<String> = fields.iter().map(|f| f.to_ascii_lowercase()).collect();
            if lower == ["verb", "errno", "weight"] {
                continue;
            }
        }
        let mut err = |error: String| bad.push(Malformed { line, error });
        if fields.len() != 3 {
            err(format!(
                "expected 3 fields `verb,errno,weight`, found {}",
                fields.len()
            ));
            continue;
        }
        let (verb, errno, weight) = (fields[0], fields[1], fields[2]);
        if verb.is_empty() || !verb.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            err(format!(
                "verb `{verb}`: expected a verb name such as ibv_create_qp"
            ));
            continue;
        }
        if !valid_errno(errno) {
            err(format!(
                "errno `{errno}`: expected a number (-22) or a name (EINVAL)"
            ));
            continue;
        }
        match weight.parse::<f64>() {
            Ok(w) if w.is_finite() && w >= 0.0 => rows.push(FailureRow {
                line,
                verb: verb.to_string(),
                errno: errno.to_string(),
                weight: w,
            }),
            _ => err(format!("weight `{weight}`: expected a non-negative number")),
        }
    }
    (rows, bad)
}

/// A failure log whose weights sum to infinity: `line` is the row where the sum overflowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}:{line}: the weights sum to infinity here: expected a finite total weight")]
pub struct InfiniteWeight {
    pub origin: String,
    pub line: usize,
}

/// The total weight of the rows, which every share divides by: an error when it is not a
/// finite number (weights of 1e308 each sum to infinity, and every share would be NaN).
pub fn total_weight(rows: &[FailureRow], origin: &str) -> Result<f64, InfiniteWeight> {
    let total: f64 = rows.iter().map(|r| r.weight).sum();
    if !total.is_finite() {
        let at = rows
            .iter()
            .scan(0.0f64, |acc, r| {
                *acc += r.weight;
                Some((r.line, *acc))
            })
            .find(|(_, acc)| !acc.is_finite())
            .map_or(0, |(l, _)| l);
        return Err(InfiniteWeight {
            origin: origin.to_string(),
            line: at,
        });
    }
    Ok(total)
}

/// Weight of one verb in the log, and what the probe set does with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerbWeight {
    pub verb: String,
    pub rows: usize,
    pub weight: f64,
    pub share: f64,
    pub covered: bool,
    /// `focus`/`override` when covered, else the rule that excluded the handler, or
    /// `unreachable`.
    pub rule: String,
    pub handler: Option<String>,
    pub probes_below: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoverageReport {
    pub manifest: String,
    pub kernel: String,
    pub vendor: String,
    pub rows: usize,
    pub total_weight: f64,
    /// Share of the total weight whose verb's handler is probed (0..1).
    pub covered_share: f64,
    /// Uncovered share by the rule that excluded the handler.
    pub uncovered: BTreeMap<String, f64>,
    pub unknown_share: f64,
    /// Share of the total weight in data-plane rows (`ibv_poll_cq`, `ibv_get_async_event`),
    /// and the part of it a data-plane probe covers (both in `covered_share` / `uncovered`).
    pub data_plane_share: f64,
    pub data_plane_covered_share: f64,
    /// Verbs of the log probegen does not know, sorted.
    pub unknown_verbs: Vec<String>,
    pub verbs: Vec<VerbWeight>,
    /// Rows skipped with `--lenient`.
    pub skipped: Vec<Malformed>,
}

/// Round to 6 decimals so the JSON is stable and readable.
fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The data-plane rows' weights by (verb, status) against the set: (total, covered, a row per
/// status); the uncovered weight goes into `uncovered` by its rule.
fn weigh_data_plane(
    m: &Manifest,
    per_status: BTreeMap<(&str, String), (usize, f64)>,
    share: &dyn Fn(f64) -> f64,
    uncovered: &mut BTreeMap<String, f64>,
) -> (f64, f64, Vec<VerbWeight>) {
    let (mut total, mut covered, mut out) = (0.0, 0.0, Vec::new());
    for ((verb, status), (n, w)) in per_status {
        let (is_covered, rule, handler) = data_plane_verdict(m, verb, &status);
        total += w;
        if is_covered {
            covered += w;
        } else {
            *uncovered.entry(rule.to_string()).or_default() += w;
        }
        out.push(VerbWeight {
            verb: format!("{verb}: {status}"),
            rows: n,
            weight: r6(w),
            share: share(w),
            covered: is_covered,
            rule: rule.to_string(),
            handler,
            probes_below: 0,
        });
    }
    (total, covered, out)
}

/// Weigh the failure rows against the probe set. `origin` names the manifest in the report.
pub fn coverage(
    m: &Manifest,
    origin: &str,
    rows: &[FailureRow],
    skipped: Vec<Malformed>,
) -> CoverageReport {
    let statuses = verbs::statuses(m);
    let total: f64 = rows.iter().map(|r| r.weight).sum();
    let share = |w: f64| if total > 0.0 { r6(w / total) } else { 0.0 };
    let mut per_verb: BTreeMap<String, (usize, f64, Option<&VerbStatus>)> = BTreeMap::new();
    // data-plane rows by (verb, status): what each status gets from the set
    let mut per_status: BTreeMap<(&str, String), (usize, f64)> = BTreeMap::new();
    for r in rows {
        if let Some(key) = data_plane_status(&r.verb, &r.errno) {
            let e = per_status.entry(key).or_default();
            e.0 += 1;
            e.1 += r.weight;
            continue;
        }
        let (name, st) = match verbs::lookup(&r.verb) {
            Some(d) => (
                d.verb.to_string(),
                statuses.iter().find(|s| s.verb == d.verb),
            ),
            None => (r.verb.clone(), None),
        };
        let e = per_verb.entry(name).or_insert((0, 0.0, st));
        e.0 += 1;
        e.1 += r.weight;
    }
    let mut covered = 0.0;
    let mut uncovered: BTreeMap<String, f64> = BTreeMap::new();
    let mut unknown = 0.0;
    let mut unknown_verbs = Vec::new();
    let mut verbs_out = Vec::new();
    for (verb, (n, w, st)) in per_verb {
        let Some(st) = st else {
            unknown += w;
            unknown_verbs.push(verb);
            continue;
        };
        if st.covered {
            covered += w;
        } else {
            *uncovered.entry(st.verdict.rule().to_string()).or_default() += w;
        }
        verbs_out.push(VerbWeight {
            verb,
            rows: n,
            weight: r6(w),
            share: share(w),
            covered: st.covered,
            rule: st.verdict.rule().to_string(),
            handler: st.handler.clone(),
            probes_below: st.below.len(),
        });
    }
    let (dp_total, dp_covered, dp_verbs) = weigh_data_plane(m, per_status, &share, &mut uncovered);
    covered += dp_covered;
    verbs_out.extend(dp_verbs);
    verbs_out.sort_by(|a, b| {
        b.weight
            .total_cmp(&a.weight)
            .then_with(|| a.verb.cmp(&b.verb))
    });
    CoverageReport {
        manifest: origin.to_string(),
        kernel: m.kernel.version.clone(),
        vendor: m.vendor.clone(),
        rows: rows.len(),
        total_weight: r6(total),
        covered_share: share(covered),
        uncovered: uncovered.into_iter().map(|(k, w)| (k, share(w))).collect(),
        unknown_share: share(unknown),
        data_plane_share: share(dp_total),
        data_plane_covered_share: share(dp_covered),
        unknown_verbs,
        verbs: verbs_out,
        skipped,
    }
}

/// `12.5%` of a share.
fn pct(x: &f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The handler a verb lands in, `—` when there is none.
fn handler_cell(h: &Option<String>) -> String {
    code_or_em_dash(h.as_deref())
}

#[derive(Template)]
#[template(path = "coverage.md", escape = "none")]
struct CoverageTemplate<'a> {
    c: &'a CoverageReport,
    /// Uncovered shares by rule, largest first, ties by rule.
    uncovered: Vec<(&'a String, f64)>,
}

/// The coverage report as markdown.
pub fn coverage_markdown(c: &CoverageReport) -> Result<String, askama::Error> {
    let mut uncovered: Vec<(&String, f64)> = c.uncovered.iter().map(|(r, s)| (r, *s)).collect();
    uncovered.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    CoverageTemplate { c, uncovered }.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infinite_total_is_an_error() {
        let (rows, bad) = parse_failures("create_qp,EINVAL,1e308\nreg_mr,-12,1e308\n");
        assert!(bad.is_empty());
        let e = total_weight(&rows, "f.csv").expect_err("infinite");
        assert_eq!(
            e.to_string(),
            "f.csv:2: the weights sum to infinity here: expected a finite total weight"
        );
    }

    #[test]
    fn parses_rows_header_comments_and_errors() {
        let text = "verb,errno,weight\n# comment\n\nibv_create_qp,-22,3.5\n\
                    create_qp,ENOMEM,1\nibv_reg_mr,EINVAL\nibv_reg_mr,oops,1\n\
                    ibv_reg_mr,12,-1\n\"ibv_modify_qp\", 110 , 2\nbad verb,1,1\n";
        let (rows, bad) = parse_failures(text);
        assert_eq!(
            rows.iter()
                .map(|r| (r.line, r.verb.as_str(), r.weight))
                .collect::<Vec<_>>(),
            [
                (4, "ibv_create_qp", 3.5),
                (5, "create_qp", 1.0),
                (9, "ibv_modify_qp", 2.0)
            ]
        );
        assert_eq!(
            bad.iter().map(|m| m.line).collect::<Vec<_>>(),
            [6, 7, 8, 10]
        );
        assert!(bad[0].error.contains("expected 3 fields"), "{:?}", bad[0]);
        assert!(bad[1].error.contains("errno `oops`"), "{:?}", bad[1]);
        assert!(bad[2].error.contains("non-negative"), "{:?}", bad[2]);
    }

    #[test]
    fn data_plane_rows_by_status() {
        assert_eq!(
            data_plane_status("ibv_poll_cq", "12"),
            Some(("ibv_poll_cq", "IB_WC_RETRY_EXC_ERR".to_string()))
        );
        assert_eq!(
            data_plane_status("poll_cq", "IBV_WC_WR_FLUSH_ERR"),
            Some(("ibv_poll_cq", "IB_WC_WR_FLUSH_ERR".to_string()))
        );
        assert_eq!(
            data_plane_status("ibv_get_async_event", "IBV_EVENT_QP_FATAL"),
            Some(("ibv_get_async_event", "IB_EVENT_QP_FATAL".to_string()))
        );
        assert_eq!(data_plane_status("ibv_poll_cq", "99"), None);
        assert_eq!(data_plane_status("ibv_create_qp", "EINVAL"), None);
        let (rows, bad) =
            parse_failures("ibv_poll_cq,IBV_WC_RETRY_EXC_ERR,1\nibv_poll_cq,IBV_wc,1\n");
        assert_eq!((rows.len(), bad.len()), (1, 1));
    }

    #[test]
    fn header_only_counts_on_the_first_data_line() {
        let (rows, bad) = parse_failures("ibv_reg_mr,1,1\nverb,errno,weight\n");
        assert_eq!(rows.len(), 1);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].line, 2);
    }
}

//! Expected errors: per (handler, origin probe, errno), whether a failure is normal.
//!
//! * pinned: the configuration names it (`--baseline-expected handler:origin:ERRNO`);
//! * kernel-normal: an ENOENT born in a verbs core function under a handler that succeeded
//!   (the uverbs core treats an absent optional attribute's ENOENT as normal:
//!   `IS_UVERBS_COPY_ERR(ret)` is `ret && ret != -ENOENT`);
//! * learned, with statistical debugging's Increase (Liblit et al., PLDI '05): a process
//!   "fails" when it never succeeded with the handler (as far as the traced successes show).
//!   Increase = P(fails | this failure seen in it) - P(fails | it called the handler). A
//!   pattern seen in at least `MIN_PROCESSES` processes whose Increase is at most
//!   `MAX_INCREASE` is no more common in processes that fail than in any: expected.
//!
//! Bounded: `MAX_PATTERNS` patterns, `MAX_PIDS` processes per set (later ones not added).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

const MAX_PATTERNS: usize = 1024;
const MAX_PIDS: usize = 4096;
pub(crate) const MIN_PROCESSES: usize = 3;
pub(crate) const MAX_INCREASE: f64 = 0.1;
const ENOENT: u32 = 2;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Pattern {
    /// processes it failed in, with the first failure's time
    pub failed: BTreeMap<u32, u64>,
    /// of those, processes with a traced success of the handler after it
    pub recovered: BTreeSet<u32>,
}

/// A failure pattern, pinned from the configuration, by names: expected, or not expected
/// whatever was learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    pub handler: String,
    pub origin: String,
    pub errno: u32,
    pub expected: bool,
}

impl Pinned {
    /// `handler:origin:ERRNO` (an errno name such as `EINVAL`, or a number), pinned expected.
    pub fn parse(s: &str) -> Result<Self, BaselineError> {
        Self::parse_as(s, "--baseline-expected", true)
    }

    /// The same, pinned not expected (`--baseline-not-expected`).
    pub fn parse_not_expected(s: &str) -> Result<Self, BaselineError> {
        Self::parse_as(s, "--baseline-not-expected", false)
    }

    fn parse_as(s: &str, flag: &'static str, expected: bool) -> Result<Self, BaselineError> {
        let bad = |why: String| BaselineError::Pin {
            flag,
            value: s.to_string(),
            why,
        };
        let parts: Vec<&str> = s.split(':').collect();
        let [handler, origin, errno] = parts[..] else {
            return Err(bad("expected handler:origin:ERRNO".into()));
        };
        let errno = errno
            .parse::<u32>()
            .ok()
            .or_else(|| (1..=4095).find(|&n| wire::errno_name(n) == Some(errno)))
            .ok_or_else(|| bad(format!("`{errno}` is not an errno name or number")))?;
        if handler.is_empty() || origin.is_empty() {
            return Err(bad("expected handler:origin:ERRNO".into()));
        }
        Ok(Pinned {
            handler: handler.to_string(),
            origin: origin.to_string(),
            errno,
            expected,
        })
    }
}

/// Why a pin or a state file cannot be read: one line each (the agent prints it, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// A pin is not `handler:origin:ERRNO`.
    #[error("{flag} `{value}`: {why}")]
    Pin {
        flag: &'static str,
        value: String,
        why: String,
    },
    /// A state file that is damaged or of another probe set.
    #[error("{0}")]
    State(String),
}

/// The verdict on one pattern.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub expected: bool,
    pub why: String,
    pub increase: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Expected {
    #[serde(with = "super::persist::pairs")]
    pub patterns: BTreeMap<(u32, u32, u32), Pattern>,
    /// per handler: processes seen calling it, and those with a traced success (the last one's
    /// time: a chain is judged a gap after its failure, when the process may have succeeded)
    pub seen: BTreeMap<u32, (BTreeSet<u32>, BTreeMap<u32, u64>)>,
    #[serde(skip)]
    pub pinned: Vec<Pinned>,
}

fn bounded_insert<T: Ord>(set: &mut BTreeSet<T>, v: T) {
    if set.len() < MAX_PIDS {
        set.insert(v);
    }
}

impl Expected {
    /// A failing call of `handler` whose chain's origin is (`origin`, `errno`), in `pid`.
    pub(crate) fn failure(&mut self, key: (u32, u32, u32), pid: u32, ts_ns: u64) {
        let seen = self.seen.entry(key.0).or_default();
        bounded_insert(&mut seen.0, pid);
        let succeeded_since = seen.1.get(&pid).is_some_and(|&t| t > ts_ns);
        if !self.patterns.contains_key(&key) && self.patterns.len() >= MAX_PATTERNS {
            return;
        }
        let p = self.patterns.entry(key).or_default();
        if p.failed.len() < MAX_PIDS || p.failed.contains_key(&pid) {
            p.failed.entry(pid).or_insert(ts_ns);
            if succeeded_since {
                p.recovered.insert(pid);
            }
        }
    }

    /// A traced success of `handler` in `pid` at `ts_ns`: the processes that failed it before
    /// have recovered.
    pub(crate) fn success(&mut self, handler: u32, pid: u32, ts_ns: u64) {
        let seen = self.seen.entry(handler).or_default();
        bounded_insert(&mut seen.0, pid);
        if seen.1.len() < MAX_PIDS || seen.1.contains_key(&pid) {
            seen.1.insert(pid, ts_ns);
        }
        for (_, p) in self
            .patterns
            .range_mut((handler, 0, 0)..=(handler, u32::MAX, u32::MAX))
        {
            if p.failed.get(&pid).is_some_and(|&t| t < ts_ns) {
                p.recovered.insert(pid);
            }
        }
    }

    /// Increase of a pattern (0 when nothing is known).
    fn increase(&self, key: (u32, u32, u32)) -> f64 {
        let Some(p) = self.patterns.get(&key) else {
            return 0.0;
        };
        let n = p.failed.len().max(1) as f64;
        let fails_with = 1.0 - p.recovered.len() as f64 / n;
        let (all, ok) = self
            .seen
            .get(&key.0)
            .map_or((0, 0), |(a, o)| (a.len(), o.len()));
        let fails_all = 1.0 - ok as f64 / all.max(1) as f64;
        fails_with - fails_all
    }

    /// The verdict on `key` named (`handler`, `origin`); `core_origin`: the origin is a verbs
    /// core function; `handler_failed`: the handler itself returned an error.
    pub(crate) fn judge(
        &self,
        key: (u32, u32, u32),
        names: (&str, &str),
        core_origin: bool,
        handler_failed: bool,
    ) -> Verdict {
        let increase = self.increase(key);
        let verdict = |expected, why: String| Verdict {
            expected,
            why,
            increase,
        };
        let (handler, origin) = names;
        if let Some(p) = self
            .pinned
            .iter()
            .find(|p| p.handler == handler && p.origin == origin && p.errno == key.2)
        {
            let why = if p.expected {
                "pinned expected in the configuration"
            } else {
                "pinned not expected in the configuration"
            };
            return verdict(p.expected, why.into());
        }
        if key.2 == ENOENT && core_origin && !handler_failed {
            return verdict(
                true,
                "kernel-normal: ENOENT of an optional attribute in the verbs core, the handler succeeded (IS_UVERBS_COPY_ERR ignores ENOENT)".into(),
            );
        }
        let Some(p) = self.patterns.get(&key) else {
            return verdict(false, "not seen before".into());
        };
        let (n, r) = (p.failed.len(), p.recovered.len());
        if n < MIN_PROCESSES {
            return verdict(
                false,
                format!("seen in {n} process(es), fewer than {MIN_PROCESSES}: not learned yet"),
            );
        }
        let why = format!(
            "learned: failed in {n} processes, {r} went on to succeed with {handler}; Increase {increase:.2}"
        );
        verdict(increase <= MAX_INCREASE, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_that_processes_recover_from_is_learned_expected() {
        let mut e = Expected::default();
        let benign = (10, 20, 22);
        let fatal = (10, 21, 12);
        for pid in 100..105 {
            e.failure(benign, pid, 1000);
            e.success(10, pid, 2000);
        }
        // one process fails another way and never succeeds
        e.failure(fatal, 200, 1500);
        // the one that failed before any success: recovered only by a later success
        e.success(10, 300, 10);
        e.failure(benign, 300, 20);
        // a failure learned after its process's later success was read (the chain is judged
        // a gap after the failure): recovered
        e.success(10, 301, 50);
        e.failure(benign, 301, 40);
        let names = ("ib_uverbs_reg_mr", "x");
        let v = e.judge(benign, names, false, true);
        assert!(v.expected, "{v:?}");
        assert!(
            v.why.contains("failed in 7 processes, 6 went on"),
            "{}",
            v.why
        );
        let v = e.judge(fatal, names, false, true);
        assert!(!v.expected, "{v:?}");
        assert!(v.why.contains("fewer than 3"), "{}", v.why);
        // three processes that never recover: Increase far above the bound
        for pid in 400..403 {
            e.failure(fatal, pid, 1);
        }
        let v = e.judge(fatal, names, false, true);
        assert!(!v.expected && v.increase > 0.5, "{v:?}");
        // kernel-normal and pinned
        assert!(e.judge((10, 5, 2), names, true, false).expected);
        assert!(!e.judge((10, 5, 2), names, true, true).expected);
        e.pinned
            .push(Pinned::parse("ib_uverbs_reg_mr:x:ENOMEM").expect("pin"));
        assert!(e.judge(fatal, names, false, true).expected);
        // pinned not expected overrides what was learned (the benign pattern is learned
        // expected above)
        e.pinned
            .push(Pinned::parse_not_expected("ib_uverbs_reg_mr:x:EINVAL").expect("pin"));
        let v = e.judge(benign, names, false, true);
        assert!(
            !v.expected && v.why.contains("pinned not expected"),
            "{v:?}"
        );
        assert!(Pinned::parse_not_expected("a:b")
            .is_err_and(|e| e.to_string().starts_with("--baseline-not-expected")));
        assert_eq!(Pinned::parse("a:b:22").map(|p| p.errno).ok(), Some(22));
        assert!(Pinned::parse("a:b").is_err());
        assert!(Pinned::parse("a:b:ENOPE").is_err());
    }
}

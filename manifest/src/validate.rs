//! Validation of a manifest read from a file, the same for every command (`check`, `diff`,
//! `coverage`, `collect`). Serde checks the shape and the vocabulary (an `attach: teleport` or
//! `layer: 7` is refused while parsing, see [`crate::vocab`]; so is a `pins_user_memory` that is
//! not a boolean, or one on an excluded function, while a probe without it, as every set
//! written before it existed, does not pin user memory); this checks what the shape cannot:
//! which rules a probe or an excluded function may carry, that probe ids are unique and small,
//! that a clone-only probe names its clone and that `calls` name existing probes.

use std::collections::BTreeSet;

use crate::input::InputError;
use crate::types::{Manifest, MANIFEST_WHAT, SCHEMA_ID};
use crate::vocab::{Attach, Rule};

/// Probe ids above this are refused (the collector sizes its BPF tables by the largest id).
pub const MAX_PROBE_ID: u32 = 1 << 16;

fn rule_in(origin: &str, what: String, rule: Rule, allowed: &[Rule]) -> Result<(), String> {
    if allowed.contains(&rule) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|r| r.as_str()).collect();
    Err(format!(
        "{origin}: {what}: rule `{rule}`: expected one of {}",
        names.join(", ")
    ))
}

/// Why a manifest (or the union of two) is refused; each displays as one line naming the
/// origin, where in it, and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The text is refused before parsing (a byte-order mark, nesting too deep).
    #[error(transparent)]
    Input(#[from] InputError),
    /// Not a manifest's YAML: `location` is `:line:column` where known.
    #[error("{origin}{location}: {message}")]
    Yaml {
        origin: String,
        location: String,
        message: String,
    },
    /// Another schema's manifest.
    #[error("{origin}: schema `{found}`: expected `{SCHEMA_ID}`")]
    Schema { origin: String, found: String },
    /// A value the shape cannot check (rules, ids, calls): the whole line.
    #[error("{0}")]
    Invalid(String),
    /// Sets that cannot be joined ([`crate::union()`]): the whole line.
    #[error("{0}")]
    Union(String),
}

/// The line as a message, for callers whose errors are text.
impl From<ManifestError> for String {
    fn from(e: ManifestError) -> Self {
        e.to_string()
    }
}

// Reading a manifest is parsing it and then validating it: here, so that the types (types.rs)
// do not depend on their validation while it depends on them.
impl Manifest {
    /// Parse and validate a manifest ([`crate::validate()`]); errors name the origin, line and
    /// column, and the field or value expected.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ManifestError> {
        crate::input::check_text(text, origin, MANIFEST_WHAT)?;
        crate::input::check_yaml_nesting(text, origin)?;
        let m: Manifest = serde_yaml::from_str(text).map_err(|e| ManifestError::Yaml {
            origin: origin.to_string(),
            location: e
                .location()
                .map(|l| format!(":{}:{}", l.line(), l.column()))
                .unwrap_or_default(),
            message: e.to_string(),
        })?;
        if m.schema != SCHEMA_ID {
            return Err(ManifestError::Schema {
                origin: origin.to_string(),
                found: m.schema,
            });
        }
        validate(&m, origin)?;
        Ok(m)
    }
}

/// Check the values of a parsed manifest; the error names the origin, the probe (by id and
/// function) or excluded function, the field and the values expected.
pub fn validate(m: &Manifest, origin: &str) -> Result<(), ManifestError> {
    check_values(m, origin).map_err(ManifestError::Invalid)
}

fn check_values(m: &Manifest, origin: &str) -> Result<(), String> {
    let mut ids = BTreeSet::new();
    for p in &m.probes {
        let what = || format!("probe {} ({})", p.id, p.function);
        if p.id >= MAX_PROBE_ID {
            return Err(format!(
                "{origin}: {}: id {}: expected an id below {MAX_PROBE_ID}",
                what(),
                p.id
            ));
        }
        if !ids.insert(p.id) {
            return Err(format!(
                "{origin}: {}: id {} appears twice: expected unique probe ids",
                what(),
                p.id
            ));
        }
        rule_in(origin, what(), p.rule, &[Rule::Focus, Rule::Override])?;
        if p.attach == Attach::CloneOnly && p.attach_symbol.is_none() {
            return Err(format!(
                "{origin}: {}: attach `clone-only` without attach_symbol: expected the clone's symbol",
                what()
            ));
        }
    }
    for p in &m.probes {
        if let Some(c) = p.calls.iter().find(|c| !ids.contains(*c)) {
            return Err(format!(
                "{origin}: probe {} ({}): calls {c}: expected the id of a probe in this manifest",
                p.id, p.function
            ));
        }
    }
    let excluded_rules: Vec<Rule> = Rule::ALL
        .iter()
        .copied()
        .filter(|r| *r != Rule::Focus)
        .collect();
    for e in &m.excluded {
        let what = format!("excluded {} ({})", e.function, e.file);
        rule_in(origin, what, e.rule, &excluded_rules)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::types::Manifest;

    const M: &str = include_str!("../../generated/linux-6.12/rxe/manifest.yaml");

    fn err(from: &str, to: &str) -> String {
        let text = M.replacen(from, to, 1);
        assert_ne!(text, M, "`{from}` not in the manifest");
        Manifest::from_yaml(&text, "m.yaml")
            .expect_err("invalid")
            .to_string()
    }

    #[test]
    fn checked_in_manifest_is_valid() {
        Manifest::from_yaml(M, "m.yaml").expect("valid");
    }

    #[test]
    fn unknown_values_duplicate_ids_and_dangling_calls_are_refused() {
        let e = err("attach: fexit", "attach: teleport");
        assert!(
            e.contains("attach `teleport`: expected one of fexit,"),
            "{e}"
        );
        let e = err("layer: core", "layer: 7");
        assert!(e.contains("layer `7`: expected one of core, vendor"), "{e}");
        let e = err("- id: 1\n", "- id: 0\n");
        assert!(e.contains("id 0 appears twice"), "{e}");
        let e = err("rule: cleanup", "rule: sometimes");
        assert!(e.contains("rule `sometimes`"), "{e}");
    }

    #[test]
    fn the_owner_fact_is_a_boolean_of_probes_and_absent_in_older_sets() {
        let pin = "  focus: helper\n  pins_user_memory: true\n";
        assert_eq!(M.matches(pin).count(), 1, "ib_umem_get carries the fact");
        let m = Manifest::from_yaml(M, "m.yaml").expect("valid");
        let marked: Vec<&str> = m
            .probes
            .iter()
            .filter(|p| p.pins_user_memory)
            .map(|p| p.function.as_str())
            .collect();
        assert_eq!(marked, ["ib_umem_get"]);
        // a set written before the field existed loads, nothing pinning
        let older = M.replacen(pin, "  focus: helper\n", 1);
        let m = Manifest::from_yaml(&older, "old.yaml").expect("an older set loads");
        assert!(m.probes.iter().all(|p| !p.pins_user_memory));
        let e = err("pins_user_memory: true", "pins_user_memory: maybe");
        assert!(
            e.contains("m.yaml:") && e.contains("expected a boolean"),
            "{e}"
        );
        let e = err(
            "  rule: cleanup\n",
            "  rule: cleanup\n  pins_user_memory: true\n",
        );
        assert!(e.contains("unknown field `pins_user_memory`"), "{e}");
    }

    #[test]
    fn a_probe_rule_on_an_excluded_function_is_refused() {
        let e = err("rule: cleanup", "rule: focus");
        assert!(
            e.contains("rule `focus`: expected one of read-only,"),
            "{e}"
        );
        assert!(e.starts_with("m.yaml: excluded "), "{e}");
    }
}

//! Validation of a manifest read from a file, the same for every command (`check`, `diff`,
//! `coverage`, `collect`): serde checks the shape; this checks the values the shape cannot
//! (an `attach: teleport` or `layer: 7` would otherwise be compared, diffed and counted as if
//! meaningful), that probe ids are unique and that `calls` name existing probes.

use std::collections::BTreeSet;

use analyzer::completeness::DegradedKind;
use analyzer::traceability::AttachVerdict;
use heuristics::{FocusKind, Layer, Object, Rule};

use crate::manifest::Manifest;

/// Probe ids above this are refused (the collector sizes its BPF tables by the largest id).
pub const MAX_PROBE_ID: u32 = 1 << 16;

fn rule_str(r: Rule) -> &'static str {
    // Exhaustive on purpose: a new rule fails to compile here until it is listed below.
    match r {
        Rule::ReadOnly | Rule::Generic | Rule::Cleanup | Rule::Focus => r.as_str(),
        Rule::VendorGate | Rule::NotFocus | Rule::Override => r.as_str(),
    }
}

const RULES: &[Rule] = &[
    Rule::ReadOnly,
    Rule::Generic,
    Rule::Cleanup,
    Rule::Focus,
    Rule::VendorGate,
    Rule::NotFocus,
    Rule::Override,
];

fn layer_str(l: Layer) -> &'static str {
    match l {
        Layer::Core => "core",
        Layer::Vendor => "vendor",
    }
}

fn focus_str(f: FocusKind) -> &'static str {
    match f {
        FocusKind::Handler => "handler",
        FocusKind::OpsCaller => "ops-caller",
        FocusKind::OpsImpl => "ops-impl",
        FocusKind::Hardware => "hardware",
        FocusKind::Helper => "helper",
    }
}

const FOCUS: &[FocusKind] = &[
    FocusKind::Handler,
    FocusKind::OpsCaller,
    FocusKind::OpsImpl,
    FocusKind::Hardware,
    FocusKind::Helper,
];

const OBJECTS: &[Object] = &[
    Object::QP,
    Object::MR,
    Object::PD,
    Object::CQ,
    Object::Other,
];

fn attach_values() -> Vec<&'static str> {
    [
        AttachVerdict::Fexit,
        AttachVerdict::CloneOnly {
            symbol: String::new(),
        },
        AttachVerdict::Inlined,
        AttachVerdict::NotBuilt,
        AttachVerdict::NoBtf,
        AttachVerdict::NoFtrace,
        AttachVerdict::TooManyArgs { nargs: 0 },
    ]
    .iter()
    .map(AttachVerdict::as_str)
    .collect()
}

const RETURNS: &[&str] = &["int", "ptr", "bool", "void"];
const RELATIONS: &[&str] = &["caller", "callee"];

fn one_of(
    origin: &str,
    what: String,
    field: &str,
    value: &str,
    known: &[&str],
) -> Result<(), String> {
    if known.contains(&value) {
        return Ok(());
    }
    Err(format!(
        "{origin}: {what}: {field} `{value}`: expected one of {}",
        known.join(", ")
    ))
}

/// Check the values of a parsed manifest; the error names the origin, the probe (by id and
/// function) or excluded function, the field and the values expected.
pub fn validate(m: &Manifest, origin: &str) -> Result<(), String> {
    let layers: Vec<&str> = [Layer::Core, Layer::Vendor].map(layer_str).to_vec();
    let objects: Vec<&str> = OBJECTS.iter().map(|o| o.as_str()).collect();
    let focus: Vec<&str> = FOCUS.iter().map(|f| focus_str(*f)).collect();
    let attach = attach_values();
    let probe_rules = [rule_str(Rule::Focus), rule_str(Rule::Override)];
    let excluded_rules: Vec<&str> = RULES
        .iter()
        .map(|r| rule_str(*r))
        .filter(|r| *r != "focus")
        .collect();
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
        one_of(origin, what(), "layer", &p.layer, &layers)?;
        one_of(origin, what(), "object", &p.object, &objects)?;
        one_of(origin, what(), "rule", &p.rule, &probe_rules)?;
        if let Some(f) = &p.focus {
            one_of(origin, what(), "focus", f, &focus)?;
        }
        one_of(origin, what(), "returns", &p.returns, RETURNS)?;
        one_of(origin, what(), "attach", &p.attach, &attach)?;
        if p.attach == "clone-only" && p.attach_symbol.is_none() {
            return Err(format!(
                "{origin}: {}: attach `clone-only` without attach_symbol: expected the clone's symbol",
                what()
            ));
        }
        if let Some(s) = &p.suggest {
            one_of(origin, what(), "suggest.relation", &s.relation, RELATIONS)?;
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
    for e in &m.excluded {
        let what = format!("excluded {} ({})", e.function, e.file);
        one_of(origin, what, "rule", &e.rule, &excluded_rules)?;
    }
    let kinds: Vec<&str> = DegradedKind::ALL.iter().map(|k| k.as_str()).collect();
    for d in &m.degraded {
        one_of(
            origin,
            format!("degraded {}", d.file),
            "kind",
            &d.kind,
            &kinds,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::manifest::Manifest;

    const M: &str = include_str!("../../generated/linux-6.12/rxe/manifest.yaml");

    fn err(from: &str, to: &str) -> String {
        let text = M.replacen(from, to, 1);
        assert_ne!(text, M, "`{from}` not in the manifest");
        Manifest::from_yaml(&text, "m.yaml").expect_err("invalid")
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
}

//! The union set of two or more vendors of one kernel (`probegen bundle` writes one per pair
//! of vendors, for hosts with two drivers loaded): the manifest (`manifest::union`) and its
//! BPF C, rendered as `generate` renders any set.

use manifest::Manifest;

/// The union manifest of `sets`, validated, with its `probes.bpf.c`.
pub fn union_set(sets: &[&Manifest]) -> Result<(Manifest, String), crate::Error> {
    let m = manifest::union(sets)?;
    manifest::validate(&m, &format!("the union {}", m.vendor))?;
    let vendors: Vec<&str> = sets.iter().map(|s| s.vendor.as_str()).collect();
    let refresh = format!(
        "probegen bundle (the union of the {} sets of {})",
        vendors.join(" and "),
        m.kernel.version
    );
    let c = codegen::render_bpf(&m, &refresh).map_err(|source| crate::Error::UnionRender {
        vendor: m.vendor.clone(),
        source,
    })?;
    Ok((m, c))
}

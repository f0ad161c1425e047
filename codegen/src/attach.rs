//! A leaf the manifest's builders share (the control-path probes in `build`, the data-plane
//! probes in `dataplane`): a function's module and its attach verdict in the manifest's words.

use analyzer::{AttachVerdict, Binaries, CallGraph, FnId};
use manifest::Attach;

/// The module a function is built into, `inline` for one the headers inline.
pub(crate) fn module_name(g: &CallGraph, id: FnId) -> String {
    g.node(id).module.clone().unwrap_or_else(|| "inline".into())
}

pub(crate) fn attach_of(g: &CallGraph, bins: Option<&Binaries>, id: FnId) -> AttachVerdict {
    let n = g.node(id);
    if !n.built {
        return AttachVerdict::NotBuilt;
    }
    match bins {
        Some(b) => b.verdict(n.module.as_deref(), &n.name),
        None if n.module.is_none() => AttachVerdict::Inlined,
        // No binaries to check against: the source says it is a real function.
        None => AttachVerdict::Fexit,
    }
}

/// The attach verdict in the manifest's vocabulary.
pub(crate) fn attach(v: &AttachVerdict) -> Attach {
    match v {
        AttachVerdict::Fexit => Attach::Fexit,
        AttachVerdict::CloneOnly { .. } => Attach::CloneOnly,
        AttachVerdict::Inlined => Attach::Inlined,
        AttachVerdict::NotBuilt => Attach::NotBuilt,
        AttachVerdict::NoBtf => Attach::NoBtf,
        AttachVerdict::NoFtrace => Attach::NoFtrace,
        AttachVerdict::TooManyArgs { .. } => Attach::TooManyArgs,
    }
}

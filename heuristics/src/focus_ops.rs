//! Which `ib_device_ops` members are focus (create or update a QP, MR, PD or CQ), derived
//! from the struct's declaration in the analysed tree rather than a list of names, so a
//! renamed or added member is followed (7.x: `.resize_user_cq`, `.create_user_cq`).

use std::collections::BTreeMap;

use analyzer::CallGraph;
use analyzer::{struct_pointee, OpsMemberDecl};
use serde::Serialize;

use crate::rules::{object_named, Rules};
use manifest::Object;

/// Why a member is (or is not) focus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Derivation {
    /// Returns a pointer to the object: `struct ib_mr *(*reg_user_mr)(...)`.
    Constructor,
    /// Takes the object first and its name has an update token.
    Updates { token: String },
    /// `focus_ops.include` in the rules.
    Included { reason: String },
    /// `focus_ops.exclude` in the rules (a member the derivation would keep).
    Excluded { reason: String },
}

#[derive(Debug, Clone, Serialize)]
pub struct FocusMember {
    pub member: String,
    pub object: Object,
    pub derivation: Derivation,
    /// Line in the header that declares the struct (0 for an include of an undeclared name).
    pub line: usize,
}

impl FocusMember {
    pub fn is_focus(&self) -> bool {
        !matches!(self.derivation, Derivation::Excluded { .. })
    }

    /// One line for the report: `resize_user_cq (CQ): updates (\`resize\`)`.
    pub fn explain(&self) -> String {
        match &self.derivation {
            Derivation::Constructor => "returns the object (constructor)".into(),
            Derivation::Updates { token } => format!("takes the object, name updates (`{token}`)"),
            Derivation::Included { reason } => format!("rules include: {reason}"),
            Derivation::Excluded { reason } => format!("rules exclude: {reason}"),
        }
    }
}

/// The focus members of one tree, and the header they were read from.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FocusOps {
    pub header: String,
    /// Every derived member, excluded ones included (with `Derivation::Excluded`), by name.
    pub members: BTreeMap<String, FocusMember>,
}

#[derive(Debug, thiserror::Error)]
pub enum FocusOpsError {
    #[error(
        "no header under include/rdma defines `struct ib_device_ops {{ ... }}`: the focus \
         members cannot be derived (is include/rdma/ib_verbs.h part of the tree?)"
    )]
    NoOpsStruct,
}

fn tokens(name: &str) -> Vec<&str> {
    name.split('_').filter(|t| !t.is_empty()).collect()
}

impl FocusOps {
    /// Derive from the graph's `struct ib_device_ops`, then apply the rules' overrides.
    pub fn derive(g: &CallGraph, rules: &Rules) -> Result<Self, FocusOpsError> {
        let (header, decls) = g.ops_struct().ok_or(FocusOpsError::NoOpsStruct)?;
        let mut members = BTreeMap::new();
        for d in decls {
            if let Some((object, derivation)) = derive_member(d, rules) {
                members.insert(
                    d.name.clone(),
                    FocusMember {
                        member: d.name.clone(),
                        object,
                        derivation,
                        line: d.line,
                    },
                );
            }
        }
        for o in &rules.focus_ops.exclude {
            if let Some(m) = members.get_mut(&o.member) {
                m.derivation = Derivation::Excluded {
                    reason: o.reason.clone(),
                };
            }
        }
        for o in &rules.focus_ops.include {
            let object = object_named(o.object.as_deref().unwrap_or(""));
            let line = decls
                .iter()
                .find(|d| d.name == o.member)
                .map_or(0, |d| d.line);
            members.insert(
                o.member.clone(),
                FocusMember {
                    member: o.member.clone(),
                    object,
                    derivation: Derivation::Included {
                        reason: o.reason.clone(),
                    },
                    line,
                },
            );
        }
        Ok(Self {
            header: header.to_string(),
            members,
        })
    }

    /// The object of a focus member; `None` for other members and excluded ones.
    pub fn object(&self, member: &str) -> Option<Object> {
        self.members
            .get(member)
            .filter(|m| m.is_focus())
            .map(|m| m.object)
    }

    pub fn contains(&self, member: &str) -> bool {
        self.object(member).is_some()
    }

    /// Focus members, in name order.
    pub fn focus(&self) -> impl Iterator<Item = &FocusMember> {
        self.members.values().filter(|m| m.is_focus())
    }
}

/// The object a member works on and why it creates or updates it; `None` when it does not.
fn derive_member(d: &OpsMemberDecl, rules: &Rules) -> Option<(Object, Derivation)> {
    let objects = &rules.focus_ops.objects;
    let object_of = |ty: &str| {
        struct_pointee(ty)
            .and_then(|s| objects.get(s))
            .map(|o| object_named(o))
    };
    let toks = tokens(&d.name);
    let has = |list: &[String]| toks.iter().find(|t| list.iter().any(|l| l == *t)).copied();
    if has(&rules.cleanup_tokens).is_some() {
        return None;
    }
    if struct_pointee(&d.returns).is_some() {
        // Returns an object: a constructor of it, focus only when it is a focus object.
        return object_of(&d.returns).map(|o| (o, Derivation::Constructor));
    }
    let first_object = d.params.iter().find_map(|p| struct_pointee(p))?;
    let object = objects.get(first_object).map(|o| object_named(o))?;
    if has(&rules.read_only_tokens).is_some() {
        return None;
    }
    let token = has(&rules.update_tokens)?;
    Some((
        object,
        Derivation::Updates {
            token: token.to_string(),
        },
    ))
}

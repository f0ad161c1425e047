//! The manifest's closed vocabularies as enums. Each is written and read as the same string
//! it always was (the YAML is unchanged), its schema is a plain string (the published schema is
//! unchanged), and an unknown value is refused while parsing with the values expected.
//!
//! Values order by their name, as the strings they replace did, so every sorted listing built
//! from them keeps its order.

use std::fmt;

/// A string that names no value of a vocabulary: the field, the value, the values expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} `{value}`: expected one of {}", expected.join(", "))]
pub struct UnknownValue {
    pub field: &'static str,
    pub value: String,
    pub expected: &'static [&'static str],
}

/// Defines a string-valued enum: `as_str`, `ALL`, `parse`, `Display`, ordering by name,
/// serde as the string, and a string JSON Schema.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $field:literal {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value as written in the manifest.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value a manifest string names; the error names the field and the values
            /// expected.
            pub fn parse(s: &str) -> Result<Self, UnknownValue> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownValue {
                        field: $field,
                        value: other.to_string(),
                        expected: &[$($text),+],
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Ord for $name {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                self.as_str().cmp(other.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                // Through String: a YAML scalar such as `7` is then refused by value, with
                // the values expected, not by type.
                let s = <String as serde::Deserialize>::deserialize(d)?;
                $name::parse(&s).map_err(serde::de::Error::custom)
            }
        }

        impl schemars::JsonSchema for $name {
            fn is_referenceable() -> bool {
                false
            }

            fn schema_name() -> String {
                String::schema_name()
            }

            fn json_schema(g: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
                String::json_schema(g)
            }
        }
    };
}

string_enum! {
    /// How a probe attaches (the binary's verdict on the function).
    Attach, "attach" {
        /// fexit by name.
        Fexit => "fexit",
        /// Only a compiler clone exists: a kretprobe on `attach_symbol` instead.
        CloneOnly => "clone-only",
        Inlined => "inlined",
        NotBuilt => "not-built",
        NoBtf => "no-btf",
        NoFtrace => "no-ftrace",
        /// More arguments than the kernel's fexit trampoline takes.
        TooManyArgs => "too-many-args",
    }
}

impl Attach {
    /// A BPF program is generated for the probe: fexit (with its kprobe pair), the kretprobe
    /// of a clone-only function, or, in a module without BTF, the kprobe pair (the fexit
    /// program beside it attaches only where the module turns out to have BTF).
    pub fn has_program(self) -> bool {
        matches!(self, Attach::Fexit | Attach::CloneOnly | Attach::NoBtf)
    }
}

string_enum! {
    /// What a data-plane probe sees die.
    DataPlaneClass, "class" {
        /// An asynchronous event with an error type (QP fatal, CQ error, port error ...).
        AsyncEvent => "async_event",
        /// A work completion with an error status (the kernel decides it: Soft-RoCE).
        Completion => "completion",
        /// A QP moved to the error state by the provider.
        QpError => "qp_error",
        /// Where the core hands a QP's new attributes to the driver: on a successful RTR,
        /// the QP's peer (remote QP number, destination GID and its type) is kept for the
        /// QP's later errors. Never a record.
        Peer => "peer",
    }
}

string_enum! {
    /// How a data-plane probe was found (its evidence's kind).
    DataPlaneVia, "via" {
        /// Installed as an object's event callback by a function the entries reach.
        Installed => "installed",
        /// A vendor function that raises an error event itself.
        Raised => "raised",
        /// Calls the CQ's completion callback below a function that sets an error status.
        Completes => "completes",
        /// Stores the error state into a QP it was handed.
        QpState => "qp-state",
        /// Hands a QP's new attributes to the function that dispatches the driver's
        /// `modify_qp`.
        Dispatches => "dispatches",
    }
}

string_enum! {
    /// Where a function lives: the RDMA core or the vendor driver.
    Layer, "layer" {
        Core => "core",
        Vendor => "vendor",
    }
}

string_enum! {
    /// The verbs object a function works on.
    Object, "object" {
        QP => "QP",
        MR => "MR",
        PD => "PD",
        CQ => "CQ",
        Other => "other",
    }
}

impl Object {
    /// The verbs objects proper (without `other`), in the order reports list them.
    pub const VERBS: &'static [Object] = &[Object::QP, Object::MR, Object::PD, Object::CQ];
}

string_enum! {
    /// The selection rule that kept (focus, override) or dropped a function.
    Rule, "rule" {
        ReadOnly => "read-only",
        Generic => "generic",
        Cleanup => "cleanup",
        Focus => "focus",
        VendorGate => "vendor-gate",
        NotFocus => "not-focus",
        Override => "override",
    }
}

string_enum! {
    /// What R4 evidence kept a function.
    FocusKind, "focus" {
        Handler => "handler",
        OpsCaller => "ops-caller",
        OpsImpl => "ops-impl",
        Hardware => "hardware",
        Helper => "helper",
    }
}

string_enum! {
    /// The return type class a program tests for failure.
    ReturnKind, "returns" {
        Int => "int",
        Ptr => "ptr",
        Bool => "bool",
        Void => "void",
    }
}

string_enum! {
    /// How a suggested attachable function relates to the one that cannot be attached.
    Relation, "suggest.relation" {
        Caller => "caller",
        Callee => "callee",
    }
}

string_enum! {
    /// Why an `ib_device_ops` member is (or is not) focus.
    Derivation, "derivation" {
        Constructor => "constructor",
        Updates => "updates",
        Included => "included",
        Excluded => "excluded",
    }
}

string_enum! {
    /// What kind of gap the input had (`degraded`).
    GapKind, "kind" {
        Unreadable => "unreadable",
        Undecodable => "undecodable",
        UnbalancedConditional => "unbalanced-conditional",
        ParseErrors => "parse-errors",
        TooDeep => "too-deep",
        ConfigMissing => "config-missing",
        MakefileMissing => "makefile-missing",
        ModuleMissing => "module-missing",
    }
}

string_enum! {
    /// What decides one error site of a probed function, classified from the code
    /// (`error_sites`): who can act on the failure follows from it.
    SiteClass, "class" {
        /// A check of what the caller asked for: a parameter, command or attribute field
        /// compared with a device limit or an allowed set, a missing argument, the caller's
        /// memory that could not be pinned, a permission.
        Request => "request",
        /// A failed allocation or a charge against a limit (memory, rdma cgroup, pinned pages).
        Resources => "resources",
        /// The status of a hardware or firmware command.
        Hardware => "hardware",
        /// The object is in the wrong state for what was asked (a transition).
        State => "state",
        /// The error of a callee, returned as it came: a probe of its own (`callee_probe`) or
        /// a function the set does not probe.
        Propagated => "propagated",
        /// An error returned without a check (an operation the layer does not support).
        Unconditional => "unconditional",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_and_unknown_values_name_the_expected_ones() {
        for a in Attach::ALL {
            assert_eq!(Attach::parse(a.as_str()), Ok(*a));
        }
        let e = Layer::parse("7").expect_err("unknown");
        assert_eq!(e.to_string(), "layer `7`: expected one of core, vendor");
        let y: Rule = serde_yaml::from_str("not-focus").expect("rule");
        assert_eq!(y, Rule::NotFocus);
        assert_eq!(
            serde_yaml::to_string(&Object::Other).ok().as_deref(),
            Some("other\n")
        );
    }

    #[test]
    fn values_order_by_name() {
        assert!(Object::CQ < Object::MR && Object::QP < Object::Other);
        assert!(Layer::Core < Layer::Vendor);
    }
}

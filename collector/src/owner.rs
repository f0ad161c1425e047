//! Who gets the ticket: the owner of a failure chain, decided from its origin probe (the
//! deepest probed function that failed: its layer, the R4 focus evidence that kept it and
//! whether it pins user memory, all typed facts of the manifest derived from the call graph)
//! and the origin's errno.
//!
//! The decision, first match wins (the table in `collector/README.md` is this function):
//!
//! | # | origin                                                              | errno                                      | owner             |
//! |---|---------------------------------------------------------------------|--------------------------------------------|-------------------|
//! | 1 | any layer                                                           | ENOMEM ENOSPC EAGAIN EMFILE ENFILE ENOBUFS | `resources`       |
//! | 2 | a hardware-command issuer (`focus: hardware`)                       | EIO ENXIO EBUSY ETIMEDOUT EREMOTEIO        | `device-firmware` |
//! | 3 | core layer: a uverbs handler (`focus: handler`) or a function that pins user memory (`pins_user_memory: true`) | EINVAL EFAULT EPERM EACCES | `application` |
//! | 4 | vendor layer                                                        | any other                                  | `vendor-driver`   |
//! | 5 | core layer                                                          | any other                                  | `verbs-core`      |
//!
//! Why this order: exhaustion is nobody's bug in the stack (a quota, a limit, a leak in the
//! job) whichever layer noticed it; a command the device did not answer or answered with an
//! error status is the device's; a handler or the user-memory pinning rejecting arguments is
//! the caller's (the pinning's EFAULT is the application's unmapped buffer, whatever the
//! kernel calls the function: `ib_umem_get` up to 6.x, `__ib_umem_get_va` on 7.x); anything
//! else is a bug or a limitation of the layer that failed first. No function name is read:
//! a name says nothing a kernel release cannot change.
//!
//! A set written before `pins_user_memory` existed has no probe with the fact: its pinning
//! failures go by layer (`verbs-core`) until the set is regenerated.

use serde::{Deserialize, Serialize};

use manifest::{FocusKind, Layer};

use crate::probes::ProbeInfo;

/// The team a failure chain is routed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Owner {
    /// The caller's arguments were rejected at the uverbs boundary.
    #[serde(rename = "application")]
    Application,
    /// ib_core / ib_uverbs failed on its own.
    #[serde(rename = "verbs-core")]
    VerbsCore,
    /// The vendor driver failed (not a device command).
    #[serde(rename = "vendor-driver")]
    VendorDriver,
    /// A hardware command timed out or came back with an error status.
    #[serde(rename = "device-firmware")]
    DeviceFirmware,
    /// Memory, queue or descriptor exhaustion at any layer.
    #[serde(rename = "resources")]
    Resources,
}

impl Owner {
    pub const ALL: [Owner; 5] = [
        Owner::Application,
        Owner::VerbsCore,
        Owner::VendorDriver,
        Owner::DeviceFirmware,
        Owner::Resources,
    ];

    /// The serialised name (JSONL, ClickHouse, Prometheus label).
    pub fn as_str(self) -> &'static str {
        match self {
            Owner::Application => "application",
            Owner::VerbsCore => "verbs-core",
            Owner::VendorDriver => "vendor-driver",
            Owner::DeviceFirmware => "device-firmware",
            Owner::Resources => "resources",
        }
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Exhaustion: ENOMEM, ENOSPC, EAGAIN, EMFILE, ENFILE, ENOBUFS.
const RESOURCE_ERRNOS: [u32; 6] = [12, 28, 11, 24, 23, 105];
/// A device command that failed: EIO, ENXIO, EBUSY, ETIMEDOUT, EREMOTEIO.
const DEVICE_ERRNOS: [u32; 5] = [5, 6, 16, 110, 121];
/// Arguments or permissions of the caller rejected: EINVAL, EFAULT, EPERM, EACCES.
const CALLER_ERRNOS: [u32; 4] = [22, 14, 1, 13];

/// The parts of an origin probe the decision reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Origin {
    /// The manifest's `layer`.
    pub layer: Layer,
    /// The manifest's `focus` (`None`: kept by an override).
    pub focus: Option<FocusKind>,
    /// The manifest's `pins_user_memory`.
    pub pins_user_memory: bool,
}

impl From<&ProbeInfo> for Origin {
    fn from(p: &ProbeInfo) -> Self {
        Origin {
            layer: p.layer,
            focus: p.focus,
            pins_user_memory: p.pins_user_memory,
        }
    }
}

/// The owner of a chain whose origin is `o` and failed with positive `errno` (0: no errno).
pub(crate) fn decide(o: Origin, errno: u32) -> Owner {
    if RESOURCE_ERRNOS.contains(&errno) {
        return Owner::Resources;
    }
    if o.focus == Some(FocusKind::Hardware) && DEVICE_ERRNOS.contains(&errno) {
        return Owner::DeviceFirmware;
    }
    let faces_the_caller = o.focus == Some(FocusKind::Handler) || o.pins_user_memory;
    match o.layer {
        Layer::Core if faces_the_caller && CALLER_ERRNOS.contains(&errno) => Owner::Application,
        Layer::Core => Owner::VerbsCore,
        Layer::Vendor => Owner::VendorDriver,
    }
}

/// The owner of a chain whose origin is probe `p` (unknown probe: verbs-core, the layer that
/// reported it).
pub fn decide_for(p: Option<&ProbeInfo>, errno: u32) -> Owner {
    match p {
        Some(p) => decide(Origin::from(p), errno),
        None => decide(
            Origin {
                layer: Layer::Core,
                focus: None,
                pins_user_memory: false,
            },
            errno,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::ProbeTable;

    use FocusKind::{Handler, Hardware, Helper, OpsCaller, OpsImpl};
    use Layer::{Core, Vendor};

    fn o(layer: Layer, focus: Option<FocusKind>) -> Origin {
        Origin {
            layer,
            focus,
            pins_user_memory: false,
        }
    }

    /// An origin whose body pins user memory.
    fn pinning(layer: Layer, focus: Option<FocusKind>) -> Origin {
        Origin {
            pins_user_memory: true,
            ..o(layer, focus)
        }
    }

    const EINVAL: u32 = 22;
    const EFAULT: u32 = 14;
    const ENOMEM: u32 = 12;
    const ETIMEDOUT: u32 = 110;
    const EREMOTEIO: u32 = 121;
    const EOPNOTSUPP: u32 = 95;

    #[test]
    fn user_memory_pinning_rejecting_a_bad_address_is_the_application() {
        // 6.x: ib_umem_get; 7.x: __ib_umem_get_va, five wrappers below the driver. Both are
        // core helpers that pin: the fact decides, whatever the function is called.
        let umem = pinning(Core, Some(Helper));
        assert_eq!(decide(umem, EFAULT), Owner::Application);
        assert_eq!(decide(umem, EINVAL), Owner::Application);
        // the same function out of memory: resources; another errno: the core's
        assert_eq!(decide(umem, ENOMEM), Owner::Resources);
        assert_eq!(decide(umem, EOPNOTSUPP), Owner::VerbsCore);
        // kept by an override, still pinning
        assert_eq!(decide(pinning(Core, None), EFAULT), Owner::Application);
    }

    #[test]
    fn a_7x_pinning_origin_from_its_probe_is_the_application() {
        let t = ProbeTable::from_triples(&[
            (0, "__ib_umem_get_va", "ib_core"),
            (1, "ib_umem_get_desc", "ib_core"),
        ])
        .with_focus(0, Helper)
        .with_focus(1, Helper)
        .with_pins_user_memory(0);
        assert_eq!(decide_for(t.get(0), EFAULT), Owner::Application);
        // its caller reaches the pinning only through that probe: a failure of its own
        assert_eq!(decide_for(t.get(1), EFAULT), Owner::VerbsCore);
    }

    #[test]
    fn a_core_helper_without_the_fact_is_the_core_whatever_its_name() {
        // named like the 6.x pinning helpers, but the graph says it pins nothing
        let t = ProbeTable::from_triples(&[(0, "ib_umem_get", "ib_uverbs")]).with_focus(0, Helper);
        assert_eq!(decide_for(t.get(0), EFAULT), Owner::VerbsCore);
    }

    #[test]
    fn a_handler_rejecting_arguments_is_the_application_a_core_helper_is_not() {
        let handler = o(Core, Some(Handler));
        assert_eq!(decide(handler, EINVAL), Owner::Application);
        assert_eq!(decide(handler, 1), Owner::Application); // EPERM
        assert_eq!(decide(handler, ETIMEDOUT), Owner::VerbsCore);
        let caller = o(Core, Some(OpsCaller));
        assert_eq!(decide(caller, EINVAL), Owner::VerbsCore);
    }

    #[test]
    fn hardware_command_issuers_with_device_errnos_are_the_device() {
        let fw = o(Vendor, Some(Hardware));
        assert_eq!(decide(fw, ETIMEDOUT), Owner::DeviceFirmware);
        assert_eq!(decide(fw, EREMOTEIO), Owner::DeviceFirmware);
        assert_eq!(decide(fw, 5), Owner::DeviceFirmware); // EIO
                                                          // a command the driver built and the device refused as invalid: the driver's
        assert_eq!(decide(fw, EINVAL), Owner::VendorDriver);
        assert_eq!(decide(fw, ENOMEM), Owner::Resources);
        // a device errno from a vendor function that issues no command: the driver's
        let imp = o(Vendor, Some(OpsImpl));
        assert_eq!(decide(imp, ETIMEDOUT), Owner::VendorDriver);
    }

    #[test]
    fn vendor_validation_is_the_vendor_driver_and_exhaustion_is_resources_anywhere() {
        let chk = o(Vendor, Some(Helper));
        assert_eq!(decide(chk, EINVAL), Owner::VendorDriver);
        // a vendor function named like the pinning helpers, without the fact: the vendor's
        let t = ProbeTable::from_triples(&[(0, "ib_umem_x", "rdma_rxe")]).with_focus(0, Handler);
        assert_eq!(decide_for(t.get(0), EFAULT), Owner::VendorDriver);
        // the vendor layer is the vendor's even when it pins or fronts the caller: its own
        // checks of the caller's arguments are driver behaviour (table rule 3 is the core's)
        assert_eq!(
            decide(pinning(Vendor, Some(Handler)), EFAULT),
            Owner::VendorDriver
        );
        for e in RESOURCE_ERRNOS {
            for layer in [Core, Vendor] {
                assert_eq!(decide(pinning(layer, Some(Hardware)), e), Owner::Resources);
            }
        }
        // a failure without errno (a NULL return) goes by layer
        assert_eq!(decide(o(Vendor, Some(OpsImpl)), 0), Owner::VendorDriver);
        assert_eq!(decide(o(Core, Some(Handler)), 0), Owner::VerbsCore);
        assert_eq!(decide(pinning(Core, Some(Helper)), 0), Owner::VerbsCore);
        assert_eq!(decide_for(None, EINVAL), Owner::VerbsCore);
    }

    #[test]
    fn names_are_the_serde_names() {
        for w in Owner::ALL {
            let json = serde_json::to_string(&w).expect("serialise");
            assert_eq!(json, format!("\"{}\"", w.as_str()));
            let back: Owner = serde_json::from_str(&json).expect("deserialise");
            assert_eq!(back, w);
        }
    }
}

//! Who gets the ticket: the owner of a failure chain, decided from its origin probe (the
//! deepest probed function that failed: its layer and the R4 focus evidence that kept it) and
//! the origin's errno.
//!
//! The decision, first match wins (the table in `collector/README.md` is this function):
//!
//! | # | origin                                                         | errno                                   | owner             |
//! |---|----------------------------------------------------------------|-----------------------------------------|-------------------|
//! | 1 | any layer                                                      | ENOMEM ENOSPC EAGAIN EMFILE ENFILE ENOBUFS | `resources`    |
//! | 2 | a hardware-command issuer (`focus: hardware`)                  | EIO ENXIO EBUSY ETIMEDOUT EREMOTEIO     | `device-firmware` |
//! | 3 | core: a uverbs handler (`focus: handler`) or `ib_umem_*`       | EINVAL EFAULT EPERM EACCES              | `application`     |
//! | 4 | vendor layer                                                   | any other                               | `vendor-driver`   |
//! | 5 | core layer                                                     | any other                               | `verbs-core`      |
//!
//! Why this order: exhaustion is nobody's bug in the stack (a quota, a limit, a leak in the
//! job) whichever layer noticed it; a command the device did not answer or answered with an
//! error status is the device's; a handler or the user-memory pinning rejecting arguments is
//! the caller's; anything else is a bug or a limitation of the layer that failed first.

use serde::{Deserialize, Serialize};

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
pub struct Origin<'a> {
    /// `core` or `vendor` (the manifest's `layer`)
    pub layer: &'a str,
    /// the manifest's `focus`: handler, ops-caller, ops-impl, hardware, helper
    pub focus: &'a str,
    pub function: &'a str,
}

impl<'a> From<&'a ProbeInfo> for Origin<'a> {
    fn from(p: &'a ProbeInfo) -> Self {
        Origin {
            layer: &p.layer,
            focus: &p.focus,
            function: &p.function,
        }
    }
}

/// The owner of a chain whose origin is `o` and failed with positive `errno` (0: no errno).
pub fn decide(o: Origin<'_>, errno: u32) -> Owner {
    if RESOURCE_ERRNOS.contains(&errno) {
        return Owner::Resources;
    }
    if o.focus == "hardware" && DEVICE_ERRNOS.contains(&errno) {
        return Owner::DeviceFirmware;
    }
    // ib_umem_get, ib_umem_odp_get, ib_umem_dmabuf_get: pinning the caller's memory
    let pins_user_memory = o.function.starts_with("ib_umem_");
    if o.layer != "vendor"
        && (o.focus == "handler" || pins_user_memory)
        && CALLER_ERRNOS.contains(&errno)
    {
        return Owner::Application;
    }
    if o.layer == "vendor" {
        Owner::VendorDriver
    } else {
        Owner::VerbsCore
    }
}

/// The owner of a chain whose origin is probe `p` (unknown probe: verbs-core, the layer that
/// reported it).
pub fn decide_for(p: Option<&ProbeInfo>, errno: u32) -> Owner {
    match p {
        Some(p) => decide(Origin::from(p), errno),
        None => decide(
            Origin {
                layer: "core",
                focus: "",
                function: "",
            },
            errno,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o<'a>(layer: &'a str, focus: &'a str, function: &'a str) -> Origin<'a> {
        Origin {
            layer,
            focus,
            function,
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
        let umem = o("core", "helper", "ib_umem_get");
        assert_eq!(decide(umem, EFAULT), Owner::Application);
        assert_eq!(decide(umem, EINVAL), Owner::Application);
        // the same function out of memory: resources; another errno: the core's
        assert_eq!(decide(umem, ENOMEM), Owner::Resources);
        assert_eq!(decide(umem, EOPNOTSUPP), Owner::VerbsCore);
    }

    #[test]
    fn a_handler_rejecting_arguments_is_the_application_a_core_helper_is_not() {
        let handler = o("core", "handler", "ib_uverbs_reg_mr");
        assert_eq!(decide(handler, EINVAL), Owner::Application);
        assert_eq!(decide(handler, 1), Owner::Application); // EPERM
        assert_eq!(decide(handler, ETIMEDOUT), Owner::VerbsCore);
        let caller = o("core", "ops-caller", "_ib_modify_qp");
        assert_eq!(decide(caller, EINVAL), Owner::VerbsCore);
    }

    #[test]
    fn hardware_command_issuers_with_device_errnos_are_the_device() {
        let fw = o("vendor", "hardware", "mlx5_cmd_exec_create_qp");
        assert_eq!(decide(fw, ETIMEDOUT), Owner::DeviceFirmware);
        assert_eq!(decide(fw, EREMOTEIO), Owner::DeviceFirmware);
        assert_eq!(decide(fw, 5), Owner::DeviceFirmware); // EIO
                                                          // a command the driver built and the device refused as invalid: the driver's
        assert_eq!(decide(fw, EINVAL), Owner::VendorDriver);
        assert_eq!(decide(fw, ENOMEM), Owner::Resources);
        // a device errno from a vendor function that issues no command: the driver's
        let imp = o("vendor", "ops-impl", "rxe_create_qp");
        assert_eq!(decide(imp, ETIMEDOUT), Owner::VendorDriver);
    }

    #[test]
    fn vendor_validation_is_the_vendor_driver_and_exhaustion_is_resources_anywhere() {
        let chk = o("vendor", "helper", "rxe_qp_chk_init");
        assert_eq!(decide(chk, EINVAL), Owner::VendorDriver);
        // a vendor function named like the pinning helpers is still the vendor's
        assert_eq!(
            decide(o("vendor", "handler", "ib_umem_x"), EFAULT),
            Owner::VendorDriver
        );
        for e in RESOURCE_ERRNOS {
            for layer in ["core", "vendor"] {
                assert_eq!(decide(o(layer, "hardware", "f"), e), Owner::Resources);
            }
        }
        // a failure without errno (a NULL return) goes by layer
        assert_eq!(decide(o("vendor", "ops-impl", "f"), 0), Owner::VendorDriver);
        assert_eq!(decide(o("core", "handler", "f"), 0), Owner::VerbsCore);
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

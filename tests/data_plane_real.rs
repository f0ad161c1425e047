//! The data-plane probes of the checked-in sets (Debian 6.1, 6.12 and 7.2; mlx5, bnxt_re,
//! irdma, rxe): each is backed by its evidence in the real tree, and every set has what the
//! passes must find there: the verbs core's event callbacks (installed by the uverbs create
//! handlers, queueing through one shared function), a vendor's own error-event raiser, and
//! Soft-RoCE's completion and QP-error functions. The passes find them from the code's
//! structure (rules.yaml `data_plane:`); this test reads the trees to check what they found.

mod common;

use std::path::Path;

use manifest::{DataPlaneClass, DataPlaneVia, Layer, Manifest};

const KERNELS: &[&str] = &["6.1", "6.12", "7.2"];
const VENDORS: &[&str] = &["mlx5", "bnxt_re", "irdma", "rxe"];

fn checked_in(ver: &str, vendor: &str) -> Manifest {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("generated/linux-{ver}/{vendor}/manifest.yaml"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/regenerate.sh)", path.display()));
    Manifest::from_yaml(&text, &path.display().to_string()).unwrap_or_else(|e| panic!("{e}"))
}

/// Line `line` (1-based) of `file` in the tree of `ver`.
fn source_line(ver: &str, file: &str, line: usize) -> String {
    let path = common::kernel_dir(ver).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run scripts/fetch-kernel.sh {ver})",
            path.display()
        )
    });
    text.lines()
        .nth(line.saturating_sub(1))
        .unwrap_or_else(|| panic!("{}: no line {line}", path.display()))
        .to_string()
}

#[test]
fn every_data_plane_probe_is_backed_by_its_evidence_in_the_tree() {
    for ver in KERNELS {
        for vendor in VENDORS {
            let m = checked_in(ver, vendor);
            let first = m.probes.len() as u32;
            for (i, d) in m.data_plane.iter().enumerate() {
                let at = format!("{ver} {vendor} {}", d.function);
                assert_eq!(
                    d.id,
                    first + i as u32,
                    "{at}: ids continue after the probes"
                );
                assert_eq!(d.kind, manifest::DATA_PLANE_KIND, "{at}");
                let e = d
                    .evidence
                    .first()
                    .unwrap_or_else(|| panic!("{at}: no evidence"));
                let line = source_line(ver, &e.file, e.line);
                let derived = d.derived.as_deref().unwrap_or(&d.function);
                match e.via {
                    DataPlaneVia::Installed => assert!(
                        line.contains("event_handler") || line.contains(derived),
                        "{at}: {}:{}: `{line}`",
                        e.file,
                        e.line
                    ),
                    DataPlaneVia::Raised => {
                        assert!(line.contains("IB_EVENT_"), "{at}: `{line}`")
                    }
                    DataPlaneVia::Completes => {
                        assert!(line.contains("IB_WC_"), "{at}: `{line}`")
                    }
                    DataPlaneVia::QpState => {
                        assert!(line.contains("IB_QPS_ERR"), "{at}: `{line}`")
                    }
                    // the call that hands the attributes on, with them as an argument
                    DataPlaneVia::Dispatches => {
                        let callee = e.detail.split('`').nth(3).unwrap_or("?");
                        assert!(
                            line.contains(&format!("{callee}(")) && line.contains("attr"),
                            "{at}: {}:{}: `{line}` calls `{callee}` with the attributes",
                            e.file,
                            e.line
                        )
                    }
                }
            }
        }
    }
}

#[test]
fn each_set_has_the_core_callbacks_and_its_vendors_own_points() {
    for ver in KERNELS {
        for vendor in VENDORS {
            let m = checked_in(ver, vendor);
            let at = format!("{ver} {vendor}");
            let core: Vec<&str> = m
                .data_plane
                .iter()
                .filter(|d| d.layer == Layer::Core)
                .map(|d| d.function.as_str())
                .collect();
            for f in ["ib_uverbs_qp_event_handler", "ib_uverbs_cq_event_handler"] {
                assert!(core.contains(&f), "{at}: {core:?}");
            }
            // one peer probe: the core function that hands a QP's attributes to the driver,
            // read on RTR, its mask and QP arguments known
            let peers: Vec<_> = m
                .data_plane
                .iter()
                .filter(|d| d.class == DataPlaneClass::Peer)
                .collect();
            assert_eq!(peers.len(), 1, "{at}: {peers:?}");
            let p = peers[0];
            assert_eq!(
                (p.layer, p.attach, p.errors.as_slice()),
                (
                    Layer::Core,
                    manifest::Attach::Fexit,
                    &["IB_QPS_RTR".to_string()][..]
                ),
                "{at}: {p:?}"
            );
            assert!(
                p.mask_arg.is_some() && p.owner.as_ref().is_some_and(|o| o.ty == "ib_qp"),
                "{at}: {p:?}"
            );
            for d in m
                .data_plane
                .iter()
                .filter(|d| d.layer == Layer::Core && d.class != DataPlaneClass::Peer)
            {
                assert_eq!(d.class, DataPlaneClass::AsyncEvent, "{at}");
                assert!(
                    d.arg.is_some() && d.errors.iter().any(|e| e == "IB_EVENT_QP_FATAL"),
                    "{at}: {} reads the event and filters on the error types",
                    d.function
                );
            }
            let has = |class: DataPlaneClass| {
                m.data_plane
                    .iter()
                    .any(|d| d.class == class && d.layer == Layer::Vendor)
            };
            if *vendor == "rxe" {
                assert!(has(DataPlaneClass::Completion), "{at}");
                assert!(has(DataPlaneClass::QpError), "{at}");
                // the completion function with an entry program (6.1 also lists complete_ack,
                // inlined: no program)
                let cq = m
                    .data_plane
                    .iter()
                    .find(|d| {
                        d.class == DataPlaneClass::Completion && d.attach == manifest::Attach::Fexit
                    })
                    .map(|d| d.function.as_str());
                assert_eq!(cq, Some("rxe_cq_post"), "{at}");
            } else if !(*ver == "6.1" && *vendor == "bnxt_re") {
                // a NIC writes completions itself: only its event raisers are in the kernel
                assert!(has(DataPlaneClass::AsyncEvent), "{at}");
                assert!(!has(DataPlaneClass::Completion), "{at}");
            }
        }
    }
}

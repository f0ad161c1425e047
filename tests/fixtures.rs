//! One test per dispatch pattern, each on a small hand-written tree under `kernel-fixtures/`
//! that reproduces the construct (no kernel code is copied). Line numbers are looked up in
//! the fixture text, so the assertions say *which* statement an edge comes from.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::BTreeSet;

use analyzer::{CallGraph, EdgeKind, RetKind, SiteShape, VendorScope};
use analyzer::{LoadOptions, SourceTree};
use common::*;

const CORE: &str = "drivers/infiniband/core";

fn names(g: &CallGraph, ids: impl IntoIterator<Item = usize>) -> BTreeSet<String> {
    ids.into_iter().map(|i| g.node(i).name.clone()).collect()
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn token_pasted_handler() {
    let root = fixture("token-pasted-handler");
    let (tree, g) = fixture_graph("token-pasted-handler", &VendorScope::default());
    let warnings: Vec<String> = tree.all_warnings().map(|w| w.to_string()).collect();
    assert!(warnings.is_empty(), "{warnings:?}");

    // UVERBS_HANDLER(X) = UVERBS_MODULE_NAME ## _handler_ ## X, with the module name from
    // the core's local header and from the vendor file's own #define.
    let qp_file = format!("{CORE}/uverbs_std_types_qp.c");
    let core_h = one(&g, "ib_uverbs_handler_UVERBS_METHOD_QP_CREATE");
    let n = g.node(core_h);
    assert_eq!(n.file, qp_file);
    assert_eq!(
        n.line,
        line_of(&root, &qp_file, "UVERBS_HANDLER(UVERBS_METHOD_QP_CREATE)(")
    );
    assert_eq!(n.module.as_deref(), Some("ib_uverbs"));
    assert!(n.is_static);
    assert_eq!((n.ret, n.nparams), (RetKind::Int, 1));

    let mlx5_file = "drivers/infiniband/hw/mlx5/main.c";
    let vendor_h = one(&g, "mlx5_ib_handler_MLX5_IB_METHOD_UAR_OBJ_ALLOC");
    assert_eq!(g.node(vendor_h).file, mlx5_file);
    assert_eq!(g.node(vendor_h).module.as_deref(), Some("mlx5_ib"));
    assert!(
        g.nodes().iter().all(|n| !n.name.contains("UVERBS_HANDLER")),
        "an unexpanded UVERBS_HANDLER name is left in the graph"
    );
    // Nothing else named *_handler_*: the macro definitions in the header are not functions.
    let handlers: BTreeSet<String> = g
        .nodes()
        .iter()
        .filter(|n| n.name.contains("_handler_"))
        .map(|n| n.name.clone())
        .collect();
    assert_eq!(
        handlers,
        set(&[
            "ib_uverbs_handler_UVERBS_METHOD_QP_CREATE",
            "mlx5_ib_handler_MLX5_IB_METHOD_UAR_OBJ_ALLOC"
        ])
    );

    // Registrations: two named methods and one _DESTROY (shared default handler).
    let methods: Vec<(String, String, bool)> = g
        .uapi_methods()
        .iter()
        .map(|m| (m.id.clone(), m.handler.clone(), m.handler_id.is_some()))
        .collect();
    assert_eq!(methods.len(), 3, "{methods:?}");
    for (id, handler) in [
        (
            "UVERBS_METHOD_QP_CREATE",
            "ib_uverbs_handler_UVERBS_METHOD_QP_CREATE",
        ),
        ("UVERBS_METHOD_QP_DESTROY", "uverbs_destroy_def_handler"),
        (
            "MLX5_IB_METHOD_UAR_OBJ_ALLOC",
            "mlx5_ib_handler_MLX5_IB_METHOD_UAR_OBJ_ALLOC",
        ),
    ] {
        assert!(
            methods.contains(&(id.into(), handler.into(), true)),
            "{id} -> {handler} missing or unresolved: {methods:?}"
        );
    }

    // The dispatcher calls through a local pointer loaded from method_elm->handler.
    let ioctl_c = format!("{CORE}/uverbs_ioctl.c");
    let run = one(&g, "ib_uverbs_run_method");
    let call_line = line_of(&root, &ioctl_c, "ret = handler(bundle);");
    let destroy = one(&g, "uverbs_destroy_def_handler");
    for (to, via) in [
        (core_h, "UVERBS_METHOD_QP_CREATE"),
        (vendor_h, "MLX5_IB_METHOD_UAR_OBJ_ALLOC"),
        (destroy, "UVERBS_METHOD_QP_DESTROY"),
    ] {
        let e = edge(&g, run, to);
        assert_eq!(e.kind, EdgeKind::UapiMethod, "{e:?}");
        assert_eq!((e.file.as_str(), e.line), (ioctl_c.as_str(), call_line));
        assert_eq!(e.via.as_deref(), Some(via));
    }
    let prep = one(&g, "bundle_prepare");
    assert_eq!(edge(&g, run, prep).kind, EdgeKind::Direct);
    assert_eq!(g.callees(run).len(), 4, "{:?}", callee_names(&g, run));
    assert_eq!(g.stats().edges_by_kind["uapi-method"], 3);

    // From the ioctl entry to both handlers and on into their bodies.
    let reach = reach_from(&g, &["ib_uverbs_ioctl"]);
    for to in [core_h, vendor_h] {
        let p = path_to(&g, &reach, to).expect("handler reachable from ib_uverbs_ioctl");
        let hops: Vec<&str> = p.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(
            &hops[..3],
            [
                "ib_uverbs_ioctl",
                "ib_uverbs_cmd_verbs",
                "ib_uverbs_run_method"
            ],
            "{}",
            render(&p)
        );
        assert_eq!(p.len(), 4, "{}", render(&p));
        assert_eq!(kind_of(&p[3]), Some(EdgeKind::UapiMethod));
    }
    assert!(reach.contains_key(&one(&g, "qp_fill_attrs")));
    assert!(reach.contains_key(&one(&g, "uar_alloc")));
    assert_eq!(
        reach.len(),
        g.nodes().len(),
        "every function is reachable here"
    );
    assert_eq!(g.nodes().len(), 9);
}

#[test]
fn write_table_trampoline() {
    let root = fixture("write-table-trampoline");
    let (_tree, g) = fixture_graph("write-table-trampoline", &VendorScope::default());

    // DECLARE_UVERBS_WRITE / _EX in the table, nested inside DECLARE_UVERBS_OBJECT.
    let mut cmds: Vec<(String, String)> = g
        .write_commands()
        .iter()
        .map(|w| {
            assert!(w.handler_id.is_some(), "unresolved write handler {w:?}");
            (w.id.clone(), w.handler.clone())
        })
        .collect();
    cmds.sort();
    assert_eq!(
        cmds,
        vec![
            (
                "IB_USER_VERBS_CMD_ALLOC_PD".to_string(),
                "ib_uverbs_alloc_pd".to_string()
            ),
            (
                "IB_USER_VERBS_CMD_DEALLOC_PD".into(),
                "ib_uverbs_dealloc_pd".into()
            ),
            (
                "IB_USER_VERBS_EX_CMD_QUERY_DEVICE".into(),
                "ib_uverbs_ex_query_device".into()
            ),
        ]
    );
    let handlers = [
        ("ib_uverbs_alloc_pd", "IB_USER_VERBS_CMD_ALLOC_PD"),
        ("ib_uverbs_dealloc_pd", "IB_USER_VERBS_CMD_DEALLOC_PD"),
        (
            "ib_uverbs_ex_query_device",
            "IB_USER_VERBS_EX_CMD_QUERY_DEVICE",
        ),
    ];

    // write(): method_elm->handler(&bundle) reaches every write handler.
    let main_c = format!("{CORE}/uverbs_main.c");
    let write = one(&g, "ib_uverbs_write");
    let write_line = line_of(&root, &main_c, "ret = method_elm->handler(&bundle);");
    // The INVOKE_WRITE ioctl method does the same with its attrs.
    let dev_c = format!("{CORE}/uverbs_std_types_device.c");
    let invoke = one(&g, "ib_uverbs_handler_UVERBS_METHOD_INVOKE_WRITE");
    let invoke_line = line_of(&root, &dev_c, "return method_elm->handler(attrs);");
    for (name, cmd) in handlers {
        let h = one(&g, name);
        assert_eq!(g.node(h).module.as_deref(), Some("ib_uverbs"));
        for (from, file, line) in [
            (write, main_c.as_str(), write_line),
            (invoke, dev_c.as_str(), invoke_line),
        ] {
            let e = edge(&g, from, h);
            assert_eq!(e.kind, EdgeKind::WriteCommand, "{e:?}");
            assert_eq!((e.file.as_str(), e.line), (file, line), "{e:?}");
            assert_eq!(e.via.as_deref(), Some(cmd));
        }
    }
    // The ioctl dispatcher's local pointer goes to ioctl methods only, not to write handlers.
    let run = one(&g, "ib_uverbs_run_method");
    assert_eq!(
        names(&g, g.callees(run).into_iter().map(|(t, _)| t)),
        set(&["ib_uverbs_handler_UVERBS_METHOD_INVOKE_WRITE"])
    );
    assert_eq!(g.stats().edges_by_kind["write-command"], 6);

    // Reachable from both entries; through the trampoline from ioctl.
    let core_verb = one(&g, "ib_dealloc_pd_user");
    assert_eq!(g.node(core_verb).module.as_deref(), Some("ib_core"));
    for entry in ["ib_uverbs_write", "ib_uverbs_ioctl"] {
        let reach = reach_from(&g, &[entry]);
        for (name, _) in handlers {
            assert!(reach.contains_key(&one(&g, name)), "{name} from {entry}");
        }
        assert!(
            reach.contains_key(&core_verb),
            "ib_dealloc_pd_user from {entry}"
        );
    }
    let reach = reach_from(&g, &["ib_uverbs_ioctl"]);
    let p = path_to(&g, &reach, one(&g, "ib_uverbs_ex_query_device")).expect("path");
    let hops: Vec<(&str, Option<EdgeKind>)> =
        p.iter().map(|h| (h.name.as_str(), kind_of(h))).collect();
    assert_eq!(
        hops,
        vec![
            ("ib_uverbs_ioctl", None),
            ("ib_uverbs_run_method", Some(EdgeKind::Direct)),
            (
                "ib_uverbs_handler_UVERBS_METHOD_INVOKE_WRITE",
                Some(EdgeKind::UapiMethod)
            ),
            ("ib_uverbs_ex_query_device", Some(EdgeKind::WriteCommand)),
        ],
        "{}",
        render(&p)
    );
}

#[test]
fn ops_table_two_vendors() {
    let root = fixture("ops-table-two-vendors");
    let (_tree, g) = fixture_graph("ops-table-two-vendors", &VendorScope::default());
    assert_eq!(g.nodes().len(), 15);

    // Three tables; members are the functions, not THIS_MODULE or INIT_RDMA_OBJ_SIZE().
    type Table = (String, String, BTreeSet<(String, String)>);
    let mut tables: Vec<Table> = g
        .ops_tables()
        .iter()
        .map(|t| {
            let members = t
                .members
                .iter()
                .filter(|(_, _, id)| id.is_some())
                .map(|(m, f, _)| (m.clone(), f.clone()))
                .collect();
            (t.name.clone(), t.file.clone(), members)
        })
        .collect();
    tables.sort();
    let pairs = |v: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        tables,
        vec![
            (
                "bnxt_re_dev_ops".to_string(),
                "drivers/infiniband/hw/bnxt_re/main.c".to_string(),
                pairs(&[
                    ("alloc_pd", "bnxt_re_alloc_pd"),
                    ("create_qp", "bnxt_re_create_qp")
                ])
            ),
            (
                "mlx5_ib_dev_ops".into(),
                "drivers/infiniband/hw/mlx5/main.c".into(),
                // .create_qp comes after an INIT_RDMA_OBJ_SIZE() entry and must survive it.
                pairs(&[
                    ("alloc_pd", "mlx5_ib_alloc_pd"),
                    ("create_qp", "mlx5_ib_create_qp")
                ])
            ),
            (
                "mlx5_ib_dev_post_ops".into(),
                "drivers/infiniband/hw/mlx5/main.c".into(),
                pairs(&[("post_send", "mlx5_ib_post_send")])
            ),
        ]
    );
    assert!(g
        .ops_tables()
        .iter()
        .flat_map(|t| t.members.iter())
        .all(|(m, _, _)| !m.contains("size_") && !m.contains("INIT_RDMA_OBJ_SIZE")));

    // dev->ops.create_qp(...) in the core reaches both vendors.
    let verbs_c = format!("{CORE}/verbs.c");
    let create = one(&g, "ib_create_qp_user");
    assert_eq!(g.node(create).module.as_deref(), Some("ib_core"));
    let line = line_of(&root, &verbs_c, "ret = dev->ops.create_qp(");
    let mlx5_qp = one(&g, "mlx5_ib_create_qp");
    let bnxt_qp = one(&g, "bnxt_re_create_qp");
    assert_eq!(g.node(mlx5_qp).module.as_deref(), Some("mlx5_ib"));
    assert_eq!(g.node(bnxt_qp).module.as_deref(), Some("bnxt_re"));
    for to in [mlx5_qp, bnxt_qp] {
        let e = edge(&g, create, to);
        assert_eq!(e.kind, EdgeKind::OpsTable);
        assert_eq!(e.via.as_deref(), Some("create_qp"));
        assert_eq!((e.file.as_str(), e.line), (verbs_c.as_str(), line));
    }
    assert_eq!(g.node(create).ops_calls, vec!["create_qp".to_string()]);
    // pd->device->ops.alloc_pd: a static vendor function is found through its table.
    let alloc = one(&g, "ib_alloc_pd_user");
    assert_eq!(
        names(&g, g.callees(alloc).into_iter().map(|(t, _)| t)),
        set(&["bnxt_re_alloc_pd", "mlx5_ib_alloc_pd"])
    );
    // An ops call inside a header static inline: the edge's site is the header.
    let post = one(&g, "ib_post_send");
    assert!(g.node(post).module.is_none() && g.node(post).is_inline);
    let e = edge(&g, one(&g, "ib_send_one"), post);
    assert_eq!(e.kind, EdgeKind::Inline);
    let e = edge(&g, post, one(&g, "mlx5_ib_post_send"));
    assert_eq!(e.kind, EdgeKind::OpsTable);
    assert_eq!(
        (e.file.as_str(), e.line),
        (
            "include/rdma/ib_verbs.h",
            line_of(&root, "include/rdma/ib_verbs.h", "ops.post_send(")
        )
    );
    let reach = reach_from(&g, &["ib_uverbs_ioctl"]);
    for n in [
        "mlx5_create_qp_common",
        "bnxt_qplib_create_qp",
        "mlx5_ib_post_send",
    ] {
        assert!(reach.contains_key(&one(&g, n)), "{n} not reached");
    }
    // Registration code is not on the uverbs path.
    assert!(!reach.contains_key(&one(&g, "mlx5_ib_stage_caps_init")));
    assert_eq!(reach.len(), 12);

    // Only bnxt_re: mlx5 disappears entirely.
    let scope = scope_of(&["drivers/infiniband/hw/bnxt_re/".into()]);
    let (_tree, g) = fixture_graph("ops-table-two-vendors", &scope);
    assert_eq!(g.nodes().len(), 10);
    assert!(
        g.nodes().iter().all(|n| !n.name.starts_with("mlx5_")),
        "mlx5 node in a bnxt_re-only graph"
    );
    assert_eq!(g.ops_tables().len(), 1);
    let reach = reach_from(&g, &["ib_uverbs_ioctl"]);
    let r = names(&g, reach.keys().copied());
    assert!(r.iter().all(|n| !n.starts_with("mlx5_")), "{r:?}");
    let p = path_to_name(&g, &reach, "bnxt_re_create_qp").expect("bnxt path");
    let hops: Vec<&str> = p.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(
        hops,
        ["ib_uverbs_ioctl", "ib_create_qp_user", "bnxt_re_create_qp"]
    );
    assert_eq!(kind_of(&p[2]), Some(EdgeKind::OpsTable));
    assert!(reach.contains_key(&one(&g, "bnxt_qplib_create_qp")));
    // ib_post_send's post_send has no bnxt_re implementation here: no ops edge at all.
    assert!(g.callees(one(&g, "ib_post_send")).is_empty());
}

#[test]
fn kconfig_stub() {
    let root = fixture("kconfig-stub");
    let priv_h = format!("{CORE}/core_priv.h");
    let verbs_c = format!("{CORE}/verbs.c");
    let security_c = format!("{CORE}/security.c");
    let call_line = line_of(&root, &verbs_c, "ret = ib_security_modify_qp(");

    // Debian's choice: CONFIG_SECURITY_INFINIBAND off -> the core_priv.h stub.
    let (tree, g) = fixture_graph("kconfig-stub", &VendorScope::default());
    assert_eq!(tree.skipped_unbuilt, 1, "security.c is not built");
    assert!(tree.files.iter().all(|f| f.path != security_c));
    assert!(g.nodes().iter().all(|n| n.file != security_c));
    assert!(g.find("check_qp_port_pkey_settings").is_empty());
    assert_eq!(
        tree.build.module_of(&verbs_c),
        Some("ib_core"),
        "module from the Makefile"
    );
    let stub = one(&g, "ib_security_modify_qp");
    let n = g.node(stub);
    assert_eq!(n.file, priv_h);
    assert!(n.is_static && n.is_inline && n.module.is_none());
    assert_eq!(
        n.line,
        line_of(&root, &priv_h, "static inline int ib_security_modify_qp(")
    );
    let e = edge(&g, one(&g, "_ib_modify_qp"), stub);
    assert_eq!(e.kind, EdgeKind::Inline);
    assert_eq!((e.file.as_str(), e.line), (verbs_c.as_str(), call_line));
    let driver = one(&g, "mlx5_ib_modify_qp");
    let e = edge(&g, stub, driver);
    assert_eq!(e.kind, EdgeKind::OpsTable);
    assert_eq!(e.via.as_deref(), Some("modify_qp"));
    assert_eq!(
        (e.file.as_str(), e.line),
        (
            priv_h.as_str(),
            line_of(&root, &priv_h, "return qp->device->ops.modify_qp(")
        )
    );
    let reach = reach_from(&g, &["ib_uverbs_modify_qp"]);
    let p = path_to(&g, &reach, driver).expect("path to mlx5_ib_modify_qp");
    let hops: Vec<(&str, Option<EdgeKind>)> =
        p.iter().map(|h| (h.name.as_str(), kind_of(h))).collect();
    assert_eq!(
        hops,
        vec![
            ("ib_uverbs_modify_qp", None),
            ("modify_qp", Some(EdgeKind::Direct)),
            ("ib_modify_qp_with_udata", Some(EdgeKind::Direct)),
            ("_ib_modify_qp", Some(EdgeKind::Direct)),
            ("ib_security_modify_qp", Some(EdgeKind::Inline)),
            ("mlx5_ib_modify_qp", Some(EdgeKind::OpsTable)),
        ],
        "{}",
        render(&p)
    );
    assert_eq!(
        p.iter().map(|h| h.module.as_deref()).collect::<Vec<_>>(),
        [
            Some("ib_uverbs"),
            Some("ib_uverbs"),
            Some("ib_core"),
            Some("ib_core"),
            None,
            Some("mlx5_ib")
        ]
    );

    // Same tree, config with the LSM hooks on: security.c's function replaces the stub.
    let on = root.join("security-on.config");
    let tree = load_with(
        &root,
        &LoadOptions {
            kconfig: Some(on.clone()),
            ..load_options()
        },
    );
    assert_eq!(tree.skipped_unbuilt, 0);
    assert_eq!(tree.build.module_of(&security_c), Some("ib_core"));
    assert_eq!(tree.config.source.as_deref(), Some(on.to_str().unwrap()));
    let g = CallGraph::build(&tree, &VendorScope::default());
    let real = one(&g, "ib_security_modify_qp");
    let n = g.node(real);
    assert_eq!(n.file, security_c);
    assert_eq!(n.module.as_deref(), Some("ib_core"));
    assert!(!n.is_static && !n.is_inline);
    let e = edge(&g, one(&g, "_ib_modify_qp"), real);
    assert_eq!(e.kind, EdgeKind::Direct);
    assert_eq!((e.file.as_str(), e.line), (verbs_c.as_str(), call_line));
    let e = edge(&g, real, one(&g, "mlx5_ib_modify_qp"));
    assert_eq!(e.kind, EdgeKind::OpsTable);
    assert_eq!(
        (e.file.as_str(), e.line),
        (
            security_c.as_str(),
            line_of(&root, &security_c, "ops.modify_qp(")
        )
    );
    let reach = reach_from(&g, &["ib_uverbs_modify_qp"]);
    assert!(reach.contains_key(&one(&g, "check_qp_port_pkey_settings")));
    assert!(
        g.nodes().iter().all(|n| n.file != priv_h),
        "no stub when on"
    );
}

#[test]
fn macro_hidden_call() {
    let root = fixture("macro-hidden-call");
    let (_tree, g) = fixture_graph("macro-hidden-call", &VendorScope::default());
    let cmd_c = format!("{CORE}/uverbs_cmd.c");
    let lookup_line = line_of(&root, &cmd_c, "qp = uobj_get_obj_read(");
    let pd_line = line_of(&root, &cmd_c, "pd = ib_alloc_pd(");

    // uobj_get_obj_read -> _uobj_get_obj_read(uobj_get_read(...)) -> rdma_lookup_get_uobject(
    // uobj_get_type(...) -> uapi_get_object, _uobj_check_id): two and three macro levels.
    let handler = one(&g, "ib_uverbs_query_qp");
    let got: BTreeSet<(String, EdgeKind, usize, Option<String>)> = g
        .callees(handler)
        .into_iter()
        .map(|(t, e)| (g.node(t).name.clone(), e.kind, e.line, e.via.clone()))
        .collect();
    let via = |s: &str| Some(s.to_string());
    let want: BTreeSet<_> = [
        (
            "rdma_lookup_get_uobject",
            lookup_line,
            via("uobj_get_obj_read"),
        ),
        ("uapi_get_object", lookup_line, via("uobj_get_obj_read")),
        ("_uobj_check_id", lookup_line, via("uobj_get_obj_read")),
        ("__ib_alloc_pd", pd_line, via("ib_alloc_pd")),
    ]
    .into_iter()
    .map(|(n, l, v)| (n.to_string(), EdgeKind::Macro, l, v))
    .collect();
    assert_eq!(got, want);
    assert_eq!(
        g.node(one(&g, "rdma_lookup_get_uobject")).module.as_deref(),
        Some("ib_uverbs")
    );
    assert_eq!(
        g.node(one(&g, "__ib_alloc_pd")).module.as_deref(),
        Some("ib_core")
    );
    // Macros are not functions.
    for m in [
        "uobj_get_obj_read",
        "_uobj_get_obj_read",
        "uobj_get_read",
        "uobj_get_type",
        "ib_alloc_pd",
        "MLX5_SET",
        "mlx5_cmd_exec_inout",
    ] {
        assert!(g.find(m).is_empty(), "macro {m} became a node");
    }

    // mlx5_cmd_exec_inout(...) -> mlx5_cmd_exec; MLX5_SET(...) only touches fields: no edge.
    let main_c = "drivers/infiniband/hw/mlx5/main.c";
    let alloc = one(&g, "mlx5_ib_alloc_pd");
    let callees = g.callees(alloc);
    assert_eq!(callees.len(), 1, "{:?}", callee_names(&g, alloc));
    let (to, e) = &callees[0];
    assert_eq!(g.node(*to).name, "mlx5_cmd_exec");
    assert_eq!(e.kind, EdgeKind::Macro);
    assert_eq!(e.via.as_deref(), Some("mlx5_cmd_exec_inout"));
    assert_eq!(
        (e.file.as_str(), e.line),
        (main_c, line_of(&root, main_c, "mlx5_cmd_exec_inout("))
    );
    assert!(
        g.edges().all(|e| e.via.as_deref() != Some("MLX5_SET")),
        "MLX5_SET produced an edge"
    );
    assert_eq!(g.stats().edges_by_kind["macro"], 5);
    assert_eq!(g.stats().edges, 5);
}

#[test]
fn static_name_clash() {
    let root = fixture("static-name-clash");
    let (_tree, g) = fixture_graph("static-name-clash", &VendorScope::default());
    let cmd_c = format!("{CORE}/uverbs_cmd.c");
    let verbs_c = format!("{CORE}/verbs.c");
    let qp_c = "drivers/infiniband/hw/mlx5/qp.c";

    let defs = g.find("create_qp");
    assert_eq!(defs.len(), 3, "three static create_qp, three nodes");
    let mut where_: Vec<(String, Option<String>, bool)> = defs
        .iter()
        .map(|&i| {
            let n = g.node(i);
            (n.file.clone(), n.module.clone(), n.is_static)
        })
        .collect();
    where_.sort();
    assert_eq!(
        where_,
        vec![
            (cmd_c.clone(), Some("ib_uverbs".to_string()), true),
            (verbs_c.clone(), Some("ib_core".to_string()), true),
            (qp_c.to_string(), Some("mlx5_ib".to_string()), true),
        ]
    );
    let uverbs_cq = in_file(&g, "create_qp", &cmd_c);
    let core_cq = in_file(&g, "create_qp", &verbs_c);
    let mlx5_cq = in_file(&g, "create_qp", qp_c);
    assert_eq!(g.node(uverbs_cq).ret, RetKind::Int);
    assert_eq!(g.node(core_cq).ret, RetKind::Ptr);
    assert_eq!(g.node(mlx5_cq).nparams, 4);

    // Each caller reaches the definition in its own file, and only that one.
    for (caller, file, own) in [
        ("ib_uverbs_create_qp", cmd_c.as_str(), uverbs_cq),
        ("ib_create_qp_user", verbs_c.as_str(), core_cq),
        ("mlx5_ib_create_qp", qp_c, mlx5_cq),
    ] {
        let c = one(&g, caller);
        let e = edge(&g, c, own);
        assert_eq!(e.kind, EdgeKind::Direct);
        assert_eq!(
            (e.file.as_str(), e.line),
            (file, line_of_call(&root, file, c, &g)),
            "{caller} -> create_qp call site"
        );
        for other in defs.iter().copied().filter(|&d| d != own) {
            assert!(
                !has_edge(&g, c, other),
                "{caller} also calls create_qp in {}",
                g.node(other).file
            );
        }
    }
    // The uverbs static calls the core global across files (and modules).
    let e = edge(&g, uverbs_cq, one(&g, "ib_create_qp_user"));
    assert_eq!(e.kind, EdgeKind::Direct);
    let reach = reach_from(&g, &["ib_uverbs_create_qp"]);
    assert!(reach.contains_key(&core_cq));
    assert!(!reach.contains_key(&mlx5_cq));
    assert_eq!(reach.len(), 4);
}

/// Line of the `create_qp(` call inside `caller`'s body in `file`.
fn line_of_call(root: &std::path::Path, file: &str, caller: usize, g: &CallGraph) -> usize {
    let text = std::fs::read_to_string(root.join(file)).expect("fixture file");
    let start = g.node(caller).line;
    text.lines()
        .enumerate()
        .skip(start)
        .find(|(_, l)| l.contains("create_qp(") && !l.contains("_create_qp("))
        .map(|(i, _)| i + 1)
        .expect("create_qp call in caller body")
}

#[test]
fn bad_input_is_reported_not_fatal() {
    let root = fixture("bad-input");
    let broken = format!("{CORE}/broken.c");
    let (tree, g) = fixture_graph("bad-input", &VendorScope::default());
    let warnings: Vec<String> = tree.all_warnings().map(|w| w.to_string()).collect();
    for needle in ["return x * ;", "$$ not C at all $$", "#endif"] {
        let at = format!("{broken}:{}:", line_of(&root, &broken, needle));
        assert!(
            warnings.iter().any(|w| w.starts_with(&at)),
            "no warning at {at}: {warnings:?}"
        );
    }
    assert!(tree.parse_errors() >= 2);
    assert_eq!(g.stats().parse_errors, tree.parse_errors());
    // The damage stays local: the functions around it are still there and called.
    for f in ["broken_neighbour", "half_written", "after_the_damage"] {
        assert_eq!(g.node(one(&g, f)).file, broken);
    }
    let entry = one(&g, "ib_uverbs_ioctl");
    assert_eq!(
        names(&g, g.callees(entry).into_iter().map(|(t, _)| t)),
        set(&["after_the_damage", "broken_neighbour"])
    );

    // Non-UTF-8 bytes (a Latin-1 comment) in a built file: lossy decode, warning, facts kept.
    let tmp = temp_dir("non-utf8");
    copy_dir(&root, &tmp);
    std::fs::write(
        tmp.join(CORE).join("Makefile"),
        "obj-$(CONFIG_INFINIBAND_USER_ACCESS) += ib_uverbs.o\nib_uverbs-y := good.o broken.o latin1.o\n",
    )
    .expect("write Makefile");
    let mut bytes = b"// SPDX-License-Identifier: MIT\n\n/* caf".to_vec();
    bytes.extend_from_slice(&[0xe9, 0xff]);
    bytes.extend_from_slice(b" */\nint latin1_fn(int z)\n{\n\treturn z;\n}\n");
    std::fs::write(tmp.join(CORE).join("latin1.c"), bytes).expect("write latin1.c");
    let tree = load(&tmp);
    let latin1 = format!("{CORE}/latin1.c");
    let w: Vec<String> = tree
        .all_warnings()
        .filter(|w| w.file == latin1)
        .map(|w| w.to_string())
        .collect();
    assert_eq!(
        w,
        vec![format!("{latin1}:3: not valid UTF-8: decoded lossily")]
    );
    let g = CallGraph::build(&tree, &VendorScope::default());
    let f = one(&g, "latin1_fn");
    assert_eq!(
        (g.node(f).file.as_str(), g.node(f).line),
        (latin1.as_str(), 4)
    );
    assert_eq!(g.node(f).module.as_deref(), Some("ib_uverbs"));
    let _ = std::fs::remove_dir_all(&tmp);

    // Not a kernel tree: an error naming the directory, no panic.
    let missing = root.join("does-not-exist");
    let err =
        SourceTree::load(&missing, &load_options()).expect_err("a missing directory is an error");
    assert!(err.to_string().contains("does-not-exist"), "{err}");
    let err = SourceTree::load(&root.join("drivers"), &load_options())
        .expect_err("a directory without drivers/infiniband/core is an error");
    assert!(err.to_string().contains("drivers/infiniband/core"), "{err}");
}

/// Every directory heuristics/rules.yaml names is read: `source.kbuild_top`, its
/// `include_dirs` and each vendor's `dirs` (mlx4's `include/linux/mlx4/` among them). A header
/// with one inline function is put in each include directory of a copy of a fixture; each
/// function is in the loaded tree, and a vendor scope keeps another vendor's header inlines out.
#[test]
fn every_directory_the_rules_name_is_scanned() {
    let rules = rules();
    let layout = rules.source_layout();
    let root = temp_dir("rules-dirs");
    copy_dir(&fixture("ops-table-two-vendors"), &root);
    let mut named: Vec<String> = vec![rules.source.kbuild_top.clone()];
    named.extend(rules.source.include_dirs.iter().cloned());
    named.extend(rules.vendors.values().flat_map(|v| v.dirs.iter().cloned()));
    assert!(
        named.iter().any(|d| d.starts_with("include/linux/mlx4")),
        "the rules name mlx4's include directory: {named:?}"
    );
    let mut planted = Vec::new();
    for dir in &named {
        let dir = dir.trim_end_matches('/');
        assert!(layout.contains(dir), "{dir} is not scanned: {layout:?}");
        if dir.starts_with(&layout.kbuild_top) {
            continue; // Kbuild decides which of its files are built (fixtures above)
        }
        let func = format!("scan_probe_{}", dir.replace('/', "_"));
        std::fs::create_dir_all(root.join(dir)).expect("create include dir");
        std::fs::write(
            root.join(dir).join("scan_probe.h"),
            format!("static inline int {func}(int x)\n{{\n\treturn x;\n}}\n"),
        )
        .expect("write header");
        planted.push((format!("{dir}/scan_probe.h"), func));
    }
    assert!(planted.len() >= 4, "{planted:?}");
    let tree = load(&root);
    let g = CallGraph::build(&tree, &VendorScope::default());
    for (file, func) in &planted {
        assert!(
            tree.files.iter().any(|f| &f.path == file),
            "{file} not read"
        );
        assert_eq!(g.node(one(&g, func)).file, *file);
    }
    let mlx5_only = rules.scope_of(&rules.vendor("mlx5").expect("mlx5").dirs);
    let g = CallGraph::build(&tree, &mlx5_only);
    let mlx4_inline = "scan_probe_include_linux_mlx4";
    assert!(
        g.find(mlx4_inline).is_empty(),
        "mlx4 header inline in an mlx5 graph"
    );
    assert_eq!(g.find("scan_probe_include_linux_mlx5").len(), 1);
    assert_eq!(g.find("scan_probe_include_rdma").len(), 1);
    std::fs::remove_dir_all(&root).ok();
}

/// A module without `.BTF` (5.10's modules, out-of-tree builds) loads: its functions exist
/// (symbols, ftrace sites) and are `no-btf`, never an error that stops the whole analysis;
/// an ELF without `.BTF` that is no module (no `.modinfo`) is still refused.
#[test]
fn a_module_without_btf_gives_no_btf_verdicts() {
    let dir = temp_dir("no-btf-module");
    let ko = dir.join("nobtf_mod.ko");
    let src = fixture("no-btf-module").join("nobtf_mod.c");
    let cc = std::process::Command::new("gcc")
        .args(["-O2", "-c", "-pg", "-mfentry", "-mrecord-mcount"])
        .arg(&src)
        .arg("-o")
        .arg(&ko)
        .output()
        .expect("run gcc (scripts/install-deps.sh)");
    assert!(cc.status.success(), "{}", stderr(&cc));
    // the base: raw BTF with no type (header, an empty type section, the empty string)
    let mut raw = Vec::new();
    raw.extend_from_slice(&0xeb9f_u16.to_le_bytes());
    raw.extend_from_slice(&[1, 0]); // version, flags
    for v in [24_u32, 0, 0, 0, 1] {
        raw.extend_from_slice(&v.to_le_bytes()); // hdr_len, type_off/len, str_off/len
    }
    raw.push(0);
    std::fs::write(dir.join("vmlinux"), &raw).expect("write vmlinux");
    let bins = analyzer::Binaries::load_dir(&dir, &dir).unwrap_or_else(|e| panic!("{e}"));
    let m = bins.module("nobtf_mod").expect("the module is loaded");
    assert!(!m.has_btf());
    assert_eq!(m.counts().btf_funcs, 0);
    for f in ["nobtf_create_qp", "nobtf_notrace"] {
        assert_eq!(
            bins.verdict(Some("nobtf_mod"), f),
            analyzer::AttachVerdict::NoBtf,
            "{f}"
        );
    }
    assert_eq!(
        bins.verdict(Some("nobtf_mod"), "nobtf_gone"),
        analyzer::AttachVerdict::Inlined
    );
    // no .modinfo: not a module, refused as before
    let plain = dir.join("plain.ko");
    let strip = std::process::Command::new("objcopy")
        .args(["--remove-section", ".modinfo"])
        .arg(&ko)
        .arg(&plain)
        .output()
        .expect("run objcopy");
    assert!(strip.status.success(), "{}", stderr(&strip));
    std::fs::remove_file(&ko).expect("rm");
    let err = analyzer::Binaries::load_dir(&dir, &dir)
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains("plain.ko: no .BTF section"),
        "{err}"
    );
}

/// A table read by the caller's index whose error is the result's initial value
/// (`attr = ERR_PTR(-ENODATA)`, `goto` past the line that replaces it when the slot is empty),
/// in the shape of the verbs core's GID cache: the exit is found, and it is a lookup by the
/// caller's key that found nothing; a slot the function picks itself is not.
#[test]
fn a_lookup_by_the_caller_s_key_that_finds_nothing() {
    let root = fixture("lookup-by-caller-key");
    let (_tree, g) = fixture_graph("lookup-by-caller-key", &VendorScope::default());
    let cache_c = format!("{CORE}/cache.c");
    let sites = |f: &str| -> Vec<(usize, Option<String>, SiteShape)> {
        g.node(one(&g, f))
            .error_sites
            .iter()
            .map(|s| (s.line, s.errno.clone(), s.shape.clone()))
            .collect()
    };
    let e = |s: &str| Some(s.to_string());
    assert_eq!(
        sites("addr_table_get"),
        vec![
            (
                line_of(&root, &cache_c, "if (index < 0 || index >= t->sz)"),
                e("EINVAL"),
                SiteShape::Request
            ),
            (
                line_of(&root, &cache_c, "if (!slot_in_use(t->slots[index]))"),
                e("ENODATA"),
                SiteShape::Lookup("index".into())
            ),
        ]
    );
    assert_eq!(
        sites("addr_table_default"),
        vec![(
            line_of(&root, &cache_c, "if (!slot_in_use(t->slots[t->sz - 1]))"),
            e("ENODATA"),
            SiteShape::Callee("slot_in_use".into())
        )]
    );
    // the caller passes the lookup's error on
    let verbs_c = format!("{CORE}/verbs.c");
    assert_eq!(
        sites("fill_source_addr"),
        vec![(
            line_of(&root, &verbs_c, "if (IS_ERR(attr))"),
            None,
            SiteShape::Callee("addr_table_get".into())
        )]
    );
}

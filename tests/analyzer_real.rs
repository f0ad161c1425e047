//! The analyzer on the real Debian 6.12 and 6.1 trees fetched by `scripts/fetch-kernel.sh`.
//! These run in CI (scripts/test-all.sh exports PROBEGEN_KERNEL_6_12 / _6_1); a missing tree
//! fails the test with the command to run, it is never skipped.
//!
//! Each tree is loaded once and each (tree, scope) graph built once per test binary.
//! Run with `--nocapture` to see the figures.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use analyzer::SourceTree;
use analyzer::DEFAULT_ENTRIES;
use analyzer::{CallGraph, EdgeKind, VendorScope};
use common::*;

struct Kernel {
    version: &'static str,
    tree: SourceTree,
    mlx5: OnceLock<CallGraph>,
    bnxt: OnceLock<CallGraph>,
}

fn kernel(version: &'static str) -> &'static Kernel {
    static K612: OnceLock<Kernel> = OnceLock::new();
    static K61: OnceLock<Kernel> = OnceLock::new();
    let cell = match version {
        "6.12" => &K612,
        "6.1" => &K61,
        other => panic!("no such test kernel {other}"),
    };
    cell.get_or_init(|| {
        let dir = kernel_dir(version);
        let t = std::time::Instant::now();
        let tree = load(&dir);
        eprintln!(
            "[{version}] loaded {} ({}) in {:.2}s: {} files, {} .c not built, {} parse errors",
            dir.display(),
            tree.version.as_deref().unwrap_or("?"),
            t.elapsed().as_secs_f64(),
            tree.files.len(),
            tree.skipped_unbuilt,
            tree.parse_errors()
        );
        Kernel {
            version,
            tree,
            mlx5: OnceLock::new(),
            bnxt: OnceLock::new(),
        }
    })
}

fn mlx5_scope() -> VendorScope {
    scope_of(&[
        "drivers/infiniband/hw/mlx5/".into(),
        "include/linux/mlx5/".into(),
    ])
}

fn bnxt_scope() -> VendorScope {
    scope_of(&["drivers/infiniband/hw/bnxt_re/".into()])
}

impl Kernel {
    fn mlx5(&self) -> &CallGraph {
        self.mlx5.get_or_init(|| self.build("mlx5", &mlx5_scope()))
    }

    fn bnxt(&self) -> &CallGraph {
        self.bnxt
            .get_or_init(|| self.build("bnxt_re", &bnxt_scope()))
    }

    fn build(&self, what: &str, scope: &VendorScope) -> CallGraph {
        let t = std::time::Instant::now();
        let g = CallGraph::build(&self.tree, scope);
        eprintln!(
            "[{}] {what} graph in {:.2}s: {} functions, {} edges {:?}",
            self.version,
            t.elapsed().as_secs_f64(),
            g.stats().functions,
            g.stats().edges,
            g.stats().edges_by_kind
        );
        g
    }
}

/// Shortest path `from` -> `to` that passes through `via` in order: BFS path of each segment.
/// Returns the hops with the segments joined (each waypoint appears once).
fn path_via(g: &CallGraph, from: &str, via: &[&str], to: &str) -> Vec<Hop> {
    let mut stops = vec![from];
    stops.extend_from_slice(via);
    stops.push(to);
    let mut out: Vec<Hop> = Vec::new();
    for w in stops.windows(2) {
        let reach = reach_from(g, &[w[0]]);
        let seg = path_to_name(g, &reach, w[1]).unwrap_or_else(|| {
            panic!(
                "no path {} -> {} (full route {})",
                w[0],
                w[1],
                stops.join(" -> ")
            )
        });
        if out.is_empty() {
            out.extend(seg);
        } else {
            out.extend(seg.into_iter().skip(1));
        }
    }
    out
}

/// The edge into `name` on `path`, with its kind, file and via.
fn into<'p>(path: &'p [Hop], name: &str) -> &'p analyzer::CallEdge {
    hop(path, name)
        .edge
        .as_ref()
        .unwrap_or_else(|| panic!("`{name}` is the path's start"))
}

fn check_mlx5_paths(k: &Kernel) {
    let v = k.version;
    let g = k.mlx5();

    // reg_mr: a write command, reached from ioctl through INVOKE_WRITE; the driver is called
    // through pd->device->ops.reg_user_mr in ib_uverbs_reg_mr itself.
    let p = path_via(
        g,
        "ib_uverbs_ioctl",
        &["ib_uverbs_reg_mr"],
        "mlx5_ib_reg_user_mr",
    );
    eprintln!("[{v}] mlx5 reg_mr path:\n{}", render(&p));
    let e = into(&p, "mlx5_ib_reg_user_mr");
    assert_eq!(e.kind, EdgeKind::OpsTable, "{}", render(&p));
    assert_eq!(e.via.as_deref(), Some("reg_user_mr"));
    assert_eq!(e.file, "drivers/infiniband/core/uverbs_cmd.c");
    let prev = &p[p.len() - 2];
    assert_eq!(prev.name, "ib_uverbs_reg_mr", "{}", render(&p));
    assert_eq!(
        into(&p, "ib_uverbs_reg_mr").kind,
        EdgeKind::WriteCommand,
        "{}",
        render(&p)
    );
    // The plain BFS path from ioctl takes the same route.
    let reach = reach_from(g, &["ib_uverbs_ioctl"]);
    let bfs = path_to_name(g, &reach, "mlx5_ib_reg_user_mr").expect("reg_user_mr reachable");
    assert!(
        bfs.iter().any(|h| h.name == "ib_uverbs_reg_mr"),
        "[{v}] shortest path avoids ib_uverbs_reg_mr:\n{}",
        render(&bfs)
    );

    // modify_qp: the ops call sits in the core_priv.h inline stub (SECURITY_INFINIBAND off).
    let p = path_via(
        g,
        "ib_uverbs_ioctl",
        &["ib_uverbs_modify_qp", "modify_qp", "_ib_modify_qp"],
        "mlx5_ib_modify_qp",
    );
    eprintln!("[{v}] mlx5 modify_qp path:\n{}", render(&p));
    let names: Vec<&str> = p.iter().map(|h| h.name.as_str()).collect();
    let tail = &names[names.len() - 3..];
    assert_eq!(
        tail,
        [
            "_ib_modify_qp",
            "ib_security_modify_qp",
            "mlx5_ib_modify_qp"
        ],
        "{}",
        render(&p)
    );
    let stub = hop(&p, "ib_security_modify_qp");
    assert_eq!(stub.file, "drivers/infiniband/core/core_priv.h");
    assert_eq!(stub.module, None);
    assert_eq!(stub.edge.as_ref().map(|e| e.kind), Some(EdgeKind::Inline));
    let e = into(&p, "mlx5_ib_modify_qp");
    assert_eq!(e.kind, EdgeKind::OpsTable);
    assert_eq!(e.via.as_deref(), Some("modify_qp"));
    assert_eq!(e.file, "drivers/infiniband/core/core_priv.h");
    assert!(
        !k.tree
            .files
            .iter()
            .any(|f| f.path == "drivers/infiniband/core/security.c"),
        "security.c must not be built with Debian's config"
    );
    let bfs = path_to_name(g, &reach, "mlx5_ib_modify_qp").expect("modify_qp reachable");
    for w in ["ib_uverbs_modify_qp", "modify_qp", "_ib_modify_qp"] {
        assert!(
            bfs.iter().any(|h| h.name == w),
            "[{v}] BFS path misses {w}:\n{}",
            render(&bfs)
        );
    }

    // create_qp: the ioctl method, a token-pasted handler reached by a uapi-method edge.
    let p = path_via(
        g,
        "ib_uverbs_ioctl",
        &["ib_uverbs_handler_UVERBS_METHOD_QP_CREATE"],
        "mlx5_ib_create_qp",
    );
    eprintln!("[{v}] mlx5 create_qp path:\n{}", render(&p));
    let h = hop(&p, "ib_uverbs_handler_UVERBS_METHOD_QP_CREATE");
    assert_eq!(h.file, "drivers/infiniband/core/uverbs_std_types_qp.c");
    let e = h.edge.as_ref().expect("edge");
    assert_eq!(e.kind, EdgeKind::UapiMethod);
    assert_eq!(e.via.as_deref(), Some("UVERBS_METHOD_QP_CREATE"));
    assert_eq!(e.file, "drivers/infiniband/core/uverbs_ioctl.c");
    assert_eq!(into(&p, "mlx5_ib_create_qp").kind, EdgeKind::OpsTable);
    assert_eq!(
        into(&p, "mlx5_ib_create_qp").via.as_deref(),
        Some("create_qp")
    );

    // ib_umem_get: umem.c is linked into ib_uverbs by the Makefile, not ib_core.
    let umem = one(g, "ib_umem_get");
    assert_eq!(g.node(umem).file, "drivers/infiniband/core/umem.c");
    assert_eq!(g.node(umem).module.as_deref(), Some("ib_uverbs"));
    let p = path_to(g, &reach, umem).expect("ib_umem_get reachable from ib_uverbs_ioctl");
    eprintln!("[{v}] ib_umem_get path:\n{}", render(&p));

    // alloc_and_bind (counters.c) is reached through rdma_counter_bind_qp_auto.
    let p = path_to_name(g, &reach, "alloc_and_bind").expect("alloc_and_bind reachable");
    eprintln!("[{v}] alloc_and_bind path:\n{}", render(&p));
    assert_eq!(
        p[p.len() - 2].name,
        "rdma_counter_bind_qp_auto",
        "{}",
        render(&p)
    );
    assert_eq!(into(&p, "alloc_and_bind").kind, EdgeKind::Direct);

    // rdma_fill_sgid_attr: a static in verbs.c behind the modify/AH paths.
    let fill = one(g, "rdma_fill_sgid_attr");
    assert_eq!(g.node(fill).file, "drivers/infiniband/core/verbs.c");
    let p = path_to(g, &reach, fill).expect("rdma_fill_sgid_attr reachable");
    eprintln!("[{v}] rdma_fill_sgid_attr path:\n{}", render(&p));
}

fn check_counts(k: &Kernel, mlx5_ops_tables: usize) {
    let v = k.version;
    let g = k.mlx5();

    let resolved = g
        .write_commands()
        .iter()
        .filter(|w| w.handler_id.is_some())
        .count();
    let ex = g
        .write_commands()
        .iter()
        .filter(|w| w.id.contains("_EX_CMD_"))
        .count();
    eprintln!(
        "[{v}] write commands {} ({} _EX, {} handlers resolved)",
        g.write_commands().len(),
        ex,
        resolved
    );
    assert_eq!(g.write_commands().len(), 47);
    assert_eq!(resolved, 47);
    assert_eq!(ex, 12);
    for (cmd, handler) in [
        ("IB_USER_VERBS_CMD_MODIFY_QP", "ib_uverbs_modify_qp"),
        ("IB_USER_VERBS_CMD_REG_MR", "ib_uverbs_reg_mr"),
        ("IB_USER_VERBS_CMD_ALLOC_PD", "ib_uverbs_alloc_pd"),
    ] {
        assert!(
            g.write_commands()
                .iter()
                .any(|w| w.id == cmd && w.handler == handler),
            "{cmd} -> {handler}"
        );
    }

    let mlx5_tables: Vec<&str> = g
        .ops_tables()
        .iter()
        .filter(|t| t.file.starts_with("drivers/infiniband/hw/mlx5/"))
        .map(|t| t.name.as_str())
        .collect();
    eprintln!(
        "[{v}] mlx5 ops tables {}: {}",
        mlx5_tables.len(),
        mlx5_tables.join(", ")
    );
    assert_eq!(mlx5_tables.len(), mlx5_ops_tables, "{mlx5_tables:?}");
    assert!(mlx5_tables.contains(&"mlx5_ib_dev_ops"));
    let dev_ops = g
        .ops_tables()
        .iter()
        .find(|t| t.name == "mlx5_ib_dev_ops")
        .expect("mlx5_ib_dev_ops");
    let bound = dev_ops.members.iter().filter(|m| m.2.is_some()).count();
    eprintln!("[{v}] mlx5_ib_dev_ops: {bound} members bound to functions");
    assert!(bound >= 50, "mlx5_ib_dev_ops has {bound} resolved members");

    let names: Vec<String> = DEFAULT_ENTRIES.iter().map(|s| s.to_string()).collect();
    let ids = g.entries(&names).expect("default entries");
    let reach = g.reach(&ids);
    let mut per_module: BTreeMap<String, usize> = BTreeMap::new();
    for id in reach.keys() {
        *per_module
            .entry(
                g.node(*id)
                    .module
                    .clone()
                    .unwrap_or_else(|| "(inline)".into()),
            )
            .or_default() += 1;
    }
    let ioctl_only = reach_from(g, &["ib_uverbs_ioctl"]).len();
    eprintln!(
        "[{v}] reachable with mlx5: {} from {} ({} from ib_uverbs_ioctl alone) {per_module:?}; \
         uapi methods {}, edges {}",
        reach.len(),
        names.join("+"),
        ioctl_only,
        g.uapi_methods().len(),
        g.stats().edges
    );
    assert!(
        (700..=2000).contains(&reach.len()),
        "reachable set {} outside 700..=2000",
        reach.len()
    );
    assert!(per_module.get("mlx5_ib").copied().unwrap_or(0) > 100);
    assert!(reach
        .keys()
        .all(|&id| !g.node(id).file.starts_with("drivers/infiniband/hw/")
            || g.node(id).file.starts_with("drivers/infiniband/hw/mlx5/")));

    // Static name clashes stay apart: create_qp is defined in core/uverbs_cmd.c,
    // core/verbs.c and hw/mlx5/qp.c (cxgb4 and rtrs are out of scope / not built).
    let files: BTreeSet<&str> = g
        .find("create_qp")
        .iter()
        .map(|&i| g.node(i).file.as_str())
        .collect();
    eprintln!("[{v}] create_qp definitions: {files:?}");
    assert_eq!(g.find("create_qp").len(), files.len());
    for f in [
        "drivers/infiniband/core/uverbs_cmd.c",
        "drivers/infiniband/core/verbs.c",
        "drivers/infiniband/hw/mlx5/qp.c",
    ] {
        assert!(files.contains(f), "no create_qp node in {f}: {files:?}");
    }
    let modules: BTreeSet<Option<&str>> = g
        .find("create_qp")
        .iter()
        .map(|&i| g.node(i).module.as_deref())
        .collect();
    assert!(modules.contains(&Some("ib_uverbs")) && modules.contains(&Some("ib_core")));
    assert!(modules.contains(&Some("mlx5_ib")));

    assert_eq!(
        g.node(one(g, "ib_umem_get")).module.as_deref(),
        Some("ib_uverbs")
    );
    assert_eq!(
        g.node(one(g, "ib_uverbs_ioctl")).module.as_deref(),
        Some("ib_uverbs")
    );
}

#[test]
fn v6_12_mlx5_paths() {
    check_mlx5_paths(kernel("6.12"));
}

#[test]
fn v6_1_mlx5_paths() {
    check_mlx5_paths(kernel("6.1"));
}

#[test]
fn v6_12_counts() {
    let k = kernel("6.12");
    assert_eq!(k.tree.version.as_deref().map(|s| &s[..5]), Some("6.12."));
    check_counts(k, 16);
}

#[test]
fn v6_1_counts() {
    let k = kernel("6.1");
    assert_eq!(k.tree.version.as_deref().map(|s| &s[..4]), Some("6.1."));
    // hw_switchdev_vport_op (counters.c) is new in 6.12.
    check_counts(k, 15);
}

#[test]
fn v6_12_bnxt_re_scope() {
    let k = kernel("6.12");
    let g = k.bnxt();
    let p = path_via(
        g,
        "ib_uverbs_ioctl",
        &["ib_uverbs_reg_mr"],
        "bnxt_re_reg_user_mr",
    );
    eprintln!("[6.12] bnxt_re reg_mr path:\n{}", render(&p));
    assert_eq!(
        p.last().map(|h| h.name.as_str()),
        Some("bnxt_re_reg_user_mr")
    );
    let e = into(&p, "bnxt_re_reg_user_mr");
    assert_eq!(e.kind, EdgeKind::OpsTable);
    assert_eq!(e.via.as_deref(), Some("reg_user_mr"));
    assert_eq!(
        hop(&p, "bnxt_re_reg_user_mr").module.as_deref(),
        Some("bnxt_re")
    );

    let reach = reach_from(g, DEFAULT_ENTRIES);
    let mlx5: Vec<&str> = reach
        .keys()
        .map(|&id| g.node(id).name.as_str())
        .filter(|n| n.starts_with("mlx5_"))
        .collect();
    let bnxt = reach
        .keys()
        .filter(|&&id| {
            g.node(id)
                .file
                .starts_with("drivers/infiniband/hw/bnxt_re/")
        })
        .count();
    eprintln!(
        "[6.12] reachable with bnxt_re: {} ({} in hw/bnxt_re); bnxt_re ops tables {}",
        reach.len(),
        bnxt,
        g.ops_tables().len()
    );
    assert!(mlx5.is_empty(), "mlx5 functions reachable: {mlx5:?}");
    assert!(bnxt > 20, "only {bnxt} bnxt_re functions reachable");
    assert!(g.nodes().iter().all(|n| !n.file.contains("/hw/mlx5/")));
}

#[test]
fn v6_1_bnxt_re_not_built() {
    let k = kernel("6.1");
    assert_eq!(
        k.tree.config.kbuild_letter("CONFIG_INFINIBAND_BNXT_RE"),
        "",
        "Debian's 6.1 config does not build bnxt_re"
    );
    assert!(
        k.tree
            .build
            .modules
            .keys()
            .all(|f| !f.starts_with("drivers/infiniband/hw/bnxt_re/")),
        "a bnxt_re .c file is in the 6.1 build map"
    );
    let g = k.bnxt();
    let in_bnxt: Vec<String> = g
        .nodes()
        .iter()
        .filter(|n| n.file.starts_with("drivers/infiniband/hw/bnxt_re/"))
        .map(|n| format!("{} {}:{}", n.name, n.file, n.line))
        .collect();
    eprintln!(
        "[6.1] bnxt_re scope: {} functions, {} under hw/bnxt_re",
        g.nodes().len(),
        in_bnxt.len()
    );
    assert!(g.find("bnxt_re_reg_user_mr").is_empty());
    assert!(g.ops_tables().is_empty(), "no vendor ops table is built");
    assert_eq!(g.stats().edges_by_kind["ops-table"], 0);
    assert!(g.nodes().iter().all(|n| !n.name.starts_with("mlx5_")));
    assert!(g
        .nodes()
        .iter()
        .all(|n| !n.file.ends_with(".c") || !n.file.starts_with("drivers/infiniband/hw/bnxt_re/")));
    let reach = reach_from(g, DEFAULT_ENTRIES);
    assert!(reach
        .keys()
        .all(|&id| !g.node(id).file.starts_with("drivers/infiniband/hw/")));
    // Headers of a driver directory Kbuild never enters are not parsed either: their static
    // inlines would otherwise be graph nodes of a driver that is not built.
    assert!(
        in_bnxt.is_empty(),
        "{} header inlines of the unbuilt hw/bnxt_re are graph nodes: {in_bnxt:?}",
        in_bnxt.len()
    );
}

/// The real tree holds a header in every include directory the rules name, and the load reads
/// them (a cache from before the rules named `include/linux/mlx4/` lacks it:
/// scripts/fetch-kernel.sh rebuilds such a cache, its layout version says so).
#[test]
fn v6_12_reads_every_include_directory_of_the_rules() {
    let k = kernel("6.12");
    let layout = k.tree.layout();
    for dir in &layout.include_dirs {
        let prefix = format!("{dir}/");
        let n = k
            .tree
            .files
            .iter()
            .filter(|f| f.path.starts_with(&prefix))
            .count();
        assert!(
            n > 0,
            "no file read under {dir} in {}: run scripts/fetch-kernel.sh 6.12 (layout 3 extracts every directory of the rules)",
            k.tree.root.display()
        );
        eprintln!("[6.12] {dir}: {n} files");
    }
    assert!(layout
        .include_dirs
        .iter()
        .any(|d| d == "include/linux/mlx4"));
}

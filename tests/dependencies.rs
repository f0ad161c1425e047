//! The crate boundaries hold (ARCHITECTURE invariants): the runtime (`collector`, with the
//! `wire` values and the `baseline` stage below it) stands on the contract (`manifest`) and on
//! nothing that parses C or generates code, the host agent (`probegen-agent`) on the collector,
//! its sinks and the `bundle` only, and the contract depends on no workspace crate.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// name -> names of its normal (non-dev, non-build) dependencies, from `cargo metadata`.
fn normal_dependency_graph() -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        // The host's dependencies only: other platforms' crates are not in the offline cache.
        .args(["--filter-platform", "x86_64-unknown-linux-gnu"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let names: BTreeMap<&str, &str> = v["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    let mut graph = BTreeMap::new();
    for node in v["resolve"]["nodes"].as_array().expect("resolve.nodes") {
        let name = names[node["id"].as_str().expect("id")].to_string();
        let deps = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k["kind"].is_null()))
            })
            .filter_map(|d| names.get(d["pkg"].as_str()?).map(|n| n.to_string()))
            .collect();
        graph.insert(name, deps);
    }
    graph
}

fn closure(graph: &BTreeMap<String, Vec<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![root.to_string()];
    while let Some(n) = stack.pop() {
        for d in graph.get(&n).into_iter().flatten() {
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn collector_depends_on_no_crate_that_parses_c_or_generates_code() {
    let graph = normal_dependency_graph();
    let deps = closure(&graph, "collector");
    assert!(deps.contains("manifest"), "{deps:?}");
    let forbidden: Vec<&String> = deps
        .iter()
        .filter(|d| {
            d.starts_with("tree-sitter")
                || d.starts_with("askama")
                || [
                    "analyzer",
                    "codegen",
                    "heuristics",
                    "maintain",
                    "pipeline",
                    "petgraph",
                    "rayon",
                ]
                .contains(&d.as_str())
        })
        .collect();
    assert!(forbidden.is_empty(), "collector depends on {forbidden:?}");
}

/// The host agent (`probegen-agent`: the collector and its sinks) ships to every host: no
/// analyzer, no C parser, no code generation in it (the `probegen` binary has them).
#[test]
fn agent_depends_on_no_analyzer_and_no_c_parser() {
    let graph = normal_dependency_graph();
    let deps = closure(&graph, "probegen-agent");
    for needed in [
        "manifest",
        "wire",
        "baseline",
        "bundle",
        "collector",
        "sink-clickhouse",
        "sink-prometheus",
    ] {
        assert!(deps.contains(needed), "{needed} not in {deps:?}");
    }
    let forbidden: Vec<&String> = deps
        .iter()
        .filter(|d| {
            d.starts_with("tree-sitter")
                || d.starts_with("askama")
                || d.starts_with("libmimalloc")
                || [
                    "analyzer",
                    "codegen",
                    "heuristics",
                    "maintain",
                    "petgraph",
                    "rayon",
                    "probegen",
                ]
                .contains(&d.as_str())
        })
        .collect();
    assert!(
        forbidden.is_empty(),
        "probegen-agent depends on {forbidden:?}"
    );
}

#[test]
fn manifest_depends_on_no_workspace_crate() {
    let graph = normal_dependency_graph();
    let deps = closure(&graph, "manifest");
    let workspace = [
        "analyzer",
        "heuristics",
        "codegen",
        "maintain",
        "pipeline",
        "bundle",
        "wire",
        "baseline",
        "collector",
        "sink-clickhouse",
        "sink-prometheus",
        "probegen-agent",
        "probegen",
    ];
    let inside: Vec<&String> = deps
        .iter()
        .filter(|d| workspace.contains(&d.as_str()))
        .collect();
    assert!(inside.is_empty(), "manifest depends on {inside:?}");
}

/// Data flows one way (ARCHITECTURE.md): each workspace crate depends only on crates before it
/// in the flow, the two consumers of the analysis (`codegen`, `maintain`) not on each other,
/// and the CLI (`probegen`) on no stage of the pipeline but through `pipeline`.
#[test]
fn workspace_crates_depend_along_the_data_flow() {
    let graph = normal_dependency_graph();
    // Allowed workspace dependencies of each crate.
    let allowed: &[(&str, &[&str])] = &[
        ("manifest", &[]),
        ("analyzer", &["manifest"]),
        ("heuristics", &["manifest", "analyzer"]),
        ("codegen", &["manifest", "analyzer", "heuristics"]),
        ("maintain", &["manifest", "analyzer", "heuristics"]),
        // The end of the flow: runs a command through the crates before it.
        (
            "pipeline",
            &["manifest", "analyzer", "heuristics", "codegen", "maintain"],
        ),
        // The bundle: written with the compile step passed in, so no code generation in it.
        ("bundle", &["manifest"]),
        // The user-space providers: ELF facts of a library, read by the CLI and the agent alike.
        ("providers", &[]),
        // The runtime: the values its stages pass, the baseline on them, the collector on both.
        ("wire", &["manifest"]),
        ("baseline", &["manifest", "wire"]),
        ("collector", &["manifest", "wire", "baseline"]),
        ("sink-clickhouse", &["collector"]),
        ("sink-prometheus", &["collector"]),
        // A stage of the run an embedder adds (`collect --provider-probes`): the collector's
        // face and the provider table it probes by.
        ("stage-providers", &["wire", "collector", "providers"]),
        ("stage-ports", &["wire", "collector"]),
        (
            "probegen-agent",
            &[
                "manifest",
                "baseline",
                "bundle",
                "collector",
                "sink-clickhouse",
                "sink-prometheus",
                "stage-providers",
                "stage-ports",
            ],
        ),
        // The command line: the pipeline and the agent, one call per command; the bundle with
        // clang passed in.
        (
            "probegen",
            &[
                "manifest",
                "maintain",
                "pipeline",
                "bundle",
                "collector",
                "probegen-agent",
                "providers",
            ],
        ),
    ];
    let workspace: Vec<&str> = allowed.iter().map(|(c, _)| *c).collect();
    for (krate, ok) in allowed {
        let direct = graph
            .get(*krate)
            .unwrap_or_else(|| panic!("{krate} missing from cargo metadata"));
        let wrong: Vec<&String> = direct
            .iter()
            .filter(|d| workspace.contains(&d.as_str()) && !ok.contains(&d.as_str()))
            .collect();
        assert!(wrong.is_empty(), "{krate} depends on {wrong:?}");
    }
}

/// The agent's own dependencies outside the workspace add nothing to what every host runs
/// beyond the command line parser: serde (the bundle's index), sha2 (its hashes), serde_json
/// and thiserror are already in the collector's closure (issue 23 added serde and sha2).
#[test]
fn agent_adds_no_crate_beyond_the_collector_but_its_command_line() {
    let graph = normal_dependency_graph();
    let collector = closure(&graph, "collector");
    let workspace = [
        "manifest",
        "baseline",
        "bundle",
        "collector",
        "sink-clickhouse",
        "sink-prometheus",
        "stage-providers",
        "stage-ports",
    ];
    let extra: Vec<&String> = graph["probegen-agent"]
        .iter()
        .filter(|d| !workspace.contains(&d.as_str()) && d.as_str() != "clap")
        .filter(|d| !collector.contains(*d))
        .collect();
    assert!(
        extra.is_empty(),
        "probegen-agent adds {extra:?} (justify it here)"
    );
    // nor do the stages it reads bundles and learns baselines with
    for stage in ["bundle", "baseline"] {
        let extra: Vec<String> = closure(&graph, stage)
            .into_iter()
            .filter(|d| !collector.contains(d) && d != "bundle")
            .collect();
        assert!(extra.is_empty(), "{stage} adds {extra:?} (justify it here)");
    }
    // the provider stage (`--provider-probes`) adds the provider table's readers only: ELF
    // build-ids (object) and the YAML table
    let mut extra: Vec<String> = closure(&graph, "stage-providers")
        .into_iter()
        .filter(|d| {
            !collector.contains(d)
                && !["stage-providers", "collector", "wire"].contains(&d.as_str())
        })
        .collect();
    extra.sort();
    assert_eq!(
        extra, PROVIDER_STAGE_ADDS,
        "stage-providers adds {extra:?} (justify it here)"
    );
}

/// What `stage-providers` adds to the agent beyond the collector.
const PROVIDER_STAGE_ADDS: &[&str] = &["object", "providers"];

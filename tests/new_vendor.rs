//! A vendor the built-in rules do not know, added by data alone: a `--rules` file with its
//! directories, module, prefixes and firmware command, used with every command that takes
//! `--vendor` (graph, path, generate, explain, check) and with `port`. The tree is the
//! two-vendor fixture plus a third driver, `hw/acme`, written here.
//!
//! This is the recipe "Add a vendor" of `docs/recipes.md`, step by step: the vendor's entry is
//! read from the recipe's YAML block, so the recipe cannot drift from what works.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

mod common;

use common::{append, probegen, stderr, stdout, write};

use std::path::{Path, PathBuf};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The fixture with an `acme` driver: create_qp through a firmware command of its own.
fn three_vendor_tree(tag: &str) -> PathBuf {
    let dir = common::temp_dir(tag);
    common::copy_dir(&common::fixture("ops-table-two-vendors"), &dir);
    append(
        &dir.join("drivers/infiniband/hw/Makefile"),
        "obj-$(CONFIG_INFINIBAND_ACME)\t\t+= acme/\n",
    );
    append(&dir.join(".config"), "CONFIG_INFINIBAND_ACME=m\n");
    // Both uverbs entries, as in a kernel (explain and check start from both).
    append(
        &dir.join("drivers/infiniband/core/uverbs_main.c"),
        "\nlong ib_uverbs_write(struct file *filp, const char *buf, unsigned long count,\n\
         \t\t     long long *pos)\n{\n\
         \treturn ib_alloc_pd_user(filp->private_data, filp->pd, NULL);\n}\n",
    );
    write(
        &dir.join("drivers/infiniband/hw/acme/Makefile"),
        "obj-$(CONFIG_INFINIBAND_ACME) += acme_ib.o\nacme_ib-y := main.o\n",
    );
    write(
        &dir.join("drivers/infiniband/hw/acme/main.c"),
        "// SPDX-License-Identifier: MIT\n\
         #include <rdma/ib_verbs.h>\n\n\
         static int acme_fw_create_qp(struct ib_qp *qp)\n{\n\
         \treturn acme_mbox_exec(qp->dev, 7, qp);\n}\n\n\
         static int acme_create_qp(struct ib_qp *qp, struct ib_qp_init_attr *attr,\n\
         \t\t\t  struct ib_udata *udata)\n{\n\
         \tif (!attr)\n\t\treturn -22;\n\
         \treturn acme_fw_create_qp(qp);\n}\n\n\
         static int acme_alloc_pd(struct ib_pd *pd, struct ib_udata *udata)\n{\n\
         \treturn pd ? 0 : -12;\n}\n\n\
         static const struct ib_device_ops acme_dev_ops = {\n\
         \t.owner = THIS_MODULE,\n\
         \t.alloc_pd = acme_alloc_pd,\n\
         \t.create_qp = acme_create_qp,\n};\n\n\
         int acme_probe(struct acme_dev *dev)\n{\n\
         \tib_set_device_ops(&dev->ibdev, &acme_dev_ops);\n\
         \treturn 0;\n}\n",
    );
    dir
}

/// The `vendors:` block of the recipe "Add a vendor" in docs/recipes.md, dedented.
fn recipe_vendor_yaml() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/recipes.md");
    let recipes = std::fs::read_to_string(&path).expect("docs/recipes.md");
    let section = recipes
        .split("\n## Add a vendor\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/recipes.md has a section `## Add a vendor`");
    let block = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a ```yaml block in the recipe");
    let indent = block.len() - block.trim_start().len();
    let text: String = block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{}\n", l.get(indent..).unwrap_or(l.trim_start())))
        .collect();
    assert!(text.starts_with("vendors:\n  acme:\n"), "{text}");
    text
}

/// The built-in rules plus the acme vendor, as the recipe writes it.
fn acme_rules(dir: &Path) -> PathBuf {
    let text = heuristics::BUILTIN_RULES.replacen("vendors:\n", &recipe_vendor_yaml(), 1);
    assert_ne!(text, heuristics::BUILTIN_RULES, "rules file changed");
    let path = dir.join("acme-rules.yaml");
    write(&path, &text);
    path
}

#[test]
fn a_vendor_added_by_a_rules_file_works_with_every_command() {
    let tree = three_vendor_tree("acme");
    let rules = acme_rules(&tree);
    let (t, r) = (s(&tree), s(&rules));
    let base = ["--kernel-src", t.as_str(), "--vendor", "acme"];

    // Without the rules file the vendor is unknown: one line, exit 2.
    let o = probegen(&[&["graph"][..], &base].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown --vendor `acme`"),
        "{}",
        stderr(&o)
    );

    let with = |cmd: &[&str], rest: &[&str]| {
        let args: Vec<&str> = cmd
            .iter()
            .chain(&base)
            .chain(&["--rules", r.as_str()])
            .chain(rest)
            .copied()
            .collect();
        probegen(&args)
    };

    // graph: only acme's driver besides the core.
    let o = with(
        &["graph"],
        &["--entry", "ib_uverbs_ioctl", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("graph JSON");
    assert_eq!(v["vendor"], "acme");
    let modules = v["reachable_by_module"].as_object().expect("modules");
    assert!(modules.contains_key("acme_ib"), "{modules:?}");
    assert!(!modules.contains_key("mlx5_ib"), "{modules:?}");

    // path: into the firmware command issuer.
    let o = with(
        &["path"],
        &["--from", "ib_uverbs_ioctl", "--to", "acme_fw_create_qp"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("acme_create_qp"), "{}", stdout(&o));

    // generate: the ops implementations and the firmware-command issuer are probes.
    let out = tree.join("out-acme");
    let o = with(
        &["generate"],
        &["--entry", "ib_uverbs_ioctl", "--out", &s(&out)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let manifest = out.join("manifest.yaml");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let m = manifest::Manifest::from_yaml(&text, &s(&manifest)).expect("parse");
    assert_eq!(m.vendor, "acme");
    let probe = |f: &str| m.probes.iter().find(|p| p.function == f);
    let fw = probe("acme_fw_create_qp").expect("acme_fw_create_qp probe");
    assert_eq!(fw.focus.map(|f| f.as_str()), Some("hardware"));
    assert!(fw.evidence.contains("acme_mbox_exec"), "{}", fw.evidence);
    let qp = probe("acme_create_qp").expect("acme_create_qp probe");
    assert_eq!(
        (qp.layer.as_str(), qp.module.as_str()),
        ("vendor", "acme_ib")
    );
    assert!(probe("acme_alloc_pd").is_some());
    assert!(!m.probes.iter().any(|p| p.function.starts_with("mlx5_")));

    // explain: the verdict names the vendor's hardware command.
    let o = with(&["explain"], &["acme_fw_create_qp"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("KEEP"), "{}", stdout(&o));

    // check: its own set, no drift.
    let o = probegen(&[
        "check",
        "--kernel-src",
        &t,
        "--rules",
        &r,
        "--against",
        &s(&manifest),
    ]);
    assert!(
        stdout(&o).contains("No drift"),
        "{}\n{}",
        stdout(&o),
        stderr(&o)
    );

    // port: mlx5's probes mapped onto acme through the ops members.
    let o = probegen(&[
        "port",
        "--kernel-src",
        &t,
        "--from",
        "mlx5",
        "--to",
        "acme",
        "--rules",
        &r,
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("port JSON");
    let maps = v["mappings"].as_array().expect("mappings");
    assert!(
        maps.iter()
            .any(|m| m["member"] == "create_qp" && m["to"] == "acme_create_qp"),
        "{maps:?}"
    );
}

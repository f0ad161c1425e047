//! probes.bpf.c and probegen.bpf.h: the C record and the collector's Rust mirror
//! (`manifest::PgRecord`) agree, the C compiles to a BPF object whose BTF holds the
//! record, one section per attachable probe, and rendering is deterministic.
//!
//! Needs clang, llvm-objdump and bpftool (scripts/install-deps.sh); fails without them.

// A test reads as one scenario from setup to assertions; the 80-line limit is for the code.
#![allow(clippy::too_many_lines)]

use std::path::{Path, PathBuf};
use std::process::Command;

use codegen::{render_bpf, render_header, HEADER_NAME};
use manifest::{KernelInfo, Manifest, Probe, Stats};

const REFRESH: &str = "cargo run --release -- generate --kernel 6.12.117 --vendor rxe";

fn probe(
    id: u32,
    function: &str,
    module: &str,
    returns: &str,
    nargs: usize,
    attach: &str,
) -> Probe {
    Probe {
        id,
        function: function.into(),
        module: module.into(),
        file: format!("drivers/infiniband/{module}.c"),
        line: 100 + id as usize,
        layer: manifest::Layer::parse("core").expect("layer"),
        object: manifest::Object::parse("MR").expect("object"),
        rule: manifest::Rule::parse("focus").expect("rule"),
        focus: Some(manifest::FocusKind::parse("handler").expect("focus")),
        pins_user_memory: false,
        error_sites: None,
        evidence: "test".into(),
        returns: manifest::ReturnKind::parse(returns).expect("returns"),
        ret_size: match returns {
            "int" => 4,
            "ptr" => 8,
            "bool" => 1,
            _ => 0,
        },
        null_ok: false,
        nargs,
        attach: manifest::Attach::parse(attach).expect("attach"),
        attach_symbol: None,
        suggest: None,
        args: Vec::new(),
        calls: Vec::new(),
        path: vec!["ib_uverbs_write".into(), function.into()],
    }
}

fn manifest() -> Manifest {
    let mut clone = probe(2, "rxe_mr_init_user", "rdma_rxe", "int", 5, "clone-only");
    clone.attach_symbol = Some("rxe_mr_init_user.isra.0".into());
    // ib_umem_get(device, addr, size, access): the manifest records the three scalars.
    let mut umem = probe(1, "ib_umem_get", "ib_uverbs", "ptr", 4, "fexit");
    umem.args = ["addr", "size", "access"]
        .iter()
        .enumerate()
        .map(|(i, n)| manifest::ProbeArg {
            index: i + 1,
            name: n.to_string(),
        })
        .collect();
    let probes = vec![
        probe(0, "ib_uverbs_reg_mr", "ib_uverbs", "int", 1, "fexit"),
        umem,
        clone,
        probe(3, "rxe_cleanup_task", "rdma_rxe", "void", 1, "fexit"),
        probe(4, "rxe_get_av", "rdma_rxe", "ptr", 2, "inlined"),
        probe(5, "rxe_create_qp", "rdma_rxe", "int", 3, "fexit"),
    ];
    Manifest {
        data_plane: Vec::new(),
        focus_ops: Vec::new(),
        schema: manifest::SCHEMA_ID.into(),
        kernel: KernelInfo {
            version: "6.12.117".into(),
            config: ".config".into(),
        },
        vendor: "rxe".into(),
        entries: vec!["ib_uverbs_write".into()],
        degraded: Vec::new(),
        probes,
        excluded: Vec::new(),
        stats: Stats::default(),
    }
}

/// A tool from PATH or /usr/sbin (bpftool lives there); a missing one fails the test.
fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(["/usr/sbin".into(), "/sbin".into()]);
    for d in dirs {
        let p = d.join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("`{name}` not found: run scripts/install-deps.sh (clang, llvm, bpftool, libbpf-dev)");
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (scripts/install-deps.sh)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh directory under the target dir (no tempfile crate).
fn scratch(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bpf-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// (type, name, array length) of each field of `struct pg_record { ... };`.
fn c_record_fields(c: &str) -> Vec<(String, String, Option<usize>)> {
    let start = c
        .find("struct pg_record {")
        .expect("struct pg_record in probes.bpf.c");
    let body = &c[start + "struct pg_record {".len()..];
    let body = &body[..body.find("};").expect("end of struct pg_record")];
    let mut fields = Vec::new();
    for line in body.lines() {
        // Drop a trailing /* comment */.
        let line = line.split("/*").next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        let decl = line
            .strip_suffix(';')
            .unwrap_or_else(|| panic!("field line `{line}`"));
        let (ty, name) = decl
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("field `{decl}`"));
        let (name, len) = match name.split_once('[') {
            Some((n, rest)) => (
                n,
                Some(rest.trim_end_matches(']').parse::<usize>().unwrap()),
            ),
            None => (name, None),
        };
        fields.push((ty.trim().to_string(), name.to_string(), len));
    }
    fields
}

/// The Rust type a C field must have, and its size.
fn c_to_rust(ty: &str, len: Option<usize>) -> (String, usize) {
    let (rust, size) = match ty {
        "__u64" => ("u64", 8),
        "__s64" => ("i64", 8),
        "__u32" => ("u32", 4),
        "__s32" => ("i32", 4),
        "char" => ("u8", 1),
        other => panic!("unexpected C field type `{other}`"),
    };
    match len {
        Some(n) => (format!("[{rust}; {n}]"), size * n),
        None => (rust.to_string(), size),
    }
}

fn type_string(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect::<Vec<_>>()
            .join("::"),
        syn::Type::Array(a) => {
            let len = match &a.len {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                }) => i.base10_digits().to_string(),
                other => panic!("array length {other:?}"),
            };
            format!("[{}; {len}]", type_string(&a.elem))
        }
        other => panic!("unexpected Rust field type {other:?}"),
    }
}

#[test]
fn record_layouts_agree() {
    let c = render_header().unwrap();
    let rs = include_str!("../../manifest/src/record.rs");
    let file =
        syn::parse_file(rs).unwrap_or_else(|e| panic!("record.rs does not parse: {e}\n{rs}"));

    let mut rust_fields = None;
    let record_size = Some(manifest::RECORD_SIZE);
    for item in &file.items {
        match item {
            syn::Item::Struct(s) if s.ident == "PgRecord" => {
                let attrs: Vec<String> = s.attrs.iter().map(quote_attr).collect();
                assert!(
                    attrs.iter().any(|a| a.contains("repr") && a.contains('C')),
                    "PgRecord must be #[repr(C)]: {attrs:?}"
                );
                rust_fields = Some(
                    s.fields
                        .iter()
                        .map(|f| (f.ident.as_ref().unwrap().to_string(), type_string(&f.ty)))
                        .collect::<Vec<_>>(),
                );
            }
            _ => {}
        }
    }
    let rust_fields = rust_fields.expect("struct PgRecord in record.rs");
    let c_fields = c_record_fields(&c);
    assert_eq!(
        c_fields.len(),
        rust_fields.len(),
        "C {c_fields:?}\nRust {rust_fields:?}"
    );

    let mut offset = 0;
    for ((cty, cname, len), (rname, rty)) in c_fields.iter().zip(&rust_fields) {
        assert_eq!(cname, rname, "field order");
        let (want, size) = c_to_rust(cty, *len);
        assert_eq!(&want, rty, "type of {cname}");
        let align = size / len.unwrap_or(1);
        assert_eq!(
            offset % align,
            0,
            "{cname} at offset {offset} is misaligned: padding"
        );
        offset += size;
    }
    assert_eq!(offset % 8, 0, "tail padding");
    assert_eq!(
        record_size,
        Some(offset),
        "RECORD_SIZE is the sum of the field sizes"
    );
    assert_eq!(offset, manifest::RECORD_SIZE);
    // the fields are the table's, in its order (a layout change is a row there: docs/recipes.md)
    let names: Vec<&str> = rust_fields.iter().map(|(n, _)| n.as_str()).collect();
    let table: Vec<&str> = manifest::RECORD_FIELDS.iter().map(|f| f.name).collect();
    assert_eq!(names, table);
}

fn quote_attr(a: &syn::Attribute) -> String {
    match &a.meta {
        syn::Meta::List(l) => format!(
            "{}({})",
            l.path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default(),
            l.tokens
        ),
        syn::Meta::Path(p) => p.get_ident().map(|i| i.to_string()).unwrap_or_default(),
        syn::Meta::NameValue(nv) => nv
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default(),
    }
}

#[test]
fn programs_per_probe() {
    let m = manifest();
    let c = render_bpf(&m, REFRESH).unwrap();
    assert!(c.contains(REFRESH), "refresh command in header");
    assert!(
        c.contains("6.12.117") && c.contains("rxe"),
        "kernel and vendor in header"
    );
    assert!(c.contains("DO NOT EDIT"));
    assert!(c.contains("char LICENSE[] SEC(\"license\") = \"GPL\";"));
    for forbidden in ["fmod_ret", "bpf_override_return(", "vmlinux.h"] {
        let code: String = c
            .lines()
            .filter(|l| !l.trim_start().starts_with('*'))
            .collect();
        assert!(!code.contains(forbidden), "{forbidden} in probes.bpf.c");
    }
    assert!(c.contains("SEC(\"fexit/ib_uverbs_reg_mr\")\nint pg_0(unsigned long long *ctx)"));
    assert!(c.contains("SEC(\"fexit/ib_umem_get\")\nint pg_1(unsigned long long *ctx)"));
    assert!(c.contains("SEC(\"kretprobe/rxe_mr_init_user.isra.0\")\nint pg_2(struct pt_regs *ctx)"));
    assert!(c.contains("SEC(\"fexit/rxe_cleanup_task\")\nint pg_3(unsigned long long *ctx)"));
    assert!(c.contains("SEC(\"fexit/rxe_create_qp\")\nint pg_5(unsigned long long *ctx)"));
    assert!(
        !c.contains("rxe_get_av") && !c.contains("pg_4("),
        "inlined probe got a program"
    );
    // int: sign-extended from 4 bytes; ptr: IS_ERR or NULL; void: calls only.
    // Arguments: only those the manifest lists (none for ib_uverbs_reg_mr's lone pointer).
    assert!(c.contains("ret = (int)raw;\n\treturn pg_exit(0, PG_ERRNO(ret), ret < 0, ctx, 0x0"));
    assert!(c.contains("return pg_exit(1, PG_ERRNO((long)raw), PG_PTR_FAILED(raw), ctx, 0xe"));
    assert!(c.contains(
        "long ret = (int)PT_REGS_RC(ctx);\n\n\treturn pg_exit_kp(2, PG_ERRNO(ret), ret < 0, ctx);"
    ));
    assert!(c.contains("return pg_exit(3, 0, 0, ctx, 0);"));
    assert!(c.contains("#define PG_NPROBES 6"));
    // a handler (a core fexit probe no other probe calls) gets its baseline entry; a
    // kretprobe (clone) does not
    assert!(c.contains("SEC(\"?fentry/ib_uverbs_reg_mr\")\nint pg_0_bl(unsigned long long *ctx)\n{\n\tpg_bl_begin(0);\n\treturn 0;"));
    // ... and its session for kernels with fsession: the entry's sampling, then the exit's
    // return value from the context slot after its one argument
    assert!(c.contains("SEC(\"?fsession/ib_uverbs_reg_mr\")\nint pg_0_bs(unsigned long long *ctx)"));
    assert!(c.contains("\t\treturn pg_bl_session(0, ctx);\n\tret = (int)ctx[1];\n\treturn pg_exit_session(0, PG_ERRNO(ret), ret < 0, ctx);"));
    assert!(!c.contains("pg_2_bs"), "a kretprobe has none");
    assert!(!c.contains("pg_2_bl"), "a kretprobe has none");
    assert!(c.contains("#include \"probegen.bpf.h\""));
    // The maps live in the shared header.
    let h = render_header().unwrap();
    assert!(h.contains("__uint(max_entries, 256 * 1024);"));
    assert!(h.contains("const volatile __u64 wakeup_threshold = 64 * 1024;"));
}

#[test]
fn deterministic() {
    let m = manifest();
    assert_eq!(
        render_bpf(&m, REFRESH).unwrap(),
        render_bpf(&m.clone(), REFRESH).unwrap()
    );
    assert_eq!(render_header().unwrap(), render_header().unwrap());
}

#[test]
fn explicit_args_and_bad_input() {
    let mut m = manifest();
    m.probes[5].args = vec![
        manifest::ProbeArg {
            index: 2,
            name: "udata".into(),
        },
        manifest::ProbeArg {
            index: 0,
            name: "ibqp".into(),
        },
    ];
    let c = render_bpf(&m, REFRESH).unwrap();
    assert!(
        c.contains("return pg_exit(5, PG_ERRNO(ret), ret < 0, ctx, 0x5 /* args 0,2 */);"),
        "{c}"
    );

    // The same function name in two modules: the bare name is ambiguous, the C says so.
    let mut dup = manifest();
    dup.probes[4] = probe(4, "rxe_create_qp", "ib_core", "int", 2, "fexit");
    let c = render_bpf(&dup, REFRESH).unwrap();
    assert!(
        c.contains("AMBIGUOUS NAME: rxe_create_qp is also a probe in rdma_rxe;"),
        "{c}"
    );
    assert!(
        c.contains("AMBIGUOUS NAME: rxe_create_qp is also a probe in ib_core;"),
        "{c}"
    );

    let mut bad = manifest();
    bad.probes[0].function = "x\");evil".into();
    assert!(render_bpf(&bad, REFRESH).is_err());
    let mut bad = manifest();
    bad.probes[2].attach_symbol = None;
    assert!(render_bpf(&bad, REFRESH).is_err());
}

#[test]
fn compiles_with_btf_and_sections() {
    let m = manifest();
    let dir = scratch("compile");
    let src = dir.join("probes.bpf.c");
    let obj = dir.join("probes.bpf.o");
    std::fs::write(&src, render_bpf(&m, REFRESH).unwrap()).unwrap();
    std::fs::write(dir.join(HEADER_NAME), render_header().unwrap()).unwrap();

    run(Command::new(tool("clang"))
        .args([
            "-target",
            "bpf",
            "-O2",
            "-g",
            "-Wall",
            "-Werror",
            "-D__TARGET_ARCH_x86",
        ])
        .args(["-I/usr/include/x86_64-linux-gnu", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj));

    let btf = run(Command::new(tool("bpftool"))
        .args(["btf", "dump", "file"])
        .arg(&obj));
    let record = format!("STRUCT 'pg_record' size={}", manifest::RECORD_SIZE);
    assert!(btf.contains(&record), "pg_record missing from BTF:\n{btf}");
    assert!(
        btf.contains("pg_errno_key"),
        "pg_errno_key missing from BTF"
    );
    for map in ["calls", "failures", "errnos", "seq", "drops", "events"] {
        assert!(
            btf.contains(&format!("VAR '{map}'")),
            "map {map} missing from BTF"
        );
    }

    let headers = run(Command::new(tool("llvm-objdump")).arg("-h").arg(&obj));
    let sections: Vec<&str> = headers
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let fexit: Vec<&str> = sections
        .iter()
        .copied()
        .filter(|s| s.starts_with("fexit/"))
        .collect();
    let want_fexit: Vec<String> = m
        .probes
        .iter()
        .filter(|p| p.attach.as_str() == "fexit")
        .map(|p| format!("fexit/{}", p.function))
        .collect();
    assert_eq!(
        fexit, want_fexit,
        "one fexit section per fexit probe:\n{headers}"
    );
    let kret: Vec<&str> = sections
        .iter()
        .copied()
        .filter(|s| s.starts_with("kretprobe/"))
        .collect();
    assert_eq!(kret, ["kretprobe/rxe_mr_init_user.isra.0"], "{headers}");
    assert!(
        !sections.iter().any(|s| s.contains("rxe_get_av")),
        "inlined probe got a section"
    );
    for s in [".maps", "license", ".rodata", ".BTF"] {
        assert!(sections.contains(&s), "section {s} missing:\n{headers}");
    }

    // The kretprobe fallback must not call bpf_get_func_arg/ret (helpers 183/184), which the
    // verifier refuses outside tracing programs.
    let dis = run(Command::new(tool("llvm-objdump"))
        .args(["-d", "--section=kretprobe/rxe_mr_init_user.isra.0"])
        .arg(&obj));
    assert!(
        dis.contains("call"),
        "kretprobe program disassembly:\n{dis}"
    );
    assert!(
        !dis.contains("call 183") && !dis.contains("call 184"),
        "{dis}"
    );

    let _ = std::fs::remove_dir_all(&dir);
}

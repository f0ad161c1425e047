//! `--btf DIR`: attach verdicts from binaries kept apart from the source tree, as a user with
//! their own kernel has them: a directory of `vmlinux` and `.ko` files, or the raw BTF a
//! running host exposes in `/sys/kernel/btf` (here cut out of the Debian 6.12 binaries with
//! objcopy, byte for byte what the kernel serves).

mod common;

use common::{probegen, stderr};

use std::path::Path;
use std::process::Command;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn manifest(out: &Path) -> manifest::Manifest {
    let path = out.join("manifest.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    manifest::Manifest::from_yaml(&text, &s(&path)).unwrap_or_else(|e| panic!("{e}"))
}

fn generate(src: &Path, btf: Option<&Path>, out: &Path) -> manifest::Manifest {
    let (src, out_s) = (s(src), s(out));
    let mut args = vec![
        "generate",
        "--kernel-src",
        &src,
        "--vendor",
        "rxe",
        "--out",
        &out_s,
    ];
    let btf_s = btf.map(s);
    if let Some(b) = &btf_s {
        args.extend(["--btf", b.as_str()]);
    }
    let o = probegen(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    manifest(out)
}

#[test]
fn btf_dir_of_ko_files_gives_the_same_set() {
    let k = common::kernel_dir("6.12");
    let tmp = common::temp_dir("btf-ko");
    let bins = tmp.join("bins");
    std::fs::create_dir_all(&bins).expect("mkdir");
    std::fs::copy(k.join("vmlinux"), bins.join("vmlinux")).expect("vmlinux");
    for m in ["ib_core", "ib_uverbs", "rdma_rxe"] {
        std::fs::copy(
            k.join(format!("modules/{m}.ko")),
            bins.join(format!("{m}.ko")),
        )
        .expect("module");
    }
    let plain = generate(&k, None, &tmp.join("plain"));
    let apart = generate(&k, Some(&bins), &tmp.join("apart"));
    assert_eq!(plain.probes, apart.probes);
    assert!(plain.stats.attachable > 30, "{:?}", plain.stats);
}

#[test]
fn raw_btf_as_in_sys_kernel_btf_keeps_every_fexit_verdict() {
    let k = common::kernel_dir("6.12");
    let tmp = common::temp_dir("btf-raw");
    let sys = tmp.join("sys-kernel-btf");
    std::fs::create_dir_all(&sys).expect("mkdir");
    let dump = |elf: &Path, out: &Path| {
        let o = Command::new("objcopy")
            .arg("--dump-section")
            .arg(format!(".BTF={}", out.display()))
            .arg(elf)
            .arg(tmp.join("scratch.o"))
            .output()
            .expect("objcopy (binutils) runs");
        assert!(
            o.status.success(),
            "objcopy {}: {}",
            elf.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    dump(&k.join("vmlinux"), &sys.join("vmlinux"));
    for m in ["ib_core", "ib_uverbs", "rdma_rxe"] {
        dump(&k.join(format!("modules/{m}.ko")), &sys.join(m));
    }
    let elf = generate(&k, None, &tmp.join("elf"));
    let raw = generate(&k, Some(&sys), &tmp.join("raw"));
    assert_eq!(
        elf.probes.iter().map(|p| &p.function).collect::<Vec<_>>(),
        raw.probes.iter().map(|p| &p.function).collect::<Vec<_>>(),
        "the selection does not depend on where the BTF comes from"
    );
    let mut fexit = 0;
    for (a, b) in elf.probes.iter().zip(&raw.probes) {
        if a.attach.as_str() == "fexit" {
            fexit += 1;
            assert_eq!(b.attach.as_str(), "fexit", "{}", a.function);
            assert_eq!(b.nargs, a.nargs, "{}", a.function);
        }
    }
    assert!(fexit > 30, "{fexit} fexit probes");
}

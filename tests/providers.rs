//! The mlx5 provider's error-completion function, found per build-id in Debian's stripped
//! libmlx5 through the static libmlx5.a of the same build (issue 34, item 4), on the real
//! packages of bullseye (33.2), bookworm (44.0), trixie (56.1) and sid, fetched by
//! scripts/fetch-rdma-core.sh into PROBEGEN_RDMA_CORE_<SUITE>. A missing root fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root(suite: &str) -> PathBuf {
    let var = format!("PROBEGEN_RDMA_CORE_{}", suite.to_uppercase());
    let dir = std::env::var_os(&var).unwrap_or_else(|| {
        panic!("{var} is not set: run `export {var}=$(scripts/fetch-rdma-core.sh {suite} | tail -n 1)`")
    });
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("usr/lib/x86_64-linux-gnu/libmlx5.a").is_file(),
        "{}: no libmlx5.a (rerun scripts/fetch-rdma-core.sh {suite})",
        dir.display()
    );
    dir
}

fn probegen(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_probegen"))
        .args(args)
        .output()
        .expect("run probegen");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn library(root: &Path) -> PathBuf {
    shared_library(root, "libmlx5.so.1.")
}

/// The real file (not a link) under the root's lib directory whose name starts with `prefix`.
fn shared_library(root: &Path, prefix: &str) -> PathBuf {
    let dir = root.join("usr/lib/x86_64-linux-gnu");
    std::fs::read_dir(&dir)
        .expect("lib dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            !p.is_symlink()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("{}: no {prefix}*", dir.display()))
}

/// The checked-in table is exactly what the released suites' packages resolve to.
#[test]
fn the_checked_in_table_is_what_the_released_suites_resolve_to() {
    let roots: Vec<String> = ["bullseye", "bookworm", "trixie"]
        .iter()
        .map(|s| root(s).display().to_string())
        .collect();
    let mut args = vec!["providers", "resolve"];
    args.extend(roots.iter().map(String::as_str));
    let (code, stdout, stderr) = probegen(&args);
    assert_eq!(code, 0, "{stderr}");
    let checked_in = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/generated/providers.yaml"
    ))
    .expect("generated/providers.yaml");
    assert_eq!(
        stdout, checked_in,
        "generated/providers.yaml is stale: rerun `probegen providers resolve ... --out generated/providers.yaml`"
    );
    let table = providers::ProviderTable::parse(&stdout, "resolved").expect("parses");
    let versions: Vec<&str> = table
        .providers
        .iter()
        .map(|e| e.rdma_core.as_str())
        .collect();
    assert_eq!(versions, ["33.2", "44.0", "56.1"]);
    for entry in &table.providers {
        assert_eq!(entry.function, "dump_cqe");
        // Every poll variant's inlined error branch calls it: dozens of sites, never none.
        assert!(entry.callers >= 10, "{entry:?}");
        assert!(
            entry.matched_bytes >= 64 && entry.wildcards <= 8,
            "{entry:?}"
        );
    }
}

/// The newest rdma-core (sid, whatever version it has today) resolves the same way: a moved
/// offset, the same function.
#[test]
fn sid_resolves_too() {
    let sid = root("sid");
    let (code, stdout, stderr) = probegen(&["providers", "resolve", &sid.display().to_string()]);
    assert_eq!(code, 0, "{stderr}");
    let table = providers::ProviderTable::parse(&stdout, "sid").expect("parses");
    assert_eq!(table.providers.len(), 1);
    assert!(table.providers[0].callers >= 10, "{stdout}");
}

/// The resolved offset is the function the archive names: the static archive's bytes of
/// dump_cqe are at that offset of the library (checked here with the raw bytes, apart from
/// the `providers` crate's matcher).
#[test]
fn the_offset_holds_the_archives_function_start() {
    for suite in ["bookworm", "trixie"] {
        let root = root(suite);
        let lib = std::fs::read(library(&root)).expect("read lib");
        let (code, stdout, stderr) =
            probegen(&["providers", "resolve", &root.display().to_string()]);
        assert_eq!(code, 0, "{stderr}");
        let table = providers::ProviderTable::parse(&stdout, suite).expect("parses");
        let offset = usize::try_from(table.providers[0].offset).expect("offset");
        // dump_cqe saves callee-saved registers first: push %r13 (41 55) or push %r12 (41 54).
        assert_eq!(lib[offset], 0x41, "{suite}: {:#x}", lib[offset]);
        assert!(matches!(lib[offset + 1], 0x54 | 0x55), "{suite}");
        // ... then copies its first argument, the context: mov %rdi,%r13 / %r12.
        assert_eq!(&lib[offset + 2..offset + 4], &[0x49, 0x89], "{suite}");
    }
}

/// The function's bytes do not depend on the build around them: trixie's archive finds the
/// same offset in bookworm's library as bookworm's own archive does.
#[test]
fn another_builds_archive_finds_the_same_function() {
    let bookworm = root("bookworm");
    let mixed = scratch_root("mixed", &library(&bookworm), &root("trixie"));
    let (code, stdout, stderr) = probegen(&["providers", "resolve", &mixed.display().to_string()]);
    let _ = std::fs::remove_dir_all(&mixed);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("offset: 40992"), "{stdout}");
}

/// A library that has no such function (mlx4's, under mlx5's name): refused with the library
/// and its build-id, one line, exit 2, nothing printed as a table.
#[test]
fn a_library_without_the_function_is_refused_with_its_build_id() {
    let bookworm = root("bookworm");
    let mlx4 = shared_library(&bookworm, "libmlx4.so.1.");
    let build_id = providers::build_id(&std::fs::read(&mlx4).expect("read")).expect("build-id");
    let mixed = scratch_root("mlx4", &mlx4, &bookworm);
    let (code, stdout, stderr) = probegen(&["providers", "resolve", &mixed.display().to_string()]);
    let _ = std::fs::remove_dir_all(&mixed);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("build-id {build_id}")) && stderr.contains("occur nowhere"),
        "{stderr}"
    );
}

/// An rdma-core root of `library` (named as libmlx5.so.1.24.44.0) and `archive_root`'s
/// libmlx5.a.
fn scratch_root(tag: &str, library: &Path, archive_root: &Path) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("probegen-providers-{tag}-{}", std::process::id()));
    let lib_dir = dir.join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&lib_dir).expect("mkdir");
    std::fs::copy(library, lib_dir.join("libmlx5.so.1.24.44.0")).expect("copy lib");
    std::fs::copy(
        archive_root.join("usr/lib/x86_64-linux-gnu/libmlx5.a"),
        lib_dir.join("libmlx5.a"),
    )
    .expect("copy archive");
    dir
}

/// A host's processes: the libraries they mapped, a known build probed at its offset, an
/// unknown one named with its path and build-id and not probed.
#[test]
fn scan_probes_a_known_build_and_names_an_unknown_one() {
    let bookworm = library(&root("bookworm"));
    let trixie = library(&root("trixie"));
    // This process maps both files, as a job's loader would map the library it loads.
    let maps: Vec<(std::fs::File, *mut libc::c_void)> = [&bookworm, &trixie]
        .iter()
        .map(|p| {
            let file = std::fs::File::open(p).expect("open");
            // SAFETY: a private read-only mapping of a file we hold open; unmapped below.
            let addr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    std::os::fd::AsRawFd::as_raw_fd(&file),
                    0,
                )
            };
            assert_ne!(addr, libc::MAP_FAILED);
            (file, addr)
        })
        .collect();
    // A table that knows bookworm's build only.
    let full = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/generated/providers.yaml"
    ))
    .expect("table");
    let mut table = providers::ProviderTable::parse(&full, "table").expect("parses");
    table.providers.retain(|e| e.rdma_core == "44.0");
    let path = std::env::temp_dir().join(format!("probegen-providers-{}.yaml", std::process::id()));
    std::fs::write(&path, table.to_yaml()).expect("write table");
    let (code, stdout, stderr) =
        probegen(&["providers", "scan", "--table", &path.display().to_string()]);
    let _ = std::fs::remove_file(&path);
    for (_file, addr) in maps {
        // SAFETY: the mapping made above, of that length.
        unsafe { libc::munmap(addr, 4096) };
    }
    assert_eq!(code, 0, "{stderr}");
    let line_of = |p: &Path| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("provider {}:", p.display())))
            .unwrap_or_else(|| panic!("no line for {}:\n{stdout}", p.display()))
            .to_string()
    };
    assert!(
        line_of(&bookworm).contains("uprobe on dump_cqe at file offset 0xa020"),
        "{stdout}"
    );
    let unknown = line_of(&trixie);
    assert!(
        unknown.contains("build-id 746f5276b649cf32baf1b69182c5b2a48b985f6f is in no provider table entry, not probed"),
        "{unknown}"
    );
}

//! `probegen providers`: the user-space providers' error-completion function per build-id
//! (`resolve`, from fetched rdma-core packages) and the libraries this host's processes have
//! mapped, each with what a host would do with it (`scan`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use providers::{ProviderEntry, ProviderTable, MLX5_ERROR_PATH};

/// The checked-in table (`probegen providers resolve --out`).
const DEFAULT_TABLE: &str = "generated/providers.yaml";

#[derive(Subcommand)]
pub(crate) enum ProvidersCommand {
    /// Find dump_cqe in each rdma-core's stripped libmlx5 through its static libmlx5.a; write
    /// the table by build-id
    Resolve {
        /// rdma-core roots as scripts/fetch-rdma-core.sh prints them (usr/lib/<triplet>/
        /// under each holds libmlx5.so.1.* and libmlx5.a)
        #[arg(required = true, value_name = "DIR")]
        roots: Vec<PathBuf>,
        /// Write the table here (atomically) instead of printing it
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// The provider libraries this host's processes have mapped: probed (offset) or not (why)
    Scan {
        #[arg(long, value_name = "FILE", default_value = DEFAULT_TABLE)]
        table: PathBuf,
        /// The proc file system to read
        #[arg(long, value_name = "DIR", default_value = "/proc")]
        proc: PathBuf,
    },
}

pub(crate) fn run(command: &ProvidersCommand) -> Result<ExitCode, String> {
    match command {
        ProvidersCommand::Resolve { roots, out } => resolve(roots, out.as_deref()),
        ProvidersCommand::Scan { table, proc } => scan(table, proc),
    }
}

fn resolve(roots: &[PathBuf], out: Option<&Path>) -> Result<ExitCode, String> {
    let mut table = ProviderTable::default();
    for root in roots {
        let entry = resolve_root(root)?;
        if table.entry(&entry.build_id).is_some() {
            return Err(format!(
                "{}: build-id {} was already resolved from another root",
                root.display(),
                entry.build_id
            ));
        }
        table.providers.push(entry);
    }
    let yaml = table.to_yaml();
    match out {
        None => print!("{yaml}"),
        Some(path) => {
            let tmp = path.with_extension("yaml.tmp");
            std::fs::write(&tmp, &yaml)
                .and_then(|()| std::fs::rename(&tmp, path))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!(
                "probegen: {}: {} provider builds",
                path.display(),
                table.providers.len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One fetched rdma-core: its libmlx5.so.1.<abi>.<version> and libmlx5.a.
fn resolve_root(root: &Path) -> Result<ProviderEntry, String> {
    let path = &MLX5_ERROR_PATH;
    let lib_dir = root.join("usr/lib/x86_64-linux-gnu");
    let library = std::fs::read_dir(&lib_dir)
        .map_err(|e| format!("{}: {e} (expected an rdma-core root)", lib_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !p.is_symlink())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(path.library_prefix))
        })
        .ok_or_else(|| {
            format!(
                "{}: no {}* (expected ibverbs-providers unpacked here)",
                lib_dir.display(),
                path.library_prefix
            )
        })?;
    let archive = lib_dir.join(path.archive);
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let resolved = providers::resolve(&read(&library)?, &read(&archive)?, path)
        .map_err(|e| format!("{}: {e}", library.display()))?;
    let name = library
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    // libmlx5.so.1.<abi>.<major>.<minor>: rdma-core's version is what follows the ABI.
    let rdma_core = name
        .strip_prefix(path.library_prefix)
        .and_then(|rest| rest.split_once('.'))
        .map(|(_abi, version)| version.to_string())
        .ok_or_else(|| {
            format!(
                "{}: expected {}<abi>.<version>",
                library.display(),
                path.library_prefix
            )
        })?;
    let package = std::fs::read_to_string(root.join(".complete"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|_| rdma_core.clone());
    Ok(ProviderEntry {
        provider: path.provider.to_string(),
        rdma_core,
        origin: format!("debian ibverbs-providers {package}"),
        build_id: resolved.build_id,
        function: path.symbol.to_string(),
        offset: resolved.offset,
        cqe_arg: path.cqe_arg,
        matched_bytes: resolved.bytes,
        wildcards: resolved.wildcards,
        callers: resolved.callers,
    })
}

fn scan(table: &Path, proc: &Path) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(table).map_err(|e| format!("{}: {e}", table.display()))?;
    let table =
        ProviderTable::parse(&text, &table.display().to_string()).map_err(|e| e.to_string())?;
    let loaded = providers::loaded_providers(proc, &MLX5_ERROR_PATH);
    if loaded.is_empty() {
        println!("no process has a provider library mapped");
    }
    for plan in table.plan(&loaded) {
        println!("{}", plan.line());
    }
    Ok(ExitCode::SUCCESS)
}

//! The provider table: per build-id of a provider library, the file offset of its
//! error-completion function. The boundary between `probegen providers resolve` (generator)
//! and the host, which probes only a build the table names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::host::LoadedProvider;

/// One build of one provider library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    /// The vendor (`mlx5`).
    pub provider: String,
    /// rdma-core's version, from the library's file name (`libmlx5.so.1.24.44.0` -> `44.0`).
    pub rdma_core: String,
    /// Where the build came from (`debian bookworm 44.0-2`).
    pub origin: String,
    pub build_id: String,
    pub function: String,
    /// File offset of the function, the uprobe's attach point.
    pub offset: u64,
    /// Which argument (1-based) points at the 64-byte CQE.
    pub cqe_arg: u8,
    /// Bytes compared against the static archive, and how many were relocation wildcards.
    pub matched_bytes: usize,
    pub wildcards: usize,
    /// Calls in the library's code that reach the function.
    pub callers: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderTable {
    pub providers: Vec<ProviderEntry>,
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: build-id {build_id} is listed twice")]
    Duplicate { path: String, build_id: String },
}

/// What the host does with one provider library its jobs loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderPlan {
    /// A build the table resolved: a uprobe at `offset` of `path`.
    Probe {
        path: String,
        entry: ProviderEntry,
        pids: Vec<u32>,
    },
    /// A build the table does not name (a rebuild, a newer rdma-core, a vendor's OFED): never
    /// probed blind.
    Unresolved {
        path: String,
        build_id: Option<String>,
        pids: Vec<u32>,
    },
}

impl ProviderTable {
    /// Parses the YAML; a build-id twice is an error (which offset would win?).
    pub fn parse(text: &str, path: &str) -> Result<Self, TableError> {
        let table: ProviderTable = serde_yaml::from_str(text).map_err(|e| TableError::Parse {
            path: path.to_string(),
            message: match e.location() {
                Some(at) => format!("line {}: {e}", at.line()),
                None => e.to_string(),
            },
        })?;
        let mut seen = BTreeMap::new();
        for entry in &table.providers {
            if seen.insert(entry.build_id.as_str(), ()).is_some() {
                return Err(TableError::Duplicate {
                    path: path.to_string(),
                    build_id: entry.build_id.clone(),
                });
            }
        }
        Ok(table)
    }

    /// The YAML, entries ordered by provider and rdma-core version: the same table, the same
    /// bytes.
    pub fn to_yaml(&self) -> String {
        let mut sorted = self.clone();
        sorted.providers.sort_by(|a, b| {
            (
                a.provider.as_str(),
                version_key(&a.rdma_core),
                a.build_id.as_str(),
            )
                .cmp(&(
                    b.provider.as_str(),
                    version_key(&b.rdma_core),
                    b.build_id.as_str(),
                ))
        });
        let body = serde_yaml::to_string(&sorted).unwrap_or_default();
        format!(
            "# The error-completion function of each build of a user-space provider library, by\n\
             # build-id: `probegen providers resolve` over Debian's packages (scripts/fetch-rdma-core.sh).\n\
             # A host probes only the builds listed here.\n{body}"
        )
    }

    pub fn entry(&self, build_id: &str) -> Option<&ProviderEntry> {
        self.providers.iter().find(|e| e.build_id == build_id)
    }

    /// For each library the host's jobs loaded: probe it or say why not.
    pub fn plan(&self, loaded: &[LoadedProvider]) -> Vec<ProviderPlan> {
        loaded
            .iter()
            .map(
                |lib| match lib.build_id.as_deref().and_then(|id| self.entry(id)) {
                    Some(entry) => ProviderPlan::Probe {
                        path: lib.path.clone(),
                        entry: entry.clone(),
                        pids: lib.pids.clone(),
                    },
                    None => ProviderPlan::Unresolved {
                        path: lib.path.clone(),
                        build_id: lib.build_id.clone(),
                        pids: lib.pids.clone(),
                    },
                },
            )
            .collect()
    }
}

/// `44.0` < `56.1` < `65.0` numerically, not as text.
fn version_key(version: &str) -> Vec<u64> {
    version
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|part| part.parse().ok())
        .collect()
}

impl ProviderPlan {
    /// One line for the agent's log: what is probed, or the path and build-id skipped.
    pub fn line(&self) -> String {
        match self {
            ProviderPlan::Probe { path, entry, pids } => format!(
                "provider {path}: rdma-core {} build-id {}, uprobe on {} at file offset {:#x} ({} processes)",
                entry.rdma_core,
                entry.build_id,
                entry.function,
                entry.offset,
                pids.len()
            ),
            ProviderPlan::Unresolved {
                path,
                build_id,
                pids,
            } => format!(
                "provider {path}: build-id {} is in no provider table entry, not probed ({} processes)",
                build_id.as_deref().unwrap_or("(none)"),
                pids.len()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(version: &str, build_id: &str) -> ProviderEntry {
        ProviderEntry {
            provider: "mlx5".into(),
            rdma_core: version.into(),
            origin: format!("debian {version}"),
            build_id: build_id.into(),
            function: "dump_cqe".into(),
            offset: 0xa020,
            cqe_arg: 2,
            matched_bytes: 87,
            wildcards: 4,
            callers: 30,
        }
    }

    #[test]
    fn the_yaml_orders_versions_numerically_and_reads_back() {
        let table = ProviderTable {
            providers: vec![entry("65.0", "cc"), entry("9.0", "aa"), entry("44.0", "bb")],
        };
        let yaml = table.to_yaml();
        let back = ProviderTable::parse(&yaml, "t.yaml").expect("parses");
        let versions: Vec<_> = back
            .providers
            .iter()
            .map(|e| e.rdma_core.as_str())
            .collect();
        assert_eq!(versions, ["9.0", "44.0", "65.0"]);
    }

    #[test]
    fn a_build_id_listed_twice_is_refused_with_the_file() {
        let table = ProviderTable {
            providers: vec![entry("44.0", "aa"), entry("56.1", "aa")],
        };
        let err = ProviderTable::parse(&table.to_yaml(), "gen/providers.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "gen/providers.yaml: build-id aa is listed twice"
        );
        let err = ProviderTable::parse("providers: [{provider: 1}]", "p.yaml").unwrap_err();
        assert!(err.to_string().starts_with("p.yaml: line 1:"), "{err}");
    }

    #[test]
    fn an_unknown_build_is_never_probed() {
        let table = ProviderTable {
            providers: vec![entry("44.0", "aa")],
        };
        let loaded = [
            LoadedProvider {
                path: "/usr/lib/libmlx5.so.1.24.44.0".into(),
                build_id: Some("aa".into()),
                pids: vec![7, 9],
            },
            LoadedProvider {
                path: "/opt/ofed/libmlx5.so.1.25.0".into(),
                build_id: Some("ff".into()),
                pids: vec![8],
            },
        ];
        let plan = table.plan(&loaded);
        assert!(matches!(&plan[0], ProviderPlan::Probe { entry, .. } if entry.offset == 0xa020));
        assert_eq!(
            plan[1].line(),
            "provider /opt/ofed/libmlx5.so.1.25.0: build-id ff is in no provider table entry, not probed (1 processes)"
        );
    }
}

//! A bundle of probe sets (`probegen bundle --out DIR`) and the choice of a set on this host.
//!
//! Layout: `DIR/index.json` names each set's directory (`linux-6.12/rxe`), holding
//! `manifest.yaml` and `probes.bpf.o`, with the kernel release and series it was generated
//! for, the vendor's driver modules and the sha256 of both files. The agent reads the index,
//! skips (and reports) every set whose files are missing or do not match their hashes, and
//! picks, for the RDMA vendor drivers loaded here, the set of this exact kernel release, else
//! the newest of the same series; among those, the sets of the running kernel's Debian flavor
//! (`-cloud-amd64` in its release string), else the amd64 ones (an rt kernel's sets equal
//! amd64's: `generated/sets.txt`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The index's file name inside a bundle.
pub const BUNDLE_INDEX: &str = "index.json";
/// The index's `schema` value (another one is refused: the agent would misread it).
pub const BUNDLE_SCHEMA: &str = "probegen-bundle/v1";
/// A set's files inside its directory.
pub const SET_MANIFEST: &str = "manifest.yaml";
pub const SET_OBJECT: &str = "probes.bpf.o";

/// `DIR/index.json`: every set of the bundle, sorted by `dir`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleIndex {
    pub schema: String,
    pub sets: Vec<BundleSet>,
}

/// One set of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleSet {
    /// The set's directory under the bundle (`linux-6.12/rxe`).
    pub dir: String,
    /// The vendor the set was generated for (`rxe`, `mlx5`).
    pub vendor: String,
    /// The kernel release it was generated from (`6.12.117`).
    pub kernel: String,
    /// Its series (`6.12`): the set serves any release of it whose targets match.
    pub series: String,
    /// The Debian flavor it was generated for (`amd64`, `cloud`: `linux-6.12-cloud/mlx5`);
    /// an index without it (before flavors) is all amd64.
    #[serde(default = "default_flavor")]
    pub flavor: String,
    /// The vendor's driver modules (its vendor-layer probes' modules): the set applies when
    /// one of them is loaded.
    pub driver_modules: Vec<String>,
    /// `sha256:<hex>` of `manifest.yaml` (the manifest hash snapshots carry).
    pub manifest_sha256: String,
    /// `sha256:<hex>` of `probes.bpf.o`.
    pub object_sha256: String,
}

/// The flavor of a set or a host when none is named: Debian's generic `amd64`.
pub const DEFAULT_FLAVOR: &str = "amd64";

fn default_flavor() -> String {
    DEFAULT_FLAVOR.to_string()
}

/// The Debian flavor in a kernel release string: `6.12.118+deb12-cloud-amd64` -> `cloud`,
/// `7.3.4+deb13-rt-amd64` -> `rt`, `6.1.0-57-amd64` and anything else -> `amd64`.
pub fn flavor_of_release(release: &str) -> String {
    let Some(rest) = release.strip_suffix("-amd64") else {
        return default_flavor();
    };
    match rest.rsplit_once('-') {
        Some((_, f)) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_lowercase()) => f.into(),
        _ => default_flavor(),
    }
}

impl BundleSet {
    pub fn manifest(&self, bundle: &Path) -> PathBuf {
        bundle.join(&self.dir).join(SET_MANIFEST)
    }
    pub fn object(&self, bundle: &Path) -> PathBuf {
        bundle.join(&self.dir).join(SET_OBJECT)
    }
}

/// `sha256:<hex>` of bytes (the collector's manifest hash has the same form).
pub fn sha256_tag(bytes: &[u8]) -> String {
    let mut s = String::from("sha256:");
    for b in Sha256::digest(bytes) {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A kernel version `major.minor.patch` (`6.12.117`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelVersion(pub u32, pub u32, pub u32);

impl KernelVersion {
    /// The leading `X.Y[.Z]` of `s` (`6.12.117+deb12-amd64` -> 6.12.117, `6.1.0-57-amd64` ->
    /// 6.1.0).
    pub fn parse_prefix(s: &str) -> Option<Self> {
        let head: String = s
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut it = head.split('.').filter(|p| !p.is_empty());
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        let patch = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        Some(KernelVersion(major, minor, patch))
    }

    /// The running kernel's version: Debian's `uname -r` of 6.1 carries the ABI (`6.1.0-57`),
    /// not the release, so `/proc/version`'s `Debian 6.1.192-3` wins when it is there.
    pub fn of_running(release: &str, proc_version: Option<&str>) -> Option<Self> {
        // the text names the compiler's Debian version first (`gcc-12 (Debian 12.2.0-14)`):
        // the kernel's is the `Debian X.Y.Z` of the release's own series
        let r = Self::parse_prefix(release)?;
        let debian = proc_version.and_then(|t| {
            t.split("Debian ")
                .skip(1)
                .filter_map(Self::parse_prefix)
                .find(|v| v.series() == r.series())
        });
        debian.or_else(|| Self::parse_prefix(release))
    }

    pub fn series(self) -> (u32, u32) {
        (self.0, self.1)
    }
}

impl std::fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// A bundle as read: the sets whose files are there and match the index, and one line per
/// set skipped (naming the file).
#[derive(Debug)]
pub struct Bundle {
    pub dir: PathBuf,
    pub sets: Vec<BundleSet>,
    pub skipped: Vec<String>,
}

/// A set's directory must stay inside the bundle: relative, plain names.
fn plain_dir(dir: &str) -> bool {
    !dir.is_empty()
        && dir.split('/').all(|c| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && c.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "_.-+".contains(ch))
        })
}

/// Reads `dir/index.json` and checks every set's files against it. `Err`: the index itself is
/// unreadable, of another schema, or names no set (one line naming the file).
pub fn read_bundle(dir: &Path) -> Result<Bundle, String> {
    let path = dir.join(BUNDLE_INDEX);
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let index: BundleIndex = serde_json::from_slice(&text).map_err(|e| {
        format!(
            "{}: {e} (expected the index `probegen bundle` writes)",
            path.display()
        )
    })?;
    if index.schema != BUNDLE_SCHEMA {
        return Err(format!(
            "{}: schema `{}`: expected `{BUNDLE_SCHEMA}`",
            path.display(),
            index.schema
        ));
    }
    if index.sets.is_empty() {
        return Err(format!(
            "{}: names no set (expected at least one under `sets`)",
            path.display()
        ));
    }
    let mut bundle = Bundle {
        dir: dir.to_path_buf(),
        sets: Vec::new(),
        skipped: Vec::new(),
    };
    for set in index.sets {
        match check_set(dir, &set) {
            Ok(()) => bundle.sets.push(set),
            Err(why) => bundle
                .skipped
                .push(format!("{why}: set {} skipped", set.dir)),
        }
    }
    Ok(bundle)
}

fn check_set(dir: &Path, set: &BundleSet) -> Result<(), String> {
    if !plain_dir(&set.dir) {
        return Err(format!(
            "{}: set directory `{}`: expected a relative path of plain names",
            dir.join(BUNDLE_INDEX).display(),
            set.dir
        ));
    }
    if KernelVersion::parse_prefix(&set.kernel).is_none() {
        return Err(format!(
            "{}: set {}: kernel `{}`: expected X.Y.Z",
            dir.join(BUNDLE_INDEX).display(),
            set.dir,
            set.kernel
        ));
    }
    for (path, want) in [
        (set.manifest(dir), &set.manifest_sha256),
        (set.object(dir), &set.object_sha256),
    ] {
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let have = sha256_tag(&bytes);
        if &have != want {
            return Err(format!(
                "{}: {have} does not match the index's {want}",
                path.display()
            ));
        }
    }
    Ok(())
}

/// How a set was matched to the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// Generated from this very release.
    Exact,
    /// The newest set of the running kernel's series (another point release).
    Series,
}

/// What the running host offers for the choice.
#[derive(Debug, Clone)]
pub struct HostKernel {
    /// `uname -r`
    pub release: String,
    pub version: KernelVersion,
    /// The Debian flavor its release names ([`flavor_of_release`]).
    pub flavor: String,
    /// Driver modules of the bundle's sets that are loaded here.
    pub loaded: BTreeSet<String>,
}

impl HostKernel {
    /// The running kernel (`release` overrides `uname -r` in tests) and which of `modules`
    /// are loaded (`/sys/module/<name>` under `sys_root`).
    pub fn probe(
        release: Option<&str>,
        sys_root: &Path,
        modules: &BTreeSet<String>,
    ) -> Result<Self, String> {
        let (release, proc_version) = match release {
            Some(r) => (r.to_string(), None),
            None => (
                uname_release()?,
                std::fs::read_to_string("/proc/version").ok(),
            ),
        };
        let version = KernelVersion::of_running(&release, proc_version.as_deref())
            .ok_or_else(|| format!("kernel release `{release}`: expected X.Y[.Z]..."))?;
        let loaded = modules
            .iter()
            .filter(|m| sys_root.join("sys/module").join(m).exists())
            .cloned()
            .collect();
        Ok(HostKernel {
            flavor: flavor_of_release(&release),
            release,
            version,
            loaded,
        })
    }
}

/// `uname -r`, as the kernel publishes it without a syscall wrapper.
fn uname_release() -> Result<String, String> {
    let path = "/proc/sys/kernel/osrelease";
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{path}: {e}"))
}

/// The set chosen for one loaded vendor driver.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub set: BundleSet,
    pub how: Match,
    /// The loaded driver module that made it apply.
    pub module: String,
}

/// The choice for this host: a set per loaded vendor (sorted by vendor, software `rxe` last),
/// and the loaded drivers no set of this series covers.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub chosen: Vec<Chosen>,
    pub uncovered: Vec<String>,
}

/// Picks, for each vendor with a driver module loaded here, its set of this exact release,
/// else the newest set of the same series. Two vendors loaded, and the bundle has their
/// union set of the series (`mlx5+rxe`): that one set instead, both drivers watched and the
/// core probed once.
pub fn select(sets: &[BundleSet], host: &HostKernel) -> Selection {
    let mut sel = select_each(sets, host);
    if sel.chosen.len() == 2 {
        let mut vendors: Vec<&str> = sel.chosen.iter().map(|c| c.set.vendor.as_str()).collect();
        vendors.sort_unstable();
        let name = vendors.join("+");
        let of_union: Vec<&BundleSet> = sets.iter().filter(|s| s.vendor == name).collect();
        if let Some((set, how)) = best_of_series(&of_union, host) {
            let mut modules: Vec<&str> = sel.chosen.iter().map(|c| c.module.as_str()).collect();
            modules.sort_unstable();
            sel.chosen = vec![Chosen {
                set: set.clone(),
                how,
                module: modules.join(" and "),
            }];
        }
    }
    sel
}

/// `of_vendor`'s set of the host's release, else the newest of its series: of the host's
/// flavor when the series has sets of it, else of amd64.
fn best_of_series<'a>(
    of_vendor: &[&'a BundleSet],
    host: &HostKernel,
) -> Option<(&'a BundleSet, Match)> {
    let version = |s: &BundleSet| KernelVersion::parse_prefix(&s.kernel);
    let of_series: Vec<&'a BundleSet> = of_vendor
        .iter()
        .copied()
        .filter(|s| version(s).is_some_and(|v| v.series() == host.version.series()))
        .collect();
    let flavor = if of_series.iter().any(|s| s.flavor == host.flavor) {
        host.flavor.as_str()
    } else {
        DEFAULT_FLAVOR
    };
    let best = of_series
        .into_iter()
        .filter(|s| s.flavor == flavor)
        .max_by_key(|s| (version(s) == Some(host.version), version(s)))?;
    let how = if version(best) == Some(host.version) {
        Match::Exact
    } else {
        Match::Series
    };
    Some((best, how))
}

/// One set per loaded vendor (union sets aside).
fn select_each(sets: &[BundleSet], host: &HostKernel) -> Selection {
    let vendors: BTreeSet<&str> = sets
        .iter()
        .map(|s| s.vendor.as_str())
        .filter(|v| !v.contains('+'))
        .collect();
    let mut sel = Selection::default();
    for vendor in vendors {
        let of_vendor: Vec<&BundleSet> = sets.iter().filter(|s| s.vendor == vendor).collect();
        let Some(module) = of_vendor
            .iter()
            .flat_map(|s| &s.driver_modules)
            .find(|m| host.loaded.contains(*m))
        else {
            continue;
        };
        match best_of_series(&of_vendor, host) {
            Some((s, how)) => sel.chosen.push(Chosen {
                set: s.clone(),
                how,
                module: module.clone(),
            }),
            None => sel.uncovered.push(format!("{vendor} ({module})")),
        }
    }
    // hardware first: a host with a NIC and Soft-RoCE is watched for its NIC
    sel.chosen
        .sort_by_key(|c| (c.set.vendor == "rxe", c.set.vendor.clone()));
    sel
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(dir: &str, vendor: &str, kernel: &str, module: &str) -> BundleSet {
        let v = KernelVersion::parse_prefix(kernel).expect("version");
        BundleSet {
            dir: dir.into(),
            vendor: vendor.into(),
            kernel: kernel.into(),
            series: format!("{}.{}", v.0, v.1),
            flavor: DEFAULT_FLAVOR.into(),
            driver_modules: vec![module.into()],
            manifest_sha256: String::new(),
            object_sha256: String::new(),
        }
    }

    fn host(release: &str, loaded: &[&str]) -> HostKernel {
        HostKernel {
            flavor: flavor_of_release(release),
            release: release.into(),
            version: KernelVersion::of_running(release, None).expect("release"),
            loaded: loaded.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn versions_of_debian_releases() {
        assert_eq!(
            KernelVersion::parse_prefix("6.12.117+deb12-amd64"),
            Some(KernelVersion(6, 12, 117))
        );
        assert_eq!(
            KernelVersion::of_running(
                "6.1.0-57-amd64",
                Some(
                    "Linux version 6.1.0-57-amd64 (debian-kernel@lists.debian.org) (gcc-12 \
                     (Debian 12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) \
                     #1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-01-01)"
                )
            ),
            Some(KernelVersion(6, 1, 192))
        );
        assert_eq!(
            KernelVersion::of_running("6.1.0-57-amd64", None),
            Some(KernelVersion(6, 1, 0))
        );
        assert_eq!(KernelVersion::parse_prefix("amd64"), None);
        assert!(!plain_dir("../x") && !plain_dir("/abs") && plain_dir("linux-6.12/rxe"));
    }

    #[test]
    fn exact_release_else_newest_of_the_series() {
        let sets = [
            set("linux-6.12/rxe", "rxe", "6.12.117", "rdma_rxe"),
            set("linux-6.12.40/rxe", "rxe", "6.12.40", "rdma_rxe"),
            set("linux-6.12/mlx5", "mlx5", "6.12.117", "mlx5_ib"),
            set("linux-7.2/rxe", "rxe", "7.2.13", "rdma_rxe"),
        ];
        let s = select(&sets, &host("6.12.40+deb12-amd64", &["rdma_rxe"]));
        assert_eq!(s.chosen.len(), 1);
        assert_eq!(
            (s.chosen[0].set.dir.as_str(), s.chosen[0].how),
            ("linux-6.12.40/rxe", Match::Exact)
        );
        let s = select(
            &sets,
            &host("6.12.130+deb12-amd64", &["rdma_rxe", "mlx5_ib"]),
        );
        let dirs: Vec<_> = s
            .chosen
            .iter()
            .map(|c| (c.set.dir.as_str(), c.how))
            .collect();
        assert_eq!(
            dirs,
            [
                ("linux-6.12/mlx5", Match::Series),
                ("linux-6.12/rxe", Match::Series)
            ]
        );
        // with their union set in the bundle, both drivers get one set
        let mut with_union = sets.to_vec();
        with_union.push(set(
            "linux-6.12/mlx5+rxe",
            "mlx5+rxe",
            "6.12.117",
            "mlx5_ib",
        ));
        let s = select(
            &with_union,
            &host("6.12.130+deb12-amd64", &["rdma_rxe", "mlx5_ib"]),
        );
        assert_eq!(s.chosen.len(), 1);
        assert_eq!(
            (s.chosen[0].set.dir.as_str(), s.chosen[0].how),
            ("linux-6.12/mlx5+rxe", Match::Series)
        );
        assert_eq!(s.chosen[0].module, "mlx5_ib and rdma_rxe");
        // one driver: its own set, never the union
        let s = select(&with_union, &host("6.12.117", &["mlx5_ib"]));
        assert_eq!(s.chosen[0].set.dir, "linux-6.12/mlx5");
        let s = select(&sets, &host("6.13.2-amd64", &["rdma_rxe"]));
        assert!(s.chosen.is_empty());
        assert_eq!(s.uncovered, ["rxe (rdma_rxe)"]);
        assert!(select(&sets, &host("6.12.117", &[])).chosen.is_empty());
    }

    #[test]
    fn the_flavor_of_the_release_else_amd64() {
        assert_eq!(flavor_of_release("6.12.118+deb12-cloud-amd64"), "cloud");
        assert_eq!(flavor_of_release("7.3.4+deb13-rt-amd64"), "rt");
        assert_eq!(flavor_of_release("6.1.0-57-cloud-amd64"), "cloud");
        assert_eq!(flavor_of_release("6.1.0-57-amd64"), "amd64");
        assert_eq!(flavor_of_release("6.12.118+deb12-amd64"), "amd64");
        assert_eq!(flavor_of_release("6.13.2"), "amd64");
        // the set's flavor comes from its directory in these tests (`linux-6.12-cloud`)
        let mut cloud = set("x", "mlx5", "6.12.118", "mlx5_ib");
        cloud.dir = "linux-6.12-cloud/mlx5".into();
        cloud.flavor = "cloud".into();
        let sets = [set("linux-6.12/mlx5", "mlx5", "6.12.118", "mlx5_ib"), cloud];
        let pick = |release: &str| {
            let s = select(&sets, &host(release, &["mlx5_ib"]));
            (s.chosen[0].set.dir.clone(), s.chosen[0].how)
        };
        assert_eq!(
            pick("6.12.118+deb12-cloud-amd64"),
            ("linux-6.12-cloud/mlx5".into(), Match::Exact)
        );
        assert_eq!(
            pick("6.12.120+deb12-amd64"),
            ("linux-6.12/mlx5".into(), Match::Series)
        );
        // rt has no set of its own: the amd64 one
        assert_eq!(
            pick("6.12.118+deb12-rt-amd64"),
            ("linux-6.12/mlx5".into(), Match::Exact)
        );
    }
}

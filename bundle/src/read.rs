//! A bundle of probe sets (`probegen bundle --out DIR`) as read.
//!
//! Layout: `DIR/index.json` names each set's directory (`linux-6.12/rxe`), holding
//! `manifest.yaml` and `probes.bpf.o`, with the kernel release and series it was generated
//! for, the vendor's driver modules and the sha256 of both files. The agent reads the index,
//! skips (and reports) every set whose files are missing or do not match their hashes.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::BundleError;

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
    /// The probes its own kernel attaches (the manifest's attachable probes and its
    /// data-plane probes): the coverage the set was verified with, counted by [`read_bundle`]
    /// (not in the index; 0 before). A set of a kernel without module BTF has few.
    #[serde(skip)]
    pub attachable: usize,
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

/// The Debian flavor of a set from its kernel directory (`linux-6.12-cloud/mlx5` -> cloud;
/// `linux-6.12/mlx5` -> amd64): `generated/sets.txt` names a flavor's kernel `6.12-cloud`.
pub(crate) fn flavor_of_dir(rel: &str) -> String {
    let kernel = rel.split('/').next().unwrap_or("");
    let kernel = kernel.strip_prefix("linux-").unwrap_or(kernel);
    match kernel.split_once('-') {
        Some((_, flavor)) if !flavor.is_empty() => flavor.to_string(),
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
pub fn read_bundle(dir: &Path) -> Result<Bundle, BundleError> {
    let path = dir.join(BUNDLE_INDEX);
    let text = std::fs::read(&path).map_err(BundleError::io(&path))?;
    let index: BundleIndex = serde_json::from_slice(&text).map_err(|e| {
        BundleError::Invalid(format!(
            "{}: {e} (expected the index `probegen bundle` writes)",
            path.display()
        ))
    })?;
    if index.schema != BUNDLE_SCHEMA {
        return Err(BundleError::Invalid(format!(
            "{}: schema `{}`: expected `{BUNDLE_SCHEMA}`",
            path.display(),
            index.schema
        )));
    }
    if index.sets.is_empty() {
        return Err(BundleError::Invalid(format!(
            "{}: names no set (expected at least one under `sets`)",
            path.display()
        )));
    }
    let mut bundle = Bundle {
        dir: dir.to_path_buf(),
        sets: Vec::new(),
        skipped: Vec::new(),
    };
    for set in index.sets {
        match check_set(dir, &set) {
            Ok(attachable) => bundle.sets.push(BundleSet { attachable, ..set }),
            Err(why) => bundle
                .skipped
                .push(format!("{why}: set {} skipped", set.dir)),
        }
    }
    Ok(bundle)
}

/// The set's files against the index; `Ok`: the probes its manifest attaches on its kernel.
fn check_set(dir: &Path, set: &BundleSet) -> Result<usize, String> {
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
    let path = set.manifest(dir);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let m = manifest::Manifest::from_yaml(&text, &path.display().to_string())
        .map_err(|e| e.to_string())?;
    Ok(m.attachable().count() + m.data_plane.len())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

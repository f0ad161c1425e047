//! The choice of a bundle's set for the running host: for each RDMA vendor driver loaded here,
//! the set of this exact kernel release, else the newest of the same series, else (unless
//! the fleet wants only sets of the series) the nearest series' set; two drivers loaded and
//! their union set in the bundle: that one set.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::BundleError;
use crate::read::{flavor_of_release, BundleSet, KernelVersion, DEFAULT_FLAVOR};

/// How a set was matched to the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// Generated from this very release.
    Exact,
    /// The newest set of the running kernel's series (another point release).
    Series,
    /// No set of the running kernel's series: the set of the nearest series ([`nearest`]'s
    /// rules); the collector checks each probe against this kernel's BTF and kallsyms and
    /// attaches those that match.
    Nearest,
}

impl Match {
    /// The value of `match` (snapshot, `/metrics`).
    pub fn label(self) -> &'static str {
        match self {
            Match::Exact => "exact",
            Match::Series => "series",
            Match::Nearest => "nearest",
        }
    }

    /// How the status line says it.
    pub fn describe(self) -> &'static str {
        match self {
            Match::Exact => "built for this release",
            Match::Series => "the newest of this series",
            Match::Nearest => {
                "no set of this series: the nearest series' set, each probe checked against this kernel's BTF and kallsyms"
            }
        }
    }
}

/// Whether a host without a set of its series takes the nearest series' set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The nearest series' set ([`nearest`]), its probes checked on the host.
    Nearest,
    /// Only a set of the running kernel's series; else none (`nearest-set = false`).
    SeriesOnly,
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
    ) -> Result<Self, BundleError> {
        let (release, proc_version) = match release {
            Some(r) => (r.to_string(), None),
            None => (
                uname_release()?,
                std::fs::read_to_string("/proc/version").ok(),
            ),
        };
        let version =
            KernelVersion::of_running(&release, proc_version.as_deref()).ok_or_else(|| {
                BundleError::Invalid(format!("kernel release `{release}`: expected X.Y[.Z]..."))
            })?;
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
fn uname_release() -> Result<String, BundleError> {
    let path = "/proc/sys/kernel/osrelease";
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(BundleError::io(path))
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
pub fn select(sets: &[BundleSet], host: &HostKernel, fallback: Fallback) -> Selection {
    let mut sel = select_each(sets, host, fallback);
    if sel.chosen.len() == 2 {
        let mut vendors: Vec<&str> = sel.chosen.iter().map(|c| c.set.vendor.as_str()).collect();
        vendors.sort_unstable();
        let name = vendors.join("+");
        let of_union: Vec<&BundleSet> = sets.iter().filter(|s| s.vendor == name).collect();
        if let Some((set, how)) = best_for(&of_union, host, fallback) {
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

/// `of_vendor`'s set of the host's series, else with [`Fallback::Nearest`] its nearest.
fn best_for<'a>(
    of_vendor: &[&'a BundleSet],
    host: &HostKernel,
    fallback: Fallback,
) -> Option<(&'a BundleSet, Match)> {
    best_of_series(of_vendor, host).or_else(|| match fallback {
        Fallback::Nearest => nearest(of_vendor, host).map(|s| (s, Match::Nearest)),
        Fallback::SeriesOnly => None,
    })
}

/// Releases of each major before the next one (`X.last` then `X+1.0`), for the distance
/// between two series; a major not listed (7 and later) is taken to have 20 (0..=19), as 6
/// and 5 had.
const LAST_MINOR: &[(u32, u32)] = &[(2, 6), (3, 19), (4, 20), (5, 19), (6, 19)];

/// A series' position in the sequence of releases: 6.19 and 7.0 are neighbours.
fn series_index((major, minor): (u32, u32)) -> u64 {
    let per_major = |m: u32| {
        LAST_MINOR
            .iter()
            .find(|(x, _)| *x == m)
            .map_or(20, |(_, last)| u64::from(*last) + 1)
    };
    (0..major).map(per_major).sum::<u64>() + u64::from(minor)
}

/// The set of the nearest series for a host whose series has none. The rules, in order:
/// 1. the same vendor (the caller's `of_vendor`: a vendor's set watches its driver);
/// 2. the nearest series, counted in releases (6.19 -> 7.0 is one);
/// 3. of two at the same distance, the one whose set attaches more probes on its own kernel
///    (`attachable`: a set generated where modules had no BTF, 5.10's, attaches few), then
///    the older, whose functions this newer kernel more often still has (a kernel removes and
///    renames functions an older set names less often than it adds new ones a newer set
///    would name and the host lacks);
/// 4. within that series, the host's flavor when the series has a set of it, else amd64
///    (else another: the series may have been built for one flavor only);
/// 5. the newest release of those (as [`best_of_series`] takes).
///
/// Series before flavor: a flavor changes which modules are built, a set's module either is
/// here or is reported not loaded, while the distance between series is what changes the
/// prototypes the probes were built for.
pub fn nearest<'a>(of_vendor: &[&'a BundleSet], host: &HostKernel) -> Option<&'a BundleSet> {
    let here = series_index(host.version.series());
    let version = |s: &BundleSet| KernelVersion::parse_prefix(&s.kernel);
    let series: BTreeSet<(u32, u32)> = of_vendor
        .iter()
        .filter_map(|s| version(s).map(|v| v.series()))
        .collect();
    // each series' set for this host (rules 4 and 5), then the nearest of those (2 and 3)
    series
        .into_iter()
        .filter_map(|sr| {
            of_vendor
                .iter()
                .copied()
                .filter(|s| version(s).is_some_and(|v| v.series() == sr))
                .max_by_key(|s| {
                    (
                        s.flavor == host.flavor,
                        s.flavor == DEFAULT_FLAVOR,
                        version(s),
                    )
                })
                .map(|s| (series_index(sr), s))
        })
        .min_by_key(|&(at, s)| {
            (
                at.abs_diff(here),
                std::cmp::Reverse(s.attachable),
                at > here,
            )
        })
        .map(|(_, s)| s)
}

/// One set per loaded vendor (union sets aside).
fn select_each(sets: &[BundleSet], host: &HostKernel, fallback: Fallback) -> Selection {
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
        match best_for(&of_vendor, host, fallback) {
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
            attachable: 50,
        }
    }

    /// The choice before nearest sets (what `nearest-set = false` keeps).
    fn series_only(sets: &[BundleSet], host: &HostKernel) -> Selection {
        select(sets, host, Fallback::SeriesOnly)
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
    fn exact_release_else_newest_of_the_series() {
        let sets = [
            set("linux-6.12/rxe", "rxe", "6.12.117", "rdma_rxe"),
            set("linux-6.12.40/rxe", "rxe", "6.12.40", "rdma_rxe"),
            set("linux-6.12/mlx5", "mlx5", "6.12.117", "mlx5_ib"),
            set("linux-7.2/rxe", "rxe", "7.2.13", "rdma_rxe"),
        ];
        let s = series_only(&sets, &host("6.12.40+deb12-amd64", &["rdma_rxe"]));
        assert_eq!(s.chosen.len(), 1);
        assert_eq!(
            (s.chosen[0].set.dir.as_str(), s.chosen[0].how),
            ("linux-6.12.40/rxe", Match::Exact)
        );
        let s = series_only(
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
        let s = series_only(
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
        let s = series_only(&with_union, &host("6.12.117", &["mlx5_ib"]));
        assert_eq!(s.chosen[0].set.dir, "linux-6.12/mlx5");
        let s = series_only(&sets, &host("6.13.2-amd64", &["rdma_rxe"]));
        assert!(s.chosen.is_empty());
        assert_eq!(s.uncovered, ["rxe (rdma_rxe)"]);
        assert!(series_only(&sets, &host("6.12.117", &[])).chosen.is_empty());
    }

    #[test]
    fn the_flavor_of_the_release_else_amd64() {
        assert_eq!(flavor_of_release("6.12.118+deb12-cloud-amd64"), "cloud");
        assert_eq!(flavor_of_release("7.3.4+deb13-rt-amd64"), "rt");
        assert_eq!(flavor_of_release("6.1.0-57-cloud-amd64"), "cloud");
        assert_eq!(flavor_of_release("6.1.0-57-amd64"), "amd64");
        assert_eq!(flavor_of_release("6.12.118+deb12-amd64"), "amd64");
        assert_eq!(flavor_of_release("6.13.2"), "amd64");
        let mut cloud = set("x", "mlx5", "6.12.118", "mlx5_ib");
        cloud.dir = "linux-6.12-cloud/mlx5".into();
        cloud.flavor = "cloud".into();
        let sets = [set("linux-6.12/mlx5", "mlx5", "6.12.118", "mlx5_ib"), cloud];
        let pick = |release: &str| {
            let s = series_only(&sets, &host(release, &["mlx5_ib"]));
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

    #[test]
    fn the_nearest_series_older_on_a_tie_then_the_flavor() {
        let sets = [
            set("linux-6.1/rxe", "rxe", "6.1.158", "rdma_rxe"),
            set("linux-6.12/rxe", "rxe", "6.12.117", "rdma_rxe"),
            set("linux-6.12.40/rxe", "rxe", "6.12.40", "rdma_rxe"),
            set("linux-7.2/rxe", "rxe", "7.2.13", "rdma_rxe"),
            set("linux-7.2/mlx5", "mlx5", "7.2.13", "mlx5_ib"),
        ];
        let pick = |release: &str, loaded: &[&str]| {
            let s = select(&sets, &host(release, loaded), Fallback::Nearest);
            s.chosen
                .iter()
                .map(|c| (c.set.dir.clone(), c.how))
                .collect::<Vec<_>>()
        };
        let nearest = |dir: &str| vec![(dir.to_string(), Match::Nearest)];
        // 6.13: one release from 6.12 (its newest release), eight from 7.2 (6.19, then 7.0)
        assert_eq!(
            pick("6.13.2-amd64", &["rdma_rxe"]),
            nearest("linux-6.12/rxe")
        );
        // 7.0: 6.19 and 7.0 are neighbours, so 6.12 is eight away, 7.2 two
        assert_eq!(pick("7.0.1", &["rdma_rxe"]), nearest("linux-7.2/rxe"));
        // 6.18 is six from 6.12 and four from 7.2
        assert_eq!(pick("6.18.3", &["rdma_rxe"]), nearest("linux-7.2/rxe"));
        // 6.16: four either way: the older
        assert_eq!(pick("6.16.1", &["rdma_rxe"]), nearest("linux-6.12/rxe"));
        // 6.1's set gone: 5.10 and 6.12 are both eleven away; 5.10's (built without module
        // BTF) attaches fewer of its probes, so 6.12's
        let mut tie = vec![
            set("linux-5.10/rxe", "rxe", "5.10.240", "rdma_rxe"),
            sets[1].clone(),
        ];
        let on_61 = |sets: &[BundleSet]| {
            let s = select(
                sets,
                &host("6.1.0-57-amd64", &["rdma_rxe"]),
                Fallback::Nearest,
            );
            s.chosen[0].set.dir.clone()
        };
        assert_eq!(on_61(&tie), "linux-5.10/rxe", "as many probes: the older");
        tie[0].attachable = 2;
        assert_eq!(on_61(&tie), "linux-6.12/rxe");
        // older than every set, newer than every set
        assert_eq!(pick("5.10.240", &["rdma_rxe"]), nearest("linux-6.1/rxe"));
        assert_eq!(pick("7.5.0", &["rdma_rxe"]), nearest("linux-7.2/rxe"));
        // a set of the series still wins, and a vendor's nearest is its own
        assert_eq!(
            pick("6.12.130", &["rdma_rxe"]),
            vec![("linux-6.12/rxe".to_string(), Match::Series)]
        );
        assert_eq!(
            pick("6.1.0-40-amd64", &["mlx5_ib"]),
            nearest("linux-7.2/mlx5")
        );
        // off: no set, the driver uncovered
        let s = series_only(&sets, &host("6.13.2-amd64", &["rdma_rxe"]));
        assert!(s.chosen.is_empty());
        assert_eq!(s.uncovered, ["rxe (rdma_rxe)"]);
        // the host's flavor within the nearest series, else amd64
        let mut cloud = set("linux-6.12-cloud/rxe", "rxe", "6.12.117", "rdma_rxe");
        cloud.flavor = "cloud".into();
        let with_cloud = [sets[1].clone(), cloud, sets[3].clone()];
        let s = select(
            &with_cloud,
            &host("6.13.2+deb12-cloud-amd64", &["rdma_rxe"]),
            Fallback::Nearest,
        );
        assert_eq!(s.chosen[0].set.dir, "linux-6.12-cloud/rxe");
        let s = select(
            &with_cloud,
            &host("6.13.2+deb12-rt-amd64", &["rdma_rxe"]),
            Fallback::Nearest,
        );
        assert_eq!(s.chosen[0].set.dir, "linux-6.12/rxe");
        assert_eq!(series_index((6, 19)) + 1, series_index((7, 0)));
    }
}

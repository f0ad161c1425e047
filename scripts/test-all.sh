#!/usr/bin/env bash
# Run every probegen test on a fresh Debian 12 machine: installs the Debian packages, fetches
# the real Debian 7.2 (sid), 6.12 and 6.1 kernel sources and binaries into the cache (outside
# git), then runs lint, the Rust test suite (unit, fixtures, real-tree tests) and the qemu
# end-to-end runs on the three stock kernels (the collector on Soft-RoCE, every checked-in set
# attached with its vendor driver loaded).
#
# Usage: scripts/test-all.sh            (as root; what CI runs)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*" >&2; }

step "Debian packages"
bash scripts/install-deps.sh
step "ClickHouse 26.9 in process (chdb-core from PyPI, a venv under the cache)"
PROBEGEN_CHDB_PYTHON=$(bash scripts/install-chdb.sh | tail -n 1)
export PROBEGEN_CHDB_PYTHON
step "kernel 6.12"
PROBEGEN_KERNEL_6_12=$(bash scripts/fetch-kernel.sh 6.12 | tail -n 1)
step "kernel 6.1"
PROBEGEN_KERNEL_6_1=$(bash scripts/fetch-kernel.sh 6.1 | tail -n 1)
step "kernel 7.2"
PROBEGEN_KERNEL_7_2=$(bash scripts/fetch-kernel.sh 7.2 | tail -n 1)
step "kernel 6.12, cloud flavor (mlx5 and mlx4, no Soft-RoCE)"
PROBEGEN_KERNEL_6_12_CLOUD=$(bash scripts/fetch-kernel.sh --flavor cloud 6.12 | tail -n 1)
step "kernel 5.10 (bullseye's newest; its modules have no BTF)"
PROBEGEN_KERNEL_5_10=$(bash scripts/fetch-kernel.sh 5.10 | tail -n 1)
step "kernel 7.3 (trixie-backports)"
PROBEGEN_KERNEL_7_3=$(bash scripts/fetch-kernel.sh 7.3 | tail -n 1)
step "kernel 7.3, cloud flavor (its mlx5 set differs: CONFIG_SECURITY_INFINIBAND=y)"
PROBEGEN_KERNEL_7_3_CLOUD=$(bash scripts/fetch-kernel.sh --flavor cloud 7.3 | tail -n 1)
step "rdma-core's providers (ibverbs-providers, libibverbs-dev) of bullseye, bookworm, trixie and sid"
# libmlx5 stripped as jobs load it, libmlx5.a with its local symbols: tests/providers.rs
PROBEGEN_RDMA_CORE_BULLSEYE=$(bash scripts/fetch-rdma-core.sh bullseye | tail -n 1)
PROBEGEN_RDMA_CORE_BOOKWORM=$(bash scripts/fetch-rdma-core.sh bookworm | tail -n 1)
PROBEGEN_RDMA_CORE_TRIXIE=$(bash scripts/fetch-rdma-core.sh trixie | tail -n 1)
PROBEGEN_RDMA_CORE_SID=$(bash scripts/fetch-rdma-core.sh sid | tail -n 1)
export PROBEGEN_RDMA_CORE_BULLSEYE PROBEGEN_RDMA_CORE_BOOKWORM PROBEGEN_RDMA_CORE_TRIXIE \
  PROBEGEN_RDMA_CORE_SID
export PROBEGEN_KERNEL_6_12 PROBEGEN_KERNEL_6_1 PROBEGEN_KERNEL_7_2 PROBEGEN_KERNEL_6_12_CLOUD \
  PROBEGEN_KERNEL_5_10 PROBEGEN_KERNEL_7_3 PROBEGEN_KERNEL_7_3_CLOUD

step "format and lint"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings

step "cargo test (unit, fixtures, real 7.3, 7.2, 6.12, 6.1 and 5.10 trees)"
cargo test --workspace --release --no-fail-fast
# the vendored layout's crossing count against the release's scan (third_party/layout-rs/PROBEGEN.md)
cargo test --release --manifest-path third_party/layout-rs/Cargo.toml --target-dir target/third_party

step "benchmark (reports, never fails the run): cold and warm graph vs GNU cflow, load phases, four vendors vs one, on 6.12 and 7.2"
bash benches/graph_vs_cflow.sh 3

step "kernel-upgrade job 6.12 -> 7.2: check, regenerate, compile, boot the stock 7.2 kernel with the collector"
rm -rf target/kernel-upgrade
KERNEL_UPGRADE_OUT=target/kernel-upgrade/generated \
  bash scripts/kernel-upgrade.sh generated/linux-6.12/rxe/manifest.yaml 7.2 rxe
# The job regenerates exactly the checked-in 7.2 set.
diff -r target/kernel-upgrade/generated/linux-7.2/rxe generated/linux-7.2/rxe
# Its report: the rules drift, the boot, each induced failure's owner, the pictures.
PROBEGEN_KERNEL_UPGRADE_REPORT=target/kernel-upgrade/7.2 \
  cargo test --release --test kernel_upgrade_report -- --ignored --nocapture

step "Debian package: lintian, the unit's exposure, install / upgrade (config kept) / purge"
DEB=$(bash scripts/build-deb.sh | tail -n 1)
# the same package with a bumped version: the upgrade must keep an edited conffile
DEB_UPGRADE=$(PROBEGEN_DEB_VERSION="$(dpkg-deb -f "$DEB" Version)+upgradetest" \
  PROBEGEN_DEB_OUT=target/debian/upgrade bash scripts/build-deb.sh | tail -n 1)
PROBEGEN_DEB=$DEB PROBEGEN_DEB_UPGRADE=$DEB_UPGRADE \
  cargo test --release --test package -- --include-ignored --skip e2e_driver_reload --nocapture

step "the package on the stock kernels: the .deb's agent as the service runs it (uid 65534, the unit's capabilities) picks and attaches a set"
# 7.2 with two vendor drivers loaded (mlx5_ib and rdma_rxe): the bundle's union set of the
# pair, both drivers' probes attached and the verbs core once
PROBEGEN_DEB=$DEB E2E_PACKAGE_SET=mlx5+rxe \
  E2E_MODULE_DIRS="drivers/infiniband/hw/mlx5 drivers/infiniband/sw/rxe" \
  bash scripts/e2e-package.sh 7.2
for ver in 6.12 6.1; do
  PROBEGEN_DEB=$DEB E2E_PACKAGE_MATCH=exact bash scripts/e2e-package.sh "$ver"
done
# 7.3 (trixie-backports, the newest series): its own rxe set chosen by release string, every
# probe attached (58/58: core 36, vendor 14, data plane 8), the packaged `baseline = true`
# traced by fsession on every handler (18), the induced EFAULT and EINVAL caught with their
# origins (rxe alone: mlx5+rxe is 7.2's proof of a union; 78-79 s wall on 2 shared cores)
PROBEGEN_DEB=$DEB E2E_PACKAGE_MATCH=exact E2E_PACKAGE_SET=rxe E2E_PACKAGE_BASELINE=fsession \
  E2E_MODULE_DIRS=drivers/infiniband/sw/rxe bash scripts/e2e-package.sh 7.3
# 5.10 (bullseye): no module BTF, so every layer (ib_core, ib_uverbs, the drivers) attaches by
# the kprobe path, and the maps are charged to the unit's LimitMEMLOCK= (before 5.11); the
# union set of mlx5 and rxe, the induced EFAULT and EINVAL caught with their origins; the
# packaged `baseline = true` on a kernel without task storage: "baseline unavailable: <what
# it lacks>" in the log and every snapshot, nothing traced, each chain's bifurcation
# "baseline unavailable", the service up (~3 min; 93-104 s wall here when the machine is idle)
PROBEGEN_DEB=$DEB E2E_PACKAGE_MATCH=exact E2E_PACKAGE_SET=mlx5+rxe E2E_PACKAGE_BASELINE=unavailable \
  E2E_MODULE_DIRS="drivers/infiniband/hw/mlx5 drivers/infiniband/sw/rxe" \
  bash scripts/e2e-package.sh 5.10
# the rt flavor (6.12): the agent reads `-rt-amd64` in the release string and takes the series'
# amd64 set (rt builds the same sets), attaches it and catches the induced failures; its exit
# detaches every program in ~23 s under TCG (rt: no expedited RCU grace periods after boot)
PROBEGEN_DEB=$DEB E2E_FLAVOR=rt E2E_PACKAGE_MATCH=exact E2E_PACKAGE_SET=rxe \
  E2E_MODULE_DIRS=drivers/infiniband/sw/rxe bash scripts/e2e-package.sh 6.12
# another point release of 6.12 built by another gcc (trixie's 6.12.117-1, gcc 14; the set is
# bookworm's 6.12.118, gcc 12): the series' set, every probe checked against this kernel's
# BTF, the compiler clones resolved by name, every probe attached
PROBEGEN_DEB=$DEB E2E_KERNEL_VERSION=6.12.117-1 E2E_PACKAGE_MATCH=series \
  bash scripts/e2e-package.sh 6.12

step "drivers that come and go: modprobe -r rdma_rxe through the .deb's rule while the service runs, reload, probes back, invariant in every snapshot (6.12)"
PROBEGEN_DEB=$DEB PROBEGEN_E2E_RELOAD=1 bash scripts/e2e-package.sh 6.12
cargo test --release --test package -- --ignored --exact e2e_driver_reload --nocapture

step "end to end: the collector on Soft-RoCE under qemu (Debian 6.12 and 6.1 stock kernels)"
# 6.12 at --interval 20ms: windows close during the hook's burst of failing calls, and every
# snapshot's invariant must hold (issue 21 row 13: a read between a failure's count and its
# record claimed a loss in 6 of 728 snapshots before the fence)
PROBEGEN_E2E_INTERVAL=20ms bash scripts/e2e-collect.sh 6.12
# 6.1 at the fleet's default --interval 5s: there the idle collector's run time is asserted
# (<= 100 ms in 10 s, schedstat; ticks are sampled and only printed).
PROBEGEN_E2E_INTERVAL=5s bash scripts/e2e-collect.sh 6.1
# rdma_rxe without .BTF, as DKMS / vendor OFED builds ship drivers: its probes attach by the
# kprobe/kretprobe fallback and the rxe-level origins of the induced failures are still caught
E2E_STRIP_BTF=rdma_rxe bash scripts/e2e-collect.sh 6.12

step "the good-trace baseline on Soft-RoCE under qemu: collect --baseline, bifurcations, expected errors, a trace burst (6.12 and 7.2)"
# issue 25: about 8 min a boot under TCG here (two collector starts of ~10 s each, 60 rounds of
# verbs, five jobs, a burst of 600 reg_mr); outputs in target/e2e-baseline/<ver>/out
for ver in 6.12 7.2; do
  bash scripts/e2e-baseline.sh "$ver"
done

step "induced data-plane errors on Soft-RoCE under qemu: status, QP, job, a port error; per QP the first error and a count (6.12)"
# issue 34: a boot per kernel of the proof (about 20 s each under TCG); outputs in
# target/e2e-dataplane/<ver>/out
bash scripts/e2e-dataplane.sh 6.12
bash scripts/e2e-dataplane.sh 7.2
# the mlx5 provider's error completion (user space only): the uprobe attached at the offsets
# generated/providers.yaml resolved in Debian's stripped libmlx5 of bookworm and trixie, a call
# of bookworm's own dump_cqe with an error CQE recorded with its QP, syndromes and process
# (no mlx5 hardware: the call stands in for the poll's error branch); ~10 s a boot
bash scripts/e2e-providers.sh 6.12
bash scripts/e2e-providers.sh 7.2

step "every checked-in set on its stock kernel: vendor driver modules loaded, every set attached (7.3, 7.2, 6.12, 6.1)"
# one boot per kernel (about a minute each under TCG; 7.3: 150 s of qemu, 205 s in all with
# its four sets): `<ver> <set>: attached N/N` per set.
for ver in 7.3 7.2 6.12 6.1; do
  bash scripts/e2e-sets.sh "$ver"
done
# 5.10: its sets' drivers only (mlx5, rxe): every probe by the kprobe path (no module BTF);
# usnic_verbs, which the others load, refuses 5.10 without an IOMMU (EPERM); ~3.5 min
E2E_MODULE_DIRS="drivers/infiniband/hw/mlx5 drivers/infiniband/sw/rxe" bash scripts/e2e-sets.sh 5.10

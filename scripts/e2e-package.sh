#!/usr/bin/env bash
# The Debian package on a stock kernel: the .deb's agent, bundle and config (scripts/build-deb.sh)
# under qemu (scripts/e2e.sh) with every vendor driver module loaded, run as the service runs
# (uid 65534, exactly the unit's capabilities, via setpriv): it must choose a set with no flag
# naming one and attach every attachable probe; without CAP_SYS_ADMIN it must say so and exit 2;
# running through init's traffic, it must catch the induced EFAULT and EINVAL with their origins.
#
#   scripts/e2e-package.sh SERIES      (7.2, 6.12, 6.1)
#   E2E_KERNEL_VERSION=6.12.117-1 E2E_PACKAGE_MATCH=series scripts/e2e-package.sh 6.12
#       another point release of the series, built by another gcc (trixie's): the bundle has
#       no set built for it, so the agent must take the series' set, check every probe against
#       this kernel's BTF and resolve the compiler clones by name, and still attach all of them
#
#   E2E_MODULE_DIRS="drivers/infiniband/hw/mlx5 drivers/infiniband/sw/rxe" E2E_PACKAGE_SET=mlx5+rxe \
#     scripts/e2e-package.sh 7.2
#       two vendor drivers loaded: the bundle's union set of the pair, both drivers' probes
#       attached and the verbs core probed once
#
# E2E_PACKAGE_MATCH (exact|series): how the chosen set must match the booted release.
# E2E_PACKAGE_SET (a vendor or a union `a+b`): the set the agent must choose.
#
# PROBEGEN_E2E_RELOAD=1: drivers that come and go. Only Soft-RoCE is loaded (no
# E2E_MODULE_DIRS unless given), so the rxe set is chosen and holds rdma_rxe; after the
# traffic, with the service running, the .deb's modprobe.d rule (kmod's modprobe packed into
# the guest) must unload rdma_rxe (`modprobe -r`), the module is loaded again and its link
# re-added, the probes must come back, and verbs_fail's failures after the reload must be
# caught (steps package_release, package_reattach; tests/package.rs `e2e_driver_reload`
# checks every snapshot). Outputs then in target/e2e-package/<ver>-reload.
#
# Environment: the E2E_* knobs of scripts/e2e.sh, PROBEGEN_CACHE. Outputs:
# target/e2e-package/<ver>/{console.log,package/*}.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SERIES" >&2; exit 2; }
VER=$1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
log() { printf '[e2e-package %s] %s\n' "$VER" "$*" >&2; }
# PROBEGEN_DEB: a .deb scripts/build-deb.sh built already (test-all builds it once)
DEB=${PROBEGEN_DEB:-$(bash scripts/build-deb.sh | tail -n 1)}
RELOAD=${PROBEGEN_E2E_RELOAD:-}
TAG=$VER${E2E_KERNEL_VERSION:+-$E2E_KERNEL_VERSION}${RELOAD:+-reload}
STAGE=$REPO/target/e2e-package/stage/$TAG
OUT=${E2E_OUT:-$REPO/target/e2e-package/$TAG}
rm -rf "$STAGE"
mkdir -p "$STAGE/pkg"
dpkg-deb -x "$DEB" "$STAGE/pkg"
cp "$STAGE/pkg/usr/bin/probegen-agent" "$STAGE/probegen-agent"
cp -r "$STAGE/pkg/usr/lib/probegen/bundle" "$STAGE/bundle"
cp "$STAGE/pkg/etc/probegen/probegen.conf" "$STAGE/probegen.conf"
cp "$STAGE/pkg/lib/modprobe.d/probegen.conf" "$STAGE/modprobe-probegen.conf"
# kmod's modprobe reads the modprobe.d rule (busybox's, the guest's own, does not)
cp /usr/bin/kmod "$STAGE/kmod"
printf 'RELOAD=%s\n' "$RELOAD" >"$STAGE/hook.env"
rm -rf "$STAGE/pkg"
cp /usr/bin/setpriv "$STAGE/setpriv"
install -m 755 scripts/e2e/package-hook.sh "$STAGE/guest-hook.sh"
rc=0
if [ -n "$RELOAD" ]; then
	DIRS=${E2E_MODULE_DIRS:-}
	WANT=5
else
	DIRS=${E2E_MODULE_DIRS:-drivers/infiniband/hw drivers/infiniband/sw}
	WANT=3
fi
E2E_EXTRA_DIR=$STAGE E2E_OUT=$OUT E2E_MODULE_DIRS=$DIRS bash scripts/e2e.sh "$VER" || rc=$?
log "scripts/e2e.sh exited $rc"
steps=$(grep -a 'TB_STEP package_' "$OUT/console.log" || true)
printf '%s\n' "$steps" >&2
# what the agent said about this kernel's BTF and its clones (the status lines of the unit run)
grep -a -E 'compiler clones|skipping [0-9]+ probe' "$OUT/package/unit.log" >&2 || true
case ${E2E_PACKAGE_MATCH:-} in
'') ;;
exact) want='built for this release' ;;
series) want='the newest of this series' ;;
*) log "E2E_PACKAGE_MATCH=$E2E_PACKAGE_MATCH: expected exact or series"; exit 2 ;;
esac
if [ -n "${want:-}" ] && ! printf '%s\n' "$steps" | grep 'package_unit_caps PASS' | grep -q "$want"; then
	log "the chosen set is not \"$want\""
	exit 1
fi
if [ -n "${E2E_PACKAGE_SET:-}" ] &&
	! printf '%s\n' "$steps" | grep 'package_unit_caps PASS' | grep -q "linux-$VER/$E2E_PACKAGE_SET for "; then
	log "the chosen set is not linux-$VER/$E2E_PACKAGE_SET"
	exit 1
fi
[ $rc -eq 0 ] && [ "$(printf '%s\n' "$steps" | grep -c ' PASS')" -eq $WANT ]

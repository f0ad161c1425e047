#!/usr/bin/env bash
# The Debian package on a stock kernel: the .deb's agent, bundle and config (scripts/build-deb.sh)
# under qemu (scripts/e2e.sh) with every vendor driver module loaded, run as the service runs
# (uid 65534, exactly the unit's capabilities, via setpriv): it must choose a set with no flag
# naming one and attach every attachable probe; without CAP_SYS_ADMIN it must say so and exit 2;
# running through init's traffic, it must catch the induced EFAULT and EINVAL with their origins.
#
#   scripts/e2e-package.sh SERIES      (7.2, 6.12, 6.1)
#
# Environment: the E2E_* knobs of scripts/e2e.sh, PROBEGEN_CACHE. Outputs:
# target/e2e-package/<ver>/{console.log,package/*}.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SERIES" >&2; exit 2; }
VER=$1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
log() { printf '[e2e-package %s] %s\n' "$VER" "$*" >&2; }
DEB=$(bash scripts/build-deb.sh | tail -n 1)
STAGE=$REPO/target/e2e-package/stage/$VER
OUT=$REPO/target/e2e-package/$VER
rm -rf "$STAGE"
mkdir -p "$STAGE/pkg"
dpkg-deb -x "$DEB" "$STAGE/pkg"
cp "$STAGE/pkg/usr/bin/probegen-agent" "$STAGE/probegen-agent"
cp -r "$STAGE/pkg/usr/lib/probegen/bundle" "$STAGE/bundle"
cp "$STAGE/pkg/etc/probegen/probegen.conf" "$STAGE/probegen.conf"
rm -rf "$STAGE/pkg"
cp /usr/bin/setpriv "$STAGE/setpriv"
install -m 755 scripts/e2e/package-hook.sh "$STAGE/guest-hook.sh"
rc=0
E2E_EXTRA_DIR=$STAGE E2E_OUT=$OUT \
	E2E_MODULE_DIRS=${E2E_MODULE_DIRS:-drivers/infiniband/hw drivers/infiniband/sw} \
	bash scripts/e2e.sh "$VER" || rc=$?
log "scripts/e2e.sh exited $rc"
steps=$(grep -a 'TB_STEP package_' "$OUT/console.log" || true)
printf '%s\n' "$steps" >&2
[ $rc -eq 0 ] && [ "$(printf '%s\n' "$steps" | grep -c ' PASS')" -eq 3 ]

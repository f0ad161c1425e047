#!/usr/bin/env bash
# The Debian package on a stock kernel: the .deb's agent, bundle and config (scripts/build-deb.sh)
# under qemu (scripts/e2e.sh) with every vendor driver module loaded, run as the service runs
# (uid 65534, exactly the unit's capabilities, via setpriv): it must choose a set with no flag
# naming one and attach every attachable probe; without CAP_SYS_ADMIN it must say so and exit 2;
# running through init's traffic, it must catch the induced EFAULT and EINVAL with their origins.
#
#   scripts/e2e-package.sh SERIES      (7.3, 7.2, 6.12, 6.1, 5.10)
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
#   E2E_PACKAGE_MATCH=nearest scripts/e2e-package.sh 6.1
#       a kernel whose series has no set: the staged bundle loses every set of the booted
#       series (index and directories), so the agent must take the nearest series' set
#       (bundle::nearest), check each probe against this kernel's BTF and kallsyms, attach
#       those that match and say so: match="nearest" in its line, the per-layer counts of the
#       attached line summing to what attached, and the snapshots' `set` counting the same
#       probes as their `attached` list (checked here, on the host, in unit.jsonl)
#
#   E2E_PACKAGE_BASELINE=unavailable E2E_PACKAGE_MATCH=exact scripts/e2e-package.sh 5.10
#       the packaged config turns the baseline on (`baseline = true`); 5.10 has no task
#       storage and no module BTF: the unit's run and the service must say "baseline
#       unavailable:" naming what the kernel lacks, the service go on and catch the induced
#       failures (step package_baseline), and every snapshot's baseline.mechanism say the same
#       with nothing traced, each chain's bifurcation "baseline unavailable" (checked here, on
#       the host, in service.jsonl)
#   E2E_PACKAGE_BASELINE=fsession scripts/e2e-package.sh 7.3
#       a kernel with fsession (7.0+): the service's baseline line counts the handlers traced
#       by their session programs; every snapshot's baseline.records adds up, and the last
#       has traces received, success shapes, and one fsession probe per handler counted
#
# E2E_PACKAGE_MATCH (exact|series|nearest): how the chosen set must match the booted release.
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
TAG=$VER${E2E_FLAVOR:+-$E2E_FLAVOR}${E2E_KERNEL_VERSION:+-$E2E_KERNEL_VERSION}${RELOAD:+-reload}
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
if [ "${E2E_PACKAGE_MATCH:-}" = nearest ]; then
	# a bundle without the booted series' sets: what a host of a series nobody built has
	python3 - "$STAGE/bundle" "$VER" <<'PY'
import json, shutil, sys
bundle, series = sys.argv[1], sys.argv[2]
path = bundle + "/index.json"
index = json.load(open(path))
gone = [s for s in index["sets"] if s["series"] == series]
if not gone:
    sys.exit(f"{path}: no set of series {series} to remove")
for s in gone:
    shutil.rmtree(f"{bundle}/{s['dir']}")
index["sets"] = [s for s in index["sets"] if s["series"] != series]
json.dump(index, open(path, "w"), indent=2)
print(f"removed {len(gone)} sets of {series}; {len(index['sets'])} left", file=sys.stderr)
PY
fi
# the unit's LimitMEMLOCK= (what systemd sets before it drops privileges; 5.10 charges the
# maps against it), in KiB for the hook's ulimit -l
memlock=$(sed -n 's/^LimitMEMLOCK=//p' "$STAGE/pkg/lib/systemd/system/probegen-agent.service")
case "$memlock" in
[0-9]*M) memlock_kb=$((${memlock%M} * 1024)) ;;
*) echo "e2e-package: the unit's LimitMEMLOCK=$memlock: expected <n>M" >&2; exit 2 ;;
esac
BASELINE=${E2E_PACKAGE_BASELINE:-}
case $BASELINE in
'') ;;
unavailable) want_bl='no task storage' ;;
fsession) want_bl='fsession on the handlers' ;;
*) log "E2E_PACKAGE_BASELINE=$BASELINE: expected unavailable or fsession"; exit 2 ;;
esac
printf 'RELOAD=%s\nMATCH=%s\nMEMLOCK_KB=%s\nBASELINE=%s\nBASELINE_WANT='"'"'%s'"'"'\n' "$RELOAD" \
	"${E2E_PACKAGE_MATCH:-}" "$memlock_kb" "$BASELINE" "${want_bl:-}" >"$STAGE/hook.env"
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
[ -n "$BASELINE" ] && WANT=$((WANT + 1))
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
nearest) want='match="nearest"' ;;
*) log "E2E_PACKAGE_MATCH=$E2E_PACKAGE_MATCH: expected exact, series or nearest"; exit 2 ;;
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
if [ "${E2E_PACKAGE_MATCH:-}" = nearest ] && ! python3 - "$OUT/package/unit.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if not lines:
    sys.exit(f"{sys.argv[1]}: no snapshot")
for s in lines:
    st = s.get("set") or sys.exit(f"snapshot {s['snapshot']}: no set")
    by = st["attached"]
    attached = sum(1 for a in s["attached"] if a["attached"])
    counted = sum(by[l]["attached"] for l in ("core", "vendor", "data_plane"))
    probes = sum(by[l]["probes"] for l in ("core", "vendor", "data_plane"))
    if st["match"] != "nearest" or counted != attached or probes != len(s["attached"]):
        sys.exit(f"snapshot {s['snapshot']}: set {st}, attached {attached}/{len(s['attached'])}")
print(f"unit.jsonl: {len(lines)} snapshots, set {st['dir']} match={st['match']}, attached "
      + ", ".join(f"{l} {by[l]['attached']}/{by[l]['probes']}" for l in ("core", "vendor", "data_plane"))
      + f" = {attached}/{len(s['attached'])} of the attached list", file=sys.stderr)
PY
then
	log "the snapshots' set does not count what attached"
	exit 1
fi
if [ -n "$BASELINE" ] && ! python3 - "$OUT/package/service.jsonl" "$BASELINE" "$want_bl" <<'PY'
import json, re, sys
path, mode, want = sys.argv[1:4]
lines = [json.loads(l) for l in open(path) if l.strip()]
if not lines:
    sys.exit(f"{path}: no snapshot")
for s in lines:
    b = s.get("baseline") or sys.exit(f"snapshot {s['snapshot']}: no baseline")
    m, r = b["mechanism"], b["records"]
    if want not in m or m.startswith("baseline unavailable: ") != (mode == "unavailable"):
        sys.exit(f"snapshot {s['snapshot']}: baseline.mechanism {m!r}")
    if mode == "unavailable" and (r["produced"] or r["received"] or b["handlers"]):
        sys.exit(f"snapshot {s['snapshot']}: a baseline that is unavailable traced: {r}")
    # each chain's note: no shape to compare where nothing is traced, said as such
    for c in s["chains"]:
        if (c.get("bifurcation") == "baseline unavailable") != (mode == "unavailable"):
            sys.exit(f"snapshot {s['snapshot']}: chain {c['summary']}: bifurcation {c.get('bifurcation')!r}")
    # received + dropped == produced, unless a trace was half written during the read
    holds = r["received"] + r["dropped"] == r["produced"]
    if holds != r["holds"] or not (holds or r["in_flight"]) or (s["final"] and not holds):
        sys.exit(f"snapshot {s['snapshot']}: baseline.records {r}")
    if not s["invariant"]["ok"]:
        sys.exit(f"snapshot {s['snapshot']}: invariant {s['invariant']}")
if mode == "fsession":
    # every handler the line counts traced by its session program, and traces received
    n = int(re.match(r"baseline: (\d+) handlers traced", m).group(1))
    sessions = sum(1 for a in s["attached"] if a.get("mechanism") == "fsession" and a["attached"])
    if sessions != n or not r["received"] or not b["handlers"]:
        sys.exit(f"last snapshot: {sessions} fsession probes for {n} handlers, records {r}, "
                 f"{len(b['handlers'])} handlers with shapes")
print(f"service.jsonl: {len(lines)} snapshots, baseline.mechanism {m!r}, records {r}, "
      f"{len(b['handlers'])} handlers with shapes, invariant {s['invariant']}", file=sys.stderr)
PY
then
	log "the snapshots' baseline is not what E2E_PACKAGE_BASELINE=$BASELINE says"
	exit 1
fi
[ $rc -eq 0 ] && [ "$(printf '%s\n' "$steps" | grep -c ' PASS')" -eq $WANT ]

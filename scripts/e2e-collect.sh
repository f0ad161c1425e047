#!/usr/bin/env bash
# Live collector end to end: runs `probegen collect` inside the Soft-RoCE qemu testbed
# (scripts/e2e.sh) through the guest hook scripts/e2e/collect-hook.sh, then checks its
# snapshots on the host (tests/collector_e2e.rs, ignored in a plain `cargo test`).
#
#   scripts/e2e-collect.sh 7.2|6.12|6.1
#
# Packs at /extra: the release probegen-agent, the binary a host runs (its shared libraries come via ldd), the rxe
# manifest of that kernel and its probes.bpf.c compiled with clang, the hook.
# Outputs: target/e2e/<ver>/{snapshots.jsonl,replay.jsonl,collect.log,metrics.txt,...}.
# Environment: E2E_* knobs of scripts/e2e.sh; PROBEGEN_VENDOR (default rxe);
# PROBEGEN_E2E_INTERVAL, the collector's --interval in the guest (default 1s: a snapshot a
# second gives the short run enough windows; the fleet default is 5s); PROBEGEN_COLLECT_TIMINGS=1,
# the collector's per-window step timings in collect.log (they cost a little CPU themselves).
# E2E_STRIP_BTF=rdma_rxe: that module without .BTF; its probes must attach by kprobe (outputs
# in target/e2e/<ver>-nobtf unless E2E_OUT says otherwise).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SERIES (7.2, 6.12, 6.1)" >&2; exit 2; }
VER=$1
case "$VER" in [0-9]*.[0-9]* ) ;; *) echo "usage: $0 SERIES (7.2, 6.12, 6.1)" >&2; exit 2 ;; esac
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
VENDOR=${PROBEGEN_VENDOR:-rxe}
SET=generated/linux-$VER/$VENDOR
STAGE=$REPO/target/e2e-collect/$VER/extra
log() { printf '[e2e-collect %s] %s\n' "$VER" "$*" >&2; }

log "building probegen-agent (release)"
. scripts/e2e/stage.sh
rm -rf "$STAGE"
mkdir -p "$STAGE"
stage_agent "$STAGE"
stage_set "$SET" "$STAGE"
install -m 755 scripts/e2e/collect-hook.sh "$STAGE/guest-hook.sh"
# the port error counter's inducer (the hook runs it from /extra)
gcc -O2 -Wall -Wextra -o "$STAGE/port_rnr" tests/e2e/port_rnr.c -libverbs
{
	printf 'INTERVAL=%s\n' "${PROBEGEN_E2E_INTERVAL:-1s}"
	printf 'TIMINGS=%s\n' "${PROBEGEN_COLLECT_TIMINGS:-}"
} >"$STAGE/hook.env"
log "extra: $(du -sh "$STAGE" | cut -f1) ($(ls "$STAGE" | tr '\n' ' '))"

OUT=${E2E_OUT:-$REPO/target/e2e/$VER${E2E_STRIP_BTF:+-nobtf}}
rc=0
E2E_OUT=$OUT E2E_EXTRA_DIR=$STAGE bash scripts/e2e.sh "$VER" || rc=$?
log "scripts/e2e.sh exited $rc"

log "checking $OUT/snapshots.jsonl"
check=0
PROBEGEN_E2E_SERIES=$VER PROBEGEN_E2E_MANIFEST=$STAGE/manifest.yaml PROBEGEN_E2E_OUT=$OUT \
	PROBEGEN_E2E_NO_BTF=${E2E_STRIP_BTF:-} \
	cargo test --release --test collector_e2e -- --ignored --exact e2e_collect_series --nocapture || check=$?
[ $rc -eq 0 ] && [ $check -eq 0 ]

#!/usr/bin/env bash
# Induced data-plane errors end to end: `probegen-agent collect` with the set's data-plane
# probes inside the Soft-RoCE qemu testbed (scripts/e2e.sh), the workload
# tests/e2e/verbs_dataplane.c one job per error class, driven by the guest hook
# scripts/e2e/dataplane-hook.sh; then tests/dataplane_e2e.rs checks the snapshots on the host
# (ignored in a plain `cargo test`).
#
#   scripts/e2e-dataplane.sh 6.12|7.2|6.1
#
# Outputs: target/e2e-dataplane/<ver>/out/{snapshots.jsonl,vd.log,jobs.txt,*.log}
# (E2E_OUT overrides).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SERIES (6.12, 7.2, 6.1)" >&2; exit 2; }
VER=$1
case "$VER" in [0-9]*.[0-9]* ) ;; *) echo "usage: $0 SERIES (6.12, 7.2, 6.1)" >&2; exit 2 ;; esac
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
SET=generated/linux-$VER/rxe
STAGE=$REPO/target/e2e-dataplane/$VER/extra
log() { printf '[e2e-dataplane %s] %s\n' "$VER" "$*" >&2; }

log "building probegen-agent (release)"
. scripts/e2e/stage.sh
rm -rf "$STAGE"
mkdir -p "$STAGE"
stage_agent "$STAGE"
stage_set "$SET" "$STAGE"
gcc -O2 -Wall -Wextra -o "$STAGE/verbs_dataplane" tests/e2e/verbs_dataplane.c -libverbs
install -m 755 scripts/e2e/dataplane-hook.sh "$STAGE/guest-hook.sh"
printf 'INTERVAL=%s\n' "${PROBEGEN_E2E_INTERVAL:-1s}" >"$STAGE/hook.env"

OUT=${E2E_OUT:-$REPO/target/e2e-dataplane/$VER/out}
rc=0
start=$(date +%s)
E2E_TIMEOUT=${E2E_TIMEOUT:-600} E2E_OUT=$OUT E2E_EXTRA_DIR=$STAGE bash scripts/e2e.sh "$VER" || rc=$?
log "scripts/e2e.sh exited $rc after $(($(date +%s) - start)) s"

check=0
PROBEGEN_E2E_SERIES=$VER PROBEGEN_E2E_MANIFEST=$STAGE/manifest.yaml PROBEGEN_E2E_OUT=$OUT \
	cargo test --release --test dataplane_e2e -- --ignored --nocapture || check=$?
[ $rc -eq 0 ] && [ $check -eq 0 ]

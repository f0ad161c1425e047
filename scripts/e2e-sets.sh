#!/usr/bin/env bash
# Every probe set of a kernel on that stock kernel: one qemu boot (scripts/e2e.sh) loads every
# vendor driver module the kernel's config builds (drivers/infiniband/hw and sw, with their
# Ethernet parents from modules.dep; no hardware needed), then the collector loads and attaches
# each set in turn (every program through the verifier) and runs it briefly. The host then
# checks that every probe the manifest calls attachable attached (tests/sets_e2e.rs, ignored in
# a plain `cargo test`) and prints one line per set: `<ver> <set>: attached N/N`.
#
#   scripts/e2e-sets.sh SERIES [SET_DIR...]
#
# SERIES: any series scripts/fetch-kernel.sh resolves (7.2, 6.12, 6.1). SET_DIR: a directory
# with manifest.yaml and probes.bpf.c (what `probegen generate --out` writes; probegen.bpf.h
# beside it, in its parent, or generated/'s); default: every generated/linux-<SERIES>/*/.
# A set is named by its directory's name (two sets of one name: exit 2).
# Environment: the E2E_* knobs of scripts/e2e.sh (E2E_FLAVOR=cloud boots the cloud kernel with
# generated/linux-<SERIES>-cloud/'s sets where they exist); E2E_SETS_DURATION, how long each set stays
# attached (default 2s); E2E_MODULE_DIRS (default "drivers/infiniband/hw drivers/infiniband/sw")
# and E2E_EXTRA_MODULES (a driver outside those directories, e.g. a new vendor's).
# Outputs: target/e2e-sets/<ver>/{console.log,dmesg.txt,sets/<name>/{snapshots.jsonl,
# collect.log,collect.rc}}; the staged sets in target/e2e-sets/stage/<ver>/.
set -euo pipefail
usage() { echo "usage: $0 SERIES [SET_DIR...]  (SERIES: 7.2, 6.12, 6.1)" >&2; exit 2; }
[ $# -ge 1 ] || usage
VER=$1
shift
case "$VER" in [0-9]*.[0-9]*) ;; *) usage ;; esac
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
log() { printf '[e2e-sets %s] %s\n' "$VER" "$*" >&2; }
bad() { log "$*"; exit 2; }

SETS=("$@")
# E2E_FLAVOR (scripts/e2e.sh): the flavor's own sets where they differ from amd64's
# (generated/linux-6.12-cloud/), else the series' (an rt kernel runs the amd64 sets)
KERNEL_DIR=generated/linux-$VER
[ -n "${E2E_FLAVOR:-}" ] && [ -d "generated/linux-$VER-$E2E_FLAVOR" ] && KERNEL_DIR=generated/linux-$VER-$E2E_FLAVOR
if [ ${#SETS[@]} -eq 0 ]; then
	for d in "$KERNEL_DIR"/*/; do [ -f "$d/manifest.yaml" ] && SETS+=("${d%/}"); done
	[ ${#SETS[@]} -gt 0 ] || bad "no sets in $KERNEL_DIR/ (give SET_DIRs)"
fi
declare -A seen=()
for s in "${SETS[@]}"; do
	[ -f "$s/manifest.yaml" ] || bad "$s: no manifest.yaml (expected a probe set directory)"
	[ -f "$s/probes.bpf.c" ] || bad "$s: no probes.bpf.c (expected a probe set directory)"
	n=$(basename "$s")
	[[ $n =~ ^[A-Za-z0-9_.-]+$ ]] || bad "$s: set name '$n' must be letters, digits, _ . -"
	[ -z "${seen[$n]:-}" ] || bad "$s: a second set named '$n' (also ${seen[$n]})"
	seen[$n]=$s
done

TAG=$VER${E2E_FLAVOR:+-$E2E_FLAVOR}
STAGE=$REPO/target/e2e-sets/stage/$TAG
OUT=$REPO/target/e2e-sets/$TAG
log "building probegen-agent (release)"
. scripts/e2e/stage.sh
rm -rf "$STAGE"
mkdir -p "$STAGE/sets"
stage_agent "$STAGE"
for s in "${SETS[@]}"; do
	n=$(basename "$s")
	mkdir -p "$STAGE/sets/$n"
	stage_set "$s" "$STAGE/sets/$n" || bad "$s/probes.bpf.c does not compile"
done
install -m 755 scripts/e2e/sets-hook.sh "$STAGE/guest-hook.sh"
printf 'DURATION=%s\n' "${E2E_SETS_DURATION:-2s}" >"$STAGE/hook.env"
log "sets: ${!seen[*]} ($(du -sh "$STAGE" | cut -f1) staged)"

# each set stays attached E2E_SETS_DURATION but loads for 30 to 55 s under TCG (7.3's mlx5:
# 53 s), after the vendor modules (30 s): 240 s fit three sets, not four
export E2E_TIMEOUT=${E2E_TIMEOUT:-$((240 + 60 * ${#SETS[@]}))}
rc=0
E2E_EXTRA_DIR=$STAGE E2E_OUT=$OUT \
	E2E_MODULE_DIRS=${E2E_MODULE_DIRS:-drivers/infiniband/hw drivers/infiniband/sw} \
	bash scripts/e2e.sh "$VER" || rc=$?
log "scripts/e2e.sh exited $rc"

check=0
PROBEGEN_E2E_SERIES=$TAG PROBEGEN_E2E_SETS_OUT=$OUT PROBEGEN_E2E_SETS_STAGE=$STAGE \
	cargo test --release --test sets_e2e -- --ignored --exact e2e_sets_attach --nocapture || check=$?
[ $rc -eq 0 ] && [ $check -eq 0 ]

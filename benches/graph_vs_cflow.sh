#!/usr/bin/env bash
# probegen's call-graph build vs GNU cflow on the same real kernel tree, in the same run.
#
# Usage: benches/graph_vs_cflow.sh [KERNEL_DIR] [RUNS]
#   KERNEL_DIR  default: $PROBEGEN_KERNEL_6_12, else ${PROBEGEN_CACHE:-$HOME/.cache/probegen}/linux-6.12
#               (scripts/fetch-kernel.sh 6.12 puts it there)
#   RUNS        runs per tool (default 3); the median wall time and the largest peak RSS are reported
#
# probegen: `target/release/probegen graph --kernel-src DIR` (built here first): reads the .config and
#   Kbuild, parses drivers/infiniband + include/{rdma,uapi/rdma,linux/mlx5}, builds the graph with
#   macro/inline/uapi/write/ops-table dispatch, and computes the reachable set.
# cflow:    `cflow -i _ -m ib_uverbs_ioctl` with the kernel-attribute --symbol flags over every .c
#   file of drivers/infiniband (cflow has no Kbuild/Kconfig notion, so it gets all of them).
#
# Targets: probegen wall <= 0.4x cflow's, probegen peak RSS <= 200 MB. The script prints PASS/FAIL
# per target and always exits 0 when both tools ran: a benchmark reports, it does not gate.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'graph_vs_cflow: error: %s\n' "$*" >&2; exit 2; }

DIR=${1:-${PROBEGEN_KERNEL_6_12:-${PROBEGEN_CACHE:-${HOME}/.cache/probegen}/linux-6.12}}
RUNS=${2:-3}
[[ -d "${DIR}/drivers/infiniband/core" ]] ||
  die "${DIR} is not a kernel tree (run scripts/fetch-kernel.sh 6.12)"
[[ "${RUNS}" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '${RUNS}'"
TIME=/usr/bin/time
[[ -x ${TIME} ]] || die "${TIME} not found (Debian package 'time')"
command -v cflow >/dev/null 2>&1 || die "cflow not found (Debian package 'cflow')"

TMP=$(mktemp -d)
trap 'rm -rf -- "${TMP}"' EXIT

printf 'building target/release/probegen ...\n' >&2
if ! cargo build --release -p probegen --bin probegen >"${TMP}/build.log" 2>&1; then
  tail -n 20 "${TMP}/build.log" >&2
  die "cargo build --release failed"
fi
PROBEGEN=target/release/probegen

mapfile -d '' CFILES < <(find "${DIR}/drivers/infiniband" -name '*.c' -type f -print0 | sort -z)
((${#CFILES[@]} > 0)) || die "no .c files under ${DIR}/drivers/infiniband"

# Kernel attributes cflow must not take for identifiers (see shared notes, "Peer baseline").
CFLOW_SYMBOLS=()
for s in __user __rcu __iomem __force __must_check __always_inline noinline __init __exit \
         __cold __attribute_const__ __maybe_unused __packed __percpu __bitwise __nocast; do
  CFLOW_SYMBOLS+=("--symbol=${s}:qualifier")
done
for s in __printf __aligned __acquires __releases __must_hold __counted_by __free __cleanup; do
  CFLOW_SYMBOLS+=("--symbol=${s}:wrapper")
done

# run_once NAME RUN CMD...: one timed run; appends "wall_s peak_kb" to ${TMP}/NAME.times.
run_once() {
  local name=$1 run=$2
  shift 2
  if ! "${TIME}" -f '%e %M' -o "${TMP}/${name}.time" "$@" >"${TMP}/${name}.out" 2>"${TMP}/${name}.err"; then
    printf '%s run %d failed:\n' "${name}" "${run}" >&2
    tail -n 5 "${TMP}/${name}.err" >&2
    exit 2
  fi
  local wall kb
  read -r wall kb < <(tail -n 1 "${TMP}/${name}.time")
  printf '%s %s\n' "${wall}" "${kb}" >>"${TMP}/${name}.times"
  printf '  %-8s run %d: %s s, %s KB\n' "${name}" "${run}" "${wall}" "${kb}" >&2
}

printf 'kernel tree %s (%s), %d .c files, %d runs each\n' \
  "${DIR}" "$(cat "${DIR}/KERNEL_VERSION" 2>/dev/null || echo unknown)" "${#CFILES[@]}" "${RUNS}"

# Warm the page cache once, then alternate the tools so both see the same machine state.
cat "${CFILES[@]}" >/dev/null
"${PROBEGEN}" graph --kernel-src "${DIR}" >/dev/null
for ((i = 1; i <= RUNS; i++)); do
  run_once probegen "${i}" "${PROBEGEN}" graph --kernel-src "${DIR}"
  run_once cflow "${i}" cflow -i _ -m ib_uverbs_ioctl "${CFLOW_SYMBOLS[@]}" "${CFILES[@]}"
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
P_WALL=$(cut -d' ' -f1 "${TMP}/probegen.times" | median)
C_WALL=$(cut -d' ' -f1 "${TMP}/cflow.times" | median)
P_RSS=$(cut -d' ' -f2 "${TMP}/probegen.times" | sort -n | tail -n 1)
C_RSS=$(cut -d' ' -f2 "${TMP}/cflow.times" | sort -n | tail -n 1)

# What each produced (last run), so the comparison is not of empty outputs.
P_REACH=$(awk '/^reachable/ { print $2; exit }' "${TMP}/probegen.out")
P_FUNCS=$(awk '/^functions/ { print $2; exit }' "${TMP}/probegen.out")
C_NODES=$(sed -nE 's/^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)\(\).*/\1/p' "${TMP}/cflow.out" | sort -u | wc -l)
C_LINES=$(wc -l <"${TMP}/cflow.out")

awk -v pw="${P_WALL}" -v cw="${C_WALL}" -v pr="${P_RSS}" -v cr="${C_RSS}" \
    -v preach="${P_REACH:-?}" -v pfuncs="${P_FUNCS:-?}" -v cnodes="${C_NODES}" -v clines="${C_LINES}" '
BEGIN {
  wr = (cw > 0) ? pw / cw : 0
  rr = (cr > 0) ? pr / cr : 0
  printf "\n%-10s %12s %14s  %s\n", "tool", "median wall", "peak RSS", "output"
  printf "%-10s %10.2f s %11.1f MB  %s functions, %s reachable from ib_uverbs_ioctl+ib_uverbs_write\n", "probegen", pw, pr / 1024, pfuncs, preach
  printf "%-10s %10.2f s %11.1f MB  %d distinct names in a %d-line tree from ib_uverbs_ioctl\n", "cflow", cw, cr / 1024, cnodes, clines
  printf "\nratio probegen/cflow: wall %.2fx, peak RSS %.2fx\n", wr, rr
  printf "target wall <= 0.40x cflow: %s (%.2fx)\n", (cw > 0 && wr <= 0.4) ? "PASS" : "FAIL", wr
  printf "target peak RSS <= 200 MB:  %s (%.1f MB)\n", (pr / 1024 <= 200) ? "PASS" : "FAIL", pr / 1024
}'
exit 0

#!/usr/bin/env bash
# probegen's call-graph build vs GNU cflow on the same real kernel trees, in the same run:
# a cold run (empty facts cache: every file parsed, entries written), a warm run (the cache
# filled, nothing changed) and cflow, alternated so all three see the same machine state.
#
# Usage: benches/graph_vs_cflow.sh [RUNS] [KERNEL_DIR...]
#   RUNS        runs per tool and tree (default 5); the median wall time and the largest peak RSS
#               are reported
#   KERNEL_DIR  default: the 6.12 and 7.2 trees ($PROBEGEN_KERNEL_6_12 / $PROBEGEN_KERNEL_7_2, else
#               ${PROBEGEN_CACHE:-$HOME/.cache/probegen}/linux-<v>; scripts/fetch-kernel.sh puts them there)
#
# probegen: `target/release/probegen graph --kernel-src DIR` (built here first): reads the .config and
#   Kbuild, parses the directories of heuristics/rules.yaml's source: and vendors (cold) or reads their
#   facts from the cache (warm), builds the graph with macro/inline/uapi/write/ops-table dispatch,
#   and computes the reachable set.
# cflow:    `cflow -i _ -m ib_uverbs_ioctl` with the kernel-attribute --symbol flags over every .c
#   file of drivers/infiniband (cflow has no Kbuild/Kconfig notion, so it gets all of them).
#
# Targets (issue 14), per tree: cold wall <= 0.4x cflow's, warm wall <= 0.1x cflow's, cold peak
# RSS <= 200 MB. The script prints PASS/FAIL per target and always exits 0 when every tool ran: a
# benchmark reports, it does not gate.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'graph_vs_cflow: error: %s\n' "$*" >&2; exit 2; }

RUNS=${1:-5}
shift || true
[[ "${RUNS}" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, got '${RUNS}'"
CACHE_ROOT=${PROBEGEN_CACHE:-${HOME}/.cache/probegen}
DIRS=("$@")
if ((${#DIRS[@]} == 0)); then
  DIRS=("${PROBEGEN_KERNEL_6_12:-${CACHE_ROOT}/linux-6.12}" "${PROBEGEN_KERNEL_7_2:-${CACHE_ROOT}/linux-7.2}")
fi
for d in "${DIRS[@]}"; do
  [[ -d "${d}/drivers/infiniband/core" ]] ||
    die "${d} is not a kernel tree (run scripts/fetch-kernel.sh 6.12 / 7.2)"
done
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

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
wall_of() { cut -d' ' -f1 "${TMP}/$1.times" | median; }
rss_of() { cut -d' ' -f2 "${TMP}/$1.times" | sort -n | tail -n 1; }

# bench_tree DIR: cold, warm and cflow RUNS times each on DIR; prints the table and the targets.
bench_tree() {
  local dir=$1 i
  rm -f "${TMP}"/*.times
  local cfiles
  mapfile -d '' cfiles < <(find "${dir}/drivers/infiniband" -name '*.c' -type f -print0 | sort -z)
  ((${#cfiles[@]} > 0)) || die "no .c files under ${dir}/drivers/infiniband"
  printf '\nkernel tree %s (%s), %d .c files, %d runs each\n' \
    "${dir}" "$(cat "${dir}/KERNEL_VERSION" 2>/dev/null || echo unknown)" "${#cfiles[@]}" "${RUNS}"
  # Warm the page cache once; fill the warm runs' facts cache.
  cat "${cfiles[@]}" >/dev/null
  PROBEGEN_CACHE="${TMP}/warm" "${PROBEGEN}" graph --kernel-src "${dir}" >/dev/null 2>&1
  for ((i = 1; i <= RUNS; i++)); do
    rm -rf "${TMP}/cold"
    PROBEGEN_CACHE="${TMP}/cold" run_once cold "${i}" "${PROBEGEN}" graph --kernel-src "${dir}"
    PROBEGEN_CACHE="${TMP}/warm" run_once warm "${i}" "${PROBEGEN}" graph --kernel-src "${dir}"
    run_once cflow "${i}" cflow -i _ -m ib_uverbs_ioctl "${CFLOW_SYMBOLS[@]}" "${cfiles[@]}"
  done
  grep -q ' 0 parsed,' "${TMP}/warm.err" || die "the warm run parsed files: $(cat "${TMP}/warm.err")"
  cmp -s "${TMP}/cold.out" "${TMP}/warm.out" || die "cold and warm graph outputs differ"

  local cw ww fw cr wr fr reach funcs nodes
  cw=$(wall_of cold) ww=$(wall_of warm) fw=$(wall_of cflow)
  cr=$(rss_of cold) wr=$(rss_of warm) fr=$(rss_of cflow)
  reach=$(awk '/^reachable/ { print $2; exit }' "${TMP}/cold.out")
  funcs=$(awk '/^functions/ { print $2; exit }' "${TMP}/cold.out")
  nodes=$(sed -nE 's/^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)\(\).*/\1/p' "${TMP}/cflow.out" | sort -u | wc -l)
  awk -v cw="${cw}" -v ww="${ww}" -v fw="${fw}" -v cr="${cr}" -v wr="${wr}" -v fr="${fr}" \
      -v reach="${reach:-?}" -v funcs="${funcs:-?}" -v nodes="${nodes}" '
  BEGIN {
    printf "%-15s %12s %12s  %s\n", "tool", "median wall", "peak RSS", "output"
    printf "%-15s %10.2f s %9.1f MB  %s functions, %s reachable from ib_uverbs_ioctl+ib_uverbs_write\n", "probegen cold", cw, cr / 1024, funcs, reach
    printf "%-15s %10.2f s %9.1f MB  the same graph from the facts cache\n", "probegen warm", ww, wr / 1024
    printf "%-15s %10.2f s %9.1f MB  %d distinct names in a tree from ib_uverbs_ioctl\n", "cflow", fw, fr / 1024, nodes
    c = (fw > 0) ? cw / fw : 0
    w = (fw > 0) ? ww / fw : 0
    printf "ratio cold/cflow %.2fx, warm/cflow %.3fx, cold RSS/cflow %.2fx\n", c, w, (fr > 0) ? cr / fr : 0
    printf "target cold <= 0.40x cflow: %s (%.2fx)\n", (fw > 0 && c <= 0.4) ? "PASS" : "FAIL", c
    printf "target warm <= 0.10x cflow: %s (%.3fx)\n", (fw > 0 && w <= 0.1) ? "PASS" : "FAIL", w
    printf "target cold peak RSS <= 200 MB: %s (%.1f MB)\n", (cr / 1024 <= 200) ? "PASS" : "FAIL", cr / 1024
  }'
}

for d in "${DIRS[@]}"; do
  bench_tree "${d}"
done
exit 0

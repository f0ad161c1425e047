#!/usr/bin/env bash
# generate of four vendors from one parse against one vendor, on the same real tree, in one
# run (median of N each): prints both wall times and the ratio (target: at most 1.5x).
# The target is about the parse being shared, so those runs parse (--no-cache). With the facts
# cache filled nothing is parsed and the per-vendor work (selection, BTF verdicts, codegen) is
# most of a run: the warm line compares four vendors from one load with four separate runs.
#
# Usage: benches/generate_vendors.sh [SERIES] [N]    (default 6.12, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
SERIES=${1:-6.12}
N=${2:-5}
SRC=$(bash scripts/fetch-kernel.sh "${SERIES}" | tail -n 1)
cargo build --release --quiet --bin probegen
PG=target/release/probegen
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
run() { # run OUT VENDOR [ARGS...]: wall seconds of one generate
  local t0 t1 out=$1 vendor=$2
  shift 2
  t0=$(date +%s.%N)
  "${PG}" generate --kernel-src "${SRC}" --vendor "${vendor}" --out "${TMP}/${out}" "$@" >/dev/null
  t1=$(date +%s.%N)
  awk -v a="${t0}" -v b="${t1}" 'BEGIN { printf "%.3f\n", b - a }'
}
# The facts cache of these runs, filled once for the warm ones.
export PROBEGEN_CACHE="${TMP}/cache"
"${PG}" graph --kernel-src "${SRC}" >/dev/null 2>&1
one=() four=() wone=() wfour=()
for _ in $(seq "${N}"); do
  one+=("$(run one mlx5 --no-cache)")
  four+=("$(run four mlx5,bnxt_re,irdma,rxe --no-cache)")
  wone+=("$(run wone mlx5)")
  wfour+=("$(run wfour mlx5,bnxt_re,irdma,rxe)")
done
m1=$(printf '%s\n' "${one[@]}" | median)
m4=$(printf '%s\n' "${four[@]}" | median)
printf 'linux-%s generate, median of %s: one vendor %.3f s, four vendors from one parse %.3f s, ratio %.2fx (target <= 1.5x)\n' \
  "${SERIES}" "${N}" "${m1}" "${m4}" "$(awk -v a="${m4}" -v b="${m1}" 'BEGIN { print a / b }')"
w1=$(printf '%s\n' "${wone[@]}" | median)
w4=$(printf '%s\n' "${wfour[@]}" | median)
printf 'linux-%s generate, warm facts cache, median of %s: one vendor %.3f s, four vendors from one load %.3f s = %.2fx one vendor, %.2fx four separate runs\n' \
  "${SERIES}" "${N}" "${w1}" "${w4}" "$(awk -v a="${w4}" -v b="${w1}" 'BEGIN { print a / b }')" \
  "$(awk -v a="${w4}" -v b="${w1}" 'BEGIN { print a / (4 * b) }')"

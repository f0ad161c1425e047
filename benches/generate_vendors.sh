#!/usr/bin/env bash
# generate of four vendors from one parse against one vendor, on the same real tree, in one
# run (median of N each): prints both wall times and the ratio (target: at most 1.5x).
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
run() { # run OUT VENDOR: wall seconds of one generate
  local t0 t1
  t0=$(date +%s.%N)
  "${PG}" generate --kernel-src "${SRC}" --vendor "$2" --out "${TMP}/$1" >/dev/null
  t1=$(date +%s.%N)
  awk -v a="${t0}" -v b="${t1}" 'BEGIN { printf "%.3f\n", b - a }'
}
one=() four=()
for _ in $(seq "${N}"); do
  one+=("$(run one mlx5)")
  four+=("$(run four mlx5,bnxt_re,irdma,rxe)")
done
m1=$(printf '%s\n' "${one[@]}" | median)
m4=$(printf '%s\n' "${four[@]}" | median)
printf 'linux-%s generate, median of %s: one vendor %.3f s, four vendors from one parse %.3f s, ratio %.2fx (target <= 1.5x)\n' \
  "${SERIES}" "${N}" "${m1}" "${m4}" "$(awk -v a="${m4}" -v b="${m1}" 'BEGIN { print a / b }')"

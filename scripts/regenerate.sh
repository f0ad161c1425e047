#!/usr/bin/env bash
# Regenerate every checked-in probe set under generated/ from the real Debian kernel sources.
# The staleness test (tests/probe_sets.rs) fails until this has been run after a change to
# the rules, the templates or the analysis.
set -euo pipefail
cd "$(dirname "$0")/.."

# The sets that are checked in: "<kernel> <vendor> [flags]". Debian's 6.1 config does not
# build bnxt_re: its set is asked for as such (tests/common NOT_BUILT lists the same sets).
SETS=("7.2 mlx5" "7.2 bnxt_re" "7.2 irdma" "7.2 rxe"
      "6.12 mlx5" "6.12 bnxt_re" "6.12 irdma" "6.12 rxe"
      "6.1 mlx5" "6.1 bnxt_re --not-built" "6.1 irdma" "6.1 rxe")

cargo build --release --quiet
for set in "${SETS[@]}"; do
  read -r ver vendor flags <<<"${set}"
  read -r -a extra <<<"${flags}"
  src=$(bash scripts/fetch-kernel.sh "${ver}" | tail -n 1)
  ./target/release/probegen generate --kernel-src "${src}" --vendor "${vendor}" \
    --out "generated/linux-${ver}/${vendor}" "${extra[@]}"
done
./target/release/probegen schema > generated/manifest.schema.json.tmp
mv generated/manifest.schema.json.tmp generated/manifest.schema.json

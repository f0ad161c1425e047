#!/usr/bin/env bash
# Regenerate everything checked in under generated/ from the real Debian kernel sources: the
# probe sets, the shared BPF header generated/probegen.bpf.h (every set's probes.bpf.c includes
# it: compile with -I generated) and the manifest's JSON Schema. The staleness test
# (tests/probe_sets.rs, generated_files_are_fresh) fails until this has been run after a
# change to the rules, the templates or the analysis.
set -euo pipefail
cd "$(dirname "$0")/.."

# The sets that are checked in: vendors per kernel, each kernel's vendors from one parse
# (`generate --vendor a,b,c` writes generated/linux-<kernel>/<vendor>/). Debian's 6.1 config
# does not build bnxt_re: that kernel's list is asked for with --not-built (tests/common
# NOT_BUILT lists the same sets; tests/common CHECKED_IN_SETS lists every set).
KERNELS=(7.2 6.12 6.1)
VENDORS=mlx5,bnxt_re,irdma,rxe

cargo build --release --quiet
for ver in "${KERNELS[@]}"; do
  extra=()
  [[ ${ver} == 6.1 ]] && extra=(--not-built)
  src=$(bash scripts/fetch-kernel.sh "${ver}" | tail -n 1)
  ./target/release/probegen generate --kernel-src "${src}" --vendor "${VENDORS}" \
    --out "generated/linux-${ver}" --header-dir generated "${extra[@]}"
done
./target/release/probegen schema > generated/manifest.schema.json.tmp
mv generated/manifest.schema.json.tmp generated/manifest.schema.json

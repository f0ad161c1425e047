#!/usr/bin/env bash
# Regenerate everything checked in under generated/ from the real Debian kernel sources: the
# probe sets, the shared BPF header generated/probegen.bpf.h (every set's probes.bpf.c includes
# it: compile with -I generated) and the manifest's JSON Schema. The staleness test
# (tests/probe_sets.rs, generated_files_are_fresh) fails until this has been run after a
# change to the rules, the templates or the analysis.
set -euo pipefail
cd "$(dirname "$0")/.."

# The sets that are checked in: generated/sets.txt, one line per kernel (a series, or a series
# and a flavor: 6.12-cloud), its vendors from one parse (`generate --vendor a,b,c` writes
# generated/linux-<kernel>/<vendor>/). A vendor the config does not build (bnxt_re on 6.1) is
# named by `not-built=` and asked for with --not-built (tests/common reads the same file).
cargo build --release --quiet
while read -r kernel vendors rest <&3; do
  [[ -z ${kernel} || ${kernel} == \#* ]] && continue
  extra=()
  [[ ${rest} == not-built=* ]] && extra=(--not-built)
  fetch=("${kernel%%-*}")
  [[ ${kernel} == *-* ]] && fetch=(--flavor "${kernel#*-}" "${kernel%%-*}")
  src=$(bash scripts/fetch-kernel.sh "${fetch[@]}" | tail -n 1)
  # one vendor: --out is the set's own directory; several: their parent
  out=generated/linux-${kernel}
  [[ ${vendors} == *,* ]] || out=${out}/${vendors}
  ./target/release/probegen generate --kernel-src "${src}" --vendor "${vendors}" \
    --out "${out}" --header-dir generated "${extra[@]}"
done 3<generated/sets.txt
./target/release/probegen schema > generated/manifest.schema.json.tmp
mv generated/manifest.schema.json.tmp generated/manifest.schema.json

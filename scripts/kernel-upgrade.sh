#!/usr/bin/env bash
# The kernel-upgrade job: follow a checked-in probe set to a new Debian kernel and write one
# markdown report that can be the body of a merge request.
#
# Usage: scripts/kernel-upgrade.sh OLD_MANIFEST NEW_SPEC [VENDOR...]
#
#   OLD_MANIFEST  a checked-in set, e.g. generated/linux-6.12/mlx5/manifest.yaml
#   NEW_SPEC      what scripts/fetch-kernel.sh takes: a series (7.2) or a Debian version
#   VENDOR...     the sets to regenerate for the new kernel (default: the vendors checked in
#                 next to OLD_MANIFEST, and rxe, which the testbed runs)
#
# Steps, each reported:
#   1. fetch the new kernel (sources, config, vmlinux, modules) into the cache;
#   2. `probegen check` of OLD_MANIFEST against the new source (drift and rules drift);
#   3. regenerate generated/linux-<series>/<vendor>/ for every VENDOR; a series the checked-in
#      sets do not have yet (generated/sets.txt) is added to that list with the vendors its
#      config builds (a vendor it does not build is left out and reported), so
#      scripts/regenerate.sh and the tests keep it from then on;
#   4. compile every probes.bpf.c with clang;
#   5. boot Debian's stock new kernel in the qemu testbed (Soft-RoCE) with the rxe set:
#      every attachable probe must attach and the induced failures must be caught, each
#      with its origin and routed to its owner (reg_mr EFAULT: application; the driver's
#      EINVALs: vendor-driver) (scripts/e2e-collect.sh, tests/collector_e2e.rs); skip with
#      KERNEL_UPGRADE_BOOT=0.
# Report: target/kernel-upgrade/<series>/report.md (its path is the last line of stdout), and
# beside it report.html: the regenerated set as pictures with the drift drawn on them (the
# merge request links it when KERNEL_UPGRADE_PICTURES_URL says where the CI publishes it).
# KERNEL_UPGRADE_OUT: where the regenerated sets go (default generated/, the checked-in ones).
# Exit: 0 everything passed (drift is expected and reported, not a failure); 1 a step failed;
# 2 bad arguments.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

usage() { sed -n '5,11p' "$0" | sed 's/^# \{0,1\}//' >&2; }
if [[ $# -lt 2 ]]; then
  usage
  printf 'kernel-upgrade: expected OLD_MANIFEST NEW_SPEC [VENDOR...]\n' >&2
  exit 2
fi
OLD=$1
SPEC=$2
shift 2
[[ -f ${OLD} ]] || { printf 'kernel-upgrade: %s: no such manifest\n' "${OLD}" >&2; exit 2; }

log() { printf '[kernel-upgrade] %s\n' "$*" >&2; }
failed=0
fail() { log "FAILED: $*"; failed=1; }

# Vendors: given, else the old kernel's checked-in sets plus rxe.
if [[ $# -gt 0 ]]; then
  VENDORS=("$@")
else
  mapfile -t VENDORS < <({ ls "$(dirname "$(dirname "${OLD}")")"; echo rxe; } | sort -u)
fi

log "1. fetch ${SPEC}"
NEW_SRC=$(bash scripts/fetch-kernel.sh "${SPEC}" | tail -n 1) || { log "fetch-kernel.sh ${SPEC} failed"; exit 1; }
SERIES=$(awk -F= '$1 == "series" {print $2}' "${NEW_SRC}/.complete")
KVER=$(cat "${NEW_SRC}/KERNEL_VERSION")
PKGS=$(tr '\n' ';' <"${NEW_SRC}/DEBIAN_PACKAGES" | sed 's/;$//; s/;/, /g')
OUT=target/kernel-upgrade/${SERIES}
mkdir -p "${OUT}"
REPORT=${OUT}/report.md

cargo build --release --quiet --bin probegen
PG=target/release/probegen
PICTURES=${OUT}/report.html

log "2. check ${OLD} against ${KVER}"
check_rc=0
"${PG}" check --kernel-src "${NEW_SRC}" --against "${OLD}" --html "${PICTURES}" \
  >"${OUT}/check.md" 2>"${OUT}/check.err" || check_rc=$?
case ${check_rc} in
  0) check_line="no drift" ;;
  1) check_line="drift to review (below)" ;;
  *) check_line="check failed: $(tr '\n' ' ' <"${OUT}/check.err")"; fail "probegen check exited ${check_rc}" ;;
esac

GEN_ROOT=${KERNEL_UPGRADE_OUT:-generated}
SETS_LIST=${GEN_ROOT}/sets.txt
NEW_SERIES=0
if [[ -f ${SETS_LIST} ]] && ! awk -v k="${SERIES}" '$1 == k {f = 1} END {exit !f}' "${SETS_LIST}"; then
  NEW_SERIES=1
fi
log "3. regenerate ${VENDORS[*]} for linux-${SERIES} in ${GEN_ROOT}$([[ ${NEW_SERIES} == 1 ]] && echo ' (a new series)')"
declare -A GEN
BUILT=()
for v in "${VENDORS[@]}"; do
  dest=${GEN_ROOT}/linux-${SERIES}/${v}
  if line=$("${PG}" generate --kernel-src "${NEW_SRC}" --vendor "${v}" --out "${dest}" --header-dir "${GEN_ROOT}" 2>"${OUT}/generate-${v}.err"); then
    GEN[$v]=${line%%; wrote*}
    BUILT+=("${v}")
  elif [[ ${NEW_SERIES} == 1 ]] && grep -q -- '--not-built' "${OUT}/generate-${v}.err"; then
    # a new series whose config does not build the vendor (5.10: irdma, bnxt_re): no set
    GEN[$v]="not built by this config: no set ($(tr '\n' ' ' <"${OUT}/generate-${v}.err"))"
  else
    GEN[$v]="FAILED: $(tr '\n' ' ' <"${OUT}/generate-${v}.err")"
    fail "generate ${v}"
  fi
done
if [[ ${NEW_SERIES} == 1 && ${#BUILT[@]} -gt 0 ]]; then
  printf '%s %s\n' "${SERIES}" "$(IFS=,; echo "${BUILT[*]}")" >>"${SETS_LIST}"
  log "added ${SERIES} ${BUILT[*]} to ${SETS_LIST}"
fi

log "4. compile the BPF programs"
declare -A CC
for v in "${VENDORS[@]}"; do
  src=${GEN_ROOT}/linux-${SERIES}/${v}/probes.bpf.c
  [[ -f ${src} ]] || { CC[$v]="no probes.bpf.c"; continue; }
  if clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu -I"${GEN_ROOT}" \
      -c "${src}" -o "${OUT}/${v}.bpf.o" 2>"${OUT}/clang-${v}.err"; then
    CC[$v]="compiled ($(stat -c %s "${OUT}/${v}.bpf.o") bytes)"
  else
    CC[$v]="FAILED: $(head -n 3 "${OUT}/clang-${v}.err" | tr '\n' ' ')"
    fail "clang ${v}"
  fi
done

boot_line="skipped (KERNEL_UPGRADE_BOOT=0)"
owner_line="skipped (KERNEL_UPGRADE_BOOT=0)"
boot_summary=""
if [[ ${KERNEL_UPGRADE_BOOT:-1} != 0 ]]; then
  log "5. boot ${SERIES} in the qemu testbed with the rxe set"
  boot_rc=0
  bash scripts/e2e-collect.sh "${SERIES}" 2>&1 | tee "${OUT}/e2e.log" >&2 || boot_rc=${PIPESTATUS[0]}
  boot_summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$|^(PASS|FAIL) |TB_STEP|attached|^test result' "${OUT}/e2e.log" | tail -n 20 || true)
  # The owner of each induced failure (tests/collector_e2e.rs prints one line per failure and
  # fails the boot on a wrong one): a misrouted ticket is a regression of the new kernel.
  owner_lines=$(grep -E ': owner [a-z-]+ \(want [a-z-]+\)$' "${OUT}/e2e.log" || true)
  misrouted=$(grep -vE ': owner ([a-z-]+) \(want \1\)$' <<<"${owner_lines}" || true)
  if [[ -z ${owner_lines} ]]; then
    owner_line="not checked (no owner lines in ${OUT}/e2e.log)"
    if [[ ${boot_rc} -eq 0 ]]; then fail "the testbed printed no owner of the induced failures"; fi
  elif [[ -n ${misrouted} ]]; then
    owner_line="MISROUTED: $(tr '\n' ';' <<<"${misrouted}")"
    fail "induced failures routed to the wrong owner"
  else
    # `case owner` pairs, once each (two verbs_fail processes make the same failures)
    owner_line="each to its owner: $(sed -E 's/.* ([a-z_]+): owner ([a-z-]+) .*/\1 \2/' <<<"${owner_lines}" | sort -u | paste -sd, - | sed 's/,/, /g')"
  fi
  if [[ ${boot_rc} -eq 0 ]]; then
    boot_line="passed"
  else
    boot_line="FAILED (exit ${boot_rc}; log: ${OUT}/e2e.log)"
    fail "testbed"
  fi
fi

{
  printf '# Kernel upgrade: probe sets for Linux %s\n\n' "${KVER}"
  printf 'Debian packages: %s.\n\n' "${PKGS}"
  printf '| step | result |\n|---|---|\n'
  if [[ ${NEW_SERIES} == 1 ]]; then
    printf '| new series | %s added to `%s`: %s |\n' "${SERIES}" "${SETS_LIST}" "${BUILT[*]:-no vendor built}"
  fi
  printf '| check `%s` | %s |\n' "${OLD}" "${check_line}"
  for v in "${VENDORS[@]}"; do
    printf '| generate %s | %s |\n' "${v}" "${GEN[$v]}"
    printf '| compile %s | %s |\n' "${v}" "${CC[$v]:-not run}"
  done
  printf '| boot the stock kernel, rxe set attached, induced failures | %s |\n' "${boot_line}"
  printf '| owner of each induced failure | %s |\n' "${owner_line}"
  if [[ -n ${KERNEL_UPGRADE_PICTURES_URL:-} ]]; then
    printf '\n**[The set as pictures](%s)**: each verb'"'"'s call graph with the drift drawn on it (added green, removed red with their fate, module moves, successors).\n' "${KERNEL_UPGRADE_PICTURES_URL}"
  elif [[ -s ${PICTURES} ]]; then
    printf '\nThe set as pictures: `report.html` beside this report (the job'"'"'s artifact).\n'
  fi
  if [[ -n ${boot_summary} ]]; then
    printf '\n<details><summary>testbed</summary>\n\n```\n%s\n```\n</details>\n' "${boot_summary}"
  fi
  printf '\n---\n\n'
  # The check report, one heading level down.
  sed 's/^#/##/' "${OUT}/check.md"
} >"${REPORT}.tmp"
mv "${REPORT}.tmp" "${REPORT}"
log "report: ${REPORT}"
printf '%s\n' "${REPORT}"
exit "${failed}"

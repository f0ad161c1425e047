#!/usr/bin/env bash
# Fetch the RDMA-relevant part of a Debian bookworm kernel into the probegen cache.
#
# Usage: scripts/fetch-kernel.sh VERSION        (VERSION: 6.12 or 6.1)
#
# Result: ${PROBEGEN_CACHE:-$HOME/.cache/probegen}/linux-VERSION containing
#   Makefile drivers/infiniband include/{rdma,uapi/rdma,linux/mlx5}  (from linux-source-VERSION)
#   .config vmlinux vmlinuz modules/*.ko modules/MISSING               (from the matching linux-image-*-unsigned)
#   KERNEL_VERSION DEBIAN_PACKAGES .complete
# The tree is built in a temporary directory next to it and renamed into place, and
# .complete is written last, so an interrupted run never leaves a tree that looks complete.
# A second run whose .complete matches the linux-source package version does nothing.
#
# Progress goes to stderr; the last line of stdout is the directory.
# Needs root (apt-get install) and: apt-get, dpkg-deb, tar, xz, zstd, od, readelf or llvm-objdump.
# PROBEGEN_APT_UPDATE=1 forces an `apt-get update` before installing linux-source.
set -euo pipefail

readonly FORMAT=1 # bump when the cache layout changes: forces a rebuild
readonly MODULES=(ib_core ib_uverbs mlx5_ib mlx5_core bnxt_re irdma rdma_rxe)
readonly SOURCE_PATHS=(drivers/infiniband include/rdma include/uapi/rdma include/linux/mlx5 Makefile)

log() { printf 'fetch-kernel: %s\n' "$*" >&2; }
die() { printf 'fetch-kernel: error: %s\n' "$*" >&2; exit 1; }

if [[ $# -ne 1 ]]; then
  printf 'fetch-kernel: usage: %s VERSION   (VERSION: 6.12 or 6.1)\n' "$0" >&2
  exit 2
fi
SERIES=$1
case "${SERIES}" in
  6.12 | 6.1) ;;
  *) printf 'fetch-kernel: unknown VERSION %q (expected 6.12 or 6.1)\n' "${SERIES}" >&2
     exit 2 ;;
esac
readonly SERIES
readonly SOURCE_PKG="linux-source-${SERIES}"

for tool in apt-get apt-cache dpkg-query dpkg-deb tar xz zstd od flock; do
  command -v "${tool}" >/dev/null 2>&1 || die "required tool '${tool}' not found (run scripts/install-deps.sh)"
done

SUDO=()
if [[ ${EUID} -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "must run as root (apt-get install; sudo not found)"
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive

CACHE_ROOT=${PROBEGEN_CACHE:-${HOME}/.cache/probegen}
readonly CACHE_ROOT
readonly DEST="${CACHE_ROOT}/linux-${SERIES}"
mkdir -p "${CACHE_ROOT}" || die "cannot create cache directory ${CACHE_ROOT}"

# One run per VERSION at a time.
exec 9>"${CACHE_ROOT}/.linux-${SERIES}.lock"
flock 9 || die "cannot lock ${CACHE_ROOT}/.linux-${SERIES}.lock"
# Leftovers of interrupted runs (we hold the lock, so nobody else is using them).
rm -rf -- "${CACHE_ROOT}/.linux-${SERIES}.tmp."*

# ---------------------------------------------------------------------------- helpers

# Candidate version of a package, or "" when apt knows none.
apt_candidate() {
  local v
  v=$(apt-cache policy "$1" 2>/dev/null | awk '/^ *Candidate:/ {print $2}')
  [[ ${v} == "(none)" ]] && v=""
  printf '%s' "${v}"
}

# Installed version of a package, or "".
dpkg_installed_version() {
  local status
  status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)
  [[ ${status} == "install ok installed" ]] || return 0
  dpkg-query -W -f='${Version}' "$1"
}

# Value of a key=value line in a file ("" when absent).
kv_get() { awk -v k="$2=" 'index($0, k) == 1 {print substr($0, length(k) + 1); exit}' "$1" 2>/dev/null || true; }

# Unsigned little-endian integer of SIZE bytes at OFFSET of FILE.
read_le() { od -An -v -t "u$3" -j "$2" -N "$3" --endian=little "$1" | tr -d ' \n'; }

# (Output captured first: `readelf | grep -q` can die of SIGPIPE under pipefail.)
has_btf_section() {
  local sections
  if command -v readelf >/dev/null 2>&1; then
    sections=$(readelf -SW "$1" 2>/dev/null) || return 1
  elif command -v llvm-objdump >/dev/null 2>&1; then
    sections=$(llvm-objdump -h "$1" 2>/dev/null) || return 1
  else
    die "neither readelf nor llvm-objdump found (install binutils or llvm)"
  fi
  [[ ${sections} == *" .BTF "* ]]
}

# copy_range FILE OFFSET [LENGTH]: bytes of FILE to stdout (no SIGPIPE-prone tail | head).
copy_range() {
  if [[ $# -eq 3 ]]; then
    dd if="$1" bs=1M iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none
  else
    dd if="$1" bs=1M iflag=skip_bytes skip="$2" status=none
  fi
}

is_elf() { [[ $(od -An -v -t x1 -N 4 "$1" | tr -d ' \n') == 7f454c46 ]]; }

# decompress_payload FILE OUT: FILE starts with an xz or zstd stream (possibly followed
# by other bytes). Writes the decompressed data to OUT; prints the compressor name.
decompress_payload() {
  local magic
  magic=$(od -An -v -t x1 -N 6 "$1" | tr -d ' \n')
  case "${magic}" in
    fd377a585a00)
      # --single-stream ignores whatever follows the first .xz stream.
      xz -dc --single-stream <"$1" >"$2" 2>/dev/null || true
      printf xz ;;
    28b52ffd*)
      # zstd rejects trailing bytes, but the frame before them is already written out.
      zstd -dcq <"$1" >"$2" 2>/dev/null || true
      printf zstd ;;
    *) return 1 ;;
  esac
}

# extract_vmlinux BZIMAGE OUT WORKDIR: ELF vmlinux out of an x86 bzImage.
extract_vmlinux() {
  local bz=$1 out=$2 work=$3 kind="" setup_sects proto start len expect offset
  local payload="${work}/payload"
  # Boot protocol >= 2.08 records the compressed payload's place in the setup header;
  # its last 4 bytes are the le32 decompressed size (mkpiggy), dropped before decompressing.
  if [[ $(od -An -v -c -j 514 -N 4 "${bz}" | tr -d ' \n') == HdrS ]]; then
    setup_sects=$(read_le "${bz}" 497 1)
    [[ ${setup_sects} -eq 0 ]] && setup_sects=4
    proto=$(read_le "${bz}" 518 2)
    if [[ ${proto} -ge 520 ]]; then # 0x208
      start=$(( (setup_sects + 1) * 512 + $(read_le "${bz}" 584 4) ))
      len=$(read_le "${bz}" 588 4)
      if [[ ${len} -gt 4 ]]; then
        copy_range "${bz}" "${start}" "$((len - 4))" >"${payload}"
        expect=$(read_le "${bz}" "$((start + len - 4))" 4)
        if kind=$(decompress_payload "${payload}" "${out}") && is_elf "${out}"; then
          local got
          got=$(stat -c %s "${out}")
          [[ ${got} -eq ${expect} ]] \
            || die "vmlinux from ${bz}: ${got} bytes, size trailer says ${expect}"
          log "vmlinux: ${kind} payload at offset ${start} (${len} bytes, setup header)"
          return 0
        fi
      fi
    fi
  fi
  # Fallback: scan for the xz / zstd magic bytes and try each hit. (Only the offsets are
  # passed on: bash's `read` in a UTF-8 locale swallows the newline after a stray 0xfd.)
  log "setup header did not give a usable payload; scanning ${bz} for xz/zstd magic"
  while read -r offset; do
    copy_range "${bz}" "${offset}" >"${payload}"
    if kind=$(decompress_payload "${payload}" "${out}") && [[ -s ${out} ]] && is_elf "${out}"; then
      log "vmlinux: ${kind} payload at offset ${offset} (magic scan)"
      return 0
    fi
  done < <(LC_ALL=C grep -obUaP '\xfd7zXZ\x00|\x28\xb5\x2f\xfd' "${bz}" | LC_ALL=C cut -d: -f1 || true)
  die "no xz or zstd payload that decompresses to an ELF vmlinux found in ${bz}"
}

# ---------------------------------------------------------------------------- fast path

# The version a full run would use: apt's candidate, else what is installed.
want_src_version=$(apt_candidate "${SOURCE_PKG}")
[[ -n ${want_src_version} ]] || want_src_version=$(dpkg_installed_version "${SOURCE_PKG}")

if [[ -f ${DEST}/.complete ]]; then
  done_format=$(kv_get "${DEST}/.complete" format)
  done_series=$(kv_get "${DEST}/.complete" series)
  done_src=$(kv_get "${DEST}/.complete" source_package)
  if [[ ${done_format} == "${FORMAT}" && ${done_series} == "${SERIES}" ]] \
     && [[ -z ${want_src_version} || ${done_src} == "${SOURCE_PKG} ${want_src_version}" ]] \
     && [[ -s ${DEST}/vmlinux && -s ${DEST}/.config && -f ${DEST}/Makefile && -d ${DEST}/drivers/infiniband ]]; then
    [[ -n ${want_src_version} ]] \
      || log "warning: apt knows no ${SOURCE_PKG}; trusting existing ${DEST}/.complete"
    log "up to date: $(kv_get "${DEST}/.complete" kernel_version) (${done_src})"
    printf '%s\n' "${DEST}"
    exit 0
  fi
  log "existing ${DEST} is stale (${done_src:-unknown} vs ${SOURCE_PKG} ${want_src_version:-?}); rebuilding"
fi

# ---------------------------------------------------------------------------- full run

TMP=$(mktemp -d "${CACHE_ROOT}/.linux-${SERIES}.tmp.XXXXXX") || die "mktemp failed in ${CACHE_ROOT}"
cleanup() { rm -rf -- "${TMP}"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
TREE="${TMP}/tree"
WORK="${TMP}/work"
mkdir -p "${TREE}/modules" "${WORK}"

# 1. linux-source-X
if [[ -z $(apt_candidate "${SOURCE_PKG}") || ${PROBEGEN_APT_UPDATE:-0} == 1 ]]; then
  log "apt-get update"
  "${SUDO[@]}" apt-get update >&2 || die "apt-get update failed"
fi
[[ -n $(apt_candidate "${SOURCE_PKG}") ]] \
  || die "package ${SOURCE_PKG} not found in the apt sources (bookworm / bookworm-security)"
log "apt-get install ${SOURCE_PKG}"
"${SUDO[@]}" apt-get install -q -y --no-install-recommends "${SOURCE_PKG}" >&2 \
  || die "apt-get install ${SOURCE_PKG} failed"
src_version=$(dpkg_installed_version "${SOURCE_PKG}")
[[ -n ${src_version} ]] || die "${SOURCE_PKG} is not installed after apt-get install"

tarball=""
for ext in tar.xz tar.zst tar.bz2 tar.gz; do
  if [[ -f /usr/src/${SOURCE_PKG}.${ext} ]]; then tarball=/usr/src/${SOURCE_PKG}.${ext}; break; fi
done
[[ -n ${tarball} ]] || die "no /usr/src/${SOURCE_PKG}.tar.* found (is ${SOURCE_PKG} ${src_version} installed?)"

case "${tarball}" in
  *.xz) decomp=(xz -dc -T0) ;;
  *.zst) decomp=(zstd -dcq) ;;
  *.bz2) decomp=(bzip2 -dc) ;;
  *) decomp=(gzip -dc) ;;
esac
members=()
for p in "${SOURCE_PATHS[@]}"; do members+=("${SOURCE_PKG}/${p}"); done
log "extracting ${SOURCE_PATHS[*]} from ${tarball}"
"${decomp[@]}" "${tarball}" | tar -x -C "${TREE}" --strip-components=1 --no-same-owner -f - "${members[@]}" \
  || die "extracting ${members[*]} from ${tarball} failed"
for p in "${SOURCE_PATHS[@]}"; do
  [[ -e ${TREE}/${p} ]] || die "${p} missing after extracting ${tarball}"
done

mk_var() { awk -v k="$1" '$1 == k && $2 == "=" {sub(/^[^=]*=[ \t]*/, ""); print; exit}' "${TREE}/Makefile"; }
kernel_version="$(mk_var VERSION).$(mk_var PATCHLEVEL).$(mk_var SUBLEVEL)$(mk_var EXTRAVERSION)"
[[ ${kernel_version} =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] \
  || die "cannot read VERSION/PATCHLEVEL/SUBLEVEL from ${tarball}:Makefile (got '${kernel_version}')"
[[ ${kernel_version} == "${SERIES}".* ]] \
  || die "${tarball} is kernel ${kernel_version}, not ${SERIES}.x"
[[ ${src_version%%-*} == "${kernel_version}" ]] \
  || log "warning: Makefile says ${kernel_version} but ${SOURCE_PKG} is ${src_version}"
log "source: ${SOURCE_PKG} ${src_version}, upstream ${kernel_version}"

# 2. matching linux-image-*-unsigned
if [[ ${SERIES} == 6.12 ]]; then
  name_re='^linux-image-6\.12\..*\+deb12-amd64-unsigned$'
else
  name_re='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$'
fi
# Newest ABI first (for 6.1: the largest N).
mapfile -t image_names < <(apt-cache search --names-only "${name_re}" | awk '{print $1}' | sort -rV)
[[ ${#image_names[@]} -gt 0 ]] || die "apt-cache search finds no package matching ${name_re}"
image_pkg=""
for name in "${image_names[@]}"; do
  if apt-cache madison "${name}" | awk -F'|' -v v="${src_version}" '{gsub(/ /, "", $2)} $2 == v {f = 1} END {exit !f}'; then
    image_pkg=${name}
    break
  fi
done
if [[ -z ${image_pkg} ]]; then
  avail=$(for n in "${image_names[@]}"; do printf '%s %s; ' "${n}" "$(apt_candidate "${n}")"; done)
  die "no binary image with version ${src_version} (source ${SOURCE_PKG} ${src_version}, kernel ${kernel_version}); available: ${avail}"
fi
log "image: ${image_pkg} ${src_version}"

log "apt-get download ${image_pkg}=${src_version}"
(cd "${WORK}" && apt-get download -q -o APT::Sandbox::User=root "${image_pkg}=${src_version}" >&2) \
  || die "apt-get download ${image_pkg}=${src_version} failed"
debs=("${WORK}"/"${image_pkg}"_*.deb)
[[ -f ${debs[0]} ]] || die "downloaded .deb for ${image_pkg} not found in ${WORK}"
deb=${debs[0]}
deb_version=$(dpkg-deb -f "${deb}" Version)
[[ ${deb_version} == "${src_version}" ]] \
  || die "${deb} has version ${deb_version}, source ${SOURCE_PKG} has ${src_version}"

# Only the files we keep are unpacked from the data archive (a full `dpkg-deb -x` writes ~0.5 GB).
IMG="${WORK}/image"
mkdir -p "${IMG}"
patterns=('./boot/config-*' './boot/vmlinuz-*')
for m in "${MODULES[@]}"; do patterns+=("*/${m}.ko" "*/${m}.ko.xz" "*/${m}.ko.zst"); done
log "unpacking boot/ and ${#MODULES[@]} modules from ${deb##*/}"
dpkg-deb --fsys-tarfile "${deb}" \
  | tar -x -C "${IMG}" --no-same-owner --wildcards --wildcards-match-slash -f - "${patterns[@]}" 2>"${WORK}/tar.err" \
  || grep -v 'Not found in archive\|Exiting with failure status' "${WORK}/tar.err" >&2 || true
# tar exits non-zero for patterns without a match (modules not built); check what we need.
configs=("${IMG}"/boot/config-*)
vmlinuzes=("${IMG}"/boot/vmlinuz-*)
[[ -f ${configs[0]} && ${#configs[@]} -eq 1 ]] || die "${deb##*/}: expected one boot/config-*"
[[ -f ${vmlinuzes[0]} && ${#vmlinuzes[@]} -eq 1 ]] || die "${deb##*/}: expected one boot/vmlinuz-*"
kver=${configs[0]##*/config-}
[[ ${vmlinuzes[0]##*/vmlinuz-} == "${kver}" ]] || die "${deb##*/}: config and vmlinuz kernel releases differ"
log "kernel release ${kver}"

cp "${configs[0]}" "${TREE}/.config"
cp "${vmlinuzes[0]}" "${TREE}/vmlinuz"

# 3. modules as plain .ko
missing=()
for m in "${MODULES[@]}"; do
  f=$(find "${IMG}" \( -name "${m}.ko" -o -name "${m}.ko.xz" -o -name "${m}.ko.zst" \) -print -quit)
  if [[ -z ${f} ]]; then
    missing+=("${m}")
    continue
  fi
  case "${f}" in
    *.xz) xz -dc "${f}" >"${TREE}/modules/${m}.ko" ;;
    *.zst) zstd -dcq "${f}" >"${TREE}/modules/${m}.ko" ;;
    *) cp "${f}" "${TREE}/modules/${m}.ko" ;;
  esac
  is_elf "${TREE}/modules/${m}.ko" || die "${f}: not an ELF module after decompression"
  has_btf_section "${TREE}/modules/${m}.ko" || log "warning: ${m}.ko has no .BTF section"
done
if [[ ${#missing[@]} -gt 0 ]]; then
  printf '%s\n' "${missing[@]}" >"${TREE}/modules/MISSING"
  log "modules not built by ${kver}: ${missing[*]}"
else
  : >"${TREE}/modules/MISSING"
fi
[[ ${#missing[@]} -lt ${#MODULES[@]} ]] || die "${deb##*/} contains none of the modules ${MODULES[*]}"

# 4. ELF vmlinux with BTF
extract_vmlinux "${TREE}/vmlinuz" "${TREE}/vmlinux" "${WORK}"
has_btf_section "${TREE}/vmlinux" || die "extracted vmlinux has no .BTF section"
rm -rf "${IMG}" "${deb}"

# 5. metadata, .complete last, then rename into place
printf '%s\n' "${kernel_version}" >"${TREE}/KERNEL_VERSION"
printf '%s %s\n%s %s\n' "${SOURCE_PKG}" "${src_version}" "${image_pkg}" "${src_version}" >"${TREE}/DEBIAN_PACKAGES"
{
  printf 'format=%s\n' "${FORMAT}"
  printf 'series=%s\n' "${SERIES}"
  printf 'kernel_version=%s\n' "${kernel_version}"
  printf 'kernel_release=%s\n' "${kver}"
  printf 'source_package=%s %s\n' "${SOURCE_PKG}" "${src_version}"
  printf 'image_package=%s %s\n' "${image_pkg}" "${src_version}"
} >"${TREE}/.complete"

if [[ -e ${DEST} ]]; then
  old="${TMP}/old"
  mv -T -- "${DEST}" "${old}" || die "cannot move old ${DEST} aside"
fi
mv -T -- "${TREE}" "${DEST}" || die "cannot rename ${TREE} to ${DEST}"
log "done: ${DEST} ($(du -sh "${DEST}" | cut -f1))"
printf '%s\n' "${DEST}"

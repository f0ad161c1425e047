#!/usr/bin/env bash
# Fetch the RDMA-relevant part of any Debian kernel into the probegen cache.
#
# Usage: scripts/fetch-kernel.sh [--flavor FLAVOR] [--suite SUITE] SPEC
#        scripts/fetch-kernel.sh --list [SERIES]
#        scripts/fetch-kernel.sh --debs DIR [--flavor FLAVOR] [--suite SUITE] SPEC
#        scripts/fetch-kernel.sh --source-dirs
#
#   SPEC     a series (7.2, 6.12, 6.1) or an exact Debian version of linux-source-<series>
#            (7.2.13-1, 6.12.118-1~deb12u1).
#   FLAVOR   amd64 (default), or any flavor --list shows for the version (cloud, rt): which
#            linux-image / linux-binary flavor gives the .config, vmlinux and modules.
#   SUITE    only look in this suite (bookworm-security, trixie-backports, sid, ...).
#   --list   every linux-source version apt can reach, with its suite and the flavors Debian
#            built of it; `*` marks what SERIES alone would fetch.
#   --debs   only download the binary packages of SPEC (image, or binary + modules + base)
#            into DIR and print their paths, one per line: the qemu testbed boots them.
#   --source-dirs  print the source paths extracted, one a line: `probegen rules --source-dirs`
#            (the rules' one parser, in heuristics) and the top Makefile.
#
# Which version a series means: the newest one Debian ships for this machine's own release
# (VERSION_CODENAME of /etc/os-release with its -updates, -security and -backports suites):
# that is the kernel hosts of this release run. A series the release does not ship (7.2 on
# bookworm) means the newest version in any suite.
#
# Packages come from every suite of bookworm, trixie, sid and bullseye on the machine's own
# mirror, read through apt lists and state of probegen's own under the cache
# (<cache>/apt): the machine's apt sources, pins and installed packages are never changed.
# Nothing is installed: the .debs are downloaded and unpacked in a temporary directory.
# Both packagings are understood: `linux-image-<rel>-<flavor>-unsigned` (up to 6.x) and the
# split `linux-binary-` (vmlinuz), `linux-modules-` (.ko, .ko.xz, .ko.zst) and `linux-base-`
# (config, System.map) of 7.x.
#
# Result: ${PROBEGEN_CACHE:-$HOME/.cache/probegen}/linux-<SPEC>[-<flavor>] containing
#   Makefile and every directory heuristics/rules.yaml names (source: kbuild_top and
#   include_dirs, each vendor's dirs: drivers/infiniband include/rdma include/uapi/rdma
#   include/linux/mlx5 include/linux/mlx4)  (from linux-source-<series>)
#   .config vmlinux vmlinuz [System.map] modules/*.ko modules/MISSING (from the binary packages)
#   KERNEL_VERSION DEBIAN_PACKAGES .complete
# The tree is built in a temporary directory next to it and renamed into place, and
# .complete is written last, so an interrupted run never leaves a tree that looks complete.
# A second run whose .complete names the same packages does nothing.
#
# Progress goes to stderr; the last line of stdout is the directory.
# Exit: 0 done; 1 a download or unpack failed (the package is named); 2 bad arguments or an
# unknown series, version or flavor (what is available is listed).
# PROBEGEN_APT_UPDATE=1 forces a refresh of the apt lists (otherwise refreshed after 7 days).
set -euo pipefail

# Bump when the cache layout changes: forces a rebuild (2: every vendor module of the rules;
# 3: every source directory of the rules, include/linux/mlx4 among them; 4: every module under
# drivers/infiniband the image ships, whatever the flavor).
readonly FORMAT=4
# Modules whose BTF and symbols give the attach verdicts: every module under drivers/infiniband
# the image ships (a vendor added by a rules file gets its verdicts without a change here), and
# these, named so that one the config does not build is listed in modules/MISSING: the core,
# every vendor of heuristics/rules.yaml, and the Ethernet parent outside drivers/infiniband
# (mlx5_core; ib_uverbs_support is new in 7.x).
readonly MODULES=(ib_core ib_uverbs ib_uverbs_support mlx5_ib mlx5_core bnxt_re irdma rdma_rxe
  mlx4_ib efa hns_roce_hw_v2 siw)
# Modules every flavor of the supported range builds (a missing one is an error). Not rdma_rxe:
# Debian's cloud flavor builds mlx5, mlx4 and the cloud NICs' drivers, not Soft-RoCE.
readonly REQUIRED_MODULES=(ib_core ib_uverbs)
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly REPO
# shellcheck source=scripts/lib/vmlinux.sh
. "${REPO}/scripts/lib/vmlinux.sh"
readonly RELEASES=(bookworm trixie sid bullseye)
readonly RULES_FILE="${REPO}/heuristics/rules.yaml"

log() { printf 'fetch-kernel: %s\n' "$*" >&2; }
die() { printf 'fetch-kernel: error: %s\n' "$*" >&2; exit 1; }
usage_error() { printf 'fetch-kernel: %s\n' "$*" >&2; exit 2; }
usage() {
  sed -n '3,13p' "$0" | sed 's/^# \{0,1\}//' >&2
}

# The source directories the analyzer scans, from the rules' one parser (heuristics, through
# `probegen rules --source-dirs`), then the top Makefile: no second reading of rules.yaml here.
# PROBEGEN_BIN names a built probegen (the tests pass theirs); without it cargo builds one.
SOURCE_PATHS=()
load_source_paths() {
  local dirs rc=0
  if [[ -n ${PROBEGEN_BIN:-} ]]; then
    dirs=$("${PROBEGEN_BIN}" rules --source-dirs --rules "${RULES_FILE}") || rc=$?
  else
    command -v cargo >/dev/null 2>&1 \
      || die "cargo not found: it builds probegen, which reads the rules' source directories (or set PROBEGEN_BIN)"
    dirs=$(cd "${REPO}" && cargo run --release -q --bin probegen -- rules --source-dirs --rules "${RULES_FILE}") || rc=$?
  fi
  [[ ${rc} -eq 0 && -n ${dirs} ]] \
    || die "cannot read the source directories of ${RULES_FILE} (probegen rules --source-dirs exited ${rc})"
  mapfile -t SOURCE_PATHS <<<"${dirs}"
  SOURCE_PATHS+=(Makefile)
  readonly SOURCE_PATHS
}

# ---------------------------------------------------------------------------- arguments

FLAVOR=amd64
SUITE=""
LIST=0
SPEC=""
DEBS_DIR=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --flavor) [[ $# -ge 2 ]] || usage_error "--flavor needs a value (amd64, cloud, rt: see --list)"; FLAVOR=$2; shift 2 ;;
    --flavor=*) FLAVOR=${1#--flavor=}; shift ;;
    --suite) [[ $# -ge 2 ]] || usage_error "--suite needs a value"; SUITE=$2; shift 2 ;;
    --suite=*) SUITE=${1#--suite=}; shift ;;
    --list) LIST=1; shift ;;
    --source-dirs) load_source_paths; printf '%s\n' "${SOURCE_PATHS[@]}"; exit 0 ;;
    --debs) [[ $# -ge 2 ]] || usage_error "--debs needs a directory"; DEBS_DIR=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) usage; usage_error "unknown option $1" ;;
    *) [[ -z ${SPEC} ]] || usage_error "one SPEC expected, got '${SPEC}' and '$1'"; SPEC=$1; shift ;;
  esac
done
if [[ ${LIST} -eq 0 && -z ${SPEC} ]]; then
  usage
  usage_error "missing SPEC (a series such as 7.2 or 6.12, or an exact Debian version)"
fi
# Which flavors exist is known once the version is (flavors_of_version); a name that cannot be
# one (it goes into package-name regular expressions) is refused before any apt work.
[[ ${FLAVOR} =~ ^[a-z0-9]+$ ]] \
  || usage_error "unknown flavor '${FLAVOR}': a flavor is a lowercase name such as amd64, cloud or rt (see --list)"
# The suffix of the binary package names: linux-image-6.12.117+deb12-cloud-amd64-unsigned.
if [[ ${FLAVOR} == amd64 ]]; then FLAVOR_SUFFIX=amd64; else FLAVOR_SUFFIX=${FLAVOR}-amd64; fi

# ---------------------------------------------------------------------------- own apt state

# shellcheck source=scripts/lib/apt.sh
. "${REPO}/scripts/lib/apt.sh"
require_tools apt-get apt-cache dpkg dpkg-deb tar xz zstd od flock awk


# One table of every kernel package apt can reach, "NAME VERSION SUITE" per line, built once
# per list refresh: every later question is an awk over it (one apt-cache call per question
# would cost seconds each).
INDEX="${APT_DIR}/kernel-packages.txt"
build_index() {
  local names
  names=$(acache search --names-only '^linux-(source|image|binary|modules|base)-[0-9]' | awk '{print $1}' | grep -v -- '-dbg$' || true)
  [[ -n ${names} ]] || die "no linux-source or linux-image package in the apt lists under ${APT_DIR}/lists"
  # shellcheck disable=SC2086
  acache madison ${names} | awk -F'|' '
    { gsub(/ /, "", $1); gsub(/ /, "", $2); n = split($3, a, " "); split(a[2], s, "/"); print $1, $2, s[1] }' \
    | sort -u >"${INDEX}.new"
  mv -f "${INDEX}.new" "${INDEX}"
  cp "${APT_DIR}/updated" "${INDEX}.stamp"
}
ensure_index() {
  if [[ ! -s ${INDEX} ]] || ! cmp -s "${APT_DIR}/updated" "${INDEX}.stamp"; then
    log "indexing kernel packages"
    build_index
  fi
}

# The kernel release part of binary package names: 6.12.117+deb12, 6.1.0-57, 7.2.13+deb14,
# and the backports' and rebuilds' 6.1.0-0.deb11.48, 6.12.115+deb13.1.
readonly rel_re='[0-9]+\.[0-9]+(\.[0-9]+)?(-[0-9]+(\.deb[0-9]+\.[0-9]+)?)?(\+deb[0-9]+(\.[0-9]+)?)?'

# "VERSION SUITE" lines for a package, one per suite it is in.
versions_of() { awk -v p="$1" '$1 == p {print $2, $3}' "${INDEX}"; }

# Package names matching an extended regular expression.
names_matching() { awk '{print $1}' "${INDEX}" | grep -E -- "$1" | sort -u || true; }

# Newest of the versions on stdin (Debian ordering).
newest_version() {
  local best="" v
  while read -r v; do
    [[ -z ${v} ]] && continue
    if [[ -z ${best} ]] || dpkg --compare-versions "${v}" gt "${best}"; then best=${v}; fi
  done
  printf '%s' "${best}"
}

host_release() {
  local c=""
  c=$(. /etc/os-release 2>/dev/null && printf '%s' "${VERSION_CODENAME:-}") || true
  printf '%s' "${c:-bookworm}"
}

# The linux-source version SERIES means (see the header), restricted to SUITE when given.
default_version() {
  local series=$1 all host
  all=$(versions_of "linux-source-${series}")
  if [[ -n ${SUITE} ]]; then
    awk -v s="${SUITE}" '$2 == s {print $1}' <<<"${all}" | newest_version
    return
  fi
  host=$(host_release)
  local mine
  mine=$(awk -v h="${host}" '$2 == h || index($2, h "-") == 1 {print $1}' <<<"${all}" | newest_version)
  if [[ -n ${mine} ]]; then printf '%s' "${mine}"; return; fi
  awk '{print $1}' <<<"${all}" | newest_version
}

known_series() {
  names_matching '^linux-source-[0-9]' | sed 's/^linux-source-//' | sort -uV | tr '\n' ' '
}

# The flavors Debian built of VERSION of SERIES, space-separated, amd64 first: the flavor part
# of linux-image-<rel>-<flavor>-amd64-unsigned (6.x) or linux-base-<rel>-<flavor>-amd64 (7.x)
# packages of that version ("amd64" alone is the default flavor).
flavors_of_version() {
  local series=$1 version=$2
  awk -v v="${version}" '$2 == v {print $1}' "${INDEX}" \
    | grep -E "^linux-(image-${series}[.].*-unsigned|base-${series}[.].*)\$" \
    | sed -E "s/^linux-(image|base)-${rel_re}-//; s/-unsigned\$//" \
    | sed -E 's/^([a-z][a-z0-9]*)-amd64$/\1/' | grep -E '^[a-z][a-z0-9]*$' \
    | sort -u | awk '{ if ($0 == "amd64") first = 1; else rest = rest " " $0 }
        END { s = (first ? "amd64" : "") rest; sub(/^ /, "", s); print s }'
}

list_available() {
  local only=${1:-} s v suite def
  for s in $(known_series); do
    [[ -n ${only} && ${s} != "${only}" ]] && continue
    def=$(default_version "${s}")
    while read -r v suite; do
      [[ -z ${v} ]] && continue
      printf '%s %-8s %-24s %-20s flavors: %s\n' "$([[ ${v} == "${def}" ]] && echo '*' || echo ' ')" \
        "${s}" "${v}" "${suite}" "$(flavors_of_version "${s}" "${v}")"
    done < <(versions_of "linux-source-${s}")
  done
}

# ---------------------------------------------------------------------------- helpers

# Value of a key=value line in a file ("" when absent).
kv_get() { awk -v k="$2=" 'index($0, k) == 1 {print substr($0, length(k) + 1); exit}' "$1" 2>/dev/null || true; }

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

# ---------------------------------------------------------------------------- which packages

ensure_apt_lists
ensure_index

if [[ ${LIST} -eq 1 ]]; then
  list_available "${SPEC}"
  exit 0
fi

# SPEC -> series and linux-source version.
if [[ ${SPEC} =~ ^[0-9]+\.[0-9]+$ ]]; then
  SERIES=${SPEC}
  [[ -n $(versions_of "linux-source-${SERIES}") ]] \
    || usage_error "unknown kernel series ${SERIES}: available series are $(known_series)"
  SRC_VERSION=$(default_version "${SERIES}")
  [[ -n ${SRC_VERSION} ]] \
    || usage_error "no linux-source-${SERIES} in suite ${SUITE}: $(versions_of "linux-source-${SERIES}" | tr '\n' ';')"
  NAME=${SERIES}
elif [[ ${SPEC} =~ ^([0-9]+)\.([0-9]+)[.-] ]]; then
  SERIES="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
  avail=$(versions_of "linux-source-${SERIES}")
  [[ -n ${avail} ]] || usage_error "unknown kernel series ${SERIES} (from ${SPEC}): available series are $(known_series)"
  awk -v v="${SPEC}" '$1 == v {f = 1} END {exit !f}' <<<"${avail}" \
    || usage_error "no linux-source-${SERIES} version ${SPEC}: available versions are $(awk '{print $1}' <<<"${avail}" | sort -u | tr '\n' ' ')"
  SRC_VERSION=${SPEC}
  NAME=${SPEC}
else
  usage_error "SPEC '${SPEC}' is neither a series (7.2) nor a Debian version (7.2.13-1)"
fi
flavors=$(flavors_of_version "${SERIES}" "${SRC_VERSION}")
[[ " ${flavors} " == *" ${FLAVOR} "* ]] \
  || usage_error "unknown flavor '${FLAVOR}' of ${SERIES} (${SRC_VERSION}): available flavors are ${flavors:-none}"
[[ ${FLAVOR} == amd64 ]] || NAME="${NAME}-${FLAVOR}"
readonly SERIES SRC_VERSION NAME
readonly SOURCE_PKG="linux-source-${SERIES}"
readonly DEST="${CACHE_ROOT}/linux-${NAME}"

# Binary packages of SRC_VERSION and FLAVOR: the split 7.x packaging first, else the
# unsigned image. Prints "package" lines.
binaries_of_version() {
  local names name kind
  for kind in binary modules base; do
    names=$(names_matching "^linux-${kind}-${rel_re}-${FLAVOR_SUFFIX}\$" | grep -F "linux-${kind}-${SERIES}." || true)
    name=""
    for n in ${names}; do
      if versions_of "${n}" | awk -v v="${SRC_VERSION}" '$1 == v {f = 1} END {exit !f}'; then name=${n}; break; fi
    done
    [[ -n ${name} ]] && printf '%s\n' "${name}"
  done
}
mapfile -t split_pkgs < <(binaries_of_version)
image_pkgs=()
if [[ ${#split_pkgs[@]} -eq 3 ]]; then
  image_pkgs=("${split_pkgs[@]}")
  PACKAGING=split
else
  names=$(names_matching "^linux-image-${rel_re}-${FLAVOR_SUFFIX}-unsigned\$" | grep -F "linux-image-${SERIES}." | sort -rV || true)
  for n in ${names}; do
    if versions_of "${n}" | awk -v v="${SRC_VERSION}" '$1 == v {f = 1} END {exit !f}'; then image_pkgs=("${n}"); break; fi
  done
  PACKAGING=unsigned-image
fi
if [[ ${#image_pkgs[@]} -eq 0 ]]; then
  have=$(names_matching "^linux-(image-.*-unsigned|base-.*)\$" | grep -E "^linux-(image|base)-${SERIES}[.]" | sed -E "s/^linux-(image|base)-${rel_re}-//; s/-unsigned\$//" | sort -u | tr '\n' ' ')
  usage_error "no ${FLAVOR} binary packages of version ${SRC_VERSION} (linux-image-*-${FLAVOR_SUFFIX}-unsigned or linux-binary/modules/base-*-${FLAVOR_SUFFIX}); flavors built for ${SERIES}: ${have:-none}"
fi
log "source: ${SOURCE_PKG} ${SRC_VERSION}; binaries (${PACKAGING}): ${image_pkgs[*]}"

# download PKG [DIR]: PKG=SRC_VERSION into DIR (default WORK), reusing a .deb of that version
# already there; prints its path.
download() {
  local pkg=$1 dir=${2:-${WORK}} f
  f=$(compgen -G "${dir}/${pkg}_*.deb" | head -n 1) || true
  if [[ -n ${f} && $(dpkg-deb -f "${f}" Version 2>/dev/null) == "${SRC_VERSION}" ]]; then
    printf '%s' "${f}"
    return 0
  fi
  rm -f -- "${dir}/${pkg}"_*.deb
  log "apt-get download ${pkg}=${SRC_VERSION}"
  (cd "${dir}" && apt-get "${APT_OPTS[@]}" download -q "${pkg}=${SRC_VERSION}" >"${dir}/.download-${pkg}.log" 2>&1) \
    || { tail -n 3 "${dir}/.download-${pkg}.log" >&2; die "download of ${pkg}=${SRC_VERSION} failed"; }
  f=$(compgen -G "${dir}/${pkg}_*.deb" | head -n 1) || true
  [[ -n ${f} ]] || die "download of ${pkg}=${SRC_VERSION} left no .deb in ${dir}"
  [[ $(dpkg-deb -f "${f}" Version) == "${SRC_VERSION}" ]] || die "${f##*/} is not version ${SRC_VERSION}"
  printf '%s' "${f}"
}

# Binary packages are kept here between runs: the testbed boots the same ones (--debs).
BIN_DEBS="${CACHE_ROOT}/debs"
if [[ -n ${DEBS_DIR} ]]; then
  mkdir -p "${DEBS_DIR}" || die "cannot create ${DEBS_DIR}"
  for pkg in "${image_pkgs[@]}"; do
    printf '%s\n' "$(download "${pkg}" "${DEBS_DIR}")"
  done
  exit 0
fi

# ---------------------------------------------------------------------------- fast path

load_source_paths

# One run per cache directory at a time.
exec 9>"${CACHE_ROOT}/.linux-${NAME}.lock"
flock 9 || die "cannot lock ${CACHE_ROOT}/.linux-${NAME}.lock"
# Leftovers of interrupted runs (we hold the lock, so nobody else is using them).
rm -rf -- "${CACHE_ROOT}/.linux-${NAME}.tmp."*

# The first source path of the rules missing from DIR, if any (a cache made before the rules
# named a directory is rebuilt, not used without it).
missing_source_path() {
  local p
  for p in "${SOURCE_PATHS[@]}"; do
    [[ -e $1/${p} ]] || { printf '%s\n' "${p}"; return 0; }
  done
}

if [[ -f ${DEST}/.complete ]]; then
  done_format=$(kv_get "${DEST}/.complete" format)
  done_src=$(kv_get "${DEST}/.complete" source_package)
  done_img=$(kv_get "${DEST}/.complete" image_package)
  stale=""
  if [[ ${done_format} != "${FORMAT}" ]]; then
    stale="cache layout ${done_format:-unknown}, expected ${FORMAT}"
  elif [[ ${done_src} != "${SOURCE_PKG} ${SRC_VERSION}" || ${done_img} != "${image_pkgs[0]} ${SRC_VERSION}" ]]; then
    stale="made from ${done_src:-unknown}, ${done_img:-unknown}"
  elif [[ ! -s ${DEST}/vmlinux || ! -s ${DEST}/.config ]]; then
    stale="vmlinux or .config missing"
  else
    missing=$(missing_source_path "${DEST}")
    [[ -z ${missing} ]] || stale="${missing} missing (heuristics/rules.yaml names it)"
  fi
  if [[ -z ${stale} ]]; then
    log "up to date: $(kv_get "${DEST}/.complete" kernel_version) (${done_src})"
    printf '%s\n' "${DEST}"
    exit 0
  fi
  log "existing ${DEST} is stale (${stale}); rebuilding"
fi

# ---------------------------------------------------------------------------- full run

TMP=$(mktemp -d "${CACHE_ROOT}/.linux-${NAME}.tmp.XXXXXX") || die "mktemp failed in ${CACHE_ROOT}"
cleanup() { rm -rf -- "${TMP}"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
TREE="${TMP}/tree"
WORK="${TMP}/work"
mkdir -p "${TREE}/modules" "${WORK}"


# 1. linux-source-X: the tarball inside the .deb, then only the paths we analyse.
src_deb=$(download "${SOURCE_PKG}")
log "unpacking the source tarball from ${src_deb##*/}"
dpkg-deb --fsys-tarfile "${src_deb}" \
  | tar -x -C "${WORK}" --no-same-owner --wildcards -f - "./usr/src/${SOURCE_PKG}.tar.*" \
  || die "${src_deb##*/} (${SOURCE_PKG}): no usr/src/${SOURCE_PKG}.tar.* inside"
rm -f -- "${src_deb}"
tarball=$(compgen -G "${WORK}/usr/src/${SOURCE_PKG}.tar.*" | head -n 1) || true
[[ -n ${tarball} ]] || die "${SOURCE_PKG} ${SRC_VERSION}: no usr/src/${SOURCE_PKG}.tar.* inside"
case "${tarball}" in
  *.xz) decomp=(xz -dc -T0) ;;
  *.zst) decomp=(zstd -dcq) ;;
  *.bz2) decomp=(bzip2 -dc) ;;
  *) decomp=(gzip -dc) ;;
esac
members=()
for p in "${SOURCE_PATHS[@]}"; do members+=("${SOURCE_PKG}/${p}"); done
log "extracting ${SOURCE_PATHS[*]}"
"${decomp[@]}" "${tarball}" | tar -x -C "${TREE}" --strip-components=1 --no-same-owner -f - "${members[@]}" \
  || die "extracting ${members[*]} from ${SOURCE_PKG} ${SRC_VERSION} failed"
rm -rf -- "${WORK}/usr"
for p in "${SOURCE_PATHS[@]}"; do
  [[ -e ${TREE}/${p} ]] || die "${p} missing after extracting ${SOURCE_PKG} ${SRC_VERSION}"
done

mk_var() { awk -v k="$1" '$1 == k && $2 == "=" {sub(/^[^=]*=[ \t]*/, ""); print; exit}' "${TREE}/Makefile"; }
kernel_version="$(mk_var VERSION).$(mk_var PATCHLEVEL).$(mk_var SUBLEVEL)$(mk_var EXTRAVERSION)"
[[ ${kernel_version} =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] \
  || die "cannot read VERSION/PATCHLEVEL/SUBLEVEL from ${SOURCE_PKG}:Makefile (got '${kernel_version}')"
[[ ${kernel_version} == "${SERIES}".* ]] || die "${SOURCE_PKG} is kernel ${kernel_version}, not ${SERIES}.x"
log "source: upstream ${kernel_version}"

# 2. the binary packages: boot files (config, vmlinuz, System.map) and the modules.
IMG="${WORK}/image"
mkdir -p "${IMG}"
patterns=('./boot/config-*' './boot/vmlinuz-*' './boot/System.map-*'
  './usr/lib/modules/*/config' './usr/lib/modules/*/vmlinuz' './usr/lib/modules/*/System.map'
  './lib/modules/*/config' './lib/modules/*/vmlinuz' './lib/modules/*/System.map')
for m in "${MODULES[@]}"; do patterns+=("*/${m}.ko" "*/${m}.ko.xz" "*/${m}.ko.zst"); done
patterns+=('*/kernel/drivers/infiniband/*.ko' '*/kernel/drivers/infiniband/*.ko.xz'
  '*/kernel/drivers/infiniband/*.ko.zst')
mkdir -p "${BIN_DEBS}"
for pkg in "${image_pkgs[@]}"; do
  deb=$(download "${pkg}" "${BIN_DEBS}")
  log "unpacking boot files and modules from ${deb##*/}"
  # tar exits non-zero for patterns without a match (each package has only some files).
  dpkg-deb --fsys-tarfile "${deb}" \
    | tar -x -C "${IMG}" --no-same-owner --wildcards --wildcards-match-slash -f - "${patterns[@]}" 2>"${WORK}/tar.err" \
    || { grep -v 'Not found in archive\|Exiting with failure status' "${WORK}/tar.err" >&2 || true; }
done

# The 7.x layout keeps config and vmlinuz under usr/lib/modules/<krel>/; older ones in boot/.
find_one() { # find_one WHAT FIND-ARGS...: exactly one match
  local what=$1; shift
  local hits
  mapfile -t hits < <(find "${IMG}" "$@" -type f | sort)
  [[ ${#hits[@]} -eq 1 ]] || die "${image_pkgs[*]}: expected one ${what}, found ${#hits[@]}"
  printf '%s' "${hits[0]}"
}
config=$(find_one config \( -path '*/boot/config-*' -o -path '*/modules/*/config' \))
vmlinuz=$(find_one vmlinuz \( -path '*/boot/vmlinuz-*' -o -path '*/modules/*/vmlinuz' \))
case "${config}" in
  */boot/config-*) kver=${config##*/config-} ;;
  *) kver=${config%/config}; kver=${kver##*/} ;;
esac
log "kernel release ${kver}"
cp "${config}" "${TREE}/.config"
cp "${vmlinuz}" "${TREE}/vmlinuz"
sysmap=$(find "${IMG}" \( -path '*/boot/System.map-*' -o -path '*/modules/*/System.map' \) -type f | head -n 1)
[[ -n ${sysmap} ]] && cp "${sysmap}" "${TREE}/System.map"

# 3. modules as plain .ko: the named ones, then every other one under drivers/infiniband
missing=()
mapfile -t rdma_modules < <(find "${IMG}" -path '*/kernel/drivers/infiniband/*' -name '*.ko*' -type f \
  | sed -E 's|.*/||; s/\.ko(\.xz|\.zst)?$//' | LC_ALL=C sort -u)
mapfile -t all_modules < <(printf '%s\n' "${MODULES[@]}" "${rdma_modules[@]}" | awk 'NF && !seen[$0]++')
for m in "${all_modules[@]}"; do
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
for m in "${REQUIRED_MODULES[@]}"; do
  [[ -f ${TREE}/modules/${m}.ko ]] || die "${image_pkgs[*]}: module ${m} not found"
done
printf '%s\n' "${missing[@]}" | sed '/^$/d' >"${TREE}/modules/MISSING"
[[ ${#missing[@]} -eq 0 ]] || log "modules not built by ${kver}: ${missing[*]}"
log "modules: ${#all_modules[@]} named or under drivers/infiniband, $(( ${#all_modules[@]} - ${#missing[@]} )) unpacked"

# 4. ELF vmlinux with BTF
extract_vmlinux "${TREE}/vmlinuz" "${TREE}/vmlinux" "${WORK}" \
  || die "no ELF vmlinux out of ${vmlinuz##*/} (scripts/lib/vmlinux.sh)"
has_btf_section "${TREE}/vmlinux" || die "extracted vmlinux has no .BTF section"
rm -rf "${IMG}"

# 5. metadata, .complete last, then rename into place
printf '%s\n' "${kernel_version}" >"${TREE}/KERNEL_VERSION"
{
  printf '%s %s\n' "${SOURCE_PKG}" "${SRC_VERSION}"
  for p in "${image_pkgs[@]}"; do printf '%s %s\n' "${p}" "${SRC_VERSION}"; done
} >"${TREE}/DEBIAN_PACKAGES"
{
  printf 'format=%s\n' "${FORMAT}"
  printf 'series=%s\n' "${SERIES}"
  printf 'flavor=%s\n' "${FLAVOR}"
  printf 'kernel_version=%s\n' "${kernel_version}"
  printf 'kernel_release=%s\n' "${kver}"
  printf 'source_package=%s %s\n' "${SOURCE_PKG}" "${SRC_VERSION}"
  printf 'image_package=%s %s\n' "${image_pkgs[0]}" "${SRC_VERSION}"
  printf 'packaging=%s\n' "${PACKAGING}"
} >"${TREE}/.complete"

if [[ -e ${DEST} ]]; then
  old="${TMP}/old"
  mv -T -- "${DEST}" "${old}" || die "cannot move old ${DEST} aside"
fi
mv -T -- "${TREE}" "${DEST}" || die "cannot rename ${TREE} to ${DEST}"
log "done: ${DEST} ($(du -sh "${DEST}" | cut -f1))"
printf '%s\n' "${DEST}"

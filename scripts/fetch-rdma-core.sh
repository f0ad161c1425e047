#!/usr/bin/env bash
# Fetch Debian's user-space RDMA providers of one suite into the cache: the binary package
# (ibverbs-providers: libmlx5.so.1 as jobs load it, stripped) and the development package
# (libibverbs-dev: the static libmlx5.a, whose objects keep their local symbols), both through
# probegen's own apt state (<cache>/apt, scripts/lib/apt.sh). `probegen providers resolve`
# reads the pair. Nothing is installed; the machine's apt sources are never changed.
#
# Usage: scripts/fetch-rdma-core.sh SUITE     (bookworm, trixie, sid, bullseye)
# Output: the last line is the directory <cache>/rdma-core/<version>/ holding usr/lib/...
# Exit: 0 done, 1 a tool or download failed, 2 bad usage or a suite without rdma-core.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly RELEASES=(bookworm trixie sid bullseye)
readonly PACKAGES=(ibverbs-providers libibverbs-dev)
log() { printf 'fetch-rdma-core: %s\n' "$*" >&2; }
die() { printf 'fetch-rdma-core: error: %s\n' "$*" >&2; exit 1; }
usage_error() { printf 'fetch-rdma-core: %s\n' "$*" >&2; exit 2; }

[[ $# -eq 1 ]] || usage_error "usage: $0 SUITE (bookworm, trixie, sid, bullseye)"
SUITE=$1
[[ " ${RELEASES[*]} " == *" ${SUITE} "* ]] \
  || usage_error "unknown suite '${SUITE}': expected one of ${RELEASES[*]}"
# shellcheck source=scripts/lib/apt.sh
. "${REPO}/scripts/lib/apt.sh"
require_tools apt-get apt-cache dpkg-deb flock awk
ensure_apt_lists

# The suite's own version of the package (the suite itself, not its -backports or -updates).
VERSION=$(apt-cache "${APT_OPTS[@]}" madison ibverbs-providers 2>/dev/null \
  | awk -v s="${SUITE}/main" '$6 == s && $7 == "amd64" { print $3; exit }')
[[ -n ${VERSION} ]] || usage_error "suite ${SUITE} has no ibverbs-providers for amd64 in ${APT_DIR}/lists"

DIR="${CACHE_ROOT}/rdma-core/${VERSION}"
if [[ ! -f ${DIR}/.complete ]]; then
  rm -rf "${DIR}"
  mkdir -p "${DIR}/debs"
  for pkg in "${PACKAGES[@]}"; do
    log "apt-get download ${pkg}=${VERSION}"
    (cd "${DIR}/debs" && apt-get "${APT_OPTS[@]}" download -q "${pkg}=${VERSION}" >"${DIR}/debs/.download-${pkg}.log" 2>&1) \
      || die "apt-get download ${pkg}=${VERSION} failed: ${DIR}/debs/.download-${pkg}.log"
    dpkg-deb -x "${DIR}"/debs/"${pkg}"_*.deb "${DIR}"
  done
  printf '%s\n' "${VERSION}" >"${DIR}/.complete"
fi
printf '%s\n' "${DIR}"

# probegen's own apt state under the cache (<cache>/apt): lists and downloads for every Debian
# suite the sources name, read and written with options that never touch the machine's apt
# sources, pins or installed packages. Sourced by scripts/fetch-kernel.sh and
# scripts/fetch-rdma-core.sh; the caller defines log, die and RELEASES, and calls
# require_tools with what it runs.
# shellcheck shell=bash

require_tools() {
  local tool
  for tool in "$@"; do
    command -v "${tool}" >/dev/null 2>&1 || die "required tool '${tool}' not found (run scripts/install-deps.sh)"
  done
}
export DEBIAN_FRONTEND=noninteractive

CACHE_ROOT=${PROBEGEN_CACHE:-${HOME}/.cache/probegen}
readonly CACHE_ROOT
mkdir -p "${CACHE_ROOT}" || die "cannot create cache directory ${CACHE_ROOT}"

APT_DIR="${CACHE_ROOT}/apt"
# Options that make apt read only probegen's lists (no machine sources, no pins) and write
# only under APT_DIR.
APT_OPTS=(
  -o "Dir::Etc::sourcelist=${APT_DIR}/sources.list"
  -o "Dir::Etc::sourceparts=${APT_DIR}/empty.d"
  -o "Dir::Etc::preferences=${APT_DIR}/empty.pref"
  -o "Dir::Etc::preferencesparts=${APT_DIR}/empty.d"
  -o "Dir::State::Lists=${APT_DIR}/lists"
  -o "Dir::Cache=${APT_DIR}/cache"
  -o "Dir::Cache::pkgcache=${APT_DIR}/cache/pkgcache.bin"
  -o "Dir::Cache::srcpkgcache=${APT_DIR}/cache/srcpkgcache.bin"
  -o "Acquire::Languages=none"
  -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::CNF::DefaultEnabled=false"
  -o "APT::Sandbox::User=root"
)

# The mirror the machine's own sources use (deb822 `URIs:` or one-line `deb` entries).
machine_mirror() {
  local uri=""
  uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | awk '/^URIs:/ {for (i = 2; i <= NF; i++) if ($i !~ /security/) {print $i; exit}}') || true
  if [[ -z ${uri} ]]; then
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/ && $i !~ /security/) {print $i; exit}}') || true
  fi
  printf '%s' "${uri:-http://deb.debian.org/debian}"
}

write_sources() {
  local mirror security r
  mirror=$(machine_mirror)
  mirror=${mirror%/}
  security="${mirror%/debian}/debian-security"
  {
    for r in "${RELEASES[@]}"; do
      printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' "${mirror}" "${r}"
      [[ ${r} == sid ]] && continue
      printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s-updates main\n' "${mirror}" "${r}"
      printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s-security main\n' "${security}" "${r}"
      [[ ${r} == bullseye ]] && continue
      printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s-backports main\n' "${mirror}" "${r}"
    done
  } >"${APT_DIR}/sources.list.new"
  mv -f "${APT_DIR}/sources.list.new" "${APT_DIR}/sources.list"
}

apt_update() {
  log "apt-get update (probegen's own lists in ${APT_DIR})"
  local out rc=0
  out=$(apt-get "${APT_OPTS[@]}" update 2>&1) || rc=$?
  # A suite the mirror does not have (yet) is a warning; no list at all is an error.
  grep -E '^(E|W): ' <<<"${out}" | grep -v 'Unable to read .*empty' >&2 || true
  compgen -G "${APT_DIR}/lists/*_Packages*" >/dev/null \
    || die "apt-get update fetched no package list (exit ${rc}); sources: ${APT_DIR}/sources.list"
  date +%s >"${APT_DIR}/updated"
}

ensure_apt_lists() {
  exec 8>"${CACHE_ROOT}/.apt.lock"
  flock 8 || die "cannot lock ${CACHE_ROOT}/.apt.lock"
  mkdir -p "${APT_DIR}/lists/partial" "${APT_DIR}/cache/archives/partial" "${APT_DIR}/empty.d"
  : >"${APT_DIR}/empty.pref"
  write_sources
  local last now
  last=$(cat "${APT_DIR}/updated" 2>/dev/null || echo 0)
  now=$(date +%s)
  if [[ ${PROBEGEN_APT_UPDATE:-0} == 1 ]] || ! compgen -G "${APT_DIR}/lists/*_Packages*" >/dev/null \
     || (( now - last > 7 * 86400 )); then
    apt_update
  fi
  exec 8>&-
}

acache() { apt-cache "${APT_OPTS[@]}" "$@" 2>/dev/null; }

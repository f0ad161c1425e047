#!/usr/bin/env bash
# Install ClickHouse 26.9 in process (`chdb-core` from PyPI) for tests/fleet_clickhouse_current.rs:
# a virtual environment under the cache (never the system python), pinned to 26.9.
#
# Usage: scripts/install-chdb.sh      prints the venv's python on its last line
#
# Idempotent: a venv whose chdb already answers `SELECT version()` with 26.9.* is kept (no
# network needed). Result: ${PROBEGEN_CACHE:-$HOME/.cache/probegen}/chdb-venv.
set -euo pipefail

readonly PIN='chdb-core==26.9.*'
CACHE_ROOT=${PROBEGEN_CACHE:-${HOME}/.cache/probegen}
readonly VENV="${CACHE_ROOT}/chdb-venv"

log() { printf 'install-chdb: %s\n' "$*" >&2; }
die() { printf 'install-chdb: error: %s\n' "$*" >&2; exit 1; }

version() {
  "${VENV}/bin/python" -c 'from chdb import session; import tempfile, sys
d = tempfile.mkdtemp(); print(str(session.Session(d).query("SELECT version()", "TSV")).strip())' 2>/dev/null
}

if [[ -x ${VENV}/bin/python ]] && [[ $(version || true) == 26.9.* ]]; then
  log "chdb $(version) already in ${VENV}"
  printf '%s\n' "${VENV}/bin/python"
  exit 0
fi

PYTHON=$(command -v python3 || true)
[[ -n ${PYTHON} ]] || die "python3 not found (Debian: python3 and python3-venv)"
mkdir -p "${CACHE_ROOT}" || die "cannot create ${CACHE_ROOT}"
rm -rf "${VENV}"
"${PYTHON}" -m venv "${VENV}" || die "${PYTHON} -m venv failed (Debian: apt-get install python3-venv)"
log "pip install ${PIN} (about 180 MB)"
"${VENV}/bin/pip" install --quiet --disable-pip-version-check "${PIN}" >&2 \
  || die "pip install ${PIN} failed"
got=$(version) || die "chdb installed but does not run"
[[ ${got} == 26.9.* ]] || die "chdb answers version ${got}, expected 26.9.*"
log "chdb ${got} in ${VENV}"
printf '%s\n' "${VENV}/bin/python"

#!/usr/bin/env bash
# Install every Debian (bookworm) package probegen needs in CI.
#
# Usage: scripts/install-deps.sh [--update]
#
# Idempotent: when `dpkg-query -W` already shows every package installed, it
# exits at once without touching apt (no network needed). Otherwise it runs
# `apt-get update`, checks that every package has an install candidate, and
# installs the missing ones non-interactively. `--update` forces the
# `apt-get update` even when nothing is missing (nothing else changes).
# Must run as root (or with sudo available).
set -euo pipefail

readonly PACKAGES=(
  clang llvm libbpf-dev bpftool cflow xz-utils zstd dpkg-dev kmod cpio
  busybox-static qemu-system-x86 rdma-core ibverbs-utils ibverbs-providers
  libibverbs-dev libelf-dev zlib1g-dev pkg-config time iproute2 libc6-dev
  binutils gcc prometheus prometheus-alertmanager clickhouse-server clickhouse-client
  chromium
  lintian fakeroot systemd init-system-helpers
  python3-venv
)

log() { printf 'install-deps: %s\n' "$*" >&2; }
die() { printf 'install-deps: error: %s\n' "$*" >&2; exit 1; }

force_update=0
case "${1:-}" in
  "") ;;
  --update) force_update=1 ;;
  -h | --help)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 0 ;;
  *) printf 'install-deps: unknown argument %q (usage: %s [--update])\n' "$1" "$0" >&2
     exit 2 ;;
esac

SUDO=()
if [[ ${EUID} -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "must run as root (sudo not found)"
  SUDO=(sudo)
fi

# Packages whose dpkg status is not "install ok installed".
missing_packages() {
  local pkg status
  for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null || true)
    [[ ${status} == "install ok installed" ]] || printf '%s\n' "${pkg}"
  done
}

mapfile -t missing < <(missing_packages)

if [[ ${#missing[@]} -eq 0 && ${force_update} -eq 0 ]]; then
  log "all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
log "apt-get update"
"${SUDO[@]}" apt-get update >&2 || die "apt-get update failed"

if [[ ${#missing[@]} -eq 0 ]]; then
  log "all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

# Every missing package must exist in the configured archives.
unavailable=()
for pkg in "${missing[@]}"; do
  candidate=$(apt-cache policy "${pkg}" 2>/dev/null | awk '/^ *Candidate:/ {print $2}')
  if [[ -z ${candidate} || ${candidate} == "(none)" ]]; then
    unavailable+=("${pkg}")
  fi
done
if [[ ${#unavailable[@]} -gt 0 ]]; then
  die "no install candidate in the configured apt sources for: ${unavailable[*]}"
fi

log "installing ${#missing[@]} package(s): ${missing[*]}"
"${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
  || die "apt-get install failed for: ${missing[*]}"

mapfile -t still_missing < <(missing_packages)
if [[ ${#still_missing[@]} -gt 0 ]]; then
  die "still not installed after apt-get install: ${still_missing[*]}"
fi
log "all ${#PACKAGES[@]} packages installed"

#!/usr/bin/env bash
# Storage per failure record, per heartbeat row and per host-day, and the extrapolation to a
# year of 10,000 hosts with a billion failure records against the RDMATracer paper's 41 GB:
# tests/fleet_storage.rs at a larger size (Debian's 18.16 server started by the test; 26.9 in
# process, from scripts/install-chdb.sh), its figures printed.
#
# Usage: benches/fleet_storage.sh [STORM_COPIES] [IDLE_WINDOWS]   (defaults 1000, 10000;
#        the test's own: 250, 2000). 10,000 idle windows take about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PROBEGEN_STORAGE_COPIES=${1:-1000} PROBEGEN_STORAGE_IDLE=${2:-10000} \
  cargo test --release --test fleet_storage -- --nocapture 2>&1 \
  | grep -E '^(18|26)\.|^  |test result'

#!/usr/bin/env bash
# A simulated fleet against Debian's clickhouse-server (18.16) on loopback: starts the server
# (own config and data in a temp dir), creates the fleet tables, runs
# sink-clickhouse/examples/fleet_scale.rs (HOSTS real sinks, time compressed SPEEDUP times)
# and stops the server.
#
# Usage: benches/fleet_scale.sh [HOSTS] [SECONDS] [SPEEDUP]   (defaults 200, 60, 60)
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTS=${1:-200} SECONDS_=${2:-60} SPEEDUP=${3:-60}
PORT=${PORT:-28125} TCP=${TCP:-29002}
. benches/clickhouse.sh
start_clickhouse fleet-scale
cargo build --release --quiet --bin probegen
target/release/probegen schema --clickhouse | clickhouse-client --port "$TCP" --multiquery
cargo run --release --quiet -p sink-clickhouse --example fleet_scale -- \
  "http://127.0.0.1:$PORT" "$HOSTS" "$SECONDS_" "$SPEEDUP" "$pid"
echo "rows: records $(clickhouse-client --port "$TCP" --query 'SELECT count() FROM probegen.records FINAL'), snapshots $(clickhouse-client --port "$TCP" --query 'SELECT count() FROM probegen.snapshots FINAL')"

#!/usr/bin/env bash
# What the ClickHouse sink costs the collector: starts Debian's clickhouse-server on
# loopback (own config and data in a temp dir, HTTP port $PORT, default 28123), creates the
# fleet tables, runs sink-clickhouse/examples/fleet_bench.rs against it (CPU with and without the
# sink at 10k records/s, RSS through a 10-minute outage) and stops the server.
#
# Usage: benches/fleet_clickhouse.sh [WINDOWS] [OUTAGE_WINDOWS]   (defaults 12, 120)
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-28123} TCP=${TCP:-29000}
. benches/clickhouse.sh
start_clickhouse fleet-bench
cargo build --release --quiet --bin probegen
target/release/probegen schema --clickhouse | clickhouse-client --port "$TCP" --multiquery
cargo run --release --quiet -p sink-clickhouse --example fleet_bench -- "http://127.0.0.1:$PORT" "$@"
echo "rows in ClickHouse: $(clickhouse-client --port "$TCP" --query 'SELECT count() FROM probegen.records FINAL')"

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
[[ -x /usr/sbin/clickhouse-server ]] || { echo "clickhouse-server missing: bash scripts/install-deps.sh" >&2; exit 2; }
dir=$(mktemp -d /tmp/pg-fleet-scale-ch.XXXXXX)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
cat >"$dir/config.xml" <<XML
<yandex>
  <logger><level>warning</level><log>$dir/server.log</log><errorlog>$dir/error.log</errorlog><console>0</console></logger>
  <http_port>$PORT</http_port><tcp_port>$TCP</tcp_port><listen_host>127.0.0.1</listen_host>
  <path>$dir/data/</path><tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/user_files/</user_files_path><format_schema_path>$dir/fs/</format_schema_path>
  <users_config>$dir/users.xml</users_config><default_profile>default</default_profile>
  <default_database>default</default_database><mark_cache_size>268435456</mark_cache_size>
</yandex>
XML
cat >"$dir/users.xml" <<XML
<yandex><profiles><default/></profiles><quotas><default/></quotas>
<users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users></yandex>
XML
/usr/sbin/clickhouse-server --config-file="$dir/config.xml" >"$dir/stdout.log" 2>&1 &
pid=$!
for _ in $(seq 150); do clickhouse-client --port "$TCP" --query 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.2; done
cargo build --release --quiet --bin probegen
target/release/probegen schema --clickhouse | clickhouse-client --port "$TCP" --multiquery
cargo run --release --quiet -p sink-clickhouse --example fleet_scale -- \
  "http://127.0.0.1:$PORT" "$HOSTS" "$SECONDS_" "$SPEEDUP" "$pid"
echo "rows: records $(clickhouse-client --port "$TCP" --query 'SELECT count() FROM probegen.records FINAL'), snapshots $(clickhouse-client --port "$TCP" --query 'SELECT count() FROM probegen.snapshots FINAL')"

#!/usr/bin/env bash
# A local fleet backend for trying `probegen collect --clickhouse ... --metrics ...`:
# Debian's clickhouse-server (HTTP on 127.0.0.1:18123, the fleet tables created with
# `probegen schema --clickhouse`) and prometheus (127.0.0.1:19090, the shipped rules in
# deploy/prometheus, scraping a collector on 127.0.0.1:9464), each with its own config and
# data under $PROBEGEN_FLEET_DIR (default out/fleet), in the background.
#
# Usage: scripts/fleet-local.sh start|stop|status
set -euo pipefail

cd "$(dirname "$0")/.."
DIR=${PROBEGEN_FLEET_DIR:-out/fleet}
CH_HTTP=18123 CH_TCP=19000 PROM=19090 COLLECTOR=9464
log() { printf 'fleet-local: %s\n' "$*" >&2; }
die() { printf 'fleet-local: error: %s\n' "$*" >&2; exit 2; }

start() {
  command -v clickhouse-client >/dev/null && [[ -x /usr/sbin/clickhouse-server ]] \
    || die "clickhouse-server/clickhouse-client missing: run bash scripts/install-deps.sh"
  command -v prometheus >/dev/null || die "prometheus missing: run bash scripts/install-deps.sh"
  mkdir -p "$DIR/clickhouse" "$DIR/prometheus"
  local ch; ch=$(realpath "$DIR/clickhouse")
  cat >"$ch/config.xml" <<XML
<yandex>
  <logger><level>warning</level><log>$ch/server.log</log><errorlog>$ch/error.log</errorlog><console>0</console></logger>
  <http_port>$CH_HTTP</http_port>
  <tcp_port>$CH_TCP</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>$ch/data/</path>
  <tmp_path>$ch/tmp/</tmp_path>
  <user_files_path>$ch/user_files/</user_files_path>
  <format_schema_path>$ch/format_schemas/</format_schema_path>
  <users_config>$ch/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
</yandex>
XML
  cat >"$ch/users.xml" <<XML
<yandex>
  <profiles><default/></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default/></quotas>
</yandex>
XML
  if ! clickhouse-client --port "$CH_TCP" --query 'SELECT 1' >/dev/null 2>&1; then
    nohup /usr/sbin/clickhouse-server --config-file="$ch/config.xml" >"$ch/stdout.log" 2>&1 &
    echo $! >"$ch/pid"
    for _ in $(seq 100); do
      clickhouse-client --port "$CH_TCP" --query 'SELECT 1' >/dev/null 2>&1 && break
      sleep 0.2
    done
  fi
  clickhouse-client --port "$CH_TCP" --query 'SELECT 1' >/dev/null || die "clickhouse did not start: $ch/error.log"
  local probegen=${PROBEGEN_BIN:-target/release/probegen}
  [[ -x $probegen ]] || cargo build --release --quiet
  "$probegen" schema --clickhouse | clickhouse-client --port "$CH_TCP" --multiquery
  log "clickhouse: http://127.0.0.1:$CH_HTTP (database probegen, tables created)"

  local pr; pr=$(realpath "$DIR/prometheus")
  cp deploy/prometheus/probegen-rules.yml deploy/prometheus/probegen-tickets.yml "$pr/"
  cat >"$pr/prometheus.yml" <<YML
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - probegen-rules.yml
  - probegen-tickets.yml
scrape_configs:
  - job_name: probegen
    static_configs:
      - targets: ['127.0.0.1:$COLLECTOR']
YML
  if ! [[ -f $pr/pid ]] || ! kill -0 "$(cat "$pr/pid")" 2>/dev/null; then
    nohup prometheus --config.file="$pr/prometheus.yml" --storage.tsdb.path="$pr/tsdb" \
      --web.listen-address=127.0.0.1:$PROM --log.level=warn >"$pr/prometheus.log" 2>&1 &
    echo $! >"$pr/pid"
  fi
  log "prometheus: http://127.0.0.1:$PROM (rules loaded, scraping 127.0.0.1:$COLLECTOR)"
  log "point a collector at them: probegen collect ... --metrics $COLLECTOR --clickhouse http://127.0.0.1:$CH_HTTP"
}

stop() {
  local f
  for f in "$DIR/prometheus/pid" "$DIR/clickhouse/pid"; do
    if [[ -f $f ]]; then
      kill "$(cat "$f")" 2>/dev/null || true
      rm -f "$f"
    fi
  done
  log "stopped (data kept in $DIR)"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    clickhouse-client --port "$CH_TCP" --query 'SELECT count() FROM probegen.records' 2>/dev/null \
      | sed 's/^/clickhouse records: /' || echo "clickhouse: down"
    [[ -f $DIR/prometheus/pid ]] && kill -0 "$(cat "$DIR/prometheus/pid")" 2>/dev/null \
      && echo "prometheus: up" || echo "prometheus: down" ;;
  *) printf 'usage: %s start|stop|status\n' "$0" >&2; exit 2 ;;
esac

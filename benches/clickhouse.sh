# Sourced by the fleet benchmarks: Debian's clickhouse-server on loopback with its own config
# and data in a temp dir, stopped by PID when the script exits.
#
#   start_clickhouse NAME   (PORT: HTTP, TCP: native; sets $dir, $pid; waits until it answers)
#   ch ARGS...              (clickhouse-client on $TCP)

start_clickhouse() {
	[[ -x /usr/sbin/clickhouse-server ]] ||
		{ echo "clickhouse-server missing: bash scripts/install-deps.sh" >&2; exit 2; }
	dir=$(mktemp -d "/tmp/pg-$1-ch.XXXXXX")
	pid=
	trap stop_clickhouse EXIT
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
	for _ in $(seq 150); do ch --query 'SELECT 1' >/dev/null 2>&1 && return 0; sleep 0.2; done
	echo "clickhouse-server did not answer on $TCP within 30 s (see $dir/error.log)" >&2
	exit 1
}

stop_clickhouse() {
	[[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$dir"
}

ch() { clickhouse-client --port "$TCP" "$@"; }

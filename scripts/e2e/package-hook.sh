#!/bin/sh
# Guest hook of scripts/e2e-package.sh (packed as /extra/guest-hook.sh). The vendor driver
# modules are loaded by then (init's step vendor_modules). The packaged agent runs as the
# service would: uid/gid 65534 with exactly the unit's capabilities (setpriv: ambient,
# inheritable and bounding sets CAP_BPF CAP_PERFMON CAP_SYS_ADMIN), the packaged config and
# bundle, no flag naming a set.
#
#   start: TB_STEP package_unit_caps PASS|FAIL  (the set chosen, every attachable probe attached)
#          TB_STEP package_no_sys_admin PASS|FAIL  (without CAP_SYS_ADMIN: one line, exit 2)
#          then the same agent in the background, attached before init's traffic
#   stop:  SIGTERM; TB_STEP package_induced PASS|FAIL  (the induced EFAULT and EINVAL failures
#          caught as chains with their origins, the invariant held, exit 0)
# Outputs: /out/package/{unit,no-sys-admin,service}.{log,rc}
X=/extra
CAPS=+bpf,+perfmon,+sys_admin

as_service() {
	caps=$1
	shift
	$X/setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all,"$caps" \
		--ambient-caps=-all,"$caps" --bounding-set=-all,"$caps" "$@"
}

case "$1" in
start)
	o=/out/package
	mkdir -p "$o" /tmp/pkg
	chown 65534:65534 /tmp/pkg
	as_service "$CAPS" $X/probegen-agent collect --config $X/probegen.conf --bundle $X/bundle \
		--out /tmp/pkg/snapshots.jsonl --interval 1s --duration 3s >"$o/unit.log" 2>&1
	echo $? >"$o/unit.rc"
	summary=$(grep -a '^probegen collect: [0-9]* snapshots' "$o/unit.log" | tail -n 1)
	chosen=$(grep -a ': set linux-' "$o/unit.log" | head -n 1)
	counts=$(echo "$summary" | grep -o '[0-9]*/[0-9]* probes attached' | cut -d' ' -f1)
	if [ "$(cat "$o/unit.rc")" = 0 ] && [ -n "$chosen" ] && [ -n "$counts" ] &&
		[ "${counts%/*}" = "${counts#*/}" ]; then
		echo "TB_STEP package_unit_caps PASS ${chosen#*: set } ${summary#probegen collect: }"
	else
		echo "TB_STEP package_unit_caps FAIL rc=$(cat "$o/unit.rc"): $(tail -n 6 "$o/unit.log" | tr '\n' ' ')"
	fi
	as_service +bpf,+perfmon $X/probegen-agent collect --config $X/probegen.conf --bundle $X/bundle \
		--out /tmp/pkg/snapshots2.jsonl --interval 1s --duration 1s >"$o/no-sys-admin.log" 2>&1
	echo $? >"$o/no-sys-admin.rc"
	if [ "$(cat "$o/no-sys-admin.rc")" = 2 ] && grep -q 'missing capability CAP_SYS_ADMIN' "$o/no-sys-admin.log"; then
		echo "TB_STEP package_no_sys_admin PASS $(grep -a 'missing capability' "$o/no-sys-admin.log")"
	else
		echo "TB_STEP package_no_sys_admin FAIL rc=$(cat "$o/no-sys-admin.rc"): $(tail -n 3 "$o/no-sys-admin.log" | tr '\n' ' ')"
	fi
	(
		# setpriv itself in the background (not the function: $! would be a subshell, and the
		# SIGTERM at stop would end the shell instead of the agent)
		$X/setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all,"$CAPS" \
			--ambient-caps=-all,"$CAPS" --bounding-set=-all,"$CAPS" \
			$X/probegen-agent collect --config $X/probegen.conf --bundle $X/bundle \
			--out /tmp/pkg/service.jsonl --interval 1s >"$o/service.log" 2>&1 &
		echo $! >/tmp/pkg-service.pid
		wait $!
		echo $? >"$o/service.rc"
	) &
	i=0
	while [ $i -lt 600 ]; do
		grep -q '^probegen collect: attached' "$o/service.log" 2>/dev/null && break
		sleep 0.1
		i=$((i + 1))
	done
	grep -q '^probegen collect: attached' "$o/service.log"
	;;
stop)
	o=/out/package
	pid=$(cat /tmp/pkg-service.pid 2>/dev/null)
	[ -n "$pid" ] || { echo "package-hook: no service pid"; exit 1; }
	sleep 2
	kill -TERM "$pid"
	i=0
	while [ ! -s "$o/service.rc" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
	chains=$(grep -a '^probegen collect: chain .*comm=verbs_fail' "$o/service.log")
	summary=$(grep -a '^probegen collect: [0-9]* snapshots' "$o/service.log" | tail -n 1)
	if [ "$(cat "$o/service.rc" 2>/dev/null)" = 0 ] && echo "$chains" | grep -q ': EFAULT origin ' &&
		echo "$chains" | grep -q ': EINVAL origin ' && echo "$summary" | grep -q 'invariant ok'; then
		echo "TB_STEP package_induced PASS $(echo "$chains" | sed 's/.*comm=verbs_fail: //' | sort -u | tr '\n' ';') ${summary#probegen collect: }"
	else
		echo "TB_STEP package_induced FAIL rc=$(cat "$o/service.rc" 2>/dev/null): $(tail -n 4 "$o/service.log" | tr '\n' ' ')"
	fi
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

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
#          BASELINE=unavailable|fsession (hook.env, E2E_PACKAGE_BASELINE of
#          scripts/e2e-package.sh): TB_STEP package_baseline PASS|FAIL  (the packaged config's
#            `baseline = true`: in the unit's run and once in the service's, which exits 0,
#            the line "baseline unavailable: <what the kernel lacks>" or "baseline: N handlers
#            traced ... fsession ...", containing $BASELINE_WANT)
#   RELOAD=1 (hook.env, PROBEGEN_E2E_RELOAD of scripts/e2e-package.sh), at stop before the
#   SIGTERM, with the service running:
#          TB_STEP package_release PASS|FAIL  (`rdma link delete rxe0`, then `modprobe -r
#            rdma_rxe` through the .deb's modprobe.d rule and kmod's modprobe: exit 0, the
#            module gone, the agent's release line)
#          TB_STEP package_reattach PASS|FAIL  (`modprobe rdma_rxe`, the link re-added: the
#            agent attaches the module's probes again within two intervals, and verbs_fail's
#            EFAULT and EINVAL after it are caught as chains)
# Outputs: /out/package/{unit,no-sys-admin,service}.{log,rc}, service.jsonl, reload.txt
X=/extra
CAPS=+bpf,+perfmon,+sys_admin
RELOAD=
MATCH=
BASELINE=
BASELINE_WANT=
MEMLOCK_KB=
[ -r $X/hook.env ] && . $X/hook.env
# the unit's LimitMEMLOCK= for every agent started here (systemd sets it as root, before the
# unit's user and capabilities; setpriv keeps it)
if [ -n "$MEMLOCK_KB" ]; then
	ulimit -l "$MEMLOCK_KB" || echo "package-hook: ulimit -l $MEMLOCK_KB failed"
fi

# the unit's RuntimeDirectory=probegen (mode 0700, the service user's): the control socket
mkdir -p /run/probegen
chown 65534:65534 /run/probegen
chmod 700 /run/probegen

# The service's log from line $1 on.
log_from() { tail -n +"$1" /out/package/service.log; }

# Drivers that come and go (RELOAD=1): unload rdma_rxe through the package's rule while the
# service runs, load it again, and fail verbs on it once more.
reload() {
	o=/out/package
	# as the package installs them; kmod's modprobe (the guest's busybox one has no rules)
	cp $X/probegen-agent /usr/bin/probegen-agent
	mkdir -p /lib/modprobe.d
	cp $X/modprobe-probegen.conf /lib/modprobe.d/probegen.conf
	ln -sf $X/kmod /sbin/modprobe
	refs=$(cat /sys/module/rdma_rxe/refcnt)
	at=$(($(wc -l <$o/service.log) + 1))
	/usr/bin/rdma link delete rxe0 >$o/reload.log 2>&1
	/sbin/modprobe -r rdma_rxe >>$o/reload.log 2>&1
	rc=$?
	released=$(log_from "$at" | grep -a 'module rdma_rxe: released' | head -n 1)
	if [ $rc = 0 ] && [ ! -d /sys/module/rdma_rxe ] && [ -n "$released" ]; then
		echo "TB_STEP package_release PASS rdma_rxe refcnt $refs before, unloaded; ${released#probegen collect: }"
	else
		echo "TB_STEP package_release FAIL rc=$rc $(tr '\n' ' ' <$o/reload.log) refcnt=$(cat /sys/module/rdma_rxe/refcnt 2>/dev/null) ${released:-no release line}"
	fi
	back=$(($(wc -l <$o/service.log) + 1))
	echo "reload_at_line=$at back_at_line=$back refcnt_before=$refs modprobe_r_rc=$rc" >$o/reload.txt
	/sbin/modprobe rdma_rxe >>$o/reload.log 2>&1
	/usr/bin/rdma link add rxe0 type rxe netdev tbdummy0 >>$o/reload.log 2>&1
	i=0
	while [ $i -lt 100 ]; do
		log_from "$back" | grep -aq 'module rdma_rxe: attached' &&
			/usr/bin/rdma link show rxe0/1 2>/dev/null | grep -q 'state ACTIVE' && break
		sleep 0.1
		i=$((i + 1))
	done
	attached=$(log_from "$back" | grep -a 'module rdma_rxe: attached' | head -n 1)
	refs=$(cat /sys/module/rdma_rxe/refcnt 2>/dev/null)
	timeout 30 /usr/bin/verbs_fail rxe0 >$o/vf-reload.log 2>&1
	# the chains of the failures after the reload: complete one window later
	sleep 3
	chains=$(log_from "$back" | grep -a '^probegen collect: chain .*comm=verbs_fail')
	echo "refcnt_after=$refs" >>$o/reload.txt
	if [ -n "$attached" ] && echo "$chains" | grep -q ': EFAULT origin ' &&
		echo "$chains" | grep -q ': EINVAL origin '; then
		echo "TB_STEP package_reattach PASS ${attached#probegen collect: } (refcnt $refs); $(echo "$chains" | sed 's/.*comm=verbs_fail: //' | sort -u | tr '\n' ';')"
	else
		echo "TB_STEP package_reattach FAIL ${attached:-no attach line}; $(tail -n 4 $o/reload.log $o/vf-reload.log | tr '\n' ' ')"
	fi
}

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
	attached=$(grep -a '^probegen collect: attached ' "$o/unit.log" | head -n 1)
	cp /tmp/pkg/snapshots.jsonl "$o/unit.jsonl" 2>/dev/null
	if [ "$MATCH" = nearest ]; then
		# the nearest series' set: what matches attaches, and the per-layer counts of the
		# attached line add up to what did
		layers=$(echo "$attached" | sed -n 's/.*(core \([0-9]*\)\/[0-9]*, vendor \([0-9]*\)\/[0-9]*, data plane \([0-9]*\)\/[0-9]*).*/\1 \2 \3/p')
		if [ -n "$layers" ]; then
			# shellcheck disable=SC2086
			set -- $layers
			sum=$(($1 + $2 + $3))
			[ "$sum" = "${counts%/*}" ] && echo "$chosen" | grep -q 'match="nearest"' &&
				counts="$sum/$sum"
		fi
	fi
	if [ "$(cat "$o/unit.rc")" = 0 ] && [ -n "$chosen" ] && [ -n "$counts" ] &&
		[ "${counts%/*}" = "${counts#*/}" ]; then
		echo "TB_STEP package_unit_caps PASS ${chosen#*: set } ${attached#probegen collect: }; ${summary#probegen collect: }"
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
	# self-limits: the kernel counts the programs' run time while this is on (RELOAD runs)
	[ -n "$RELOAD" ] && echo 1 >/proc/sys/kernel/bpf_stats_enabled
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
	[ -n "$RELOAD" ] && reload
	kill -TERM "$pid"
	# the exit detaches every program: on an rt kernel under TCG (no expedited RCU grace
	# periods after boot) that took over 20 s; the unit's TimeoutStopSec is systemd's 90 s
	i=0
	while [ ! -s "$o/service.rc" ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i + 1)); done
	echo "package-hook: the service exited $((i / 10)) s after SIGTERM"
	chains=$(grep -a '^probegen collect: chain .*comm=verbs_fail' "$o/service.log")
	summary=$(grep -a '^probegen collect: [0-9]* snapshots' "$o/service.log" | tail -n 1)
	cp /tmp/pkg/service.jsonl "$o/service.jsonl" 2>/dev/null
	if [ "$(cat "$o/service.rc" 2>/dev/null)" = 0 ] && echo "$chains" | grep -q ': EFAULT origin ' &&
		echo "$chains" | grep -q ': EINVAL origin ' && echo "$summary" | grep -q 'invariant ok'; then
		echo "TB_STEP package_induced PASS $(echo "$chains" | sed 's/.*comm=verbs_fail: //' | sort -u | tr '\n' ';') ${summary#probegen collect: }"
	else
		echo "TB_STEP package_induced FAIL rc=$(cat "$o/service.rc" 2>/dev/null): $(tail -n 4 "$o/service.log" | tr '\n' ' ')"
	fi
	if [ -n "$BASELINE" ]; then
		# the packaged config turns the baseline on (`baseline = true`): one baseline line
		# in the unit's run and in the service's, saying how this kernel traces it (fsession)
		# or what it lacks (unavailable: the service goes on, its failures are package_induced's)
		case $BASELINE in
		unavailable) pat='^probegen collect: baseline unavailable: ' ;;
		*) pat='^probegen collect: baseline: [1-9][0-9]* handlers traced' ;;
		esac
		lines=$(grep -a -c "$pat" "$o/service.log")
		line=$(grep -a "$pat" "$o/service.log" | head -n 1)
		if grep -q '^baseline = true' $X/probegen.conf && [ "$lines" = 1 ] &&
			echo "$line" | grep -q "$BASELINE_WANT" &&
			grep -a "$pat" "$o/unit.log" | grep -q "$BASELINE_WANT" &&
			[ "$(cat "$o/service.rc" 2>/dev/null)" = 0 ]; then
			echo "TB_STEP package_baseline PASS ${line#probegen collect: }"
		else
			echo "TB_STEP package_baseline FAIL $lines lines: ${line:-no baseline line}; rc=$(cat "$o/service.rc" 2>/dev/null)"
		fi
	fi
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

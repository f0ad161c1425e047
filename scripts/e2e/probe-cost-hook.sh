#!/bin/sh
# Guest hook of benches/probe_cost.sh (packed as /extra/guest-hook.sh by it; see
# tests/e2e/README.md "Extension hook"). Measures, with bpf_stats, the generated probes against
# empty fexit programs attached to the same functions.
#
#   start: probegen collect with the whole generated set (/extra/probes.bpf.o: the probes as
#          deployed, their ring buffer drained), then /extra/probe_cost_load with the empty
#          programs /extra/empty_<id>.bpf.o (both wait until attached)
#   stop:  kernel.bpf_stats_enabled=1; /extra/rounds rounds of two loops of
#          /extra/probe_cost_verbs (ok: successful reg/dereg; fail: reg_mr EFAULT), /extra/iters
#          iterations each, with `bpftool prog show` before the first and after every loop
#          (pc-stats-<k>.txt: round r is k = 2r-2 -> 2r-1 ok, 2r-1 -> 2r fail); then stops the
#          loader and the collector. Then, with bpf_stats off, /extra/mech_rounds rounds of
#          /extra/probe_cost_syscall (100000 getpgid(0) calls) bare, under an empty fexit program
#          and under an empty kretprobe on __x64_sys_getpgid (/extra/mech_<kind>.bpf.o;
#          pc-mech.txt: `MECH <none|fexit|kretprobe> <line>`), for each mechanism's whole
#          per-call cost (trampoline, or int3 and return hook, plus an empty program).
# Everything lands in /out (-> target/e2e/<ver>/ of the testbed run): pc-stats-<k>.txt,
# pc-ok.txt, pc-fail.txt, pc-load.log, pc-collect.log, pc-collect.rc, pc-loader.rc.
X=/extra
CPID=/tmp/pc-collect.pid
LPID=/tmp/pc-load.pid
mkdir -p /out

# wait_line <file> <regex> <pidfile>: up to 60 s for the line, while the process lives
wait_line() {
	i=0
	while [ $i -lt 600 ]; do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$(cat "$3" 2>/dev/null)" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}

# stop_pid <pidfile> <name>: SIGTERM, up to 30 s, then SIGKILL (returns 1)
stop_pid() {
	pid=$(cat "$1" 2>/dev/null)
	[ -n "$pid" ] || { echo "probe-cost-hook: no $2 pid"; return 1; }
	kill -TERM "$pid" 2>/dev/null
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "probe-cost-hook: $2 still running after SIGTERM + 30 s"
		kill -KILL "$pid"
		return 1
	fi
	return 0
}

# collector TAG ARGS...: probegen collect in the background (pid in $CPID), waits for attach
collector() {
	tag=$1
	shift
	rm -f $CPID /out/pc-collect-$tag.rc
	(
		$X/probegen collect --manifest $X/manifest.yaml --object $X/probes.bpf.o \
			--interval 1s --out /tmp/pc-snapshots-$tag.jsonl "$@" \
			>/dev/null 2>/out/pc-collect-$tag.log &
		echo $! >$CPID
		wait $!
		echo $? >/out/pc-collect-$tag.rc
	) &
	i=0
	while [ ! -s $CPID ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	wait_line /out/pc-collect-$tag.log '^probegen collect: attached' $CPID ||
		{ cat /out/pc-collect-$tag.log; return 1; }
	grep '^probegen collect: attached\|baseline' /out/pc-collect-$tag.log
}

# empties: the empty programs loaded (pid in $LPID)
empties() {
	rm -f $LPID
	($X/probe_cost_load $X/empty_*.bpf.o >/out/pc-load-bl.log 2>&1 & echo $! >$LPID; wait) &
	i=0
	while [ ! -s $LPID ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	wait_line /out/pc-load-bl.log '^ready [1-9]' $LPID
}

# latency TAG: /extra/bl_rounds rounds of the reg_mr, create_qp and modify_qp loops
latency() {
	r=1
	while [ $r -le "$blr" ]; do
		for m in ok qp modify; do
			timeout 600 $X/probe_cost_verbs rxe0 $m "$n" >>/out/pc-lat-$1.txt 2>&1 || rc=1
		done
		r=$((r + 1))
	done
}

# baseline_phase TAG SAMPLE: the success loop under collect --baseline (one call in SAMPLE
# traced), with bpftool snapshots around every round (pc-bl-TAG-<k>.txt)
# (more ARGS go to the collector: --baseline-entry fentry)
baseline_phase() {
	bp=$1
	bs=$2
	shift 2
	collector bl-$bp --baseline --baseline-sample "$bs" --baseline-budget 0 "$@" || rc=1
	k=0
	$X/bpftool prog show >/out/pc-bl-$bp-$k.txt 2>&1 || rc=1
	while [ $k -lt "$blr" ]; do
		timeout 600 $X/probe_cost_verbs rxe0 ok "$n" >>/out/pc-bl-$bp.txt 2>&1 || rc=1
		k=$((k + 1))
		$X/bpftool prog show >/out/pc-bl-$bp-$k.txt 2>&1 || rc=1
	done
	stop_pid $CPID "baseline $bp collector" || rc=1
}

# the data plane's success path (issue 34): a pingpong of $n good completions, then $n
# ibv_modify_qp RESET -> INIT -> RESET, with the whole set and the empty data-plane twins
# attached; bpftool around every round (pc-dp-K.txt)
dataplane_phase() {
	dpr=$(cat $X/dp_rounds 2>/dev/null || echo 0)
	[ "$dpr" -gt 0 ] || return 0
	collector dp || { rc=1; return; }
	rm -f $LPID
	($X/probe_cost_load $X/dpempty_*.bpf.o >/out/pc-load-dp.log 2>&1 & echo $! >$LPID; wait) &
	i=0
	while [ ! -s $LPID ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	wait_line /out/pc-load-dp.log '^ready [1-9]' $LPID || { cat /out/pc-load-dp.log; rc=1; }
	k=0
	$X/bpftool prog show >/out/pc-dp-$k.txt 2>&1 || rc=1
	while [ $k -lt "$dpr" ]; do
		timeout 120 ibv_rc_pingpong -d rxe0 -g 1 -n "$n" >/tmp/pc-pp-server.log 2>&1 &
		srv=$!
		# until the server listens on TCP 18515 (0x4853), as scripts/e2e/init.sh waits
		i=0
		while [ $i -lt 100 ]; do
			grep -qE ':4853 [0-9A-F]+:0000 0A' /proc/net/tcp /proc/net/tcp6 2>/dev/null && break
			sleep 0.1
			i=$((i + 1))
		done
		timeout 120 ibv_rc_pingpong -d rxe0 -g 1 -n "$n" 127.0.0.1 >>/out/pc-dp-pp.txt 2>&1 || rc=1
		wait $srv || rc=1
		timeout 600 $X/probe_cost_verbs rxe0 modify "$n" >>/out/pc-dp.txt 2>&1 || rc=1
		k=$((k + 1))
		$X/bpftool prog show >/out/pc-dp-$k.txt 2>&1 || rc=1
	done
	stop_pid $LPID "data-plane loader" || rc=1
	stop_pid $CPID "data-plane collector" || rc=1
	grep 'iters in' /out/pc-dp-pp.txt
	cat /out/pc-dp.txt
}

case "$1" in
start)
	for f in probegen probes.bpf.o manifest.yaml bpftool probe_cost_load probe_cost_verbs iters rounds; do
		[ -e $X/$f ] || { echo "probe-cost-hook: $X/$f missing"; exit 1; }
	done
	rm -f /out/pc-collect.rc $CPID $LPID
	(
		$X/probegen collect --manifest $X/manifest.yaml --object $X/probes.bpf.o \
			--interval 1s --out /tmp/pc-snapshots.jsonl \
			>/dev/null 2>/out/pc-collect.log &
		echo $! >$CPID
		wait $!
		echo $? >/out/pc-collect.rc
	) &
	i=0
	while [ ! -s $CPID ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	wait_line /out/pc-collect.log '^probegen collect: attached' $CPID ||
		{ cat /out/pc-collect.log; exit 1; }
	grep '^probegen collect: attached' /out/pc-collect.log
	(
		$X/probe_cost_load $X/empty_*.bpf.o >/out/pc-load.log 2>&1 &
		echo $! >$LPID
		wait $!
		echo $? >/out/pc-loader.rc
	) &
	i=0
	while [ ! -s $LPID ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	wait_line /out/pc-load.log '^ready' $LPID
	cat /out/pc-load.log
	grep -q '^ready [1-9]' /out/pc-load.log
	;;
stop)
	n=$(cat $X/iters)
	rounds=$(cat $X/rounds)
	rc=0
	rm -f /out/pc-ok.txt /out/pc-fail.txt /out/pc-mech.txt
	echo 1 >/proc/sys/kernel/bpf_stats_enabled || rc=1
	# round r: stats 2r-2, ok loop, stats 2r-1, fail loop, stats 2r
	k=0
	$X/bpftool prog show >/out/pc-stats-$k.txt 2>&1 || rc=1
	r=1
	while [ $r -le "$rounds" ]; do
		timeout 600 $X/probe_cost_verbs rxe0 ok "$n" >>/out/pc-ok.txt 2>&1 || rc=1
		k=$((k + 1))
		$X/bpftool prog show >/out/pc-stats-$k.txt 2>&1 || rc=1
		timeout 600 $X/probe_cost_verbs rxe0 fail "$n" >>/out/pc-fail.txt 2>&1 || rc=1
		k=$((k + 1))
		$X/bpftool prog show >/out/pc-stats-$k.txt 2>&1 || rc=1
		r=$((r + 1))
	done
	echo 0 >/proc/sys/kernel/bpf_stats_enabled
	cat /out/pc-ok.txt /out/pc-fail.txt
	stop_pid $LPID loader || rc=1
	stop_pid $CPID collector || rc=1
	i=0
	while [ ! -s /out/pc-collect.rc ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	tail -n 3 /out/pc-collect.log
	[ "$(cat /out/pc-collect.rc 2>/dev/null)" = 0 ] || rc=1
	# issue 25: the verbs' latency with nothing attached and with the whole set; the success
	# path with the baseline on but not sampled and sampled, against the empty programs
	echo 1 >/proc/sys/kernel/bpf_stats_enabled || rc=1
	dataplane_phase
	echo 0 >/proc/sys/kernel/bpf_stats_enabled
	blr=$(cat $X/bl_rounds 2>/dev/null || echo 0)
	if [ "$blr" -gt 0 ]; then
		echo 1 >/proc/sys/kernel/bpf_stats_enabled || rc=1
		latency none
		collector set || rc=1
		latency set
		stop_pid $CPID "set collector" || rc=1
		empties || rc=1
		baseline_phase u 4000000000
		baseline_phase s 1
		# a kernel with fsession: the same phases pinned to fentry+fexit, for the handler's
		# cost per call by either mechanism in one run
		if [ -s $X/entry_phases ]; then
			baseline_phase uf 4000000000 --baseline-entry fentry
			baseline_phase sf 1 --baseline-entry fentry
		fi
		stop_pid $LPID loader || rc=1
		echo 0 >/proc/sys/kernel/bpf_stats_enabled
		cat /out/pc-lat-*.txt /out/pc-bl-?.txt /out/pc-bl-?f.txt 2>/dev/null
	fi
	# mechanisms: the same syscall loop bare, under an empty fexit and an empty kretprobe
	r=1
	while [ $r -le "$(cat $X/mech_rounds 2>/dev/null || echo 0)" ]; do
		for kind in none fexit kretprobe; do
			objs=$X/mech_$kind.bpf.o
			[ $kind = none ] && objs=
			if [ -n "$objs" ]; then
				rm -f $LPID
				# shellcheck disable=SC2086
				($X/probe_cost_load $objs >/tmp/pc-mech-load.log 2>&1 & echo $! >$LPID; wait) &
				j=0
				while [ ! -s $LPID ] && [ $j -lt 50 ]; do sleep 0.1; j=$((j + 1)); done
				wait_line /tmp/pc-mech-load.log '^ready [1-9]' $LPID || { cat /tmp/pc-mech-load.log; rc=1; }
			fi
			l=$(timeout 600 $X/probe_cost_syscall 100000 2>&1 | grep '^PC ')
			echo "MECH $kind $l" >>/out/pc-mech.txt
			[ -n "$objs" ] && { stop_pid $LPID "$kind loader" || rc=1; }
		done
		r=$((r + 1))
	done
	cat /out/pc-mech.txt 2>/dev/null
	exit $rc
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

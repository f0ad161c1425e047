#!/bin/sh
# Guest hook of scripts/e2e-collect.sh (packed as /extra/guest-hook.sh by it; see
# tests/e2e/README.md "Extension hook"). Runs the live collector around the testbed traffic.
#
#   start: probegen-agent collect --object /extra/probes.bpf.o in the background; waits until it
#          reports its attach line (the pingpong must run with the probes attached)
#   stop:  one more verbs_fail inside a cgroup with job variables (job correlation), the
#          labeled owner set, an RNR retry exceeded (port_rnr: a port error counter moves), a
#          scrape of /metrics, 10 s idle (measured), then SIGTERM; the collector writes its
#          final snapshot and exits 0.
# Everything lands in /out (-> target/e2e/<ver>/): snapshots.jsonl, replay.jsonl,
# collect.log, collect.rc, metrics.txt, vf.log, vf-job.log, owner-fail.log, idle.txt,
# idle-threads.txt, port-rnr.log and the ports' counters (`dev port dir/name value` lines):
# ports-start.txt (before the collector), ports-rnr-before.txt, ports-rnr-after.txt,
# ports-end.txt (after it exited).
X=/extra
PIDF=/tmp/probegen-collect.pid
mkdir -p /out
# INTERVAL (the collector's --interval) and TIMINGS (PROBEGEN_COLLECT_TIMINGS), written by
# scripts/e2e-collect.sh
INTERVAL=1s
TIMINGS=
[ -r $X/hook.env ] && . $X/hook.env
[ -n "$TIMINGS" ] && export PROBEGEN_COLLECT_TIMINGS=$TIMINGS

# every port counter file as `dev port dir/name value` (what the collector reads)
ports_dump() {
	for f in /sys/class/infiniband/*/ports/*/hw_counters/* /sys/class/infiniband/*/ports/*/counters/*; do
		[ -f "$f" ] || continue
		v=$(cat "$f" 2>/dev/null) || continue
		r=${f#/sys/class/infiniband/}
		p=${r#*/ports/}
		echo "${r%%/*} ${p%%/*} ${p#*/} $v"
	done
}

case "$1" in
start)
	[ -x $X/probegen-agent ] || { echo "collect-hook: $X/probegen-agent missing"; exit 1; }
	rm -f /out/collect.rc $PIDF
	ports_dump >/out/ports-start.txt
	# a background subshell waits for the collector and keeps its exit code
	# cgroup v2, as on a job host: the collector resolves cgroup ids of exited processes here
	mkdir -p /sys/fs/cgroup
	mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
	(
		$X/probegen-agent collect --manifest $X/manifest.yaml --object $X/probes.bpf.o \
			--interval $INTERVAL --drain 2ms --out /out/snapshots.jsonl --record /out/replay.jsonl \
			--metrics 127.0.0.1:9464 >/out/collect.stdout 2>/out/collect.log &
		echo $! >$PIDF
		wait $!
		echo $? >/out/collect.rc
	) &
	i=0
	while [ ! -s $PIDF ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	i=0
	while [ $i -lt 600 ]; do
		grep -q '^probegen collect: attached' /out/collect.log 2>/dev/null && break
		kill -0 "$(cat $PIDF)" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	cat /out/collect.log
	grep -q '^probegen collect: attached' /out/collect.log
	;;
stop)
	pid=$(cat $PIDF 2>/dev/null)
	[ -n "$pid" ] || { echo "collect-hook: no collector pid"; exit 1; }
	cp /tmp/vf.log /out/vf.log 2>/dev/null
	# a burst of failing calls across window closes (a job starting on many ranks): 4
	# processes, 30 rounds of the three failures each; every snapshot must account for them
	for i in 1 2 3 4; do
		VERBS_FAIL_REPEAT=30 /usr/bin/verbs_fail rxe0 >/tmp/vf-burst-$i.log 2>&1 &
	done
	wait
	cat /tmp/vf-burst-*.log >/out/vf-burst.log
	# job correlation: a failing process in its own cgroup with job variables set
	mkdir -p /sys/fs/cgroup/probegen-job42
	sh -c 'echo $$ >/sys/fs/cgroup/probegen-job42/cgroup.procs 2>/dev/null;
		exec env SLURM_JOB_ID=42 RANK=3 OTHER=x VERBS_FAIL_LINGER_MS=1500 /usr/bin/verbs_fail rxe0' >/out/vf-job.log 2>&1
	# the labeled set: one child process per induced failure, each line with its owner label
	# (tests/e2e/owner_fail.c; owner accuracy in tests/collector_e2e.rs)
	/usr/bin/owner_fail rxe0 >/out/owner-fail.log 2>/out/owner-fail.err
	# a port error counter that only the NIC knows: SEND without a posted receive, rnr_retry 0
	# (tests/e2e/port_rnr.c); the snapshots' port_counters deltas must be these readings'
	ports_dump >/out/ports-rnr-before.txt
	$X/port_rnr rxe0 >/out/port-rnr.log 2>&1
	ports_dump >/out/ports-rnr-after.txt
	# two snapshots written since the job ended, whatever the --interval: the job's records
	# (and its chains, complete one window later) are in the collector and in the metrics, and
	# the idle period below starts after the traffic's snapshots (the second also re-reads the
	# counters once more, see source/live.rs), not with them
	lines() { wc -l </out/snapshots.jsonl 2>/dev/null || echo 0; }
	n0=$(lines)
	i=0
	while [ "$(lines)" -lt $((n0 + 2)) ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	wget -q -O /out/metrics.txt http://127.0.0.1:9464/metrics || echo "collect-hook: scrape failed"
	# idle: 10 s without RDMA traffic. CPU ticks (utime + stime, fields 14 and 15 of
	# /proc/<pid>/stat, at USER_HZ) and voluntary context switches (the collector's wake-ups).
	# Per thread (/proc/<pid>/task/*): ticks, run time in ns (schedstat, exact where ticks
	# round), wake-ups and involuntary switches -> idle-threads.txt.
	ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
	wakeups() { awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$pid/status"; }
	threads() {
		for t in /proc/$pid/task/*; do
			printf '%s %s %s %s\n' "${t##*/}" "$(awk '{print $2, $14 + $15}' $t/stat)" \
				"$(awk '{print $1}' $t/schedstat 2>/dev/null || echo 0)" \
				"$(awk '/^voluntary_ctxt_switches/ {v = $2} /^nonvoluntary_ctxt_switches/ {n = $2} END {print v, n}' $t/status)"
		done
	}
	# the snapshots written before the idle period: the test's idle windows are the ones after
	idle_from=$(lines)
	th0=$(threads)
	t0=$(ticks) w0=$(wakeups) up0=$(cut -d' ' -f1 /proc/uptime)
	sleep 10
	t1=$(ticks) w1=$(wakeups) up1=$(cut -d' ' -f1 /proc/uptime)
	th1=$(threads)
	# tid comm ticks runtime_ns voluntary nonvoluntary, before and after
	printf '%s\n--\n%s\n' "$th0" "$th1" | awk '
		$1 == "--" { after = 1; next }
		!after { c[$1] = $2; t[$1] = $3; r[$1] = $4; v[$1] = $5; n[$1] = $6; next }
		{ printf "thread tid=%s comm=%s ticks=%d runtime_us=%d wakeups=%d involuntary=%d\n",
			$1, $2, $3 - t[$1], ($4 - r[$1]) / 1000, $5 - v[$1], $6 - n[$1]; total += ($4 - r[$1]) / 1000 }
		END { printf "process runtime_us=%d\n", total }' >/out/idle-threads.txt
	echo "uptime from=$up0 to=$up1" >>/out/idle-threads.txt
	echo "seconds=10 ticks=$((t1 - t0)) wakeups=$((w1 - w0)) hz=$(getconf CLK_TCK 2>/dev/null || echo 100) interval=$INTERVAL snapshots_before=$idle_from" >/out/idle.txt
	cat /out/idle.txt /out/idle-threads.txt
	kill -TERM "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "collect-hook: collector still running after SIGTERM + 30 s"
		kill -KILL "$pid"
		echo timeout >/out/collect.rc
		exit 1
	fi
	i=0
	while [ ! -s /out/collect.rc ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	rc=$(cat /out/collect.rc 2>/dev/null)
	ports_dump >/out/ports-end.txt
	tail -n 5 /out/collect.log
	[ "$rc" = 0 ]
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

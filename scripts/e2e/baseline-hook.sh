#!/bin/sh
# Guest hook of scripts/e2e-baseline.sh (packed as /extra/guest-hook.sh; see
# tests/e2e/README.md "Extension hook"): the good-trace baseline end to end.
#
#   start: probegen-agent collect --baseline (every call of each handler traced), then
#          verbs_baseline success 60: the baseline of reg_mr, create_qp and modify_qp
#   stop:  verbs_baseline benign 3 in 5 jobs (own cgroup, SLURM_JOB_ID): create_qp past the
#          device's capabilities fails, then succeeds; then verbs_baseline fail (reg_mr of
#          unmapped memory, modify_qp RESET -> RTS, reg_mr with a misaligned iova) twice;
#          SIGTERM. Then a second collector
#          with a 4 KiB baseline ring (6 traces) and 4 processes of verbs_baseline burst 150: the traces
#          overflow their ring, the failure records must all arrive. The first collector keeps
#          its baseline in /out/baseline.state (`baseline show` prints it into show.json and
#          show.txt); the burst collector restarts from that file.
# Outputs in /out (-> target/e2e-baseline/<ver>/): baseline.jsonl, burst.jsonl,
# collect.log, burst.log, vb-*.log, collect.rc, burst.rc.
X=/extra
PIDF=/tmp/probegen-baseline.pid
mkdir -p /out
INTERVAL=1s
[ -r $X/hook.env ] && . $X/hook.env

# collector NAME ARGS...: starts it in the background, waits for its attach line
collector() {
	name=$1
	shift
	rm -f /out/$name.rc $PIDF
	(
		$X/probegen-agent collect --manifest $X/manifest.yaml --object $X/probes.bpf.o \
			--interval $INTERVAL --drain 2ms --out /out/$name.jsonl "$@" \
			>/out/$name.stdout 2>/out/$name.log &
		echo $! >$PIDF
		wait $!
		echo $? >/out/$name.rc
	) &
	i=0
	while [ ! -s $PIDF ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	i=0
	while [ $i -lt 900 ]; do
		grep -q '^probegen collect: attached' /out/$name.log 2>/dev/null && break
		kill -0 "$(cat $PIDF)" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	cat /out/$name.log
	grep -q '^probegen collect: attached' /out/$name.log
}

# stop NAME: two more snapshots (the last chains close), SIGTERM, the exit code
stop() {
	name=$1
	pid=$(cat $PIDF 2>/dev/null)
	[ -n "$pid" ] || { echo "baseline-hook: no collector pid"; return 1; }
	n0=$(wc -l </out/$name.jsonl 2>/dev/null || echo 0)
	i=0
	while [ "$(wc -l </out/$name.jsonl)" -lt $((n0 + 2)) ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -TERM "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid"
		echo timeout >/out/$name.rc
		return 1
	fi
	i=0
	while [ ! -s /out/$name.rc ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	tail -n 5 /out/$name.log
	[ "$(cat /out/$name.rc)" = 0 ]
}

case "$1" in
start)
	[ -x $X/probegen-agent ] || { echo "baseline-hook: $X/probegen-agent missing"; exit 1; }
	mkdir -p /sys/fs/cgroup
	mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
	rm -f /out/baseline.state*
	collector baseline --baseline --baseline-sample 1 --baseline-budget 0 \
		--baseline-state /out/baseline.state || exit 1
	$X/verbs_baseline rxe0 success 60 >/out/vb-success.log 2>&1
	;;
stop)
	rc=0
	for j in 1 2 3 4 5; do
		mkdir -p /sys/fs/cgroup/job$j
		sh -c "echo \$\$ >/sys/fs/cgroup/job$j/cgroup.procs 2>/dev/null;
			exec env SLURM_JOB_ID=$j $X/verbs_baseline rxe0 benign 3" >>/out/vb-benign.log 2>&1 || rc=1
	done
	# a gap: the benign jobs' chains close (and are learned) before the new failures
	sleep 2
	$X/verbs_baseline rxe0 fail >>/out/vb-fail.log 2>&1 || rc=1
	$X/verbs_baseline rxe0 fail >>/out/vb-fail.log 2>&1 || rc=1
	stop baseline || rc=1
	# what the first run kept (its table: `baseline show`); then the burst collector
	# restarts from it
	cp /out/baseline.state /out/baseline.state.first || rc=1
	$X/probegen-agent baseline show --state /out/baseline.state --json >/out/show.json 2>&1 || rc=1
	$X/probegen-agent baseline show --state /out/baseline.state >/out/show.txt 2>&1 || rc=1
	# pinned to fentry+fexit: on a kernel with fsession both mechanisms run, and the state
	# file is the same whichever traced it
	collector burst --baseline --baseline-sample 1 --baseline-budget 0 --baseline-entry fentry \
		--baseline-ringbuf-bytes 4096 --baseline-state /out/baseline.state || exit 1
	# wait for these four only: a bare `wait` would wait for the collector too
	pids=
	for i in 1 2 3 4; do
		$X/verbs_baseline rxe0 burst 150 >/tmp/vb-burst-$i.log 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do wait $p || rc=1; done
	cat /tmp/vb-burst-*.log >/out/vb-burst.log
	stop burst || rc=1
	cat /out/vb-*.log
	exit $rc
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

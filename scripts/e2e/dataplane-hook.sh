#!/bin/sh
# Guest hook of scripts/e2e-dataplane.sh (packed as /extra/guest-hook.sh; see
# tests/e2e/README.md "Extension hook"): induced data-plane errors end to end.
#
#   start: probegen-agent collect (the set's data-plane probes attach by fentry)
#   stop:  verbs_dataplane, one job per mode (own cgroup job<id>, SLURM_JOB_ID=<id>):
#          healthy 1500 (3000 good completions), rkey, lkey, rnr, flush 20, cqoverflow,
#          retry (the peer process killed mid-traffic), porterr (the netdev under rxe0 set
#          down and up); two more snapshots, SIGTERM.
# Outputs in /out (-> target/e2e-dataplane/<ver>/out): snapshots.jsonl, collect.log,
# collect.rc, vd.log (the program's VD lines), jobs.txt (`<mode> <job id>` per line).
X=/extra
PIDF=/tmp/probegen-dataplane.pid
mkdir -p /out
INTERVAL=1s
[ -r $X/hook.env ] && . $X/hook.env

# job ID MODE ARGS...: verbs_dataplane in its own cgroup with SLURM_JOB_ID=ID
job() {
	id=$1
	mode=$2
	shift 2
	mkdir -p /sys/fs/cgroup/job$id
	echo "$mode $id" >>/out/jobs.txt
	sh -c "echo \$\$ >/sys/fs/cgroup/job$id/cgroup.procs 2>/dev/null;
		exec env SLURM_JOB_ID=$id $X/verbs_dataplane rxe0 $mode $*" >>/out/vd.log 2>&1
	r=$?
	echo "VD-RC $mode $r" >>/out/vd.log
	return $r
}

case "$1" in
start)
	[ -x $X/probegen-agent ] || { echo "dataplane-hook: $X/probegen-agent missing"; exit 1; }
	mkdir -p /sys/fs/cgroup
	mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
	rm -f /out/collect.rc /out/jobs.txt /out/vd.log $PIDF
	(
		$X/probegen-agent collect --manifest $X/manifest.yaml --object $X/probes.bpf.o \
			--interval $INTERVAL --drain 2ms --out /out/snapshots.jsonl \
			--metrics 127.0.0.1:9464 >/out/collect.stdout 2>/out/collect.log &
		echo $! >$PIDF
		wait $!
		echo $? >/out/collect.rc
	) &
	i=0
	while [ ! -s $PIDF ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	i=0
	while [ $i -lt 900 ]; do
		grep -q '^probegen collect: attached' /out/collect.log 2>/dev/null && break
		kill -0 "$(cat $PIDF)" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	cat /out/collect.log
	grep -q '^probegen collect: attached' /out/collect.log
	;;
stop)
	rc=0
	pid=$(cat $PIDF 2>/dev/null)
	[ -n "$pid" ] || { echo "dataplane-hook: no collector pid"; exit 1; }
	t0=$(date +%s)
	job 201 healthy 1500 || rc=1
	job 202 rkey || rc=1
	job 203 lkey || rc=1
	job 204 rnr || rc=1
	job 205 flush 20 || rc=1
	job 206 cqoverflow || rc=1
	job 207 retry || rc=1
	# last: the link under rxe0 down and up again (init's dummy netdev)
	job 208 porterr tbdummy0 || rc=1
	echo "dataplane-hook: jobs took $(($(date +%s) - t0)) s"
	# two more snapshots: every record of the jobs is in one
	n0=$(wc -l </out/snapshots.jsonl 2>/dev/null || echo 0)
	i=0
	while [ "$(wc -l </out/snapshots.jsonl)" -lt $((n0 + 2)) ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	# the exposition after every job's records: data-plane errors by owner, jobs with QP deaths
	wget -q -O /out/metrics.txt http://127.0.0.1:9464/metrics || echo "dataplane-hook: scrape failed"
	kill -TERM "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid"
		echo timeout >/out/collect.rc
		rc=1
	fi
	i=0
	while [ ! -s /out/collect.rc ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	tail -n 5 /out/collect.log
	[ "$(cat /out/collect.rc)" = 0 ] || rc=1
	cat /out/vd.log
	exit $rc
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

#!/bin/sh
# Guest hook of scripts/e2e-providers.sh (packed as /extra/guest-hook.sh): the mlx5
# provider's error-completion uprobe on Debian's stock kernel, without mlx5 hardware.
#
#   start: provider_uprobe attaches providers/bpf/mlx5_cqe.bpf.o at the file offset
#          generated/providers.yaml names in each staged libmlx5 (bookworm 44.0, trixie 56.1)
#   stop:  mlx5_cqe_call calls bookworm's dump_cqe with a built error CQE (what a job's poll
#          does when the NIC hands it one), then SIGTERM to the loader
#   and the agent: probegen-agent collect --provider-probes (the rxe set for the live run) scans
#          the processes every window; in stop, a job (SLURM_JOB_ID) with an RC QP pair at RTR
#          holds bookworm's library mapped until the agent probes it, then calls dump_cqe three
#          times for its QP (tests/e2e/verbs_dataplane.c, mode provider), while
#          another process calls a copy of it whose build-id no table names (never probed)
# Outputs in /out: uprobe.log (the loader's lines), call.log, targets.txt; snapshots.jsonl,
# collect.log (the agent's), job.log, unknown.log, old.log, new.log, replaced.txt (a library
# replaced under a running job).
X=/extra
PIDF=/tmp/provider-uprobe.pid
APIDF=/tmp/provider-agent.pid
mkdir -p /out

# wait_line <file> <regex> <tenths>: until the line is in the file, at most <tenths> x 0.1 s
wait_line() {
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null && [ $i -lt "$3" ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

# stop_pid <pidfile>: SIGTERM, then up to 30 s for the process to end
stop_pid() {
	pid=$(cat "$1" 2>/dev/null)
	[ -n "$pid" ] || return 0
	kill -TERM "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
case "$1" in
start)
	rm -f /out/uprobe.log $PIDF
	# shellcheck disable=SC2046
	($X/provider_uprobe $X/mlx5_cqe.bpf.o $(cat $X/targets.txt) >/out/uprobe.log 2>&1 &
		echo $! >$PIDF; wait) &
	wait_line /out/uprobe.log '^ready' 300
	cat /out/uprobe.log
	grep -q '^ready [1-9]' /out/uprobe.log || exit 1
	mkdir -p /sys/fs/cgroup
	mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
	($X/probegen-agent collect --manifest $X/manifest.yaml --object $X/probes.bpf.o \
		--interval 1s --out /out/snapshots.jsonl --provider-probes \
		--provider-object $X/mlx5_cqe.bpf.o --provider-table $X/providers.yaml \
		--provider-rescan 1 >/out/collect.stdout 2>/out/collect.log &
		echo $! >$APIDF; wait) &
	wait_line /out/collect.log '^probegen collect: attached' 900
	cat /out/collect.log
	grep -q '^probegen collect: attached' /out/collect.log
	;;
stop)
	cp $X/targets.txt /out/
	rc=0
	# the agent's part: the job's library is probed once the agent's scan sees it mapped
	# shellcheck disable=SC2086
	MLX5_CQE_CALL_WAIT=4 $X/mlx5_cqe_call $(cat $X/unknown.txt) >/out/unknown.log 2>&1 &
	upid=$!
	# shellcheck disable=SC2086
	SLURM_JOB_ID=prov-77 MLX5_CQE_CALL_WAIT=4 \
		$X/verbs_dataplane rxe0 provider $(cat $X/job.txt) >/out/job.log 2>&1 || rc=1
	wait $upid || rc=1
	cat /out/job.log /out/unknown.log
	# a library replaced under a running job (a package upgrade renames a new file over it):
	# the probe made on the old build is detached, the new build named
	lib=$(cut -d' ' -f1 $X/job.txt)
	off=$(cut -d' ' -f2 $X/job.txt)
	R=/tmp/replace/$(basename "$lib")
	mkdir -p /tmp/replace
	cp "$lib" "$R"
	MLX5_CQE_CALL_WAIT=8 $X/mlx5_cqe_call "$R" "$off" 0x111111 0x4 0x99 >/out/old.log 2>&1 &
	opid=$!
	sleep 3
	cp "$(cut -d' ' -f1 $X/unknown.txt)" "$R.new" && mv "$R.new" "$R"
	MLX5_CQE_CALL_WAIT=3 $X/mlx5_cqe_call "$R" "$off" 0x222222 0x4 0x99 >/out/new.log 2>&1 || rc=1
	wait $opid || rc=1
	echo "$R" >/out/replaced.txt
	cat /out/old.log /out/new.log
	sleep 2
	stop_pid $APIDF
	cat /out/collect.log
	# shellcheck disable=SC2086
	$X/mlx5_cqe_call $(cat $X/call.txt) >/out/call.log 2>&1 || rc=1
	cat /out/call.log
	sleep 1
	stop_pid $PIDF
	cat /out/uprobe.log
	exit $rc
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

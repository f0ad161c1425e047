#!/bin/sh
# Guest hook of scripts/e2e-providers.sh (packed as /extra/guest-hook.sh): the mlx5
# provider's error-completion uprobe on Debian's stock kernel, without mlx5 hardware.
#
#   start: provider_uprobe attaches providers/bpf/mlx5_cqe.bpf.o at the file offset
#          generated/providers.yaml names in each staged libmlx5 (bookworm 44.0, trixie 56.1)
#   stop:  mlx5_cqe_call calls bookworm's dump_cqe with a built error CQE (what a job's poll
#          does when the NIC hands it one), then SIGTERM to the loader
# Outputs in /out: uprobe.log (the loader's lines), call.log, targets.txt.
X=/extra
PIDF=/tmp/provider-uprobe.pid
mkdir -p /out
case "$1" in
start)
	rm -f /out/uprobe.log $PIDF
	# shellcheck disable=SC2046
	($X/provider_uprobe $X/mlx5_cqe.bpf.o $(cat $X/targets.txt) >/out/uprobe.log 2>&1 &
		echo $! >$PIDF; wait) &
	i=0
	while ! grep -q '^ready' /out/uprobe.log 2>/dev/null && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	cat /out/uprobe.log
	grep -q '^ready [1-9]' /out/uprobe.log
	;;
stop)
	cp $X/targets.txt /out/
	rc=0
	# shellcheck disable=SC2086
	$X/mlx5_cqe_call $(cat $X/call.txt) >/out/call.log 2>&1 || rc=1
	cat /out/call.log
	sleep 1
	pid=$(cat $PIDF 2>/dev/null)
	[ -n "$pid" ] && kill -TERM "$pid"
	i=0
	while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	cat /out/uprobe.log
	exit $rc
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

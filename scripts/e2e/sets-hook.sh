#!/bin/sh
# Guest hook of scripts/e2e-sets.sh (packed as /extra/guest-hook.sh; see tests/e2e/README.md
# "Extension hook"). The vendor driver modules are loaded by then (init's step
# vendor_modules).
#
#   start: for each set in /extra/sets/<name>/ (manifest.yaml, probes.bpf.o), in turn: the
#          collector loads it (every program through the verifier), attaches it, runs
#          DURATION and exits; prints `TB_STEP set_<name> PASS|FAIL <its summary line>`.
#   stop:  nothing.
# Outputs: /out/sets/<name>/{snapshots.jsonl,collect.log,collect.rc} (-> the host's E2E_OUT);
# tests/sets_e2e.rs compares each set's attach status with its manifest.
X=/extra
DURATION=2s
[ -r $X/hook.env ] && . $X/hook.env

case "$1" in
start)
	[ -x $X/probegen-agent ] || { echo "sets-hook: $X/probegen-agent missing"; exit 1; }
	fail=0
	for d in $X/sets/*/; do
		name=$(basename "$d")
		o=/out/sets/$name
		mkdir -p "$o"
		read -r t0 _ </proc/uptime
		$X/probegen-agent collect --manifest "$d/manifest.yaml" --object "$d/probes.bpf.o" \
			--interval 1s --duration "$DURATION" --out "$o/snapshots.jsonl" >"$o/collect.stdout" 2>"$o/collect.log"
		rc=$?
		read -r t1 _ </proc/uptime
		echo $rc >"$o/collect.rc"
		secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
		summary=$(grep -a '^probegen collect: [0-9]* snapshots' "$o/collect.log" | tail -n 1)
		# the object holds only the probes the manifest calls attachable: N/M with N < M fails
		# here too (tests/sets_e2e.rs names each probe and the kernel's reason)
		counts=$(echo "$summary" | grep -o '[0-9]*/[0-9]* probes attached' | cut -d' ' -f1)
		if [ $rc -eq 0 ] && [ -n "$counts" ] && [ "${counts%/*}" = "${counts#*/}" ]; then
			echo "TB_STEP set_$name PASS ${secs} s: ${summary#probegen collect: }"
		else
			# the verifier's log or the attach error is what the collector printed last
			echo "TB_STEP set_$name FAIL rc=$rc after ${secs} s: $(tail -n 6 "$o/collect.log" | tr '\n' ' ')"
			fail=1
		fi
	done
	[ $fail -eq 0 ]
	;;
stop) ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac

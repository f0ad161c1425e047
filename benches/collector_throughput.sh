#!/usr/bin/env bash
# Collector throughput and memory: decode + snapshot of recorded records through the real
# pipeline (no BPF), on one core, and RSS across a 10x burst. Prints the figures and ratios
# measured in this run.
#
#   benches/collector_throughput.sh [RECORDS]     (default 1000000)
#
# 1. collector_bench (collector/examples): in-process pipeline, every record decoded, kept and
#    serialised to JSON; then RSS over windows of 200k and of 2M records (10x) at the default
#    10k batch cap.
# 2. the command itself: `probegen collect --replay FILE.bin` (raw records written by step 1)
#    pinned to one core with taskset, JSONL to a file, wall time and peak RSS (GNU time), for
#    a file of RECORDS and one of 10 x RECORDS.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cargo build --release --bin probegen --example collector_bench -p collector -p probegen >&2
BENCH=target/release/examples/collector_bench
PG=target/release/probegen
M=generated/linux-6.12/rxe/manifest.yaml

echo "== in-process pipeline ($N records)"
taskset -c 0 "$BENCH" "$N" "$TMP/1x.bin"
"$BENCH" 100000 "$TMP/unused.bin" >/dev/null
# 10x file: the 1x file ten times (records repeat their seq: counted as reordering, harmless)
for _ in $(seq 10); do cat "$TMP/1x.bin"; done >"$TMP/10x.bin"

run() { # run <file> <records>
	local f=$1 n=$2 t
	/usr/bin/time -f '%e %M' -o "$TMP/time" taskset -c 0 "$PG" collect --manifest "$M" \
		--replay "$f" --replay-window 100000 --rotate-bytes 0 --out "$TMP/s.jsonl" 2>"$TMP/err" || {
		cat "$TMP/err" >&2
		return 1
	}
	read -r t rss <"$TMP/time"
	awk -v n="$n" -v t="$t" -v r="$rss" -v s="$(stat -c %s "$TMP/s.jsonl")" 'BEGIN {
		printf "  %d records: %.2f s = %.2f M records/s, peak RSS %d KiB, %.0f MB JSONL\n", n, t, n / t / 1e6, r, s / 1e6 }'
	rm -f "$TMP/s.jsonl"
	echo "$rss" >"$TMP/rss.$n"
}
echo "== probegen collect --replay (raw records, windows of 100k records, default 10k batch cap)"
run "$TMP/1x.bin" "$N"
run "$TMP/10x.bin" $((N * 10))
awk -v a="$(cat "$TMP/rss.$N")" -v b="$(cat "$TMP/rss.$((N * 10))")" \
	'BEGIN { printf "  peak RSS 10x / 1x = %.3f\n", b / a }'

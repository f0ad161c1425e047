#!/usr/bin/env bash
# The mlx5 provider's error completion, seen where only user space sees it (issue 34): in the
# Soft-RoCE qemu testbed (scripts/e2e.sh) on Debian's stock kernel, the uprobe of
# providers/bpf/mlx5_cqe.bpf.c attaches at the file offset generated/providers.yaml resolved
# for Debian's stripped libmlx5 of bookworm (44.0) and trixie (56.1) (no symbol, no debug
# info), and a call of bookworm's own dump_cqe with an error CQE (no mlx5 hardware in the
# guest: tests/e2e/mlx5_cqe_call.c calls it as the poll's error branch does) is recorded with
# its QP number, syndrome, vendor syndrome and process; seen == received + dropped. Then the
# agent itself (`probegen-agent collect --provider-probes`, the rxe set for its live run) finds
# the library a job maps, probes it, and its snapshots carry the job's error completions (one
# entry per QP, counted), while a copy with a build-id no table names is named and never
# probed: tests/providers_e2e.rs checks them.
#
#   scripts/e2e-providers.sh 6.12|7.2|...    (PROBEGEN_RDMA_CORE_BOOKWORM, _TRIXIE: the roots
#                                             scripts/fetch-rdma-core.sh prints)
# Outputs: target/e2e-providers/<ver>/out/{uprobe.log,call.log,snapshots.jsonl,collect.log,...}.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SERIES (6.12, 7.2, ...)" >&2; exit 2; }
VER=$1
case "$VER" in [0-9]*.[0-9]* ) ;; *) echo "usage: $0 SERIES (6.12, 7.2, ...)" >&2; exit 2 ;; esac
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
STAGE=$REPO/target/e2e-providers/$VER/extra
OUT=${E2E_OUT:-$REPO/target/e2e-providers/$VER/out}
log() { printf '[e2e-providers %s] %s\n' "$VER" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }
TABLE=generated/providers.yaml
# the QP number, syndrome (0x04: local protection) and vendor syndrome the call's CQE carries
QPN=0x123456 SYNDROME=0x4 VENDOR=0x99
# the QP of the process whose library no table names (the agent's job's QP is a real one)
UNKNOWN_QPN=0xabcdef

rm -rf "$STAGE"
mkdir -p "$STAGE"
: >"$STAGE/targets.txt"
for suite in bookworm trixie; do
	var=PROBEGEN_RDMA_CORE_${suite^^}
	root=${!var:-}
	[ -n "$root" ] || fail "$var is not set: export $var=\$(scripts/fetch-rdma-core.sh $suite | tail -n 1)"
	lib=$(find "$root/usr/lib/x86_64-linux-gnu" -maxdepth 1 -type f -name 'libmlx5.so.1.*' | head -n 1)
	[ -n "$lib" ] || fail "$root: no libmlx5.so.1.* (rerun scripts/fetch-rdma-core.sh $suite)"
	id=$(readelf -n "$lib" | awk '/Build ID:/ { print $3 }')
	# the table's offset for this build-id (never a symbol: the library has none)
	off=$(awk -v id="$id" '/^  build_id:/ { b = $2 } /^  offset:/ && b == id { print $2; exit }' "$TABLE")
	[ -n "$off" ] || fail "build-id $id ($lib) is not in $TABLE"
	mkdir -p "$STAGE/$suite"
	cp "$lib" "$STAGE/$suite/"
	echo "/extra/$suite/$(basename "$lib"):$off" >>"$STAGE/targets.txt"
	if [ "$suite" = bookworm ]; then
		echo "/extra/$suite/$(basename "$lib") $off $QPN $SYNDROME $VENDOR" >"$STAGE/call.txt"
		echo "/extra/$suite/$(basename "$lib") $off" >"$STAGE/job.txt"
		# the same code under a build-id no table names (its last byte changed): a rebuild
		mkdir -p "$STAGE/unknown"
		cp "$lib" "$STAGE/unknown/"
		unknown=$STAGE/unknown/$(basename "$lib")
		note=$(readelf -W -S "$unknown" | sed -n 's/.*\.note\.gnu\.build-id *NOTE *[0-9a-f]* \([0-9a-f]*\) .*/\1/p')
		[ -n "$note" ] || fail "$lib: no .note.gnu.build-id section"
		# the note: namesz, descsz, type (4 bytes each), "GNU\0", then the 20-byte id
		printf '\xff' | dd of="$unknown" bs=1 seek=$((0x$note + 16 + 19)) conv=notrunc status=none
		echo "/extra/unknown/$(basename "$lib") $off $UNKNOWN_QPN $SYNDROME $VENDOR" >"$STAGE/unknown.txt"
	fi
done
clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu \
	-c providers/bpf/mlx5_cqe.bpf.c -o "$STAGE/mlx5_cqe.bpf.o"
gcc -O2 -Wall -Wextra -Werror -o "$STAGE/provider_uprobe" tests/e2e/provider_uprobe.c -lbpf
gcc -O2 -Wall -Wextra -Werror -o "$STAGE/mlx5_cqe_call" tests/e2e/mlx5_cqe_call.c -ldl
gcc -O2 -Wall -Wextra -o "$STAGE/verbs_dataplane" tests/e2e/verbs_dataplane.c -libverbs -ldl
install -m 755 scripts/e2e/providers-hook.sh "$STAGE/guest-hook.sh"
# the agent, a set for its live run (rxe's), the uprobe and the table as the package ships them
. scripts/e2e/stage.sh
stage_agent "$STAGE"
stage_set "generated/linux-$VER/rxe" "$STAGE"
cp "$TABLE" "$STAGE/providers.yaml"

rc=0
start=$(date +%s)
E2E_TIMEOUT=${E2E_TIMEOUT:-300} E2E_OUT=$OUT E2E_EXTRA_DIR=$STAGE bash scripts/e2e.sh "$VER" || rc=$?
log "scripts/e2e.sh exited $rc after $(($(date +%s) - start)) s"
[ -s "$OUT/uprobe.log" ] || fail "no uprobe.log (see $OUT/console.log)"

# both builds attached at their resolved offsets
while IFS=: read -r path off; do
	grep -qx "attached $path $(printf '%#x' "$off")" "$OUT/uprobe.log" \
		|| fail "$path: not attached at $off: $(grep -F "$path" "$OUT/uprobe.log" || echo no line)"
	log "attached $path at file offset $off"
done <"$STAGE/targets.txt"
# the one error CQE, as the CQE said, from the calling process
pid=$(sed -n 's/.* pid=\([0-9]*\)$/\1/p' "$OUT/call.log")
[ -n "$pid" ] || fail "the call did not run: $(cat "$OUT/call.log")"
want="cqe tgid=$pid qpn=$QPN syndrome=$SYNDROME vendor_syndrome=$VENDOR opcode=0xd"
# (the loader's uprobe also sees the agent's job's three calls of the same library)
[ "$(grep -c "^cqe .* qpn=$QPN " "$OUT/uprobe.log")" = 1 ] || fail "expected one cqe line of QP $QPN: $(grep '^cqe ' "$OUT/uprobe.log")"
grep -qx "$want" "$OUT/uprobe.log" || fail "expected '$want', got '$(grep '^cqe ' "$OUT/uprobe.log")'"
n=$(grep -c '^cqe ' "$OUT/uprobe.log")
grep -qx "counts seen=$n dropped=0 received=$n" "$OUT/uprobe.log" \
	|| fail "accounting ($n records): $(grep '^counts' "$OUT/uprobe.log" || echo none)"
log "recorded: $want; seen $n = received $n + dropped 0"
[ $rc -eq 0 ] || fail "the testbed reported a failed step (exit $rc)"
# the agent's snapshots: what tests/providers_e2e.rs checks
PROBEGEN_E2E_OUT=$OUT PROBEGEN_E2E_UNKNOWN_QPN=$UNKNOWN_QPN \
	PROBEGEN_E2E_LIBRARY=$(cut -d' ' -f1 "$STAGE/job.txt") \
	PROBEGEN_E2E_UNKNOWN=$(cut -d' ' -f1 "$STAGE/unknown.txt") \
	cargo test --release --test providers_e2e -- --ignored --nocapture \
	|| fail "the agent's provider stage (tests/providers_e2e.rs)"
log "passed"

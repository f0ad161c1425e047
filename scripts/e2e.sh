#!/usr/bin/env bash
# Soft-RoCE end-to-end testbed: boots Debian's stock kernel under qemu (TCG),
# loads rdma_rxe, runs ibv_rc_pingpong and tests/e2e/verbs_fail in the guest.
#
#   scripts/e2e.sh 7.2|6.12|6.1   (any series scripts/fetch-kernel.sh resolves)
#
# Environment:
#   PROBEGEN_CACHE      cache root (default ~/.cache/probegen); kernels go to <cache>/e2e/<ver>/
#   E2E_EXTRA_DIR       directory packed at /extra in the guest; /extra/guest-hook.sh start|stop
#                       is run around the traffic, files it writes under /out/ land in
#                       target/e2e/<ver>/
#   E2E_BOOT            auto (default: PVH if possible, else bzImage) | pvh | bzimage
#   E2E_ACCEL           tcg (default) | kvm (only on hosts with real hardware KVM: pitfall 1)
#   E2E_TIMEOUT         qemu wall-clock limit in seconds (default 240)
#   E2E_MEM             guest RAM in MiB (default 2048)
#   E2E_APPEND          extra kernel command line
#   E2E_FLAVOR          a Debian flavor of the series (amd64 by default; cloud, rt: what
#                       scripts/fetch-kernel.sh --list shows): its binary packages are booted
#   E2E_KERNEL_VERSION  an exact Debian version of the series instead of its default
#   E2E_KERNEL_PKG      .deb files (space-separated paths) booted instead of Debian's packages
#                       of the series: a fleet's own kernel build (image, or binary + modules +
#                       base); the series argument still names the sets' kernel
#   E2E_MODULE_DIRS     module directories (drivers/infiniband/hw ...) whose every module is
#                       packed with its modules.dep closure and loaded (step vendor_modules)
#   E2E_EXTRA_MODULES   more module names loaded the same way
#   E2E_OUT             output directory (default target/e2e/<ver>)
#   E2E_STRIP_BTF       module names packed with their .BTF section removed (objcopy), as
#                       out-of-tree builds ship them (e.g. rdma_rxe)
#
# Output: every TB_STEP line, then "N passed, N failed"; exit 0 only if all passed.
# Artifacts: target/e2e/<ver>/{console.log,dmesg.txt,<hook files>}.
set -euo pipefail

usage() { echo "usage: $0 SERIES (7.2, 6.12, 6.1)" >&2; exit 2; }
[ $# -eq 1 ] || usage
E2E_VER=$1
case "$E2E_VER" in [0-9]*.[0-9]* ) ;; *) usage ;; esac

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
E2E_DIR=$REPO/scripts/e2e
# shellcheck source=e2e/lib.sh
. "$E2E_DIR/lib.sh"

# one cache per kernel booted: a flavor or own packages never reuse the series' default tree
E2E_TAG=$E2E_VER${E2E_FLAVOR:+-$E2E_FLAVOR}${E2E_KERNEL_PKG:+-pkg}
CACHE=${PROBEGEN_CACHE:-$HOME/.cache/probegen}/e2e/$E2E_TAG
BUILD=$CACHE/build
INITRAMFS=$CACHE/initramfs.cpio.gz
OUT=${E2E_OUT:-$REPO/target/e2e/$E2E_VER}
EXPECTED_STEPS=(modules rxe_link devinfo pingpong verbs_fail)
if [ -n "${E2E_MODULE_DIRS:-}${E2E_EXTRA_MODULES:-}" ]; then EXPECTED_STEPS+=(vendor_modules); fi
T_START=$(now)

[ "$(id -u)" = 0 ] || die "run as root (apt-get, depmod on the cache tree)"
mkdir -p "$CACHE"
rm -rf "$OUT"
mkdir -p "$OUT"

ensure_packages
prepare_kernel
build_initramfs

BOOT=${E2E_BOOT:-auto}
ACCEL=${E2E_ACCEL:-tcg}
TIMEOUT=${E2E_TIMEOUT:-240}
VMLINUX=
if [ "$BOOT" != bzimage ]; then
	VMLINUX=$(pvh_vmlinux)
	if [ -z "$VMLINUX" ] && [ "$BOOT" = pvh ]; then die "E2E_BOOT=pvh but no PVH vmlinux"; fi
fi

case "$ACCEL" in
tcg) ACCEL_ARGS=(-accel tcg,thread=multi -cpu max) ;;
kvm) ACCEL_ARGS=(-accel kvm -cpu host) ;;
*) die "E2E_ACCEL must be tcg or kvm" ;;
esac

RAW=$CACHE/console.raw
QEMU_PID=
cleanup() { [ -n "$QEMU_PID" ] && kill "$QEMU_PID" 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# boot <kernel image>: runs qemu; sets QEMU_RC (124 = timeout) and INIT_SEEN.
boot() {
	local kernel=$1 t0 deadline_init
	t0=$(now)
	: >"$RAW"
	timeout -k 5 "$TIMEOUT" qemu-system-x86_64 "${ACCEL_ARGS[@]}" \
		-m "${E2E_MEM:-2048}" -smp 2 -nographic -no-reboot -nic none \
		-serial mon:stdio -kernel "$kernel" -initrd "$INITRAMFS" \
		-append "console=ttyS0 panic=-1 quiet loglevel=1 ${E2E_APPEND:-}" \
		</dev/null >"$RAW" 2>&1 &
	QEMU_PID=$!
	INIT_SEEN=0
	# a kernel that never reaches /init (e.g. PVH not working) is abandoned after 60 s
	deadline_init=$(awk -v a="$t0" 'BEGIN { printf "%d", a + 60 }')
	while kill -0 "$QEMU_PID" 2>/dev/null; do
		if [ $INIT_SEEN = 0 ]; then
			if grep -qa E2E_INIT_START "$RAW"; then
				INIT_SEEN=1
				log "reached /init after $(elapsed "$t0") s (host wall)"
			elif [ "$(date +%s)" -ge "$deadline_init" ]; then
				log "no /init after 60 s: stopping qemu"
				kill "$QEMU_PID" 2>/dev/null || true
			fi
		fi
		sleep 0.2
	done
	QEMU_RC=0
	wait "$QEMU_PID" || QEMU_RC=$?
	QEMU_PID=
	if grep -qa E2E_INIT_START "$RAW"; then INIT_SEEN=1; fi
	log "qemu exited rc=$QEMU_RC after $(elapsed "$t0") s"
}

if [ -n "$VMLINUX" ]; then
	log "booting $KREL (PVH vmlinux, $ACCEL)"
	boot "$VMLINUX"
	if [ "$INIT_SEEN" = 0 ] && [ "$BOOT" = auto ]; then
		log "PVH boot did not reach /init: falling back to the bzImage"
		cp "$RAW" "$OUT/console-pvh-failed.log"
		VMLINUX=
	fi
fi
if [ -z "$VMLINUX" ]; then
	log "booting $KREL (bzImage, $ACCEL)"
	boot "$BZIMAGE"
fi

clean_console "$RAW" "$OUT/console.log"
extract_files "$OUT/console.log" "$OUT"

# ------------------------------------------------------------------ verdict ---
passed=0
failed=0
echo "== e2e $E2E_VER: $DEBS($KREL)"
grep -a '^TB_STEP ' "$OUT/console.log" >"$CACHE/steps.txt" || true
while read -r _ _ result _; do
	case "$result" in
	PASS) passed=$((passed + 1)) ;;
	*) failed=$((failed + 1)) ;;
	esac
done <"$CACHE/steps.txt"
cat "$CACHE/steps.txt"
for s in "${EXPECTED_STEPS[@]}"; do
	if ! awk -v s="$s" '$2 == s { found = 1 } END { exit !found }' "$CACHE/steps.txt"; then
		echo "TB_STEP $s FAIL missing (not reported by the guest)"
		failed=$((failed + 1))
	fi
done
rc=0
if [ "$QEMU_RC" = 124 ] || [ "$QEMU_RC" = 137 ]; then
	echo "TIMEOUT: qemu killed after ${TIMEOUT} s"
	rc=1
elif ! grep -qa '^E2E_DONE' "$OUT/console.log"; then
	echo "guest did not finish (qemu rc=$QEMU_RC); see $OUT/console.log"
	rc=1
fi
if [ $rc -ne 0 ]; then
	# CI keeps only what is printed: the console's last lines that are not a shipped file's
	# base64 carry what stopped the guest (a panic, an oops, the OOM killer, init exiting),
	# also when it interrupted a file
	echo "the console's last lines, files' base64 left out:"
	grep -av -E '^[A-Za-z0-9+/]*={0,2}$' "$OUT/console.log" | tail -n 40 | sed 's/^/  | /'
fi
log "guest $(grep -a -m1 '^E2E_INIT_START' "$OUT/console.log" | grep -o 'uptime=[0-9.]*' || true) -> $(grep -a -m1 '^E2E_DONE' "$OUT/console.log" | grep -o 'uptime=[0-9.]*' || true); total $(elapsed "$T_START") s; outputs in ${OUT#"$REPO"/}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || rc=1
exit $rc

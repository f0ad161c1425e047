#!/bin/busybox sh
# Guest /init of the Soft-RoCE testbed (packed by scripts/e2e.sh).
#
# Prints `TB_STEP <name> PASS|FAIL <detail>` per step, ships files to the host as
#   E2E_FILE_BEGIN <name> / base64 lines / E2E_FILE_END <name>
# and powers off. Busybox applets win over $PATH (pitfall 4): the iproute2 tools
# are always called by full path.

/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root
umask 022

mkdir -p /proc /sys /dev /tmp /run /root /out
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpffs /sys/fs/bpf 2>/dev/null
# Keep kernel messages off the console: they would interleave with our lines.
dmesg -n 1 2>/dev/null

# SeaBIOS leaves its last line unterminated (pitfall 15): start on a fresh line.
echo
read -r UPTIME_START _ </proc/uptime
echo "E2E_INIT_START kernel=$(uname -r) uptime=${UPTIME_START}"

IP=/usr/sbin/ip
RDMA=/usr/bin/rdma
HOOK=/extra/guest-hook.sh

step() { # step <name> PASS|FAIL <detail...>  (detail: whitespace collapsed, one line)
	_n=$1 _r=$2
	shift 2
	_d=$(printf '%s' "$*" | tr -s ' \t\n' '   ' | sed 's/^ //; s/ $//')
	echo "TB_STEP $_n $_r $_d"
}

send_file() { # send_file <path> <name>
	[ -f "$1" ] || return 0
	echo "E2E_FILE_BEGIN $2"
	base64 "$1"
	echo "E2E_FILE_END $2"
}

# Wait until the serial port has sent what the shell wrote: a write returns once the bytes are
# in the port's buffer (up to a page), and `poweroff -f` does not wait for the rest. An rt
# kernel sends from a thread, slower under TCG: a 6.12-rt run in CI lost the end of dmesg.txt
# and E2E_DONE that way. Done when the transmit count is still for 0.3 s (10 s at most).
drain_console() {
	_last= _still=0 _i=0
	while [ $_i -lt 100 ] && [ $_still -lt 3 ]; do
		_tx=$(grep -o 'tx:[0-9]*' /proc/tty/driver/serial 2>/dev/null | tr '\n' ' ')
		[ -n "$_tx" ] || { sleep 1; return 0; }
		if [ "$_tx" = "$_last" ]; then _still=$((_still + 1)); else _still=0; fi
		_last=$_tx
		sleep 0.1
		_i=$((_i + 1))
	done
}

finish() {
	if [ -d /out ]; then
		(cd /out && find . -type f) | sed 's|^\./||' | sort | while read -r f; do
			send_file "/out/$f" "$f"
		done
	fi
	dmesg >/tmp/dmesg.txt 2>&1
	send_file /tmp/dmesg.txt dmesg.txt
	read -r UPTIME_END _ </proc/uptime
	echo "E2E_DONE uptime=${UPTIME_END}"
	sync
	drain_console
	poweroff -f
	echo o >/proc/sysrq-trigger
	sleep 10
}

# --- 1. modules ------------------------------------------------------------------
# rxe allocates the crc32 shash at link-add time and the kernel's request_module
# needs /sbin/modprobe (pitfall 5): load crc32_generic explicitly.
# 7.x has no crc32_generic (rxe uses the crc32 library): optional, like crc32_pclmul.
WANT_MODS="rdma_rxe ib_uverbs ib_core dummy rdma_ucm"
modprobe crc32_generic >/dev/null 2>&1
modprobe -a $WANT_MODS >/tmp/modprobe.log 2>&1
modprobe crc32_pclmul >/dev/null 2>&1
missing=
for m in $WANT_MODS; do
	grep -q "^$m " /proc/modules || missing="$missing $m"
done
loaded=$(awk '{printf "%s ", $1}' /proc/modules)
if [ -z "$missing" ]; then
	step modules PASS "$loaded"
else
	step modules FAIL "missing:$missing; loaded: $loaded; $(tr '\n' ' ' </tmp/modprobe.log)"
fi

# --- 1b. vendor driver modules (E2E_MODULE_DIRS / E2E_EXTRA_MODULES of scripts/e2e.sh) ----
# Each one alone, so that a failure names its module and carries what the kernel said while
# loading it (a driver loads without its hardware: it registers and waits for a device).
if [ -s /etc/e2e-vendor-modules ]; then
	read -r t0 _ </proc/uptime
	ok= bad=
	for m in $(cat /etc/e2e-vendor-modules); do
		before=$(dmesg | wc -l)
		out=$(modprobe "$m" 2>&1)
		rc=$?
		if [ $rc -eq 0 ] && [ -d "/sys/module/$m" ]; then
			ok="$ok $m"
		else
			kmsg=$(dmesg | tail -n +$((before + 1)) | tail -n 8 | tr '\n' ' ')
			bad="$bad | $m: modprobe rc=$rc $(echo "$out" | tr '\n' ' ') kernel: ${kmsg:-(nothing)}"
		fi
	done
	read -r t1 _ </proc/uptime
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	if [ -z "$bad" ]; then
		step vendor_modules PASS "$(echo $ok | wc -w) in ${secs} s:$ok"
	else
		step vendor_modules FAIL "${bad# | } (loaded:$ok)"
	fi
fi

# --- 2. rxe link on a dummy netdev ---------------------------------------------
$IP link set lo up
{
	$IP link add tbdummy0 type dummy &&
	$IP link set tbdummy0 up &&
	$IP addr add 127.0.0.2/32 dev tbdummy0 &&
	$RDMA link add rxe0 type rxe netdev tbdummy0
} >/tmp/link.log 2>&1
link_rc=$?
link=
i=0
while [ $i -lt 100 ]; do
	link=$($RDMA link show rxe0/1 2>&1)
	case "$link" in *"state ACTIVE"*) break ;; esac
	sleep 0.1
	i=$((i + 1))
done
link=$(echo "$link" | tr -s ' \n' '  ')
case "$link" in
*"state ACTIVE"*) [ $link_rc -eq 0 ] && step rxe_link PASS "$link" || step rxe_link FAIL "rc=$link_rc $link" ;;
*) step rxe_link FAIL "rc=$link_rc $(tr '\n' ' ' </tmp/link.log) | $link" ;;
esac

# --- hook start ---------------------------------------------------------------
if [ -f "$HOOK" ]; then
	sh "$HOOK" start
	rc=$?
	[ $rc -eq 0 ] && step hook_start PASS "rc=0" || step hook_start FAIL "rc=$rc"
fi

# --- 3. ibv_devinfo -------------------------------------------------------------
ibv_devinfo -d rxe0 -v >/tmp/devinfo.log 2>&1
dv_rc=$?
gid1=$(grep -m1 'GID\[ *1\]' /tmp/devinfo.log | sed 's/^[[:space:]]*//')
if [ $dv_rc -eq 0 ] && grep -q PORT_ACTIVE /tmp/devinfo.log; then
	step devinfo PASS "$(grep -m1 -o 'state:.*PORT_ACTIVE.*' /tmp/devinfo.log | tr -s ' \t' '  ') | $gid1"
else
	step devinfo FAIL "rc=$dv_rc $(head -c 400 /tmp/devinfo.log | tr '\n' ' ')"
fi

# --- 4. ibv_rc_pingpong server + client ------------------------------------------
PP="ibv_rc_pingpong -d rxe0 -g 1 -n 1000"
timeout 60 $PP >/tmp/pp_server.log 2>&1 &
srv=$!
# wait until the server listens on TCP 18515 (0x4853)
i=0
while [ $i -lt 100 ]; do
	grep -qE ':4853 [0-9A-F]+:0000 0A' /proc/net/tcp /proc/net/tcp6 2>/dev/null && break
	sleep 0.1
	i=$((i + 1))
done
timeout 60 $PP 127.0.0.1 >/tmp/pp_client.log 2>&1
cli_rc=$?
wait $srv
srv_rc=$?
iters=$(grep -m1 '1000 iters in' /tmp/pp_client.log)
bytes=$(grep -m1 'bytes in' /tmp/pp_client.log)
if [ $cli_rc -eq 0 ] && [ $srv_rc -eq 0 ] && [ -n "$iters" ]; then
	step pingpong PASS "$bytes | $iters"
else
	step pingpong FAIL "client rc=$cli_rc server rc=$srv_rc | client: $(tail -c 300 /tmp/pp_client.log | tr '\n' ' ') | server: $(tail -c 300 /tmp/pp_server.log | tr '\n' ' ')"
fi

# --- 5. verbs_fail ----------------------------------------------------------------
timeout 30 /usr/bin/verbs_fail rxe0 >/tmp/vf.log 2>/tmp/vf.err
vf_rc=$?
cat /tmp/vf.err /tmp/vf.log
nmatch=$(grep -c '^VF .* MATCH$' /tmp/vf.log)
if [ $vf_rc -eq 0 ] && [ "$nmatch" -eq 3 ]; then
	step verbs_fail PASS "$(sed 's/^VF //; s/ pid=[0-9]*//' /tmp/vf.log | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
else
	step verbs_fail FAIL "rc=$vf_rc matched=$nmatch/3 $(cat /tmp/vf.log /tmp/vf.err | tr '\n' ' ')"
fi

# --- hook stop ----------------------------------------------------------------
if [ -f "$HOOK" ]; then
	sh "$HOOK" stop
	rc=$?
	[ $rc -eq 0 ] && step hook_stop PASS "rc=0" || step hook_stop FAIL "rc=$rc"
fi

finish

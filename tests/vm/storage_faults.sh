#!/bin/bash
# Guest test: faults under NVMe over Fabrics I/O (nvme-rdma host, nvmet-rdma
# target, both on mbcf0 as in nvmeof.sh), each with fio's I/O in flight:
#   c. the target's port removed while the host is connected: nvme-rdma
#      loses its queues and reconnects every reconnect_delay (1 s); the port
#      comes back after two failed attempts; the host reconnects, the
#      requeued I/O completes and fio verifies every block;
#   g. the port removed for good: exactly ctrl_loss_tmo / reconnect_delay
#      (8) failed attempts, then the controller is removed and fio's I/O
#      fails (EIO);
#   a. `rdma link delete mbcf0`, b. `ip link del veth0` (its mbcf0 goes with
#      it), d. `rmmod mbcf`: the RDMA core's client removal tears the ULPs
#      down (nvme-rdma deletes its controllers at once, no reconnect;
#      nvmet-rdma drops its queues and its listener), fio's I/O fails, the
#      removal completes -- as rxe's and siw's do.
# After every case: nothing hangs (every wait has a deadline; a task stuck
# in the kernel fails the test with its stack), no nvme controller is left,
# fio has exited, mbcf0 (made again where it was removed) holds exactly the
# PDs, QPs, CM ids and MRs it held with only the target listening (an MR
# leaked on a removed device would trip mbcf_mr_dev_fini's WARN, which the
# kernel-log scan catches), no page is left pinned.  At the end a clean
# connect + fio verify, teardown, every module unloads, the log is clean.
#   tests/vm/run.sh --build BUILD tests/vm/storage_faults.sh [CASES]
# CASES: a subset of "c g a b d" (default: all, in that order).
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"
# shellcheck source=storage-lib.sh
. "$(dirname "${MBCF_VM_LIB:-$0}")/storage-lib.sh"

vm_require_mbcf

failed=0
check() {
	"$@" || failed=$((failed + 1))
}
NQN=nqn.2026-12.org.example:mbcf-faults
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6d62636f-0000-4000-8000-000000000002
HOSTID=6d62636f-0000-4000-8000-000000000002
LOSS_TMO=8	# ctrl_loss_tmo: with RECONNECT_DELAY 1, 8 attempts
RECONNECT_DELAY=1
logs=/var/tmp/storage_faults
mkdir -p "$logs"
cases=${1:-c g a b d}

rdma link delete rxe0 || vm_die "cannot remove rxe0"
pins0=$(vm_pins_held)
base=$(vm_kres mbcf0)
vm_log "mbcf0 resources before: $base; pinned pages: $pins0"

stl_configfs_brd || exit 1
stl_modprobe nvmet nvmet-rdma nvme-fabrics nvme-rdma

# --- helpers -------------------------------------------------------------------
# since MARK: the kernel log after line MARK (vm_dmesg_mark's count)
since() { dmesg | tail -n +"$(($1 + 1))"; }

# diag WHAT: the state of things when WHAT did not finish in time
diag() {
	echo "  diagnostics after: $1"
	ls /sys/class/nvme 2>&1 | sed 's/^/  nvme | /'
	rdma resource show 2>&1 | sed 's/^/  res | /'
	echo w >/proc/sysrq-trigger
	dmesg | tail -n 80 | sed 's/^/  dmesg | /'
}

# bounded SECS CMD...: CMD, which must end within SECS, else diag and the
# end of the script (stl_bounded); its status and time logged.
bounded() {
	local t0=$EPOCHREALTIME rc
	stl_bounded "$1" diag "${@:2}"
	rc=$?
	vm_log "${*:2}: status $rc in $(vm_elapsed_since "$t0") s"
	return "$rc"
}

# wait_for SECS WHAT CMD...: poll CMD (0.3 s) until it succeeds, for at most
# SECS; a FAIL line if it never does.
wait_for() {
	local secs=$1 end=$((SECONDS + $1)) what=$2
	shift 2
	until "$@"; do
		if [ "$SECONDS" -ge "$end" ]; then
			vm_fail "$what: not within $secs s"
			return 1
		fi
		sleep 0.3
	done
}

# port_add: the target's port, its link tried for 15 s (a device made a
# moment ago may not have the address's GID yet), its listener up
port_add() {
	stl_nvmet_port_add 1 rdma "$VM_IP0" 4420 "$NQN" 50 ||
		{ vm_fail "nvmet port: no listener"; return 1; }
	vm_wait_listen 4420
}

port_del() { stl_nvmet_port_del 1 "$NQN"; }

# ctrls: the nvme controllers of NQN (nvme0 ...), one a line
ctrls() {
	local d n
	for d in /sys/class/nvme/nvme*; do
		read -r n 2>/dev/null <"$d/subsysnqn" || continue
		[ "$n" = "$NQN" ] && echo "${d##*/}"
	done
}
no_ctrl() { [ -z "$(ctrls)" ]; }

connect() {
	local out
	out=$(timeout 120 nvme connect -t rdma -a "$VM_IP0" -s 4420 -n "$NQN" \
		--hostnqn="$HOSTNQN" --hostid="$HOSTID" \
		--ctrl-loss-tmo="$LOSS_TMO" --reconnect-delay="$RECONNECT_DELAY" 2>&1) || {
		vm_fail "nvme connect: $out"
		return 1
	}
	DEV=
	local end=$((SECONDS + 60))
	until DEV=$(stl_nvme_dev "$NQN"); do
		[ "$SECONDS" -ge "$end" ] && { vm_fail "no block device for $NQN"; return 1; }
		sleep 0.2
	done
	CTRL=$(ctrls | head -n 1)
	vm_log "connected: $CTRL, $DEV"
}

# writes: writes completed on the nvme block devices so far (field 5 of
# their stat; the multipath head of 6.1 keeps none, its path disk does)
writes() {
	local f s n=0
	for f in /sys/class/block/nvme*/stat; do
		read -r -a s 2>/dev/null <"$f" || continue
		n=$((n + ${s[4]:-0}))
	done
	echo "$n"
}
writes_past() { [ "$(writes)" -ge "$1" ]; }

# fio_start NAME ARGS...: fio on $DEV in the background (FIO_PID); it has
# done 64 writes when this returns, so the fault comes with I/O in flight.
fio_start() {
	local name=$1 w0
	shift
	w0=$(writes)
	fio --name="$name" --filename="$DEV" --direct=1 --ioengine=libaio \
		--iodepth=16 --rw=randwrite --bs=4k "$@" >"$logs/fio.$name" 2>&1 &
	FIO_PID=$!
	FIO_NAME=$name
	wait_for 60 "fio $name: 64 writes done" writes_past $((w0 + 64))
}

# fio_running: fio is still at work as the fault comes (else the case
# proves nothing)
fio_running() {
	if kill -0 "$FIO_PID" 2>/dev/null; then
		echo "ok: fio $FIO_NAME running at the fault ($(writes) writes done)"
		return 0
	fi
	vm_fail "fio $FIO_NAME had finished before the fault"
}

# fio_end SECS: fio exits within SECS; its status in FIO_RC, output in FIO_OUT
fio_end() {
	local end=$((SECONDS + $1))
	while kill -0 "$FIO_PID" 2>/dev/null; do
		if [ "$SECONDS" -ge "$end" ]; then
			diag "fio $FIO_NAME"
			vm_die "fio $FIO_NAME still running after $1 s"
		fi
		sleep 0.3
	done
	wait "$FIO_PID"
	FIO_RC=$?
	FIO_OUT=$(cat "$logs/fio.$FIO_NAME")
	vm_log "fio $FIO_NAME: status $FIO_RC"
}

# fio_failed_eio: fio ended with an I/O error (the controller is gone)
fio_failed_eio() {
	if [ "$FIO_RC" != 0 ] && printf '%s\n' "$FIO_OUT" | grep -Eq 'err= *5[,/ ]|Input/output error'; then
		echo "ok: fio $FIO_NAME failed with EIO (status $FIO_RC)"
		return 0
	fi
	vm_fail "fio $FIO_NAME: want EIO, status $FIO_RC:"$'\n'"$(printf '%s\n' "$FIO_OUT" | tail -n 15)"
}

# settled WHAT: the checks every case ends with
settled() {
	local what=$1 now
	check wait_for 60 "$what: no nvme controller of $NQN left" no_ctrl
	check assert_eq "" "$(pgrep -x fio)" "$what: fio processes left"
	now=$(vm_kres_wait mbcf0 "$idle")
	check assert_eq "$idle" "$now" "$what: mbcf0 resources (target listening only)"
	check assert_eq "$pins0" "$(vm_pins_held)" "$what: pinned pages"
	check vm_dmesg_check --since-mark
}

# mbcf0_again: the device (after its removal) and the target's port on it
mbcf0_again() {
	local rc=0
	lsmod | grep -q '^mbcf ' || modprobe mbcf || return 1
	if [ ! -e /sys/class/net/veth0 ]; then
		ip link add veth0 type veth peer name veth1 netns "$VM_NS" &&
		ip addr add "$VM_IP0/24" dev veth0 && ip link set veth0 up &&
		ip -n "$VM_NS" addr add "$VM_IP1/24" dev veth1 &&
		ip -n "$VM_NS" link set veth1 up || return 1
	fi
	[ -e /sys/class/infiniband/mbcf0 ] || rdma link add mbcf0 type mbcf netdev veth0 || rc=1
	[ -e /sys/class/infiniband/mbcf1 ] || in_ns1 rdma link add mbcf1 type mbcf netdev veth1 || rc=1
	vm_wait_port mbcf0 20 || rc=1
	wait_for 20 "mbcf0 GID of $VM_IP0" vm_gid_index mbcf0 "$VM_IP0" >/dev/null || rc=1
	# the listener went with the old device: the port is made again
	port_del
	port_add || rc=1
	return "$rc"
}

# --- target --------------------------------------------------------------------
stl_nvmet_subsys "$NQN" /dev/ram0 || exit 1
port_add || vm_die "nvmet port"
idle=$(vm_kres mbcf0)
vm_log "mbcf0 resources with the target listening: $idle"

# --- c: port removed and re-added: reconnect, I/O resumes, data verifies --------
case_c() {
	local mark out n conn
	vm_phase "case c: the target's port removed and re-added under fio"
	vm_dmesg_mark
	connect || return 1
	conn=$(vm_kres mbcf0)
	vm_log "mbcf0 resources while connected: $conn"
	fio_start recover --size=16M --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --randrepeat=0 || return 1
	check fio_running
	mark=$VM_DMESG_MARK
	check assert_cmd port_del
	# "attempt N" (6.1), "attempt N/MAX" (6.12 on)
	check wait_for 60 "two failed reconnect attempts" \
		eval 'since $mark | grep -qE "$CTRL: Failed reconnect attempt 2(/[0-9]+)?\$"'
	check port_add
	check wait_for 60 "reconnected" eval 'since $mark | grep -q "$CTRL: Successfully reconnected"'
	out=$(since "$mark" | grep -o "$CTRL: Successfully reconnected ([0-9]* attempts)")
	n=$(since "$mark" | grep -c "$CTRL: Failed reconnect attempt")
	vm_log "$out after $n failed attempt(s)"
	assert_match "\\($((n + 1)) attempts\\)" "$out" "attempts = failed + 1" || failed=$((failed + 1))
	fio_end 300
	# every block of the 16 MiB written once and read back verified, some
	# before the fault, the rest requeued across the reconnect
	if [ "$FIO_RC" = 0 ] && printf '%s\n' "$FIO_OUT" | grep -q ' err= 0' &&
		printf '%s\n' "$FIO_OUT" | grep -q 'issued rwts: total=4096,4096,'; then
		echo "ok: fio recover: 4096 writes, 4096 verified reads, err=0 across the reconnect"
	else
		failed=$((failed + 1))
		echo "FAIL: fio recover: status $FIO_RC"
		printf '%s\n' "$FIO_OUT" | tail -n 25 | sed 's/^/  | /'
	fi
	assert_eq "$CTRL" "$(ctrls)" "the same controller after the reconnect" || failed=$((failed + 1))
	assert_eq "$conn" "$(vm_kres mbcf0)" "mbcf0 resources after the reconnect" || failed=$((failed + 1))
	stl_nvme_disconnect "$NQN" || failed=$((failed + 1))
	settled "case c"
}

# --- g: port removed for good: ctrl_loss_tmo, then the I/O fails ----------------
case_g() {
	local mark n
	vm_phase "case g: the target's port removed for good under fio"
	vm_dmesg_mark
	connect || return 1
	fio_start giveup --size=32M --time_based --runtime=600 || return 1
	check fio_running
	mark=$VM_DMESG_MARK
	check assert_cmd port_del
	# 8 attempts a second apart; each may take its CM timeouts
	check wait_for 120 "controller removed after ctrl_loss_tmo" no_ctrl
	fio_end 60
	check fio_failed_eio
	n=$(since "$mark" | grep -c "$CTRL: Failed reconnect attempt")
	check assert_eq "$((LOSS_TMO / RECONNECT_DELAY))" "$n" "failed reconnect attempts (ctrl_loss_tmo / reconnect_delay)"
	check assert_eq 0 "$(since "$mark" | grep -c "$CTRL: Successfully reconnected")" "reconnects"
	check assert_match "$CTRL: Removing ctrl: NQN \"$NQN\"" "$(since "$mark")" "controller removed"
	check port_add
	settled "case g"
}

# removal CASE SECS WHAT CMD...: connect, fio, CMD (the removal) under fio,
# which must end within SECS; the controller is deleted by the client
# removal (no reconnect attempt), fio fails with EIO; the device is made again.
removal() {
	local c=$1 secs=$2 what=$3 mark
	shift 3
	vm_phase "case $c: $what under fio"
	vm_dmesg_mark
	connect || return 1
	fio_start "remove-$c" --size=32M --time_based --runtime=600 || return 1
	check fio_running
	mark=$VM_DMESG_MARK
	check bounded "$secs" "$@"
	# rmmod is not refused while nvme-rdma and nvmet-rdma use the device
	[ "$c" = d ] && check assert_eq "" "$(lsmod | grep '^mbcf ')" "mbcf unloaded under fio"
	check wait_for 60 "mbcf0 gone" eval '! [ -e /sys/class/infiniband/mbcf0 ]'
	check wait_for 60 "controller removed" no_ctrl
	fio_end 60
	check fio_failed_eio
	check assert_match "$CTRL: Removing ctrl: NQN \"$NQN\"" "$(since "$mark")" "controller removed"
	check assert_eq 0 "$(since "$mark" | grep -c "$CTRL: Successfully reconnected")" "reconnects"
	vm_log "reconnect attempts scheduled meanwhile: $(since "$mark" | grep -c "$CTRL: Reconnecting in")"
	check mbcf0_again
	settled "case $c"
}

case_a() { removal a 120 "rdma link delete mbcf0" rdma link delete mbcf0; }
# The netdev goes away with frames in flight: mbcf fails every QP of its
# device at once (their requests flushed), so nvme-rdma lets go
# at once instead of after its retransmission and command timeouts (95 s
# before mbcf did that).
case_b() { removal b 30 "ip link del veth0" ip link del veth0; }
case_d() { removal d 120 "rmmod mbcf" rmmod mbcf; }

for c in $cases; do
	"case_$c"
done

# --- after every fault: a clean run, teardown ------------------------------------
vm_phase "a clean connect after the faults"
vm_dmesg_mark
if connect; then
	fio_start final --size=4M --offset=8M --verify=crc32c --do_verify=1 --verify_fatal=1
	fio_end 300
	if [ "$FIO_RC" = 0 ] && printf '%s\n' "$FIO_OUT" | grep -q ' err= 0'; then
		echo "ok: fio final: verified"
	else
		failed=$((failed + 1))
		printf '%s\n' "$FIO_OUT" | tail -n 25 | sed 's/^/  | /'
		echo "FAIL: fio final: status $FIO_RC"
	fi
	check stl_nvme_disconnect "$NQN"
else
	failed=$((failed + 1))
fi
check port_del
stl_nvmet_subsys_del "$NQN"
for m in nvme-rdma nvme-fabrics nvmet-rdma nvmet; do
	check assert_cmd modprobe -r "$m"
done
after=$(vm_kres_wait mbcf0 "$base")
check assert_eq "$base" "$after" "mbcf0 resource summary after teardown"
check assert_eq "$pins0" "$(vm_pins_held)" "pinned pages after teardown"
check assert_cmd rdma link delete mbcf0
check assert_cmd rdma link delete mbcf1
check assert_cmd rmmod mbcf
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "storage_faults: $failed check(s) failed"
	exit 1
fi
echo "storage_faults: all checks passed"

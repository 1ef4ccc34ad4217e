#!/bin/bash
# Pair test (two kernels): guest A runs the servers on its mbcf0, guest B the
# clients on its own mbcf0, across the Ethernet link between the two guests:
#   rping (rdma_cm, data validated), perftest with -R (rdma_cm) and with
#   -x GID (perftest's TCP exchange), ibv_rc_pingpong -c (data checked),
#   a perftest run on rxe0 as the reference, vm_pair_rsh (the launcher
#   hook for MPI), and Open MPI's mbcf_mpi_check with one rank per guest.
#   tests/vm/run2.sh tests/vm/twokernel.sh [quick] [nompi]
# `nompi` (or VM_TWOKERNEL_MPI=0) leaves out the Open MPI step (below).
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

vm_pair_require

failed=0
runs=0
step=0
A=$VM_PAIR_IP_A
# Link-local GID 0 (fe80:: + EUI-64, RoCE: destination MAC from the GID, no
# ARP); the IPv4-mapped GID of the link address (destination MAC by ARP).
GID_LL=0
GID_V4=$(vm_gid_index mbcf0 "$VM_PAIR_IP") || vm_die "mbcf0 has no GID for $VM_PAIR_IP"
vm_log "mbcf0 GIDs: $GID_LL = $VM_PAIR_IP6, $GID_V4 = ::ffff:$VM_PAIR_IP"

ctr() { # DEV NAME: print a port counter
	local v=0
	read -r v 2>/dev/null <"/sys/class/infiniband/$1/ports/1/hw_counters/$2"
	echo "${v:-0}"
}

# listening KIND: is the server up?  tcp:PORT (perftest's and ibv_rc_pingpong's
# exchange) from /proc/net/tcp, cm:PORT (an rdma_cm listener) from rdma's
# resource tracking.
listening() {
	local kind=${1%%:*} port=${1#*:} sl local rest
	case "$kind" in
	tcp)
		local hex
		hex=$(printf ':%04X' "$port")
		while read -r sl local rest; do
			[[ $local == *"$hex" ]] && [[ $rest == *" 0A "* ]] && return 0
		done </proc/net/tcp
		return 1
		;;
	cm)
		rdma res show cm_id 2>/dev/null | grep -Eq "state LISTEN .*:$port( |$)"
		;;
	esac
}

# pair STEP_NAME LISTEN CHECK -- SERVER_ARGV... -- CLIENT_ARGV...
# A runs the server, waits until it listens (LISTEN, see listening()) and
# tells B "ready"; B runs the client, retrying while the server is up and the
# client fails to connect; both report their status to each other.  CHECK
# is a function called on B as CHECK CLIENT_OUTPUT_FILE; it prints ok/FAIL
# and returns 0/1.  A rerun of the whole step happens (at most twice, and is
# said so) when perftest could not calibrate its clock on the loaded host,
# or when its -R client lost perftest's own race with its server's listen.
pair() {
	local name=$1 listen=$2 check=$3 srv=() cli=() out rc attempt key
	shift 3
	[ "$1" = -- ] && shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	step=$((step + 1))
	runs=$((runs + 1))
	out=$(mktemp)
	for attempt in 1 2 3; do
		key=s$step.$attempt
		if vm_is_pair_a; then
			timeout "$(vm_scaled 120)" "${srv[@]}" >"$out" 2>&1 &
			local spid=$! end=$((SECONDS + 60))
			until listening "$listen"; do
				if ! kill -0 "$spid" 2>/dev/null || [ "$SECONDS" -ge "$end" ]; then
					echo "note: $name: server not listening ($listen) after $((SECONDS - end + 60))s"
					break
				fi
				sleep 0.2
			done
			vm_pair_post "ready.$key" || break
			# A client that lost perftest's listen race (below) leaves
			# this server waiting for a connection nobody will make.
			while kill -0 "$spid" 2>/dev/null; do
				if [ "$(vm_pair_peek "cdone.$key")" = cmrace ]; then
					kill "$spid" 2>/dev/null
					break
				fi
				sleep 0.2
			done
			rc=0
			wait "$spid" || rc=$?
			vm_pair_post "sdone.$key" "$rc"
			local crc
			crc=$(vm_pair_wait "cdone.$key" 300) || crc="none"
			[ "$crc" = calib ] && continue
			[ "$crc" = cmrace ] && [ "$attempt" -lt 3 ] && continue
			if [ "$rc" != 0 ]; then
				failed=$((failed + 1))
				echo "FAIL: $name: server rc=$rc (client: $crc)"
				tail -n 12 "$out" | sed 's/^/  server| /'
			elif [ "$crc" != 0 ]; then
				failed=$((failed + 1))
				echo "FAIL: $name: client on B failed ($crc); server output:"
				tail -n 6 "$out" | sed 's/^/  server| /'
			else
				echo "ok: $name (server)"
			fi
			break
		else
			vm_pair_wait "ready.$key" 300 >/dev/null || { failed=$((failed + 1)); break; }
			local tries=0 t0=$SECONDS
			while :; do
				tries=$((tries + 1))
				rc=0
				timeout "$(vm_scaled 120)" "${cli[@]}" >"$out" 2>&1 || rc=$?
				[ "$rc" = 0 ] && break
				# perftest 4.5's listen race: after the two sides' sync
				# the client connects before the server's rdma_listen()
				# (the CM rejects: no such service, reason 8), and its
				# retry then crashes (fixed upstream after 4.5, perftest
				# commit 3d9d8d0).  Nothing reached the device's QPs:
				# the whole step is run again.
				if grep -q 'RDMA_CM_EVENT_REJECTED; error: 8\.' "$out"; then
					rc=cmrace
					break
				fi
				# Retry only while the server is still there (it exits
				# after one client) and the client never got through.
				vm_pair_peek "sdone.$key" >/dev/null && break
				[ $((SECONDS - t0)) -ge 60 ] && break
				echo "note: $name: client attempt $tries failed (rc=$rc), retrying; its output:"
				tail -n 12 "$out" | sed "s/^/  client $tries| /"
				sleep 1
			done
			if [ "$rc" = cmrace ] && [ "$attempt" -lt 3 ]; then
				echo "note: $name: perftest's client connected before its server listened (attempt $attempt), rerun"
				tail -n 8 "$out" | sed 's/^/  client| /'
				vm_pair_post "cdone.$key" cmrace
				vm_pair_wait "sdone.$key" 150 >/dev/null
				continue
			fi
			if [ "$rc" = 0 ] && grep -q 'Correlation coefficient r^2' "$out" && [ "$attempt" -lt 3 ]; then
				echo "note: $name: perftest could not calibrate its clock (attempt $attempt), rerun"
				vm_pair_post "cdone.$key" calib
				vm_pair_wait "sdone.$key" 150 >/dev/null
				continue
			fi
			local verdict=$rc
			if [ "$rc" != 0 ]; then
				echo "FAIL: $name: client rc=$rc after $tries attempt(s)"
				tail -n 12 "$out" | sed 's/^/  client| /'
			elif ! "$check" "$out"; then
				verdict=check
			fi
			vm_pair_post "cdone.$key" "$verdict"
			local src
			src=$(vm_pair_wait "sdone.$key" 150) || src=none
			if [ "$verdict" != 0 ] || [ "$src" != 0 ]; then
				failed=$((failed + 1))
				[ "$src" != 0 ] && echo "FAIL: $name: server on A failed ($src)"
			fi
			break
		fi
	done
	rm -f "$out"
}

# Checks on the client's output (B).
check_rping() { # rping -v prints each validated ping
	local n
	n=$(grep -c '^ping data: rdma-ping-' "$1")
	assert_eq 100 "$n" "rping: pings validated"
}
check_perf() { # a result row "<bytes> <iterations> <figures...>", column 5 > 0
	local row
	row=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 5 { print; exit }' "$1")
	if [ -n "$row" ] && awk '{ exit !($5 > 0) }' <<<"$row"; then
		echo "ok: result row: $row"
		return 0
	fi
	vm_fail "no result row with a positive figure:"$'\n'"$(tail -n 8 "$1")"
}
check_pingpong() { # "<bytes> bytes in <s> seconds = ...", "<n> iters in ..."
	assert_match '^50 iters in ' "$(grep iters "$1")" "ibv_rc_pingpong"
}

tx0=$(ctr mbcf0 tx_frames)
rxe_tx0=$(ctr rxe0 sent_pkts)
quick=0
MPI=${VM_TWOKERNEL_MPI:-1}
for a in "$@"; do
	case $a in
	quick) quick=1 ;;
	mpi) MPI=1 ;;
	nompi) MPI=0 ;;
	*) vm_die "unknown argument $a" ;;
	esac
done

# --- rdma_cm (GSI/QP1 MADs over mbcf, CM REQ/REP/RTU) ---------------------
pair "rping -C 100 -V" cm:7174 check_rping \
	-- rping -s -a "$VM_PAIR_IP_A" -p 7174 -V -C 100 \
	-- rping -c -a "$A" -p 7174 -v -V -C 100
pair "ib_write_bw -R 64 KiB" cm:18515 check_perf \
	-- ib_write_bw -R -d mbcf0 -F -s 65536 -n 200 \
	-- ib_write_bw -R -d mbcf0 -F -s 65536 -n 200 "$A"
pair "ib_read_lat -R 2 B" cm:18515 check_perf \
	-- ib_read_lat -R -d mbcf0 -F -s 2 -n 100 \
	-- ib_read_lat -R -d mbcf0 -F -s 2 -n 100 "$A"
pair "ib_send_bw -R 4 KiB" cm:18515 check_perf \
	-- ib_send_bw -R -d mbcf0 -F -s 4096 -n 200 \
	-- ib_send_bw -R -d mbcf0 -F -s 4096 -n 200 "$A"

# --- perftest's own TCP exchange, explicit GID ----------------------------
pair "ib_write_lat -x $GID_LL (link-local)" tcp:18515 check_perf \
	-- ib_write_lat -d mbcf0 -x "$GID_LL" -F -s 2 -n 100 \
	-- ib_write_lat -d mbcf0 -x "$GID_LL" -F -s 2 -n 100 "$A"
pair "ib_send_bw -x $GID_V4 (IPv4) 64 KiB" tcp:18515 check_perf \
	-- ib_send_bw -d mbcf0 -x "$GID_V4" -F -s 65536 -n 200 \
	-- ib_send_bw -d mbcf0 -x "$GID_V4" -F -s 65536 -n 200 "$A"
if [ "$quick" = 0 ]; then
	pair "ib_read_bw -x $GID_LL 64 KiB" tcp:18515 check_perf \
		-- ib_read_bw -d mbcf0 -x "$GID_LL" -F -s 65536 -n 200 \
		-- ib_read_bw -d mbcf0 -x "$GID_LL" -F -s 65536 -n 200 "$A"
	pair "ib_atomic_lat -x $GID_LL" tcp:18515 check_perf \
		-- ib_atomic_lat -d mbcf0 -x "$GID_LL" -F -n 100 \
		-- ib_atomic_lat -d mbcf0 -x "$GID_LL" -F -n 100 "$A"
fi

# --- ibv_rc_pingpong validates every buffer (-c) ---------------------------
pair "ibv_rc_pingpong -c -g $GID_LL 4 KiB" tcp:18515 check_pingpong \
	-- ibv_rc_pingpong -d mbcf0 -g "$GID_LL" -s 4096 -n 50 -c \
	-- ibv_rc_pingpong -d mbcf0 -g "$GID_LL" -s 4096 -n 50 -c "$A"
pair "ibv_rc_pingpong -c -g $GID_V4 64 KiB" tcp:18515 check_pingpong \
	-- ibv_rc_pingpong -d mbcf0 -g "$GID_V4" -s 65536 -n 50 -c \
	-- ibv_rc_pingpong -d mbcf0 -g "$GID_V4" -s 65536 -n 50 -c "$A"

# Everything above ran on mbcf0: its frames went out, rxe0 sent nothing.
tx1=$(ctr mbcf0 tx_frames)
rxe_tx1=$(ctr rxe0 sent_pkts)
runs=$((runs + 1))
if [ "$tx1" -gt "$tx0" ] && [ "$rxe_tx1" = "$rxe_tx0" ]; then
	echo "ok: mbcf0 sent $((tx1 - tx0)) frames, rxe0 none"
else
	failed=$((failed + 1))
	echo "FAIL: devices used: mbcf0 tx_frames $tx0 -> $tx1, rxe0 sent_pkts $rxe_tx0 -> $rxe_tx1"
fi

# --- reference: rxe0 (RoCE v2 over UDP) on the same link -------------------
RXE_V4=$(vm_gid_index rxe0 "$VM_PAIR_IP") || RXE_V4=1
pair "rxe0 reference: ib_write_bw -x $RXE_V4 64 KiB" tcp:18515 check_perf \
	-- ib_write_bw -d rxe0 -x "$RXE_V4" -F -s 65536 -n 200 \
	-- ib_write_bw -d rxe0 -x "$RXE_V4" -F -s 65536 -n 200 "$A"

# --- the launcher hook: run a command on the peer --------------------------
runs=$((runs + 1))
if vm_is_pair_a; then
	vm_pair_barrier rsh || failed=$((failed + 1))
	got=$(vm_pair_rsh cat /proc/sys/kernel/hostname) && [ "$got" = "$VM_PAIR_PEER_HOST" ] &&
		echo "ok: vm_pair_rsh: guest B is '$got'" ||
		{ failed=$((failed + 1)); echo "FAIL: vm_pair_rsh hostname: '$got'"; }
else
	vm_pair_barrier rsh || failed=$((failed + 1))
	vm_pair_rsh sh -c 'exit 7'
	assert_eq 7 $? "vm_pair_rsh exit status" || failed=$((failed + 1))
fi

# --- Open MPI across the two kernels: one rank per guest ------------------
# mbcf_mpi_check (as vm.mpi runs it: pml ucx, osc ucx, btl self, UCX_TLS
# ud_v,self; -q) with rank 0 on A and rank 1 on B, mpirun on A starting B's
# orted through vm_pair_rsh (plm_rsh_agent).  Each rank's UCX sees only its
# guest's mbcf0; the ranks' endpoints must be ud_verbs/mbcf0:1 (self for a
# rank's own), and the two mbcf0 together must receive at least the bytes
# the program moved.  The runtime (orted, PMIx) talks TCP over the same
# link: it is not RDMA traffic and is not counted by mbcf.
if [ "$MPI" = 1 ]; then
mpi_prog=$(vm_test_prog mbcf_mpi_check "${MBCF_MPI_PROG:-}") || mpi_prog=
runs=$((runs + 1))
mountpoint -q /dev/shm || mount -t tmpfs tmpfs /dev/shm
# The launcher agent, in both guests: mpirun hands its MCA parameters to
# the orted it starts on B, whose rsh component checks that the agent exists.
agent=/var/tmp/pair-rsh.sh
cat >"$agent" <<EOF
#!/bin/bash
# Open MPI's plm_rsh_agent: AGENT HOST COMMAND... -> the peer's shell
shift
exec python3 $MBCF_SRC/tests/vm/pair-agent.py rsh $VM_PAIR_PEER_IP $VM_PAIR_PORT sh -c "\$*"
EOF
chmod +x "$agent"
rxb0=$(ctr mbcf0 rx_payload_bytes)
if [ -z "$mpi_prog" ]; then
	failed=$((failed + 1))
	echo "FAIL: no mbcf_mpi_check"
	vm_is_pair_a && vm_pair_post mpi.done none
elif vm_is_pair_a; then
	vm_pair_wait mpi.ready 300 >/dev/null || failed=$((failed + 1))
	mlog=/var/tmp/mpi-pair.out
	t0=$EPOCHREALTIME
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout "$(vm_scaled 600)" \
		mpirun --allow-run-as-root -np 2 -H mbcf-vm-a:1,mbcf-vm-b:1 \
		--bind-to none --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include 198.51.100.0/24 \
		--mca pml ucx --mca osc ucx --mca btl self \
		--mca pml_ucx_tls any --mca pml_ucx_devices any \
		-x UCX_TLS=ud_v,self -x UCX_NET_DEVICES=mbcf0:1 -x UCX_LOG_LEVEL=info \
		"$mpi_prog" -q >"$mlog" 2>&1
	mrc=$?
	vm_log "mpirun across the pair: rc $mrc in $(vm_elapsed_since "$t0") s"
	vm_pair_post mpi.done "$mrc"
	rxpeer=$(vm_pair_wait mpi.rx 120) || rxpeer=0
	rxb1=$(ctr mbcf0 rx_payload_bytes)
	line=$(grep '^mbcf_mpi_check: ' "$mlog")
	grep -E '^(ok|FAIL) rank' "$mlog" | sed 's/^/  mpi| /'
	if [ "$mrc" != 0 ] || ! [[ "$line" =~ ^mbcf_mpi_check:\ ([0-9]+)\ checks,\ 0\ failed,\ ([0-9]+)\ bytes ]]; then
		failed=$((failed + 1))
		echo "FAIL: mbcf_mpi_check across the pair: rc=$mrc, '${line:-no summary}'"
		grep -v '^ok rank' "$mlog" | tail -n 25 | sed 's/^/  | /'
	else
		moved=${BASH_REMATCH[2]}
		echo "ok: mbcf_mpi_check across the pair (rank 0 on A, rank 1 on B): $line"
		tls_seen=$(grep -o 'ep_cfg\[[0-9]*\]: .*' "$mlog" | grep -Eo '[a-z0-9_]+/[a-z0-9_:]+' | sort -u)
		bad=$(grep -vxE 'self/memory0|ud_verbs/mbcf0:1' <<<"$tls_seen")
		if [ -z "$tls_seen" ] || [ -n "$bad" ] || ! grep -qx 'ud_verbs/mbcf0:1' <<<"$tls_seen"; then
			failed=$((failed + 1))
			echo "FAIL: UCX used '$(echo $tls_seen)'; want ud_verbs/mbcf0:1 (and self) only"
		else
			echo "ok: UCX endpoints: $(echo $tls_seen)"
		fi
		got=$((rxb1 - rxb0 + rxpeer))
		if [ "$got" -ge "$moved" ]; then
			echo "ok: mbcf0 (A) + mbcf0 (B) rx_payload_bytes +$got >= $moved bytes moved"
		else
			failed=$((failed + 1))
			echo "FAIL: mbcf0 (A) + mbcf0 (B) rx_payload_bytes grew by $got < $moved bytes moved"
		fi
	fi
else
	vm_pair_post mpi.ready B
	mrc=$(vm_pair_wait mpi.done 700) || mrc=none
	vm_pair_post mpi.rx $(($(ctr mbcf0 rx_payload_bytes) - rxb0))
	echo "note: mpirun on A: rc $mrc (A judges)"
fi
fi	# MPI

vm_dmesg_check || failed=$((failed + 1))
echo "twokernel ($VM_PAIR_ROLE): $runs runs, $failed failed"
# Neither guest powers off while the other still talks to it.
vm_pair_post "end" "$failed"
vm_pair_wait end 300 >/dev/null
[ "$failed" = 0 ]

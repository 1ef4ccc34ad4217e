#!/bin/bash
# bench/guest.sh: runs inside the guest (bench/run.sh boots it).  Every
# figure is the median of $REPS runs after one warm-up, all in this one
# guest run, so ratios hold even though absolute times under software
# emulation mean nothing.  Prints CSV rows on stdout:
#   BENCH,<group>,<transport>,<test>,<size>,<mtu>,<ack>,<unit>,<median>,<runs...>
set -u
# shellcheck source=../tests/vm/lib.sh
. "$MBCF_VM_LIB"

REPS=${2:-${BENCH_REPS:-5}}
QUICK=${1:-${BENCH_QUICK:-0}}
PART=${3:-${BENCH_PART:-all}}	# all; or only sw (software stacks), loss (goodput under loss), qps (-q N), storage
echo "BENCH_KERNEL $(uname -r)"	# bench/run.sh names it in the report
[ "${VM_MBCF:-0}" = 1 ] || vm_die "mbcf0/mbcf1 missing"

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "nan" }'; }
emit() { # group transport test size mtu ack unit values...
	local g=$1 tr=$2 t=$3 s=$4 m=$5 a=$6 u=$7
	shift 7
	echo "BENCH,$g,$tr,$t,$s,$m,$a,$u,$(echo "$*" | median),$(echo "$*" | tr ' ' ';')"
}

# One perftest run; prints the figure (t_typical us, or BW average MB/s).
perftest_once() { # transport test size extra...
	local tr=$1 t=$2 s=$3 dev0 dev1 gid col out
	shift 3
	case $tr in
	mbcf) dev0=mbcf0 dev1=mbcf1 gid=0 ;;
	# both ends on one device, rxe's shape (its frames never leave it;
	# mbcf's go to its own MAC and come straight back in, kmod/net.c)
	mbcf-lo) dev0=mbcf0 dev1=mbcf0 gid=0 ;;
	rxe) dev0=rxe0 dev1=rxe0 gid=1 ;;
	esac
	case $t in *_lat) col=5 ;; *) col=${BENCH_BW_COL:-4} ;; esac
	# A run whose cycle-rate calibration failed reports 0 (see
	# tests/vm/perftest.sh); it measured nothing, so it is rerun.
	for _ in 1 2 3; do
		timeout 120 taskset -c 0 "$t" -d $dev0 -x $gid -F -s "$s" "$@" >/dev/null 2>&1 &
		# shellcheck disable=SC2086 # BENCH_CLIENT_ENV: VAR=value words
		out=$(vm_retry 50 0.2 in_ns1 env ${BENCH_CLIENT_ENV:-} timeout 120 taskset -c 1 "$t" -d $dev1 -x $gid -F -s "$s" "$@" "$VM_IP0" 2>&1)
		wait
		grep -q 'Correlation coefficient r^2' <<<"$out" || break
	done
	grep -q 'Correlation coefficient r^2' <<<"$out" && return 0	# nan
	awk -v s="$s" -v c="$col" '$1 == s && $2 ~ /^[0-9]+$/ { print $c; exit }' <<<"$out"
}

perftest_case() { # group transport test size mtu ack extra...
	local g=$1 tr=$2 t=$3 s=$4 m=$5 a=$6 v vals="" i unit
	shift 6
	case $t in *_lat) unit=us ;; *) unit=MB/s ;; esac
	[ "$g" = rate ] && unit=Mpps
	perftest_once "$tr" "$t" "$s" "$@" >/dev/null	# warm-up
	for ((i = 0; i < REPS; i++)); do
		v=$(perftest_once "$tr" "$t" "$s" "$@")
		vals="$vals ${v:-nan}"
	done
	emit "$g" "$tr" "$t" "$s" "$m" "$a" "$unit" $vals
}

# Kernel CPU time so far, all vCPUs, in clock ticks (USER_HZ): system + irq
# + softirq from /proc/stat.  User time is left out on purpose: perftest
# spins on its CQ (mbcf and rxe alike) and would count as "busy" whatever
# the transport costs; iperf3 sleeps.
kernel_ticks() {
	awk '$1 == "cpu" { print $4 + $7 + $8; exit }' /proc/stat
}

# Kernel CPU-seconds per GB moved: one long ib_write_bw run of 64 KiB
# messages (or an iperf3 run) between two kernel_ticks() readings.
cpu_per_gb() { # transport mtu
	local tr=$1 m=$2 t0 t1 v vals="" i bytes hz
	hz=$(getconf CLK_TCK)
	for ((i = 0; i < REPS; i++)); do
		t0=$(kernel_ticks)
		case $tr in
		tcp)
			v=$(in_ns1 timeout 30 taskset -c 1 iperf3 -c "$VM_IP0" -p 5201 -t 3 -f M 2>/dev/null |
				awk '/receiver/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "MBytes") x = $i } END { print x }')
			bytes=$(awk -v m="$v" 'BEGIN { printf "%.0f", m * 1048576 }')
			;;
		*)
			v=$(perftest_once "$tr" ib_write_bw 65536 -n 20000)
			bytes=$((65536 * 20000))
			[ -n "$v" ] || bytes=0
			;;
		esac
		t1=$(kernel_ticks)
		vals="$vals $(awk -v t=$((t1 - t0)) -v hz="$hz" -v b="$bytes" \
			'BEGIN { if (b > 0) printf "%.3f", t / hz / (b / 1e9); else print "nan" }')"
	done
	emit cpu "$tr" kernel_cpu 65536 "$m" - cpu_s/GB $vals
}

set_mtu() {
	ip link set veth0 mtu "$1"
	in_ns1 ip link set veth1 mtu "$1"
}

# TCP round trip / 2 (sockperf ping-pong, as perftest reports), median us.  Both ends spin on
# non-blocking sockets, as perftest spins on its CQ: a sleeping vCPU takes
# a scheduler tick to wake under TCG, which would measure the emulator.
# sockperf's smallest message is 14 B, used for the 4 B row.
tcp_lat() { # size
	local s=$1 m=$1 v vals="" i
	[ "$m" -lt 14 ] && m=14
	timeout 120 taskset -c 0 sockperf server --tcp -i "$VM_IP0" -p 11111 \
		--nonblocked --timeout 0 >/dev/null 2>&1 &
	local spid=$!
	sleep 1
	for ((i = 0; i <= REPS; i++)); do
		v=$(in_ns1 timeout 30 taskset -c 1 sockperf ping-pong --tcp -i "$VM_IP0" -p 11111 \
			-m "$m" -t 2 --nonblocked --timeout 0 2>&1 |
			awk '/percentile 50.000 =/ { x = $NF } END { print x }')
		# Half the round trip, as perftest's *_lat report it.
		[ "$i" -gt 0 ] && vals="$vals ${v:-nan}"
	done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	emit latency tcp rtt_half "$s" "$(cat /sys/class/net/veth0/mtu)" - us $vals
}

tcp_bw() { # mtu
	local v vals="" i
	timeout 120 taskset -c 0 iperf3 -s -B "$VM_IP0" -p 5201 >/dev/null 2>&1 &
	local spid=$!
	sleep 1
	for ((i = 0; i <= REPS; i++)); do
		v=$(in_ns1 timeout 30 taskset -c 1 iperf3 -c "$VM_IP0" -p 5201 -t 3 -f M 2>/dev/null |
			awk '/receiver/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "MBytes/sec") x = $i } END { print x }')
		[ "$i" -gt 0 ] && vals="$vals ${v:-nan}"
	done
	[ "$1" = 1500 ] && cpu_per_gb tcp 1500
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	emit bandwidth tcp iperf3 - "$1" - MB/s $vals
}

# Raw frame capacity of veth0 with pktgen: frames of `size` bytes (incl.
# Ethernet header) to a MAC nobody owns, so the peer drops them at L2.
raw_capacity() { # frame_size
	local fs=$1 v vals="" i pg=/proc/net/pktgen
	modprobe pktgen 2>/dev/null
	[ -d $pg ] || return 0
	for ((i = 0; i <= REPS; i++)); do
		echo "rem_device_all" >$pg/kpktgend_0
		echo "add_device veth0" >$pg/kpktgend_0
		{
			echo "count 20000"
			echo "pkt_size $((fs - 4))"
			echo "dst_mac 02:00:00:00:00:99"
			echo "dst 192.0.2.99"
			echo "delay 0"
		} | while read -r l; do echo "$l" >$pg/veth0; done
		echo start >$pg/pgctrl
		v=$(awk '/pps/ { for (i = 1; i <= NF; i++) if ($i ~ /pps$/) { sub("pps", "", $i); print $i; exit } }' $pg/veth0)
		[ "$i" -gt 0 ] && vals="$vals ${v:-nan}"
	done
	echo "rem_device_all" >$pg/kpktgend_0
	emit capacity raw pktgen "$fs" "$(cat /sys/class/net/veth0/mtu)" - frames/s $vals
}

# --- software over verbs: rdma_cm, UCX, Open MPI ------------------------------
# Each row for mbcf (server side on mbcf0, client side on mbcf1: every byte
# crosses the veth pair), rxe (both ends on rxe0, which loops back inside the
# device: rxe cannot cross namespaces in 6.1) and TCP, where TCP applies.
# REPS runs after one warm-up; a run that fails is "nan".
sw_port=13337
sw_log=/var/tmp/bench-sw
mkdir -p "$sw_log"

# rdma_cm connection setup rate: cmtime's client connects C connections at
# once (rdma_connect on each, then waits for all ESTABLISHED); the figure is
# C / its "connect" step time.  The server stays up for all runs.  rdma_cm
# binds 192.0.2.10 to the first device with that GID, so the mbcf rows run
# with rxe0 removed and the rxe rows with mbcf0 removed (done by the caller).
cm_rate() { # transport
	local tr=$1 c=${BENCH_CM_CONNS:-50} v vals="" i out cl=()
	[ "$tr" = mbcf ] && cl=(ip netns exec ns1)
	timeout 900 cmtime -b "$VM_IP0" -p 7471 >"$sw_log/cmtime.$tr.srv" 2>&1 &
	local spid=$!
	sleep 2
	for ((i = 0; i <= REPS; i++)); do
		out=$(vm_retry 10 0.5 "${cl[@]}" timeout 120 cmtime -s "$VM_IP0" -p 7471 -c "$c" 2>&1)
		printf '%s\n' "$out" >"$sw_log/cmtime.$tr.$i"
		v=nan
		if ! grep -qiE 'fail|error' <<<"$out"; then
			v=$(awk -v c="$c" '$1 == "connect" && $2 == ":" && $3 > 0 { printf "%.1f", c / ($3 / 1000) }' <<<"$out")
		fi
		[ "$i" -gt 0 ] && vals="$vals ${v:-nan}"
	done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	emit cm "$tr" cmtime_connect "$c" 1500 - conn/s $vals
}

# UCX: ucx_perftest tag_lat (one-way latency, us) and tag_bw (MB/s; with
# each veth's receive on its receiver's vCPU, like the other bandwidth rows).
# mbcf: UCX_TLS=rc_v (rc_verbs, ud_verbs to connect), server on mbcf0,
# client in ns1 on mbcf1; rxe: the same on rxe0 in the initial namespace;
# tcp: UCX_TLS=tcp, server on veth0, client in ns1 on veth1.
ucx_case() { # transport test size iters
	local tr=$1 t=$2 size=$3 n=$4 tls sdev cdev v vals="" i row cl=()
	case $tr in
	mbcf) tls=rc_v sdev=mbcf0:1 cdev=mbcf1:1 cl=(ip netns exec ns1) ;;
	rxe) tls=rc_v sdev=rxe0:1 cdev=rxe0:1 ;;
	tcp) tls=tcp sdev=veth0 cdev=veth1 cl=(ip netns exec ns1) ;;
	esac
	for ((i = 0; i <= REPS; i++)); do
		UCX_TLS=$tls UCX_NET_DEVICES=$sdev timeout 120 taskset -c 0 \
			ucx_perftest -p "$sw_port" >"$sw_log/ucx.$tr.$t.$size.$i.srv" 2>&1 &
		local spid=$!
		for ((w = 0; w < 150; w++)); do
			ss -Hltn "sport = :$sw_port" | grep -q . && break
			sleep 0.2
		done
		"${cl[@]}" env UCX_TLS=$tls UCX_NET_DEVICES=$cdev timeout 120 taskset -c 1 \
			ucx_perftest -p "$sw_port" -t "$t" -s "$size" -n "$n" -w 20 "$VM_IP0" \
			>"$sw_log/ucx.$tr.$t.$size.$i.cli" 2>&1
		# a server whose client failed may wait on: 10 s, then it goes
		for ((w = 0; w < 50; w++)); do
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.2
		done
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		# "Final: <iters> <lat 50%> <lat avg> <lat overall> <bw avg> <bw overall> <rate avg> <rate overall>"
		row=$(awk -v n="$n" '$1 == "Final:" && $2 == n { print; exit }' "$sw_log/ucx.$tr.$t.$size.$i.cli")
		case $t in
		tag_lat) v=$(awk '$4 > 0 { print $4 }' <<<"$row") ;;
		*) v=$(awk '$6 > 0 { print $6 }' <<<"$row") ;;
		esac
		[ "$i" -gt 0 ] && vals="$vals ${v:-nan}"
	done
	case $t in tag_lat) u=us ;; *) u=MB/s ;; esac
	emit ucx "$tr" "$t" "$size" 1500 - "$u" $vals
}

# Open MPI ping-pong (mbcf_mpi_check -p SIZE: data checked, half the round
# trip in us), two ranks in the initial namespace (Open MPI's runtime needs
# 127.0.0.1).  mbcf: pml ucx, UCX_TLS=rc_v,self, rank 0 on mbcf0, rank 1 on
# mbcf1 (the data crosses the veth pair); rxe: the same, both on rxe0; tcp:
# pml ob1, btl tcp,self on veth0's address: both ranks in one namespace, so
# the kernel loops that TCP connection back (no veth crossing).
mpi_prog=${MBCF_BUILD:-}/tests/vm/progs/mbcf_mpi_check
mpi_case() { # transport size iters
	local tr=$1 size=$2 n=$3 v vals="" i d0= d1= args
	case $tr in
	mbcf) d0=mbcf0 d1=mbcf1 ;;
	rxe) d0=rxe0 d1=rxe0 ;;
	esac
	if [ "$tr" = tcp ]; then
		args=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include veth0)
	else
		args=(--mca pml ucx --mca osc ucx --mca btl self --mca pml_ucx_tls any
			--mca pml_ucx_devices any -x UCX_TLS=rc_v,self -x MPI_DEV0=$d0 -x MPI_DEV1=$d1)
	fi
	for ((i = 0; i <= REPS; i++)); do
		MPI_DEV0=$d0 MPI_DEV1=$d1 timeout 180 mpirun --allow-run-as-root --oversubscribe \
			-np 2 --bind-to none "${args[@]}" "$sw_log/rank.sh" "$mpi_prog" -p "$size" -n "$n" \
			>"$sw_log/mpi.$tr.$size.$i" 2>&1
		v=
		grep -q '^mbcf_mpi_check: [0-9]* checks, 0 failed' "$sw_log/mpi.$tr.$size.$i" &&
			v=$(awk '$1 == "ok" && $3 == "0:" && $4 == "pingpong" { x = $(NF - 1) } END { print x }' \
				"$sw_log/mpi.$tr.$size.$i")
		[ "$i" -gt 0 ] && vals="$vals ${v:-nan}"
	done
	emit mpi "$tr" pingpong_half_rtt "$size" 1500 - us $vals
}

sw_stacks() {
	echo mbcf-bench >/proc/sys/kernel/hostname
	mountpoint -q /dev/shm || mount -t tmpfs tmpfs /dev/shm
	cat >"$sw_log/rank.sh" <<-'EOF'
	#!/bin/bash
	# each rank sees only its own device (tests/vm/mpi.sh)
	case ${OMPI_COMM_WORLD_RANK:?} in
	0) [ -n "${MPI_DEV0:-}" ] && export UCX_NET_DEVICES=$MPI_DEV0:1 ;;
	1) [ -n "${MPI_DEV1:-}" ] && export UCX_NET_DEVICES=$MPI_DEV1:1 ;;
	esac
	exec "$@"
	EOF
	chmod +x "$sw_log/rank.sh"
	# BENCH_SW: which parts; BENCH_SW_TR: which transports (for reruns)
	local parts=${BENCH_SW:-ucx mpi cm} trs=${BENCH_SW_TR:-mbcf rxe tcp}
	local mtrs=${BENCH_SW_MPI_TR:-$trs}
	if [[ " $parts " == *" ucx "* ]]; then
		for tr in $trs; do
			ucx_case $tr tag_lat 8 1000
			# a bandwidth row: receive steered as for every other
			# (steer_rx below); without it mbcf places every byte
			# on the sender's vCPU, TCP copies on the receiver's
			steer_rx on
			ucx_case $tr tag_bw 65536 200
			steer_rx off
		done
	fi
	if [[ " $parts " == *" mpi "* ]]; then
		for tr in $mtrs; do
			mpi_case $tr 8 200
			mpi_case $tr 65536 50
		done
	fi
	if [[ " $parts " == *" cm "* ]]; then
		rdma link delete rxe0
		[[ " $trs " == *" mbcf "* ]] && cm_rate mbcf
		rdma link delete mbcf0
		rdma link add rxe0 type rxe netdev veth0
		vm_wait_port rxe0 20
		[[ " $trs " == *" rxe "* ]] && cm_rate rxe
		rdma link add mbcf0 type mbcf netdev veth0
	fi
}

# On two hosts each CPU handles its own NIC's receive.  Over a veth pair the
# receive would run on the *sending* vCPU (veth_xmit -> netif_rx), so one
# vCPU would do both ends' work while the other idles.  RPS steers each
# veth's receive to its receiver's vCPU (veth0 -> 0 server, veth1 -> 1
# client), for every transport alike (mbcf, TCP, pktgen's frames; rxe
# loops back inside its own device and is unaffected).  The latency rows
# run without it: there the work is serial anyway, and an emulated IPI
# would only add the emulator's cost to every hop.
steer_rx() { # on|off
	local m0=1 m1=2
	[ "$1" = off ] && m0=0 m1=0
	echo $m0 >/sys/class/net/veth0/queues/rx-0/rps_cpus
	in_ns1 sh -c "echo $m1 >/sys/class/net/veth1/queues/rx-0/rps_cpus"
}

# --- goodput under random loss (netem on both veth ends, so ACKs are lost
# too): ib_write_bw 64 KiB over mbcf, with the loss-adaptive window and
# with it fixed (window_adapt=N), and iperf3 over TCP.  rxe has no row: its
# two ends share rxe0 here and loop back inside the driver, never crossing
# the lossy veth (tests/vm/twokernel.sh is the rig that could).  Each
# transport's lossless figure is netem at 0 % loss: the same path as the
# lossy rows, so the ratio says what the loss costs.  netem's qdisc alone
# costs this guest's sender vCPU a fifth of its rate (enqueue, dequeue, a
# second softirq: 66-74 against 88-96 MB/s for mbcf, 2026-11-29); the
# "none" row (the veth's own noqueue) shows it.
loss_set() { # percent, or none: no qdisc at all
	tc qdisc del dev veth0 root 2>/dev/null
	in_ns1 tc qdisc del dev veth1 root 2>/dev/null
	[ "$1" = none ] && return
	tc qdisc add dev veth0 root netem loss "$1%"
	in_ns1 tc qdisc add dev veth1 root netem loss "$1%"
}

loss_case() { # transport(mbcf|mbcf-fixed|tcp) percent
	local tr=$1 p=$2 v vals="" i adapt=/sys/module/mbcf/parameters/window_adapt
	loss_set "$p"
	[ "$tr" = mbcf-fixed ] && echo N >$adapt
	for ((i = 0; i <= REPS; i++)); do	# run 0: warm-up
		case $tr in
		tcp)
			v=$(in_ns1 timeout 30 taskset -c 1 iperf3 -c "$VM_IP0" -p 5201 -t 3 -f M 2>/dev/null |
				awk '/receiver/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "MBytes/sec") x = $i } END { print x }') ;;
		*)
			v=$(perftest_once mbcf ib_write_bw 65536 -n 2000) ;;
		esac
		[ "$i" -gt 0 ] && vals="$vals ${v:-nan}"
	done
	echo Y >$adapt
	loss_set none
	[ "$p" = none ] || p=$p%
	emit loss "$tr" "goodput@$p" 65536 1500 "$ack" MB/s $vals
}

loss_rows() {
	local p spid
	timeout 3600 taskset -c 0 iperf3 -s -B "$VM_IP0" -p 5201 >/dev/null 2>&1 &
	spid=$!
	steer_rx on
	for p in none 0 0.1 1 5; do
		loss_case mbcf $p
		loss_case mbcf-fixed $p
		loss_case tcp $p
	done
	steer_rx off
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}

# --- many QPs: ib_write_bw -q N, 1440 B messages (perftest spreads its
# iterations over the N QPs); MB/s, message rate = MB/s / 1440 B.
qps_case() { # transport N
	local tr=$1 q=$2 a=- v vals="" i
	[ "$tr" = mbcf ] && a=$ack
	for ((i = 0; i <= REPS; i++)); do	# run 0: warm-up
		v=$(perftest_once "$tr" ib_write_bw 1440 -q "$q" -n 2000)
		[ "$i" -gt 0 ] && vals="$vals ${v:-nan}"
	done
	emit qps "$tr" "ib_write_bw -q $q" 1440 1500 "$a" MB/s $vals
}

qps_rows() {
	local q
	for q in 1 4 16 64; do qps_case mbcf $q; qps_case rxe $q; done
}

vm_wait_port mbcf0 20 && vm_wait_port mbcf1 20 && vm_wait_port rxe0 20 || exit 1
ack=$(cat /sys/module/mbcf/parameters/ack_interval)
if [ "$PART" = sw ]; then
	sw_stacks
	vm_dmesg_check
	exit
fi
if [ "$PART" = loss ]; then
	loss_rows
	vm_dmesg_check
	exit
fi
if [ "$PART" = storage ]; then
	# shellcheck source=guest-storage.sh
	. "$(dirname "$0")/guest-storage.sh"
	storage_rows
	vm_dmesg_check
	exit
fi
if [ "$PART" = qps ]; then
	steer_rx on
	qps_rows
	steer_rx off
	vm_dmesg_check
	exit
fi

# --- latency: the papers' table (4 B and 1440 B), atomics are 8 B ----------
# Same shapes compared: mbcf-lo (one device) with rxe (one device), mbcf
# (across the veth) with TCP (across the veth).
for tr in mbcf mbcf-lo rxe; do
	for t in ib_write_lat ib_read_lat ib_send_lat; do
		for s in 4 1440; do perftest_case latency $tr $t $s 1500 "$ack" -n 1000; done
	done
	perftest_case latency $tr ib_atomic_lat 8 1500 "$ack" -n 1000
done
tcp_lat 4
tcp_lat 1440

# --- bandwidth ---------------------------------------------------------------
steer_rx on

# --- bandwidth at MTU 1500: the papers' curve, 4 KiB, 64 KiB ---------------
SIZES="200 400 800 1200 1440 4096 65536"
[ "$QUICK" = 1 ] && SIZES="1440 65536"
for s in $SIZES; do
	perftest_case bandwidth mbcf ib_write_bw "$s" 1500 "$ack" -n 2000
	perftest_case bandwidth rxe ib_write_bw "$s" 1500 - -n 2000
done
if [ "$QUICK" != 1 ]; then
	# Explicit acknowledgement interval 1: an ACK asked for every frame.
	echo 1 >/sys/module/mbcf/parameters/ack_interval
	for s in 200 800 1440; do
		perftest_case bandwidth mbcf ib_write_bw "$s" 1500 1 -n 2000
	done
	echo "$ack" >/sys/module/mbcf/parameters/ack_interval
fi
cpu_per_gb mbcf 1500
cpu_per_gb rxe 1500
BENCH_BW_COL=5 perftest_case rate mbcf ib_write_bw 64 1500 "$ack" -n 5000
BENCH_BW_COL=5 perftest_case rate rxe ib_write_bw 64 1500 - -n 5000
tcp_bw 1500
for fs in 256 1500; do raw_capacity $fs; done
qps_rows

# --- pacing: ib_write_bw (64 KiB) paced by MBCF_QP_RATE_LIMIT --------------
# The figure is achieved / target: perftest's payload MB/s against the
# payload share of the rate (the rate counts whole 1514-byte frames, 1464
# payload bytes each); ~1 s per run.
pacing_case() { # Mbit/s [pace_slack_us]
	local r=$1 slack=${2:-2000} kbps=$(($1 * 1000)) want v vals="" i n
	echo "$slack" >/sys/module/mbcf/parameters/pace_slack_us
	want=$(awk -v k="$kbps" 'BEGIN { printf "%.4f", k * 1000 / 8 * 1464 / 1514 / 1048576 }')
	n=$((r * 2 > 100 ? r * 2 : 100))
	for ((i = 0; i < REPS; i++)); do
		v=$(BENCH_CLIENT_ENV="MBCF_QP_RATE_LIMIT=$kbps" perftest_once mbcf ib_write_bw 65536 -n $n)
		vals="$vals $(awk -v b="${v:-nan}" -v w="$want" 'BEGIN { printf "%.3f", b / w }')"
	done
	emit pacing mbcf "ib_write_bw@${r}Mbit/s:slack${slack}us" 65536 1500 "$ack" achieved/target $vals
	echo 2000 >/sys/module/mbcf/parameters/pace_slack_us
}
# the default slack (2 ms), and 20 ms: what the emulated guest's late timers need
for r in 10 50 100 400; do pacing_case $r; pacing_case $r 20000; done

# --- MTU 9000 ---------------------------------------------------------------
set_mtu 9000
sleep 1
for s in 8192 65536; do
	perftest_case bandwidth mbcf ib_write_bw "$s" 9000 "$ack" -n 1000
done
perftest_case bandwidth rxe ib_write_bw 65536 9000 - -n 1000
tcp_bw 9000
raw_capacity 9000
set_mtu 1500
steer_rx off

loss_rows
sw_stacks
vm_dmesg_check

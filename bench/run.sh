#!/usr/bin/env bash
# One command: mbcf against rxe, TCP and the link's raw frame capacity, all
# measured in one QEMU guest run (bench/guest.sh), then tabulated and
# plotted by bench/report.py into bench/results/.
#   bench/run.sh [--quick] [--reps N] [--sw-only | --loss-only | --qps-only | --storage-only]
#   bench/run.sh --icount [--reps N] [--iters N]
#   bench/run.sh --storage-only --icount [--reps N]
#   bench/run.sh --fifo-only [--reps N] [--quick]
# --sw-only: only the software-stack rows (rdma_cm, UCX, Open MPI), written
# to bench/results/sw.csv and sw.md instead; --loss-only: only goodput under
# netem loss, to loss.csv and loss.md; --qps-only: ib_write_bw -q 1..64, to
# qps.csv and qps.md; --storage-only: NVMe over Fabrics (fio) on mbcf, over
# TCP and on rxe, NFS over RDMA against NFS over TCP (bench/guest-storage.sh),
# to storage.csv and storage.md.
# --icount: only the latency and message-rate rows, in a guest whose clock
# counts instructions (tests/vm/run.sh --icount, bench/guest-icount.sh),
# N runs each (default 3; --iters: iterations per latency run, default
# 1000), to icount.csv and icount.md with each row's spread.
# --storage-only --icount: the NVMe-oF fio rows (mbcf, NVMe/TCP, rxe) in
# that guest (bench/storage-icount.sh), to storage-icount.csv and .md.
# --fifo-only: the memory-based FIFO against SEND/RECV with an SRQ and
# WRITE_WITH_IMM (message rate into one receiver, CPU per message) and its
# signal against a completion channel (wake-up round trip), N runs each
# (default 3; bench/guest-fifo.sh, bench/fifo_rate.c), to fifo.csv and
# fifo.md with each row's spread and the ratios of each run.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
quick=0
reps=
iters=1000
part=all
storage_icount=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1; shift ;;
	--reps) reps=$2; shift 2 ;;
	--sw-only) part=sw; shift ;;
	--loss-only) part=loss; shift ;;
	--qps-only) part=qps; shift ;;
	--storage-only) [ "$part" = icount ] && storage_icount=1; part=storage; shift ;;
	--icount) [ "$part" = storage ] && storage_icount=1; part=icount; shift ;;
	--fifo-only) part=fifo; shift ;;
	--iters) iters=$2; shift 2 ;;
	*) echo "usage: $0 [--quick] [--reps N] [--sw-only | --loss-only | --qps-only | --storage-only | --fifo-only | --icount [--iters N]]" >&2; exit 2 ;;
	esac
done

# --storage-only --icount: the NVMe-oF rows in the instruction-counting
# guest (bench/storage-icount.sh, which builds nothing itself)
if [ "$storage_icount" = 1 ]; then
	"$src/scripts/build.sh" mbcf_runtime
	exec "$here/storage-icount.sh" ${reps:+--reps "$reps"}
fi
if [ "$part" = icount ] || [ "$part" = storage ]; then
	"$src/scripts/build.sh" mbcf_runtime	# the module and the provider are all it runs
elif [ "$part" = fifo ]; then
	"$src/scripts/build.sh" mbcf_runtime mbcf_fifo_rate
else
	"$src/scripts/build.sh"
fi
out=$here/results
mkdir -p "$out"
if [ "$part" = icount ]; then
	reps=${reps:-3}
	[[ $reps =~ ^[1-9][0-9]*$ && $iters =~ ^[1-9][0-9]*$ ]] || { echo "$0: --reps and --iters take positive counts" >&2; exit 2; }
	log=$out/guest-icount.log
	t0=$EPOCHREALTIME
	MBCF_VM_SLUB_DEBUG= "$src/tests/vm/run.sh" --icount --build "$src/build" \
		--timeout "${ICOUNT_TIMEOUT:-3600}" "$here/guest-icount.sh" "$reps" "$iters" | tee "$log"
	{
		echo "group,transport,test,size,mode,unit,run,value"
		grep '^ICOUNT,' "$log" | sed 's/^ICOUNT,//'
	} >"$out/icount.csv"
	how="bench/run.sh --icount --reps $reps --iters $iters, host time $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s"
	exec /usr/bin/python3 "$here/icount-report.py" "$out/icount.csv" "$out/icount.md" "$how"
fi
if [ "$part" = fifo ]; then
	reps=${reps:-3}
	[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "$0: --reps takes a positive count" >&2; exit 2; }
	msgs=100000 iters=2000
	[ "$quick" = 1 ] && msgs=32000 iters=500
	log=$out/guest-fifo.log
	t0=$EPOCHREALTIME
	load0=$(cut -d' ' -f1-3 /proc/loadavg)
	MBCF_VM_SLUB_DEBUG= "$src/tests/vm/run.sh" --build "$src/build" \
		--timeout 5400 "$here/guest-fifo.sh" "$reps" "$msgs" "$iters" | tee "$log"
	{
		echo "group,mode,topology,qps,procs,run,v1,v2,v3,v4,v5"
		grep '^FIFO,' "$log" | sed 's/^FIFO,//'
	} >"$out/fifo.csv"
	how="bench/run.sh --fifo-only$([ "$quick" = 1 ] && echo " --quick") --reps $reps, $msgs messages per rate run, $iters round trips per wake-up run, host time $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s, host load average $load0 before and $(cut -d' ' -f1-3 /proc/loadavg) after ($(nproc) host CPUs)"
	exec /usr/bin/python3 "$here/fifo-report.py" "$out/fifo.csv" "$out/fifo.md" "$how"
fi
reps=${reps:-5}
name=results
[ "$part" = all ] || name=$part
log=$out/guest$([ "$part" = all ] || echo "-$part").log
# The kernel as users run it: without the test suite's slub_debug=FZP
# (tests/vm/run.sh), whose checks poison and verify every slab object on
# allocation and free -- every skb, of mbcf, rxe and TCP alike.
MBCF_VM_SLUB_DEBUG= "$src/tests/vm/run.sh" --build "$src/build" \
	--timeout 5400 "$here/guest.sh" "$quick" "$reps" "$part" | tee "$log"
grep '^BENCH,' "$log" | sed 's/^BENCH,//' >"$out/$name.csv.new"
{
	echo "group,transport,test,size,mtu,ack_interval,unit,median,runs"
	cat "$out/$name.csv.new"
} >"$out/$name.csv"
rm -f "$out/$name.csv.new"
# the guest's kernel as it names it (the newest in /lib/modules need not be
# the one the rig boots)
kver=$(awk '$1 == "BENCH_KERNEL" { print $2; exit }' "$log")
how="bench/run.sh$([ "$quick" = 1 ] && echo " --quick") --reps $reps$([ "$part" = all ] || echo " --$part-only"), $(date -u +%Y-%m-%d), kernel ${kver:-unknown}"
/usr/bin/python3 "$here/report.py" "$out/$name.csv" "$out" "$how"

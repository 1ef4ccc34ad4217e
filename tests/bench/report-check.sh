#!/usr/bin/env bash
# bench/report.py on a small fixture: exact ratio lines, and every plot
# written (when matplotlib is there: scripts/install-deps.sh installs it).
#   report-check.sh BENCH_DIR
set -euo pipefail
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The pacing rows' test name as bench/guest.sh emits it: the CSV is not
# quoted, so a comma in it would shift every later field.
name=$(sed -n 's/^[[:space:]]*emit pacing mbcf "\([^"]*\)".*/\1/p' "$bench/guest.sh")
[ -n "$name" ] || fail "no 'emit pacing' line in guest.sh"
case $name in *,*) fail "pacing test name has a comma: $name" ;; esac
# the name for rate $1 and slack $2: guest.sh's ${r} and ${slack} filled in
pname() { local n=${name//'${r}'/$1}; echo "${n//'${slack}'/$2}"; }

{
	echo "group,transport,test,size,mtu,ack_interval,unit,median,runs"
	echo "latency,mbcf-lo,ib_write_lat,4,1500,0,us,5.00,5.00;4.00;6.00"
	echo "latency,rxe,ib_write_lat,4,1500,0,us,10.00,10.00;9.00;11.00"
	echo "latency,mbcf,ib_write_lat,4,1500,0,us,12.00,12.00"
	echo "latency,tcp,rtt_half,4,1500,-,us,20.00,20.00"
	echo "bandwidth,mbcf,ib_write_bw,65536,1500,0,MB/s,300,300"
	echo "bandwidth,rxe,ib_write_bw,65536,1500,-,MB/s,50,50"
	echo "loss,mbcf,goodput@none,65536,1500,0,MB/s,125,125"
	echo "loss,mbcf,goodput@0%,65536,1500,0,MB/s,100,100"
	echo "loss,mbcf,goodput@0.1%,65536,1500,0,MB/s,96,96"
	echo "loss,mbcf,goodput@1%,65536,1500,0,MB/s,60,60"
	echo "loss,tcp,goodput@0%,-,1500,-,MB/s,50,50"
	echo "loss,tcp,goodput@1%,-,1500,-,MB/s,45,45"
	echo "pacing,mbcf,$(pname 100 2000),65536,1500,0,achieved/target,0.97,0.96;0.97;0.99"
	echo "pacing,mbcf,$(pname 10 2000),65536,1500,0,achieved/target,1.10,1.10"
} >"$tmp/r.csv"

/usr/bin/python3 "$bench/report.py" "$tmp/r.csv" "$tmp" "fixture" >"$tmp/out"
want() { grep -qxF -- "$1" "$tmp/out" || { cat "$tmp/out" >&2; fail "missing line: $1"; }; }
want "- ib_write_lat 4 B, one device, mbcf-lo/rxe latency: 0.50 (target <= 0.50: met)"
want "- ib_write_lat 4 B across the veth, mbcf / TCP round trip/2: 0.60 (target <= 0.50: missed)"
want "- ib_write_bw 64 KiB MTU 1500, mbcf/rxe bandwidth: 6.00 (target >= 8.00: missed)"
want "- goodput at 0.1 % loss / lossless, mbcf: 0.96 (target >= 0.95: met)"
want "- goodput at 1 % loss / lossless, mbcf: 0.60 (target >= 0.70: missed)"
want "- goodput at 1 % loss / lossless, tcp: 0.90"
want "- netem's qdisc alone (0 % loss) / no qdisc, mbcf: 0.80"
grep -qF "| mbcf | none | MB/s | 125 | **125** | 125 | 1.25 | 125 |" "$tmp/results.md" ||
	fail "the no-qdisc loss row is not in results.md's table"
want "- ib_write_bw 64 KiB paced at 10 Mbit/s (pace_slack_us 2000), achieved/target: 1.10 (target 0.95-1.05: missed)"
want "- ib_write_bw 64 KiB paced at 100 Mbit/s (pace_slack_us 2000), achieved/target: 0.97 (target 0.95-1.05: met)"
grep -qF "| pacing | mbcf | $(pname 10 2000) | 65536 | 1500 | 0 | 1.1 | **1.10** | 1.1 | achieved/target | 1.10 |" \
	"$tmp/results.md" || fail "pacing row not in results.md's table"

# The storage rows (bench/run.sh --storage-only): storage.md's ratio lines
# against the targets, by how much one is missed, and the names
# bench/guest-storage.sh emits are the ones the report looks up.
{
	echo "group,transport,test,size,mtu,ack_interval,unit,median,runs"
	echo "nvme,mbcf,fio randread qd32,4096,-,0,IOPS,3000.0,3000.0;2900.0;3100.0"
	echo "nvme,mbcf,fio randread qd32,4096,-,0,kcpu_us/IO,300.0,300.0;310.0;290.0"
	echo "nvme,tcp,fio randread qd32,4096,-,-,IOPS,2500.0,2500.0"
	echo "nvme,tcp,fio randread qd32,4096,-,-,kcpu_us/IO,250.0,250.0"
	echo "nvme,rxe,fio randread qd32,4096,-,-,IOPS,1000.0,1000.0;nan"
	echo "nvme,rxe,fio randread qd32,4096,-,-,kcpu_us/IO,900.0,900.0"
	echo "nvme,mbcf,fio read qd32,131072,-,0,MiB/s,60.00,60.00"
	echo "nvme,tcp,fio read qd32,131072,-,-,MiB/s,40.00,40.00"
	echo "nfs,mbcf,dd write,67108864,-,-,MiB/s,40.00,40.00"
	echo "nfs,tcp,dd write,67108864,-,-,MiB/s,20.00,20.00"
	echo "nfs,mbcf,dd read,67108864,-,-,kcpu_ms/MiB,5.00,5.00"
	echo "nfs,tcp,dd read,67108864,-,-,kcpu_ms/MiB,10.00,10.00"
} >"$tmp/s.csv"
/usr/bin/python3 "$bench/report.py" "$tmp/s.csv" "$tmp" "fixture" >"$tmp/out"
[ -s "$tmp/storage.md" ] || fail "no storage.md"
want "- NVMe-oF 4 KiB random read (qd32) IOPS, mbcf / NVMe/TCP: 1.20 (target >= 1.50: missed, short by 20 %)"
want "- NVMe-oF 4 KiB random read (qd32) IOPS, mbcf / nvme-rdma on rxe: 3.00 (target >= 3.00: met)"
want "- kernel CPU per I/O, 4 KiB random read, mbcf / NVMe/TCP: 1.20 (target < 1.00: missed, over by 20 %)"
want "- kernel CPU per I/O, 4 KiB random read, mbcf / nvme-rdma on rxe: 0.33"
want "- NVMe-oF 128 KiB sequential read (qd32) MiB/s, mbcf / NVMe/TCP: 1.50"
want "- NFS write MiB/s, RDMA on mbcf / TCP: 2.00"
want "- NFS read kernel CPU per MiB, RDMA on mbcf / TCP: 0.50"
grep -qF "| nvme | rxe | fio randread qd32 | 4096 | - | - | 1000 | **1000.0** | 1000 | IOPS | 1000.0 nan |" \
	"$tmp/storage.md" || fail "the rxe row (one run nan) is not in storage.md's table"
for n in 'emit nvme "$tr" "fio $rw qd32" "$bs" - "$m" IOPS' 'emit nvme "$tr" "fio $rw qd32" "$bs" - "$m" MiB/s' \
	'emit nvme "$tr" "fio $rw qd32" "$bs" - "$m" kcpu_us/IO' 'st_fio_case "$1" randread 4096' \
	'st_fio_case "$1" read 131072' 'emit nfs "$tr" "dd write" $((ST_MIB * 1048576)) - - MiB/s' \
	'emit nfs "$tr" "dd write" $((ST_MIB * 1048576)) - - kcpu_ms/MiB' \
	'emit nfs "$tr" "dd read" $((ST_MIB * 1048576)) - - MiB/s' \
	'emit nfs "$tr" "dd read" $((ST_MIB * 1048576)) - - kcpu_ms/MiB'; do
	grep -qF -- "$n" "$bench/guest-storage.sh" || fail "guest-storage.sh does not emit: $n"
done

if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
	for p in bandwidth latency loss pacing; do
		[ -s "$tmp/$p.png" ] || fail "no $p.png"
		grep -qF "($p.png)" "$tmp/results.md" || fail "results.md does not show $p.png"
	done
else
	echo "matplotlib missing: plots not checked"
fi
echo "bench.report: ok"

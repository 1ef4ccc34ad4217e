#!/usr/bin/env bash
# Run a test script inside a QEMU guest (TCG) booting the installed Debian
# kernel (or the debug lane's own: --debug-kernel), with the host's root
# shared read-only over 9p under a tmpfs overlay.  See tests/vm/README.md.
set -euo pipefail

usage() {
	cat <<EOF
usage: ${0##*/} [options] SCRIPT [ARGS...]

Boots the guest, installs the build (cmake --install BUILD; depmod -a) into
its overlay, sets up the topology, runs the bash SCRIPT (a file on the host)
inside the guest, scans the guest kernel log, powers off and exits with the
script's status (1 if the script passed but the kernel log scan did not).

options:
  --build DIR      build dir to install (default: \$MBCF_BUILD or <repo>/build;
                   the default is skipped when it has not been configured)
  --no-install     do not install any build
  --kver VER       kernel version (default: the one the build's module is
                   for if it is installed, else Debian's default kernel, the
                   one linux-image-amd64 depends on; scripts/default-kver.sh)
  --debug-kernel DIR  boot DIR/vmlinux (ELF, PVH entry) with DIR/lib/modules/REL
                   as the guest's modules (tests/vm/debug-modules.sh makes DIR)
  --kernel-dir DIR as --debug-kernel, for a stock kernel other than the default
                   (tests/vm/kernel-dir.sh makes DIR: e.g. Debian 12's 6.12
                   with the mbcf.ko of kmod.build-6.12; label k6.12)
  --mem SIZE       guest memory (default: 2G)
  --smp N          guest vCPUs (default: 2)
  --timeout SEC    kill the guest and fail after SEC seconds (default: 900)
  --keep-log FILE  write the full serial console (incl. full dmesg) to FILE
  --no-topology    do not set up veth/namespace/rdma links before SCRIPT
  --net BACKEND    give the guest a virtio-net NIC on -netdev BACKEND (e.g.
                   dgram,local.type=fd,local.str=10; run2.sh) instead of none
  --mac MAC        that NIC's MAC address
  --env NAME=VAL   export NAME=VAL to the guest's setup and SCRIPT (repeatable)
  --icount[=SHIFT] deterministic guest clock: single-threaded TCG with
                   -icount shift=SHIFT,sleep=off,align=off (default 0: 1 ns of
                   guest time per instruction; idle time skipped), so a time
                   measured inside the guest is an instruction count; one
                   vCPU unless --smp says otherwise (tests/vm/README.md)
  --quiet          print only the script's output and the verdict
  -h, --help       this help
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
src=$(cd "$here/../.." && pwd -P)

build=${MBCF_BUILD:-}
build_explicit=0
[ -n "$build" ] && build_explicit=1
kver=
debug_dir=
debug=0
mem=2G
smp=2
timeout=900
keep_log=
topology=1
install=1
quiet=0
net=
mac=
envs=()
icount=
smp_explicit=0

die() {
	echo "run.sh: $*" >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=${2:?--build needs a directory}; build_explicit=1; shift 2 ;;
	--no-install) install=0; shift ;;
	--kver) kver=${2:?}; shift 2 ;;
	--debug-kernel) debug_dir=${2:?--debug-kernel needs a directory}; debug=1; shift 2 ;;
	--kernel-dir) debug_dir=${2:?--kernel-dir needs a directory}; debug=0; shift 2 ;;
	--mem) mem=${2:?}; shift 2 ;;
	--smp) smp=${2:?}; smp_explicit=1; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--keep-log) keep_log=${2:?}; shift 2 ;;
	--no-topology) topology=0; shift ;;
	--quiet) quiet=1; shift ;;
	--icount) icount=0; shift ;;
	--icount=*) icount=${1#--icount=}; shift ;;
	--net) net=${2:?--net needs a -netdev backend}; shift 2 ;;
	--mac) mac=${2:?--mac needs an address}; shift 2 ;;
	--env)
		[[ ${2:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env takes NAME=VALUE"
		envs+=("$2"); shift 2 ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	-*) usage >&2; die "unknown option $1" ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
script=$1
shift
[ -f "$script" ] || die "no such script: $script"
script=$(realpath "$script")
# Guests reach nothing but each other: socket backends on a passed fd or
# on 127.0.0.1 only (never user-mode networking, tap, multicast, ...).
if [ -n "$net" ]; then
	[[ $net =~ ^(dgram|socket|stream), ]] && [[ $net != *mcast* ]] &&
		! grep -qP '(?<![\d.])(?!127\.0\.0\.1(?![\d.]))\d+\.\d+\.\d+\.\d+' <<<"$net" &&
		[[ ! $net =~ (host|addr|udp|connect|listen)=[^1,]|=localhost ]] ||
		die "--net: only dgram/socket/stream backends on a file descriptor or 127.0.0.1"
fi
[[ $timeout =~ ^[0-9]+$ ]] || die "--timeout takes seconds"
[ -z "$icount" ] || [[ $icount =~ ^([0-9]|10|auto)$ ]] || die "--icount takes a shift 0..10 or auto"

t_start=$EPOCHREALTIME
elapsed() { # seconds since t_start
	local now=$EPOCHREALTIME
	awk -v a="$t_start" -v b="$now" 'BEGIN { printf "%.1f", b - a }'
}

command -v qemu-system-x86_64 >/dev/null || {
	echo "run.sh: SKIP: qemu-system-x86_64 missing (scripts/install-deps.sh)" >&2
	exit 77
}

# --- kernel -----------------------------------------------------------------
# modroot: root of the guest's /lib/modules tree when it is not the host's.
modroot=
if [ -n "$debug_dir" ]; then
	[ -z "$kver" ] || die "--kver and --debug-kernel exclude each other"
	modroot=$(realpath "$debug_dir")
	case "$modroot" in
	/tmp/*) die "the guest cannot see the host's /tmp: --debug-kernel dir elsewhere" ;;
	esac
	kver=$(find "$modroot/lib/modules" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null)
	[ -n "$kver" ] && [ "$(printf '%s\n' "$kver" | wc -l)" = 1 ] ||
		die "$debug_dir/lib/modules must hold exactly one release (tests/vm/debug-modules.sh)"
	kernel=$modroot/vmlinux
	[ "$(head -c 4 "$kernel" 2>/dev/null | od -An -tx1 | tr -d ' ')" = 7f454c46 ] ||
		die "$kernel is not an ELF vmlinux"
elif [ -z "$kver" ]; then
	# the kernel the build's module is for, if it is installed; else
	# Debian's default kernel (linux-image-amd64's), not the newest: the
	# 6.12 that scripts/install-deps.sh adds boots only when asked for.
	v=$(sed -n 's/^KVER:STRING=//p' "${build:-$src/build}/CMakeCache.txt" 2>/dev/null || true)
	if [ -n "$v" ] && [ -r "/boot/vmlinuz-$v" ] && [ -d "/lib/modules/$v" ]; then
		kver=$v
	else
		kver=$("$src/scripts/default-kver.sh" --boot) ||
			die "no /lib/modules/VER with a matching /boot/vmlinuz-VER (apt-get install linux-image-amd64)"
	fi
fi
if [ -z "$debug_dir" ]; then
	kernel=/boot/vmlinuz-$kver
	[ -r "$kernel" ] || die "no $kernel"
	[ -d "/lib/modules/$kver" ] || die "no /lib/modules/$kver"
fi

# --- build dir --------------------------------------------------------------
if [ "$install" = 1 ]; then
	if [ -z "$build" ]; then
		build=$src/build
	fi
	if [ ! -f "$build/cmake_install.cmake" ]; then
		[ "$build_explicit" = 1 ] && die "$build is not a configured cmake build dir"
		echo "run.sh: note: $build not configured; not installing a build" >&2
		build=
	else
		build=$(realpath "$build")
	fi
else
	build=
fi

# --- cache + initramfs --------------------------------------------------------
cache=${XDG_CACHE_HOME:-/var/tmp}/mbcf-vm
mkdir -p "$cache"
case "$cache" in
/tmp/*) die "cache dir $cache must not be under /tmp (the guest cannot see it)" ;;
esac
[[ $cache =~ ^[A-Za-z0-9/._+-]+$ ]] || die "cache dir '$cache' has characters unsafe for the kernel command line"

# The checkout, and the build dir when it lies outside it, reach the guest
# on 9p shares of their own, mounted at the same paths (initramfs-init), so
# any checkout works, one under the host's /tmp too (the guest's /tmp is its
# own tmpfs and hides the host's).  A build dir holding the checkout is
# shared instead of it.
shares=("$src")
if [ -n "$build" ] && [[ $build/ != "$src"/* ]]; then
	if [[ $src/ == "$build"/* ]]; then
		shares=("$build")
	else
		shares+=("$build")
	fi
fi
for d in "${shares[@]}"; do
	[[ $d =~ ^/[A-Za-z0-9/._+-]+$ ]] || die "path '$d' has characters unsafe for the kernel command line"
done

initmods=()
add_mods() {
	local m line p seen
	for m in "$@"; do
		while read -r line; do
			[[ $line == insmod\ * ]] || continue
			p=${line#insmod }
			p=${p%% *}
			for seen in "${initmods[@]}"; do
				[ "$seen" = "$p" ] && continue 2
			done
			initmods+=("$p")
		done < <(modprobe ${modroot:+-d "$modroot"} -S "$kver" --show-depends "$m")
	done
}
add_mods virtio_pci 9pnet_virtio 9p overlay
# The debug kernel has all of them built in: its initramfs loads nothing.
[ "${#initmods[@]}" -gt 0 ] || [ -n "$modroot" ] ||
	die "modprobe --show-depends found no modules for $kver"

busybox=$(command -v busybox) || die "busybox missing (apt-get install busybox-static)"
key=$({
	echo "$kver"
	cat "$here/initramfs-init"
	printf '%s\n' "${initmods[@]}"
	sha256sum "$busybox" "${initmods[@]}"
} | sha256sum | cut -c1-16)
initrd=$cache/initramfs-$kver-$key.cpio

build_initramfs() {
	local stage m
	stage=$(mktemp -d "$cache/stage.XXXXXX")
	mkdir -p "$stage/bin" "$stage/modules"
	cp "$busybox" "$stage/bin/busybox"
	ln -s busybox "$stage/bin/sh"
	install -m 0755 "$here/initramfs-init" "$stage/init"
	: >"$stage/modules/order"
	for m in "${initmods[@]}"; do
		case $m in
		*.ko.xz) # 6.12's modules are compressed; busybox insmod wants them plain
			xz -dc "$m" >"$stage/modules/$(basename "$m" .xz)"
			basename "$m" .xz >>"$stage/modules/order" ;;
		*)
			cp "$m" "$stage/modules/"
			basename "$m" >>"$stage/modules/order" ;;
		esac
	done
	(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort |
		cpio --quiet -o -H newc -R 0:0) >"$initrd.tmp.$$"
	mv -f "$initrd.tmp.$$" "$initrd"
	rm -rf "$stage"
	# Drop stale images of older init scripts / kernels.
	find "$cache" -maxdepth 1 -name 'initramfs-*.cpio' ! -path "$initrd" -mmin +60 -delete 2>/dev/null || true
}

if [ ! -s "$initrd" ]; then
	exec 9>"$cache/lock"
	flock 9
	[ -s "$initrd" ] || build_initramfs
	flock -u 9
	exec 9>&-
fi

# Boot the uncompressed ELF vmlinux through QEMU's PVH entry when the kernel
# has CONFIG_PVH: no decompression of the xz bzImage under TCG (seconds).
# MBCF_VM_PVH=0 boots the bzImage as is.
extract_vmlinux() { # BZIMAGE OUT: unpack the xz payload of a bzImage
	local off
	off=$(LC_ALL=C grep -m 1 -aboP '\xfd7zXZ\x00' "$1" | cut -d: -f1)
	[ -n "$off" ] || return 1
	xz -dc --single-stream <(tail -c +"$((off + 1))" "$1") >"$2.tmp.$$" 2>/dev/null || return 1
	[ "$(head -c 4 "$2.tmp.$$" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] || return 1
	mv -f "$2.tmp.$$" "$2"
}
if [ -z "$debug_dir" ] && [ "${MBCF_VM_PVH:-1}" = 1 ] && grep -qx 'CONFIG_PVH=y' "/boot/config-$kver" 2>/dev/null &&
	command -v xz >/dev/null; then
	vmlinux=$cache/vmlinux-$kver-$(stat -c %Y-%s "$kernel")
	if [ ! -s "$vmlinux" ]; then
		exec 9>"$cache/lock"
		flock 9
		if [ ! -s "$vmlinux" ]; then
			find "$cache" -maxdepth 1 -name "vmlinux-$kver-*" -delete
			extract_vmlinux "$kernel" "$vmlinux" || rm -f "$vmlinux.tmp.$$"
		fi
		flock -u 9
		exec 9>&-
	fi
	[ -s "$vmlinux" ] && kernel=$vmlinux
fi

# --- per-run dir, job file ------------------------------------------------------
# Run dirs of runs that were SIGKILLed (no trap) are dropped after a day.
find "$cache" -maxdepth 1 -name 'run.*' -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
rundir=$(mktemp -d "$cache/run.XXXXXX")
qpid=
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
		kill -TERM "$qpid" 2>/dev/null || true
		sleep 0.5
		kill -KILL "$qpid" 2>/dev/null || true
		wait "$qpid" 2>/dev/null || true
	fi
	rm -rf "$rundir"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM HUP

# --- module index for the build's kernel modules -------------------------------
# depmod -a in the guest takes ~30 s under TCG, so compute the index here: a
# DESTDIR install into the run dir (stub depmod/ldconfig so install code cannot
# touch the host) tells which .ko files land where; depmod -b over a symlink
# farm of the stock modules plus those gives the index.  Cached by content;
# the guest uses it only if it installed exactly the same files.
ko_manifest() { # DIR...: "sha256  ./rel/path.ko" of the modules under DIRs
	local d
	for d in "$@"; do
		[ -d "$d" ] && (cd "$d" && find . -name '*.ko*' -type f -print0 | xargs -0r sha256sum)
	done | LC_ALL=C sort -k2
}
prepare_depmod() {
	local stage=$rundir/stage stub=$rundir/stub farm manifest key d f
	mkdir -p "$stub"
	printf '#!/bin/sh\nexit 0\n' >"$stub/depmod"
	cp "$stub/depmod" "$stub/ldconfig"
	chmod +x "$stub/depmod" "$stub/ldconfig"
	DESTDIR=$stage PATH=$stub:$PATH cmake --install "$build" >"$rundir/stage.log" 2>&1 || return 1
	manifest=$(ko_manifest "$stage/lib/modules/$kver" "$stage/usr/lib/modules/$kver")
	[ -n "$manifest" ] || return 0
	key=$(printf '%s\n%s\n' "$kver" "$manifest" | sha256sum | cut -c1-16)
	depmod_dir=$cache/depmod-$kver-$key
	[ -s "$depmod_dir/manifest" ] && return 0
	# The farm links the stock top-level dirs (kernel/, …) as a whole; a dir
	# the build installs into is copied as a tree of symlinks instead, so
	# nothing is ever written through a link into the host's /lib/modules.
	farm=$rundir/farm
	local mods=$farm/lib/modules/$kver top b
	mkdir -p "$mods"
	for f in "/lib/modules/$kver"/*; do
		b=${f##*/}
		case "$b" in
		modules.order | modules.builtin | modules.builtin.modinfo) ;;
		modules.*) continue ;; # outputs of depmod
		esac
		ln -s "$f" "$mods/$b"
	done
	for d in "$stage/lib/modules/$kver" "$stage/usr/lib/modules/$kver"; do
		[ -d "$d" ] || continue
		while IFS= read -r -d '' f; do
			f=${f#./}
			top=${f%%/*}
			if [ -L "$mods/$top" ]; then
				rm "$mods/$top"
				cp -rs "/lib/modules/$kver/$top" "$mods/$top"
			fi
			mkdir -p "$(dirname "$mods/$f")"
			rm -f "$mods/$f"
			cp "$d/$f" "$mods/$f"
		done < <(cd "$d" && find . -name '*.ko*' -type f -print0)
	done
	depmod -b "$farm" "$kver" || return 1
	[ "$quiet" = 1 ] || echo "run.sh: [$(elapsed) s] module index made on the host ($(printf '%s\n' "$manifest" | wc -l) modules)"
	rm -rf "$depmod_dir.tmp.$$"
	mkdir -p "$depmod_dir.tmp.$$"
	for f in "$farm/lib/modules/$kver"/modules.*; do
		[ -L "$f" ] || cp "$f" "$depmod_dir.tmp.$$/"
	done
	printf '%s\n' "$manifest" >"$depmod_dir.tmp.$$/manifest"
	rm -rf "$depmod_dir"
	mv "$depmod_dir.tmp.$$" "$depmod_dir"
	rm -rf "$farm"
	find "$cache" -maxdepth 1 -name 'depmod-*' -mmin +600 ! -path "$depmod_dir" -exec rm -rf {} + 2>/dev/null || true
}
depmod_dir=
if [ -n "$build" ]; then
	exec 9>"$cache/lock"
	flock 9
	prepare_depmod_ok=1
	prepare_depmod || prepare_depmod_ok=0
	flock -u 9
	exec 9>&-
	if [ "$prepare_depmod_ok" = 0 ]; then
		echo "run.sh: note: host-side module index failed (see below); the guest runs depmod -a" >&2
		tail -n 20 "$rundir/stage.log" >&2 || true
		depmod_dir=
	fi
fi

guest_script=$script
case "$script" in
/tmp/*) guest_script=/run/host$script ;; # the guest's /tmp is its own tmpfs
esac
for d in "${shares[@]}"; do
	[[ $script == "$d"/* ]] && guest_script=$script # shared at its own path
done
{
	printf 'MBCF_SRC=%q\n' "$src"
	printf 'MBCF_BUILD=%q\n' "$build"
	printf 'VM_TOPOLOGY=%q\n' "$topology"
	printf 'VM_SCRIPT=%q\n' "$guest_script"
	printf 'VM_DEPMOD_DIR=%q\n' "$depmod_dir"
	printf 'VM_MODULES_DIR=%q\n' "${modroot:+$modroot/lib/modules/$kver}"
	# Deadlines of the test programs (ring_attack) scale with the kernel.
	if [ "$debug" = 1 ]; then
		printf 'export VM_TIME_SCALE=%q\n' "${MBCF_VM_DEBUG_TIME_SCALE:-5}"
	else
		printf 'export VM_TIME_SCALE=1\n'
	fi
	for e in "${envs[@]}"; do
		printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
	done
	printf 'VM_ARGS=('
	[ $# -gt 0 ] && printf ' %q' "$@"
	printf ' )\n'
} >"$rundir/job"

log=$rundir/console.log
[ -n "$keep_log" ] && log=$keep_log
: >"$log"

cmdline="console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init log_buf_len=4M"
cmdline+=" 8250.nr_uarts=1 mitigations=off tsc=reliable no_timer_check"
# The stock kernel has no KASAN: SLUB's red zones, poisoning and sanity
# checks make writes past an object (and use after free) fail the run there
# too (a "BUG kmalloc-..." report).  The debug kernel has KASAN instead.
# MBCF_VM_SLUB_DEBUG= (empty) turns it off, e.g. to compare timings.
slub_debug=${MBCF_VM_SLUB_DEBUG-FZP}
if [ "$debug" = 0 ] && [ -n "$slub_debug" ]; then
	cmdline+=" slub_debug=$slub_debug"
fi
# The debug lane stops at the first soft lockup and reports an RCU stall
# after 15 s, not 21: a loop in softirq or under a spinlock that the wire
# or user space can stretch fails the run there (the stock kernel's log
# scan fails on the splat alone).
[ "$debug" = 1 ] && cmdline+=" softlockup_panic=1 rcupdate.rcu_cpu_stall_timeout=15"
# Extra kernel parameters for experiments, e.g. MBCF_VM_APPEND=kmemleak=off.
[ -n "${MBCF_VM_APPEND:-}" ] && cmdline+=" $MBCF_VM_APPEND"
cmdline+=" mbcfvm_run=$here/guest-run.sh mbcfvm_job=$rundir/job"
cmdline+=" mbcfvm_shares=$(IFS=,; echo "${shares[*]}")"

# --icount: the guest's clock counts instructions (2^SHIFT ns each), not
# the host's wall clock; sleep=off skips idle time instead of waiting it
# out in real time.  icount needs single-threaded TCG (QEMU refuses it with
# MTTCG), and one vCPU: with two, round-robin TCG runs them in turn on one
# host thread and each burns guest time while the other one's work waits.
accel=tcg,thread=multi
icount_opts=()
if [ -n "$icount" ]; then
	accel=tcg,thread=single
	[ "$smp_explicit" = 1 ] || smp=1
	icount_opts=(-icount "shift=$icount,sleep=off,align=off")
	cmdline+=" ${MBCF_VM_ICOUNT_APPEND-}"
fi

nic=(-nic none)
if [ -n "$net" ]; then # one virtio-net NIC (run2.sh: a link to another guest)
	nic=(-netdev "$net,id=net0" -device "virtio-net-pci,netdev=net0,romfile=${mac:+,mac=$mac}")
fi
# shellcheck disable=SC2054 # commas are qemu option syntax
qemu=(
	qemu-system-x86_64 -accel "$accel" "${icount_opts[@]}" -machine pc -cpu max
	-smp "$smp" -m "$mem" -nodefaults -no-reboot -no-user-config
	-display none -monitor none "${nic[@]}"
	-chardev stdio,id=con,signal=off -serial chardev:con
	-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
	-kernel "$kernel" -initrd "$initrd" -append "$cmdline"
)
for i in "${!shares[@]}"; do # mount tags mbcfshare0, 1, ... in mbcfvm_shares order
	qemu+=(-virtfs "local,path=${shares[$i]},mount_tag=mbcfshare$i,security_model=none,readonly=on,multidevs=remap")
done

fifo=$rundir/console
mkfifo "$fifo"
[ "$quiet" = 1 ] || echo "run.sh: [$(elapsed) s] host side ready, starting qemu (kernel $kver)"
"${qemu[@]}" </dev/null >"$fifo" 2>"$rundir/qemu.err" &
qpid=$!

# --- console loop with the watchdog ---------------------------------------------
deadline=$((${t_start%.*} + timeout))
result=
t_begin=
in_dmesg=0
timed_out=0
while :; do
	now=${EPOCHREALTIME%.*}
	left=$((deadline - now))
	if [ "$left" -le 0 ]; then
		timed_out=1
		break
	fi
	if IFS= read -r -t "$left" line; then
		line=${line%$'\r'}
		printf '%s\n' "$line" >>"$log"
		case "$line" in
		MBCF-VM-BEGIN*) t_begin=$(elapsed) ;;
		MBCF-VM-DMESG-BEGIN*) in_dmesg=1; continue ;;
		MBCF-VM-DMESG-END*) in_dmesg=0; continue ;;
		MBCF-VM-RESULT*) result=$line ;;
		esac
		[ "$in_dmesg" = 1 ] && continue
		[ -n "$result" ] && [[ $line != MBCF-VM-RESULT* ]] && continue # poweroff noise
		if [ "$quiet" = 0 ] || [[ $line != mbcf-vm:* ]]; then
			printf '%s\n' "$line"
		fi
	else
		# EOF (qemu exited) or timeout
		[ $? -gt 128 ] && continue
		break
	fi
done <"$fifo"

if [ "$timed_out" = 1 ]; then
	echo "run.sh: TIMEOUT: guest did not finish within ${timeout}s; killing qemu" >&2
	kill -TERM "$qpid" 2>/dev/null || true
	sleep 1
	kill -KILL "$qpid" 2>/dev/null || true
fi
qrc=0
{ wait "$qpid"; } 2>/dev/null || qrc=$?
qpid=
t_total=$(elapsed)

if [ -s "$rundir/qemu.err" ]; then
	sed 's/^/qemu: /' "$rundir/qemu.err" >&2
fi

rc=
dmesg_bad=
if [[ $result =~ rc=([0-9]+)\ dmesg=(-?[0-9]+) ]]; then
	rc=${BASH_REMATCH[1]}
	dmesg_bad=${BASH_REMATCH[2]}
fi

status=0
if [ -z "$rc" ]; then
	echo "run.sh: FAIL: no result line from the guest (qemu status $qrc; panic, hang or crash)" >&2
	echo "run.sh: last console lines:" >&2
	tail -n 40 "$log" | sed 's/^/  | /' >&2
	status=1
	[ "$timed_out" = 1 ] && status=124
elif [ "$rc" != 0 ]; then
	echo "run.sh: FAIL: $(basename "$script") exited with status $rc" >&2
	# the failed checks again, where a log cut to its head and tail shows them
	tr -d '\r' <"$log" | grep -a '^FAIL[: ]' | tail -n 20 | sed 's/^/  | /' >&2 || true
	status=$rc
elif [ "$dmesg_bad" != 0 ]; then
	echo "run.sh: FAIL: kernel log scan found $dmesg_bad suspicious line(s)" >&2
	status=1
fi
if [ -n "$rc" ] && [ "$dmesg_bad" != 0 ]; then
	# Show the first report in full (the guest printed only matching lines).
	re=$(sed -n "s/^VM_DMESG_BAD_RE='\(.*\)'\$/\1/p" "$here/lib.sh")
	echo "run.sh: kernel log from the first suspicious line:" >&2
	awk '/^MBCF-VM-DMESG-BEGIN/ { on = 1; next } /^MBCF-VM-DMESG-END/ { on = 0 } on' "$log" |
		grep -E -A 40 -m 1 -- "$re" | sed 's/^/  | /' >&2 || true
fi
if [ "$status" = 0 ]; then
	echo "run.sh: PASS: $(basename "$script")"
fi
echo "run.sh: timing: first test command at ${t_begin:-?} s, total ${t_total} s (kernel $kver, smp $smp, tcg${icount:+, icount shift=$icount})"
[ -n "$keep_log" ] && echo "run.sh: full console log in $keep_log"
exit "$status"

#!/bin/bash
# Guest side of the rig: PID 1 after the initramfs switch_roots into the
# overlay root.  Mounts the usual pseudo filesystems, reads the job file that
# run.sh wrote on the host, installs the build into the overlay, sets up the
# topology, runs the test script, scans the kernel log, prints the result
# line and powers off.  Everything it writes lands in the tmpfs overlay.
#
# Protocol on the console (parsed by run.sh):
#   MBCF-VM-BEGIN                      the test script starts now
#   MBCF-VM-DMESG-BEGIN / -END         full kernel log (kept in the log only)
#   MBCF-VM-RESULT rc=N dmesg=M        N: script status, M: bad kernel log lines
set -u

job=${1:-}

poweroff_now() {
	sync
	echo o >/proc/sysrq-trigger
	while :; do sleep 60; done
}

fail_setup() {
	echo "mbcf-vm: setup failed: $*"
	dmesg 2>/dev/null | tail -n 30
	echo "MBCF-VM-RESULT rc=125 dmesg=-1 stage=setup"
	poweroff_now
}

# vm_ldconfig_needed ROOT: the first file the install put under ROOT that the
# dynamic loader finds only after ldconfig, if any: a config snippet, or a
# library outside the directories ld.so searches even without a cache entry
# (/lib, /usr/lib and their multiarch directories; ld.so --list-diagnostics:
# system_dirs).  A library there, its SONAME link made by the install
# (libmbcf.so.1), needs none; providers are dlopen()ed by path.
vm_ldconfig_needed() {
	local f d
	find "$1" \( -name '*.so' -o -name '*.so.[0-9]*' -o -path '*/ld.so.conf.d/*' \) \
		\( -type f -o -type l \) -print 2>/dev/null | while IFS= read -r f; do
		d=${f#"$1"}
		d=${d%/*}
		case $d in
		*/libibverbs | /lib | /usr/lib) continue ;;
		/lib/*/* | /usr/lib/*/*) ;;
		/lib/*-linux-gnu | /usr/lib/*-linux-gnu) continue ;;
		esac
		echo "$f"
		break
	done
}

# initramfs-init mounted /proc /sys /dev /dev/pts /dev/shm /tmp /run.
[ -r /proc/uptime ] || fail_setup "no /proc"

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
export IBV_SHOW_WARNINGS=1
umask 022

[ -r "$job" ] || fail_setup "job file '$job' not readable"
# The job file defines MBCF_SRC MBCF_BUILD VM_TOPOLOGY VM_SCRIPT VM_ARGS
# VM_DEPMOD_DIR VM_MODULES_DIR.
# shellcheck source=/dev/null
. "$job"
export MBCF_SRC MBCF_BUILD
export MBCF_VM_LIB="$MBCF_SRC/tests/vm/lib.sh"
# shellcheck source=lib.sh
. "$MBCF_VM_LIB" || fail_setup "cannot source $MBCF_VM_LIB"

ip link set lo up
vm_phase "root mounted"

if [ -n "$MBCF_BUILD" ]; then
	# The build's install code may call depmod (~30 s under TCG here): make
	# that a no-op; the module index is handled below.
	stub=/run/mbcf-vm-stub
	mkdir -p "$stub"
	printf '#!/bin/sh\necho "(depmod $* deferred to the rig)"\n' >"$stub/depmod"
	chmod +x "$stub/depmod"
	if ! PATH=$stub:$PATH cmake --install "$MBCF_BUILD" >/tmp/mbcf-install.log 2>&1; then
		cat /tmp/mbcf-install.log
		fail_setup "cmake --install $MBCF_BUILD"
	fi
	vm_phase "cmake --install done"
	upper=/run/overlay/upper
	# ldconfig reads every library over 9p (~5 s under TCG): only when needed.
	need=$(vm_ldconfig_needed "$upper")
	if [ -n "$need" ]; then
		vm_log "ldconfig for: $need"
		ldconfig
		vm_phase "ldconfig done"
	fi
	# depmod -a parses all ~4000 modules (~30 s under TCG): run.sh computed
	# the index on the host for exactly the modules the build installs; use it
	# when the guest installed the same files, else fall back to depmod -a.
	kv=$(uname -r)
	kos=$(for d in "$upper/lib/modules/$kv" "$upper/usr/lib/modules/$kv"; do
		[ -d "$d" ] && (cd "$d" && find . -name '*.ko*' -type f -print0 | xargs -0r sha256sum)
	done | LC_ALL=C sort -k2)
	if [ -z "$kos" ]; then
		: # no module installed: the stock index is right
	elif [ -n "$VM_DEPMOD_DIR" ] && [ "$kos" = "$(cat "$VM_DEPMOD_DIR/manifest" 2>/dev/null)" ]; then
		cp "$VM_DEPMOD_DIR"/modules.* "/lib/modules/$kv/" || fail_setup "copy module index"
	else
		echo "mbcf-vm: running depmod -a in the guest (slow under TCG)"
		depmod -a || fail_setup "depmod -a"
	fi
	echo "mbcf-vm: installed $MBCF_BUILD ($(grep -c 'Installing\|Up-to-date' /tmp/mbcf-install.log) files, $(printf '%s' "$kos" | grep -c .) modules)"
fi

# A kernel of the rig's own (run.sh --debug-kernel): its modules index
# (modules.builtin*, depmod's files) and mbcf.ko live in a host dir.  Linked
# after the install above, so the index checks there never look into it.
# Where the host has that kernel installed too (run.sh --kernel-dir of a
# kernel under /), /lib/modules/REL is a real directory, which a link
# cannot replace: its files that are not links to the host's own (extra/,
# depmod's index) are copied over it into the overlay instead.
if [ -n "${VM_MODULES_DIR:-}" ]; then
	kv=$(uname -r)
	if [ -d "/lib/modules/$kv" ] && [ ! -L "/lib/modules/$kv" ]; then
		for f in "$VM_MODULES_DIR"/*; do
			[ -L "$f" ] || cp -a "$f" "/lib/modules/$kv/" || fail_setup "copy $f"
		done
	else
		ln -sfn "$VM_MODULES_DIR" "/lib/modules/$kv" || fail_setup "link $VM_MODULES_DIR"
	fi
	vm_log "modules of $kv from $VM_MODULES_DIR"
fi

if [ "$VM_TOPOLOGY" = 1 ]; then
	vm_topology || fail_setup "topology"
	vm_phase "topology done"
fi

echo "MBCF-VM-BEGIN uptime=$(cut -d' ' -f1 /proc/uptime)"
cd "$MBCF_SRC" || fail_setup "cd $MBCF_SRC"
bash "$VM_SCRIPT" "${VM_ARGS[@]}" </dev/null
rc=$?
echo "mbcf-vm: script exited with status $rc (uptime $(cut -d' ' -f1 /proc/uptime) s)"

# Let deferred work (e.g. device teardown) print before the final scan.
sleep 1
bad=0
vm_dmesg_check --all || bad=$VM_DMESG_BAD
echo "MBCF-VM-DMESG-BEGIN"
dmesg
echo "MBCF-VM-DMESG-END"
echo "MBCF-VM-RESULT rc=$rc dmesg=$bad"
poweroff_now

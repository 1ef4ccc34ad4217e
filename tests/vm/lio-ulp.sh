# Sourced by iser.sh and srp.sh: the checks both SCSI-over-RDMA tests make
# once their initiator is logged in to a LIO target on mbcf0 (a brd ramdisk
# behind it).  The caller provides: check, failed, logs, DEV (the disk),
# login and logout (logout returns once the disk is gone), before, pins0;
# it sources storage-lib.sh (stl_fio_verify) first.

# Initiator and target QPs (both made through rdma_cm: "comm [rdma_cm]")
# live on mbcf0: one RC QP at each end of the one connection; none elsewhere.
lio_ulp_qps() {
	local qps
	qps=$(rdma resource show qp 2>/dev/null)
	printf '%s\n' "$qps" | sed 's/^/  | /' | head -n 8
	check assert_eq 2 "$(printf '%s\n' "$qps" | grep -cE 'link mbcf0/1 .*type RC .*comm \[rdma_cm\]')" \
		"kernel RC QPs of rdma_cm on mbcf0"
	check assert_eq 0 "$(printf '%s\n' "$qps" | grep -F 'comm [rdma_cm]' | grep -vc 'link mbcf0/')" \
		"kernel QPs on other devices"
	vm_log "mbcf0 resources while logged in: $(vm_kres mbcf0)"
}

# The initiator's fast-registration MRs on mbcf0 as "mrn rkey" lines: the
# ULP re-keys one (ib_update_fast_reg_key) before each IB_WR_REG_MR it posts.
lio_ulp_mrs() {	# ULP (the comm rdma names: ib_iser, ib_srp)
	rdma resource show mr 2>/dev/null | awk -v c="[$1]" '$2 == "mbcf0" && index($0, " comm " c) {
		for (i = 3; i < NF; i++) if ($i == "mrn") n = $(i + 1); else if ($i == "rkey") k = $(i + 1)
		print n, k }' | LC_ALL=C sort
}

lio_ulp_fio() {	# NAME BS OFFSET SIZE
	stl_fio_verify "$DEV" 300 "$logs/fio.$1" "$@" --runtime=120
}

ok_or_fail() {	# CONDITION-STATUS OK-TEXT FAIL-TEXT
	if [ "$1" = 0 ]; then
		echo "ok: $2"
	else
		echo "FAIL: $3"
		failed=$((failed + 1))
	fi
}

# fio with verification (its traffic on mbcf0, the MRs re-keyed by it), then
# a pattern on the target's ramdisk that survives logout and login; ends
# logged out.
lio_ulp_data() {	# ULP NAME (for messages: iSER, SRP)
	local ulp=$1 name=$2 mrs0 nmrs tx0 tx1 rekeyed
	mrs0=$(lio_ulp_mrs "$ulp")
	nmrs=$(printf '%s\n' "$mrs0" | grep -c .)
	[ "$nmrs" -ge 1 ]
	ok_or_fail $? "$ulp holds $nmrs MRs on mbcf0" "$ulp holds no MR on mbcf0"

	tx0=$(vm_dev_ctr mbcf0 tx_payload_bytes)
	check lio_ulp_fio rw4k 4k 0 4M
	check lio_ulp_fio rw128k 128k 8M 8M
	tx1=$(vm_dev_ctr mbcf0 tx_payload_bytes)
	# 4 MiB + 8 MiB written and read back: at least 24 MiB of payload
	[ "$((tx1 - tx0))" -ge $((24 << 20)) ]
	ok_or_fail $? "mbcf0 carried $((tx1 - tx0)) payload bytes during fio (>= 24 MiB)" \
		"mbcf0 carried $((tx1 - tx0)) payload bytes during fio (< 24 MiB)"
	rekeyed=$(LC_ALL=C join <(printf '%s\n' "$mrs0") <(lio_ulp_mrs "$ulp") | awk '$2 != $3' | wc -l)
	[ "$rekeyed" -ge 1 ]
	ok_or_fail $? "$rekeyed of $ulp's $nmrs MRs re-keyed by fast registration during fio" \
		"none of $ulp's $nmrs MRs was re-keyed during fio"

	dd if=/dev/urandom of="$logs/pattern" bs=1M count=4 status=none
	check assert_cmd dd if="$logs/pattern" of="$DEV" bs=64k seek=512 oflag=direct status=none
	sync
	rm -f "$logs/ram"
	dd if=/dev/ram0 of="$logs/ram" bs=64k skip=512 count=64 iflag=direct status=none
	cmp -s "$logs/pattern" "$logs/ram"
	ok_or_fail $? "the 4 MiB written through $name are on the target's /dev/ram0" \
		"the target's /dev/ram0 does not hold the bytes written"
	check logout
	check login
	rm -f "$logs/back"
	check assert_cmd dd if="$DEV" of="$logs/back" bs=64k skip=512 count=64 iflag=direct status=none
	cmp -s "$logs/pattern" "$logs/back"
	ok_or_fail $? "4 MiB written before the logout read back identical after a new login" \
		"data read back after the new login differs"
	check logout
}

# After the target's configfs tree is gone: its modules unload (LIO's core
# loads every backend itself), mbcf0 is back where it started, nothing is
# left pinned, mbcf unloads, the log is clean; the test's verdict.
lio_ulp_finish() {	# TEST MODULE...
	local t=$1 m after
	shift
	for m in "$@" target_core_iblock target_core_file target_core_pscsi \
		target_core_user target_core_mod brd; do
		lsmod | grep -q "^$m " || continue
		if ! assert_cmd modprobe -r "$m"; then
			failed=$((failed + 1))
			lsmod | grep -E "^$m " | sed 's/^/  lsmod | /'
			find /sys/kernel/config/target -maxdepth 3 | sed 's/^/  configfs | /'
		fi
	done
	after=$(vm_kres_wait mbcf0 "$before")
	check assert_eq "$before" "$after" "mbcf0 resource summary after teardown"
	check assert_eq 0 "$(rdma resource show mr 2>/dev/null | grep -c 'dev mbcf')" "MRs left on mbcf devices"
	check assert_eq "$pins0" "$(vm_pins_held)" "pinned pages after teardown"
	check assert_cmd rdma link delete mbcf0
	check assert_cmd rdma link delete mbcf1
	check assert_cmd rmmod mbcf
	check vm_dmesg_check
	if [ "$failed" != 0 ]; then
		echo "$t: $failed check(s) failed"
		exit 1
	fi
	echo "$t: all checks passed"
}

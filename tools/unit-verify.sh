#!/bin/sh
# Test tools.unit-verify: systemd-analyze verify of mbcf-links.service in a
# scratch root holding the unit, the tool at its ExecStart path and the
# host's systemd targets; any complaint (unknown key, missing command,
# ordering cycle) fails.
#   unit-verify.sh SYSTEMD_ANALYZE TOOLS_DIR
set -eu
sa=$1
tools=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/sbin" "$root/lib/systemd/system" "$root/etc/mbcf"
install -m 0755 "$tools/mbcf-links" "$root/usr/sbin/mbcf-links"
install -m 0644 "$tools/mbcf-links.service" "$root/lib/systemd/system/"
install -m 0644 "$tools/links.conf" "$root/etc/mbcf/"
for t in /lib/systemd/system/*.target; do
	[ -e "$t" ] && cp "$t" "$root/lib/systemd/system/"
done
status=0
out=$("$sa" verify --man=no --root="$root" /lib/systemd/system/mbcf-links.service 2>&1) || status=$?
if [ "$status" != 0 ] || [ -n "$out" ]; then
	echo "FAIL: systemd-analyze verify mbcf-links.service (status $status):"
	echo "$out"
	exit 1
fi
echo "ok: systemd-analyze verify mbcf-links.service: no complaint"

#!/usr/bin/env bash
# Host test pkg.lintian: lintian (errors, warnings, info and pedantic tags)
# reports on the packages exactly the tags a document explains (the project's
# docs/packaging.md), no more and no fewer (an explanation of a tag that is
# gone is stale).
#   lintian.sh DOC DEB...
# DOC lists them between <!-- lintian-explained-begin --> and
# <!-- lintian-explained-end -->, one "- `package: tag`: why" per line.
set -euo pipefail

readme=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

awk '/<!-- lintian-explained-end -->/ { on = 0 }
     on && match($0, /^- `[^`]+`/) { print substr($0, 4, RLENGTH - 4) }
     /<!-- lintian-explained-begin -->/ { on = 1 }' "$readme" |
	LC_ALL=C sort -u >"$work/explained"
grep -q 'lintian-explained-end' "$readme" || { echo "FAIL: no lintian section in $readme"; exit 1; }

# lintian exits non-zero on errors only; every tag it prints is judged here.
# (It warns on stderr when run as root; that is not a tag.)
rc=0
lintian --display-info --pedantic --show-overrides --tag-display-limit 0 "$@" >"$work/out" 2>"$work/err" || rc=$?
cat "$work/out"
if [ "$rc" -gt 2 ] || grep -v '^running with root privileges is not recommended!$' "$work/err" | grep -q .; then
	echo "FAIL: lintian itself failed (status $rc):"
	cat "$work/err"
	exit 1
fi
# "E: libmbcf1: some-tag extra" -> "libmbcf1: some-tag"
sed -n 's/^[EWIPXO]: \([^ ]*\) \([^ ]*\).*/\1 \2/p' "$work/out" | LC_ALL=C sort -u >"$work/tags"

echo "lintian: $(wc -l <"$work/tags") tag(s) on $# package(s); $(wc -l <"$work/explained") explained in ${readme##*/}"
if ! diff -u "$work/explained" "$work/tags" >"$work/diff"; then
	echo "FAIL: lintian's tags differ from those ${readme##*/} explains (- explained only, + reported only):"
	sed 's/^/    /' "$work/diff"
	exit 1
fi
echo "ok: lintian reports exactly the explained tags"

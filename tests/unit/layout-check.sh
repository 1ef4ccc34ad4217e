#!/bin/sh
# kmod/'s layering, checked on the sources (comments stripped):
#  1. qp->lock is taken and released in kmod/qp.c only (anyone may
#     lockdep_assert_held() it);
#  2. sk_buff and the skb APIs appear in kmod/net.c and kmod/zc.c (zc.h)
#     only -- except a netlink message (`struct sk_buff *msg`, the rdma
#     netlink ops' type) and mbcf.h's embedded `struct sk_buff_head`
#     members, which only net.c looks into;
#  3. ring memory is read in kmod/wr.c and kmod/cq.c only: the accessors
#     of include/mbcf/ring.h (every mbcf_ring_*() but mbcf_ring_init(),
#     which only records where a ring is), a ring end's base pointer, and
#     a mapped buffer's kernel address (umap->buf; umap.c makes it);
#  4. every source file in kmod/ and core/ (the actual directory listing)
#     has its row in the file map of docs/design.md (the block under
#     "## Layers and directories": a directory line " dir/", file rows
#     "   name.c").
#   tests/unit/layout-check.sh [SOURCE_DIR]
set -eu
src=${1:-$(dirname "$0")/../..}
cd "$src"
fail=0

# FILE with comments blanked out (line numbers kept).
strip() {
	perl -0777 -pe 's{/\*.*?\*/}{ (my $c = $&) =~ s/[^\n]//g; $c }gse; s{//[^\n]*}{}g' "$1"
}

# RULE PATTERN FILES...: report every line of FILES matching PATTERN (perl).
check() {
	rule=$1 pat=$2
	shift 2
	for f in "$@"; do
		[ -f "$f" ] || continue
		strip "$f" | F=$f PAT=$pat perl -ne '
			BEGIN { $p = $ENV{PAT} }
			if (/$p/) { chomp; print "$ENV{F}:$.: $_\n"; $bad = 1 }
			END { exit($bad ? 1 : 0) }' >"$tmp/out" ||
			{ sed "s|^|layout-check: $rule: |" "$tmp/out"; fail=1; }
	done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

others() {	# kmod sources but the named ones
	for f in kmod/*.c kmod/*.h; do
		keep=1
		for x in "$@"; do [ "$f" = "kmod/$x" ] && keep=0; done
		[ $keep = 1 ] && echo "$f"
	done
}

# 1. qp->lock
check "qp->lock taken outside kmod/qp.c" \
	'\b(raw_)?spin_(try)?(un)?lock\w*\s*\([^;]*\bqp->lock\b|\b(scoped_)?guard\s*\(\s*\w+\s*\)\s*\([^;]*\bqp->lock\b' \
	$(others qp.c)

# 2. sk_buff
skb='\bsk_buff_head\b|\bsk_buff(?!\s*\*\s*msg\b)\b|\bskb\b|\b_*skb_\w+|\w+_skb\b|\bubuf_info\b|\bSKBFL_\w+|\bMAX_SKB_FRAGS\b|\bdev_queue_xmit\b|\bnetif_rx\b|\bnapi_\w+|\bkfree_skb\w*'
check "skb API outside kmod/net.c and kmod/zc.c" "$skb" $(others net.c zc.c zc.h mbcf.h)
check "skb API in kmod/mbcf.h beyond the embedded frame queues" \
	"^(?!\\s*struct sk_buff_head \\w+;\\s*\$)(?!#include <linux/skbuff.h>)(?:.*(?:$skb))" kmod/mbcf.h

# 3. ring memory
check "ring memory read outside kmod/wr.c and kmod/cq.c" \
	'\bmbcf_ring_(?!init\b)\w+\s*\(|\b(ring|ksq|krq|kring|poll)\s*(\.|->)\s*base\b' \
	$(others wr.c cq.c)
check "a mapped ring buffer read outside kmod/wr.c, kmod/cq.c, kmod/umap.c" \
	'->\s*buf\b' $(others wr.c cq.c umap.c)

# 4. the file map
awk '
	/^## / { inmap = ($0 ~ /^## Layers and directories/) }
	inmap && /^```/ { block = !block; next }
	inmap && block && /^ [^ ]+\/ / { split($0, a, " "); dir = a[1] }
	inmap && block && /^   [^ ]+\.[ch]( |$)/ { split($0, a, " "); print dir a[1] }
' docs/design.md | sort -u >"$tmp/map"
for f in kmod/*.c kmod/*.h core/*.c core/*.h; do
	[ -f "$f" ] || continue
	grep -qxF "$f" "$tmp/map" || {
		echo "layout-check: not in the file map of docs/design.md: $f"
		fail=1
	}
done

[ $fail = 0 ] && echo "layout-check: kmod/ layering and the file map hold"
exit $fail

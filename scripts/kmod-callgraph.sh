#!/bin/sh
# The kernel module's cross-file calls, from its object files: for each
# kmod/*.o, the functions of other kmod/ files it calls (nm: its undefined
# symbols that another kmod/ object defines as text).  Data (ops tables,
# module parameters) and core/ are left out.  Then the file-level cycles:
# all of them, and those left without the upcalls into qp.c and the
# pairs of the key space, mr.c with mw.c and with frmr.c (mr.c's lookup
# resolves a window's or a fast registration's key through them, and they
# hold and release MRs through mr.c): the layering allows no other.
#   scripts/kmod-callgraph.sh [build/kmod/src]
set -eu
dir=${1:-build/kmod/src}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

objs() {
	for o in "$dir"/*.o; do
		case "$(basename "$o")" in mbcf.o | *.mod.o) continue ;; esac
		echo "$o"
	done
}

# strongly connected components of the edge list $1 ("from to" lines)
scc() {
	awk '
	{ e[$1, $2] = 1; n[$1] = 1; n[$2] = 1 }
	END {
		for (a in n) for (b in n) r[a, b] = e[a, b]
		for (k in n) for (a in n) if (r[a, k]) for (b in n) if (r[k, b]) r[a, b] = 1
		for (a in n) {
			if (done[a]) continue
			s = a; c = 0
			for (b in n) if (b != a && r[a, b] && r[b, a]) { s = s " " b; done[b] = 1; c++ }
			if (c) print "cycle: " s
		}
	}' "$1" | sort
}

for o in $(objs); do
	nm --defined-only "$o" | awk -v f="$(basename "$o" .o)" '$2 == "T" { print $3, f }'
done | sort >"$tmp/defs"
for o in $(objs); do
	nm -u "$o" | awk '{ print $2 }' | sort | join - "$tmp/defs" |
		awk -v f="$(basename "$o" .o)" '$2 != f { print f, $2, $1 }'
done | sort >"$tmp/calls"
awk '{ k = $1 ".c -> " $2 ".c"; a[k] = a[k] (a[k] ? " " : "") $3 }
     END { for (k in a) print k ": " a[k] }' "$tmp/calls" | sort
awk '{ print $1, $2 }' "$tmp/calls" | sort -u >"$tmp/edges"
awk '$2 != "qp" && !(($1 == "mw" || $1 == "frmr") && $2 == "mr") &&
	!($1 == "mr" && ($2 == "mw" || $2 == "frmr"))' \
	"$tmp/edges" >"$tmp/strict"
echo "--- file-level cycles:"
scc "$tmp/edges"
echo "--- cycles without the upcalls into qp.c and the key space's pairs (mr.c with mw.c, frmr.c):"
scc "$tmp/strict"

#!/bin/sh
# fetch-rdma-core.sh WORKDIR [SUITE]
#
# Fetch Debian's rdma-core source package with apt and unpack its upstream
# tarball under WORKDIR; print the source tree's path on stdout.
#
# With SUITE (a Debian suite: trixie, unstable, ...), that suite's rdma-core,
# through a private apt state under WORKDIR as below.  Without it:
# first choice the source of the libibverbs installed here (Debian 12:
# 44.0-2), from the system's deb-src entries.  Debian's archive no longer
# serves that orig tarball everywhere, so the fallback is the same package
# from Debian 13 (trixie, 56.1), fetched with a private apt state under
# WORKDIR (the system's apt configuration is not touched).  Both have private
# provider ABI 34; the caller checks that, and the build's provider.abi test
# checks the provider's ops table against the installed libibverbs.
#
# apt verifies every file it downloads against the signed Sources index;
# the orig tarball's SHA-256 is checked again here because the fallback's
# .dsc may be missing, which makes apt-get exit non-zero after fetching it.
set -eu

work=$1
mkdir -p "$work"
cd "$work"
log=$work/fetch.log
: >"$log"

# fetch NAME APT_OPTS...: download the source of rdma-core[=VERSION] and
# unpack its orig tarball; prints the tree.
fetch() {
	spec=$1
	shift
	rm -rf dl && mkdir dl
	(cd dl && apt-get "$@" source --download-only -q "$spec") >>"$log" 2>&1 || true
	orig=$(ls dl/rdma-core_*.orig.tar.gz 2>/dev/null | head -n 1)
	[ -n "$orig" ] || return 1
	name=${orig#dl/}
	want=$(apt-cache "$@" showsrc "${spec%%=*}" 2>>"$log" |
		awk -v f="$name" '/^Checksums-Sha256:/ { s = 1; next } /^[^ ]/ { s = 0 }
			s && $3 == f { print $1; exit }')
	have=$(sha256sum "$orig" | cut -d' ' -f1)
	if [ -z "$want" ] || [ "$want" != "$have" ]; then
		echo "fetch-rdma-core: $name: sha256 $have, index says '${want}'" >>"$log"
		return 1
	fi
	ver=${name#rdma-core_}
	ver=${ver%.orig.tar.gz}
	rm -rf "src-$ver" && mkdir "src-$ver"
	tar -xzf "$orig" -C "src-$ver"
	# The tarball's top directory is rdma-core-<ver> up to 56.1, a GitHub
	# archive name (linux-rdma-rdma-core-<commit>) in 65.0.
	set -- "src-$ver"/*/CMakeLists.txt
	if [ "$#" -ne 1 ] || [ ! -f "$1" ]; then
		echo "fetch-rdma-core: $name does not unpack to one source tree" >>"$log"
		return 1
	fi
	echo "$work/${1%/CMakeLists.txt}"
}

# private_state SUITE: apt options for a private apt state holding only
# SUITE's deb-src index (the system's apt configuration is not touched).
private_state() {
	state=$work/apt-$1
	mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/sources"
	cat >"$state/sources/$1.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $1
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	apt_opts="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$state/sources
		-o Dir::State::Lists=$state/lists -o Dir::Cache=$state/cache"
	# shellcheck disable=SC2086
	apt-get $apt_opts update -q >>"$log" 2>&1 || true
}

if [ -n "${2-}" ]; then
	private_state "$2"
	# shellcheck disable=SC2086
	if fetch rdma-core $apt_opts; then
		exit 0
	fi
	echo "fetch-rdma-core: no rdma-core source from suite $2; see $log" >&2
	grep '^E: ' "$log" >&2 || true
	exit 1
fi

installed=$(dpkg-query -W -f '${Version}' libibverbs1 2>/dev/null || true)
if [ -n "$installed" ] && fetch "rdma-core=$installed"; then
	exit 0
fi

# Fallback: Debian 13's rdma-core through a private apt state.
private_state trixie
# shellcheck disable=SC2086
if fetch rdma-core $apt_opts; then
	exit 0
fi
echo "fetch-rdma-core: no rdma-core source could be fetched; see $log" >&2
grep '^E: ' "$log" >&2 || true
exit 1

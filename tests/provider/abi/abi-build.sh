#!/usr/bin/env bash
# abi-build.sh SRCDIR BUILDDIR SUITE PABI VERSION
#
# Builds the provider against one rdma-core release and checks what comes
# out (the "abi" lane, tests/provider/abi/CMakeLists.txt):
#   - configures SRCDIR (no module) in BUILDDIR with
#     -DMBCF_RDMA_CORE_SUITE=SUITE ("host": the installed libibverbs'
#     release) and -DMBCF_PROVIDER_WERROR=ON: any compiler or linker warning
#     fails the build;
#   - builds the provider and the host test of its fast path
#     (provider.fastpath: cq.c, qp.c, wr.c against rings in memory, with
#     sanitizers) and runs that test, on that release's libibverbs;
#   - the rdma-core release used is VERSION (or one of "A|B"), its private
#     ABI PABI;
#   - the provider is libmbcf-rdmav<PABI>.so, a link to libmbcf.so.1, and
#     needs the symbol version
#     IBVERBS_PRIVATE_<PABI> and no other private one;
#   - it loads (dlopen, RTLD_NOW) into that release's libibverbs: the
#     installed one when the ABIs agree, else rdma-core's own IN_PLACE build
#     (LD_LIBRARY_PATH), where it is also staged with its .driver file;
#   - a provider for another ABI than the installed one does NOT load into
#     the installed libibverbs (the symbol versions are real), and that
#     build refuses the `package` target;
#   - the package dependency the build writes (provider/ibverbs-depends) is
#     exactly the releases with that ABI.
# The rdma-core source, its build and BUILDDIR are kept: a re-run rebuilds
# only the provider.
set -euo pipefail

src=$1 build=$2 suite=$3 pabi=$4 version=$5
fail() {
	echo "abi-build($suite): FAIL: $*" >&2
	exit 1
}

args=(-DMBCF_KMOD=OFF -DMBCF_TESTS=ON -DMBCF_SANITIZE=ON -DMBCF_PROVIDER_WERROR=ON
	-DMBCF_ABI_LANES=OFF)
if [ "$suite" = host ]; then
	args+=(-DMBCF_RDMA_CORE_SUITE=)
else
	args+=("-DMBCF_RDMA_CORE_SUITE=$suite")
fi
# The project's default generator (Makefiles), as scripts/build.sh uses.
if [ -f "$build/CMakeCache.txt" ] &&
	! grep -q '^CMAKE_GENERATOR:INTERNAL=Unix Makefiles$' "$build/CMakeCache.txt"; then
	rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
mkdir -p "$build"
cmake -S "$src" -B "$build" "${args[@]}" >"$build/configure.out" 2>&1 ||
	{ tail -n 40 "$build/configure.out"; fail "configure failed ($build/configure.out)"; }
line=$(grep -E '^-- rdma-core [^ ]+ provider headers \(private ABI [0-9]+\)' "$build/configure.out" || true)
[ -n "$line" ] || { tail -n 40 "$build/configure.out"; fail "no provider configured"; }
echo "$line"
got_ver=$(sed -E 's/^-- rdma-core ([^ ]+) .*/\1/' <<<"$line")
got_pabi=$(sed -E 's/.*\(private ABI ([0-9]+)\).*/\1/' <<<"$line")
[[ "|$version|" == *"|$got_ver|"* ]] || fail "rdma-core $got_ver, expected $version"
[ "$got_pabi" = "$pabi" ] || fail "private ABI $got_pabi, expected $pabi"

target=mbcf-rdmav$pabi
cmake --build "$build" -j"$(nproc)" --target "$target" mbcf-provider-fastpath-check >"$build/build.out" 2>&1 ||
	{ tail -n 60 "$build/build.out"; fail "building $target failed"; }
out=$(ctest --test-dir "$build" -R '^provider\.fastpath$' --output-on-failure 2>&1) ||
	{ printf '%s\n' "$out" | tail -n 30; fail "provider.fastpath failed"; }
grep -q '100% tests passed, 0 tests failed out of 1$' <<<"$out" ||
	{ printf '%s\n' "$out" | tail -n 30; fail "provider.fastpath did not run"; }
echo "provider.fastpath passed against rdma-core $got_ver"
lib=$build/provider/lib$target.so
[ -f "$lib" ] || fail "$lib not built"
[ "$(readlink "$lib")" = libmbcf.so.1 ] || fail "$lib is not a link to libmbcf.so.1"

# The private symbol versions the provider needs: exactly one, ours.
vers=$(objdump -p "$lib" | awk '/^Version References:/ { r = 1; next } /^$/ { r = 0 }
	r && $NF ~ /^IBVERBS_PRIVATE_/ { print $NF }' | sort -u | tr '\n' ' ')
[ "$vers" = "IBVERBS_PRIVATE_$pabi " ] ||
	fail "$lib needs private versions '$vers', expected IBVERBS_PRIVATE_$pabi"

cc -o "$build/dlopen-check" "$src/tests/provider/dlopen-check.c" -ldl
host_pabi=$(objdump -p "$(pkg-config --variable=libdir libibverbs)/libibverbs.so.1" |
	sed -nE 's/.*IBVERBS_PRIVATE_([0-9]+).*/\1/p' | head -n 1)
tree=$build/_deps/rdma-core/build
if [ "$pabi" = "$host_pabi" ]; then
	out=$("$build/dlopen-check" "$lib" 2>&1) || fail "installed libibverbs: $out"
	[ "$out" = "loaded $lib" ] || fail "dlopen-check printed '$out'"
	echo "loads into the installed libibverbs (private ABI $host_pabi)"
else
	for f in lib/libibverbs.so.1 "lib/lib$target.so" etc/libibverbs.d/mbcf.driver \
		bin/ibv_devinfo bin/ibv_rc_pingpong lib/libmlx5.so.1 lib/libefa.so.1; do
		[ -e "$tree/$f" ] || fail "$tree/$f missing"
	done
	[ "$(cat "$tree/etc/libibverbs.d/mbcf.driver")" = "driver mbcf" ] ||
		fail "staged mbcf.driver is not 'driver mbcf'"
	cmp -s "$lib" "$tree/lib/lib$target.so" || fail "staged provider differs from $lib"
	own=$(objdump -p "$tree/lib/libibverbs.so.1" | grep -oE 'IBVERBS_PRIVATE_[0-9]+' | sort -u)
	[ "$own" = "IBVERBS_PRIVATE_$pabi" ] || fail "rdma-core's libibverbs defines '$own'"
	out=$(LD_LIBRARY_PATH=$tree/lib "$build/dlopen-check" "$lib" 2>&1) ||
		fail "rdma-core $version's libibverbs: $out"
	[ "$out" = "loaded $lib" ] || fail "dlopen-check printed '$out'"
	echo "loads into rdma-core $version's libibverbs ($tree/lib)"
	if out=$("$build/dlopen-check" "$lib" 2>&1); then
		fail "loaded into the installed libibverbs (private ABI $host_pabi): $out"
	fi
	grep -q "version \`IBVERBS_PRIVATE_$pabi' not found" <<<"$out" ||
		fail "installed libibverbs refused it for another reason: $out"
	echo "refused by the installed libibverbs (private ABI $host_pabi): IBVERBS_PRIVATE_$pabi not found"
fi
# The first release with another private ABI (rdma-core's release tags);
# for the newest ABI the release after the one built against.
case $pabi in
34) end=57 ;; 57) end=59 ;; 59) end=64 ;; 64) end=65 ;; *) end=$((${got_ver%%.*} + 1)) ;;
esac
dep=$(cat "$build/provider/ibverbs-depends")
[ "$dep" = "libibverbs1 (>= $pabi~), libibverbs1 (<< $end~)" ] ||
	fail "package dependency '$dep', expected libibverbs1 (>= $pabi~), libibverbs1 (<< $end~)"
echo "package dependency: $dep"
if [ "$pabi" != "$host_pabi" ]; then
	if out=$(cmake --build "$build" --target package 2>&1); then
		fail "the package target built packages of a provider for private ABI $pabi"
	fi
	grep -q "package: this build's provider is for private ABI $pabi" <<<"$out" ||
		fail "the package target failed for another reason: $(tail -n 5 <<<"$out")"
	echo "package target refused (private ABI $pabi is not the installed libibverbs')"
fi
echo "abi-build($suite): PASS: lib$target.so for rdma-core $version"

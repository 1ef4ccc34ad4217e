#!/bin/sh
# Print the kernel release that builds and guests use unless told otherwise:
#   default-kver.sh --build   one with a build tree (/lib/modules/VER/build)
#   default-kver.sh --boot    one with /boot/vmlinuz-VER and /lib/modules/VER
# That is the release Debian's metapackage points to (linux-headers-amd64 for
# --build, linux-image-amd64 for --boot: 6.1.0-N-amd64 on Debian 12), not the
# newest installed one: scripts/install-deps.sh also installs
# bookworm-security's 6.12, which builds and boots only when asked
# for (-DKVER=, run.sh --kver, the kmod.build-* and k6.12 tests).  Without the
# metapackage (or its kernel): the newest release that qualifies.
set -eu
case ${1:-} in
--build) meta=linux-headers-amd64 prefix=linux-headers- ;;
--boot) meta=linux-image-amd64 prefix=linux-image- ;;
*) echo "usage: default-kver.sh --build|--boot" >&2; exit 2 ;;
esac

usable() {
	case $1 in
	'') return 1 ;;
	esac
	if [ "$meta" = linux-headers-amd64 ]; then
		[ -f "/lib/modules/$1/build/Makefile" ]
	else
		[ -r "/boot/vmlinuz-$1" ] && [ -d "/lib/modules/$1" ]
	fi
}

# "linux-image-6.1.0-57-amd64 (= 6.1.192-3)[ | ...][, ...]" -> 6.1.0-57-amd64
dep=$(dpkg-query -W -f='${Depends}' "$meta" 2>/dev/null || true)
v=$(printf '%s\n' "$dep" | sed -n "s/^$prefix\([^ ,|]*\).*/\1/p")
if usable "$v"; then
	echo "$v"
	exit 0
fi
for v in $(find /lib/modules -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort -rV); do
	if usable "$v"; then
		echo "$v"
		exit 0
	fi
done
echo "default-kver.sh: no kernel for $1 (apt-get install $meta)" >&2
exit 1

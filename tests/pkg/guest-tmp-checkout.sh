#!/bin/bash
# Guest side of vm.tmp-checkout (tmp-checkout.sh): the checkout and the build
# dir, both under the host's /tmp, are here at their own paths.
#   guest-tmp-checkout.sh CHECKOUT BUILD TOKEN
set -u
# shellcheck source=../vm/lib.sh
. "$MBCF_VM_LIB"

co=$1
build=$2
token=$3
failed=0
check() { "$@" || failed=$((failed + 1)); }

check assert_eq "$co" "$MBCF_SRC" "MBCF_SRC"
check assert_eq "$co" "$PWD" "working directory"
check assert_eq "$build" "$MBCF_BUILD" "MBCF_BUILD"
check assert_eq "overlay" "$(findmnt -n -o FSTYPE --mountpoint "$co")" "mount on the checkout"
check assert_eq "overlay" "$(findmnt -n -o FSTYPE --mountpoint "$build")" "mount on the build dir"
check assert_eq "$token" "$(cat "$co/token")" "the host's file in the checkout"
check assert_eq "$token" "$(cat /usr/local/share/mbcf-tmp-checkout/token)" \
	"the file cmake --install put from the build dir"
check assert_cmd touch "$co/written-by-guest"
echo "tmp-checkout: $failed failed"
[ "$failed" = 0 ]

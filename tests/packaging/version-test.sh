#!/bin/bash
# SPDX-License-Identifier: MIT
#
# One version: the file VERSION is the one that CMake's project version (KVBLK_VERSION, passed by
# ctest), kvblk.h's macros, kvblk.ko's MODULE_VERSION, dkms.conf, debian/changelog and every man
# page's .TH line say. Man page dates are YYYY-MM-DD and not in the future.
# usage: version-test.sh SRC_DIR   (KVBLK_VERSION in the environment)
set -uo pipefail
src=${1:?usage: version-test.sh SRC}
cmake_v=${KVBLK_VERSION:?KVBLK_VERSION not set}
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

v=$(cat "$src/VERSION")
[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "VERSION is '$v', not MAJOR.MINOR.PATCH"
[ "$(wc -l <"$src/VERSION")" = 1 ] || fail "VERSION is not one line"
[ "$cmake_v" = "$v" ] || fail "CMake's project version $cmake_v, VERSION $v"
h=$src/include/kvblk/kvblk.h
hv=$(sed -n 's/^#define KVBLK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$h" | paste -sd.)
[ "$hv" = "$v" ] || fail "kvblk.h KVBLK_VERSION_* = $hv, VERSION $v"
dv=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$src/dkms.conf")
[ "$dv" = "$v" ] || fail "dkms.conf PACKAGE_VERSION = $dv, VERSION $v"
kv=$(sed -n 's/^MODULE_VERSION("\(.*\)");$/\1/p' "$src/kmod/main.c")
[ "$kv" = "$v" ] || fail "kmod/main.c MODULE_VERSION = $kv, VERSION $v"
cv=$(sed -n '1s/^kvblk (\([^)]*\)).*/\1/p' "$src/debian/changelog")
[ "${cv%%-*}" = "$v" ] || fail "debian/changelog = $cv, VERSION $v"
today=$(date -u +%F)
n=0
for m in "$src"/docs/man/*.[0-9]; do
	grep -q '^\.so ' "$m" && continue	# an alias
	n=$((n + 1))
	th=$(grep -m1 '^\.TH ' "$m")
	date=$(sed -n 's/^\.TH [^ ]* [0-9] "\([0-9-]*\)".*/\1/p' <<<"$th")
	mv=$(sed -n 's/^\.TH [^ ]* [0-9] "[0-9-]*" "kvblk \([0-9.]*\)".*/\1/p' <<<"$th")
	[ "$mv" = "$v" ] || fail "$(basename "$m"): .TH says kvblk '$mv', VERSION $v ($th)"
	[[ $date =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] && [[ ! $date > $today ]] ||
		fail "$(basename "$m"): .TH date '$date'"
done
echo "version-test: VERSION $v; CMake, kvblk.h, kvblk.ko, dkms.conf, debian/changelog and $n man pages checked, $fails failures"
[ "$fails" -eq 0 ]

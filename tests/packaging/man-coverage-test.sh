#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A man page per public C function: every function that include/kvblk/kvblk.h declares has
# docs/man/NAME.3, either the page itself or a ".so man3/PAGE.3" alias to a page that exists;
# and that page's NAME section names the function.
# usage: man-coverage-test.sh SRC_DIR
set -uo pipefail
src=${1:?usage: man-coverage-test.sh SRC}
man=$src/docs/man
fails=0
n=0
for f in $(sed -nE 's/^[a-z].*[ *](kvblk_[a-z0-9_]+)\(.*/\1/p' "$src/include/kvblk/kvblk.h" | sort -u); do
	n=$((n + 1))
	page=$man/$f.3
	if [ ! -f "$page" ]; then
		echo "FAIL: $f has no man page ($page)" >&2
		fails=$((fails + 1))
		continue
	fi
	target=$(sed -n '1s,^\.so man3/\(.*\)$,\1,p' "$page")
	if [ -n "$target" ]; then
		page=$man/$target
		[ -f "$page" ] || { echo "FAIL: $f.3 is an alias of a missing page $target" >&2; fails=$((fails + 1)); continue; }
	fi
	sed -n '/^\.SH NAME/{n;p;}' "$page" | grep -E "(^|[ ,])$f([ ,]|$)" >/dev/null ||
		{ echo "FAIL: $(basename "$page")'s NAME section does not name $f" >&2; fails=$((fails + 1)); }
done
[ "$n" -ge 30 ] || { echo "FAIL: only $n functions found in kvblk.h" >&2; fails=$((fails + 1)); }
echo "man-coverage-test: $n public functions, $fails failures"
[ "$fails" -eq 0 ]

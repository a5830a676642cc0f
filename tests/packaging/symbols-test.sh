#!/bin/bash
# SPDX-License-Identifier: MIT
#
# libkvblk.so exports exactly what debian/libkvblk0.symbols lists: every defined dynamic
# symbol is kvblk_* (or a KVBLK_x.y version node), carries a version of libkvblk.map, and
# the set of name@version pairs equals the symbols file's. Nothing else leaks (C++
# internals, test doubles, liburing).
# usage: symbols-test.sh LIBKVBLK_SO SYMBOLS_FILE
set -euo pipefail
so=${1:?usage: symbols-test.sh LIB SYMBOLS}
symfile=${2:?usage: symbols-test.sh LIB SYMBOLS}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# objdump -T: "ADDR FLAGS SECTION SIZE VERSION NAME", a non-default version in parentheses;
# every defined entry counts, whatever its binding (a leaked weak C++ symbol too).
objdump -T "$so" | grep -E '^[0-9a-f]{16} ' | grep -v '\*UND\*' |
	awk '{ name = $NF; ver = $(NF-1); gsub(/[()]/, "", ver); print name "@" ver }' | sort -u >"$tmp/lib"
sed -n 's/^ \([^ ]*\) .*/\1/p' "$symfile" | sort -u >"$tmp/file"

fails=0
if grep -vE '^(kvblk_[a-z0-9_]+@KVBLK_[0-9]+\.[0-9]+|(KVBLK_[0-9]+\.[0-9]+)@\2)$' "$tmp/lib" >"$tmp/bad"; then
	echo "FAIL: exported symbols outside kvblk_*@KVBLK_x.y:" >&2
	cat "$tmp/bad" >&2
	fails=1
fi
if ! diff -u "$tmp/file" "$tmp/lib" >"$tmp/diff"; then
	echo "FAIL: $so differs from $symfile (- only in the file, + only in the library):" >&2
	cat "$tmp/diff" >&2
	fails=1
fi
echo "symbols-test: $(wc -l <"$tmp/lib") exported symbols of $(basename "$so"), $(wc -l <"$tmp/file") in $(basename "$symfile")"
exit $fails

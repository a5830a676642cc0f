#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A man page per public C function: every function that include/kvblk/kvblk.h or
# include/kvblk/kvstore.h declares has docs/man/NAME.3, either the page itself or a
# ".so man3/PAGE.3" alias to a page that exists; and that page's NAME section names the function.
# usage: man-coverage-test.sh SRC_DIR
#        man-coverage-test.sh --self-test SRC_DIR   (the check fails on a copy of SRC_DIR's
#        headers and pages with a kvstore page, an alias or a NAME entry taken away)
set -uo pipefail

# The functions a header declares: a line that starts a declaration at column 0 and names
# kvblk_*( (continuation lines of a prototype are indented; comments start with " *" or "/*").
functions() {
	sed -nE 's/^[a-z].*[ *](kvblk_[a-z0-9_]+)\(.*/\1/p' "$1" | sort -u
}

# name_line PAGE: the line after .SH NAME into $NAME_LINE (bash builtins only: the self-test
# runs the check several times, and a process per page is slow on a loaded machine).
name_line() {
	local line found=0
	NAME_LINE=
	while IFS= read -r line; do
		if [ $found = 1 ]; then
			NAME_LINE=$line
			return
		fi
		[ "$line" = ".SH NAME" ] && found=1
	done <"$1"
}

# check SRC: 0 when every function of both headers has its page; prints a FAIL line per problem.
check() {
	local src=$1 man=$1/docs/man fails=0 total=0
	local header min n f page first target
	# Each header with the fewest functions it may declare: a header the pattern no longer
	# reads (a changed declaration style) fails instead of passing with nothing checked.
	for header in kvblk.h:30 kvstore.h:20; do
		min=${header#*:}
		header=$src/include/kvblk/${header%%:*}
		n=0
		for f in $(functions "$header"); do
			n=$((n + 1))
			page=$man/$f.3
			if [ ! -f "$page" ]; then
				echo "FAIL: $f (${header##*/}) has no man page ($page)" >&2
				fails=$((fails + 1))
				continue
			fi
			first=
			IFS= read -r first <"$page" || true
			if [[ $first == ".so man3/"* ]]; then
				target=${first#.so man3/}
				page=$man/$target
				[ -f "$page" ] || { echo "FAIL: $f.3 is an alias of a missing page $target" >&2; fails=$((fails + 1)); continue; }
			fi
			name_line "$page"
			[[ $NAME_LINE =~ (^|[ ,])$f([ ,]|$) ]] ||
				{ echo "FAIL: ${page##*/}'s NAME section does not name $f" >&2; fails=$((fails + 1)); }
		done
		[ "$n" -ge "$min" ] || { echo "FAIL: only $n functions found in ${header##*/} (expected at least $min)" >&2; fails=$((fails + 1)); }
		echo "man-coverage-test: ${header##*/}: $n public functions"
		total=$((total + n))
	done
	echo "man-coverage-test: $total public functions, $fails failures"
	[ "$fails" -eq 0 ]
}

if [ "${1:-}" = --self-test ]; then
	src=${2:?usage: man-coverage-test.sh --self-test SRC}
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	fails=0
	# copy: a fresh tree of the headers and pages.
	copy() {
		rm -rf "$tmp/t" && mkdir -p "$tmp/t/include" "$tmp/t/docs" &&
			cp -r "$src/include/kvblk" "$tmp/t/include/" && cp -r "$src/docs/man" "$tmp/t/docs/"
	}
	expect() { # expect WANT(0|1) WHAT
		local rc=0
		check "$tmp/t" >/dev/null 2>&1 || rc=1
		if [ "$rc" != "$1" ]; then
			echo "FAIL: self-test: $2: the check $([ "$1" = 0 ] && echo failed || echo passed)" >&2
			fails=$((fails + 1))
		else
			echo "ok: self-test: $2"
		fi
	}
	copy && expect 0 "the tree as it is"
	copy && rm "$tmp/t/docs/man/kvblk_kvstore_peek_stats.3" && expect 1 "an alias of kvstore.h removed"
	copy && rm "$tmp/t/docs/man/kvblk_kvstore_submit.3" && expect 1 "a kvstore.h main page removed"
	copy && sed -i '/^\.SH NAME/{n;s/kvblk_kvstore_list, //;s/, kvblk_kvstore_list / /;}' \
		"$tmp/t/docs/man/kvblk_kvstore_evicted.3" && expect 1 "a kvstore.h function left out of its page's NAME"
	copy && printf 'int kvblk_kvstore_new_function(kvblk_kvstore *store) KVBLK_NOEXCEPT;\n' \
		>>"$tmp/t/include/kvblk/kvstore.h" && expect 1 "a new kvstore.h function without a page"
	copy && rm "$tmp/t/docs/man/kvblk_get_buffer_info.3" && expect 1 "a kvblk.h page removed"
	echo "man-coverage-test --self-test: $fails failures"
	[ "$fails" -eq 0 ]
	exit
fi

src=${1:?usage: man-coverage-test.sh SRC}
check "$src"

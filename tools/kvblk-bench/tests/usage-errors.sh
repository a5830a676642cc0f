#!/bin/bash
# SPDX-License-Identifier: MIT
#
# kvblk-bench usage errors: each exits 2 (the man page's setup status) with exactly one line
# on stderr that names the option and the value, and runs nothing (no store written, no
# result rows). A backend that cannot serve the store stops the run before any setting.
# usage: usage-errors.sh KVBLK_BENCH WORKDIR
set -uo pipefail
B=${1:?usage: usage-errors.sh KVBLK_BENCH WORKDIR}
W=${2:?usage: usage-errors.sh KVBLK_BENCH WORKDIR}
dir=$(mktemp -d "$W/usage-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fails=0

# expect WORDS... -- ARGS: exit 2, one stderr line containing every word, no store, no rows.
expect() {
	local words=()
	while [ "$1" != "--" ]; do words+=("$1"); shift; done
	shift
	local store="$dir/store-$RANDOM"
	"$B" -q --no-fio -f "$store" "$@" >"$dir/out" 2>"$dir/err"
	local rc=$?
	local lines
	lines=$(wc -l <"$dir/err")
	local why=""
	[ $rc -eq 2 ] || why+=" exit $rc (want 2);"
	[ "$lines" -eq 1 ] || why+=" $lines stderr lines (want 1);"
	for w in "${words[@]}"; do
		grep -qF -- "$w" "$dir/err" || why+=" no '$w' in stderr;"
	done
	grep -q "1797" "$dir/err" && why+=" a double's range in the message;"
	[ -e "$store" ] && why+=" the store was written;"
	grep -q "W=0" "$dir/out" && why+=" result rows were printed;"
	if [ -n "$why" ]; then
		echo "FAIL: kvblk-bench $*:$why stderr: $(cat "$dir/err")" >&2
		fails=$((fails + 1))
	else
		echo "ok: kvblk-bench $* -> 2: $(cat "$dir/err")"
	fi
}

expect --object-mib 0 -- --object-mib 0
expect --object-mib abc -- --object-mib abc
expect --object-kib -1 -- --object-kib -1
expect --buffer-mib 0 -- --buffer-mib 0
expect --repeat 0 -- --repeat 0
expect --workload yaml -- --workload yaml
expect --bogus -- --bogus
expect "--qd 5000" "1 to 4096" -- --qd 5000
expect "--qd 0" -- --qd 32,0
expect "--rings 65" -- --rings 65
expect "--threads 0" -- --threads 0
expect "--cmd-size 1000" "4 KiB" -- --cmd-size 1000
expect "--backends bogus" -- --backends psync,bogus

# A backend that cannot serve the store (kmod on a regular file): after the store is made,
# before any setting runs; the reason once.
store="$dir/kmod-store"
"$B" -q --no-fio -f "$store" -n 2 --object-kib 64 --backends psync,kmod >"$dir/out" 2>"$dir/err"
rc=$?
n=$(grep -c "kmod" "$dir/err")
if [ $rc -ne 2 ] || [ "$(wc -l <"$dir/err")" -ne 1 ] || [ "$n" -ne 1 ] || grep -q "W=0\|psync" "$dir/out"; then
	echo "FAIL: --backends psync,kmod on a file: exit $rc, stderr: $(cat "$dir/err"), stdout: $(head -c 300 "$dir/out")" >&2
	fails=$((fails + 1))
else
	echo "ok: --backends psync,kmod on a file -> 2 before any run: $(cat "$dir/err")"
fi

[ $fails -eq 0 ] || { echo "$fails usage-error checks failed" >&2; exit 1; }
echo "all usage-error checks passed"

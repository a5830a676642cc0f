#!/bin/bash
# SPDX-License-Identifier: MIT
#
# kvblkctl usage errors: exit 2 with exactly one line on stderr that names what was wrong.
# usage: usage-errors.sh KVBLKCTL
set -uo pipefail
K=${1:?usage: usage-errors.sh KVBLKCTL}
fails=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT

expect() { # WORD -- ARGS
	local word=$1
	shift 2
	"$K" "$@" >/dev/null 2>"$err"
	local rc=$? lines
	lines=$(wc -l <"$err")
	if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$word" "$err" || grep -q "FAILED\|->" "$err"; then
		echo "FAIL: kvblkctl $*: exit $rc, $lines lines: $(cat "$err")" >&2
		fails=$((fails + 1))
	else
		echo "ok: kvblkctl $* -> 2: $(cat "$err")"
	fi
}

expect "unknown subcommand 'bogus'" -- bogus
expect "unknown subcommand 'bogus'" -- -v bogus
expect "must be normal or json, not 'yaml'" -- -o yaml list
expect "must be normal or json, not 'yaml'" -- list -o yaml
"$K" -o JSON list >/dev/null 2>&1
rc=$?
[ $rc -ne 2 ] || { echo "FAIL: -o JSON was refused" >&2; fails=$((fails + 1)); }
[ $fails -eq 0 ] || exit 1
echo "all usage-error checks passed"

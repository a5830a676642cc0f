#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Man page checks: MANPAGE renders with `groff -man -ww -z` without a single
# warning, and every option that each HELP_CMD's --help lists (short and
# long) appears in the rendered page (drift test).
# usage: check-man.sh MANPAGE HELP_CMD...   (each HELP_CMD one word list,
#        e.g. "/path/kvblkctl tune set"; --help is appended)
set -uo pipefail

man=${1:?usage: check-man.sh MANPAGE HELP_CMD...}
shift
fails=0
warn=$(groff -man -ww -z "$man" 2>&1)
rc=$?
if [ $rc -ne 0 ] || [ -n "$warn" ]; then
	echo "FAIL: groff -man -ww -z $man (rc $rc): $warn" >&2
	fails=$((fails + 1))
else
	echo "ok: $man renders without warnings"
fi
# Rendered text, no hyphenation, long lines: an option is never split.
text=$(groff -man -Tascii -rHY=0 -rLL=400n -P-c -P-b -P-u -P-o "$man" 2>/dev/null)
[ -n "$text" ] || { echo "FAIL: $man rendered nothing" >&2; exit 1; }
n=0
for cmd in "$@"; do
	# shellcheck disable=SC2086 # a word list on purpose
	help=$($cmd --help 2>&1) || { echo "FAIL: $cmd --help" >&2; fails=$((fails + 1)); continue; }
	# Option lines start with blanks and a dash: "  -o,--output ...", "  --write ...", "  -L ..."
	opts=$(sed -nE 's/^ +(-[A-Za-z0-9](,--[A-Za-z0-9][A-Za-z0-9-]*)?|--[A-Za-z0-9][A-Za-z0-9-]*).*/\1/p' <<<"$help" |
		tr ',' '\n' | sort -u)
	[ -n "$opts" ] || { echo "FAIL: no options found in $cmd --help" >&2; fails=$((fails + 1)); }
	for o in $opts; do
		n=$((n + 1))
		if ! grep -qE -- "(^|[^A-Za-z0-9-])${o}([^A-Za-z0-9-]|$)" <<<"$text"; then
			echo "FAIL: $man lacks '$o' (from '$cmd --help')" >&2
			fails=$((fails + 1))
		fi
	done
	# Subcommands listed in --help are documented too.
	for s in $(sed -n '/^Subcommands:/,/^$/p' <<<"$help" | sed -nE 's/^  ([a-z][a-z-]*) .*/\1/p'); do
		n=$((n + 1))
		grep -qE "(^|[^a-z-])$s([^a-z-]|$)" <<<"$text" || { echo "FAIL: $man lacks subcommand '$s'" >&2; fails=$((fails + 1)); }
	done
done
echo "$man: $n options and subcommands checked, $fails failures"
[ "$fails" -eq 0 ]

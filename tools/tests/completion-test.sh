#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ctest completion_kvblkctl / completion_kvblk_bench: sources tools/bash-completion/kvblk in
# bash, completes command lines the way bash does (COMP_WORDS, COMP_CWORD, the function that
# `complete -p` names) and compares the candidates with what the tool's --help lists, read
# here with a parser of this test's own (grep/sed, not the completion's awk):
#   - TOOL <TAB>: exactly the subcommands of TOOL --help (none: file names);
#   - TOOL -<TAB>: exactly the options (short and long) of TOOL --help;
#   - the same at each level of subcommands (kvblkctl tune set -<TAB> ...);
#   - an option with CLI11 choices {a,b} or a|b completes exactly those values;
#   - a prefix narrows the candidates (--ba<TAB> -> the --ba* options only).
# usage: completion-test.sh COMPLETION_FILE TOOL_BINARY
set -euo pipefail
comp=$1 tool=$2
name=$(basename "$tool")
dir=$(cd "$(dirname "$tool")" && pwd)
export PATH=$dir:$PATH
# shellcheck source=/dev/null
. "$comp"
fn=$(complete -p "$name" | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
[ -n "$fn" ] || { echo "FAIL: no complete -F for $name after sourcing $comp"; exit 1; }
fails=0 checks=0

# complete WORD... : the candidates for the last word (may be empty), sorted, one per line.
complete_line() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMP_LINE="$*"
	COMP_POINT=${#COMP_LINE}
	COMPREPLY=()
	# As bash calls it from an interactive shell: no errexit; pipefail as some users set it.
	set +e -o pipefail
	"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]:-}"
	set -e
	printf '%s\n' "${COMPREPLY[@]}" | sed '/^$/d' | sort -u
}

# What --help says, parsed here: subcommands and options of "$@".
help_subs() { "$@" --help | sed -n '/^Subcommands:$/,/^$/p' | sed -n 's/^  \([a-z][a-z0-9_-]*\) .*/\1/p' | sort -u; }
help_opts() { "$@" --help | grep -E '^  -' | sed -E 's/^  ([^ ]+).*/\1/' | tr ',' '\n' | grep -E '^-' | sort -u; }
help_choices() {	# "$@" OPTION: the values CLI11 lists for OPTION ({a,b} or a|b)
	local opt=${*: -1}
	"${@:1:$#-1}" --help | grep -E "^  (-[^ ,]+,)?$opt " | head -n1 |
		sed -E 's/^  [^ ]+ +//' | grep -oE '\{[^}]*\}|^[a-z0-9_-]+(\|[a-z0-9_-]+)+' | tr '{},|' '\n\n\n\n' | sed '/^$/d' | sort -u
}

expect() {	# WHAT WANT GOT
	checks=$((checks + 1))
	if [ "$2" = "$3" ]; then
		echo "ok: $1: $(echo "$3" | tr '\n' ' ')"
	else
		echo "FAIL: $1"
		diff <(echo "$2") <(echo "$3") | sed 's/^/    /' || true
		fails=$((fails + 1))
	fi
}

# One command level: its subcommands and options, then the levels below it.
check_level() {
	local -a words=("$@")
	local subs opts s o ch
	subs=$(help_subs "${words[@]}" || true)
	opts=$(help_opts "${words[@]}")
	[ -n "$opts" ] || { echo "FAIL: ${words[*]} --help lists no option"; fails=$((fails + 1)); }
	expect "${words[*]} -<TAB> = the options of --help" "$opts" "$(complete_line "${words[@]}" -)"
	if [ -n "$subs" ]; then
		expect "${words[*]} <TAB> = the subcommands of --help" "$subs" "$(complete_line "${words[@]}" '')"
		s=$(head -n1 <<<"$subs")
		expect "${words[*]} ${s:0:2}<TAB> narrows to the subcommands starting ${s:0:2}" \
			"$(grep "^${s:0:2}" <<<"$subs")" "$(complete_line "${words[@]}" "${s:0:2}")"
	fi
	while read -r o; do
		[ -n "$o" ] || continue
		ch=$(help_choices "${words[@]}" "$o" || true)
		[ -n "$ch" ] || continue
		expect "${words[*]} $o <TAB> = its choices in --help" "$ch" "$(complete_line "${words[@]}" "$o" '')"
	done <<<"$opts"
	while read -r s; do
		[ -n "$s" ] || continue
		check_level "${words[@]}" "$s"
	done <<<"$subs"
}

check_level "$name"
# A prefix narrows the options.
o=$(help_opts "$name" | grep -E '^--' | head -n1)
expect "$name ${o:0:4}<TAB> narrows to the options starting ${o:0:4}" \
	"$(help_opts "$name" | grep -F -- "${o:0:4}" | grep -E "^${o:0:4}")" "$(complete_line "$name" "${o:0:4}")"
# The test derives what it expects from --help: make sure that found what the tool is about.
case $name in
kvblkctl)
	grep -qx tune <(help_subs kvblkctl) || { echo "FAIL: no 'tune' subcommand parsed from kvblkctl --help"; fails=$((fails + 1)); }
	[ "$(complete_line kvblkctl -o '')" = "$(printf 'json\nnormal')" ] ||
		{ echo "FAIL: kvblkctl -o <TAB> is not json, normal"; fails=$((fails + 1)); } ;;
kvblk-bench)
	[ "$(complete_line kvblk-bench --workload '')" = "$(printf 'chunks\nlarge\nmixed\nsmall')" ] ||
		{ echo "FAIL: kvblk-bench --workload <TAB> is not chunks large mixed small"; fails=$((fails + 1)); } ;;
esac
echo "$name completion: $checks checks, $fails failed"
[ "$fails" -eq 0 ]

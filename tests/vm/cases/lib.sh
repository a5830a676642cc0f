# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Helpers for case scripts that run in the guest (source it first thing).
# Exit codes follow kselftest: 0 pass, 4 skip, anything else fail.
set -euo pipefail

skip() { echo "SKIP: $*"; exit 4; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# expect_eq WHAT GOT WANT
expect_eq() {
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
	ok "$1 = $2"
}

# Runs "$@" and requires it to fail with a message matching ERE $1 on stderr.
expect_fail() {
	local re=$1 err
	shift
	if err=$("$@" 2>&1 >/dev/null); then
		fail "'$*' succeeded, expected failure matching '$re'"
	fi
	[[ $err =~ $re ]] || fail "'$*' failed with '$err', expected '$re'"
	ok "'$*' failed as expected: ${err##*: }"
}

pattern() { "$KVBLK_VM_PATTERN_TOOL" "$@"; }

[ -n "${KVBLK_VM_VARIANT:-}" ] || { echo "not in the kvblk test VM (KVBLK_VM_VARIANT unset)"; exit 4; }

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

# extra_ns NSID: the block device of namespace NSID of the second controller
# (serial kvblkx: variants with VM_SLICE_NS / VM_SCRATCH_NS), or nothing.
extra_ns() {
	local d
	for d in /sys/block/nvme*n*; do
		[ "$(tr -d ' ' <"$d/device/serial" 2>/dev/null)" = kvblkx ] || continue
		[ "$(cat "$d/nsid" 2>/dev/null)" = "$1" ] && echo "/dev/${d##*/}"
	done
	return 0
}

# wait_extra_ns NSID: wait up to 10 s for it (the second controller's
# namespaces are scanned after the data controller's).
wait_extra_ns() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ -n "$(extra_ns "$1")" ] && return 0
		sleep 0.2
	done
	return 0
}

[ -n "${KVBLK_VM_VARIANT:-}" ] || { echo "not in the kvblk test VM (KVBLK_VM_VARIANT unset)"; exit 4; }

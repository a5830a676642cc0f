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

# ext4_scratch DIR: a 64 MiB ext4 on a loop device over DIR/fs.img, mounted at
# DIR/mnt (tmpfs itself takes O_DIRECT only from Linux 6.6). Fails the case when
# it cannot; undo with ext4_scratch_undo DIR, which returns 1 when the unmount
# fails (a file left open: something leaked).
ext4_scratch() {
	local dir=$1 loop
	modprobe -q loop 2>/dev/null || true
	modprobe -q ext4 2>/dev/null || true
	truncate -s 64M "$dir/fs.img" && loop=$(losetup -f --show "$dir/fs.img") ||
		fail "no loop device over $dir/fs.img"
	echo "$loop" >"$dir/loopdev"
	mkdir -p "$dir/mnt"
	if ! mkfs.ext4 -q -F -b 4096 "$loop" || ! mount -t ext4 "$loop" "$dir/mnt"; then
		losetup -d "$loop"
		fail "cannot make and mount ext4 on $loop"
	fi
}

ext4_scratch_undo() {
	local dir=$1 r=0
	if mountpoint -q "$dir/mnt" && ! umount "$dir/mnt"; then
		echo "FAIL: umount $dir/mnt" >&2
		r=1
	fi
	[ -s "$dir/loopdev" ] && losetup -d "$(cat "$dir/loopdev")"
	return $r
}

[ -n "${KVBLK_VM_VARIANT:-}" ] || { echo "not in the kvblk test VM (KVBLK_VM_VARIANT unset)"; exit 4; }

#!/bin/bash
# SPDX-License-Identifier: MIT
# VM case: host-buffer registration racing a MAP_SHARED mapping of an ext4
# file over its range (tests/kmod-smoke/kmod_pinrace.c): every registration
# fails cleanly (EOPNOTSUPP, EFAULT) or pins anonymous memory; the file's
# page cache is never pinned (a load through a registered buffer never
# changes the file). ext4 on a loop device over a file in /tmp (tmpfs).
. "$(dirname "$0")/lib.sh"

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
bin=tests/kmod-smoke/kmod_pinrace
[ -x "$bin" ] || skip "$bin not built (make -C tests/kmod-smoke)"
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 missing (e2fsprogs)"
command -v losetup >/dev/null || skip "losetup missing (mount)"
modprobe loop 2>/dev/null || true
modprobe ext4 2>/dev/null || true

img=$(mktemp /tmp/pinrace.XXXXXX.img)
mnt=$(mktemp -d /tmp/pinrace.XXXXXX)
loop=
cleanup() {
	set +e
	mountpoint -q "$mnt" && umount "$mnt"
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$img" "$mnt"
}
trap cleanup EXIT

truncate -s 32M "$img"
loop=$(losetup --find --show "$img") || fail "losetup $img"
mkfs.ext4 -q -F "$loop" || fail "mkfs.ext4 $loop"
mount "$loop" "$mnt" || fail "mount $loop"
truncate -s 64K "$mnt/file" || fail "create $mnt/file"

"$bin" "$dev" "$mnt/file" "${KVBLK_PINRACE_ITERS:-2000}" || fail "kmod_pinrace"
ok "pin race"

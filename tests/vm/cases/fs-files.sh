#!/bin/bash
# SPDX-License-Identifier: MIT
# kvblk's file engine on a file system made in the guest on the scratch
# namespace of variants/stripe4 (tests/kmod-smoke/kmod_files): many chunk
# files, holes, a buffered write then a load, the size read per batch, a
# file truncated while batches read it (each object exact or ENODATA/EIO,
# never other bytes), the fd's rights.
#
#   fs-files.sh ext4|xfs [NFILES]
. "$(dirname "$0")/lib.sh"

fs=${1:?usage: fs-files.sh ext4|xfs [NFILES]}
nfiles=${2:-200}
bin=tests/kmod-smoke/kmod_files
[ -x "$bin" ] || skip "$bin not built"
[ -f "$KVBLK_KO" ] || skip "$KVBLK_KO not built"
command -v "mkfs.$fs" >/dev/null || skip "no mkfs.$fs"

# The scratch namespace: nsid 5 of the second controller (variants/stripe4).
wait_extra_ns 5
dev=$(extra_ns 5)
[ -n "$dev" ] || skip "no scratch namespace (variants/stripe4)"
modprobe "$fs" 2>/dev/null || true
mnt=$(mktemp -d /tmp/kvblk-fs.XXXXXX)

cleanup() {
	umount "$mnt" 2>/dev/null || true
	rmdir "$mnt" 2>/dev/null || true
	rmmod kvblk 2>/dev/null || true
}
trap cleanup EXIT

case $fs in
ext4) mkfs.ext4 -q -F "$dev" ;;
xfs) mkfs.xfs -q -f "$dev" ;;
*) fail "unknown file system $fs" ;;
esac || fail "mkfs.$fs $dev"
mount -t "$fs" "$dev" "$mnt" || fail "mount $dev"
ok "$fs on $dev mounted at $mnt"
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
"$bin" "$mnt" "$nfiles"

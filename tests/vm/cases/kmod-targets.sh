#!/bin/bash
# SPDX-License-Identifier: MIT
# Several targets per kvblk.ko context (tests/kmod-smoke/kmod_targets), in the
# variant two-ns: namespace A (PRP engine), namespace B of the second
# controller (block-layer engine) and a file on ext4 (file engine) attached to
# ONE context and loaded in ONE batch per round, each object byte-exact
# against pread(O_DIRECT) of its own target, canaries intact, each disk's
# counters moved by its own share. The file lives on ext4 on a loop device
# over a tmpfs file. Undoes what it did.
. "$(dirname "$0")/lib.sh"
set +e

bin=tests/kmod-smoke/kmod_targets
[ -x "$bin" ] || skip "$bin not built (make -C tests/kmod-smoke)"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
[ -n "${KVBLK_TEST_DEVICE2:-}" ] || skip "no second namespace (KVBLK_TEST_DEVICE2): run it in the variant two-ns"
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 missing (e2fsprogs)"
rc=0

work=$(mktemp -d /tmp/kvblk-ktargets.XXXXXX) || fail "mktemp"
loop=''
mounted=0
cleanup() {
	[ $mounted = 1 ] && { umount "$work/mnt" || { echo "FAIL: umount $work/mnt" >&2; rc=1; }; }
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$work"
}
modprobe -q loop 2>/dev/null
modprobe -q ext4 2>/dev/null
truncate -s 64M "$work/fs.img" && loop=$(losetup -f --show "$work/fs.img") ||
	{ cleanup; fail "no loop device over $work/fs.img"; }
mkdir -p "$work/mnt"
if ! mkfs.ext4 -q -F -b 4096 "$loop" || ! mount -t ext4 "$loop" "$work/mnt"; then
	cleanup
	fail "cannot make and mount ext4 on $loop"
fi
mounted=1
dd if=/dev/urandom of="$work/mnt/chunk" bs=1M count=8 status=none && sync ||
	{ cleanup; fail "writing $work/mnt/chunk"; }

insmod "$KVBLK_KO" || { cleanup; fail "insmod $KVBLK_KO"; }
KVBLK_VM_NS2_OFFSET=${KVBLK_VM_NS2_OFFSET:-64M} \
	"$bin" "$KVBLK_TEST_DEVICE" "$KVBLK_TEST_DEVICE2" "$work/mnt/chunk" || rc=1
if ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk (a context or target leaked?)" >&2
	rc=1
fi
cleanup
exit $rc

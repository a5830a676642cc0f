#!/bin/bash
# SPDX-License-Identifier: MIT
# Several targets per kvblk.ko context (tests/kmod-smoke/kmod_targets), in the
# variant two-ns: namespace A (PRP engine, KVBLK_ATTACH_F_ENGINE_PRP), namespace B of the second
# controller (block-layer engine), a file on ext4 (file engine) and a loop
# device over a file of random bytes (block-layer engine) attached to ONE
# context and loaded in ONE batch per round, each object byte-exact
# against pread(O_DIRECT) of its own target, canaries intact, each disk's
# counters moved by its own share (one batch each). The file lives on ext4 on
# a loop device over a tmpfs file. Undoes what it did; the runner loads kvblk.ko around it
# (NEEDS load:kvblk) and fails the case when a context or target leaked.
. "$(dirname "$0")/lib.sh"
set +e

bin=tests/kmod-smoke/kmod_targets
[ -x "$bin" ] || skip "$bin not built (make -C tests/kmod-smoke)"
[ -n "${KVBLK_TEST_DEVICE2:-}" ] || skip "no second namespace (KVBLK_TEST_DEVICE2): run it in the variant two-ns"
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 missing (e2fsprogs)"
rc=0

work=$(mktemp -d /tmp/kvblk-ktargets.XXXXXX) || fail "mktemp"
loop2=
cleanup() {
	[ -n "$loop2" ] && losetup -d "$loop2"
	ext4_scratch_undo "$work" || rc=1
	rm -rf "$work"
}
( ext4_scratch "$work" ) || { rm -rf "$work"; exit 1; }
dd if=/dev/urandom of="$work/mnt/chunk" bs=1M count=8 status=none && sync ||
	{ cleanup; fail "writing $work/mnt/chunk"; }
dd if=/dev/urandom of="$work/loop2.img" bs=1M count=16 status=none &&
	loop2=$(losetup -f --show "$work/loop2.img") ||
	{ cleanup; fail "no loop device over $work/loop2.img"; }

KVBLK_VM_NS2_OFFSET=${KVBLK_VM_NS2_OFFSET:-64M} \
	"$bin" "$KVBLK_TEST_DEVICE" "$KVBLK_TEST_DEVICE2" "$work/mnt/chunk" "$loop2" || rc=1
cleanup
exit $rc

#!/bin/bash
# SPDX-License-Identifier: MIT
# libkvblk's several targets on real devices (tests/unit/device_targets_test.cpp), in the
# variant two-ns (two controllers, a namespace each): a kmod device on namespace A with
# namespace B, a regular file, a loop device over a file of random bytes and null_blk
# (memory_backed, so that reads return its zeros) added, all in A's kvblk.ko context: one
# mixed batch is ONE KVBLK_IOC_LOAD_MANY (kvblk_batch_start traced, every disk's
# stats/batches one more), through kvblk_load_many() and kvblk_submit()/kvblk_reap();
# target info, stores, kvblk_remove_target (kvblk.ko keeps the target until close). The
# same device as with a kvblk.ko without KVBLK_FEAT_TARGETS (a test seam): B its own
# kvblk.ko context, the file the uring lane, batches split over the lanes. A uring_cmd
# device on /dev/ngAn1 with /dev/ngBn1 added. The file lives on ext4 on a loop device
# over a tmpfs file (tmpfs itself takes O_DIRECT only from Linux 6.6). Undoes what it did.
. "$(dirname "$0")/lib.sh"
set +e

bin=${KVBLK_DEVICE_TESTS:-build/tests/unit/kvblk_device_tests}
[ -x "$bin" ] || skip "$bin not built (make userspace)"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
[ -n "${KVBLK_TEST_DEVICE2:-}" ] || skip "no second namespace (KVBLK_TEST_DEVICE2): run it in the variant two-ns"
command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 missing (e2fsprogs)"
export TMPDIR=${KVBLK_VM_CASE_DIR:-/tmp}
rc=0

work=$(mktemp -d /tmp/kvblk-targets.XXXXXX) || fail "mktemp"
cleanup() {
	[ -n "${loop2:-}" ] && losetup -d "$loop2"
	ext4_scratch_undo "$work" || rc=1
	rm -rf "$work"
}
( ext4_scratch "$work" ) || { rm -rf "$work"; exit 1; }
export KVBLK_TEST_FILE_DIR=$work/mnt
KVBLK_TEST_FILE_DISK=$(basename "$(cat "$work/loopdev")")
export KVBLK_TEST_FILE_DISK
loop2=
if dd if=/dev/urandom of="$work/loop2.img" bs=1M count=16 status=none &&
	loop2=$(losetup -f --show "$work/loop2.img"); then
	export KVBLK_TEST_LOOP_DEVICE=$loop2
else
	cleanup
	fail "no loop device over $work/loop2.img"
fi

loaded_kvblk=0
if [ ! -c /dev/kvblk ]; then
	insmod "$KVBLK_KO" || { cleanup; fail "insmod $KVBLK_KO"; }
	loaded_kvblk=1
fi
loaded_nullb=0
if [ -z "${KVBLK_TEST_NONNVME_DEVICE:-}" ] && [ ! -e /sys/module/null_blk ] &&
	modprobe null_blk nr_devices=1 gb=1 queue_mode=2 memory_backed=1 && [ -b /dev/nullb0 ]; then
	export KVBLK_TEST_NONNVME_DEVICE=/dev/nullb0
	loaded_nullb=1
fi
KVBLK_TEST_KMOD=1 "$bin" --gtest_brief=1 --gtest_filter='*TargetsTest.*' || rc=1
[ $loaded_nullb = 1 ] && rmmod null_blk
if [ $loaded_kvblk = 1 ] && ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk after the target tests (a context leaked?)" >&2
	rc=1
fi
cleanup
exit $rc

#!/bin/bash
# SPDX-License-Identifier: MIT
# libkvblk's NVMe backends on the guest's namespace (tests/unit/device_test.cpp):
# load_many equals pread for kmod, uring and uring_cmd, with plain and registered
# destinations; results, batch info and stats equal what was done; AUTO's choice
# and the refusals. First without kvblk.ko (AUTO says why not), then with it, with
# null_blk as a non-NVMe block device and a partition added to the in-memory
# partition table (addpart: nothing written). Undoes what it did.
. "$(dirname "$0")/lib.sh"
set +e

bin=${KVBLK_DEVICE_TESTS:-build/tests/unit/kvblk_device_tests}
[ -x "$bin" ] || skip "$bin not built (make userspace)"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
export TMPDIR=${KVBLK_VM_CASE_DIR:-/tmp}
dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
rc=0

if [ ! -c /dev/kvblk ]; then
	echo "== without kvblk.ko"
	KVBLK_TEST_KMOD=0 "$bin" --gtest_brief=1 --gtest_filter='DeviceChoiceTest.auto_without_module_says_so' || rc=1
fi

loaded_kvblk=0
if [ ! -c /dev/kvblk ]; then
	insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
	loaded_kvblk=1
fi
loaded_nullb=0
if [ -z "${KVBLK_TEST_NONNVME_DEVICE:-}" ] && [ ! -e /sys/module/null_blk ] &&
	modprobe null_blk nr_devices=1 gb=1 queue_mode=2 && [ -b /dev/nullb0 ]; then
	export KVBLK_TEST_NONNVME_DEVICE=/dev/nullb0
	loaded_nullb=1
fi
made_part=0
if [ -z "${KVBLK_TEST_PARTITION:-}" ] && ! compgen -G "/sys/class/block/${dev##*/}/${dev##*/}*/partition" >/dev/null &&
	addpart "$dev" 1 131072 2048; then
	made_part=1
	for _ in $(seq 50); do [ -b "${dev}p1" ] && break; sleep 0.1; done
	export KVBLK_TEST_PARTITION=${dev}p1
fi

echo "== with kvblk.ko"
KVBLK_TEST_KMOD=1 "$bin" --gtest_brief=1 --gtest_filter='-DeviceChoiceTest.auto_without_module_says_so' || rc=1

[ $made_part = 1 ] && { delpart "$dev" 1 || { echo "FAIL: delpart $dev 1" >&2; rc=1; }; }
[ $loaded_nullb = 1 ] && rmmod null_blk
if [ $loaded_kvblk = 1 ] && ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk after the libkvblk device tests (a context or buffer leaked?)" >&2
	rc=1
fi
exit $rc

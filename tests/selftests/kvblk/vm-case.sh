#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): the kvblk ioctl selftests against the guest's
# emulated namespace ($KVBLK_TEST_DEVICE, /dev/nvme0n1), then the program built
# against the 0.2 uapi header (kvblk_abi02_test). Loads kvblk.ko unless
# /dev/kvblk is already there, and null_blk as the non-NVMe blk-mq device of
# attach_non_nvme_eopnotsupp. For the partition tests it adds partition 1
# (1 MiB at 64 MiB) to the kernel's in-memory partition table with addpart
# (BLKPG: nothing is written to the namespace) and removes it afterwards.
# Undoes what it did. Exit: the program's (0 pass, 4 skip, else fail), or 1
# when kvblk.ko does not unload.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

bin=${KVBLK_SELFTEST_BIN:-build-selftests/kvblk/kvblk_test}
[ -x "$bin" ] || skip "$bin not built (make -C tests/selftests/kvblk)"

loaded_kvblk=0
if [ ! -c /dev/kvblk ]; then
	[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
	insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
	loaded_kvblk=1
fi
loaded_nullb=0
if [ -z "${KVBLK_TEST_NONNVME_DEVICE:-}" ] && [ ! -e /sys/module/null_blk ] &&
	modprobe null_blk nr_devices=1 gb=1 queue_mode=2 && [ -b /dev/nullb0 ]; then
	export KVBLK_TEST_NONNVME_DEVICE=/dev/nullb0
	loaded_nullb=1
fi
dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
made_part=0
if [ -z "${KVBLK_TEST_PARTITION:-}" ] && ! compgen -G "/sys/class/block/${dev##*/}/${dev##*/}*/partition" >/dev/null &&
	addpart "$dev" 1 131072 2048; then
	made_part=1
	for _ in $(seq 50); do [ -b "${dev}p1" ] && break; sleep 0.1; done
	export KVBLK_TEST_PARTITION=${dev}p1
fi

"$bin"
rc=$?
# A program built against the 0.2 uapi header (uapi-0.2/linux/kvblk.h) keeps working.
abi02=$(dirname "$bin")/kvblk_abi02_test
if [ -x "$abi02" ]; then
	"$abi02"
	r=$?
	[ $r = 0 ] || [ $r = 4 ] || rc=1
else
	echo "FAIL: $abi02 not built" >&2
	rc=1
fi

[ $made_part = 1 ] && { delpart "$dev" 1 || { echo "FAIL: delpart $dev 1" >&2; rc=1; }; }
[ $loaded_nullb = 1 ] && rmmod null_blk
if [ $loaded_kvblk = 1 ] && ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk after the selftests (a context or buffer leaked?)" >&2
	rc=1
fi
exit $rc

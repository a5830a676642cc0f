#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): kvblk_store_test, stores through kvblk.ko.
# The runner loads kvblk.ko (load:kvblk). Scratch targets, all in memory so
# that the namespace's pattern is never at stake: three memory-backed
# null_blk devices, the first raw (KVBLK_STORE_BLKDEV), ext4 on the second
# and xfs on the third (KVBLK_STORE_DIRS; a file system whose mkfs is
# missing is left out). The emulated namespace ($KVBLK_TEST_DEVICE) serves
# the PRP refusal (nothing written) and a block-layer store whose original
# bytes the test writes back. Undoes what it did.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

bin=${KVBLK_STORE_BIN:-build-selftests/kvblk/kvblk_store_test}
[ -x "$bin" ] || skip "$bin not built (make -C tests/selftests/kvblk)"
[ -c /dev/kvblk ] || skip "kvblk.ko is not loaded"
[ -e /sys/module/null_blk ] && skip "null_blk is loaded already (its parameters are not ours)"
modprobe null_blk nr_devices=3 gb=1 memory_backed=1 queue_mode=2 ||
	skip "no memory-backed null_blk in this kernel"
for n in 0 1 2; do
	for _ in $(seq 50); do [ -b /dev/nullb$n ] && break; sleep 0.1; done
done

mnts=()
cleanup() {
	local m
	for m in "${mnts[@]}"; do
		umount "$m" && rmdir "$m"
	done
	rmmod null_blk
}
trap cleanup EXIT

dirs=
mkfs_mount() {	# fs dev
	local m
	command -v "mkfs.$1" >/dev/null || { echo "# no mkfs.$1: its file tests are left out"; return; }
	modprobe "$1" 2>/dev/null
	case $1 in
	ext4) mkfs.ext4 -q -F "$2" ;;
	xfs) mkfs.xfs -q -f "$2" ;;
	esac || fail "mkfs.$1 $2"
	m=$(mktemp -d "/tmp/kvblk-store-$1.XXXXXX")
	mount -t "$1" "$2" "$m" || fail "mount -t $1 $2"
	mnts+=("$m")
	dirs=${dirs:+$dirs:}$m
	ok "$1 on $2 at $m"
}
mkfs_mount ext4 /dev/nullb1
mkfs_mount xfs /dev/nullb2

KVBLK_STORE_BLKDEV=/dev/nullb0 KVBLK_STORE_DIRS=$dirs "$bin"

rc=$?
exit $rc

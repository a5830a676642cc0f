#!/bin/bash
# SPDX-License-Identifier: MIT
# What the per-call checks of read(2)/write(2) cost a LOAD_MANY (kmod/README.md,
# "What read(2) and write(2) check"): tests/kmod-smoke/kmod_cost with two builds of
# kvblk.ko in one guest, alternated five times: $KVBLK_SRC/build/cost-old/kmod/kvblk.ko
# (a build without the checks, made on the host by tests/vm/bench/checks-cost.sh) and
# this tree's; report the smallest of each (TCG timing is noisy). Targets: the namespace
# (bio engine, page cache present: the write-back check looks at it per object) and 16
# files on ext4 on tmpfs (file engine, one permission check per target).
. "$KVBLK_SRC/tests/vm/cases/lib.sh"
old=$KVBLK_SRC/build/cost-old/kmod/kvblk.ko
cost=tests/kmod-smoke/kmod_cost
[ -f "$old" ] || skip "$old not built (tests/vm/bench/checks-cost.sh)"
[ -x "$cost" ] || skip "$cost not built"
dev=$KVBLK_TEST_DEVICE
# tmpfs, not the case folder (9p): the files' own I/O stays out of the timing.
dir=$(mktemp -d /tmp/kvblk-cost.XXXXXX)
ext4_scratch "$dir"
trap 'rmmod kvblk 2>/dev/null || true; ext4_scratch_undo "$dir" || true; rm -rf "$dir"' EXIT
files=()
for i in $(seq 1 16); do
	head -c 1M /dev/urandom >"$dir/mnt/f$i"
	files+=("$dir/mnt/f$i")
done
sync
dd if="$dev" of=/dev/null bs=4K count=64 status=none	# page cache on the device
for round in 1 2 3 4 5; do
	for build in old new; do
		ko=$old
		[ $build = new ] && ko=$KVBLK_KO
		insmod "$ko" || fail "insmod $ko"
		echo "round $round $build namespace: $($cost 2000 "$dev")"
		echo "round $round $build namespace x16: $($cost 1000 $(for i in $(seq 16); do echo "$dev"; done))"
		echo "round $round $build 16 files: $($cost 500 "${files[@]}")"
		rmmod kvblk || fail "rmmod"
	done
done

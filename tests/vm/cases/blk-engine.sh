#!/bin/bash
# SPDX-License-Identifier: MIT
# The block-layer engine on block devices that are not a plain NVMe
# namespace, each checked byte-exact against pread(O_DIRECT) with canaries
# around every destination (tests/kmod-smoke/kmod_smoke):
#
#   blk-engine.sh md-raid0    md RAID-0 (mdadm --build, 64 KiB chunks) over
#                             the four slice namespaces of variants/stripe4
#   blk-engine.sh dm-striped  dm-striped over the same four (dmsetup)
#   blk-engine.sh partition   a partition of a slice namespace (BLKPG, no
#                             table written), through the PRP engine
#                             (KVBLK_ATTACH_F_ENGINE_PRP) and through the
#                             default engine (the block layer)
#   blk-engine.sh loop        a loop device over a pattern file in /tmp
#   blk-engine.sh nvme        the data namespace through the block layer,
#                             the default engine (no attach flag)
#
# KMOD_SMOKE_ROUNDS (default below per shape) sets the random batches.
. "$(dirname "$0")/lib.sh"

shape=${1:?usage: blk-engine.sh md-raid0|dm-striped|partition|loop|nvme}
smoke=tests/kmod-smoke/kmod_smoke
[ -x "$smoke" ] || skip "$smoke not built"
[ -f "$KVBLK_KO" ] || skip "$KVBLK_KO not built"

# The four slice namespaces of variants/stripe4, nsid 1-4 of the second controller.
slices() {
	local k
	for k in 1 2 3 4; do wait_extra_ns $k; extra_ns $k; done
}

cleanup=()
on_exit() {
	local c
	for c in "${cleanup[@]}"; do eval "$c" || true; done
	rmmod kvblk 2>/dev/null || true
}
trap on_exit EXIT

insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"
# Small objects, many batches: fast under TCG and still across chunk edges.
export KMOD_SMOKE_OBJS=${KMOD_SMOKE_OBJS:-8} KMOD_SMOKE_MAXLEN=${KMOD_SMOKE_MAXLEN:-262144}
export KMOD_SMOKE_BUF_MB=${KMOD_SMOKE_BUF_MB:-4}

case $shape in
md-raid0)
	read -ra m <<<"$(slices | tr "\n" " ")"
	[ ${#m[@]} = 4 ] || skip "want 4 slice namespaces (variants/stripe4), have ${#m[@]}"
	modprobe raid0 || skip "no raid0 module"
	mdadm --build /dev/md/kvblk --level=0 --chunk=64 --raid-devices=4 "${m[@]}" ||
		fail "mdadm --build"
	cleanup+=("mdadm --stop /dev/md/kvblk")
	dev=$(readlink -f /dev/md/kvblk)
	ok "$dev: RAID-0 of ${m[*]}, $(cat /sys/block/${dev##*/}/md/chunk_size) B chunks"
	KMOD_SMOKE_ROUNDS=${KMOD_SMOKE_ROUNDS:-400} "$smoke" "$dev"
	;;
dm-striped)
	read -ra m <<<"$(slices | tr "\n" " ")"
	[ ${#m[@]} = 4 ] || skip "want 4 slice namespaces (variants/stripe4), have ${#m[@]}"
	modprobe dm-mod 2>/dev/null || true
	modprobe dm-stripe 2>/dev/null || true
	sec=$(blockdev --getsz "${m[0]}")
	table="0 $((sec * 4)) striped 4 128"
	for d in "${m[@]}"; do table="$table $d 0"; done
	echo "$table" | dmsetup create --noudevsync kvblk-stripe || fail "dmsetup create: $table"
	cleanup+=("dmsetup remove --noudevsync kvblk-stripe")
	# devtmpfs names it dm-N (no udev here for /dev/mapper links).
	dev=/dev/dm-$(dmsetup info -c --noheadings -o minor kvblk-stripe | tr -d ' ')
	[ -b "$dev" ] || fail "$dev is not there"
	ok "$dev: $table"
	KMOD_SMOKE_ROUNDS=${KMOD_SMOKE_ROUNDS:-300} "$smoke" "$dev"
	;;
partition)
	read -ra m <<<"$(slices | tr "\n" " ")"
	[ ${#m[@]} -ge 1 ] || skip "want a slice namespace (variants/stripe4)"
	d=${m[0]}
	# Starts 1 MiB + 12 KiB in, 40 MiB long (512-byte sectors).
	addpart "$d" 1 2072 81920 || fail "addpart $d"
	cleanup+=("delpart $d 1")
	udevadm settle 2>/dev/null || sleep 1
	p=${d}p1
	[ -b "$p" ] || mknod "$p" b $(tr ':' ' ' <"/sys/class/block/${p##*/}/dev")
	ok "$p: start $(cat /sys/class/block/${p##*/}/start), $(cat /sys/class/block/${p##*/}/size) sectors"
	KMOD_SMOKE_ROUNDS=${KMOD_SMOKE_ROUNDS:-100} KMOD_SMOKE_ENGINE=prp "$smoke" "$p"
	KMOD_SMOKE_ROUNDS=${KMOD_SMOKE_ROUNDS:-100} "$smoke" "$p"
	;;
loop)
	modprobe loop 2>/dev/null || true
	f=$(mktemp /tmp/kvblk-loop.XXXXXX)
	cleanup+=("rm -f $f")
	pattern fill "$f" $((64 << 20)) || fail "pattern fill $f"
	dev=$(losetup --find --show --direct-io=on "$f" 2>/dev/null || losetup --find --show "$f") ||
		fail "losetup $f"
	cleanup=("losetup -d $dev" "${cleanup[@]}")
	ok "$dev over $f (dio $(cat /sys/block/${dev##*/}/loop/dio 2>/dev/null))"
	KMOD_SMOKE_ROUNDS=${KMOD_SMOKE_ROUNDS:-100} "$smoke" "$dev"
	;;
nvme)
	KMOD_SMOKE_ROUNDS=${KMOD_SMOKE_ROUNDS:-8} KMOD_SMOKE_OBJS=48 \
		KMOD_SMOKE_MAXLEN= KMOD_SMOKE_BUF_MB=64 \
		"$smoke" "$KVBLK_TEST_DEVICE"
	;;
*) fail "unknown shape $shape" ;;
esac

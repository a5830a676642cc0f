#!/bin/bash
# SPDX-License-Identifier: MIT
# The target's geometry changes while a kvblk.ko context stays attached
# (tests/kmod-smoke/kmod_hold: attach, change, one batch; canaries around
# every destination, every object that succeeds equal to pread(O_DIRECT)):
#
#   geom-change.sh format  Format NVM of variants/stripe4's scratch namespace
#                          (nsid 5, 4 KiB LBA) to 512-byte LBAs and back with
#                          nvme-cli. PRP engine: the next batch fails with
#                          ESTALE and writes nothing. Block-layer engine: the
#                          next batch follows the new format (exact bytes; an
#                          object aligned to the old 512-byte LBA only after
#                          the format back to 4 KiB: EINVAL, nothing written).
#   geom-change.sh shrink  a partition of a slice namespace shrunk from 40 to
#                          20 MiB (BLKPG resize, util-linux resizepart): on
#                          both engines, objects inside the new end are exact
#                          and one past it fails the call with ERANGE.
#
# The scratch namespace is formatted back to 4 KiB LBAs at the end (its data
# is gone: run after the fs-* cases).
. "$(dirname "$0")/lib.sh"

what=${1:?usage: geom-change.sh format|shrink}
hold=tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "$hold not built"
[ -f "$KVBLK_KO" ] || skip "$KVBLK_KO not built"

# lbaf DEV LBADS: index of the LBA format with 2^LBADS-byte LBAs, no metadata.
lbaf() {
	nvme id-ns "$1" | sed -n "s/^lbaf *\([0-9]*\) *: *ms:0 *lbads:$2 .*/\1/p" | head -1
}

# reformat DEV LBAF BYTES: Format NVM, then the disk must show BYTES-byte blocks.
reformat() {
	nvme format "$1" --lbaf="$2" --force >/dev/null 2>&1 || true
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(blockdev --getss "$1")" = "$3" ] && return 0
		sleep 0.2
	done
	echo "FAIL: $1: logical block size $(blockdev --getss "$1") after format to lbaf $2, want $3" >&2
	return 1
}

# geom-change.sh reformat DEV LBAF BYTES: what kmod_hold runs while attached.
if [ "$what" = reformat ]; then
	reformat "$2" "$3" "$4" || exit 1
	# The first 2 MiB get pattern bytes (a slice namespace's), so that exact
	# means the right bytes, not the zeros a format leaves.
	dd if="$(extra_ns 1)" of="$2" bs=1M count=2 oflag=direct status=none
	exit
fi
cleanup=()
on_exit() {
	local c
	for c in "${cleanup[@]}"; do eval "$c" || true; done
	rmmod kvblk 2>/dev/null || true
}
trap on_exit EXIT

insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"

case $what in
format)
	command -v nvme >/dev/null || skip "no nvme-cli"
	wait_extra_ns 5
	d=$(extra_ns 5)
	[ -n "$d" ] || skip "no scratch namespace (variants/stripe4)"
	expect_eq "$d logical block size" "$(blockdev --getss "$d")" 4096
	f512=$(lbaf "$d" 9)
	f4k=$(lbaf "$d" 12)
	[ -n "$f512" ] && [ -n "$f4k" ] || skip "$d offers no 512 B and 4 KiB formats without metadata"
	cleanup+=("reformat $d $f4k 4096")
	to512="$0 reformat $d $f512 512"
	to4k="$0 reformat $d $f4k 4096"

	# PRP engine: attached at 4 KiB, formatted to 512 B: ESTALE, nothing written.
	$hold -e prp -c ESTALE -r "$to512" \
		"$d" 0:64K 8K:4K 1M:128K || fail "PRP engine after Format NVM 4 KiB -> 512 B"
	dmesg | grep -q "LBA format changed since attach" ||
		fail "no kernel log line for the stale LBA format"
	ok "PRP engine: ESTALE after Format NVM to 512-byte LBAs, buffer untouched"
	# ... and attached at 512 B, formatted back to 4 KiB.
	$hold -e prp -c ESTALE -r "$to4k" \
		"$d" 0:64K 512:512 || fail "PRP engine after Format NVM 512 B -> 4 KiB"
	ok "PRP engine: ESTALE after Format NVM to 4 KiB LBAs, buffer untouched"

	# Block-layer engine: the batch after the format follows it.
	$hold -e bio -r "$to512" \
		"$d" 0:64K 512:512 1M:128K 1536:3584 || fail "bio engine after Format NVM 4 KiB -> 512 B"
	ok "bio engine: exact bytes at the new 512-byte LBA size"
	$hold -e bio -c EINVAL -r "$to4k" \
		"$d" 0:64K 512:512 || fail "bio engine after Format NVM 512 B -> 4 KiB"
	$hold -e bio "$d" 0:64K 4K:4K 1M:128K || fail "bio engine at 4 KiB again"
	ok "bio engine: a 512-byte object EINVAL after the format to 4 KiB LBAs, aligned ones exact"
	;;
shrink)
	command -v resizepart >/dev/null || skip "no resizepart (util-linux)"
	wait_extra_ns 1
	d=$(extra_ns 1)
	[ -n "$d" ] || skip "no slice namespace (variants/stripe4)"
	# 40 MiB from 1 MiB + 12 KiB in (512-byte sectors), shrunk to 20 MiB.
	addpart "$d" 1 2072 81920 || fail "addpart $d"
	cleanup+=("delpart $d 1")
	p=${d}p1
	udevadm settle 2>/dev/null || sleep 1
	[ -b "$p" ] || mknod "$p" b $(tr ':' ' ' <"/sys/class/block/${p##*/}/dev")
	shrink="resizepart $d 1 40960"
	grow="resizepart $d 1 81920"
	for eng in prp bio; do
		$hold -e $eng -r "$shrink" "$p" 0:64K 12K:4K 20M-64K:64K 20M-4K:4K 19M:256K ||
			fail "$eng: objects inside the shrunk partition"
		[ "$(blockdev --getsz "$p")" = 40960 ] || fail "$p did not shrink"
		$grow || fail "$grow"
		$hold -e $eng -c ERANGE -r "$shrink" "$p" 0:64K 20M-4K:8K ||
			fail "$eng: object across the new end"
		$grow || fail "$grow"
		$hold -e $eng -c ERANGE -r "$shrink" "$p" 30M:4K ||
			fail "$eng: object past the new end"
		$grow || fail "$grow"
		ok "$eng engine: inside the shrunk partition exact, past its new end ERANGE"
	done
	;;
*) fail "unknown change $what" ;;
esac

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
#   geom-change.sh format-pi  Format NVM of the scratch namespace, attached at
#                          4 KiB LBAs through the PRP engine, to 4 KiB + 8
#                          bytes of protection information in an extended
#                          LBA (the block layer shows neither: the nvme
#                          driver sets PRACT for its own I/O): every object
#                          of the next batch ESTALE, among them one of 4 KiB
#                          at a page start and one of 8 KiB, whose PRP2 the
#                          controller would read as a list; no byte of the
#                          buffer written (review-2 N2).
#   geom-change.sh format-mid  Format NVM 4 KiB -> 512 B while a PRP batch of
#                          4,096 objects of 32 KiB runs (4 KiB commands,
#                          max_inflight 1): objects read
#                          before the format exact (the bytes pread(O_DIRECT)
#                          gave before the batch), every later one ESTALE, at
#                          least one of them; no byte of the buffer written
#                          past an object (review-2 N2).
#   geom-change.sh format-mid-up  The same from 512 B to 4 KiB, the objects
#                          64 MiB and more into the namespace: past the end
#                          of the new format in 512-byte LBAs, so a probe
#                          Read of a command's own first LBA fails there
#                          (LBA Out of Range) while the block layer still
#                          shows 512 B; still every later object ESTALE,
#                          none EIO (kvblk_prp_recheck() probes the target's
#                          first LBA then).
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

# lbaf DEV LBADS [MS]: index of the LBA format with 2^LBADS-byte LBAs and MS
# (default 0) metadata bytes.
lbaf() {
	nvme id-ns "$1" | sed -n "s/^lbaf *\([0-9]*\) *: *ms:${3:-0} *lbads:$2 .*/\1/p" | head -1
}

# reformat DEV LBAF BYTES [NVME-FORMAT-OPTIONS]: Format NVM, then the disk
# must show BYTES-byte blocks.
reformat() {
	nvme format "$1" --lbaf="$2" --force "${@:4}" >/dev/null 2>&1 || true
	local i
	for ((i = 0; i < 50; i++)); do
		[ "$(blockdev --getss "$1")" = "$3" ] && return 0
		sleep 0.2
	done
	echo "FAIL: $1: logical block size $(blockdev --getss "$1") after format to lbaf $2, want $3" >&2
	return 1
}

# mid_format LBAF BYTES OFFSET WHAT: a PRP batch of 4,096 objects of 32 KiB from OFFSET on $d
# during which kmod_hold formats $d to LBAF (BYTES-byte LBAs). Long enough for nvme-cli to
# start (seconds under TCG): 4 KiB commands (the module's default for disks attached later),
# one in flight; 32,768 commands, most of which the format turns into ESTALE without one.
# Every object ok or ESTALE, at least one ESTALE, and once one object found the new format
# every later one ESTALE.
mid_format() {
	local out st
	echo 4096 >/sys/module/kvblk/parameters/max_cmd_bytes
	out=$($hold -e prp -P -r "echo 1 >/sys/kernel/kvblk/${d##*/}/max_inflight" \
		-D "$0 reformat $d $1 $2" "$d" "$3:32K*4096=ok|ESTALE") ||
		{ echo "$out" | tail -20; fail "PRP engine: $4"; }
	echo "$out" | grep "status" | tail -5
	echo "$out" | grep -q "status ESTALE" || fail "no object ESTALE: the format came after the batch"
	st=$(echo "$out" | grep -o "status [A-Za-z0-9]*" | uniq | tr '\n' ' ')
	grep -Eq "^(status ok )?status ESTALE $" <<<"$st" || fail "statuses not ok... then ESTALE...: $st"
}

# geom-change.sh reformat DEV LBAF BYTES [OPTIONS]: what kmod_hold runs while attached.
if [ "$what" = reformat ]; then
	reformat "$2" "$3" "$4" "${@:5}" || exit 1
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
format-pi | format-mid | format-mid-up)
	command -v nvme >/dev/null || skip "no nvme-cli"
	wait_extra_ns 5
	d=$(extra_ns 5)
	[ -n "$d" ] || skip "no scratch namespace (variants/stripe4)"
	f4k=$(lbaf "$d" 12)
	f512=$(lbaf "$d" 9)
	f4k8=$(lbaf "$d" 12 8)
	[ -n "$f4k" ] && [ -n "$f512" ] && [ -n "$f4k8" ] ||
		skip "$d offers no 4 KiB, 512 B and 4 KiB + 8 formats"
	expect_eq "$d logical block size" "$(blockdev --getss "$d")" 4096
	cleanup+=("reformat $d $f4k 4096")
	;;&
format-pi)
	# Extended LBA (--ms=1) with type 1 protection information (--pi=1).
	topi="$0 reformat $d $f4k8 4096 --ms=1 --pi=1"
	$hold -e prp -r "$topi" "$d" 0:4K=ESTALE 64K:8K=ESTALE 1M:128K=ESTALE ||
		fail "PRP engine after Format NVM to an extended LBA with PI"
	nvme id-ns "$d" | grep -q "^flbas *: 0x1$f4k8" ||
		echo "note: flbas after the format: $(nvme id-ns "$d" | grep '^flbas')"
	dmesg | grep -q "did not move exactly the LBA's data" ||
		fail "no kernel log line for the extended-LBA format"
	ok "PRP engine: every object ESTALE after a format to 4 KiB + 8 bytes PI extended LBAs, buffer untouched"
	;;
format-mid)
	mid_format "$f512" 512 0 "a Format NVM during a batch"
	# The device's new format is found by the probe Read, or, after the nvme
	# driver's rescan, by the block layer's LBA size: either line.
	dmesg | grep -Eq "LBA format changed during the batch|did not move exactly the LBA's data" ||
		fail "no kernel log line for the format during the batch"
	ok "PRP engine: a Format NVM during a batch: objects before it exact, every later one ESTALE, buffer untouched"
	;;
format-mid-up)
	reformat "$d" "$f512" 512 || fail "format $d to 512-byte LBAs before attach"
	mid_format "$f4k" 4096 64M "a Format NVM 512 B -> 4 KiB during a batch"
	grep -c "did not move exactly the LBA's data" <<<"$(dmesg)" || true
	ok "PRP engine: a Format NVM 512 B -> 4 KiB during a batch: objects before it exact, every later one ESTALE"
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

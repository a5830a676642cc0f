#!/bin/bash
# SPDX-License-Identifier: MIT
# What read(2), write(2) and pread(O_DIRECT) on a target's fd do, through
# kvblk.ko (the second review's N4, N5, N6; kmod/README.md, "The per-I/O
# checks of read and write"):
#
#   rw-checks.sh coherence  a buffered write not yet written back, then a
#                           load: the written bytes (tests/kmod-smoke/
#                           kmod_hold compares with pread(O_DIRECT) after the
#                           load, which writes back first). The NVMe
#                           namespace through the PRP and the bio engine, a
#                           loop device (bio engine), an ext4 file (file engine).
#   rw-checks.sh perm       a fanotify listener that denies access to an ext4
#                           file (EPERM, nothing written), then allows it;
#                           inotify IN_ACCESS/IN_MODIFY after a load and a
#                           store, on that file and on a loop device.
#   rw-checks.sh swap       stores to an active swap loop device and to an
#                           active swap file: ETXTBSY, nothing written.
#   rw-checks.sh dying      two loop devices in one context, one of them cut
#                           to capacity 0: its objects ENOLINK, the other's
#                           exact.
. "$(dirname "$0")/lib.sh"

what=${1:?usage: rw-checks.sh coherence|perm|swap|dying}
hold=tests/kmod-smoke/kmod_hold
checks=tests/kmod-smoke/kmod_checks
[ -x "$hold" ] && [ -x "$checks" ] || skip "tests/kmod-smoke not built"
dir=$KVBLK_VM_CASE_DIR
modprobe -q loop 2>/dev/null || true

cleanup=()
on_exit() {
	local i
	for ((i = ${#cleanup[@]} - 1; i >= 0; i--)); do eval "${cleanup[i]}" || true; done
}
trap on_exit EXIT

# loopdev FILE SIZE: a loop device over a new FILE of SIZE, in $loop.
loopdev() {
	truncate -s "$2" "$1"
	loop=$(losetup -f --show "$1") || fail "losetup $1"
	cleanup+=("losetup -d $loop")
}

case $what in
coherence)
	dev=$KVBLK_TEST_DEVICE
	# 64 KiB at 200 MiB of the namespace, saved and put back after.
	dd if="$dev" of="$dir/save" bs=64K skip=3200 count=1 iflag=direct status=none ||
		fail "save $dev"
	cleanup+=("dd if=$dir/save of=$dev bs=64K seek=3200 count=1 oflag=direct conv=notrunc status=none")
	dirty="dd if=/dev/urandom of=$dev bs=64K seek=3200 count=1 conv=notrunc status=none"
	for eng in prp bio; do
		$hold -e $eng -r "$dirty" "$dev" 200M:64K 200M+4K:4K ||
			fail "$eng engine: a load after a buffered write of $dev"
		ok "$eng engine on $dev: a load after a buffered write reads the written bytes"
	done
	loopdev "$dir/loop.img" 64M
	$hold -r "dd if=/dev/urandom of=$loop bs=4K seek=10 count=20 conv=notrunc status=none" \
		"$loop" 40K:80K 64K:4K || fail "bio engine: a load after a buffered write of $loop"
	ok "bio engine on $loop: a load after a buffered write reads the written bytes"
	ext4_scratch "$dir"
	cleanup+=("ext4_scratch_undo $dir")
	f=$dir/mnt/obj
	dd if=/dev/urandom of="$f" bs=1M count=4 status=none && sync
	$hold -r "dd if=/dev/urandom of=$f bs=4K seek=100 count=50 conv=notrunc status=none" \
		"$f" 400K:200K 1M:4K || fail "file engine: a load after a buffered write of $f"
	ok "file engine on $f: a load after a buffered write reads the written bytes"
	;;
perm)
	command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4"
	ext4_scratch "$dir"
	cleanup+=("ext4_scratch_undo $dir")
	f=$dir/mnt/obj
	dd if=/dev/urandom of="$f" bs=1M count=1 status=none && sync
	# kmod_checks exits 4 where the kernel has no fanotify permission events
	# (CONFIG_FANOTIFY_ACCESS_PERMISSIONS): that
	# half is skipped, said so, and the inotify half below still runs.
	rc=0
	$checks perm "$f" || rc=$?
	case $rc in
	0) ok "file target: a fanotify listener's deny fails the load with EPERM, nothing written; allow: exact" ;;
	4) echo "skipped: fanotify permission events (this kernel has none); the inotify half runs" ;;
	*) fail "fanotify on a file target" ;;
	esac
	# fanotify reports events of regular files and directories only
	# (fanotify_group_event_mask()): read(2) of a block device is never
	# held by a listener, and neither is a load from one.
	loopdev "$dir/loop.img" 16M
	dd if=/dev/urandom of="$loop" bs=1M count=1 oflag=direct status=none
	$checks notify "$f" || fail "inotify on a file target"
	$checks notify "$loop" || fail "inotify on a block device target"
	ok "inotify: IN_ACCESS after a load, IN_MODIFY after a store, file and block device"
	;;
swap)
	command -v mkswap >/dev/null && command -v swapon >/dev/null || skip "no mkswap/swapon"
	loopdev "$dir/swap.img" 16M
	mkswap "$loop" >/dev/null || fail "mkswap $loop"
	swapon "$loop" || skip "swapon $loop failed"
	cleanup+=("swapoff $loop")
	$checks swap "$loop" || fail "store to an active swap device"
	ok "store to an active swap device: ETXTBSY, nothing written"
	ext4_scratch "$dir"
	cleanup+=("ext4_scratch_undo $dir")
	dd if=/dev/zero of="$dir/mnt/swapfile" bs=1M count=8 status=none
	chmod 600 "$dir/mnt/swapfile"
	mkswap "$dir/mnt/swapfile" >/dev/null && swapon "$dir/mnt/swapfile" || skip "swapon of a file on ext4 failed"
	cleanup+=("swapoff $dir/mnt/swapfile")
	$checks swap "$dir/mnt/swapfile" || fail "store to an active swap file"
	ok "store to an active swap file: ETXTBSY, nothing written"
	;;
dying)
	loopdev "$dir/a.img" 16M
	a=$loop
	loopdev "$dir/b.img" 16M
	b=$loop
	dd if=/dev/urandom of="$b" bs=1M count=16 oflag=direct status=none
	$checks dying "$a" "$b" "truncate -s 0 $dir/a.img && losetup -c $a" ||
		fail "a batch over a dying and a live target"
	ok "a target at capacity 0 fails its own objects (ENOLINK); the other target's are exact"
	;;
*) fail "unknown check $what" ;;
esac

#!/bin/bash
# SPDX-License-Identifier: MIT
# A disk that takes the name of a removed one while a kvblk.ko context still
# holds the removed one (review L6; kmod/ns.c, kvblk_ns_create()): the new
# disk attaches, its sysfs directory is /sys/kernel/kvblk/<disk>@<diskseq>
# (the removed disk keeps /sys/kernel/kvblk/<disk> until its last context
# closes), loads from it are exact, and the removed one's objects fail. Before
# the fix the attach failed with EBUSY after the kernel's "cannot create
# duplicate filename" stack dump.
#
# null_blk through configfs: null_del_dev() frees a device's index before
# its disk's last reference goes, so the next device made gets the same
# index, and the same name (nullb<index>; kernels that name a configfs
# device after its directory give it the same directory name), while kvblk
# still holds the first.
. "$(dirname "$0")/lib.sh"

hold=tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "tests/kmod-smoke not built"
[ -e /sys/module/null_blk ] && skip "null_blk is loaded already (its devices are not ours)"
modprobe null_blk nr_devices=0 || skip "no null_blk in this kernel"
cfg=/sys/kernel/config/nullb
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
[ -d $cfg ] || { rmmod null_blk; skip "null_blk without configfs"; }
dir=$KVBLK_VM_CASE_DIR

cleanup() {
	local d
	for d in "$cfg"/*/; do
		[ -d "$d" ] || continue
		echo 0 >"$d/power" 2>/dev/null || true
		rmdir "$d" || true
	done
	rmmod null_blk || true
}
trap cleanup EXIT

# mknullb: a 64 MiB memory-backed null_blk of 4 KiB blocks, configfs
# directory kvblkdup, filled with random bytes; its disk name (the new entry
# of /sys/block) in $disk.
mknullb() {
	local d=$cfg/kvblkdup before
	before=$(ls /sys/block)
	mkdir "$d" && echo 64 >"$d/size" && echo 1 >"$d/memory_backed" &&
		echo 4096 >"$d/blocksize" && echo 1 >"$d/power" || fail "configfs null_blk"
	disk=$(ls /sys/block | grep -vxF "$before" || true)
	[ "$(wc -w <<<"$disk")" = 1 ] || fail "no one new disk in /sys/block: '$disk' (index $(cat "$d/index"))"
	for _ in $(seq 50); do [ -b "/dev/$disk" ] && break; sleep 0.1; done
	[ -b "/dev/$disk" ] || fail "/dev/$disk did not appear (/sys/block: $(ls /sys/block))"
	dd if=/dev/urandom of="/dev/$disk" bs=1M count=4 oflag=direct status=none || fail "fill /dev/$disk"
}

mknullb
first=$disk
echo "first device: $first, diskseq $(cat /sys/block/$first/diskseq)"
[ -d "/sys/kernel/kvblk" ] || fail "no /sys/kernel/kvblk"

# Run by kmod_hold (context A attached to $first): remove it, make the second
# device under the same name, attach it (context B), check B's directory and
# load from it, all while A holds the removed disk.
cat >"$dir/swap.sh" <<EOF
set -e
echo 0 >$cfg/kvblkdup/power
rmdir $cfg/kvblkdup
. "$PWD/tests/vm/cases/lib.sh"
$(declare -f mknullb)
cfg=$cfg
mknullb
if [ "\$disk" != "$first" ]; then
	echo "FAIL: the second null_blk is \$disk, not $first: this kernel did not reuse the name" >&2
	exit 1
fi
seq=\$(cat /sys/block/\$disk/diskseq)
echo "second device: \$disk, diskseq \$seq"
[ -d /sys/kernel/kvblk/$first ] || { echo "FAIL: the held disk's /sys/kernel/kvblk/$first is gone" >&2; exit 1; }
$PWD/$hold -e bio -r "test -d /sys/kernel/kvblk/\$disk@\$seq && cat /sys/kernel/kvblk/\$disk@\$seq/stats/commands" \\
	/dev/\$disk 0:64K 1M:128K 4M-4K:4K
EOF

rc=0
out=$("$hold" -e bio -r "bash $dir/swap.sh" "/dev/$first" "0:64K=ENOLINK" "1M:128K=ENOLINK" 2>&1) || rc=$?
echo "$out"
[ $rc = 0 ] || fail "a disk under a held removed disk's name (kmod_hold exit $rc)"
ok "the second $first attached beside the held removed one, its directory <disk>@<diskseq>, loads exact"
ok "the removed disk's objects ENOLINK"
for _ in $(seq 50); do [ -d "/sys/kernel/kvblk/$first" ] || break; sleep 0.1; done
[ -d "/sys/kernel/kvblk/$first" ] && fail "/sys/kernel/kvblk/$first outlived its last context"
ls /sys/kernel/kvblk/ | grep -q "@" && fail "a <disk>@<diskseq> directory outlived its context: $(ls /sys/kernel/kvblk/)"
ok "both directories gone with their contexts"
if dmesg | grep -E "duplicate filename|kobject_add_internal failed"; then
	fail "the kernel log above"
fi
ok "no duplicate-name report in the kernel log"

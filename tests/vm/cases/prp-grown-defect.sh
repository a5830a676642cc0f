#!/bin/bash
# SPDX-License-Identifier: MIT
# A media defect that grows at a PRP target's first LBA after attach
# (kmod/engine_prp.c, kvblk_prp_recheck()). Variant blkdebug:bad=0:grow=write:
# LBA 0 reads fine until the first write reaches the namespace, then fails
# with Unrecovered Read Error (run-vm.sh, blkdebug set-state rule).
#
# 1. Before the write LBA 0 reads; the PRP context attaches (its probe reads
#    the target's first LBA, LBA 0).
# 2. After attach (kmod_hold -r) one LBA far away is written back with its
#    own bytes: the defect grows, a plain O_DIRECT read of LBA 0 now fails.
# 3. Three LOAD_MANY batches on that context: every object that does not
#    cover LBA 0 succeeds with exactly pread(O_DIRECT)'s bytes, the batch's
#    first one included; every object that covers LBA 0 fails with EIO, the
#    errno of a PRP command that fails with a media error (kmod-smoke's
#    media error case). The first object of each batch on the target is
#    where the batch re-checks the namespace with a probe Read: of the
#    target's first LBA before the fix, so that object (and the first after
#    each drain) failed with EIO although its own LBAs are good.
# 4. A new PRP attach with LBA 0 bad succeeds (its probe reads the next
#    LBA); its loads: 1M exact, LBA 0 EIO.
. "$(dirname "$0")/lib.sh"

[ "${KVBLK_VM_BAD_GROWS:-}" = write ] ||
	skip "variant $KVBLK_VM_VARIANT has no defect that grows (grow=write)"
hold=tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "$hold not built"
dev=$KVBLK_TEST_DEVICE lba=$KVBLK_VM_LBA
[ "$KVBLK_VM_BAD_BYTE_OFFSET" = 0 ] ||
	skip "the bad LBA is not the target's first (bad=0)"

dd if="$dev" of=/dev/null iflag=direct bs="$lba" count=1 status=none ||
	fail "LBA 0 does not read before the write: the defect is there from boot"
ok "LBA 0 reads before any write"

# Run by kmod_hold after attach: grow the defect and show it is there.
far=$((KVBLK_VM_DISK_BYTES / lba - 1))
grow=$KVBLK_VM_CASE_DIR/grow.sh
cat >"$grow" <<EOF
set -e
dd if=$dev of=$KVBLK_VM_CASE_DIR/far.bin iflag=direct bs=$lba skip=$far count=1 status=none
dd if=$KVBLK_VM_CASE_DIR/far.bin of=$dev oflag=direct conv=notrunc bs=$lba seek=$far count=1 status=none
if dd if=$dev of=/dev/null iflag=direct bs=$lba count=1 status=none; then
	echo "LBA 0 still reads after the write" >&2
	exit 1
fi
echo "grown: LBA 0 fails"
EOF

# The batch: good objects first, right after LBA 0, far away, multi-command;
# objects covering LBA 0 alone and among others.
log=$KVBLK_VM_CASE_DIR/hold.log
if ! $hold -e prp -n 3 -r "sh $grow" "$dev" \
	1M:64K "0:4K=EIO" 4K:8K 8M+4K:4K 64M:256K "0:64K=EIO" 100M:4K \
	16K:4K >"$log" 2>&1; then
	cat "$log"
	fail "PRP batches with a grown defect at the target's first LBA"
fi
cat "$log"
grep -q "^grown: LBA 0 fails" "$log" || fail "the defect did not grow after attach"
ok "defect grown at LBA 0 after attach: objects elsewhere exact, objects over LBA 0 EIO, 3 batches"

# A new PRP attach now: its probe finds LBA 0's media error and reads the
# next LBA instead (kvblk_prp_probe()): it succeeds, LBA 0 still EIO.
if ! out=$($hold -e prp "$dev" 1M:4K "0:4K=EIO" 2>&1); then
	echo "$out"
	fail "a new PRP attach with LBA 0 bad failed"
fi
echo "$out"
ok "a new PRP attach with LBA 0 bad succeeds: 1M exact, LBA 0 EIO"

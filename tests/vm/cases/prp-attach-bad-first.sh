#!/bin/bash
# SPDX-License-Identifier: MIT
# A PRP attach of a target whose first LBA has a media error (variant
# blkdebug:bad=0: every read of LBA 0 fails with Unrecovered Read Error;
# blkdebug:bad=0:grow=write, where the suite runs it after prp-grown-defect:
# from the first write on, which this case makes itself where none came
# yet). The attach's probe Read (kmod/engine_prp.c, kvblk_probe_ext_lba())
# reads the target's first LBA; a media error there says nothing about the
# driver's status mirror, which the self-check's failing Read already
# proved, so the probe reads the next LBA instead (a few at most) and the
# attach succeeds with the PRP engine.
#
# 1. LBA 0 does not read (O_DIRECT dd): the defect is there (grow=write: after
#    a far LBA is written back with its own bytes, if it was not yet).
# 2. PRP attach and three LOAD_MANY batches (kmod_hold -e prp): every object
#    that does not cover LBA 0 is exact (pread(O_DIRECT)'s bytes), every
#    object that covers it fails with EIO (a PRP command's media error).
# 3. The kernel log of the attach names LBA 0 and the media error, and has
#    no "self-check failed" line (before the fix: the attach was refused
#    with EOPNOTSUPP and that line, "mirror ... does not match this kernel").
# 4. Every LBA the probe may read is bad: a partition (BLKPG, addpart) of the
#    bad LBA alone, so the probe has that one LBA to read. A PRP attach of it
#    fails with EIO and the log says the probe Read of each LBA (0 to 0)
#    failed with a media error; an attach without a flag gets the
#    block-layer engine alone (engines 0x4), whose load of the LBA fails
#    with EIO.
. "$(dirname "$0")/lib.sh"

[ "${KVBLK_VM_BAD_BYTE_OFFSET:-}" = 0 ] ||
	skip "variant $KVBLK_VM_VARIANT has no bad LBA 0 (bad=0)"
case ${KVBLK_VM_BAD_GROWS:-} in
'' | write) ;;
*) skip "variant $KVBLK_VM_VARIANT: grow=$KVBLK_VM_BAD_GROWS" ;;
esac
hold=tests/kmod-smoke/kmod_hold
[ -x "$hold" ] || skip "$hold not built"
dev=$KVBLK_TEST_DEVICE lba=$KVBLK_VM_LBA

if [ "${KVBLK_VM_BAD_GROWS:-}" = write ] &&
	dd if="$dev" of=/dev/null iflag=direct bs="$lba" count=1 status=none 2>/dev/null; then
	far=$(((64 << 20) / lba))
	dd if="$dev" of="$KVBLK_VM_CASE_DIR/far.bin" iflag=direct bs="$lba" skip=$far count=1 status=none &&
		dd if="$KVBLK_VM_CASE_DIR/far.bin" of="$dev" oflag=direct conv=notrunc bs="$lba" seek=$far count=1 \
			status=none || fail "writing LBA $far back to grow the defect"
fi
if dd if="$dev" of=/dev/null iflag=direct bs="$lba" count=1 status=none 2>/dev/null; then
	fail "LBA 0 reads: no defect"
fi
ok "LBA 0 fails to read"

mark="kvblk-vm: prp-attach-bad-first $$"
echo "$mark" >/dev/kmsg
log=$KVBLK_VM_CASE_DIR/hold.log
if ! $hold -e prp -n 3 "$dev" \
	4K:8K 1M:64K "0:4K=EIO" 8M+4K:4K "0:64K=EIO" 64M:256K 100M:4K \
	>"$log" 2>&1; then
	cat "$log"
	dmesg | sed -n "/$mark/,\$p" | grep 'kvblk:' || true
	fail "PRP attach and loads with LBA 0 bad"
fi
cat "$log"
grep -q '^attached .* engine 1 ' "$log" ||
	fail "not attached with the PRP engine (KVBLK_ENGINE_PRP, 1)"
ok "PRP attach with LBA 0 bad: objects elsewhere exact, objects over LBA 0 EIO, 3 batches"

klog=$(dmesg | sed -n "/$mark/,\$p" | grep 'kvblk:' || true)
echo "$klog"
if echo "$klog" | grep -q 'self-check failed'; then
	fail "the attach logged a self-check failure for a media error"
fi
echo "$klog" | grep -q 'LBA 0 .*media error' ||
	fail "the attach did not log the media error at LBA 0"
ok "the attach logged the media error at LBA 0, no self-check failure"

# 4. The probe runs out of LBAs: all it may read (here one) are bad.
part=${dev}p1
addpart "$dev" 1 0 $((lba / 512)) || fail "addpart: a partition of LBA 0"
trap 'delpart "$dev" 1 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -b "$part" ] && break; sleep 0.1; done
[ -b "$part" ] || fail "$part did not appear"
mark="kvblk-vm: prp-attach-bad-first partition $$"
echo "$mark" >/dev/kmsg
$hold -e prp -A EIO "$part" || fail "a PRP attach of a partition whose every LBA is bad: not EIO"
klog=$(dmesg | sed -n "/$mark/,\$p" | grep 'kvblk:' || true)
echo "$klog"
echo "$klog" | grep -q "PRP engine refused: the probe Read of each of the attached range's first 1 LBAs (0 to 0) failed with a media error" ||
	fail "the refusal of a range with no good LBA is not logged"
ok "PRP attach of a partition of the bad LBA alone: EIO, logged"
$hold "$part" "0:${lba}=EIO" >"$log" 2>&1 || { cat "$log"; fail "attach without a flag, load of the bad LBA"; }
cat "$log"
grep -q '^attached .* engine 2 engines 0x4 ' "$log" ||
	fail "not attached with the block-layer engine alone (engine 2, engines 0x4)"
ok "attach without a flag: the block-layer engine alone, the bad LBA's object fails alone"

#!/bin/bash
# SPDX-License-Identifier: MIT
# VM case (variants/swiotlb.conf, swiotlb=force): the PRP engine refuses a
# controller whose DMA all bounces (attach with KVBLK_ATTACH_F_ENGINE_PRP:
# EOPNOTSUPP and a kernel log line saying why); a default attach gets the
# block-layer engine; loads into a registered host buffer are exact (every
# object compared with pread(O_DIRECT), the buffer filled with 0xee first,
# unaligned destinations included); no warning in the kernel log (the runner
# loads kvblk.ko and fails the case when it does not unload: load:kvblk).
#
# --mask-bits N (case dma-mask, review M5): the same where only some mappings
# would bounce, a DMA mask that does not reach all memory. QEMU's NVMe has a
# 64-bit mask, so the test hook test_dma_mask_bits (kmod/README.md, "Test
# hooks") makes the PRP engine's checks take it as N bits; the refusal's log
# line says so, and with the hook back at 0 a PRP attach succeeds again.
. "$(dirname "$0")/lib.sh"
set +e

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
[ -b "$dev" ] || skip "$dev is not a block device"
mask_bits=0
[ "${1:-}" = --mask-bits ] && mask_bits=${2:?--mask-bits N}
hook=/sys/module/kvblk/parameters/test_dma_mask_bits
if [ "$mask_bits" = 0 ]; then
	grep -qw "swiotlb=force" /proc/cmdline || fail "swiotlb=force not on the kernel command line"
	why="bounces all DMA through swiotlb"
else
	[ -w $hook ] || fail "$hook: no such test hook"
	echo "$mask_bits" >$hook || fail "test_dma_mask_bits=$mask_bits refused"
	trap 'echo 0 >$hook' EXIT
	why="DMA mask does not reach all memory"
fi
log0=$(dmesg | wc -l)

PYTHONPATH=$KVBLK_SRC/tests/vm timeout -s KILL 120 /usr/bin/python3 - "$dev" <<'PY'
import errno, mmap, os, sys
import kvblk_uapi as u

dev = sys.argv[1]

try:
    u.Context(dev, u.ATTACH_F_ENGINE_PRP)
    err = 0
except OSError as e:
    err = e.errno
if err != errno.EOPNOTSUPP:
    print("FAIL: PRP attach (swiotlb=force or a small DMA mask): errno %s, want EOPNOTSUPP" % err)
    sys.exit(1)
print("ok: PRP attach refused with EOPNOTSUPP")

ctx = u.Context(dev)
if ctx.attach["engine"] != u.ENGINE_BIO:
    print("FAIL: default attach: engine %s, want %d (block layer)" % (ctx.attach["engine"], u.ENGINE_BIO))
    sys.exit(1)
lba = ctx.attach["lba_size"]
print("ok: default attach: block-layer engine, LBA %d" % lba)

SPAN = 4 << 20
want = mmap.mmap(-1, SPAN)
fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
assert os.preadv(fd, [want], 0) == SPAN
os.close(fd)
m = mmap.mmap(-1, SPAN + (1 << 20))
buf_id = ctx.register(u.buffer_address(m), len(m))

# 64 objects: device offsets in order, lengths 1..16 LBAs, destinations
# packed with a 512-byte gap (so not page aligned).
objs, off, boff = [], 0, 0
for i in range(64):
    n = (i % 16 + 1) * lba
    if off + n > SPAN:
        break
    objs.append((off, n, boff))
    off += n
    boff += n + 512
batch = u.Batch([(o, n, b, buf_id) for o, n, b in objs])
for rnd in range(3):
    m[:] = b"\xee" * len(m)
    ret, st, _ = batch.load(ctx)
    if ret != len(objs) or any(st):
        print("FAIL: round %d: ret %d statuses %s" % (rnd, ret, st))
        sys.exit(1)
    for i, (o, n, b) in enumerate(objs):
        if m[b:b + n] != want[o:o + n]:
            print("FAIL: round %d: object %d (offset %d, %d bytes, at %d) differs from pread" % (rnd, i, o, n, b))
            sys.exit(1)
        if m[b + n:b + n + 512] != b"\xee" * 512:
            print("FAIL: round %d: the gap after object %d was written" % (rnd, i))
            sys.exit(1)
print("ok: 3 batches of %d objects exact, gaps untouched" % len(objs))
ctx.close()
sys.exit(0)
PY
rc=$?
if [ "$mask_bits" != 0 ] && [ $rc = 0 ]; then
	# The hook is what refused: with the device's own mask the PRP engine attaches.
	echo 0 >$hook
	PYTHONPATH=$KVBLK_SRC/tests/vm /usr/bin/python3 -c '
import sys
import kvblk_uapi as u
c = u.Context(sys.argv[1], u.ATTACH_F_ENGINE_PRP)
assert c.attach["engine"] == u.ENGINE_PRP, c.attach
print("ok: hook at 0: PRP attach succeeds")
c.close()' "$dev" || { echo "FAIL: PRP attach with test_dma_mask_bits=0" >&2; rc=1; }
fi
new=$(dmesg | tail -n +"$((log0 + 1))")
if ! grep -q "$why" <<<"$new"; then
	echo "FAIL: no kernel log line for the refused PRP attach" >&2
	rc=1
fi
if grep -E "WARNING|BUG|Oops|Call Trace|swiotlb buffer is full" <<<"$new"; then
	echo "FAIL: the kernel log above" >&2
	rc=1
fi
grep kvblk <<<"$new" | tail -n 4
exit $rc

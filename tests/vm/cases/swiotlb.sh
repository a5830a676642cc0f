#!/bin/bash
# SPDX-License-Identifier: MIT
# VM case (variants/swiotlb.conf, swiotlb=force): the PRP engine refuses a
# controller whose DMA all bounces (attach with KVBLK_ATTACH_F_ENGINE_PRP:
# EOPNOTSUPP and a kernel log line saying why); a default attach gets the
# block-layer engine; loads into a registered host buffer are exact (every
# object compared with pread(O_DIRECT), the buffer filled with 0xee first,
# unaligned destinations included); rmmod, no warning in the kernel log.
. "$(dirname "$0")/lib.sh"
set +e

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
[ -b "$dev" ] || skip "$dev is not a block device"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
grep -qw "swiotlb=force" /proc/cmdline || fail "swiotlb=force not on the kernel command line"
log0=$(dmesg | wc -l)
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"

timeout -s KILL 120 /usr/bin/python3 - "$dev" <<'PY'
import ctypes, errno, fcntl, mmap, os, struct, sys

def iowr(nr, size):
    return (3 << 30) | (size << 16) | (0xBA << 8) | nr

ATT = "=IIiIIIQQIIQ4Q"          # struct kvblk_attach, 88 bytes
REG = "=IIIiQQII2Q"             # struct kvblk_buf_reg, 56 bytes
LM = "=IIIIQQIiIIQQ2Q"          # struct kvblk_load_many, 80 bytes
DESC = "=QQQIIQ"                # struct kvblk_io_desc, 40 bytes
RES = "=iIQ"                    # struct kvblk_desc_result, 16 bytes
F_BIO, F_PRP = 1, 2
ENGINE_BIO = 2
dev = sys.argv[1]

def attach(flags):
    ctx = os.open("/dev/kvblk", os.O_RDWR)
    bd = os.open(dev, os.O_RDONLY)
    a = bytearray(struct.pack(ATT, 88, flags, bd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    try:
        fcntl.ioctl(ctx, iowr(0x01, 88), a, True)
    except OSError as e:
        os.close(bd)
        os.close(ctx)
        return e.errno, None, None
    os.close(bd)
    return 0, ctx, struct.unpack(ATT, a)

err, ctx, _ = attach(F_PRP)
if err != errno.EOPNOTSUPP:
    print("FAIL: PRP attach under swiotlb=force: errno %s, want EOPNOTSUPP" % err)
    sys.exit(1)
print("ok: PRP attach refused with EOPNOTSUPP")

err, ctx, a = attach(0)
if err or a[9] != ENGINE_BIO:
    print("FAIL: default attach: errno %s engine %s, want 0 and %d (block layer)" % (err, a and a[9], ENGINE_BIO))
    sys.exit(1)
lba = a[4]
print("ok: default attach: block-layer engine, LBA %d" % lba)

SPAN = 4 << 20
want = mmap.mmap(-1, SPAN)
fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
assert os.preadv(fd, [want], 0) == SPAN
os.close(fd)
m = mmap.mmap(-1, SPAN + (1 << 20))
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
r = bytearray(struct.pack(REG, 56, 0, 0, 0, addr, len(m), 0, 0, 0, 0))
fcntl.ioctl(ctx, iowr(0x02, 56), r, True)
buf_id = struct.unpack(REG, r)[6]

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
descs = b"".join(struct.pack(DESC, o, n, b, buf_id, 0, i) for i, (o, n, b) in enumerate(objs))
dbuf = ctypes.create_string_buffer(descs, len(descs))
rbuf = ctypes.create_string_buffer(16 * len(objs))
for rnd in range(3):
    m[:] = b"\xee" * len(m)
    lm = bytearray(struct.pack(LM, 80, 0, len(objs), 40, ctypes.addressof(dbuf),
                               ctypes.addressof(rbuf), 16, 0, 0, 0, 0, 0, 0, 0))
    ret = fcntl.ioctl(ctx, iowr(0x10, 80), lm, True)
    st = [struct.unpack_from(RES, rbuf.raw, 16 * i)[0] for i in range(len(objs))]
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
os.close(ctx)
sys.exit(0)
PY
rc=$?
if ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk" >&2
	rc=1
fi
new=$(dmesg | tail -n +"$((log0 + 1))")
if ! grep -q "bounces all DMA through swiotlb" <<<"$new"; then
	echo "FAIL: no kernel log line for the refused PRP attach" >&2
	rc=1
fi
if grep -E "WARNING|BUG|Oops|Call Trace|swiotlb buffer is full" <<<"$new"; then
	echo "FAIL: the kernel log above" >&2
	rc=1
fi
grep kvblk <<<"$new" | tail -n 4
exit $rc

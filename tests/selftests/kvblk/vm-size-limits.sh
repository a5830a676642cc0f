#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): the page-size bound of include/uapi/linux/kvblk.h.
# A struct @size above the page size is -E2BIG even with an all-zero tail
# (ATTACH), and LOAD_MANY refuses @desc_bytes or @result_bytes above the page
# size with -E2BIG before reading any descriptor, writing nothing back. Sizes
# up to the page size with zero tails are still accepted.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
[ -b "$dev" ] || skip "$dev is not a block device"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"

timeout -s KILL 60 /usr/bin/python3 - "$dev" <<'PY'
import ctypes, errno, fcntl, mmap, os, struct, sys

def iowr(nr, size):
    return (3 << 30) | (size << 16) | (0xBA << 8) | nr

ATT = "=IIiIIIQQIIQ4Q"          # struct kvblk_attach, 88 bytes
REG = "=IIIiQQII2Q"             # struct kvblk_buf_reg, 56 bytes
LM = "=IIIIQQIiIIQQ2Q"          # struct kvblk_load_many, 80 bytes
DESC = "=QQQIIQ"                # struct kvblk_io_desc, 40 bytes
PG = mmap.PAGESIZE
fails = 0

def check(what, fn, want):
    global fails
    try:
        got = fn()
    except OSError as e:
        got = -e.errno
    if got != want:
        print("FAIL: %s: got %s, want %s" % (what, got, want))
        fails += 1
    else:
        print("ok: %s: %s" % (what, got))

def att_buf(total, bd):
    b = ctypes.create_string_buffer(total)
    struct.pack_into(ATT, b, 0, total, 0, bd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    return b

ctx = os.open("/dev/kvblk", os.O_RDWR)
bd = os.open(sys.argv[1], os.O_RDONLY)
# ioctl() with an address: the kernel reads @size bytes from it.
libc = ctypes.CDLL(None, use_errno=True)
def raw_ioctl(fd, req, buf):
    r = libc.ioctl(fd, ctypes.c_ulong(req), buf)
    if r < 0:
        raise OSError(ctypes.get_errno(), "ioctl")
    return r

check("attach size PAGE_SIZE+1, zero tail", lambda: raw_ioctl(ctx, iowr(0x01, 88), att_buf(PG + 1, bd)), -errno.E2BIG)
check("attach size PAGE_SIZE, zero tail", lambda: raw_ioctl(ctx, iowr(0x01, 88), att_buf(PG, bd)), 0)

m = mmap.mmap(-1, 1 << 20)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
r = bytearray(struct.pack(REG, 56, 0, 0, 0, addr, 1 << 20, 0, 0, 0, 0))
fcntl.ioctl(ctx, iowr(0x02, 56), r, True)
buf_id = struct.unpack(REG, r)[6]

def load(desc_bytes, result_bytes):
    d = ctypes.create_string_buffer(desc_bytes)
    struct.pack_into(DESC, d, 0, 0, 4096, 0, buf_id, 0, 7)
    res = ctypes.create_string_buffer(b"\xee" * result_bytes, result_bytes)
    lm = ctypes.create_string_buffer(80)
    struct.pack_into(LM, lm, 0, 80, 0, 1, desc_bytes, ctypes.addressof(d),
                     ctypes.addressof(res), result_bytes, 0, 0, 0, 0, 0, 0, 0)
    try:
        return raw_ioctl(ctx, iowr(0x10, 80), lm)
    finally:
        load.res = res.raw[:16]

check("load_many desc_bytes PAGE_SIZE+1", lambda: load(PG + 1, 16), -errno.E2BIG)
if load.res != b"\xee" * 16:
    print("FAIL: a result was written for the -E2BIG call"); fails += 1
check("load_many result_bytes PAGE_SIZE+1", lambda: load(40, PG + 1), -errno.E2BIG)
check("load_many desc_bytes PAGE_SIZE, zero tail", lambda: load(PG, 16), 1)
check("load_many result_bytes PAGE_SIZE", lambda: load(40, PG), 1)
os.close(bd)
os.close(ctx)
sys.exit(1 if fails else 0)
PY
rc=$?
if ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk (a context leaked?)" >&2
	rc=1
fi
exit $rc

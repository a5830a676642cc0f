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

PYTHONPATH=$KVBLK_SRC/tests/vm timeout -s KILL 60 /usr/bin/python3 - "$dev" <<'PY'
import ctypes, errno, mmap, os, sys
import kvblk_uapi as u

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

# ioctl() with an address: the kernel reads @size bytes from it, however large.
libc = ctypes.CDLL(None, use_errno=True)
def raw_ioctl(fd, req, buf):
    r = libc.ioctl(fd, ctypes.c_ulong(req), buf)
    if r < 0:
        raise OSError(ctypes.get_errno(), "ioctl")
    return r

def sized(st, total, **fields):
    """@st packed at the start of a zeroed @total-byte buffer whose @size says @total."""
    b = ctypes.create_string_buffer(total)
    packed = st.pack(size=total, **fields)
    ctypes.memmove(b, packed, min(len(packed), total))
    return b

ctx = os.open(u.NODE, os.O_RDWR)
bd = os.open(sys.argv[1], os.O_RDONLY)
check("attach size PAGE_SIZE+1, zero tail",
      lambda: raw_ioctl(ctx, u.IOC_ATTACH, sized(u.ATTACH, PG + 1, bdev_fd=bd)), -errno.E2BIG)
check("attach size PAGE_SIZE, zero tail",
      lambda: raw_ioctl(ctx, u.IOC_ATTACH, sized(u.ATTACH, PG, bdev_fd=bd)), 0)

m = mmap.mmap(-1, 1 << 20)
reg = sized(u.BUF_REG, u.BUF_REG.size, addr=u.buffer_address(m), len=1 << 20)
raw_ioctl(ctx, u.IOC_REGISTER_BUFFER, reg)
buf_id = u.BUF_REG.unpack(reg.raw)["buf_id"]

def load(desc_bytes, result_bytes):
    d = ctypes.create_string_buffer(desc_bytes)
    one = u.IO_DESC.pack(offset=0, length=4096, buf_offset=0, buf_id=buf_id, tag=7)
    ctypes.memmove(d, one, min(len(one), desc_bytes))
    res = ctypes.create_string_buffer(b"\xee" * result_bytes, result_bytes)
    lm = sized(u.LOAD_MANY, u.LOAD_MANY.size, nr_descs=1, desc_bytes=desc_bytes,
               descs=ctypes.addressof(d), results=ctypes.addressof(res),
               result_bytes=result_bytes)
    try:
        return raw_ioctl(ctx, u.IOC_LOAD_MANY, lm)
    finally:
        load.res = res.raw[:u.DESC_RESULT.size]

check("load_many desc_bytes PAGE_SIZE+1", lambda: load(PG + 1, u.DESC_RESULT.size), -errno.E2BIG)
if load.res != b"\xee" * u.DESC_RESULT.size:
    print("FAIL: a result was written for the -E2BIG call"); fails += 1
check("load_many result_bytes PAGE_SIZE+1", lambda: load(u.IO_DESC.size, PG + 1), -errno.E2BIG)
check("load_many desc_bytes PAGE_SIZE, zero tail", lambda: load(PG, u.DESC_RESULT.size), 1)
check("load_many result_bytes PAGE_SIZE", lambda: load(u.IO_DESC.size, PG), 1)
os.close(bd)
os.close(ctx)
sys.exit(1 if fails else 0)
PY
exit $?

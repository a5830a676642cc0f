#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# VM case (tests/vm/cases.list): KVBLK_IOC_LOAD_MANY on a context whose
# namespace was removed returns at once with -ENOLINK for every object
# instead of retrying the dying queue forever. Attaches $KVBLK_TEST_DEVICE,
# reads one LBA (sanity), removes the NVMe PCI function (sysfs remove: the
# nvme driver deletes the disk while the context still holds it), reads
# again, closes, and rescans the PCI bus to bring the controller back.
# Run it last in its VM: the namespace may come back under another name.
. "$(dirname "$0")/../../vm/cases/lib.sh"
set +e

dev=${KVBLK_TEST_DEVICE:-/dev/nvme0n1}
[ -b "$dev" ] || skip "$dev is not a block device"
[ -f "${KVBLK_KO:-}" ] || skip "kvblk.ko not built (make -C kmod)"
pci=$(readlink -f "/sys/class/block/${dev##*/}/device/device")
[ -e "$pci/remove" ] || skip "no PCI function found for $dev ($pci)"
insmod "$KVBLK_KO" || fail "insmod $KVBLK_KO"

timeout -s KILL 60 /usr/bin/python3 - "$dev" "$pci" <<'PY'
import ctypes, errno, fcntl, mmap, os, struct, sys

def iowr(nr, size):
    return (3 << 30) | (size << 16) | (0xBA << 8) | nr

ATT = "=IIiIIIQQIIQ4Q"          # struct kvblk_attach, 88 bytes
REG = "=IIIiQQII2Q"             # struct kvblk_buf_reg, 56 bytes
LM = "=IIIIQQIiIIQQ2Q"          # struct kvblk_load_many, 80 bytes
DESC = "=QQQIIQ"                # struct kvblk_desc, 40 bytes
RES = "=iIQ"                    # struct kvblk_desc_result, 16 bytes
for f, n in ((ATT, 88), (REG, 56), (LM, 80), (DESC, 40), (RES, 16)):
    assert struct.calcsize(f) == n

dev, pci = sys.argv[1], sys.argv[2]
ctx = os.open("/dev/kvblk", os.O_RDWR)
bd = os.open(dev, os.O_RDONLY)
a = bytearray(struct.pack(ATT, 88, 0, bd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
fcntl.ioctl(ctx, iowr(0x01, 88), a, True)
lba = struct.unpack(ATT, a)[4]

NR = 4
m = mmap.mmap(-1, 1 << 20)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
r = bytearray(struct.pack(REG, 56, 0, 0, 0, addr, 1 << 20, 0, 0, 0, 0))
fcntl.ioctl(ctx, iowr(0x02, 56), r, True)
buf_id = struct.unpack(REG, r)[6]

descs = b"".join(struct.pack(DESC, i * lba, lba, i * lba, buf_id, 0, i) for i in range(NR))
dbuf = ctypes.create_string_buffer(descs, len(descs))
rbuf = ctypes.create_string_buffer(16 * NR)

def load_many():
    lm = bytearray(struct.pack(LM, 80, 0, NR, 40, ctypes.addressof(dbuf),
                               ctypes.addressof(rbuf), 16, 0, 0, 0, 0, 0, 0, 0))
    ret = fcntl.ioctl(ctx, iowr(0x10, 80), lm, True)
    st = [struct.unpack_from(RES, rbuf.raw, 16 * i)[0] for i in range(NR)]
    return ret, st

ret, st = load_many()
if ret != NR or st != [0] * NR:
    print("FAIL: before removal: ret %d statuses %s" % (ret, st))
    sys.exit(1)
print("ok: before removal: %d objects read" % ret)

with open(os.path.join(pci, "remove"), "w") as f:
    f.write("1")
print("ok: removed %s" % pci)

ret, st = load_many()
want = [-errno.ENOLINK] * NR
if ret != 0 or st != want:
    print("FAIL: after removal: ret %d statuses %s, want 0 and %s" % (ret, st, want))
    sys.exit(1)
print("ok: after removal: ret 0, every object -ENOLINK")

fcntl.ioctl(ctx, iowr(0x03, 16) & ~(3 << 30) | (1 << 30),
            struct.pack("=IIII", 16, 0, buf_id, 0))
os.close(bd)
os.close(ctx)
sys.exit(0)
PY
rc=$?
[ $rc = 137 ] && echo "FAIL: LOAD_MANY after removal did not return within 60 s" >&2

echo 1 >/sys/bus/pci/rescan
if ! rmmod kvblk; then
	echo "FAIL: rmmod kvblk (a context leaked?)" >&2
	rc=1
fi
exit $rc

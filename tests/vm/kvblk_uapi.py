# SPDX-License-Identifier: MIT
"""kvblk.ko's ioctl interface (include/uapi/linux/kvblk.h) for the VM cases written in Python.

The cases that drive /dev/kvblk with raw ioctls (swiotlb.sh, vm-ns-removal.sh,
vm-size-limits.sh) import this module instead of spelling struct layouts and ioctl numbers
themselves. It holds no fact of its own: the host test abi_uapi_python (tests/abi/) compiles
a program against the C header and checks every layout, size, offset and number here.

Structs are described field by field; pack() fills the fields it is given and zeroes the
rest, with @size (when the struct has one) defaulting to the struct's full size.
"""
import ctypes
import fcntl
import os
import struct

IOC_MAGIC = 0xBA


def _ioc(direction, nr, size):
    """_IOC() of <asm-generic/ioctl.h> on x86 and arm64: dir 2 bits, size 14, type 8, nr 8."""
    return (direction << 30) | (size << 16) | (IOC_MAGIC << 8) | nr


def _iow(nr, size):
    return _ioc(1, nr, size)


def _ior(nr, size):
    return _ioc(2, nr, size)


def _iowr(nr, size):
    return _ioc(3, nr, size)


class Struct:
    """One uapi struct: @name, fields as (name, struct format char or "Nx" array) in order."""

    def __init__(self, name, fields):
        self.name = name
        self.fields = fields
        self.format = "=" + "".join(f for _, f in fields)
        self.size = struct.calcsize(self.format)
        self.names = []
        self.offsets = {}
        off = 0
        for fname, f in fields:
            self.offsets[fname] = off
            n = struct.calcsize("=" + f)
            count = int(f[:-1]) if f[:-1] else 1
            self.names += [fname] if count == 1 else ["%s[%d]" % (fname, i) for i in range(count)]
            off += n

    def pack(self, **values):
        """The struct as bytes: given fields set, the rest 0, @size the full size unless given."""
        if "size" in self.offsets and "size" not in values:
            values["size"] = self.size
        unknown = set(values) - set(self.names)
        if unknown:
            raise KeyError("%s has no field %s" % (self.name, ", ".join(sorted(unknown))))
        return struct.pack(self.format, *(values.get(n, 0) for n in self.names))

    def unpack(self, buf, offset=0):
        """A dict of every field of the struct at @offset of @buf."""
        return dict(zip(self.names, struct.unpack_from(self.format, buf, offset)))


ATTACH = Struct("kvblk_attach", [
    ("size", "I"), ("flags", "I"), ("bdev_fd", "i"), ("nsid", "I"), ("lba_size", "I"),
    ("max_cmd_bytes", "I"), ("capacity", "Q"), ("start_lba", "Q"), ("nr_hw_queues", "I"),
    ("engine", "I"), ("reserved", "Q"), ("reserved2", "4Q"), ("buf_align", "I"),
    ("reserved3", "I"), ("target", "I"), ("reserved4", "I"), ("engines", "I"),
    ("reserved5", "I")])
BUF_REG = Struct("kvblk_buf_reg", [
    ("size", "I"), ("flags", "I"), ("kind", "I"), ("dmabuf_fd", "i"), ("addr", "Q"),
    ("len", "Q"), ("buf_id", "I"), ("reserved", "I"), ("reserved2", "2Q")])
BUF_UNREG = Struct("kvblk_buf_unreg", [
    ("size", "I"), ("flags", "I"), ("buf_id", "I"), ("reserved", "I")])
IO_DESC = Struct("kvblk_io_desc", [
    ("offset", "Q"), ("length", "Q"), ("buf_offset", "Q"), ("buf_id", "I"), ("flags", "I"),
    ("tag", "Q"), ("target", "I"), ("reserved", "I")])
DESC_RESULT = Struct("kvblk_desc_result", [
    ("status", "i"), ("reserved", "I"), ("bytes", "Q")])
LOAD_MANY = Struct("kvblk_load_many", [
    ("size", "I"), ("flags", "I"), ("nr_descs", "I"), ("desc_bytes", "I"), ("descs", "Q"),
    ("results", "Q"), ("result_bytes", "I"), ("bad_index", "i"), ("nr_ok", "I"),
    ("engine", "I"), ("nr_cmds", "Q"), ("elapsed_ns", "Q"), ("reserved", "2Q"),
    ("engines", "I"), ("nr_targets", "I")])
STRUCTS = (ATTACH, BUF_REG, BUF_UNREG, IO_DESC, DESC_RESULT, LOAD_MANY)

IOC_GET_FEATURES = _ior(0x00, 8)
IOC_ATTACH = _iowr(0x01, ATTACH.size)
IOC_REGISTER_BUFFER = _iowr(0x02, BUF_REG.size)
IOC_UNREGISTER_BUFFER = _iow(0x03, BUF_UNREG.size)
IOC_LOAD_MANY = _iowr(0x10, LOAD_MANY.size)

ATTACH_F_ENGINE_BIO = 1 << 0
ATTACH_F_ENGINE_PRP = 1 << 1
ENGINE_PRP = 1
ENGINE_BIO = 2
ENGINE_FILE = 3
ATTACH_SIZE_VER2 = 104
ATTACH_SIZE_VER3 = 112  # + engines: every engine that may serve the target
LOAD_F_STORE = 1 << 0
LOAD_F_DURABLE = 1 << 1
FEAT_STORE = 1 << 9
MEM_HOST = 0
MEM_DMABUF = 2

# Every constant above, by its C name (the host test compares each with the header).
CONSTANTS = {
    "KVBLK_IOC_MAGIC": IOC_MAGIC,
    "KVBLK_IOC_GET_FEATURES": IOC_GET_FEATURES,
    "KVBLK_IOC_ATTACH": IOC_ATTACH,
    "KVBLK_IOC_REGISTER_BUFFER": IOC_REGISTER_BUFFER,
    "KVBLK_IOC_UNREGISTER_BUFFER": IOC_UNREGISTER_BUFFER,
    "KVBLK_IOC_LOAD_MANY": IOC_LOAD_MANY,
    "KVBLK_ATTACH_F_ENGINE_BIO": ATTACH_F_ENGINE_BIO,
    "KVBLK_ATTACH_F_ENGINE_PRP": ATTACH_F_ENGINE_PRP,
    "KVBLK_ENGINE_PRP": ENGINE_PRP,
    "KVBLK_ENGINE_BIO": ENGINE_BIO,
    "KVBLK_ENGINE_FILE": ENGINE_FILE,
    "KVBLK_ATTACH_SIZE_VER2": ATTACH_SIZE_VER2,
    "KVBLK_ATTACH_SIZE_VER3": ATTACH_SIZE_VER3,
    "KVBLK_LOAD_F_STORE": LOAD_F_STORE,
    "KVBLK_LOAD_F_DURABLE": LOAD_F_DURABLE,
    "KVBLK_FEAT_STORE": FEAT_STORE,
    "KVBLK_MEM_HOST": MEM_HOST,
    "KVBLK_MEM_DMABUF": MEM_DMABUF,
}

NODE = "/dev/kvblk"


def buffer_address(buf):
    """The address of a writable buffer (mmap, bytearray, ctypes buffer)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))


class Context:
    """A /dev/kvblk context attached to the block device @dev (opened read-only and closed
    again once attached) with KVBLK_ATTACH_F_* @flags. OSError as the ioctl raised it."""

    def __init__(self, dev, flags=0):
        self.fd = os.open(NODE, os.O_RDWR)
        bd = os.open(dev, os.O_RDONLY)
        try:
            a = bytearray(ATTACH.pack(flags=flags, bdev_fd=bd))
            fcntl.ioctl(self.fd, IOC_ATTACH, a, True)
        except OSError:
            os.close(self.fd)
            raise
        finally:
            os.close(bd)
        self.attach = ATTACH.unpack(a)

    def register(self, addr, length, kind=MEM_HOST, dmabuf_fd=0):
        """KVBLK_IOC_REGISTER_BUFFER: the buffer id. Host memory at @addr, or with
        kind=MEM_DMABUF @length bytes at offset @addr of the dma-buf @dmabuf_fd."""
        r = bytearray(BUF_REG.pack(kind=kind, dmabuf_fd=dmabuf_fd, addr=addr, len=length))
        fcntl.ioctl(self.fd, IOC_REGISTER_BUFFER, r, True)
        return BUF_REG.unpack(r)["buf_id"]

    def unregister(self, buf_id):
        fcntl.ioctl(self.fd, IOC_UNREGISTER_BUFFER, BUF_UNREG.pack(buf_id=buf_id))

    def close(self):
        os.close(self.fd)


class Batch:
    """Descriptors and a results array for LOAD_MANY, kept alive for as long as the batch.
    @objects: (device offset, length, buffer offset, buffer id) per object; tag = index."""

    def __init__(self, objects):
        descs = b"".join(IO_DESC.pack(offset=o, length=n, buf_offset=b, buf_id=i, tag=t)
                         for t, (o, n, b, i) in enumerate(objects))
        self.nr = len(objects)
        self.descs = ctypes.create_string_buffer(descs, len(descs))
        self.results = ctypes.create_string_buffer(DESC_RESULT.size * self.nr)

    def load(self, ctx, flags=0):
        """KVBLK_IOC_LOAD_MANY on @ctx with KVBLK_LOAD_F_* @flags (0: a load): (the ioctl's
        return, statuses, struct kvblk_load_many as written back). OSError when the call
        fails as a whole."""
        lm = bytearray(LOAD_MANY.pack(
            flags=flags, nr_descs=self.nr, desc_bytes=IO_DESC.size, descs=ctypes.addressof(self.descs),
            results=ctypes.addressof(self.results), result_bytes=DESC_RESULT.size))
        ret = fcntl.ioctl(ctx.fd, IOC_LOAD_MANY, lm, True)
        st = [DESC_RESULT.unpack(self.results.raw, DESC_RESULT.size * i)["status"]
              for i in range(self.nr)]
        return ret, st, LOAD_MANY.unpack(lm)

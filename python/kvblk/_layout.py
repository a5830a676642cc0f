# SPDX-License-Identifier: MIT
"""numpy dtypes with the exact layout of the C structs (kvblk.h), checked against the
extension's sizeof/offsetof at import, and helpers to build descriptor arrays."""

import numpy as np

from . import _kvblk

BUF_NONE = _kvblk.BUF_NONE


def _struct(fields, c_offsets, c_size, c_name):
    dt = np.dtype({
        "names": [f for f, _ in fields],
        "formats": [t for _, t in fields],
        "offsets": [c_offsets[f] for f, _ in fields],
        "itemsize": c_size,
    })
    # Every byte of the C struct must be a named field: no padding numpy would not write.
    assert dt.itemsize == c_size, (c_name, dt.itemsize, c_size)
    assert set(c_offsets) == {f for f, _ in fields}, (c_name, sorted(c_offsets))
    assert sum(dt.fields[f][0].itemsize for f, _ in fields) == c_size, c_name
    for f, _ in fields:
        assert dt.fields[f][1] == c_offsets[f], (c_name, f, dt.fields[f][1], c_offsets[f])
    return dt


#: struct kvblk_desc (48 bytes): one object of a batch. ``offset`` and ``length`` in bytes on
#: the target (multiples of its logical block size unless flags has DESC_UNALIGNED; with
#: DESC_SHORT_EOF a load may reach past the end of a file and comes back short); ``addr``
#: a host address (buf_id == BUF_NONE) or a byte offset into registered buffer ``buf_id``;
#: ``tag`` comes back in the result; ``target`` 0 is the opened path; ``reserved`` must be 0.
DESC_DTYPE = _struct([
    ("offset", "=u8"), ("length", "=u8"), ("addr", "=u8"), ("buf_id", "=u4"), ("flags", "=u4"),
    ("tag", "=u8"), ("target", "=u4"), ("reserved", "=u4"),
], _kvblk.DESC_OFFSETS, _kvblk.DESC_SIZE, "struct kvblk_desc")

#: struct kvblk_result (24 bytes): ``status`` 0 or -errno, ``bytes`` transferred, ``tag``.
RESULT_DTYPE = _struct([
    ("status", "=i4"), ("reserved", "=u4"), ("bytes", "=u8"), ("tag", "=u8"),
], _kvblk.RESULT_OFFSETS, _kvblk.RESULT_SIZE, "struct kvblk_result")

#: struct kvblk_cqe (64 bytes): one completion taken by Device.reap().
CQE_DTYPE = _struct([
    ("ticket", "=u8"), ("user_data", "=u8"), ("status", "=i4"), ("flags", "=u4"), ("failed", "=u4"),
    ("index", "=u4"), ("bytes", "=u8"), ("tag", "=u8"), ("path", "=u4"), ("backend", "=u4"),
    ("elapsed_ns", "=u8"),
], _kvblk.CQE_OFFSETS, _kvblk.CQE_SIZE, "struct kvblk_cqe")


def empty_descs(n):
    """A zeroed DESC_DTYPE array of ``n`` descriptors with buf_id = BUF_NONE (plain addresses)."""
    d = np.zeros(n, DESC_DTYPE)
    d["buf_id"] = BUF_NONE
    return d


def make_descs(offsets, lengths, addrs=0, *, buf_id=BUF_NONE, tags=None, target=0, flags=0):
    """Build a DESC_DTYPE array from columns (arrays, sequences or scalars broadcast to n).

    offsets, lengths -- bytes on the target (block multiples unless flags has DESC_UNALIGNED).
    addrs            -- host addresses (buf_id BUF_NONE), or byte offsets into a registered
                        buffer: pass ``buf_id=buffer.id`` (a Buffer is accepted too).
    tags             -- default: the index 0..n-1.
    target           -- target id (Device.add_target()); 0 is the opened path.
    flags            -- kvblk.DESC_UNALIGNED, kvblk.DESC_SHORT_EOF (loads), both, or 0.
    No Python object per descriptor is made: the columns are copied by numpy.
    """
    offsets = np.asarray(offsets, dtype=np.uint64)
    n = offsets.shape[0] if offsets.ndim else 1
    d = np.empty(n, DESC_DTYPE)
    d["offset"] = offsets
    d["length"] = lengths
    d["addr"] = addrs
    d["buf_id"] = getattr(buf_id, "id", buf_id)
    d["flags"] = flags
    d["tag"] = np.arange(n, dtype=np.uint64) if tags is None else tags
    d["target"] = target
    d["reserved"] = 0
    return d


def aligned_empty(nbytes, align=4096, dtype=np.uint8):
    """An uninitialised numpy array of ``nbytes`` bytes (viewed as ``dtype``) whose first byte
    is aligned to ``align`` bytes (a power of two; O_DIRECT needs Device.info()['mem_align'],
    4096 is always enough). The array's base keeps the allocation alive."""
    if align <= 0 or align & (align - 1):
        raise ValueError(f"align {align} is not a power of two")
    raw = np.empty(nbytes + align, np.uint8)
    skip = (-raw.ctypes.data) % align
    return raw[skip:skip + nbytes].view(dtype)

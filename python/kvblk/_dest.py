# SPDX-License-Identifier: MIT
"""Destinations given as Python objects, and batches given as lists of tuples."""

import numpy as np

from . import _kvblk
from ._errors import Error
from ._layout import BUF_NONE, DESC_DTYPE

_EINVAL = 22


def resolve(obj, writable=True):
    """What memory ``obj`` names, as a held ``Dest`` (attributes addr, nbytes, kind,
    readonly, source; ``release()`` gives the view back; it is also released when the Dest
    is garbage collected).

    Accepted, in this order:
      (address, nbytes)           -- host memory the caller keeps valid;
      __cuda_array_interface__    -- CUDA device memory (kind MEM_CUDA), C-contiguous;
      the buffer protocol         -- host memory: numpy arrays, bytearray, memoryview, mmap
                                     (C- or Fortran-contiguous);
      __dlpack__                  -- torch tensors and others: CPU/CUDA-host memory as host,
                                     CUDA memory as MEM_CUDA; compact strides only.
    ``writable=True`` (loads) refuses read-only memory with kvblk.Error(EINVAL).
    TypeError for anything else.
    """
    return _kvblk.resolve_dest(obj, writable, -1)


class BufferSlice:
    """``nbytes`` bytes at byte ``offset`` of a registered Buffer, as a batch destination
    (Buffer.slice() makes one)."""

    __slots__ = ("buffer", "offset", "nbytes")

    def __init__(self, buffer, offset, nbytes):
        self.buffer, self.offset, self.nbytes = buffer, offset, nbytes


class Prepared:
    """A batch ready for the C API: the descriptor array plus what must stay alive (and be
    undone) until the batch has completed."""

    __slots__ = ("descs", "keep", "temp_buffers")

    def __init__(self, descs, keep=(), temp_buffers=()):
        self.descs = descs
        self.keep = keep                  # Dest holders (views, capsules) and caller objects
        self.temp_buffers = temp_buffers  # buffer ids registered for this batch (CUDA dests)

    def release(self, cdev):
        """Give back views and unregister the per-batch buffers (the batch is over)."""
        for d in self.keep:
            rel = getattr(d, "release", None)
            if rel is not None:
                rel()
        self.keep = ()
        ids, self.temp_buffers = self.temp_buffers, ()
        for i in ids:
            try:
                cdev.unregister_buffer(i)
            except (Error, ValueError):
                pass  # the device was closed: its buffers went with it


def prepare(cdev, batch, writable, keep=None, flags=0):
    """Turn ``batch`` into a Prepared.

    batch is either a DESC_DTYPE numpy array (used in place: its addresses are the caller's
    to keep valid; pass ``keep`` objects to hold them) or a sequence of tuples
    ``(offset, length, dest[, tag[, target]])`` where dest is anything resolve() accepts, a
    registered Buffer or a BufferSlice. Plain host destinations go in as addresses; CUDA
    destinations are registered for the batch (MEM_CUDA) and unregistered when it is over.
    ``flags`` (e.g. DESC_UNALIGNED) applies to every tuple entry.
    Errors: kvblk.Error with bad_index = the entry (EINVAL destination too small or
    read-only for a load; a CUDA registration's errno); TypeError, ValueError bad shapes.
    """
    if isinstance(batch, np.ndarray):
        if batch.dtype != DESC_DTYPE:
            raise TypeError(f"descriptor array has dtype {batch.dtype}; expected kvblk.DESC_DTYPE")
        if batch.ndim != 1 or not batch.flags.c_contiguous:
            raise TypeError("descriptor array must be 1-D and C-contiguous")
        return Prepared(batch, tuple(keep) if keep else ())

    n = len(batch)
    descs = np.zeros(n, DESC_DTYPE)
    holders = list(keep) if keep else []
    temps = []
    cols = ([0] * n, [0] * n, [0] * n, [BUF_NONE] * n, list(range(n)), [0] * n)
    offs, lens, addrs, bufs, tags, targets = cols
    try:
        for i, item in enumerate(batch):
            if not 3 <= len(item) <= 5:
                raise TypeError(f"batch entry {i}: expected (offset, length, dest[, tag[, target]]), "
                                f"got {len(item)} items")
            off, length, dest = item[0], item[1], item[2]
            if len(item) > 3:
                tags[i] = item[3]
            if len(item) > 4:
                targets[i] = item[4]
            offs[i], lens[i] = off, length
            if isinstance(dest, BufferSlice):
                _check_room(i, dest.nbytes, length)
                bufs[i], addrs[i] = dest.buffer.id, dest.offset
                holders.append(dest.buffer)
                continue
            if hasattr(dest, "_is_kvblk_buffer"):
                _check_room(i, dest.nbytes, length)
                bufs[i] = dest.id
                holders.append(dest)
                continue
            d = _kvblk.resolve_dest(dest, writable, i)
            holders.append(d)
            _check_room(i, d.nbytes, length)
            if d.kind == _kvblk.MEM_HOST:
                addrs[i] = d.addr
            else:
                try:
                    bid, _ = cdev.register_buffer(d.kind, d.addr, d.nbytes)
                except Error as e:
                    e.bad_index = i
                    e.strerror = f"descriptor {i}: {e.strerror}"
                    raise
                temps.append(bid)
                bufs[i] = bid
        descs["offset"], descs["length"], descs["addr"] = offs, lens, addrs
        descs["buf_id"], descs["tag"], descs["target"] = bufs, tags, targets
        descs["flags"] = flags
    except BaseException:
        Prepared(None, holders, temps).release(cdev)
        raise
    return Prepared(descs, holders, temps)


def _check_room(i, have, length):
    if length > have:
        raise Error(_EINVAL, f"descriptor {i}: length {length} is larger than its destination "
                    f"({have} bytes)", i)

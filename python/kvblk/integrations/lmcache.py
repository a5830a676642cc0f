"""LMCache native connector over kvblk: KV chunks in slots of one store.

``KvblkConnector`` implements the contract LMCache's ``native_plugin`` L2
adapter type expects (``NativeConnectorL2Adapter`` wraps it), by duck typing;
LMCache is never imported. Configure it in LMCache as::

    {"type": "native_plugin",
     "module_path": "kvblk.integrations.lmcache",
     "class_name": "KvblkConnector",
     "adapter_params": {"path": "/dev/nvme1n1", "slot_bytes": 2097152}}

The contract
------------
``event_fd()``
    An eventfd that is readable while completions wait.
``submit_batch_get(keys, buffers)``, ``submit_batch_set(keys, buffers)``,
``submit_batch_exists(keys)``, ``submit_batch_delete(keys)``
    Check the input, queue the batch and return its future id (an int, 1, 2,
    3, ... never reused). Bad input raises before anything is queued (below).
``drain_completions()``
    Clears the eventfd and returns every finished batch as a tuple
    ``(future_id, ok, error, result_bools)``:

    * get: ``result_bools[i]`` is True when chunk i was copied into buffer i
      and its checksum matched; False for a missing key, a stored chunk of
      another size than the buffer, an I/O error or a checksum mismatch.
      ``ok`` is False only when an I/O error hit (``error`` says which key);
      misses alone keep ``ok`` True, as LMCache's own connectors report them.
      A buffer whose flag is False holds unspecified bytes.
    * set: ``result_bools[i]`` is True when chunk i is durable and indexed;
      ``ok`` is True when every chunk was stored, else ``error`` says why
      (store full in refuse mode, I/O error).
    * exists: ``result_bools[i]`` True when key i is present (durable).
    * delete: ``result_bools[i]`` True when key i was present and is now gone.
``close()``
    Finishes the batches already queued (their completions are then dropped,
    as LMCache's connectors do), closes the store and the eventfd. Idempotent.

Keys are ``str`` (LMCache's ``model@rank@group@hash[@salt]`` strings; stored
as UTF-8) or ``bytes``. Buffers are anything exposing the buffer protocol
(memoryview, bytearray, numpy arrays, ctypes arrays), C-contiguous; every
buffer of a batch has the size of the first one (LMCache's
``batch_chunk_num_bytes``).

Bad input raises at submit, nothing queued, no future id used:
``ValueError`` for an empty batch, as many keys as buffers not given, buffers
of different sizes, an empty buffer, a chunk larger than ``slot_bytes`` (set),
a read-only buffer (get), a non-contiguous buffer or a key longer than the
store's records hold; ``TypeError`` for a key that is neither str nor bytes
or a buffer without the buffer protocol; ``RuntimeError`` after ``close()``.

Store layout (version 1; little-endian)
---------------------------------------
One regular file or block device::

    [0, 4096)                  superblock: magic "KVBLKLMC", version,
                               block_size, record_bytes, slot_bytes,
                               slot_count, index_offset, data_offset, store
                               uuid, creation time, CRC-32 of all of it
    [index_offset, +N*R)       index region: one record of R = record_bytes
                               (512 by default) per slot
    [data_offset, +N*S)        data region: slot i holds one chunk at
                               data_offset + i * S (S = slot_bytes, a multiple
                               of the block size; data_offset 1 MiB aligned)

A record (all zero = free slot) holds: magic, CRC-32 of the record, the
generation (a counter that grows with every set of the store's life), the
payload length, the CRC-32 of the payload, the key length, the slot number
and the store uuid (a record moved or left over from an earlier format never
matches), then the key (up to R - 56 bytes).

Slots are allocated from a free list, as LMCache's raw_block backend does; the
key -> slot index lives in memory (an LRU-ordered dict) and is persisted by
the records: a restarted process reads the index region (N * R bytes, one
sequential read: 51 MB for 100 000 slots) and finds every chunk whose record
is valid; two records with one key (a crash in the middle of an overwrite)
resolve to the higher generation. LRU order after a restart is generation
order (last stored = most recently used): access times are not persisted.

Guarantees
----------
Durable before present. A set writes, per batch: a zeroed record for each slot
it takes and the payloads (O_DIRECT through kvblk), then ``fdatasync`` of the
store (a file system or block device cache flush: the O_DIRECT data and the
zeroed records are on stable media), then the records, then ``fdatasync``
again, and only then publishes the keys in memory and reports the set done.
``exists`` and ``get`` see only published keys. Power loss:

* before the first flush: the slots' records are zero or their old content,
  whose payload CRC no longer matches: the new chunks are absent;
* between the two flushes (payload durable, record not): the chunks are
  absent, never torn data: the record is what makes a chunk present;
* after the second flush: the chunks are present and intact.

Never torn data. Every get checks the payload's CRC-32 (zlib; about 3 GB/s
per core) against the record after loading it; a mismatch (a torn write, the
media, anyone writing into the store) reports that key as not loaded, removes
it from the index and frees its slot. With ``verify_on_open=True`` the CRC of
every chunk is checked when the store is opened, so ``exists`` never reports
a damaged chunk; without it (the default, for a fast restart) a damaged chunk
can answer ``exists`` True once and then fail its get.

A full store. ``when_full="evict"`` (the default) evicts least-recently-used
chunks (get and set are uses; exists is not) to make room; chunks being read
by a get in flight are never evicted: when every slot is pinned that way the
set of that chunk fails. ``when_full="refuse"`` never evicts: a set that
finds no free slot fails for that chunk (``ok`` False, ``error`` "store full",
``result_bools`` False for it) and the other chunks of the batch are stored.
Deleting keys frees their slots in both modes.

Threads. Submissions come from any thread and never block on I/O (LMCache
submits while holding its adapter lock). Exists is answered at submit from
memory. Gets run on ``read_workers`` threads, sets and deletes on one writer
thread (the writer owns the flush ordering above; gets never wait behind a
flush). A batch's chunks go to kvblk together, all in flight at once: one
call when the buffers are aligned for O_DIRECT (only partial last blocks go
through the worker's staging memory), else one call per staging_bytes of
bounced data. The GIL is released during I/O and CRC computation. The connector makes its
own eventfd rather than handing out kvblk's: a connector completion is more
than kvblk's (CRC checks, two flushes and the index publish follow the I/O),
and the worker that ran the batch posts it when all of that is done.
"""

from __future__ import annotations

import collections
import ctypes
import errno as _errno
import fcntl
import logging
import mmap
import os
import queue
import stat
import struct
import threading
import time
import uuid as _uuid
import zlib
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

__all__ = ["KvblkConnector", "StoreFormatError"]

_log = logging.getLogger(__name__)

# Superblock: magic, version, flags, block_size, record_bytes, slot_bytes,
# slot_count, index_offset, data_offset, uuid, created_ns; then its CRC-32.
_SB_MAGIC = b"KVBLKLMC"
_SB_VERSION = 1
_SB_FMT = struct.Struct("<8sIIIIQQQQ16sQ")
_SB_BYTES = 4096
# Record header: magic, crc, generation, payload_len, payload_crc, key_len,
# flags, slot, uuid; the key follows.
_REC_MAGIC = 0x4352564B  # "KVRC"
_REC_FMT = struct.Struct("<IIQQIHHQ16s")
_REC_CRC_OFF = 4
_DATA_ALIGN = 1 << 20
_READ_CHUNK = 8 << 20

Completion = Tuple[int, bool, str, Optional[List[bool]]]


class StoreFormatError(ValueError):
    """The path holds something that is not a usable kvblk LMCache store."""


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _crc(data) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def _buffer_address(mv: memoryview) -> int:
    """Address of the first byte of a C-contiguous byte memoryview."""
    if not mv.readonly:
        c = ctypes.c_char.from_buffer(mv)
        try:
            return ctypes.addressof(c)
        finally:
            del c
    # ctypes refuses read-only exports; numpy takes them without copying.
    import numpy as np

    return int(np.frombuffer(mv, dtype=np.uint8).__array_interface__["data"][0])


def _as_bytes(mv: memoryview) -> memoryview:
    """A 1-D unsigned-byte view of a C-contiguous buffer, without copying."""
    if mv.format == "B" and mv.ndim == 1:
        return mv
    try:
        return mv.cast("B")
    except TypeError:
        # cast() only takes native single-character formats; ctypes arrays
        # (LMCache's MemoryObj.byte_array) export "<B". numpy takes any.
        import numpy as np

        return memoryview(np.frombuffer(mv, dtype=np.uint8))


# --------------------------------------------------------------------- I/O


class _KvblkIo:
    """Data-region I/O through kvblk (O_DIRECT, all chunks in flight).

    ``store``/``load`` take ``(offset, length, address)`` triples, block
    aligned (the connector stages what is not), and return one status per
    item (0 or -errno). DESC_UNALIGNED is not used: the connector copies the
    partial last block of a chunk through its staging memory in both
    directions, which also keeps the bytes past a chunk's end out of the
    caller's buffer.
    """

    def __init__(self, path: str, backend: str, buffered: bool):
        import kvblk  # imported here so that the layout code works without it

        self._kvblk = kvblk
        self._dev = kvblk.open(path, backend=backend, write=True, buffered=buffered)
        info = self._dev.info()
        self.block_size = int(info["logical_block_size"])
        self.mem_align = int(info["mem_align"])
        self.backend = str(info["backend"])

    def _descs(self, items, flags):
        offs, lens, addrs = zip(*items)
        return self._kvblk.make_descs(offs, lens, addrs, flags=flags)

    def store(self, items) -> List[int]:
        # check=False: a failed chunk is reported per chunk, not raised for the batch.
        b = self._dev.store_many(self._descs(items, 0), check=False)
        return b.results["status"].tolist()

    def load(self, items) -> List[int]:
        b = self._dev.load_many(self._descs(items, 0), check=False)
        return b.results["status"].tolist()

    def close(self) -> None:
        self._dev.close()


# ------------------------------------------------------------------ format


@dataclass
class _Layout:
    block_size: int
    record_bytes: int
    slot_bytes: int
    slot_count: int
    index_offset: int
    data_offset: int
    store_uuid: bytes
    created_ns: int

    @property
    def max_key_bytes(self) -> int:
        return self.record_bytes - _REC_FMT.size

    def slot_offset(self, slot: int) -> int:
        return self.data_offset + slot * self.slot_bytes

    def record_offset(self, slot: int) -> int:
        return self.index_offset + slot * self.record_bytes

    def pack(self) -> bytes:
        body = _SB_FMT.pack(_SB_MAGIC, _SB_VERSION, 0, self.block_size,
                            self.record_bytes, self.slot_bytes, self.slot_count,
                            self.index_offset, self.data_offset, self.store_uuid,
                            self.created_ns)
        body += struct.pack("<I", _crc(body))
        return body + bytes(_SB_BYTES - len(body))

    @classmethod
    def unpack(cls, raw: bytes, path: str) -> "_Layout":
        (magic, version, _flags, block_size, record_bytes, slot_bytes, slot_count,
         index_offset, data_offset, store_uuid, created_ns) = _SB_FMT.unpack_from(raw)
        if magic != _SB_MAGIC:
            raise StoreFormatError(f"{path}: no kvblk LMCache superblock")
        (crc,) = struct.unpack_from("<I", raw, _SB_FMT.size)
        if crc != _crc(raw[:_SB_FMT.size]):
            raise StoreFormatError(f"{path}: superblock checksum mismatch")
        if version != _SB_VERSION:
            raise StoreFormatError(f"{path}: store version {version}, this code reads {_SB_VERSION}")
        return cls(block_size, record_bytes, slot_bytes, slot_count, index_offset,
                   data_offset, store_uuid, created_ns)

    @classmethod
    def plan(cls, capacity: int, slot_bytes: int, record_bytes: int,
             block_size: int) -> "_Layout":
        """The largest slot count whose index and data fit in @capacity."""
        idx = _SB_BYTES

        def fits(n: int) -> bool:
            return _round_up(idx + n * record_bytes, _DATA_ALIGN) + n * slot_bytes <= capacity

        lo, hi = 0, max(0, capacity // slot_bytes)
        while lo < hi:  # binary search: fits() is monotonic in n
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        n = lo
        if n == 0:
            raise ValueError(f"capacity {capacity} bytes holds no slot of {slot_bytes} bytes "
                             f"(needs at least {_DATA_ALIGN + slot_bytes})")
        return cls(block_size, record_bytes, slot_bytes, n, idx,
                   _round_up(idx + n * record_bytes, _DATA_ALIGN), _uuid.uuid4().bytes,
                   time.time_ns())


@dataclass
class _Entry:
    slot: int
    gen: int
    length: int
    crc: int


def _pack_record(lay: _Layout, slot: int, key: bytes, e: _Entry) -> bytes:
    hdr = _REC_FMT.pack(_REC_MAGIC, 0, e.gen, e.length, e.crc, len(key), 0, slot,
                        lay.store_uuid)
    rec = bytearray(lay.record_bytes)
    rec[:len(hdr)] = hdr
    rec[len(hdr):len(hdr) + len(key)] = key
    struct.pack_into("<I", rec, _REC_CRC_OFF, _crc(rec))
    return bytes(rec)


def _unpack_record(lay: _Layout, slot: int, rec: memoryview):
    """(key, entry) of a valid record, None for a free one, "bad" otherwise."""
    (magic, crc, gen, length, pcrc, key_len, _flags, rslot,
     ruuid) = _REC_FMT.unpack_from(rec)
    if magic != _REC_MAGIC:
        return None if magic == 0 else "bad"
    tmp = bytearray(rec)
    struct.pack_into("<I", tmp, _REC_CRC_OFF, 0)
    if (_crc(tmp) != crc or rslot != slot or ruuid != lay.store_uuid
            or key_len > lay.max_key_bytes or length == 0 or length > lay.slot_bytes
            or gen == 0):
        return "bad"
    key = bytes(rec[_REC_FMT.size:_REC_FMT.size + key_len])
    return key, _Entry(slot, gen, length, pcrc)


# -------------------------------------------------------------- connector


@dataclass
class _Op:
    kind: str
    fid: int
    keys: List[bytes]
    mvs: Optional[List[memoryview]]
    addrs: Optional[List[int]]


_STOP = object()


class KvblkConnector:
    """LMCache native connector storing chunks in the slots of one store.

    Args:
        path: regular file or block device holding the store.
        slot_bytes: largest chunk, rounded up to the block size. Required to
            format a store; when opening one it must match (or be None).
        create_bytes: create @path as a regular file of this size (bytes,
            blocks allocated with posix_fallocate) and format it when it does
            not exist. A file or device that exists is never resized.
        format: format even when the first 4 KiB hold something that is not a
            kvblk LMCache superblock (destroys what @path held). Without it, a
            store is only formatted when those bytes are all zero.
        when_full: "evict" (least recently used chunks make room) or
            "refuse" (a set into a full store fails for that chunk).
        record_bytes: index record size, a power of two, 512..4096 (keys up
            to record_bytes - 56 bytes). Used when formatting only.
        backend: kvblk backend ("auto", "uring", "psync", ...).
        buffered: open the data region without O_DIRECT (file systems that
            refuse O_DIRECT, such as tmpfs). Durability is unchanged: the
            flushes cover the page cache too.
        read_workers: threads serving gets (1..64).
        staging_bytes: bounce memory for chunks whose buffer is not aligned
            for O_DIRECT or whose length is not a multiple of the block size
            (at least one slot; default 64 MiB).
        verify_on_open: check every chunk's CRC while opening.

    Raises:
        StoreFormatError: @path holds no store and formatting is not allowed,
            or its superblock is damaged, or @slot_bytes disagrees with it, or
            another connector (any process) has it open (an flock(2) is held).
        ValueError: an argument out of range.
        OSError: opening or reading @path failed (errno as the system said).
    """

    def __init__(self, path: str, slot_bytes: Optional[int] = None, *,
                 create_bytes: Optional[int] = None, format: bool = False,
                 when_full: str = "evict", record_bytes: int = 512,
                 backend: str = "auto", buffered: bool = False,
                 read_workers: int = 2, staging_bytes: int = 64 << 20,
                 verify_on_open: bool = False,
                 _io_factory: Optional[Callable[..., object]] = None):
        if when_full not in ("evict", "refuse"):
            raise ValueError(f'when_full must be "evict" or "refuse", not {when_full!r}')
        if record_bytes not in (512, 1024, 2048, 4096):
            raise ValueError(f"record_bytes must be 512, 1024, 2048 or 4096, not {record_bytes}")
        if not 1 <= read_workers <= 64:
            raise ValueError(f"read_workers must be 1..64, not {read_workers}")
        if slot_bytes is not None and slot_bytes <= 0:
            raise ValueError(f"slot_bytes must be > 0, not {slot_bytes}")
        self.path = os.fspath(path)
        self.when_full = when_full
        self._closed = True  # until fully opened: close() then only frees what exists
        self._efd = -1
        self._meta_fd = -1
        self._io = None
        self._arenas: List[mmap.mmap] = []
        self._tls = threading.local()
        self._threads: List[threading.Thread] = []

        try:
            self._open_store(slot_bytes, create_bytes, format, record_bytes, backend,
                             buffered, staging_bytes, _io_factory)
            self._lock = threading.Lock()
            self._entries: "collections.OrderedDict[bytes, _Entry]" = collections.OrderedDict()
            self._free: "collections.deque[int]" = collections.deque()
            self._pins: dict = {}
            self._zombies: set = set()
            self._next_fid = 1
            self._done: "collections.deque[Completion]" = collections.deque()
            self._counters = collections.Counter()
            self._next_gen = self._load_index()
            if verify_on_open:
                self._verify_all()
            self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._read_q: "queue.SimpleQueue" = queue.SimpleQueue()
            self._write_q: "queue.SimpleQueue" = queue.SimpleQueue()
            self._closed = False
            for i in range(read_workers):
                self._start_thread(self._worker, self._read_q, f"kvblk-lmc-read{i}")
            self._start_thread(self._worker, self._write_q, "kvblk-lmc-write")
        except BaseException:
            self._release()
            raise

    # -------------------------------------------------------------- opening

    def _open_store(self, slot_bytes, create_bytes, format, record_bytes, backend,
                    buffered, staging_bytes, io_factory) -> None:
        created = False
        if not os.path.exists(self.path):
            if create_bytes is None:
                raise FileNotFoundError(_errno.ENOENT, "no such store (pass create_bytes "
                                        "to create a file)", self.path)
            if create_bytes <= 0:
                raise ValueError(f"create_bytes must be > 0, not {create_bytes}")
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, create_bytes)
                os.fsync(fd)
            finally:
                os.close(fd)
            created = True
        self._meta_fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            # One connector per store: two would hand out the same free slots.
            fcntl.flock(self._meta_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreFormatError(f"{self.path}: store is open in another connector "
                                   "(flock held)") from None
        st = os.fstat(self._meta_fd)
        if stat.S_ISBLK(st.st_mode):
            capacity = os.lseek(self._meta_fd, 0, os.SEEK_END)
        elif stat.S_ISREG(st.st_mode):
            capacity = st.st_size
        else:
            raise StoreFormatError(f"{self.path}: neither a regular file nor a block device")

        factory = io_factory or _KvblkIo
        self._io = factory(self.path, backend, buffered)
        block = max(4096, self._io.block_size)

        raw = os.pread(self._meta_fd, _SB_BYTES, 0)
        if len(raw) < _SB_BYTES:
            raise StoreFormatError(f"{self.path}: {capacity} bytes is too small for a store")
        if raw[:8] == _SB_MAGIC and not format:
            lay = _Layout.unpack(raw, self.path)
            if slot_bytes is not None and _round_up(slot_bytes, lay.block_size) != lay.slot_bytes:
                raise StoreFormatError(
                    f"{self.path}: store has slot_bytes {lay.slot_bytes}, asked for "
                    f"{slot_bytes} (reformat with format=True to change it)")
            if lay.block_size % self._io.block_size:
                raise StoreFormatError(f"{self.path}: store block size {lay.block_size} is not "
                                       f"a multiple of the device's {self._io.block_size}")
            if lay.data_offset + lay.slot_count * lay.slot_bytes > capacity:
                raise StoreFormatError(f"{self.path}: store of {lay.slot_count} slots "
                                       f"does not fit in {capacity} bytes")
        else:
            if any(raw) and not format and not created:
                raise StoreFormatError(
                    f"{self.path}: its first 4 KiB are not a kvblk LMCache store and not "
                    "zero; pass format=True to format it (destroys its content)")
            if slot_bytes is None:
                raise StoreFormatError(f"{self.path}: no store yet; slot_bytes is needed "
                                       "to format one")
            lay = _Layout.plan(capacity, _round_up(slot_bytes, block), record_bytes, block)
            self._format(lay)
        self._lay = lay
        self._staging_bytes = _round_up(max(staging_bytes, lay.slot_bytes), mmap.PAGESIZE)

    def _format(self, lay: _Layout) -> None:
        """Zero the index region, then write the superblock; durable on return."""
        zero = bytes(min(_READ_CHUNK, lay.data_offset - lay.index_offset))
        off = lay.index_offset
        while off < lay.data_offset:
            n = min(len(zero), lay.data_offset - off)
            os.pwrite(self._meta_fd, zero[:n], off)
            off += n
        os.fdatasync(self._meta_fd)
        # The superblock goes last: a crash while formatting leaves no store.
        os.pwrite(self._meta_fd, lay.pack(), 0)
        os.fdatasync(self._meta_fd)

    def _load_index(self) -> int:
        lay = self._lay
        best: dict = {}
        bad = 0
        per = _READ_CHUNK // lay.record_bytes
        for first in range(0, lay.slot_count, per):
            n = min(per, lay.slot_count - first)
            raw = os.pread(self._meta_fd, n * lay.record_bytes, lay.record_offset(first))
            mv = memoryview(raw)
            for j in range(n):
                rec = mv[j * lay.record_bytes:(j + 1) * lay.record_bytes]
                if rec[:4] == b"\0\0\0\0":
                    continue
                got = _unpack_record(lay, first + j, rec)
                if got is None:
                    continue
                if got == "bad":
                    bad += 1
                    continue
                key, e = got
                old = best.get(key)
                if old is None or e.gen > old.gen:
                    best[key] = e
        used = set()
        max_gen = 0
        for key, e in sorted(best.items(), key=lambda kv: kv[1].gen):
            self._entries[key] = e
            used.add(e.slot)
            max_gen = max(max_gen, e.gen)
        self._free.extend(s for s in range(lay.slot_count) if s not in used)
        self._counters["bad_records_at_open"] = bad
        self._counters["chunks_at_open"] = len(self._entries)
        if bad:
            _log.warning("%s: %d index records failed their checks at open; their slots are free",
                         self.path, bad)
        return max_gen + 1

    def _verify_all(self) -> None:
        """Read every chunk and drop those whose CRC does not match."""
        stage, stage_addr = self._arena()
        bs = self._lay.block_size
        items = list(self._entries.items())
        dropped = 0
        i = 0
        while i < len(items):
            group, used = [], 0
            while i < len(items) and (not group or
                                      used + _round_up(items[i][1].length, bs) <= len(stage)):
                group.append((items[i], used))
                used += _round_up(items[i][1].length, bs)
                i += 1
            st = self._io.load([(self._lay.slot_offset(e.slot), _round_up(e.length, bs),
                                 stage_addr + o) for (_, e), o in group])
            for ((key, e), o), s in zip(group, st):
                if s != 0 or _crc(stage[o:o + e.length]) != e.crc:
                    del self._entries[key]
                    self._write_record(e.slot, None)
                    self._free.append(e.slot)
                    dropped += 1
        if dropped:
            os.fdatasync(self._meta_fd)
            _log.warning("%s: %d chunks failed their checksum at open and were dropped",
                         self.path, dropped)
        self._counters["dropped_at_open"] = dropped

    def _start_thread(self, fn, q, name) -> None:
        t = threading.Thread(target=fn, args=(q,), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    # ------------------------------------------------------------- contract

    def event_fd(self) -> int:
        """The eventfd that is readable while completions wait (see module doc)."""
        self._check_open()
        return self._efd

    def submit_batch_get(self, keys: Sequence, buffers: Sequence) -> int:
        """Queue loading chunk i into buffer i; returns the future id."""
        ks = self._keys(keys)
        mvs = self._buffers(ks, buffers, for_get=True)
        return self._queue(self._read_q, "get", ks, mvs)

    def submit_batch_set(self, keys: Sequence, buffers: Sequence) -> int:
        """Queue storing buffer i as chunk i (overwrites); returns the future id."""
        ks = self._keys(keys)
        mvs = self._buffers(ks, buffers, for_get=False)
        return self._queue(self._write_q, "set", ks, mvs)

    def submit_batch_exists(self, keys: Sequence) -> int:
        """Answer from the in-memory index at once; returns the future id."""
        ks = self._keys(keys)
        with self._lock:
            self._check_open()
            fid = self._take_fid()
            res = [k in self._entries for k in ks]
            self._post(fid, True, "", res)
        return fid

    def submit_batch_delete(self, keys: Sequence) -> int:
        """Queue removing the keys (durable when completed); returns the future id."""
        ks = self._keys(keys)
        return self._queue(self._write_q, "delete", ks, None)

    def drain_completions(self) -> List[Completion]:
        """Clear the eventfd and return every completion posted since the last drain."""
        with self._lock:
            if self._efd < 0:
                return []
            try:
                os.eventfd_read(self._efd)
            except BlockingIOError:
                pass
            out = list(self._done)
            self._done.clear()
        return out

    def close(self) -> None:
        """Finish queued batches, then close the store and the eventfd. Idempotent."""
        if getattr(self, "_lock", None) is None:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for t in self._threads:
            (self._write_q if t.name.endswith("write") else self._read_q).put(_STOP)
        for t in self._threads:
            t.join()
        self._release()

    def __enter__(self) -> "KvblkConnector":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------- reporting

    def stats(self) -> dict:
        """Counters: sets, set_failed, gets, hits, misses, size_mismatches,
        checksum_failures, io_errors, evictions, refused, deletes, plus the
        state: chunks, free_slots, slot_count, slot_bytes."""
        with self._lock:
            d = dict(self._counters)
            d.update(chunks=len(self._entries), free_slots=len(self._free),
                     slot_count=self._lay.slot_count, slot_bytes=self._lay.slot_bytes)
        return d

    @property
    def slot_bytes(self) -> int:
        return self._lay.slot_bytes

    @property
    def slot_count(self) -> int:
        return self._lay.slot_count

    @property
    def max_key_bytes(self) -> int:
        return self._lay.max_key_bytes

    # ----------------------------------------------------------- validation

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("KvblkConnector is closed")

    def _keys(self, keys: Sequence) -> List[bytes]:
        self._check_open()
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys must be a sequence of keys, not a single key")
        out = []
        for i, k in enumerate(keys):
            if isinstance(k, str):
                k = k.encode("utf-8")
            elif not isinstance(k, (bytes, bytearray)):
                raise TypeError(f"key {i} is a {type(k).__name__}, not str or bytes")
            if not k:
                raise ValueError(f"key {i} is empty")
            if len(k) > self._lay.max_key_bytes:
                raise ValueError(f"key {i} is {len(k)} bytes; this store's records hold "
                                 f"keys of at most {self._lay.max_key_bytes}")
            out.append(bytes(k))
        if not out:
            raise ValueError("keys list is empty")
        return out

    def _buffers(self, keys: List[bytes], buffers: Sequence, for_get: bool) -> List[memoryview]:
        if len(buffers) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(buffers)} buffers")
        mvs = []
        for i, b in enumerate(buffers):
            try:
                mv = memoryview(b)
            except TypeError:
                raise TypeError(f"buffer {i} ({type(b).__name__}) does not support the "
                                "buffer protocol") from None
            if not mv.c_contiguous:
                raise ValueError(f"buffer {i} is not C-contiguous")
            if for_get and mv.readonly:
                raise ValueError(f"buffer {i} is read-only; a get writes into its buffers")
            mv = _as_bytes(mv)
            if i == 0:
                if mv.nbytes == 0:
                    raise ValueError("buffer 0 is empty")
                if not for_get and mv.nbytes > self._lay.slot_bytes:
                    raise ValueError(f"buffer 0 is {mv.nbytes} bytes, larger than this "
                                     f"store's slot_bytes {self._lay.slot_bytes}")
            elif mv.nbytes != mvs[0].nbytes:
                raise ValueError(f"buffer {i} is {mv.nbytes} bytes but buffer 0 is "
                                 f"{mvs[0].nbytes}: every buffer of a batch has one size")
            mvs.append(mv)
        return mvs

    def _queue(self, q, kind: str, keys, mvs) -> int:
        addrs = [_buffer_address(mv) for mv in mvs] if mvs is not None else None
        with self._lock:
            self._check_open()
            fid = self._take_fid()
            q.put(_Op(kind, fid, keys, mvs, addrs))
        return fid

    def _take_fid(self) -> int:
        fid = self._next_fid
        self._next_fid += 1
        return fid

    def _post(self, fid: int, ok: bool, error: str, res: Optional[List[bool]]) -> None:
        """Queue a completion and wake the poller; caller holds _lock."""
        self._done.append((fid, ok, error, res))
        os.eventfd_write(self._efd, 1)

    # -------------------------------------------------------------- workers

    def _worker(self, q) -> None:
        while True:
            op = q.get()
            if op is _STOP:
                return
            try:
                ok, err, res = getattr(self, "_do_" + op.kind)(op)
            except Exception as e:  # a bug or an unexpected OSError: fail the batch, keep serving
                _log.exception("kvblk LMCache connector: %s batch %d failed", op.kind, op.fid)
                ok, err, res = False, f"{type(e).__name__}: {e}", [False] * len(op.keys)
            with self._lock:
                self._post(op.fid, ok, err, res)

    def _write_record(self, slot: int, rec: Optional[bytes]) -> None:
        lay = self._lay
        os.pwrite(self._meta_fd, rec if rec is not None else bytes(lay.record_bytes),
                  lay.record_offset(slot))

    def _unpin(self, slot: int) -> None:
        """Drop one read pin; caller holds _lock."""
        n = self._pins[slot] - 1
        if n:
            self._pins[slot] = n
            return
        del self._pins[slot]
        if slot in self._zombies:
            self._zombies.discard(slot)
            self._free.append(slot)

    def _release_slot(self, slot: int) -> None:
        """A slot left the index: free now, or when its last reader is done."""
        if slot in self._pins:
            self._zombies.add(slot)
        else:
            self._free.append(slot)

    def _do_get(self, op: _Op):
        lay = self._lay
        n = len(op.keys)
        size = op.mvs[0].nbytes
        res = [False] * n
        todo = []  # (index, entry)
        with self._lock:
            self._counters["gets"] += n
            for i, k in enumerate(op.keys):
                e = self._entries.get(k)
                if e is None:
                    self._counters["misses"] += 1
                elif e.length != size:
                    self._counters["size_mismatches"] += 1
                else:
                    self._pins[e.slot] = self._pins.get(e.slot, 0) + 1
                    self._entries.move_to_end(k)
                    todo.append((i, e))
        errors = []
        try:
            if todo:
                st = self._transfer(op, [(i, lay.slot_offset(e.slot)) for i, e in todo],
                                    store=False)
                for i, e in todo:
                    s = st.get(i, 0)
                    if s != 0:
                        errors.append(f"key {i}: {os.strerror(-s)}")
                    elif _crc(op.mvs[i]) != e.crc:
                        self._corrupt(op.keys[i], e)
                    else:
                        res[i] = True
        finally:
            with self._lock:
                for _, e in todo:
                    self._unpin(e.slot)
                self._counters["hits"] += sum(res)
                self._counters["io_errors"] += len(errors)
        if errors:
            return False, f"{len(errors)} of {n} chunks failed to load: " + "; ".join(errors[:4]), res
        return True, "", res

    def _corrupt(self, key: bytes, e: _Entry) -> None:
        """A chunk failed its CRC: forget it (if still current) and free its slot."""
        _log.warning("%s: chunk in slot %d failed its checksum; dropped", self.path, e.slot)
        with self._lock:
            self._counters["checksum_failures"] += 1
            cur = self._entries.get(key)
            if cur is not None and cur.gen == e.gen:
                del self._entries[key]
                # Zero the record under the lock so that no set can have taken the slot.
                self._write_record(e.slot, None)
                self._release_slot(e.slot)

    def _allocate(self, n: int) -> List[Optional[int]]:
        """Slots for @n chunks (None when refused or nothing evictable); caller holds _lock."""
        out: List[Optional[int]] = []
        victims = None
        for _ in range(n):
            if self._free:
                out.append(self._free.popleft())
                continue
            if self.when_full == "refuse":
                self._counters["refused"] += 1
                out.append(None)
                continue
            if victims is None:
                victims = iter(list(self._entries.items()))
            slot = None
            for key, e in victims:
                if e.slot in self._pins or self._entries.get(key) is not e:
                    continue
                del self._entries[key]
                self._counters["evictions"] += 1
                slot = e.slot
                break
            if slot is None:
                self._counters["refused"] += 1
            out.append(slot)
        return out

    def _do_set(self, op: _Op):
        lay = self._lay
        n = len(op.keys)
        size = op.mvs[0].nbytes
        crcs = [_crc(mv) for mv in op.mvs]
        with self._lock:
            slots = self._allocate(n)
            entries = []
            for i, s in enumerate(slots):
                if s is None:
                    entries.append(None)
                    continue
                entries.append(_Entry(s, self._next_gen, size, crcs[i]))
                self._next_gen += 1
        res = [False] * n
        err = []
        try:
            live = [i for i in range(n) if entries[i] is not None]
            if len(live) < n:
                err.append(f"store full: {n - len(live)} of {n} chunks not stored "
                           f"(when_full={self.when_full!r})")
            for i in live:
                self._write_record(entries[i].slot, None)
            failed = self._transfer(op, [(i, lay.slot_offset(entries[i].slot)) for i in live],
                                    store=True)
            for i, s in failed.items():
                err.append(f"key {i}: {os.strerror(-s)}")
            live = [i for i in live if i not in failed]
            if live:
                try:
                    os.fdatasync(self._meta_fd)
                    for i in live:
                        self._write_record(entries[i].slot, _pack_record(
                            lay, entries[i].slot, op.keys[i], entries[i]))
                    os.fdatasync(self._meta_fd)
                except OSError as e:
                    # Durability unknown: report every chunk of the batch as not
                    # stored and take back what records we wrote (best effort;
                    # one that survives names a chunk whose payload was flushed).
                    err.append(f"flush of {self.path} failed: {os.strerror(e.errno or _errno.EIO)}"
                               f"; {len(live)} chunks not stored")
                    self._counters["flush_errors"] += 1
                    for i in live:
                        try:
                            self._write_record(entries[i].slot, None)
                        except OSError:
                            pass
                    live = []
            with self._lock:
                for i in live:
                    old = self._entries.pop(op.keys[i], None)
                    if old is not None:
                        # The overwritten chunk's record goes; if this write is lost
                        # the higher generation still wins at the next open.
                        self._write_record(old.slot, None)
                        self._release_slot(old.slot)
                    self._entries[op.keys[i]] = entries[i]
                    res[i] = True
        finally:
            with self._lock:
                for i in range(n):
                    if entries[i] is not None and not res[i]:
                        self._free.append(entries[i].slot)
                self._counters["sets"] += sum(res)
                self._counters["set_failed"] += n - sum(res)
        if err:
            return False, "; ".join(err[:4]), res
        return True, "", res

    def _arena(self) -> Tuple[memoryview, int]:
        """This thread's staging memory (anonymous pages: committed when first touched)."""
        a = getattr(self._tls, "arena", None)
        if a is None:
            m = mmap.mmap(-1, self._staging_bytes)
            with self._lock:
                self._arenas.append(m)
            mv = memoryview(m)
            a = self._tls.arena = (mv, _buffer_address(mv))
        return a

    def _transfer(self, op: _Op, chunks: List[Tuple[int, int]], store: bool) -> dict:
        """Move chunk i of @op to or from its slot offset, for each (i, offset) of
        @chunks; returns {i: -errno} of the chunks that failed.

        The block-aligned head of a chunk goes straight from or to the caller's
        buffer when its address is aligned for O_DIRECT; the rest (a partial
        last block, or the whole chunk of an unaligned buffer) goes through this
        thread's staging memory, zero-padded to the block size on stores. As
        many chunks as the staging memory holds go in one kvblk call.
        """
        bs = self._lay.block_size
        align = max(self._io.mem_align, 1)
        stage, stage_addr = self._arena()
        failed: dict = {}

        def run(items, owners, copies):
            if store:
                for i, so, bo, n in copies:
                    stage[so:so + n] = op.mvs[i][bo:bo + n]
                    pad = _round_up(n, bs) - n
                    if pad:
                        stage[so + n:so + n + pad] = bytes(pad)
            st = self._io.store(items) if store else self._io.load(items)
            for i, s in zip(owners, st):
                if s != 0 and i not in failed:
                    failed[i] = s
            if not store:
                for i, so, bo, n in copies:
                    if i not in failed:
                        op.mvs[i][bo:bo + n] = stage[so:so + n]

        items, owners, copies, used = [], [], [], 0
        for i, off in chunks:
            length, addr = op.mvs[i].nbytes, op.addrs[i]
            head = length - length % bs if addr % align == 0 else 0
            rest = length - head
            need = _round_up(rest, bs)
            if items and used + need > len(stage):
                run(items, owners, copies)
                items, owners, copies, used = [], [], [], 0
            if head:
                items.append((off, head, addr))
                owners.append(i)
            if rest:
                items.append((off + head, need, stage_addr + used))
                owners.append(i)
                copies.append((i, used, head, rest))
                used += need
        if items:
            run(items, owners, copies)
        return failed

    def _do_delete(self, op: _Op):
        res = [False] * len(op.keys)
        freed = []
        with self._lock:
            for i, k in enumerate(op.keys):
                e = self._entries.pop(k, None)
                if e is None:
                    continue
                self._write_record(e.slot, None)
                freed.append(e.slot)
                res[i] = True
            self._counters["deletes"] += len(freed)
        err = ""
        if freed:
            try:
                os.fdatasync(self._meta_fd)
            except OSError as e:
                # The keys are gone from the index either way; a zeroed record that
                # did not reach the media can bring its (intact) chunk back at the
                # next open.
                err = f"flush of {self.path} failed: {os.strerror(e.errno or _errno.EIO)}"
                self._counters["flush_errors"] += 1
        with self._lock:
            for s in freed:
                self._release_slot(s)
        return not err, err, res

    # ------------------------------------------------------------ teardown

    def _release(self) -> None:
        if self._io is not None:
            try:
                self._io.close()
            finally:
                self._io = None
        # Worker threads have exited: no view of an arena is in use any more.
        self._tls = threading.local()
        for m in self._arenas:
            try:
                m.close()
            except BufferError:  # a view still referenced somewhere: let GC unmap it
                pass
        self._arenas = []
        for name in ("_meta_fd", "_efd"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)
        if hasattr(self, "_done"):
            self._done.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

# SPDX-License-Identifier: MIT
"""kvblk.KVStore: the kvblk store (include/kvblk/kvstore.h) from Python.

    import kvblk, numpy as np
    with kvblk.KVStore("/var/tmp/kv.store", create="if_missing", file_bytes=1 << 30,
                       classes=["4MiB", "32MiB"]) as st:
        st.put(["a", "b"], [np.ones(4 << 20, np.uint8), np.zeros(32 << 20, np.uint8)],
               metas=[b"shape=...", None])
        dst = [np.empty(4 << 20, np.uint8), np.empty(32 << 20, np.uint8)]
        r = st.get(["a", "b"], dst)
        assert r.hits == [True, True]

The store keeps KV-cache objects by key on one or more drives (files or block devices), with a
crash-safe journaled index, a CRC32C per object checked on every get into host memory, and
LRU eviction. This module is a thin layer: every key's placement, I/O and checksum is the C
store's; what is here turns Python objects into the C API's batches and its answers into
per-key results.

Batches: get, put, exists and delete take a list of keys (str, stored as UTF-8, or bytes) and,
for get and put, one destination (source) per key: a numpy array, a CPU torch tensor, a
bytearray, a memoryview, anything with the buffer protocol or DLPack, an (address, nbytes)
tuple, a registered buffer (KVStore.register()) or a slice of one; CUDA memory (torch CUDA
tensors, __cuda_array_interface__) for gets, registered with the store's kvblk_dev for the
batch (kvblk_register_buffer(KVBLK_MEM_CUDA): nvidia-p2p with kvblk.ko, else libkvblk's staged
path). A get's destination must hold the whole object (a larger one is fine: the result's
length says how many bytes are the object's).

Every key gets its own result (StoreResult): a hit, a miss, or an error with its errno and a
text saying why. The synchronous calls (get(), put(), ...) wait for the batch with the GIL
released; submit_*() return a Ticket at once; ``await get_async(...)`` waits on the store's
eventfd without blocking the event loop.
"""

import errno as _errno
import os
import re
import threading
import time
import weakref

import numpy as np

from . import _kvblk
from ._dest import BufferSlice
from ._errors import Error, WaitTimeout

GET = _kvblk.KVSTORE_GET
PUT = _kvblk.KVSTORE_PUT
EXISTS = _kvblk.KVSTORE_EXISTS
DELETE = _kvblk.KVSTORE_DELETE
_KIND_NAMES = {GET: "get", PUT: "put", EXISTS: "exists", DELETE: "delete"}
_BACKENDS = list(_kvblk.BACKEND_NAMES)
_PATHS = list(_kvblk.PATH_NAMES)
_MEM_KINDS = {"host": _kvblk.MEM_HOST, "cuda": _kvblk.MEM_CUDA, "p2pdma": _kvblk.MEM_P2PDMA}
_UINT32_MAX = (1 << 32) - 1
_REAP_MAX = 256

#: Keys per C batch: the store's kvblk_dev max_descs (65536, libkvblk's default). A larger
#: batch is split into several store batches (each with its own completion, all in flight
#: together); kvblk_kvstore_open_opts has no max_descs, so this limit cannot be raised.
DEFAULT_MAX_KEYS_PER_BATCH = 65536

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


# ------------------------------------------------------------------ parameters

def parse_bytes(name, value, *, lo=0, hi=(1 << 64) - 1, who="KVStore"):
    """A byte count given as an int or a string with a binary unit ("4MiB", "32M", "1 GiB";
    K/M/G/T and KB/MB/GB/TB are powers of 1024 too). Raises TypeError (not an int or str, or a
    bool) or ValueError (unparsable or outside [lo, hi]), naming the parameter ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, str, np.integer)):
        raise TypeError(f"{who}: {name} must be an int (bytes) or a string such as '4MiB', "
                        f"not {type(value).__name__} {value!r}")
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", value)
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"{who}: {name} {value!r} is not a byte count (an int, or digits and a "
                             f"unit: B, KiB, MiB, GiB, TiB)")
        n = int(m.group(1)) * _UNITS[m.group(2).lower()]
    else:
        n = int(value)
    if not lo <= n <= hi:
        raise ValueError(f"{who}: {name} {value!r} is out of range ({lo}..{hi} bytes)")
    return n


def check_int(name, value, lo, hi, who="KVStore"):
    """An int parameter in [lo, hi]; TypeError / ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int, not {type(value).__name__} {value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{who}: {name} {value} is out of range ({lo}..{hi})")
    return int(value)


def check_bool(name, value, who="KVStore"):
    """A bool parameter; TypeError naming ``name`` for anything else (a string "false" is not False)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{who}: {name} must be True or False, not {type(value).__name__} {value!r}")
    return bool(value)


def check_choice(name, value, choices, who="KVStore"):
    """A str parameter that is one of ``choices``."""
    if not isinstance(value, str):
        raise TypeError(f"{who}: {name} must be a str (one of {', '.join(map(repr, choices))}), "
                        f"not {type(value).__name__} {value!r}")
    if value not in choices:
        raise ValueError(f"{who}: {name} {value!r} is not one of {', '.join(map(repr, choices))}")
    return value


def _paths(paths, who="KVStore"):
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    if not isinstance(paths, (list, tuple)):
        raise TypeError(f"{who}: paths must be a path (str or os.PathLike) or a list of them, "
                        f"not {type(paths).__name__}")
    out = []
    for i, p in enumerate(paths):
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise TypeError(f"{who}: paths[{i}] must be a str or os.PathLike, not {type(p).__name__} {p!r}")
        p = os.fsdecode(os.fspath(p))
        if not p:
            raise ValueError(f"{who}: paths[{i}] is empty")
        out.append(p)
    if not 1 <= len(out) <= _kvblk.KVSTORE_MAX_DRIVES:
        raise ValueError(f"{who}: {len(out)} paths (1..{_kvblk.KVSTORE_MAX_DRIVES} drives)")
    return out


def _classes(classes, who="KVStore"):
    """[(slot_bytes, weight)] from ints, strings with units, (size, weight) pairs or dicts."""
    if classes is None:
        return []
    if isinstance(classes, (int, str)) and not isinstance(classes, bool):
        classes = [classes]
    if not isinstance(classes, (list, tuple)):
        raise TypeError(f"{who}: classes must be a list of slot sizes (ints or strings such as "
                        f"'4MiB'), (slot_bytes, weight) pairs or dicts, not {type(classes).__name__}")
    if len(classes) > _kvblk.KVSTORE_MAX_CLASSES:
        raise ValueError(f"{who}: {len(classes)} classes (at most {_kvblk.KVSTORE_MAX_CLASSES})")
    out = []
    for i, c in enumerate(classes):
        weight = 1
        if isinstance(c, dict):
            unknown = set(c) - {"slot_bytes", "weight"}
            if unknown or "slot_bytes" not in c:
                raise ValueError(f"{who}: classes[{i}] must have 'slot_bytes' and optionally "
                                 f"'weight' (got {sorted(c)})")
            size, weight = c["slot_bytes"], c.get("weight", 1)
        elif isinstance(c, (list, tuple)):
            if len(c) != 2:
                raise ValueError(f"{who}: classes[{i}] must be (slot_bytes, weight), got {c!r}")
            size, weight = c
        else:
            size = c
        size = parse_bytes(f"classes[{i}].slot_bytes", size, lo=1, who=who)
        if size % _kvblk.KVSTORE_SLOT_ALIGN:
            raise ValueError(f"{who}: classes[{i}].slot_bytes {size} is not a multiple of "
                             f"{_kvblk.KVSTORE_SLOT_ALIGN}")
        weight = check_int(f"classes[{i}].weight", weight, 0, _UINT32_MAX, who)
        out.append((size, weight))
    return out


# ---------------------------------------------------------------------- results

_TEXT = {
    _errno.ENOENT: {"get": "miss: the key is not in the store", "exists": "absent",
                    "delete": "absent: nothing to delete", "put": "a buffer the batch names is not registered"},
    _errno.EBADMSG: "the bytes read do not match the object's CRC32C (the object was dropped: the next "
                    "get of it is a miss)",
    _errno.ENODEV: "its drive has failed or is missing",
    _errno.ECANCELED: "not attempted (the batch was rejected, or the store closed before it ran)",
    _errno.ENOSPC: "no slot for it: the store is full and does not evict (when_full='refuse'), or every "
                   "slot of its class is being read",
    _errno.EIO: "an I/O error on its drive",
    _errno.EINVAL: "the destination is device memory that is not aligned to the drive's mem_align",
    _errno.E2BIG: "the read could not be issued: libkvblk bounces an object whose destination is not "
                  "aligned to the drive's mem_align whole, and this one passes its bounce limit "
                  "(KVBLK_MAX_BOUNCE_BYTES); align the destination (kvblk.aligned_empty())",
}


class KeyResult:
    """What became of one key of a batch.

    key     -- the key as given.
    index   -- its position in the batch.
    status  -- 0 or -errno (as struct kvblk_kvstore_result).
    errno   -- -status (0 for success).
    ok      -- status == 0: get a hit (bytes at the destination, checksum matched), put stored
               (durable), exists present, delete deleted.
    miss    -- status == -ENOENT (get: not in the store; exists: absent).
    length  -- the object's length (get, exists, also when the destination was too small; put:
               bytes stored).
    meta    -- its metadata (bytes; get and exists with meta), else None.
    drive   -- the drive that holds (received) it, or None.
    error   -- a text saying what went wrong (None when ok).
    """

    __slots__ = ("key", "index", "status", "length", "meta", "drive", "error")

    def __init__(self, key, index, status, length, meta, drive, error):
        self.key, self.index, self.status, self.length = key, index, status, length
        self.meta, self.drive, self.error = meta, drive, error

    ok = property(lambda self: self.status == 0, doc="status == 0 (hit, stored, present, deleted).")
    miss = property(lambda self: self.status == -_errno.ENOENT, doc="status == -ENOENT (not in the store).")
    errno = property(lambda self: -self.status, doc="-status: the positive errno (0 when ok).")

    def __repr__(self):
        what = "ok" if self.ok else f"{_errno.errorcode.get(-self.status, self.status)}: {self.error}"
        return f"<kvblk.KeyResult {self.key!r} {what} length={self.length}>"


class StoreResult:
    """How one store batch went, key by key.

    kind        -- "get", "put", "exists" or "delete".
    keys        -- the keys as given.
    status      -- numpy int32 array: 0 or -errno per key (see KeyResult).
    length      -- numpy uint64 array: the objects' lengths (get, exists; put: bytes stored).
    drive       -- numpy uint32 array: each key's drive (0xFFFFFFFF: none).
    ok          -- keys with status 0.
    failed      -- keys with another status (misses included).
    bytes       -- bytes of the hits (get) or stored (put).
    elapsed_ns  -- submit to completion.
    path, backend -- how the gets were read ("host", "p2p", "staged"; "uring", "kmod", ...);
                   None when not known (synchronous calls).
    user_data   -- submit_*()'s user_data.
    Indexing (``r[i]``) and iteration give KeyResult objects; ``hits`` is a list of bools.
    """

    __slots__ = ("kind", "keys", "status", "meta_len", "length", "drive", "room", "_batches",
                 "_offsets", "elapsed_ns", "path", "backend", "user_data", "_store_name")

    def __init__(self, kind, keys, batches, cols, elapsed_ns, path=None, backend=None, user_data=0,
                 store_name=""):
        self.kind = _KIND_NAMES.get(kind, kind)
        self.keys = keys
        self.status, self.meta_len, self.length, self.drive, self.room = cols
        self._batches = batches
        self._offsets = np.cumsum([0] + [len(b) for b in batches[:-1]]) if len(batches) > 1 else None
        self.elapsed_ns = elapsed_ns
        self.path, self.backend = path, backend
        self.user_data = user_data
        self._store_name = store_name

    ok = property(lambda self: int(np.count_nonzero(self.status == 0)), doc="Keys with status 0.")
    failed = property(lambda self: int(np.count_nonzero(self.status != 0)),
                      doc="Keys with another status (misses included).")

    @property
    def hits(self):
        """A list of bools: True where the key's status is 0."""
        return (self.status == 0).tolist()

    @property
    def bytes(self):
        """Bytes of the keys with status 0 (get: read; put: stored)."""
        return int(self.length[self.status == 0].sum())

    def __len__(self):
        return len(self.status)

    def meta(self, i):
        """Key i's metadata (bytes) as the store has it, cut to the room asked for; None when the
        key was not found or no metadata was asked for."""
        b, j = self._locate(i)
        return b.meta(j)

    def _locate(self, i):
        n = len(self.status)
        if not -n <= i < n:
            raise IndexError(f"key index {i} out of range ({n} keys)")
        i %= n
        if self._offsets is None:
            return self._batches[0], i
        k = int(np.searchsorted(self._offsets, i, side="right")) - 1
        return self._batches[k], i - int(self._offsets[k])

    def error_text(self, i):
        """Why key i did not succeed (None when its status is 0)."""
        st = int(self.status[i])
        if st == 0:
            return None
        err = -st
        t = _TEXT.get(err)
        if isinstance(t, dict):
            t = t.get(self.kind)
        if err == _errno.EMSGSIZE:
            t = (f"the stored object is {int(self.length[i])} bytes; the destination holds "
                 f"{int(self.room[i])}")
        if t is None:
            t = os.strerror(err)
        drive = int(self.drive[i])
        if drive != _UINT32_MAX and err not in (_errno.ENOENT, _errno.EMSGSIZE):
            t += f" (drive {drive})"
        return t

    def __getitem__(self, i):
        n = len(self.status)
        if not -n <= i < n:
            raise IndexError(f"key index {i} out of range ({n} keys)")
        i %= n
        d = int(self.drive[i])
        meta = self.meta(i) if self.kind in ("get", "exists") else None
        return KeyResult(self.keys[i], i, int(self.status[i]), int(self.length[i]), meta,
                         None if d == _UINT32_MAX else d, self.error_text(i))

    def __iter__(self):
        for i in range(len(self.status)):
            yield self[i]

    def errors(self, misses=False):
        """KeyResults of the keys that failed; misses (ENOENT) only with misses=True."""
        bad = self.status != 0
        if not misses:
            bad &= self.status != -_errno.ENOENT
        return [self[int(i)] for i in np.flatnonzero(bad)]

    def error(self, misses=False):
        """kvblk.Error for the first key that failed (misses only with misses=True), or None.
        Its bad_index is the key's index, .result this StoreResult."""
        errs = self.errors(misses)
        if not errs:
            return None
        k = errs[0]
        more = len(errs) - 1
        e = Error(k.errno, f"kvblk store {self.kind}: key {k.key!r} (index {k.index}): "
                  f"{_errno.errorcode.get(k.errno, k.errno)}: {k.error}"
                  + (f"; {more} more keys failed" if more else ""), k.index)
        e.result = self
        return e

    def raise_for_errors(self, misses=False):
        """Raise error() if there is one; return self otherwise."""
        e = self.error(misses)
        if e is not None:
            raise e
        return self

    def __repr__(self):
        return (f"<kvblk.StoreResult {self.kind} ok={self.ok} failed={self.failed} bytes={self.bytes} "
                f"elapsed_ns={self.elapsed_ns}>")


def _merge_cols(batches):
    cols = [b.columns() for b in batches]
    if len(cols) == 1:
        return cols[0]
    return tuple(np.concatenate([c[k] for c in cols]) for k in range(5))


# ------------------------------------------------------------------ the core

class _Core:
    """What Tickets and asyncio reapers share with a KVStore: the C handle and the outstanding
    batches. The KVStore holds the only strong reference besides outstanding Tickets, so
    dropping the KVStore closes the store (KVStore.__del__) with nothing keeping it alive."""

    __slots__ = ("c", "lock", "pending", "orphans", "reapers", "name", "max_keys", "max_meta",
                 "mem_align", "__weakref__")

    def __init__(self, c, name, max_keys, max_meta, mem_align):
        self.c = c
        self.mem_align = mem_align
        self.name = name
        self.max_keys = max_keys
        self.max_meta = max_meta
        self.lock = threading.Lock()
        self.pending = {}                         # C ticket -> (Ticket, part)
        self.orphans = {}                         # C ticket -> cqe taken before submit() registered it
        self.reapers = weakref.WeakKeyDictionary()  # asyncio loop -> _LoopReaper

    def route(self, cqes):
        """Finish the Tickets whose completions are in ``cqes`` (tuples from reap()); returns
        the Tickets that finished."""
        finished = []
        for c in cqes:
            tid = c[0]
            with self.lock:
                e = self.pending.pop(tid, None)
                if e is None:
                    self.orphans[tid] = c
                    continue
                t, part = e
                cbs = t._part_done(part, c)
            if cbs is not None:
                finished.append(t)
                _run_callbacks(t, cbs)
        return finished


def _run_callbacks(t, cbs):
    for cb in cbs:
        try:
            cb(t._result)
        except Exception:  # noqa: BLE001 - one bad callback must not lose the others
            import logging
            logging.getLogger("kvblk").exception("kvblk store: a completion callback raised")


class Ticket:
    """A submitted store batch (KVStore.submit_get() ...). Its destinations (sources) and
    results are held until its completion is taken: by wait(), KVStore.reap(), the asyncio
    helpers, or close(). Dropping the Ticket does not end the batch.

    id        -- the (first) C ticket.
    kind      -- "get", "put", "exists" or "delete".
    keys      -- the keys as given.
    user_data -- as given to submit_*().
    """

    __slots__ = ("_core", "kind", "keys", "user_data", "_parts", "_left", "_event", "_result",
                 "_callbacks", "_t0", "_wlock", "__weakref__")

    def __init__(self, core, kind, keys, user_data, batches, t0):
        self._core = core
        self.kind = kind
        self.keys = keys
        self.user_data = user_data
        self._parts = [[b, 0, None] for b in batches]  # [batch, C ticket, cqe]
        self._left = len(batches)
        self._event = threading.Event()
        self._result = None
        self._callbacks = []
        self._t0 = t0
        # One thread at a time waits in kvblk_kvstore_wait() for this batch: two waiters of one
        # ticket abort the process (notes/kvstore-from-python.md, 4); the others wait for _event.
        self._wlock = threading.Lock()

    @property
    def id(self):
        """The batch's (first) C ticket."""
        return self._parts[0][1]

    def _part_done(self, part, cqe):
        """Called with the core's lock held; returns the callbacks to run when the whole batch is
        over, else None."""
        p = self._parts[part]
        if p[2] is not None:
            return None
        p[2] = cqe
        self._left -= 1
        if self._left:
            return None
        self._finish()
        cbs, self._callbacks = self._callbacks, []
        return cbs

    def _finish(self):
        batches = [p[0] for p in self._parts]
        cqes = [p[2] for p in self._parts]
        cols = _merge_cols(batches)
        known = [c for c in cqes if isinstance(c, tuple)]
        path = backend = None
        elapsed = time.monotonic_ns() - self._t0
        if known:
            # The reads' path/backend of the first part that moved bytes (None when none did);
            # elapsed: the slowest part.
            withio = [c for c in known if c[5]]
            if withio:
                path = _PATHS[withio[0][7]] if withio[0][7] < len(_PATHS) else None
                backend = _BACKENDS[withio[0][8]] if withio[0][8] < len(_BACKENDS) else None
            elapsed = max(c[9] for c in known)
        self._result = StoreResult(self.kind, self.keys, batches, cols, elapsed, path, backend,
                                   self.user_data, self._core.name)
        for b in batches:
            b.release(self._core.c)
        self._event.set()

    def wait(self, timeout=None, strict=False):
        """Wait for the batch (GIL released) and return its StoreResult.

        timeout -- seconds; None waits without limit; 0 only checks.
        strict  -- raise kvblk.Error for the first key that failed other than a miss.
        Errors: WaitTimeout (errno ETIME, also a TimeoutError) when the time ran out (the batch
        stays outstanding); ValueError the store was closed (its batches were finished by
        close(): call wait() again for the result).
        """
        if self._result is None:
            self._wait(timeout)
        if strict:
            self._result.raise_for_errors()
        return self._result

    def _wait(self, timeout):
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        if self._wlock.acquire(blocking=False):
            try:
                self._wait_parts(deadline, timeout)
            finally:
                self._wlock.release()
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._event.wait(left):
            raise WaitTimeout(f"kvblk store: batch {self.id} did not complete within {timeout} s")

    def _wait_parts(self, deadline, timeout):
        core = self._core
        for i, p in enumerate(self._parts):
            if p[2] is not None:
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                cqe = core.c.wait(p[1], -1 if left is None else int(left * 1e9))
            except Error as e:
                if e.errno != _errno.ENOENT:
                    raise
                continue  # a reaper took it; it routes it to this Ticket
            except ValueError:
                if core.c.closed:
                    break  # close() finishes this Ticket
                raise
            if cqe is None:
                raise WaitTimeout(f"kvblk_kvstore_wait: batch {p[1]} did not complete within {timeout} s")
            with core.lock:
                core.pending.pop(p[1], None)
                cbs = self._part_done(i, cqe)
            if cbs is not None:
                _run_callbacks(self, cbs)

    def done(self):
        """True once the batch is over (its completion is taken here if it is ready)."""
        if self._result is None:
            try:
                self._wait(0)
            except WaitTimeout:
                return False
        return True

    def result(self):
        """The StoreResult if the batch is over, else None (never waits)."""
        return self._result

    def __repr__(self):
        state = "done" if self._result is not None else "outstanding"
        return f"<kvblk.store.Ticket {self.id} {self.kind} {len(self.keys)} keys {state}>"


class StoreBuffer:
    """Memory registered with the store's kvblk_dev (KVStore.register()): host memory becomes an
    io_uring fixed buffer or a kvblk.ko registration (pinned once), CUDA memory a nvidia-p2p or
    staged registration. Use it as a destination whole, or ``buf.slice(offset, nbytes)``. The
    object it was made from is held until unregister() (or close())."""

    _is_kvblk_buffer = True
    __slots__ = ("_core", "id", "addr", "nbytes", "kind", "note", "_dest", "__weakref__")

    def __init__(self, core, bid, dest, note):
        self._core, self.id, self._dest, self.note = core, bid, dest, note
        self.addr, self.nbytes, self.kind = dest.addr, dest.nbytes, dest.kind

    def slice(self, offset, nbytes):
        """``nbytes`` bytes at byte ``offset`` of this buffer, as a destination (source)."""
        if offset < 0 or nbytes <= 0 or offset + nbytes > self.nbytes:
            raise ValueError(f"slice [{offset}, {offset + nbytes}) is outside buffer {self.id} "
                             f"of {self.nbytes} bytes")
        return BufferSlice(self, offset, nbytes)

    def unregister(self):
        """kvblk_unregister_buffer(). Errors: kvblk.Error EBUSY while a batch uses it."""
        if self._dest is None:
            return
        if not self._core.c.closed:
            self._core.c.unregister_buffer(self.id)
        self._dest.release()
        self._dest = None

    @property
    def registered(self):
        """True until unregister() (or the store's close())."""
        return self._dest is not None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unregister()

    def __repr__(self):
        return f"<kvblk.StoreBuffer id={self.id} addr={self.addr:#x} nbytes={self.nbytes} kind={self.kind}>"


class KVStore:
    """A kvblk store: KV-cache objects by key on one or more drives.

    ``KVStore(paths, create=False, **options)`` opens (or creates) a store.

    paths     -- a drive or a list of drives: regular files (made with ``file_bytes`` when
                 they do not exist) or block devices (whole NVMe namespaces, partitions,
                 md/dm, NVMe-oF namespaces). Opening takes them in any order.
    create    -- False: open an existing store. True: make a new store (a drive that holds
                 a kvblk store is refused with EEXIST unless ``force``; anything else on it is
                 overwritten). "if_missing": create when none of the paths exists (files),
                 open when all exist (a block device, which always exists, needs create=True
                 once, or `kvblkctl store create`).
    Layout (create only):
    classes   -- slot size classes: a list of sizes (ints, or strings such as "4MiB"), or
                 (slot_bytes, weight) pairs, or {"slot_bytes": .., "weight": ..} dicts; an
                 object goes to the smallest class that holds it; weights share each drive's
                 data area (default: one class of 4 MiB slots). Sizes are multiples of 4096.
    file_bytes -- size of each drive that is a file not yet there (int or "64GiB"; created
                 and preallocated). A size the file system cannot give fails with ENOSPC and
                 leaves no file behind.
    journal_bytes -- journal ring per drive (0: 64 MiB, or 1/64 of a small drive).
    max_key_bytes -- longest key (1..1024; default 512).
    max_meta_bytes -- longest metadata per object (0..1024; default 128).
    force     -- overwrite a drive that holds a kvblk store.
    Serving (create and open):
    backend   -- "auto" (kvblk.ko where it serves, else io_uring), "uring", "threadpool",
                 "psync", "kmod", "uring_cmd".
    when_full -- "evict" (least recently used objects of the class make room; their keys
                 are reported by evicted()) or "refuse" (a put that finds no slot fails ENOSPC).
    readonly, degraded, recover -- KVBLK_KVSTORE_OPEN_RDONLY, _DEGRADED (open although drives
                 are missing), _RECOVER (open a damaged store, keeping what can be trusted).
    queue_depth, workers, max_cmd_bytes -- as kvblk.open() (0: libkvblk's defaults).
    max_batches -- batches outstanding at once (1..65536; 0: 256); a submit beyond it waits.
    drive_budget_bytes -- bytes of one get batch in flight per drive (0: 1 GiB).

    Every parameter is checked: a value of the wrong type raises TypeError, one out of range
    ValueError, both naming the parameter. The C library's errors raise kvblk.Error with its
    errno and kvblk_kvstore_last_error()'s text (EEXIST, ENOENT, ENOSPC, EBUSY: a drive is
    open in another store, EMEDIUMTYPE: not a kvblk store, EUCLEAN: damaged, EPROTONOSUPPORT:
    a newer format, ...).

    Threads: one KVStore may be used from any number of threads at once. Processes: a store
    belongs to the process that opened it: after fork() every call on the inherited object
    raises kvblk.Error(EBADFD), and close() frees nothing. Lifetime: close() (or leaving a
    ``with`` block) finishes every outstanding batch and closes the store; a KVStore dropped
    without close() is closed when it is collected (nothing else refers to it: no thread or
    event loop holds it).

    Batches of more than max_keys_per_batch keys (65536, libkvblk's max_descs) are split into
    several store batches, all in flight together; their results come back as one.
    """

    def __init__(self, paths, create=False, *, classes=None, file_bytes=0, journal_bytes=0,
                 max_key_bytes=0, max_meta_bytes=None, force=False, readonly=False, degraded=False,
                 recover=False, backend="auto", when_full="evict", queue_depth=0, workers=0,
                 max_batches=0, drive_budget_bytes=0, max_cmd_bytes=0):
        self._core = None
        paths = _paths(paths)
        if create not in (False, True, "if_missing"):
            raise (TypeError if not isinstance(create, (bool, str)) else ValueError)(
                f"KVStore: create must be False, True or 'if_missing', not {create!r}")
        cls = _classes(classes)
        file_bytes = parse_bytes("file_bytes", file_bytes)
        journal_bytes = parse_bytes("journal_bytes", journal_bytes)
        max_key_bytes = check_int("max_key_bytes", max_key_bytes, 0, _kvblk.KVSTORE_MAX_KEY)
        if max_meta_bytes is None:
            meta_c = 0
        else:
            meta_c = check_int("max_meta_bytes", max_meta_bytes, 0, _kvblk.KVSTORE_MAX_META)
            meta_c = _UINT32_MAX if meta_c == 0 else meta_c
        force = check_bool("force", force)
        readonly = check_bool("readonly", readonly)
        degraded = check_bool("degraded", degraded)
        recover = check_bool("recover", recover)
        backend = check_choice("backend", backend, _BACKENDS)
        when_full = check_choice("when_full", when_full, ("evict", "refuse"))
        queue_depth = check_int("queue_depth", queue_depth, 0, 4096)
        workers = check_int("workers", workers, 0, 64)
        max_batches = check_int("max_batches", max_batches, 0, _kvblk.KVSTORE_MAX_BATCHES)
        drive_budget_bytes = parse_bytes("drive_budget_bytes", drive_budget_bytes)
        max_cmd_bytes = parse_bytes("max_cmd_bytes", max_cmd_bytes)
        if create == "if_missing":
            there = [os.path.exists(p) for p in paths]
            if any(there) and not all(there):
                missing = [p for p, t in zip(paths, there) if not t]
                raise Error(_errno.ENOENT, f"KVStore: create='if_missing' found some drives and not "
                            f"others (missing: {', '.join(missing)}); a store is created over all of "
                            f"its drives at once")
            create = not all(there)
        if create and (readonly or degraded or recover):
            raise ValueError("KVStore: readonly, degraded and recover are for opening a store, "
                             "not for create=True")
        oflags = ((_kvblk.KVSTORE_OPEN_RDONLY if readonly else 0)
                  | (_kvblk.KVSTORE_OPEN_DEGRADED if degraded else 0)
                  | (_kvblk.KVSTORE_OPEN_RECOVER if recover else 0))
        c = _kvblk.KVStore(bool(create), paths, cls, file_bytes, journal_bytes, max_key_bytes, meta_c,
                           _kvblk.KVSTORE_CREATE_FORCE if force else 0, oflags,
                           _BACKENDS.index(backend), queue_depth, workers,
                           _kvblk.KVSTORE_REFUSE if when_full == "refuse" else _kvblk.KVSTORE_EVICT_LRU,
                           max_batches, drive_budget_bytes, max_cmd_bytes)
        info = c.info()
        self.paths = paths
        self._core = _Core(c, ",".join(paths), int(info.get("max_descs") or DEFAULT_MAX_KEYS_PER_BATCH),
                           int(info["max_meta_bytes"]), int(info.get("mem_align") or 4096))
        self._buffers = weakref.WeakSet()

    # --------------------------------------------------------------- batches
    @property
    def max_keys_per_batch(self):
        """Keys per C batch (the store's kvblk_dev max_descs); larger batches are split."""
        return self._core.max_keys

    def _make(self, kind, keys, dests, metas, meta):
        """The C batches (one per max_keys_per_batch keys) of one call."""
        core = self._core
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys must be a list of keys (str or bytes), not a single key")
        if not isinstance(keys, (list, tuple)):
            keys = list(keys)
        n = len(keys)
        if n == 0:
            raise ValueError("a batch needs at least one key")
        if dests is not None:
            if not isinstance(dests, (list, tuple)):
                dests = list(dests)
            if len(dests) != n:
                raise ValueError(f"{n} keys but {len(dests)} {'dests' if kind == GET else 'sources'}")
            dests = self._dest_refs(dests)
        if metas is not None:
            if not isinstance(metas, (list, tuple)):
                metas = list(metas)
            if len(metas) != n:
                raise ValueError(f"{n} keys but {len(metas)} metas")
        room = 0
        if kind in (GET, EXISTS) and meta:
            room = core.max_meta if meta is True else check_int("meta", meta, 0, _kvblk.KVSTORE_MAX_META)
        step = core.max_keys
        if n > step and kind in (PUT, DELETE) and len(set(keys)) != n:
            raise ValueError("the same key twice in one put or delete batch")

        def build(s, e):
            whole = s == 0 and e == n
            try:
                return core.c.make_batch(
                    kind, keys if whole else keys[s:e],
                    None if dests is None else (dests if whole else dests[s:e]),
                    None if metas is None else (metas if whole else metas[s:e]), room)
            except Error as err:
                raise self._named(err, kind, keys, s) from None
            except TypeError as err:
                m = re.match(r"descriptor (\d+): (.*)", str(err), re.S)
                if not m:
                    raise
                i = int(m.group(1)) + s
                what = "dests" if kind == GET else "sources"
                raise TypeError(f"{what}[{i}] (key {keys[i]!r}): {m.group(2)}") from None

        batches = []
        try:
            for s in range(0, n, step):
                e = min(n, s + step)
                b = build(s, e)
                batches.append(b)
        except BaseException:
            for b in batches:
                b.release(core.c)
            raise
        return batches

    def _dest_refs(self, dests):
        if _REF_TYPES.isdisjoint(map(type, dests)):
            return dests
        out = None
        for i, d in enumerate(dests):
            if isinstance(d, (StoreBuffer, BufferSlice)):
                if out is None:
                    out = list(dests)
                buf = d if isinstance(d, StoreBuffer) else d.buffer
                if not isinstance(buf, StoreBuffer) or buf._core is not self._core:
                    raise ValueError(f"dests[{i}] is a buffer registered elsewhere (a kvblk.Device or "
                                     f"another store); register it with this store")
                if buf._dest is None:
                    raise ValueError(f"dests[{i}]: buffer {buf.id} was unregistered")
                out[i] = ((buf.id, 0, buf.nbytes) if isinstance(d, StoreBuffer)
                          else (buf.id, d.offset, d.nbytes))
        return dests if out is None else out

    @staticmethod
    def _named(err, kind, keys, offset):
        """kvblk.Error ``err`` of a C batch starting at key ``offset``, saying which key."""
        i = err.bad_index
        if i is not None and i >= 0:
            i += offset
            msg = err.strerror or ""
            msg = re.sub(r"^(descriptor|op) \d+: ", "", msg)
            msg = re.sub(r"^kvblk_kvstore_submit: op \d+: ", "kvblk_kvstore_submit: ", msg)
            k = keys[i] if i < len(keys) else None
            e = Error(err.errno, f"kvblk store {_KIND_NAMES[kind]}: key {k!r} (index {i}): {msg}", i)
            e.result = getattr(err, "result", None)
            return e
        return err

    def _run(self, kind, keys, dests, metas, meta, flags=0, strict=False):
        if flags:
            # The C synchronous calls take no flags: submit, and wait for this Ticket.
            return self._submit(kind, keys, dests, metas, meta, flags, 0, False).wait(strict=strict)
        batches = self._make(kind, keys, dests, metas, meta)
        c = self._core.c
        t0 = time.monotonic_ns()
        off = 0
        try:
            for b in batches:
                try:
                    c.run(b)
                except Error as err:
                    raise self._named(err, kind, keys, off) from None
                off += len(b)
        finally:
            for b in batches:
                b.release(c)
        r = StoreResult(kind, keys, batches, _merge_cols(batches), time.monotonic_ns() - t0,
                        store_name=self._core.name)
        if strict:
            r.raise_for_errors()
        return r

    def get(self, keys, dests, *, meta=True, verify=False, priority=False, strict=False):
        """Read the objects of ``keys`` into ``dests`` (one destination per key) and return a
        StoreResult (GIL released while waiting).

        A key is a hit (status 0) when its whole object is at its destination and, for host
        memory, its CRC32C matched; a miss is -ENOENT; a destination smaller than the object
        -EMSGSIZE (result length says how large the object is); a checksum mismatch -EBADMSG
        (the object is dropped); a failed drive -ENODEV; an I/O error -EIO.
        meta     -- True: return each object's metadata (result.meta(i)); an int: at most that
                    many bytes of it; False: none.
        verify   -- KVBLK_KVSTORE_SUBMIT_VERIFY: device-memory objects are also read into host
                    memory and their CRC32C checked.
        priority -- ahead of queued batches.
        strict   -- raise kvblk.Error for the first key that failed other than a miss.
        Errors (nothing read): kvblk.Error EINVAL (a key empty or longer than max_key_bytes, a
        read-only destination), TypeError (a key or destination of an unsupported type),
        ValueError (keys and dests of different lengths, the store closed).
        """
        flags = ((_kvblk.KVSTORE_SUBMIT_VERIFY if verify else 0)
                 | (_kvblk.KVSTORE_SUBMIT_PRIORITY if priority else 0))
        return self._run(GET, keys, dests, None, meta, flags, strict)

    def put(self, keys, sources, *, metas=None, strict=False):
        """Store ``sources`` under ``keys`` (replacing what a key held) and return a StoreResult
        once every object is durable and visible (or failed).

        sources -- host memory: numpy arrays, CPU tensors, bytes, anything with the buffer
                   protocol or DLPack; each 1..the largest class's slot_bytes.
        metas   -- None, or one bytes (or None) per key: up to max_meta_bytes stored with the
                   object, returned by get and exists.
        A key's status: 0 stored; -ENOSPC no slot (when_full="refuse", or every slot of its
        class is being read); -ENODEV no healthy drive; -EIO a write failed (the key keeps its
        older object). Evictions made for the put are reported by evicted().
        Errors (nothing stored): kvblk.Error EINVAL (a key or metadata too long, an object
        larger than the largest class, the same key twice), EROFS (opened readonly),
        EOPNOTSUPP (device memory as a source).
        """
        return self._run(PUT, keys, sources, metas, False, 0, strict)

    def exists(self, keys, *, meta=True):
        """Which keys are present (answered from the index): status 0 present, -ENOENT absent,
        -ENODEV on a failed drive; length and metadata of the present ones."""
        return self._run(EXISTS, keys, None, None, meta)

    def delete(self, keys):
        """Delete keys (durable when the call returns): status 0 deleted, -ENOENT absent."""
        return self._run(DELETE, keys, None, None, False)

    # --------------------------------------------------------- asynchronous API
    def _submit(self, kind, keys, dests, metas, meta, flags, user_data, nonblock):
        batches = self._make(kind, keys, dests, metas, meta)
        core = self._core
        t0 = time.monotonic_ns()
        t = Ticket(core, _KIND_NAMES[kind], keys, user_data, batches, t0)
        f = flags | (_kvblk.KVSTORE_SUBMIT_NONBLOCK if nonblock else 0)
        off = 0
        for i, b in enumerate(batches):
            try:
                tid = core.c.submit(b, f, user_data)
            except BaseException as err:
                # Parts already queued run to the end (their memory is held until then).
                for j in range(i):
                    try:
                        t._parts[j][2] = core.c.wait(t._parts[j][1], -1) or True
                    except Error:
                        t._parts[j][2] = True
                for bb in batches:
                    bb.release(core.c)
                if isinstance(err, Error):
                    raise self._named(err, kind, keys, off) from None
                raise
            t._parts[i][1] = tid
            off += len(b)
        cbs_all = []
        with core.lock:
            for i, p in enumerate(t._parts):
                cqe = core.orphans.pop(p[1], None)
                if cqe is None:
                    core.pending[p[1]] = (t, i)
                else:  # a reaper on another thread took it before it was registered
                    cbs = t._part_done(i, cqe)
                    if cbs is not None:
                        cbs_all = cbs
        if cbs_all:
            _run_callbacks(t, cbs_all)
        return t

    def submit_get(self, keys, dests, *, meta=True, verify=False, priority=False, nonblock=False,
                   user_data=0):
        """Queue a get batch (as get()) and return its Ticket at once. nonblock: kvblk.Error
        EAGAIN instead of waiting while max_batches batches are outstanding."""
        flags = ((_kvblk.KVSTORE_SUBMIT_VERIFY if verify else 0)
                 | (_kvblk.KVSTORE_SUBMIT_PRIORITY if priority else 0))
        return self._submit(GET, keys, dests, None, meta, flags, user_data, nonblock)

    def submit_put(self, keys, sources, *, metas=None, nonblock=False, user_data=0):
        """Queue a put batch (as put()); the sources must stay unchanged until it completes."""
        return self._submit(PUT, keys, sources, metas, False, 0, user_data, nonblock)

    def submit_exists(self, keys, *, meta=True, nonblock=False, user_data=0):
        """Queue an exists batch (answered at once: its completion is ready when this returns)."""
        return self._submit(EXISTS, keys, None, None, meta, 0, user_data, nonblock)

    def submit_delete(self, keys, *, nonblock=False, user_data=0):
        """Queue a delete batch."""
        return self._submit(DELETE, keys, None, None, False, 0, user_data, nonblock)

    def reap(self, max=64, min_complete=0, timeout=None):  # noqa: A002 - as Device.reap()
        """Take up to ``max`` batch completions (kvblk_kvstore_reap(); GIL released while
        waiting) and return the Tickets that finished (a batch split in parts finishes with
        its last part). min_complete: wait until that many are ready (0: never wait);
        timeout: seconds (None: no limit). Completions taken by Ticket.wait() never show up."""
        to = -1 if timeout is None else int(max_(0.0, timeout) * 1e9)
        cqes = self._core.c.reap(max, min_complete, to)
        return self._core.route(cqes)

    def fileno(self):
        """The store's eventfd (kvblk_kvstore_event_fd()): readable while completions wait to be
        reaped; reap() clears it when it empties the queue."""
        return self._core.c.event_fd()

    async def get_async(self, keys, dests, **kw):
        """``await store.get_async(keys, dests)``: submit_get(), then wait on the eventfd without
        blocking the event loop; returns the StoreResult. Keywords as submit_get() plus strict.
        Cancelling the awaiting task does not stop the batch (the store has no cancel): its
        memory stays held until it completes."""
        from . import _kvstore_aio
        return await _kvstore_aio.run(self, GET, keys, dests, None, kw)

    async def put_async(self, keys, sources, **kw):
        """``await store.put_async(keys, sources)``: as put(), without blocking the event loop."""
        from . import _kvstore_aio
        return await _kvstore_aio.run(self, PUT, keys, sources, kw.pop("metas", None), kw)

    async def exists_async(self, keys, **kw):
        """``await store.exists_async(keys)``: as exists()."""
        from . import _kvstore_aio
        return await _kvstore_aio.run(self, EXISTS, keys, None, None, kw)

    async def delete_async(self, keys, **kw):
        """``await store.delete_async(keys)``: as delete()."""
        from . import _kvstore_aio
        return await _kvstore_aio.run(self, DELETE, keys, None, None, kw)

    async def wait_async(self, ticket, strict=False):
        """``await store.wait_async(ticket)``: the StoreResult of a Ticket from submit_*(),
        waited for on the store's eventfd without blocking the event loop. strict: raise
        kvblk.Error for the first key that failed other than a miss."""
        from . import _kvstore_aio
        return await _kvstore_aio.wait_ticket(self, ticket, strict)

    def _on_done(self, t, cb):
        """Call cb(result) once ``t`` is over: now if it is, else from whoever finishes it."""
        with self._core.lock:
            if t._result is None:
                t._callbacks.append(cb)
                return
        cb(t._result)

    # ------------------------------------------------------------ the store
    def info(self):
        """kvblk_kvstore_get_info() as a dict: format_version, drives, drives_ok, uuid,
        max_key_bytes, max_meta_bytes, objects, bytes_stored, journal_bytes, readonly,
        when_full, classes (slot_bytes, slots, slots_free, objects each), and the store's
        kvblk_dev: backend, backend_reason, max_descs, queue_depth, workers."""
        return self._core.c.info()

    def drive_info(self, index):
        """kvblk_kvstore_drive_info() of drive ``index``: state ("ok", "failed", "missing"),
        path, uuid, bytes, objects, slots, slots_free, bytes_read/written, read/write_errors,
        why_failed."""
        return self._core.c.drive_info(check_int("index", index, 0, _UINT32_MAX))

    def drives(self):
        """drive_info() of every drive."""
        return [self._core.c.drive_info(i) for i in range(self.info()["drives"])]

    def stats(self):
        """kvblk_kvstore_get_stats() as a dict: gets, puts, exists, deletes, hits, misses,
        checksum_failures, get_errors, put_errors, evictions, evictions_dropped, bytes_read,
        bytes_written, journal_commits, checkpoints, flushes, degraded."""
        return self._core.c.stats()

    def reset_stats(self):
        """kvblk_kvstore_reset_stats()."""
        self._core.c.reset_stats()

    def evicted(self, max=0, decode=False):  # noqa: A002
        """Take the keys eviction removed since the last call (oldest first; kvblk_kvstore_evicted()),
        as EvictedKey tuples (key, drive, length, gen). max: at most that many (0: all).
        decode: keys as str (UTF-8; bytes kept when they do not decode)."""
        return [EvictedKey(_decode(k) if decode else k, d, ln, g)
                for k, d, ln, g in self._core.c.evicted(check_int("max", max, 0, 1 << 62))]

    def keys(self, decode=False, batch=4096):
        """Iterate over the keys present (kvblk_kvstore_list()), as EvictedKey-shaped tuples
        (key, drive, length, gen). A key present for the whole walk is seen exactly once."""
        cursor = 0
        while True:
            got, cursor = self._core.c.list_keys(cursor, batch)
            for k, d, ln, g in got:
                yield EvictedKey(_decode(k) if decode else k, d, ln, g)
            if cursor == 0 or not got:
                return

    def __len__(self):
        return int(self.info()["objects"])

    def check(self, data=False, repair=False):
        """kvblk_kvstore_check() (an fsck): the index against itself, and with data=True every
        object's bytes against its CRC32C; repair=True deletes what fails. Returns the report
        dict (bad, objects, bad_objects, bytes_checked, repaired, superblocks_bad,
        checkpoints_bad, journal_tail_discarded, first_problem)."""
        flags = ((_kvblk.KVSTORE_CHECK_DATA if check_bool("data", data) else 0)
                 | (_kvblk.KVSTORE_CHECK_REPAIR if check_bool("repair", repair) else 0))
        return self._core.c.check(flags)

    def register(self, obj, *, kind=None):
        """Register ``obj`` (anything kvblk.resolve() takes) with the store's kvblk_dev, once,
        for many batches: a StoreBuffer. kind: None (from the object), "host", "cuda". Host
        memory is pinned (io_uring fixed buffer / kvblk.ko registration) while registered.
        Errors: kvblk.Error with kvblk_register_buffer()'s errno (EFAULT, EOPNOTSUPP, ENOSPC...)."""
        d = _kvblk.resolve_dest(obj, True, -1)
        k = d.kind if kind is None else _MEM_KINDS[check_choice("kind", kind, tuple(_MEM_KINDS))]
        bid, note = self._core.c.register_buffer(k, d.addr, d.nbytes)
        b = StoreBuffer(self._core, bid, d, note)
        self._buffers.add(b)
        return b

    @staticmethod
    def identify(path):
        """What the superblock of drive ``path`` says, without opening the store (no lock taken,
        nothing written; kvblk_kvstore_identify()): format_version, drive_index, drive_count,
        store_uuid, drive_uuid, drive_bytes, created_ns, journal_bytes, max_key_bytes,
        max_meta_bytes, classes (slot_bytes, slots on this drive), live_pid (a process that has
        the store open for writing, or 0), superblocks_ok. Errors: kvblk.Error EMEDIUMTYPE not
        a store, EUCLEAN damaged, EPROTONOSUPPORT newer, and open(2)'s."""
        return _kvblk.kvstore_identify(os.fsdecode(os.fspath(path)))

    @staticmethod
    def peek_stats(path):
        """The live counters of the store drive ``path`` belongs to, as the process that has it
        open for writing counts them (kvblk_kvstore_peek_stats()): (stats dict as stats(),
        [drive dicts as drive_info(), without path, objects and slots]). Errors: kvblk.Error
        ESRCH no process has it open for writing, and identify()'s."""
        return _kvblk.kvstore_peek_stats(os.fsdecode(os.fspath(path)))

    @staticmethod
    def crc32c(data, crc=0):
        """The store's object checksum (CRC32C, kvblk_kvstore_crc32c()) of a bytes-like ``data``."""
        return _kvblk.kvstore_crc32c(data, crc)

    # ----------------------------------------------------------------- close
    @property
    def closed(self):
        """True once close() ran (or the open failed)."""
        return self._core is None or self._core.c.closed

    def close(self, finish=False):
        """Close the store: batches running are waited for, batches queued and not started end
        -ECANCELED per key (finish=True: every outstanding batch runs to its end first), a
        checkpoint is written; every Ticket is then done. Waits for calls in progress on other
        threads. Idempotent. In a child made by fork(): frees nothing."""
        core = self._core
        if core is None or core.c.closed:
            return
        if core.c.forked:
            core.c.close()
            return
        if finish:
            with core.lock:
                tickets = {id(t): t for t, _ in core.pending.values()}
            for t in tickets.values():
                try:
                    t.wait()
                except (Error, ValueError):
                    pass
        for r in list(core.reapers.values()):
            r.detach()
        core.c.close()
        with core.lock:
            tickets = {id(t): t for t, _ in core.pending.values()}
            core.pending.clear()
            core.orphans.clear()
            done = []
            for t in tickets.values():
                for p in t._parts:
                    if p[2] is None:
                        p[2] = True  # finished by close: its results are in its arrays
                t._left = 0
                t._finish()
                cbs, t._callbacks = t._callbacks, []
                done.append((t, cbs))
        for t, cbs in done:
            _run_callbacks(t, cbs)
        for b in list(self._buffers):
            if b._dest is not None:
                b._dest.release()
                b._dest = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_core", None) is not None:
            try:
                self.close()
            except Exception:  # noqa: BLE001 - nothing to report to from a finalizer
                pass

    def __repr__(self):
        return f"<kvblk.KVStore {','.join(getattr(self, 'paths', []))!r}{' closed' if self.closed else ''}>"


max_ = max
_REF_TYPES = frozenset((StoreBuffer, BufferSlice))


class EvictedKey(tuple):
    """(key, drive, length, gen): a key handed back by evicted() or keys()."""

    __slots__ = ()

    def __new__(cls, key, drive, length, gen):
        return tuple.__new__(cls, (key, drive, length, gen))

    key = property(lambda self: self[0], doc="The key (bytes, or str with decode=True).")
    drive = property(lambda self: self[1], doc="The drive it was on.")
    length = property(lambda self: self[2], doc="Its object's length.")
    gen = property(lambda self: self[3], doc="Its object's generation (docs/kvstore-format.md).")


def _decode(k):
    try:
        return k.decode("utf-8")
    except UnicodeDecodeError:
        return k

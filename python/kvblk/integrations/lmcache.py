# SPDX-License-Identifier: MIT
"""LMCache multi-process native connector over the kvblk store.

``KvblkConnector`` implements the contract LMCache's ``native_plugin`` L2 adapter type
expects (``NativeConnectorL2Adapter`` wraps it), by duck typing; LMCache is never imported.
It is a thin adapter over :class:`kvblk.KVStore`: the store (libkvblk, C) owns the slots, the
crash-safe index, the checksums, the placement over drives and every byte of I/O; this module
turns LMCache's batches into store batches and the store's per-key results into LMCache's
completions. Configure it in LMCache as (docs/engines.md has the full example)::

    {"type": "native_plugin",
     "module_path": "kvblk.integrations.lmcache",
     "class_name": "KvblkConnector",
     "adapter_params": {"path": "/var/lib/kvblk/lmcache.kvs", "file_bytes": "64GiB",
                        "classes": ["4MiB", "32MiB"]}}

The contract
------------
``event_fd()``
    An eventfd that is readable while completions wait (the store's eventfd).
``submit_batch_get(keys, buffers)``, ``submit_batch_set(keys, buffers)``,
``submit_batch_exists(keys)``, ``submit_batch_delete(keys)``
    Check the input, queue the batch and return its future id (an int, 1, 2, 3, ... never
    reused). Bad input raises before anything is queued (below). Submissions never wait for
    I/O (LMCache submits while holding its adapter lock).
``drain_completions()``
    Clears the eventfd and returns every finished batch as a tuple
    ``(future_id, ok, error, result_bools)``:

    * get: ``result_bools[i]`` is True when chunk i was read into buffer i whole and its
      CRC32C matched. A missing key is False and keeps ``ok`` True (LMCache's connectors
      report misses so). Anything else is False with ``ok`` False and ``error`` saying
      which key and why: a stored chunk of another size than its buffer ("key 'k': stored
      chunk is 33554432 bytes, its buffer 4194304": never a silent miss), a checksum
      mismatch (the chunk is dropped), an I/O error, a failed drive. A buffer whose flag is
      False holds unspecified bytes.
    * set: ``result_bools[i]`` True when chunk i is durable and indexed; ``ok`` True when
      every chunk was stored, else ``error`` says which keys failed and why (store full
      with when_full="refuse", I/O error, failed drive). The other chunks are stored.
    * exists: ``result_bools[i]`` True when key i is present (durable).
    * delete: ``result_bools[i]`` True when key i was present and is now gone: deleted now,
      or evicted by the store since it was stored (see Evictions).
``close()``
    Finishes the batches already queued (their completions are then dropped, as LMCache's
    connectors do) and closes the store. Idempotent.

Keys are ``str`` (LMCache's ``model@rank@group@hash[@salt]`` strings; stored as UTF-8) or
``bytes``, at most ``max_key_bytes`` (512 by default) bytes. Buffers are anything exposing
the buffer protocol (memoryview, bytearray, numpy arrays, ctypes arrays such as LMCache's
``MemoryObj.byte_array``), C-contiguous. Chunks of different sizes may share one batch (4 MiB
per-rank chunks and 32 MiB whole chunks go to the store's slot classes of those sizes).

Bad input raises at submit, nothing queued, no future id used: ``ValueError`` for an empty
batch, as many keys as buffers not given, an empty buffer, a chunk larger than the store's
largest class (set), a read-only buffer (get), a non-contiguous buffer, an empty key or a
key longer than ``max_key_bytes``, the same key twice in a set or delete; ``TypeError`` for
a key that is neither str nor bytes or a buffer without the buffer protocol;
``RuntimeError`` after ``close()``.

Batch size. The store takes at most 65,536 keys per C batch (its kvblk_dev's max_descs,
libkvblk's default, which kvblk_kvstore_open() does not let a caller raise); a larger LMCache
batch is split into several store batches, in flight together, and reported as one
completion. ``max_batches`` (default 65,536, the most the store allows) bounds the batches
outstanding; a submit beyond it waits for one to be drained.

Evictions. With ``when_full="evict"`` (the default) the store evicts least-recently-used
chunks of a class to make room. LMCache's native L2 adapter has no channel for a connector
to report evictions: it keeps its own byte accounting from store completions
(``max_capacity_gb``) and evicts by calling ``submit_batch_delete``, counting a key's bytes
free only when the delete reports True. So the connector reports evictions two ways:

* ``drain_evicted()`` returns the keys the store evicted since the last call (documented,
  for engines and tools that can use it);
* a ``submit_batch_delete`` of a key the store evicted (and that was not stored again since)
  reports True, so LMCache's accounting frees its bytes when its own policy gets to it.

Set LMCache's ``max_capacity_gb`` a little below the store's capacity and the store never
needs to evict; with ``when_full="refuse"`` a set into a full class fails for that chunk
instead.

Lifetime. The connector has no threads of its own and nothing refers to it but its caller:
dropped without ``close()``, it is collected and its store closed (the drives' flocks
released), so the same store can be opened again in the same process.
"""

from __future__ import annotations

import collections
import errno as _errno
import functools
import logging
import os
import threading
import weakref
from typing import List, Optional, Sequence, Tuple

__all__ = ["KvblkConnector"]

_log = logging.getLogger(__name__)

Completion = Tuple[int, bool, str, Optional[List[bool]]]

_WHO = "KvblkConnector"
_MAX_EVICTED_KEPT = 1 << 20
_LEGACY_IGNORED = {
    "record_bytes": "the store's index records are the store's (max_key_bytes sets the longest key)",
    "read_workers": "gets are issued by the store, all in flight at once",
    "staging_bytes": "the store reads unaligned buffers through libkvblk's bounce blocks",
    "verify_on_open": "the store checks every chunk's CRC32C on every get (kvblkctl store check "
                      "--data checks them all)",
}


class KvblkConnector:
    """LMCache native connector storing chunks in a kvblk store (kvblk.KVStore).

    Args (adapter_params in LMCache's config; every one checked: a value of the wrong type
    raises TypeError, one out of range ValueError, both naming it):
        path: the store's drive: a regular file or block device; or
        paths: several drives (a list); the store spreads chunks over them.
        slot_bytes: the chunk size, for a store of one class (rounded up to 4096). When the
            store exists, a chunk of this size must fit its largest class.
        classes: slot classes for chunks of several sizes, e.g. ["4MiB", "32MiB"] (see
            kvblk.KVStore). Used when the store is created.
        file_bytes (alias create_bytes): size of each drive that is a file and does not exist
            yet: it is created with the store (int, or a string such as "64GiB"). A size the
            file system cannot give fails cleanly and leaves no file behind.
        format: make a new store even over a drive that holds one or anything else (destroys
            it). Without it a store is created only on files that do not exist (file_bytes).
        when_full: "evict" (LRU) or "refuse".
        backend: kvblk backend ("auto", "uring", "threadpool", "psync", "kmod").
        max_key_bytes, max_meta_bytes, journal_bytes: as kvblk.KVStore (create only).
        max_batches: store batches outstanding (1..65536; default 65536).
        queue_depth, workers, drive_budget_bytes: as kvblk.KVStore.
        buffered: must be False (the store always uses O_DIRECT; a file system without it,
            such as tmpfs, cannot hold a store).
        record_bytes, read_workers, staging_bytes, verify_on_open: accepted from earlier
            configurations and ignored (logged): the store does what they set.

    Raises:
        kvblk.Error: the store could not be opened or created (errno and the library's
            reason: ENOENT no such store and no file_bytes, EMEDIUMTYPE the drive holds no
            store (pass format=True), EBUSY open in another connector, ENOSPC too small...).
        TypeError, ValueError: a parameter of the wrong type or out of range.
    """

    def __init__(self, path=None, slot_bytes=None, *, paths=None, classes=None, file_bytes=None,
                 create_bytes=None, format=False, when_full="evict", backend="auto",
                 max_key_bytes=None, max_meta_bytes=None, journal_bytes=None, max_batches=65536,
                 queue_depth=0, workers=0, drive_budget_bytes=0, buffered=False, **legacy):
        import kvblk
        from kvblk import _kvstore as ks

        self._closed = True
        self._store = None
        unknown = set(legacy) - set(_LEGACY_IGNORED)
        if unknown:
            raise TypeError(f"{_WHO}: unknown parameter(s) {', '.join(sorted(unknown))}")
        for k in sorted(legacy):
            _log.warning("%s: %s is no longer used: %s", _WHO, k, _LEGACY_IGNORED[k])
        if (path is None) == (paths is None):
            raise TypeError(f"{_WHO}: give path (one drive) or paths (a list of drives)")
        drives = ks._paths(path if paths is None else paths, _WHO)
        if file_bytes is not None and create_bytes is not None:
            raise TypeError(f"{_WHO}: give file_bytes or create_bytes (its old name), not both")
        fb = file_bytes if file_bytes is not None else create_bytes
        fb = 0 if fb is None else ks.parse_bytes("file_bytes", fb, lo=1, who=_WHO)
        if slot_bytes is not None:
            slot_bytes = ks.parse_bytes("slot_bytes", slot_bytes, lo=1, hi=1 << 40, who=_WHO)
        if classes is not None and slot_bytes is not None:
            raise TypeError(f"{_WHO}: give slot_bytes (one class) or classes, not both")
        cls = ks._classes(classes, _WHO) if classes is not None else None
        if slot_bytes is not None:
            a = kvblk._kvblk.KVSTORE_SLOT_ALIGN
            cls = [((slot_bytes + a - 1) // a * a, 1)]
        format = ks.check_bool("format", format, _WHO)
        if ks.check_bool("buffered", buffered, _WHO):
            raise ValueError(f"{_WHO}: buffered=True is not supported: the kvblk store always uses "
                             f"O_DIRECT (a file system that refuses it, such as tmpfs, cannot hold a store)")
        opts = dict(
            when_full=ks.check_choice("when_full", when_full, ("evict", "refuse"), _WHO),
            backend=ks.check_choice("backend", backend, list(kvblk._kvblk.BACKEND_NAMES), _WHO),
            max_batches=ks.check_int("max_batches", max_batches, 1, kvblk._kvblk.KVSTORE_MAX_BATCHES, _WHO),
            queue_depth=ks.check_int("queue_depth", queue_depth, 0, 4096, _WHO),
            workers=ks.check_int("workers", workers, 0, 64, _WHO),
            drive_budget_bytes=ks.parse_bytes("drive_budget_bytes", drive_budget_bytes, who=_WHO),
        )
        layout = dict(file_bytes=fb)
        if cls:
            layout["classes"] = cls
        if max_key_bytes is not None:
            layout["max_key_bytes"] = ks.check_int("max_key_bytes", max_key_bytes, 1,
                                                   kvblk._kvblk.KVSTORE_MAX_KEY, _WHO)
        if max_meta_bytes is not None:
            layout["max_meta_bytes"] = ks.check_int("max_meta_bytes", max_meta_bytes, 0,
                                                    kvblk._kvblk.KVSTORE_MAX_META, _WHO)
        if journal_bytes is not None:
            layout["journal_bytes"] = ks.parse_bytes("journal_bytes", journal_bytes, who=_WHO)

        if format:
            st = kvblk.KVStore(drives, create=True, force=True, **layout, **opts)
        elif all(os.path.exists(p) for p in drives) or not fb:
            st = kvblk.KVStore(drives, create=False, **opts)
        else:
            st = kvblk.KVStore(drives, create="if_missing", **layout, **opts)
        info = st.info()
        largest = info["classes"][-1]["slot_bytes"]
        if slot_bytes is not None and slot_bytes > largest:
            st.close()
            raise ValueError(f"{_WHO}: slot_bytes {slot_bytes} does not fit this store's largest "
                             f"class ({largest} bytes); make a new store (format=True) to change it")
        self.paths = drives
        self._store = st
        self._largest = largest
        self._max_key = info["max_key_bytes"]
        self._lock = threading.Lock()
        self._next_fid = 1
        self._done: "collections.deque[Completion]" = collections.deque()
        self._evicted: "collections.OrderedDict[bytes, None]" = collections.OrderedDict()
        self._evicted_new: List[bytes] = []
        self._draining = threading.local()
        self._counters = collections.Counter()
        self._closed = False

    # ------------------------------------------------------------- contract

    def event_fd(self) -> int:
        """The eventfd that is readable while completions wait (see the module doc)."""
        self._check_open()
        return self._store.fileno()

    def submit_batch_get(self, keys: Sequence, buffers: Sequence) -> int:
        """Queue reading chunk i into buffer i; returns the future id."""
        ks = self._keys(keys, False)
        mvs = self._buffers(ks, buffers, for_get=True)
        return self._submit("get", ks, lambda: self._store.submit_get(ks, mvs, meta=False),
                            [m.nbytes for m in mvs])

    def submit_batch_set(self, keys: Sequence, buffers: Sequence) -> int:
        """Queue storing buffer i as chunk i (replacing what the key held); returns the future id."""
        ks = self._keys(keys, True)
        mvs = self._buffers(ks, buffers, for_get=False)
        return self._submit("set", ks, lambda: self._store.submit_put(ks, mvs), None)

    def submit_batch_exists(self, keys: Sequence) -> int:
        """Queue an existence check (answered from the store's index at once); returns the future id."""
        ks = self._keys(keys, False)
        return self._submit("exists", ks, lambda: self._store.submit_exists(ks, meta=False), None)

    def submit_batch_delete(self, keys: Sequence) -> int:
        """Queue deleting the keys (durable when completed); returns the future id."""
        ks = self._keys(keys, True)
        return self._submit("delete", ks, lambda: self._store.submit_delete(ks), None)

    def drain_completions(self) -> List[Completion]:
        """Clear the eventfd and return every completion that finished since the last drain."""
        if self._closed:
            return []
        self._draining.on = True
        try:
            while True:
                got = self._store.reap(1024, 0, 0)  # routes: _on_done() queues each finished batch
                if len(got) < 1024:
                    break
            self._take_evictions()
        except Exception as e:  # noqa: BLE001 - the store closed under us; LMCache logs and goes on
            if self._closed:
                return []
            raise e
        finally:
            self._draining.on = False
        with self._lock:
            out = list(self._done)
            self._done.clear()
        return out

    def close(self) -> None:
        """Finish queued batches, then close the store. Idempotent."""
        if self._closed:
            return
        self._closed = True
        st, self._store = self._store, None
        if st is not None:
            st.close(finish=True)
        with self._lock:
            self._done.clear()

    def __enter__(self) -> "KvblkConnector":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to from a finalizer
            pass

    # ------------------------------------------------------------ evictions

    def drain_evicted(self) -> List:
        """The keys the store evicted to make room since the last call, oldest first (str for
        keys that decode as UTF-8, else bytes). A delete of such a key reports True until the
        key is stored again."""
        if self._closed:
            return []
        self._take_evictions()
        with self._lock:
            new, self._evicted_new = self._evicted_new, []
        return [_decode(k) for k in new]

    def _take_evictions(self):
        ev = self._store.evicted()
        if not ev:
            return
        with self._lock:
            for e in ev:
                self._evicted[e.key] = None
                self._evicted.move_to_end(e.key)
                self._evicted_new.append(e.key)
            while len(self._evicted) > _MAX_EVICTED_KEPT:
                self._evicted.popitem(last=False)
            if len(self._evicted_new) > _MAX_EVICTED_KEPT:
                del self._evicted_new[:len(self._evicted_new) - _MAX_EVICTED_KEPT]
            self._counters["evictions"] += len(ev)

    # ----------------------------------------------------------- reporting

    def stats(self) -> dict:
        """The store's counters (kvblk.KVStore.stats()) plus the connector's: size_mismatches
        (gets whose stored chunk was not its buffer's size), evictions (evicted keys drained),
        chunks (keys present), slot_bytes (the largest class)."""
        self._check_open()
        d = dict(self._store.stats())
        with self._lock:
            d.update(self._counters)
        d.setdefault("size_mismatches", 0)
        d.setdefault("evictions", 0)
        info = self._store.info()
        d["chunks"] = info["objects"]
        d["slot_bytes"] = self._largest
        return d

    def info(self) -> dict:
        """kvblk.KVStore.info() of the store."""
        self._check_open()
        return self._store.info()

    @property
    def store(self):
        """The kvblk.KVStore underneath (for tools; LMCache never uses it)."""
        return self._store

    @property
    def slot_bytes(self) -> int:
        """The largest chunk a set takes (the store's largest class)."""
        return self._largest

    @property
    def max_key_bytes(self) -> int:
        """The longest key the store takes."""
        return self._max_key

    # ----------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("KvblkConnector is closed")

    def _keys(self, keys: Sequence, unique: bool) -> List[bytes]:
        self._check_open()
        if isinstance(keys, (str, bytes)):
            raise TypeError("keys must be a sequence of keys, not a single key")
        out = []
        for i, k in enumerate(keys):
            if isinstance(k, str):
                k = k.encode("utf-8")
            elif isinstance(k, (bytes, bytearray)):
                k = bytes(k)
            else:
                raise TypeError(f"key {i} is a {type(k).__name__}, not str or bytes")
            if not k:
                raise ValueError(f"key {i} is empty")
            if len(k) > self._max_key:
                raise ValueError(f"key {i} is {len(k)} bytes; this store holds keys of at most "
                                 f"{self._max_key} (max_key_bytes)")
            out.append(k)
        if not out:
            raise ValueError("keys list is empty")
        if unique and len(set(out)) != len(out):
            raise ValueError("the same key twice in one set or delete batch")
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
            if mv.nbytes == 0:
                raise ValueError(f"buffer {i} is empty")
            if not for_get and mv.nbytes > self._largest:
                raise ValueError(f"buffer {i} is {mv.nbytes} bytes, larger than this store's largest "
                                 f"class ({self._largest} bytes)")
            mvs.append(mv)
        return mvs

    def _submit(self, kind, keys, submit, sizes) -> int:
        with self._lock:
            self._check_open()
            fid = self._next_fid
            self._next_fid += 1
        try:
            t = submit()
        except Exception as e:
            import kvblk
            if isinstance(e, kvblk.Error) and e.errno == _errno.EINVAL:
                raise ValueError(str(e)) from e
            raise
        # The callback refers to the connector weakly: an outstanding batch never keeps a
        # dropped connector alive.
        self._store._on_done(t, functools.partial(_finished, weakref.ref(self), (fid, kind, keys, sizes)))
        return fid

    def _finished(self, op, result) -> None:
        """Batch ``op`` finished (called by whoever took its completion: drain_completions(),
        or _submit() when the completion was routed before the batch was registered)."""
        fid, kind, keys, sizes = op
        with self._lock:
            if self._closed:
                return
            self._done.append(self._completion(fid, kind, keys, sizes, result))
        if not getattr(self._draining, "on", False) and not self._closed:
            # Finished outside a drain (the completion was routed before the batch was
            # registered): make the eventfd readable so that LMCache drains it.
            try:
                os.eventfd_write(self._store.fileno(), 1)
            except (OSError, ValueError, AttributeError):
                pass

    def _completion(self, fid, kind, keys, sizes, r) -> Completion:
        """LMCache's (future_id, ok, error, result_bools) from a StoreResult (lock held)."""
        st = r.status.tolist()
        bools = [s == 0 for s in st]
        errors = []
        if kind == "get":
            lengths = r.length.tolist()
            for i, s in enumerate(st):
                if s == 0 and lengths[i] != sizes[i]:
                    bools[i] = False
                    self._counters["size_mismatches"] += 1
                    errors.append(f"key {_show(keys[i])}: stored chunk is {lengths[i]} bytes, its "
                                  f"buffer {sizes[i]}")
                elif s == -_errno.EMSGSIZE:
                    self._counters["size_mismatches"] += 1
                    errors.append(f"key {_show(keys[i])}: stored chunk is {lengths[i]} bytes, its "
                                  f"buffer {sizes[i]}")
                elif s not in (0, -_errno.ENOENT):
                    errors.append(f"key {_show(keys[i])}: {_errname(s)}: {r.error_text(i)}")
        elif kind == "delete":
            for i, s in enumerate(st):
                if s == -_errno.ENOENT and keys[i] in self._evicted:
                    bools[i] = True  # evicted by the store since it was stored: gone
                    del self._evicted[keys[i]]
                elif s == 0:
                    self._evicted.pop(keys[i], None)
                elif s != -_errno.ENOENT:
                    errors.append(f"key {_show(keys[i])}: {_errname(s)}: {r.error_text(i)}")
        else:
            for i, s in enumerate(st):
                if s == 0:
                    if kind == "set":
                        self._evicted.pop(keys[i], None)
                elif kind == "set" or s != -_errno.ENOENT:
                    errors.append(f"key {_show(keys[i])}: {_errname(s)}: {r.error_text(i)}")
        if not errors:
            return (fid, True, "", bools)
        n_bad = len(errors)
        what = {"get": "not loaded", "set": "not stored", "exists": "not checked",
                "delete": "not deleted"}[kind]
        text = "; ".join(errors[:3]) + (f"; and {n_bad - 3} more" if n_bad > 3 else "")
        return (fid, False, f"{n_bad} of {len(keys)} chunks {what}: {text}", bools)


def _finished(wself, op, result):
    c = wself()
    if c is not None:
        c._finished(op, result)


def _errname(status):
    return _errno.errorcode.get(-status, str(status))


def _show(k: bytes) -> str:
    s = _decode(k)
    if len(s) > 96:
        s = s[:60] + "..." + s[-30:]
    return repr(s)


def _decode(k: bytes):
    try:
        return k.decode("utf-8")
    except UnicodeDecodeError:
        return k

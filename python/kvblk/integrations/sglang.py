# SPDX-License-Identifier: MIT
"""SGLang HiCache L3 storage backend over the kvblk store.

``KvblkHiCacheStorage`` is a ``HiCacheStorage`` that SGLang's ``dynamic`` backend factory
loads by module path and class name and builds as ``cls(storage_config, kwargs)``; it is a thin
adapter over :class:`kvblk.KVStore` (the store keeps the slots, the crash-safe index, the
checksums, the placement over drives and does every byte of I/O). Run SGLang with
(docs/engines.md has the full example)::

    --enable-hierarchical-cache --hicache-storage-backend dynamic \\
    --hicache-storage-backend-extra-config '{"backend_name": "kvblk",
        "module_path": "kvblk.integrations.sglang", "class_name": "KvblkHiCacheStorage",
        "interface_v1": 1, "path": "/var/lib/kvblk/hicache-tp{tp_rank}.kvs",
        "file_bytes": "64GiB"}'

Options (in the extra config; every one checked, an error naming it otherwise):
``path`` or ``paths`` (a list, or a comma-separated string), with placeholders
``{tp_rank} {tp_size} {pp_rank} {pp_size} {dp_rank} {attn_cp_rank}``: every rank is its own
process and a store belongs to one process (each drive is locked with flock(2)), so every rank
needs its own drives; ``file_bytes`` (create the files that do not exist, with the store);
``classes`` (slot sizes; default: derived from the host pool when the store is created: one
class per distinct object size); ``create`` ("if_missing" default, true, false); ``format``;
``when_full`` ("evict" default, or "refuse"); ``backend``; ``journal_bytes``;
``max_key_bytes``; ``queue_depth``; ``workers``; ``max_batches``; ``drive_budget_bytes``;
``interface_v1`` (SGLang's own: the zero-copy path). SGLang's other keys (backend_name,
module_path, class_name, ...) are ignored.

Objects. The zero-copy path (``interface_v1``) reads and writes straight into the host pool:
``mem_pool_host.get_page_buffer_meta(host_indices)`` gives n pointers per page (2 for MHA
``page_first``: K then V; 2 x layers for MHA ``layer_first``; 1 for MLA) and each becomes one
store object, key ``<page hash>@<model><rank suffix>#<j>``; a page is a hit only when all its
objects are. The generic path stores one object per page (the flat page, key
``<page hash>@<model><rank suffix>``). The rank suffix follows SGLang's reference backends:
``@tp<rank>of<size>`` for MHA (none for MLA: only rank 0 writes there), plus
``@pp<rank>of<size>`` and ``@cp<rank>of<size>`` when those are parallel.

The contract kept (SGLang's storage threads call it concurrently and never catch): no call
raises; ``batch_exists`` returns the number of consecutive pages present from the first;
``batch_get_v1``/``batch_set_v1`` return one bool per page (a page marked False may hold
anything; no byte outside the batch's regions is written); a set of a page that is present
succeeds without writing it again (keys are content addresses); a full store evicts least
recently used objects (or, with when_full="refuse", the pages that find no room are False);
``clear()`` deletes this rank's pages; ``get_stats()`` returns SGLang's ``StorageMetrics``
(pages and GB/s of every get and set since the last call) when SGLang has it; ``close()``
closes the store.

Limit: with an MLA model and TP > 1 only rank 0 writes, and the other ranks cannot read rank
0's store (another process holds its drives), so their lookups miss.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, List, Optional

__all__ = ["KvblkHiCacheStorage"]

_log = logging.getLogger(__name__)
_WHO = "KvblkHiCacheStorage"
_ALIGN = 4096


def _base():
    try:
        from sglang.srt.mem_cache.hicache_storage import HiCacheStorage
        return HiCacheStorage
    except ImportError:
        class HiCacheStorage:  # noqa: D401 - stand-in
            """Stand-in for sglang.srt.mem_cache.hicache_storage.HiCacheStorage."""

            def register_mem_pool_host(self, mem_pool_host):
                self.mem_pool_host = mem_pool_host

        return HiCacheStorage


_Base = _base()

_OPTIONS = ("path", "paths", "file_bytes", "classes", "create", "format", "when_full", "backend",
            "journal_bytes", "max_key_bytes", "queue_depth", "workers", "max_batches",
            "drive_budget_bytes")
_SGLANG_KEYS = ("backend_name", "module_path", "class_name", "interface_v1", "tp_lcm_size",
                "prefetch_threshold", "prefetch_timeout_base", "prefetch_timeout_per_ki_token",
                "hicache_storage_pass_prefix_keys")


class _Metrics:
    """Pages and GB/s of every get and set since the last get_stats()."""

    def __init__(self):
        self.lock = threading.Lock()
        self.prefetch_pgs, self.backup_pgs = [], []
        self.prefetch_bandwidth, self.backup_bandwidth = [], []

    def add(self, get, pages, nbytes, secs):
        with self.lock:
            (self.prefetch_pgs if get else self.backup_pgs).append(pages)
            (self.prefetch_bandwidth if get else self.backup_bandwidth).append(
                nbytes / secs / 1e9 if secs > 0 else 0.0)

    def take(self):
        with self.lock:
            out = (self.prefetch_pgs, self.backup_pgs, self.prefetch_bandwidth, self.backup_bandwidth)
            self.prefetch_pgs, self.backup_pgs = [], []
            self.prefetch_bandwidth, self.backup_bandwidth = [], []
        return out


class KvblkHiCacheStorage(_Base):
    """SGLang HiCache L3 storage backend over a kvblk.KVStore (see the module doc).

    Raises from the constructor only (SGLang then fails the start or the attach with the
    message): TypeError / ValueError for an option of the wrong type or value, kvblk.Error when
    the store cannot be opened or created. No other method raises.
    """

    def __init__(self, storage_config, kwargs: Optional[dict] = None):
        from kvblk import _kvstore as ks
        from kvblk.integrations.lmcache_remote import _truthy

        self._store = None
        self._closed = False
        self._lock = threading.Lock()
        self._metrics = _Metrics()
        self.storage_config = storage_config
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        extra.update(kwargs or {})
        unknown = sorted(k for k in extra if k not in _OPTIONS and k not in _SGLANG_KEYS)
        if unknown:
            _log.warning("%s: ignoring unknown extra config keys %s", _WHO, ", ".join(unknown))
        self.interface_v1 = bool(extra.get("interface_v1", False))
        opts = {k: extra[k] for k in _OPTIONS if k in extra}
        c = storage_config
        subst = {"tp_rank": c.tp_rank, "tp_size": c.tp_size, "pp_rank": c.pp_rank, "pp_size": c.pp_size,
                 "dp_rank": getattr(c, "dp_rank", 0), "attn_cp_rank": getattr(c, "attn_cp_rank", 0)}
        # Rank-distinct keys (module doc).
        sfx = "@" + (c.model_name or "")
        if not c.is_mla_model:
            sfx += f"@tp{c.tp_rank}of{c.tp_size}"
        if c.pp_size > 1:
            sfx += f"@pp{c.pp_rank}of{c.pp_size}"
        cp = getattr(c, "attn_cp_size", 1) or 1
        if cp > 1:
            sfx += f"@cp{getattr(c, 'attn_cp_rank', 0)}of{cp}"
        self._suffix = sfx
        self._parts = 1  # objects per page on the zero-copy path (known once the pool is)
        # Check every option now (errors name it); open the store now when its layout is
        # known (classes given, or the store exists), else when the host pool is registered.
        from kvblk.integrations.lmcache_remote import open_store
        self._open_store = lambda classes=None: open_store(
            dict(opts, **({"classes": classes} if classes else {})), subst, _WHO)
        for k in ("file_bytes", "journal_bytes", "drive_budget_bytes"):
            if k in opts:
                ks.parse_bytes(k, opts[k], who=_WHO)
        if "format" in opts:
            _truthy("format", opts["format"], _WHO)
        import os
        if ("path" in opts) == ("paths" in opts):
            raise TypeError(f"{_WHO}: set path (one drive) or paths (several) in the extra config, "
                            f"not both or neither")
        paths = opts.get("paths", [opts.get("path")])
        if isinstance(paths, str):
            paths = [p.strip() for p in paths.split(",")]
        try:
            exist = all(isinstance(p, str) and os.path.exists(p.format(**subst)) for p in paths)
        except (KeyError, IndexError, ValueError):
            exist = True  # open_store() says what is wrong
        if "classes" in opts or exist or opts.get("create", "if_missing") is False:
            self._store = self._open_store()

    # ---------------------------------------------------------------- setup

    def register_mem_pool_host(self, mem_pool_host):
        """SGLang's host pool (called right after construction): remember it, and create the
        store if it was waiting for the objects' sizes."""
        super().register_mem_pool_host(mem_pool_host)
        self.mem_pool_host = mem_pool_host
        sizes = set()
        try:
            import torch
            page = int(getattr(mem_pool_host, "page_size", 1) or 1)
            if self.interface_v1:
                ptrs, szs = mem_pool_host.get_page_buffer_meta(torch.arange(page, dtype=torch.int64))
                self._parts = max(1, len(ptrs))
                sizes.update(int(s) for s in szs)
            else:
                flat = mem_pool_host.get_dummy_flat_data_page()
                sizes.add(int(flat.numel() * flat.element_size()))
        except Exception as e:  # noqa: BLE001 - the pool cannot say: use the store as it is
            _log.warning("%s: cannot size the host pool's pages (%s)", _WHO, e)
        if self._store is None:
            classes = sorted({(s + _ALIGN - 1) // _ALIGN * _ALIGN for s in sizes if s > 0}) or None
            self._store = self._open_store(classes)
        largest = self._store.info()["classes"][-1]["slot_bytes"]
        too_big = [s for s in sizes if s > largest]
        if too_big:
            _log.error("%s: the pool's page objects are %d bytes, larger than the store's largest "
                       "class (%d bytes): every set will fail; make a store with larger classes",
                       _WHO, max(too_big), largest)

    # ---------------------------------------------------------------- keys

    def _keys(self, keys, parts):
        sfx = self._suffix
        if parts == 1 and not self.interface_v1:
            return [f"{k}{sfx}" for k in keys]
        return [f"{k}{sfx}#{j}" for k in keys for j in range(parts)]

    def _pages_ok(self, r, n, parts, sizes=None):
        st = r.status.tolist()
        ln = r.length.tolist()
        out = []
        for p in range(n):
            ok = True
            for j in range(p * parts, (p + 1) * parts):
                if st[j] != 0 or (sizes is not None and ln[j] != sizes[j]):
                    ok = False
                    break
            out.append(ok)
        return out

    def _usable(self):
        return self._store is not None and not self._store.closed

    # ---------------------------------------------------------------- lookups

    def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
        """The number of consecutive pages present from the first (all of a page's objects)."""
        try:
            if not keys or not self._usable():
                return 0
            parts = self._parts if self.interface_v1 else 1
            r = self._store.exists(self._keys(keys, parts), meta=False)
            ok = self._pages_ok(r, len(keys), parts)
            return ok.index(False) if False in ok else len(ok)
        except Exception as e:  # noqa: BLE001 - never raise on SGLang's storage threads
            _log.warning("%s: batch_exists failed: %s", _WHO, e)
            return 0

    def exists(self, key: str) -> bool:
        """Whether the page of ``key`` is present."""
        return self.batch_exists([key]) == 1

    # ---------------------------------------------------------------- zero copy

    def _page_meta(self, keys, host_indices):
        ptrs, sizes = self.mem_pool_host.get_page_buffer_meta(host_indices)
        ptrs, sizes = [int(p) for p in ptrs], [int(s) for s in sizes]
        if not keys or len(ptrs) % len(keys) or len(ptrs) != len(sizes):
            raise ValueError(f"get_page_buffer_meta gave {len(ptrs)} pointers and {len(sizes)} sizes "
                             f"for {len(keys)} pages")
        parts = len(ptrs) // len(keys)
        if parts != self._parts:
            self._parts = parts
        return ptrs, sizes, parts

    def batch_get_v1(self, keys: List[str], host_indices, extra_info: Any = None) -> List[bool]:
        """Read each page's objects straight into the host pool; one bool per page."""
        n = len(keys)
        try:
            if not n or not self._usable():
                return [False] * n
            ptrs, sizes, parts = self._page_meta(keys, host_indices)
            t0 = time.perf_counter()
            r = self._store.get(self._keys(keys, parts), list(zip(ptrs, sizes)), meta=False)
            ok = self._pages_ok(r, n, parts, sizes)
            self._metrics.add(True, sum(ok), r.bytes, time.perf_counter() - t0)
            bad = [e for e in r.errors() if e.errno != 2]
            if bad:
                _log.warning("%s: %d objects not read: %s", _WHO, len(bad), bad[0])
            return ok
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: batch_get_v1 failed: %s", _WHO, e)
            return [False] * n

    def batch_set_v1(self, keys: List[str], host_indices, extra_info: Any = None) -> List[bool]:
        """Write each page's objects straight from the host pool (pages already present are
        not written again); one bool per page."""
        n = len(keys)
        try:
            if not n or not self._usable():
                return [False] * n
            ptrs, sizes, parts = self._page_meta(keys, host_indices)
            skeys = self._keys(keys, parts)
            present = self._pages_ok(self._store.exists(skeys, meta=False), n, parts)
            todo = [p for p in range(n) if not present[p]]
            ok = list(present)
            if todo:
                idx = [j for p in todo for j in range(p * parts, (p + 1) * parts)]
                t0 = time.perf_counter()
                r = self._store.put([skeys[j] for j in idx], [(ptrs[j], sizes[j]) for j in idx])
                st = r.status.tolist()
                for k, p in enumerate(todo):
                    ok[p] = all(s == 0 for s in st[k * parts:(k + 1) * parts])
                self._metrics.add(False, sum(ok[p] for p in todo), r.bytes, time.perf_counter() - t0)
                bad = r.errors()
                if bad:
                    _log.warning("%s: %d objects not stored: %s", _WHO, len(bad), bad[0])
            return ok
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: batch_set_v1 failed: %s", _WHO, e)
            return [False] * n

    # ---------------------------------------------------------------- generic path

    def get(self, key: str, target_location: Any = None, target_sizes: Any = None):
        """The page of ``key`` read into ``target_location`` (a flat page tensor), or None."""
        return self.batch_get([key], [target_location])[0]

    def batch_get(self, keys: List[str], target_locations: Any = None, target_sizes: Any = None):
        """Read each page into its flat tensor; the tensor, or None, per key."""
        n = len(keys)
        try:
            if not n or not self._usable():
                return [None] * n
            if target_locations is None or len(target_locations) != n:
                _log.warning("%s: batch_get needs one target tensor per key", _WHO)
                return [None] * n
            dests = list(target_locations)
            sizes = [int(t.numel() * t.element_size()) for t in dests]
            t0 = time.perf_counter()
            r = self._store.get(self._keys(keys, 1), dests, meta=False)
            ok = self._pages_ok(r, n, 1, sizes)
            self._metrics.add(True, sum(ok), r.bytes, time.perf_counter() - t0)
            return [d if o else None for d, o in zip(dests, ok)]
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: batch_get failed: %s", _WHO, e)
            return [None] * n

    def set(self, key: str, value: Any = None, target_location: Any = None, target_sizes: Any = None) -> bool:
        """Store one flat page."""
        return self.batch_set([key], [value])

    def batch_set(self, keys: List[str], values: Any = None, target_locations: Any = None,
                  target_sizes: Any = None) -> bool:
        """Store flat pages (those present are not written again); True when all are stored."""
        n = len(keys)
        try:
            if not n or not self._usable() or values is None or len(values) != n:
                return False
            skeys = self._keys(keys, 1)
            present = self._store.exists(skeys, meta=False).hits
            todo = [i for i in range(n) if not present[i]]
            if not todo:
                return True
            srcs = [values[i].contiguous() if hasattr(values[i], "contiguous") else values[i] for i in todo]
            t0 = time.perf_counter()
            r = self._store.put([skeys[i] for i in todo], srcs)
            self._metrics.add(False, r.ok, r.bytes, time.perf_counter() - t0)
            return r.failed == 0
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: batch_set failed: %s", _WHO, e)
            return False

    # ---------------------------------------------------------------- admin

    def clear(self) -> bool:
        """Delete every page this rank stored (its key suffix); True on success."""
        try:
            if not self._usable():
                return False
            mine = [k.key for k in self._store.keys() if self._mine(k.key)]
            for s in range(0, len(mine), 8192):
                self._store.delete(mine[s:s + 8192])
            return True
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: clear failed: %s", _WHO, e)
            return False

    def _mine(self, key: bytes) -> bool:
        s = key.decode("utf-8", "replace")
        if self.interface_v1 and "#" in s:
            s = s.rsplit("#", 1)[0]
        return s.endswith(self._suffix)

    def get_stats(self):
        """SGLang's StorageMetrics of the gets and sets since the last call, or None when SGLang's
        class is not there. The store's own counters: store_stats()."""
        try:
            from sglang.srt.metrics.collector import StorageMetrics
        except ImportError:
            return None
        try:
            m = StorageMetrics()
            (m.prefetch_pgs, m.backup_pgs, m.prefetch_bandwidth, m.backup_bandwidth) = self._metrics.take()
            return m
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: get_stats failed: %s", _WHO, e)
            return None

    def store_stats(self) -> dict:
        """kvblk.KVStore.stats() of the store ({} when none is open)."""
        return self._store.stats() if self._usable() else {}

    @property
    def store(self):
        """The kvblk.KVStore underneath."""
        return self._store

    def close(self) -> None:
        """Close the store (SGLang calls it on detach; idempotent)."""
        st, self._store = self._store, None
        if st is not None:
            st.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

# SPDX-License-Identifier: MIT
"""LMCache in-process remote storage plugin over the kvblk store.

LMCache running inside the serving engine's worker (vLLM's LMCacheConnectorV1, non-MP mode)
loads remote storage plugins: a ``ConnectorAdapter`` that LMCache instantiates with no
arguments, asks ``can_parse(url)`` for the URL ``plugin://<plugin name>``, and then
``create_connector(ConnectorContext)``; the ``RemoteConnector`` it returns is driven from
LMCache's storage event loop. Configure it so (docs/engines.md has the full example)::

    remote_storage_plugins: ["kvblk"]
    extra_config:
      remote_storage_plugin.kvblk.module_path: kvblk.integrations.lmcache_remote
      remote_storage_plugin.kvblk.class_name: KvblkConnectorAdapter
      remote_storage_plugin.kvblk.path: /var/lib/kvblk/lmcache-{worker_id}.kvs
      remote_storage_plugin.kvblk.file_bytes: 64GiB
      remote_storage_plugin.kvblk.classes: [4MiB, 32MiB]

The plugin's name is ``kvblk`` or ``kvblk.<instance>`` (several stores: one name each). Its
options are read from ``extra_config`` under ``remote_storage_plugin.<name>.`` (some LMCache
versions use ``remote_connector.<name>.``: read too): ``path`` (or ``paths``, a list or a
comma-separated string), ``file_bytes``, ``classes``, ``create`` ("if_missing", default;
true; false), ``format``, ``when_full``, ``backend``, ``max_key_bytes``,
``max_meta_bytes``, ``journal_bytes``, ``queue_depth``, ``workers``,
``open_in_scheduler`` (false). A path may name ``{worker_id}`` and ``{world_size}``
(LMCache's metadata): every worker is its own process, and a store belongs to one process
(each drive is locked with flock(2)), so every worker needs its own drives.

What the connector keeps per object: the chunk's bytes as the object, and in the store's
metadata of the object (never in the data) its memory format, dtype(s) and shape(s), so that
a get allocates the MemoryObj exactly as it was put (partial chunks included):
``b"KVL1" | fmt u8 | groups u8 | per group: dtype code u8 (LMCache's DTYPE_TO_INT: 1 half,
2 float16, 3 bfloat16, 4 float32, 5 float64, 6 uint8, 7 float8_e4m3fn, 8 float8_e5m2), ndim
u8, ndim x int64 (little-endian)``.

The contract it keeps (LMCache's RemoteConnector, as RemoteBackend calls it):

* every coroutine runs on LMCache's one event loop and never blocks it on I/O: gets and puts
  are store batches awaited on the store's eventfd; exists is answered from the store's index
  (microseconds, no I/O);
* ``put``/``batched_put`` return once the store has read every byte (the object is durable),
  never call ``ref_count_down()`` on the objects, and keep none of them; a cancelled put still
  waits for its batch before it raises CancelledError (LMCache recycles the buffer next);
* ``get``/``batched_get`` allocate with ``local_cpu_backend.allocate()`` (None when it is
  full: then a miss) and return each object with its one reference; every object of a miss
  or a failure is released; a cancelled get releases its objects only once the store's batch
  is over, so that no read lands in a recycled buffer;
* ``batched_get_non_blocking`` returns the prefix of hits in key order, releasing the rest;
  ``batched_contains`` / ``batched_async_contains`` count consecutive hits from the first key;
* a miss is never an exception: failures are logged and answered as misses (a wrong size is
  logged with the key and both sizes).

In LMCache's scheduler process (its local CPU backend cannot allocate) the connector opens no
store unless ``open_in_scheduler`` is true (the worker holds the drives): every lookup there
is a miss.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import List, Optional

__all__ = ["KvblkConnectorAdapter", "KvblkRemoteConnector", "PLUGIN_TYPE", "encode_meta", "decode_meta"]

_log = logging.getLogger(__name__)

PLUGIN_TYPE = "kvblk"
_MAGIC = b"KVL1"
_DTYPE_CODES = {1: "half", 2: "float16", 3: "bfloat16", 4: "float32", 5: "float64", 6: "uint8",
                7: "float8_e4m3fn", 8: "float8_e5m2"}
_CODE_OF = {"float16": 2, "half": 2, "bfloat16": 3, "float32": 4, "float": 4, "float64": 5,
            "double": 5, "uint8": 6, "float8_e4m3fn": 7, "float8_e5m2": 8}


def _bases():
    """LMCache's ConnectorAdapter and RemoteConnector when LMCache is importable, else stand-ins
    with the same shape (the module then still imports, for tools and tests)."""
    try:
        from lmcache.v1.storage_backend.connector import ConnectorAdapter
        from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector
        return ConnectorAdapter, RemoteConnector, True
    except ImportError:
        class ConnectorAdapter:  # noqa: D401 - stand-in
            """Stand-in for lmcache.v1.storage_backend.connector.ConnectorAdapter."""

            def __init__(self, schema: str = "") -> None:
                self.schema = schema

        class RemoteConnector:
            """Stand-in for LMCache's RemoteConnector."""

        return ConnectorAdapter, RemoteConnector, False


_AdapterBase, _ConnectorBase, HAVE_LMCACHE = _bases()


def _plugin_type(plugin_name: str) -> str:
    return plugin_name.split(".", 1)[0]


# ------------------------------------------------------------------- metadata

def _dtype_name(dtype) -> str:
    if dtype is None:
        return ""
    return str(dtype).rsplit(".", 1)[-1]


def encode_meta(fmt: int, dtypes, shapes) -> bytes:
    """The object's metadata: format, and dtype and shape of each group (module doc)."""
    out = [_MAGIC, struct.pack("<BB", int(fmt), len(shapes))]
    for dt, shp in zip(dtypes, shapes):
        name = _dtype_name(dt)
        code = _CODE_OF.get(name, 0) if name else 0
        if name and not code:
            raise ValueError(f"kvblk: dtype {dt} has no LMCache dtype code")
        dims = [int(x) for x in shp]
        out.append(struct.pack(f"<BB{len(dims)}q", code, len(dims), *dims))
    return b"".join(out)


def decode_meta(meta: bytes):
    """(fmt, [dtype names], [shapes]) from encode_meta()'s bytes; ValueError if malformed."""
    if len(meta) < 6 or meta[:4] != _MAGIC:
        raise ValueError("not kvblk LMCache object metadata")
    fmt, groups = struct.unpack_from("<BB", meta, 4)
    off = 6
    dtypes, shapes = [], []
    for _ in range(groups):
        code, ndim = struct.unpack_from("<BB", meta, off)
        off += 2
        dims = struct.unpack_from(f"<{ndim}q", meta, off)
        off += 8 * ndim
        dtypes.append(_DTYPE_CODES.get(code))
        shapes.append(tuple(dims))
    if off != len(meta):
        raise ValueError("kvblk LMCache object metadata has trailing bytes")
    return fmt, dtypes, shapes


def _obj_layout(obj):
    """(fmt int, [dtype], [shape]) of a MemoryObj (multi-group get_shapes() where it exists)."""
    fmt = obj.get_memory_format()
    fmt = int(getattr(fmt, "value", fmt))
    if hasattr(obj, "get_shapes") and hasattr(obj, "get_dtypes"):
        try:
            shapes, dtypes = list(obj.get_shapes()), list(obj.get_dtypes())
            if shapes:
                return fmt, dtypes, shapes
        except Exception:  # noqa: BLE001 - older MemoryObj: one group
            pass
    return fmt, [obj.get_dtype()], [obj.get_shape()]


def _byte_view(obj, writable: bool):
    """A byte view of a MemoryObj's memory: byte_array (a ctypes "<B" memoryview) or its tensor."""
    ba = getattr(obj, "byte_array", None)
    if ba is not None:
        mv = memoryview(ba)
        if not writable or not mv.readonly:
            return mv
    t = getattr(obj, "tensor", None)
    if t is not None:
        return t
    raise TypeError(f"kvblk: {type(obj).__name__} has neither byte_array nor tensor")


def _key_str(key) -> str:
    return key if isinstance(key, str) else key.to_string()


# ------------------------------------------------------------------- options

_OPTION_NAMES = ("path", "paths", "file_bytes", "classes", "create", "format", "when_full", "backend",
                 "max_key_bytes", "max_meta_bytes", "journal_bytes", "queue_depth", "workers",
                 "max_batches", "drive_budget_bytes", "open_in_scheduler")


def plugin_options(extra_config, plugin_name: str) -> dict:
    """This plugin's options from LMCache's extra_config (prefix remote_storage_plugin.<name>.,
    or remote_connector.<name>.)."""
    out = {}
    if not extra_config:
        return out
    for prefix in (f"remote_connector.{plugin_name}.", f"remote_storage_plugin.{plugin_name}."):
        for k, v in dict(extra_config).items():
            if isinstance(k, str) and k.startswith(prefix):
                name = k[len(prefix):]
                if name in ("module_path", "class_name"):
                    continue
                if name not in _OPTION_NAMES:
                    raise TypeError(f"kvblk LMCache plugin {plugin_name}: unknown option {k!r} "
                                    f"(known: {', '.join(_OPTION_NAMES)})")
                out[name] = v
    return out


def _truthy(name, v, who):
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false", "1", "0", "yes", "no"):
        return v.lower() in ("true", "1", "yes")
    raise TypeError(f"{who}: {name} must be true or false, not {type(v).__name__} {v!r}")


def open_store(opts: dict, subst: dict, who: str):
    """A kvblk.KVStore from plugin options (the paths' {placeholders} filled from ``subst``)."""
    import kvblk
    from kvblk import _kvstore as ks

    opts = dict(opts)
    opts.pop("open_in_scheduler", None)
    path, paths = opts.pop("path", None), opts.pop("paths", None)
    if (path is None) == (paths is None):
        raise TypeError(f"{who}: set path (one drive) or paths (several), not both or neither")
    if paths is None:
        paths = [path]
    elif isinstance(paths, str):
        paths = [p.strip() for p in paths.split(",") if p.strip()]
    if not isinstance(paths, (list, tuple)):
        raise TypeError(f"{who}: paths must be a list of paths or a comma-separated string")
    drives = []
    for i, p in enumerate(paths):
        if not isinstance(p, str):
            raise TypeError(f"{who}: paths[{i}] must be a str, not {type(p).__name__} {p!r}")
        try:
            drives.append(p.format(**subst))
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"{who}: path {p!r}: unknown placeholder {e} (known: "
                             f"{', '.join('{' + k + '}' for k in subst)})") from None
    create = opts.pop("create", "if_missing")
    if create != "if_missing":
        create = _truthy("create", create, who)
    fmt = _truthy("format", opts.pop("format", False), who)
    kw = {}
    for k in ("max_key_bytes", "max_meta_bytes", "queue_depth", "workers", "max_batches"):
        if k in opts:
            v = opts.pop(k)
            if isinstance(v, str) and v.isdigit():
                v = int(v)
            kw[k] = v
    for k in ("file_bytes", "journal_bytes", "drive_budget_bytes"):
        if k in opts:
            kw[k] = ks.parse_bytes(k, opts.pop(k), who=who)
    if "classes" in opts:
        c = opts.pop("classes")
        if isinstance(c, str):
            c = [x.strip() for x in c.strip("[]").split(",") if x.strip()]
        kw["classes"] = ks._classes(c, who)
    for k in ("when_full", "backend"):
        if k in opts:
            kw[k] = opts.pop(k)
    assert not opts, opts
    if fmt:
        create, kw["force"] = True, True
    if not create:
        for k in ("file_bytes", "journal_bytes", "classes", "max_key_bytes", "max_meta_bytes"):
            kw.pop(k, None)
    return kvblk.KVStore(drives, create=create, **kw)


# ------------------------------------------------------------------- the adapter

class KvblkConnectorAdapter(_AdapterBase):
    """LMCache ConnectorAdapter for ``plugin://kvblk`` and ``plugin://kvblk.<instance>``."""

    def __init__(self) -> None:
        super().__init__(f"plugin://{PLUGIN_TYPE}")

    def can_parse(self, url: str) -> bool:
        """True for plugin://kvblk and plugin://kvblk.<instance>, False for anything else."""
        if not isinstance(url, str) or not url.startswith("plugin://"):
            return False
        return _plugin_type(url[len("plugin://"):]) == PLUGIN_TYPE

    def create_connector(self, context):
        """A KvblkRemoteConnector over the store this plugin's options name."""
        name = getattr(context, "plugin_name", None) or context.url[len("plugin://"):]
        return KvblkRemoteConnector(context, name)


def _scheduler_role(context) -> bool:
    role = getattr(getattr(context, "metadata", None), "role", None)
    if role == "scheduler":
        return True
    return type(getattr(context, "local_cpu_backend", None)).__name__ == "SafeLocalCPUBackend"


class KvblkRemoteConnector(_ConnectorBase):
    """LMCache RemoteConnector over a kvblk.KVStore (see the module doc for the contract)."""

    def __init__(self, context, plugin_name: str = PLUGIN_TYPE):
        self._store = None
        config = getattr(context, "config", None)
        metadata = getattr(context, "metadata", None)
        self._init_base(config, metadata)
        self.loop = context.loop
        self.local_cpu_backend = context.local_cpu_backend
        self.plugin_name = plugin_name
        who = f"kvblk LMCache plugin {plugin_name}"
        opts = plugin_options(getattr(config, "extra_config", None), plugin_name)
        in_sched = _truthy("open_in_scheduler", opts.get("open_in_scheduler", False), who)
        if _scheduler_role(context) and not in_sched:
            _log.info("%s: scheduler process: no store opened (the workers hold the drives); "
                      "lookups here answer miss", who)
            return
        subst = {"worker_id": getattr(metadata, "worker_id", 0),
                 "world_size": getattr(metadata, "world_size", 1)}
        self._store = open_store(opts, subst, who)
        self._who = who
        _log.info("%s: store %s (%s)", who, ",".join(self._store.paths), self._store.info()["backend"])

    def _init_base(self, config, metadata):
        """LMCache's base initialisation: newer RemoteConnector.__init__(config, metadata), older
        init_chunk_meta(); neither is required (the stand-in base has none)."""
        if not HAVE_LMCACHE:
            return
        try:
            super().__init__(config, metadata)
            return
        except TypeError:
            pass
        except Exception as e:  # noqa: BLE001 - metadata LMCache could not use: go without
            _log.debug("kvblk: RemoteConnector.__init__ failed (%s); going on without it", e)
            return
        init = getattr(self, "init_chunk_meta", None)
        if init is not None:
            try:
                init(config, metadata)
            except Exception as e:  # noqa: BLE001
                _log.debug("kvblk: init_chunk_meta failed (%s)", e)

    # ------------------------------------------------------------- helpers

    def _misses(self) -> bool:
        return self._store is None or self._store.closed

    def _exists_prefix(self, keys) -> List[bool]:
        if self._misses() or not keys:
            return [False] * len(keys)
        try:
            r = self._store.exists([_key_str(k) for k in keys], meta=False)
            return r.hits
        except Exception as e:  # noqa: BLE001 - a failure is a miss for LMCache
            _log.warning("%s: exists failed: %s", self._who, e)
            return [False] * len(keys)

    def _allocate(self, meta: bytes):
        fmt, dtypes, shapes = decode_meta(meta)
        import torch
        from lmcache.v1.memory_management import MemoryFormat

        dts = [getattr(torch, d) if d else None for d in dtypes]
        shp = [torch.Size(s) for s in shapes]
        mf = MemoryFormat(fmt)
        if len(shp) == 1:
            return self.local_cpu_backend.allocate(shp[0], dts[0], mf)
        return self.local_cpu_backend.allocate(shp, dts, mf)

    async def _get_many(self, keys) -> List[Optional[object]]:
        """One store batch for ``keys``: a MemoryObj (one reference) or None per key."""
        n = len(keys)
        out: List[Optional[object]] = [None] * n
        if self._misses() or not n:
            return out
        ks = [_key_str(k) for k in keys]
        try:
            ex = self._store.exists(ks)
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: exists failed: %s", self._who, e)
            return out
        objs, idx, dests, sizes = [], [], [], []
        try:
            for i in range(n):
                if int(ex.status[i]) != 0:
                    continue
                meta = ex.meta(i)
                try:
                    obj = self._allocate(meta)
                except ValueError as e:
                    _log.warning("%s: key %r: %s", self._who, ks[i], e)
                    continue
                if obj is None:  # the CPU buffer is full: a miss
                    continue
                objs.append(obj)
                idx.append(i)
                v = _byte_view(obj, True)
                dests.append(v)
                sizes.append(int(v.nbytes))
        except BaseException:
            for o in objs:
                o.ref_count_down()
            raise
        if not objs:
            return out
        try:
            t = self._store.submit_get([ks[i] for i in idx], dests, meta=False)
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: get of %d keys failed: %s", self._who, len(idx), e)
            for o in objs:
                o.ref_count_down()
            return out
        try:
            r = await self._store.wait_async(t)
        except asyncio.CancelledError:
            # The store cannot stop the reads: release the objects once they have landed.
            self._store._on_done(t, lambda _r, objs=objs: [o.ref_count_down() for o in objs])
            raise
        for j, i in enumerate(idx):
            st, length = int(r.status[j]), int(r.length[j])
            if st == 0 and length == sizes[j]:
                out[i] = objs[j]
                continue
            if st == 0:
                _log.warning("%s: key %r: stored object is %d bytes, the MemoryObj %d: a miss",
                             self._who, ks[i], length, sizes[j])
            elif st != -2:  # ENOENT: deleted meanwhile
                _log.warning("%s: key %r: %s", self._who, ks[i], r.error_text(j))
            objs[j].ref_count_down()
        return out

    # ------------------------------------------------------------- the contract

    async def exists(self, key) -> bool:
        """Whether the store holds ``key`` (from its index: no I/O)."""
        return self._exists_prefix([key])[0]

    def exists_sync(self, key) -> bool:
        """exists(), from the caller's thread."""
        return self._exists_prefix([key])[0]

    async def get(self, key):
        """A MemoryObj holding the key's chunk, or None (a miss, a full CPU buffer, a failure)."""
        return (await self._get_many([key]))[0]

    async def put(self, key, memory_obj):
        """Store one chunk; returns once the store has read it (it is durable)."""
        await self.batched_put([key], [memory_obj])

    async def list(self) -> List[str]:
        """Every key in the store (as str)."""
        if self._misses():
            return []
        return [k.key if isinstance(k.key, str) else k.key.decode("utf-8", "replace")
                for k in self._store.keys(decode=True)]

    async def close(self):
        """Close the store (its batches finish first); off the event loop."""
        st, self._store = self._store, None
        if st is not None:
            await asyncio.get_running_loop().run_in_executor(None, st.close)

    def support_ping(self) -> bool:
        """True: ping() is implemented."""
        return True

    async def ping(self) -> int:
        """0 while the store is open with every drive serving, else 1."""
        if self._misses():
            return 1
        info = self._store.info()
        return 0 if info["drives_ok"] == info["drives"] else 1

    def support_batched_get(self) -> bool:
        """True: batched_get() is implemented."""
        return True

    async def batched_get(self, keys):
        """One store batch; a MemoryObj or None per key."""
        return await self._get_many(list(keys))

    def support_batched_put(self) -> bool:
        """True: batched_put() is implemented."""
        return True

    async def batched_put(self, keys, memory_objs):
        """Store the chunks in one store batch (their layout in the objects' metadata). Returns
        once every chunk is durable; raises RuntimeError naming the keys not stored."""
        if self._misses():
            raise RuntimeError(f"kvblk LMCache plugin {self.plugin_name}: no store (scheduler "
                               f"process or closed)")
        ks = [_key_str(k) for k in keys]
        srcs = [_byte_view(o, False) for o in memory_objs]
        metas = [encode_meta(*_obj_layout(o)) for o in memory_objs]
        t = self._store.submit_put(ks, srcs, metas=metas)
        inner = asyncio.ensure_future(self._store.wait_async(t))
        cancelled = False
        while True:
            try:
                r = await asyncio.shield(inner)
                break
            except asyncio.CancelledError:
                # LMCache recycles the buffers as soon as this returns: wait for the store to
                # have read them whatever happens.
                cancelled = True
        if cancelled:
            raise asyncio.CancelledError()
        if r.failed:
            bad = r.errors(misses=True)
            raise RuntimeError(f"kvblk: {len(bad)} of {len(ks)} chunks not stored: "
                               + "; ".join(f"{k.key!r}: {k.error}" for k in bad[:3]))

    def support_batched_async_contains(self) -> bool:
        """True: batched_async_contains() is implemented."""
        return True

    async def batched_async_contains(self, lookup_id: str, keys, pin: bool = False) -> int:
        """Consecutive keys present from the first (from the index: no I/O)."""
        hits = self._exists_prefix(list(keys))
        return hits.index(False) if False in hits else len(hits)

    def support_batched_get_non_blocking(self) -> bool:
        """True: batched_get_non_blocking() is implemented."""
        return True

    async def batched_get_non_blocking(self, lookup_id: str, keys):
        """The MemoryObjs of the leading hits, in key order; objects after the first miss are
        released."""
        objs = await self._get_many(list(keys))
        out = []
        for i, o in enumerate(objs):
            if o is None:
                for later in objs[i + 1:]:
                    if later is not None:
                        later.ref_count_down()
                break
            out.append(o)
        return out

    def support_batched_contains(self) -> bool:
        """True: batched_contains() is implemented."""
        return True

    def batched_contains(self, keys) -> int:
        """Consecutive keys present from the first (sync, caller's thread)."""
        hits = self._exists_prefix(list(keys))
        return hits.index(False) if False in hits else len(hits)

    def remove_sync(self, key) -> bool:
        """Delete ``key`` (durable); True when it was there."""
        if self._misses():
            return False
        try:
            return self._store.delete([_key_str(key)]).ok == 1
        except Exception as e:  # noqa: BLE001
            _log.warning("%s: delete failed: %s", self._who, e)
            return False

    def post_init(self):
        """Nothing to do after creation."""

    def __repr__(self) -> str:
        paths = ",".join(self._store.paths) if self._store is not None else "no store"
        return f"<KvblkRemoteConnector {self.plugin_name} {paths}>"

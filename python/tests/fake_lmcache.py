# SPDX-License-Identifier: MIT
"""A small fake of LMCache's in-process remote storage plugin machinery, following
/work/shared/notes/engines/lmcache.md (LMCache cannot be installed here): the modules the
plugin imports (lmcache.v1.storage_backend.connector with ConnectorAdapter/ConnectorContext,
its base_connector.RemoteConnector, lmcache.v1.memory_management with MemoryFormat and a
TensorMemoryObj whose byte_array is a ctypes "<B" view, lmcache.utils.CacheEngineKey), the
plugin loader (ConnectorManager's rules: import module_path/class_name, instantiate with no
arguments, keep it only if it is a ConnectorAdapter, log every failure), a LocalCPUBackend
whose allocate() returns None when full and counts live objects, InstrumentedRemoteConnector's
reference drop after put, and StorageManager's one event loop on its own thread with
future.result(timeout) and cancel() on timeout.

install() puts the modules into sys.modules; uninstall() takes them out again."""

from __future__ import annotations

import abc
import asyncio
import ctypes
import enum
import importlib
import logging
import sys
import threading
import types

import torch

log = logging.getLogger("fake_lmcache")

_NAMES = ["lmcache", "lmcache.v1", "lmcache.v1.storage_backend", "lmcache.v1.storage_backend.connector",
          "lmcache.v1.storage_backend.connector.base_connector", "lmcache.v1.memory_management",
          "lmcache.utils"]


class MemoryFormat(enum.Enum):
    UNDEFINED = 0
    KV_2LTD = 1
    KV_T2D = 2
    KV_2TD = 3
    BINARY = 4
    BINARY_BUFFER = 5
    KV_MLA_FMT = 6


class TensorMemoryObj:
    """LMCache's CPU MemoryObj: a tensor over allocator memory, ref-counted."""

    def __init__(self, allocator, tensor, shape, dtype, fmt):
        self._alloc = allocator
        self.tensor = tensor
        self._shape, self._dtype, self._fmt = torch.Size(shape), dtype, fmt
        self._ref = 1
        self._lock = threading.Lock()
        self.freed = False

    def get_size(self):
        return self.tensor.numel() * self.tensor.element_size()

    def get_physical_size(self):
        return self.get_size()

    def get_shape(self):
        return self._shape

    def get_dtype(self):
        return self._dtype

    def get_memory_format(self):
        return self._fmt

    @property
    def data_ptr(self):
        return self.tensor.data_ptr()

    @property
    def byte_array(self):
        n = self.get_size()
        arr = (ctypes.c_ubyte * n).from_address(self.tensor.data_ptr())
        return memoryview(arr)  # format "<B", as LMCache's

    def ref_count_up(self):
        with self._lock:
            self._ref += 1

    def ref_count_down(self):
        with self._lock:
            assert self._ref > 0, "ref_count_down() below zero: a double free"
            self._ref -= 1
            if self._ref == 0:
                self.freed = True
                self._alloc._free(self)

    def get_ref_count(self):
        return self._ref


class LocalCPUBackend:
    """allocate(shape, dtype, fmt) -> TensorMemoryObj, or None when ``capacity`` bytes are live."""

    def __init__(self, capacity=1 << 31):
        self.capacity = capacity
        self.live = {}
        self.lock = threading.Lock()
        self.on_free = None

    def allocate(self, shapes, dtypes, fmt=MemoryFormat.KV_2LTD):
        if isinstance(shapes, list):  # multi-group: one flat buffer, first group's view
            shape, dtype = shapes[0], dtypes[0]
            nbytes = sum(int(torch.Size(s).numel()) * torch.tensor([], dtype=d).element_size()
                         for s, d in zip(shapes, dtypes))
        else:
            shape, dtype = shapes, dtypes
            nbytes = int(torch.Size(shape).numel()) * torch.tensor([], dtype=dtype).element_size()
        with self.lock:
            used = sum(o.get_size() for o in self.live.values())
            if used + nbytes > self.capacity:
                return None
        t = torch.empty(nbytes, dtype=torch.uint8)
        t.fill_(0xA5)
        obj = TensorMemoryObj(self, t, shape, dtype, fmt)
        with self.lock:
            self.live[id(obj)] = obj
        return obj

    def _free(self, obj):
        if self.on_free is not None:
            self.on_free(obj)
        with self.lock:
            self.live.pop(id(obj), None)


class SafeLocalCPUBackend(LocalCPUBackend):
    """What LMCache passes in the scheduler process: allocate() raises."""

    def allocate(self, *a, **k):
        raise RuntimeError("SafeLocalCPUBackend.allocate() should never be called")


class CacheEngineKey:
    def __init__(self, model, world_size, worker_id, chunk_hash, dtype="bfloat16"):
        self.model_name, self.world_size, self.worker_id = model, world_size, worker_id
        self.chunk_hash, self.dtype = chunk_hash, dtype

    def to_string(self):
        return f"{self.model_name}@{self.world_size}@{self.worker_id}@{self.chunk_hash:x}@{self.dtype}"


class RemoteConnector(metaclass=abc.ABCMeta):
    """LMCache's newest RemoteConnector base (the abstract methods and __init__(config, metadata))."""

    def __init__(self, config, metadata):
        assert metadata is not None
        self.save_chunk_meta = (config.extra_config is None
                                or config.extra_config.get("save_chunk_meta", True))
        self.meta_fmt = MemoryFormat.KV_MLA_FMT if metadata.use_mla else MemoryFormat.KV_2LTD

    @abc.abstractmethod
    async def exists(self, key): ...

    @abc.abstractmethod
    def exists_sync(self, key): ...

    @abc.abstractmethod
    async def get(self, key): ...

    @abc.abstractmethod
    async def put(self, key, memory_obj): ...

    @abc.abstractmethod
    async def list(self): ...

    @abc.abstractmethod
    async def close(self): ...


class ConnectorAdapter(abc.ABC):
    def __init__(self, schema: str = "") -> None:
        self.schema = schema

    def can_parse(self, url: str) -> bool:
        return self.schema != "" and url.startswith(self.schema)

    @abc.abstractmethod
    def create_connector(self, context): ...


class ConnectorContext:
    def __init__(self, url, loop, local_cpu_backend, config, metadata, plugin_name=None):
        self.url, self.loop = url, loop
        self.local_cpu_backend = local_cpu_backend if local_cpu_backend is not None else SafeLocalCPUBackend()
        self.config, self.metadata, self.plugin_name = config, metadata, plugin_name


def extract_plugin_type(plugin_name):
    return plugin_name.split(".", 1)[0]


class Config:
    def __init__(self, remote_storage_plugins=None, extra_config=None):
        self.remote_storage_plugins = remote_storage_plugins
        self.extra_config = extra_config
        self.use_layerwise = False


class Metadata:
    def __init__(self, worker_id=0, world_size=1, use_mla=False, role="worker"):
        self.worker_id, self.world_size, self.use_mla, self.role = worker_id, world_size, use_mla, role


class BuiltinFsAdapter(ConnectorAdapter):
    """A built-in adapter that comes first, as LMCache's do (it must not take plugin URLs)."""

    def __init__(self):
        super().__init__("fs://")

    def create_connector(self, context):
        raise AssertionError("the fs adapter got a plugin URL")


def load_plugin_adapters(config):
    """ConnectorManager._remote_adapters_plugin_launcher(): failures are logged, never raised."""
    out = []
    if config is None:
        log.warning("config missing")
        return out
    for name in set(config.remote_storage_plugins or []):
        try:
            extra = config.extra_config
            if extra is None:
                log.warning("%s: no extra_config", name)
                continue
            mp = extra.get(f"remote_storage_plugin.{name}.module_path")
            cn = extra.get(f"remote_storage_plugin.{name}.class_name")
            if not mp or not cn:
                log.warning("%s: missing module_path or class_name", name)
                continue
            inst = getattr(importlib.import_module(mp), cn)()
            if not isinstance(inst, ConnectorAdapter):
                log.warning("%s: not a ConnectorAdapter", name)
                continue
            out.append(inst)
        except Exception as e:  # noqa: BLE001
            log.error("failed to load %s: %s", name, e)
    return out


def create_connector(plugin_name, loop, cpu, config, metadata):
    """CreateConnector() for plugin://<name>: built-ins first, then plugins; the first adapter
    whose can_parse() is true creates it; wrapped as LMCache wraps it."""
    url = f"plugin://{plugin_name}"
    ctx = ConnectorContext(url, loop, cpu, config, metadata, plugin_name)
    for a in [BuiltinFsAdapter()] + load_plugin_adapters(config):
        if a.can_parse(url):
            return InstrumentedRemoteConnector(a.create_connector(ctx))
    raise ValueError(f"No adapter found for URL: {url}")


class InstrumentedRemoteConnector:
    """Forwards to the connector; drops LMCache's reference on put objects after the call."""

    def __init__(self, c):
        self.c = c

    def __getattr__(self, name):
        return getattr(self.c, name)

    async def put(self, key, memory_obj):
        try:
            await self.c.put(key, memory_obj)
        finally:
            memory_obj.ref_count_down()

    async def batched_put(self, keys, memory_objs):
        try:
            await self.c.batched_put(keys, memory_objs)
        finally:
            for o in memory_objs:
                o.ref_count_down()


class StorageLoop:
    """StorageManager's event loop, forever on its own thread 'storage-manager-event-loop'."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="storage-manager-event-loop",
                                       daemon=True)
        self.thread.start()

    def run(self, coro, timeout=30):
        """run_coroutine_threadsafe + future.result(timeout); cancel() on timeout (as LMCache)."""
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def install():
    """Put the fake modules into sys.modules (LMCache's module paths)."""
    mods = {n: types.ModuleType(n) for n in _NAMES}
    for n in _NAMES:
        if "." in n:
            parent, child = n.rsplit(".", 1)
            setattr(mods[parent], child, mods[n])
    conn = mods["lmcache.v1.storage_backend.connector"]
    conn.ConnectorAdapter, conn.ConnectorContext = ConnectorAdapter, ConnectorContext
    conn.extract_plugin_type = extract_plugin_type
    conn.__path__ = []
    mods["lmcache.v1.storage_backend.connector.base_connector"].RemoteConnector = RemoteConnector
    mm = mods["lmcache.v1.memory_management"]
    mm.MemoryFormat, mm.MemoryObj, mm.TensorMemoryObj = MemoryFormat, TensorMemoryObj, TensorMemoryObj
    mods["lmcache.utils"].CacheEngineKey = CacheEngineKey
    for n in _NAMES:
        if n != "lmcache.v1.storage_backend.connector":
            mods[n].__path__ = []
    sys.modules.update(mods)


def uninstall():
    for n in _NAMES:
        sys.modules.pop(n, None)

# SPDX-License-Identifier: MIT
"""A small fake of SGLang's HiCache storage machinery, following
/work/shared/notes/engines/sglang.md (SGLang cannot be installed here): the HiCacheStorage ABC
(get, batch_get, set, batch_set, exists abstract; register_mem_pool_host), HiCacheStorageConfig,
the `dynamic` backend factory (backend_name/module_path/class_name required, issubclass check,
``cls(storage_config, kwargs)`` then register_mem_pool_host), StorageMetrics, and host pools
with SGLang's layouts: MHA page_first (2 pointers per page: K then V, V = K + the K half's
bytes), MHA layer_first (2 x layers pointers per page) and MLA page_first (1 pointer per page),
with get_page_buffer_meta() and the generic path's flat-page helpers."""

from __future__ import annotations

import abc
import dataclasses
import importlib
import sys
import types
from typing import List, Optional

import torch

_NAMES = ["sglang", "sglang.srt", "sglang.srt.mem_cache", "sglang.srt.mem_cache.hicache_storage",
          "sglang.srt.mem_cache.storage", "sglang.srt.mem_cache.storage.backend_factory",
          "sglang.srt.metrics", "sglang.srt.metrics.collector"]


@dataclasses.dataclass
class HiCacheStorageConfig:
    tp_rank: int
    tp_size: int
    pp_rank: int
    pp_size: int
    attn_cp_rank: int
    attn_cp_size: int
    is_mla_model: bool
    enable_storage_metrics: bool
    is_page_first_layout: bool
    model_name: Optional[str]
    dp_rank: int = 0
    dp_size: int = 1
    tp_lcm_size: Optional[int] = None
    should_split_heads: bool = False
    extra_config: Optional[dict] = None


@dataclasses.dataclass
class HiCacheStorageExtraInfo:
    prefix_keys: Optional[List[str]] = None
    extra_info: Optional[dict] = None


class HiCacheStorage(abc.ABC):
    def register_mem_pool_host(self, mem_pool_host):
        self.mem_pool_host = mem_pool_host

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError()

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        raise NotImplementedError()

    @abc.abstractmethod
    def get(self, key, target_location=None, target_sizes=None): ...

    @abc.abstractmethod
    def batch_get(self, keys, target_locations=None, target_sizes=None): ...

    @abc.abstractmethod
    def set(self, key, value=None, target_location=None, target_sizes=None): ...

    @abc.abstractmethod
    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None): ...

    @abc.abstractmethod
    def exists(self, key): ...

    def batch_exists(self, keys, extra_info=None) -> int:
        for i in range(len(keys)):
            if not self.exists(keys[i]):
                return i
        return len(keys)

    def clear(self):
        pass

    def get_stats(self):
        return None


@dataclasses.dataclass
class StorageMetrics:
    prefetch_pgs: List[int] = dataclasses.field(default_factory=list)
    backup_pgs: List[int] = dataclasses.field(default_factory=list)
    prefetch_bandwidth: List[float] = dataclasses.field(default_factory=list)
    backup_bandwidth: List[float] = dataclasses.field(default_factory=list)


class StorageBackendFactory:
    @staticmethod
    def create_backend(backend_name, storage_config, mem_pool_host, **kwargs):
        """The `dynamic` path of SGLang's factory, then the controller's register call."""
        assert backend_name == "dynamic"
        extra = storage_config.extra_config or {}
        for k in ("backend_name", "module_path", "class_name"):
            if k not in extra:
                raise ValueError(f"dynamic backend needs {k}")
        cls = getattr(importlib.import_module(extra["module_path"]), extra["class_name"])
        if not issubclass(cls, HiCacheStorage):
            raise TypeError(f"{cls} is not a HiCacheStorage")
        backend = cls(storage_config, dict(kwargs))
        backend.register_mem_pool_host(mem_pool_host)
        return backend


class HostPool:
    """A host KV pool of ``size`` tokens: MHA page_first / layer_first, or MLA page_first."""

    def __init__(self, size=1024, page_size=16, layers=4, heads=2, head_dim=64, dtype=torch.bfloat16,
                 layout="page_first", mla=False):
        self.size, self.page_size, self.layer_num = size, page_size, layers
        self.head_num, self.head_dim, self.dtype = heads, head_dim, dtype
        self.layout, self.mla = layout, mla
        self.itemsize = torch.tensor([], dtype=dtype).element_size()
        if mla:
            self.kv_buffer = torch.zeros((size, layers, 1, head_dim), dtype=dtype)
        elif layout == "page_first":
            self.kv_buffer = torch.zeros((2, size, layers, heads, head_dim), dtype=dtype)
        else:
            self.kv_buffer = torch.zeros((2, layers, size, heads, head_dim), dtype=dtype)
        self.base = self.kv_buffer.data_ptr()

    def token_bytes(self):
        return (1 if self.mla else self.head_num) * self.head_dim * self.itemsize

    def get_page_buffer_meta(self, host_indices):
        idx = host_indices.tolist()
        ptrs, sizes = [], []
        tb = self.token_bytes()
        for p in range(0, len(idx), self.page_size):
            t = idx[p]
            if self.mla:
                ptrs.append(self.base + t * self.layer_num * tb)
                sizes.append(self.page_size * self.layer_num * tb)
            elif self.layout == "page_first":
                k = self.base + t * self.layer_num * tb
                half = self.size * self.layer_num * tb
                ptrs += [k, k + half]
                sizes += [self.page_size * self.layer_num * tb] * 2
            else:
                half = self.layer_num * self.size * tb
                for kv in range(2):
                    for layer in range(self.layer_num):
                        ptrs.append(self.base + kv * half + layer * self.size * tb + t * tb)
                        sizes.append(self.page_size * tb)
        return ptrs, sizes

    # the generic path's helpers
    def _page(self, index):
        if self.mla:
            return [self.kv_buffer[index:index + self.page_size]]
        if self.layout == "page_first":
            return [self.kv_buffer[kv, index:index + self.page_size] for kv in range(2)]
        return [self.kv_buffer[kv, :, index:index + self.page_size] for kv in range(2)]

    def get_dummy_flat_data_page(self):
        n = sum(p.numel() for p in self._page(0))
        return torch.zeros(n, dtype=self.dtype)

    def get_data_page(self, index, flat=True):
        return torch.cat([p.flatten() for p in self._page(index)])

    def set_from_flat_data_page(self, index, data_page):
        off = 0
        for p in self._page(index):
            n = p.numel()
            p.copy_(data_page[off:off + n].view(p.shape))
            off += n


def install():
    mods = {n: types.ModuleType(n) for n in _NAMES}
    for n in _NAMES:
        mods[n].__path__ = []
        if "." in n:
            parent, child = n.rsplit(".", 1)
            setattr(mods[parent], child, mods[n])
    hs = mods["sglang.srt.mem_cache.hicache_storage"]
    hs.HiCacheStorage, hs.HiCacheStorageConfig = HiCacheStorage, HiCacheStorageConfig
    hs.HiCacheStorageExtraInfo = HiCacheStorageExtraInfo
    hs.STORAGE_BATCH_SIZE = 128
    mods["sglang.srt.mem_cache.storage.backend_factory"].StorageBackendFactory = StorageBackendFactory
    mods["sglang.srt.metrics.collector"].StorageMetrics = StorageMetrics
    sys.modules.update(mods)


def uninstall():
    for n in _NAMES:
        sys.modules.pop(n, None)


def config(extra, tp_rank=0, tp_size=1, mla=False, pp_rank=0, pp_size=1, model="meta-llama/Llama-3.1-8B"):
    return HiCacheStorageConfig(tp_rank=tp_rank, tp_size=tp_size, pp_rank=pp_rank, pp_size=pp_size,
                                attn_cp_rank=0, attn_cp_size=1, is_mla_model=mla,
                                enable_storage_metrics=True, is_page_first_layout=True,
                                model_name=model, extra_config=dict(extra))


def page_hashes(n, seed=0):
    """SGLang-like 64-char hex page hashes (chained)."""
    import hashlib
    out, prev = [], b""
    for i in range(n):
        prev = hashlib.sha256(prev + (seed * 1000 + i).to_bytes(4, "little")).digest()
        out.append(prev.hex())
    return out


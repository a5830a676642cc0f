# SPDX-License-Identifier: MIT
"""kvblk.integrations.lmcache_remote driven as LMCache drives an in-process remote storage
plugin, through fake_lmcache (the notes' contract: loader, ConnectorContext, MemoryObj
ownership, one event loop, timeouts that cancel)."""

import importlib
import os
import threading

import pytest
import torch

import fake_lmcache as fl
from kvstore_util import MiB, store_path


@pytest.fixture(scope="module")
def plug():
    fl.install()
    import kvblk.integrations.lmcache_remote as m
    m = importlib.reload(m)  # now over the fake's ConnectorAdapter and RemoteConnector
    assert m.HAVE_LMCACHE
    yield m
    fl.uninstall()
    importlib.reload(m)


def extra(path, name="kvblk", prefix="remote_storage_plugin", **more):
    d = {f"remote_storage_plugin.{name}.module_path": "kvblk.integrations.lmcache_remote",
         f"remote_storage_plugin.{name}.class_name": "KvblkConnectorAdapter",
         f"{prefix}.{name}.path": path,
         f"{prefix}.{name}.file_bytes": "600MiB",
         f"{prefix}.{name}.journal_bytes": "4MiB",
         f"{prefix}.{name}.classes": "[4MiB, 32MiB]"}
    d.update({f"{prefix}.{name}.{k}": v for k, v in more.items()})
    return d


class Env:
    def __init__(self, plug, tmpdir):
        self.plug = plug
        self.tmpdir = tmpdir
        self.sl = fl.StorageLoop()
        self.cpu = fl.LocalCPUBackend()
        self.conns = []

    def connect(self, name="kvblk", metadata=None, cpu=None, **more):
        self.path = getattr(self, "path", None) or store_path(self.tmpdir, "lmc")
        cfg = fl.Config([name], extra(self.path, name, **more))
        c = fl.create_connector(name, self.sl.loop, cpu if cpu is not None else self.cpu, cfg,
                                metadata or fl.Metadata())
        self.conns.append(c)
        return c

    def run(self, coro, timeout=60):
        return self.sl.run(coro, timeout)

    def close(self):
        for c in self.conns:
            self.run(c.close())
        self.sl.stop()
        if getattr(self, "path", None) and os.path.exists(self.path):
            os.unlink(self.path)


@pytest.fixture
def env(plug, tmpdir_disk):
    e = Env(plug, tmpdir_disk)
    yield e
    e.close()


SHAPE_4M = (2, 8, 256, 512)      # bf16: 4 MiB
SHAPE_32M = (2, 32, 256, 1024)   # bf16: 32 MiB, one Llama-3.1-8B chunk


def obj(cpu, shape, seed, dtype=torch.bfloat16, fmt=fl.MemoryFormat.KV_2LTD):
    o = cpu.allocate(torch.Size(shape), dtype, fmt)
    g = torch.Generator().manual_seed(seed)
    o.tensor.copy_(torch.randint(0, 256, (o.tensor.numel(),), dtype=torch.uint8, generator=g))
    return o


def key(i, worker=0):
    return fl.CacheEngineKey("meta-llama/Llama-3.1-8B", 1, worker, 0xABC0 + i)


# ------------------------------------------------------------------ loading

def test_loader_loads_the_adapter_and_urls(plug, env, caplog):
    cfg = fl.Config(["kvblk"], extra("/nonexistent"))
    ads = fl.load_plugin_adapters(cfg)
    assert len(ads) == 1 and isinstance(ads[0], fl.ConnectorAdapter)
    a = ads[0]
    assert a.can_parse("plugin://kvblk") and a.can_parse("plugin://kvblk.fast")
    assert not a.can_parse("plugin://fs") and not a.can_parse("plugin://kvblkx")
    assert not a.can_parse("fs:///tmp") and not a.can_parse("kvblk://x")
    # not named in remote_storage_plugins: not loaded; broken entries are logged, not raised
    assert fl.load_plugin_adapters(fl.Config([], extra("/x"))) == []
    bad = extra("/x")
    bad["remote_storage_plugin.kvblk.module_path"] = "kvblk.integrations.nope"
    assert fl.load_plugin_adapters(fl.Config(["kvblk"], bad)) == []
    assert fl.load_plugin_adapters(fl.Config(["kvblk"], None)) == []


def test_instance_name_and_older_option_prefix(env):
    c = env.connect("kvblk.fast", prefix="remote_connector")
    assert c.c.plugin_name == "kvblk.fast" and os.path.exists(env.path)
    assert env.run(c.ping()) == 0


def test_options_are_checked(env):
    with pytest.raises(ValueError, match="file_bytes 'lots' is not a byte count"):
        env.connect(file_bytes="lots")
    env.conns.clear()
    env.path = None
    with pytest.raises(TypeError, match="unknown option 'remote_storage_plugin.kvblk.pathz'"):
        env.connect(pathz="/x")
    env.path = None
    with pytest.raises(TypeError, match="create must be true or false"):
        env.connect(create=7)
    env.path = None


def test_worker_id_in_the_path(plug, env):
    env.path = os.path.join(env.tmpdir, f"w{os.getpid()}-{{worker_id}}of{{world_size}}.kvs")
    c = env.connect(metadata=fl.Metadata(worker_id=3, world_size=4))
    real = env.path.format(worker_id=3, world_size=4)
    assert c.c._store.paths == [real] and os.path.exists(real)
    env.run(c.close())
    env.conns.clear()
    os.unlink(real)
    env.path = None


def test_scheduler_opens_no_store(plug, env):
    c = env.connect(cpu=fl.SafeLocalCPUBackend())
    assert not os.path.exists(env.path)
    assert env.run(c.exists(key(0))) is False
    assert c.batched_contains([key(0)]) == 0
    assert env.run(c.get(key(0))) is None


# ------------------------------------------------------------------ data

def test_batched_put_get_mixed_sizes_keeps_layout_and_bytes(env):
    c = env.connect()
    cpu = env.cpu
    shapes = [SHAPE_4M, SHAPE_32M, SHAPE_4M, (2, 8, 100, 512)]  # the last a partial chunk
    srcs = [obj(cpu, s, i) for i, s in enumerate(shapes)]
    want = [bytes(o.byte_array) for o in srcs]
    keys = [key(i) for i in range(len(shapes))]
    env.run(c.batched_put(keys, srcs))
    # InstrumentedRemoteConnector dropped LMCache's reference; the connector kept none.
    assert all(o.freed for o in srcs) and cpu.live == {}
    got = env.run(c.batched_get(keys + [key(99)]))
    assert got[-1] is None
    for i, o in enumerate(got[:-1]):
        assert tuple(o.get_shape()) == shapes[i] and o.get_dtype() == torch.bfloat16
        assert o.get_memory_format() == fl.MemoryFormat.KV_2LTD
        assert o.get_ref_count() == 1 and bytes(o.byte_array) == want[i]
        o.ref_count_down()
    assert cpu.live == {}
    single = env.run(c.get(keys[1]))
    assert bytes(single.byte_array) == want[1]
    single.ref_count_down()
    env.run(c.put(key(50), obj(cpu, SHAPE_4M, 50, dtype=torch.float16, fmt=fl.MemoryFormat.KV_T2D)))
    o = env.run(c.get(key(50)))
    assert o.get_dtype() == torch.float16 and o.get_memory_format() == fl.MemoryFormat.KV_T2D
    o.ref_count_down()


def test_prefix_semantics_and_misses(env):
    c = env.connect()
    cpu = env.cpu
    env.run(c.batched_put([key(0), key(2)], [obj(cpu, SHAPE_4M, 0), obj(cpu, SHAPE_4M, 2)]))
    ks = [key(0), key(1), key(2)]
    assert c.batched_contains(ks) == 1
    assert env.run(c.batched_async_contains("look", ks)) == 1
    assert env.run(c.batched_async_contains("look", [key(0), key(2)])) == 2
    assert env.run(c.exists(key(2))) and not c.exists_sync(key(1))
    objs = env.run(c.batched_get_non_blocking("look", ks))
    assert len(objs) == 1 and objs[0].get_ref_count() == 1
    assert len(cpu.live) == 1  # key(2)'s object, fetched after the miss, was released
    objs[0].ref_count_down()
    assert sorted(env.run(c.list())) == sorted(k.to_string() for k in (key(0), key(2)))
    assert c.remove_sync(key(0)) and not c.remove_sync(key(0))
    assert c.batched_contains(ks) == 0


def test_full_cpu_buffer_is_a_miss(env):
    c = env.connect()
    env.run(c.put(key(0), obj(env.cpu, SHAPE_4M, 0)))
    small = fl.LocalCPUBackend(capacity=MiB)
    c.c.local_cpu_backend = small
    assert env.run(c.get(key(0))) is None and small.live == {}


def test_cancelled_get_releases_only_after_the_reads_landed(env):
    c = env.connect()
    cpu = env.cpu
    keys = [key(i) for i in range(8)]
    env.run(c.batched_put(keys, [obj(cpu, SHAPE_4M, i) for i in range(8)]))
    want = {}
    for i, k in enumerate(keys):
        o = obj(cpu, SHAPE_4M, i)
        want[k.to_string()] = bytes(o.byte_array[:4096]) + bytes(o.byte_array[-4096:])
        o.ref_count_down()
    store = c.c._store
    submitted = threading.Event()
    orig = store.submit_get

    def submit_get(*a, **kw):
        t = orig(*a, **kw)
        submitted.set()
        return t

    store.submit_get = submit_get
    landed = []
    cpu.on_free = lambda o: landed.append(bytes(o.byte_array[:4096]) + bytes(o.byte_array[-4096:]))
    import asyncio
    fut = asyncio.run_coroutine_threadsafe(c.batched_get(keys), env.sl.loop)
    assert submitted.wait(30)
    fut.cancel()  # LMCache's timeout path
    deadline = threading.Event()
    for _ in range(300):
        if not cpu.live:
            break
        deadline.wait(0.05)
    assert cpu.live == {}
    assert len(landed) == 8
    assert sorted(landed) == sorted(want.values())  # each freed only with its bytes in place


def test_cancelled_put_still_waits_for_the_store(env):
    c = env.connect()
    cpu = env.cpu
    srcs = [obj(cpu, SHAPE_4M, 10 + i) for i in range(4)]
    keys = [key(10 + i) for i in range(4)]
    store = c.c._store
    seen = []
    cpu.on_free = lambda o: seen.append(store.exists([k.to_string() for k in keys]).ok)
    import asyncio
    fut = asyncio.run_coroutine_threadsafe(c.batched_put(keys, srcs), env.sl.loop)
    fut.cancel()
    for _ in range(400):
        if len(seen) == 4:
            break
        threading.Event().wait(0.05)
    # Freed (by the wrapper's finally) only once the put had completed, if it ran at all.
    assert len(seen) == 4 and len(set(seen)) == 1 and seen[0] in (0, 4)


def test_ping_list_and_close(env):
    c = env.connect()
    assert env.run(c.ping()) == 0
    assert env.run(c.list()) == []
    env.run(c.close())
    assert env.run(c.ping()) == 1 and env.run(c.get(key(0))) is None
    assert c.batched_contains([key(0)]) == 0


def test_meta_encoding_round_trip(plug):
    m = plug.encode_meta(6, [torch.uint8, torch.bfloat16], [(3, 5, 7), (2, 8, 256, 512)])
    assert plug.decode_meta(m) == (6, ["uint8", "bfloat16"], [(3, 5, 7), (2, 8, 256, 512)])
    with pytest.raises(ValueError):
        plug.decode_meta(b"xx")

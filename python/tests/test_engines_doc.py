# SPDX-License-Identifier: MIT
"""The engine configurations of docs/engines.md, read from the file by their `snippet:` markers
and used as they are: the Python example is run, the LMCache and SGLang configurations are
parsed and loaded through the adapters (the engines' loading paths through the fakes, as in
test_lmcache_remote.py and test_sglang.py) and move 4 MiB and 32 MiB chunks.

Only two things of the text are changed, to run in a test: the directory /var/lib/kvblk/
becomes the test's temporary directory, and sizes over 1 GiB become 600 MiB."""

import contextlib
import importlib
import io
import json
import os
import re
import shlex

import numpy as np
import pytest
import torch
import yaml

import fake_lmcache as fl
import fake_sglang as fs
from lmcache_harness import DemuxHarness, connector_module

DOC = os.path.join(os.environ.get("KVBLK_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", ".."),
                   "docs", "engines.md")
MiB = 1 << 20


def snippets():
    text = open(DOC, encoding="utf-8").read()
    found = re.findall(r"<!-- snippet: (\S+) -->\n```(\w+)\n(.*?)\n```", text, re.S)
    out = {name: (lang, body) for name, lang, body in found}
    assert len(out) == len(found), "two snippets share a name"
    return out


def for_test(text, tmpdir):
    text = text.replace("/var/lib/kvblk/", tmpdir.rstrip("/") + "/")
    return re.sub(r"\b(\d+)GiB\b", "600MiB", text)


@pytest.fixture
def tmp(tmpdir_disk):
    d = os.path.join(tmpdir_disk, f"doc-{os.getpid()}-{np.random.randint(1 << 30)}")
    os.mkdir(d)
    yield d
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


def test_every_snippet_is_there():
    assert set(snippets()) == {"python-kvstore", "lmcache-mp-json", "lmcache-inprocess-yaml",
                               "lmcache-inprocess-vllm-json", "sglang-cmdline"}


def test_python_example_runs(tmp):
    lang, body = snippets()["python-kvstore"]
    assert lang == "python"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(for_test(body, tmp), "docs/engines.md:python-kvstore", "exec"), {})
    assert out.getvalue().startswith("2 [")  # the stats line: 2 hits, no evictions
    assert sorted(os.listdir(tmp)) == ["a.kvs", "b.kvs"]


def test_lmcache_mp_native_plugin_config(tmp):
    lang, body = snippets()["lmcache-mp-json"]
    cfg = json.loads(for_test(body, tmp))
    assert cfg["type"] == "native_plugin"
    # LMCache's native_plugin factory: import, build with adapter_params, check the methods.
    cls = getattr(importlib.import_module(cfg["module_path"]), cfg["class_name"])
    assert cls is connector_module().KvblkConnector
    c = cls(**cfg["adapter_params"])
    for m in ("event_fd", "submit_batch_get", "submit_batch_set", "submit_batch_exists",
              "drain_completions", "close", "submit_batch_delete"):
        assert callable(getattr(c, m, None))
    h = DemuxHarness(c, poll_ms=50)
    try:
        sizes = [4 * MiB, 32 * MiB, 4 * MiB, 32 * MiB]
        data = [np.random.default_rng(i).integers(0, 256, n, dtype=np.uint8) for i, n in enumerate(sizes)]
        keys = [f"llama@00000000@0@{i:064x}" for i in range(4)]
        assert h.set(keys, data).bools == [True] * 4
        out = [np.zeros(n, np.uint8) for n in sizes]
        r = h.get(keys, out)
        assert (r.ok, r.bools) == (True, [True] * 4)
        assert all(np.array_equal(a, b) for a, b in zip(out, data))
    finally:
        h.close()
        h.assert_clean()


@pytest.fixture
def lmcache_fake():
    fl.install()
    import kvblk.integrations.lmcache_remote as m
    yield importlib.reload(m)
    fl.uninstall()
    importlib.reload(m)


def _lmcache_round_trip(config, tmp, plugin="kvblk"):
    sl = fl.StorageLoop()
    cpu = fl.LocalCPUBackend()
    try:
        c = fl.create_connector(plugin, sl.loop, cpu, config, fl.Metadata(worker_id=1, world_size=2))
        assert c.c._store.paths == [os.path.join(tmp, "lmcache-1.kvs")]
        shapes = [(2, 8, 256, 512), (2, 32, 256, 1024)]  # bf16: 4 MiB and 32 MiB
        objs = [cpu.allocate(torch.Size(s), torch.bfloat16, fl.MemoryFormat.KV_2LTD) for s in shapes]
        for i, o in enumerate(objs):
            o.tensor.fill_(i + 1)
        want = [bytes(o.byte_array) for o in objs]
        keys = [fl.CacheEngineKey("m", 2, 1, 0x10 + i) for i in range(2)]
        sl.run(c.batched_put(keys, objs))
        got = sl.run(c.batched_get(keys))
        assert [bytes(o.byte_array) for o in got] == want
        assert [tuple(o.get_shape()) for o in got] == shapes
        for o in got:
            o.ref_count_down()
        sl.run(c.close())
    finally:
        sl.stop()


def test_lmcache_inprocess_yaml(tmp, lmcache_fake):
    lang, body = snippets()["lmcache-inprocess-yaml"]
    assert lang == "yaml"
    y = yaml.safe_load(for_test(body, tmp))
    assert y["remote_storage_plugins"] == ["kvblk"]
    _lmcache_round_trip(fl.Config(y["remote_storage_plugins"], y["extra_config"]), tmp)


def test_lmcache_inprocess_from_vllm(tmp, lmcache_fake):
    lang, body = snippets()["lmcache-inprocess-vllm-json"]
    cfg = json.loads(for_test(body, tmp))
    assert cfg["kv_connector"] == "LMCacheConnectorV1"
    extra = {k[len("lmcache."):]: v for k, v in cfg["kv_connector_extra_config"].items()
             if k.startswith("lmcache.")}
    _lmcache_round_trip(fl.Config(extra["remote_storage_plugins"], extra["extra_config"]), tmp)
    y = yaml.safe_load(for_test(snippets()["lmcache-inprocess-yaml"][1], tmp))
    assert {k: str(v) for k, v in extra["extra_config"].items()} == \
        {k: str(v) for k, v in y["extra_config"].items()}  # the same plugin settings


@pytest.fixture
def sglang_fake():
    fs.install()
    import kvblk.integrations.sglang as m
    yield importlib.reload(m)
    fs.uninstall()
    importlib.reload(m)


def test_sglang_command_line(tmp, sglang_fake):
    lang, body = snippets()["sglang-cmdline"]
    assert lang == "bash"
    argv = shlex.split(for_test(body, tmp).replace("\\\n", " "))
    assert argv[argv.index("--hicache-storage-backend") + 1] == "dynamic"
    extra = json.loads(argv[argv.index("--hicache-storage-backend-extra-config") + 1])
    page = int(argv[argv.index("--page-size") + 1])
    assert argv[argv.index("--hicache-mem-layout") + 1] == "page_first"
    # page 64, 32 layers x 8 KV heads x 128 dims, bf16: K and V of 4 MiB per page (Llama-3.1-8B)
    pool = fs.HostPool(size=8 * page, page_size=page, layers=32, heads=8, head_dim=128)
    cfg = fs.config(extra, tp_rank=1, tp_size=2)
    b = fs.StorageBackendFactory.create_backend("dynamic", cfg, pool)
    try:
        assert b.store.paths == [os.path.join(tmp, "hicache-tp1.kvs")]
        assert [c["slot_bytes"] for c in b.store.info()["classes"]] == [4 * MiB]
        pool.kv_buffer.view(torch.uint8).view(-1)[:] = torch.arange(256, dtype=torch.uint8).repeat(
            pool.kv_buffer.numel() * 2 // 256)
        keys = fs.page_hashes(3)
        idx = torch.arange(0, 3 * page, dtype=torch.int64)
        assert b.batch_set_v1(keys, idx) == [True] * 3
        before = pool.kv_buffer.clone()
        pool.kv_buffer.zero_()
        assert b.batch_exists(keys) == 3
        assert b.batch_get_v1(keys, idx) == [True] * 3
        got, want = pool.kv_buffer[:, :3 * page], before[:, :3 * page]
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
    finally:
        b.close()

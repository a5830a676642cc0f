# SPDX-License-Identifier: MIT
"""kvblk.integrations.sglang driven as SGLang's HiCache controller drives an L3 backend,
through fake_sglang (the notes' contract: the dynamic factory, register_mem_pool_host, the
zero-copy v1 path with get_page_buffer_meta, the generic path, prefix counts, never raising)."""

import importlib
import os
import threading

import pytest
import torch

import fake_sglang as fs
from kvstore_util import store_path


@pytest.fixture(scope="module")
def mod():
    fs.install()
    import kvblk.integrations.sglang as m
    m = importlib.reload(m)
    assert issubclass(m.KvblkHiCacheStorage, fs.HiCacheStorage)
    yield m
    fs.uninstall()
    importlib.reload(m)


def extra(path, v1=True, **more):
    d = {"backend_name": "kvblk", "module_path": "kvblk.integrations.sglang",
         "class_name": "KvblkHiCacheStorage", "interface_v1": 1 if v1 else 0, "path": path,
         "file_bytes": "96MiB", "journal_bytes": "4MiB"}
    d.update(more)
    return d


@pytest.fixture
def paths(tmpdir_disk):
    made = []

    def new():
        p = store_path(tmpdir_disk, "sgl")
        made.append(p)
        return p

    yield new
    for p in made:
        for f in (p, p.replace("{tp_rank}", "0"), p.replace("{tp_rank}", "1")):
            if os.path.exists(f):
                os.unlink(f)


def fill(pool, seed):
    g = torch.Generator().manual_seed(seed)
    flat = pool.kv_buffer.view(torch.uint8).view(-1)
    flat.copy_(torch.randint(0, 256, (flat.numel(),), dtype=torch.uint8, generator=g))


def page_indices(pool, pages):
    return torch.cat([torch.arange(p * pool.page_size, (p + 1) * pool.page_size) for p in pages]).to(torch.int64)


def page_bytes(pool, page):
    ptrs, sizes = pool.get_page_buffer_meta(page_indices(pool, [page]))
    import ctypes
    return b"".join(ctypes.string_at(p, s) for p, s in zip(ptrs, sizes))


@pytest.mark.parametrize("layout,mla", [("page_first", False), ("layer_first", False), ("page_first", True)])
def test_zero_copy_round_trip(mod, paths, layout, mla):
    pool = fs.HostPool(layout=layout, mla=mla)
    b = fs.StorageBackendFactory.create_backend("dynamic", fs.config(extra(paths()), mla=mla), pool)
    try:
        assert isinstance(b, mod.KvblkHiCacheStorage)
        want_parts = 1 if mla else (2 if layout == "page_first" else 2 * pool.layer_num)
        assert b._parts == want_parts
        fill(pool, 1)
        keys = fs.page_hashes(6)
        src_pages = [3, 7, 11, 20, 30, 40]
        want = [page_bytes(pool, p) for p in src_pages]
        assert b.batch_set_v1(keys, page_indices(pool, src_pages)) == [True] * 6
        assert b.batch_exists(keys) == 6
        assert b.batch_exists(keys[:2] + ["f" * 64] + keys[2:]) == 2
        # read into other pages, with the rest of the pool untouched
        fill(pool, 2)
        before = pool.kv_buffer.clone()
        dst_pages = [50, 51, 52, 53, 54, 55]
        ok = b.batch_get_v1(keys[:3] + ["e" * 64] + keys[3:5], page_indices(pool, dst_pages))
        assert ok == [True, True, True, False, True, True]
        for k, p in zip([0, 1, 2, None, 3, 4], dst_pages):
            if k is not None:
                assert page_bytes(pool, p) == want[k]
        # nothing outside the pages read changed
        touched = torch.zeros(pool.size, dtype=torch.bool)
        for p in dst_pages:
            touched[p * pool.page_size:(p + 1) * pool.page_size] = True
        tok_dim = 0 if mla else (1 if layout == "page_first" else 2)
        rest = (~touched).nonzero().flatten()
        # compared as bytes (random bits make NaNs, which are never equal as floats)
        assert torch.equal(pool.kv_buffer.view(torch.uint8).index_select(tok_dim, rest),
                           before.view(torch.uint8).index_select(tok_dim, rest))
        assert not torch.equal(pool.kv_buffer.view(torch.uint8), before.view(torch.uint8))
        # setting a present page succeeds without writing it again
        puts = b.store.stats()["puts"]
        assert b.batch_set_v1(keys[:2], page_indices(pool, [60, 61])) == [True, True]
        assert b.store.stats()["puts"] == puts
        m = b.get_stats()
        assert isinstance(m, fs.StorageMetrics) and m.prefetch_pgs == [5] and m.backup_pgs == [6]
        assert b.get_stats().prefetch_pgs == []
    finally:
        b.close()


def test_generic_path_round_trip(mod, paths):
    pool = fs.HostPool()
    b = fs.StorageBackendFactory.create_backend("dynamic", fs.config(extra(paths(), v1=False)), pool)
    try:
        fill(pool, 3)
        keys = fs.page_hashes(4, seed=1)
        values = [pool.get_data_page(p * pool.page_size, flat=True) for p in range(4)]
        assert b.batch_set(keys, values) is True
        assert b.set(keys[0], values[0]) is True
        assert b.exists(keys[2]) and not b.exists("0" * 64)
        dummies = [pool.get_dummy_flat_data_page() for _ in range(5)]
        got = b.batch_get(keys[:2] + ["1" * 64] + keys[2:], dummies)
        assert got[2] is None
        for g, v in zip(got[:2] + got[3:], values):
            assert g is not None and torch.equal(g.view(torch.uint8), v.view(torch.uint8))
        g = b.get(keys[3], pool.get_dummy_flat_data_page())
        assert torch.equal(g.view(torch.uint8), values[3].view(torch.uint8))
    finally:
        b.close()


def test_ranks_have_distinct_keys_and_stores(mod, paths):
    p = paths().replace(".kvs", "-tp{tp_rank}.kvs")
    pool0, pool1 = fs.HostPool(), fs.HostPool()
    b0 = fs.StorageBackendFactory.create_backend("dynamic", fs.config(extra(p), tp_rank=0, tp_size=2), pool0)
    b1 = fs.StorageBackendFactory.create_backend("dynamic", fs.config(extra(p), tp_rank=1, tp_size=2), pool1)
    try:
        assert b0.store.paths != b1.store.paths
        assert b0._suffix.endswith("@tp0of2") and b1._suffix.endswith("@tp1of2")
        fill(pool0, 5)
        keys = fs.page_hashes(2)
        assert b0.batch_set_v1(keys, page_indices(pool0, [0, 1])) == [True, True]
        assert b1.batch_exists(keys) == 0
        ks = [k.key.decode() for k in b0.store.keys()]
        assert all("@meta-llama/Llama-3.1-8B@tp0of2#" in k for k in ks) and len(ks) == 4
    finally:
        b0.close()
        b1.close()
    mla = mod.KvblkHiCacheStorage(fs.config(extra(paths(), classes=["64KiB"]), tp_rank=1, tp_size=2, mla=True))
    assert "@tp" not in mla._suffix  # MLA: no rank in the key
    mla.close()


def test_never_raises_and_reports_failures(mod, paths):
    pool = fs.HostPool()
    b = fs.StorageBackendFactory.create_backend("dynamic", fs.config(extra(paths())), pool)
    keys = fs.page_hashes(3)
    fill(pool, 1)
    assert b.batch_set_v1(keys, page_indices(pool, [0, 1, 2])) == [True] * 3
    # host_indices of the wrong length: False per page, no exception
    assert b.batch_get_v1(keys, torch.arange(5, dtype=torch.int64)) == [False] * 3
    assert b.batch_set_v1(keys, torch.arange(5, dtype=torch.int64)) == [False] * 3
    assert b.batch_get(keys, None) == [None] * 3
    assert b.batch_set(keys, None) is False
    b.close()
    b.close()  # idempotent
    assert b.batch_exists(keys) == 0
    assert b.batch_get_v1(keys, page_indices(pool, [0, 1, 2])) == [False] * 3
    assert b.batch_set_v1(keys, page_indices(pool, [0, 1, 2])) == [False] * 3
    assert b.clear() is False and b.get_stats() is not None


def test_full_store_refuse_reports_false_per_page(mod, paths):
    pool = fs.HostPool(size=4096, page_size=64)  # pages of 2 x 64 KiB
    b = fs.StorageBackendFactory.create_backend(
        "dynamic", fs.config(extra(paths(), file_bytes="8MiB", when_full="refuse")), pool)
    try:
        slots = b.store.info()["classes"][0]["slots"]
        pages = slots // 2 + 3
        keys = fs.page_hashes(pages)
        ok = []
        for s in range(0, pages, 16):
            ok += b.batch_set_v1(keys[s:s + 16], page_indices(pool, [p % 64 for p in range(s, min(pages, s + 16))]))
        assert ok.count(True) == slots // 2 and ok[-1] is False
        assert b.batch_exists(keys) == slots // 2
    finally:
        b.close()


def test_clear_and_reattach(mod, paths):
    p = paths()
    pool = fs.HostPool()
    b = fs.StorageBackendFactory.create_backend("dynamic", fs.config(extra(p)), pool)
    keys = fs.page_hashes(4)
    fill(pool, 9)
    assert b.batch_set_v1(keys, page_indices(pool, [0, 1, 2, 3])) == [True] * 4
    b.close()  # detach
    b2 = fs.StorageBackendFactory.create_backend("dynamic", fs.config(extra(p)), pool)  # re-attach
    try:
        assert b2.batch_exists(keys) == 4  # the store survived: opened, not made anew
        assert b2.clear() is True
        assert b2.batch_exists(keys) == 0
    finally:
        b2.close()


def test_threads_concurrently(mod, paths):
    pool = fs.HostPool(size=4096)
    b = fs.StorageBackendFactory.create_backend("dynamic", fs.config(extra(paths(), file_bytes="128MiB")), pool)
    fill(pool, 4)
    errs = []

    def backup(t):
        try:
            for r in range(5):
                keys = fs.page_hashes(8, seed=t * 10 + r)
                pages = [(t * 40 + r * 8 + i) % 256 for i in range(8)]
                assert b.batch_set_v1(keys, page_indices(pool, pages)) == [True] * 8
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    def prefetch(t):
        try:
            for r in range(5):
                keys = fs.page_hashes(8, seed=t * 10 + r)
                n = b.batch_exists(keys)
                if n:
                    b.batch_get_v1(keys[:n], page_indices(pool, list(range(200, 200 + n))))
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    ths = [threading.Thread(target=backup, args=(t,)) for t in range(3)]
    ths += [threading.Thread(target=prefetch, args=(t,)) for t in range(3)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    b.close()
    assert errs == []


def test_bad_options_raise_from_the_constructor(mod, paths):
    with pytest.raises(TypeError, match="set path"):
        mod.KvblkHiCacheStorage(fs.config({"interface_v1": 1}))
    with pytest.raises(ValueError, match="file_bytes 'big' is not a byte count"):
        mod.KvblkHiCacheStorage(fs.config(extra(paths(), file_bytes="big")))
    with pytest.raises(ValueError, match="unknown placeholder"):
        mod.KvblkHiCacheStorage(fs.config(extra(paths() + "{rank}", classes=["64KiB"])))

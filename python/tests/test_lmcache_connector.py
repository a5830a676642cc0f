"""kvblk.integrations.lmcache (the multi-process native_plugin connector over the kvblk store)
driven as LMCache drives a native connector.

Every data test goes through DemuxHarness (lmcache_harness.py): submit under a lock, one thread
polling event_fd(), drain_completions(), routing by future id, exactly as LMCache's
NativeConnectorL2Adapter does.
"""

from __future__ import annotations

import errno
import gc
import logging
import os
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import kvblk

sys.path.insert(0, os.path.dirname(__file__))
from kvstore_util import MiB, store_path  # noqa: E402
from lmcache_harness import DemuxHarness, connector_module, lmcache_byte_view  # noqa: E402

lmc = connector_module()

SMALL = 60_000          # a chunk length that is not a multiple of the block size


class Env:
    def __init__(self, tmpdir):
        self.path = store_path(tmpdir, "lmc")
        self.open_ones = []

    def open(self, file_bytes="96MiB", classes=("64KiB",), **kw):
        kw.setdefault("journal_bytes", "4MiB")
        c = lmc.KvblkConnector(self.path, file_bytes=file_bytes, classes=list(classes), **kw)
        h = DemuxHarness(c, poll_ms=50)
        self.open_ones.append(h)
        return c, h

    def reopen(self, **kw):
        c = lmc.KvblkConnector(self.path, **kw)
        h = DemuxHarness(c, poll_ms=50)
        self.open_ones.append(h)
        return c, h

    def close(self, h):
        h.close()
        h.assert_clean()
        self.open_ones.remove(h)


@pytest.fixture
def env(tmpdir_disk):
    e = Env(tmpdir_disk)
    yield e
    for h in list(e.open_ones):
        h.close()
        h.assert_clean()
    if os.path.exists(e.path):
        os.unlink(e.path)


def payload(seed: int, n: int = SMALL) -> bytearray:
    return bytearray(np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes())


# ------------------------------------------------------------------ basics


def test_round_trip_4_and_32_MiB_chunks_in_one_batch(env):
    c, h = env.open(file_bytes="300MiB", classes=["4MiB", "32MiB"])
    sizes = [4 * MiB, 32 * MiB] * 2 + [4 * MiB - 512, 123_457]
    keys = [f"llama@{r:08x}@0@{i:064x}" for i, r in enumerate(range(len(sizes)))]
    data = [payload(i, n) for i, n in enumerate(sizes)]
    r = h.set(keys, data)
    assert (r.ok, r.error, r.bools) == (True, "", [True] * len(keys))
    out = [bytearray(n) for n in sizes]
    r = h.get(keys, out)
    assert (r.ok, r.error, r.bools) == (True, "", [True] * len(keys))
    for i in range(len(keys)):
        assert out[i] == data[i], f"key {i} differs"
    st = c.stats()
    assert st["hits"] == len(keys) and st["chunks"] == len(keys) and st["checksum_failures"] == 0


@pytest.mark.parametrize("backend", ["uring", "threadpool", "psync"])
def test_round_trip_every_backend(env, backend):
    c, h = env.open(backend=backend)
    assert c.info()["backend"] == backend
    keys = [f"k{i}" for i in range(8)]
    data = [payload(i, 40_000 + 3000 * i) for i in range(8)]
    assert h.set(keys, data).bools == [True] * 8
    out = [bytearray(len(d)) for d in data]
    r = h.get(keys, out)
    assert (r.ok, r.bools) == (True, [True] * 8) and out == data


def test_lmcache_views_and_other_dtypes(env):
    c, h = env.open()
    src = [payload(100 + i, 64 << 10) for i in range(4)]
    assert h.set([f"a{i}" for i in range(4)], src).bools == [True] * 4
    backing = [bytearray(64 << 10) for _ in range(2)]
    views = [lmcache_byte_view(b) for b in backing]
    assert views[0].format == "<B"
    r = h.get(["a1", "a3"], views)
    assert r.bools == [True, True]
    assert backing[0] == src[1] and backing[1] == src[3]
    f16 = np.zeros((64 << 10) // 2, dtype=np.float16)
    assert h.get(["a2"], [f16]).bools == [True] and f16.tobytes() == bytes(src[2])


def test_get_missing_keys_are_per_key_false_and_ok(env):
    c, h = env.open()
    h.set(["k0", "k2"], [payload(0), payload(2)])
    out = [bytearray(b"\xee" * SMALL) for _ in range(4)]
    r = h.get(["k0", "k1", "k2", "k3"], out)
    assert (r.ok, r.error, r.bools) == (True, "", [True, False, True, False])
    assert r.loaded(4) == [True, False, True, False]
    assert out[0] == payload(0) and out[2] == payload(2)
    st = c.stats()
    assert (st["hits"], st["misses"]) == (2, 2)


def test_get_into_a_buffer_of_another_size_is_an_error_with_text(env):
    c, h = env.open()
    h.set(["k"], [payload(1)])
    r = h.get(["k"], [bytearray(SMALL + 1)])   # larger: the chunk fits, but it is not this chunk
    assert (r.ok, r.bools) == (False, [False])
    assert r.error == f"1 of 1 chunks not loaded: key 'k': stored chunk is {SMALL} bytes, its buffer {SMALL + 1}"
    r = h.get(["k", "k"], [bytearray(1000), bytearray(SMALL)])  # smaller: EMSGSIZE
    assert (r.ok, r.bools) == (False, [False, True])
    assert f"key 'k': stored chunk is {SMALL} bytes, its buffer 1000" in r.error
    assert c.stats()["size_mismatches"] == 2


def test_exists_and_delete_durable(env):
    c, h = env.open()
    h.set(["a", "b", "c"], [payload(i) for i in range(3)])
    assert h.exists(["a", "x", "c"]).bools == [True, False, True]
    r = h.delete(["a", "x"])
    assert (r.ok, r.bools) == (True, [True, False])
    assert h.exists(["a", "b", "c"]).bools == [False, True, True]
    assert h.get(["a"], [bytearray(SMALL)]).bools == [False]
    env.close(h)
    c, h = env.reopen()  # the delete is durable: a restart does not bring "a" back
    assert h.exists(["a", "b", "c"]).bools == [False, True, True]


def test_overwrite_keeps_latest(env):
    c, h = env.open()
    h.set(["k"], [payload(1)])
    h.set(["k"], [payload(2, 30_000)])
    out = bytearray(30_000)
    assert h.get(["k"], [out]).bools == [True] and out == payload(2, 30_000)
    assert c.stats()["chunks"] == 1


def test_restart_finds_every_chunk(env):
    c, h = env.open()
    keys = [f"m@00000000@0@{i:x}" for i in range(20)]
    h.set(keys, [payload(i) for i in range(20)])
    env.close(h)
    c, h = env.reopen()
    assert c.stats()["chunks"] == 20
    assert h.exists(keys).bools == [True] * 20
    out = [bytearray(SMALL) for _ in keys]
    assert h.get(keys, out).bools == [True] * 20
    assert all(out[i] == payload(i) for i in range(20))


def test_foreign_missing_and_format(env, tmpdir_disk):
    with pytest.raises(kvblk.Error) as e:  # no file and no file_bytes
        lmc.KvblkConnector(store_path(tmpdir_disk, "missing"))
    assert e.value.errno == errno.ENOENT
    other = store_path(tmpdir_disk, "foreign")
    with open(other, "wb") as f:
        f.write(b"not a store" + bytes(32 << 20))
    try:
        with pytest.raises(kvblk.Error) as e:
            lmc.KvblkConnector(other, file_bytes="64MiB")
        assert e.value.errno == errno.EMEDIUMTYPE
        assert open(other, "rb").read(11) == b"not a store"  # left as it was
        c = lmc.KvblkConnector(other, slot_bytes=64 << 10, format=True, journal_bytes="4MiB")
        assert c.slot_bytes == 64 << 10
        c.close()
        with pytest.raises(ValueError, match="slot_bytes 131072 does not fit this store's largest class"):
            lmc.KvblkConnector(other, slot_bytes=128 << 10)
    finally:
        os.unlink(other)


def _flip_in_file(path, needle: bytes, at: int):
    """Find ``needle`` in the file and flip the byte ``at`` bytes after its start."""
    with open(path, "r+b") as f:
        data = f.read()
        off = data.find(needle)
        assert off >= 0, "pattern not found in the store"
        f.seek(off + at)
        b = f.read(1)
        f.seek(off + at)
        f.write(bytes([b[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())


def test_damaged_chunk_is_never_returned(env):
    c, h = env.open()
    h.set(["good", "bad"], [payload(1), payload(2)])
    env.close(h)
    _flip_in_file(env.path, bytes(payload(2)[:64]), 5000)
    c, h = env.reopen()
    out = [bytearray(SMALL), bytearray(SMALL)]
    r = h.get(["good", "bad"], out)
    assert r.bools == [True, False] and not r.ok
    assert "key 'bad': EBADMSG" in r.error and "CRC32C" in r.error
    assert out[0] == payload(1)
    assert c.stats()["checksum_failures"] == 1
    assert h.exists(["bad"]).bools == [False]  # dropped, durably
    env.close(h)
    c, h = env.reopen()
    assert h.exists(["good", "bad"]).bools == [True, False]


# -------------------------------------------------------------- concurrency


def test_concurrent_set_and_get_from_threads(env):
    c, h = env.open(file_bytes="128MiB")
    shared = [f"shared{i}" for i in range(16)]
    assert h.set(shared, [payload(1000 + i) for i in range(16)]).bools == [True] * 16
    errors = []

    def writer(t):
        try:
            for rnd in range(6):
                keys = [f"t{t}r{rnd}k{i}" for i in range(6)]
                data = [payload(t * 1000 + rnd * 10 + i) for i in range(6)]
                assert h.set(keys, data).bools == [True] * 6
                out = [bytearray(SMALL) for _ in keys]
                assert h.get(keys, out).bools == [True] * 6
                assert out == data
        except BaseException as e:  # reported below with the thread's number
            errors.append((t, e))

    def reader(t):
        try:
            for _ in range(10):
                out = [bytearray(SMALL) for _ in shared]
                assert h.get(shared, out).bools == [True] * 16
                assert all(out[i] == payload(1000 + i) for i in range(16))
        except BaseException as e:
            errors.append((t, e))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(5)]
    threads += [threading.Thread(target=reader, args=(10 + t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    h.assert_clean()
    assert h.pending() == 0
    st = c.stats()
    assert st["chunks"] == 16 + 5 * 6 * 6
    assert st["hits"] == 16 * 3 * 10 + 5 * 6 * 6


# ----------------------------------------------------------------- full store


def test_evictions_are_reported(env):
    c, h = env.open(file_bytes="24MiB", classes=["1MiB"])
    slots = c.info()["classes"][0]["slots"]
    keys = [f"k{i}" for i in range(slots + 3)]
    for k in keys:
        assert h.set([k], [payload(len(k), MiB)]).bools == [True]
    assert c.drain_evicted() == ["k0", "k1", "k2"]
    assert c.drain_evicted() == []
    assert c.stats()["evictions"] == 3
    # LMCache's own eviction deletes what it thinks is there: an evicted key reports True
    # (its bytes are free), once; a key stored again is no longer "evicted".
    h.set(["k2"], [payload(2, MiB)])
    r = h.delete(["k0", "k1", "nope"])
    assert r.bools == [True, True, False]
    assert h.delete(["k0"]).bools == [False]
    assert h.exists(["k2"]).bools == [True]


def test_refuse_mode(env):
    c, h = env.open(file_bytes="24MiB", classes=["1MiB"], when_full="refuse")
    slots = c.info()["classes"][0]["slots"]
    keys = [f"k{i}" for i in range(slots)]
    assert h.set(keys, [payload(i, 100_000) for i in range(slots)]).bools == [True] * slots
    r = h.set(["c", "d"], [payload(3), payload(4)])
    assert (r.ok, r.bools) == (False, [False, False])
    assert r.error.startswith("2 of 2 chunks not stored: key 'c': ENOSPC: no slot for it")
    h.delete(["k0"])
    r = h.set(["c", "d"], [payload(3), payload(4)])  # one slot free
    assert (r.ok, sorted(r.bools)) == (False, [False, True])
    assert c.drain_evicted() == []


def test_batches_over_the_descriptor_limit_are_split(env):
    c, h = env.open()
    n = c.store.max_keys_per_batch + 100
    h.set(["k1", "k65600"], [payload(1, 100), payload(2, 100)])
    r = h.exists([f"k{i}" for i in range(n)])
    assert len(r.bools) == n and r.ok
    assert [i for i, b in enumerate(r.bools) if b] == [1, 65600]


# ------------------------------------------------------------------ errors


def test_bad_input_raises_and_queues_nothing(env):
    c, h = env.open()
    ro = bytes(SMALL)
    with pytest.raises(ValueError, match="2 keys but 1 buffers"):
        c.submit_batch_set(["a", "b"], [bytearray(SMALL)])
    with pytest.raises(ValueError, match="buffer 0 is read-only"):
        c.submit_batch_get(["a"], [ro])
    with pytest.raises(ValueError, match="keys list is empty"):
        c.submit_batch_exists([])
    with pytest.raises(ValueError, match="larger than this store's largest class"):
        c.submit_batch_set(["a"], [bytearray((64 << 10) + 1)])
    with pytest.raises(ValueError, match="buffer 0 is empty"):
        c.submit_batch_set(["a"], [bytearray(0)])
    with pytest.raises(ValueError, match="not C-contiguous"):
        c.submit_batch_set(["a"], [np.zeros((64, 64), dtype=np.uint8)[:, ::2]])
    with pytest.raises(ValueError, match="key 1 is 513 bytes"):
        c.submit_batch_exists(["ok", "x" * 513])
    with pytest.raises(ValueError, match="key 0 is empty"):
        c.submit_batch_exists([""])
    with pytest.raises(ValueError, match="the same key twice"):
        c.submit_batch_set(["a", "a"], [ro, ro])
    with pytest.raises(TypeError, match="key 0 is a int"):
        c.submit_batch_delete([5])
    with pytest.raises(TypeError, match="not a single key"):
        c.submit_batch_exists("abc")
    with pytest.raises(TypeError, match="buffer protocol"):
        c.submit_batch_set(["a"], [object()])
    # Nothing was queued: the next batch gets future id 1 and nothing else completes.
    r = h.set(["a", "b"], [ro, bytearray(100)])  # read-only buffers are fine for a set; sizes may differ
    assert (r.future_id, r.bools) == (1, [True, True])
    time.sleep(0.2)
    assert h.seen == {1}
    env.close(h)
    with pytest.raises(RuntimeError, match="closed"):
        c.submit_batch_get(["a"], [bytearray(SMALL)])
    with pytest.raises(RuntimeError, match="closed"):
        c.submit_batch_exists(["a"])
    with pytest.raises(RuntimeError, match="closed"):
        c.event_fd()
    assert c.drain_completions() == []
    c.close()  # idempotent


@pytest.mark.parametrize("kw,exc,text", [
    (dict(when_full=3), TypeError, "when_full must be a str"),
    (dict(file_bytes=[1]), TypeError, "file_bytes must be an int"),
    (dict(file_bytes="1 potato"), ValueError, "file_bytes '1 potato' is not a byte count"),
    (dict(classes="4MiB", slot_bytes=4096), TypeError, "give slot_bytes .one class. or classes"),
    (dict(max_batches="64"), TypeError, "max_batches must be an int"),
    (dict(max_batches=0), ValueError, "max_batches 0 is out of range"),
    (dict(format="yes"), TypeError, "format must be True or False"),
    (dict(backend="fast"), ValueError, "backend 'fast' is not one of"),
    (dict(buffered=True), ValueError, "buffered=True is not supported"),
    (dict(read_ahead=1), TypeError, "unknown parameter.s. read_ahead"),
])
def test_config_errors_name_the_parameter(env, kw, exc, text):
    kw.setdefault("file_bytes", "64MiB")
    with pytest.raises(exc, match=text) as e:
        lmc.KvblkConnector(env.path, **kw)
    assert "KvblkConnector" in str(e.value)
    assert not os.path.exists(env.path)


def test_old_parameters_are_accepted_and_ignored(env, caplog):
    with caplog.at_level(logging.WARNING):
        c = lmc.KvblkConnector(env.path, create_bytes="64MiB", slot_bytes=65536, read_workers=4,
                               staging_bytes=1 << 20, record_bytes=512, verify_on_open=True,
                               journal_bytes="4MiB")
    c.close()
    assert "read_workers is no longer used" in caplog.text


def test_create_larger_than_free_space_fails_cleanly(env, tmpdir_disk):
    sv = os.statvfs(tmpdir_disk)
    with pytest.raises(kvblk.Error) as e:
        lmc.KvblkConnector(env.path, file_bytes=sv.f_bavail * sv.f_frsize + (1 << 40))
    assert e.value.errno == errno.ENOSPC
    assert not os.path.exists(env.path)


def test_close_finishes_queued_sets(env):
    c, h = env.open(file_bytes="128MiB")
    h.close(close_client=False)
    env.open_ones.remove(h)
    fids = [c.submit_batch_set([f"k{i}"], [payload(i)]) for i in range(10)]
    assert fids == list(range(1, 11))
    c.close()
    c, h = env.reopen()
    ex = h.exists([f"k{i}" for i in range(10)]).bools
    assert ex == [True] * 10


def test_eventfd_is_cleared_by_drain(env):
    c, h = env.open()
    h.close(close_client=False)
    env.open_ones.remove(h)
    import select
    p = select.poll()
    p.register(c.event_fd(), select.POLLIN)
    assert p.poll(0) == []
    fids = [c.submit_batch_exists(["x"]), c.submit_batch_set(["x"], [payload(1)])]
    got = []
    deadline = time.monotonic() + 10
    while len(got) < 2 and time.monotonic() < deadline:
        if p.poll(100):
            got += c.drain_completions()
    assert sorted(g[0] for g in got) == fids
    assert dict((g[0], g[3]) for g in got) == {fids[0]: [False], fids[1]: [True]}
    assert p.poll(0) == []                     # drained: not readable any more
    assert c.drain_completions() == []
    c.close()


def test_second_connector_on_one_store_is_refused(env):
    c, h = env.open()
    with pytest.raises(kvblk.Error) as e:
        lmc.KvblkConnector(env.path)
    assert e.value.errno == errno.EBUSY
    env.close(h)
    c2 = lmc.KvblkConnector(env.path)  # free again after close()
    c2.close()


def test_dropped_connector_is_collected_and_the_store_reopens(env):
    """Finding H1 of libkvblk-review.md: nothing (no worker thread) keeps a dropped connector."""
    c, h = env.open()
    assert h.set(["a"], [payload(1)]).bools == [True]
    h.close(close_client=False)  # LMCache's demux thread gone; the connector is dropped
    env.open_ones.remove(h)
    c.submit_batch_set(["b"], [payload(2)])  # outstanding when dropped
    threads = threading.active_count()
    r = weakref.ref(c)
    del c, h
    assert r() is None  # by reference counting, no gc.collect()
    gc.collect()
    assert threading.active_count() <= threads
    c, h = env.reopen()
    assert h.exists(["a", "b"]).bools == [True, True]


def test_completion_taken_before_the_batch_was_registered_still_wakes_lmcache(env):
    """Another thread may drain a batch's completion between the store's submit and the
    connector's bookkeeping (the drain then finds nothing for it); the connector then makes
    the eventfd readable again, so LMCache drains once more and gets it."""
    import select
    c, h = env.open()
    h.close(close_client=False)
    env.open_ones.remove(h)
    store = c.store
    orig = store.submit_exists

    def racing_submit(*a, **kw):
        t = orig(*a, **kw)
        assert c.drain_completions() == []  # as if LMCache's demux thread drained right now
        assert t.done()
        return t

    store.submit_exists = racing_submit
    fid = c.submit_batch_exists(["nope"])
    p = select.poll()
    p.register(c.event_fd(), select.POLLIN)
    assert p.poll(1000) != []
    assert c.drain_completions() == [(fid, True, "", [False])]
    assert p.poll(0) == []
    c.close()

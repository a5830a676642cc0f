"""kvblk.integrations.lmcache driven as LMCache drives a native connector.

Every test goes through DemuxHarness (lmcache_harness.py): submit under a
lock, one thread polling event_fd(), drain_completions(), routing by future
id, exactly as LMCache's NativeConnectorL2Adapter does.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import struct
import sys
import threading
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from lmcache_harness import DemuxHarness, connector_module, lmcache_byte_view  # noqa: E402

lmc = connector_module()

SLOT = 64 << 10          # slot_bytes of most tests
CHUNK = SLOT - 1000      # a chunk length that is not a multiple of the block size


def real_io(path, backend, buffered):
    """The connector's data path through kvblk (the suite runs on the built package)."""
    return lmc._KvblkIo(path, backend, buffered)


class FaultIo:
    """Wraps the data path: fails chosen slots with -EIO, or blocks loads."""

    def __init__(self, inner):
        self.inner = inner
        self.block_size = inner.block_size
        self.mem_align = inner.mem_align
        self.fail_offsets: set = set()
        self.load_gate = threading.Event()
        self.load_gate.set()
        self.load_entered = threading.Event()

    def _split(self, items, fn):
        st = [0] * len(items)
        good = [i for i, it in enumerate(items) if it[0] not in self.fail_offsets]
        for i in range(len(items)):
            if i not in good:
                st[i] = -errno.EIO
        if good:
            for i, s in zip(good, fn([items[i] for i in good])):
                st[i] = s
        return st

    def store(self, items):
        return self._split(items, self.inner.store)

    def load(self, items):
        self.load_entered.set()
        assert self.load_gate.wait(30)
        return self._split(items, self.inner.load)

    def close(self):
        self.inner.close()


def store_bytes(slots: int) -> int:
    """A file size that formats to exactly @slots slots of SLOT bytes."""
    return (1 << 20) + slots * SLOT


class Env:
    def __init__(self, tmp_path):
        self.path = str(tmp_path / "store.kvlmc")
        self.open_ones = []
        self.fault = None

    def open(self, slots=64, fault=False, **kw):
        factory = real_io
        if fault:
            def factory(p, b, buf):
                self.fault = FaultIo(real_io(p, b, buf))
                return self.fault
        kw.setdefault("slot_bytes", SLOT)
        c = lmc.KvblkConnector(self.path, create_bytes=store_bytes(slots),
                               _io_factory=factory, **kw)
        h = DemuxHarness(c, poll_ms=50)
        self.open_ones.append(h)
        return c, h

    def close(self, h):
        h.close()
        h.assert_clean()
        self.open_ones.remove(h)

    def slot_of(self, c, key: str) -> int:
        return c._entries[key.encode()].slot


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    for h in list(e.open_ones):
        h.close()
        h.assert_clean()


def payload(seed: int, n: int = CHUNK) -> bytearray:
    return bytearray(np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes())


def aligned(n: int) -> memoryview:
    """A page-aligned writable buffer (the zero-copy store path)."""
    return memoryview(mmap.mmap(-1, n))[:n]


# ------------------------------------------------------------------ basics


def test_store_formats_exact_slot_count(env):
    c, h = env.open(slots=8)
    assert (c.slot_count, c.slot_bytes) == (8, SLOT)
    assert c.stats()["free_slots"] == 8
    assert c.max_key_bytes == 512 - 56


def test_round_trip_many_keys_one_batch(env):
    c, h = env.open(slots=64)
    keys = [f"llama@{r:08x}@0@{i:064x}" for r in range(2) for i in range(24)]
    data = [payload(i) for i in range(len(keys))]
    r = h.set(keys, data)
    assert (r.ok, r.error, r.bools) == (True, "", [True] * len(keys))
    out = [bytearray(CHUNK) for _ in keys]
    r = h.get(keys, out)
    assert (r.ok, r.error, r.bools) == (True, "", [True] * len(keys))
    for i in range(len(keys)):
        assert out[i] == data[i], f"key {i} differs"
    assert c.stats()["hits"] == len(keys)
    assert c.stats()["chunks"] == len(keys)


def test_round_trip_aligned_full_slot_and_lmcache_views(env):
    # Aligned buffers of a whole slot go zero-copy; ctypes "<B" views (LMCache's
    # MemoryObj.byte_array) and numpy arrays of another dtype are accepted too.
    c, h = env.open(slots=16)
    src = [aligned(SLOT) for _ in range(4)]
    for i, s in enumerate(src):
        s[:] = payload(100 + i, SLOT)
    r = h.set([f"a{i}" for i in range(4)], src)
    assert r.bools == [True] * 4
    backing = [bytearray(SLOT) for _ in range(2)]
    views = [lmcache_byte_view(b) for b in backing]
    assert views[0].format == "<B"
    r = h.get(["a1", "a3"], views)
    assert r.bools == [True, True]
    assert backing[0] == src[1] and backing[1] == src[3]
    f16 = np.zeros(SLOT // 2, dtype=np.float16)
    r = h.get(["a2"], [f16])
    assert r.bools == [True] and f16.tobytes() == bytes(src[2])


def test_get_missing_keys_are_per_key_false(env):
    c, h = env.open()
    h.set(["k0", "k2"], [payload(0), payload(2)])
    out = [bytearray(b"\xee" * CHUNK) for _ in range(4)]
    r = h.get(["k0", "k1", "k2", "k3"], out)
    assert (r.ok, r.bools) == (True, [True, False, True, False])
    assert r.loaded(4) == [True, False, True, False]
    assert out[0] == payload(0) and out[2] == payload(2)
    st = c.stats()
    assert (st["hits"], st["misses"]) == (2, 2)


def test_get_with_other_size_is_a_miss(env):
    c, h = env.open()
    h.set(["k"], [payload(1)])
    r = h.get(["k"], [bytearray(CHUNK + 1)])
    assert (r.ok, r.bools) == (True, [False])
    assert c.stats()["size_mismatches"] == 1


def test_exists_and_delete(env):
    c, h = env.open()
    h.set(["a", "b", "c"], [payload(i) for i in range(3)])
    assert h.exists(["a", "x", "c"]).bools == [True, False, True]
    r = h.delete(["a", "x"])
    assert (r.ok, r.bools) == (True, [True, False])
    assert h.exists(["a", "b", "c"]).bools == [False, True, True]
    assert h.get(["a"], [bytearray(CHUNK)]).bools == [False]
    assert c.stats()["free_slots"] == 64 - 2
    env.close(h)
    # The delete is durable: a restart does not bring "a" back.
    c, h = env.open(slot_bytes=None)
    assert h.exists(["a", "b", "c"]).bools == [False, True, True]


def test_overwrite_keeps_latest_and_one_slot(env):
    c, h = env.open(slots=8)
    h.set(["k"], [payload(1)])
    h.set(["k"], [payload(2)])
    out = bytearray(CHUNK)
    assert h.get(["k"], [out]).bools == [True] and out == payload(2)
    assert c.stats()["free_slots"] == 7
    env.close(h)
    c, h = env.open(slot_bytes=None)
    out = bytearray(CHUNK)
    assert h.get(["k"], [out]).bools == [True] and out == payload(2)
    assert c.stats()["chunks"] == 1


# ----------------------------------------------------------------- restart


def test_restart_finds_every_chunk(env):
    c, h = env.open(slots=32)
    keys = [f"m@00000000@0@{i:x}" for i in range(20)]
    h.set(keys, [payload(i) for i in range(20)])
    env.close(h)
    c, h = env.open(slot_bytes=None)
    st = c.stats()
    assert (st["chunks_at_open"], st["bad_records_at_open"], st["free_slots"]) == (20, 0, 12)
    assert h.exists(keys).bools == [True] * 20
    out = [bytearray(CHUNK) for _ in keys]
    assert h.get(keys, out).bools == [True] * 20
    assert all(out[i] == payload(i) for i in range(20))
    # Futures of the new object start again at 1 and new sets go to free slots.
    h.set(["new"], [payload(99)])
    assert c.stats()["free_slots"] == 11


def test_restart_refuses_other_slot_size_and_foreign_files(env, tmp_path):
    c, h = env.open(slots=4)
    env.close(h)
    with pytest.raises(lmc.StoreFormatError, match="slot_bytes 65536, asked for 131072"):
        lmc.KvblkConnector(env.path, slot_bytes=2 * SLOT, _io_factory=real_io)
    other = tmp_path / "foreign"
    other.write_bytes(b"not a store" + bytes(2 << 20))
    with pytest.raises(lmc.StoreFormatError, match="not a kvblk LMCache store"):
        lmc.KvblkConnector(str(other), slot_bytes=SLOT, _io_factory=real_io)
    with pytest.raises(FileNotFoundError):
        lmc.KvblkConnector(str(tmp_path / "missing"), slot_bytes=SLOT, _io_factory=real_io)
    # format=True takes it over.
    c = lmc.KvblkConnector(str(other), slot_bytes=SLOT, format=True, _io_factory=real_io)
    assert c.slot_count == 16  # (2 MiB + 11 - 1 MiB data offset) // 64 KiB
    c.close()


# ------------------------------------------------------- torn / damaged data


def _corrupt(path, offset, data):
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_torn_payload_is_never_returned(env):
    c, h = env.open(slots=8)
    h.set(["good", "torn"], [payload(1), payload(2)])
    slot = env.slot_of(c, "torn")
    off = c._lay.slot_offset(slot) + 5000
    env.close(h)
    _corrupt(env.path, off, b"\x00" * 16)  # half-written: new zeros in the old payload
    c, h = env.open(slot_bytes=None)
    assert h.exists(["torn"]).bools == [True]  # lazy verification: found by the get
    out = [bytearray(CHUNK), bytearray(CHUNK)]
    r = h.get(["good", "torn"], out)
    assert (r.ok, r.bools) == (True, [True, False])
    assert out[0] == payload(1)
    assert c.stats()["checksum_failures"] == 1
    # Dropped from the index and its slot freed, durably.
    assert h.exists(["torn"]).bools == [False]
    assert c.stats()["free_slots"] == 7
    env.close(h)
    c, h = env.open(slot_bytes=None)
    assert h.exists(["good", "torn"]).bools == [True, False]


def test_payload_damaged_while_open_is_a_miss(env):
    c, h = env.open(slots=8)
    h.set(["k"], [payload(3)])
    _corrupt(env.path, c._lay.slot_offset(env.slot_of(c, "k")) + CHUNK - 1, b"\x01")
    r = h.get(["k"], [bytearray(CHUNK)])
    assert r.bools == [False]


def test_torn_record_drops_only_that_chunk(env):
    c, h = env.open(slots=8)
    h.set(["a", "b"], [payload(1), payload(2)])
    rec = c._lay.record_offset(env.slot_of(c, "b"))
    env.close(h)
    _corrupt(env.path, rec + 60, b"X")  # a byte of the key
    c, h = env.open(slot_bytes=None)
    st = c.stats()
    assert (st["chunks_at_open"], st["bad_records_at_open"], st["free_slots"]) == (1, 1, 7)
    assert h.exists(["a", "b"]).bools == [True, False]


def test_verify_on_open_drops_damaged_chunks(env):
    c, h = env.open(slots=8)
    h.set(["a", "b"], [payload(1), payload(2)])
    off = c._lay.slot_offset(env.slot_of(c, "a"))
    env.close(h)
    _corrupt(env.path, off, b"\xff" * 4096)
    c, h = env.open(slot_bytes=None, verify_on_open=True)
    assert c.stats()["dropped_at_open"] == 1
    assert h.exists(["a", "b"]).bools == [False, True]


def test_present_only_once_durable(env, monkeypatch):
    # The set's second flush (the records') is held: until it returns the key
    # must not exist, and the completion must not have been posted.
    c, h = env.open(slots=8)
    calls = []
    gate = threading.Event()
    real = os.fdatasync

    def slow_fdatasync(fd):
        calls.append(fd)
        if len(calls) == 2:
            assert gate.wait(30)
        real(fd)

    monkeypatch.setattr(lmc.os, "fdatasync", slow_fdatasync)
    fut = h.submit("set", ["k"], [payload(5)])
    deadline = time.monotonic() + 10
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(calls) == 2
    assert h.exists(["k"]).bools == [False]
    assert not fut.done()
    gate.set()
    assert fut.result(10).bools == [True]
    assert h.exists(["k"]).bools == [True]


def test_crash_after_payload_before_record_leaves_key_absent(env, monkeypatch):
    # Power loss between the flushes: the payload is durable, the record not.
    # Emulated by failing the second flush; on reopen the chunk is absent.
    c, h = env.open(slots=8)
    n = [0]
    real = os.fdatasync

    def failing(fd):
        n[0] += 1
        if n[0] == 2:
            # What the second flush would have made durable is lost: zero the record.
            os.pwrite(fd, bytes(512), c._lay.record_offset(0))
            raise OSError(errno.EIO, "injected flush failure")
        real(fd)

    monkeypatch.setattr(lmc.os, "fdatasync", failing)
    r = h.set(["k"], [payload(6)])
    assert (r.ok, r.bools) == (False, [False])
    assert "failed: Input/output error; 1 chunks not stored" in r.error
    assert c.stats()["flush_errors"] == 1
    assert h.exists(["k"]).bools == [False]
    monkeypatch.setattr(lmc.os, "fdatasync", real)
    env.close(h)
    c, h = env.open(slot_bytes=None)
    assert h.exists(["k"]).bools == [False]
    assert c.stats()["free_slots"] == 8


# -------------------------------------------------------------- concurrency


def test_concurrent_set_and_get_from_threads(env):
    c, h = env.open(slots=256, read_workers=3)
    shared = [f"shared{i}" for i in range(16)]
    assert h.set(shared, [payload(1000 + i) for i in range(16)]).bools == [True] * 16
    errors = []

    def writer(t):
        try:
            for rnd in range(6):
                keys = [f"t{t}r{rnd}k{i}" for i in range(6)]
                data = [payload(t * 1000 + rnd * 10 + i) for i in range(6)]
                assert h.set(keys, data).bools == [True] * 6
                out = [bytearray(CHUNK) for _ in keys]
                assert h.get(keys, out).bools == [True] * 6
                assert out == data
        except BaseException as e:  # reported below with the thread's name
            errors.append((t, e))

    def reader(t):
        try:
            for _ in range(10):
                out = [bytearray(CHUNK) for _ in shared]
                assert h.get(shared, out).bools == [True] * 16
                assert all(out[i] == payload(1000 + i) for i in range(16))
        except BaseException as e:
            errors.append((t, e))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    threads += [threading.Thread(target=reader, args=(10 + t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    h.assert_clean()
    assert h.pending() == 0
    st = c.stats()
    assert st["chunks"] == 16 + 4 * 6 * 6
    assert st["hits"] == 16 * 3 * 10 + 4 * 6 * 6


# ----------------------------------------------------------------- full store


def test_lru_eviction_order(env):
    c, h = env.open(slots=4)
    h.set(["k0", "k1", "k2", "k3"], [payload(i) for i in range(4)])
    assert h.get(["k0"], [bytearray(CHUNK)]).bools == [True]   # k0 becomes most recent
    assert h.exists(["k1"]).bools == [True]                   # exists is not a use
    assert h.set(["k4"], [payload(4)]).bools == [True]          # evicts k1
    assert h.exists(["k0", "k1", "k2", "k3", "k4"]).bools == [True, False, True, True, True]
    assert h.set(["k5", "k6"], [payload(5), payload(6)]).bools == [True, True]  # k2, k3
    assert h.exists(["k0", "k2", "k3", "k4", "k5", "k6"]).bools == [True, False, False,
                                                                   True, True, True]
    assert c.stats()["evictions"] == 3
    out = bytearray(CHUNK)
    assert h.get(["k5"], [out]).bools == [True] and out == payload(5)


def test_refuse_mode(env):
    c, h = env.open(slots=2, when_full="refuse")
    assert h.set(["a", "b"], [payload(1), payload(2)]).bools == [True, True]
    r = h.set(["c", "d"], [payload(3), payload(4)])
    assert (r.ok, r.bools) == (False, [False, False])
    assert "store full: 2 of 2 chunks not stored (when_full='refuse')" in r.error
    assert h.exists(["a", "b", "c"]).bools == [True, True, False]
    assert c.stats()["refused"] == 2
    h.delete(["a"])
    r = h.set(["c", "d"], [payload(3), payload(4)])  # one slot free: first one stored
    assert (r.ok, r.bools) == (False, [True, False])
    out = bytearray(CHUNK)
    assert h.get(["c"], [out]).bools == [True] and out == payload(3)


def test_chunks_being_read_are_not_evicted(env):
    c, h = env.open(slots=2, fault=True)
    h.set(["a", "b"], [payload(1), payload(2)])
    env.fault.load_gate.clear()
    outs = [bytearray(CHUNK), bytearray(CHUNK)]
    fut = h.submit("get", ["a", "b"], outs)
    assert env.fault.load_entered.wait(10)
    r = h.set(["c"], [payload(3)])      # both slots pinned by the get in flight
    assert (r.ok, r.bools) == (False, [False])
    assert "store full" in r.error
    env.fault.load_gate.set()
    assert fut.result(10).bools == [True, True]
    assert outs == [payload(1), payload(2)]
    assert h.set(["c"], [payload(3)]).bools == [True]   # now a, the LRU, goes
    assert h.exists(["a", "b", "c"]).bools == [False, True, True]


# ------------------------------------------------------------------ errors


def test_io_errors_fail_only_their_chunks(env):
    c, h = env.open(slots=8, fault=True)
    h.set(["a"], [payload(1)])
    env.fault.fail_offsets.add(c._lay.slot_offset(env.slot_of(c, "a")))
    r = h.get(["a"], [bytearray(CHUNK)])
    assert (r.ok, r.bools) == (False, [False])
    assert "key 0: Input/output error" in r.error
    env.fault.fail_offsets.clear()
    # The next free slot fails its store: that chunk is not indexed, the other is.
    nxt = c._free[0]
    env.fault.fail_offsets.add(c._lay.slot_offset(nxt))
    r = h.set(["x", "y"], [payload(7), payload(8)])
    assert (r.ok, r.bools) == (False, [False, True])
    assert "key 0: Input/output error" in r.error
    assert h.exists(["x", "y"]).bools == [False, True]
    assert c.stats()["free_slots"] == 8 - 2


def test_bad_input_raises_and_queues_nothing(env):
    c, h = env.open(slots=4)
    ro = bytes(CHUNK)
    with pytest.raises(ValueError, match="2 keys but 1 buffers"):
        c.submit_batch_set(["a", "b"], [bytearray(CHUNK)])
    with pytest.raises(ValueError, match="buffer 1 is 100 bytes but buffer 0 is"):
        c.submit_batch_set(["a", "b"], [bytearray(CHUNK), bytearray(100)])
    with pytest.raises(ValueError, match="buffer 0 is read-only"):
        c.submit_batch_get(["a"], [ro])
    with pytest.raises(ValueError, match="keys list is empty"):
        c.submit_batch_exists([])
    with pytest.raises(ValueError, match="larger than this store's slot_bytes"):
        c.submit_batch_set(["a"], [bytearray(SLOT + 1)])
    with pytest.raises(ValueError, match="buffer 0 is empty"):
        c.submit_batch_set(["a"], [bytearray(0)])
    with pytest.raises(ValueError, match="not C-contiguous"):
        c.submit_batch_set(["a"], [np.zeros((64, 64), dtype=np.uint8)[:, ::2]])
    with pytest.raises(ValueError, match="key 1 is 457 bytes"):
        c.submit_batch_exists(["ok", "x" * 457])
    with pytest.raises(TypeError, match="key 0 is a int"):
        c.submit_batch_delete([5])
    with pytest.raises(TypeError, match="not a single key"):
        c.submit_batch_exists("abc")
    with pytest.raises(TypeError, match="buffer protocol"):
        c.submit_batch_set(["a"], [object()])
    # Nothing was queued: the next batch gets future id 1 and nothing else completes.
    r = h.set(["a"], [ro])  # read-only buffers are fine for a set
    assert (r.future_id, r.bools) == (1, [True])
    time.sleep(0.2)
    assert h.seen == {1}
    env.close(h)
    with pytest.raises(RuntimeError, match="closed"):
        c.submit_batch_get(["a"], [bytearray(CHUNK)])
    with pytest.raises(RuntimeError, match="closed"):
        c.submit_batch_exists(["a"])
    with pytest.raises(RuntimeError, match="closed"):
        c.event_fd()
    assert c.drain_completions() == []
    c.close()  # idempotent


def test_close_finishes_queued_sets(env):
    c, h = env.open(slots=32)
    h.close(close_client=False)
    env.open_ones.remove(h)
    fids = [c.submit_batch_set([f"k{i}"], [payload(i)]) for i in range(10)]
    assert fids == list(range(1, 11))
    c.close()
    c, h = env.open(slot_bytes=None)
    assert h.exists([f"k{i}" for i in range(10)]).bools == [True] * 10


def test_record_layout_is_as_documented(env):
    c, h = env.open(slots=4)
    h.set(["key"], [payload(9)])
    slot = env.slot_of(c, "key")
    env.close(h)
    with open(env.path, "rb") as f:
        sb = f.read(4096)
        f.seek(4096 + slot * 512)
        rec = f.read(512)
    assert sb[:8] == b"KVBLKLMC"
    magic, _crc, gen, length, pcrc, klen, _fl, rslot, _u = struct.unpack_from("<IIQQIHHQ16s", rec)
    assert (magic, gen, length, klen, rslot) == (0x4352564B, 1, CHUNK, 3, slot)
    assert rec[56:59] == b"key"
    import zlib
    assert pcrc == zlib.crc32(payload(9))


def test_delete_during_read_frees_slot_after_the_read(env):
    c, h = env.open(slots=2, fault=True)
    h.set(["a"], [payload(1)])
    env.fault.load_gate.clear()
    out = bytearray(CHUNK)
    fut = h.submit("get", ["a"], [out])
    assert env.fault.load_entered.wait(10)
    assert h.delete(["a"]).bools == [True]
    assert c.stats()["free_slots"] == 1        # a's slot waits for the read in flight
    r = h.set(["b", "c"], [payload(2), payload(3)])
    assert r.bools == [True, False]            # only the one free slot could be used
    env.fault.load_gate.set()
    assert fut.result(10).bools == [True] and out == payload(1)
    assert c.stats()["free_slots"] == 1        # released when the read ended
    assert h.set(["c"], [payload(3)]).bools == [True]


def test_eventfd_is_cleared_by_drain(env):
    c, h = env.open(slots=4)
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
    c, h = env.open(slots=4)
    with pytest.raises(lmc.StoreFormatError, match="open in another connector"):
        lmc.KvblkConnector(env.path, _io_factory=real_io)
    env.close(h)
    c2 = lmc.KvblkConnector(env.path, _io_factory=real_io)  # free again after close()
    c2.close()

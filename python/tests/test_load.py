# SPDX-License-Identifier: MIT
"""Loads and stores land the exact bytes, for every kind of destination and backend."""

import numpy as np
import pytest
import torch

import kvblk

from conftest import MiB, pattern

K4 = 4096


def aligned_view(ba, nbytes, align=K4):
    """A memoryview of nbytes of bytearray ba starting at an aligned address (O_DIRECT)."""
    addr = np.frombuffer(ba, np.uint8).ctypes.data
    skip = (-addr) % align
    assert skip + nbytes <= len(ba)
    return memoryview(ba)[skip:skip + nbytes]


def test_load_many_structured_array_registered(store, backend):
    path, data = store
    with kvblk.open(path, backend) as dev:
        dst = kvblk.aligned_empty(4 * MiB)
        dst[:] = 0xAA
        buf = dev.register(dst)
        # 16 objects of 256 KiB taken from all over the store, loaded in reverse slot order.
        offs = np.arange(16, dtype=np.uint64) * np.uint64(MiB) + np.uint64(3 * K4)
        slots = np.arange(15, -1, -1, dtype=np.uint64) * np.uint64(256 << 10)
        d = kvblk.make_descs(offs, 256 << 10, slots, buf_id=buf, tags=np.arange(100, 116))
        b = dev.load_many(d)
        assert b.ok == 16 and b.failed == 0
        assert b.bytes == 4 * MiB
        assert b.backend == backend
        assert b.path == "host"
        assert list(b.results["status"]) == [0] * 16
        assert list(b.results["bytes"]) == [256 << 10] * 16
        assert list(b.results["tag"]) == list(range(100, 116))
        for i in range(16):
            s = (15 - i) * (256 << 10)
            o = i * MiB + 3 * K4
            assert np.array_equal(dst[s:s + (256 << 10)], data[o:o + (256 << 10)]), i
        assert dev.stats()["batches_by_backend"][backend] == 1
        buf.unregister()


def test_plain_addresses_in_structured_array(dev, store):
    data = store[1]
    dst = kvblk.aligned_empty(2 * MiB)
    d = kvblk.make_descs([0, 5 * MiB], MiB, [dst.ctypes.data, dst.ctypes.data + MiB])
    assert dev.load_many(d, keep=[dst]).ok == 2
    assert np.array_equal(dst[:MiB], data[:MiB])
    assert np.array_equal(dst[MiB:], data[5 * MiB:6 * MiB])


@pytest.mark.parametrize("kind", ["numpy", "bytearray", "memoryview", "torch", "address", "slice"])
def test_list_form_destinations(dev, store, kind):
    data = store[1]
    backing = kvblk.aligned_empty(3 * MiB)
    backing[:] = 0
    mv = memoryview(backing)
    if kind == "numpy":
        dests = [backing[i * MiB:(i + 1) * MiB] for i in range(3)]
    elif kind == "bytearray":
        # A bytearray's storage is malloc'd, not aligned for O_DIRECT: use aligned views of it.
        bas = [bytearray(MiB + K4) for _ in range(3)]
        dests = [aligned_view(ba, MiB) for ba in bas]
    elif kind == "memoryview":
        dests = [mv[i * MiB:(i + 1) * MiB] for i in range(3)]
    elif kind == "torch":
        t = torch.from_numpy(backing.view(np.uint8))  # shares memory; passed via __dlpack__
        dests = [t[i * MiB:(i + 1) * MiB] for i in range(3)]
    elif kind == "address":
        dests = [(backing.ctypes.data + i * MiB, MiB) for i in range(3)]
    else:
        buf = dev.register(backing)
        dests = [buf.slice(i * MiB, MiB) for i in range(3)]
    offs = [2 * MiB, 9 * MiB, 15 * MiB]
    batch = [(o, MiB, dst, 7 + i) for i, (o, dst) in enumerate(zip(offs, dests))]
    b = dev.load_many(batch)
    if kind == "bytearray":
        got = [np.frombuffer(x, np.uint8) for x in dests]
    else:
        got = [backing[i * MiB:(i + 1) * MiB] for i in range(3)]
    assert b.ok == 3 and list(b.results["tag"]) == [7, 8, 9]
    for g, o in zip(got, offs):
        assert np.array_equal(g, data[o:o + MiB])


def test_torch_tensor_typed_and_2d(dev, store):
    data = store[1]
    backing = kvblk.aligned_empty(MiB, dtype=np.float16)  # 512 Ki halfs
    t = torch.from_numpy(backing).view(256, 2048)  # 2-D, contiguous, float16
    b = dev.load_many([(4 * MiB, MiB, t)])
    assert b.ok == 1
    assert np.array_equal(t.numpy().view(np.uint8).reshape(-1), data[4 * MiB:5 * MiB])
    d = kvblk.resolve(t)
    assert d.source == "dlpack" and d.kind == kvblk.MEM_HOST and d.nbytes == MiB
    d.release()


def test_whole_buffer_destination(dev, store):
    dst = kvblk.aligned_empty(MiB)
    buf = dev.register(dst)
    assert dev.load_many([(MiB, MiB, buf)]).ok == 1
    assert np.array_equal(dst, store[1][MiB:2 * MiB])


def test_store_many_round_trip(wdev):
    src = kvblk.aligned_empty(2 * MiB)
    src[:] = pattern(2 * MiB, seed=77)
    ro = np.frombuffer(src.tobytes(), np.uint8)  # read-only source: fine for stores
    ro_al = kvblk.aligned_empty(MiB)
    ro_al[:] = ro[MiB:]
    ro_al.flags.writeable = False
    b = wdev.store_many([(0, MiB, src[:MiB]), (4 * MiB, MiB, ro_al)])
    assert b.ok == 2 and b.bytes == 2 * MiB
    back = kvblk.aligned_empty(2 * MiB)
    assert wdev.load_many([(0, MiB, back[:MiB]), (4 * MiB, MiB, back[MiB:])]).ok == 2
    assert np.array_equal(back, src)
    assert wdev.stats()["bytes_written"] == 2 * MiB


def test_caller_results_array_is_filled(dev):
    dst = kvblk.aligned_empty(2 * K4)
    res = np.zeros(2, kvblk.RESULT_DTYPE)
    b = dev.load_many([(0, K4, dst[:K4], 5), (K4, K4, dst[K4:], 6)], results=res)
    assert b.results is res
    assert list(res["status"]) == [0, 0] and list(res["bytes"]) == [K4, K4] and list(res["tag"]) == [5, 6]


def test_info_and_stats(dev, store):
    i = dev.info()
    assert i["backend"] == "uring"
    assert i["capacity"] == len(store[1])
    assert i["logical_block_size"] > 0 and i["mem_align"] > 0
    assert not i["writable"] and not i["blockdev"]
    dev.reset_stats()
    dst = kvblk.aligned_empty(MiB)
    dev.load_many([(0, MiB, dst)])
    s = dev.stats()
    assert s["batches"] == 1 and s["objects"] == 1 and s["bytes_read"] == MiB
    assert s["batches_by_path"]["host"] == 1
    assert len(s["batch_lat_hist"]) == 32 and sum(s["batch_lat_hist"]) == 1
    dev.reset_stats()
    assert dev.stats()["batches"] == 0


def test_unaligned_bytearray_gets_the_librarys_reason(dev):
    ba = bytearray(K4 + 1)
    mv = memoryview(ba)[1:] if np.frombuffer(ba, np.uint8).ctypes.data % 512 == 0 else memoryview(ba)[:K4]
    with pytest.raises(kvblk.Error) as ei:
        dev.load_many([(0, K4, kvblk.aligned_empty(K4)), (0, K4, mv)])
    assert ei.value.bad_index == 1 and "not aligned to mem_align" in ei.value.strerror


def test_views_are_released_after_the_call(dev):
    # A memoryview with a view exported from it cannot be released: after load_many returns,
    # the binding holds none.
    ba = bytearray(2 * K4)
    mv = aligned_view(ba, K4)
    dev.load_many([(0, K4, mv)])
    mv.release()  # BufferError if the binding still held a view
    ba.extend(b"x")
    assert len(ba) == 2 * K4 + 1


def test_registered_buffer_holds_its_object(dev):
    ba = bytearray(3 * K4)
    mv = aligned_view(ba, 2 * K4)
    buf = dev.register(mv)
    with pytest.raises(BufferError):
        mv.release()
    buf.unregister()
    assert not buf.registered
    mv.release()
    ba.extend(b"x")


def test_context_manager_and_close(store):
    dev = kvblk.open(store[0])
    with dev:
        assert not dev.closed
    assert dev.closed
    dev.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        dev.info()

# SPDX-License-Identifier: MIT
"""Unaligned stores (store_many(unaligned=True)) and loads cut at the end of a file
(load_many(short_eof=True)): libkvblk 0.4."""

import errno
import os
import threading

import numpy as np
import pytest

import kvblk

from conftest import pattern

SIZE = 64 * 4096 + 1234  # the last block is partial


@pytest.fixture
def tail_file(tmpdir_disk):
    """(path, model): a file of SIZE bytes of pattern(), and a copy to update."""
    path = os.path.join(tmpdir_disk, f"tail-{os.getpid()}-{np.random.randint(1 << 30)}.bin")
    data = pattern(SIZE + 6)[:SIZE].copy()
    with open(path, "wb") as f:
        f.write(data.tobytes())
    yield path, data
    os.unlink(path)


def file_bytes(path):
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8)


def test_unaligned_store_round_trip(tail_file, backend):
    path, model = tail_file
    rng = np.random.default_rng(7)
    with kvblk.open(path, backend, write=True) as d:
        for off, length in [(100, 50), (4000, 300), (12345, 20000), (SIZE - 777, 777), (SIZE - 1, 1)]:
            src = bytearray(rng.integers(0, 256, length, dtype=np.uint8).tobytes())  # not aligned
            b = d.store_many([(off, length, src)], unaligned=True)
            assert b.ok == 1 and b.bytes == length
            assert int(b.results["bytes"][0]) == length
            model[off:off + length] = np.frombuffer(src, dtype=np.uint8)
            back = bytearray(length)
            assert d.load_many([(off, length, back)], unaligned=True).bytes == length
            assert back == src
        s = d.stats()
        assert s["unaligned_stores"] == 5
        assert s["rmw_read_bytes"] > 0
        assert s["store_range_waits"] == 0
    got = file_bytes(path)
    assert got.size == SIZE, "a store never grows the file"
    assert np.array_equal(got, model), "bytes around the stores changed"


def test_unaligned_store_needs_the_flag(tail_file):
    path, model = tail_file
    with kvblk.open(path, "uring", write=True) as d:
        with pytest.raises(kvblk.Error) as ei:
            d.store_many([(100, 50, bytearray(50))])
        assert ei.value.errno == errno.EINVAL and ei.value.bad_index == 0
        with pytest.raises(kvblk.Error) as ei:
            d.store_many([(SIZE - 10, 11, bytearray(11))], unaligned=True)
        assert ei.value.errno == errno.ERANGE
    assert np.array_equal(file_bytes(path), model)


def test_unaligned_store_submit_and_descriptor_array(tail_file):
    path, model = tail_file
    src = bytearray(range(256)) * 8
    with kvblk.open(path, "uring", write=True) as d:
        t = d.submit([(7, 1000, src)], store=True, unaligned=True)
        assert t.wait().bytes == 1000
        model[7:1007] = np.frombuffer(src, dtype=np.uint8)[:1000]
        a = np.frombuffer(src, dtype=np.uint8)
        descs = kvblk.make_descs([5000], [33], [a.ctypes.data + 3], flags=kvblk.DESC_UNALIGNED)
        b = d.store_many(descs, keep=[src])
        assert b.bytes == 33
        model[5000:5033] = a[3:36]
    assert np.array_equal(file_bytes(path), model)


def test_concurrent_unaligned_stores_share_blocks(tail_file):
    """Threads store their own ranges of the same blocks; none loses another's bytes."""
    path, model = tail_file
    threads, rounds, blocks, q = 4, 40, 16, 100
    with kvblk.open(path, "uring", write=True, workers=4) as d:
        bs = d.info()["logical_block_size"]
        assert bs >= threads * q

        def worker(t):
            for r in range(rounds):
                batch = []
                for k in range(blocks):
                    src = bytearray([(r * 31 + t * 7 + k) & 0xFF]) * (q - 2)
                    batch.append((16 * bs + k * bs + t * q + 1, q - 2, src))
                d.store_many(batch, unaligned=True)

        th = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for x in th:
            x.start()
        for x in th:
            x.join()
        for t in range(threads):
            for k in range(blocks):
                o = 16 * bs + k * bs + t * q + 1
                model[o:o + q - 2] = ((rounds - 1) * 31 + t * 7 + k) & 0xFF
        assert d.stats()["unaligned_stores"] == threads * rounds * blocks
    assert np.array_equal(file_bytes(path), model)


def test_short_eof_load(tail_file, backend):
    path, model = tail_file
    with kvblk.open(path, backend) as d:
        dst = bytearray(b"\xEE" * 5000)
        b = d.load_many([(SIZE - 1000, 5000, dst)], unaligned=True, short_eof=True)
        assert b.ok == 1 and b.failed == 0
        assert int(b.results["bytes"][0]) == 1000 and b.bytes == 1000
        assert bytes(dst[:1000]) == model[SIZE - 1000:].tobytes()
        assert dst[1000:] == b"\xEE" * 4000, "bytes past the end of the file were written"
        # At and past the end: nothing, and success.
        b = d.load_many([(SIZE, 10, dst, 1), (SIZE + 99, 10, dst[20:], 2), (0, 10, bytearray(10), 3)],
                        unaligned=True, short_eof=True)
        assert list(b.results["status"]) == [0, 0, 0]
        assert list(b.results["bytes"]) == [0, 0, 10]
        assert d.stats()["short_eof_objects"] == 3
        # Without it, past the end is ERANGE for the whole batch.
        with pytest.raises(kvblk.Error) as ei:
            d.load_many([(0, 10, bytearray(10)), (SIZE - 1000, 5000, dst)], unaligned=True)
        assert ei.value.errno == errno.ERANGE and ei.value.bad_index == 1


def test_short_eof_submit_and_store_refusal(tail_file):
    path, model = tail_file
    with kvblk.open(path, "uring", write=True) as d:
        dst = kvblk.aligned_empty(8 * 4096)
        dst[:] = 0xEE
        bs = d.info()["logical_block_size"]
        off = (SIZE // bs - 1) * bs  # aligned: only the cut end goes through the bounce area
        t = d.submit([(off, 8 * 4096, dst)], short_eof=True)
        b = t.wait()
        assert b.bytes == SIZE - off
        assert np.array_equal(dst[:SIZE - off], model[off:])
        assert (dst[SIZE - off:] == 0xEE).all()
        with pytest.raises(kvblk.Error) as ei:
            d.submit([(0, 10, bytearray(10))], store=True, short_eof=True)
        assert ei.value.errno == errno.EINVAL

# SPDX-License-Identifier: MIT
"""The asynchronous API: submit -> Ticket (wait, done, cancel), reap, the eventfd, timeouts,
two submitting threads with one reaper, closing with batches outstanding."""

import errno
import gc
import select
import threading

import numpy as np
import pytest

import kvblk
from kvblk import _kvblk

from conftest import MiB


K4 = 4096
OBJ = 256 << 10


def big_batch(dst, n=64, obj=OBJ):
    """n objects of obj bytes from the start of the store into dst: slow at QD 1 (psync)."""
    return [(i * obj, obj, dst[i * obj:(i + 1) * obj]) for i in range(n)]


def test_submit_wait(dev, store):
    dst = kvblk.aligned_empty(4 * MiB)
    t = dev.submit([(i * MiB, MiB, dst[i * MiB:(i + 1) * MiB], 50 + i) for i in range(4)], user_data=77)
    assert t.id > 0
    b = t.wait()
    assert b.ok == 4 and b.failed == 0 and b.bytes == 4 * MiB and b.ticket == t.id
    assert b.user_data == 77 and b.commands >= 4 and b.backend == "uring"
    assert list(t.results["tag"]) == [50, 51, 52, 53]
    assert np.array_equal(dst, store[1][:4 * MiB])
    assert t.done() and t.batch() is b and t.wait() is b
    assert not t.cancel()  # over: nothing to cancel


def test_wait_timeout_done_and_cancel(store):
    with kvblk.open(store[0], "psync") as dev:
        a_dst, b_dst = kvblk.aligned_empty(16 * MiB), kvblk.aligned_empty(16 * MiB)
        a = dev.submit(big_batch(a_dst))
        b = dev.submit(big_batch(b_dst))  # queued behind a: psync serves one batch at a time
        with pytest.raises(kvblk.WaitTimeout) as ei:
            b.wait(timeout=0.001)
        assert ei.value.errno == errno.ETIME and isinstance(ei.value, TimeoutError)
        assert not b.done()
        assert b.cancel() is True
        with pytest.raises(kvblk.Error) as ei:
            b.wait()  # check=True: the first cancelled object
        assert ei.value.errno == errno.ECANCELED
        bb = ei.value.batch
        cancelled = int(np.count_nonzero(bb.results["status"] == -errno.ECANCELED))
        assert cancelled > 0 and bb.failed == cancelled
        assert set(bb.results["status"]) <= {0, -errno.ECANCELED}
        assert a.wait().ok == 64
        assert np.array_equal(a_dst, store[1][:16 * MiB])
        assert dev.stats()["cancelled_objects"] == cancelled


def test_reap_routes_to_tickets(dev, store):
    dsts = [kvblk.aligned_empty(MiB) for _ in range(3)]
    ts = [dev.submit([(i * MiB, MiB, d)], user_data=i) for i, d in enumerate(dsts)]
    got = []
    while len(got) < 3:
        got.extend(dev.reap(8, min_complete=1, timeout=10))
    assert sorted(int(c["ticket"]) for c in got) == sorted(t.id for t in ts)
    for c in got:
        assert c["flags"] == kvblk.CQE_BATCH and c["status"] == 0 and c["bytes"] == MiB and c["index"] == 1
    for i, (t, d) in enumerate(zip(ts, dsts)):
        assert t.done()
        b = t.wait()
        assert b.ok == 1 and b.user_data == i and b.commands is None  # from the completion entry
        assert np.array_equal(d, store[1][i * MiB:(i + 1) * MiB])
    assert len(dev.reap(8, timeout=0)) == 0


def test_eventfd_and_per_object_entries(dev):
    fd = dev.fileno()
    assert fd >= 0 and dev.fileno() == fd
    dst = kvblk.aligned_empty(4 * K4)
    t = dev.submit([(i * K4, K4, dst[i * K4:(i + 1) * K4], 10 + i) for i in range(4)], per_object=True)
    r, _, _ = select.select([fd], [], [], 10)
    assert r == [fd]
    entries = []
    while not any(c["flags"] & kvblk.CQE_BATCH for c in entries):  # t.done() would take them
        entries.extend(dev.reap(16, min_complete=1, timeout=10))
    assert t.done()
    objs = [c for c in entries if c["flags"] == kvblk.CQE_OBJECT]
    assert sorted(int(c["index"]) for c in objs) == [0, 1, 2, 3]
    assert sorted(int(c["tag"]) for c in objs) == [10, 11, 12, 13]
    assert entries[-1]["flags"] == kvblk.CQE_BATCH  # object entries come first
    assert select.select([fd], [], [], 0)[0] == []  # the queue is empty again


def test_two_submitters_one_reaper(dev, store):
    per_thread, objs = 20, 4
    seen, errors = {}, []
    regions = [kvblk.aligned_empty(per_thread * objs * K4 * 4) for _ in range(2)]
    tickets = [[], []]
    done_submitting = threading.Event()
    stop = threading.Event()

    def submitter(k):
        try:
            mem = regions[k]
            for j in range(per_thread):
                batch = []
                for i in range(objs):
                    o = (j * objs + i) * 4 * K4
                    batch.append((o + k * MiB, 4 * K4, mem[o:o + 4 * K4], j * objs + i))
                tickets[k].append(dev.submit(batch, user_data=k))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def reaper():
        while not stop.is_set():
            for c in dev.reap(32, min_complete=1, timeout=0.05):
                if c["flags"] & kvblk.CQE_BATCH:
                    tid = int(c["ticket"])
                    assert tid not in seen, "a completion delivered twice"
                    seen[tid] = c.copy()

    subs = [threading.Thread(target=submitter, args=(k,)) for k in range(2)]
    rt = threading.Thread(target=reaper)
    rt.start()
    for s in subs:
        s.start()
    for s in subs:
        s.join()
    done_submitting.set()
    for k in range(2):
        for t in tickets[k]:
            assert t.wait(timeout=30).ok == objs  # routed by the reaper, or taken here
    stop.set()
    rt.join()
    assert not errors
    all_ids = {t.id for k in range(2) for t in tickets[k]}
    assert len(all_ids) == 2 * per_thread
    assert set(seen) <= all_ids
    for k in range(2):
        for t in tickets[k]:
            if t.id in seen:
                assert int(seen[t.id]["user_data"]) == k and int(seen[t.id]["status"]) == 0
        n = per_thread * objs * 4 * K4
        assert np.array_equal(regions[k][:n], store[1][k * MiB:k * MiB + n])


def test_nonblock_eagain_releases_destinations(store):
    with kvblk.open(store[0], "psync", max_batches=1) as dev:
        a = dev.submit(big_batch(kvblk.aligned_empty(16 * MiB)))
        ba = bytearray(2 * K4)
        mv = memoryview(ba)[(-np.frombuffer(ba, np.uint8).ctypes.data) % 512:][:K4]
        with pytest.raises(kvblk.Error) as ei:
            dev.submit([(0, K4, mv)], nonblock=True)
        assert ei.value.errno == errno.EAGAIN
        mv.release()  # the failed submit kept no view
        a.wait()


def test_ticket_holds_destinations(dev, store):
    ba = bytearray(MiB + K4)
    mv = memoryview(ba)
    off = (-np.frombuffer(ba, np.uint8).ctypes.data) % K4
    t = dev.submit([(2 * MiB, MiB, mv[off:off + MiB])])
    del mv
    gc.collect()
    if not t.done():
        with pytest.raises(BufferError):
            ba.extend(b"x")  # the Ticket still holds a view
    t.wait()
    ba.extend(b"x")  # released once the completion is taken
    assert bytes(ba[off:off + MiB]) == store[1][2 * MiB:3 * MiB].tobytes()


def test_submit_rejected_names_descriptor(dev):
    dst = kvblk.aligned_empty(2 * K4)
    with pytest.raises(kvblk.Error) as ei:
        dev.submit([(0, K4, dst[:K4]), (3, K4, dst[K4:])])
    assert ei.value.errno == errno.EINVAL and ei.value.bad_index == 1 and "descriptor 1" in ei.value.strerror
    assert list(ei.value.results["status"]) == [-errno.ECANCELED, -errno.EINVAL]
    assert not dev._pending


def test_close_with_batches_outstanding(store):
    dev = kvblk.open(store[0], "psync")
    dst = kvblk.aligned_empty(16 * MiB)
    ts = [dev.submit(big_batch(dst)) for _ in range(3)]
    dev.close()  # cancels, finishes every batch, then closes
    for t in ts:
        assert t.done()
        st = set(t.wait(check=False).results["status"])
        assert st <= {0, -errno.ECANCELED}
    with pytest.raises(ValueError, match="closed"):
        dev.submit(big_batch(dst, 1))

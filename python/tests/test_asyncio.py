# SPDX-License-Identifier: MIT
"""await dev.load(...): eventfd wake-ups through loop.add_reader, concurrent awaits each get
their own completion, timeouts cancel, completions taken elsewhere still reach the awaiter."""

import asyncio
import errno
import threading

import numpy as np
import pytest

import kvblk
from kvblk import _aio, _kvblk

from conftest import MiB


K4 = 4096
OBJ = 256 << 10


def run(coro):
    return asyncio.run(coro)


def test_await_load(dev, store):
    dst = kvblk.aligned_empty(2 * MiB)

    async def main():
        return await dev.load([(3 * MiB, MiB, dst[:MiB]), (7 * MiB, MiB, dst[MiB:])])

    b = run(main())
    assert b.ok == 2 and b.bytes == 2 * MiB
    assert np.array_equal(dst[:MiB], store[1][3 * MiB:4 * MiB])
    assert np.array_equal(dst[MiB:], store[1][7 * MiB:8 * MiB])


def test_concurrent_awaits_get_their_own_completion(dev, store, monkeypatch):
    wakeups = []
    orig = _aio.LoopReaper._on_readable
    monkeypatch.setattr(_aio.LoopReaper, "_on_readable", lambda self: (wakeups.append(1), orig(self)))
    n = 12
    dsts = [kvblk.aligned_empty(MiB) for _ in range(n)]
    offs = [(i * 5 % 16) * MiB for i in range(n)]

    async def main():
        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(dev.load([(o, MiB, d, i)])) for i, (o, d) in enumerate(zip(offs, dsts))]
        await asyncio.sleep(0)  # every load is submitted and awaited: one reader for all
        reaper = dev._reapers[loop]
        res = await asyncio.gather(*tasks)
        return res, reaper._added, reaper._watching, loop in dev._reapers

    res, added, watching, kept = run(main())
    assert len({b.ticket for b in res}) == n
    for i, b in enumerate(res):
        assert b.ok == 1 and int(b.results["tag"][0]) == i
        assert np.array_equal(dsts[i], store[1][offs[i]:offs[i] + MiB])
    assert not added and watching == 0  # the reader is gone once nothing is awaited
    assert not kept  # and the device keeps no reaper, so no loop
    assert 1 <= len(wakeups) <= n  # woken by the eventfd, not by polling


def test_loop_keeps_running_while_awaiting(store):
    ticks = []

    async def ticker(stop):
        while not stop.is_set():
            ticks.append(1)
            await asyncio.sleep(0.001)

    async def main(dev):
        stop = asyncio.Event()
        tk = asyncio.create_task(ticker(stop))
        dst = kvblk.aligned_empty(16 * MiB)
        b = await dev.load([(i * OBJ, OBJ, dst[i * OBJ:(i + 1) * OBJ]) for i in range(64)])
        stop.set()
        await tk
        return b, dst

    with kvblk.open(store[0], "psync") as dev:
        b, dst = run(main(dev))
    assert b.ok == 64 and np.array_equal(dst, store[1][:16 * MiB])
    assert len(ticks) >= 2  # the loop ran other tasks while the load was in flight


def test_timeout_cancels_the_batch(store):
    async def main(dev):
        a = kvblk.aligned_empty(16 * MiB)
        b = kvblk.aligned_empty(16 * MiB)
        first = asyncio.create_task(dev.load([(i * OBJ, OBJ, a[i * OBJ:(i + 1) * OBJ]) for i in range(64)]))
        await asyncio.sleep(0)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(dev.load([(i * OBJ, OBJ, b[i * OBJ:(i + 1) * OBJ]) for i in range(64)]), 0.002)
        ok = await first
        # The cancelled batch still completes; the loop's reader takes it.
        for _ in range(1000):
            if not dev._pending:
                break
            await asyncio.sleep(0.01)
        return ok, dict(dev._pending)

    with kvblk.open(store[0], "psync") as dev:
        ok, pending = run(main(dev))
        assert ok.ok == 64 and not pending
        assert dev.stats()["cancelled_objects"] > 0


def test_rejected_load_raises_in_the_coroutine(dev):
    async def main():
        await dev.load([(1, K4, kvblk.aligned_empty(K4))])

    with pytest.raises(kvblk.Error) as ei:
        run(main())
    assert ei.value.errno == errno.EINVAL and ei.value.bad_index == 0


def test_completion_reaped_by_another_thread(dev, store):
    # A thread reaping the same device takes the completion; the awaiting future still resolves.
    stop = threading.Event()

    def reaper():
        while not stop.is_set():
            dev.reap(16, min_complete=1, timeout=0.02)

    th = threading.Thread(target=reaper)
    th.start()
    try:
        dsts = [kvblk.aligned_empty(MiB) for _ in range(6)]

        async def main():
            return await asyncio.gather(*(dev.load([(i * MiB, MiB, d)]) for i, d in enumerate(dsts)))

        res = run(main())
    finally:
        stop.set()
        th.join()
    assert all(b.ok == 1 for b in res)
    for i, d in enumerate(dsts):
        assert np.array_equal(d, store[1][i * MiB:(i + 1) * MiB])


def test_two_loops_on_two_threads(dev, store):
    out = {}

    def worker(k):
        dst = kvblk.aligned_empty(2 * MiB)

        async def main():
            return await asyncio.gather(dev.load([(k * 4 * MiB, MiB, dst[:MiB])]),
                                        dev.load([(k * 4 * MiB + MiB, MiB, dst[MiB:])]))

        out[k] = (asyncio.run(main()), dst)

    ths = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    for k in range(2):
        res, dst = out[k]
        assert [b.ok for b in res] == [1, 1]
        assert np.array_equal(dst, store[1][k * 4 * MiB:k * 4 * MiB + 2 * MiB])


def test_await_store_round_trip(wdev):
    src = kvblk.aligned_empty(MiB)
    src[:] = np.arange(MiB, dtype=np.uint64).astype(np.uint8)
    back = kvblk.aligned_empty(MiB)

    async def main():
        s = await wdev.store([(2 * MiB, MiB, src)])
        l = await wdev.load([(2 * MiB, MiB, back)])
        return s, l

    s, l = run(main())
    assert s.ok == 1 and l.ok == 1 and np.array_equal(back, src)

# SPDX-License-Identifier: MIT
"""The GIL is released while libkvblk does I/O or waits: another Python thread keeps running."""

import threading
import time

import numpy as np
import pytest

import kvblk
from kvblk import _kvblk

from conftest import MiB

OBJ = 256 << 10


def _longest_stall(fn):
    """Run fn on a thread while this thread spins, noting the time of every spin. Returns the
    longest stretch within fn's run in which this thread could not run, and fn's run time. A
    call that kept the GIL while waiting for the device would stall this thread for all of it;
    with the GIL released, this thread stalls only while the worker runs Python code (at most
    a switch interval, 5 ms, at a time)."""
    window = []

    def worker():
        t0 = time.perf_counter()
        fn()
        window.extend((t0, time.perf_counter()))

    th = threading.Thread(target=worker)
    stamps = []
    th.start()
    while th.is_alive():
        stamps.append(time.perf_counter())
    th.join()
    t0, t1 = window
    inside = [t0] + [s for s in stamps if t0 < s < t1] + [t1]
    return max(b - a for a, b in zip(inside, inside[1:])), t1 - t0


@pytest.mark.parametrize("mode", ["load_many", "wait"])
def test_gil_released_during_io(store, mode):
    with kvblk.open(store[0], "psync") as dev:
        # The 16 MiB file twice over in one batch: 128 reads, so that the load lasts long
        # enough to judge also where the file sits in a fast page cache (64 reads took 21 ms).
        n = 2 * (16 * MiB // OBJ)
        dst = kvblk.aligned_empty(n * OBJ)
        batch = [(i * OBJ % (16 * MiB), OBJ, dst[i * OBJ:(i + 1) * OBJ]) for i in range(n)]
        out = []
        if mode == "load_many":
            stall, secs = _longest_stall(lambda: out.append(dev.load_many(batch)))
        else:
            # Eight batches queued back to back: the wait for the last one spans most of them.
            tickets = [dev.submit(batch) for _ in range(8)]
            stall, secs = _longest_stall(lambda: out.append(tickets[-1].wait()))
            assert [t.wait().ok for t in tickets[:-1]] == [n] * 7
        assert out[0].ok == n
        assert np.array_equal(dst[:16 * MiB], store[1][:16 * MiB])
        assert np.array_equal(dst[16 * MiB:], store[1][:16 * MiB])
    # 128 reads of 256 KiB at queue depth 1 take tens of ms (the test needs that to tell).
    assert secs > 0.025, f"the load took only {secs * 1e3:.1f} ms: too fast to judge"
    assert stall < secs / 2, (stall, secs)

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


def _spins_during(fn):
    """Run fn on a thread; count the main thread's loop iterations while it runs. If fn held
    the GIL, the main thread could not run at all until fn returned."""
    th = threading.Thread(target=fn)
    spins = 0
    th.start()
    t0 = time.perf_counter()
    while th.is_alive():
        spins += 1
    return spins, time.perf_counter() - t0


@pytest.mark.parametrize("mode", ["load_many", "wait"])
def test_gil_released_during_io(store, mode):
    if mode == "wait" and not _kvblk.HAVE_ASYNC:
        pytest.skip("libkvblk built without kvblk_submit")
    with kvblk.open(store[0], "psync") as dev:
        dst = kvblk.aligned_empty(16 * MiB)
        batch = [(i * OBJ, OBJ, dst[i * OBJ:(i + 1) * OBJ]) for i in range(64)]
        out = []
        if mode == "load_many":
            spins, secs = _spins_during(lambda: out.append(dev.load_many(batch)))
        else:
            t = dev.submit(batch)
            spins, secs = _spins_during(lambda: out.append(t.wait()))
        assert out[0].ok == 64
        assert np.array_equal(dst, store[1][:16 * MiB])
    # 64 reads at queue depth 1 take milliseconds; a thread that ran the whole time spins far
    # more than the few iterations one switch interval (5 ms) would allow a GIL holder to give.
    assert secs > 0.002
    assert spins > 1000, (spins, secs)

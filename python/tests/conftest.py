# SPDX-License-Identifier: MIT
"""Fixtures of the kvblk Python suite: a pattern store on the local disk (/var/tmp: tmpfs
refuses O_DIRECT) and devices opened on it."""

import os
import tempfile

import numpy as np
import pytest

import kvblk

MiB = 1 << 20
STORE_BYTES = 16 * MiB


def pattern(nbytes, seed=1):
    """Deterministic bytes that differ at every 8-byte word (a misplaced block cannot match)."""
    words = np.arange(nbytes // 8, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
    return words.view(np.uint8)


@pytest.fixture(scope="session")
def tmpdir_disk():
    base = os.environ.get("TMPDIR") or "/var/tmp"
    with tempfile.TemporaryDirectory(prefix="kvblk-py-", dir=base) as d:
        yield d


@pytest.fixture(scope="session")
def store(tmpdir_disk):
    """(path, bytes): a 16 MiB file of pattern()."""
    path = os.path.join(tmpdir_disk, "store.bin")
    data = pattern(STORE_BYTES)
    with open(path, "wb") as f:
        f.write(data.tobytes())
        os.fsync(f.fileno())
    return path, data


@pytest.fixture(params=["uring", "psync", "threadpool"])
def backend(request):
    return request.param


@pytest.fixture
def dev(store):
    with kvblk.open(store[0], "uring") as d:
        yield d


@pytest.fixture
def wdev(tmpdir_disk):
    """A writable 8 MiB file created by kvblk (create_bytes)."""
    path = os.path.join(tmpdir_disk, f"w-{os.getpid()}-{np.random.randint(1 << 30)}.bin")
    with kvblk.open(path, "uring", write=True, create_bytes=8 * MiB) as d:
        yield d
    os.unlink(path)

# SPDX-License-Identifier: MIT
"""Device.flush(), Buffer.check() / Device.check_buffer(), and a handle inherited through fork()."""

import errno
import mmap
import os

import numpy as np
import pytest

import kvblk

from conftest import MiB, pattern

K4 = 4096


def test_flush_after_stores(wdev):
    src = kvblk.aligned_empty(MiB)
    src[:] = pattern(MiB, seed=5)
    assert wdev.store_many([(2 * MiB, MiB, src)]).ok == 1
    assert wdev.flush() is None
    assert wdev.flush(0) is None
    back = kvblk.aligned_empty(MiB)
    assert wdev.load_many([(2 * MiB, MiB, back)]).ok == 1
    assert np.array_equal(back, src)


def test_flush_errors(dev, wdev):
    with pytest.raises(kvblk.Error) as e:
        dev.flush(0)  # opened read-only: nothing to flush
    assert e.value.errno == errno.EBADF
    assert "kvblk_flush" in e.value.strerror
    with pytest.raises(kvblk.Error) as e:
        wdev.flush(7)
    assert e.value.errno == errno.ENOENT


def test_check_buffer_intact(dev, store):
    dst = kvblk.aligned_empty(2 * MiB)
    buf = dev.register(dst)
    assert buf.check() is None
    assert dev.check_buffer(buf) is None
    assert dev.check_buffer(buf.id) is None
    assert dev.load_many([(MiB, MiB, buf.slice(0, MiB))]).ok == 1
    assert np.array_equal(dst[:MiB], store[1][MiB:2 * MiB])
    with pytest.raises(kvblk.Error) as e:
        dev.check_buffer(buf.id + 1)
    assert e.value.errno == errno.ENOENT
    buf.unregister()
    with pytest.raises(ValueError):
        buf.check()


def test_check_buffer_finds_dropped_memory(dev, store):
    """uring registers the buffer as an io_uring fixed buffer: after MADV_DONTNEED its pinned
    pages are no longer what the program maps; the check says ESTALE and loads naming it fail
    until it is registered again."""
    # Private: MADV_DONTNEED of a shared (shmem) mapping keeps its pages, and the buffer intact.
    m = mmap.mmap(-1, 2 * MiB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    a = np.frombuffer(m, np.uint8)
    buf = dev.register(a)
    assert dev.load_many([(0, MiB, buf.slice(0, MiB))]).ok == 1
    m.madvise(mmap.MADV_DONTNEED, MiB, MiB)
    with pytest.raises(kvblk.Error) as e:
        buf.check()
    assert e.value.errno == errno.ESTALE
    assert "kvblk_check_buffer" in e.value.strerror
    with pytest.raises(kvblk.Error) as e:
        dev.load_many([(0, MiB, buf.slice(0, MiB))])
    assert e.value.errno == errno.ESTALE
    assert e.value.bad_index == 0
    buf.unregister()
    buf = dev.register(a)
    assert buf.check() is None
    assert dev.load_many([(MiB, MiB, buf.slice(MiB, MiB))]).ok == 1
    assert np.array_equal(a[MiB:], store[1][MiB:2 * MiB])
    buf.unregister()


def test_fork_child_gets_ebadfd(dev, store):
    dst = kvblk.aligned_empty(MiB)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            try:
                dev.load_many([(0, MiB, dst)])
            except kvblk.Error as e:
                code = 0 if e.errno == errno.EBADFD else 2
            os.write(w, b"%d" % code)
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 16)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"0"
    assert dev.load_many([(0, MiB, dst)]).ok == 1
    assert np.array_equal(dst, store[1][:MiB])

# SPDX-License-Identifier: MIT
"""Several targets per device, and unaligned loads (libkvblk 0.3)."""

import errno
import os

import numpy as np
import pytest

import kvblk

from conftest import MiB, pattern

K4 = 4096


@pytest.fixture(scope="module")
def second(tmpdir_disk):
    path = os.path.join(tmpdir_disk, "second.bin")
    data = pattern(4 * MiB, seed=99)
    with open(path, "wb") as f:
        f.write(data.tobytes())
    return path, data


def test_batch_across_targets(dev, store, second):
    tid = dev.add_target(second[0])
    assert tid >= 1
    assert dev.target_info(tid)["capacity"] == 4 * MiB
    assert dev.info()["targets"] == 2
    dst = kvblk.aligned_empty(3 * MiB)
    b = dev.load_many([(MiB, MiB, dst[:MiB], 10, tid), (MiB, MiB, dst[MiB:2 * MiB], 11, 0),
                       (3 * MiB, MiB, dst[2 * MiB:], 12, tid)])
    assert b.ok == 3
    assert np.array_equal(dst[:MiB], second[1][MiB:2 * MiB])
    assert np.array_equal(dst[MiB:2 * MiB], store[1][MiB:2 * MiB])
    assert np.array_equal(dst[2 * MiB:], second[1][3 * MiB:])
    # The same through a descriptor array's target column.
    dst[:] = 0
    d = kvblk.make_descs([0, 0], MiB, [dst.ctypes.data, dst.ctypes.data + MiB], target=[tid, 0])
    assert dev.load_many(d, keep=[dst]).ok == 2
    assert np.array_equal(dst[:MiB], second[1][:MiB]) and np.array_equal(dst[MiB:2 * MiB], store[1][:MiB])
    dev.remove_target(tid)
    with pytest.raises(kvblk.Error) as ei:
        dev.load_many([(0, K4, dst[:K4]), (0, K4, dst[K4:2 * K4], 1, tid)])
    assert ei.value.errno == errno.ENOENT and ei.value.bad_index == 1


def test_target_from_fd(dev, second):
    fd = os.open(second[0], os.O_RDONLY)
    try:
        tid = dev.add_target(fd)
    finally:
        os.close(fd)  # libkvblk opened its own description
    dst = kvblk.aligned_empty(MiB)
    assert dev.load_many([(2 * MiB, MiB, dst, 0, tid)]).ok == 1
    assert np.array_equal(dst, second[1][2 * MiB:3 * MiB])


def test_target_errors(dev, second, tmpdir_disk):
    fd = os.open(second[0], os.O_RDONLY)
    try:
        with pytest.raises(kvblk.Error) as ei:
            dev.add_target(fd, write=True)
        assert ei.value.errno == errno.EBADF
    finally:
        os.close(fd)
    with pytest.raises(kvblk.Error) as ei:
        dev.add_target(os.path.join(tmpdir_disk, "absent.bin"))
    assert ei.value.errno == errno.ENOENT and "absent.bin" in ei.value.strerror
    with pytest.raises(kvblk.Error) as ei:
        dev.remove_target(0)
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(kvblk.Error) as ei:
        dev.remove_target(777)
    assert ei.value.errno == errno.ENOENT
    with pytest.raises(kvblk.Error) as ei:
        dev.target_info(777)
    assert ei.value.errno == errno.ENOENT


def test_unaligned_load_into_bytearray(dev, store):
    data = store[1]
    ba = bytearray(3001)  # malloc'd, not aligned; odd length
    dev.reset_stats()
    b = dev.load_many([(1000, 3001, ba)], unaligned=True)
    assert b.ok == 1 and b.bytes == 3001
    assert bytes(ba) == data[1000:4001].tobytes()
    assert dev.stats()["unaligned_objects"] == 1
    with pytest.raises(kvblk.Error) as ei:
        dev.load_many([(1000, 3001, ba)])
    assert ei.value.errno == errno.EINVAL and ei.value.bad_index == 0

# SPDX-License-Identifier: MIT
"""Every error path: kvblk.Error (an OSError) with errno, libkvblk's reason and bad_index."""

import errno
import os
import pickle

import numpy as np
import pytest

import kvblk

from conftest import MiB, STORE_BYTES

K4 = 4096


def test_error_is_oserror_with_fields():
    e = kvblk.Error(errno.EINVAL, "kvblk_load_many: descriptor 3: bad", 3)
    assert isinstance(e, OSError)
    assert e.errno == errno.EINVAL and e.strerror.endswith("bad") and e.bad_index == 3
    assert "[Errno 22]" in str(e)
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.errno, e2.strerror, e2.bad_index) == (e.errno, e.strerror, 3)
    t = kvblk.WaitTimeout("late")
    assert isinstance(t, kvblk.Error) and isinstance(t, TimeoutError) and t.errno == errno.ETIME


def test_open_missing_file(tmpdir_disk):
    with pytest.raises(kvblk.Error) as ei:
        kvblk.open(os.path.join(tmpdir_disk, "nope.bin"))
    assert ei.value.errno == errno.ENOENT
    assert "kvblk_open" in ei.value.strerror and "nope.bin" in ei.value.strerror
    assert ei.value.bad_index == -1


def test_open_unknown_backend(store):
    with pytest.raises(kvblk.Error) as ei:
        kvblk.open(store[0], "warp")
    assert ei.value.errno == errno.EINVAL and "warp" in ei.value.strerror


def test_open_bad_option(store):
    with pytest.raises(kvblk.Error) as ei:
        kvblk.open(store[0], "uring", queue_depth=5000)
    assert ei.value.errno == errno.EINVAL and "queue_depth" in ei.value.strerror


def test_open_directory(tmpdir_disk):
    with pytest.raises(kvblk.Error) as ei:
        kvblk.open(tmpdir_disk)
    assert ei.value.errno in (errno.EISDIR, errno.ENOTSUP)


def _reject(dev, batch, **kw):
    with pytest.raises(kvblk.Error) as ei:
        dev.load_many(batch, **kw)
    return ei.value


def test_misaligned_offset_names_the_descriptor(dev):
    dst = kvblk.aligned_empty(3 * K4)
    e = _reject(dev, [(0, K4, dst[:K4]), (K4, K4, dst[K4:2 * K4]), (K4 + 1, K4, dst[2 * K4:])])
    assert e.errno == errno.EINVAL and e.bad_index == 2
    assert "descriptor 2" in e.strerror and "offset" in e.strerror
    # The library's per-descriptor results come with the error: the reason, -ECANCELED for the rest.
    assert list(e.results["status"]) == [-errno.ECANCELED, -errno.ECANCELED, -errno.EINVAL]
    assert np.all(dst == dst)  # nothing else to check: nothing was read


def test_misaligned_length_and_zero_length(dev):
    dst = kvblk.aligned_empty(2 * K4)
    e = _reject(dev, [(0, K4 + 1, dst)])
    assert e.errno == errno.EINVAL and e.bad_index == 0 and "length" in e.strerror
    e = _reject(dev, [(0, K4, dst[:K4]), (0, 0, dst[K4:])])
    assert e.errno == errno.EINVAL and e.bad_index == 1


def test_misaligned_destination(dev):
    dst = kvblk.aligned_empty(2 * K4)
    e = _reject(dev, [(0, K4, dst[1:1 + K4])])
    assert e.errno == errno.EINVAL and e.bad_index == 0 and "aligned" in e.strerror


def test_past_the_end_is_erange(dev):
    dst = kvblk.aligned_empty(2 * K4)
    e = _reject(dev, [(0, K4, dst[:K4]), (STORE_BYTES - K4, 2 * K4, dst)])
    assert e.errno == errno.ERANGE and e.bad_index == 1 and "past the end" in e.strerror


def test_unknown_buffer_id_is_enoent(dev):
    d = kvblk.make_descs([0, K4], K4, [0, 0], buf_id=[kvblk.BUF_NONE, 4321])
    d["addr"][0] = kvblk.aligned_empty(K4).ctypes.data  # never used: the call is rejected
    e = _reject(dev, d)
    assert e.errno == errno.ENOENT and e.bad_index == 1 and "4321" in e.strerror


def test_registered_range_exceeded(dev):
    buf = dev.register(kvblk.aligned_empty(2 * K4))
    e = _reject(dev, [(0, K4, buf.slice(0, K4))] + [(0, 2 * K4, buf.slice(K4, K4))])
    # The binding catches a slice too small for its length before the library sees it.
    assert e.errno == errno.EINVAL and e.bad_index == 1 and "larger than its destination" in e.strerror
    d = kvblk.make_descs([0], 2 * K4, [K4], buf_id=buf)
    e = _reject(dev, d)
    assert e.errno == errno.EINVAL and e.bad_index == 0 and "exceeds registered buffer" in e.strerror


def test_too_many_descriptors_is_e2big(store):
    with kvblk.open(store[0], "uring", max_descs=2) as dev:
        dst = kvblk.aligned_empty(3 * K4)
        e = _reject(dev, [(i * K4, K4, dst[i * K4:(i + 1) * K4]) for i in range(3)])
        assert e.errno == errno.E2BIG


def test_empty_batch(dev):
    e = _reject(dev, kvblk.empty_descs(0))
    assert e.errno == errno.EINVAL


def test_read_only_destinations_are_refused(dev):
    ro = kvblk.aligned_empty(2 * K4)
    ro.flags.writeable = False
    ok = kvblk.aligned_empty(K4)
    for bad in (ro, bytes(K4), memoryview(bytearray(K4)).toreadonly()):
        e = _reject(dev, [(0, K4, ok), (0, K4, bad)])
        assert e.errno == errno.EINVAL and e.bad_index == 1
        assert "read-only" in e.strerror, e.strerror
    with pytest.raises(kvblk.Error, match="read-only"):
        dev.register(ro)
    dev.register(ro, writable=False).unregister()  # allowed for store sources


def test_destination_too_small(dev):
    dst = kvblk.aligned_empty(K4)
    e = _reject(dev, [(0, 2 * K4, dst)])
    assert e.errno == errno.EINVAL and e.bad_index == 0 and "4096 bytes" in e.strerror


def test_non_contiguous_destination(dev):
    a = kvblk.aligned_empty(4 * K4)[::2]
    e = _reject(dev, [(0, K4, a)])
    assert e.errno == errno.EINVAL and e.bad_index == 0 and "contiguous" in e.strerror


def test_unsupported_destination_type(dev):
    with pytest.raises(TypeError, match="descriptor 0: destination of type object is not supported"):
        dev.load_many([(0, K4, object())])
    with pytest.raises(TypeError, match="expected \\(offset, length, dest"):
        dev.load_many([(0, K4)])


def test_wrong_descriptor_array(dev):
    with pytest.raises(TypeError, match="DESC_DTYPE"):
        dev.load_many(np.zeros(4, np.uint64))
    with pytest.raises(TypeError, match="1-D"):
        dev.load_many(kvblk.empty_descs(4)[::2])
    with pytest.raises(ValueError, match="results has 1 items for 2 descriptors"):
        dev.load_many(kvblk.empty_descs(2), results=np.zeros(1, kvblk.RESULT_DTYPE))
    with pytest.raises(TypeError, match="24-byte"):
        dev.load_many(kvblk.empty_descs(2), results=np.zeros(2, np.uint64))


def test_store_on_read_only_device_is_ebadf(dev):
    with pytest.raises(kvblk.Error) as ei:
        dev.store_many([(0, K4, kvblk.aligned_empty(K4))])
    assert ei.value.errno == errno.EBADF


def test_unregister_unknown_and_twice(dev):
    buf = dev.register(kvblk.aligned_empty(K4))
    buf.unregister()
    buf.unregister()  # idempotent on the Python object
    with pytest.raises(kvblk.Error) as ei:
        dev._c.unregister_buffer(buf.id)
    assert ei.value.errno == errno.ENOENT


def test_register_misaligned_and_empty(dev):
    with pytest.raises(kvblk.Error) as ei:
        dev.register(kvblk.aligned_empty(2 * K4)[1:K4 + 1])
    assert ei.value.errno == errno.EINVAL and "kvblk_register_buffer" in ei.value.strerror
    with pytest.raises(kvblk.Error) as ei:
        dev.register(kvblk.aligned_empty(0))
    assert ei.value.errno == errno.EINVAL


def test_bad_staging(dev):
    with pytest.raises(kvblk.Error) as ei:
        dev.set_staging(1000, 0)
    assert ei.value.errno == errno.EINVAL


def test_closed_device(store):
    dev = kvblk.open(store[0])
    dev.close()
    for call in (dev.info, dev.stats, lambda: dev.load_many([(0, K4, kvblk.aligned_empty(K4))])):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_object_failure_raises_with_the_batch(tmpdir_disk):
    # A file that shrinks after it was opened: the object beyond the new end cannot be read.
    path = os.path.join(tmpdir_disk, "shrink.bin")
    with open(path, "wb") as f:
        f.truncate(2 * MiB)
    with kvblk.open(path, "psync") as dev:
        os.truncate(path, MiB)
        dst = kvblk.aligned_empty(2 * K4)
        with pytest.raises(kvblk.Error) as ei:
            dev.load_many([(0, K4, dst[:K4]), (MiB + K4, K4, dst[K4:])])
        e = ei.value
        assert e.bad_index == 1
        assert e.errno in (errno.ENODATA, errno.ERANGE)
        if e.batch is not None:  # failed while reading: per-object statuses
            assert e.batch.ok == 1 and e.batch.failed == 1
            assert list(e.batch.results["status"]) == [0, -errno.ENODATA]
            b = dev.load_many([(0, K4, dst[:K4]), (MiB + K4, K4, dst[K4:])], check=False)
            assert b.failed == 1 and b.results["status"][1] == -errno.ENODATA
    os.unlink(path)

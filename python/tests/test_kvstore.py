# SPDX-License-Identifier: MIT
"""kvblk.KVStore: round trips on every userspace backend, every destination kind, per-key
results and their texts, parameters, evictions, reopen, threads, the asynchronous API, lifetime
(weakref) and fork."""

import errno
import gc
import os
import threading
import time
import weakref

import numpy as np
import pytest

import kvblk
from kvblk import _kvblk

from kvstore_util import MiB, make_store, pattern, store_path


@pytest.fixture
def st(tmpdir_disk):
    s, paths = make_store(tmpdir_disk, file_bytes=160 * MiB, classes=("64KiB", "1MiB", "4MiB"))
    yield s
    s.close()
    for p in paths:
        os.unlink(p)


# ------------------------------------------------------------------ round trips

@pytest.mark.parametrize("backend", ["uring", "threadpool", "psync"])
def test_round_trip_4_and_32_MiB_in_one_batch_every_backend(tmpdir_disk, backend):
    paths = [store_path(tmpdir_disk, "a"), store_path(tmpdir_disk, "b")]
    with kvblk.KVStore(paths, create=True, file_bytes=200 * MiB, journal_bytes=4 * MiB,
                       classes=["4MiB", "32MiB"], backend=backend) as s:
        assert s.info()["backend"] == backend
        sizes = [4 * MiB, 32 * MiB, 4 * MiB, 32 * MiB, 4 * MiB - 100, 32 * MiB - 4096]
        data = [pattern(n, i) for i, n in enumerate(sizes)]
        keys = [f"model@1@0@{i:064x}" for i in range(len(sizes))]
        metas = [f"shape={n}".encode() for n in sizes]
        r = s.put(keys, data, metas=metas)
        assert r.status.tolist() == [0] * 6 and r.bytes == sum(sizes)
        assert r.length.tolist() == sizes
        dst = [np.zeros(n, np.uint8) for n in sizes]
        g = s.get(keys, dst)
        assert g.status.tolist() == [0] * 6 and g.hits == [True] * 6
        assert g.length.tolist() == sizes and g.bytes == sum(sizes)
        for d, x in zip(dst, data):
            assert np.array_equal(d, x)
        assert [g.meta(i) for i in range(6)] == metas
        assert sorted(set(g.drive.tolist())) == [0, 1]  # spread over both drives
        e = s.exists(keys + ["nope"])
        assert e.status.tolist() == [0] * 6 + [-errno.ENOENT]
        assert e.length.tolist()[:6] == sizes and e.meta(6) is None and e[6].miss
        st = s.stats()
        assert st["hits"] == 6 and st["puts"] == 6 and st["checksum_failures"] == 0


def test_keys_str_and_bytes_are_the_same_utf8_bytes(st):
    k = "ключ/é@0"
    st.put([k], [pattern(5000, 1)])
    dst = np.zeros(5000, np.uint8)
    r = st.get([k.encode("utf-8")], [dst])
    assert r.ok == 1 and np.array_equal(dst, pattern(5000, 1))
    assert [x.key for x in st.keys()] == [k.encode()]
    assert [x.key for x in st.keys(decode=True)] == [k]
    assert st.exists([bytearray(k.encode())]).ok == 1


def test_every_destination_kind(st):
    torch = pytest.importorskip("torch")
    n = 300_000
    keys = [f"k{i}" for i in range(8)]
    src = [pattern(n, i) for i in range(8)]
    # sources of several kinds too: numpy, bytes, bytearray, torch tensor, memoryview
    sources = [src[0], src[1].tobytes(), bytearray(src[2].tobytes()), torch.from_numpy(src[3].copy()),
               memoryview(src[4]), src[5], src[6], src[7]]
    assert st.put(keys, sources).ok == 8

    class DLPackOnly:  # no buffer protocol: only __dlpack__ (resolved through the capsule)
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    backing = np.zeros(n + 17, np.uint8)
    reg_np = kvblk.aligned_empty(2 * n)
    buf = st.register(reg_np)
    reg_whole = kvblk.aligned_empty(n + 4096)
    whole = st.register(reg_whole)
    tens = torch.zeros(n, dtype=torch.uint8)
    dl = torch.zeros(n, dtype=torch.uint8)
    ba = bytearray(n)
    dsts = [np.zeros(n, np.uint8),                      # numpy
            tens,                                       # torch CPU tensor (DLPack / buffer)
            DLPackOnly(dl),                             # DLPack only
            ba,                                         # bytearray
            memoryview(backing)[17:17 + n],             # unaligned memoryview
            None,                                       # (address, nbytes): below
            whole,                                      # registered buffer, whole
            buf.slice(n, n)]                            # registered buffer, a slice
    addr_arr = np.zeros(n, np.uint8)
    dsts[5] = (addr_arr.ctypes.data, n)
    r = st.get(keys, dsts)
    # the whole registered buffer holds n + 4096 bytes: a hit of n bytes
    assert r.status.tolist() == [0] * 8, [x.error for x in r]
    assert r.length.tolist() == [n] * 8
    assert np.array_equal(dsts[0], src[0])
    assert np.array_equal(tens.numpy(), src[1])
    assert np.array_equal(dl.numpy(), src[2])
    assert bytes(ba) == src[3].tobytes()
    assert np.array_equal(backing[17:17 + n], src[4]) and not backing[:17].any() and backing[17 + n:].sum() == 0
    assert np.array_equal(addr_arr, src[5])
    assert np.array_equal(reg_whole[:n], src[6]) and np.array_equal(reg_np[n:], src[7])
    buf.unregister()
    whole.unregister()
    assert not buf.registered


def test_read_only_destination_is_refused(st):
    st.put(["a"], [pattern(4096, 1)])
    ro = np.zeros(4096, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(kvblk.Error) as e:
        st.get(["a"], [ro])
    assert e.value.errno == errno.EINVAL and e.value.bad_index == 0
    assert "'a'" in str(e.value) and "read-only" in str(e.value)


# ------------------------------------------------------------ per-key results

def test_wrong_size_destination_is_an_error_with_text_not_a_miss(st):
    st.put(["big", "small"], [pattern(3 * MiB, 1), pattern(100_000, 2)])
    small_dst = np.zeros(MiB, np.uint8)
    big_dst = np.zeros(MiB, np.uint8)
    r = st.get(["big", "small", "gone"], [small_dst, big_dst, np.zeros(10, np.uint8)])
    assert r.status.tolist() == [-errno.EMSGSIZE, 0, -errno.ENOENT]
    k = r[0]
    assert not k.ok and not k.miss and k.errno == errno.EMSGSIZE and k.length == 3 * MiB
    assert k.error == f"the stored object is {3 * MiB} bytes; the destination holds {MiB}"
    assert r[1].length == 100_000 and np.array_equal(big_dst[:100_000], pattern(100_000, 2))
    assert r[2].miss and r[2].error == "miss: the key is not in the store"
    assert [x.key for x in r.errors()] == ["big"]
    assert [x.key for x in r.errors(misses=True)] == ["big", "gone"]
    with pytest.raises(kvblk.Error) as e:
        r.raise_for_errors()
    assert e.value.errno == errno.EMSGSIZE and e.value.bad_index == 0
    assert "key 'big' (index 0): EMSGSIZE: the stored object is" in str(e.value)
    with pytest.raises(kvblk.Error):
        st.get(["big"], [np.zeros(10, np.uint8)], strict=True)


def test_bad_input_names_the_key_and_queues_nothing(st):
    with pytest.raises(kvblk.Error) as e:
        st.put(["ok", "x" * 600], [b"a" * 10, b"b" * 10])
    assert e.value.errno == errno.EINVAL and e.value.bad_index == 1
    assert "index 1" in str(e.value) and "key of 600 bytes" in str(e.value)
    assert st.exists(["ok"]).status.tolist() == [-errno.ENOENT]  # nothing queued
    with pytest.raises(kvblk.Error) as e:
        st.put(["", "b"], [b"a", b"b"])
    assert e.value.bad_index == 0
    with pytest.raises(kvblk.Error) as e:
        st.put(["a", "a"], [b"a", b"b"])
    assert e.value.errno == errno.EINVAL and "same key" in str(e.value)
    with pytest.raises(kvblk.Error) as e:
        st.put(["huge"], [np.zeros(4 * MiB + 1, np.uint8)])
    assert e.value.errno == errno.EINVAL and "largest class" in str(e.value)
    with pytest.raises(kvblk.Error) as e:
        st.put(["m"], [b"x"], metas=[b"z" * 200])
    assert e.value.errno == errno.EINVAL and "metadata" in str(e.value)
    with pytest.raises(TypeError, match=r"keys\[1\] is a int"):
        st.exists(["a", 5])
    with pytest.raises(TypeError, match="single key"):
        st.exists("abc")
    with pytest.raises(ValueError, match="2 keys but 1 dests"):
        st.get(["a", "b"], [bytearray(1)])
    with pytest.raises(TypeError, match="dests"):
        st.get(["a"], [object()])
    with pytest.raises(ValueError, match="at least one key"):
        st.get([], [])


def test_delete_and_overwrite(st):
    st.put(["a", "b"], [pattern(10_000, 1), pattern(20_000, 2)])
    st.put(["a"], [pattern(30_000, 3)])
    dst = np.zeros(30_000, np.uint8)
    r = st.get(["a"], [dst])
    assert r.length.tolist() == [30_000] and np.array_equal(dst, pattern(30_000, 3))
    d = st.delete(["a", "nope"])
    assert d.status.tolist() == [0, -errno.ENOENT] and d[1].error == "absent: nothing to delete"
    assert st.exists(["a", "b"]).status.tolist() == [-errno.ENOENT, 0]
    assert len(st) == 1


# ------------------------------------------------------------------ parameters

@pytest.mark.parametrize("kw,exc,text", [
    (dict(file_bytes="lots"), ValueError, "file_bytes 'lots' is not a byte count"),
    (dict(file_bytes=1.5), TypeError, "file_bytes must be an int"),
    (dict(file_bytes=True), TypeError, "file_bytes must be an int"),
    (dict(when_full=1), TypeError, "when_full must be a str"),
    (dict(when_full="drop"), ValueError, "when_full 'drop' is not one of"),
    (dict(backend="spdk"), ValueError, "backend 'spdk' is not one of"),
    (dict(classes=[3000]), ValueError, r"classes\[0\].slot_bytes 3000 is not a multiple of 4096"),
    (dict(classes=["4MiB", ("1MiB", "x")]), TypeError, r"classes\[1\].weight must be an int"),
    (dict(queue_depth="8"), TypeError, "queue_depth must be an int"),
    (dict(max_batches=70000), ValueError, "max_batches 70000 is out of range"),
    (dict(max_key_bytes=2000), ValueError, "max_key_bytes 2000 is out of range"),
    (dict(force="yes"), TypeError, "force must be True or False"),
    (dict(create="maybe"), ValueError, "create must be False, True or 'if_missing'"),
])
def test_parameter_errors_name_the_parameter(tmpdir_disk, kw, exc, text):
    p = store_path(tmpdir_disk)
    args = dict(create=True, file_bytes=64 * MiB)
    args.update(kw)
    with pytest.raises(exc, match=text):
        kvblk.KVStore(p, **args)
    assert not os.path.exists(p)


def test_sizes_with_units(tmpdir_disk):
    p = store_path(tmpdir_disk)
    with kvblk.KVStore(p, create=True, file_bytes="48MiB", journal_bytes="4MiB",
                       classes=[{"slot_bytes": "64KiB", "weight": 1}, ("1 MiB", 3)]) as s:
        info = s.info()
        assert [c["slot_bytes"] for c in info["classes"]] == [64 << 10, MiB]
        assert info["journal_bytes"] == 4 * MiB
        assert os.path.getsize(p) == 48 * MiB
    os.unlink(p)


def test_create_larger_than_free_space_fails_and_leaves_no_file(tmpdir_disk):
    p = store_path(tmpdir_disk)
    free = os.statvfs(tmpdir_disk).f_bavail * os.statvfs(tmpdir_disk).f_frsize
    with pytest.raises(kvblk.Error) as e:
        kvblk.KVStore(p, create=True, file_bytes=free + (1 << 40))
    assert e.value.errno == errno.ENOSPC
    assert not os.path.exists(p)


def test_open_missing_and_foreign(tmpdir_disk):
    p = store_path(tmpdir_disk)
    with pytest.raises(kvblk.Error) as e:
        kvblk.KVStore(p)
    assert e.value.errno == errno.ENOENT
    with open(p, "wb") as f:
        f.write(b"not a store" * 100_000)
    with pytest.raises(kvblk.Error) as e:
        kvblk.KVStore(p)
    assert e.value.errno == errno.EMEDIUMTYPE and "kvblk_kvstore_open" in str(e.value)
    with pytest.raises(kvblk.Error) as e:
        kvblk.KVStore(p, create="if_missing")  # exists: opened, never overwritten
    assert e.value.errno == errno.EMEDIUMTYPE
    assert open(p, "rb").read(11) == b"not a store"
    os.unlink(p)


def test_create_if_missing_then_reopen_finds_everything(tmpdir_disk):
    p = store_path(tmpdir_disk)
    kw = dict(create="if_missing", file_bytes=64 * MiB, journal_bytes=4 * MiB, classes=["256KiB"])
    keys = [f"key-{i}" for i in range(40)]
    data = [pattern(200_000 + i, i) for i in range(40)]
    with kvblk.KVStore(p, **kw) as s:
        uuid = s.info()["uuid"]
        assert s.put(keys, data, metas=[k.encode() for k in keys]).ok == 40
    with kvblk.KVStore(p, **kw) as s:  # exists now: opened
        assert s.info()["uuid"] == uuid and len(s) == 40
        dst = [np.zeros(256 << 10, np.uint8) for _ in keys]
        r = s.get(keys, dst)
        assert r.ok == 40
        for i, d in enumerate(dst):
            assert np.array_equal(d[:len(data[i])], data[i]) and r.meta(i) == keys[i].encode()
        assert sorted(k.key for k in s.keys(decode=True)) == sorted(keys)
    os.unlink(p)


# ------------------------------------------------------------------ capacity

def test_evictions_are_reported_oldest_first(tmpdir_disk):
    s, (p,) = make_store(tmpdir_disk, file_bytes=24 * MiB, classes=["1MiB"])
    with s:
        slots = s.info()["classes"][0]["slots"]
        n = slots + 5
        for i in range(n):
            assert s.put([f"k{i}"], [pattern(MiB, i)]).ok == 1
        ev = s.evicted(decode=True)
        assert [e.key for e in ev] == [f"k{i}" for i in range(5)]
        assert all(e.length == MiB for e in ev)
        assert s.evicted() == []  # drained
        assert s.stats()["evictions"] == 5
        assert s.exists(["k0", f"k{n - 1}"]).status.tolist() == [-errno.ENOENT, 0]
    os.unlink(p)


def test_refuse_mode_reports_enospc_per_key(tmpdir_disk):
    s, (p,) = make_store(tmpdir_disk, file_bytes=24 * MiB, classes=["1MiB"], when_full="refuse")
    with s:
        slots = s.info()["classes"][0]["slots"]
        assert s.put([f"k{i}" for i in range(slots)], [pattern(MiB, i) for i in range(slots)]).ok == slots
        r = s.put(["x", "y"], [pattern(1000, 1), pattern(1000, 2)])
        assert r.status.tolist() == [-errno.ENOSPC] * 2
        assert r[0].error.startswith("no slot for it: the store is full")
        assert s.evicted() == []
    os.unlink(p)


def test_batches_larger_than_max_descs_are_split(st):
    n = st.max_keys_per_batch + 10
    assert st.max_keys_per_batch == 65536
    st.put(["k5", "k70000"], [b"a" * 100, b"b" * 100])
    keys = [f"k{i}" for i in range(n)]
    r = st.exists(keys)
    assert len(r) == n and r.ok == 1  # k70000 is past the n keys asked
    assert np.flatnonzero(r.status == 0).tolist() == [5]
    assert r[5].ok and r[n - 1].miss
    r = st.exists(keys + ["k70000"])
    assert np.flatnonzero(r.status == 0).tolist() == [5, n]
    assert r.meta(5) == b"" and r.meta(6) is None
    t = st.submit_exists(keys + ["k70000"])
    assert t.wait().ok == 2 and len(t._parts) == 2


# ------------------------------------------------------------------ threads

def test_eight_threads(st):
    errs = []

    def worker(t):
        try:
            for round_ in range(4):
                keys = [f"t{t}-{i}" for i in range(6)]
                data = [pattern(60_000 + i * 1000, t * 100 + round_ * 10 + i) for i in range(6)]
                assert st.put(keys, data).ok == 6
                dst = [np.zeros(len(d), np.uint8) for d in data]
                r = st.get(keys, dst)
                assert r.ok == 6
                for d, x in zip(dst, data):
                    assert np.array_equal(d, x)
        except BaseException as e:  # noqa: BLE001
            errs.append(e)

    ths = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert errs == []
    assert len(st) == 48


def test_gil_released_during_a_get(tmpdir_disk):
    s, (p,) = make_store(tmpdir_disk, file_bytes=160 * MiB, classes=["4MiB"], backend="psync")
    with s:
        keys = [f"k{i}" for i in range(16)]
        s.put(keys, [pattern(4 * MiB, i) for i in range(16)])
        dst = [np.zeros(4 * MiB, np.uint8) for _ in keys]
        done = threading.Event()
        spins = [0]

        def spin():
            while not done.is_set():
                spins[0] += 1

        th = threading.Thread(target=spin)
        th.start()
        t0 = time.perf_counter()
        r = s.get(keys, dst)
        secs = time.perf_counter() - t0
        done.set()
        th.join()
        assert r.ok == 16
        # A get that kept the GIL would leave the spinner a few switch intervals at most.
        assert spins[0] > 1000, (spins[0], secs)
    os.unlink(p)


# ------------------------------------------------------------ asynchronous API

def test_submit_wait_reap_and_fileno(st):
    st.put(["a", "b"], [pattern(5000, 1), pattern(6000, 2)])
    d1, d2 = np.zeros(5000, np.uint8), np.zeros(6000, np.uint8)
    t1 = st.submit_get(["a"], [d1], user_data=11)
    t2 = st.submit_get(["b", "c"], [d2, np.zeros(10, np.uint8)], user_data=22)
    r1 = t1.wait(timeout=10)
    assert r1.ok == 1 and r1.user_data == 11 and np.array_equal(d1, pattern(5000, 1))
    # t2's completion through the eventfd and reap()
    import select
    fd = st.fileno()
    assert select.select([fd], [], [], 10)[0] == [fd]
    done = st.reap(64, 1, 10)
    assert done == [t2] and t2.done()
    r2 = t2.result()
    assert r2.status.tolist() == [0, -errno.ENOENT] and r2.user_data == 22
    assert r2.path == "host" and r2.backend in kvblk.BACKENDS
    assert np.array_equal(d2, pattern(6000, 2))
    assert select.select([fd], [], [], 0)[0] == []  # cleared
    tp = st.submit_put(["c"], [pattern(100, 3)])
    assert tp.wait().ok == 1 and st.exists(["c"]).ok == 1
    assert st.submit_delete(["c"]).wait().status.tolist() == [0]


def test_asyncio_concurrent_gets(st):
    import asyncio
    keys = [f"k{i}" for i in range(10)]
    data = [pattern(50_000 + i, i) for i in range(10)]

    async def main():
        await st.put_async(keys, data, metas=[k.encode() for k in keys])
        dsts = [np.zeros(60_000, np.uint8) for _ in keys]
        res = await asyncio.gather(*(st.get_async([k], [d]) for k, d in zip(keys, dsts)))
        ex = await st.exists_async(keys + ["z"])
        de = await st.delete_async(["k0"])
        return res, dsts, ex, de

    res, dsts, ex, de = asyncio.run(main())
    for i, r in enumerate(res):
        assert r.ok == 1 and r.meta(0) == keys[i].encode()
        assert np.array_equal(dsts[i][:len(data[i])], data[i])
    assert ex.ok == 10 and de.ok == 1
    loops = list(st._core.reapers.keys())
    gc.collect()
    assert not list(st._core.reapers.keys()) or loops  # closed loops are forgotten (weak keys)


def test_asyncio_strict_raises(st):
    import asyncio
    st.put(["big"], [pattern(100_000, 1)])

    async def main():
        return await st.get_async(["big"], [np.zeros(10, np.uint8)], strict=True)

    with pytest.raises(kvblk.Error) as e:
        asyncio.run(main())
    assert e.value.errno == errno.EMSGSIZE


def test_close_finishes_outstanding_tickets(tmpdir_disk):
    s, (p,) = make_store(tmpdir_disk, file_bytes=160 * MiB, classes=["4MiB"])
    tickets = [s.submit_put([f"k{i}"], [pattern(4 * MiB, i)]) for i in range(12)]
    s.close()
    assert all(t.done() for t in tickets)
    sts = [int(t.result().status[0]) for t in tickets]
    assert set(sts) <= {0, -errno.ECANCELED}
    # what was reported stored is there after a reopen; what was cancelled is not
    with kvblk.KVStore(p) as s2:
        ex = s2.exists([f"k{i}" for i in range(12)]).status.tolist()
        assert [x == 0 for x in ex] == [x == 0 for x in sts]
    with pytest.raises(ValueError, match="closed"):
        s.exists(["k0"])
    os.unlink(p)


# ------------------------------------------------------------ lifetime, fork

def test_dropped_store_is_collected_and_releases_the_drives(tmpdir_disk):
    import asyncio
    s, (p,) = make_store(tmpdir_disk, classes=["64KiB"])
    s.put(["a"], [b"x" * 1000])

    async def use():
        return await s.get_async(["a"], [bytearray(1000)])

    assert asyncio.run(use()).ok == 1
    s.submit_get(["a"], [bytearray(1000)])  # outstanding when dropped
    r = weakref.ref(s)
    with pytest.raises(kvblk.Error) as e:  # open in this process: the drive is locked
        kvblk.KVStore(p)
    assert e.value.errno == errno.EBUSY
    del s
    assert r() is None  # collected by reference counting, no gc.collect() needed
    with kvblk.KVStore(p) as s2:  # the flock went with it
        assert s2.exists(["a"]).ok == 1
    os.unlink(p)


def test_fork_child_gets_ebadfd_parent_unaffected(st):
    st.put(["a"], [b"x" * 4096])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            try:
                st.exists(["a"])
            except kvblk.Error as e:
                code = 0 if e.errno == errno.EBADFD and "fork()" in e.strerror else 2
            try:
                st.get(["a"], [bytearray(4096)])
                code = 3
            except kvblk.Error as e:
                code = code if e.errno == errno.EBADFD else 4
            st.close()  # frees nothing, returns at once
            del st
            gc.collect()
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.close(w)
    code = os.read(r, 1)
    os.waitpid(pid, 0)
    os.close(r)
    assert code == b"\x00"
    dst = bytearray(4096)
    assert st.get(["a"], [dst]).ok == 1 and bytes(dst) == b"x" * 4096
    st.put(["b"], [b"y"])
    assert st.exists(["b"]).ok == 1


def test_crc32c():
    assert kvblk.KVStore.crc32c(b"123456789") == 0xE3069283


@pytest.mark.skipif(not os.path.exists("/dev/nvidia0"), reason="no GPU")
def test_cuda_destination(st):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    st.put(["g"], [pattern(MiB, 9)])
    d = torch.zeros(MiB, dtype=torch.uint8, device="cuda")
    r = st.get(["g"], [d], verify=True)
    assert r.ok == 1, r[0].error
    assert r.path in ("p2p", "staged")
    assert np.array_equal(d.cpu().numpy(), pattern(MiB, 9))


def test_misaligned_destinations_over_the_bounce_limit(tmpdir_disk):
    """numpy's large arrays sit 16 bytes past a page: libkvblk bounces such objects whole and
    refuses a read batch whose bounce passes 256 MiB; the store cuts its read parts by bounce
    bytes (get.cpp), so the 320 MiB of misaligned destinations here are one get that hits."""
    s, (p,) = make_store(tmpdir_disk, file_bytes=420 * MiB, classes=["32MiB"])
    with s:
        n = 10
        keys = [f"k{i}" for i in range(n)]
        s.put(keys, [np.full(32 * MiB, i + 1, np.uint8) for i in range(n)])
        backing = [kvblk.aligned_empty(32 * MiB + 4096) for _ in keys]
        dst = [b[16:16 + 32 * MiB] for b in backing]
        assert all(d.ctypes.data % 4096 == 16 for d in dst)
        r = s.get(keys, dst, meta=False)
        assert r.status.tolist() == [0] * n
        assert all(int(d[0]) == i + 1 and int(d[-1]) == i + 1 for i, d in enumerate(dst))
    os.unlink(p)


def test_several_threads_wait_for_one_ticket(st):
    keys = [f"k{i}" for i in range(6)]
    st.put(keys, [pattern(MiB, i) for i in range(6)])
    for _ in range(10):
        dst = [np.zeros(MiB, np.uint8) for _ in keys]
        t = st.submit_get(keys, dst)
        got = []
        ths = [threading.Thread(target=lambda: got.append(t.wait(timeout=30).ok)) for _ in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        assert got == [6] * 4
        assert all(np.array_equal(d, pattern(MiB, i)) for i, d in enumerate(dst))


def test_drives_info_and_check(tmpdir_disk):
    s, paths = make_store(tmpdir_disk, n_drives=2, file_bytes=64 * MiB, classes=["1MiB"])
    with s:
        s.put([f"k{i}" for i in range(20)], [pattern(MiB, i) for i in range(20)])
        info = s.info()
        assert info["drives"] == info["drives_ok"] == 2 and info["objects"] == 20
        assert info["bytes_stored"] == 20 * MiB and info["when_full"] == "evict"
        ds = s.drives()
        assert [d["path"] for d in ds] == paths and [d["state"] for d in ds] == ["ok", "ok"]
        assert sum(d["objects"] for d in ds) == 20 and all(d["objects"] for d in ds)
        assert sum(d["bytes_written"] for d in ds) == 20 * MiB
        rep = s.check(data=True)
        assert rep["bad"] == 0 and rep["objects"] == 20 and rep["bytes_checked"] == 20 * MiB
        ident = kvblk.KVStore.identify(paths[1])
        assert ident["store_uuid"] == info["uuid"] and ident["drive_index"] == 1
        assert ident["drive_count"] == 2 and ident["live_pid"] == os.getpid()
        stats, drives = kvblk.KVStore.peek_stats(paths[0])
        assert stats["puts"] == 20 and len(drives) == 2
        with pytest.raises(kvblk.Error) as e:
            s.drive_info(2)
        assert e.value.errno == errno.ENOENT
    with kvblk.KVStore(list(reversed(paths)), readonly=True) as r:  # any order; read-only
        assert len(r) == 20 and r.info()["readonly"]
        with pytest.raises(kvblk.Error) as e:
            r.put(["x"], [b"y"])
        assert e.value.errno == errno.EROFS
    for p in paths:
        os.unlink(p)


class FakeCudaArray:
    """__cuda_array_interface__ over an address that is no CUDA memory: the CUDA path of a get
    (a registration with the store's kvblk_dev for the batch) is taken, and refused."""

    def __init__(self, n):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "|u1", "data": (0x7F0000000000, False),
                                         "version": 3}


def test_cuda_destination_path_without_a_gpu(st):
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is here: test_cuda_destination covers the real path")
    st.put(["a"], [pattern(65536, 1)])
    with pytest.raises(kvblk.Error) as e:
        st.get(["a"], [FakeCudaArray(65536)])
    assert e.value.errno in (errno.EOPNOTSUPP, errno.ENODEV, errno.EINVAL)
    assert "key 'a' (index 0)" in str(e.value) and "kvblk_register_buffer" in str(e.value)
    with pytest.raises(kvblk.Error) as e:
        st.put(["b"], [FakeCudaArray(65536)])
    assert e.value.errno == errno.EOPNOTSUPP and "puts come from host memory" in str(e.value)
    assert st.exists(["a", "b"]).status.tolist() == [0, -errno.ENOENT]


def test_verify_and_priority_flags(st):
    st.put(["a", "b"], [pattern(70_000, 1), pattern(80_000, 2)])
    d = [np.zeros(70_000, np.uint8), np.zeros(80_000, np.uint8)]
    r = st.get(["a", "b"], d, verify=True, priority=True)
    assert r.ok == 2 and r.path == "host" and r.backend in kvblk.BACKENDS
    assert np.array_equal(d[0], pattern(70_000, 1)) and np.array_equal(d[1], pattern(80_000, 2))

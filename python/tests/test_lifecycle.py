# SPDX-License-Identifier: MIT
"""Lifetimes of Device, Ticket and the asyncio helper under threads, signals and fork():
a dropped Device is freed by reference count (no cycle through a Ticket, a reaper or a
loop), close() never waits behind a reaper and finishes the Tickets other threads wait on,
a signal handler that raises ends a wait, one raising completion callback loses no other
completion, and a child of fork() gets EBADFD at once from every call, close() included,
whatever the parent's threads were doing."""

import asyncio
import errno
import gc
import os
import signal
import threading
import time
import weakref

import numpy as np
import pytest

import kvblk

from conftest import MiB

OBJ = 256 << 10


def big_batch(dst, n=64, obj=OBJ):
    """n objects of obj bytes from the start of the store into dst: slow at QD 1 (psync)."""
    return [(i * obj, obj, dst[i * obj:(i + 1) * obj]) for i in range(n)]


@pytest.fixture
def no_gc():
    """Only reference counting frees objects during the test (as in an engine that froze the GC)."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if was:
        gc.enable()


def test_dropped_device_with_a_batch_outstanding_is_freed_by_refcount(store, no_gc):
    dev = kvblk.open(store[0], "psync")
    dst = kvblk.aligned_empty(16 * MiB)
    t = dev.submit(big_batch(dst))
    ref = weakref.ref(dev)
    del t, dev  # the Device holds the batch; nothing refers back to the Device
    assert ref() is None
    # Dropping it closed it: the batch ended (cancelled or read), nothing writes into dst now.
    before = dst.copy()
    time.sleep(0.05)
    assert np.array_equal(dst, before)


def test_ticket_keeps_its_device_open(store, no_gc):
    dst = kvblk.aligned_empty(MiB)
    t = kvblk.open(store[0], "psync").submit([(0, MiB, dst)])
    assert t.wait().ok == 1
    assert np.array_equal(dst, store[1][:MiB])
    ref = weakref.ref(t._dev)
    del t
    assert ref() is None


def test_asyncio_helper_keeps_no_loop_and_no_device(store, no_gc):
    dev = kvblk.open(store[0], "uring")
    dst = kvblk.aligned_empty(MiB)
    loops = []

    async def main():
        loops.append(weakref.ref(asyncio.get_running_loop()))
        return await dev.load([(MiB, MiB, dst)])

    for _ in range(3):
        assert asyncio.run(main()).ok == 1
    assert np.array_equal(dst, store[1][MiB:2 * MiB])
    assert dev._reapers == {}  # no reaper, so no closed loop, is kept
    assert all(r() is None for r in loops)
    ref = weakref.ref(dev)
    del dev
    assert ref() is None


def test_one_raising_callback_loses_no_completion(store):
    with kvblk.open(store[0], "psync") as dev:
        a, b = kvblk.aligned_empty(MiB), kvblk.aligned_empty(MiB)
        t1 = dev.submit([(0, MiB, a)])
        t2 = dev.submit([(MiB, MiB, b)])
        calls = []

        def boom(batch):
            calls.append(batch.ticket)
            raise RuntimeError("callback failed")

        dev._on_done(t1, boom)
        dev._on_done(t2, lambda batch: calls.append(batch.ticket))
        with pytest.raises(RuntimeError, match="callback failed"):
            dev.reap(64, 2, 5.0)  # takes both batch entries at once
        assert sorted(calls) == sorted([t1.id, t2.id])  # the second callback ran too
        assert t2.wait(timeout=1).ok == 1  # t2 was routed: not left pending
        assert t1.wait(timeout=1).ok == 1
        assert not dev._pending
        assert np.array_equal(b, store[1][MiB:2 * MiB])


def test_close_does_not_wait_behind_a_reaper(store):
    dev = kvblk.open(store[0], "uring")
    out = {}
    started = threading.Event()

    def reaper():
        started.set()
        try:
            out["r"] = dev.reap(64, 1)  # nothing outstanding: waits without limit
        except (kvblk.Error, ValueError) as e:
            out["r"] = e

    r = threading.Thread(target=reaper, daemon=True)
    r.start()
    started.wait()
    time.sleep(0.1)  # the reaper is in kvblk_reap()
    closer = threading.Thread(target=dev.close, daemon=True)
    closer.start()
    closer.join(10)
    assert not closer.is_alive(), "close() waited behind the reaper"
    r.join(10)
    assert not r.is_alive()
    e = out["r"]
    assert isinstance(e, ValueError) or (isinstance(e, kvblk.Error) and e.errno == errno.ECANCELED), e
    assert dev.closed


def test_close_finishes_the_tickets_other_threads_wait_on(store):
    dev = kvblk.open(store[0], "psync")
    dst = kvblk.aligned_empty(16 * MiB)
    ts = [dev.submit(big_batch(dst)) for _ in range(3)]
    got = {}

    def waiter(t):
        got[t.id] = t.wait(check=False)

    ws = [threading.Thread(target=waiter, args=(t,)) for t in ts]
    for w in ws:
        w.start()
    dev.close()
    for w in ws:
        w.join(10)
        assert not w.is_alive()
    for t in ts:
        b = got[t.id]
        assert b.ok + b.failed == 64
        assert set(b.results["status"]) <= {0, -errno.ECANCELED}
    assert any(b.failed for b in got.values())  # the queued batches were cancelled


class _Interrupted(Exception):
    pass


def test_a_raising_signal_handler_ends_a_reap(store):
    """Ctrl-C while reap() waits: the handler's exception ends the wait at once (the binding
    runs the handlers when libkvblk's wait returns -EINTR). Ticket.wait() takes the same path
    (tests/unit/wake_test.cpp holds a batch to check kvblk_wait() itself)."""

    def handler(signum, frame):
        raise _Interrupted()

    old = signal.signal(signal.SIGUSR1, handler)
    dev = kvblk.open(store[0], "psync")
    main = threading.main_thread().ident
    done = threading.Event()
    fired = threading.Event()

    def sender():
        time.sleep(0.1)
        end = time.monotonic() + 10
        while not done.is_set() and time.monotonic() < end:
            signal.pthread_kill(main, signal.SIGUSR1)
            time.sleep(0.01)
        if not done.is_set():
            fired.set()  # the wait slept through the signals: end it another way
            dev.submit([(0, 4096, kvblk.aligned_empty(4096))])

    s = threading.Thread(target=sender, daemon=True)
    s.start()
    try:
        with pytest.raises(_Interrupted):
            dev.reap(64, 1)  # nothing outstanding: waits without limit
    finally:
        done.set()
        s.join()
        signal.signal(signal.SIGUSR1, old)
    assert not fired.is_set(), "the wait went on through the signal"
    # Nothing was taken: the device works on.
    dst = kvblk.aligned_empty(MiB)
    t = dev.submit([(0, MiB, dst)])
    assert dev.reap(64, 1, 5.0)["ticket"].tolist() == [t.id]
    dev.close()


def test_a_signal_handler_that_returns_lets_the_wait_go_on(store):
    """A handler that does not raise (SIGCHLD, a profiler's SIGPROF): the wait goes on to its
    timeout, as Python's own waits do (PEP 475); no kvblk.Error EINTR reaches the caller."""
    seen = []
    old = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
    dev = kvblk.open(store[0], "psync")
    main = threading.main_thread().ident
    done = threading.Event()

    def sender():
        while not done.is_set():
            signal.pthread_kill(main, signal.SIGUSR1)
            time.sleep(0.01)

    s = threading.Thread(target=sender, daemon=True)
    s.start()
    try:
        got = dev.reap(64, 1, 0.5)
    finally:
        done.set()
        s.join()
        signal.signal(signal.SIGUSR1, old)
        dev.close()
    assert len(got) == 0 and len(seen) > 1


def _in_child(fn):
    """Run fn() in a child made by os.fork(); return its exit code (99: it raised; 98: it hung)."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            signal.alarm(10)  # a hang is a failure, not a stuck suite
            code = fn()
        finally:
            os._exit(code)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return 98


def test_fork_child_gets_ebadfd_at_once_whatever_the_parent_threads_do(store):
    dev = kvblk.open(store[0], "uring")
    dst = kvblk.aligned_empty(MiB)
    buf = dev.register(kvblk.aligned_empty(MiB))
    outstanding = dev.submit([(0, MiB, dst)])
    started = threading.Event()

    def reaper():  # holds the binding's lock (shared) and waits in kvblk_reap()
        started.set()
        try:
            while True:
                dev.reap(64, 1)
        except (kvblk.Error, ValueError):
            pass

    r = threading.Thread(target=reaper, daemon=True)
    r.start()
    started.wait()
    time.sleep(0.1)

    def child():
        step = 0
        calls = [dev.info, lambda: dev.reap(64, 1), lambda: dev.submit([(0, MiB, dst)]),
                 lambda: dev.load_many([(0, MiB, dst)]), lambda: buf.check(),
                 lambda: dev.register(kvblk.aligned_empty(MiB)), dev.fileno]
        if outstanding.batch() is None:  # still outstanding at the fork (else its Batch is known)
            calls.append(lambda: outstanding.wait())
        for call in calls:
            step += 1
            try:
                call()
                return step  # it did not refuse
            except kvblk.Error as e:
                if e.errno != errno.EBADFD:
                    return 50 + step
        if not dev.closed:
            return 70
        dev.close()  # returns at once: nothing of the parent's is freed
        del dev._c
        mine = kvblk.open(store[0], "psync")  # a handle of its own works
        own = kvblk.aligned_empty(MiB)
        ok = mine.load_many([(MiB, MiB, own)]).ok == 1 and np.array_equal(own, store[1][MiB:2 * MiB])
        mine.close()
        return 0 if ok else 80

    assert _in_child(child) == 0
    # The parent is unharmed: its batch, its buffer, and close() wakes its reaper.
    assert outstanding.wait(timeout=10).ok == 1
    assert np.array_equal(dst, store[1][:MiB])
    assert buf.check() is None
    dev.close()
    r.join(10)
    assert not r.is_alive()

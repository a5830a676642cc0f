# SPDX-License-Identifier: MIT
"""kvblk.open() and the Device, Buffer, Ticket and Batch classes.

Lifetimes (what python/README.md calls the rules):
- A Device closes when close() is called, when a ``with`` block ends, or when it is dropped
  (collected by reference count: nothing the package keeps refers back to it, so no cyclic
  garbage collection is needed, also with the GC disabled or frozen). Closing cancels what
  is queued, waits for what is in flight, and finishes every Ticket.
- A Ticket keeps its Device open; the Device holds a batch's memory (not the Ticket) until
  the batch is over, so dropping a Ticket does not end its batch.
- fork(): a child inherits only a copy of the parent's Device that belongs to the parent;
  every call on it raises kvblk.Error EBADFD at once (whatever the parent's threads were
  doing at the fork), close() and collection forget it at once and free nothing of the
  parent's. Open the device again in the child.
"""

import os
import threading
import weakref

import numpy as np

from . import _kvblk
from ._dest import BufferSlice, Prepared, prepare, resolve
from ._errors import Error, WaitTimeout
from ._layout import CQE_DTYPE, DESC_DTYPE, RESULT_DTYPE

_EINVAL, _ENOENT, _EAGAIN, _ECANCELED = 22, 2, 11, 125
_BACKENDS = list(_kvblk.BACKEND_NAMES)
_PATHS = list(_kvblk.PATH_NAMES)
_KINDS = {"host": _kvblk.MEM_HOST, "cuda": _kvblk.MEM_CUDA, "p2pdma": _kvblk.MEM_P2PDMA}


def _name(names, i):
    return names[i] if 0 <= i < len(names) else "unknown"


def _desc_flags(unaligned, short_eof):
    """kvblk_desc.flags of every tuple entry: DESC_UNALIGNED, DESC_SHORT_EOF."""
    return (_kvblk.DESC_UNALIGNED if unaligned else 0) | (_kvblk.DESC_SHORT_EOF if short_eof else 0)


def _timeout_ns(timeout):
    """Seconds (None = no limit) to the C API's int64 ns (< 0 = no limit)."""
    if timeout is None:
        return -1
    if timeout < 0:
        raise ValueError(f"timeout {timeout} is negative (None waits without limit)")
    return int(timeout * 1e9)


class Batch:
    """How a batch went.

    ok           -- objects with status 0.
    failed       -- objects with a nonzero status.
    results      -- RESULT_DTYPE array, one entry per descriptor: status (0 or -errno), bytes,
                    tag.
    bytes        -- bytes transferred (objects that succeeded).
    bytes_device -- bytes moved on the targets (DESC_UNALIGNED edges included); None when the
                    completion came from reap() or close().
    commands     -- read/write commands issued; None when the completion came from reap() or
                    close().
    elapsed_ns   -- from submission (or the call) to completion, ns; None when close() ended
                    the batch (its completion was dropped: ok, failed, bytes and results are
                    from the results array, which is final then).
    backend      -- the backend that served it ("uring", "kmod", ...; "unknown" after close()).
    path         -- "host", "p2p" or "staged" ("unknown" after close()).
    ticket       -- the batch's ticket.
    user_data    -- submit()'s user_data.
    """

    # Built on every call: keep the C tuple and decode fields on access.
    # _t: (ok, backend, path, failed, bytes, commands, elapsed_ns, bytes_device, ticket, user_data)
    __slots__ = ("_t", "results")

    def __init__(self, t, results):
        self._t, self.results = t, results

    @classmethod
    def _from_cqe(cls, c, results):
        n, failed = int(c["index"]), int(c["failed"])
        return cls((n - failed, int(c["backend"]), int(c["path"]), failed, int(c["bytes"]), None,
                    int(c["elapsed_ns"]), None, int(c["ticket"]), int(c["user_data"])), results)

    @classmethod
    def _from_results(cls, tid, user_data, results):
        # close() ended the batch: kvblk_close() dropped its completion, its results are final.
        st = results["status"]
        good = st == 0
        ok = int(good.sum())
        return cls((ok, -1, -1, len(st) - ok, int(results["bytes"][good].sum()), None, None, None,
                    tid, user_data), results)

    ok = property(lambda self: self._t[0])
    backend = property(lambda self: _name(_BACKENDS, self._t[1]))
    path = property(lambda self: _name(_PATHS, self._t[2]))
    failed = property(lambda self: self._t[3])
    bytes = property(lambda self: self._t[4])
    commands = property(lambda self: self._t[5])
    elapsed_ns = property(lambda self: self._t[6])
    bytes_device = property(lambda self: self._t[7])
    ticket = property(lambda self: self._t[8])
    user_data = property(lambda self: self._t[9])

    def error(self, what):
        """kvblk.Error for the first failed object (None when every object succeeded)."""
        if not self.failed:
            return None
        st = self.results["status"]
        bad = np.flatnonzero(st != 0)
        i = int(bad[0]) if bad.size else -1
        err = -int(st[i]) if i >= 0 else _EINVAL
        tag = int(self.results["tag"][i]) if i >= 0 else 0
        e = Error(err, f"{what}: object {i} (tag {tag}) failed: {os.strerror(err)}; "
                  f"{self.failed} of {len(st)} objects failed", i)
        e.batch = self
        return e

    def __repr__(self):
        return (f"<kvblk.Batch ok={self.ok} failed={self.failed} bytes={self.bytes} "
                f"backend={self.backend} path={self.path} elapsed_ns={self.elapsed_ns}>")


class Buffer:
    """A registered destination (Device.register()): its memory is pinned / an io_uring fixed
    buffer for as long as it is registered. Use it as a batch destination (whole, or
    ``buf.slice(offset, nbytes)``), or put ``buf.id`` in descriptors' buf_id with addr = the
    byte offset into it. The object it was made from is held until unregister()."""

    _is_kvblk_buffer = True
    __slots__ = ("_dev", "id", "addr", "nbytes", "kind", "note", "_dest")

    def __init__(self, dev, bid, dest, note):
        self._dev, self.id, self._dest, self.note = dev, bid, dest, note
        self.addr, self.nbytes, self.kind = dest.addr, dest.nbytes, dest.kind

    def slice(self, offset, nbytes):
        """``nbytes`` bytes at byte ``offset`` of this buffer, as a batch destination."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise ValueError(f"slice [{offset}, {offset + nbytes}) is outside buffer {self.id} "
                             f"of {self.nbytes} bytes")
        return BufferSlice(self, offset, nbytes)

    def unregister(self):
        """kvblk_unregister_buffer(). Errors: kvblk.Error EBUSY while a batch uses it."""
        if self._dest is None:
            return
        self._dev._c.unregister_buffer(self.id)
        self._dev._buffers.pop(self.id, None)
        self._dest.release()
        self._dest = None

    def check(self):
        """kvblk_check_buffer(): whether the memory is still what was registered (a program that
        unmapped and mapped the range again, or dropped it with madvise(MADV_DONTNEED), left
        the pinned pages behind). Returns None when intact. Errors: kvblk.Error ESTALE replaced
        (loads into this buffer fail with ESTALE until it is unregistered; register the object
        again), EFAULT part of it is no longer mapped or writable, EINVAL not host memory,
        EBUSY a batch that names it is outstanding, EOPNOTSUPP a kvblk.ko too old to compare its
        pins, EBADFD the device was opened by the parent of a fork()."""
        if self._dest is None:
            raise ValueError(f"buffer {self.id} is not registered")
        self._dev._c.check_buffer(self.id)

    @property
    def registered(self):
        return self._dest is not None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unregister()

    def __repr__(self):
        return f"<kvblk.Buffer id={self.id} addr={self.addr:#x} nbytes={self.nbytes} kind={self.kind}>"


class _Pending:
    """What a submitted batch holds until it is over: its results array, its destinations and
    per-batch registrations, the waiters' event and the callbacks. Held by the Device (so
    that dropping the Ticket does not end the batch) and by the Ticket; it refers to neither,
    so the Device is never part of a reference cycle."""

    __slots__ = ("results", "prep", "event", "batch", "callbacks", "user_data", "cdev")

    def __init__(self, cdev, results, prep, user_data):
        self.cdev, self.results, self.prep, self.user_data = cdev, results, prep, user_data
        self.event = threading.Event()
        self.batch = None
        self.callbacks = []

    def finish(self, batch):
        """Record the Batch, release what the batch held, wake the waiters; returns the
        callbacks to run. Called once, by whoever took the completion (under the device's
        lock)."""
        self.batch = batch
        prep, self.prep = self.prep, None
        if prep is not None:
            prep.release(self.cdev)
        self.event.set()
        cbs, self.callbacks = self.callbacks, []
        return cbs


def _run_callbacks(finished):
    """Run each callback of [(batch, callbacks), ...]; one that raises does not keep the
    others from running: the first exception is raised once all have run."""
    first = None
    for batch, cbs in finished:
        for cb in cbs:
            try:
                cb(batch)
            except BaseException as e:  # noqa: B036 - every completion is routed first
                if first is None:
                    first = e
    if first is not None:
        raise first


class Ticket:
    """A submitted batch (Device.submit()). Its destinations, results array and any per-batch
    registrations are held until the batch's completion is taken (wait(), Device.reap(), the
    asyncio helper or close()); dropping the Ticket object does not end the batch. A Ticket
    keeps its Device open."""

    __slots__ = ("_dev", "id", "_p", "_what", "__weakref__")

    def __init__(self, dev, tid, pending, what):
        self._dev, self.id, self._p, self._what = dev, tid, pending, what

    @property
    def results(self):
        """The RESULT_DTYPE array the batch fills (one entry per descriptor)."""
        return self._p.results

    def wait(self, timeout=None, check=True):
        """Wait for the batch (GIL released) and return its Batch.

        timeout -- seconds; None waits without limit; 0 only checks.
        check   -- raise kvblk.Error for the first failed object (Error.batch has them all).
        A signal handler that raises (Ctrl-C: KeyboardInterrupt) ends the wait with its
        exception; the batch stays outstanding. When the Device is closed meanwhile (on any
        thread), the wait returns the Batch as close() ended it.
        Errors: WaitTimeout (errno ETIME, also a TimeoutError) when the time ran out (the batch
        stays outstanding); kvblk.Error for failed objects with check=True; kvblk.Error EBADFD
        in a child of fork() (the batch is the parent's).
        """
        b = self._p.batch
        if b is None:
            b = self._dev._wait_ticket(self, timeout)
        if check and b.failed:
            raise b.error(self._what)
        return b

    def done(self):
        """True once the batch is over. A completed batch's entries are taken here (as
        kvblk_wait() takes them: its object entries too), so reap() will not see them."""
        if self._p.batch is None:
            try:
                self._dev._wait_ticket(self, 0)
            except WaitTimeout:
                return False
        return True

    def cancel(self):
        """kvblk_cancel(): objects not yet issued end with -ECANCELED; the batch still
        completes (wait for it). Returns True when the request was taken, False when the batch
        had already completed."""
        if self._p.batch is not None:
            return False
        return self._dev._c.cancel(self.id)

    def batch(self):
        """The Batch if the batch is over, else None."""
        return self._p.batch

    def __repr__(self):
        state = "done" if self._p.batch is not None else "outstanding"
        return f"<kvblk.Ticket {self.id} {state}>"


_live_devices = weakref.WeakSet()


def _after_fork_in_child():
    # The parent's Devices: their locks may have been held by parent threads at the fork, and
    # their batches are the parent's. Nothing of them is this process's.
    for d in list(_live_devices):
        d._forget_inherited()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Device:
    """An open device or file (kvblk.open()). Thread safe: several threads may submit, load,
    reap and wait at once. close() (or leaving a ``with`` block, or dropping the Device)
    cancels and finishes every outstanding batch, then closes; it may be called while other
    threads wait in reap() or Ticket.wait() (see close()).

    After fork() the child's copy belongs to the parent: every call raises kvblk.Error EBADFD
    at once, close() and collection return at once; open the device again in the child."""

    def __init__(self, path, backend="auto", *, queue_depth=0, workers=0, write=False,
                 buffered=False, create_bytes=0, max_cmd_bytes=0, max_descs=0,
                 eagain_retries=0, max_batches=0):
        path = os.fspath(path)
        if backend not in _BACKENDS:
            raise Error(_EINVAL, f"unknown backend {backend!r} (one of {', '.join(_BACKENDS)})")
        flags = ((_kvblk.OPEN_WRITE if write else 0) | (_kvblk.OPEN_BUFFERED if buffered else 0)
                 | (_kvblk.OPEN_CREATE if create_bytes else 0))
        self.path = path
        self._lock = threading.Lock()
        self._pending = {}   # ticket id -> Ticket, not yet completed
        self._orphans = {}   # ticket id -> Batch reaped before submit() recorded its Ticket
        self._buffers = {}   # buffer id -> Buffer
        self._reapers = {}   # asyncio loop -> _aio.LoopReaper, while a load is awaited on it
        self._c = _kvblk.Device(path, _BACKENDS.index(backend), queue_depth, workers, flags,
                                max_cmd_bytes, max_descs, eagain_retries, create_bytes, max_batches)
        _live_devices.add(self)

    def _forget_inherited(self):
        # In a child of fork() (os.register_at_fork): the parent's locks and batches are not
        # this process's; the C handle refuses every call with EBADFD by itself.
        self._lock = threading.Lock()
        self._pending = {}
        self._orphans = {}
        self._reapers = {}
        self._buffers = {}

    # ------------------------------------------------------------------ info
    def info(self):
        """kvblk_get_info() as a dict: backend, backend_reason, blockdev, buffered, writable,
        logical_block_size and mem_align (bytes: offsets/lengths and destination addresses
        must be multiples), capacity (bytes), max_cmd_bytes, queue_depth, workers, max_descs,
        async ("native"/"thread"), max_batches, targets."""
        return self._c.info()

    def stats(self):
        """kvblk_get_stats() as a dict of counters (see struct kvblk_stats); per-backend and
        per-path counts as dicts keyed by name, latency histograms as lists (bucket i: [2^i,
        2^(i+1)) us)."""
        return self._c.stats()

    def reset_stats(self):
        """kvblk_reset_stats(): zero every counter."""
        self._c.reset_stats()

    # --------------------------------------------------------------- targets
    def add_target(self, target, *, write=False, buffered=False):
        """Add a block device or regular file that descriptors can name in their ``target``
        field (kvblk_add_target(); target 0 is the path given to open()). ``target`` is a path
        (str or os.PathLike) or an open file descriptor (int; kvblk_add_target_fd(): libkvblk
        opens its own description, rights follow the fd's access mode, the fd may be closed
        afterwards). Returns the target id (>= 1). One batch may name any number of targets,
        all in flight together; each has its own block size and alignment (target_info()).
        Errors: kvblk.Error with the errors of open() for the path, EBADF a bad fd or one
        whose mode does not allow ``write``, ENOSPC too many targets.
        """
        flags = (_kvblk.OPEN_WRITE if write else 0) | (_kvblk.OPEN_BUFFERED if buffered else 0)
        if not isinstance(target, int):
            target = os.fspath(target)
        return self._c.add_target(target, flags)

    def flush(self, target=None):
        """kvblk_flush(): make every completed store to ``target`` (a target id; None: every
        target opened for writing) durable: fdatasync(2) of the file or block device, an NVMe
        Flush for a generic char device. Stores still in flight are not covered. Errors:
        kvblk.Error EBADF the target was not opened for writing, ENOENT unknown target, EIO
        the flush failed (earlier stores may be lost), EBADFD opened by the parent of a fork()."""
        self._c.flush(_kvblk.TARGET_ALL if target is None else int(target))

    def check_buffer(self, buf):
        """kvblk_check_buffer() of a Buffer (or a buffer id): see Buffer.check()."""
        self._c.check_buffer(buf.id if isinstance(buf, Buffer) else int(buf))

    def remove_target(self, target_id):
        """kvblk_remove_target(). Errors: kvblk.Error EINVAL target 0, ENOENT unknown id,
        EBUSY an outstanding batch names it."""
        self._c.remove_target(target_id)

    def target_info(self, target_id):
        """info() for one target (kvblk_get_target_info()); capacity is the size now.
        Errors: kvblk.Error ENOENT unknown id."""
        return self._c.target_info(target_id)

    # --------------------------------------------------------------- buffers
    def register(self, obj, *, kind=None, writable=True):
        """Register ``obj`` (anything kvblk.resolve() accepts) once for many batches: pinned, an
        io_uring fixed buffer (uring), DMA-mapped (kmod), or the staged path (CUDA without
        kvblk.ko). Returns a Buffer that holds ``obj`` until unregistered.

        kind     -- "host", "cuda" or "p2pdma" for an (address, nbytes) tuple; otherwise
                    taken from the object (CUDA for __cuda_array_interface__ / CUDA DLPack).
        writable -- False to register read-only memory (store sources only).
        Alignment: the address must be a multiple of info()['mem_align'] (CUDA on kmod:
        64 KiB). Errors: kvblk.Error EINVAL (misaligned, empty, read-only), EOPNOTSUPP (kind
        not supported, or no CUDA runtime), ENODEV (no GPU), ENOSPC (too many buffers),
        ENOMEM. ``Buffer.note`` holds libkvblk's remark (memlock fallback, staged path).
        """
        d = resolve(obj, writable)
        k = d.kind if kind is None else _KINDS[kind]
        bid, note = self._c.register_buffer(k, d.addr, d.nbytes)
        b = Buffer(self, bid, d, note)
        if kind is not None:
            b.kind = k
        self._buffers[bid] = b
        return b

    def set_staging(self, buffers=0, buffer_bytes=0):
        """kvblk_set_staging(): size the staged path's bounce pool (0 = defaults 4 x 8 MiB)."""
        self._c.set_staging(buffers, buffer_bytes)

    # ----------------------------------------------------------- sync batches
    def load_many(self, batch, *, results=None, check=True, unaligned=False, short_eof=False, keep=None):
        """Load a batch and wait for it (GIL released); every object in flight together.

        batch   -- a DESC_DTYPE numpy array (the fast path: no Python object per object;
                   addresses are yours to keep valid) or a sequence of
                   ``(offset, length, dest[, tag[, target]])`` (dest: a writable numpy array,
                   bytearray, memoryview, torch tensor, __cuda_array_interface__ object,
                   (address, nbytes), Buffer or Buffer.slice()).
        results -- optional RESULT_DTYPE array of len(batch) to fill (else one is allocated).
        check   -- raise kvblk.Error (errno of the first failed object, bad_index its index,
                   .batch the Batch) when any object failed.
        unaligned -- set DESC_UNALIGNED on every tuple entry (loads of any offset/length).
        short_eof -- set DESC_SHORT_EOF on every tuple entry: an object reaching past the end
                   of a regular file is cut there instead of failing the batch with ERANGE;
                   its results["bytes"] is what the file holds from its offset (0 at or past
                   the end) and the destination past those bytes is left untouched. The cut
                   end is read through the bounce area (host destinations only). Block
                   devices: ERANGE past the capacity as without it.
        Alignment: offsets and lengths multiples of info()['logical_block_size'], destination
        addresses of info()['mem_align'] (unless DESC_UNALIGNED).
        Errors: kvblk.Error with the library's reason and bad_index: EINVAL (bad descriptor,
        read-only or too small destination), ERANGE (past the end), ENOENT (unknown buffer or
        target), E2BIG (more than max_descs); the batch is rejected before any I/O.
        """
        return self._run(batch, results, check, False, _desc_flags(unaligned, short_eof), keep)

    def store_many(self, batch, *, results=None, check=True, unaligned=False, keep=None):
        """Store a batch (device opened with write=True); as load_many(), data flowing from
        memory (read-only sources allowed) to the device. Extra error: EBADF not writable.

        unaligned -- set DESC_UNALIGNED on every tuple entry: objects of any offset and length
                   from any address; an unaligned head or tail is a read-modify-write of its
                   covering block (the bytes around the object keep their values), serialised
                   against the other stores of this Device that touch the block (not against
                   other Devices or processes). A store may end inside a file's last partial
                   block, never past the end (ERANGE).
        """
        return self._run(batch, results, check, True, _desc_flags(unaligned, False), keep)

    def _run(self, batch, results, check, store, flags, keep):
        if type(batch) is np.ndarray and batch.dtype is DESC_DTYPE:
            # The hot path: a descriptor array goes straight to the C API (the extension checks
            # its shape); nothing to hold or undo.
            if results is None:
                results = np.empty(len(batch), RESULT_DTYPE)
            try:
                t = self._c.store_many(batch, results) if store else self._c.load_many(batch, results)
            except Error as e:
                e.results = results
                raise
            b = Batch(t, results)
            if check and t[3]:
                raise b.error("kvblk_store_many" if store else "kvblk_load_many")
            return b
        prep = prepare(self._c, batch, not store, keep, flags)
        try:
            n = len(prep.descs)
            if results is None:
                results = np.empty(n, RESULT_DTYPE)
            try:
                t = self._c.store_many(prep.descs, results) if store else self._c.load_many(prep.descs, results)
            except Error as e:
                e.results = results
                raise
        finally:
            prep.release(self._c)
        b = Batch(t, results)
        if check and b.failed:
            raise b.error("kvblk_store_many" if store else "kvblk_load_many")
        return b

    # ------------------------------------------------------ asynchronous API
    def submit(self, batch, *, store=False, priority=False, per_object=False, nonblock=False,
               user_data=0, results=None, keep=None, unaligned=False, short_eof=False):
        """Queue a batch and return its Ticket at once (kvblk_submit()).

        batch, results, keep, unaligned, short_eof -- as load_many() (unaligned also for
                       stores, as store_many(); short_eof for loads only); the results array
                       is filled as objects complete and belongs to the batch until its
                       completion is taken.
        store       -- write instead of read (device opened with write=True).
        priority    -- ahead of every queued batch without it.
        per_object  -- one completion entry per object too (seen by reap()).
        nonblock    -- kvblk.Error EAGAIN instead of waiting (GIL released) while max_batches
                       are outstanding.
        user_data   -- an int returned in every completion entry of the batch.
        Destinations given as Python objects are held by the Device until the completion is
        taken by Ticket.wait(), reap(), the asyncio helper or close().
        Errors: as load_many() (nothing queued); EAGAIN with nonblock; ECANCELED while the
        device is being closed on another thread (also while waiting for a slot).
        """
        what = "kvblk_store_many" if store else "kvblk_load_many"
        prep = prepare(self._c, batch, not store, keep, _desc_flags(unaligned, short_eof))
        flags = ((_kvblk.SUBMIT_STORE if store else 0) | (_kvblk.SUBMIT_PRIORITY if priority else 0)
                 | (_kvblk.SUBMIT_PER_OBJECT if per_object else 0)
                 | (_kvblk.SUBMIT_NONBLOCK if nonblock else 0))
        try:
            if results is None:
                results = np.empty(len(prep.descs), RESULT_DTYPE)
            tid = self._c.submit(prep.descs, results, flags, user_data)
        except Error as e:
            prep.release(self._c)
            e.results = results
            raise
        except BaseException:
            prep.release(self._c)
            raise
        p = _Pending(self._c, results, prep, user_data)
        t = Ticket(self, tid, p, what)
        with self._lock:
            cqe = self._orphans.pop(tid, None)
            if cqe is None:
                self._pending[tid] = p
            else:  # a reaper on another thread took the completion before we got here
                p.finish(Batch._from_cqe(cqe, results))
        return t

    def reap(self, max=64, min_complete=0, timeout=None):
        """Take up to ``max`` completion entries (kvblk_reap(); GIL released while waiting).

        min_complete -- wait until at least this many are available (0: never wait).
        timeout      -- seconds to wait at most (None: no limit).
        Returns a CQE_DTYPE array (possibly empty): batch entries (flags & CQE_BATCH) and, for
        per_object batches, object entries. Taking a batch entry ends the batch: its Ticket
        is done (Ticket.wait() returns at once) and its destinations are released.
        Completions taken by Ticket.wait() never show up here.
        A signal handler that raises (Ctrl-C: KeyboardInterrupt) ends the wait with its
        exception, nothing taken. Errors: kvblk.Error ECANCELED when close() runs on another
        thread meanwhile (a reaper thread ends on it; close() does not wait for it); ValueError
        once the device is closed; kvblk.Error EBADFD in a child of fork().
        A callback (the asyncio helper's) that raises is raised here after every completion
        taken has been routed.
        """
        cqes = np.empty(max, CQE_DTYPE)
        k = self._c.reap(cqes, min_complete, _timeout_ns(timeout))
        cqes = cqes[:k]
        self._route(cqes)
        return cqes

    def fileno(self):
        """The eventfd (kvblk_event_fd()): readable while completions wait to be reaped. Owned by
        the device; poll it (select, epoll, asyncio) and call reap()."""
        return self._c.event_fd()

    async def load(self, batch, **kw):
        """``await dev.load(batch)``: submit, wait on the eventfd without blocking the event loop,
        return the Batch. Keywords as submit() plus ``check`` (default True: raise kvblk.Error
        for failed objects). Any number of loads may be awaited at once, on one loop or several;
        each gets its own completion. Cancelling the awaiting task (asyncio.wait_for's timeout
        too) calls kvblk_cancel(); the batch's memory stays held until it completes."""
        from . import _aio
        return await _aio.run(self, batch, False, kw)

    async def store(self, batch, **kw):
        """``await dev.store(batch)``: as load(), writing (device opened with write=True)."""
        from . import _aio
        return await _aio.run(self, batch, True, kw)

    def _route(self, cqes):
        """Finish the Tickets whose batch entries are in ``cqes`` (taken by kvblk_reap()):
        every one of them first, then their callbacks (one raising loses no completion)."""
        if not len(cqes):
            return
        batch_entries = cqes[(cqes["flags"] & _kvblk.CQE_BATCH) != 0]
        finished = []
        with self._lock:
            for c in batch_entries:
                tid = int(c["ticket"])
                p = self._pending.pop(tid, None)
                if p is None:
                    self._orphans[tid] = c.copy()
                    continue
                b = Batch._from_cqe(c, p.results)
                finished.append((b, p.finish(b)))
        _run_callbacks(finished)

    def _wait_ticket(self, t, timeout):
        p = t._p
        try:
            info = self._c.wait(t.id, _timeout_ns(timeout))
        except Error as e:
            if e.errno not in (_ENOENT, _ECANCELED):
                raise
            # ENOENT: a reaper (or another waiter) took the completion and is finishing the
            # Ticket; ECANCELED: close() runs on another thread and finishes it.
            return self._wait_event(t, timeout)
        except ValueError:  # closed: close() finished the Ticket (or is finishing it)
            return self._wait_event(t, timeout)
        if info is None:
            raise WaitTimeout(f"kvblk_wait: batch {t.id} did not complete within {timeout} s")
        b = Batch(info, p.results)
        with self._lock:
            self._pending.pop(t.id, None)
            cbs = p.finish(b)
        _run_callbacks([(b, cbs)])
        return b

    @staticmethod
    def _wait_event(t, timeout):
        if not t._p.event.wait(timeout):
            raise WaitTimeout(f"kvblk_wait: batch {t.id} did not complete within {timeout} s") from None
        return t._p.batch

    def _on_done(self, t, cb):
        """Call cb(batch) once ``t`` is over: now if it is, else from whoever finishes it."""
        p = t._p
        with self._lock:
            if p.batch is None:
                p.callbacks.append(cb)
                return
        cb(p.batch)

    # ----------------------------------------------------------------- close
    def close(self):
        """Close the device: cancel every outstanding batch, wait for what is in flight, finish
        every Ticket (its Batch then comes from its results array: objects not issued have
        -ECANCELED; backend, path and elapsed_ns are unknown), release every destination and
        buffer, kvblk_close(). Idempotent.

        Safe while other threads use the device: threads waiting in reap(), Ticket.wait() or
        a submit() waiting for a batch slot are woken at once (kvblk_shutdown(): reap() and
        submit() raise kvblk.Error ECANCELED, Ticket.wait() returns the Batch close() ends),
        calls that start meanwhile raise ValueError, and close() waits only for calls that
        end by themselves (a load_many()'s I/O), never for a reaper. In a child of fork() it
        returns at once: the handle is the parent's. Dropping the Device closes it too.
        """
        c = self._c
        if c.closed:
            return
        try:
            c.shutdown()  # every thread waiting on the device returns now; none waits later
        except ValueError:
            pass  # another thread is closing it: c.close() below waits for that
        with self._lock:
            tids = list(self._pending)
        for tid in tids:
            try:
                c.cancel(tid)
            except (Error, ValueError):
                pass
        for r in list(self._reapers.values()):
            r.detach()
        self._reapers.clear()
        c.close()  # cancels what is queued, waits for what is in flight: results are final
        with self._lock:
            pending, self._pending = self._pending, {}
            self._orphans.clear()
            finished = []
            for tid, p in pending.items():
                b = Batch._from_results(tid, p.user_data, p.results)
                finished.append((b, p.finish(b)))
        for b in list(self._buffers.values()):
            if b._dest is not None:
                b._dest.release()
                b._dest = None
        self._buffers.clear()
        _run_callbacks(finished)

    @property
    def closed(self):
        return self._c.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        c = getattr(self, "_c", None)
        if c is not None and not c.closed:
            self.close()

    def __repr__(self):
        return f"<kvblk.Device {self.path!r}{' closed' if self.closed else ''}>"


def open(path, backend="auto", **opts):  # noqa: A001 - the package's entry point, like io.open
    """Open a block device, regular file or NVMe generic char device for batched loads.

    path     -- /dev/nvme0n1, a file, /dev/ng0n1 (backend "uring_cmd"); str or os.PathLike.
    backend  -- "auto" (kvblk.ko for a PCIe NVMe namespace when loaded, else uring;
                $KVBLK_BACKEND overrides auto), "uring", "threadpool", "psync", "kmod",
                "uring_cmd".
    Keyword options (0 = libkvblk's default): queue_depth (commands in flight per ring,
    1..4096), workers (rings or threads, 1..64), write (allow stores), buffered (no O_DIRECT),
    create_bytes (create or extend a regular file to this many bytes; implies OPEN_CREATE and
    needs write=True),
    max_cmd_bytes (largest command, bytes), max_descs (descriptors per call), eagain_retries,
    max_batches (outstanding submitted batches).
    Errors: kvblk.Error with errno and libkvblk's reason: EINVAL bad option, ENOENT/EACCES/...
    from open(2), EOPNOTSUPP (O_DIRECT refused, backend cannot serve the path), ENOSYS (no
    io_uring), ENOMEM.
    """
    return Device(path, backend, **opts)

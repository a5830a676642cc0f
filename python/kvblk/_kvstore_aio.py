# SPDX-License-Identifier: MIT
"""The asyncio helper behind KVStore.get_async() ...: one eventfd reader per (store, loop).

A reader is registered on a loop only while batches awaited on that loop are outstanding, so
an idle store costs the loop nothing. The store keeps its readers in a WeakKeyDictionary keyed
by loop, and a reader refers to the store's core weakly: a closed loop is forgotten, and no
loop keeps a store alive (a KVStore dropped while idle is collected at once)."""

import asyncio
import errno as _errno
import weakref

from ._errors import Error

_REAP_MAX = 256


class _LoopReaper:
    __slots__ = ("_core", "_loop", "_fd", "_watching", "_added", "__weakref__")

    def __init__(self, core, loop):
        self._core = weakref.ref(core)
        self._loop = loop
        self._fd = core.c.event_fd()
        self._watching = 0
        self._added = False

    def watch(self):
        self._watching += 1
        if not self._added:
            self._loop.add_reader(self._fd, self._on_readable)
            self._added = True

    def unwatch(self):
        self._watching -= 1
        if self._watching <= 0:
            self._watching = 0
            self.detach()

    def detach(self):
        if self._added:
            self._added = False
            if not self._loop.is_closed():
                self._loop.remove_reader(self._fd)

    def _on_readable(self):
        core = self._core()
        if core is None or core.c.closed:
            self.detach()
            return
        # Take everything queued; kvblk_kvstore_reap() clears the eventfd once the queue is empty.
        while True:
            cqes = core.c.reap(_REAP_MAX, 0, 0)
            core.route(cqes)
            if len(cqes) < _REAP_MAX:
                break


def _reaper(core, loop):
    r = core.reapers.get(loop)
    if r is None:
        r = core.reapers[loop] = _LoopReaper(core, loop)
    return r


def _settle(fut, result, reaper, strict):
    reaper.unwatch()
    if fut.done():  # the awaiting task was cancelled; the batch is over now
        return
    e = result.error() if strict else None
    if e is not None:
        fut.set_exception(e)
    else:
        fut.set_result(result)


async def run(store, kind, keys, dests, metas, kw):
    """Submit one batch of ``kind`` and await its StoreResult on the running loop."""
    kw = dict(kw)
    strict = kw.pop("strict", False)
    meta = kw.pop("meta", kind in (1, 3))
    verify = kw.pop("verify", False)
    priority = kw.pop("priority", False)
    user_data = kw.pop("user_data", 0)
    nonblock = kw.pop("nonblock", False)
    if kw:
        raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(kw))}")
    from . import _kvblk
    flags = ((_kvblk.KVSTORE_SUBMIT_VERIFY if verify else 0)
             | (_kvblk.KVSTORE_SUBMIT_PRIORITY if priority else 0))
    loop = asyncio.get_running_loop()
    def blocking():
        return store._submit(kind, keys, dests, metas, meta, flags, user_data, False)

    if len(keys) > store.max_keys_per_batch and not nonblock:
        # Several C batches: a later part may wait for a batch slot; not on the loop.
        t = await loop.run_in_executor(None, blocking)
    else:
        try:
            t = store._submit(kind, keys, dests, metas, meta, flags, user_data, True)
        except Error as e:
            if e.errno != _errno.EAGAIN or nonblock:
                raise
            # max_batches outstanding: wait for a slot on a worker thread, not on the loop.
            t = await loop.run_in_executor(None, blocking)
    return await wait_ticket(store, t, strict)


async def wait_ticket(store, t, strict=False):
    """Await Ticket ``t`` of ``store`` on the running loop; its StoreResult."""
    loop = asyncio.get_running_loop()
    if t._result is not None:
        e = t._result.error() if strict else None
        if e is not None:
            raise e
        return t._result
    reaper = _reaper(store._core, loop)
    reaper.watch()
    fut = loop.create_future()

    def done(result):  # any thread: whoever took the completion
        if loop.is_closed():
            return
        loop.call_soon_threadsafe(_settle, fut, result, reaper, strict)

    store._on_done(t, done)
    return await fut

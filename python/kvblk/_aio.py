# SPDX-License-Identifier: MIT
"""The asyncio helper behind Device.load()/store(): one eventfd reader per (device, loop),
registered only while a load is awaited on that loop.

Nothing here keeps a Device or a loop alive: a LoopReaper refers to its Device weakly and
leaves Device._reapers when its last awaited load is over, so a dropped Device is freed by
reference count and a closed loop is not held."""

import asyncio
import weakref

from ._errors import Error

_EAGAIN = 11
_REAP_MAX = 256


class LoopReaper:
    """Watches a device's eventfd on one event loop (loop.add_reader) while batches awaited on
    that loop are outstanding, and reaps: Device._route() finishes each batch's Ticket, whose
    callbacks settle the awaiting futures, on whichever loop they belong to. A reader is
    registered only while something is awaited, so an idle device costs the loop nothing."""

    def __init__(self, dev, loop):
        self._dev = weakref.ref(dev)
        self._loop = loop
        self._fd = dev.fileno()
        self._watching = 0
        self._added = False

    def watch(self):
        self._watching += 1
        if not self._added:
            self._loop.add_reader(self._fd, self._on_readable)
            self._added = True

    def unwatch(self):
        self._watching -= 1
        if self._watching == 0:
            self.detach()
            dev = self._dev()
            if dev is not None and dev._reapers.get(self._loop) is self:
                del dev._reapers[self._loop]

    def detach(self):
        if self._added:
            self._added = False
            if not self._loop.is_closed():
                self._loop.remove_reader(self._fd)

    def _on_readable(self):
        dev = self._dev()
        if dev is None or dev.closed:
            self.detach()
            return
        # Take everything queued; kvblk_reap() clears the eventfd once the queue is empty.
        try:
            while len(dev.reap(_REAP_MAX, 0, 0)) == _REAP_MAX:
                pass
        except ValueError:  # closed on another thread meanwhile: close() settles the futures
            self.detach()


def _reaper(dev, loop):
    r = dev._reapers.get(loop)
    if r is None:
        r = dev._reapers[loop] = LoopReaper(dev, loop)
    return r


def _settle(fut, batch, reaper, check, what):
    reaper.unwatch()
    if fut.done():  # the awaiting task was cancelled; the batch is over now
        return
    if check and batch.failed:
        fut.set_exception(batch.error(what))
    else:
        fut.set_result(batch)


async def run(dev, batch, store, kw):
    check = kw.pop("check", True)
    loop = asyncio.get_running_loop()
    what = "kvblk_store_many" if store else "kvblk_load_many"
    try:
        t = dev.submit(batch, store=store, nonblock=True, **kw)
    except Error as e:
        if e.errno != _EAGAIN or kw.get("nonblock"):
            raise
        # max_batches outstanding: wait for a slot on a worker thread, not on the loop.
        t = await loop.run_in_executor(None, lambda: dev.submit(batch, store=store, **kw))
    reaper = _reaper(dev, loop)
    reaper.watch()
    fut = loop.create_future()

    def done(b):  # any thread: whoever took the completion
        if loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(_settle, fut, b, reaper, check, what)
        except RuntimeError:
            pass  # the loop closed after the check: nobody awaits the batch any more

    dev._on_done(t, done)
    try:
        return await fut
    except asyncio.CancelledError:
        if not t.done():
            t.cancel()
        raise

"""Drive a native connector exactly as LMCache's demux loop does.

LMCache's ``NativeConnectorL2Adapter`` (lmcache/v1/distributed/l2_adapters/
native_connector_l2_adapter.py) owns one background thread that polls the
connector's ``event_fd()`` with ``select.poll`` (500 ms timeout), calls
``drain_completions()`` when it is readable, and routes each
``(future_id, ok, error, result_bools)`` by future id to the operation that
submitted it. Submissions register their future id in a dict under the
adapter's lock, with the submit call made while holding that lock, so a
completion that arrives before the registration waits for it.

``DemuxHarness`` reproduces that: submit under the lock, one demux thread,
routing by future id. It also records what LMCache would only log (unknown
and duplicate future ids, drain exceptions) so tests can assert there were
none, and interprets loads as LMCache does (per-key flags when the connector
gives them, else every key when ``ok``). Nothing here imports LMCache.
"""

from __future__ import annotations

import ctypes
import importlib
import select
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence


@dataclass
class Result:
    """One routed completion."""

    op: str
    future_id: int
    ok: bool
    error: str
    bools: Optional[List[bool]]

    def loaded(self, n: int) -> List[bool]:
        """Which keys of a get LMCache would mark loaded (its load bitmap)."""
        if self.bools is not None:
            return list(self.bools)
        return [self.ok] * n


class DemuxHarness:
    def __init__(self, client: Any, poll_ms: int = 500):
        for m in ("event_fd", "submit_batch_get", "submit_batch_set", "submit_batch_exists",
                  "drain_completions", "close"):
            # LMCache's native_plugin factory makes the same check.
            assert callable(getattr(client, m, None)), f"connector lacks {m}()"
        self.client = client
        self.fd = int(client.event_fd())
        self.poll_ms = poll_ms
        self._lock = threading.Lock()
        self._pending: dict = {}
        self.seen: set = set()
        self.unknown: List[int] = []
        self.duplicates: List[int] = []
        self.drain_errors: List[BaseException] = []
        self.drains = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._demux_loop, name="demux", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ submitting

    def submit(self, op: str, keys: Sequence, bufs: Optional[Sequence] = None) -> Future:
        fut: Future = Future()
        with self._lock:
            fn = getattr(self.client, "submit_batch_" + op)
            fid = int(fn(keys, bufs) if bufs is not None else fn(keys))
            self._pending[fid] = (op, fut)
        return fut

    def run(self, op: str, keys: Sequence, bufs: Optional[Sequence] = None,
            timeout: float = 30.0) -> Result:
        return self.submit(op, keys, bufs).result(timeout)

    def get(self, keys, bufs, timeout: float = 30.0) -> Result:
        return self.run("get", keys, bufs, timeout)

    def set(self, keys, bufs, timeout: float = 30.0) -> Result:
        return self.run("set", keys, bufs, timeout)

    def exists(self, keys, timeout: float = 30.0) -> Result:
        return self.run("exists", keys, None, timeout)

    def delete(self, keys, timeout: float = 30.0) -> Result:
        return self.run("delete", keys, None, timeout)

    # ---------------------------------------------------------------- demux

    def _demux_loop(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(self.poll_ms):
                continue
            try:
                completions = self.client.drain_completions()
            except Exception as e:  # LMCache logs and goes on
                self.drain_errors.append(e)
                continue
            self.drains += 1
            with self._lock:
                for future_id, ok, error, bools in completions:
                    fid = int(future_id)
                    if fid in self.seen:
                        self.duplicates.append(fid)
                        continue
                    self.seen.add(fid)
                    entry = self._pending.pop(fid, None)
                    if entry is None:
                        self.unknown.append(fid)
                        continue
                    op, fut = entry
                    fut.set_result(Result(op, fid, bool(ok), str(error),
                                          None if bools is None else [bool(b) for b in bools]))

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def close(self, close_client: bool = True) -> None:
        """Stop the demux thread, then close the connector (LMCache's order)."""
        self._stop.set()
        self._thread.join(timeout=5)
        assert not self._thread.is_alive()
        if close_client:
            self.client.close()

    def assert_clean(self) -> None:
        assert self.unknown == [], f"completions for unknown future ids {self.unknown}"
        assert self.duplicates == [], f"future ids completed twice {self.duplicates}"
        assert self.drain_errors == [], f"drain_completions raised {self.drain_errors}"


def lmcache_byte_view(buf) -> memoryview:
    """A view shaped like LMCache's ``MemoryObj.byte_array``: a memoryview of a
    ctypes ``c_ubyte`` array laid over @buf's memory (format "<B"). The view
    does not keep @buf alive: the caller does, as LMCache's MemoryObj does."""
    mv = memoryview(buf)
    n = mv.nbytes
    base = ctypes.addressof(ctypes.c_char.from_buffer(mv))
    arr = (ctypes.c_ubyte * n).from_address(base)
    return memoryview(arr)


def connector_module():
    """kvblk.integrations.lmcache of the built package (python/CMakeLists.txt copies it next to
    the extension), so the connector always runs on the real kvblk."""
    return importlib.import_module("kvblk.integrations.lmcache")

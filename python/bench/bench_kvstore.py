#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kvblk.KVStore against the store's C API, side by side on one store handle.

For each object size (default 4 MiB and 32 MiB) --count keys (default 32) are put once, then
gets and puts of all of them in one batch are timed in rounds. Two legs share the store handle,
the keys and the buffers:
  C       kvblk_c_kvstore_run() in build/python/libkvblk_c_kvstore.so
          (python/bench/kvblk_c_kvstore.c): one synchronous kvblk_kvstore_get() / _put() of an
          op array built once, what an engine in C does;
  Python  KVStore.get(keys, dests, meta=False) / KVStore.put(keys, sources): the package's
          whole path, keys given as str and destinations as numpy arrays, every call.
In every round each leg makes one call; which leg goes first alternates by round, so a device
whose speed drifts (a shared or virtual disk) moves both alike. GB/s per call is its bytes /
its wall time (GB = 1e9 bytes); reported are the medians over the rounds, the median of the
per-round ratios Python / C (the verdict, checked against --threshold, default 0.95), the
pooled ratio (all bytes over all time of each leg) and CPU seconds per GB of each leg (the
process's CPU time during its calls: the store's and libkvblk's threads included), and the
cost of the call itself: microseconds per get of --count keys that all miss (no I/O). Gets check
every object's CRC32C (the store does); the first round's bytes are compared with the sources.
Exit 0 when every row passes.

Usage (from the source root, after the build):
  PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_kvstore.py [--json]
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

import kvblk

MiB = 1 << 20
GET, PUT = 1, 2  # KVBLK_KVSTORE_GET, _PUT


class Op(ctypes.Structure):
    pass  # opaque: the C helper builds the array


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().removesuffix("IB").removesuffix("B")
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def c_lib():
    here = os.path.dirname(os.path.abspath(kvblk.__file__))
    path = os.environ.get("KVBLK_C_KVSTORE") or os.path.join(here, os.pardir, "libkvblk_c_kvstore.so")
    lib = ctypes.CDLL(path)  # ctypes releases the GIL around every call
    lib.kvblk_c_kvstore_ops.restype = ctypes.c_void_p
    lib.kvblk_c_kvstore_ops.argtypes = [ctypes.c_uint32, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_void_p]
    lib.kvblk_c_kvstore_free.argtypes = [ctypes.c_void_p]
    lib.kvblk_c_kvstore_run.restype = ctypes.c_int
    lib.kvblk_c_kvstore_run.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32,
                                        ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                        ctypes.POINTER(ctypes.c_int64)]
    return lib


class Leg:
    """One object size: keys, sources, destinations, and the C op arrays over the same memory."""

    def __init__(self, lib, store, size, count, seed):
        self.lib, self.store, self.size, self.n = lib, store, size, count
        self.keys = [f"bench@{size >> 20}MiB@{i:04d}" for i in range(count)]
        rng = np.random.default_rng(seed)
        self.src = [kvblk.aligned_empty(size) for _ in range(count)]
        for s in self.src:
            s[:] = rng.integers(0, 256, size, dtype=np.uint8)
        self.dst = [kvblk.aligned_empty(size) for _ in range(count)]
        for d in self.dst:
            d[:] = 0  # pre-fault
        kb = [k.encode() for k in self.keys]
        self._keybuf = b"".join(kb)
        self._klen = np.array([len(k) for k in kb], np.uint32)
        self._len = np.full(count, size, np.uint64)
        self._srca = np.array([s.ctypes.data for s in self.src], np.uint64)
        self._dsta = np.array([d.ctypes.data for d in self.dst], np.uint64)
        self.ops = {kind: lib.kvblk_c_kvstore_ops(count, self._keybuf, self._klen.ctypes.data,
                                                 (self._dsta if kind == GET else self._srca).ctypes.data,
                                                 self._len.ctypes.data)
                    for kind in (GET, PUT)}
        self.results = (ctypes.c_byte * (count * 64))()

    def run_c(self, kind):
        ns, failed = ctypes.c_uint64(), ctypes.c_int64()
        c0 = time.process_time()
        rc = self.lib.kvblk_c_kvstore_run(self.store._core.c._handle, kind, self.ops[kind], self.n,
                                          self.results, ctypes.byref(ns), ctypes.byref(failed))
        cpu = time.process_time() - c0
        if rc != 0:
            sys.exit(f"bench_kvstore: C {'get' if kind == GET else 'put'} failed: {os.strerror(-rc)} "
                     f"(key {failed.value})")
        return ns.value / 1e9, cpu

    def run_py(self, kind):
        c0 = time.process_time()
        t0 = time.perf_counter()
        if kind == GET:
            r = self.store.get(self.keys, self.dst, meta=False)
        else:
            r = self.store.put(self.keys, self.src)
        secs = time.perf_counter() - t0
        cpu = time.process_time() - c0
        if r.failed:
            sys.exit(f"bench_kvstore: Python {r.kind} failed: {r.errors(misses=True)[0]}")
        return secs, cpu

    def verify(self):
        for s, d in zip(self.src, self.dst):
            if not np.array_equal(s, d):
                sys.exit("bench_kvstore: bytes read differ from the bytes put")

    def free(self):
        for p in self.ops.values():
            self.lib.kvblk_c_kvstore_free(p)


def rounds_of(leg, kind, rounds):
    c, py, c_cpu, py_cpu = [], [], 0.0, 0.0
    nbytes = leg.n * leg.size
    for r in range(rounds):
        order = ("c", "py") if r % 2 == 0 else ("py", "c")
        for side in order:
            if side == "c":
                if kind == GET:
                    leg.dst[0][:4096] = 0
                secs, cpu = leg.run_c(kind)
                c.append(nbytes / secs / 1e9)
                c_cpu += cpu
            else:
                if kind == GET:
                    leg.dst[0][:4096] = 0
                secs, cpu = leg.run_py(kind)
                py.append(nbytes / secs / 1e9)
                py_cpu += cpu
            if kind == GET and r == 0:
                leg.verify()
    gb = nbytes * rounds / 1e9
    return {"op": "get" if kind == GET else "put", "object_bytes": leg.size, "keys": leg.n,
            "rounds": rounds, "c_gbps": statistics.median(c), "python_gbps": statistics.median(py),
            "ratio": statistics.median(p / q for p, q in zip(py, c)),
            "pooled_ratio": statistics.harmonic_mean(py) / statistics.harmonic_mean(c),
            "c_cpu_s_per_gb": c_cpu / gb, "python_cpu_s_per_gb": py_cpu / gb,
            "c_gbps_rounds": c, "python_gbps_rounds": py}


def overhead(lib, store, count, calls):
    """Microseconds per call of a get of ``count`` keys that all miss (no I/O: the cost of the
    call itself), C leg and Python leg, interleaved in blocks of 100 calls."""
    keys = [f"bench@miss@{i:04d}" for i in range(count)]
    dst = [kvblk.aligned_empty(4096) for _ in range(count)]
    kb = [k.encode() for k in keys]
    keybuf = b"".join(kb)
    klen = np.array([len(k) for k in kb], np.uint32)
    addr = np.array([d.ctypes.data for d in dst], np.uint64)
    ln = np.full(count, 4096, np.uint64)
    ops = lib.kvblk_c_kvstore_ops(count, keybuf, klen.ctypes.data, addr.ctypes.data, ln.ctypes.data)
    res = (ctypes.c_byte * (count * 64))()
    ns, failed = ctypes.c_uint64(), ctypes.c_int64()
    h = store._core.c._handle
    t = {"c": 0.0, "py": 0.0}
    for _ in range(max(1, calls // 100)):
        t0 = time.perf_counter()
        for _ in range(100):
            lib.kvblk_c_kvstore_run(h, GET, ops, count, res, ctypes.byref(ns), ctypes.byref(failed))
        t["c"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(100):
            store.get(keys, dst, meta=False)
        t["py"] += time.perf_counter() - t0
    lib.kvblk_c_kvstore_free(ops)
    n = max(1, calls // 100) * 100
    return {"keys": count, "calls": n, "c_us_per_call": t["c"] / n * 1e6, "python_us_per_call": t["py"] / n * 1e6}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", default="/var/tmp/kvblk-kvstore-bench.kvs",
                    help="store file (made anew; removed at the end unless --keep)")
    ap.add_argument("--sizes", default="4M,32M", help="object sizes (default 4M,32M)")
    ap.add_argument("--count", type=int, default=32, help="keys per batch (default 32)")
    ap.add_argument("--backend", default="uring")
    ap.add_argument("--get-rounds", type=int, default=15)
    ap.add_argument("--put-rounds", type=int, default=9)
    ap.add_argument("--overhead-calls", type=int, default=2000,
                    help="calls per leg of the all-miss get that times the call itself (0: none)")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--keep", action="store_true", help="keep the store file")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()

    sizes = [parse_size(s) for s in args.sizes.split(",")]
    # Each class holds every key twice over (a put replaces a key: its new object takes a free
    # slot, the old one is freed once the new one is durable) plus slack.
    slots = 2 * args.count + 8
    classes = [(s, slots * s // sizes[0]) for s in sizes]
    file_bytes = sum(slots * s for s in sizes) + 256 * MiB
    if os.path.exists(args.path):
        os.unlink(args.path)
    lib = c_lib()
    rows = []
    store = kvblk.KVStore(args.path, create=True, file_bytes=file_bytes, classes=classes,
                          backend=args.backend)
    try:
        info = store.info()
        for i, size in enumerate(sizes):
            leg = Leg(lib, store, size, args.count, seed=i + 1)
            r = store.put(leg.keys, leg.src)  # fill; not timed
            if r.failed:
                sys.exit(f"bench_kvstore: fill failed: {r.errors(misses=True)[0]}")
            leg.run_py(GET)  # warm-up (not counted)
            rows.append(rounds_of(leg, GET, args.get_rounds))
            rows.append(rounds_of(leg, PUT, args.put_rounds))
            leg.free()
        ovh = overhead(lib, store, args.count, args.overhead_calls) if args.overhead_calls else None
    finally:
        store.close()
        if not args.keep:
            os.unlink(args.path)
    ok = True
    for x in rows:
        x["pass"] = x["ratio"] >= args.threshold
        ok &= x["pass"]
    if args.json:
        print(json.dumps({"path": args.path, "backend": info["backend"], "threshold": args.threshold,
                          "results": rows, "overhead": ovh}, indent=1))
    else:
        print(f"store {args.path} ({file_bytes >> 20} MiB, backend {info['backend']}), "
              f"{args.count} keys per batch, legs alternating by round; medians, GB = 1e9 B")
        print(f"{'op':>4} {'object':>7} {'rounds':>6} {'C GB/s':>8} {'Py GB/s':>8} {'Py/C':>6} {'pooled':>6} "
              f"{'C cpu s/GB':>10} {'Py cpu s/GB':>11}  verdict")
        for x in rows:
            print(f"{x['op']:>4} {x['object_bytes'] >> 20:>5}Mi {x['rounds']:>6} {x['c_gbps']:8.3f} "
                  f"{x['python_gbps']:8.3f} {x['ratio']:6.3f} {x['pooled_ratio']:6.3f} "
                  f"{x['c_cpu_s_per_gb']:10.3f} {x['python_cpu_s_per_gb']:11.3f}  "
                  f"{'pass' if x['pass'] else 'MISS'} (>= {args.threshold})")
        if ovh:
            print(f"the call itself (a get of {ovh['keys']} keys that all miss, {ovh['calls']} calls per leg): "
                  f"C {ovh['c_us_per_call']:.1f} us, Python {ovh['python_us_per_call']:.1f} us per call")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Python loads against the C API, side by side on one device handle.

For each object size (default 256 KiB and 16 MiB) the file is read as objects back to back
from byte 0, --batch-objects per call, into a registered window of pre-faulted host memory
(one registered buffer per batch slot, as kvblk-bench does). Two loops share the device
handle, the window, the descriptor array and the results array:
  C       kvblk_c_load_run() in build/python/libkvblk_c_load.so (python/bench/kvblk_c_load.c):
          back-to-back kvblk_load_many() calls in C, kvblk-bench's timed loop;
  Python  back-to-back Device.load_many() calls on DESC_DTYPE slices (the package's fast path,
          results checked by the binding after every call).
Each pass over the file is cut into chunks of about --chunk-mib that go to C and Python in
turn (which side starts alternates by round), so a device whose speed drifts (a shared or
virtual disk) moves both alike. Each side's GB/s per round is its bytes / its time (GB = 1e9
bytes); reported are the medians over --rounds, the median of the per-round ratios Python / C
(the verdict, checked against --threshold, default 0.95) and the pooled ratio (all bytes over
all time of each side). Exit 0 when every size passes.

Usage (from the source root, after the build):
  PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python.py
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


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper()
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def ensure_file(path, nbytes):
    """A file of nbytes of non-zero data (written, not sparse: holes would be read without
    touching the device). Reused when it already has that size."""
    if os.path.exists(path) and os.path.getsize(path) == nbytes:
        return "reused"
    chunk = np.random.default_rng(1).integers(1, 256, 64 * MiB, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        left = nbytes
        while left:
            k = min(left, len(chunk))
            f.write(chunk[:k])
            left -= k
        f.flush()
        os.fsync(f.fileno())
    return "created"


def c_loop():
    here = os.path.dirname(os.path.abspath(kvblk.__file__))
    path = os.environ.get("KVBLK_C_LOAD") or os.path.join(here, os.pardir, "libkvblk_c_load.so")
    lib = ctypes.CDLL(path)  # ctypes releases the GIL around the call
    f = lib.kvblk_c_load_run
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p,
                  ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_int64)]
    return f


class Setup:
    """One object size: the device, window, descriptors and results, shared by both loops."""

    def __init__(self, args, obj, file_bytes):
        self.obj, self.batch = obj, args.batch_objects
        self.n = (file_bytes // obj) // self.batch * self.batch
        if self.n == 0:
            sys.exit(f"bench_python: the file holds fewer than {self.batch} objects of {obj} bytes")
        slot = obj * self.batch
        window = max(1, min((args.window_mib * MiB) // slot, self.n // self.batch))
        self.dev = kvblk.open(args.file, args.backend, queue_depth=args.qd)
        self.mem = kvblk.aligned_empty(slot * window, 2 * MiB)
        self.mem[:] = 0  # pre-fault
        self.bufs = [self.dev.register(self.mem[w * slot:(w + 1) * slot]) for w in range(window)]
        i = np.arange(self.n, dtype=np.uint64)
        ids = np.array([b.id for b in self.bufs], dtype=np.uint32)
        b = np.uint64(self.batch)
        self.descs = kvblk.make_descs(i * np.uint64(obj), obj, (i % b) * np.uint64(obj),
                                      buf_id=ids[(i // b) % np.uint64(window)], tags=i)
        self.results = np.empty(self.batch, kvblk.RESULT_DTYPE)
        per_chunk = max(1, (args.chunk_mib * MiB) // slot) * self.batch
        self.chunks = [(s, min(per_chunk, self.n - s)) for s in range(0, self.n, per_chunk)]
        self.window = window

    def run_c(self, cfun, s, k):
        ns, failed = ctypes.c_uint64(), ctypes.c_int64()
        rc = cfun(self.dev._c._handle, self.descs[s:].ctypes.data, k, self.batch, self.results.ctypes.data,
                  ctypes.byref(ns), ctypes.byref(failed))
        if rc != 0:
            sys.exit(f"bench_python: C loop failed: {os.strerror(-rc)} (object {failed.value})")
        return ns.value / 1e9

    def run_py(self, s, k):
        dev, d, res, b = self.dev, self.descs, self.results, self.batch
        t0 = time.perf_counter()
        for j in range(s, s + k, b):
            dev.load_many(d[j:j + b], results=res)  # raises kvblk.Error if an object failed
        return time.perf_counter() - t0

    def round(self, cfun, c_first):
        t = {"c": 0.0, "py": 0.0}
        nbytes = {"c": 0, "py": 0}
        for ci, (s, k) in enumerate(self.chunks):
            side = "c" if (ci % 2 == 0) == c_first else "py"
            t[side] += self.run_c(cfun, s, k) if side == "c" else self.run_py(s, k)
            nbytes[side] += k * self.obj
        return {side: nbytes[side] / t[side] / 1e9 for side in t if t[side]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default="/var/tmp/kvblk-pybench.bin", help="store file (created if absent)")
    ap.add_argument("--file-mib", type=int, default=1024, help="store size in MiB (default 1024)")
    ap.add_argument("--sizes", default="256K,16M", help="object sizes (default 256K,16M)")
    ap.add_argument("--backend", default="uring")
    ap.add_argument("--qd", type=int, default=64, help="queue depth (default 64)")
    ap.add_argument("--batch-objects", type=int, default=16, help="objects per call (default 16)")
    ap.add_argument("--window-mib", type=int, default=256, help="registered window (default 256)")
    ap.add_argument("--chunk-mib", type=int, default=4,
                    help="MiB per turn of one side, rounded to whole calls (default 4: one call)")
    ap.add_argument("--rounds", type=int, default=15, help="passes over the file per size (default 15)")
    ap.add_argument("--min-calls", type=int, default=128,
                    help="more rounds until each side made this many calls (default 128)")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()

    file_bytes = args.file_mib * MiB
    action = ensure_file(args.file, file_bytes)
    cfun = c_loop()
    rows, ok = [], True
    backend = None
    for obj in (parse_size(s) for s in args.sizes.split(",")):
        st = Setup(args, obj, file_bytes)
        backend = st.dev.info()["backend"]
        st.round(cfun, True)  # warm-up pass (not counted): rings, fixed buffers, device queues
        # Large objects make few calls per pass: add rounds until each side has made
        # --min-calls calls, so a few slow calls of the device do not decide the verdict.
        calls = st.n // st.batch
        rounds = max(args.rounds, -(-2 * args.min_calls // calls))
        per = [st.round(cfun, r % 2 == 0) for r in range(rounds)]
        st.dev.close()
        c = [p["c"] for p in per]
        py = [p["py"] for p in per]
        ratio = statistics.median(p / q for p, q in zip(py, c))
        # Pooled: all bytes over all time of each side (harmonic mean of the rounds' GB/s).
        pooled = statistics.harmonic_mean(py) / statistics.harmonic_mean(c)
        passed = ratio >= args.threshold
        ok &= passed
        rows.append({"object_bytes": obj, "objects": st.n, "batch_objects": st.batch,
                     "window_batches": st.window, "chunks": len(st.chunks), "rounds": rounds,
                     "c_gbps": statistics.median(c), "python_gbps": statistics.median(py),
                     "ratio": ratio, "pooled_ratio": pooled, "pass": passed, "c_gbps_rounds": c, "python_gbps_rounds": py})
    if args.json:
        print(json.dumps({"file": args.file, "file_bytes": file_bytes, "store": action, "backend": backend,
                          "queue_depth": args.qd, "rounds": args.rounds, "threshold": args.threshold,
                          "results": rows}, indent=1))
    else:
        print(f"file {args.file} ({args.file_mib} MiB, {action}), backend {backend}, QD {args.qd}, "
              f"{args.batch_objects} objects per call, interleaved {args.chunk_mib} MiB chunks, "
              f">= {args.rounds} rounds and >= {args.min_calls} calls per side; medians, GB = 1e9 B")
        print(f"{'object':>8} {'objects':>8} {'rounds':>6} {'C GB/s':>8} {'Py GB/s':>8} {'Py/C':>6} {'pooled':>6}  verdict")
        for x in rows:
            o = x["object_bytes"]
            size = f"{o >> 10}K" if o < MiB else f"{o >> 20}M"
            print(f"{size:>8} {x['objects']:>8} {x['rounds']:>6} {x['c_gbps']:8.3f} {x['python_gbps']:8.3f} {x['ratio']:6.3f} {x['pooled_ratio']:6.3f}  "
                  f"{'pass' if x['pass'] else 'MISS'} (>= {args.threshold})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

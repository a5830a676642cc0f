#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Python loads against the C API on one file, side by side.

For each object size (default 256 KiB and 16 MiB) the whole file is loaded as objects back to
back from byte 0, --batch-objects per call, into a registered window of host memory (one
registered buffer per batch slot, pre-faulted), by two drivers with the same backend, queue
depth and batches:
  C       build/python/kvblk_c_load (python/bench/kvblk_c_load.c): kvblk_load_many() in C,
          the loop kvblk-bench times;
  Python  Device.load_many() on a DESC_DTYPE array (the package's fast path).
Rounds interleave the two (the order alternates per round) so a drifting device moves both;
each side reports its median GB/s (GB = 1e9 bytes) and the ratio Python / C is checked
against --threshold (default 0.95). Exit 0 when every size passes, 1 otherwise.

Usage (from the source root, after the build):
  PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python.py [--file /var/tmp/kvblk-pybench.bin]
"""

import argparse
import json
import os
import statistics
import subprocess
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


def run_c(args, obj, n, window):
    cmd = [args.c_load, args.file, str(obj), str(n), str(args.batch_objects), args.backend,
           str(args.qd), str(window), "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"bench_python: {' '.join(cmd)} failed: {out.stderr.strip()}")
    return float(out.stdout.split()[1])


class PySide:
    """The Python driver for one object size: device, window and descriptors set up once (as the
    C driver does before its timed loop)."""

    def __init__(self, args, obj, n, window):
        self.dev = kvblk.open(args.file, args.backend, queue_depth=args.qd)
        self.batch = args.batch_objects
        slot = obj * self.batch
        self.mem = kvblk.aligned_empty(slot * window)
        self.mem[:] = 0  # pre-fault, as MAP_POPULATE does for the C driver
        self.bufs = [self.dev.register(self.mem[w * slot:(w + 1) * slot]) for w in range(window)]
        i = np.arange(n, dtype=np.uint64)
        ids = np.array([b.id for b in self.bufs], dtype=np.uint32)
        self.descs = kvblk.make_descs(i * np.uint64(obj), obj, (i % np.uint64(self.batch)) * np.uint64(obj),
                                      buf_id=ids[(i // np.uint64(self.batch)) % np.uint64(window)], tags=i)
        self.results = np.empty(self.batch, kvblk.RESULT_DTYPE)
        self.nbytes = obj * n

    def run(self):
        dev, d, res, b = self.dev, self.descs, self.results, self.batch
        t0 = time.perf_counter()
        for s in range(0, len(d), b):
            dev.load_many(d[s:s + b], results=res)  # raises if any object failed
        return self.nbytes / (time.perf_counter() - t0) / 1e9

    def close(self):
        self.dev.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default="/var/tmp/kvblk-pybench.bin", help="store file (created if absent)")
    ap.add_argument("--file-mib", type=int, default=1024, help="store size in MiB (default 1024)")
    ap.add_argument("--sizes", default="256K,16M", help="object sizes (default 256K,16M)")
    ap.add_argument("--backend", default="uring")
    ap.add_argument("--qd", type=int, default=64, help="queue depth (default 64)")
    ap.add_argument("--batch-objects", type=int, default=16, help="objects per call (default 16)")
    ap.add_argument("--window-mib", type=int, default=256, help="registered window (default 256)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--c-load", default=os.environ.get("KVBLK_C_LOAD") or os.path.join(
        os.path.dirname(kvblk.__file__), os.pardir, "kvblk_c_load"), help="the C driver")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args()

    file_bytes = args.file_mib * MiB
    action = ensure_file(args.file, file_bytes)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    setups = []
    for obj in sizes:
        n = (file_bytes // obj) // args.batch_objects * args.batch_objects
        if n == 0:
            sys.exit(f"bench_python: {args.file_mib} MiB holds fewer than {args.batch_objects} objects of {obj} bytes")
        window = max(1, (args.window_mib * MiB) // (obj * args.batch_objects))
        window = min(window, n // args.batch_objects)
        setups.append((obj, n, window, PySide(args, obj, n, window)))

    gb = {(obj, side): [] for obj in sizes for side in ("c", "py")}
    for r in range(args.rounds):
        for obj, n, window, py in setups:
            order = ("c", "py") if r % 2 == 0 else ("py", "c")
            for side in order:
                gb[obj, side].append(run_c(args, obj, n, window) if side == "c" else py.run())
    backend = setups[0][3].dev.info()["backend"]
    for *_, py in setups:
        py.close()

    rows, ok = [], True
    for obj, n, window, _ in setups:
        c, p = statistics.median(gb[obj, "c"]), statistics.median(gb[obj, "py"])
        ratio = p / c
        passed = ratio >= args.threshold
        ok &= passed
        rows.append({"object_bytes": obj, "objects": n, "batch_objects": args.batch_objects,
                     "window_batches": window, "c_gbps": c, "python_gbps": p, "ratio": ratio,
                     "pass": passed, "c_gbps_rounds": gb[obj, "c"], "python_gbps_rounds": gb[obj, "py"]})
    if args.json:
        print(json.dumps({"file": args.file, "file_bytes": file_bytes, "store": action, "backend": backend,
                          "queue_depth": args.qd, "rounds": args.rounds, "threshold": args.threshold,
                          "results": rows}, indent=1))
    else:
        print(f"file {args.file} ({args.file_mib} MiB, {action}), backend {backend}, QD {args.qd}, "
              f"{args.batch_objects} objects per call, {args.rounds} interleaved rounds, medians (GB = 1e9 B)")
        print(f"{'object':>8} {'objects':>8} {'C GB/s':>8} {'Py GB/s':>8} {'Py/C':>6}  verdict")
        for x in rows:
            size = f"{x['object_bytes'] >> 10}K" if x["object_bytes"] < MiB else f"{x['object_bytes'] >> 20}M"
            print(f"{size:>8} {x['objects']:>8} {x['c_gbps']:8.3f} {x['python_gbps']:8.3f} {x['ratio']:6.3f}  "
                  f"{'pass' if x['pass'] else 'MISS'} (>= {args.threshold})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

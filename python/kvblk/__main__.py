# SPDX-License-Identifier: MIT
"""python3 -m kvblk: a small command line over the package.

  python3 -m kvblk info [PATH]          the library, how the package was built, the backends;
                                        with PATH what kvblk.open(PATH) reports (info())
  python3 -m kvblk load PATH [...]      load a byte range into memory; --out writes it to a
                                        file, --verify compares it with a plain read
  python3 -m kvblk bench PATH [...]     load objects back to back for a few seconds: GB/s and
                                        the latency of each call

Sizes take K, M, G (powers of 1024). Exit status: 0 done, 1 an error (printed as
"kvblk: COMMAND: reason") or --verify found different bytes, 2 bad usage.
"""

import argparse
import errno
import json
import os
import sys
import time

import numpy as np

import kvblk

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size(text):
    """'4096', '128K', '16M', '1G' (powers of 1024; a trailing 'iB' or 'B' is allowed)."""
    t = text.strip().upper()
    for suffix in ("IB", "B"):
        if len(t) > 1 and t.endswith(suffix) and t[-len(suffix) - 1] in _UNITS:
            t = t[:-len(suffix)]
            break
    unit = t[-1] if t and t[-1] in _UNITS else ""
    num = t[:-1] if unit else t
    try:
        v = int(num) * _UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (bytes, or with K, M, G)") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return v


def _open_opts(a):
    opts = {}
    for k in ("queue_depth", "workers"):
        v = getattr(a, k, None)
        if v:
            opts[k] = v
    if getattr(a, "buffered", False):
        opts["buffered"] = True
    return opts


def _build_info():
    try:
        from . import _build_info as b
    except ImportError:
        return {"libkvblk": "linked by the CMake build (not pip)"}
    return {"libkvblk": b.LIBKVBLK, "libkvblk_at": b.LIBKVBLK_AT, "reason": b.REASON}


def cmd_info(a):
    out = {
        "kvblk": kvblk.__version__,
        "package": os.path.dirname(os.path.abspath(kvblk.__file__)),
        "build": _build_info(),
        "backends": list(kvblk.BACKENDS),
    }
    defaults = getattr(kvblk, "defaults", None)
    if defaults is not None:
        out["defaults"] = defaults.all()
    if a.path:
        with kvblk.open(a.path, a.backend, **_open_opts(a)) as dev:
            out["device"] = dev.info()
    if a.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    for k in ("kvblk", "package"):
        print(f"{k:<10} {out[k]}")
    b = out["build"]
    print(f"{'libkvblk':<10} {b['libkvblk']}" + (f" ({b['libkvblk_at']})" if b.get("libkvblk_at") else ""))
    print(f"{'backends':<10} {' '.join(out['backends'])}")
    if "defaults" in out:
        print("defaults   " + ", ".join(f"{k}={v}" for k, v in out["defaults"].items()))
    if "device" in out:
        for k, v in out["device"].items():
            print(f"  {k:<20} {v}")
    return 0


def cmd_load(a):
    with kvblk.open(a.path, a.backend, **_open_opts(a)) as dev:
        info = dev.info()
        cap = info["capacity"]
        if a.offset > cap:
            raise kvblk.Error(errno.ERANGE, f"--offset {a.offset} is past the end ({cap} bytes)")
        length = a.length if a.length is not None else cap - a.offset
        if a.length is None and length > (4 << 30):
            raise kvblk.Error(errno.EFBIG, f"{a.path} holds {length} bytes from --offset: give --length "
                                  f"(at most what fits in memory)")
        if length == 0:
            raise kvblk.Error(errno.EINVAL, "nothing to load: --length is 0 (or --offset is the end)")
        lbs, align = info["logical_block_size"], info["mem_align"]
        aligned = a.offset % lbs == 0 and length % lbs == 0
        dst = kvblk.aligned_empty(length, align=max(align, 4096))
        t0 = time.perf_counter()
        b = dev.load_many([(a.offset, length, dst)], unaligned=not aligned)
        dt = time.perf_counter() - t0
    print(f"loaded {b.bytes} bytes at offset {a.offset} of {a.path} in {dt * 1e3:.2f} ms "
          f"({b.bytes / dt / 1e9:.3f} GB/s) via {b.backend}"
          + ("" if aligned else f" (unaligned: {b.bytes_device} bytes read from the device)"),
          file=sys.stderr)
    if a.out:
        if a.out == "-":
            sys.stdout.buffer.write(memoryview(dst))
            sys.stdout.buffer.flush()
        else:
            with open(a.out, "wb") as f:
                f.write(memoryview(dst))
    if a.verify:
        fd = os.open(a.path, os.O_RDONLY)
        try:
            ref = bytearray()
            while len(ref) < length:
                chunk = os.pread(fd, min(length - len(ref), 64 << 20), a.offset + len(ref))
                if not chunk:
                    break
                ref += chunk
        finally:
            os.close(fd)
        if ref != memoryview(dst):
            diff = np.flatnonzero(np.frombuffer(ref, np.uint8)[:length] != dst[:len(ref)])
            where = int(diff[0]) if diff.size else len(ref)
            print(f"kvblk: load: --verify: bytes differ from a plain read, first at offset "
                  f"{a.offset + where}", file=sys.stderr)
            return 1
        print(f"verified: {length} bytes equal a plain read", file=sys.stderr)
    return 0


def cmd_bench(a):
    rng = np.random.default_rng(a.seed)
    with kvblk.open(a.path, a.backend, **_open_opts(a)) as dev:
        info = dev.info()
        lbs = info["logical_block_size"]
        obj = a.object_size
        if obj == 0 or obj % lbs:
            raise kvblk.Error(errno.EINVAL, f"--object-size {obj} is not a positive multiple of the logical "
                                  f"block size {lbs}")
        slots = info["capacity"] // obj
        if slots == 0:
            raise kvblk.Error(errno.ERANGE, f"{a.path} ({info['capacity']} bytes) is smaller than one "
                                  f"object of {obj} bytes")
        n = min(a.batch, slots)
        pool = kvblk.aligned_empty(n * obj, align=max(info["mem_align"], 4096))
        buf = dev.register(pool)
        addrs = np.arange(n, dtype=np.uint64) * obj
        lat, calls, total = [], 0, 0
        t_end = time.perf_counter() + a.seconds
        t0 = time.perf_counter()
        while True:
            picks = rng.choice(slots, n, replace=False) if a.random else \
                (np.arange(n, dtype=np.uint64) + calls * n) % slots
            descs = kvblk.make_descs(offsets=np.asarray(picks, np.uint64) * obj, lengths=obj,
                                     addrs=addrs, buf_id=buf.id)
            c0 = time.perf_counter()
            b = dev.load_many(descs)
            lat.append(time.perf_counter() - c0)
            calls += 1
            total += b.bytes
            if time.perf_counter() >= t_end:
                break
        dt = time.perf_counter() - t0
        backend = b.backend
    lat_ms = np.asarray(lat) * 1e3
    res = {"path": a.path, "backend": backend, "object_bytes": obj, "objects_per_call": n,
           "order": "random" if a.random else "sequential", "calls": calls, "bytes": total,
           "seconds": round(dt, 3), "gb_per_s": round(total / dt / 1e9, 3),
           "objects_per_s": round(calls * n / dt, 1),
           "call_ms_p50": round(float(np.percentile(lat_ms, 50)), 3),
           "call_ms_p99": round(float(np.percentile(lat_ms, 99)), 3)}
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"{res['backend']}: {calls} calls of {n} x {obj} bytes ({res['order']}) in "
              f"{res['seconds']} s: {res['gb_per_s']} GB/s, {res['objects_per_s']} objects/s, "
              f"call p50 {res['call_ms_p50']} ms, p99 {res['call_ms_p99']} ms")
    return 0


def parser():
    p = argparse.ArgumentParser(prog="python3 -m kvblk", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{info,load,bench}")

    def dev_args(sp):
        sp.add_argument("--backend", default="auto", choices=kvblk.BACKENDS,
                        help="libkvblk backend (default: auto, or the process default)")
        sp.add_argument("--queue-depth", dest="queue_depth", type=int, default=0,
                        help="commands in flight per ring (0: the default)")
        sp.add_argument("--workers", type=int, default=0, help="rings or threads (0: the default)")
        sp.add_argument("--buffered", action="store_true", help="through the page cache (no O_DIRECT)")

    s = sub.add_parser("info", help="the library, the build, the backends; a path's info()")
    s.add_argument("path", nargs="?", help="a block device or file to open and describe")
    s.add_argument("--json", action="store_true", help="print JSON")
    dev_args(s)
    s.set_defaults(fn=cmd_info)

    s = sub.add_parser("load", help="load a byte range; write it out or verify it")
    s.add_argument("path")
    s.add_argument("--offset", type=size, default=0, help="first byte (default 0)")
    s.add_argument("--length", type=size, default=None,
                   help="bytes (default: to the end, when that is at most 4 GiB)")
    s.add_argument("--out", help="write the bytes to this file ('-': standard output)")
    s.add_argument("--verify", action="store_true", help="compare with a plain read of the same range")
    dev_args(s)
    s.set_defaults(fn=cmd_load)

    s = sub.add_parser("bench", help="load objects back to back: GB/s and call latency")
    s.add_argument("path")
    s.add_argument("--object-size", dest="object_size", type=size, default=size("1M"),
                   help="bytes per object (default 1M)")
    s.add_argument("--batch", type=int, default=16, help="objects per load_many call (default 16)")
    s.add_argument("--seconds", type=float, default=3.0, help="run time (default 3)")
    s.add_argument("--random", action="store_true", help="random object order (default: sequential)")
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--json", action="store_true", help="print JSON")
    dev_args(s)
    s.set_defaults(fn=cmd_bench)
    return p


def main(argv=None):
    a = parser().parse_args(argv)
    try:
        return a.fn(a)
    except kvblk.Error as e:
        print(f"kvblk: {a.cmd}: {e.strerror or e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kvblk: {a.cmd}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

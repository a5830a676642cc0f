#!/usr/bin/env python3
"""Throughput of kvblk.integrations.lmcache driven as LMCache drives it.

Sets then gets --batches batches of --chunks chunks of --chunk-mib MiB through
DemuxHarness (one demux thread polling event_fd(), drain_completions(),
routing by future id), checks every byte, and prints GB/s per kvblk backend.
Set time includes the store's flushes and journal commit of each batch; get
time includes the CRC32C check of every chunk.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/lmcache_bench.py \
        --path /var/tmp/lmc.store --backends uring,psync
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from lmcache_harness import DemuxHarness, connector_module  # noqa: E402

import kvblk  # noqa: E402

KvblkConnector = connector_module().KvblkConnector


def one(backend, a):
    chunk = a.chunk_mib << 20
    total = a.batches * a.chunks
    if os.path.exists(a.path):
        os.unlink(a.path)
    c = KvblkConnector(a.path, slot_bytes=chunk, file_bytes=(total + 2) * chunk + (80 << 20),
                       journal_bytes=4 << 20, backend=backend)
    h = DemuxHarness(c, poll_ms=50)
    rng = np.random.default_rng(1)
    src = [kvblk.aligned_empty(chunk) for _ in range(a.chunks)]
    for s in src:
        s[:] = rng.integers(0, 256, chunk, dtype=np.uint8)
    dst = [kvblk.aligned_empty(chunk) for _ in range(a.chunks)]
    keys = [[f"bench@{b:04x}@{i:04x}" for i in range(a.chunks)] for b in range(a.batches)]
    t0 = time.perf_counter()
    for b in range(a.batches):
        r = h.set(keys[b], src, timeout=600)
        assert r.ok and all(r.bools), r
    t_set = time.perf_counter() - t0
    t0 = time.perf_counter()
    for b in range(a.batches):
        r = h.get(keys[b], dst, timeout=600)
        assert r.ok and all(r.bools), r
    t_get = time.perf_counter() - t0
    assert all(np.array_equal(s, d) for s, d in zip(src, dst)), "bytes differ"
    h.close()
    h.assert_clean()
    os.unlink(a.path)
    gb = total * chunk / 1e9
    print(f"{backend:<10} {a.chunks:>6} {a.chunk_mib:>9} {gb / t_set:>10.3f} {gb / t_get:>10.3f}   yes")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--path", default="/var/tmp/kvblk-lmcache-bench.store")
    p.add_argument("--backends", default="uring,psync")
    p.add_argument("--chunks", type=int, default=32, help="chunks per batch")
    p.add_argument("--chunk-mib", type=int, default=4)
    p.add_argument("--batches", type=int, default=4)
    a = p.parse_args()
    print(f"{'backend':<10} {'chunks':>6} {'chunk MiB':>9} {'set GB/s':>10} {'get GB/s':>10}   verified")
    for b in a.backends.split(","):
        one(b, a)


if __name__ == "__main__":
    main()

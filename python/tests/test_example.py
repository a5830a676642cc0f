# SPDX-License-Identifier: MIT
"""The "From Python" example of docs/engines.md (python/examples/engine.py) runs and verifies."""

import os
import subprocess
import sys

import pytest

from kvblk import _kvblk

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "engine.py")


def test_engine_example(tmpdir_disk):
    store = os.path.join(tmpdir_disk, "engine-store.bin")
    p = subprocess.run([sys.executable, EXAMPLE, store, "--create"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "loaded 3670016 bytes for 3 requests" in p.stdout  # 14 blocks of 256 KiB
    assert p.stdout.strip().endswith("verified")


def test_bench_smoke(tmpdir_disk):
    """bench_python.py runs end to end (tiny file, one round; the ratio is not judged here)."""
    bench = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "bench_python.py")
    p = subprocess.run([sys.executable, bench, "--file", os.path.join(tmpdir_disk, "bench.bin"),
                        "--file-mib", "8", "--sizes", "256K,1M", "--batch-objects", "4", "--rounds", "1",
                        "--window-mib", "4", "--min-calls", "1", "--threshold", "0", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    import json
    doc = json.loads(p.stdout)
    assert [r["object_bytes"] for r in doc["results"]] == [256 << 10, 1 << 20]
    assert all(r["c_gbps"] > 0 and r["python_gbps"] > 0 for r in doc["results"])

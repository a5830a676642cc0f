# SPDX-License-Identifier: MIT
"""python3 -m kvblk info|load|bench: output, exit codes and bytes."""

import json
import os
import subprocess
import sys

import pytest

import kvblk
from kvblk.__main__ import size


def run(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "kvblk", *args], capture_output=True)
    if check and r.returncode != 0:
        raise AssertionError(f"exit {r.returncode}: {r.stderr.decode()}")
    return r


def test_sizes():
    assert size("4096") == 4096
    assert size("128K") == 128 << 10 and size("128KiB") == 128 << 10 and size("16m") == 16 << 20
    assert size("1G") == 1 << 30 and size("2MB") == 2 << 20
    for bad in ("", "K", "1X", "-1", "1.5M"):
        with pytest.raises(Exception):
            size(bad)


def test_info_json(store):
    r = run("info", store[0], "--backend", "psync", "--json")
    out = json.loads(r.stdout)
    assert out["kvblk"] == kvblk.__version__
    assert out["device"]["backend"] == "psync"
    assert out["device"]["capacity"] == os.path.getsize(store[0])
    assert out["defaults"]["queue_depth"] == kvblk.defaults.get("queue_depth")


def test_load_out_and_verify(store, tmpdir_disk):
    path, data = store
    out = os.path.join(tmpdir_disk, "cli-out.bin")
    # An unaligned range: the first and last blocks are bounced.
    r = run("load", path, "--offset", "1000", "--length", "300000", "--out", out, "--verify")
    assert b"verified: 300000 bytes equal a plain read" in r.stderr
    assert b"unaligned" in r.stderr
    assert open(out, "rb").read() == data[1000:301000].tobytes()
    r = run("load", path, "--offset", "1M", "--length", "64K", "--out", "-")
    assert r.stdout == data[1 << 20:(1 << 20) + (64 << 10)].tobytes()


def test_load_errors(store):
    path = store[0]
    r = run("load", path, "--offset", "1G", check=False)
    assert r.returncode == 1 and b"kvblk: load: --offset 1073741824 is past the end" in r.stderr
    r = run("load", path, "--offset", "0", "--length", "32M", check=False)
    assert r.returncode == 1 and b"reaches past the end" in r.stderr
    r = run("load", "/nonexistent/kvblk", check=False)
    assert r.returncode == 1 and b"kvblk: load:" in r.stderr
    r = run("load", path, "--length", "lots", check=False)
    assert r.returncode == 2


def test_bench_json(store):
    r = run("bench", store[0], "--object-size", "256K", "--batch", "4", "--seconds", "0.2", "--random",
            "--json")
    res = json.loads(r.stdout)
    assert res["calls"] >= 1 and res["bytes"] == res["calls"] * 4 * (256 << 10)
    assert res["gb_per_s"] > 0 and res["call_ms_p99"] >= res["call_ms_p50"] > 0
    r = run("bench", store[0], "--object-size", "1000", check=False)
    assert r.returncode == 1 and b"not a positive multiple" in r.stderr

# SPDX-License-Identifier: MIT
"""kvblk.defaults: the C library's table of process-wide defaults, read and set from Python
(kvblk_get_default(3)): values, the environment, set() as a context manager, reset(), what
kvblk.open() gets, and errors; and `python3 -m kvblk info` showing them."""

import errno
import os
import subprocess
import sys

import pytest

import kvblk

VARS = ["KVBLK_BACKEND", "KVBLK_QUEUE_DEPTH", "KVBLK_RINGS", "KVBLK_THREADS", "KVBLK_MAX_CMD_BYTES",
        "KVBLK_MAX_DESCS", "KVBLK_MAX_BATCHES", "KVBLK_EAGAIN_RETRIES", "KVBLK_STAGING_BUFFERS",
        "KVBLK_STAGING_BUFFER_BYTES"]


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for v in VARS:
        monkeypatch.delenv(v, raising=False)
    kvblk.defaults.reset()
    yield
    kvblk.defaults.reset()


def test_table_and_builtin_values():
    assert kvblk.defaults.names() == ["backend", "queue_depth", "rings", "threads", "max_cmd_bytes",
                                      "max_descs", "max_batches", "eagain_retries",
                                      "staging_buffers", "staging_buffer_bytes"]
    assert kvblk.defaults.all() == {
        "backend": "auto", "queue_depth": 64, "rings": 1, "threads": 8, "max_cmd_bytes": 128 << 10,
        "max_descs": 65536, "max_batches": 256, "eagain_retries": 16, "staging_buffers": 4,
        "staging_buffer_bytes": 8 << 20}
    d = {e["name"]: e for e in kvblk.defaults.describe()}
    assert [e["env"] for e in kvblk.defaults.describe()] == VARS
    assert d["queue_depth"]["min"] == 1 and d["queue_depth"]["max"] == 4096
    assert d["backend"]["builtin"] == "auto" and d["backend"]["max"] == "uring_cmd"
    assert all(e["source"] == "builtin" and e["error"] == 0 for e in d.values())


def test_environment_then_set_then_reset(monkeypatch, store):
    monkeypatch.setenv("KVBLK_QUEUE_DEPTH", "8")
    monkeypatch.setenv("KVBLK_MAX_CMD_BYTES", "64K")
    assert kvblk.defaults.get("queue_depth") == 8
    assert kvblk.defaults.get("max_cmd_bytes") == 64 << 10
    with kvblk.open(store[0]) as dev:
        assert dev.info()["queue_depth"] == 8
        assert dev.info()["max_cmd_bytes"] == 64 << 10
    kvblk.defaults.set("queue_depth", 16)
    assert kvblk.defaults.get("queue_depth") == 16
    assert {e["name"]: e["source"] for e in kvblk.defaults.describe()}["queue_depth"] == "set"
    with kvblk.open(store[0]) as dev:
        assert dev.info()["queue_depth"] == 16
    with kvblk.open(store[0], queue_depth=4) as dev:
        assert dev.info()["queue_depth"] == 4, "an explicit option wins"
    kvblk.defaults.reset("queue_depth")
    assert kvblk.defaults.get("queue_depth") == 8, "the variable again"


def test_set_is_a_context_manager_and_restores(store):
    kvblk.defaults.set("threads", 3)
    with kvblk.defaults.set({"backend": "threadpool", "threads": 2}):
        assert kvblk.defaults.get("backend") == "threadpool"
        with kvblk.open(store[0]) as dev:
            info = dev.info()
        assert info["backend"] == "threadpool" and info["workers"] == 2
        assert "kvblk_set_default" in info["backend_reason"]
    assert kvblk.defaults.get("backend") == "auto"
    assert kvblk.defaults.get("threads") == 3, "the value set before the block comes back"
    with kvblk.defaults.set(max_batches=5, rings=2):
        with kvblk.open(store[0], "uring") as dev:
            assert dev.info()["max_batches"] == 5 and dev.info()["workers"] == 2
    assert kvblk.defaults.get("max_batches") == 256


def test_loads_follow_the_default_backend(store):
    path, data = store
    with kvblk.defaults.set("backend", "psync"):
        with kvblk.open(path) as dev:
            dst = kvblk.aligned_empty(1 << 20)
            b = dev.load_many([(1 << 20, 1 << 20, dst)])
    assert b.backend == "psync"
    assert bytes(dst) == data[1 << 20:2 << 20].tobytes()


def test_errors_name_what_is_wrong(monkeypatch, store):
    with pytest.raises(kvblk.Error) as e:
        kvblk.defaults.set("queue_depth", 0)
    assert e.value.errno == errno.EINVAL and "out of range 1..4096" in e.value.strerror
    with pytest.raises(kvblk.Error) as e:
        kvblk.defaults.set("queue_dpth", 8)
    assert e.value.errno == errno.ENOENT and "queue_depth" in e.value.strerror
    with pytest.raises(kvblk.Error) as e:
        kvblk.defaults.set("backend", "fastest")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(TypeError):
        kvblk.defaults.set("queue_depth", "8")
    # Nothing of a failed set() is kept.
    with pytest.raises(kvblk.Error):
        kvblk.defaults.set({"rings": 2, "threads": 1000})
    assert kvblk.defaults.get("rings") == 1
    monkeypatch.setenv("KVBLK_RINGS", "many")
    with pytest.raises(kvblk.Error) as e:
        kvblk.defaults.get("rings")
    assert "KVBLK_RINGS=many is not a number" in e.value.strerror
    with pytest.raises(kvblk.Error) as e:
        kvblk.open(store[0])
    assert e.value.errno == errno.EINVAL and "KVBLK_RINGS=many" in e.value.strerror
    assert {d["name"]: d["error"] for d in kvblk.defaults.describe()}["rings"] == errno.EINVAL


def test_command_line_info_shows_defaults(monkeypatch):
    env = dict(os.environ, KVBLK_QUEUE_DEPTH="32")
    r = subprocess.run([sys.executable, "-m", "kvblk", "info"], capture_output=True, text=True, env=env,
                       check=True)
    assert "queue_depth=32" in r.stdout
    assert "backends   auto uring threadpool psync kmod uring_cmd" in r.stdout

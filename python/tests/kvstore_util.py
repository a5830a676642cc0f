# SPDX-License-Identifier: MIT
"""Helpers of the kvblk store tests: small stores in files on the local disk."""

import itertools
import os

import numpy as np

import kvblk

MiB = 1 << 20
_seq = itertools.count()


def pattern(nbytes, seed):
    """Deterministic bytes that differ at every 8-byte word and between seeds (a misplaced or
    another key's block cannot match)."""
    words = nbytes // 8 + 1
    w = np.arange(words, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed * 0x100000001B3 + 7)
    return w.view(np.uint8)[:nbytes].copy()


def store_path(tmpdir, name="s"):
    """A fresh path in ``tmpdir`` (not created)."""
    return os.path.join(tmpdir, f"{name}-{os.getpid()}-{next(_seq)}.kvs")


def make_store(tmpdir, *, n_drives=1, file_bytes=96 * MiB, classes=("1MiB",), **kw):
    """A new store over ``n_drives`` files of ``file_bytes`` (a journal of 1 MiB keeps them small)."""
    paths = [store_path(tmpdir, f"d{i}") for i in range(n_drives)]
    kw.setdefault("journal_bytes", 4 * MiB)
    st = kvblk.KVStore(paths if n_drives > 1 else paths[0], create=True, file_bytes=file_bytes,
                       classes=list(classes), **kw)
    return st, paths

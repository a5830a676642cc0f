# SPDX-License-Identifier: MIT
"""kvblk: load LLM KV-cache objects from NVMe (or any block device or file) with every command
in flight together. Python bindings of libkvblk (include/kvblk/kvblk.h).

    import kvblk, numpy as np
    with kvblk.open("/dev/nvme0n1") as dev:
        dst = kvblk.aligned_empty(4 << 20)
        dev.load_many([(0, 1 << 20, dst[:1 << 20]), (1 << 20, 3 << 20, dst[1 << 20:])])

See python/README.md: destinations, the GIL and lifetime rules, the asyncio helper;
kvblk.defaults for the process-wide defaults of open() (docs/defaults.md).
"""

from . import _errors  # first: the extension raises kvblk._errors.Error
from . import _kvblk
from ._defaults import defaults
from ._device import Batch, Buffer, Device, Ticket, open
from ._dest import BufferSlice, resolve
from ._errors import Error, WaitTimeout
from ._kvstore import EvictedKey, KeyResult, KVStore, StoreBuffer, StoreResult
from ._layout import (BUF_NONE, CQE_DTYPE, DESC_DTYPE, RESULT_DTYPE, aligned_empty, empty_descs,
                      make_descs)

__version__ = _kvblk.version()
if not _kvblk.check_version():
    raise ImportError(f"libkvblk {__version__} is older than the header kvblk._kvblk was built "
                      f"against ({'.'.join(map(str, _kvblk.HEADER_VERSION))})")

BACKENDS = tuple(_kvblk.BACKEND_NAMES)
MEM_HOST = _kvblk.MEM_HOST
MEM_CUDA = _kvblk.MEM_CUDA
MEM_P2PDMA = _kvblk.MEM_P2PDMA
DESC_UNALIGNED = _kvblk.DESC_UNALIGNED
DESC_SHORT_EOF = _kvblk.DESC_SHORT_EOF
CQE_BATCH = _kvblk.CQE_BATCH
CQE_OBJECT = _kvblk.CQE_OBJECT

__all__ = [
    "open", "Device", "Buffer", "BufferSlice", "Ticket", "Batch", "Error", "WaitTimeout", "resolve",
    "DESC_DTYPE", "RESULT_DTYPE", "CQE_DTYPE", "BUF_NONE", "empty_descs", "make_descs",
    "aligned_empty", "BACKENDS", "MEM_HOST", "MEM_CUDA", "MEM_P2PDMA", "DESC_UNALIGNED",
    "DESC_SHORT_EOF",
    "CQE_BATCH", "CQE_OBJECT", "KVStore", "StoreResult", "KeyResult", "StoreBuffer", "EvictedKey",
    "defaults",
]

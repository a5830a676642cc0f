#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""From an engine: load the KV-cache blocks of cached prompt prefixes from NVMe into the
engine's paged KV pool (a torch tensor), one batch per request, requests awaited together.

Usage: engine.py STORE [--create]   (STORE: a block device or file of KV blocks, block i at
byte i * BLOCK; --create writes a demo store of 64 blocks first). Exit 0 when every byte of
every loaded page equals the store's.
"""
import asyncio
import sys

import numpy as np
import torch

import kvblk

BLOCK = 256 << 10                        # bytes of one KV block (all layers, one page of tokens)
PAGES = 32                               # pages in the engine's KV pool


async def serve(dev, pool_buf, requests):
    """Each request: (stored block ids of its prefix, pool pages to fill). One batch each,
    all in flight together; the event loop keeps running while NVMe works."""
    async def load_prefix(blocks, pages):
        descs = kvblk.make_descs(offsets=np.asarray(blocks) * BLOCK, lengths=BLOCK,
                                 addrs=np.asarray(pages) * BLOCK, buf_id=pool_buf)
        batch = await dev.load(descs)    # raises kvblk.Error if any block failed
        return batch.bytes
    return await asyncio.gather(*(load_prefix(b, p) for b, p in requests))


def main(path, create):
    if create:                           # a demo store: block i filled from seed i
        blocks = [np.random.default_rng(i).integers(0, 256, BLOCK, np.uint8) for i in range(64)]
        with open(path, "wb") as f:
            f.write(b"".join(b.tobytes() for b in blocks))
    with kvblk.open(path) as dev:        # backend "auto": kvblk.ko, else io_uring
        pool = torch.from_numpy(kvblk.aligned_empty(PAGES * BLOCK)).view(PAGES, BLOCK)
        pool_buf = dev.register(pool)    # once: pinned / fixed buffer, reused by every load
        requests = [([3, 4, 5, 6], [0, 1, 2, 3]),        # request A: 4 prefix blocks
                    ([40, 41], [10, 11]),                # request B: 2 blocks
                    (list(range(20, 28)), list(range(16, 24)))]
        loaded = asyncio.run(serve(dev, pool_buf, requests))
        print(f"loaded {sum(loaded)} bytes for {len(requests)} requests via {dev.info()['backend']}")
        with open(path, "rb") as f:      # check: every page holds its block
            for blocks, pages in requests:
                for blk, page in zip(blocks, pages):
                    f.seek(blk * BLOCK)
                    if pool[page].numpy().tobytes() != f.read(BLOCK):
                        sys.exit(f"page {page} differs from block {blk}")
    print("verified")


if __name__ == "__main__":
    main(sys.argv[1], "--create" in sys.argv[2:])

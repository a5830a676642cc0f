// SPDX-License-Identifier: MIT
// How large an io_uring read or write of a block device may be before the block layer must
// split its bio, which io_uring's non-blocking first issue cannot do.
//
// io_uring issues a read or write first without blocking (IOCB_NOWAIT, so REQ_NOWAIT on the
// bio). A bio that exceeds the queue's limits must be split, and the block layer refuses to
// split a REQ_NOWAIT bio: it ends it with BLK_STS_AGAIN (block/blk-merge.c, bio_split_rw(),
// "We can't sanely support splitting for a REQ_NOWAIT bio", 6.1 through 7.x), and io_uring
// then issues the whole command again from an io-wq worker thread. Measured in the 6.1
// guest of the VM rig (null_blk, max_segments 128, 2026-12-05): 1 MiB reads into a fixed
// buffer cost 7 to 15 times the CPU per byte of 512 KiB reads, in the extra threads.
//
// The limits that split: queue/max_sectors_kb (the soft limit, at most max_hw_sectors_kb),
// and queue/max_segments, counted per bio_vec. A fixed buffer's bio_vecs are one per 4 KiB
// page, except where io_uring coalesces a buffer made of huge pages into one bio_vec per
// folio (io_uring/rsrc.c, "io_uring/rsrc: enable multi-hugepage buffer coalescing", 6.11;
// measured: on 6.12 and 7.2 1 MiB reads from a fixed buffer of transparent huge pages are
// not re-issued, and cost about 0.7 times the CPU per byte of 512 KiB reads).
#pragma once

#include <cstdint>

namespace kvblk::detail {

/*
 * Does the kernel of uname(2) release @release (e.g. "6.1.0-57-amd64") coalesce a fixed
 * buffer of huge pages into one bio_vec per folio (6.11 and later)? False when @release does
 * not parse.
 */
bool kernel_coalesces_fixed_buffers(const char *release) noexcept;

/*
 * The largest command, in bytes, that a block device with queue/max_sectors_kb
 * @max_sectors_kb and queue/max_segments @max_segments takes from an io_uring fixed buffer
 * without a split: max_sectors_kb KiB, and where @coalesces is false, also max_segments
 * pages of 4 KiB: exact for a destination aligned to a page, as large objects' buffers are
 * (one not aligned to a page spans one page more, and that command is split and issued
 * again from a worker thread: slower, never wrong). Either input 0 (unknown) leaves its
 * limit out; 0 when both are unknown.
 */
uint64_t fixed_read_unsplit_bytes(uint64_t max_sectors_kb, uint64_t max_segments, bool coalesces) noexcept;

} // namespace kvblk::detail

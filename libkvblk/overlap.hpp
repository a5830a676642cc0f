// SPDX-License-Identifier: MIT
// Overlap within one batch: two loads into intersecting destinations, or two stores to
// intersecting ranges of one target, leave bytes that depend on completion order. Always
// a caller's bug, and cheap to find: the batch is rejected (-EINVAL) before anything is
// submitted, naming the lowest descriptor index that overlaps an earlier descriptor.
#pragma once

#include <cstdint>
#include <vector>

namespace kvblk::detail {

/**
 * struct Span - one descriptor's range.
 * @space: which address space @start is in: loads, 0 for host virtual addresses (plain
 *         pointers, host and P2PDMA buffers), 1 for CUDA device addresses, 2 + buffer id for
 *         a dma-buf (offsets into it); stores, the target id.
 * @start: first byte. @end: one past the last (> @start).
 * @index: the descriptor's index.
 */
struct Span {
	uint64_t space;
	uint64_t start;
	uint64_t end;
	uint32_t index;
};

/*
 * -1 when no two of @spans intersect; else the lowest index j whose span intersects the span
 * of some descriptor i < j, and *other = such an i. O(n) when the spans come in ascending
 * order (the usual layout), O(n log n) otherwise. Reorders @spans. Throws std::bad_alloc.
 */
int32_t first_overlap(std::vector<Span> &spans, uint32_t *other);

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// The input rules of kvblk_load_many()/kvblk_store_many(), checked before anything is submitted.
#pragma once

#include "backend.hpp"
#include "buffers.hpp"

#include <kvblk/kvblk.h>

#include <cstdint>

namespace kvblk::detail {

/* What descriptors are checked against. */
struct ValidationLimits {
	uint32_t logical_block_size;
	uint32_t mem_align;
	uint64_t capacity;
};

/*
 * Check @descs[0..n) in order and normalise each into @objects[i]. Stops at the first bad
 * descriptor: returns its error (-EINVAL, -ERANGE or -ENOENT), *bad_index = its index and
 * kvblk_last_error() names the index, the rule and the numbers. Returns 0 when all are good,
 * with the ids of the registered buffers they use in *pins.
 * Registered buffers are looked up in @table, whose lock the caller holds.
 */
int validate_descs(IoDir dir, const kvblk_desc *descs, uint32_t n, const ValidationLimits &lim,
		   const BufferTable &table, IoObject *objects, PinSet *pins, int32_t *bad_index);

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// The input rules of kvblk_load_many()/kvblk_store_many(), checked before anything is submitted.
#pragma once

#include "backend.hpp"
#include "buffers.hpp"
#include "targets.hpp"

#include <kvblk/kvblk.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvblk::detail {

/* sizeof(struct kvblk_desc) of 0.2: what the KVBLK_0.1 entry points read. */
inline constexpr size_t kDescSizeV0_2 = offsetof(kvblk_desc, target);
static_assert(kDescSizeV0_2 == 40 && sizeof(kvblk_desc) == 48, "descriptor sizes of 0.2 and 0.3");

/*
 * DescView - the caller's descriptor array, 0.3 descriptors (48 bytes) or 0.2 ones (40 bytes,
 * from a program built against the 0.2 header): d[i] is descriptor i as a 0.3 descriptor
 * (target 0, reserved 0 for a 0.2 one). Read-only, no copy of the array.
 */
class DescView {
public:
	DescView(const void *base, size_t stride) noexcept : base_(static_cast<const uint8_t *>(base)), stride_(stride) {}

	kvblk_desc operator[](uint32_t i) const noexcept
	{
		kvblk_desc d{};
		/*
		 * This header's size, the common case, as a copy of constant size (inlined): a
		 * copy of stride_ bytes is a call to memcpy(), and batches read each descriptor
		 * several times (validation, overlap check, objects).
		 */
		if (stride_ == sizeof(d))
			std::memcpy(&d, base_ + size_t(i) * sizeof(d), sizeof(d));
		else
			std::memcpy(&d, base_ + size_t(i) * stride_, stride_);
		return d;
	}
	/* Descriptors of 0.2 (flags must be 0, as that header said). */
	[[nodiscard]] bool v0_2() const noexcept { return stride_ == kDescSizeV0_2; }
	[[nodiscard]] bool null() const noexcept { return base_ == nullptr; }

private:
	const uint8_t *base_;
	size_t stride_;
};

/*
 * struct Geometry - what one validated object's target requires, for the unaligned
 * expansion (unaligned.cpp).
 * @lbs:       the target's logical block size.
 * @mem_align: the target's memory alignment.
 * @size:      the target's size when the batch started.
 * @unaligned: the object may be unaligned: the descriptor asked for KVBLK_DESC_UNALIGNED,
 *             or KVBLK_DESC_SHORT_EOF cut it at the end of a file (@cut).
 * @cut:       KVBLK_DESC_SHORT_EOF cut the object at the end of the file: IoObject.length
 *             is what the file holds from its offset (0 when it starts at or past the end).
 * @tail_fd:   stores: the descriptor that writes the file's last block, which the end of
 *             the file cuts short and the object reaches into (open_tail_writer()); else -1.
 */
struct Geometry {
	uint32_t lbs;
	uint32_t mem_align;
	uint64_t size;
	bool unaligned;
	bool cut;
	int tail_fd;
};

/*
 * struct BatchCheck - what one batch is checked against and what the check produced.
 * @dir:        load or store.
 * @serial:     TargetTable::next_serial() of this batch.
 * @targets:    the device's targets, lock held by the caller.
 * @buffers:    the device's buffers, lock held by the caller.
 * @objects:    out: one normalised object per descriptor.
 * @geometry:   out: one Geometry per descriptor.
 * @pins:       out: registered buffer ids the batch uses (to pin).
 * @target_pins: out: target ids the batch names, already pinned (unpin when done, also on
 *              rejection).
 * @any_unaligned: out: some descriptor has KVBLK_DESC_UNALIGNED.
 * @any_buffered:  out: some target of the batch goes through the page cache.
 * @last_te, @last_target, @last_buf, @last_buf_id: the previous descriptor's target and
 *              buffer, found (and pinned) once for a run of descriptors that name the same
 *              ones, as batches mostly do (validate_descs() resets them; both tables stay
 *              locked for the whole check).
 */
struct BatchCheck {
	IoDir dir;
	uint64_t serial;
	TargetTable *targets;
	const BufferTable *buffers;
	IoObject *objects;
	Geometry *geometry;
	PinSet *pins;
	TargetPins *target_pins;
	bool any_unaligned;
	bool any_buffered;
	TargetEntry *last_te = nullptr;
	uint32_t last_target = 0;
	const RegisteredBuffer *last_buf = nullptr;
	uint32_t last_buf_id = 0;
};

/*
 * Check @descs[0..n) in order and normalise each into c->objects[i]. Stops at the first bad
 * descriptor: returns its error (-EINVAL, -ERANGE, -ENOENT, or -EBADF for a load from a
 * write-only target or a store to a target not open for writing), *bad_index = its index and
 * kvblk_last_error() names the index, the rule and the numbers. Returns 0 when all are good.
 * Targets named so far stay pinned in c->target_pins either way.
 */
int validate_descs(const DescView &descs, uint32_t n, BatchCheck *c, int32_t *bad_index);

} // namespace kvblk::detail

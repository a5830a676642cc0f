// SPDX-License-Identifier: MIT
// BatchPins: what one batch holds against unregistration and removal, its registered
// buffers and its targets, from its checks until its completion is taken (or until it is
// rejected): kvblk_unregister_buffer() and kvblk_remove_target() say -EBUSY meanwhile, so no
// command ever uses a buffer or an fd that is gone.
#pragma once

#include "buffers.hpp"
#include "targets.hpp"

namespace kvblk::detail {

class BatchPins {
public:
	BatchPins(BufferTable &b, TargetTable &t) noexcept : buffers_(b), targets_(t) {}
	~BatchPins() { release(); }
	BatchPins(const BatchPins &) = delete;
	BatchPins &operator=(const BatchPins &) = delete;

	/* Drop every pin (idempotent). */
	void release() noexcept
	{
		if (buffers_pinned_)
			buffers_.unpin(buffer_ids);
		buffers_pinned_ = false;
		if (!target_ids.empty())
			targets_.unpin(target_ids);
		target_ids.clear();
	}
	/* @buffer_ids were pinned (BufferTable::pin_locked()): release() unpins them. */
	void buffers_pinned() noexcept { buffers_pinned_ = true; }

	PinSet buffer_ids;	/* filled by validate_descs(), pinned by the caller */
	TargetPins target_ids;	/* pinned by validate_descs() as it finds them */

private:
	BufferTable &buffers_;
	TargetTable &targets_;
	bool buffers_pinned_ = false;
};

} // namespace kvblk::detail

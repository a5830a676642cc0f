// SPDX-License-Identifier: MIT
// Unaligned loads (KVBLK_DESC_UNALIGNED): one batch's objects become block-aligned parts
// for the backend, and the parts' results become the objects' results again.
//
//   expand(objects) -> parts (what the backend reads) + fix-ups (bounce bytes to copy)
//   ...the backend (or the asynchronous core) completes every part...
//   finish(part results) -> one result per object, edges copied into the destinations
//
// An object that is aligned already (offset, length, destination) is one part, read in
// place. Otherwise the whole blocks inside it whose destination is aligned to mem_align (the
// middle) are read in place, and its unaligned head and tail are read as their covering
// blocks into a bounce area owned by the batch; when the middle's destination is not
// aligned, the whole object's covering blocks are bounced. A covering block that reaches
// past the end of a file is read up to the end (IoObject.min_length: the short read at the
// end of the file completes the part). The bounce area is one allocation per batch, bounded
// by kMaxBounceBytes; it lives in the UnalignedBatch until finish() has copied out of it.
#pragma once

#include "backend.hpp"
#include "validate.hpp"

#include <kvblk/kvblk.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace kvblk::detail {

/* Most bounce bytes one batch may use (covering blocks of edges and bounced objects). */
inline constexpr uint64_t kMaxBounceBytes = KVBLK_MAX_BOUNCE_BYTES;

/**
 * struct UnalignedTotals - what finish() found, for batch_info and stats.
 * @bytes_device:  bytes the succeeded objects moved on their targets (covering blocks, cut
 *                 at the end of a file).
 * @objects:       succeeded objects that needed a bounced edge (stats.unaligned_objects).
 * @extra_bytes:   bytes of their covering blocks beyond what they wanted
 *                 (stats.unaligned_extra_bytes).
 */
struct UnalignedTotals {
	uint64_t bytes_device = 0;
	uint64_t objects = 0;
	uint64_t extra_bytes = 0;
};

class UnalignedBatch {
public:
	UnalignedBatch() = default;
	UnalignedBatch(const UnalignedBatch &) = delete;
	UnalignedBatch &operator=(const UnalignedBatch &) = delete;

	/*
	 * Expand @n validated objects (@geo: their targets' rules; only objects with
	 * geo.unaligned may be unaligned). 0, or -E2BIG when the bounce area would pass
	 * kMaxBounceBytes (*bad_index: the first object that does not fit; message set), or
	 * -ENOMEM. The objects must stay valid until finish().
	 */
	int expand(const IoObject *objs, const Geometry *geo, uint32_t n, int32_t *bad_index);

	/* The parts to read, and room for their results (tags 0, status 0). */
	[[nodiscard]] const IoObject *parts() const noexcept { return parts_.data(); }
	[[nodiscard]] uint32_t part_count() const noexcept { return uint32_t(parts_.size()); }
	[[nodiscard]] kvblk_result *part_results() noexcept { return part_results_.data(); }
	/* The object part @p belongs to. */
	[[nodiscard]] uint32_t owner(uint32_t p) const noexcept { return owner_[p]; }

	/*
	 * Every part has completed (part_results() written): for each object, status = the
	 * first failed part's status (0 when all succeeded) and bytes = its length or 0, into
	 * results[0..n) (tags left alone); copy the wanted bounce bytes of succeeded objects
	 * into their destinations; add up @tot.
	 */
	void finish(kvblk_result *results, UnalignedTotals *tot) noexcept;

	/* Bytes of bounce memory this batch holds. */
	[[nodiscard]] uint64_t bounce_bytes() const noexcept { return bounce_len_; }

private:
	struct Fixup {
		uint32_t part;		/* the bounce part it copies from */
		uint64_t src;		/* offset in the bounce area */
		uint64_t dst;		/* offset in the object's destination */
		uint64_t len;
	};
	struct Free {
		void operator()(uint8_t *p) const noexcept;
	};

	const IoObject *objs_ = nullptr;
	const Geometry *geo_ = nullptr;
	uint32_t n_ = 0;
	std::vector<IoObject> parts_;
	std::vector<uint32_t> owner_;		/* part -> object */
	std::vector<uint64_t> device_bytes_;	/* part -> bytes it moves on the target */
	std::vector<uint8_t> bounced_;		/* object -> needed a bounce */
	std::vector<kvblk_result> part_results_;
	std::vector<Fixup> fixups_;		/* in part order */
	std::unique_ptr<uint8_t, Free> bounce_;
	uint64_t bounce_len_ = 0;
};

} // namespace kvblk::detail

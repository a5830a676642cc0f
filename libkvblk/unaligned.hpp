// SPDX-License-Identifier: MIT
// Unaligned loads and stores (KVBLK_DESC_UNALIGNED, and loads that KVBLK_DESC_SHORT_EOF cuts
// at the end of a file): one batch's objects become block-aligned parts for the backend, and
// the parts' results become the objects' results again.
//
// Loads (UnalignedBatch):
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
// by kMaxBounceBytes; it lives in the UnalignedBatch until finish() has copied out of it. An
// object that KVBLK_DESC_SHORT_EOF cut to nothing (it starts at or past the end of the file)
// has no part at all: it succeeds with 0 bytes.
//
// Stores (UnalignedStore): a read-modify-write in two phases.
//
//   expand(objects) -> the edge blocks to read (phase 1), the writes (phase 2), the ranges the
//                      batch locks (range_lock.hpp); misaligned whole blocks copied into the
//                      bounce area at once (the source is the library's from submit on)
//   ...phase 1: the backend reads the edge blocks into the bounce area...
//   fill()          -> each object's bytes copied over the edge blocks that were read; the
//                      write-back of a block that could not be read is dropped
//   ...phase 2: the backend writes...
//   finish(results) -> one result per object
//
// An edge block is the covering block of an unaligned head or tail. Objects of the batch that
// share one share its read and its write (one bounce block, every object's bytes copied into
// it), so a batch never writes a block twice. The whole blocks inside an object are written
// in place when their source is aligned to mem_align, else from the bounce area. A file's
// last block cut short by its end is read up to the end (IoObject.min_length) and written
// back up to the end only, through the target's buffered descriptor (IoObject.positional,
// Geometry.tail_fd): the file never grows. A batch without edges (only misaligned sources)
// has no phase 1.
#pragma once

#include "backend.hpp"
#include "range_lock.hpp"
#include "validate.hpp"

#include <kvblk/kvblk.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace kvblk::detail {

/* Most bounce bytes one batch may use (covering blocks of edges and bounced objects). */
inline constexpr uint64_t kMaxBounceBytes = KVBLK_MAX_BOUNCE_BYTES;

/**
 * struct UnalignedTotals - what UnalignedBatch::finish() found, for batch_info and stats.
 * @bytes_device:  bytes the succeeded objects moved on their targets (covering blocks, cut
 *                 at the end of a file).
 * @objects:       succeeded objects that needed a bounced edge (stats.unaligned_objects).
 * @extra_bytes:   bytes of their covering blocks beyond what they wanted
 *                 (stats.unaligned_extra_bytes).
 * @short_objects: succeeded objects that KVBLK_DESC_SHORT_EOF cut at the end of a file
 *                 (stats.short_eof_objects).
 */
struct UnalignedTotals {
	uint64_t bytes_device = 0;
	uint64_t objects = 0;
	uint64_t extra_bytes = 0;
	uint64_t short_objects = 0;
};

/* Frees what posix_memalign() gave. */
struct BounceFree {
	void operator()(uint8_t *p) const noexcept;
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
	const IoObject *objs_ = nullptr;
	const Geometry *geo_ = nullptr;
	uint32_t n_ = 0;
	std::vector<IoObject> parts_;
	std::vector<uint32_t> owner_;		/* part -> object */
	std::vector<uint64_t> device_bytes_;	/* part -> bytes it moves on the target */
	std::vector<uint8_t> bounced_;		/* object -> needed a bounce */
	std::vector<kvblk_result> part_results_;
	std::vector<Fixup> fixups_;		/* in part order */
	std::unique_ptr<uint8_t, BounceFree> bounce_;
	uint64_t bounce_len_ = 0;
};

/**
 * struct StoreTotals - what UnalignedStore::finish() found, for batch_info and stats.
 * @bytes_device: bytes the succeeded objects moved on their targets: what was written (edge
 *                blocks whole, cut at the end of a file) plus the edge blocks read. A block
 *                that objects share counts once.
 * @objects:      succeeded objects that went through the bounce area: an edge
 *                read-modify-written or a misaligned source copied (stats.unaligned_stores).
 * @read_bytes:   bytes of edge blocks read for succeeded objects (stats.rmw_read_bytes).
 */
struct StoreTotals {
	uint64_t bytes_device = 0;
	uint64_t objects = 0;
	uint64_t read_bytes = 0;
};

class UnalignedStore {
public:
	UnalignedStore() = default;
	UnalignedStore(const UnalignedStore &) = delete;
	UnalignedStore &operator=(const UnalignedStore &) = delete;

	/*
	 * Expand @n validated store objects (@geo: their targets' rules; objects with
	 * geo.unaligned may be unaligned) and put the ranges the batch writes into @lock->ranges
	 * (prepare()d). 0; -E2BIG when the bounce area would pass kMaxBounceBytes (*bad_index
	 * the first object that does not fit; message set); -ENOMEM. Copies the sources of
	 * misaligned whole blocks into the bounce area. The objects must stay valid until
	 * finish().
	 */
	int expand(const IoObject *objs, const Geometry *geo, uint32_t n, LockNode *lock, int32_t *bad_index);

	/* Phase 1: the edge blocks to read (none: the batch has only phase 2). */
	[[nodiscard]] bool has_reads() const noexcept { return !reads_.empty(); }
	[[nodiscard]] const IoObject *reads() const noexcept { return reads_.data(); }
	[[nodiscard]] uint32_t read_count() const noexcept { return uint32_t(reads_.size()); }
	[[nodiscard]] kvblk_result *read_results() noexcept { return read_results_.data(); }

	/*
	 * Phase 1 is over (read_results() written): copy each object's bytes over the edge
	 * blocks that were read and make writes() the writes to issue (those of blocks whose
	 * read failed are dropped: their objects fail with the read's error). Allocates nothing.
	 */
	void fill() noexcept;

	/* Phase 2: the writes to issue (after fill()), and room for their results. */
	[[nodiscard]] const IoObject *writes() const noexcept { return writes_.data(); }
	[[nodiscard]] uint32_t write_count() const noexcept { return uint32_t(writes_.size()); }
	[[nodiscard]] kvblk_result *write_results() noexcept { return write_results_.data(); }

	/*
	 * Phase 2 is over (write_results() written): for each object, status = the first failed
	 * read or write of its parts (0 when all succeeded) and bytes = its length or 0, into
	 * results[0..n) (tags left alone); add up @tot.
	 */
	void finish(kvblk_result *results, StoreTotals *tot) noexcept;

	/* Bytes of bounce memory this batch holds. */
	[[nodiscard]] uint64_t bounce_bytes() const noexcept { return bounce_len_; }

private:
	/*
	 * struct Edge - one covering block read and written back.
	 * @read:  its part in reads_.   @write: its write in all_.
	 * @bytes: bytes of it on the target (a block, or up to the end of the file).
	 * @used:  finish(): some object of it succeeded.
	 */
	struct Edge {
		uint32_t read;
		uint32_t write;
		uint64_t bytes;
		bool used;
	};
	/* Object @obj's bytes [src, src + len) of its source onto bounce offset @dst of edge @edge. */
	struct Copy {
		uint32_t obj;
		uint32_t edge;
		uint64_t src;
		uint64_t dst;
		uint64_t len;
	};
	/* The parts of one object: edges (-1: none) and the write of its whole blocks (-1: none). */
	struct Parts {
		int32_t edge[2];
		int32_t whole;
		bool bounced;
	};

	const IoObject *objs_ = nullptr;
	uint32_t n_ = 0;
	std::vector<Parts> parts_;		/* per object */
	std::vector<Edge> edges_;
	std::vector<Copy> copies_;
	std::vector<IoObject> reads_;
	std::vector<kvblk_result> read_results_;
	std::vector<IoObject> all_;		/* every write, issued or not */
	std::vector<int32_t> all_edge_;		/* write -> its edge, or -1 */
	std::vector<int32_t> all_status_;	/* write -> its status (the read's error when dropped) */
	std::vector<IoObject> writes_;		/* the writes issued */
	std::vector<uint32_t> issued_;		/* writes_ index -> all_ index */
	std::vector<kvblk_result> write_results_;
	std::unique_ptr<uint8_t, BounceFree> bounce_;
	uint64_t bounce_len_ = 0;
};

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// The staged path: loads into device (GPU) memory through a bounded pool of pinned host
// bounce buffers, for backends that cannot DMA into device memory (every userspace
// backend, and kmod when kvblk.ko lacks the memory kind).
//
// The staged objects of a batch are taken in order as one stream of bytes and cut into
// pieces that fill the bounce buffers: a buffer holds one piece of a large object, or
// several small objects (each piece starts at a multiple of mem_align in the buffer). The
// pipeline, per batch:
//   1. fill every free bounce buffer with the next pieces and read them all with one
//      Backend::run() (the first round also carries the batch's host objects);
//   2. queue each piece that was read as an asynchronous host-to-device copy on its
//      buffer's own lane (stream); the buffer is busy until that lane is done;
//   3. take back the buffers whose copies are done (without waiting while any is free;
//      waiting for the oldest copy only when none is), and go on with step 1;
// so that the reads of one round run while the copies of the round before are in flight.
// Memory is bounded by buffers * buffer_bytes, allocated once (at the first staged
// registration) and page-locked through the copy engine. The buffers take reserved slots of
// the device's buffer table and are registered with the backend like user buffers (io_uring
// fixed buffers, kvblk.ko registrations), so reads into them map nothing per call.
//
// kvblk_cancel() is seen at the start of each round (step 1): the objects none of whose pieces
// were read end with -ECANCELED, one read in part is read to its end.
//
// Failures stay per object: a read error fails its object (its later pieces are skipped).
// A copy error is known per lane (a CUDA stream reports errors per stream), so it fails the
// objects with a piece in that buffer's fill - the bad object and at most the neighbours
// that shared the buffer - with the engine's reason.
#pragma once

#include "backend.hpp"
#include "buffers.hpp"
#include "copy_engine.hpp"

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace kvblk::detail {

class Stager {
public:
	Stager();
	~Stager();
	Stager(const Stager &) = delete;
	Stager &operator=(const Stager &) = delete;

	/*
	 * The copy engine: testing::Seams::make_copy_engine if installed, else CUDA through the
	 * dlopen'd runtime; created once. 0, or -EOPNOTSUPP (no CUDA runtime), -ENODEV (no GPU)
	 * with kvblk_last_error() set.
	 */
	int ensure_engine();
	[[nodiscard]] CopyEngine *engine() const noexcept { return engine_.get(); }

	/* Pool size for the next ensure_pool() (the pool must be released first to change it). */
	void configure(uint32_t buffers, uint64_t buffer_bytes) noexcept;
	[[nodiscard]] uint32_t buffers() const noexcept { return nbuf_; }
	[[nodiscard]] uint64_t buffer_bytes() const noexcept { return buf_bytes_; }

	/*
	 * Allocate, pin and register the pool if it is not there (needs the engine). 0, or
	 * -ENOMEM with kvblk_last_error() set. Call with the device's batch lock held.
	 */
	int ensure_pool(Backend &be, BufferTable &table, uint32_t logical_block_size, uint32_t mem_align);
	/* Wait for every copy, unregister, unpin and free the pool (batch lock held). */
	void release_pool(Backend &be, BufferTable &table) noexcept;
	/* Bytes of bounce memory allocated now. */
	[[nodiscard]] uint64_t pool_bytes() const noexcept { return pool_bytes_.load(std::memory_order_relaxed); }

	/*
	 * Serve @b, whose objects with path KVBLK_PATH_STAGED go through the pool and the others
	 * straight to @be. Fills every result; returns 0, or -errno when nothing could start.
	 * Counts copies in b.counters.staged_copies. After it, copy_note() holds the engine's
	 * reason for the first failed copy of the batch ("" if none).
	 */
	int run(Backend &be, Batch &b) noexcept;
	[[nodiscard]] const std::string &copy_note() const noexcept { return note_; }

private:
	struct Bounce {
		uint8_t *mem = nullptr;
		size_t len = 0;
		uint32_t slot = KVBLK_BUF_NONE;	/* reserved buffer-table slot, or NONE */
		int32_t fixed = -1;		/* the backend's registration */
		bool pinned = false;
		std::vector<uint32_t> pieces;	/* pieces whose copies are queued on this lane */
	};
	struct Piece {
		uint32_t obj;
		uint64_t off;		/* in the object */
		uint64_t len;
		uint64_t buf_off;	/* in its bounce buffer */
	};
	struct Ref {
		bool direct;
		uint32_t index;	/* object (direct) or piece */
		uint32_t lane;
	};

	int serve(Backend &be, Batch &b);
	void fail_object(uint32_t obj, int32_t st, const std::string &why);
	void finish_lane(uint32_t lane, int r, const std::string &why);
	void reap();
	void wait_oldest();
	bool fill(uint32_t lane, const Batch &b);

	std::unique_ptr<CopyEngine> engine_;
	uint32_t nbuf_;
	uint64_t buf_bytes_;
	uint64_t chunk_bytes_ = 0;	/* usable bytes of a buffer (whole blocks) */
	uint32_t mem_align_ = 1;
	std::vector<Bounce> pool_;
	std::atomic<uint64_t> pool_bytes_{0};

	/* Per-batch state. */
	std::vector<int32_t> status_;
	std::vector<Piece> pieces_;
	std::vector<uint32_t> staged_;	/* staged objects in order */
	size_t cur_ = 0;		/* next staged object to cut... */
	uint64_t cur_off_ = 0;		/* ...from this offset */
	std::vector<uint32_t> free_;
	std::deque<uint32_t> busy_;	/* lanes with a copy queued, oldest first */
	std::vector<IoObject> sub_;
	std::vector<kvblk_result> subres_;
	std::vector<Ref> refs_;
	std::string note_;
};

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// The counters of one device (kvblk_stats), safe to read while loads run.
#pragma once

#include "backend.hpp"

#include <kvblk/kvblk.h>

#include <atomic>
#include <cstdint>

namespace kvblk::detail {

/* Outcome of one served batch, as the scheduler summarises it (async.cpp). */
struct BatchSummary {
	kvblk_backend backend;
	IoDir dir;
	bool buffered;
	kvblk_path path;	/* the batch's path */
	uint32_t objects;
	uint64_t bytes_ok;	/* bytes of the objects that succeeded */
	uint32_t errors_io;
	uint32_t errors_eagain;
	uint32_t errors_other;
	uint64_t elapsed_ns;
	uint64_t bytes_by_path[KVBLK_PATH_MAX];	/* bytes_ok by each object's own path */
	uint64_t unaligned_objects;	/* KVBLK_DESC_UNALIGNED objects that needed a bounced edge */
	uint64_t unaligned_extra_bytes;	/* their covering bytes beyond what they wanted */
	uint64_t short_eof_objects;	/* loads KVBLK_DESC_SHORT_EOF cut at the end of a file */
	uint64_t unaligned_stores;	/* KVBLK_DESC_UNALIGNED stores through the bounce area */
	uint64_t rmw_read_bytes;	/* edge blocks they read to write back */
};

class Stats {
public:
	Stats() noexcept { reset(); }

	void record_batch(const BatchSummary &s, const BatchCounters &c) noexcept;
	void record_rejected() noexcept { add(rejected_batches_, 1); }
	void record_memlock_fallback() noexcept { add(memlock_fallbacks_, 1); }
	void record_p2p_fallback() noexcept { add(p2p_fallbacks_, 1); }
	/* A batch became outstanding; @outstanding batches are now. */
	void record_submit(bool priority, uint64_t outstanding) noexcept;
	/* A store batch was parked behind an overlapping read-modify-write (range locks). */
	void record_range_wait() noexcept { add(store_range_waits_, 1); }
	/* @n objects of a cancelled batch ended with -ECANCELED. */
	void record_cancelled(uint64_t n) noexcept { add(cancelled_objects_, n); }

	/* Copy into @out (its stats_size already checked); */
	void snapshot(kvblk_stats *out) const noexcept;
	void reset() noexcept;

private:
	using Counter = std::atomic<uint64_t>;
	static void add(Counter &c, uint64_t v) noexcept { c.fetch_add(v, std::memory_order_relaxed); }

	Counter batches_, objects_, commands_, bytes_read_, bytes_written_, rejected_batches_;
	Counter errors_io_, errors_eagain_, errors_other_, eagain_retries_, short_resubmits_;
	Counter memlock_fallbacks_, buffered_batches_, cq_overflows_, inflight_peak_;
	Counter batches_by_backend_[KVBLK_BACKEND_MAX];
	Counter batch_lat_hist_[KVBLK_LAT_BUCKETS];
	Counter cmd_lat_hist_[KVBLK_LAT_BUCKETS];
	Counter batches_by_path_[KVBLK_PATH_MAX];
	Counter bytes_by_path_[KVBLK_PATH_MAX];
	Counter staged_copies_, p2p_fallbacks_;
	Counter unaligned_objects_, unaligned_extra_bytes_;
	Counter priority_batches_, cancelled_objects_, outstanding_peak_;
	Counter unaligned_stores_, rmw_read_bytes_, store_range_waits_, short_eof_objects_;

	static void raise(Counter &peak, uint64_t v) noexcept
	{
		uint64_t p = peak.load(std::memory_order_relaxed);
		while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed))
			;
	}
};

} // namespace kvblk::detail

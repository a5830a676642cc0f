// SPDX-License-Identifier: MIT
#include "stats.hpp"

namespace kvblk::detail {

void Stats::record_batch(const BatchSummary &s, const BatchCounters &c) noexcept
{
	add(batches_, 1);
	add(objects_, s.objects);
	add(commands_, c.commands);
	add(s.dir == IoDir::read ? bytes_read_ : bytes_written_, s.bytes_ok);
	add(errors_io_, s.errors_io);
	add(errors_eagain_, s.errors_eagain);
	add(errors_other_, s.errors_other);
	add(eagain_retries_, c.eagain_retries);
	add(short_resubmits_, c.short_resubmits);
	add(cq_overflows_, c.cq_overflows);
	if (s.buffered)
		add(buffered_batches_, 1);
	/* A batch that several backends served (the kmod lanes) counts once for each. */
	if (c.served_by) {
		for (unsigned b = 0; b < KVBLK_BACKEND_MAX; b++)
			if (c.served_by & (1u << b))
				add(batches_by_backend_[b], 1);
	} else if (unsigned(s.backend) < KVBLK_BACKEND_MAX) {
		add(batches_by_backend_[s.backend], 1);
	}
	add(unaligned_objects_, s.unaligned_objects);
	add(unaligned_extra_bytes_, s.unaligned_extra_bytes);
	add(short_eof_objects_, s.short_eof_objects);
	add(unaligned_stores_, s.unaligned_stores);
	add(rmw_read_bytes_, s.rmw_read_bytes);
	if (unsigned(s.path) < KVBLK_PATH_MAX)
		add(batches_by_path_[s.path], 1);
	for (unsigned i = 0; i < KVBLK_PATH_MAX; i++)
		add(bytes_by_path_[i], s.bytes_by_path[i]);
	add(staged_copies_, c.staged_copies);
	add(batch_lat_hist_[lat_bucket(s.elapsed_ns)], 1);
	for (unsigned i = 0; i < KVBLK_LAT_BUCKETS; i++)
		if (c.cmd_lat_hist[i])
			add(cmd_lat_hist_[i], c.cmd_lat_hist[i]);
	raise(inflight_peak_, c.inflight_peak);
}

void Stats::record_submit(bool priority, uint64_t outstanding) noexcept
{
	if (priority)
		add(priority_batches_, 1);
	raise(outstanding_peak_, outstanding);
}

void Stats::snapshot(kvblk_stats *out) const noexcept
{
	auto get = [](const Counter &c) { return c.load(std::memory_order_relaxed); };
	out->batches = get(batches_);
	out->objects = get(objects_);
	out->commands = get(commands_);
	out->bytes_read = get(bytes_read_);
	out->bytes_written = get(bytes_written_);
	out->rejected_batches = get(rejected_batches_);
	out->errors_io = get(errors_io_);
	out->errors_eagain = get(errors_eagain_);
	out->errors_other = get(errors_other_);
	out->eagain_retries = get(eagain_retries_);
	out->short_resubmits = get(short_resubmits_);
	out->memlock_fallbacks = get(memlock_fallbacks_);
	out->buffered_batches = get(buffered_batches_);
	out->cq_overflows = get(cq_overflows_);
	out->inflight_peak = get(inflight_peak_);
	for (unsigned i = 0; i < KVBLK_BACKEND_MAX; i++)
		out->batches_by_backend[i] = get(batches_by_backend_[i]);
	for (unsigned i = 0; i < KVBLK_LAT_BUCKETS; i++) {
		out->batch_lat_hist[i] = get(batch_lat_hist_[i]);
		out->cmd_lat_hist[i] = get(cmd_lat_hist_[i]);
	}
	for (unsigned i = 0; i < KVBLK_PATH_MAX; i++) {
		out->batches_by_path[i] = get(batches_by_path_[i]);
		out->bytes_by_path[i] = get(bytes_by_path_[i]);
	}
	out->staged_copies = get(staged_copies_);
	out->p2p_fallbacks = get(p2p_fallbacks_);
	out->priority_batches = get(priority_batches_);
	out->cancelled_objects = get(cancelled_objects_);
	out->outstanding_peak = get(outstanding_peak_);
	out->unaligned_objects = get(unaligned_objects_);
	out->unaligned_extra_bytes = get(unaligned_extra_bytes_);
	out->unaligned_stores = get(unaligned_stores_);
	out->rmw_read_bytes = get(rmw_read_bytes_);
	out->store_range_waits = get(store_range_waits_);
	out->short_eof_objects = get(short_eof_objects_);
}

void Stats::reset() noexcept
{
	for (Counter *c : {&batches_, &objects_, &commands_, &bytes_read_, &bytes_written_,
			   &rejected_batches_, &errors_io_, &errors_eagain_, &errors_other_,
			   &eagain_retries_, &short_resubmits_, &memlock_fallbacks_, &buffered_batches_,
			   &cq_overflows_, &inflight_peak_, &staged_copies_, &p2p_fallbacks_, &priority_batches_,
			   &cancelled_objects_, &outstanding_peak_, &unaligned_objects_, &unaligned_extra_bytes_,
			   &unaligned_stores_, &rmw_read_bytes_, &store_range_waits_, &short_eof_objects_})
		c->store(0, std::memory_order_relaxed);
	for (Counter &c : batches_by_backend_)
		c.store(0, std::memory_order_relaxed);
	for (unsigned i = 0; i < KVBLK_PATH_MAX; i++) {
		batches_by_path_[i].store(0, std::memory_order_relaxed);
		bytes_by_path_[i].store(0, std::memory_order_relaxed);
	}
	for (unsigned i = 0; i < KVBLK_LAT_BUCKETS; i++) {
		batch_lat_hist_[i].store(0, std::memory_order_relaxed);
		cmd_lat_hist_[i].store(0, std::memory_order_relaxed);
	}
}

} // namespace kvblk::detail

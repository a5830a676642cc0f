// SPDX-License-Identifier: MIT
// struct kvblk_dev: one handle of the C API, shared by the files that implement it (core.cpp:
// close and queries; open.cpp: open and the backend choice; registration.cpp: buffers;
// batch.cpp: a batch's checks (prepare); submit.cpp: kvblk_submit() and the calls built on
// it; targets_api.cpp: kvblk_add_target() and friends; compat.cpp: the KVBLK_0.1 entry
// points).
#pragma once

#include "async.hpp"
#include "backend.hpp"
#include "buffers.hpp"
#include "fork_guard.hpp"
#include "staging.hpp"
#include "stats.hpp"
#include "targets.hpp"
#include "validate.hpp"

#include <kvblk/kvblk.h>

#include <memory>
#include <mutex>

/**
 * struct kvblk_dev - an open device.
 * @targets:        target 0 (kvblk_open()'s path) and the added ones.
 * @info:           what kvblk_get_info() reports (target 0; @targets counted on each call).
 * @config:         the effective options as the backend got them for target 0; added
 *                  targets are described to the backend with a copy of it.
 * @backend:        serves every batch (on a kmod device: the lanes, lanes.cpp).
 * @buffers:        registered buffers.
 * @stats:          counters.
 * @io_mutex:       the staged path's pool: a staged batch runs under it (on the dispatch
 *                  thread), and kvblk_set_staging()/kvblk_register_buffer() change the pool
 *                  under it; also guards @staged_buffers. Other batches never take it.
 * @stager:         the staged path (CUDA destinations without P2P).
 * @staged_buffers: live staged buffers.
 * @staging_default_buffers, @staging_default_bytes: kvblk_set_staging()'s 0 arguments: the
 *                  process-wide defaults when the device was opened (defaults.hpp).
 * @sched:          the outstanding batches (async.hpp); destroyed first, in kvblk_close().
 * @owner:          the process that opened it (fork_guard.hpp): every call checks it first.
 */
struct kvblk_dev {
	kvblk::detail::TargetTable targets;
	kvblk_dev_info info{};
	kvblk::detail::BackendConfig config;
	std::unique_ptr<kvblk::detail::Backend> backend;
	kvblk::detail::BufferTable buffers;
	kvblk::detail::Stats stats;
	std::mutex io_mutex;
	kvblk::detail::Stager stager;
	uint32_t staged_buffers = 0;
	uint32_t staging_default_buffers = KVBLK_DEFAULT_STAGING_BUFFERS;
	uint64_t staging_default_bytes = KVBLK_DEFAULT_STAGING_BUFFER_BYTES;
	std::unique_ptr<kvblk::detail::Scheduler> sched;
	kvblk::detail::Owner owner;

	[[nodiscard]] kvblk::detail::Target &t0() noexcept { return targets.t0().t; }
};

namespace kvblk::detail {

/*
 * Check a batch (argument rules, max_descs, every descriptor against its target and buffer)
 * and turn it into a Job: its objects (unaligned ones expanded into parts), its pins of
 * buffers and targets, its path, its results (@results, or the job's own array when NULL)
 * initialised with the tags. 0 and *job; or -errno with kvblk_last_error() set, @results
 * (when given) filled as for a rejected call (the bad descriptor its error, the others
 * -ECANCELED), *bad_index the rejected descriptor (-1: the whole call), nothing pinned and
 * the rejection counted. batch.cpp.
 */
int prepare_batch(kvblk_dev *dev, const char *fn, IoDir dir, const DescView &descs, uint32_t n,
		  kvblk_result *results, std::unique_ptr<Job> *job, int32_t *bad_index);

/*
 * One load_many/store_many call: prepare_batch(), kvblk_submit()'s queueing and a wait
 * (submit.cpp). @descs: 0.3 descriptors, or 0.2 ones from the KVBLK_0.1 entry points
 * (compat.cpp).
 */
int do_batch(kvblk_dev *dev, IoDir dir, const DescView &descs, uint32_t n, kvblk_result *results,
	     kvblk_batch_info *info);

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// struct kvblk_dev: what one handle owns. Shared by core.cpp (open/close, buffers, queries)
// and submit.cpp (batches: kvblk_submit() and the calls built on it).
#pragma once

#include "async.hpp"
#include "backend.hpp"
#include "buffers.hpp"
#include "staging.hpp"
#include "stats.hpp"
#include "target.hpp"

#include <kvblk/kvblk.h>

#include <memory>
#include <mutex>

struct kvblk_dev {
	kvblk::detail::Target target;
	kvblk_dev_info info{};
	std::unique_ptr<kvblk::detail::Backend> backend;
	kvblk::detail::BufferTable buffers;
	kvblk::detail::Stats stats;
	std::mutex io_mutex;		/* batches run synchronously (dispatch thread); the staging pool */
	kvblk::detail::Stager stager;	/* staged path: engine and pool (pool under io_mutex) */
	uint32_t staged_buffers = 0;	/* live staged buffers (under io_mutex) */
	/* Outstanding batches; destroyed first (it unpins buffers of the jobs it still holds). */
	std::unique_ptr<kvblk::detail::Scheduler> sched;
};

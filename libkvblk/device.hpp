// SPDX-License-Identifier: MIT
// struct kvblk_dev: one handle of the C API, shared by the files that implement it (core.cpp:
// open, close, buffers; batch.cpp: load/store; targets_api.cpp: kvblk_add_target() and
// friends; compat.cpp: the KVBLK_0.1 entry points).
#pragma once

#include "backend.hpp"
#include "buffers.hpp"
#include "staging.hpp"
#include "stats.hpp"
#include "targets.hpp"
#include "validate.hpp"

#include <kvblk/kvblk.h>

#include <memory>
#include <mutex>
#include <vector>

/**
 * struct kvblk_dev - an open device.
 * @targets:        target 0 (kvblk_open()'s path) and the added ones.
 * @info:           what kvblk_get_info() reports (target 0; @targets counted on each call).
 * @config:         the effective options as the backend got them for target 0; added
 *                  targets are described to the backend with a copy of it.
 * @backend:        serves every batch (on a kmod device: the lanes, lanes.cpp).
 * @buffers:        registered buffers.
 * @stats:          counters.
 * @io_mutex:       one batch at a time; also guards @objects, @geometry and the stager's pool.
 * @objects, @geometry: the batch being served.
 * @stager:         the staged path (CUDA destinations without P2P).
 * @staged_buffers: live staged buffers (under io_mutex).
 */
struct kvblk_dev {
	kvblk::detail::TargetTable targets;
	kvblk_dev_info info{};
	kvblk::detail::BackendConfig config;
	std::unique_ptr<kvblk::detail::Backend> backend;
	kvblk::detail::BufferTable buffers;
	kvblk::detail::Stats stats;
	std::mutex io_mutex;
	std::vector<kvblk::detail::IoObject> objects;
	std::vector<kvblk::detail::Geometry> geometry;
	kvblk::detail::Stager stager;
	uint32_t staged_buffers = 0;

	[[nodiscard]] kvblk::detail::Target &t0() noexcept { return targets.t0().t; }
};

namespace kvblk::detail {

/*
 * One load_many/store_many call (batch.cpp). @descs: 0.3 descriptors, or 0.2 ones from the
 * KVBLK_0.1 entry points (compat.cpp).
 */
int do_batch(kvblk_dev *dev, IoDir dir, const DescView &descs, uint32_t n, kvblk_result *results,
	     kvblk_batch_info *info);

} // namespace kvblk::detail

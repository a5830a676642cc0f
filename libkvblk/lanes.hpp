// SPDX-License-Identifier: MIT
// Lanes: one device served by several backends. A kmod device reads its own namespace
// through kvblk.ko (lane 0). A target added with kvblk_add_target() goes first to lane 0's
// backend (Backend::add_target()): a kvblk.ko with several targets per context
// (KVBLK_FEAT_TARGETS) attaches it to lane 0's own context, so it stays on lane 0 and a batch
// over such targets is never split (one kvblk.ko call, or one io_uring command per max_descs
// descriptors). Only what lane 0 refuses (KVBLK_OPEN_BUFFERED, a kvblk.ko without the
// feature, the module's refusal; the reason is kept) gets a lane: a block device kvblk.ko
// attaches gets a kvblk.ko context of its own (its own kmod backend), and any other target is
// served by one uring backend shared by all of them. Each backend is a lane; every target
// belongs to one lane; removing a target tells its lane's backend (remove_target()).
//
// A batch is split by lane. The lanes run at once: lane 0 on the calling thread, every other
// lane with work on a persistent thread of its own; the batch is over when all are done.
// Results go back to their objects, counters are merged, and BatchCounters.served_by names
// the backend of each lane that served part of it (stats.batches_by_backend counts each).
// A batch whose objects are all on lane 0 goes to it untouched; when lane 0 is native
// (kvblk.ko takes io_uring commands) such a batch is started on it (start()) rather than run.
//
// Registered buffers are registered with every lane (also with lanes created later); each
// lane keeps its own fixed-buffer index, put into its objects when the batch is split.
// Device memory (CUDA, dma-buf) registered for P2P is registered with every lane that can
// take it; an object whose lane could not (a uring lane) fails with -EOPNOTSUPP.
//
// The split, dispatch and merge are the same for any backends: the unit tests build Lanes
// from userspace backends (psync, threadpool, uring) on files.
#pragma once

#include "backend.hpp"
#include "target_slots.hpp"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kvblk::detail {

class Lanes;

/*
 * Where a new target goes: put it on a lane of @lanes (an existing one, or one made with
 * add_lane()) and return its index, or -errno with kvblk_last_error() set to refuse the
 * target. *reason: why that lane (kvblk_get_target_info()'s backend_reason).
 */
using LanePlacement = std::function<int(Lanes &lanes, uint32_t id, BackendConfig &t, std::string *reason)>;

class Lanes final : public Backend {
public:
	/* @lane0 serves target 0 (and whatever @place puts on lane 0). */
	Lanes(std::unique_ptr<Backend> lane0, LanePlacement place);
	~Lanes() override;

	/* Add a lane (registering every live buffer with it); its index. Throws std::system_error
	 * when its thread cannot start, std::bad_alloc. */
	uint32_t add_lane(std::unique_ptr<Backend> be);
	/* The backend of lane @lane (lane_count() > @lane). */
	[[nodiscard]] Backend &lane(uint32_t lane) noexcept;
	[[nodiscard]] uint32_t lane_count() noexcept;
	/* Whether lane @lane exists (a lane left without targets is dropped). */
	[[nodiscard]] bool lane_exists(uint32_t lane) noexcept;
	/* The lane of target @id (0 for unknown ids). */
	[[nodiscard]] uint32_t lane_of(uint32_t id) const noexcept;

	kvblk_backend kind() const noexcept override;
	kvblk_backend kind_for(IoDir dir) const noexcept override;
	kvblk_path path() const noexcept override;
	int run(Batch &b) noexcept override;
	/*
	 * Lane 0's: a native lane 0 (kmod with io_uring commands) starts the batches whose every
	 * object is on it; a batch with objects on other lanes is split by run() on the
	 * dispatch thread.
	 */
	kvblk_async async_mode() const noexcept override;
	bool can_start(const Batch &b) const noexcept override;
	bool run_sync_inline() const noexcept override;
	void start(Batch &b) noexcept override;
	void cancel(uint64_t id) noexcept override;
	BufferRegistration register_buffer(uint32_t id, uint8_t *base, uint64_t len) noexcept override;
	int register_device_buffer(uint32_t id, int kind, int dmabuf_fd, uint64_t addr, uint64_t len) noexcept override;
	int check_buffer(uint32_t id) noexcept override;
	void unregister_buffer(uint32_t id, int32_t fixed_index) noexcept override;
	int add_target(uint32_t id, BackendConfig &t) noexcept override;
	void remove_target(uint32_t id) noexcept override;
	kvblk_backend target_kind(uint32_t id, IoDir dir, std::string *reason) const noexcept override;

private:
	struct Lane;
	struct Registration {
		bool live = false;
		bool device = false;
		int kind = KVBLK_MEM_HOST;
		int dmabuf_fd = -1;
		uint8_t *base = nullptr;	/* host buffers */
		uint64_t addr = 0;		/* device buffers */
		uint64_t len = 0;
	};
	struct Placement {
		uint32_t lane = 0;
		std::string reason;
	};

	void register_with(Lane &l, uint32_t id) noexcept;
	int split_and_run(Batch &b, std::vector<std::shared_ptr<Lane>> &lanes);

	/* The lanes other than 0 as they are now (under mu_; their backends' calls outside it). */
	std::vector<std::shared_ptr<Lane>> other_lanes();

	/*
	 * Locks: reg_mu_ serialises the registration calls (register, unregister, check, and a
	 * new lane's registrations of the live buffers) and is held across the backends' calls,
	 * which pin pages (kvblk.ko, io_uring fixed buffers: seconds per GiB); it guards regs_ and
	 * every lane's fixed and device_ok. mu_ guards lanes_, placement_ and targets_off_lane0_
	 * and is never held across a backend call that may pin or wait for I/O, so batches
	 * (can_start(), run()) and target queries never wait for a registration. Order: reg_mu_,
	 * then mu_.
	 */
	LanePlacement place_;
	Backend *lane0_;	/* lanes_[0]'s backend: fixed for life, read without mu_ */
	Lane *l0_;		/* lanes_[0]: fixed for life, read without mu_ */
	std::mutex reg_mu_;	/* regs_, Lane::fixed, Lane::device_ok (writes) */
	mutable std::mutex mu_;	/* lanes_, placement_, targets_off_lane0_ */
	std::vector<std::shared_ptr<Lane>> lanes_;
	std::vector<Registration> regs_;
	TargetSlots<Placement> placement_;
	uint32_t targets_off_lane0_ = 0;	/* live targets on lanes >= 1 (under mu_) */
};

/*
 * The lanes of a kmod device: @kmod (target 0) on lane 0, and every target added later that
 * @kmod's own kvblk.ko context takes (KmodBackend::add_target()); of the others, a block
 * device gets a kmod lane of its own when kvblk.ko attaches to it, everything else (files,
 * KVBLK_OPEN_BUFFERED, devices the module refuses) goes to one shared uring lane made from
 * @base's queue depth, workers and retries. kvblk_get_target_info()'s backend_reason says
 * which, and why the context did not take it.
 */
std::unique_ptr<Backend> make_kmod_lanes(std::unique_ptr<Backend> kmod, const BackendConfig &base);

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// Fault-injection seam for the unit tests (internal; not installed, not exported from
// libkvblk.so). Tests link kvblk_static and install a Seams object; the library reads one
// atomic pointer per batch or registration and pays nothing more when none is installed.
#pragma once

#include <kvblk/kvblk.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace kvblk::detail {
class Backend;
class CopyEngine;
}

namespace kvblk::testing {

/**
 * struct CommandInfo - one completed read/write command, as the completion hook sees it.
 * @backend:    enum kvblk_backend that issued it.
 * @write:      a store command.
 * @object:     index of its object in the batch.
 * @cmd_offset: byte offset of the command inside its object (multiple of max_cmd_bytes;
 *              0 for the threadpool, whose commands are whole objects).
 * @cmd_length: bytes of the whole command.
 * @done:       bytes of it already transferred before this submission (short transfers).
 * @attempt:    0 for the first submission, +1 for every resubmission (short or -EAGAIN).
 * @obj_offset: device (file) byte offset of its object, so that hooks can pick commands by
 *              where they read (the staged path's reads are objects of its own batches).
 */
struct CommandInfo {
	kvblk_backend backend;
	bool write;
	uint32_t object;
	uint64_t cmd_offset;
	uint64_t cmd_length;
	uint64_t done;
	uint32_t attempt;
	uint64_t obj_offset = 0;
};

/**
 * struct Seams - the hooks; any member may be empty.
 * @on_complete:       called with every command's result (bytes or -errno) as the kernel
 *                     gave it; returns the result the backend should act on (a smaller
 *                     count, -EAGAIN, -EIO, ...). Called from I/O threads concurrently.
 * @on_fixed_register: called before each io_uring fixed-buffer registration; a negative
 *                     return makes the registration fail with that errno (as the kernel
 *                     does under RLIMIT_MEMLOCK with -ENOMEM).
 * @on_open_direct:    called before kvblk_open() opens its target with O_DIRECT; a negative
 *                     return makes that open(2) fail with that errno (as a file system
 *                     without direct I/O does with -EINVAL).
 * @kmod_node:         path checked instead of /dev/kvblk by the AUTO backend choice.
 * @kmod_no_uring_cmd: kmod devices opened after this ignore KVBLK_FEAT_URING_CMD and serve
 *                     their batches on the dispatch thread, as with a module without it.
 * @kmod_no_store:     kmod devices opened after this ignore KVBLK_FEAT_STORE and store
 *                     through a uring backend on the same fd, as with a module without it.
 * @kmod_no_targets:   kmod devices opened after this ignore KVBLK_FEAT_TARGETS for the targets
 *                     added to them: every one goes to a lane (a kvblk.ko context of its own,
 *                     or uring), as with a module without it.
 * @kmod_ring_hold:    while it points to true, the kmod ring (kmod_ring.cpp) leaves its
 *                     queue alone: commands queued meanwhile stay there (kvblk_cancel()
 *                     finds them not issued). The ring looks again when it is woken.
 * @kmod_pass:         called as an asynchronous kmod batch (kvblk_submit() on a kvblk.ko ring)
 *                     queues a pass on the ring, before its calls are queued: the batch's
 *                     ticket, the pass (0 first), the temporary registrations (plain
 *                     destinations) of the pass, and those held by all the backend's batches
 *                     then. On the submitting thread for a first pass, else on the ring's.
 * @uring_overcommit:  > 1: rings created after this keep overcommit * queue_depth commands in
 *                     flight with a completion queue of only queue_depth entries, and reap only
 *                     when it is full, so that completion-queue overflow really happens.
 * @make_copy_engine:  when set, devices create their staged path's copy engine with it
 *                     (at their first staged registration) instead of loading CUDA:
 *                     typically a kvblk::detail::HostCopyEngine, whose "device memory" is
 *                     host memory (libkvblk/copy_engine.hpp).
 * @wrap_backend:      when set, kvblk_open() hands the backend it made for a device (the
 *                     kmod lanes included) to it and serves the device with what it returns
 *                     (a backend that forwards to the one it got and watches the calls).
 * @on_slot_wait:      called (with the scheduler's lock held) by a submitter about to wait
 *                     for a free batch slot (max_batches outstanding).
 * @on_slot_taken:     called by a submitter that waited and got a slot; a negative return
 *                     fails the submit with that errno there, as a dispatch thread that
 *                     cannot start does.
 * @on_queued:         called (with the scheduler's lock held) with the ticket of each batch
 *                     queued for the device's dispatch thread.
 * @on_wait_sleep:     called (with the scheduler's lock held) with the ticket each time a
 *                     kvblk_wait() (or a synchronous call's wait) is about to sleep.
 * @on_ring_queued:    called (no lock held) after a batch is put on the io_uring core's queue
 *                     for the rings' threads (uring, uring_cmd; uring_core.hpp), with true for
 *                     a synchronous call's batch that could not be driven on its own thread.
 */
struct Seams {
	std::function<int64_t(const CommandInfo &, int64_t)> on_complete;
	std::function<int(uint32_t buf_id, uint64_t len)> on_fixed_register;
	std::function<int(const char *path)> on_open_direct;
	const char *kmod_node = nullptr;
	bool kmod_no_uring_cmd = false;
	bool kmod_no_store = false;
	bool kmod_no_targets = false;
	const std::atomic<bool> *kmod_ring_hold = nullptr;
	std::function<void(uint64_t batch, uint32_t pass, uint32_t ranges, uint32_t held)> kmod_pass;
	uint32_t uring_overcommit = 0;
	std::function<std::unique_ptr<kvblk::detail::CopyEngine>()> make_copy_engine;
	std::function<std::unique_ptr<kvblk::detail::Backend>(std::unique_ptr<kvblk::detail::Backend>)> wrap_backend;
	std::function<void()> on_slot_wait;
	std::function<int()> on_slot_taken;
	std::function<void(uint64_t ticket)> on_queued;
	std::function<void(uint64_t ticket)> on_wait_sleep;
	std::function<void(bool sync)> on_ring_queued;
};

namespace internal {
extern std::atomic<const Seams *> g_seams;
}

/* Install @seams (nullptr removes them). @seams must outlive every call made while installed. */
inline void install(const Seams *seams) noexcept
{
	internal::g_seams.store(seams, std::memory_order_release);
}

/* The installed seams, or nullptr. */
inline const Seams *active() noexcept
{
	return internal::g_seams.load(std::memory_order_acquire);
}

/* Apply the completion hook, if any, to one command result. */
inline int64_t filter_completion(const Seams *s, const CommandInfo &cmd, int64_t res)
{
	if (s && s->on_complete)
		return s->on_complete(cmd, res);
	return res;
}

} // namespace kvblk::testing

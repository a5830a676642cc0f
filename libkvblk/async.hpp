// SPDX-License-Identifier: MIT
// The per-device scheduler behind kvblk_submit(), kvblk_reap(), kvblk_wait(), kvblk_cancel()
// and kvblk_event_fd() (and so behind kvblk_load_many()/kvblk_store_many(), which are a
// submit and a wait).
//
// A batch becomes a Job at submit time (prepare_batch(), batch.cpp): the validated objects
// (and the aligned parts of unaligned ones), the results array, the pins of its registered
// buffers and targets and the caller's options are owned by the Job, so the descriptor
// array is free on return. The Job is outstanding from submit until its batch
// completion entry is taken (by kvblk_reap() or kvblk_wait()); max_batches bounds how many
// are. It progresses one of two ways:
//   - native (uring, uring_cmd, kmod with a kvblk.ko that takes io_uring commands):
//     Backend::start() hands it to the rings at once; the backend keeps commands of every
//     started batch in flight and orders them (priority batches first) itself;
//   - dispatch: one thread per device, created when the first such job comes, takes queued
//     jobs (priority ones ahead of the others) and serves each with a synchronous
//     Backend::run() (psync, threadpool, kmod without io_uring commands, and what a native
//     backend's can_start() declines: kmod loads into plain pointers) or Stager::run() (the
//     staged CUDA path, on every backend). One job is served at a time.
//     A synchronous call (kvblk_load_many()) that finds nothing queued and nothing being
//     served is served on its own thread instead, as the dispatch thread would serve it:
//     no wake-up of the dispatch thread and back, and no dispatch thread made for it
//     (staged batches always go to it). So is such a call to a native backend that says
//     run_sync_inline() (kmod: one ioctl rather than a trip through its ring's thread).
// When the last object of a Job completes, complete() folds unaligned parts back into the
// caller's results (copying their bounced edges), records the stats and posts its
// completion entries; the pins drop when the batch entry is taken.
//
// Stores take range locks (range_lock.hpp) when they are submitted, in submission order: a
// store that meets the edge blocks of an earlier store's read-modify-write (or whose own
// edge blocks meet an earlier store) is parked, outstanding but neither started nor queued,
// until those stores complete; complete() releases a job's locks and starts (native) or
// queues (dispatch) the parked jobs that no longer wait. An unaligned store with edge blocks
// runs in two phases (unaligned.hpp): its edge blocks are read, then its writes issued.
// Natively, the write phase is started from the read phase's batch_done() (on the backend's
// completion thread) when the backend allows it (Backend::starts_from_batch_done()); other
// backends' such stores go to the dispatch path, which runs both phases in turn (serve()). Entries wait in one completion queue, which kvblk_reap() takes from;
// kvblk_wait() claims its ticket's entries so that no reaper sees them (synchronous calls
// are claimed from birth). An eventfd is readable exactly while the queue is not empty.
// Room for every entry a batch can post is reserved when it is submitted, so posting never
// allocates: no completion is lost to an allocation failure on an I/O thread.
//
// Waits: kvblk_reap() and kvblk_wait() sleep on futex words (futex.hpp), so that a signal
// handler run on the waiting thread ends the wait with -EINTR; kvblk_shutdown() (shutdown())
// ends every wait and every wait for a batch slot at once and refuses what would wait
// later. A kvblk_load_many() waits for its own batch through both: its batch owns the
// caller's memory until it ends.
//
// Locking: one mutex (mu_) guards the ticket table, the dispatch queue, the completion
// queue and the eventfd's state; it is never held while a backend runs or calls back.
#pragma once

#include "backend.hpp"
#include "pins.hpp"
#include "range_lock.hpp"
#include "stats.hpp"
#include "unaligned.hpp"
#include "validate.hpp"

#include <kvblk/kvblk.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kvblk::detail {

class Scheduler;

/**
 * struct Job - one outstanding batch.
 * @ticket, @user_data, @flags: as kvblk_submit() got them (KVBLK_SUBMIT_*).
 * @sync:         a kvblk_load_many()/kvblk_store_many() call: its entries never reach reapers.
 * @path, @backend: the batch's enum kvblk_path and the backend that serves it.
 * @buffered:     some target of the batch goes through the page cache.
 * @objects:      the validated objects, one per descriptor; @geometry their targets' rules;
 *                @results the caller's array or @own_results.
 * @any_unaligned: a load: the backend reads @unaligned's parts instead of @objects (their
 *                results are folded into @results by complete()).
 * @split_store:  a store with KVBLK_DESC_UNALIGNED objects: the backend moves @store's reads
 *                (@phase read) and then its writes (@phase write) instead of @objects.
 * @phase:        what the backend moves now: @objects or @unaligned's parts (whole), or one
 *                of @store's two phases.
 * @lock:         a store's ranges (empty for loads), registered with the scheduler's range
 *                locks from submit to complete.
 * @pins:         registered buffers and targets it uses, unpinned when the job is freed
 *                (its completion taken).
 * @defer_object_entries: post the per-object entries only once the whole batch is over,
 *                (for objects whose bytes are fixed up after the batch, see complete()).
 * Fields below @t_submit belong to the scheduler.
 */
struct Job final : BatchSink {
	Job(BufferTable &buffers, TargetTable &targets) noexcept : pins(buffers, targets) { lock.owner = this; }

	uint64_t ticket = 0;
	uint64_t user_data = 0;
	uint32_t flags = 0;
	bool sync = false;
	IoDir dir = IoDir::read;
	kvblk_path path = KVBLK_PATH_HOST;
	kvblk_backend backend = KVBLK_BACKEND_AUTO;
	bool buffered = false;
	std::vector<IoObject> objects;
	std::vector<Geometry> geometry;
	std::vector<kvblk_result> own_results;
	kvblk_result *results = nullptr;
	bool any_unaligned = false;
	UnalignedBatch unaligned;
	bool split_store = false;
	UnalignedStore store;
	enum class Phase : uint8_t { whole, read, write } phase = Phase::whole;
	LockNode lock;
	BatchPins pins;
	bool defer_object_entries = false;

	bool internal = false;		/* the library's own batch (kvblk_check_buffer()'s probe): not counted */

	uint64_t t_submit = 0;
	Batch batch{};
	Scheduler *sched = nullptr;
	std::atomic<bool> cancel_requested{false};
	std::atomic<uint32_t> objects_posted{0};	/* per-object entries posted live */
	int fatal = 0;					/* the backend could not start it */
	std::string note;				/* staged path: the copy engine's reason */
	uint32_t first_failed = 0;			/* index of the first failed object, or count */
	uint64_t bytes_device = 0;			/* kvblk_batch_info.bytes_device */
	BatchCounters read_counters;			/* a split store's read phase */

	/* Under Scheduler::mu_. */
	enum class State : uint8_t { queued, running, completed } state = State::queued;
	bool native = false;
	bool parked = false;		/* waits for the range locks: neither started nor queued */
	bool claimed = false;		/* a kvblk_wait() (or the synchronous call) owns its entries */
	bool taken = false;		/* its batch entry was taken; freed when no waiter is left */
	uint32_t waiters = 0;
	std::vector<kvblk_cqe> held;	/* entries while claimed (room for entries() reserved) */
	kvblk_cqe done_entry{};		/* the batch entry, once completed */
	std::atomic<uint32_t> seq{0};	/* futex word of the waiters: bumped when completed or taken */
	Job *link = nullptr;		/* in a list of jobs to free, or to cancel at close */
	Job *start_link = nullptr;	/* in complete()'s list of granted native jobs to start */

	[[nodiscard]] uint32_t count() const noexcept { return uint32_t(objects.size()); }
	/* Completion entries it can post: its batch entry, and one per object with PER_OBJECT. */
	[[nodiscard]] size_t entries() const noexcept
	{
		return 1 + ((flags & KVBLK_SUBMIT_PER_OBJECT) ? size_t(count()) : 0);
	}
	/*
	 * What the backend moves now: the objects, the aligned parts of an unaligned load, or the
	 * reads or writes of a split store's phase.
	 */
	[[nodiscard]] IoDir io_dir() const noexcept { return phase == Phase::read ? IoDir::read : dir; }
	[[nodiscard]] const IoObject *io_objects() const noexcept
	{
		if (split_store)
			return phase == Phase::read ? store.reads() : store.writes();
		return any_unaligned ? unaligned.parts() : objects.data();
	}
	[[nodiscard]] uint32_t io_count() const noexcept
	{
		if (split_store)
			return phase == Phase::read ? store.read_count() : store.write_count();
		return any_unaligned ? unaligned.part_count() : count();
	}
	[[nodiscard]] kvblk_result *io_results() noexcept
	{
		if (split_store)
			return phase == Phase::read ? store.read_results() : store.write_results();
		return any_unaligned ? unaligned.part_results() : results;
	}
	/* Point @batch at what the backend moves now (its other fields stay). */
	void aim_batch() noexcept
	{
		batch.dir = io_dir();
		batch.objects = io_objects();
		batch.count = io_count();
		batch.results = io_results();
	}

	void object_done(uint32_t i) noexcept override;
	[[nodiscard]] bool cancelled() const noexcept override
	{
		return cancel_requested.load(std::memory_order_relaxed);
	}
	void batch_done(int err) noexcept override;
};

/**
 * class CompletionRing - the completion queue: a ring whose room is reserved ahead (a batch
 * reserves its entries() when it is submitted and gives them back when its batch entry is
 * taken), so that push() never allocates. Under the scheduler's mutex.
 */
class CompletionRing {
public:
	[[nodiscard]] size_t size() const noexcept { return size_; }
	[[nodiscard]] bool empty() const noexcept { return size_ == 0; }
	/* Room for @n more entries; throws std::bad_alloc with nothing changed. */
	void reserve(size_t n);
	/* Give back the room of @n entries (shrinks an empty ring that is much larger than needed). */
	void unreserve(size_t n) noexcept;
	/* Append @e; its room was reserved. */
	void push(const kvblk_cqe &e) noexcept;
	/* Take the oldest entry (not empty). */
	kvblk_cqe pop() noexcept;
	/* Move the entries @pred selects, oldest first, to the end of @out (room there reserved). */
	template <class Pred> void extract(Pred pred, std::vector<kvblk_cqe> &out) noexcept
	{
		size_t kept = 0;
		for (size_t i = 0; i < size_; i++) {
			const kvblk_cqe &e = buf_[(head_ + i) % buf_.size()];
			if (pred(e))
				out.push_back(e);
			else
				buf_[(head_ + kept++) % buf_.size()] = e;
		}
		size_ = kept;
	}
	/* Drop every entry and every reservation. */
	void clear() noexcept;

private:
	std::vector<kvblk_cqe> buf_;	/* its size is the ring's capacity */
	size_t head_ = 0, size_ = 0, reserved_ = 0;
};

/**
 * class Scheduler - the outstanding batches of one device (see the top of this file).
 */
class Scheduler {
public:
	/*
	 * @run_sync serves a job on the dispatch thread: Backend::run() or (the staged path,
	 * under the device's staging lock) Stager::run() on job.batch; returns what they return.
	 */
	using RunSync = std::function<int(Job &)>;

	Scheduler(Backend &be, Stats &stats, uint32_t max_batches, RunSync run_sync);
	~Scheduler();
	Scheduler(const Scheduler &) = delete;
	Scheduler &operator=(const Scheduler &) = delete;

	/* Create the eventfd: 0 or -errno with kvblk_last_error() set. */
	int init();

	/*
	 * Make @job outstanding and start it: waits for a free batch slot (or -EAGAIN with
	 * @nonblock, @job untouched); -EAGAIN/-ENOMEM when the dispatch thread cannot start;
	 * -ECANCELED after shutdown() (also while waiting for a slot). On success *ticket
	 * (nonzero) and the scheduler owns the job. A failed submit that had waited for a slot
	 * passes the wake-up on to the next submitter waiting.
	 */
	int submit(std::unique_ptr<Job> &job, bool nonblock, uint64_t *ticket);

	/* kvblk_reap(): arguments already checked. -EINTR, -ECANCELED: nothing taken. */
	int reap(kvblk_cqe *cqes, uint32_t max, uint32_t min_complete, int64_t timeout_ns);

	/*
	 * kvblk_wait(): wait for @ticket's completion and take it: 0 with *out filled; -ETIME,
	 * -ENOENT (kvblk_last_error() set).
	 * @entry:    the batch entry.
	 * @commands: commands issued.
	 * @fatal:    the -errno with which the backend refused the whole batch, or 0.
	 * @note:     @fatal's reason, or the staged path's copy note.
	 * @bytes_device: bytes moved on the targets (kvblk_batch_info.bytes_device).
	 * @first_failed, @failed_target, @failed_offset, @failed_length: the first failed
	 *            object (if any).
	 */
	struct Outcome {
		kvblk_cqe entry;
		uint64_t commands;
		int fatal;
		std::string note;
		uint64_t bytes_device;
		uint32_t first_failed, failed_target;
		uint64_t failed_offset, failed_length;
	};
	/*
	 * @external: kvblk_wait() (a signal or shutdown() ends the wait: -EINTR, -ECANCELED;
	 * synchronous jobs are not outstanding for it: -ENOENT). Otherwise the wait of a
	 * synchronous job (kvblk_load_many(), the library's own batches) for its own ticket,
	 * which only the batch's end ends.
	 */
	int wait(uint64_t ticket, int64_t timeout_ns, Outcome *out, bool external);

	/* Submit @job (synchronous: job->sync) and wait for it as wait(external=false) does. */
	int run(std::unique_ptr<Job> job, Outcome *out);

	/* kvblk_cancel(): 0 or -ENOENT (also for a synchronous job when @external). */
	int cancel(uint64_t ticket, bool external);

	[[nodiscard]] int event_fd() const noexcept { return efd_; }

	/*
	 * kvblk_shutdown(): every kvblk_reap() and kvblk_wait() waiting returns at once
	 * (-ECANCELED when it takes nothing), every submitter waiting for a slot fails with
	 * -ECANCELED, and from now on nothing waits for those and submit() refuses. Batches
	 * outstanding go on. Any thread, concurrently with any call but close(); idempotent.
	 */
	void shutdown() noexcept;

	/*
	 * kvblk_close(): cancel what is queued, wait for what is in flight, stop the dispatch
	 * thread and free every job. No other call may run concurrently. Allocates nothing.
	 */
	void close() noexcept;

private:
	friend struct Job;

	void post_object(Job &job, uint32_t i) noexcept;
	void complete(Job &job, int err) noexcept;
	int serve(Job &job) noexcept;
	void start_native(Job &job) noexcept;
	void next_phase(Job &job) noexcept;
	static bool begin_write(Job &job) noexcept;
	void grant_locked(LockNode *granted, Job **to_start) noexcept;
	void start_all(Job *list) noexcept;
	bool pop_runnable_locked(Job **out) noexcept;
	void post_locked(Job &job, const kvblk_cqe &e) noexcept;
	void wake_reapers_locked() noexcept;
	void wake_waiters_locked(Job &job) noexcept;
	void set_event_locked(bool readable) noexcept;
	void dispatch_main();
	int start_dispatch_locked();
	void take_locked(Job &job, Job **to_free) noexcept;
	static void free_jobs(Job *list) noexcept;
	void cancel_queued(Job &job) noexcept;

	Backend &be_;
	Stats &stats_;
	const uint32_t max_batches_;
	RunSync run_sync_;
	int efd_ = -1;

	std::mutex mu_;
	std::atomic<uint32_t> cq_seq_{0};	/* futex word of the reapers: entries posted, or shutdown */
	std::condition_variable slot_cv_;	/* submitters: a batch slot freed, or shutdown */
	std::condition_variable disp_cv_;	/* dispatch thread: a job queued, or stop */
	std::condition_variable idle_cv_;	/* shutdown(): a job completed */
	uint64_t next_ticket_ = 1;
	std::unordered_map<uint64_t, Job *> table_;	/* outstanding jobs, owned */
	uint32_t running_ = 0;				/* outstanding and not completed */
	std::deque<Job *> prio_q_, normal_q_;		/* dispatch queue */
	CompletionRing cq_;
	RangeLocks locks_;				/* the stores' range locks */
	bool event_set_ = false;
	uint32_t reapers_waiting_ = 0;
	uint32_t submitters_waiting_ = 0;
	std::thread dispatcher_;
	bool dispatching_ = false;	/* run_sync_ is serving a job (dispatch thread or inline) */
	bool stop_ = false;
	bool shut_ = false;	/* shutdown(): nothing waits any more, nothing is submitted */
};

} // namespace kvblk::detail

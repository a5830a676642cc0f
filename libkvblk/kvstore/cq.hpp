// SPDX-License-Identifier: MIT
// The store's completion queue: tickets, exactly-once delivery of each batch's completion to
// one kvblk_kvstore_reap() or kvblk_kvstore_wait(), the max_batches bound, and the eventfd.
// The same rules as libkvblk's scheduler (kvblk_reap()/kvblk_wait() in kvblk.h): a batch
// whose ticket a waiter holds (a synchronous call, or kvblk_kvstore_wait()) is never handed
// to a reaper.
#pragma once

#include <kvblk/kvblk.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>

namespace kvblk::kvstore {

class CompletionQueue {
public:
	CompletionQueue() = default;
	~CompletionQueue();
	CompletionQueue(const CompletionQueue &) = delete;
	CompletionQueue &operator=(const CompletionQueue &) = delete;

	/* Make the eventfd; 0 or -errno. */
	int init(uint32_t max_batches);

	/*
	 * Take a batch slot and a ticket: waits while max_batches are outstanding (-EAGAIN with
	 * @nonblock); -ESHUTDOWN once shutdown() ran. @claimed: the caller will wait for it.
	 */
	int begin(bool nonblock, bool claimed, uint64_t *ticket);
	/* Give back a ticket whose batch never started (its submit failed). */
	void abort(uint64_t ticket) noexcept;
	/* A batch ended: queue @cqe (its ticket) for a reaper, or hand it to its waiter. */
	void post(const kvblk_cqe &cqe) noexcept;

	int reap(kvblk_cqe *cqes, uint32_t max, uint32_t min_complete, int64_t timeout_ns);
	/* 0 with *out (when not NULL); -ETIME; -ENOENT not outstanding. */
	int wait(uint64_t ticket, int64_t timeout_ns, kvblk_cqe *out);

	[[nodiscard]] int fd() const noexcept { return efd_; }
	/* Refuse new batches from now on (close). */
	void shutdown() noexcept;

private:
	struct Entry {
		bool done = false;
		bool claimed = false;
		kvblk_cqe cqe{};
	};
	void signal_locked() noexcept;
	void drain_fd_locked() noexcept;

	std::mutex mu_;
	std::condition_variable done_cv_;
	std::condition_variable slot_cv_;
	std::unordered_map<uint64_t, Entry> table_;
	std::deque<uint64_t> ready_; /* done, not claimed: for reapers, in completion order */
	uint64_t next_ticket_ = 1;
	uint32_t max_batches_ = 256;
	bool shut_ = false;
	bool fd_set_ = false;
	int efd_ = -1;
};

} // namespace kvblk::kvstore

// SPDX-License-Identifier: MIT
#include "cq.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sys/eventfd.h>
#include <unistd.h>

namespace kvblk::kvstore {

using Clock = std::chrono::steady_clock;

CompletionQueue::~CompletionQueue()
{
	if (efd_ >= 0)
		close(efd_);
}

int CompletionQueue::init(uint32_t max_batches)
{
	max_batches_ = max_batches;
	efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return efd_ < 0 ? -errno : 0;
}

int CompletionQueue::begin(bool nonblock, bool claimed, uint64_t *ticket)
{
	std::unique_lock<std::mutex> lk(mu_);
	while (!shut_ && table_.size() >= max_batches_) {
		if (nonblock)
			return -EAGAIN;
		slot_cv_.wait(lk);
	}
	if (shut_)
		return -ESHUTDOWN;
	const uint64_t t = next_ticket_++;
	Entry &e = table_[t];
	e.claimed = claimed;
	*ticket = t;
	return 0;
}

void CompletionQueue::abort(uint64_t ticket) noexcept
{
	std::lock_guard<std::mutex> lk(mu_);
	table_.erase(ticket);
	slot_cv_.notify_one();
}

void CompletionQueue::signal_locked() noexcept
{
	if (fd_set_ || efd_ < 0)
		return;
	const uint64_t one = 1;
	if (write(efd_, &one, sizeof(one)) == sizeof(one))
		fd_set_ = true;
}

void CompletionQueue::drain_fd_locked() noexcept
{
	uint64_t v;
	if (efd_ >= 0 && read(efd_, &v, sizeof(v)) < 0) {
		/* EAGAIN: already clear. */
	}
	fd_set_ = false;
}

void CompletionQueue::post(const kvblk_cqe &cqe) noexcept
{
	std::lock_guard<std::mutex> lk(mu_);
	auto it = table_.find(cqe.ticket);
	if (it == table_.end())
		return;
	it->second.done = true;
	it->second.cqe = cqe;
	if (!it->second.claimed) {
		try {
			ready_.push_back(cqe.ticket);
		} catch (...) {
			/* Out of memory: leave it for a reaper to find in the table (below). */
		}
		signal_locked();
	}
	done_cv_.notify_all();
}

int CompletionQueue::reap(kvblk_cqe *cqes, uint32_t max, uint32_t min_complete, int64_t timeout_ns)
{
	std::unique_lock<std::mutex> lk(mu_);
	if (min_complete) {
		auto enough = [&] { return ready_.size() >= min_complete || shut_; };
		if (timeout_ns < 0)
			done_cv_.wait(lk, enough);
		else
			done_cv_.wait_until(lk, Clock::now() + std::chrono::nanoseconds(timeout_ns), enough);
	}
	uint32_t n = 0;
	while (n < max && !ready_.empty()) {
		const uint64_t t = ready_.front();
		ready_.pop_front();
		auto it = table_.find(t);
		if (it == table_.end() || it->second.claimed)
			continue;
		cqes[n++] = it->second.cqe;
		table_.erase(it);
	}
	if (ready_.empty())
		drain_fd_locked();
	if (n)
		slot_cv_.notify_all();
	return int(n);
}

int CompletionQueue::wait(uint64_t ticket, int64_t timeout_ns, kvblk_cqe *out)
{
	std::unique_lock<std::mutex> lk(mu_);
	auto it = table_.find(ticket);
	if (it == table_.end())
		return -ENOENT;
	const bool was_claimed = it->second.claimed;
	it->second.claimed = true;
	/* Another thread waiting for the same ticket may take it first: then it is gone (-ENOENT). */
	auto done = [&] {
		auto e = table_.find(ticket);
		return e == table_.end() || e->second.done;
	};
	if (!it->second.done) {
		if (timeout_ns < 0)
			done_cv_.wait(lk, done);
		else if (!done_cv_.wait_until(lk, Clock::now() + std::chrono::nanoseconds(timeout_ns), done)) {
			/* Timed out: hand it back to reapers, as it was. */
			auto e = table_.find(ticket);
			if (e != table_.end())
				e->second.claimed = was_claimed;
			return -ETIME;
		}
	}
	it = table_.find(ticket);
	if (it == table_.end())
		return -ENOENT;
	if (out)
		*out = it->second.cqe;
	table_.erase(it);
	/* It may sit in ready_ (done before this call claimed it): reap() skips claimed or gone tickets. */
	auto r = std::find(ready_.begin(), ready_.end(), ticket);
	if (r != ready_.end())
		ready_.erase(r);
	if (ready_.empty())
		drain_fd_locked();
	slot_cv_.notify_all();
	return 0;
}

void CompletionQueue::shutdown() noexcept
{
	std::lock_guard<std::mutex> lk(mu_);
	shut_ = true;
	slot_cv_.notify_all();
	done_cv_.notify_all();
}

} // namespace kvblk::kvstore

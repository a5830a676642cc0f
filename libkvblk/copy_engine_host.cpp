// SPDX-License-Identifier: MIT
// HostCopyEngine: the copy-engine seam over host memory, for the unit tests.
#include "copy_engine.hpp"
#include "threads.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>

namespace kvblk::detail {

HostCopyEngine::HostCopyEngine(Options o) : opts_(std::move(o))
{
	thread_ = start_library_thread([this] { worker(); });
}

HostCopyEngine::~HostCopyEngine()
{
	{
		std::lock_guard<std::mutex> g(mu_);
		stop_ = true;
	}
	cv_.notify_all();
	thread_.join();
}

int HostCopyEngine::check_device_range(uint64_t addr, uint64_t len, std::string *why) noexcept
{
	if (addr == 0 || len == 0) {
		*why = "host copy engine: NULL or empty range";
		return -EINVAL;
	}
	return 0;
}

int HostCopyEngine::pin_host(void *p, size_t len, std::string *why) noexcept
{
	(void)why;
	std::lock_guard<std::mutex> g(mu_);
	pinned_.emplace_back(p, len);
	const uint64_t now = pinned_now_.fetch_add(len) + len;
	uint64_t peak = pinned_peak_.load();
	while (now > peak && !pinned_peak_.compare_exchange_weak(peak, now))
		;
	return 0;
}

void HostCopyEngine::unpin_host(void *p) noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	for (size_t i = 0; i < pinned_.size(); i++) {
		if (pinned_[i].first == p) {
			pinned_now_.fetch_sub(pinned_[i].second);
			pinned_.erase(pinned_.begin() + long(i));
			return;
		}
	}
}

int HostCopyEngine::open_lanes(uint32_t n, std::string *why) noexcept
{
	(void)why;
	close_lanes();
	std::lock_guard<std::mutex> g(mu_);
	lanes_.assign(n, Lane{});
	lanes_opened_.fetch_add(n);
	return 0;
}

void HostCopyEngine::close_lanes() noexcept
{
	std::unique_lock<std::mutex> l(mu_);
	cv_.wait(l, [this] { return queue_.empty() && running_.load() == 0; });
	lanes_.clear();
}

int HostCopyEngine::copy_to_device(uint32_t lane, uint64_t dst, const void *src, size_t len,
				   std::string *why) noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	if (lane >= lanes_.size()) {
		*why = "host copy engine: lane " + std::to_string(lane) + " is not open";
		return -EINVAL;
	}
	lanes_[lane].pending++;
	queue_.push_back(Job{lane, dst, src, len});
	cv_.notify_all();
	return 0;
}

int HostCopyEngine::lane_done(uint32_t lane, std::string *why) noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	Lane &l = lanes_.at(lane);
	if (l.pending)
		return 0;
	if (l.error) {
		const int e = l.error;
		l.error = 0;
		*why = "host copy engine: copy failed (injected)";
		return e;
	}
	return 1;
}

int HostCopyEngine::lane_wait(uint32_t lane, std::string *why) noexcept
{
	{
		std::unique_lock<std::mutex> l(mu_);
		cv_.wait(l, [&] { return lanes_.at(lane).pending == 0; });
	}
	const int r = lane_done(lane, why);
	return r < 0 ? r : 0;
}

void HostCopyEngine::worker() noexcept
{
	std::unique_lock<std::mutex> l(mu_);
	for (;;) {
		cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
		if (queue_.empty())
			return; /* stop_ */
		const Job job = queue_.front();
		queue_.pop_front();
		const uint64_t seq = seq_++;
		running_.fetch_add(1);
		l.unlock();

		int err = opts_.on_copy ? opts_.on_copy(seq, job.dst, job.len) : 0;
		if (opts_.copy_delay_us)
			std::this_thread::sleep_for(std::chrono::microseconds(opts_.copy_delay_us));
		if (err >= 0) {
			std::memcpy(reinterpret_cast<void *>(uintptr_t(job.dst)), job.src, job.len);
			bytes_.fetch_add(job.len);
		}
		done_.fetch_add(1);

		l.lock();
		running_.fetch_sub(1);
		if (job.lane < lanes_.size()) {
			Lane &ln = lanes_[job.lane];
			ln.pending--;
			if (err < 0 && !ln.error)
				ln.error = err;
		}
		cv_.notify_all();
	}
}

} // namespace kvblk::detail

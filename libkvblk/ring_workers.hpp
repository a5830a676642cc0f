// SPDX-License-Identifier: MIT
// RingWorkers: the batch dispatch shared by the uring and uring_cmd backends. A batch runs
// job(i) for every ring i: ring 0 on the calling thread, rings 1..n-1 on persistent threads,
// and run() returns once all of them are done.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace kvblk::detail {

class RingWorkers {
public:
	RingWorkers() = default;
	RingWorkers(const RingWorkers &) = delete;
	RingWorkers &operator=(const RingWorkers &) = delete;
	~RingWorkers() { stop(); }

	/* Start the threads for rings 1..rings-1; throws std::system_error (the threads started
	 * so far stay, and stop() joins them). */
	void start(uint32_t rings)
	{
		for (uint32_t i = 1; i < rings; i++)
			threads_.emplace_back([this, i] { worker(i); });
	}

	/* Stop and join the threads; their owner calls this before it frees what jobs use. */
	void stop() noexcept
	{
		{
			std::lock_guard<std::mutex> g(mu_);
			stop_ = true;
		}
		start_cv_.notify_all();
		for (std::thread &t : threads_)
			t.join();
		threads_.clear();
	}

	/* Run job(i) for every ring i and wait for all of them. */
	template <class Job>
	void run(Job &job) noexcept
	{
		run(&job, [](void *j, uint32_t i) { (*static_cast<Job *>(j))(i); });
	}

private:
	using Call = void (*)(void *, uint32_t);

	void run(void *job, Call call) noexcept
	{
		if (!threads_.empty()) {
			{
				std::lock_guard<std::mutex> g(mu_);
				job_ = job;
				call_ = call;
				running_ = uint32_t(threads_.size());
				generation_++;
			}
			start_cv_.notify_all();
		}
		call(job, 0);
		if (!threads_.empty()) {
			std::unique_lock<std::mutex> lk(mu_);
			done_cv_.wait(lk, [this] { return running_ == 0; });
			job_ = nullptr;
			call_ = nullptr;
		}
	}

	void worker(uint32_t index)
	{
		uint64_t seen = 0;
		std::unique_lock<std::mutex> lk(mu_);
		for (;;) {
			start_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
			if (stop_)
				return;
			seen = generation_;
			void *job = job_;
			Call call = call_;
			lk.unlock();
			call(job, index);
			lk.lock();
			if (--running_ == 0)
				done_cv_.notify_one();
		}
	}

	std::vector<std::thread> threads_;
	std::mutex mu_;
	std::condition_variable start_cv_, done_cv_;
	bool stop_ = false;
	uint64_t generation_ = 0;
	uint32_t running_ = 0;
	void *job_ = nullptr;
	Call call_ = nullptr;
};

} // namespace kvblk::detail

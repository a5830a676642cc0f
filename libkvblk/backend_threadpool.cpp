// SPDX-License-Identifier: MIT
// threadpool: `workers` persistent threads, each reading whole objects with pread(2)
// (looping on short reads). The field's first fix for QD1 loaders.
#include "backend.hpp"
#include "last_error.hpp"
#include "positional_io.hpp"
#include "threads.hpp"

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace kvblk::detail {
namespace {

class ThreadpoolBackend final : public Backend {
public:
	explicit ThreadpoolBackend(const BackendConfig &cfg) : cfg_(cfg) {}

	~ThreadpoolBackend() override
	{
		{
			std::lock_guard<std::mutex> g(mu_);
			stop_ = true;
		}
		start_cv_.notify_all();
		for (std::thread &t : threads_)
			t.join();
	}

	/* Start the threads; 0 or -errno. */
	int start()
	{
		threads_.reserve(cfg_.workers); /* no allocation after a thread started */
		try {
			for (uint32_t i = 0; i < cfg_.workers; i++)
				threads_.push_back(start_library_thread([this] { worker(); }));
		} catch (const std::system_error &e) {
			return fail(-(e.code().value() ? e.code().value() : EAGAIN),
				    "threadpool: cannot start %u threads: %s", cfg_.workers, e.what());
		}
		return 0;
	}

	kvblk_backend kind() const noexcept override { return KVBLK_BACKEND_THREADPOOL; }

	int run(Batch &b) noexcept override
	{
		std::atomic<uint64_t> inflight{0}, peak{0};
		const PositionalIo pio{b.dir, kind(), UINT64_MAX, cfg_.eagain_retries,
				       testing::active(), &inflight, &peak};
		{
			std::lock_guard<std::mutex> g(mu_);
			batch_ = &b;
			pio_ = &pio;
			next_.store(0, std::memory_order_relaxed);
			running_ = uint32_t(threads_.size());
			generation_++;
		}
		start_cv_.notify_all();
		std::unique_lock<std::mutex> lk(mu_);
		done_cv_.wait(lk, [this] { return running_ == 0; });
		batch_ = nullptr;
		pio_ = nullptr;
		b.counters.inflight_peak = peak.load();
		return 0;
	}

private:
	void worker()
	{
		uint64_t seen = 0;
		std::unique_lock<std::mutex> lk(mu_);
		for (;;) {
			start_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
			if (stop_)
				return;
			seen = generation_;
			Batch &b = *batch_;
			const PositionalIo &pio = *pio_;
			lk.unlock();

			BatchCounters mine;
			for (;;) {
				uint32_t i = next_.fetch_add(1, std::memory_order_relaxed);
				if (i >= b.count)
					break;
				uint64_t valid = 0;
				const int32_t st =
					b.cancelled() ? -ECANCELED : move_object(pio, b.objects[i], i, &mine, &valid);
				b.results[i].status = st;
				b.results[i].bytes = result_bytes(b.objects[i], st, valid);
				b.object_done(i);
			}

			lk.lock();
			b.counters.merge(mine);
			if (--running_ == 0)
				done_cv_.notify_one();
		}
	}

	BackendConfig cfg_;
	std::vector<std::thread> threads_;
	std::mutex mu_;
	std::condition_variable start_cv_, done_cv_;
	bool stop_ = false;
	uint64_t generation_ = 0;
	uint32_t running_ = 0;
	Batch *batch_ = nullptr;
	const PositionalIo *pio_ = nullptr;
	std::atomic<uint32_t> next_{0};
};

} // namespace

std::unique_ptr<Backend> make_threadpool_backend(const BackendConfig &cfg, int *err)
{
	auto b = std::make_unique<ThreadpoolBackend>(cfg);
	*err = b->start();
	if (*err)
		return nullptr;
	return b;
}

} // namespace kvblk::detail

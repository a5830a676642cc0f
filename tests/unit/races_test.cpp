// SPDX-License-Identifier: MIT
// Calls that the C API allows on several threads at once, run at once. Some races can only
// be seen by ThreadSanitizer (make tsan): such a test passes in a plain build either way and
// fails under TSan without its fix. Each test also checks what the calls returned.
#include "test_util.hpp"

#include "libkvblk/backend.hpp"

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

using namespace kvblk_test;

namespace {

/*
 * kvblk_add_target() grows the target table (a vector that reallocates) while
 * kvblk_set_staging() reads target 0's block size on another thread: target 0 is read
 * through a pointer that never moves, not through the table.
 */
TEST(RacesTest, set_staging_reads_target_0_while_targets_are_added)
{
	TempDir dir;
	const std::string path = dir.file("store");
	write_pattern_file(path, 4, 64 * KiB);
	for (int round = 0; round < 8; round++) {
		/* A new device each round: its table starts small and reallocates as it grows. */
		DevPtr dev = open_dev(path, make_opts(KVBLK_BACKEND_PSYNC));
		ASSERT_TRUE(dev);
		std::atomic<bool> stop{false};
		std::atomic<int> staged{0};
		std::thread stager([&] {
			while (!stop.load()) {
				EXPECT_EQ(kvblk_set_staging(dev.get(), 1, 4096), 0) << kvblk_last_error();
				EXPECT_EQ(kvblk_set_staging(dev.get(), 1, 1), -EINVAL) << "below target 0's block size";
				staged++;
			}
		});
		while (staged.load() == 0)
			std::this_thread::yield();
		std::vector<uint32_t> ids;
		for (int i = 0; i < 40; i++) {
			uint32_t id = 0;
			EXPECT_EQ(kvblk_add_target(dev.get(), path.c_str(), 0, &id), 0) << kvblk_last_error();
			ids.push_back(id);
		}
		stop = true;
		stager.join();
		for (uint32_t id : ids)
			EXPECT_EQ(kvblk_remove_target(dev.get(), id), 0);
		EXPECT_EQ(get_info(dev.get()).targets, 1u);
	}
}

/*
 * A backend served one batch at a time (as the kmod lanes, psync and threadpool are: run()
 * calls are serialised by the scheduler, Backend's contract) that notices a second run()
 * entering while one runs. It forwards everything to a uring backend, so that registered
 * buffers are fixed buffers that kvblk_check_buffer() probes with writes. Its first run()
 * waits until either a second run() entered (the bug) or a second batch was queued behind it.
 */
class OneAtATime final : public kvblk::detail::Backend {
public:
	explicit OneAtATime(std::unique_ptr<kvblk::detail::Backend> inner) : in_(std::move(inner)) {}

	kvblk_backend kind() const noexcept override { return in_->kind(); }
	kvblk_backend kind_for(kvblk::detail::IoDir d) const noexcept override { return in_->kind_for(d); }
	kvblk_async async_mode() const noexcept override { return KVBLK_ASYNC_THREAD; }
	int run(kvblk::detail::Batch &b) noexcept override
	{
		bool hold;
		{
			std::lock_guard<std::mutex> g(mu_);
			if (running_)
				overlaps_++;
			running_++;
			hold = runs_++ == 0;
			cv_.notify_all();
		}
		if (hold) {
			std::unique_lock<std::mutex> lk(mu_);
			cv_.wait_for(lk, std::chrono::seconds(10), [&] { return overlaps_ > 0 || queued_ >= 2; });
		}
		const int r = in_->run(b);
		std::lock_guard<std::mutex> g(mu_);
		running_--;
		return r;
	}
	kvblk::detail::BufferRegistration register_buffer(uint32_t id, uint8_t *base, uint64_t len) noexcept override
	{
		return in_->register_buffer(id, base, len);
	}
	void unregister_buffer(uint32_t id, int32_t fixed_index) noexcept override
	{
		in_->unregister_buffer(id, fixed_index);
	}
	int check_buffer(uint32_t id) noexcept override { return in_->check_buffer(id); }

	void queued()
	{
		std::lock_guard<std::mutex> g(mu_);
		queued_++;
		cv_.notify_all();
	}
	int overlaps()
	{
		std::lock_guard<std::mutex> g(mu_);
		return overlaps_;
	}
	int runs()
	{
		std::lock_guard<std::mutex> g(mu_);
		return runs_;
	}

private:
	std::unique_ptr<kvblk::detail::Backend> in_;
	std::mutex mu_;
	std::condition_variable cv_;
	int running_ = 0, runs_ = 0, overlaps_ = 0, queued_ = 0;
};

/*
 * kvblk_check_buffer()'s probe writes are a batch of the scheduler: on a backend that serves
 * one batch at a time they wait for the batch running, instead of calling the backend
 * beside it (on a kmod device with lanes both would use the lanes' scratch at once).
 */
TEST(RacesTest, check_buffer_probe_waits_its_turn_on_a_serial_backend)
{
	TempDir dir;
	const std::string path = dir.file("store");
	write_pattern_file(path, 4, 64 * KiB);
	OneAtATime *watch = nullptr;
	kvblk::testing::Seams s;
	s.wrap_backend = [&](std::unique_ptr<kvblk::detail::Backend> be) -> std::unique_ptr<kvblk::detail::Backend> {
		auto w = std::make_unique<OneAtATime>(std::move(be));
		watch = w.get();
		return w;
	};
	s.on_queued = [&](uint64_t) {
		if (watch)
			watch->queued();
	};
	SeamGuard sg(s);
	DevPtr dev = open_dev(path, make_opts(KVBLK_BACKEND_URING));
	ASSERT_TRUE(dev && watch);
	AlignedBuf reg(64 * KiB), mem(64 * KiB);
	uint32_t buf = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &buf), 0);
	const kvblk_desc d = plain_desc(0, 64 * KiB, mem.data(), 1);
	uint64_t t = 0;
	ASSERT_EQ(kvblk_submit(dev.get(), &d, 1, nullptr, &t), 0) << kvblk_last_error();
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (watch->runs() == 0 && std::chrono::steady_clock::now() < end)
		std::this_thread::yield();
	ASSERT_EQ(watch->runs(), 1) << "the batch runs (held) on the dispatch thread";
	auto check = std::async(std::launch::async, [&] { return kvblk_check_buffer(dev.get(), buf); });
	ASSERT_EQ(check.wait_for(std::chrono::seconds(20)), std::future_status::ready);
	EXPECT_EQ(check.get(), 0) << kvblk_last_error();
	EXPECT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), 1);
	EXPECT_TRUE(std::memcmp(mem.data(), expected_bytes(0, 64 * KiB, 64 * KiB).data(), 64 * KiB) == 0);
	EXPECT_EQ(watch->overlaps(), 0) << "the probe ran beside the batch, not after it";
	EXPECT_EQ(watch->runs(), 2);
	EXPECT_EQ(get_stats(dev.get()).batches, 1u) << "the probe is not counted as the program's batch";
}

} // namespace

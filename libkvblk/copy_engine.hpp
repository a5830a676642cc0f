// SPDX-License-Identifier: MIT
// The copy-engine seam of the staged path: what the staging pipeline (staging.cpp) needs
// from a GPU runtime, and nothing more. Two implementations:
//   - the CUDA one (copy_engine_cuda.cpp): cudaHostRegister'ed bounce buffers,
//     cudaMemcpyAsync on one non-blocking stream per lane, cudaStreamQuery/Synchronize;
//   - HostCopyEngine (below): "device memory" is ordinary host memory and each copy is a
//     memcpy on a worker thread; the unit tests install it (testing::Seams::make_copy_engine)
//     and read what it recorded.
//
// A lane is an in-order queue of copies (a CUDA stream). The pipeline gives every bounce
// buffer its own lane and reuses a buffer only after its lane is done.
//
// Every call that can fail returns 0 (or a count) or -errno and puts the reason in *why.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvblk::detail {

class CopyEngine {
public:
	virtual ~CopyEngine() = default;

	/* "cuda (libcudart.so.12, device 0)", "host". */
	[[nodiscard]] virtual std::string name() const = 0;

	/*
	 * Is [addr, addr + len) device memory that copies can target? 0, or -EINVAL (not device
	 * memory), -ENODEV (no device) with *why.
	 */
	virtual int check_device_range(uint64_t addr, uint64_t len, std::string *why) noexcept = 0;

	/* Page-lock host memory [p, p + len) for asynchronous copies; undo with unpin_host(). */
	virtual int pin_host(void *p, size_t len, std::string *why) noexcept = 0;
	virtual void unpin_host(void *p) noexcept = 0;

	/* Create lanes 0..n-1 (closing any earlier ones); close_lanes() waits and destroys them. */
	virtual int open_lanes(uint32_t n, std::string *why) noexcept = 0;
	virtual void close_lanes() noexcept = 0;

	/* Queue a copy of @len bytes from pinned host memory @src to device address @dst. */
	virtual int copy_to_device(uint32_t lane, uint64_t dst, const void *src, size_t len,
				   std::string *why) noexcept = 0;

	/* Without blocking: 1 every copy queued on @lane is done, 0 not yet, -errno one failed. */
	virtual int lane_done(uint32_t lane, std::string *why) noexcept = 0;

	/* Block until every copy queued on @lane is done: 0, or -errno when one failed. */
	virtual int lane_wait(uint32_t lane, std::string *why) noexcept = 0;
};

/* The CUDA engine, or nullptr with -ENODEV/-EOPNOTSUPP in *err and the reason in *why. */
std::unique_ptr<CopyEngine> make_cuda_copy_engine(int *err, std::string *why);

/**
 * class HostCopyEngine - memcpy on one worker thread, in queue order across lanes (as a
 * GPU's copy engine serves its streams). For tests: copies can be slowed and failed, and
 * the engine records what a test needs to check overlap and bounded memory.
 * @copy_delay_us: each copy takes at least this long (so that reads can overlap it).
 * @on_copy:       called before each copy with its sequence number (0, 1, ...), device
 *                 address and length; a negative return fails that copy with that errno.
 */
class HostCopyEngine final : public CopyEngine {
public:
	struct Options {
		uint32_t copy_delay_us = 0;
		std::function<int(uint64_t seq, uint64_t dst, size_t len)> on_copy;
	};

	explicit HostCopyEngine(Options o);
	~HostCopyEngine() override;

	std::string name() const override { return "host"; }
	int check_device_range(uint64_t addr, uint64_t len, std::string *why) noexcept override;
	int pin_host(void *p, size_t len, std::string *why) noexcept override;
	void unpin_host(void *p) noexcept override;
	int open_lanes(uint32_t n, std::string *why) noexcept override;
	void close_lanes() noexcept override;
	int copy_to_device(uint32_t lane, uint64_t dst, const void *src, size_t len,
			   std::string *why) noexcept override;
	int lane_done(uint32_t lane, std::string *why) noexcept override;
	int lane_wait(uint32_t lane, std::string *why) noexcept override;

	/* Records (readable from any thread). */
	[[nodiscard]] uint32_t copies_running() const noexcept { return running_.load(); }
	[[nodiscard]] uint64_t copies_done() const noexcept { return done_.load(); }
	[[nodiscard]] uint64_t bytes_copied() const noexcept { return bytes_.load(); }
	[[nodiscard]] uint64_t pinned_now() const noexcept { return pinned_now_.load(); }
	[[nodiscard]] uint64_t pinned_peak() const noexcept { return pinned_peak_.load(); }
	[[nodiscard]] uint32_t lanes_opened() const noexcept { return lanes_opened_.load(); }

private:
	struct Job {
		uint32_t lane;
		uint64_t dst;
		const void *src;
		size_t len;
	};
	struct Lane {
		uint32_t pending = 0;
		int error = 0;
	};
	void worker() noexcept;

	Options opts_;
	std::mutex mu_;
	std::condition_variable cv_;
	std::deque<Job> queue_;
	std::vector<Lane> lanes_;
	std::vector<std::pair<void *, size_t>> pinned_;
	bool stop_ = false;
	uint64_t seq_ = 0;
	std::atomic<uint32_t> running_{0};
	std::atomic<uint64_t> done_{0}, bytes_{0}, pinned_now_{0}, pinned_peak_{0};
	std::atomic<uint32_t> lanes_opened_{0};
	std::thread thread_;
};

} // namespace kvblk::detail

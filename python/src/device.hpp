// SPDX-License-Identifier: MIT
// kvblk._kvblk.Device: a kvblk_dev handle. Every call that does I/O or may wait releases the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <kvblk/kvblk.h>

#include <atomic>
#include <cstdint>
#include <shared_mutex>
#include <string>
#include <sys/types.h>

namespace kvblkpy {

namespace py = pybind11;

/*
 * Device - owns one kvblk_dev. Calls share the handle (a shared lock, libkvblk being thread
 * safe since 0.3); close() takes the lock exclusively, so kvblk_close() never races another
 * call (the C API forbids that). close() first marks the handle closing (calls that start
 * afterwards raise ValueError at once) and calls kvblk_shutdown(), which wakes every thread
 * waiting in libkvblk on the handle (reap, wait, a submit waiting for a batch slot): close()
 * waits only for calls that run to their end by themselves (a load_many's I/O), never for a
 * reaper. A handle inherited through fork() is told apart before any lock is touched (a
 * parent thread may have held it at the fork): every use raises kvblk.Error EBADFD at once,
 * close() forgets it at once.
 */
class Device {
public:
	Device(const std::string &path, uint32_t backend, uint32_t queue_depth, uint32_t workers, uint32_t flags,
	       uint64_t max_cmd_bytes, uint32_t max_descs, uint32_t eagain_retries, uint64_t create_bytes,
	       uint32_t max_batches);
	~Device();
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;

	void close();
	/* kvblk_shutdown(): wake every waiting thread, keep later calls from waiting (see above). */
	void shutdown();
	bool closed() const { return dev_.load() == nullptr || inherited(); }
	/* The handle was opened by another process (this one is a child made by fork()). */
	bool inherited() const noexcept;

	/* A use of the handle: shared lock held, handle known to be open and this process's. */
	class Use {
	public:
		explicit Use(Device &d);
		kvblk_dev *dev;

	private:
		std::shared_lock<std::shared_mutex> lk_;
	};

	std::atomic<kvblk_dev *> dev_{nullptr};
	std::atomic<bool> closing_{false};
	std::shared_mutex mu_;
	std::string path_;
	pid_t pid_;		/* the opener */
	uint64_t fork_gen_;	/* fork_generation() at open */
};

/* +1 in every child made by fork() (a pthread_atfork() handler; armed by the first open). */
uint64_t fork_generation() noexcept;

void bind_device(py::module_ &m);

} // namespace kvblkpy

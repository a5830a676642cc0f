// SPDX-License-Identifier: MIT
// kvblk._kvblk.Device: a kvblk_dev handle. Every call that does I/O or may wait releases the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <kvblk/kvblk.h>

#include <shared_mutex>
#include <string>

namespace kvblkpy {

namespace py = pybind11;

/*
 * Device - owns one kvblk_dev. Calls share the handle (a shared lock, libkvblk being thread
 * safe since 0.3); close() takes the lock exclusively, so it waits for calls in progress on
 * other threads and kvblk_close() never races another call (the C API forbids that).
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
	bool closed() const { return dev_ == nullptr; }

	/* A use of the handle: shared lock held, handle known to be open. */
	class Use {
	public:
		explicit Use(Device &d);
		kvblk_dev *dev;

	private:
		std::shared_lock<std::shared_mutex> lk_;
	};

	kvblk_dev *dev_ = nullptr;
	std::shared_mutex mu_;
	std::string path_;
};

void bind_device(py::module_ &m);

} // namespace kvblkpy

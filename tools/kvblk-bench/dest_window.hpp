// SPDX-License-Identifier: MIT
//
// kvblk-bench --dest: where the load window lives when it is not host memory. The window
// is registered with kvblk_register_buffer(kind()) in batch-sized slots; before each window
// is loaded it is poisoned from host memory, and after it is copied back to host memory for
// verification (both outside the timed region).
#pragma once

#include <cstdint>
#include <string>

namespace kvblk_bench {

class DeviceWindow {
public:
	virtual ~DeviceWindow() = default;
	[[nodiscard]] virtual uint8_t *data() const noexcept = 0;
	[[nodiscard]] virtual uint64_t size() const noexcept = 0;
	// enum kvblk_mem_kind of the registrations.
	[[nodiscard]] virtual int kind() const noexcept = 0;
	// --dest value: "cuda", "p2pdma".
	[[nodiscard]] virtual std::string name() const = 0;
	// One line for the report: what memory, where it came from.
	[[nodiscard]] virtual std::string describe() const = 0;
	// Copy [off, off + len) of the window to/from host memory: 0 or -errno with *err.
	virtual int to_host(void *dst, uint64_t off, uint64_t len, std::string *err) const = 0;
	virtual int from_host(const void *src, uint64_t off, uint64_t len, std::string *err) const = 0;
};

} // namespace kvblk_bench

// SPDX-License-Identifier: MIT
//
// kvblk-bench --dest p2pdma:FILE: the load window is an mmap() of a PCI P2PDMA provider's
// /sys/bus/pci/devices/<bdf>/p2pmem/allocate file (a device BAR: a GPU's, or an NVMe
// controller memory buffer), registered as KVBLK_MEM_P2PDMA. The CPU reaches the BAR through
// the same mapping, so poisoning and verification are plain copies.
#pragma once

#include <memory>

#include "dest_window.hpp"

namespace kvblk_bench {

class P2pdmaWindow final : public DeviceWindow {
public:
	// @bytes (rounded up to pages) of @file, or nullptr with *err set.
	static std::unique_ptr<P2pdmaWindow> create(const std::string &file, uint64_t bytes, std::string *err);
	~P2pdmaWindow() override;
	P2pdmaWindow(const P2pdmaWindow &) = delete;
	P2pdmaWindow &operator=(const P2pdmaWindow &) = delete;

	[[nodiscard]] uint8_t *data() const noexcept override { return mem_; }
	[[nodiscard]] uint64_t size() const noexcept override { return bytes_; }
	[[nodiscard]] int kind() const noexcept override;
	[[nodiscard]] std::string name() const override { return "p2pdma"; }
	[[nodiscard]] std::string describe() const override;
	int to_host(void *dst, uint64_t off, uint64_t len, std::string *err) const override;
	int from_host(const void *src, uint64_t off, uint64_t len, std::string *err) const override;

private:
	P2pdmaWindow() = default;
	uint8_t *mem_ = nullptr;
	uint64_t bytes_ = 0;
	int fd_ = -1;
	std::string file_;
};

} // namespace kvblk_bench

// SPDX-License-Identifier: MIT
//
// kvblk-bench --dest cuda: the load window in GPU memory, allocated through the CUDA runtime
// that libkvblk's loader dlopens (no CUDA at build time). Loads go through KVBLK_MEM_CUDA
// registrations (the staged path, or P2P with kvblk.ko); the window is copied back to host
// memory outside the timed region for verification, and poisoned through host memory first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dest_window.hpp"

namespace kvblk_bench {

class CudaWindow final : public DeviceWindow {
public:
	// @bytes of device memory on the current device, or nullptr with *err set.
	static std::unique_ptr<CudaWindow> create(uint64_t bytes, std::string *err);
	~CudaWindow() override;
	CudaWindow(const CudaWindow &) = delete;
	CudaWindow &operator=(const CudaWindow &) = delete;

	[[nodiscard]] uint8_t *data() const noexcept override { return mem_; }
	[[nodiscard]] uint64_t size() const noexcept override { return bytes_; }
	[[nodiscard]] int kind() const noexcept override;
	[[nodiscard]] std::string name() const override { return "cuda"; }
	[[nodiscard]] std::string describe() const override;
	// "libcudart.so.13": the runtime that was loaded.
	[[nodiscard]] const std::string &runtime() const noexcept { return runtime_; }

	// cudaMemcpy of [off, off + len) of the window to/from host memory: 0 or -EIO with *err.
	int to_host(void *dst, uint64_t off, uint64_t len, std::string *err) const override;
	int from_host(const void *src, uint64_t off, uint64_t len, std::string *err) const override;

private:
	CudaWindow() = default;
	uint8_t *mem_ = nullptr;
	uint64_t bytes_ = 0;
	std::string runtime_;
};

} // namespace kvblk_bench

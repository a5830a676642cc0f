// SPDX-License-Identifier: MIT
#include "cuda_dest.hpp"

#include <cerrno>

#include <fmt/format.h>

#include <kvblk/kvblk.h>

#include "libkvblk/cuda_runtime.hpp"

namespace kvblk_bench {

using kvblk::detail::CudaRuntime;
using kvblk::detail::cuda_error_text;
using kvblk::detail::cuda_runtime;
using kvblk::detail::kCudaSuccess;

std::unique_ptr<CudaWindow> CudaWindow::create(uint64_t bytes, std::string *err)
{
	const CudaRuntime *rt = cuda_runtime(err);
	if (!rt)
		return nullptr;
	if (!rt->malloc_device || !rt->free_device || !rt->memcpy_sync) {
		*err = rt->library + " lacks cudaMalloc/cudaFree/cudaMemcpy";
		return nullptr;
	}
	int n = 0;
	int e = rt->get_device_count(&n);
	if (e != kCudaSuccess || n == 0) {
		*err = rt->library + " found no GPU" + (e != kCudaSuccess ? ": " + cuda_error_text(*rt, e) : "");
		return nullptr;
	}
	void *p = nullptr;
	e = rt->malloc_device(&p, bytes);
	if (e != kCudaSuccess) {
		*err = "cudaMalloc(" + std::to_string(bytes) + "): " + cuda_error_text(*rt, e);
		return nullptr;
	}
	std::unique_ptr<CudaWindow> w(new CudaWindow());
	w->mem_ = static_cast<uint8_t *>(p);
	w->bytes_ = bytes;
	w->runtime_ = rt->library;
	return w;
}

int CudaWindow::kind() const noexcept
{
	return KVBLK_MEM_CUDA;
}

std::string CudaWindow::describe() const
{
	return fmt::format("CUDA device memory ({}, {:.3f} GB window), copied back to host memory for verification",
			   runtime_, double(bytes_) / 1e9);
}

CudaWindow::~CudaWindow()
{
	if (const CudaRuntime *rt = cuda_runtime(nullptr); rt && mem_)
		rt->free_device(mem_);
}

int CudaWindow::to_host(void *dst, uint64_t off, uint64_t len, std::string *err) const
{
	const CudaRuntime *rt = cuda_runtime(nullptr);
	const int e = rt->memcpy_sync(dst, mem_ + off, len, kvblk::detail::kCudaMemcpyDeviceToHost);
	if (e != kCudaSuccess) {
		*err = "cudaMemcpy (device to host): " + cuda_error_text(*rt, e);
		return -EIO;
	}
	return 0;
}

int CudaWindow::from_host(const void *src, uint64_t off, uint64_t len, std::string *err) const
{
	const CudaRuntime *rt = cuda_runtime(nullptr);
	const int e = rt->memcpy_sync(mem_ + off, src, len, kvblk::detail::kCudaMemcpyHostToDevice);
	if (e != kCudaSuccess) {
		*err = "cudaMemcpy (host to device): " + cuda_error_text(*rt, e);
		return -EIO;
	}
	return 0;
}

} // namespace kvblk_bench

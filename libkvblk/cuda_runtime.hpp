// SPDX-License-Identifier: MIT
// The CUDA runtime, loaded with dlopen(3) on first use: libkvblk has no link-time CUDA
// dependency. Only the few entry points the staged path (and the GPU tools) need are
// resolved; their declarations below are written from NVIDIA's CUDA Runtime API reference
// (no CUDA header is used or needed to build).
//
// Search order: $KVBLK_CUDART (a file name or path) if set, then libcudart.so.13,
// libcudart.so.12, libcudart.so. The first that loads and resolves every required symbol wins.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kvblk::detail {

/* cudaError_t: 0 is success; the rest are reported through cudaGetErrorString(). */
using cuda_error_t = int;
inline constexpr cuda_error_t kCudaSuccess = 0;
inline constexpr cuda_error_t kCudaErrorNotReady = 600;

/* cudaStream_t: an opaque pointer. */
using cuda_stream_t = struct cuda_stream_opaque *;

/* enum cudaMemcpyKind. */
enum cuda_memcpy_kind : int {
	kCudaMemcpyHostToHost = 0,
	kCudaMemcpyHostToDevice = 1,
	kCudaMemcpyDeviceToHost = 2,
	kCudaMemcpyDeviceToDevice = 3,
	kCudaMemcpyDefault = 4,
};

/* enum cudaMemoryType (cudaPointerAttributes.type). */
enum cuda_memory_type : int {
	kCudaMemoryTypeUnregistered = 0,
	kCudaMemoryTypeHost = 1,
	kCudaMemoryTypeDevice = 2,
	kCudaMemoryTypeManaged = 3,
};

/*
 * struct cudaPointerAttributes as CUDA 11 and later lay it out. The runtime writes only
 * these fields; the padding guards against a runtime that writes more.
 */
struct cuda_pointer_attributes {
	int type;		/* enum cuda_memory_type */
	int device;
	void *device_pointer;
	void *host_pointer;
	unsigned char pad[64];
};

inline constexpr unsigned kCudaStreamNonBlocking = 0x01;	/* cudaStreamCreateWithFlags */
inline constexpr unsigned kCudaHostRegisterDefault = 0x00;	/* cudaHostRegister */

/**
 * struct CudaRuntime - the resolved entry points (names as in the CUDA runtime).
 * Required ones are never null once cuda_runtime() returned this object; the ones marked
 * optional may be null (the GPU tools use them when present).
 */
struct CudaRuntime {
	std::string library;	/* the file that was loaded */
	cuda_error_t (*get_device_count)(int *count);
	cuda_error_t (*get_device)(int *device);
	cuda_error_t (*set_device)(int device);
	cuda_error_t (*pointer_get_attributes)(cuda_pointer_attributes *attr, const void *ptr);
	cuda_error_t (*host_register)(void *ptr, size_t size, unsigned flags);
	cuda_error_t (*host_unregister)(void *ptr);
	cuda_error_t (*stream_create_with_flags)(cuda_stream_t *stream, unsigned flags);
	cuda_error_t (*stream_destroy)(cuda_stream_t stream);
	cuda_error_t (*stream_query)(cuda_stream_t stream);
	cuda_error_t (*stream_synchronize)(cuda_stream_t stream);
	cuda_error_t (*memcpy_async)(void *dst, const void *src, size_t count, int kind, cuda_stream_t stream);
	const char *(*get_error_string)(cuda_error_t err);
	/* optional: */
	cuda_error_t (*malloc_device)(void **ptr, size_t size);		/* cudaMalloc */
	cuda_error_t (*free_device)(void *ptr);				/* cudaFree */
	cuda_error_t (*memcpy_sync)(void *dst, const void *src, size_t count, int kind); /* cudaMemcpy */
	cuda_error_t (*memset_device)(void *ptr, int value, size_t count);	/* cudaMemset */
	cuda_error_t (*device_synchronize)();				/* cudaDeviceSynchronize */
	cuda_error_t (*runtime_get_version)(int *version);		/* cudaRuntimeGetVersion */
};

/*
 * The CUDA runtime, loaded once per process (thread safe). nullptr when none could be
 * loaded; then *why (if given) says so: "CUDA runtime not found (tried libcudart.so.13:
 * ..., libcudart.so.12: ..., libcudart.so: ...)".
 */
const CudaRuntime *cuda_runtime(std::string *why);

/*
 * Load the first of @names (dlopen names or paths) that resolves every required entry point
 * into *out (uncached; the library stays loaded). false with *why as cuda_runtime() words it.
 */
bool load_cuda_runtime(const std::vector<std::string> &names, CudaRuntime *out, std::string *why);

/* "CUDA error 1 (invalid argument)": @err and the runtime's own words for it. */
std::string cuda_error_text(const CudaRuntime &rt, cuda_error_t err);

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
#include "cuda_runtime.hpp"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <vector>

namespace kvblk::detail {
namespace {

struct Symbol {
	const char *name;
	void **slot;
	bool required;
};

/* Resolve every symbol of @rt from @h; false (and *missing) when a required one is absent. */
bool resolve(void *h, CudaRuntime *rt, std::string *missing)
{
	const Symbol syms[] = {
		{"cudaGetDeviceCount", reinterpret_cast<void **>(&rt->get_device_count), true},
		{"cudaGetDevice", reinterpret_cast<void **>(&rt->get_device), true},
		{"cudaSetDevice", reinterpret_cast<void **>(&rt->set_device), true},
		{"cudaPointerGetAttributes", reinterpret_cast<void **>(&rt->pointer_get_attributes), true},
		{"cudaHostRegister", reinterpret_cast<void **>(&rt->host_register), true},
		{"cudaHostUnregister", reinterpret_cast<void **>(&rt->host_unregister), true},
		{"cudaStreamCreateWithFlags", reinterpret_cast<void **>(&rt->stream_create_with_flags), true},
		{"cudaStreamDestroy", reinterpret_cast<void **>(&rt->stream_destroy), true},
		{"cudaStreamQuery", reinterpret_cast<void **>(&rt->stream_query), true},
		{"cudaStreamSynchronize", reinterpret_cast<void **>(&rt->stream_synchronize), true},
		{"cudaMemcpyAsync", reinterpret_cast<void **>(&rt->memcpy_async), true},
		{"cudaGetErrorString", reinterpret_cast<void **>(&rt->get_error_string), true},
		{"cudaMalloc", reinterpret_cast<void **>(&rt->malloc_device), false},
		{"cudaFree", reinterpret_cast<void **>(&rt->free_device), false},
		{"cudaMemcpy", reinterpret_cast<void **>(&rt->memcpy_sync), false},
		{"cudaMemset", reinterpret_cast<void **>(&rt->memset_device), false},
		{"cudaDeviceSynchronize", reinterpret_cast<void **>(&rt->device_synchronize), false},
		{"cudaRuntimeGetVersion", reinterpret_cast<void **>(&rt->runtime_get_version), false},
	};
	for (const Symbol &s : syms) {
		*s.slot = dlsym(h, s.name);
		if (!*s.slot && s.required) {
			*missing = s.name;
			return false;
		}
	}
	return true;
}

struct Loaded {
	CudaRuntime rt{};
	bool ok = false;
	std::string why;
};

} // namespace

bool load_cuda_runtime(const std::vector<std::string> &names, CudaRuntime *out, std::string *why)
{
	Loaded l;
	std::string tried;
	for (const std::string &name : names) {
		void *h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
		std::string reason;
		if (!h) {
			const char *e = dlerror();
			reason = e ? e : "dlopen failed";
			/* dlerror() repeats the name first: keep only what follows it. */
			if (reason.rfind(name + ": ", 0) == 0)
				reason.erase(0, name.size() + 2);
		} else {
			std::string missing;
			if (resolve(h, &l.rt, &missing)) {
				l.rt.library = name;
				*out = l.rt;
				return true;
			}
			reason = "no symbol " + missing;
			dlclose(h);
			l.rt = CudaRuntime{};
		}
		tried += (tried.empty() ? "" : ", ") + name + ": " + reason;
	}
	*why = "CUDA runtime not found (tried " + tried + ")";
	return false;
}

namespace {

Loaded load()
{
	Loaded l;
	std::vector<std::string> names;
	if (const char *env = std::getenv("KVBLK_CUDART"); env && *env)
		names.emplace_back(env);
	for (const char *n : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
		names.emplace_back(n);
	l.ok = load_cuda_runtime(names, &l.rt, &l.why);
	return l;
}

} // namespace

const CudaRuntime *cuda_runtime(std::string *why)
{
	static std::once_flag once;
	static Loaded loaded;
	std::call_once(once, [] { loaded = load(); });
	if (!loaded.ok) {
		if (why)
			*why = loaded.why;
		return nullptr;
	}
	return &loaded.rt;
}

std::string cuda_error_text(const CudaRuntime &rt, cuda_error_t err)
{
	const char *s = rt.get_error_string ? rt.get_error_string(err) : nullptr;
	return "CUDA error " + std::to_string(err) + " (" + (s ? s : "unknown") + ")";
}

} // namespace kvblk::detail

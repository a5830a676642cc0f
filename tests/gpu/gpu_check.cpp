// SPDX-License-Identifier: MIT
// gpu_check: load N objects from a file into GPU memory with kvblk_load_many() (KVBLK_MEM_CUDA:
// the staged path without kvblk.ko, P2P with it), verify them on the GPU side (copied back
// with cudaMemcpy and compared with the pattern), and print GB/s beside the same load into
// host memory. The CUDA runtime is dlopen'd (libkvblk/cuda_runtime.hpp): the program builds
// without CUDA and exits 4 ("skip") where no runtime or GPU is found.
//
// Exit: 0 every check passed, 1 a check failed, 2 bad usage or setup error, 4 no CUDA/GPU.
#include <kvblk/kvblk.h>

#include "libkvblk/cuda_runtime.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace {

using kvblk::detail::CudaRuntime;
using kvblk::detail::kCudaSuccess;
constexpr int kExitFail = 1, kExitSetup = 2, kExitSkip = 4;

struct Args {
	std::string file;
	std::string backend = "uring";
	uint32_t objects = 64;
	uint64_t object_bytes = 16ull << 20;
	uint32_t reps = 3;
	uint32_t staging_buffers = 0;
	uint64_t staging_bytes = 0;
	bool keep = false;
};

void usage()
{
	std::fprintf(stderr,
		     "usage: gpu_check [--file PATH] [--objects N] [--object-mib M | --object-kib K]\n"
		     "                 [--backend uring|threadpool|psync|kmod] [--reps R]\n"
		     "                 [--staging BUFFERS:MIB] [--keep]\n"
		     "defaults: 64 objects of 16 MiB in $TMPDIR/kvblk-gpu-check.dat (/var/tmp), uring, 3 reps,\n"
		     "          the library's staging pool (4 x 8 MiB)\n");
}

bool parse(int argc, char **argv, Args *a)
{
	const char *tmp = std::getenv("TMPDIR");
	a->file = std::string(tmp && *tmp ? tmp : "/var/tmp") + "/kvblk-gpu-check.dat";
	for (int i = 1; i < argc; i++) {
		const std::string k = argv[i];
		auto val = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
		const char *v = nullptr;
		if (k == "--keep") {
			a->keep = true;
		} else if (k == "--help" || k == "-h") {
			usage();
			std::exit(0);
		} else if (!(v = val())) {
			return false;
		} else if (k == "--file") {
			a->file = v;
		} else if (k == "--objects") {
			a->objects = uint32_t(std::strtoul(v, nullptr, 0));
		} else if (k == "--object-mib") {
			a->object_bytes = std::strtoull(v, nullptr, 0) << 20;
		} else if (k == "--object-kib") {
			a->object_bytes = std::strtoull(v, nullptr, 0) << 10;
		} else if (k == "--backend") {
			a->backend = v;
		} else if (k == "--reps") {
			a->reps = uint32_t(std::strtoul(v, nullptr, 0));
		} else if (k == "--staging") {
			char *end = nullptr;
			a->staging_buffers = uint32_t(std::strtoul(v, &end, 0));
			if (!end || *end != ':')
				return false;
			a->staging_bytes = std::strtoull(end + 1, nullptr, 0) << 20;
		} else {
			return false;
		}
	}
	return a->objects > 0 && a->object_bytes >= 4096 && a->object_bytes % 4096 == 0 && a->reps > 0;
}

/* The pattern: one 64-bit word per 8 bytes, a function of the file offset. */
inline uint64_t word_at(uint64_t off)
{
	uint64_t z = off * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull;
	z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
	return z ^ (z >> 29);
}

void fill(uint8_t *p, uint64_t file_off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 8) {
		const uint64_t w = word_at(file_off + i);
		std::memcpy(p + i, &w, 8);
	}
}

/* Offset of the first wrong word in [p, p+len) holding file bytes from @file_off, or -1. */
int64_t first_mismatch(const uint8_t *p, uint64_t file_off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i += 8) {
		uint64_t w;
		std::memcpy(&w, p + i, 8);
		if (w != word_at(file_off + i))
			return int64_t(i);
	}
	return -1;
}

int write_file(const Args &a)
{
	const uint64_t total = uint64_t(a.objects) * a.object_bytes;
	const int fd = open(a.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		std::fprintf(stderr, "gpu_check: create %s: %s\n", a.file.c_str(), std::strerror(errno));
		return -1;
	}
	std::vector<uint8_t> chunk(std::min<uint64_t>(total, 16ull << 20));
	for (uint64_t off = 0; off < total; off += chunk.size()) {
		const uint64_t n = std::min<uint64_t>(chunk.size(), total - off);
		fill(chunk.data(), off, n);
		if (pwrite(fd, chunk.data(), n, off_t(off)) != ssize_t(n)) {
			std::fprintf(stderr, "gpu_check: write %s: %s\n", a.file.c_str(), std::strerror(errno));
			close(fd);
			return -1;
		}
	}
	fsync(fd);
	/* O_DIRECT loads do not use the page cache; drop ours so that buffered tools agree. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0)
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct LoadResult {
	double best_gbps = 0;
	uint32_t path = 0;
	uint32_t backend = 0;
	int failed = 0;
};

/* Load every object into buffer @buf (offset i * object_bytes), @reps times; best GB/s. */
int load_all(kvblk_dev *dev, const Args &a, uint32_t buf, LoadResult *out)
{
	std::vector<kvblk_desc> d(a.objects);
	std::vector<kvblk_result> r(a.objects);
	for (uint32_t i = 0; i < a.objects; i++)
		d[i] = kvblk_desc{uint64_t(i) * a.object_bytes, a.object_bytes, uint64_t(i) * a.object_bytes, buf, 0, i};
	for (uint32_t rep = 0; rep < a.reps; rep++) {
		kvblk_batch_info bi{};
		bi.info_size = sizeof(bi);
		const auto t0 = std::chrono::steady_clock::now();
		const int ok = kvblk_load_many(dev, d.data(), a.objects, r.data(), &bi);
		const double s = seconds_since(t0);
		if (ok != int(a.objects)) {
			std::fprintf(stderr, "gpu_check: kvblk_load_many: %d of %u: %s\n", ok, a.objects,
				     kvblk_last_error());
			out->failed = 1;
			return -1;
		}
		out->best_gbps = std::max(out->best_gbps, double(a.objects) * double(a.object_bytes) / s / 1e9);
		out->path = bi.path;
		out->backend = bi.backend;
	}
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	Args a;
	if (!parse(argc, argv, &a)) {
		usage();
		return kExitSetup;
	}
	std::string why;
	const CudaRuntime *rt = kvblk::detail::cuda_runtime(&why);
	if (!rt) {
		std::printf("SKIP: no CUDA: %s\n", why.c_str());
		return kExitSkip;
	}
	if (!rt->malloc_device || !rt->free_device || !rt->memcpy_sync || !rt->memset_device) {
		std::printf("SKIP: no CUDA: %s lacks cudaMalloc/cudaFree/cudaMemcpy/cudaMemset\n", rt->library.c_str());
		return kExitSkip;
	}
	int ngpu = 0;
	const int e = rt->get_device_count(&ngpu);
	if (e != kCudaSuccess || ngpu == 0) {
		std::printf("SKIP: no GPU: %s: %s\n", rt->library.c_str(),
			    e != kCudaSuccess ? kvblk::detail::cuda_error_text(*rt, e).c_str() : "0 devices");
		return kExitSkip;
	}
	int rtv = 0;
	if (rt->runtime_get_version)
		rt->runtime_get_version(&rtv);
	const uint64_t total = uint64_t(a.objects) * a.object_bytes;
	std::printf("gpu_check: %s (runtime %d), %d GPU(s); %u objects x %llu KiB = %.2f GiB in %s; backend %s\n",
		    rt->library.c_str(), rtv, ngpu, a.objects, (unsigned long long)(a.object_bytes >> 10),
		    double(total) / double(1ull << 30), a.file.c_str(), a.backend.c_str());

	const auto tw = std::chrono::steady_clock::now();
	if (write_file(a))
		return kExitSetup;
	std::printf("gpu_check: wrote the file in %.1f s\n", seconds_since(tw));

	kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	const int b = kvblk_backend_from_name(a.backend.c_str());
	if (b < 0) {
		std::fprintf(stderr, "gpu_check: %s\n", kvblk_last_error());
		return kExitSetup;
	}
	o.backend = uint32_t(b);
	kvblk_dev *dev = nullptr;
	int rc = kvblk_open(a.file.c_str(), &o, &dev);
	if (rc) {
		std::fprintf(stderr, "gpu_check: kvblk_open(%s): %s\n", a.file.c_str(), kvblk_last_error());
		return kExitSetup;
	}
	if (a.staging_buffers && (rc = kvblk_set_staging(dev, a.staging_buffers, a.staging_bytes))) {
		std::fprintf(stderr, "gpu_check: kvblk_set_staging: %s\n", kvblk_last_error());
		return kExitSetup;
	}
	int status = 0;

	/* 1. Host memory. */
	void *host = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (host == MAP_FAILED) {
		std::fprintf(stderr, "gpu_check: mmap %llu bytes: %s\n", (unsigned long long)total, std::strerror(errno));
		return kExitSetup;
	}
	uint8_t *hp = static_cast<uint8_t *>(host);
	uint32_t hbuf = 0;
	if ((rc = kvblk_register_buffer(dev, KVBLK_MEM_HOST, host, total, &hbuf))) {
		std::fprintf(stderr, "gpu_check: register host buffer: %s\n", kvblk_last_error());
		return kExitSetup;
	}
	LoadResult hr;
	if (load_all(dev, a, hbuf, &hr) == 0) {
		const int64_t bad = first_mismatch(hp, 0, total);
		std::printf("host: %.2f GB/s (best of %u), path %s, backend %s, verify %s\n", hr.best_gbps, a.reps,
			    kvblk_path_name(int(hr.path)), kvblk_backend_name(int(hr.backend)),
			    bad < 0 ? "ok" : "MISMATCH");
		if (bad >= 0) {
			std::printf("FAIL: host byte %lld differs from the file\n", (long long)bad);
			status = kExitFail;
		}
	} else {
		status = kExitFail;
	}
	kvblk_unregister_buffer(dev, hbuf);

	/* 2. GPU memory: load, copy back, compare. */
	void *gpu = nullptr;
	int ce = rt->malloc_device(&gpu, total);
	if (ce != kCudaSuccess) {
		std::fprintf(stderr, "gpu_check: cudaMalloc(%llu): %s\n", (unsigned long long)total,
			     kvblk::detail::cuda_error_text(*rt, ce).c_str());
		return kExitSetup;
	}
	rt->memset_device(gpu, 0, total);
	uint32_t gbuf = 0;
	rc = kvblk_register_buffer(dev, KVBLK_MEM_CUDA, gpu, total, &gbuf);
	if (rc) {
		std::printf("FAIL: register CUDA buffer: %s\n", kvblk_last_error());
		return kExitFail;
	}
	std::printf("gpu_check: %s\n", kvblk_last_error());
	LoadResult gr;
	if (load_all(dev, a, gbuf, &gr) == 0) {
		std::memset(hp, 0, total);
		ce = rt->memcpy_sync(hp, gpu, total, kvblk::detail::kCudaMemcpyDeviceToHost);
		const int64_t bad = ce == kCudaSuccess ? first_mismatch(hp, 0, total) : 0;
		std::printf("cuda: %.2f GB/s (best of %u), path %s, backend %s, verify %s\n", gr.best_gbps, a.reps,
			    kvblk_path_name(int(gr.path)), kvblk_backend_name(int(gr.backend)),
			    ce != kCudaSuccess ? "COPY-BACK FAILED" : bad < 0 ? "ok" : "MISMATCH");
		if (ce != kCudaSuccess || bad >= 0) {
			std::printf("FAIL: GPU byte %lld differs from the file (%s)\n", (long long)bad,
				    ce == kCudaSuccess ? "compare" : kvblk::detail::cuda_error_text(*rt, ce).c_str());
			status = kExitFail;
		}
		if (gr.path != KVBLK_PATH_STAGED && gr.path != KVBLK_PATH_P2P) {
			std::printf("FAIL: a load into CUDA memory reported path %s\n", kvblk_path_name(int(gr.path)));
			status = kExitFail;
		}
	} else {
		status = kExitFail;
	}
	kvblk_stats st{};
	st.stats_size = sizeof(st);
	if (kvblk_get_stats(dev, &st) == 0)
		std::printf("stats: batches host %llu staged %llu p2p %llu; staged_copies %llu; staging_pool_bytes %llu; "
			    "p2p_fallbacks %llu\n",
			    (unsigned long long)st.batches_by_path[KVBLK_PATH_HOST],
			    (unsigned long long)st.batches_by_path[KVBLK_PATH_STAGED],
			    (unsigned long long)st.batches_by_path[KVBLK_PATH_P2P],
			    (unsigned long long)st.staged_copies, (unsigned long long)st.staging_pool_bytes,
			    (unsigned long long)st.p2p_fallbacks);
	if (hr.best_gbps > 0 && gr.best_gbps > 0)
		std::printf("ratio cuda/host: %.2f\n", gr.best_gbps / hr.best_gbps);

	kvblk_unregister_buffer(dev, gbuf);
	kvblk_close(dev);
	rt->free_device(gpu);
	munmap(host, total);
	if (!a.keep)
		unlink(a.file.c_str());
	std::printf("%s\n", status ? "gpu_check: FAILED" : "gpu_check: PASSED");
	return status;
}

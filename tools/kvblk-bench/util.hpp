// SPDX-License-Identifier: MIT
//
// kvblk-bench helpers shared by the store, the runner and the report:
// page-aligned host buffers, clocks, CPU time, resident-set peaks.
#pragma once

#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <utility>

namespace kvblk_bench {

inline constexpr double kGB = 1e9; // GB = 1e9 bytes throughout
inline constexpr double kMiB = 1024.0 * 1024.0;

// The page size host memory asks for. huge: transparent huge pages
// (madvise(MADV_HUGEPAGE) on a 2 MiB-aligned range, before it is faulted),
// which the kernel gives where /sys/kernel/mm/transparent_hugepage/enabled
// is "always" or "madvise" (Debian's default) and it finds free 2 MiB
// blocks; what it did not give stays 4 KiB pages (HostBuffer::thp_bytes()).
// A command into one physically contiguous page is one DMA segment: on the
// project's virtio disk kvblk uring QD 64 read 2.7-4.0 GB/s into 4 KiB pages
// and 4.7-5.2 into huge pages in alternating runs (2026-12-05), as fio did
// (fio.hpp, FioKnobs::hugepages).
enum class HostPages { small, huge };

inline constexpr size_t kHugePageBytes = size_t(2) << 20;

// Anonymous, page-aligned, pre-faulted host memory (an engine's KV buffer).
class HostBuffer {
public:
	HostBuffer() = default;
	explicit HostBuffer(size_t len, HostPages pages = HostPages::small) : len_(len)
	{
		if (pages == HostPages::small) {
			void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
			if (p == MAP_FAILED) {
				len_ = 0;
				return;
			}
			p_ = map_ = static_cast<unsigned char *>(p);
			map_len_ = len;
			return;
		}
		// Over-allocate by a huge page and use its 2 MiB-aligned part:
		// only aligned 2 MiB blocks can be huge pages.
		map_len_ = len + kHugePageBytes;
		void *m = mmap(nullptr, map_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) {
			len_ = map_len_ = 0;
			return;
		}
		map_ = static_cast<unsigned char *>(m);
		const uintptr_t a = (uintptr_t(m) + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1);
		p_ = reinterpret_cast<unsigned char *>(a);
		(void)madvise(p_, len, MADV_HUGEPAGE); // EINVAL without THP: 4 KiB pages
		if (madvise(p_, len, MADV_POPULATE_WRITE) != 0) // before 5.14: touch every page
			for (size_t off = 0; off < len; off += 4096)
				p_[off] = 0;
	}
	HostBuffer(const HostBuffer &) = delete;
	HostBuffer &operator=(const HostBuffer &) = delete;
	HostBuffer(HostBuffer &&o) noexcept
		: p_(std::exchange(o.p_, nullptr)), len_(std::exchange(o.len_, 0)), map_(std::exchange(o.map_, nullptr)),
		  map_len_(std::exchange(o.map_len_, 0))
	{
	}
	HostBuffer &operator=(HostBuffer &&o) noexcept
	{
		if (this != &o) {
			reset();
			p_ = std::exchange(o.p_, nullptr);
			len_ = std::exchange(o.len_, 0);
			map_ = std::exchange(o.map_, nullptr);
			map_len_ = std::exchange(o.map_len_, 0);
		}
		return *this;
	}
	~HostBuffer() { reset(); }

	void reset() noexcept
	{
		if (map_)
			munmap(map_, map_len_);
		p_ = map_ = nullptr;
		len_ = map_len_ = 0;
	}
	[[nodiscard]] unsigned char *data() const noexcept { return p_; }
	[[nodiscard]] size_t size() const noexcept { return len_; }
	explicit operator bool() const noexcept { return p_ != nullptr; }

	// Bytes in transparent huge pages now: AnonHugePages of the
	// /proc/self/smaps entry that holds data() (madvise() made the aligned
	// part an entry of its own); 0 where that cannot be read.
	[[nodiscard]] uint64_t thp_bytes() const noexcept
	{
		FILE *f = p_ ? fopen("/proc/self/smaps", "re") : nullptr;
		if (!f)
			return 0;
		char line[512];
		bool mine = false;
		unsigned long long kib = 0;
		while (fgets(line, sizeof(line), f)) {
			unsigned long lo = 0, hi = 0;
			if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
				mine = lo <= uintptr_t(p_) && uintptr_t(p_) < hi;
				continue;
			}
			if (mine && sscanf(line, "AnonHugePages: %llu kB", &kib) == 1)
				break;
		}
		fclose(f);
		return uint64_t(kib) * 1024;
	}

private:
	unsigned char *p_ = nullptr; // the usable, aligned part
	size_t len_ = 0;
	unsigned char *map_ = nullptr; // the whole mapping
	size_t map_len_ = 0;
};

// CLOCK_MONOTONIC in ns.
inline uint64_t now_ns() noexcept
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// User + system CPU time of the whole process (every thread, the library's
// included) in ns.
inline uint64_t process_cpu_ns() noexcept
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	auto tv = [](const struct timeval &t) { return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_usec) * 1000ull; };
	return tv(ru.ru_utime) + tv(ru.ru_stime);
}

// Peak resident set. Linux keeps it in VmHWM (/proc/self/status) and lets
// a process reset it by writing "5" to /proc/self/clear_refs, so each
// setting can report its own peak; where that is not possible the
// process-lifetime peak from getrusage(ru_maxrss) is used.
inline bool reset_peak_rss() noexcept
{
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = write(fd, "5", 1) == 1;
	close(fd);
	return ok;
}

inline uint64_t peak_rss_bytes() noexcept
{
	if (FILE *f = fopen("/proc/self/status", "re")) {
		char line[256];
		unsigned long long kib = 0;
		bool found = false;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "VmHWM: %llu kB", &kib) == 1) {
				found = true;
				break;
			}
		fclose(f);
		if (found)
			return uint64_t(kib) * 1024;
	}
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return uint64_t(ru.ru_maxrss) * 1024; // KiB on Linux
}

} // namespace kvblk_bench

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

// Anonymous, page-aligned, pre-faulted host memory (an engine's KV buffer).
class HostBuffer {
public:
	HostBuffer() = default;
	explicit HostBuffer(size_t len) : len_(len)
	{
		void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED) {
			len_ = 0;
			return;
		}
		p_ = static_cast<unsigned char *>(p);
	}
	HostBuffer(const HostBuffer &) = delete;
	HostBuffer &operator=(const HostBuffer &) = delete;
	HostBuffer(HostBuffer &&o) noexcept : p_(std::exchange(o.p_, nullptr)), len_(std::exchange(o.len_, 0)) {}
	HostBuffer &operator=(HostBuffer &&o) noexcept
	{
		if (this != &o) {
			reset();
			p_ = std::exchange(o.p_, nullptr);
			len_ = std::exchange(o.len_, 0);
		}
		return *this;
	}
	~HostBuffer() { reset(); }

	void reset() noexcept
	{
		if (p_)
			munmap(p_, len_);
		p_ = nullptr;
		len_ = 0;
	}
	[[nodiscard]] unsigned char *data() const noexcept { return p_; }
	[[nodiscard]] size_t size() const noexcept { return len_; }
	explicit operator bool() const noexcept { return p_ != nullptr; }

private:
	unsigned char *p_ = nullptr;
	size_t len_ = 0;
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

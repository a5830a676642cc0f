// SPDX-License-Identifier: MIT
#include "bio_split.hpp"
#include "sysfs.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <sys/sysmacros.h>
#include <sys/utsname.h>

namespace kvblk::detail {

bool kernel_coalesces_fixed_buffers(const char *release) noexcept
{
	unsigned major = 0, minor = 0;
	if (!release || std::sscanf(release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor >= 11);
}

uint64_t fixed_read_unsplit_bytes(uint64_t max_sectors_kb, uint64_t max_segments, bool coalesces) noexcept
{
	constexpr uint64_t kPage = 4096;
	uint64_t limit = 0;
	if (max_sectors_kb && max_sectors_kb <= (UINT64_MAX >> 10))
		limit = max_sectors_kb << 10;
	if (!coalesces && max_segments) {
		const uint64_t seg = std::min<uint64_t>(max_segments, UINT64_MAX / kPage) * kPage;
		limit = limit ? std::min(limit, seg) : seg;
	}
	return limit;
}

uint64_t blockdev_unsplit_bytes(dev_t rdev) noexcept
{
	try {
		const std::string dir =
			"/sys/dev/block/" + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
		std::string q = dir + "/queue/";
		if (read_sysfs(q + "max_sectors_kb").empty())
			q = dir + "/../queue/"; /* a partition: its disk's queue */
		struct utsname u {};
		const bool coalesces = uname(&u) == 0 && kernel_coalesces_fixed_buffers(u.release);
		return fixed_read_unsplit_bytes(read_sysfs_u64(q + "max_sectors_kb"),
						read_sysfs_u64(q + "max_segments"), coalesces);
	} catch (...) {
		return 0;
	}
}

} // namespace kvblk::detail

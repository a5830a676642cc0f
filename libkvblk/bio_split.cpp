// SPDX-License-Identifier: MIT
#include "bio_split.hpp"

#include <algorithm>
#include <cstdio>

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

} // namespace kvblk::detail

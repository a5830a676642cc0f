// SPDX-License-Identifier: MIT
#include "mapping.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace kvblk::detail {

int check_writable_range(const void *addr, uint64_t len, std::string *why)
{
	const uint64_t start = uint64_t(uintptr_t(addr)), end = start + len;
	std::FILE *f = std::fopen("/proc/self/maps", "re");
	if (!f)
		return 0;
	char line[512], perms[8];
	char buf[160];
	uint64_t at = start; /* bytes below are covered by writable mappings */
	int ret = 0;
	while (at < end && std::fgets(line, sizeof(line), f)) {
		uint64_t lo, hi;
		if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &lo, &hi, perms) != 3)
			continue;
		if (hi <= at)
			continue;
		if (lo > at) { /* the maps are sorted: nothing covers [at, lo) */
			std::snprintf(buf, sizeof(buf), "bytes 0x%" PRIx64 " to 0x%" PRIx64 " are not mapped", at,
				      lo < end ? lo : end);
			ret = -EFAULT;
			break;
		}
		if (perms[1] != 'w') {
			std::snprintf(buf, sizeof(buf), "0x%" PRIx64 "-0x%" PRIx64 " is mapped %s (not writable)", lo,
				      hi, perms);
			ret = -EFAULT;
			break;
		}
		at = hi;
	}
	if (!ret && at < end) {
		std::snprintf(buf, sizeof(buf), "bytes 0x%" PRIx64 " to 0x%" PRIx64 " are not mapped", at, end);
		ret = -EFAULT;
	}
	std::fclose(f);
	if (ret)
		*why = buf;
	return ret;
}

} // namespace kvblk::detail

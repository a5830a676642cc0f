// SPDX-License-Identifier: MIT
#include "sysfs.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kvblk::detail {

std::string read_sysfs(const std::string &file)
{
	FILE *f = std::fopen(file.c_str(), "re");
	if (!f)
		return {};
	char line[256] = "";
	if (!std::fgets(line, sizeof(line), f))
		line[0] = '\0';
	std::fclose(f);
	line[strcspn(line, "\n")] = '\0';
	return line;
}

uint64_t read_sysfs_u64(const std::string &file)
{
	const std::string s = read_sysfs(file);
	char *end = nullptr;
	const unsigned long long v = s.empty() ? 0 : std::strtoull(s.c_str(), &end, 10);
	return end && *end == '\0' ? uint64_t(v) : 0;
}

} // namespace kvblk::detail

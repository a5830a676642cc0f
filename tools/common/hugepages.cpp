// SPDX-License-Identifier: MIT
#include "hugepages.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace kvblk_tools {

namespace {

constexpr const char *kNrHugepages = "/proc/sys/vm/nr_hugepages";

bool read_u64_file(const char *path, uint64_t &v)
{
	std::ifstream in(path);
	return static_cast<bool>(in >> v);
}

} // namespace

HugePageInfo parse_meminfo_hugepages(const std::string &meminfo)
{
	HugePageInfo h;
	std::istringstream in(meminfo);
	std::string key;
	uint64_t value = 0;
	std::string unit;
	for (std::string line; std::getline(in, line);) {
		std::istringstream ls(line);
		if (!(ls >> key >> value))
			continue;
		unit.clear();
		ls >> unit;
		if (key == "HugePages_Total:")
			h.total_pages = value;
		else if (key == "HugePages_Free:")
			h.free_pages = value;
		else if (key == "Hugepagesize:")
			h.page_bytes = unit == "kB" ? value * 1024 : value;
	}
	return h;
}

HugePageInfo read_hugepages()
{
	std::ifstream in("/proc/meminfo");
	std::stringstream ss;
	ss << in.rdbuf();
	return parse_meminfo_hugepages(ss.str());
}

uint64_t hugepages_needed(uint64_t per_job_bytes, uint32_t jobs, uint64_t page_bytes) noexcept
{
	if (!page_bytes)
		return 0;
	return (per_job_bytes + page_bytes - 1) / page_bytes * jobs;
}

HugePageReservation::HugePageReservation(uint64_t pages, bool may_reserve) : info_(read_hugepages())
{
	if (!info_.page_bytes) {
		note_ = "the kernel has no hugetlb pages (no Hugepagesize in /proc/meminfo)";
		return;
	}
	const uint64_t page_mib = info_.page_bytes >> 20;
	if (info_.free_pages >= pages) {
		ok_ = true;
		note_ = fmt::format("{} of {} free {} MiB huge pages", pages, info_.free_pages, page_mib);
		return;
	}
	const uint64_t missing = pages - info_.free_pages;
	uint64_t nr = 0;
	if (!may_reserve || !read_u64_file(kNrHugepages, nr)) {
		note_ = fmt::format("{} free {} MiB huge pages, {} needed (as root: --reserve-hugepages, or sysctl "
				    "vm.nr_hugepages={})",
				    info_.free_pages, page_mib, pages, info_.total_pages + missing);
		return;
	}
	std::ofstream out(kNrHugepages);
	out << nr + missing << '\n';
	out.flush();
	if (!out) {
		note_ = fmt::format("{} free {} MiB huge pages, {} needed, and {} cannot be written: {}", info_.free_pages,
				    page_mib, pages, kNrHugepages, std::strerror(errno));
		return;
	}
	restore_to_ = nr;
	reserved_ = missing;
	info_ = read_hugepages();
	ok_ = info_.free_pages >= pages;
	note_ = ok_ ? fmt::format("reserved {} {} MiB huge pages for the run (vm.nr_hugepages {} -> {}, set back at "
				  "the end)",
				  missing, page_mib, nr, nr + missing)
		    : fmt::format("asked the kernel for {} more {} MiB huge pages and got {} free of {} needed "
				  "(memory too fragmented)",
				  missing, page_mib, info_.free_pages, pages);
}

HugePageReservation::~HugePageReservation()
{
	if (!reserved_)
		return;
	std::ofstream out(kNrHugepages);
	out << restore_to_ << '\n';
}

} // namespace kvblk_tools

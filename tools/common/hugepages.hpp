// SPDX-License-Identifier: MIT
//
// hugetlb pages for fio's buffers (FioKnobs::hugepages, --iomem=mmaphuge):
// how many are free, and, for a root caller who asks, a reservation of the
// missing ones for the length of a run, undone at its end. fio maps each
// job's buffers (iodepth x block size, rounded up to whole huge pages) with
// MAP_HUGETLB: without free pages its point fails ("Cannot allocate
// memory"). Documentation/admin-guide/mm/hugetlbpage.rst: HugePages_Free
// and Hugepagesize in /proc/meminfo, the pool's size in
// /proc/sys/vm/nr_hugepages (a write asks for that many; the kernel may
// give fewer when memory is fragmented).
#pragma once

#include <cstdint>
#include <string>

namespace kvblk_tools {

struct HugePageInfo {
	uint64_t page_bytes = 0; // Hugepagesize (0: the kernel has no hugetlb)
	uint64_t free_pages = 0; // HugePages_Free
	uint64_t total_pages = 0; // HugePages_Total
};

// Parse /proc/meminfo's text (@meminfo) for the default huge page size and
// pool; fields absent are 0.
HugePageInfo parse_meminfo_hugepages(const std::string &meminfo);

// The running kernel's (reads /proc/meminfo).
HugePageInfo read_hugepages();

// Huge pages of @page_bytes needed for @jobs fio jobs that each map
// @per_job_bytes of buffers: each job's mapping is rounded up to a whole
// page. 0 when @page_bytes is 0.
uint64_t hugepages_needed(uint64_t per_job_bytes, uint32_t jobs, uint64_t page_bytes) noexcept;

// Makes @pages free huge pages available for the object's lifetime: when
// fewer are free and @may_reserve, grows /proc/sys/vm/nr_hugepages by the
// difference and, at destruction, sets it back to what it was. ok() tells
// whether @pages are free now; note() says what was done or why not, for
// the report.
class HugePageReservation {
public:
	HugePageReservation(uint64_t pages, bool may_reserve);
	HugePageReservation(const HugePageReservation &) = delete;
	HugePageReservation &operator=(const HugePageReservation &) = delete;
	~HugePageReservation();

	[[nodiscard]] bool ok() const noexcept { return ok_; }
	[[nodiscard]] const std::string &note() const noexcept { return note_; }
	[[nodiscard]] uint64_t page_bytes() const noexcept { return info_.page_bytes; }
	[[nodiscard]] uint64_t reserved() const noexcept { return reserved_; } // pages this object added

private:
	HugePageInfo info_;
	bool ok_ = false;
	uint64_t restore_to_ = 0; // nr_hugepages before, when reserved_ > 0
	uint64_t reserved_ = 0;
	std::string note_;
};

} // namespace kvblk_tools

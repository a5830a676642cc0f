// SPDX-License-Identifier: MIT
// The huge page pool as /proc/meminfo states it, and what fio's jobs need.
#include <gtest/gtest.h>

#include "hugepages.hpp"

using namespace kvblk_tools;

TEST(HugePages, meminfo_fields_parsed_and_kb_scaled)
{
	const std::string meminfo = "MemTotal:       24683748 kB\n"
				    "AnonHugePages:     10240 kB\n"
				    "HugePages_Total:      64\n"
				    "HugePages_Free:       60\n"
				    "HugePages_Rsvd:        0\n"
				    "HugePages_Surp:        0\n"
				    "Hugepagesize:       2048 kB\n"
				    "Hugetlb:          131072 kB\n";
	const HugePageInfo h = parse_meminfo_hugepages(meminfo);
	EXPECT_EQ(h.page_bytes, 2u << 20);
	EXPECT_EQ(h.free_pages, 60u);
	EXPECT_EQ(h.total_pages, 64u);
}

TEST(HugePages, kernel_without_hugetlb_has_no_page_size)
{
	const HugePageInfo h = parse_meminfo_hugepages("MemTotal:       24683748 kB\nAnonHugePages: 0 kB\n");
	EXPECT_EQ(h.page_bytes, 0u);
	EXPECT_EQ(h.free_pages, 0u);
	EXPECT_EQ(hugepages_needed(8u << 20, 4, h.page_bytes), 0u);
}

TEST(HugePages, each_job_rounds_up_to_whole_pages)
{
	const uint64_t page = 2u << 20;
	EXPECT_EQ(hugepages_needed(64 * 131072, 1, page), 4u);		// 8 MiB: 4 pages
	EXPECT_EQ(hugepages_needed(1 * 131072, 16, page), 16u);		// 128 KiB per job: a page each
	EXPECT_EQ(hugepages_needed(3 * (1u << 20), 2, page), 4u);	// 3 MiB: 2 pages each
	EXPECT_EQ(hugepages_needed(0, 3, page), 0u);
}

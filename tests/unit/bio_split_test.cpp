// SPDX-License-Identifier: MIT
// The largest io_uring command of a block device that the block layer takes unsplit
// (libkvblk/bio_split.hpp), and open()'s clamp of the uring backend to it.
#include "libkvblk/bio_split.hpp"

#include <gtest/gtest.h>

using kvblk::detail::fixed_read_unsplit_bytes;
using kvblk::detail::kernel_coalesces_fixed_buffers;

TEST(BioSplit, kernels_that_coalesce_fixed_buffers_of_huge_pages)
{
	EXPECT_FALSE(kernel_coalesces_fixed_buffers("6.1.0-57-amd64"));
	EXPECT_FALSE(kernel_coalesces_fixed_buffers("6.10.14"));
	EXPECT_FALSE(kernel_coalesces_fixed_buffers("5.19.0"));
	EXPECT_TRUE(kernel_coalesces_fixed_buffers("6.11.0"));
	EXPECT_TRUE(kernel_coalesces_fixed_buffers("6.12.117+deb13-amd64"));
	EXPECT_TRUE(kernel_coalesces_fixed_buffers("7.2.13+deb14-amd64"));
	EXPECT_FALSE(kernel_coalesces_fixed_buffers("garbage"));
	EXPECT_FALSE(kernel_coalesces_fixed_buffers(nullptr));
}

TEST(BioSplit, limit_is_max_sectors_and_without_coalescing_the_segments_in_pages)
{
	/* null_blk of the CPU bench: max_sectors_kb 1024, max_segments 128. */
	EXPECT_EQ(fixed_read_unsplit_bytes(1024, 128, false), 512u * 1024);
	EXPECT_EQ(fixed_read_unsplit_bytes(1024, 128, true), 1024u * 1024);
	/* nvme-pci on 6.1: max_segments 127 (NVME_MAX_SEGS), MDTS 512 KiB. */
	EXPECT_EQ(fixed_read_unsplit_bytes(512, 127, false), 127u * 4096);
	/* A small soft limit wins over the segments. */
	EXPECT_EQ(fixed_read_unsplit_bytes(128, 128, false), 128u * 1024);
	EXPECT_EQ(fixed_read_unsplit_bytes(128, 128, true), 128u * 1024);
	/* Unknown inputs leave their limit out. */
	EXPECT_EQ(fixed_read_unsplit_bytes(0, 128, false), 128u * 4096);
	EXPECT_EQ(fixed_read_unsplit_bytes(0, 128, true), 0u);
	EXPECT_EQ(fixed_read_unsplit_bytes(256, 0, false), 256u * 1024);
	EXPECT_EQ(fixed_read_unsplit_bytes(0, 0, false), 0u);
}

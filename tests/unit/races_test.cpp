// SPDX-License-Identifier: MIT
// Calls that the C API allows on several threads at once, run at once, for ThreadSanitizer
// (make tsan) to judge: a data race here passes in a plain build and fails under TSan. Each
// test also checks what the calls returned.
#include "test_util.hpp"

#include <atomic>
#include <thread>

using namespace kvblk_test;

namespace {

/*
 * kvblk_add_target() grows the target table (a vector that reallocates) while
 * kvblk_set_staging() reads target 0's block size on another thread: target 0 is read
 * through a pointer that never moves, not through the table.
 */
TEST(RacesTest, set_staging_reads_target_0_while_targets_are_added)
{
	TempDir dir;
	const std::string path = dir.file("store");
	write_pattern_file(path, 4, 64 * KiB);
	for (int round = 0; round < 8; round++) {
		/* A new device each round: its table starts small and reallocates as it grows. */
		DevPtr dev = open_dev(path, make_opts(KVBLK_BACKEND_PSYNC));
		ASSERT_TRUE(dev);
		std::atomic<bool> stop{false};
		std::atomic<int> staged{0};
		std::thread stager([&] {
			while (!stop.load()) {
				EXPECT_EQ(kvblk_set_staging(dev.get(), 1, 4096), 0) << kvblk_last_error();
				EXPECT_EQ(kvblk_set_staging(dev.get(), 1, 1), -EINVAL) << "below target 0's block size";
				staged++;
			}
		});
		while (staged.load() == 0)
			std::this_thread::yield();
		std::vector<uint32_t> ids;
		for (int i = 0; i < 40; i++) {
			uint32_t id = 0;
			EXPECT_EQ(kvblk_add_target(dev.get(), path.c_str(), 0, &id), 0) << kvblk_last_error();
			ids.push_back(id);
		}
		stop = true;
		stager.join();
		for (uint32_t id : ids)
			EXPECT_EQ(kvblk_remove_target(dev.get(), id), 0);
		EXPECT_EQ(get_info(dev.get()).targets, 1u);
	}
}

} // namespace

// SPDX-License-Identifier: MIT
// Version queries, backend names, and the C header compiled as C.
#include "c_header.h"
#include "test_util.hpp"

#include <cstddef>
#include <thread>

using namespace kvblk_test;

namespace {

TEST(VersionTest, string_matches_header)
{
	const std::string want = std::to_string(KVBLK_VERSION_MAJOR) + "." + std::to_string(KVBLK_VERSION_MINOR) +
				 "." + std::to_string(KVBLK_VERSION_PATCH);
	EXPECT_EQ(std::string(kvblk_version()), want);
	EXPECT_EQ(want, "0.4.0");
}

TEST(VersionTest, check_version)
{
	EXPECT_EQ(KVBLK_CHECK_VERSION(), 1);
	EXPECT_EQ(kvblk_check_version(0, 0), 1);
	EXPECT_EQ(kvblk_check_version(0, 1), 1);
	EXPECT_EQ(kvblk_check_version(0, 2), 1);
	EXPECT_EQ(kvblk_check_version(0, 3), 1);
	EXPECT_EQ(kvblk_check_version(0, 4), 1);
	EXPECT_EQ(kvblk_check_version(0, 5), 0) << "a program built against a newer minor";
	EXPECT_EQ(kvblk_check_version(1, 0), 0) << "another major";
	EXPECT_EQ(kvblk_check_version(-1, 0), 0);
	EXPECT_EQ(kvblk_check_version(0, -1), 0);
}

TEST(BackendNameTest, names_round_trip)
{
	const char *names[] = {"auto", "uring", "threadpool", "psync", "kmod", "uring_cmd"};
	for (int i = 0; i < KVBLK_BACKEND_MAX; i++) {
		EXPECT_STREQ(kvblk_backend_name(i), names[i]);
		EXPECT_EQ(kvblk_backend_from_name(names[i]), i);
	}
	EXPECT_STREQ(kvblk_backend_name(-1), "unknown");
	EXPECT_STREQ(kvblk_backend_name(KVBLK_BACKEND_MAX), "unknown");
	EXPECT_EQ(kvblk_backend_from_name("URING"), -EINVAL);
	EXPECT_EQ(kvblk_backend_from_name(""), -EINVAL);
	EXPECT_EQ(kvblk_backend_from_name(nullptr), -EINVAL);
}

TEST(LastErrorTest, is_per_thread)
{
	kvblk_dev *d = nullptr;
	EXPECT_EQ(kvblk_open("/var/tmp/kvblk-unit-no-such-file", nullptr, &d), -ENOENT);
	const std::string here = kvblk_last_error();
	EXPECT_NE(here.find("kvblk-unit-no-such-file"), std::string::npos) << here;
	std::string there = "unset";
	std::thread([&] { there = kvblk_last_error(); }).join();
	EXPECT_EQ(there, "");
}

TEST(CHeaderTest, compiles_as_c_with_the_same_layout)
{
	struct kvblk_c_layout c{};
	kvblk_c_get_layout(&c);
	EXPECT_EQ(c.open_opts, sizeof(kvblk_open_opts));
	EXPECT_EQ(c.dev_info, sizeof(kvblk_dev_info));
	EXPECT_EQ(c.desc, sizeof(kvblk_desc));
	EXPECT_EQ(c.result, sizeof(kvblk_result));
	EXPECT_EQ(c.batch_info, sizeof(kvblk_batch_info));
	EXPECT_EQ(c.stats, sizeof(kvblk_stats));
	EXPECT_EQ(c.off_opts_create_bytes, offsetof(kvblk_open_opts, create_bytes));
	EXPECT_EQ(c.off_info_reason, offsetof(kvblk_dev_info, backend_reason));
	EXPECT_EQ(c.off_desc_tag, offsetof(kvblk_desc, tag));
	EXPECT_EQ(c.off_result_tag, offsetof(kvblk_result, tag));
	EXPECT_EQ(c.off_batch_elapsed, offsetof(kvblk_batch_info, elapsed_ns));
	EXPECT_EQ(c.off_stats_cmd_hist, offsetof(kvblk_stats, cmd_lat_hist));
	/* The descriptor and result are fixed-size wire formats. */
	EXPECT_EQ(sizeof(kvblk_desc), 48u); /* 40 in 0.2: the KVBLK_0.1 symbols read those */
	EXPECT_EQ(offsetof(kvblk_desc, target), 40u);
	EXPECT_EQ(sizeof(kvblk_cqe), 64u);
	EXPECT_EQ(sizeof(kvblk_result), 24u);
}

TEST(CHeaderTest, calls_from_c)
{
	EXPECT_EQ(kvblk_c_smoke("/var/tmp/kvblk-unit-no-such-file"), -ENOENT);
}

} // namespace

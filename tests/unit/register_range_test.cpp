// SPDX-License-Identifier: MIT
// kvblk_register_buffer() of host memory that cannot be a destination: read-only, or with a
// hole. -EFAULT on every backend, a message that says which bytes and why, nothing
// registered, and no RLIMIT_MEMLOCK fallback counted.
#include "test_util.hpp"

#include <sys/mman.h>

using namespace kvblk_test;

namespace {

class RegisterRangeTest : public ::testing::TestWithParam<BackendCase> {
protected:
	void SetUp() override
	{
		path_ = dir_.file("store");
		write_pattern_file(path_, 4, 64 * KiB);
		dev_ = open_dev(path_, make_opts(GetParam().backend, GetParam().workers, GetParam().queue_depth));
		ASSERT_TRUE(dev_);
		page_ = uint64_t(sysconf(_SC_PAGESIZE));
	}

	/* Registration fails with -EFAULT naming @word, leaves no buffer and no fallback. */
	void expect_efault(void *p, uint64_t len, const char *word)
	{
		uint32_t id = 77;
		EXPECT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, p, len, &id), -EFAULT);
		EXPECT_EQ(id, 77u);
		const std::string msg = kvblk_last_error();
		EXPECT_NE(msg.find(word), std::string::npos) << msg;
		EXPECT_EQ(msg.find("RLIMIT_MEMLOCK"), std::string::npos) << msg;
		EXPECT_EQ(get_stats(dev_.get()).memlock_fallbacks, 0u);
		/* Nothing was left registered: the first id is still free. */
		AlignedBuf ok(page_);
		ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, ok.data(), page_, &id), 0);
		EXPECT_EQ(id, 0u);
		EXPECT_EQ(kvblk_unregister_buffer(dev_.get(), id), 0);
	}

	TempDir dir_;
	std::string path_;
	DevPtr dev_;
	uint64_t page_ = 4096;
};

TEST_P(RegisterRangeTest, read_only_memory_is_efault)
{
	void *p = mmap(nullptr, 4 * page_, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(p, MAP_FAILED);
	expect_efault(p, 4 * page_, "not writable");
	/* Writable at first, made read-only in its middle. */
	void *q = mmap(nullptr, 4 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(q, MAP_FAILED);
	ASSERT_EQ(mprotect(static_cast<uint8_t *>(q) + page_, page_, PROT_READ), 0);
	expect_efault(q, 4 * page_, "not writable");
	munmap(p, 4 * page_);
	munmap(q, 4 * page_);
}

TEST_P(RegisterRangeTest, range_with_a_hole_is_efault)
{
	auto *p = static_cast<uint8_t *>(mmap(nullptr, 4 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
					      -1, 0));
	ASSERT_NE(p, MAP_FAILED);
	ASSERT_EQ(munmap(p + 2 * page_, page_), 0);
	expect_efault(p, 4 * page_, "not mapped");
	/* A range that ends in unmapped memory. */
	expect_efault(p + page_, 2 * page_, "not mapped");
	/* The mapped part alone is fine, and loads work. */
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, p, 2 * page_, &id), 0) << kvblk_last_error();
	const kvblk_desc d = buf_desc(0, 2 * page_, id, 0, 1);
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(p, expected_bytes(0, 2 * page_, 64 * KiB).data(), 2 * page_), 0);
	EXPECT_EQ(kvblk_unregister_buffer(dev_.get(), id), 0);
	munmap(p, 2 * page_);
	munmap(p + 3 * page_, page_);
}

INSTANTIATE_TEST_SUITE_P(Backends, RegisterRangeTest, ::testing::ValuesIn(kAllBackends), case_name);

} // namespace

// SPDX-License-Identifier: MIT
// Registered buffers whose memory the program replaces (MADV_DONTNEED, munmap + mmap at the
// same address): kvblk_check_buffer() finds it for io_uring fixed buffers (whose loads would
// go to the old pages and report success), marks the buffer stale so that loads naming it
// fail with -ESTALE, and after unregister + register loads are exact again. Backends without
// pinned pages load into the new mapping, and the check says the buffer is intact.
#include "test_util.hpp"

#include <sys/mman.h>

using namespace kvblk_test;

namespace {

constexpr uint64_t kObj = 64 * KiB;

class RemapTest : public ::testing::TestWithParam<BackendCase> {
protected:
	void SetUp() override
	{
		path_ = dir_.file("store");
		write_pattern_file(path_, 8, kObj);
		dev_ = open_dev(path_, make_opts(GetParam().backend, GetParam().workers, GetParam().queue_depth));
		ASSERT_TRUE(dev_);
		mem_ = static_cast<uint8_t *>(
			mmap(nullptr, 2 * kObj, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
		ASSERT_NE(mem_, MAP_FAILED);
		ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, mem_, 2 * kObj, &id_), 0);
		pinned_ = GetParam().backend == KVBLK_BACKEND_URING; /* fixed buffers */
	}
	void TearDown() override { munmap(mem_, 2 * kObj); }

	/* Load objects 1 and 2 into the buffer: the call's return. */
	int load(kvblk_batch_info *bi = nullptr)
	{
		const kvblk_desc d[2] = {buf_desc(kObj, kObj, id_, 0, 1), buf_desc(2 * kObj, kObj, id_, kObj, 2)};
		kvblk_result r[2];
		return kvblk_load_many(dev_.get(), d, 2, r, bi);
	}
	bool exact() const
	{
		return std::memcmp(mem_, expected_bytes(kObj, 2 * kObj, kObj).data(), 2 * kObj) == 0;
	}

	/* After the memory was replaced: stale for fixed buffers, else loads reach the new memory. */
	void expect_detected(const char *how)
	{
		SCOPED_TRACE(how);
		if (!pinned_) {
			EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), 0) << kvblk_last_error();
			ASSERT_EQ(load(), 2) << kvblk_last_error();
			EXPECT_TRUE(exact());
			return;
		}
		std::memset(mem_, 0x77, 2 * kObj);
		EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), -ESTALE);
		EXPECT_NE(std::string(kvblk_last_error()).find("pinned"), std::string::npos) << kvblk_last_error();
		EXPECT_EQ(mem_[0], 0x77) << "the probe did not restore the bytes";
		EXPECT_EQ(mem_[kObj + 4096], 0x77);
		kvblk_batch_info bi = new_batch_info();
		EXPECT_EQ(load(&bi), -ESTALE);
		EXPECT_EQ(bi.bad_index, 0);
		EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), -ESTALE) << "stale is kept";
		/* Registered again, it maps the new memory. */
		ASSERT_EQ(kvblk_unregister_buffer(dev_.get(), id_), 0);
		ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, mem_, 2 * kObj, &id_), 0);
		EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), 0) << kvblk_last_error();
		ASSERT_EQ(load(), 2) << kvblk_last_error();
		EXPECT_TRUE(exact());
	}

	TempDir dir_;
	std::string path_;
	DevPtr dev_;
	uint8_t *mem_ = nullptr;
	uint32_t id_ = 0;
	bool pinned_ = false;
};

TEST_P(RemapTest, intact_buffer_checks_clean_and_keeps_its_bytes)
{
	ASSERT_EQ(load(), 2) << kvblk_last_error();
	ASSERT_TRUE(exact());
	EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), 0) << kvblk_last_error();
	EXPECT_TRUE(exact()) << "the probe changed the buffer";
	EXPECT_EQ(get_stats(dev_.get()).memlock_fallbacks, 0u);
	EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_ + 1), -ENOENT);
	EXPECT_EQ(kvblk_check_buffer(nullptr, id_), -EINVAL);
}

TEST_P(RemapTest, madv_dontneed_is_found)
{
	ASSERT_EQ(load(), 2) << kvblk_last_error();
	ASSERT_EQ(madvise(mem_, 2 * kObj, MADV_DONTNEED), 0);
	expect_detected("MADV_DONTNEED");
}

TEST_P(RemapTest, munmap_and_mmap_at_the_same_address_is_found)
{
	ASSERT_EQ(load(), 2) << kvblk_last_error();
	ASSERT_EQ(munmap(mem_ + kObj, kObj), 0);
	void *again = mmap(mem_ + kObj, kObj, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ(again, static_cast<void *>(mem_ + kObj));
	expect_detected("munmap + mmap");
}

TEST_P(RemapTest, unmapped_range_is_efault_and_stale)
{
	ASSERT_EQ(munmap(mem_ + kObj, kObj), 0);
	EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), -EFAULT);
	EXPECT_NE(std::string(kvblk_last_error()).find("not mapped"), std::string::npos) << kvblk_last_error();
	const kvblk_desc d = buf_desc(0, kObj, id_, 0, 1); /* even its mapped half */
	kvblk_result r{};
	EXPECT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, nullptr), -ESTALE);
	EXPECT_EQ(r.status, -ESTALE);
	/* TearDown unmaps the rest. */
	void *again = mmap(mem_ + kObj, kObj, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ(again, static_cast<void *>(mem_ + kObj));
}

INSTANTIATE_TEST_SUITE_P(Backends, RemapTest, ::testing::ValuesIn(kAllBackends), case_name);

} // namespace

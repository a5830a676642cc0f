// SPDX-License-Identifier: MIT
// kvblk_flush(): its errors, and that it writes back what stores left dirty (the page cache
// of a KVBLK_OPEN_BUFFERED file, observed with cachestat(2) where the kernel has it).
#include "test_util.hpp"

#include <sys/syscall.h>

using namespace kvblk_test;

namespace {

constexpr uint64_t kBytes = 1 * MiB;

/* cachestat(2) (Linux 6.5): the page-cache state of a file range. Not in every libc's headers. */
struct CacheStatRange {
	uint64_t off, len;
};
struct CacheStat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
constexpr long kSysCachestat = 451;

/* Dirty + writeback pages of @path, or -errno (-ENOSYS: no cachestat). */
int64_t unwritten_pages(const std::string &path)
{
	const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	CacheStatRange r{0, 0}; /* len 0: to the end of the file */
	CacheStat cs{};
	const long ret = syscall(kSysCachestat, fd, &r, &cs, 0);
	const int e = errno;
	close(fd);
	if (ret != 0)
		return -e;
	return int64_t(cs.nr_dirty + cs.nr_writeback);
}

class FlushTest : public ::testing::Test {
protected:
	DevPtr open_store(const std::string &path, uint32_t flags, kvblk_backend b = KVBLK_BACKEND_PSYNC)
	{
		kvblk_open_opts o = make_opts(b, 0, 0, 0, flags | KVBLK_OPEN_CREATE);
		o.create_bytes = kBytes;
		return open_dev(path, o);
	}

	/* Store the pattern over all of target @t of @dev. */
	void store_all(kvblk_dev *dev, uint32_t t)
	{
		AlignedBuf src(kBytes);
		fill_pattern(src.data(), 0, kBytes, kBytes);
		kvblk_desc d = plain_desc(0, kBytes, src.data(), 1);
		d.target = t;
		kvblk_result r{};
		ASSERT_EQ(kvblk_store_many(dev, &d, 1, &r, nullptr), 1) << kvblk_last_error();
	}

	TempDir dir_;
};

TEST_F(FlushTest, argument_errors)
{
	const std::string path = dir_.file("w");
	DevPtr dev = open_store(path, KVBLK_OPEN_WRITE);
	ASSERT_TRUE(dev);
	EXPECT_EQ(kvblk_flush(nullptr, 0, 0), -EINVAL);
	EXPECT_EQ(kvblk_flush(dev.get(), 0, 1), -EINVAL);
	EXPECT_EQ(kvblk_flush(dev.get(), 7, 0), -ENOENT);
	EXPECT_NE(std::string(kvblk_last_error()).find("target 7"), std::string::npos) << kvblk_last_error();

	/* A read-only target: nothing of it to flush. KVBLK_TARGET_ALL skips it. */
	write_pattern_file(dir_.file("ro"), 1, kBytes);
	uint32_t ro = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), dir_.file("ro").c_str(), 0, &ro), 0) << kvblk_last_error();
	EXPECT_EQ(kvblk_flush(dev.get(), ro, 0), -EBADF);
	EXPECT_NE(std::string(kvblk_last_error()).find("KVBLK_OPEN_WRITE"), std::string::npos) << kvblk_last_error();
	EXPECT_EQ(kvblk_flush(dev.get(), KVBLK_TARGET_ALL, 0), 0) << kvblk_last_error();
	EXPECT_EQ(kvblk_flush(dev.get(), 0, 0), 0) << kvblk_last_error();

	/* A device opened read-only has nothing to flush either. */
	DevPtr rodev = open_dev(dir_.file("ro"), make_opts(KVBLK_BACKEND_PSYNC));
	EXPECT_EQ(kvblk_flush(rodev.get(), 0, 0), -EBADF);
	EXPECT_EQ(kvblk_flush(rodev.get(), KVBLK_TARGET_ALL, 0), 0);
}

/* The target is pinned while it is flushed; afterwards it can be removed. */
TEST_F(FlushTest, flushed_target_can_be_removed_afterwards)
{
	DevPtr dev = open_store(dir_.file("w"), KVBLK_OPEN_WRITE);
	ASSERT_TRUE(dev);
	const std::string other = dir_.file("o");
	{
		DevPtr mk = open_store(other, KVBLK_OPEN_WRITE);
		ASSERT_TRUE(mk);
	}
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), other.c_str(), KVBLK_OPEN_WRITE, &id), 0) << kvblk_last_error();
	store_all(dev.get(), id);
	EXPECT_EQ(kvblk_flush(dev.get(), id, 0), 0) << kvblk_last_error();
	EXPECT_EQ(kvblk_remove_target(dev.get(), id), 0) << "the flush left its pin behind";
}

/* Stores through the page cache leave dirty pages; kvblk_flush() writes them back. */
TEST_F(FlushTest, buffered_store_is_written_back_by_flush)
{
	const std::string a = dir_.file("a"), b = dir_.file("b");
	DevPtr dev = open_store(a, KVBLK_OPEN_WRITE | KVBLK_OPEN_BUFFERED, KVBLK_BACKEND_URING);
	ASSERT_TRUE(dev);
	{
		DevPtr mk = open_store(b, KVBLK_OPEN_WRITE);
		ASSERT_TRUE(mk);
	}
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), b.c_str(), KVBLK_OPEN_WRITE | KVBLK_OPEN_BUFFERED, &id), 0);
	if (unwritten_pages(a) == -ENOSYS)
		GTEST_SKIP() << "no cachestat(2) (Linux < 6.5): the page cache cannot be observed";

	/* One target by id. */
	store_all(dev.get(), 0);
	const int64_t before = unwritten_pages(a);
	ASSERT_GE(before, 0);
	if (before == 0)
		GTEST_SKIP() << "the kernel wrote the pages back before the flush (memory pressure)";
	ASSERT_EQ(kvblk_flush(dev.get(), 0, 0), 0) << kvblk_last_error();
	EXPECT_EQ(unwritten_pages(a), 0) << before << " pages were dirty before the flush";

	/* Every writable target. */
	store_all(dev.get(), 0);
	store_all(dev.get(), id);
	const int64_t da = unwritten_pages(a), db = unwritten_pages(b);
	if (da == 0 || db == 0)
		GTEST_SKIP() << "the kernel wrote the pages back before the flush (memory pressure)";
	ASSERT_EQ(kvblk_flush(dev.get(), KVBLK_TARGET_ALL, 0), 0) << kvblk_last_error();
	EXPECT_EQ(unwritten_pages(a), 0);
	EXPECT_EQ(unwritten_pages(b), 0);

	/* The bytes are the ones stored. */
	AlignedBuf back(kBytes);
	const kvblk_desc d = plain_desc(0, kBytes, back.data(), 0);
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(dev.get(), &d, 1, &r, nullptr), 1);
	EXPECT_EQ(std::memcmp(back.data(), expected_bytes(0, kBytes, kBytes).data(), kBytes), 0);
}

} // namespace

// SPDX-License-Identifier: MIT
// The end-of-file rule (kvblk.h, struct kvblk_result): a target's end is its size when the
// batch starts, and a descriptor past it rejects the whole call (-ERANGE, bad_index); a file
// that shrinks while the batch runs fails only the objects that meet the new end, with
// -ENODATA and result.bytes = the bytes from the object's start that are valid.
#include "test_util.hpp"

#include <atomic>

using namespace kvblk_test;
using kvblk::testing::CommandInfo;
using kvblk::testing::Seams;

namespace {

constexpr uint64_t kObj = 64 * KiB;
constexpr uint64_t kCmd = 16 * KiB;
constexpr uint64_t kCut = 24 * KiB; /* object 1 keeps this many bytes */

struct EofCase {
	const char *name;
	kvblk_backend backend;
	uint32_t workers;
	uint32_t queue_depth;
};

/* Commands run one after another, so the truncation lands at a known point. */
const EofCase kEofCases[] = {
	{"psync", KVBLK_BACKEND_PSYNC, 0, 0},
	{"threadpool1", KVBLK_BACKEND_THREADPOOL, 1, 0},
	{"uring_qd1", KVBLK_BACKEND_URING, 1, 1},
};

class EofTest : public ::testing::TestWithParam<EofCase> {
protected:
	void SetUp() override
	{
		path_ = dir_.file("store");
		write_pattern_file(path_, 4, kObj);
		const EofCase &c = GetParam();
		dev_ = open_dev(path_, make_opts(c.backend, c.workers, c.queue_depth, kCmd));
		ASSERT_TRUE(dev_);
	}

	TempDir dir_;
	std::string path_;
	DevPtr dev_;
};

TEST_P(EofTest, file_shrinking_mid_batch_reports_the_valid_prefix)
{
	/* When object 0's first command completes, the file is cut inside object 1. */
	std::atomic<bool> cut{false};
	const std::string path = path_;
	Seams s;
	s.on_complete = [&](const CommandInfo &ci, int64_t res) {
		if (ci.object == 0 && !cut.exchange(true)) {
			EXPECT_EQ(truncate(path.c_str(), off_t(kObj + kCut)), 0);
		}
		return res;
	};
	AlignedBuf dst(2 * kObj, 0xEE);
	const kvblk_desc d[2] = {plain_desc(0, kObj, dst.data(), 0), plain_desc(kObj, kObj, dst.data() + kObj, 1)};
	kvblk_result r[2];
	kvblk_batch_info bi = new_batch_info();
	{
		SeamGuard g(s);
		EXPECT_EQ(kvblk_load_many(dev_.get(), d, 2, r, &bi), 1) << kvblk_last_error();
	}
	EXPECT_EQ(r[0].status, 0);
	EXPECT_EQ(r[0].bytes, kObj);
	EXPECT_EQ(r[1].status, -ENODATA);
	EXPECT_EQ(r[1].bytes, kCut) << "the valid prefix of the shrunk object";
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(0, kObj + kCut, kObj).data(), kObj + kCut), 0);
	EXPECT_EQ(bi.bytes, kObj) << "only succeeded objects count as transferred";
	EXPECT_EQ(bi.failed, 1u);
	EXPECT_EQ(bi.bad_index, -1);
	EXPECT_EQ(get_stats(dev_.get()).bytes_read, kObj);

	/* The next batch starts with the new size: past it is an input error for the whole call. */
	EXPECT_EQ(kvblk_load_many(dev_.get(), d, 2, r, &bi), -ERANGE);
	EXPECT_EQ(bi.bad_index, 1);
	EXPECT_EQ(r[0].status, -ECANCELED);
	EXPECT_EQ(r[1].status, -ERANGE);
	EXPECT_EQ(r[1].bytes, 0u);
}

/* A cut exactly at an object's start: nothing of it is valid, bytes 0. */
TEST_P(EofTest, file_cut_at_an_object_start_reports_zero_bytes)
{
	std::atomic<bool> cut{false};
	const std::string path = path_;
	Seams s;
	s.on_complete = [&](const CommandInfo &ci, int64_t res) {
		if (ci.object == 0 && !cut.exchange(true)) {
			EXPECT_EQ(truncate(path.c_str(), off_t(kObj)), 0);
		}
		return res;
	};
	AlignedBuf dst(2 * kObj, 0xEE);
	const kvblk_desc d[2] = {plain_desc(0, kObj, dst.data(), 0), plain_desc(kObj, kObj, dst.data() + kObj, 1)};
	kvblk_result r[2];
	{
		SeamGuard g(s);
		EXPECT_EQ(kvblk_load_many(dev_.get(), d, 2, r, nullptr), 1) << kvblk_last_error();
	}
	EXPECT_EQ(r[1].status, -ENODATA);
	EXPECT_EQ(r[1].bytes, 0u);
	EXPECT_TRUE(dst.all(kObj, kObj, 0xEE)) << "bytes were written past the end of the file";
}

INSTANTIATE_TEST_SUITE_P(Backends, EofTest, ::testing::ValuesIn(kEofCases),
			 [](const ::testing::TestParamInfo<EofCase> &i) { return std::string(i.param.name); });

} // namespace

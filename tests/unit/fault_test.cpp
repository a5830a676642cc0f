// SPDX-License-Identifier: MIT
// Faults injected through the completion seam (libkvblk/testing.hpp), for every backend:
// short transfers, -EAGAIN (retried and exhausted), -EIO, zero-byte completions; and a real
// io_uring completion-queue overflow.
#include "test_util.hpp"

#include <atomic>

using namespace kvblk_test;
using kvblk::testing::CommandInfo;
using kvblk::testing::Seams;

namespace {

class FaultTest : public StoreTest, public ::testing::WithParamInterface<BackendCase> {
protected:
	DevPtr open(uint32_t eagain_retries = 0)
	{
		const BackendCase &c = GetParam();
		kvblk_open_opts o = make_opts(c.backend, c.workers, c.queue_depth);
		o.eagain_retries = eagain_retries;
		DevPtr d = open_dev(path_, o);
		info_ = get_info(d.get());
		return d;
	}

	/* Load every object in order into dst_; returns the call's value. */
	int load_all(kvblk_dev *dev, std::vector<kvblk_result> *r, kvblk_batch_info *bi = nullptr)
	{
		descs_.clear();
		for (uint64_t i = 0; i < kObjects; i++)
			descs_.push_back(plain_desc(i * kObjectBytes, kObjectBytes, dst_.data() + i * kObjectBytes, i));
		r->assign(kObjects, kvblk_result{});
		return kvblk_load_many(dev, descs_.data(), uint32_t(kObjects), r->data(), bi);
	}

	/* Object @i in dst_ holds its exact bytes. */
	[[nodiscard]] bool object_exact(uint64_t i) const
	{
		const auto want = expected_bytes(i * kObjectBytes, kObjectBytes, kObjectBytes);
		return std::memcmp(dst_.data() + i * kObjectBytes, want.data(), kObjectBytes) == 0;
	}

	[[nodiscard]] uint64_t base_commands() const
	{
		return kObjects * commands_for(GetParam().backend, kObjectBytes, info_.max_cmd_bytes);
	}

	/*
	 * Commands of a batch where one object's first command failed after @retries retries:
	 * psync and threadpool stop that object there; uring has issued all of its commands.
	 */
	[[nodiscard]] uint64_t commands_with_one_failure(uint64_t retries) const
	{
		const uint64_t per_object = commands_for(GetParam().backend, kObjectBytes, info_.max_cmd_bytes);
		if (GetParam().backend == KVBLK_BACKEND_URING)
			return base_commands() + retries;
		return base_commands() - (per_object - 1) + retries;
	}

	kvblk_dev_info info_{};
	AlignedBuf dst_{kObjects * kObjectBytes};
	std::vector<kvblk_desc> descs_;
};

TEST_P(FaultTest, short_transfers_are_resubmitted_and_counted)
{
	std::atomic<uint64_t> injected{0};
	std::atomic<uint32_t> lbs{512};
	Seams s;
	s.on_complete = [&](const CommandInfo &c, int64_t res) -> int64_t {
		/* First submission of every command of every third object: half of it, block aligned. */
		if (c.attempt == 0 && c.object % 3 == 0 && res > 0) {
			const uint64_t half = uint64_t(res) / 2 / lbs * lbs;
			if (half >= lbs) {
				injected++;
				return int64_t(half);
			}
		}
		return res;
	};
	SeamGuard g(s);
	DevPtr dev = open();
	lbs = info_.logical_block_size;
	std::vector<kvblk_result> r;
	ASSERT_EQ(load_all(dev.get(), &r), int(kObjects)) << kvblk_last_error();
	for (uint64_t i = 0; i < kObjects; i++) {
		EXPECT_EQ(r[i].status, 0) << i;
		EXPECT_TRUE(object_exact(i)) << i;
	}
	const uint64_t per_object = commands_for(GetParam().backend, kObjectBytes, info_.max_cmd_bytes);
	EXPECT_EQ(injected.load(), 6 * per_object); /* objects 0, 3, 6, 9, 12, 15 */
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.short_resubmits, injected.load());
	EXPECT_EQ(st.commands, base_commands() + injected.load());
	EXPECT_EQ(st.eagain_retries, 0u);
	EXPECT_EQ(st.bytes_read, kObjects * kObjectBytes);
}

TEST_P(FaultTest, eagain_is_retried_and_counted)
{
	std::atomic<uint64_t> injected{0};
	Seams s;
	s.on_complete = [&](const CommandInfo &c, int64_t res) -> int64_t {
		/* The first command of objects 1, 5, 9, 13: -EAGAIN twice, then the real result. */
		if (c.object % 4 == 1 && c.cmd_offset == 0 && c.attempt < 2) {
			injected++;
			return -EAGAIN;
		}
		return res;
	};
	SeamGuard g(s);
	DevPtr dev = open();
	std::vector<kvblk_result> r;
	ASSERT_EQ(load_all(dev.get(), &r), int(kObjects)) << kvblk_last_error();
	for (uint64_t i = 0; i < kObjects; i++) {
		EXPECT_EQ(r[i].status, 0) << i;
		EXPECT_TRUE(object_exact(i)) << i;
	}
	EXPECT_EQ(injected.load(), 8u);
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.eagain_retries, 8u);
	EXPECT_EQ(st.commands, base_commands() + 8);
	EXPECT_EQ(st.errors_eagain, 0u);
	EXPECT_EQ(st.short_resubmits, 0u);
}

TEST_P(FaultTest, eagain_exhausted_fails_only_that_object)
{
	std::atomic<uint64_t> injected{0};
	Seams s;
	s.on_complete = [&](const CommandInfo &c, int64_t res) -> int64_t {
		if (c.object == 5 && c.cmd_offset == 0) {
			injected++;
			return -EAGAIN;
		}
		return res;
	};
	SeamGuard g(s);
	DevPtr dev = open(3);
	std::vector<kvblk_result> r;
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(load_all(dev.get(), &r, &bi), int(kObjects - 1));
	for (uint64_t i = 0; i < kObjects; i++) {
		SCOPED_TRACE(i);
		if (i == 5) {
			EXPECT_EQ(r[i].status, -EAGAIN);
			EXPECT_EQ(r[i].bytes, 0u);
		} else {
			EXPECT_EQ(r[i].status, 0);
			EXPECT_EQ(r[i].bytes, kObjectBytes);
			EXPECT_TRUE(object_exact(i));
		}
		EXPECT_EQ(r[i].tag, i);
	}
	EXPECT_EQ(injected.load(), 4u); /* the first submission and 3 retries */
	EXPECT_EQ(bi.failed, 1u);
	EXPECT_EQ(bi.bad_index, -1);
	EXPECT_EQ(bi.bytes, (kObjects - 1) * kObjectBytes);
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.eagain_retries, 3u);
	EXPECT_EQ(st.errors_eagain, 1u);
	EXPECT_EQ(st.errors_io + st.errors_other, 0u);
	EXPECT_EQ(st.commands, commands_with_one_failure(3));
	EXPECT_EQ(st.bytes_read, (kObjects - 1) * kObjectBytes);
	EXPECT_EQ(st.batches, 1u);
	const std::string what = kvblk_last_error();
	EXPECT_NE(what.find("descriptor 5"), std::string::npos) << what;
	EXPECT_NE(what.find("EAGAIN"), std::string::npos) << what;
}

TEST_P(FaultTest, io_error_fails_exactly_its_object)
{
	Seams s;
	s.on_complete = [](const CommandInfo &c, int64_t res) -> int64_t {
		return c.object == 7 && c.cmd_offset == 0 && c.attempt == 0 ? -EIO : res;
	};
	SeamGuard g(s);
	DevPtr dev = open();
	std::vector<kvblk_result> r;
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(load_all(dev.get(), &r, &bi), int(kObjects - 1));
	for (uint64_t i = 0; i < kObjects; i++) {
		SCOPED_TRACE(i);
		EXPECT_EQ(r[i].status, i == 7 ? -EIO : 0);
		EXPECT_EQ(r[i].bytes, i == 7 ? 0u : kObjectBytes);
		if (i != 7) {
			EXPECT_TRUE(object_exact(i));
		}
	}
	EXPECT_EQ(bi.failed, 1u);
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.errors_io, 1u);
	EXPECT_EQ(st.errors_eagain + st.errors_other, 0u);
	EXPECT_EQ(st.commands, commands_with_one_failure(0));
	EXPECT_EQ(st.bytes_read, (kObjects - 1) * kObjectBytes);
	const std::string what = kvblk_last_error();
	EXPECT_NE(what.find("descriptor 7"), std::string::npos) << what;
	EXPECT_NE(what.find("EIO"), std::string::npos) << what;

	/* The device stays usable: the next batch, without faults, is all exact. */
	kvblk::testing::install(nullptr);
	ASSERT_EQ(load_all(dev.get(), &r), int(kObjects));
	EXPECT_TRUE(object_exact(7));
}

TEST_P(FaultTest, zero_byte_completion_fails_with_enodata)
{
	Seams s;
	s.on_complete = [](const CommandInfo &c, int64_t res) -> int64_t {
		return c.object == 2 && c.cmd_offset == 0 && c.attempt == 0 ? 0 : res;
	};
	SeamGuard g(s);
	DevPtr dev = open();
	std::vector<kvblk_result> r;
	EXPECT_EQ(load_all(dev.get(), &r), int(kObjects - 1));
	EXPECT_EQ(r[2].status, -ENODATA);
	EXPECT_EQ(r[2].bytes, 0u);
	for (uint64_t i = 0; i < kObjects; i++)
		if (i != 2) {
			EXPECT_TRUE(object_exact(i)) << i;
		}
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.errors_other, 1u);
	EXPECT_EQ(st.errors_io + st.errors_eagain, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, FaultTest, ::testing::ValuesIn(kAllBackends), case_name);

/*
 * A real completion-queue overflow: the seam makes the ring keep 4 x queue_depth commands in
 * flight with a CQ of queue_depth entries and reap only once it is full.
 */
class CqOverflowTest : public StoreTest {};

TEST_F(CqOverflowTest, overflow_is_counted_and_every_object_completes_once)
{
	Seams s;
	s.uring_overcommit = 4;
	std::atomic<uint64_t> completions{0};
	s.on_complete = [&](const CommandInfo &, int64_t res) -> int64_t {
		completions++;
		return res;
	};
	SeamGuard g(s);
	DevPtr dev = open_dev(path_, make_opts(KVBLK_BACKEND_URING, 1, 8, 64 * KiB));
	AlignedBuf dst(kObjects * kObjectBytes);
	std::vector<kvblk_desc> d;
	for (uint64_t i = 0; i < kObjects; i++)
		d.push_back(plain_desc(i * kObjectBytes, kObjectBytes, dst.data() + i * kObjectBytes, i));
	std::vector<kvblk_result> r(kObjects);
	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), uint32_t(kObjects), r.data(), nullptr), int(kObjects))
		<< kvblk_last_error();
	const auto want = expected_bytes(0, kObjects * kObjectBytes, kObjectBytes);
	EXPECT_EQ(std::memcmp(dst.data(), want.data(), want.size()), 0);
	for (uint64_t i = 0; i < kObjects; i++) {
		EXPECT_EQ(r[i].status, 0) << i;
	}

	const uint64_t cmds = kObjects * (kObjectBytes / (64 * KiB));
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_GE(st.cq_overflows, 1u);
	EXPECT_EQ(st.commands, cmds);
	EXPECT_EQ(completions.load(), cmds); /* every command completed exactly once */
	EXPECT_GT(st.inflight_peak, 8u);     /* more in flight than the CQ holds */
	EXPECT_LE(st.inflight_peak, 32u);
}

} // namespace

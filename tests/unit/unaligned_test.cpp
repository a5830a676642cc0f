// SPDX-License-Identifier: MIT
// KVBLK_DESC_UNALIGNED: objects at any offset and length into any host address, loaded
// exactly; the covering blocks of the unaligned edges are read into the library's bounce
// area, and kvblk_batch_info.bytes_device and the stats show what was read.
#include "test_util.hpp"

#include <atomic>
#include <mutex>

using namespace kvblk_test;

namespace {

constexpr uint8_t kCanary = 0xC7;
constexpr uint64_t kGuard = 64 * KiB; /* canary bytes on each side of a destination */

/*
 * struct Case - one object. @shift: its destination's distance from an address aligned to
 * everything; kCongruent puts it at offset % lbs (the aligned middle lands aligned), and
 * kCongruent + 1 one byte further (nothing lands aligned: the whole object is bounced).
 */
constexpr int64_t kCongruent = -1;
struct Case {
	const char *name;
	uint64_t offset;
	uint64_t length;
	int64_t shift;
	int extra;	/* added to the shift */
};

class UnalignedTest : public ::testing::TestWithParam<BackendCase> {
protected:
	void SetUp() override
	{
		dir_ = std::make_unique<TempDir>();
		path_ = dir_->file("tail");
		/* Not a multiple of 4096 (nor of 512): its last block is partial. */
		std::vector<uint8_t> v = expected_bytes(0, kSize + 8, 1ull << 40);
		v.resize(kSize);
		content_ = v;
		int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(pwrite(fd, v.data(), kSize, 0), ssize_t(kSize));
		close(fd);
		const BackendCase &c = GetParam();
		dev_ = open_dev(path_, make_opts(c.backend, c.workers, c.queue_depth));
		ASSERT_TRUE(dev_);
		const kvblk_dev_info i = get_info(dev_.get());
		b_ = i.logical_block_size;
		a_ = i.mem_align;
		ASSERT_GT(a_, 1u) << "every destination is aligned on this file system: nothing to bounce";
		ASSERT_NE(kSize % b_, 0u);
	}

	static constexpr uint64_t kSize = 5 * 4096 + 1234;

	uint64_t down(uint64_t v) const { return v / b_ * b_; }
	uint64_t up(uint64_t v) const { return (v + b_ - 1) / b_ * b_; }

	std::vector<Case> cases() const
	{
		const uint64_t B = b_, S = kSize, tail0 = down(S);
		return {
			{"aligned", B, 2 * B, 0, 0},
			{"head", B + 100, 3 * B - 100, kCongruent, 0},
			{"tail", B, 2 * B + 100, 0, 0},
			{"head_and_tail", B + 100, 3 * B, kCongruent, 0},
			{"head_and_tail_misaligned_dest", B + 100, 3 * B, kCongruent, 1},
			{"aligned_misaligned_dest", B, 2 * B, 0, 1},
			{"inside_one_block", B + 100, 50, kCongruent, 0},
			{"across_one_boundary", 2 * B - 10, 20, kCongruent, 0},
			{"to_the_last_byte", tail0 - B + 7, S - (tail0 - B + 7), kCongruent, 0},
			{"whole_file", 0, S, 0, 0},
			{"last_partial_block", tail0, S - tail0, 0, 0},
			{"last_partial_block_misaligned_dest", tail0 + 3, S - tail0 - 5, kCongruent, 1},
		};
	}

	/* Device bytes the case needs: the covering blocks it reads, cut at the end of the file. */
	uint64_t device_bytes(const Case &c) const
	{
		const uint64_t o = c.offset, e = o + c.length, S = kSize;
		const uint64_t m0 = up(o), m1 = down(e);
		const bool aligned_dest = c.extra == 0;
		if (o % b_ == 0 && c.length % b_ == 0 && aligned_dest)
			return c.length;
		if (m0 >= m1 || !aligned_dest)
			return std::min(up(e), S) - down(o);
		return (m0 - down(o)) + (m1 - m0) + (m1 < e ? std::min(up(e), S) - m1 : 0);
	}
	/* Whether anything of the case is read into the bounce area. */
	bool bounced(const Case &c) const { return c.offset % b_ || c.length % b_ || c.extra; }

	uint64_t shift_of(const Case &c) const
	{
		return (c.shift == kCongruent ? c.offset % b_ : uint64_t(c.shift)) + uint64_t(c.extra);
	}

	std::unique_ptr<TempDir> dir_;
	std::string path_;
	std::vector<uint8_t> content_;
	DevPtr dev_;
	uint32_t b_ = 0, a_ = 0;
};

/* Every case alone: exact bytes, canaries intact, bytes_device what the commands read. */
TEST_P(UnalignedTest, every_case_alone)
{
	for (const Case &c : cases()) {
		SCOPED_TRACE(c.name);
		const uint64_t sh = shift_of(c);
		AlignedBuf buf(2 * kGuard + c.length + 2 * b_, kCanary);
		uint8_t *dst = buf.data() + kGuard + sh;
		kvblk_desc d = plain_desc(c.offset, c.length, dst, 42);
		d.flags = KVBLK_DESC_UNALIGNED;

		std::atomic<uint64_t> read_bytes{0};
		kvblk::testing::Seams s;
		s.on_complete = [&](const kvblk::testing::CommandInfo &, int64_t res) {
			if (res > 0)
				read_bytes += uint64_t(res);
			return res;
		};
		ASSERT_EQ(kvblk_reset_stats(dev_.get()), 0);
		kvblk_result r{};
		kvblk_batch_info bi = new_batch_info();
		{
			SeamGuard g(s);
			ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, &bi), 1) << kvblk_last_error();
		}
		EXPECT_EQ(r.status, 0);
		EXPECT_EQ(r.bytes, c.length);
		EXPECT_EQ(r.tag, 42u);
		EXPECT_EQ(std::memcmp(dst, content_.data() + c.offset, c.length), 0) << "wrong bytes";
		EXPECT_TRUE(buf.all(0, kGuard + sh, kCanary)) << "written before the destination";
		EXPECT_TRUE(buf.all(kGuard + sh + c.length, buf.size() - kGuard - sh - c.length, kCanary))
			<< "written after the destination";
		EXPECT_EQ(bi.bytes, c.length);
		EXPECT_EQ(bi.bytes_device, device_bytes(c));
		EXPECT_EQ(read_bytes.load(), device_bytes(c)) << "bytes_device is not what the commands read";
		const kvblk_stats st = get_stats(dev_.get());
		EXPECT_EQ(st.unaligned_objects, bounced(c) ? 1u : 0u);
		EXPECT_EQ(st.unaligned_extra_bytes, device_bytes(c) - c.length);
		EXPECT_EQ(st.bytes_read, c.length);
	}
}

/* All cases in one batch: the parts of different objects are in flight together. */
TEST_P(UnalignedTest, every_case_in_one_batch)
{
	const std::vector<Case> cs = cases();
	const uint64_t slot = 2 * kGuard + up(kSize) + 2 * b_;
	AlignedBuf buf(slot * cs.size(), kCanary);
	std::vector<kvblk_desc> d;
	uint64_t want_dev = 0, want_bytes = 0, want_extra = 0, want_objs = 0;
	for (size_t k = 0; k < cs.size(); k++) {
		d.push_back(plain_desc(cs[k].offset, cs[k].length, buf.data() + k * slot + kGuard + shift_of(cs[k]), k));
		d.back().flags = KVBLK_DESC_UNALIGNED;
		want_dev += device_bytes(cs[k]);
		want_bytes += cs[k].length;
		want_extra += device_bytes(cs[k]) - cs[k].length;
		want_objs += bounced(cs[k]);
	}
	std::vector<kvblk_result> r(cs.size());
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev_.get(), d.data(), uint32_t(d.size()), r.data(), &bi), int(cs.size()))
		<< kvblk_last_error();
	for (size_t k = 0; k < cs.size(); k++) {
		SCOPED_TRACE(cs[k].name);
		const uint64_t at = k * slot + kGuard + shift_of(cs[k]);
		EXPECT_EQ(r[k].status, 0);
		EXPECT_EQ(r[k].bytes, cs[k].length);
		EXPECT_EQ(r[k].tag, k);
		EXPECT_EQ(std::memcmp(buf.data() + at, content_.data() + cs[k].offset, cs[k].length), 0);
		EXPECT_TRUE(buf.all(k * slot, at - k * slot, kCanary));
		EXPECT_TRUE(buf.all(at + cs[k].length, (k + 1) * slot - at - cs[k].length, kCanary));
	}
	EXPECT_EQ(bi.bytes, want_bytes);
	EXPECT_EQ(bi.bytes_device, want_dev);
	EXPECT_EQ(bi.failed, 0u);
	const kvblk_stats st = get_stats(dev_.get());
	EXPECT_EQ(st.unaligned_objects, want_objs);
	EXPECT_EQ(st.unaligned_extra_bytes, want_extra);
	EXPECT_EQ(st.objects, cs.size());
}

/* Into a registered host buffer, at an unaligned offset in it. */
TEST_P(UnalignedTest, registered_host_buffer)
{
	AlignedBuf reg(4 * b_ + 2 * kGuard, kCanary);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0);
	const uint64_t o = b_ + 33, len = 2 * b_;
	kvblk_desc d = buf_desc(o, len, id, kGuard + 33, 7);
	d.flags = KVBLK_DESC_UNALIGNED;
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(reg.data() + kGuard + 33, content_.data() + o, len), 0);
	EXPECT_TRUE(reg.all(0, kGuard + 33, kCanary));
	EXPECT_TRUE(reg.all(kGuard + 33 + len, reg.size() - kGuard - 33 - len, kCanary));
}

/* A failed covering block fails its own object (one result per object), and no other. */
TEST_P(UnalignedTest, failed_edge_fails_its_object)
{
	const uint64_t o = b_ + 100, len = 2 * b_; /* tail edge: the block at down(o + len) */
	const uint64_t tail_block = down(o + len);
	AlignedBuf buf(8 * b_, kCanary);
	kvblk_desc d[2] = {plain_desc(o, len, buf.data() + 100, 1), plain_desc(0, b_, buf.data() + 4 * b_, 2)};
	d[0].flags = KVBLK_DESC_UNALIGNED;
	kvblk::testing::Seams s;
	s.on_complete = [&](const kvblk::testing::CommandInfo &ci, int64_t res) {
		return ci.obj_offset + ci.cmd_offset == tail_block ? int64_t(-EIO) : res;
	};
	kvblk_result r[2];
	kvblk_batch_info bi = new_batch_info();
	{
		SeamGuard g(s);
		EXPECT_EQ(kvblk_load_many(dev_.get(), d, 2, r, &bi), 1);
	}
	EXPECT_EQ(r[0].status, -EIO);
	EXPECT_EQ(r[0].bytes, 0u);
	EXPECT_EQ(r[1].status, 0);
	EXPECT_EQ(r[1].bytes, b_);
	EXPECT_EQ(bi.failed, 1u);
	EXPECT_EQ(bi.bytes, uint64_t(b_));
	EXPECT_EQ(bi.bytes_device, uint64_t(b_)) << "a failed object's blocks are not counted";
	EXPECT_EQ(get_stats(dev_.get()).unaligned_objects, 0u);
}

TEST_P(UnalignedTest, rules)
{
	AlignedBuf buf(8 * b_, kCanary);
	kvblk_result r{};
	kvblk_batch_info bi = new_batch_info();

	/* Without the flag the alignment rules hold. */
	kvblk_desc d = plain_desc(b_ + 100, b_, buf.data() + 100, 1);
	EXPECT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, &bi), -EINVAL);
	EXPECT_EQ(bi.bad_index, 0);
	EXPECT_NE(std::string(kvblk_last_error()).find("not a multiple of the logical block size"), std::string::npos);

	/* Stores take the flag too since 0.4 (unaligned_store_test.cpp): this device is read-only. */
	d.flags = KVBLK_DESC_UNALIGNED;
	EXPECT_EQ(kvblk_store_many(dev_.get(), &d, 1, &r, &bi), -EBADF);

	/* The end of the file is still the end. */
	d = plain_desc(kSize - 10, 11, buf.data(), 1);
	d.flags = KVBLK_DESC_UNALIGNED;
	EXPECT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, &bi), -ERANGE);
	d.length = 0;
	EXPECT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, &bi), -EINVAL);
	EXPECT_TRUE(buf.all(0, buf.size(), kCanary));
}

/* The bounce area of a batch is bounded: a huge bounced object is refused before any read. */
TEST_P(UnalignedTest, bounce_area_is_bounded)
{
	const std::string big = dir_->file("big");
	int fd = open(big.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(ftruncate(fd, off_t(512 * MiB)), 0); /* sparse */
	close(fd);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev_.get(), big.c_str(), 0, &id), 0) << kvblk_last_error();
	AlignedBuf small(2 * b_, kCanary);
	/* Descriptor 1's destination is never touched (refused first); it must not overlap 0's. */
	kvblk_desc d[2] = {plain_desc(0, b_, small.data(), 1), plain_desc(0, 300 * MiB, small.data() + b_ + 1, 2)};
	d[1].flags = KVBLK_DESC_UNALIGNED; /* misaligned destination: bounced whole */
	d[1].target = id;
	kvblk_result r[2];
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_load_many(dev_.get(), d, 2, r, &bi), -E2BIG);
	EXPECT_EQ(bi.bad_index, 1);
	EXPECT_EQ(r[1].status, -E2BIG);
	EXPECT_EQ(r[0].status, -ECANCELED);
	EXPECT_NE(std::string(kvblk_last_error()).find("256 MiB"), std::string::npos) << kvblk_last_error();
	EXPECT_TRUE(small.all(0, small.size(), kCanary));
}

INSTANTIATE_TEST_SUITE_P(Backends, UnalignedTest, ::testing::ValuesIn(kAllBackends), case_name);

} // namespace

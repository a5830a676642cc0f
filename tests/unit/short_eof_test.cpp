// SPDX-License-Identifier: MIT
// KVBLK_DESC_SHORT_EOF: a load that reaches past the end of a regular file is cut there
// instead of rejecting the call (-ERANGE): status 0, result.bytes = the bytes the file holds
// from the offset (0 at or past the end), the destination past them untouched.
#include "test_util.hpp"

using namespace kvblk_test;

namespace {

constexpr uint8_t kCanary = 0x5A;
constexpr uint64_t kGuard = 8 * KiB;

struct Cut {
	const char *name;
	uint64_t offset;
	uint64_t length;
	uint32_t flags;
	uint64_t shift;		/* destination's distance from an aligned address */
};

class ShortEofTest : public ::testing::TestWithParam<BackendCase> {
protected:
	static constexpr uint64_t kSize = 5 * 4096 + 1234;

	void SetUp() override
	{
		dir_ = std::make_unique<TempDir>();
		path_ = dir_->file("tail");
		content_ = expected_bytes(0, kSize, 1ull << 40);
		write_file(content_);
		const BackendCase &c = GetParam();
		dev_ = open_dev(path_, make_opts(c.backend, c.workers, c.queue_depth));
		ASSERT_TRUE(dev_);
		b_ = get_info(dev_.get()).logical_block_size;
		ASSERT_NE(kSize % b_, 0u);
	}

	void write_file(const std::vector<uint8_t> &v)
	{
		int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(pwrite(fd, v.data(), v.size(), 0), ssize_t(v.size()));
		close(fd);
	}

	uint64_t down(uint64_t v) const { return v / b_ * b_; }
	uint64_t up(uint64_t v) const { return (v + b_ - 1) / b_ * b_; }
	/* What a load of [o, o + len) returns from a file of @size bytes. */
	static uint64_t exists(uint64_t o, uint64_t len, uint64_t size = kSize)
	{
		return o >= size ? 0 : std::min(len, size - o);
	}

	std::vector<Cut> cuts() const
	{
		const uint64_t S = kSize, B = b_;
		const uint32_t U = KVBLK_DESC_UNALIGNED, E = KVBLK_DESC_SHORT_EOF;
		return {
			{"unaligned_reaching_past", S - 1000, 4096, U | E, 3},
			{"aligned_descriptor", down(S) - 2 * B, 4 * B, E, 0},
			{"whole_file_and_more", 0, up(S) + 4096, E, 0},
			{"starts_at_the_end", S, 100, U | E, 1},
			{"starts_past_the_end", S + 5000, 100, U | E, 0},
			{"aligned_past_the_end", up(S) + B, B, E, 0},
			{"ends_exactly_at_the_end", S - 100, 100, U | E, 0},
			{"inside_the_last_block", down(S) + 5, 4 * B, U | E, 5},
		};
	}

	std::unique_ptr<TempDir> dir_;
	std::string path_;
	std::vector<uint8_t> content_;
	DevPtr dev_;
	uint32_t b_ = 0;
};

TEST_P(ShortEofTest, cut_at_the_end_of_the_file)
{
	for (const Cut &c : cuts()) {
		SCOPED_TRACE(c.name);
		const uint64_t want = exists(c.offset, c.length);
		AlignedBuf buf(2 * kGuard + c.length, kCanary);
		uint8_t *dst = buf.data() + kGuard + c.shift;
		kvblk_desc d = plain_desc(c.offset, c.length, dst, 9);
		d.flags = c.flags;
		ASSERT_EQ(kvblk_reset_stats(dev_.get()), 0);
		kvblk_result r{};
		kvblk_batch_info bi = new_batch_info();
		ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, &bi), 1) << kvblk_last_error();
		EXPECT_EQ(r.status, 0);
		EXPECT_EQ(r.bytes, want);
		EXPECT_EQ(r.tag, 9u);
		if (want) {
			EXPECT_EQ(std::memcmp(dst, content_.data() + c.offset, want), 0) << "wrong bytes";
		}
		EXPECT_TRUE(buf.all(0, kGuard + c.shift, kCanary)) << "written before the destination";
		EXPECT_TRUE(buf.all(kGuard + c.shift + want, buf.size() - kGuard - c.shift - want, kCanary))
			<< "written past the bytes that exist";
		EXPECT_EQ(bi.bytes, want);
		EXPECT_EQ(bi.failed, 0u);
		const kvblk_stats st = get_stats(dev_.get());
		EXPECT_EQ(st.short_eof_objects, c.offset + c.length > kSize ? 1u : 0u);
		EXPECT_EQ(st.bytes_read, want);
		EXPECT_EQ(st.objects, 1u);
	}
}

/* Without the flag the end of the file is still an input error for the whole call. */
TEST_P(ShortEofTest, without_the_flag_past_the_end_is_erange)
{
	for (const Cut &c : cuts()) {
		if (c.offset + c.length <= kSize)
			continue;
		SCOPED_TRACE(c.name);
		AlignedBuf buf(2 * kGuard + c.length, kCanary);
		AlignedBuf other(b_, kCanary);
		kvblk_desc d[2] = {plain_desc(0, b_, other.data(), 0),
				   plain_desc(c.offset, c.length, buf.data() + kGuard + c.shift, 1)};
		d[1].flags = c.flags & ~KVBLK_DESC_SHORT_EOF;
		kvblk_result r[2];
		kvblk_batch_info bi = new_batch_info();
		EXPECT_EQ(kvblk_load_many(dev_.get(), d, 2, r, &bi), -ERANGE);
		EXPECT_EQ(bi.bad_index, 1);
		EXPECT_EQ(r[0].status, -ECANCELED);
		EXPECT_EQ(r[1].status, -ERANGE);
		EXPECT_NE(std::string(kvblk_last_error()).find("KVBLK_DESC_SHORT_EOF"), std::string::npos)
			<< kvblk_last_error();
		EXPECT_TRUE(buf.all(0, buf.size(), kCanary));
		EXPECT_TRUE(other.all(0, other.size(), kCanary));
	}
}

/* Whole objects, unaligned ones, cut ones and ones past the end in one batch. */
TEST_P(ShortEofTest, mixed_batch)
{
	const uint64_t S = kSize, B = b_;
	const uint32_t U = KVBLK_DESC_UNALIGNED, E = KVBLK_DESC_SHORT_EOF;
	const Cut cs[] = {
		{"aligned", 0, 2 * B, 0, 0},
		{"aligned_with_flag_not_cut", 2 * B, B, E, 0},
		{"unaligned", B + 7, 300, U, 7},
		{"cut_unaligned", S - 77, 1000, U | E, 1},
		{"cut_aligned", down(S) - B, 3 * B, E, 0},
		{"past", S + 1, 10, U | E, 0},
		{"at", S, B, U | E, 0},
	};
	const size_t n = std::size(cs);
	const uint64_t slot = 2 * kGuard + 4 * B;
	AlignedBuf buf(slot * n, kCanary);
	std::vector<kvblk_desc> d;
	uint64_t want_bytes = 0;
	for (size_t k = 0; k < n; k++) {
		d.push_back(plain_desc(cs[k].offset, cs[k].length, buf.data() + k * slot + kGuard + cs[k].shift, k));
		d.back().flags = cs[k].flags;
		want_bytes += exists(cs[k].offset, cs[k].length);
	}
	std::vector<kvblk_result> r(n);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev_.get(), d.data(), uint32_t(n), r.data(), &bi), int(n)) << kvblk_last_error();
	for (size_t k = 0; k < n; k++) {
		SCOPED_TRACE(cs[k].name);
		const uint64_t want = exists(cs[k].offset, cs[k].length);
		const uint64_t at = k * slot + kGuard + cs[k].shift;
		EXPECT_EQ(r[k].status, 0);
		EXPECT_EQ(r[k].bytes, want);
		EXPECT_EQ(r[k].tag, k);
		if (want) {
			EXPECT_EQ(std::memcmp(buf.data() + at, content_.data() + cs[k].offset, want), 0);
		}
		EXPECT_TRUE(buf.all(k * slot, at - k * slot, kCanary));
		EXPECT_TRUE(buf.all(at + want, (k + 1) * slot - at - want, kCanary));
	}
	EXPECT_EQ(bi.bytes, want_bytes);
	EXPECT_EQ(bi.failed, 0u);
	const kvblk_stats st = get_stats(dev_.get());
	EXPECT_EQ(st.short_eof_objects, 4u) << "cut_unaligned, cut_aligned, past, at";
	EXPECT_EQ(st.bytes_read, want_bytes);
	EXPECT_EQ(st.objects, n);
}

/* A batch of which nothing exists completes at once with 0 bytes, synchronous or not. */
TEST_P(ShortEofTest, nothing_exists)
{
	AlignedBuf buf(4 * b_, kCanary);
	kvblk_desc d[3] = {plain_desc(kSize, 10, buf.data(), 1), plain_desc(kSize + 100, 10, buf.data() + b_, 2),
			   plain_desc(up(kSize) + b_, b_, buf.data() + 2 * b_, 3)};
	d[0].flags = d[1].flags = KVBLK_DESC_UNALIGNED | KVBLK_DESC_SHORT_EOF;
	d[2].flags = KVBLK_DESC_SHORT_EOF;
	kvblk_result r[3];
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev_.get(), d, 3, r, &bi), 3) << kvblk_last_error();
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(r[i].status, 0);
		EXPECT_EQ(r[i].bytes, 0u);
		EXPECT_EQ(r[i].tag, uint64_t(i + 1));
	}
	EXPECT_EQ(bi.bytes, 0u);
	EXPECT_EQ(bi.commands, 0u);

	/* Through kvblk_submit() with an entry per object, and kvblk_reap(). */
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	so.flags = KVBLK_SUBMIT_PER_OBJECT;
	so.results = r;
	so.user_data = 55;
	uint64_t t = 0;
	ASSERT_EQ(kvblk_submit(dev_.get(), d, 3, &so, &t), 0) << kvblk_last_error();
	kvblk_cqe cqe[8];
	int got = 0;
	while (got < 4) {
		const int k = kvblk_reap(dev_.get(), cqe + got, 8 - uint32_t(got), 1, 5000000000ll);
		ASSERT_GT(k, 0);
		got += k;
	}
	EXPECT_EQ(got, 4);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(cqe[i].flags, KVBLK_CQE_OBJECT);
		EXPECT_EQ(cqe[i].status, 0);
		EXPECT_EQ(cqe[i].bytes, 0u);
	}
	EXPECT_EQ(cqe[3].flags, KVBLK_CQE_BATCH);
	EXPECT_EQ(cqe[3].ticket, t);
	EXPECT_EQ(cqe[3].user_data, 55u);
	EXPECT_EQ(cqe[3].failed, 0u);
	EXPECT_EQ(cqe[3].index, 3u);
	EXPECT_TRUE(buf.all(0, buf.size(), kCanary));
	EXPECT_EQ(get_stats(dev_.get()).short_eof_objects, 6u);
}

/* The end is the file's size when each batch starts: bytes appended since are loaded. */
TEST_P(ShortEofTest, the_file_grows)
{
	const uint64_t o = kSize - 100, len = 3000;
	AlignedBuf buf(len + 64, kCanary);
	kvblk_desc d = plain_desc(o, len, buf.data() + 1, 1);
	d.flags = KVBLK_DESC_UNALIGNED | KVBLK_DESC_SHORT_EOF;
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
	EXPECT_EQ(r.bytes, 100u);
	const uint64_t grown = kSize + 2000;
	content_ = expected_bytes(0, grown, 1ull << 40);
	write_file(content_);
	ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
	EXPECT_EQ(r.status, 0);
	EXPECT_EQ(r.bytes, exists(o, len, grown));
	EXPECT_EQ(std::memcmp(buf.data() + 1, content_.data() + o, r.bytes), 0);
	EXPECT_TRUE(buf.all(1 + r.bytes, buf.size() - 1 - r.bytes, kCanary));
}

/* Into a registered host buffer; and destinations compared by the bytes an object reads. */
TEST_P(ShortEofTest, registered_buffer_and_overlap)
{
	AlignedBuf reg(8 * b_, kCanary);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0);
	/* Object 0 is cut to 100 bytes at buffer offset 0; object 1 lands right after them. */
	kvblk_desc d[2] = {buf_desc(kSize - 100, 4 * b_, id, 0, 1), buf_desc(0, b_, id, up(100), 2)};
	d[0].flags = KVBLK_DESC_UNALIGNED | KVBLK_DESC_SHORT_EOF;
	kvblk_result r[2];
	ASSERT_EQ(kvblk_load_many(dev_.get(), d, 2, r, nullptr), 2) << kvblk_last_error();
	EXPECT_EQ(r[0].bytes, 100u);
	EXPECT_EQ(r[1].bytes, uint64_t(b_));
	EXPECT_EQ(std::memcmp(reg.data(), content_.data() + kSize - 100, 100), 0);
	EXPECT_EQ(std::memcmp(reg.data() + up(100), content_.data(), b_), 0);
	EXPECT_TRUE(reg.all(100, up(100) - 100, kCanary));
	/*
	 * A load cut to nothing (it starts past the end) touches no byte of its destination, so a
	 * destination inside another object's is no overlap: both complete, in either order.
	 */
	for (int order = 0; order < 2; order++) {
		kvblk_desc e[2] = {buf_desc(kSize + 10, b_, id, b_, 3), buf_desc(0, 4 * b_, id, 0, 4)};
		e[0].flags = KVBLK_DESC_UNALIGNED | KVBLK_DESC_SHORT_EOF;
		if (order)
			std::swap(e[0], e[1]);
		ASSERT_EQ(kvblk_load_many(dev_.get(), e, 2, r, nullptr), 2) << "order " << order << ": " << kvblk_last_error();
		EXPECT_EQ(r[order].bytes, 0u);
		EXPECT_EQ(r[1 - order].bytes, 4 * uint64_t(b_));
		EXPECT_EQ(std::memcmp(reg.data(), content_.data(), 4 * b_), 0);
	}
	/* The registered range must still hold the whole descriptor. */
	d[0].addr = reg.size() - 100;
	EXPECT_EQ(kvblk_load_many(dev_.get(), d, 1, r, nullptr), -EINVAL);
	EXPECT_EQ(kvblk_unregister_buffer(dev_.get(), id), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, ShortEofTest, ::testing::ValuesIn(kAllBackends), case_name);

} // namespace

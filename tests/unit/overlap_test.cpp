// SPDX-License-Identifier: MIT
// One batch, overlapping ranges: loads into intersecting destinations and stores to
// intersecting ranges of one target are -EINVAL before anything is submitted, bad_index the
// lowest descriptor that overlaps an earlier one. Also bad_index -1 whenever no descriptor
// is at fault (n == 0, NULL arguments, too many descriptors).
#include "test_util.hpp"

using namespace kvblk_test;

namespace {

constexpr uint64_t kObj = 16 * KiB;

class OverlapTest : public ::testing::TestWithParam<BackendCase> {
protected:
	void SetUp() override
	{
		path_ = dir_.file("store");
		write_pattern_file(path_, 16, kObj);
		const BackendCase &c = GetParam();
		dev_ = open_dev(path_, make_opts(c.backend, c.workers, c.queue_depth, 0, KVBLK_OPEN_WRITE));
		ASSERT_TRUE(dev_);
	}

	/* A rejected load: @bad gets -EINVAL, the others -ECANCELED, nothing read or counted. */
	void expect_rejected(const std::vector<kvblk_desc> &d, int32_t bad, const AlignedBuf &dst, bool store = false)
	{
		std::vector<kvblk_result> r(d.size());
		kvblk_batch_info bi = new_batch_info();
		const uint64_t rejected = get_stats(dev_.get()).rejected_batches;
		const int rc = store ? kvblk_store_many(dev_.get(), d.data(), uint32_t(d.size()), r.data(), &bi)
				     : kvblk_load_many(dev_.get(), d.data(), uint32_t(d.size()), r.data(), &bi);
		EXPECT_EQ(rc, -EINVAL);
		EXPECT_EQ(bi.bad_index, bad);
		for (size_t i = 0; i < d.size(); i++)
			EXPECT_EQ(r[i].status, int32_t(i) == bad ? -EINVAL : -ECANCELED) << "descriptor " << i;
		EXPECT_NE(std::string(kvblk_last_error()).find("overlap"), std::string::npos) << kvblk_last_error();
		const kvblk_stats st = get_stats(dev_.get());
		EXPECT_EQ(st.rejected_batches, rejected + 1);
		EXPECT_EQ(st.commands, 0u) << "something was submitted";
		if (!store) {
			EXPECT_TRUE(dst.all(0, dst.size(), 0xA5)) << "a rejected load wrote its destination";
		}

		/* kvblk_submit() names the same descriptor. */
		kvblk_submit_opts so;
		kvblk_submit_opts_init(&so, sizeof(so));
		so.flags = store ? KVBLK_SUBMIT_STORE : 0;
		uint64_t t = 0;
		EXPECT_EQ(kvblk_submit(dev_.get(), d.data(), uint32_t(d.size()), &so, &t), -EINVAL);
		EXPECT_EQ(so.bad_index, bad);
	}

	TempDir dir_;
	std::string path_;
	DevPtr dev_;
};

TEST_P(OverlapTest, identical_and_partial_destinations_are_einval)
{
	AlignedBuf dst(4 * kObj);
	expect_rejected({plain_desc(0, kObj, dst.data(), 0), plain_desc(kObj, kObj, dst.data(), 1)}, 1, dst);
	/* Partial, the later descriptor lower in memory. */
	expect_rejected({plain_desc(0, 2 * kObj, dst.data() + kObj, 0), plain_desc(4 * kObj, 2 * kObj, dst.data(), 1)},
			1, dst);
	/* The lowest index that overlaps an earlier one: 2 (with 0), not 3 (with 1). */
	expect_rejected({plain_desc(0, kObj, dst.data(), 0), plain_desc(kObj, kObj, dst.data() + 2 * kObj, 1),
			 plain_desc(2 * kObj, kObj, dst.data(), 2), plain_desc(3 * kObj, kObj, dst.data() + 2 * kObj, 3)},
			2, dst);
	EXPECT_NE(std::string(kvblk_last_error()).find("descriptor 0"), std::string::npos) << kvblk_last_error();
}

TEST_P(OverlapTest, registered_buffers_overlap_by_memory_not_by_id)
{
	AlignedBuf dst(4 * kObj);
	uint32_t a = 0, b = 0;
	ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, dst.data(), 4 * kObj, &a), 0);
	ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, dst.data() + 2 * kObj, 2 * kObj, &b), 0);
	/* Buffer a's last object is buffer b's first. */
	expect_rejected({buf_desc(0, kObj, a, 2 * kObj, 0), buf_desc(kObj, kObj, b, 0, 1)}, 1, dst);
	/* A registered destination and a plain pointer to the same bytes. */
	expect_rejected({plain_desc(0, kObj, dst.data() + kObj, 0), buf_desc(kObj, kObj, a, kObj, 1)}, 1, dst);
	/* Disjoint parts of the same memory through both ids: fine, exact. */
	const kvblk_desc ok[] = {buf_desc(0, kObj, a, 0, 0), buf_desc(kObj, kObj, b, kObj, 1)};
	kvblk_result r[2];
	ASSERT_EQ(kvblk_load_many(dev_.get(), ok, 2, r, nullptr), 2) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(0, kObj, kObj).data(), kObj), 0);
	EXPECT_EQ(std::memcmp(dst.data() + 3 * kObj, expected_bytes(kObj, kObj, kObj).data(), kObj), 0);
}

TEST_P(OverlapTest, adjacent_destinations_and_repeated_sources_are_fine)
{
	AlignedBuf dst(3 * kObj);
	/* Touching, in reverse memory order, one object read twice into two places. */
	const kvblk_desc d[] = {plain_desc(5 * kObj, kObj, dst.data() + 2 * kObj, 0),
				plain_desc(5 * kObj, kObj, dst.data() + kObj, 1), plain_desc(0, kObj, dst.data(), 2)};
	kvblk_result r[3];
	ASSERT_EQ(kvblk_load_many(dev_.get(), d, 3, r, nullptr), 3) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(0, kObj, kObj).data(), kObj), 0);
	EXPECT_EQ(std::memcmp(dst.data() + kObj, expected_bytes(5 * kObj, kObj, kObj).data(), kObj), 0);
	EXPECT_EQ(std::memcmp(dst.data() + 2 * kObj, expected_bytes(5 * kObj, kObj, kObj).data(), kObj), 0);
}

TEST_P(OverlapTest, unaligned_destinations_overlapping_by_one_byte)
{
	AlignedBuf dst(2 * kObj);
	kvblk_desc d[2] = {plain_desc(100, 1000, dst.data() + 3, 0), plain_desc(5000, 10, dst.data() + 1002, 1)};
	d[0].flags = d[1].flags = KVBLK_DESC_UNALIGNED;
	expect_rejected({d[0], d[1]}, 1, dst);
	d[1].addr++; /* now they touch */
	kvblk_result r[2];
	ASSERT_EQ(kvblk_load_many(dev_.get(), d, 2, r, nullptr), 2) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(dst.data() + 3, expected_bytes(96, 1008, kObj).data() + 4, 1000), 0);
}

TEST_P(OverlapTest, overlapping_store_ranges_are_einval)
{
	AlignedBuf src(2 * kObj, 0x33);
	expect_rejected({plain_desc(2 * kObj, 2 * kObj, src.data(), 0), plain_desc(3 * kObj, kObj, src.data(), 1)}, 1,
			src, true);
	/* The same source twice to two places, and the same range on two targets: fine. */
	const std::string other = dir_.file("other");
	write_pattern_file(other, 4, kObj);
	uint32_t t = 0;
	ASSERT_EQ(kvblk_add_target(dev_.get(), other.c_str(), KVBLK_OPEN_WRITE, &t), 0) << kvblk_last_error();
	kvblk_desc d[3] = {plain_desc(0, kObj, src.data(), 0), plain_desc(kObj, kObj, src.data(), 1),
			   plain_desc(0, kObj, src.data(), 2)};
	d[2].target = t;
	kvblk_result r[3];
	ASSERT_EQ(kvblk_store_many(dev_.get(), d, 3, r, nullptr), 3) << kvblk_last_error();
	/* The file did not change where the rejected stores pointed. */
	AlignedBuf back(2 * kObj);
	const kvblk_desc l = plain_desc(2 * kObj, 2 * kObj, back.data(), 0);
	ASSERT_EQ(kvblk_load_many(dev_.get(), &l, 1, r, nullptr), 1);
	EXPECT_EQ(std::memcmp(back.data(), expected_bytes(2 * kObj, 2 * kObj, kObj).data(), 2 * kObj), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, OverlapTest, ::testing::ValuesIn(kAllBackends), case_name);

/* bad_index is -1 whenever no descriptor is at fault; it is never left as the caller set it. */
TEST(BadIndexTest, minus_one_when_no_descriptor_is_at_fault)
{
	TempDir dir;
	write_pattern_file(dir.file("s"), 2, kObj);
	kvblk_open_opts o = make_opts(KVBLK_BACKEND_PSYNC);
	o.max_descs = 2;
	DevPtr dev = open_dev(dir.file("s"), o);
	AlignedBuf dst(kObj);
	const kvblk_desc d[3] = {plain_desc(0, kObj, dst.data(), 0), plain_desc(0, kObj, dst.data() + 0, 1),
				 plain_desc(0, kObj, dst.data(), 2)};
	kvblk_result r[3];
	struct Case {
		const char *what;
		kvblk_dev *dev;
		const kvblk_desc *descs;
		uint32_t n;
		kvblk_result *results;
		int err;
	} cases[] = {
		{"n == 0", dev.get(), d, 0, r, -EINVAL},
		{"NULL dev", nullptr, d, 1, r, -EINVAL},
		{"NULL descs", dev.get(), nullptr, 1, r, -EINVAL},
		{"NULL results", dev.get(), d, 1, nullptr, -EINVAL},
		{"n > max_descs", dev.get(), d, 3, r, -E2BIG},
	};
	for (const Case &c : cases) {
		SCOPED_TRACE(c.what);
		kvblk_batch_info bi = new_batch_info();
		bi.bad_index = 5;
		EXPECT_EQ(kvblk_load_many(c.dev, c.descs, c.n, c.results, &bi), c.err);
		EXPECT_EQ(bi.bad_index, -1);
		bi.bad_index = 5;
		EXPECT_EQ(kvblk_store_many(c.dev, c.descs, c.n, c.results, &bi), c.err);
		EXPECT_EQ(bi.bad_index, -1);
		if (!c.results)
			continue;
		kvblk_submit_opts so;
		kvblk_submit_opts_init(&so, sizeof(so));
		so.bad_index = 5;
		uint64_t t = 0;
		EXPECT_EQ(kvblk_submit(c.dev, c.descs, c.n, &so, &t), c.err);
		EXPECT_EQ(so.bad_index, -1);
	}
	/* NULL ticket and unknown flags too. */
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	so.bad_index = 5;
	EXPECT_EQ(kvblk_submit(dev.get(), d, 1, &so, nullptr), -EINVAL);
	EXPECT_EQ(so.bad_index, -1);
	so.bad_index = 5;
	so.flags = 1u << 30;
	uint64_t t = 0;
	EXPECT_EQ(kvblk_submit(dev.get(), d, 1, &so, &t), -EINVAL);
	EXPECT_EQ(so.bad_index, -1);
}

} // namespace

// SPDX-License-Identifier: MIT
// The input rules of kvblk_load_many()/kvblk_store_many(): one test per rule. A bad
// descriptor rejects the whole call before anything is read: its result holds the reason,
// the others -ECANCELED, bad_index names it, kvblk_last_error() names index, rule and
// numbers, and no destination byte changes.
#include "test_util.hpp"

#include <climits>

using namespace kvblk_test;

namespace {

constexpr uint8_t kSentinel = 0xEE;
constexpr uint64_t kPiece = 64 * KiB;
constexpr uint32_t kDescs = 4;

class ValidateTest : public StoreTest {
protected:
	void SetUp() override
	{
		StoreTest::SetUp();
		dev_ = open_dev(path_, make_opts(KVBLK_BACKEND_URING, 0, 0, 0, KVBLK_OPEN_WRITE));
		ASSERT_TRUE(dev_);
		info_ = get_info(dev_.get());
		lbs_ = info_.logical_block_size;
		ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, reg_.data(), reg_.size(), &buf_), 0);
		/* Four good descriptors: 0 and 1 into plain memory, 2 and 3 into the registered buffer. */
		for (uint32_t i = 0; i < kDescs; i++)
			descs_.push_back(i < 2 ? plain_desc(i * kObjectBytes, kPiece, plain_.data() + i * kPiece, 100 + i)
					       : buf_desc(i * kObjectBytes, kPiece, buf_, (i - 2) * kPiece, 100 + i));
	}

	/* The call is rejected with @err because of descriptor @bad; @msg parts are in the message. */
	void expect_rejected(int err, int32_t bad, const std::vector<std::string> &msg,
			     int (*fn)(kvblk_dev *, const kvblk_desc *, uint32_t, kvblk_result *,
				       kvblk_batch_info *) = kvblk_load_many)
	{
		std::vector<kvblk_result> r(descs_.size(), kvblk_result{4242, 9, 9, 9});
		kvblk_batch_info bi = new_batch_info();
		EXPECT_EQ(fn(dev_.get(), descs_.data(), uint32_t(descs_.size()), r.data(), &bi), err);
		EXPECT_EQ(bi.bad_index, bad);
		EXPECT_EQ(bi.failed, descs_.size());
		EXPECT_EQ(bi.bytes, 0u);
		EXPECT_EQ(bi.commands, 0u);
		for (size_t i = 0; i < r.size(); i++) {
			SCOPED_TRACE(i);
			EXPECT_EQ(r[i].status, int32_t(i) == bad ? err : -ECANCELED);
			EXPECT_EQ(r[i].bytes, 0u);
			EXPECT_EQ(r[i].reserved, 0u);
			EXPECT_EQ(r[i].tag, descs_[i].tag);
		}
		EXPECT_TRUE(plain_.all(0, plain_.size(), kSentinel)) << "a plain destination was written";
		EXPECT_TRUE(reg_.all(0, reg_.size(), kSentinel)) << "the registered destination was written";

		const std::string what = kvblk_last_error();
		if (bad >= 0) {
			EXPECT_NE(what.find("descriptor " + std::to_string(bad) + ":"), std::string::npos) << what;
		}
		for (const std::string &part : msg) {
			EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' not in: " << what;
		}

		const kvblk_stats s = get_stats(dev_.get());
		EXPECT_EQ(s.rejected_batches, 1u);
		EXPECT_EQ(s.batches, 0u);
		EXPECT_EQ(s.objects, 0u);
		EXPECT_EQ(s.commands, 0u);
		EXPECT_EQ(s.bytes_read + s.bytes_written, 0u);
	}

	DevPtr dev_;
	kvblk_dev_info info_{};
	uint32_t lbs_ = 0;
	AlignedBuf plain_{2 * kPiece, kSentinel};
	AlignedBuf reg_{2 * kPiece, kSentinel};
	uint32_t buf_ = KVBLK_BUF_NONE;
	std::vector<kvblk_desc> descs_;
};

TEST_F(ValidateTest, good_batch_loads)
{
	std::vector<kvblk_result> r(kDescs);
	ASSERT_EQ(kvblk_load_many(dev_.get(), descs_.data(), kDescs, r.data(), nullptr), int(kDescs));
	for (uint32_t i = 0; i < kDescs; i++) {
		const uint8_t *mem = i < 2 ? plain_.data() + i * kPiece : reg_.data() + (i - 2) * kPiece;
		EXPECT_EQ(std::memcmp(mem, expected_bytes(i * kObjectBytes, kPiece, kObjectBytes).data(), kPiece), 0);
	}
}

TEST_F(ValidateTest, offset_not_multiple_of_logical_block_size)
{
	descs_[2].offset += 1;
	expect_rejected(-EINVAL, 2,
			{"offset " + std::to_string(2 * kObjectBytes + 1) +
			 " is not a multiple of the logical block size " + std::to_string(lbs_)});
}

TEST_F(ValidateTest, length_not_multiple_of_logical_block_size)
{
	descs_[1].length = kPiece - lbs_ / 2;
	expect_rejected(-EINVAL, 1,
			{"length " + std::to_string(kPiece - lbs_ / 2) +
			 " is not a multiple of the logical block size " + std::to_string(lbs_)});
}

TEST_F(ValidateTest, zero_length)
{
	descs_[3].length = 0;
	expect_rejected(-EINVAL, 3, {"length is 0"});
}

TEST_F(ValidateTest, destination_not_aligned_to_mem_align)
{
	ASSERT_GT(info_.mem_align, 1u);
	descs_[1].addr += info_.mem_align / 2;
	expect_rejected(-EINVAL, 1, {"not aligned to mem_align " + std::to_string(info_.mem_align)});
}

TEST_F(ValidateTest, registered_destination_not_aligned_to_mem_align)
{
	descs_[2].addr = info_.mem_align / 2;
	expect_rejected(-EINVAL, 2, {"not aligned to mem_align " + std::to_string(info_.mem_align)});
}

TEST_F(ValidateTest, null_destination)
{
	descs_[0].addr = 0;
	expect_rejected(-EINVAL, 0, {"destination address is NULL"});
}

TEST_F(ValidateTest, offset_plus_length_overflows)
{
	descs_[2].offset = UINT64_MAX - lbs_ + 1; /* a multiple of the block size */
	descs_[2].length = 2 * uint64_t(lbs_);
	expect_rejected(-EINVAL, 2, {"offset " + std::to_string(descs_[2].offset), "overflows 64 bits"});
}

TEST_F(ValidateTest, past_end_of_file_is_erange)
{
	const uint64_t cap = kObjects * kObjectBytes;
	ASSERT_EQ(info_.capacity, cap);
	descs_[1].offset = cap - lbs_;
	descs_[1].length = 2 * uint64_t(lbs_);
	expect_rejected(-ERANGE, 1,
			{"reaches past the end", std::to_string(cap + lbs_), "capacity " + std::to_string(cap)});
}

TEST_F(ValidateTest, last_block_of_file_is_in_range)
{
	const uint64_t cap = kObjects * kObjectBytes;
	const kvblk_desc d = plain_desc(cap - lbs_, lbs_, plain_.data(), 1);
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(plain_.data(), expected_bytes(cap - lbs_, lbs_, kObjectBytes).data(), lbs_), 0);
}

TEST_F(ValidateTest, registered_buffer_range_exceeded)
{
	descs_[3].addr = reg_.size() - kPiece + lbs_; /* ends one block past the buffer */
	expect_rejected(-EINVAL, 3,
			{"exceeds registered buffer " + std::to_string(buf_), std::to_string(reg_.size()) + " bytes"});
}

TEST_F(ValidateTest, registered_buffer_offset_overflows)
{
	descs_[2].addr = UINT64_MAX - 4095;
	expect_rejected(-EINVAL, 2, {"exceeds registered buffer " + std::to_string(buf_)});
}

TEST_F(ValidateTest, unknown_buffer_id_is_enoent)
{
	descs_[3].buf_id = 777;
	expect_rejected(-ENOENT, 3, {"buffer id 777 is not registered"});
}

TEST_F(ValidateTest, unregistered_buffer_id_is_enoent)
{
	ASSERT_EQ(kvblk_unregister_buffer(dev_.get(), buf_), 0);
	expect_rejected(-ENOENT, 2, {"buffer id " + std::to_string(buf_) + " is not registered"});
}

TEST_F(ValidateTest, flags_not_zero)
{
	descs_[1].flags = 0x10;
	expect_rejected(-EINVAL, 1, {"unknown flags 0x10"});
}

TEST_F(ValidateTest, too_many_descriptors_is_e2big)
{
	kvblk_open_opts o = make_opts(KVBLK_BACKEND_URING);
	o.max_descs = kDescs - 1;
	dev_ = open_dev(path_, o);
	ASSERT_EQ(get_info(dev_.get()).max_descs, kDescs - 1);
	/* The new device has no registered buffer: all four into plain memory. */
	for (uint32_t i = 0; i < kDescs; i++)
		descs_[i] = plain_desc(i * kObjectBytes, kPiece, plain_.data() + (i % 2) * kPiece, 100 + i);
	expect_rejected(-E2BIG, -1, {"4 descriptors exceed max_descs 3"});
}

TEST_F(ValidateTest, first_bad_descriptor_wins)
{
	descs_[1].offset = kObjects * kObjectBytes; /* -ERANGE */
	descs_[3].flags = 1;			    /* -EINVAL, later */
	expect_rejected(-ERANGE, 1, {"reaches past the end"});
}

TEST_F(ValidateTest, store_checks_the_same_rules)
{
	descs_[2].offset += lbs_ / 2;
	expect_rejected(-EINVAL, 2, {"not a multiple of the logical block size"}, kvblk_store_many);
	/* Nothing was written: the store still holds the pattern. */
	AlignedBuf back(kPiece);
	const kvblk_desc d = plain_desc(2 * kObjectBytes, kPiece, back.data(), 0);
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, nullptr), 1);
	EXPECT_EQ(std::memcmp(back.data(), expected_bytes(2 * kObjectBytes, kPiece, kObjectBytes).data(), kPiece), 0);
}

TEST_F(ValidateTest, bad_arguments_are_einval)
{
	std::vector<kvblk_result> r(kDescs);
	EXPECT_EQ(kvblk_load_many(nullptr, descs_.data(), kDescs, r.data(), nullptr), -EINVAL);
	EXPECT_EQ(kvblk_load_many(dev_.get(), nullptr, kDescs, r.data(), nullptr), -EINVAL);
	EXPECT_EQ(kvblk_load_many(dev_.get(), descs_.data(), kDescs, nullptr, nullptr), -EINVAL);
	EXPECT_EQ(kvblk_load_many(dev_.get(), descs_.data(), 0, r.data(), nullptr), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("n is 0"), std::string::npos);
	kvblk_batch_info bi{};
	bi.info_size = KVBLK_BATCH_INFO_SIZE_V0_2 - 8; /* below the 0.2 struct */
	EXPECT_EQ(kvblk_load_many(dev_.get(), descs_.data(), kDescs, r.data(), &bi), -EINVAL);
	EXPECT_TRUE(plain_.all(0, plain_.size(), kSentinel));
	EXPECT_EQ(get_stats(dev_.get()).batches, 0u);
}

} // namespace

// SPDX-License-Identifier: MIT
// Processes and remapped buffers on the NVMe backends that reach a real namespace (kmod,
// uring_cmd), in the QEMU guest of tests/vm (case libkvblk-device; skipped elsewhere, see
// device_test.cpp for the environment):
//  - fork: the child's calls on the inherited handle fail with -EBADFD and touch nothing;
//    a handle the child opens itself works; the parent's next load is exact.
//  - a registered buffer whose memory the program replaces (munmap + mmap, MADV_DONTNEED):
//    kmod: kvblk.ko pinned the old pages, so kvblk_check_buffer() says -ESTALE (the module
//    compares them) and a load into it fails with -ESTALE before anything is read, even
//    without a check first; after unregister + register, loads are exact. uring_cmd reads
//    into whatever is mapped: the check is clean and loads land in the new memory.
//  - overlapping destinations in one batch: -EINVAL, bad_index the later descriptor.
#include "device_util.hpp"

#include <sys/mman.h>
#include <sys/wait.h>

using namespace kvblk_test;

namespace {

struct MmCase {
	const char *name;
	kvblk_backend backend;
};

void PrintTo(const MmCase &c, std::ostream *os)
{
	*os << c.name;
}

const MmCase kMmCases[] = {
	{"kmod", KVBLK_BACKEND_KMOD},
	{"uring_cmd", KVBLK_BACKEND_URING_CMD},
};

constexpr uint64_t kLen = 64 * KiB; /* the buffer: two 32 KiB objects */
constexpr uint64_t kObjBytes = kLen / 2;

class DeviceMmTest : public ::testing::TestWithParam<MmCase> {
protected:
	void SetUp() override
	{
		REQUIRE_DEVICE();
		if (GetParam().backend == KVBLK_BACKEND_KMOD)
			REQUIRE_KMOD();
		block_ = env("KVBLK_TEST_DEVICE");
		ref_ = std::make_unique<Reference>(block_);
		dev_ = open_dev(block_, make_opts(GetParam().backend));
		ASSERT_TRUE(dev_) << kvblk_last_error();
		ASSERT_EQ(get_info(dev_.get()).backend, uint32_t(GetParam().backend));
		mem_ = static_cast<uint8_t *>(
			mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
		ASSERT_NE(mem_, MAP_FAILED);
		std::memset(mem_, 0xA5, kLen);
		ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, mem_, kLen, &id_), 0) << kvblk_last_error();
	}
	void TearDown() override
	{
		dev_.reset();
		if (mem_ && mem_ != MAP_FAILED)
			munmap(mem_, kLen);
	}

	bool pinned() const { return GetParam().backend == KVBLK_BACKEND_KMOD; }

	/* Objects at device offsets 1 MiB and 3 MiB into the two halves of the buffer. */
	int load(kvblk_result *r, kvblk_batch_info *bi = nullptr)
	{
		const kvblk_desc d[2] = {buf_desc(1 * MiB, kObjBytes, id_, 0, 1),
					 buf_desc(3 * MiB, kObjBytes, id_, kObjBytes, 2)};
		return kvblk_load_many(dev_.get(), d, 2, r, bi);
	}
	::testing::AssertionResult exact()
	{
		if (auto a = ref_->same(mem_, 1 * MiB, kObjBytes); !a)
			return a;
		return ref_->same(mem_ + kObjBytes, 3 * MiB, kObjBytes);
	}
	void load_exact()
	{
		kvblk_result r[2];
		std::memset(mem_, 0xA5, kLen);
		ASSERT_EQ(load(r), 2) << kvblk_last_error();
		EXPECT_EQ(r[0].status, 0);
		EXPECT_EQ(r[1].status, 0);
		EXPECT_TRUE(exact());
	}

	/*
	 * After the memory was replaced. kmod: the load fails with -ESTALE before any read
	 * (the module finds it, without kvblk_check_buffer() first), the check says so and
	 * keeps it; unregister + register makes it exact again. uring_cmd: loads reach the new
	 * memory.
	 */
	void expect_detected(const char *how)
	{
		SCOPED_TRACE(how);
		if (!pinned()) {
			EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), 0) << kvblk_last_error();
			load_exact();
			return;
		}
		std::memset(mem_, 0x77, kLen);
		kvblk_result r[2];
		kvblk_batch_info bi = new_batch_info();
		/* Found by kvblk.ko: the objects' results, nothing read. */
		EXPECT_EQ(load(r, &bi), 0) << kvblk_last_error();
		EXPECT_EQ(r[0].status, -ESTALE);
		EXPECT_EQ(r[1].status, -ECANCELED);
		EXPECT_EQ(r[0].bytes, 0u);
		EXPECT_EQ(mem_[0], 0x77);
		EXPECT_EQ(mem_[kObjBytes], 0x77);
		EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), -ESTALE);
		EXPECT_NE(std::string(kvblk_last_error()).find("kvblk.ko found"), std::string::npos)
			<< kvblk_last_error();
		/* Marked stale in the library too: rejected before the module is asked. */
		bi = new_batch_info();
		EXPECT_EQ(load(r, &bi), -ESTALE);
		EXPECT_EQ(bi.bad_index, 0);
		EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), -ESTALE) << "stale is kept";
		ASSERT_EQ(kvblk_unregister_buffer(dev_.get(), id_), 0);
		ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, mem_, kLen, &id_), 0);
		EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), 0) << kvblk_last_error();
		load_exact();
	}

	std::string block_;
	std::unique_ptr<Reference> ref_;
	DevPtr dev_;
	uint8_t *mem_ = nullptr;
	uint32_t id_ = 0;
};

TEST_P(DeviceMmTest, fork_child_gets_ebadfd_and_parent_is_unharmed)
{
	load_exact();
	ChildReport rep = run_in_child([&](ChildReport &c) {
		kvblk_result r[2];
		c.v[0] = load(r);
		c.v[1] = kvblk_check_buffer(dev_.get(), id_);
		uint32_t id2 = 0;
		c.v[2] = kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, mem_, kLen, &id2);
		c.v[3] = kvblk_unregister_buffer(dev_.get(), id_);
		/* Its own handle works, byte for byte. */
		kvblk_dev *own = nullptr;
		kvblk_open_opts o = make_opts(GetParam().backend);
		c.v[4] = kvblk_open(block_.c_str(), &o, &own);
		if (c.v[4] == 0) {
			std::memset(mem_, 0xA5, kLen);
			const kvblk_desc d = plain_desc(1 * MiB, kObjBytes, mem_, 1);
			kvblk_result r1{};
			c.v[5] = kvblk_load_many(own, &d, 1, &r1, nullptr);
			c.v[6] = r1.status;
			c.v[7] = bool(ref_->same(mem_, 1 * MiB, kObjBytes));
			kvblk_close(own);
		}
		c.say(kvblk_last_error());
	});
	ASSERT_TRUE(rep.delivered);
	EXPECT_EQ(rep.v[0], -EBADFD);
	EXPECT_EQ(rep.v[1], -EBADFD);
	EXPECT_EQ(rep.v[2], -EBADFD);
	EXPECT_EQ(rep.v[3], -EBADFD);
	EXPECT_EQ(rep.v[4], 0) << rep.msg;
	EXPECT_EQ(rep.v[5], 1) << rep.msg;
	EXPECT_EQ(rep.v[6], 0);
	EXPECT_EQ(rep.v[7], 1);
	/* The parent: its registration is there, intact, and loads exactly. */
	EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), 0) << kvblk_last_error();
	load_exact();
	EXPECT_EQ(kvblk_unregister_buffer(dev_.get(), id_), 0);
	id_ = 0;
}

TEST_P(DeviceMmTest, madv_dontneed_is_found)
{
	load_exact();
	ASSERT_EQ(madvise(mem_ + kObjBytes, kObjBytes, MADV_DONTNEED), 0);
	expect_detected("MADV_DONTNEED");
}

TEST_P(DeviceMmTest, munmap_and_mmap_at_the_same_address_is_found)
{
	load_exact();
	ASSERT_EQ(munmap(mem_, kLen), 0);
	void *again = mmap(mem_, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ(again, static_cast<void *>(mem_));
	expect_detected("munmap + mmap");
}

TEST_P(DeviceMmTest, unrelated_munmap_keeps_the_buffer_intact)
{
	void *other = mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(other, MAP_FAILED);
	std::memset(other, 1, kLen);
	ASSERT_EQ(munmap(other, kLen), 0);
	EXPECT_EQ(kvblk_check_buffer(dev_.get(), id_), 0) << kvblk_last_error();
	load_exact();
}

TEST_P(DeviceMmTest, overlapping_destinations_are_einval)
{
	const kvblk_desc d[3] = {buf_desc(0, kObjBytes, id_, 0, 1), buf_desc(1 * MiB, kObjBytes, id_, kObjBytes, 2),
				 buf_desc(2 * MiB, kObjBytes, id_, kObjBytes / 2, 3)};
	kvblk_result r[3];
	kvblk_batch_info bi = new_batch_info();
	std::memset(mem_, 0xA5, kLen);
	EXPECT_EQ(kvblk_load_many(dev_.get(), d, 3, r, &bi), -EINVAL);
	EXPECT_EQ(bi.bad_index, 2);
	EXPECT_NE(std::string(kvblk_last_error()).find("overlaps"), std::string::npos) << kvblk_last_error();
	EXPECT_EQ(r[2].status, -EINVAL);
	EXPECT_EQ(r[0].status, -ECANCELED);
	for (uint64_t i = 0; i < kLen; i++)
		ASSERT_EQ(mem_[i], 0xA5) << "byte " << i << " was written";
	load_exact();
}

INSTANTIATE_TEST_SUITE_P(Mm, DeviceMmTest, ::testing::ValuesIn(kMmCases),
			 [](const ::testing::TestParamInfo<MmCase> &i) { return std::string(i.param.name); });

} // namespace

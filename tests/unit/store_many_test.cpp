// SPDX-License-Identifier: MIT
// kvblk_store_many(): round trips through every backend, -EBADF without KVBLK_OPEN_WRITE,
// -ERANGE instead of extending a file, and KVBLK_OPEN_CREATE.
#include "test_util.hpp"

using namespace kvblk_test;

namespace {

constexpr uint64_t kObjs = 6;
constexpr uint64_t kObjBytes = 512 * KiB;

off_t file_size(const std::string &path)
{
	struct stat st {};
	return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

class StoreManyTest : public ::testing::TestWithParam<BackendCase> {
protected:
	TempDir dir_;
	std::string path_ = dir_.file("created");
};

TEST_P(StoreManyTest, store_then_load_round_trip)
{
	const BackendCase &c = GetParam();
	kvblk_open_opts o = make_opts(c.backend, c.workers, c.queue_depth, 0, KVBLK_OPEN_WRITE | KVBLK_OPEN_CREATE);
	o.create_bytes = kObjs * kObjBytes;
	DevPtr dev = open_dev(path_, o);
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	EXPECT_TRUE(info.flags & KVBLK_INFO_WRITABLE);
	EXPECT_EQ(info.capacity, kObjs * kObjBytes);

	/* Sources: objects 0-2 from a registered buffer, 3-5 from plain memory. */
	AlignedBuf reg(3 * kObjBytes), plain(3 * kObjBytes);
	fill_pattern(reg.data(), 0, 3 * kObjBytes, kObjBytes);
	fill_pattern(plain.data(), 3 * kObjBytes, 3 * kObjBytes, kObjBytes);
	uint32_t id = KVBLK_BUF_NONE;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0);
	std::vector<kvblk_desc> d;
	for (uint64_t i = 0; i < kObjs; i++)
		d.push_back(i < 3 ? buf_desc(i * kObjBytes, kObjBytes, id, i * kObjBytes, i)
				  : plain_desc(i * kObjBytes, kObjBytes, plain.data() + (i - 3) * kObjBytes, i));
	std::vector<kvblk_result> r(kObjs);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_store_many(dev.get(), d.data(), kObjs, r.data(), &bi), int(kObjs)) << kvblk_last_error();
	for (uint64_t i = 0; i < kObjs; i++) {
		EXPECT_EQ(r[i].status, 0);
		EXPECT_EQ(r[i].bytes, kObjBytes);
		EXPECT_EQ(r[i].tag, i);
	}
	const uint64_t cmds = kObjs * commands_for(c.backend, kObjBytes, info.max_cmd_bytes);
	EXPECT_EQ(bi.commands, cmds);
	EXPECT_EQ(bi.bytes, kObjs * kObjBytes);
	kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.batches, 1u);
	EXPECT_EQ(st.bytes_written, kObjs * kObjBytes);
	EXPECT_EQ(st.bytes_read, 0u);
	EXPECT_EQ(st.commands, cmds);

	/* Load back on the same device into a registered buffer... */
	AlignedBuf back(kObjs * kObjBytes, 0);
	uint32_t back_id = KVBLK_BUF_NONE;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, back.data(), back.size(), &back_id), 0);
	for (uint64_t i = 0; i < kObjs; i++)
		d[i] = buf_desc(i * kObjBytes, kObjBytes, back_id, i * kObjBytes, i);
	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), kObjs, r.data(), nullptr), int(kObjs));
	const auto want = expected_bytes(0, kObjs * kObjBytes, kObjBytes);
	EXPECT_EQ(std::memcmp(back.data(), want.data(), want.size()), 0);
	st = get_stats(dev.get());
	EXPECT_EQ(st.batches, 2u);
	EXPECT_EQ(st.bytes_read, kObjs * kObjBytes);

	/* ...and through a fresh read-only device, bypassing nothing but the library. */
	dev.reset();
	DevPtr ro = open_dev(path_, make_opts(KVBLK_BACKEND_PSYNC));
	AlignedBuf again(kObjs * kObjBytes, 0);
	const kvblk_desc all = plain_desc(0, kObjs * kObjBytes, again.data(), 0);
	kvblk_result one{};
	ASSERT_EQ(kvblk_load_many(ro.get(), &all, 1, &one, nullptr), 1);
	EXPECT_EQ(std::memcmp(again.data(), want.data(), want.size()), 0);
	EXPECT_EQ(file_size(path_), off_t(kObjs * kObjBytes));
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreManyTest, ::testing::ValuesIn(kAllBackends), case_name);

class StoreRulesTest : public ::testing::Test {
protected:
	TempDir dir_;
};

TEST_F(StoreRulesTest, store_without_write_flag_is_ebadf)
{
	const std::string path = dir_.file("store");
	write_pattern_file(path, 2, kObjBytes);
	DevPtr dev = open_dev(path, make_opts(KVBLK_BACKEND_URING));
	EXPECT_FALSE(get_info(dev.get()).flags & KVBLK_INFO_WRITABLE);
	AlignedBuf src(kObjBytes, 0);
	const kvblk_desc d[2] = {plain_desc(0, kObjBytes, src.data(), 1), plain_desc(kObjBytes, kObjBytes, src.data(), 2)};
	kvblk_result r[2];
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_store_many(dev.get(), d, 2, r, &bi), -EBADF);
	EXPECT_EQ(r[0].status, -ECANCELED);
	EXPECT_EQ(r[1].status, -ECANCELED);
	EXPECT_EQ(r[1].tag, 2u);
	EXPECT_EQ(bi.bad_index, -1);
	EXPECT_NE(std::string(kvblk_last_error()).find("KVBLK_OPEN_WRITE"), std::string::npos);
	EXPECT_EQ(get_stats(dev.get()).rejected_batches, 1u);

	/* The file still holds the pattern. */
	AlignedBuf back(2 * kObjBytes);
	const kvblk_desc all = plain_desc(0, 2 * kObjBytes, back.data(), 0);
	ASSERT_EQ(kvblk_load_many(dev.get(), &all, 1, r, nullptr), 1);
	EXPECT_EQ(std::memcmp(back.data(), expected_bytes(0, 2 * kObjBytes, kObjBytes).data(), 2 * kObjBytes), 0);
}

TEST_F(StoreRulesTest, store_past_end_of_file_is_erange_and_does_not_extend)
{
	const std::string path = dir_.file("store");
	write_pattern_file(path, 2, kObjBytes);
	DevPtr dev = open_dev(path, make_opts(KVBLK_BACKEND_URING, 0, 0, 0, KVBLK_OPEN_WRITE));
	AlignedBuf src(kObjBytes, 0);
	const kvblk_desc d = plain_desc(2 * kObjBytes, kObjBytes, src.data(), 1);
	kvblk_result r{};
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_store_many(dev.get(), &d, 1, &r, &bi), -ERANGE);
	EXPECT_EQ(r.status, -ERANGE);
	EXPECT_EQ(bi.bad_index, 0);
	EXPECT_EQ(file_size(path), off_t(2 * kObjBytes));
}

TEST_F(StoreRulesTest, create_makes_extends_and_never_shrinks)
{
	const std::string path = dir_.file("new");
	kvblk_open_opts o = make_opts(KVBLK_BACKEND_PSYNC, 0, 0, 0, KVBLK_OPEN_WRITE | KVBLK_OPEN_CREATE);
	o.create_bytes = 3 * MiB;
	DevPtr dev = open_dev(path, o);
	EXPECT_EQ(get_info(dev.get()).capacity, 3 * MiB);
	EXPECT_EQ(file_size(path), off_t(3 * MiB));
	dev.reset();

	o.create_bytes = 5 * MiB; /* extends */
	dev = open_dev(path, o);
	EXPECT_EQ(get_info(dev.get()).capacity, 5 * MiB);
	dev.reset();

	o.create_bytes = 1 * MiB; /* never shrinks */
	dev = open_dev(path, o);
	EXPECT_EQ(get_info(dev.get()).capacity, 5 * MiB);
	EXPECT_EQ(file_size(path), off_t(5 * MiB));
	dev.reset();

	o.create_bytes = 0;
	kvblk_dev *d = nullptr;
	EXPECT_EQ(kvblk_open(path.c_str(), &o, &d), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("create_bytes"), std::string::npos);
}

/* KVBLK_OPEN_CREATE alone would make a file nobody can store into: refused, nothing created. */
TEST_F(StoreRulesTest, create_without_write_is_einval_and_creates_nothing)
{
	const std::string path = dir_.file("never");
	kvblk_open_opts o = make_opts(KVBLK_BACKEND_PSYNC, 0, 0, 0, KVBLK_OPEN_CREATE);
	o.create_bytes = 1 * MiB;
	kvblk_dev *d = nullptr;
	EXPECT_EQ(kvblk_open(path.c_str(), &o, &d), -EINVAL);
	EXPECT_EQ(d, nullptr);
	EXPECT_NE(std::string(kvblk_last_error()).find("KVBLK_OPEN_WRITE"), std::string::npos) << kvblk_last_error();
	EXPECT_EQ(file_size(path), -1) << "the file was created";
}

} // namespace

// SPDX-License-Identifier: MIT
// The kvblk store's gets into device memory (include/kvblk/kvstore.h, kvblk_kvstore_submit()):
// a KVBLK_MEM_CUDA buffer served by the staged path through the copy-engine seam (its "device
// memory" is host memory, so the test can read what landed). What the header promises: the
// bytes land; the CPU does not check their CRC32C (a damaged object is a hit) unless
// KVBLK_KVSTORE_SUBMIT_VERIFY, which reads it again into host memory and fails it -EBADMSG;
// device memory needs room for the object rounded up to the logical block size.
#include "kvstore_util.hpp"
#include "test_util.hpp"

#include "libkvblk/copy_engine.hpp"

using kvblk::detail::HostCopyEngine;
using kvblk::testing::Seams;

namespace {

TEST(KvstoreDeviceDest, cuda_destinations_land_and_are_checked_only_with_verify)
{
	Seams seams;
	seams.make_copy_engine = [] { return std::make_unique<HostCopyEngine>(HostCopyEngine::Options{}); };
	kvblk_test::SeamGuard guard(seams);
	kvs_test::TempDir dir;
	const std::string path = dir.file("d");
	auto c = kvs_test::create_opts({64 * kvs_test::KiB}, 32 * kvs_test::MiB);
	auto o = kvs_test::open_opts(KVBLK_BACKEND_URING);
	const char *pp[] = {path.c_str()};
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, &o, &s), 0) << kvblk_kvstore_last_error();
	const std::vector<std::string> keys = {"a", "b", "c", "odd"};
	const std::vector<uint64_t> lens = {64 * 1024, 8192, 40960, 5000};
	for (size_t i = 0; i < keys.size(); i++)
		ASSERT_EQ(kvs_test::put_keys(s, {keys[i]}, 9, lens[i]), 1);
	kvblk_dev *dev = kvblk_kvstore_dev(s);
	ASSERT_EQ(kvblk_set_staging(dev, 2, 64 * 1024), 0) << kvblk_last_error();
	kvs_test::Buf devmem(4 * 64 * 1024);
	uint32_t id = KVBLK_BUF_NONE;
	ASSERT_EQ(kvblk_register_buffer(dev, KVBLK_MEM_CUDA, devmem.p, devmem.n, &id), 0) << kvblk_last_error();
	kvblk_buffer_info bi{};
	bi.info_size = sizeof(bi);
	ASSERT_EQ(kvblk_get_buffer_info(dev, id, &bi), 0);
	EXPECT_EQ(bi.kind, uint32_t(KVBLK_MEM_CUDA));
	EXPECT_EQ(bi.path, uint32_t(KVBLK_PATH_STAGED));
	EXPECT_EQ(bi.len, devmem.n);

	auto get = [&](uint32_t flags, std::vector<kvblk_kvstore_result> *r, kvblk_cqe *cqe) {
		std::vector<kvblk_kvstore_op> ops;
		for (size_t i = 0; i < keys.size(); i++) {
			kvblk_kvstore_op g{};
			g.key = keys[i].data();
			g.key_len = uint32_t(keys[i].size());
			g.buf_id = id;
			g.addr = i * 64 * 1024;
			/* "odd": room for its 5000 bytes only, not the 8192 its blocks take. */
			g.length = keys[i] == "odd" ? 5000 : 64 * 1024;
			ops.push_back(g);
		}
		r->assign(ops.size(), kvblk_kvstore_result{});
		kvblk_kvstore_submit_opts so;
		kvblk_kvstore_submit_opts_init(&so, sizeof(so));
		so.flags = flags;
		so.results = r->data();
		uint64_t t;
		ASSERT_EQ(kvblk_kvstore_submit(s, KVBLK_KVSTORE_GET, ops.data(), uint32_t(ops.size()), &so, &t), 0)
			<< kvblk_kvstore_last_error();
		ASSERT_GE(kvblk_kvstore_wait(s, t, -1, cqe), 0);
	};
	std::vector<kvblk_kvstore_result> r;
	kvblk_cqe cqe{};
	get(0, &r, &cqe);
	EXPECT_EQ(cqe.path, uint32_t(KVBLK_PATH_STAGED));
	for (size_t i = 0; i < 3; i++) {
		EXPECT_EQ(r[i].status, 0) << keys[i];
		EXPECT_EQ(0, memcmp(devmem.p + i * 64 * 1024, kvs_test::object_bytes(keys[i], 9, lens[i]).data(), lens[i]));
	}
	EXPECT_EQ(r[3].status, -EMSGSIZE) << "device memory needs room for whole blocks";
	EXPECT_EQ(r[3].length, 5000u);

	/* Damage b on the drive (one drive, slots in put order: b is slot 1). */
	const auto lay = kvs_test::raw_layout(path);
	kvs_test::flip_bit(path, lay.class_offset[0] + 1 * 64 * 1024 + 100);
	memset(devmem.p, 0, devmem.n);
	get(0, &r, &cqe);
	EXPECT_EQ(r[1].status, 0) << "without VERIFY the bytes in device memory are not checked";
	EXPECT_NE(0, memcmp(devmem.p + 64 * 1024, kvs_test::object_bytes("b", 9, 8192).data(), 8192))
		<< "the damaged bytes landed (what the header says)";
	get(KVBLK_KVSTORE_SUBMIT_VERIFY, &r, &cqe);
	EXPECT_EQ(r[0].status, 0);
	EXPECT_EQ(r[1].status, -EBADMSG) << "VERIFY reads it again into host memory and checks it";
	EXPECT_EQ(r[2].status, 0);
	kvblk_kvstore_stats st{};
	st.stats_size = sizeof(st);
	ASSERT_EQ(kvblk_kvstore_get_stats(s, &st), 0);
	EXPECT_EQ(st.checksum_failures, 1u);
	EXPECT_EQ(kvblk_unregister_buffer(dev, id), 0);
	kvblk_kvstore_close(s);
}

TEST(KvstoreBudget, a_small_drive_budget_cuts_a_get_into_parts_that_all_land)
{
	kvs_test::TempDir dir;
	std::vector<std::string> p = {dir.file("a"), dir.file("b")};
	const char *pp[] = {p[0].c_str(), p[1].c_str()};
	auto c = kvs_test::create_opts({64 * kvs_test::KiB}, 32 * kvs_test::MiB);
	auto o = kvs_test::open_opts(KVBLK_BACKEND_URING);
	o.drive_budget_bytes = 100 * 1024; /* two 50,000-byte objects per drive per part */
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(kvblk_kvstore_create(pp, 2, &c, &o, &s), 0) << kvblk_kvstore_last_error();
	std::vector<std::string> keys;
	for (int i = 0; i < 30; i++)
		keys.push_back("k" + std::to_string(i));
	ASSERT_EQ(kvs_test::put_keys(s, keys, 4, 50000), 30);
	std::vector<kvs_test::Buf> dst;
	std::vector<kvblk_kvstore_op> ops;
	for (const auto &k : keys) {
		dst.emplace_back(64 * 1024);
		ops.push_back(kvs_test::op_for(k, dst.back().p, 64 * 1024));
	}
	std::vector<kvblk_kvstore_result> r(ops.size());
	kvblk_stats before{};
	before.stats_size = sizeof(before);
	ASSERT_EQ(kvblk_get_stats(kvblk_kvstore_dev(s), &before), 0);
	ASSERT_EQ(kvblk_kvstore_get(s, ops.data(), uint32_t(ops.size()), r.data()), 30);
	for (size_t i = 0; i < keys.size(); i++)
		EXPECT_EQ(0, memcmp(dst[i].p, kvs_test::object_bytes(keys[i], 4, 50000).data(), 50000)) << keys[i];
	kvblk_stats after{};
	after.stats_size = sizeof(after);
	ASSERT_EQ(kvblk_get_stats(kvblk_kvstore_dev(s), &after), 0);
	/* 30 objects, at most 2 per drive per part: at least 8 libkvblk batches for the one get. */
	EXPECT_GE(after.batches - before.batches, 8u);
	kvblk_kvstore_close(s);
}

} // namespace

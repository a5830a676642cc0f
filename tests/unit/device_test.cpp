// SPDX-License-Identifier: MIT
// Data tests of the NVMe backends (kmod, uring, uring_cmd) against a real namespace. They
// run in the QEMU guest of tests/vm (tests/vm/cases/libkvblk-device.sh) and skip elsewhere:
//
//   KVBLK_TEST_DEVICE          the namespace's block device (/dev/nvme0n1); unset: skip all
//   KVBLK_TEST_NGDEV           its generic char device (/dev/ng0n1)
//   KVBLK_TEST_KMOD=1          kvblk.ko must be loaded (the kmod cases fail instead of skip)
//   KVBLK_TEST_NONNVME_DEVICE  a block device that is not NVMe (null_blk), optional
//   KVBLK_TEST_PARTITION       a partition of KVBLK_TEST_DEVICE, optional
//   KVBLK_VM_MAX_CMD_BYTES     the controller's largest command (set by the VM harness)
//
// Every load is compared with a plain O_DIRECT pread(2) of the same range of the block
// device, byte for byte, and (in the VM, whose image holds tests/vm/pattern.h) with the
// pattern; results, kvblk_batch_info and the stats must equal what was done.
#include "device_util.hpp"

#include <algorithm>

using namespace kvblk_test;

namespace {

struct Case {
	const char *name;
	kvblk_backend backend;
	bool ng_path;	/* open KVBLK_TEST_NGDEV instead of the block device */
	uint32_t workers;
};

void PrintTo(const Case &c, std::ostream *os)
{
	*os << c.name;
}

const Case kCases[] = {
	{"kmod", KVBLK_BACKEND_KMOD, false, 0},
	{"uring", KVBLK_BACKEND_URING, false, 0},
	{"uring_cmd", KVBLK_BACKEND_URING_CMD, false, 0},
	{"uring_cmd_ng", KVBLK_BACKEND_URING_CMD, true, 0},
	{"uring_cmd_2rings", KVBLK_BACKEND_URING_CMD, false, 2},
};

class DeviceTest : public ::testing::TestWithParam<Case> {
protected:
	void SetUp() override
	{
		REQUIRE_DEVICE();
		if (GetParam().backend == KVBLK_BACKEND_KMOD)
			REQUIRE_KMOD();
		block_ = env("KVBLK_TEST_DEVICE");
		if (GetParam().ng_path) {
			if (!env("KVBLK_TEST_NGDEV"))
				GTEST_SKIP() << "KVBLK_TEST_NGDEV is not set";
			path_ = env("KVBLK_TEST_NGDEV");
		} else {
			path_ = block_;
		}
		ref_ = std::make_unique<Reference>(block_);
	}

	DevPtr open_backend(uint64_t max_cmd = 0, uint32_t flags = 0)
	{
		const Case &c = GetParam();
		DevPtr d = open_dev(path_, make_opts(c.backend, c.workers, 0, max_cmd, flags));
		if (d) {
			const kvblk_dev_info i = get_info(d.get());
			EXPECT_EQ(i.backend, uint32_t(c.backend)) << i.backend_reason;
		}
		return d;
	}

	/* [offset, offset+len) of objects spread over the device, LBA aligned. */
	static std::vector<uint64_t> spread(const kvblk_dev_info &info, const std::vector<uint64_t> &sizes)
	{
		std::vector<uint64_t> off;
		const uint64_t lbs = info.logical_block_size;
		const uint64_t step = info.capacity / (sizes.size() + 2);
		for (size_t k = 0; k < sizes.size(); k++) {
			uint64_t o = step * (k + 1) + k * 7 * lbs;
			o -= o % lbs;
			o = std::min(o, info.capacity - sizes[k]);
			off.push_back(o - o % lbs);
		}
		return off;
	}

	/*
	 * Load @sizes.size() objects at @offs into one buffer (registered or plain pointers),
	 * each followed by one untouched LBA, and check data, results, batch info and stats.
	 */
	void load_and_check(kvblk_dev *dev, const std::vector<uint64_t> &sizes, const std::vector<uint64_t> &offs,
			    bool registered, kvblk_backend served)
	{
		const kvblk_dev_info info = get_info(dev);
		const uint64_t lbs = info.logical_block_size, mc = info.max_cmd_bytes;
		const uint32_t n = uint32_t(sizes.size());
		uint64_t total = 0;
		std::vector<uint64_t> at;
		for (uint64_t s : sizes) {
			at.push_back(total);
			total += s + lbs;
		}
		/* Start one LBA into a page: with 512-byte LBAs the buffer is not page aligned. */
		AlignedBuf mem(total + 4096);
		uint8_t *base = mem.data() + lbs;
		uint32_t id = KVBLK_BUF_NONE;
		if (registered) {
			ASSERT_EQ(kvblk_register_buffer(dev, KVBLK_MEM_HOST, base, total, &id), 0) << kvblk_last_error();
		}

		std::vector<kvblk_desc> descs;
		uint64_t want_cmds = 0, want_bytes = 0;
		for (uint32_t k = 0; k < n; k++) {
			descs.push_back(registered ? buf_desc(offs[k], sizes[k], id, at[k], 1000 + k)
						   : plain_desc(offs[k], sizes[k], base + at[k], 1000 + k));
			want_cmds += (sizes[k] + mc - 1) / mc;
			want_bytes += sizes[k];
		}
		ASSERT_EQ(kvblk_reset_stats(dev), 0);
		std::vector<kvblk_result> res(n);
		kvblk_batch_info bi = new_batch_info();
		ASSERT_EQ(kvblk_load_many(dev, descs.data(), n, res.data(), &bi), int(n)) << kvblk_last_error();
		for (uint32_t k = 0; k < n; k++) {
			SCOPED_TRACE("object " + std::to_string(k) + ": " + std::to_string(sizes[k]) + " bytes at " +
				     std::to_string(offs[k]) + (registered ? ", registered" : ", plain"));
			EXPECT_EQ(res[k].status, 0);
			EXPECT_EQ(res[k].bytes, sizes[k]);
			EXPECT_EQ(res[k].tag, 1000u + k);
			EXPECT_TRUE(ref_->same(base + at[k], offs[k], sizes[k]));
			EXPECT_TRUE(pattern_ok(base + at[k], offs[k], sizes[k]));
			EXPECT_TRUE(mem.all(lbs + at[k] + sizes[k], lbs, 0xA5)) << "the LBA after the object was written";
		}
		EXPECT_TRUE(mem.all(0, lbs, 0xA5)) << "the LBA before the buffer was written";
		EXPECT_EQ(bi.backend, uint32_t(served));
		EXPECT_EQ(bi.path, uint32_t(KVBLK_PATH_HOST));
		EXPECT_EQ(bi.bad_index, -1);
		EXPECT_EQ(bi.failed, 0u);
		EXPECT_EQ(bi.bytes, want_bytes);
		EXPECT_EQ(bi.commands, want_cmds);
		const kvblk_stats st = get_stats(dev);
		EXPECT_EQ(st.batches, 1u);
		EXPECT_EQ(st.objects, n);
		EXPECT_EQ(st.commands, want_cmds);
		EXPECT_EQ(st.bytes_read, want_bytes);
		EXPECT_EQ(st.bytes_written, 0u);
		EXPECT_EQ(st.rejected_batches, 0u);
		EXPECT_EQ(st.errors_io + st.errors_eagain + st.errors_other, 0u);
		EXPECT_EQ(st.batches_by_backend[served], 1u);
		EXPECT_EQ(hist_sum(st.batch_lat_hist), 1u);
		if (served != KVBLK_BACKEND_KMOD) {
			EXPECT_EQ(hist_sum(st.cmd_lat_hist), want_cmds);
			EXPECT_GE(st.inflight_peak, 1u);
		}
		if (registered) {
			EXPECT_EQ(kvblk_unregister_buffer(dev, id), 0);
		}
	}

	std::string block_, path_;
	std::unique_ptr<Reference> ref_;
};

TEST_P(DeviceTest, load_many_equals_pread_plain_and_registered)
{
	DevPtr dev = open_backend();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size, mc = info.max_cmd_bytes;
	if (const char *hw = env("KVBLK_VM_MAX_CMD_BYTES")) {
		const uint64_t hw_bytes = std::strtoull(hw, nullptr, 10);
		EXPECT_LE(mc, hw_bytes) << "larger than the controller's MDTS";
		if (GetParam().backend != KVBLK_BACKEND_KMOD) {
			EXPECT_EQ(mc, std::min<uint64_t>(KVBLK_DEFAULT_MAX_CMD_BYTES, hw_bytes));
		}
	}
	std::vector<uint64_t> sizes = {lbs, 4096, 3 * lbs, mc - lbs, mc, mc + lbs, 3 * mc + 5 * lbs, 1 * MiB};
	sizes.erase(std::remove(sizes.begin(), sizes.end(), 0), sizes.end());
	const std::vector<uint64_t> offs = spread(info, sizes);
	for (bool registered : {false, true}) {
		load_and_check(dev.get(), sizes, offs, registered, GetParam().backend);
		if (HasFatalFailure())
			return;
	}
}

TEST_P(DeviceTest, small_max_cmd_bytes_is_honoured)
{
	DevPtr dev = open_backend(8 * KiB);
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	EXPECT_EQ(info.max_cmd_bytes, 8 * KiB);
	const uint64_t lbs = info.logical_block_size;
	const std::vector<uint64_t> sizes = {8 * KiB, 20 * KiB, 64 * KiB + lbs, lbs};
	const std::vector<uint64_t> offs = spread(info, sizes);
	for (bool registered : {false, true})
		load_and_check(dev.get(), sizes, offs, registered, GetParam().backend);
}

/* More descriptors than kvblk.ko takes per call (4096 by default), plain pointers into one buffer. */
TEST_P(DeviceTest, many_small_objects)
{
	DevPtr dev = open_backend();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	const uint32_t n = 5000;
	AlignedBuf mem(n * lbs);
	std::vector<kvblk_desc> descs;
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t off = (uint64_t(i) * 3 * lbs) % (info.capacity - lbs);
		descs.push_back(plain_desc(off - off % lbs, lbs, mem.data() + i * lbs, i));
	}
	std::vector<kvblk_result> res(n);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev.get(), descs.data(), n, res.data(), &bi), int(n)) << kvblk_last_error();
	for (uint32_t i = 0; i < n; i++) {
		ASSERT_EQ(res[i].status, 0) << i;
		ASSERT_EQ(res[i].tag, i);
		ASSERT_TRUE(ref_->same(mem.data() + i * lbs, descs[i].offset, lbs)) << i;
		ASSERT_TRUE(pattern_ok(mem.data() + i * lbs, descs[i].offset, lbs)) << i;
	}
	EXPECT_EQ(bi.commands, n);
	EXPECT_EQ(bi.bytes, n * lbs);
	EXPECT_EQ(get_stats(dev.get()).commands, n);
}

/* Plain pointers in many separate allocations (kmod: more page ranges than it registers at once). */
TEST_P(DeviceTest, scattered_plain_destinations)
{
	DevPtr dev = open_backend();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	const uint32_t n = 600;
	std::vector<std::unique_ptr<AlignedBuf>> mems;
	std::vector<kvblk_desc> descs;
	for (uint32_t i = 0; i < n; i++) {
		mems.push_back(std::make_unique<AlignedBuf>(4 * lbs)); /* up to 3 LBAs, one LBA in */
		const uint64_t len = (i % 3 + 1) * lbs;
		const uint64_t off = (uint64_t(i) * 977 * lbs) % (info.capacity - 4 * lbs);
		descs.push_back(plain_desc(off, len, mems.back()->data() + lbs * (i % 2), i));
	}
	std::vector<kvblk_result> res(n);
	ASSERT_EQ(kvblk_load_many(dev.get(), descs.data(), n, res.data(), nullptr), int(n)) << kvblk_last_error();
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *got = mems[i]->data() + lbs * (i % 2);
		ASSERT_EQ(res[i].status, 0) << i;
		ASSERT_EQ(res[i].bytes, descs[i].length) << i;
		ASSERT_TRUE(ref_->same(got, descs[i].offset, descs[i].length)) << i;
		ASSERT_TRUE(pattern_ok(got, descs[i].offset, descs[i].length)) << i;
	}
}

TEST_P(DeviceTest, rejected_calls_read_nothing)
{
	DevPtr dev = open_backend();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	AlignedBuf mem(4 * lbs);
	kvblk_desc d[2] = {plain_desc(0, lbs, mem.data(), 1), plain_desc(info.capacity - lbs, 2 * lbs, mem.data() + lbs, 2)};
	kvblk_result r[2];
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_load_many(dev.get(), d, 2, r, &bi), -ERANGE);
	EXPECT_EQ(bi.bad_index, 1);
	EXPECT_EQ(r[0].status, -ECANCELED);
	EXPECT_EQ(r[1].status, -ERANGE);
	d[1] = buf_desc(0, lbs, 77, 0, 2);
	EXPECT_EQ(kvblk_load_many(dev.get(), d, 2, r, &bi), -ENOENT);
	EXPECT_TRUE(mem.all(0, 4 * lbs, 0xA5)) << "a rejected call read something";
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.rejected_batches, 2u);
	EXPECT_EQ(st.batches, 0u);
	EXPECT_EQ(st.commands, 0u);
}

/*
 * Stores: write back exactly the bytes that are there (the namespace keeps its pattern for
 * the cases after this one), then load them again. kmod stores go through kvblk.ko when it
 * writes (KVBLK_FEAT_STORE), else through uring, visibly.
 */
TEST_P(DeviceTest, store_same_bytes_back)
{
	DevPtr dev = open_backend(0, KVBLK_OPEN_WRITE);
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	EXPECT_TRUE(info.flags & KVBLK_INFO_WRITABLE);
	const uint64_t lbs = info.logical_block_size;
	const uint64_t len = 96 * KiB + lbs, off = info.capacity - 4 * MiB;
	AlignedBuf a(2 * len), b(2 * len);
	kvblk_desc d[2] = {plain_desc(off, len, a.data(), 1), plain_desc(off + 2 * len, len, a.data() + len, 2)};
	kvblk_result r[2];
	ASSERT_EQ(kvblk_load_many(dev.get(), d, 2, r, nullptr), 2) << kvblk_last_error();
	ASSERT_TRUE(ref_->same(a.data(), off, len));

	const bool kmod_stores = module_features() & KVBLK_FEAT_STORE;
	const kvblk_backend store_by = GetParam().backend == KVBLK_BACKEND_KMOD && !kmod_stores ?
					       KVBLK_BACKEND_URING :
					       GetParam().backend;
	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_store_many(dev.get(), d, 2, r, &bi), 2) << kvblk_last_error();
	EXPECT_EQ(bi.backend, uint32_t(store_by));
	EXPECT_EQ(bi.bytes, 2 * len);
	kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.bytes_written, 2 * len);
	EXPECT_EQ(st.batches_by_backend[store_by], 1u);
	if (store_by != KVBLK_BACKEND_KMOD) {
		EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], 0u);
	}

	d[0].addr = uint64_t(uintptr_t(b.data()));
	d[1].addr = uint64_t(uintptr_t(b.data() + len));
	ASSERT_EQ(kvblk_load_many(dev.get(), d, 2, r, &bi), 2) << kvblk_last_error();
	EXPECT_EQ(bi.backend, uint32_t(GetParam().backend));
	EXPECT_EQ(std::memcmp(a.data(), b.data(), 2 * len), 0);
	EXPECT_TRUE(pattern_ok(b.data(), off, len));
	EXPECT_TRUE(pattern_ok(b.data() + len, off + 2 * len, len));
	st = get_stats(dev.get());
	EXPECT_EQ(st.batches_by_backend[GetParam().backend], store_by == GetParam().backend ? 2u : 1u);
}

/*
 * Unaligned stores (KVBLK_DESC_UNALIGNED) on the namespace through each backend: three objects
 * (inside one LBA, across two, six LBAs long from a misaligned source) read-modify-write their
 * edge LBAs; read back, the 64 KiB around them are the namespace's bytes with exactly the
 * stored bytes over them; the counters say five edge LBAs were read; then the namespace's
 * own bytes are stored back (aligned) and checked.
 */
TEST_P(DeviceTest, unaligned_store_read_modify_writes_edge_blocks)
{
	DevPtr dev = open_backend(0, KVBLK_OPEN_WRITE);
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	const uint64_t base = info.capacity - 8 * MiB, span = 64 * KiB;
	AlignedBuf orig(span), back(span);
	kvblk_desc whole = plain_desc(base, span, orig.data(), 9);
	kvblk_result r[3];
	ASSERT_EQ(kvblk_load_many(dev.get(), &whole, 1, r, nullptr), 1) << kvblk_last_error();
	ASSERT_TRUE(ref_->same(orig.data(), base, span));

	const uint64_t off[3] = {lbs / 2 + 3, 2 * lbs - 5, 3 * lbs + 1};
	const uint64_t len[3] = {7, 11, 5 * lbs + 9};
	std::vector<uint8_t> src(8 * lbs + 64);
	for (size_t i = 0; i < src.size(); i++)
		src[i] = uint8_t(0x5A ^ (i * 7));
	std::vector<uint8_t> want(orig.data(), orig.data() + span);
	kvblk_desc d[3];
	uint64_t at = 1; /* the sources start one byte into the vector: never aligned */
	for (int k = 0; k < 3; k++) {
		d[k] = plain_desc(base + off[k], len[k], src.data() + at, 20 + k);
		d[k].flags = KVBLK_DESC_UNALIGNED;
		std::memcpy(want.data() + off[k], src.data() + at, len[k]);
		at += len[k] + 3;
	}
	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_store_many(dev.get(), d, 3, r, &bi), 3) << kvblk_last_error();
	for (int k = 0; k < 3; k++) {
		EXPECT_EQ(r[k].status, 0) << "object " << k;
		EXPECT_EQ(r[k].bytes, len[k]) << "object " << k;
	}
	kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.unaligned_stores, 3u);
	EXPECT_EQ(st.rmw_read_bytes, 5 * lbs);

	whole.addr = uint64_t(uintptr_t(back.data()));
	ASSERT_EQ(kvblk_load_many(dev.get(), &whole, 1, r, nullptr), 1) << kvblk_last_error();
	for (uint64_t i = 0; i < span; i++)
		if (back.data()[i] != want[i]) {
			ADD_FAILURE() << "byte " << i << " of the 64 KiB is " << int(back.data()[i]) << ", want "
				      << int(want[i]) << " (" << (want[i] == orig.data()[i] ? "the namespace's" : "stored")
				      << ")";
			break;
		}

	/* The namespace's own bytes back, for the tests after this one. */
	whole.addr = uint64_t(uintptr_t(orig.data()));
	ASSERT_EQ(kvblk_store_many(dev.get(), &whole, 1, r, nullptr), 1) << kvblk_last_error();
	whole.addr = uint64_t(uintptr_t(back.data()));
	ASSERT_EQ(kvblk_load_many(dev.get(), &whole, 1, r, nullptr), 1) << kvblk_last_error();
	EXPECT_TRUE(ref_->same(back.data(), base, span));
}

/*
 * kmod stores through kvblk.ko (KVBLK_FEAT_STORE), byte-exact: other bytes than the namespace
 * holds, from a registered buffer and from plain pointers, synchronous and submitted; each
 * read back equal, the bytes around them (canaries) unchanged; then the namespace's own bytes
 * are stored back. The uring fallback (a module without the feature) still stores.
 */
class KmodStoreTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		REQUIRE_DEVICE();
		REQUIRE_KMOD();
		if (!(module_features() & KVBLK_FEAT_STORE))
			GTEST_SKIP() << "this kvblk.ko does not write (KVBLK_FEAT_STORE)";
		path_ = env("KVBLK_TEST_DEVICE");
	}

	DevPtr open_kmod()
	{
		return open_dev(path_, make_opts(KVBLK_BACKEND_KMOD, 0, 0, 0, KVBLK_OPEN_WRITE));
	}

	std::string path_;
};

TEST_F(KmodStoreTest, store_then_load_equal)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev) << kvblk_last_error();
	const kvblk_dev_info info = get_info(dev.get());
	EXPECT_NE(std::string(info.backend_reason).find("stores through kvblk.ko"), std::string::npos)
		<< info.backend_reason;
	const uint64_t lbs = info.logical_block_size;
	/* [base, base + span): three objects with gaps (canaries) between and around them. */
	const uint64_t span = 2 * MiB, base = info.capacity - 8 * MiB;
	const uint64_t off[3] = {base + lbs, base + 256 * KiB, base + MiB + 3 * lbs};
	const uint64_t len[3] = {8 * lbs, 256 * KiB + lbs, 512 * KiB};
	Reference ref(path_);
	AlignedBuf orig(span), src(span), back(span);
	kvblk_desc whole = plain_desc(base, span, orig.data(), 9);
	kvblk_result r[3];
	ASSERT_EQ(kvblk_load_many(dev.get(), &whole, 1, r, nullptr), 1) << kvblk_last_error();
	ASSERT_TRUE(ref.same(orig.data(), base, span));

	for (int pass = 0; pass < 3; pass++) {
		for (uint64_t i = 0; i < span; i++)
			src.data()[i] = uint8_t(~orig.data()[i] + pass);
		uint32_t id = 0;
		kvblk_desc d[3];
		if (pass == 1) {
			ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, src.data(), span, &id), 0)
				<< kvblk_last_error();
		}
		for (int k = 0; k < 3; k++)
			d[k] = pass == 1 ? buf_desc(off[k], len[k], id, off[k] - base, k) :
					   plain_desc(off[k], len[k], src.data() + (off[k] - base), k);
		ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
		kvblk_batch_info bi = new_batch_info();
		if (pass == 2) {
			uint64_t ticket = 0;
			kvblk_submit_opts so;
			kvblk_submit_opts_init(&so, sizeof(so));
			so.flags = KVBLK_SUBMIT_STORE;
			so.results = r;
			ASSERT_EQ(kvblk_submit(dev.get(), d, 3, &so, &ticket), 0) << kvblk_last_error();
			ASSERT_EQ(kvblk_wait(dev.get(), ticket, -1, &bi), 3) << kvblk_last_error();
		} else {
			ASSERT_EQ(kvblk_store_many(dev.get(), d, 3, r, &bi), 3) << kvblk_last_error();
		}
		EXPECT_EQ(bi.backend, uint32_t(KVBLK_BACKEND_KMOD)) << "pass " << pass;
		const kvblk_stats st = get_stats(dev.get());
		EXPECT_EQ(st.bytes_written, len[0] + len[1] + len[2]);
		EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], 1u);
		EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_URING], 0u);
		if (pass == 1) {
			ASSERT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
		}

		/* What the device holds now: the stored ranges from src, the rest as it was. */
		std::vector<uint8_t> want(orig.data(), orig.data() + span);
		for (int k = 0; k < 3; k++)
			std::memcpy(want.data() + (off[k] - base), src.data() + (off[k] - base), len[k]);
		ASSERT_TRUE(ref.same(want.data(), base, span)) << "pass " << pass;
		std::memset(back.data(), 0, span);
		whole.addr = uint64_t(uintptr_t(back.data()));
		ASSERT_EQ(kvblk_load_many(dev.get(), &whole, 1, r, nullptr), 1) << kvblk_last_error();
		whole.addr = uint64_t(uintptr_t(orig.data()));
		EXPECT_EQ(std::memcmp(back.data(), want.data(), span), 0) << "pass " << pass;
	}

	/* The namespace's own bytes back (the cases after this one read its pattern). */
	kvblk_desc all = plain_desc(base, span, orig.data(), 10);
	ASSERT_EQ(kvblk_store_many(dev.get(), &all, 1, r, nullptr), 1) << kvblk_last_error();
	ASSERT_EQ(kvblk_flush(dev.get(), KVBLK_TARGET_ALL, 0), 0) << kvblk_last_error();
	ASSERT_TRUE(ref.same(orig.data(), base, span));
	EXPECT_TRUE(pattern_ok(orig.data(), base, span));
}

/* A module without KVBLK_FEAT_STORE (the bit hidden): stores through uring, as before. */
TEST_F(KmodStoreTest, without_the_feature_stores_through_uring)
{
	kvblk::testing::Seams s;
	s.kmod_no_store = true;
	SeamGuard g(s);
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev) << kvblk_last_error();
	EXPECT_NE(std::string(get_info(dev.get()).backend_reason).find("stores through uring"), std::string::npos)
		<< get_info(dev.get()).backend_reason;
	const uint64_t lbs = get_info(dev.get()).logical_block_size;
	const uint64_t off = get_info(dev.get()).capacity - 8 * MiB;
	AlignedBuf a(4 * lbs);
	kvblk_desc d = plain_desc(off, 4 * lbs, a.data(), 1);
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(dev.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_store_many(dev.get(), &d, 1, &r, &bi), 1) << kvblk_last_error();
	EXPECT_EQ(bi.backend, uint32_t(KVBLK_BACKEND_URING));
}

/* A read-only open stays read-only: no store, whatever the module can do. */
TEST_F(KmodStoreTest, read_only_open_does_not_store)
{
	DevPtr dev = open_dev(path_, make_opts(KVBLK_BACKEND_KMOD));
	ASSERT_TRUE(dev) << kvblk_last_error();
	EXPECT_FALSE(get_info(dev.get()).flags & KVBLK_INFO_WRITABLE);
	const uint64_t lbs = get_info(dev.get()).logical_block_size;
	AlignedBuf a(lbs);
	kvblk_desc d = plain_desc(0, lbs, a.data(), 1);
	kvblk_result r{};
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_store_many(dev.get(), &d, 1, &r, &bi), -EBADF);
}

INSTANTIATE_TEST_SUITE_P(Nvme, DeviceTest, ::testing::ValuesIn(kCases),
			 [](const ::testing::TestParamInfo<Case> &i) { return std::string(i.param.name); });

/* ---------------------------------------------------------- choice and refusals */

class DeviceChoiceTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		REQUIRE_DEVICE();
		block_ = env("KVBLK_TEST_DEVICE");
		env_ = std::make_unique<EnvGuard>("KVBLK_BACKEND", nullptr);
	}
	std::string block_;
	std::unique_ptr<EnvGuard> env_;
};

TEST_F(DeviceChoiceTest, auto_without_module_says_so)
{
	if (kmod_loaded())
		GTEST_SKIP() << "kvblk.ko is loaded (run this before insmod)";
	DevPtr d = open_dev(block_, make_opts(KVBLK_BACKEND_AUTO));
	ASSERT_TRUE(d);
	const kvblk_dev_info i = get_info(d.get());
	EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_STREQ(i.backend_reason, "uring: /dev/kvblk not present (kvblk.ko not loaded)");
	EXPECT_EQ(try_open(block_, make_opts(KVBLK_BACKEND_KMOD)), -EOPNOTSUPP);
	EXPECT_TRUE(says("kvblk.ko is not loaded")) << kvblk_last_error();
}

TEST_F(DeviceChoiceTest, auto_picks_kmod_for_the_namespace)
{
	REQUIRE_KMOD();
	DevPtr d = open_dev(block_, make_opts(KVBLK_BACKEND_AUTO));
	ASSERT_TRUE(d);
	const kvblk_dev_info i = get_info(d.get());
	EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_KMOD));
	EXPECT_EQ(std::string(i.backend_reason).rfind("kmod: " + block_ + " is a PCIe NVMe namespace and /dev/kvblk is present; nsid ", 0), 0u)
		<< i.backend_reason;
	/* The page cache is not what kvblk.ko does. */
	DevPtr b = open_dev(block_, make_opts(KVBLK_BACKEND_AUTO, 0, 0, 0, KVBLK_OPEN_BUFFERED));
	ASSERT_TRUE(b);
	EXPECT_STREQ(get_info(b.get()).backend_reason,
		     "uring: KVBLK_OPEN_BUFFERED asks for the page cache, which kvblk.ko bypasses");
}

TEST_F(DeviceChoiceTest, generic_char_device)
{
	const char *ng = env("KVBLK_TEST_NGDEV");
	if (!ng)
		GTEST_SKIP() << "KVBLK_TEST_NGDEV is not set";
	DevPtr d = open_dev(ng, make_opts(KVBLK_BACKEND_AUTO));
	ASSERT_TRUE(d);
	kvblk_dev_info i = get_info(d.get());
	EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_URING_CMD));
	EXPECT_EQ(std::string(i.backend_reason).rfind(std::string("uring_cmd: ") + ng +
							   " is an NVMe generic char device, which only uring_cmd serves; nsid ",
						   0),
		  0u)
		<< i.backend_reason;
	EXPECT_FALSE(i.flags & KVBLK_INFO_BLOCKDEV);
	/* Same geometry as the block device. */
	DevPtr blk = open_dev(block_, make_opts(KVBLK_BACKEND_URING_CMD));
	ASSERT_TRUE(blk);
	const kvblk_dev_info j = get_info(blk.get());
	EXPECT_EQ(i.capacity, j.capacity);
	EXPECT_EQ(i.logical_block_size, j.logical_block_size);
	EXPECT_EQ(i.max_cmd_bytes, j.max_cmd_bytes);
	EXPECT_NE(std::string(j.backend_reason).find(std::string("mapped to ") + ng), std::string::npos)
		<< j.backend_reason;
	for (kvblk_backend b : {KVBLK_BACKEND_URING, KVBLK_BACKEND_PSYNC, KVBLK_BACKEND_KMOD}) {
		EXPECT_EQ(try_open(ng, make_opts(b)), -EOPNOTSUPP) << b;
		EXPECT_TRUE(says("only the uring_cmd backend serves it")) << kvblk_last_error();
	}
}

TEST_F(DeviceChoiceTest, non_nvme_block_device)
{
	const char *other = env("KVBLK_TEST_NONNVME_DEVICE");
	if (!other)
		GTEST_SKIP() << "KVBLK_TEST_NONNVME_DEVICE is not set";
	const std::string name = std::string(other).substr(std::string(other).rfind('/') + 1);
	EXPECT_EQ(try_open(other, make_opts(KVBLK_BACKEND_URING_CMD)), -EOPNOTSUPP);
	EXPECT_TRUE(says("is not an NVMe namespace")) << kvblk_last_error();
	if (kmod_loaded()) {
		/* kvblk.ko serves any block device through its block-layer engine when asked... */
		DevPtr k = open_dev(other, make_opts(KVBLK_BACKEND_KMOD));
		ASSERT_TRUE(k) << kvblk_last_error();
		const kvblk_dev_info i = get_info(k.get());
		EXPECT_NE(std::string(i.backend_reason).find("block-layer engine"), std::string::npos)
			<< i.backend_reason;
		const uint64_t len = std::min<uint64_t>(i.capacity, 256 * KiB);
		AlignedBuf got(len);
		kvblk_desc desc = plain_desc(i.capacity - len, len, got.data(), 6);
		kvblk_result r{};
		/* null_blk moves no data: the status is what can be checked here (bytes: VM blk-* cases). */
		ASSERT_EQ(kvblk_load_many(k.get(), &desc, 1, &r, nullptr), 1) << kvblk_last_error();
		EXPECT_EQ(r.status, 0);
		k.reset();
		/* ... and AUTO still picks uring for it. */
		DevPtr d = open_dev(other, make_opts(KVBLK_BACKEND_AUTO));
		ASSERT_TRUE(d);
		EXPECT_EQ(std::string(get_info(d.get()).backend_reason),
			  std::string("uring: ") + other + " is a block device (" + name + "), not a PCIe NVMe namespace");
	}
}

TEST_F(DeviceChoiceTest, partition)
{
	const char *part = env("KVBLK_TEST_PARTITION");
	if (!part)
		GTEST_SKIP() << "KVBLK_TEST_PARTITION is not set";
	EXPECT_EQ(try_open(part, make_opts(KVBLK_BACKEND_URING_CMD)), -EOPNOTSUPP);
	EXPECT_TRUE(says("is a partition")) << kvblk_last_error();
	if (!kmod_loaded())
		return;
	DevPtr a = open_dev(part, make_opts(KVBLK_BACKEND_AUTO));
	ASSERT_TRUE(a);
	EXPECT_EQ(get_info(a.get()).backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_NE(std::string(get_info(a.get()).backend_reason).find("is a partition of"), std::string::npos);
	/* kmod serves a partition when asked: offsets are partition-relative. */
	DevPtr d = open_dev(part, make_opts(KVBLK_BACKEND_KMOD));
	ASSERT_TRUE(d);
	const kvblk_dev_info i = get_info(d.get());
	const uint64_t len = std::min<uint64_t>(i.capacity, 256 * KiB);
	AlignedBuf got(len);
	kvblk_desc desc = plain_desc(i.capacity - len, len, got.data(), 5);
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(d.get(), &desc, 1, &r, nullptr), 1) << kvblk_last_error();
	Reference ref(part);
	EXPECT_TRUE(ref.same(got.data(), i.capacity - len, len));
}

} // namespace

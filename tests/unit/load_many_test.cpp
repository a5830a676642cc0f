// SPDX-License-Identifier: MIT
// kvblk_load_many() on a pattern store, for every backend: exact bytes, mixed batches,
// big batches on a small queue, and counters equal to what was done.
#include "test_util.hpp"

#include <algorithm>
#include <chrono>
#include <map>

using namespace kvblk_test;

namespace {

class LoadManyTest : public StoreTest, public ::testing::WithParamInterface<BackendCase> {
protected:
	DevPtr open(uint64_t max_cmd = 0)
	{
		const BackendCase &c = GetParam();
		return open_dev(path_, make_opts(c.backend, c.workers, c.queue_depth, max_cmd));
	}

	/* Bounds of inflight_peak for a batch with @commands commands. */
	void expect_inflight_peak(uint64_t peak, const kvblk_dev_info &info, uint64_t commands)
	{
		const BackendCase &c = GetParam();
		switch (c.backend) {
		case KVBLK_BACKEND_PSYNC:
			EXPECT_EQ(peak, 1u);
			break;
		case KVBLK_BACKEND_THREADPOOL:
			EXPECT_GE(peak, 1u);
			EXPECT_LE(peak, info.workers);
			break;
		default:
			/* The first ring alone puts queue_depth commands in flight. */
			EXPECT_GE(peak, std::min<uint64_t>(info.queue_depth, commands));
			EXPECT_LE(peak, uint64_t(info.queue_depth) * info.workers);
			if (info.workers == 1) {
				EXPECT_EQ(peak, std::min<uint64_t>(info.queue_depth, commands));
			}
			break;
		}
	}
};

TEST_P(LoadManyTest, whole_objects_exact_bytes_and_counters)
{
	DevPtr dev = open();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	ASSERT_EQ(info.backend, uint32_t(GetParam().backend));

	/* Descriptor i loads object (i * 7) % 16 into slot i: out of device order. */
	AlignedBuf dst(kObjects * kObjectBytes);
	std::vector<kvblk_desc> d;
	for (uint64_t i = 0; i < kObjects; i++)
		d.push_back(plain_desc(((i * 7) % kObjects) * kObjectBytes, kObjectBytes,
				       dst.data() + i * kObjectBytes, 1000 + i));
	std::vector<kvblk_result> r(d.size(), kvblk_result{12345, 7, 7, 7});
	kvblk_batch_info bi = new_batch_info();

	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), uint32_t(d.size()), r.data(), &bi), int(kObjects))
		<< kvblk_last_error();
	for (uint64_t i = 0; i < kObjects; i++) {
		SCOPED_TRACE(i);
		EXPECT_EQ(r[i].status, 0);
		EXPECT_EQ(r[i].reserved, 0u);
		EXPECT_EQ(r[i].bytes, kObjectBytes);
		EXPECT_EQ(r[i].tag, 1000 + i);
		const auto want = expected_bytes(d[i].offset, kObjectBytes, kObjectBytes);
		EXPECT_EQ(std::memcmp(dst.data() + i * kObjectBytes, want.data(), kObjectBytes), 0);
	}

	const uint64_t cmds = kObjects * commands_for(GetParam().backend, kObjectBytes, info.max_cmd_bytes);
	EXPECT_EQ(bi.backend, info.backend);
	EXPECT_EQ(bi.path, uint32_t(KVBLK_PATH_HOST));
	EXPECT_EQ(bi.bad_index, -1);
	EXPECT_EQ(bi.failed, 0u);
	EXPECT_EQ(bi.bytes, kObjects * kObjectBytes);
	EXPECT_EQ(bi.commands, cmds);
	EXPECT_GT(bi.elapsed_ns, 0u);

	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.batches, 1u);
	EXPECT_EQ(s.objects, kObjects);
	EXPECT_EQ(s.commands, cmds);
	EXPECT_EQ(s.bytes_read, kObjects * kObjectBytes);
	EXPECT_EQ(s.bytes_written, 0u);
	EXPECT_EQ(s.rejected_batches, 0u);
	EXPECT_EQ(s.errors_io + s.errors_eagain + s.errors_other, 0u);
	EXPECT_EQ(s.eagain_retries, 0u);
	EXPECT_EQ(s.short_resubmits, 0u);
	EXPECT_EQ(s.memlock_fallbacks, 0u);
	EXPECT_EQ(s.buffered_batches, 0u);
	EXPECT_EQ(s.cq_overflows, 0u);
	for (int b = 0; b < KVBLK_BACKEND_MAX; b++) {
		EXPECT_EQ(s.batches_by_backend[b], b == int(info.backend) ? 1u : 0u) << b;
	}
	EXPECT_EQ(hist_sum(s.batch_lat_hist), 1u);
	EXPECT_EQ(hist_sum(s.cmd_lat_hist), info.backend == KVBLK_BACKEND_URING ? cmds : 0u);
	expect_inflight_peak(s.inflight_peak, info, cmds);
}

TEST_P(LoadManyTest, commands_follow_max_cmd_bytes)
{
	DevPtr dev = open(64 * KiB);
	const kvblk_dev_info info = get_info(dev.get());
	ASSERT_EQ(info.max_cmd_bytes, 64 * KiB);
	const uint32_t lbs = info.logical_block_size;

	/* 64 KiB + 1 block -> 2 commands; 1 block -> 1; 1 MiB -> 16 (psync, uring). */
	const uint64_t lens[] = {64 * KiB + lbs, lbs, 1 * MiB, 192 * KiB};
	AlignedBuf dst(4 * MiB);
	std::vector<kvblk_desc> d;
	uint64_t mem = 0, want_cmds = 0, want_bytes = 0;
	for (size_t i = 0; i < std::size(lens); i++) {
		d.push_back(plain_desc(i * kObjectBytes + 8 * lbs, lens[i], dst.data() + mem, i));
		mem += (lens[i] + 4095) / 4096 * 4096;
		want_cmds += commands_for(GetParam().backend, lens[i], 64 * KiB);
		want_bytes += lens[i];
	}
	std::vector<kvblk_result> r(d.size());
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), uint32_t(d.size()), r.data(), &bi), int(d.size()));
	for (size_t i = 0; i < d.size(); i++) {
		const auto want = expected_bytes(d[i].offset, d[i].length, kObjectBytes);
		EXPECT_EQ(std::memcmp(reinterpret_cast<void *>(d[i].addr), want.data(), d[i].length), 0) << i;
	}
	EXPECT_EQ(bi.commands, want_cmds);
	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.commands, want_cmds);
	EXPECT_EQ(s.bytes_read, want_bytes);
}

TEST_P(LoadManyTest, mixed_registered_and_plain_destinations)
{
	DevPtr dev = open();
	const kvblk_dev_info info = get_info(dev.get());
	const uint32_t lbs = info.logical_block_size;
	const uint8_t sentinel = 0x5C;
	AlignedBuf reg(4 * MiB, sentinel), plain(4 * MiB, sentinel);
	uint32_t id = KVBLK_BUF_NONE;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0);
	ASSERT_NE(id, KVBLK_BUF_NONE);

	struct Piece {
		uint64_t dev_off, len;
		bool registered;
		uint64_t mem_off;
	};
	const Piece pieces[] = {
		{3 * kObjectBytes, kObjectBytes, true, 0},			/* a whole object */
		{5 * kObjectBytes + 7 * lbs, lbs, false, 0},			/* one block */
		{2 * kObjectBytes - 64 * KiB, 192 * KiB, true, 1 * MiB + 4096},	/* across two objects */
		{9 * kObjectBytes + 128 * KiB, 128 * KiB + lbs, false, 64 * KiB},	/* a command + 1 block */
		{15 * kObjectBytes, kObjectBytes, false, 1 * MiB},		/* the last object */
		{0, 3 * lbs, true, 2 * MiB + 8192},				/* the first blocks */
	};
	std::vector<kvblk_desc> d;
	uint64_t want_cmds = 0, want_bytes = 0;
	for (size_t i = 0; i < std::size(pieces); i++) {
		const Piece &p = pieces[i];
		d.push_back(p.registered ? buf_desc(p.dev_off, p.len, id, p.mem_off, 50 + i)
					 : plain_desc(p.dev_off, p.len, plain.data() + p.mem_off, 50 + i));
		want_cmds += commands_for(kvblk_backend(info.backend), p.len, info.max_cmd_bytes);
		want_bytes += p.len;
	}
	std::vector<kvblk_result> r(d.size());
	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), uint32_t(d.size()), r.data(), nullptr), int(d.size()))
		<< kvblk_last_error();

	/* Every piece exact, every other byte of both buffers untouched. */
	std::vector<bool> touched_reg(reg.size()), touched_plain(plain.size());
	for (size_t i = 0; i < d.size(); i++) {
		const Piece &p = pieces[i];
		SCOPED_TRACE(i);
		EXPECT_EQ(r[i].status, 0);
		EXPECT_EQ(r[i].bytes, p.len);
		EXPECT_EQ(r[i].tag, 50 + i);
		const uint8_t *mem = (p.registered ? reg.data() : plain.data()) + p.mem_off;
		const auto want = expected_bytes(p.dev_off, p.len, kObjectBytes);
		EXPECT_EQ(std::memcmp(mem, want.data(), p.len), 0);
		auto &t = p.registered ? touched_reg : touched_plain;
		std::fill(t.begin() + long(p.mem_off), t.begin() + long(p.mem_off + p.len), true);
	}
	for (uint64_t i = 0; i < reg.size(); i++)
		if (!touched_reg[i]) {
			ASSERT_EQ(reg.data()[i], sentinel) << "registered buffer byte " << i;
		}
	for (uint64_t i = 0; i < plain.size(); i++)
		if (!touched_plain[i]) {
			ASSERT_EQ(plain.data()[i], sentinel) << "plain buffer byte " << i;
		}

	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.objects, d.size());
	EXPECT_EQ(s.commands, want_cmds);
	EXPECT_EQ(s.bytes_read, want_bytes);
	EXPECT_EQ(s.memlock_fallbacks, 0u);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
}

TEST_P(LoadManyTest, counters_accumulate_and_reset)
{
	DevPtr dev = open();
	const kvblk_dev_info info = get_info(dev.get());
	AlignedBuf dst(2 * kObjectBytes);
	const kvblk_desc d[2] = {plain_desc(0, kObjectBytes, dst.data(), 1),
				 plain_desc(4 * kObjectBytes, kObjectBytes, dst.data() + kObjectBytes, 2)};
	kvblk_result r[2];
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(kvblk_load_many(dev.get(), d, 2, r, nullptr), 2);
	}
	kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.batches, 3u);
	EXPECT_EQ(s.objects, 6u);
	EXPECT_EQ(s.bytes_read, 6 * kObjectBytes);
	EXPECT_EQ(s.commands, 6 * commands_for(kvblk_backend(info.backend), kObjectBytes, info.max_cmd_bytes));
	EXPECT_EQ(s.batches_by_backend[info.backend], 3u);
	EXPECT_EQ(hist_sum(s.batch_lat_hist), 3u);

	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
	s = get_stats(dev.get());
	EXPECT_EQ(s.batches, 0u);
	EXPECT_EQ(s.objects, 0u);
	EXPECT_EQ(s.commands, 0u);
	EXPECT_EQ(s.bytes_read, 0u);
	EXPECT_EQ(s.inflight_peak, 0u);
	EXPECT_EQ(s.batches_by_backend[info.backend], 0u);
	EXPECT_EQ(hist_sum(s.batch_lat_hist), 0u);
	EXPECT_EQ(hist_sum(s.cmd_lat_hist), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, LoadManyTest, ::testing::ValuesIn(kAllBackends), case_name);

/*
 * 4096 descriptors of 8 KiB, 4 KiB commands: 8192 commands through a 64-entry queue
 * (uring1: one ring of 64; uring4: four rings of 16), and the baselines on the same batch.
 */
class BigBatchTest : public ::testing::TestWithParam<BackendCase> {
protected:
	static constexpr uint64_t kObjs = 4096;
	static constexpr uint64_t kObjBytes = 8 * KiB;
};

TEST_P(BigBatchTest, descriptors_4096_on_a_64_entry_queue)
{
	TempDir dir;
	const std::string path = dir.file("store");
	write_pattern_file(path, kObjs, kObjBytes);
	const BackendCase &c = GetParam();
	DevPtr dev = open_dev(path, make_opts(c.backend, c.workers, c.queue_depth, 4096));
	const kvblk_dev_info info = get_info(dev.get());
	if (c.backend == KVBLK_BACKEND_URING) {
		ASSERT_EQ(uint64_t(info.queue_depth) * info.workers, 64u);
	}

	/* Reverse order, so completions and destinations interleave. */
	AlignedBuf dst(kObjs * kObjBytes);
	std::vector<kvblk_desc> d;
	for (uint64_t i = 0; i < kObjs; i++)
		d.push_back(plain_desc((kObjs - 1 - i) * kObjBytes, kObjBytes, dst.data() + i * kObjBytes, i));
	std::vector<kvblk_result> r(kObjs, kvblk_result{99, 0, 0, 0});
	const auto t0 = std::chrono::steady_clock::now();
	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), uint32_t(kObjs), r.data(), nullptr), int(kObjs))
		<< kvblk_last_error();
	const auto call_us = uint64_t(
		std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count());
	for (uint64_t i = 0; i < kObjs; i++) {
		ASSERT_EQ(r[i].status, 0) << i;
		ASSERT_EQ(r[i].bytes, kObjBytes) << i;
		ASSERT_EQ(r[i].tag, i);
	}
	const auto want = expected_bytes(0, kObjs * kObjBytes, kObjBytes);
	for (uint64_t i = 0; i < kObjs; i++) {
		ASSERT_EQ(std::memcmp(dst.data() + i * kObjBytes, want.data() + (kObjs - 1 - i) * kObjBytes, kObjBytes), 0)
			<< i;
	}

	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.objects, kObjs);
	EXPECT_EQ(s.commands, kObjs * commands_for(c.backend, kObjBytes, 4096));
	EXPECT_EQ(s.bytes_read, kObjs * kObjBytes);
	if (c.backend == KVBLK_BACKEND_URING) {
		EXPECT_LE(s.inflight_peak, 64u);
		EXPECT_GE(s.inflight_peak, info.queue_depth);
		EXPECT_EQ(hist_sum(s.cmd_lat_hist), s.commands);
		/*
		 * No command took longer than the whole call: none in a bucket above the call's
		 * ([2^i, 2^(i+1)) us, < 2 us in 0). A command stamped with a stale or unset submission
		 * time (the ring's per-burst clock, Ring::issue_ns) lands far above.
		 */
		const unsigned call_bucket = call_us < 2 ? 0 : std::min(63u - unsigned(__builtin_clzll(call_us)),
								       unsigned(KVBLK_LAT_BUCKETS - 1));
		for (unsigned i = call_bucket + 1; i < KVBLK_LAT_BUCKETS; i++)
			EXPECT_EQ(s.cmd_lat_hist[i], 0u) << "bucket " << i << ", the call took " << call_us << " us";
	}
}

INSTANTIATE_TEST_SUITE_P(Backends, BigBatchTest, ::testing::ValuesIn(kAllBackends), case_name);

} // namespace

// SPDX-License-Identifier: MIT
// The asynchronous API together with several targets and unaligned loads: a batch across
// many targets through kvblk_submit() + kvblk_reap(); an unaligned batch whose bounced edges
// are in the caller's destinations and results before its completion entries are visible;
// and the pins of a submitted batch's targets, held until its completion is reaped.
#include "test_util.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <poll.h>
#include <sys/resource.h>

using namespace kvblk_test;

namespace {

kvblk_submit_opts submit_opts(uint32_t flags, uint64_t user_data, kvblk_result *results)
{
	kvblk_submit_opts o;
	kvblk_submit_opts_init(&o, sizeof(o));
	o.flags = flags;
	o.user_data = user_data;
	o.results = results;
	return o;
}

/* Whether @fd polls readable within @ms. */
bool readable_within(int fd, int ms)
{
	pollfd p{fd, POLLIN, 0};
	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/*
 * Reap until @batches batch entries arrived (10 s at most), calling @on_entry for each entry
 * the moment it is reaped. Returns every entry in order.
 */
template <class F> std::vector<kvblk_cqe> reap_batches(kvblk_dev *dev, uint32_t batches, F on_entry)
{
	std::vector<kvblk_cqe> all;
	uint32_t seen = 0;
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (seen < batches && std::chrono::steady_clock::now() < end) {
		kvblk_cqe c[8];
		const int k = kvblk_reap(dev, c, 8, 1, 100'000'000);
		EXPECT_GE(k, 0) << kvblk_last_error();
		for (int i = 0; i < k; i++) {
			on_entry(c[i]);
			all.push_back(c[i]);
			seen += (c[i].flags & KVBLK_CQE_BATCH) != 0;
		}
	}
	EXPECT_EQ(seen, batches);
	return all;
}

class AsyncTargetsTest : public ::testing::TestWithParam<BackendCase> {};

/* 200 chunk files, four batches of 50 outstanding together, reaped: every byte exact. */
TEST_P(AsyncTargetsTest, batches_across_chunk_files_submit_and_reap)
{
	constexpr uint32_t kFiles = 200, kBatches = 4, kPer = kFiles / kBatches;
	constexpr uint64_t kChunk = 16 * KiB;
	rlimit rl{};
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < kFiles + 100)
		GTEST_SKIP() << "RLIMIT_NOFILE " << rl.rlim_cur << " is too low for " << kFiles << " targets";
	TempDir dir;
	write_chunk(dir.file("base"), 999, kChunk);
	for (uint32_t i = 0; i < kFiles; i++)
		write_chunk(dir.file("chunk" + std::to_string(i)), i, kChunk);
	const BackendCase &c = GetParam();
	DevPtr dev = open_dev(dir.file("base"), make_opts(c.backend, c.workers, c.queue_depth));
	ASSERT_TRUE(dev);
	std::vector<uint32_t> ids(kFiles);
	for (uint32_t i = 0; i < kFiles; i++)
		ASSERT_EQ(kvblk_add_target(dev.get(), dir.file("chunk" + std::to_string(i)).c_str(), 0, &ids[i]), 0)
			<< i << ": " << kvblk_last_error();

	/* Batch b loads files b, b + 4, b + 8, ...: every batch names targets of the whole range. */
	AlignedBuf dst(kFiles * kChunk);
	std::vector<kvblk_result> r(kFiles);
	std::vector<uint64_t> tickets(kBatches);
	for (uint32_t b = 0; b < kBatches; b++) {
		std::vector<kvblk_desc> d;
		for (uint32_t k = 0; k < kPer; k++) {
			const uint32_t f = b + k * kBatches;
			d.push_back(tdesc(ids[f], 0, kChunk, dst.data() + f * kChunk, 1000 + f));
		}
		kvblk_submit_opts o = submit_opts(0, 77 + b, r.data() + b * kPer);
		ASSERT_EQ(kvblk_submit(dev.get(), d.data(), kPer, &o, &tickets[b]), 0) << kvblk_last_error();
		EXPECT_EQ(o.bad_index, -1);
	}
	const std::vector<kvblk_cqe> es = reap_batches(dev.get(), kBatches, [](const kvblk_cqe &) {});
	ASSERT_EQ(es.size(), size_t(kBatches));
	for (const kvblk_cqe &e : es) {
		const auto it = std::find(tickets.begin(), tickets.end(), e.ticket);
		ASSERT_NE(it, tickets.end());
		const uint32_t b = uint32_t(it - tickets.begin());
		EXPECT_EQ(e.user_data, 77u + b);
		EXPECT_EQ(e.status, 0);
		EXPECT_EQ(e.failed, 0u);
		EXPECT_EQ(e.index, kPer);
		EXPECT_EQ(e.bytes, kPer * kChunk);
		EXPECT_EQ(e.backend, uint32_t(c.backend));
	}
	for (uint32_t b = 0; b < kBatches; b++)
		for (uint32_t k = 0; k < kPer; k++) {
			const uint32_t f = b + k * kBatches;
			const kvblk_result &x = r[b * kPer + k];
			ASSERT_EQ(x.status, 0) << "file " << f;
			ASSERT_EQ(x.bytes, kChunk);
			ASSERT_EQ(x.tag, 1000u + f);
			ASSERT_EQ(std::memcmp(dst.data() + f * kChunk, expected_bytes(f * kChunk, kChunk, kChunk).data(),
					      kChunk),
				  0)
				<< "chunk file " << f;
		}
	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.batches, kBatches);
	EXPECT_EQ(s.objects, kFiles);
	EXPECT_EQ(s.bytes_read, kFiles * kChunk);
	/* Every pin went with its reaped batch. */
	for (uint32_t i = 0; i < kFiles; i++)
		ASSERT_EQ(kvblk_remove_target(dev.get(), ids[i]), 0) << i << ": " << kvblk_last_error();
}

/*
 * Unaligned objects through kvblk_submit() with per-object entries: when an entry is reaped,
 * its object's result and every byte of its destination are final (the bounced edges were
 * copied before the entry became visible); canaries around each destination stay intact.
 */
TEST_P(AsyncTargetsTest, unaligned_batch_through_submit_and_reap)
{
	constexpr uint8_t kCanary = 0xC7;
	constexpr uint64_t kSize = 5 * 4096 + 1234; /* its last block is partial */
	constexpr uint64_t kGuard = 8 * KiB;
	TempDir dir;
	const std::string path = dir.file("tail");
	std::vector<uint8_t> content = expected_bytes(0, kSize + 8, 1ull << 40);
	content.resize(kSize);
	{
		int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(pwrite(fd, content.data(), kSize, 0), ssize_t(kSize));
		close(fd);
	}
	const BackendCase &c = GetParam();
	DevPtr dev = open_dev(path, make_opts(c.backend, c.workers, c.queue_depth));
	ASSERT_TRUE(dev);
	const uint64_t B = get_info(dev.get()).logical_block_size;
	ASSERT_NE(kSize % B, 0u);
	const uint64_t tail0 = kSize / B * B;

	struct Obj {
		uint64_t offset, length, shift;
	};
	const std::vector<Obj> objs = {
		{B + 100, 3 * B, 100},		     /* head and tail, middle in place */
		{2 * B - 10, 20, 1},		     /* across one boundary, misaligned destination */
		{tail0 - B + 7, kSize - (tail0 - B + 7), 7}, /* to the last byte of the file */
		{B, 2 * B, 0},			     /* aligned: one part, in place */
		{tail0 + 3, kSize - tail0 - 5, 4},	     /* inside the partial last block */
	};
	/* Slots aligned to everything, so that each shift alone decides the destination's alignment. */
	const uint64_t slot = (2 * kGuard + kSize + 2 * B + 4095) / 4096 * 4096;
	AlignedBuf buf(slot * objs.size(), kCanary);
	std::vector<kvblk_desc> d;
	uint64_t want = 0;
	for (size_t k = 0; k < objs.size(); k++) {
		d.push_back(plain_desc(objs[k].offset, objs[k].length, buf.data() + k * slot + kGuard + objs[k].shift,
				       500 + k));
		d.back().flags = KVBLK_DESC_UNALIGNED;
		want += objs[k].length;
	}
	const uint32_t n = uint32_t(d.size());
	/* Set by the library, never 0xEE.. once an entry is out: proves the order of the two. */
	std::vector<kvblk_result> r(n, kvblk_result{-1, 0, 0xEEEEEEEEEEEEEEEEull, 0});
	kvblk_submit_opts o = submit_opts(KVBLK_SUBMIT_PER_OBJECT, 9, r.data());
	uint64_t ticket = 0;
	ASSERT_EQ(kvblk_submit(dev.get(), d.data(), n, &o, &ticket), 0) << kvblk_last_error();

	std::vector<int> entries(n, 0);
	auto check_object = [&](uint32_t k) {
		SCOPED_TRACE("object " + std::to_string(k));
		const uint64_t at = k * slot + kGuard + objs[k].shift;
		EXPECT_EQ(r[k].status, 0);
		EXPECT_EQ(r[k].bytes, objs[k].length);
		EXPECT_EQ(r[k].tag, 500u + k);
		EXPECT_EQ(std::memcmp(buf.data() + at, content.data() + objs[k].offset, objs[k].length), 0)
			<< "the edges were not in the destination when the entry was reaped";
		EXPECT_TRUE(buf.all(k * slot, at - k * slot, kCanary)) << "written before the destination";
		EXPECT_TRUE(buf.all(at + objs[k].length, (k + 1) * slot - at - objs[k].length, kCanary))
			<< "written after the destination";
	};
	const std::vector<kvblk_cqe> es = reap_batches(dev.get(), 1, [&](const kvblk_cqe &e) {
		EXPECT_EQ(e.ticket, ticket);
		if (e.flags & KVBLK_CQE_OBJECT) {
			ASSERT_LT(e.index, n) << "an entry for a part, not an object";
			entries[e.index]++;
			EXPECT_EQ(e.status, 0);
			EXPECT_EQ(e.bytes, objs[e.index].length);
			EXPECT_EQ(e.tag, 500u + e.index);
			check_object(e.index);
		} else {
			for (uint32_t k = 0; k < n; k++)
				EXPECT_EQ(entries[k], 1) << "object " << k << " before the batch entry";
			EXPECT_EQ(e.status, 0);
			EXPECT_EQ(e.failed, 0u);
			EXPECT_EQ(e.index, n);
			EXPECT_EQ(e.bytes, want);
		}
	});
	EXPECT_EQ(es.size(), size_t(n) + 1);
	for (uint32_t k = 0; k < n; k++)
		check_object(k);
	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.objects, n);
	EXPECT_EQ(s.bytes_read, want);
	EXPECT_EQ(s.unaligned_objects, n - 1) << "every object but the aligned one bounced an edge";
	EXPECT_GT(s.unaligned_extra_bytes, 0u);
}

/*
 * A submitted batch pins its targets until its completion is reaped: kvblk_remove_target()
 * is -EBUSY while it runs and while its completion waits, 0 once it is reaped; a target it
 * does not name is removable throughout.
 */
TEST_P(AsyncTargetsTest, remove_target_is_ebusy_until_the_batch_is_reaped)
{
	constexpr uint64_t kChunk = 8 * KiB;
	TempDir dir;
	write_chunk(dir.file("base"), 1, kChunk);
	write_chunk(dir.file("t"), 2, kChunk);
	write_chunk(dir.file("other"), 3, kChunk);
	const BackendCase &c = GetParam();
	DevPtr dev = open_dev(dir.file("base"), make_opts(c.backend, c.workers, c.queue_depth));
	ASSERT_TRUE(dev);
	uint32_t id = 0, other = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), dir.file("t").c_str(), 0, &id), 0);
	ASSERT_EQ(kvblk_add_target(dev.get(), dir.file("other").c_str(), 0, &other), 0);

	std::atomic<int> during{1};
	kvblk::testing::Seams s;
	s.on_complete = [&](const kvblk::testing::CommandInfo &, int64_t res) {
		int expected = 1;
		const int ret = kvblk_remove_target(dev.get(), id); /* an I/O thread, mid-batch */
		during.compare_exchange_strong(expected, ret);
		return res;
	};
	AlignedBuf dst(kChunk);
	const kvblk_desc d = tdesc(id, 0, kChunk, dst.data(), 1);
	kvblk_result r{};
	kvblk_submit_opts o = submit_opts(0, 0, &r);
	uint64_t ticket = 0;
	{
		SeamGuard g(s);
		ASSERT_EQ(kvblk_submit(dev.get(), &d, 1, &o, &ticket), 0) << kvblk_last_error();
		ASSERT_TRUE(readable_within(kvblk_event_fd(dev.get()), 10'000)) << "the batch did not complete";
		/* Its completion is queued; a call that takes the scheduler's lock also orders the
		 * I/O thread's last use of the seams before they go (ThreadSanitizer does not see the
		 * eventfd as synchronisation). */
		EXPECT_EQ(kvblk_cancel(dev.get(), ticket), -ENOENT);
	}
	EXPECT_EQ(during.load(), -EBUSY) << "removed while its command was in flight";
	EXPECT_EQ(r.status, 0);
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(2 * kChunk, kChunk, kChunk).data(), kChunk), 0);
	EXPECT_EQ(kvblk_remove_target(dev.get(), id), -EBUSY) << "completed, not reaped: still pinned";
	EXPECT_EQ(kvblk_remove_target(dev.get(), other), 0) << "a target the batch does not name";

	kvblk_cqe e{};
	ASSERT_EQ(kvblk_reap(dev.get(), &e, 1, 1, 0), 1);
	EXPECT_EQ(e.ticket, ticket);
	EXPECT_EQ(kvblk_remove_target(dev.get(), id), 0) << kvblk_last_error();
	EXPECT_EQ(get_info(dev.get()).targets, 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, AsyncTargetsTest, ::testing::ValuesIn(kAllBackends), case_name);

} // namespace

// SPDX-License-Identifier: MIT
// The asynchronous API: kvblk_submit(), kvblk_reap(), kvblk_wait(), kvblk_cancel(),
// kvblk_event_fd(): every error path, priority order, cancellation, per-object entries,
// eventfd readability, max_batches, close with batches outstanding, and the stress test
// (8 submitters, 2 reapers, 100,000 batches on one handle).
#include "gate.hpp"
#include "test_util.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <poll.h>
#include <random>
#include <set>
#include <thread>

using namespace kvblk_test;
using kvblk::testing::CommandInfo;
using kvblk::testing::Seams;

namespace {

constexpr uint64_t kObj = 64 * KiB; /* objects of these tests: one command each */

bool readable(int fd)
{
	pollfd p{fd, POLLIN, 0};
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

kvblk_submit_opts submit_opts(uint32_t flags = 0, uint64_t user_data = 0, kvblk_result *results = nullptr)
{
	kvblk_submit_opts o;
	kvblk_submit_opts_init(&o, sizeof(o));
	o.flags = flags;
	o.user_data = user_data;
	o.results = results;
	return o;
}

class AsyncTest : public StoreTest {
protected:
	DevPtr open(kvblk_backend b, uint32_t max_batches = 0, uint32_t workers = 0, uint32_t qd = 0)
	{
		kvblk_open_opts o = make_opts(b, workers, qd);
		o.max_batches = max_batches;
		return open_dev(path_, o);
	}

	/* Descriptors of @n consecutive kObj objects from file offset @first into @mem. */
	static std::vector<kvblk_desc> descs_at(uint64_t first, uint32_t n, const AlignedBuf &mem, uint64_t tag0 = 0)
	{
		return descs_at(first, n, mem.data(), tag0);
	}
	static std::vector<kvblk_desc> descs_at(uint64_t first, uint32_t n, uint8_t *mem, uint64_t tag0 = 0)
	{
		std::vector<kvblk_desc> d;
		for (uint32_t i = 0; i < n; i++)
			d.push_back(plain_desc(first + i * kObj, kObj, mem + i * kObj, tag0 + i));
		return d;
	}

	/* [off, off+len) of the file equals @mem. */
	static bool exact(const uint8_t *mem, uint64_t off, uint64_t len)
	{
		return std::memcmp(mem, expected_bytes(off, len, kObjectBytes).data(), len) == 0;
	}

	/* Submit @d; returns the ticket (fails the test on error). */
	static uint64_t submit(kvblk_dev *dev, const std::vector<kvblk_desc> &d, kvblk_submit_opts o)
	{
		uint64_t t = 0;
		EXPECT_EQ(kvblk_submit(dev, d.data(), uint32_t(d.size()), &o, &t), 0) << kvblk_last_error();
		return t;
	}

	/* Reap until @batches batch entries arrived (10 s at most); every entry in order. */
	static std::vector<kvblk_cqe> reap_batches(kvblk_dev *dev, uint32_t batches)
	{
		std::vector<kvblk_cqe> all;
		uint32_t seen = 0;
		const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
		while (seen < batches && std::chrono::steady_clock::now() < end) {
			kvblk_cqe c[16];
			const int k = kvblk_reap(dev, c, 16, 1, 100'000'000);
			EXPECT_GE(k, 0);
			for (int i = 0; i < k; i++) {
				all.push_back(c[i]);
				seen += (c[i].flags & KVBLK_CQE_BATCH) != 0;
			}
		}
		EXPECT_EQ(seen, batches);
		return all;
	}
};

TEST_F(AsyncTest, submit_opts_init_sets_size_and_defaults)
{
	kvblk_submit_opts o;
	std::memset(&o, 0xFF, sizeof(o));
	kvblk_submit_opts_init(&o, sizeof(o));
	EXPECT_EQ(o.opts_size, sizeof(o));
	EXPECT_EQ(o.flags, 0u);
	EXPECT_EQ(o.bad_index, -1);
	EXPECT_EQ(o.user_data, 0u);
	EXPECT_EQ(o.results, nullptr);
	kvblk_submit_opts_init(nullptr, sizeof(o)); /* a no-op */
}

TEST_F(AsyncTest, submit_rejects_bad_arguments_and_queues_nothing)
{
	DevPtr dev = open(KVBLK_BACKEND_PSYNC);
	AlignedBuf mem(4 * kObj);
	auto d = descs_at(0, 4, mem, 100);
	uint64_t t = 0;
	kvblk_submit_opts o = submit_opts();
	EXPECT_EQ(kvblk_submit(nullptr, d.data(), 4, &o, &t), -EINVAL);
	EXPECT_EQ(kvblk_submit(dev.get(), nullptr, 4, &o, &t), -EINVAL);
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 4, &o, nullptr), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("NULL ticket"), std::string::npos) << kvblk_last_error();
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 0, &o, &t), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("n is 0"), std::string::npos);

	o.flags = 1u << 7;
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 4, &o, &t), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("unknown flags 0x80"), std::string::npos) << kvblk_last_error();

	o = submit_opts();
	o.opts_size = sizeof(o) - 8;
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 4, &o, &t), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("opts_size"), std::string::npos);

	/* A newer caller's struct: fine while the tail it adds is zero. */
	struct {
		kvblk_submit_opts o;
		uint64_t future;
	} longer;
	kvblk_submit_opts_init(&longer.o, sizeof(longer));
	ASSERT_EQ(kvblk_submit(dev.get(), d.data(), 4, &longer.o, &t), 0);
	ASSERT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), 4);
	std::memset(mem.data(), 0xA5, mem.size());
	longer.future = 1;
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 4, &longer.o, &t), -EINVAL);

	/* A bad descriptor: its index and reason, the others -ECANCELED, nothing read. */
	std::vector<kvblk_result> r(4);
	o = submit_opts(0, 7, r.data());
	d[2].offset += 1;
	t = 0;
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 4, &o, &t), -EINVAL);
	EXPECT_EQ(t, 0u);
	EXPECT_EQ(o.bad_index, 2);
	EXPECT_NE(std::string(kvblk_last_error()).find("descriptor 2"), std::string::npos) << kvblk_last_error();
	for (uint32_t i = 0; i < 4; i++) {
		EXPECT_EQ(r[i].status, i == 2 ? -EINVAL : -ECANCELED) << i;
		EXPECT_EQ(r[i].tag, 100u + i);
	}
	d[2].offset -= 1;
	d[3].offset = kObjects * kObjectBytes; /* past the end */
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 4, &o, &t), -ERANGE);
	EXPECT_EQ(o.bad_index, 3);
	d[3].offset = 3 * kObj;
	d[1].buf_id = 5; /* not registered */
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 4, &o, &t), -ENOENT);
	EXPECT_EQ(o.bad_index, 1);
	d[1].buf_id = KVBLK_BUF_NONE;

	/* Stores on a read-only device: -EBADF for the whole call. */
	o = submit_opts(KVBLK_SUBMIT_STORE, 0, r.data());
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 4, &o, &t), -EBADF);
	EXPECT_EQ(o.bad_index, -1);
	EXPECT_EQ(r[0].status, -ECANCELED);

	kvblk_cqe c[4];
	EXPECT_EQ(kvblk_reap(dev.get(), c, 4, 0, 0), 0) << "nothing was queued";
	EXPECT_TRUE(mem.all(kObj, 3 * kObj, 0xA5)) << "nothing was read";
	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.rejected_batches, 4u);
	EXPECT_EQ(s.batches, 1u);
}

TEST_F(AsyncTest, submit_more_than_max_descs_is_e2big)
{
	kvblk_open_opts oo = make_opts(KVBLK_BACKEND_PSYNC);
	oo.max_descs = 2;
	DevPtr dev = open_dev(path_, oo);
	AlignedBuf mem(4 * kObj);
	auto d = descs_at(0, 3, mem);
	kvblk_submit_opts o = submit_opts();
	uint64_t t;
	EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 3, &o, &t), -E2BIG);
	EXPECT_EQ(o.bad_index, -1);
}

TEST_F(AsyncTest, reap_rejects_bad_arguments_and_times_out)
{
	DevPtr dev = open(KVBLK_BACKEND_PSYNC);
	kvblk_cqe c[4];
	EXPECT_EQ(kvblk_reap(nullptr, c, 4, 0, 0), -EINVAL);
	EXPECT_EQ(kvblk_reap(dev.get(), nullptr, 4, 0, 0), -EINVAL);
	EXPECT_EQ(kvblk_reap(dev.get(), c, 0, 0, 0), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("max is 0"), std::string::npos);
	EXPECT_EQ(kvblk_reap(dev.get(), c, 4, 5, 0), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("min_complete 5 is larger than max 4"), std::string::npos);
	EXPECT_EQ(kvblk_reap(dev.get(), c, 4, 0, -1), 0) << "min_complete 0 never waits";
	EXPECT_EQ(kvblk_reap(dev.get(), c, 4, 1, 0), 0) << "timeout 0 never waits";
	const auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(kvblk_reap(dev.get(), c, 4, 1, 20'000'000), 0);
	EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(20));
}

TEST_F(AsyncTest, wait_and_cancel_error_paths)
{
	DevPtr dev = open(KVBLK_BACKEND_PSYNC);
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_wait(nullptr, 1, 0, nullptr), -EINVAL);
	bi.info_size = KVBLK_BATCH_INFO_SIZE_V0_2 - 8;
	EXPECT_EQ(kvblk_wait(dev.get(), 1, 0, &bi), -EINVAL);
	EXPECT_EQ(kvblk_wait(dev.get(), 1, 0, nullptr), -ENOENT) << "never submitted";
	EXPECT_EQ(kvblk_wait(dev.get(), 0, -1, nullptr), -ENOENT);
	EXPECT_EQ(kvblk_cancel(nullptr, 1), -EINVAL);
	EXPECT_EQ(kvblk_cancel(dev.get(), 12345), -ENOENT);
	EXPECT_EQ(kvblk_event_fd(nullptr), -EINVAL);

	AlignedBuf mem(2 * kObj);
	const uint64_t t = submit(dev.get(), descs_at(0, 2, mem), submit_opts());
	EXPECT_NE(t, 0u);
	/* Reaped: no longer outstanding. */
	kvblk_cqe c;
	ASSERT_EQ(kvblk_reap(dev.get(), &c, 1, 1, -1), 1);
	EXPECT_EQ(c.ticket, t);
	EXPECT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), -ENOENT);
	EXPECT_NE(std::string(kvblk_last_error()).find("not outstanding"), std::string::npos);
	EXPECT_EQ(kvblk_cancel(dev.get(), t), -ENOENT);

	/* Completed but not taken: cancel is too late (-ENOENT), wait takes it. */
	const uint64_t t2 = submit(dev.get(), descs_at(0, 2, mem), submit_opts());
	EXPECT_NE(t2, t) << "tickets are never reused";
	while (!readable(kvblk_event_fd(dev.get())))
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	EXPECT_EQ(kvblk_cancel(dev.get(), t2), -ENOENT);
	bi = new_batch_info();
	EXPECT_EQ(kvblk_wait(dev.get(), t2, 0, &bi), 2);
	EXPECT_EQ(bi.ticket, t2);
	EXPECT_EQ(bi.bytes, 2 * kObj);
	EXPECT_EQ(bi.failed, 0u);
	EXPECT_EQ(bi.bad_index, -1);
	EXPECT_EQ(bi.backend, uint32_t(KVBLK_BACKEND_PSYNC));
	EXPECT_FALSE(readable(kvblk_event_fd(dev.get())));
}

TEST_F(AsyncTest, wait_times_out_and_the_batch_stays_outstanding)
{
	Gate gate;
	SeamGuard sg(gate_seams(gate, 0));
	DevPtr dev = open(KVBLK_BACKEND_PSYNC);
	GateOpener opener{gate};
	AlignedBuf mem(2 * kObj);
	std::vector<kvblk_result> r(2);
	const uint64_t t = submit(dev.get(), descs_at(0, 2, mem), submit_opts(0, 9, r.data()));
	ASSERT_TRUE(gate.wait_arrived());
	EXPECT_EQ(kvblk_wait(dev.get(), t, 0, nullptr), -ETIME);
	EXPECT_EQ(kvblk_wait(dev.get(), t, 5'000'000, nullptr), -ETIME);
	EXPECT_NE(std::string(kvblk_last_error()).find("did not complete"), std::string::npos);
	gate.open();
	/* The timed-out wait gave the batch back: a reaper gets it. */
	kvblk_cqe c;
	ASSERT_EQ(kvblk_reap(dev.get(), &c, 1, 1, 10'000'000'000), 1);
	EXPECT_EQ(c.ticket, t);
	EXPECT_EQ(c.user_data, 9u);
	EXPECT_EQ(c.flags, KVBLK_CQE_BATCH);
	EXPECT_EQ(c.bytes, 2 * kObj);
	EXPECT_TRUE(exact(mem.data(), 0, 2 * kObj));
}

TEST_F(AsyncTest, batch_entry_fields_and_results_array)
{
	DevPtr dev = open(KVBLK_BACKEND_URING);
	AlignedBuf mem(4 * kObj);
	std::vector<kvblk_result> r(4, kvblk_result{-1, 0, 0, 0});
	auto d = descs_at(kObj, 4, mem, 50);
	d[3].offset = kObjects * kObjectBytes - kObj; /* the last 64 KiB of the file */
	const uint64_t t = submit(dev.get(), d, submit_opts(0, 0xABCDEF, r.data()));
	kvblk_cqe c;
	ASSERT_EQ(kvblk_reap(dev.get(), &c, 1, 1, -1), 1);
	EXPECT_EQ(c.ticket, t);
	EXPECT_EQ(c.user_data, 0xABCDEFu);
	EXPECT_EQ(c.status, 0);
	EXPECT_EQ(c.flags, KVBLK_CQE_BATCH);
	EXPECT_EQ(c.failed, 0u);
	EXPECT_EQ(c.index, 4u);
	EXPECT_EQ(c.bytes, 4 * kObj);
	EXPECT_EQ(c.tag, 0u);
	EXPECT_EQ(c.path, uint32_t(KVBLK_PATH_HOST));
	EXPECT_EQ(c.backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_GT(c.elapsed_ns, 0u);
	for (uint32_t i = 0; i < 4; i++) {
		EXPECT_EQ(r[i].status, 0);
		EXPECT_EQ(r[i].bytes, kObj);
		EXPECT_EQ(r[i].tag, 50u + i);
		EXPECT_TRUE(exact(mem.data() + i * kObj, d[i].offset, kObj)) << i;
	}
	/* Without a results array the batch still reports through its entry. */
	const uint64_t t2 = submit(dev.get(), descs_at(0, 2, mem), submit_opts());
	EXPECT_GT(t2, t);
	EXPECT_EQ(kvblk_wait(dev.get(), t2, -1, nullptr), 2);
	EXPECT_TRUE(exact(mem.data(), 0, 2 * kObj));
}

TEST_F(AsyncTest, failed_objects_make_the_batch_status)
{
	Seams s;
	s.on_complete = [](const CommandInfo &c, int64_t res) { return c.obj_offset == 2 * kObj ? -EIO : res; };
	SeamGuard sg(s);
	DevPtr dev = open(KVBLK_BACKEND_URING);
	AlignedBuf mem(4 * kObj);
	std::vector<kvblk_result> r(4);
	const uint64_t t = submit(dev.get(), descs_at(0, 4, mem), submit_opts(0, 0, r.data()));
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_wait(dev.get(), t, -1, &bi), 3);
	EXPECT_EQ(bi.failed, 1u);
	EXPECT_EQ(bi.bytes, 3 * kObj);
	EXPECT_EQ(r[2].status, -EIO);
	EXPECT_EQ(r[2].bytes, 0u);
	EXPECT_NE(std::string(kvblk_last_error()).find("kvblk_wait: descriptor 2"), std::string::npos)
		<< kvblk_last_error();
	const uint64_t t2 = submit(dev.get(), descs_at(0, 4, mem), submit_opts());
	kvblk_cqe c;
	ASSERT_EQ(kvblk_reap(dev.get(), &c, 1, 1, -1), 1);
	EXPECT_EQ(c.ticket, t2);
	EXPECT_EQ(c.status, -EIO);
	EXPECT_EQ(c.failed, 1u);
	EXPECT_EQ(c.bytes, 3 * kObj);
}

TEST_F(AsyncTest, per_object_entries_come_before_the_batch_entry)
{
	for (kvblk_backend b : {KVBLK_BACKEND_PSYNC, KVBLK_BACKEND_THREADPOOL, KVBLK_BACKEND_URING}) {
		SCOPED_TRACE(kvblk_backend_name(b));
		DevPtr dev = open(b);
		AlignedBuf mem(8 * kObj);
		auto d = descs_at(3 * kObj, 8, mem, 1000);
		const uint64_t t = submit(dev.get(), d, submit_opts(KVBLK_SUBMIT_PER_OBJECT, 77));
		const std::vector<kvblk_cqe> all = reap_batches(dev.get(), 1);
		ASSERT_EQ(all.size(), 9u);
		std::vector<int> seen(8, 0);
		for (size_t k = 0; k < 8; k++) {
			const kvblk_cqe &c = all[k];
			EXPECT_EQ(c.ticket, t);
			EXPECT_EQ(c.user_data, 77u);
			EXPECT_EQ(c.flags, KVBLK_CQE_OBJECT);
			ASSERT_LT(c.index, 8u);
			seen[c.index]++;
			EXPECT_EQ(c.tag, 1000u + c.index);
			EXPECT_EQ(c.bytes, kObj);
			EXPECT_EQ(c.status, 0);
			EXPECT_EQ(c.failed, 0u);
			EXPECT_EQ(c.elapsed_ns, 0u);
		}
		EXPECT_EQ(seen, std::vector<int>(8, 1)) << "each object exactly once";
		EXPECT_EQ(all[8].flags, KVBLK_CQE_BATCH);
		EXPECT_EQ(all[8].index, 8u);
		EXPECT_EQ(all[8].bytes, 8 * kObj);
		EXPECT_TRUE(exact(mem.data(), 3 * kObj, 8 * kObj));
		if (b == KVBLK_BACKEND_PSYNC) {
			/* psync finishes objects in order: so do their entries. */
			for (uint32_t k = 0; k < 8; k++)
				EXPECT_EQ(all[k].index, k);
		}
	}
}

TEST_F(AsyncTest, wait_takes_every_entry_of_its_batch)
{
	DevPtr dev = open(KVBLK_BACKEND_URING);
	const int efd = kvblk_event_fd(dev.get());
	AlignedBuf mem(4 * kObj), other(kObj);
	const uint64_t t = submit(dev.get(), descs_at(0, 4, mem), submit_opts(KVBLK_SUBMIT_PER_OBJECT));
	const uint64_t t2 = submit(dev.get(), descs_at(0, 1, other), submit_opts());
	EXPECT_EQ(kvblk_wait(dev.get(), t2, -1, nullptr), 1);
	EXPECT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), 4);
	EXPECT_FALSE(readable(efd)) << "the waited batches left nothing for reapers";
	kvblk_cqe c[8];
	EXPECT_EQ(kvblk_reap(dev.get(), c, 8, 0, 0), 0);
	EXPECT_EQ(kvblk_wait(dev.get(), t, 0, nullptr), -ENOENT);
}

TEST_F(AsyncTest, eventfd_is_readable_exactly_while_entries_wait)
{
	DevPtr dev = open(KVBLK_BACKEND_URING);
	const int efd = kvblk_event_fd(dev.get());
	ASSERT_GE(efd, 0);
	EXPECT_EQ(kvblk_event_fd(dev.get()), efd);
	EXPECT_FALSE(readable(efd));
	AlignedBuf mem(4 * kObj);
	std::vector<kvblk_result> r(4);
	/* Synchronous loads never make it readable. */
	auto d = descs_at(0, 4, mem);
	EXPECT_EQ(kvblk_load_many(dev.get(), d.data(), 4, r.data(), nullptr), 4);
	EXPECT_FALSE(readable(efd));

	submit(dev.get(), d, submit_opts(KVBLK_SUBMIT_PER_OBJECT));
	pollfd p{efd, POLLIN, 0};
	ASSERT_EQ(poll(&p, 1, 10000), 1);
	std::this_thread::sleep_for(std::chrono::milliseconds(20)); /* let all 5 entries arrive */
	kvblk_cqe c[5];
	ASSERT_EQ(kvblk_reap(dev.get(), c, 2, 2, -1), 2);
	EXPECT_TRUE(readable(efd)) << "3 entries still wait";
	/* A caller that reads the eventfd itself and reaps part of the queue: re-armed. */
	uint64_t v;
	ASSERT_EQ(read(efd, &v, sizeof(v)), ssize_t(sizeof(v)));
	ASSERT_EQ(kvblk_reap(dev.get(), c, 1, 1, -1), 1);
	EXPECT_TRUE(readable(efd)) << "2 entries still wait";
	ASSERT_EQ(kvblk_reap(dev.get(), c, 5, 2, -1), 2);
	EXPECT_EQ(c[1].flags, KVBLK_CQE_BATCH);
	EXPECT_FALSE(readable(efd)) << "queue empty";
}

/*
 * Dispatch-thread backends (psync, threadpool, kmod): a kvblk_load_many() that finds nothing
 * queued and nothing running is served on the caller's thread (no hop to the dispatch thread
 * and back); one that finds a batch running waits behind it and is served by the dispatch
 * thread, one batch at a time as ever.
 */
TEST_F(AsyncTest, idle_sync_call_runs_on_the_caller_thread_busy_one_waits_its_turn)
{
	Gate gate;
	std::mutex mu;
	std::map<uint64_t, std::set<std::thread::id>> threads; /* by object offset */
	std::atomic<int> running{0}, most{0};
	Seams s;
	s.on_complete = [&](const CommandInfo &c, int64_t res) {
		const int now = ++running;
		int m = most.load();
		while (now > m && !most.compare_exchange_weak(m, now)) {
		}
		{
			std::lock_guard<std::mutex> g(mu);
			threads[c.obj_offset].insert(std::this_thread::get_id());
		}
		if (c.obj_offset == 8 * kObj && c.attempt == 0)
			gate.wait();
		--running;
		return res;
	};
	SeamGuard sg(s);
	DevPtr dev = open(KVBLK_BACKEND_PSYNC);
	GateOpener go{gate};
	AlignedBuf mem(3 * kObj);
	std::vector<kvblk_result> r(2);
	ASSERT_EQ(kvblk_load_many(dev.get(), descs_at(0, 2, mem).data(), 2, r.data(), nullptr), 2);
	EXPECT_TRUE(exact(mem.data(), 0, 2 * kObj));
	{
		std::lock_guard<std::mutex> g(mu);
		EXPECT_EQ(threads[0], std::set<std::thread::id>{std::this_thread::get_id()});
		EXPECT_EQ(threads[kObj], std::set<std::thread::id>{std::this_thread::get_id()});
	}

	/* An asynchronous batch held at the gate on the dispatch thread; a load_many behind it. */
	AlignedBuf held(kObj);
	const uint64_t t = submit(dev.get(), descs_at(8 * kObj, 1, held), submit_opts());
	ASSERT_TRUE(gate.wait_arrived());
	std::thread::id caller;
	std::atomic<bool> returned{false};
	std::thread other([&] {
		caller = std::this_thread::get_id();
		kvblk_result rr{};
		const kvblk_desc d = plain_desc(2 * kObj, kObj, mem.data() + 2 * kObj, 9);
		EXPECT_EQ(kvblk_load_many(dev.get(), &d, 1, &rr, nullptr), 1) << kvblk_last_error();
		returned = true;
	});
	/* Its batch is outstanding (queued behind the held one) before the gate opens. */
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (get_stats(dev.get()).outstanding_peak < 2 && std::chrono::steady_clock::now() < end)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	EXPECT_EQ(get_stats(dev.get()).outstanding_peak, 2u);
	EXPECT_FALSE(returned.load());
	gate.open();
	other.join();
	EXPECT_TRUE(returned.load());
	EXPECT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), 1);
	EXPECT_TRUE(exact(mem.data() + 2 * kObj, 2 * kObj, kObj));
	EXPECT_TRUE(exact(held.data(), 8 * kObj, kObj));
	std::lock_guard<std::mutex> g(mu);
	ASSERT_EQ(threads[8 * kObj].size(), 1u);
	const std::thread::id dispatcher = *threads[8 * kObj].begin();
	EXPECT_NE(dispatcher, std::this_thread::get_id());
	/* The dispatch thread served the queued call after the held batch: never two at once. */
	EXPECT_EQ(threads[2 * kObj], std::set<std::thread::id>{dispatcher});
	EXPECT_NE(dispatcher, caller);
	EXPECT_EQ(most.load(), 1) << "two batches ran at once on a psync device";
}

/*
 * uring: an idle synchronous call drives a ring on the caller's thread (no hand-over to the
 * ring's thread); one that finds the ring busy goes through the queue to the ring's thread;
 * with two rings, a batch deeper than one ring is spread over their threads.
 */
TEST_F(AsyncTest, uring_idle_sync_call_drives_the_ring_on_the_caller_thread)
{
	Gate gate;
	std::mutex mu;
	std::map<uint64_t, std::set<std::thread::id>> threads; /* by object offset */
	Seams s;
	s.on_complete = [&](const CommandInfo &c, int64_t res) {
		{
			std::lock_guard<std::mutex> g(mu);
			threads[c.obj_offset].insert(std::this_thread::get_id());
		}
		if (c.obj_offset == 8 * kObj && c.attempt == 0)
			gate.wait();
		return res;
	};
	std::atomic<int> sync_queued{0};
	s.on_ring_queued = [&](bool sync) { sync_queued += sync; };
	SeamGuard sg(s);
	const auto seen = [&](uint64_t off) {
		std::lock_guard<std::mutex> g(mu);
		return threads[off];
	};
	const std::set<std::thread::id> me{std::this_thread::get_id()};
	{
		DevPtr dev = open(KVBLK_BACKEND_URING, 0, 1, 4);
		GateOpener go{gate};
		AlignedBuf mem(4 * kObj);
		std::vector<kvblk_result> r(4);
		ASSERT_EQ(kvblk_load_many(dev.get(), descs_at(0, 4, mem).data(), 4, r.data(), nullptr), 4);
		EXPECT_TRUE(exact(mem.data(), 0, 4 * kObj));
		for (uint64_t i = 0; i < 4; i++)
			EXPECT_EQ(seen(i * kObj), me) << "object " << i;

		/* An asynchronous batch held at the gate on the ring's thread; a load_many meanwhile. */
		AlignedBuf held(kObj);
		const uint64_t t = submit(dev.get(), descs_at(8 * kObj, 1, held), submit_opts());
		ASSERT_TRUE(gate.wait_arrived());
		std::thread::id caller;
		std::thread other([&] {
			caller = std::this_thread::get_id();
			kvblk_result rr{};
			const kvblk_desc d = plain_desc(2 * kObj, kObj, mem.data() + 2 * kObj, 9);
			EXPECT_EQ(kvblk_load_many(dev.get(), &d, 1, &rr, nullptr), 1) << kvblk_last_error();
		});
		/* Its batch is on the ring's queue (the ring busy) before the gate opens. */
		const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
		while (sync_queued.load() == 0 && std::chrono::steady_clock::now() < end)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		EXPECT_EQ(sync_queued.load(), 1);
		gate.open();
		other.join();
		EXPECT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), 1);
		EXPECT_TRUE(exact(mem.data() + 2 * kObj, 2 * kObj, kObj));
		EXPECT_TRUE(exact(held.data(), 8 * kObj, kObj));
		const auto ring = seen(8 * kObj);
		ASSERT_EQ(ring.size(), 1u);
		EXPECT_NE(*ring.begin(), std::this_thread::get_id());
		/* The ring was busy: the call went to the ring's thread (this object's second load). */
		const auto second = seen(2 * kObj);
		EXPECT_EQ(second.count(caller), 0u);
		EXPECT_EQ(second.count(*ring.begin()), 1u);
		EXPECT_EQ(sync_queued.load(), 1) << "the idle calls were queued, not driven on their thread";
	}
	{
		std::lock_guard<std::mutex> g(mu);
		threads.clear();
	}
	{
		/* Two rings of depth 2: 8 commands are more than one ring takes, so both rings' threads run them. */
		DevPtr dev = open(KVBLK_BACKEND_URING, 0, 2, 2);
		AlignedBuf mem(8 * kObj);
		std::vector<kvblk_result> r(8);
		ASSERT_EQ(kvblk_load_many(dev.get(), descs_at(16 * kObj, 8, mem).data(), 8, r.data(), nullptr), 8);
		EXPECT_TRUE(exact(mem.data(), 16 * kObj, 8 * kObj));
		for (uint64_t i = 0; i < 8; i++)
			EXPECT_EQ(seen((16 + i) * kObj).count(std::this_thread::get_id()), 0u) << "object " << i;
		EXPECT_EQ(sync_queued.load(), 2);
	}
}

/* Backends held on a first batch (serial: psync; uring with one ring of depth 1). */
class HeldTest : public AsyncTest, public ::testing::WithParamInterface<BackendCase> {
protected:
	DevPtr open_case() { return open(GetParam().backend, 0, GetParam().workers, GetParam().queue_depth); }
};

const BackendCase kSerialBackends[] = {
	{"psync", KVBLK_BACKEND_PSYNC, 0, 0},
	{"uring_qd1", KVBLK_BACKEND_URING, 1, 1},
};

TEST_P(HeldTest, priority_batch_completes_before_earlier_normal_ones)
{
	Gate gate;
	SeamGuard sg(gate_seams(gate, 0));
	DevPtr dev = open_case();
	GateOpener opener{gate};
	AlignedBuf mem(8 * kObj);
	std::vector<uint64_t> want;
	want.push_back(submit(dev.get(), descs_at(0, 1, mem.data()), submit_opts()));
	ASSERT_TRUE(gate.wait_arrived()) << "the first batch is held";
	std::vector<uint64_t> normal;
	for (uint32_t i = 1; i <= 3; i++)
		normal.push_back(submit(dev.get(), descs_at(i * 2 * kObj, 2, mem.data() + (i - 1) * 2 * kObj), submit_opts()));
	AlignedBuf pmem(kObj);
	const uint64_t p = submit(dev.get(), descs_at(7 * kObj, 1, pmem.data()), submit_opts(KVBLK_SUBMIT_PRIORITY));
	want.push_back(p);
	want.insert(want.end(), normal.begin(), normal.end());
	gate.open();
	std::vector<uint64_t> order;
	for (const kvblk_cqe &c : reap_batches(dev.get(), 5)) {
		EXPECT_EQ(c.status, 0);
		order.push_back(c.ticket);
	}
	EXPECT_EQ(order, want) << "held, priority, then the normal ones in submission order";
	EXPECT_TRUE(exact(mem.data(), 2 * kObj, 6 * kObj));
	EXPECT_TRUE(exact(pmem.data(), 7 * kObj, kObj));
	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.priority_batches, 1u);
	EXPECT_EQ(s.outstanding_peak, 5u);
	EXPECT_EQ(s.batches, 5u);
}

TEST_P(HeldTest, cancel_ends_objects_not_issued)
{
	Gate gate;
	SeamGuard sg(gate_seams(gate, 0));
	DevPtr dev = open_case();
	GateOpener opener{gate};
	AlignedBuf amem(4 * kObj, 0x11), bmem(3 * kObj, 0x22);
	std::vector<kvblk_result> ra(4), rb(3);
	const uint64_t a = submit(dev.get(), descs_at(0, 4, amem, 10), submit_opts(KVBLK_SUBMIT_PER_OBJECT, 0, ra.data()));
	ASSERT_TRUE(gate.wait_arrived()) << "object 0 of a is in flight";
	const uint64_t b = submit(dev.get(), descs_at(8 * kObj, 3, bmem, 20), submit_opts(0, 0, rb.data()));

	/* b is queued: cancelled wholly, at once. */
	EXPECT_EQ(kvblk_cancel(dev.get(), b), 0);
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_wait(dev.get(), b, 5'000'000'000, &bi), 0);
	EXPECT_EQ(bi.failed, 3u);
	EXPECT_EQ(bi.bytes, 0u);
	for (uint32_t i = 0; i < 3; i++) {
		EXPECT_EQ(rb[i].status, -ECANCELED) << i;
		EXPECT_EQ(rb[i].bytes, 0u);
		EXPECT_EQ(rb[i].tag, 20u + i);
	}
	EXPECT_TRUE(bmem.all(0, 3 * kObj, 0x22)) << "nothing of b was read";

	/* a: object 0 is in flight and finishes; 1..3 were not issued. */
	EXPECT_EQ(kvblk_cancel(dev.get(), a), 0);
	gate.open();
	const std::vector<kvblk_cqe> all = reap_batches(dev.get(), 1);
	ASSERT_EQ(all.size(), 5u);
	const kvblk_cqe &batch = all.back();
	EXPECT_EQ(batch.ticket, a);
	EXPECT_EQ(batch.failed, 3u);
	EXPECT_EQ(batch.status, -ECANCELED);
	EXPECT_EQ(batch.bytes, kObj);
	int cancelled_entries = 0;
	for (size_t k = 0; k + 1 < all.size(); k++) {
		EXPECT_EQ(all[k].flags, KVBLK_CQE_OBJECT);
		EXPECT_EQ(all[k].status, all[k].index == 0 ? 0 : -ECANCELED) << all[k].index;
		cancelled_entries += all[k].status == -ECANCELED;
	}
	EXPECT_EQ(cancelled_entries, 3);
	EXPECT_EQ(ra[0].status, 0);
	EXPECT_EQ(ra[0].bytes, kObj);
	EXPECT_TRUE(exact(amem.data(), 0, kObj)) << "the object that was issued is exact";
	for (uint32_t i = 1; i < 4; i++)
		EXPECT_EQ(ra[i].status, -ECANCELED) << i;
	EXPECT_TRUE(amem.all(kObj, 3 * kObj, 0x11));
	EXPECT_EQ(kvblk_cancel(dev.get(), a), -ENOENT);
	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.cancelled_objects, 6u);
	EXPECT_EQ(s.bytes_read, kObj);
}

TEST_P(HeldTest, close_cancels_queued_batches_and_waits_for_the_one_in_flight)
{
	Gate gate;
	SeamGuard sg(gate_seams(gate, 0));
	kvblk_open_opts o = make_opts(GetParam().backend, GetParam().workers, GetParam().queue_depth);
	kvblk_dev *dev = nullptr;
	ASSERT_EQ(kvblk_open(path_.c_str(), &o, &dev), 0);
	AlignedBuf amem(kObj), bmem(2 * kObj, 0x33);
	std::vector<kvblk_result> ra(1), rb(2, kvblk_result{1, 0, 0, 0});
	submit(dev, descs_at(0, 1, amem), submit_opts(0, 0, ra.data()));
	ASSERT_TRUE(gate.wait_arrived());
	submit(dev, descs_at(4 * kObj, 2, bmem), submit_opts(0, 0, rb.data()));
	std::thread opener([&] {
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
		gate.open();
	});
	kvblk_close(dev); /* returns once the held batch completed */
	opener.join();
	EXPECT_EQ(ra[0].status, 0);
	EXPECT_TRUE(exact(amem.data(), 0, kObj));
	EXPECT_EQ(rb[0].status, -ECANCELED);
	EXPECT_EQ(rb[1].status, -ECANCELED);
	EXPECT_TRUE(bmem.all(0, 2 * kObj, 0x33));
}

INSTANTIATE_TEST_SUITE_P(Serial, HeldTest, ::testing::ValuesIn(kSerialBackends), case_name);

TEST_F(AsyncTest, max_batches_bounds_outstanding_batches)
{
	DevPtr dev = open(KVBLK_BACKEND_PSYNC, 2);
	EXPECT_EQ(get_info(dev.get()).max_batches, 2u);
	AlignedBuf mem(kObj);
	const uint64_t t1 = submit(dev.get(), descs_at(0, 1, mem), submit_opts());
	const uint64_t t2 = submit(dev.get(), descs_at(0, 1, mem), submit_opts());
	/* Completed or not, both are outstanding until taken. */
	EXPECT_EQ(kvblk_wait(dev.get(), t1, -1, nullptr), 1);
	const uint64_t t3 = submit(dev.get(), descs_at(0, 1, mem), submit_opts());
	std::vector<kvblk_result> r(1);
	kvblk_submit_opts o = submit_opts(KVBLK_SUBMIT_NONBLOCK, 0, r.data());
	uint64_t t = 0;
	EXPECT_EQ(kvblk_submit(dev.get(), descs_at(0, 1, mem).data(), 1, &o, &t), -EAGAIN);
	EXPECT_NE(std::string(kvblk_last_error()).find("max_batches"), std::string::npos) << kvblk_last_error();
	EXPECT_EQ(t, 0u);
	EXPECT_EQ(r[0].status, -ECANCELED);
	EXPECT_EQ(get_stats(dev.get()).rejected_batches, 0u) << "-EAGAIN is not an input error";

	/* A blocking submit waits for a slot; a reap frees one. */
	std::atomic<bool> done{false};
	uint64_t blocked_ticket = 0;
	std::thread th([&] {
		kvblk_submit_opts bo = submit_opts();
		const auto d = descs_at(0, 1, mem);
		EXPECT_EQ(kvblk_submit(dev.get(), d.data(), 1, &bo, &blocked_ticket), 0);
		done = true;
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	EXPECT_FALSE(done.load()) << "two batches are outstanding";
	EXPECT_EQ(kvblk_wait(dev.get(), t2, -1, nullptr), 1);
	th.join();
	EXPECT_TRUE(done.load());
	EXPECT_GT(blocked_ticket, t3);
	EXPECT_EQ(kvblk_wait(dev.get(), t3, -1, nullptr), 1);
	EXPECT_EQ(kvblk_wait(dev.get(), blocked_ticket, -1, nullptr), 1);
	EXPECT_EQ(get_stats(dev.get()).outstanding_peak, 2u);
}

TEST_F(AsyncTest, open_option_max_batches_and_info)
{
	kvblk_open_opts o = make_opts(KVBLK_BACKEND_PSYNC);
	o.max_batches = KVBLK_MAX_BATCHES + 1;
	kvblk_dev *d = nullptr;
	EXPECT_EQ(kvblk_open(path_.c_str(), &o, &d), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("max_batches 65537"), std::string::npos);
	o.max_batches = 0;
	o.reserved = 1;
	EXPECT_EQ(kvblk_open(path_.c_str(), &o, &d), -EINVAL);
	o.reserved = 0;
	o.max_batches = KVBLK_MAX_BATCHES;
	EXPECT_EQ(get_info(open_dev(path_, o).get()).max_batches, KVBLK_MAX_BATCHES);

	/* A 0.2 caller's smaller struct: the defaults of what it lacks. */
	o = make_opts(KVBLK_BACKEND_PSYNC);
	o.max_batches = 7; /* beyond its opts_size: not read */
	o.opts_size = KVBLK_OPEN_OPTS_SIZE_V0_2;
	const kvblk_dev_info i = get_info(open_dev(path_, o).get());
	EXPECT_EQ(i.max_batches, KVBLK_DEFAULT_MAX_BATCHES);
	EXPECT_EQ(i.async, uint32_t(KVBLK_ASYNC_THREAD));
	EXPECT_EQ(i.targets, 1u);
	EXPECT_EQ(get_info(open(KVBLK_BACKEND_THREADPOOL).get()).async, uint32_t(KVBLK_ASYNC_THREAD));
	EXPECT_EQ(get_info(open(KVBLK_BACKEND_URING).get()).async, uint32_t(KVBLK_ASYNC_NATIVE));

	/* A 0.2 caller's kvblk_dev_info gets the 0.2 fields and nothing after them. */
	struct {
		kvblk_dev_info info;
	} old;
	std::memset(&old, 0xEE, sizeof(old));
	old.info.info_size = KVBLK_DEV_INFO_SIZE_V0_2;
	DevPtr dev = open(KVBLK_BACKEND_PSYNC);
	ASSERT_EQ(kvblk_get_info(dev.get(), &old.info), 0);
	EXPECT_EQ(old.info.backend, uint32_t(KVBLK_BACKEND_PSYNC));
	EXPECT_EQ(old.info.async, 0xEEEEEEEEu) << "beyond its info_size: untouched";
}

TEST_F(AsyncTest, load_many_reports_0_3_fields_and_accepts_a_0_2_info)
{
	DevPtr dev = open(KVBLK_BACKEND_URING);
	AlignedBuf mem(2 * kObj);
	std::vector<kvblk_result> r(2);
	auto d = descs_at(0, 2, mem);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), 2, r.data(), &bi), 2);
	EXPECT_NE(bi.ticket, 0u);
	EXPECT_EQ(bi.bytes_device, 2 * kObj);
	EXPECT_EQ(bi.user_data, 0u);
	kvblk_batch_info old;
	std::memset(&old, 0xEE, sizeof(old));
	old.info_size = KVBLK_BATCH_INFO_SIZE_V0_2;
	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), 2, r.data(), &old), 2);
	EXPECT_EQ(old.bytes, 2 * kObj);
	EXPECT_EQ(old.ticket, 0xEEEEEEEEEEEEEEEEull) << "beyond its info_size: untouched";
}

/*
 * The stress test: 8 submitter threads and 2 reaper threads on one handle. Every batch
 * (1-3 objects of 4-16 KiB at random block offsets, some PRIORITY, some PER_OBJECT) is
 * verified byte for byte by the reaper that takes it; every ticket must complete exactly
 * once and no submit may return a ticket twice.
 */
struct StressCase {
	const char *name;
	kvblk_backend backend;
	uint32_t batches;
};

class StressTest : public AsyncTest, public ::testing::WithParamInterface<StressCase> {};

TEST_P(StressTest, submitters_and_reapers_share_one_handle)
{
	constexpr uint32_t kSubmitters = 8, kReapers = 2, kSlots = 16, kMaxObjs = 3;
	constexpr uint64_t kMaxLen = 16 * KiB;
	const uint32_t total = GetParam().batches;
	const uint64_t file_bytes = kObjects * kObjectBytes;
	const std::vector<uint8_t> image = expected_bytes(0, file_bytes, kObjectBytes);

	kvblk_open_opts oo = make_opts(GetParam().backend, GetParam().backend == KVBLK_BACKEND_URING ? 2 : 4, 32, 0,
				       KVBLK_OPEN_BUFFERED); /* the page cache: this tests the scheduler */
	oo.max_batches = 64; /* below the 128 slots: submitters also block for slots */
	DevPtr dev = open_dev(path_, oo);
	ASSERT_TRUE(dev);

	struct Slot {
		AlignedBuf mem{kMaxObjs * kMaxLen};
		kvblk_desc d[kMaxObjs];
		kvblk_result r[kMaxObjs];
		uint32_t n = 0;
	};
	struct Submitter {
		Slot slots[kSlots];
		std::mutex mu;
		std::condition_variable cv;
		std::vector<uint32_t> free;
	};
	std::vector<std::unique_ptr<Submitter>> subs;
	for (uint32_t s = 0; s < kSubmitters; s++) {
		subs.push_back(std::make_unique<Submitter>());
		for (uint32_t i = 0; i < kSlots; i++)
			subs[s]->free.push_back(i);
	}
	std::vector<std::atomic<uint64_t>> submitted(total), reaped(total);
	std::vector<std::atomic<uint32_t>> reaped_count(total);
	std::atomic<uint32_t> done{0}, bad_bytes{0}, bad_entries{0}, object_entries{0}, submit_errors{0};
	std::mutex msg_mu;
	std::string first_msg;
	auto complain = [&](std::atomic<uint32_t> &ctr, const std::string &m) {
		if (ctr++ == 0) {
			std::lock_guard<std::mutex> g(msg_mu);
			if (first_msg.empty())
				first_msg = m;
		}
	};

	const auto t0 = std::chrono::steady_clock::now();
	std::vector<std::thread> threads;
	for (uint32_t s = 0; s < kSubmitters; s++) {
		threads.emplace_back([&, s] {
			std::mt19937_64 rng(s + 1);
			Submitter &me = *subs[s];
			for (uint32_t seq = s; seq < total; seq += kSubmitters) {
				uint32_t slot;
				{
					std::unique_lock<std::mutex> lk(me.mu);
					me.cv.wait(lk, [&] { return !me.free.empty(); });
					slot = me.free.back();
					me.free.pop_back();
				}
				Slot &sl = me.slots[slot];
				sl.n = 1 + uint32_t(rng() % kMaxObjs);
				for (uint32_t i = 0; i < sl.n; i++) {
					const uint64_t len = 4 * KiB * (1 + rng() % 4);
					const uint64_t off = 4 * KiB * (rng() % ((file_bytes - kMaxLen) / (4 * KiB)));
					uint8_t *dst = sl.mem.data() + i * kMaxLen;
					std::memset(dst, 0, 8); /* a stale copy would still fail */
					sl.d[i] = plain_desc(off, len, dst, uint64_t(seq) * kMaxObjs + i);
				}
				uint32_t flags = 0;
				if (rng() % 8 == 0)
					flags |= KVBLK_SUBMIT_PRIORITY;
				if (rng() % 16 == 0)
					flags |= KVBLK_SUBMIT_PER_OBJECT;
				kvblk_submit_opts o = submit_opts(flags, (uint64_t(seq) << 8) | (s << 4) | slot, sl.r);
				uint64_t t = 0;
				const int rc = kvblk_submit(dev.get(), sl.d, sl.n, &o, &t);
				if (rc != 0) {
					complain(submit_errors, "kvblk_submit: " + std::to_string(rc) + " " + kvblk_last_error());
					done++;
					continue;
				}
				submitted[seq] = t;
			}
		});
	}
	for (uint32_t k = 0; k < kReapers; k++) {
		threads.emplace_back([&] {
			kvblk_cqe c[64];
			while (done.load() < total) {
				const int got = kvblk_reap(dev.get(), c, 64, 1, 50'000'000);
				if (got < 0) {
					complain(bad_entries, "kvblk_reap: " + std::to_string(got));
					return;
				}
				for (int e = 0; e < got; e++) {
					const uint64_t ud = c[e].user_data;
					const uint32_t seq = uint32_t(ud >> 8), s = (ud >> 4) & 15, slot = ud & 15;
					if (seq >= total || s >= kSubmitters) {
						complain(bad_entries, "user_data " + std::to_string(ud));
						continue;
					}
					if (c[e].flags == KVBLK_CQE_OBJECT) {
						/* Checked from the entry alone: the other reaper may take the
						 * batch entry and hand the slot back meanwhile. */
						object_entries++;
						const uint32_t i = c[e].index;
						if (i >= kMaxObjs || c[e].tag != uint64_t(seq) * kMaxObjs + i ||
						    c[e].bytes % (4 * KiB) || c[e].bytes == 0 || c[e].bytes > kMaxLen ||
						    c[e].status != 0)
							complain(bad_entries, "object entry of batch " + std::to_string(seq));
						continue;
					}
					Slot &sl = subs[s]->slots[slot];
					reaped[seq] = c[e].ticket;
					reaped_count[seq]++;
					uint64_t sum = 0;
					for (uint32_t i = 0; i < sl.n; i++) {
						sum += sl.d[i].length;
						if (sl.r[i].status != 0 || sl.r[i].bytes != sl.d[i].length ||
						    std::memcmp(sl.mem.data() + i * kMaxLen, image.data() + sl.d[i].offset,
								sl.d[i].length) != 0)
							complain(bad_bytes, "batch " + std::to_string(seq) + " object " +
										    std::to_string(i) + ": status " +
										    std::to_string(sl.r[i].status));
					}
					if (c[e].flags != KVBLK_CQE_BATCH || c[e].status != 0 || c[e].failed != 0 ||
					    c[e].index != sl.n || c[e].bytes != sum)
						complain(bad_entries, "batch entry of batch " + std::to_string(seq));
					{
						std::lock_guard<std::mutex> g(subs[s]->mu);
						subs[s]->free.push_back(slot);
					}
					subs[s]->cv.notify_one();
					done++;
				}
			}
		});
	}
	for (std::thread &t : threads)
		t.join();
	const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	std::printf("[ stress   ] %s: %u batches, %u submitters, %u reapers: %.2f s (%.0f batches/s)\n",
		    GetParam().name, total, kSubmitters, kReapers, secs, total / secs);

	EXPECT_EQ(submit_errors.load(), 0u) << first_msg;
	EXPECT_EQ(bad_bytes.load(), 0u) << first_msg;
	EXPECT_EQ(bad_entries.load(), 0u) << first_msg;
	std::vector<uint64_t> tickets;
	uint32_t lost = 0, twice = 0, mismatched = 0;
	for (uint32_t i = 0; i < total; i++) {
		lost += reaped_count[i] == 0;
		twice += reaped_count[i] > 1;
		mismatched += submitted[i].load() != reaped[i].load();
		tickets.push_back(submitted[i]);
	}
	EXPECT_EQ(lost, 0u) << "completions lost";
	EXPECT_EQ(twice, 0u) << "completions delivered twice";
	EXPECT_EQ(mismatched, 0u) << "a completion carried another batch's ticket";
	std::sort(tickets.begin(), tickets.end());
	EXPECT_EQ(std::adjacent_find(tickets.begin(), tickets.end()), tickets.end()) << "a ticket was handed out twice";
	EXPECT_NE(tickets.front(), 0u);
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.batches, total);
	EXPECT_LE(st.outstanding_peak, 64u);
	EXPECT_GE(object_entries.load(), 1u);
	kvblk_cqe c;
	EXPECT_EQ(kvblk_reap(dev.get(), &c, 1, 0, 0), 0);
	EXPECT_FALSE(readable(kvblk_event_fd(dev.get())));
}

const StressCase kStressCases[] = {
	{"uring", KVBLK_BACKEND_URING, 100000},
	{"psync", KVBLK_BACKEND_PSYNC, 20000},
	{"threadpool", KVBLK_BACKEND_THREADPOOL, 20000},
};

INSTANTIATE_TEST_SUITE_P(Backends, StressTest, ::testing::ValuesIn(kStressCases),
			 [](const ::testing::TestParamInfo<StressCase> &i) { return std::string(i.param.name); });

} // namespace

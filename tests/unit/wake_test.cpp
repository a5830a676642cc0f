// SPDX-License-Identifier: MIT
// Waking what waits on a handle (kvblk.h, "Thread safety" and "Waits and signals"):
//  - a signal handler that runs on a thread waiting in kvblk_reap() or kvblk_wait() ends the
//    wait with -EINTR (SA_RESTART or not), while a kvblk_load_many() waits on for its batch;
//  - kvblk_shutdown() ends every wait and every wait for a batch slot at once, keeps later
//    calls from waiting, and leaves the batches outstanding to be drained or closed;
//  - a submitter woken for a freed batch slot that then fails passes the wake-up on.
// Batches are held in flight at a Gate (the completion seam), never by timing.
#include "gate.hpp"
#include "test_util.hpp"

#include <atomic>
#include <climits>
#include <csignal>
#include <functional>
#include <future>
#include <pthread.h>
#include <thread>

using namespace kvblk_test;
using kvblk::testing::CommandInfo;
using kvblk::testing::Seams;

namespace {

constexpr uint64_t kObj = 64 * KiB;

std::atomic<int> g_handled{0};

extern "C" void count_signal(int)
{
	g_handled.fetch_add(1, std::memory_order_relaxed);
}

/* A SIGUSR1 handler for the test's duration, installed with @flags (0 or SA_RESTART). */
class Usr1Handler {
public:
	explicit Usr1Handler(int flags)
	{
		struct sigaction sa {};
		sa.sa_handler = count_signal;
		sa.sa_flags = flags;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, &old_);
	}
	~Usr1Handler() { sigaction(SIGUSR1, &old_, nullptr); }

private:
	struct sigaction old_ {};
};

/*
 * Run @fn on a thread and send it SIGUSR1 every millisecond until it returns: the first
 * signal may come before the thread waits, a later one finds it waiting. Returns what @fn
 * returned; INT_MIN when it had not returned after 10 s (@unstick is then called, so that
 * the thread can be joined, and the test fails).
 */
int signal_until_return(const std::function<int()> &fn, const std::function<void()> &unstick)
{
	std::promise<int> p;
	std::future<int> f = p.get_future();
	std::thread t([&] { p.set_value(fn()); });
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (f.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
		if (std::chrono::steady_clock::now() > end) {
			unstick();
			t.join();
			return INT_MIN;
		}
		pthread_kill(t.native_handle(), SIGUSR1);
	}
	t.join();
	return f.get();
}

kvblk_submit_opts submit_opts(kvblk_result *results = nullptr)
{
	kvblk_submit_opts o;
	kvblk_submit_opts_init(&o, sizeof(o));
	o.results = results;
	return o;
}

uint64_t submit_one(kvblk_dev *dev, uint64_t offset, uint8_t *mem, kvblk_result *r = nullptr)
{
	const kvblk_desc d = plain_desc(offset, kObj, mem, offset / kObj);
	kvblk_submit_opts o = submit_opts(r);
	uint64_t t = 0;
	EXPECT_EQ(kvblk_submit(dev, &d, 1, &o, &t), 0) << kvblk_last_error();
	return t;
}

class WakeTest : public StoreTest {
protected:
	DevPtr open(uint32_t max_batches = 0)
	{
		kvblk_open_opts o = make_opts(KVBLK_BACKEND_PSYNC);
		o.max_batches = max_batches;
		return open_dev(path_, o);
	}
};

class SignalWakeTest : public WakeTest, public ::testing::WithParamInterface<int> {};

TEST_P(SignalWakeTest, reap_ends_with_eintr_when_a_handler_runs)
{
	Usr1Handler h(GetParam());
	DevPtr dev = open();
	AlignedBuf mem(kObj);
	kvblk_cqe c[4];
	/* Nothing outstanding: without the signal this reap would wait forever. */
	const int r = signal_until_return([&] { return kvblk_reap(dev.get(), c, 4, 1, -1); },
					  [&] { submit_one(dev.get(), 0, mem.data()); });
	EXPECT_EQ(r, -EINTR) << kvblk_last_error();
	EXPECT_GT(g_handled.load(), 0);
	/* A bounded wait too, long before its timeout. */
	const int r2 = signal_until_return([&] { return kvblk_reap(dev.get(), c, 4, 1, 60'000'000'000); },
					   [&] { submit_one(dev.get(), 0, mem.data()); });
	EXPECT_EQ(r2, -EINTR) << kvblk_last_error();
	/* The handle is unharmed: a batch is reaped as ever. */
	const uint64_t t = submit_one(dev.get(), kObj, mem.data());
	ASSERT_EQ(kvblk_reap(dev.get(), c, 4, 1, -1), 1);
	EXPECT_EQ(c[0].ticket, t);
}

TEST_P(SignalWakeTest, wait_ends_with_eintr_and_the_batch_stays_outstanding)
{
	Usr1Handler h(GetParam());
	Gate gate;
	SeamGuard sg(gate_seams(gate, 0));
	DevPtr dev = open();
	GateOpener go{gate};
	AlignedBuf mem(kObj);
	const uint64_t t = submit_one(dev.get(), 0, mem.data());
	ASSERT_TRUE(gate.wait_arrived());
	const int r = signal_until_return([&] { return kvblk_wait(dev.get(), t, -1, nullptr); }, [&] { gate.open(); });
	EXPECT_EQ(r, -EINTR) << kvblk_last_error();
	/* Still outstanding: the next wait takes it once it completes. */
	gate.open();
	EXPECT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), 1) << kvblk_last_error();
	EXPECT_TRUE(std::memcmp(mem.data(), expected_bytes(0, kObj, kObjectBytes).data(), kObj) == 0);
}

INSTANTIATE_TEST_SUITE_P(Handler, SignalWakeTest, ::testing::Values(0, SA_RESTART),
			 [](const ::testing::TestParamInfo<int> &i) { return i.param ? "sa_restart" : "no_sa_restart"; });

TEST_F(WakeTest, load_many_waits_for_its_batch_through_signals)
{
#if defined(__SANITIZE_THREAD__)
	/*
	 * ThreadSanitizer runs an asynchronous signal's handler only when the thread next enters
	 * a call it intercepts; libkvblk's waits are raw futex(2) calls that it does not, and a
	 * kvblk_load_many() goes back to waiting after each -EINTR: 2 of 20 handlers ran in 10 s
	 * in a CI run. The plain and AddressSanitizer builds run this test.
	 */
	GTEST_SKIP() << "ThreadSanitizer defers signal handlers past raw futex waits";
#endif
	Usr1Handler h(0);
	Gate gate;
	std::atomic<int> queued{0};
	Seams s = gate_seams(gate, 0);
	s.on_queued = [&](uint64_t) { queued++; };
	SeamGuard sg(s);
	DevPtr dev = open();
	GateOpener go{gate};
	AlignedBuf held(kObj), mem(kObj);
	/* A batch held on the dispatch thread; the load_many queued behind it waits in the scheduler. */
	const uint64_t t = submit_one(dev.get(), 0, held.data());
	ASSERT_TRUE(gate.wait_arrived());
	std::atomic<bool> returned{false};
	std::atomic<int> ret{INT_MIN};
	std::thread b([&] {
		kvblk_result r{};
		const kvblk_desc d = plain_desc(2 * kObj, kObj, mem.data(), 2);
		ret = kvblk_load_many(dev.get(), &d, 1, &r, nullptr);
		returned = true;
	});
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (queued.load() < 2 && std::chrono::steady_clock::now() < end)
		std::this_thread::yield();
	ASSERT_EQ(queued.load(), 2) << "the load_many's batch was not queued";
	/* One signal at a time, each handled before the next (pending signals merge). */
	const int before = g_handled.load();
	for (int i = 0; i < 20; i++) {
		const int seen = g_handled.load();
		pthread_kill(b.native_handle(), SIGUSR1);
		while (g_handled.load() == seen && std::chrono::steady_clock::now() < end)
			std::this_thread::yield();
	}
	EXPECT_EQ(g_handled.load(), before + 20);
	EXPECT_FALSE(returned.load()) << "kvblk_load_many returned " << ret.load() << " before its batch ran";
	gate.open();
	b.join();
	EXPECT_EQ(ret.load(), 1);
	EXPECT_TRUE(std::memcmp(mem.data(), expected_bytes(2 * kObj, kObj, kObjectBytes).data(), kObj) == 0);
	EXPECT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), 1);
}

TEST_F(WakeTest, shutdown_wakes_every_waiter_and_nothing_waits_after_it)
{
	Gate gate;
	std::atomic<int> slot_waits{0};
	Seams s = gate_seams(gate, 0);
	s.on_slot_wait = [&] { slot_waits++; };
	SeamGuard sg(s);
	DevPtr dev = open(1);
	GateOpener go{gate};
	AlignedBuf mem(4 * kObj, 0x5A);
	std::vector<kvblk_result> ra(1);
	const uint64_t a = submit_one(dev.get(), 0, mem.data(), ra.data());
	ASSERT_TRUE(gate.wait_arrived()) << "batch a is in flight, holding the only batch slot";

	kvblk_cqe c[4];
	auto reaper = std::async(std::launch::async, [&] { return kvblk_reap(dev.get(), c, 4, 1, -1); });
	auto waiter = std::async(std::launch::async, [&] { return kvblk_wait(dev.get(), a, -1, nullptr); });
	auto submitter = std::async(std::launch::async, [&] {
		const kvblk_desc d = plain_desc(kObj, kObj, mem.data() + kObj, 1);
		kvblk_submit_opts o = submit_opts();
		uint64_t t = 0;
		return kvblk_submit(dev.get(), &d, 1, &o, &t);
	});
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (slot_waits.load() < 1 && std::chrono::steady_clock::now() < end)
		std::this_thread::yield();
	ASSERT_EQ(slot_waits.load(), 1) << "the submitter waits for the slot";

	/* The reaper and the waiter may be waiting already or about to: either way they return. */
	ASSERT_EQ(kvblk_shutdown(dev.get()), 0);
	ASSERT_EQ(reaper.wait_for(std::chrono::seconds(10)), std::future_status::ready);
	ASSERT_EQ(waiter.wait_for(std::chrono::seconds(10)), std::future_status::ready);
	ASSERT_EQ(submitter.wait_for(std::chrono::seconds(10)), std::future_status::ready);
	EXPECT_EQ(reaper.get(), -ECANCELED);
	EXPECT_EQ(waiter.get(), -ECANCELED);
	EXPECT_EQ(submitter.get(), -ECANCELED);

	/* Nothing waits from now on; nothing is submitted; the rest works. */
	EXPECT_EQ(kvblk_reap(dev.get(), c, 4, 1, -1), -ECANCELED);
	EXPECT_EQ(kvblk_reap(dev.get(), c, 4, 0, -1), 0);
	EXPECT_EQ(kvblk_wait(dev.get(), a, -1, nullptr), -ECANCELED);
	EXPECT_NE(std::string(kvblk_last_error()).find("kvblk_shutdown"), std::string::npos) << kvblk_last_error();
	kvblk_result r{};
	const kvblk_desc d = plain_desc(2 * kObj, kObj, mem.data() + 2 * kObj, 2);
	EXPECT_EQ(kvblk_load_many(dev.get(), &d, 1, &r, nullptr), -ECANCELED);
	EXPECT_EQ(r.status, -ECANCELED);
	EXPECT_TRUE(mem.all(kObj, 3 * kObj, 0x5A)) << "nothing after the shutdown was read";
	EXPECT_EQ(kvblk_shutdown(dev.get()), 0) << "a second call is harmless";
	EXPECT_EQ(kvblk_cancel(dev.get(), a), 0);
	EXPECT_EQ(get_info(dev.get()).targets, 1u);

	/* Batch a goes on: once it completed it is taken without a wait. */
	gate.open();
	int got = -ECANCELED;
	while (got == -ECANCELED && std::chrono::steady_clock::now() < end + std::chrono::seconds(10)) {
		got = kvblk_wait(dev.get(), a, -1, nullptr);
		if (got == -ECANCELED)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	EXPECT_EQ(got, 1) << kvblk_last_error();
	EXPECT_EQ(ra[0].status, 0);
	EXPECT_TRUE(std::memcmp(mem.data(), expected_bytes(0, kObj, kObjectBytes).data(), kObj) == 0);
	EXPECT_EQ(kvblk_shutdown(nullptr), -EINVAL);
}

TEST_F(WakeTest, shutdown_then_close_ends_the_outstanding_batches)
{
	Gate gate;
	SeamGuard sg(gate_seams(gate, 0));
	kvblk_dev *dev = nullptr;
	kvblk_open_opts o = make_opts(KVBLK_BACKEND_PSYNC);
	ASSERT_EQ(kvblk_open(path_.c_str(), &o, &dev), 0);
	AlignedBuf mem(2 * kObj, 0x77);
	std::vector<kvblk_result> ra(1), rb(1, kvblk_result{1, 0, 0, 0});
	submit_one(dev, 0, mem.data(), ra.data());
	ASSERT_TRUE(gate.wait_arrived());
	submit_one(dev, kObj, mem.data() + kObj, rb.data());
	kvblk_cqe c[4];
	auto reaper = std::async(std::launch::async, [&] { return kvblk_reap(dev, c, 4, 2, -1); });
	ASSERT_EQ(kvblk_shutdown(dev), 0);
	ASSERT_EQ(reaper.wait_for(std::chrono::seconds(10)), std::future_status::ready);
	EXPECT_EQ(reaper.get(), -ECANCELED);
	std::thread opener([&] { gate.open(); });
	kvblk_close(dev); /* cancels the queued batch, waits for the held one: results final */
	opener.join();
	EXPECT_EQ(ra[0].status, 0);
	EXPECT_TRUE(std::memcmp(mem.data(), expected_bytes(0, kObj, kObjectBytes).data(), kObj) == 0);
	/* The queued one was cancelled, or ran (when the gate opened before the close began). */
	if (rb[0].status == 0) {
		EXPECT_TRUE(std::memcmp(mem.data() + kObj, expected_bytes(kObj, kObj, kObjectBytes).data(), kObj) == 0);
	} else {
		EXPECT_EQ(rb[0].status, -ECANCELED);
		EXPECT_TRUE(mem.all(kObj, kObj, 0x77));
	}
}

/*
 * Two kvblk_wait()s of one ticket: the one that takes the batch returns with the batch's
 * buffer free again (kvblk_unregister_buffer() works at once), although the other one, which
 * frees the batch, may not have run yet.
 */
TEST_F(WakeTest, the_wait_that_takes_a_batch_finds_its_buffer_free)
{
	Gate gate;
	std::atomic<int> sleeping{0};
	Seams s = gate_seams(gate, 0);
	s.on_wait_sleep = [&](uint64_t) { sleeping++; };
	SeamGuard sg(s);
	DevPtr dev = open();
	GateOpener go{gate};
	AlignedBuf reg(kObj);
	uint32_t buf = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), kObj, &buf), 0);
	const kvblk_desc d = buf_desc(0, kObj, buf, 0, 1);
	uint64_t t = 0;
	ASSERT_EQ(kvblk_submit(dev.get(), &d, 1, nullptr, &t), 0);
	ASSERT_TRUE(gate.wait_arrived());
	std::atomic<int> unregistered{1}; /* what the taker's kvblk_unregister_buffer() said */
	auto waiter = [&] {
		const int r = kvblk_wait(dev.get(), t, -1, nullptr);
		if (r == 1)
			unregistered = kvblk_unregister_buffer(dev.get(), buf);
		return r;
	};
	auto w1 = std::async(std::launch::async, waiter);
	auto w2 = std::async(std::launch::async, waiter);
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (sleeping.load() < 2 && std::chrono::steady_clock::now() < end)
		std::this_thread::yield();
	ASSERT_GE(sleeping.load(), 2) << "both waiters sleep on the batch";
	gate.open();
	const int r1 = w1.get(), r2 = w2.get();
	EXPECT_EQ(std::max(r1, r2), 1);
	EXPECT_EQ(std::min(r1, r2), -ENOENT) << "the other one sees it taken";
	EXPECT_EQ(unregistered.load(), 0) << "the taker found the buffer still pinned by its batch";
	EXPECT_TRUE(std::memcmp(reg.data(), expected_bytes(0, kObj, kObjectBytes).data(), kObj) == 0);
}

/*
 * max_batches = 1: two submitters wait for the slot a completed batch holds. The one woken
 * when it is reaped fails (as when its dispatch thread cannot start): the other must get the
 * slot instead of sleeping beside it.
 */
TEST_F(WakeTest, a_submitter_that_fails_on_a_freed_slot_passes_the_wakeup_on)
{
	std::atomic<int> slot_waits{0}, taken{0};
	Seams s;
	s.on_slot_wait = [&] { slot_waits++; };
	s.on_slot_taken = [&] { return taken++ == 0 ? -EAGAIN : 0; };
	SeamGuard sg(s);
	DevPtr dev = open(1);
	AlignedBuf mem(4 * kObj);
	const uint64_t a = submit_one(dev.get(), 0, mem.data());
	ASSERT_EQ(kvblk_wait(dev.get(), a, 0, nullptr), -ETIME); /* any state: it holds the slot until taken */
	auto submit_at = [&](uint64_t off) {
		return std::async(std::launch::async, [&, off] {
			const kvblk_desc d = plain_desc(off, kObj, mem.data() + off, off / kObj);
			kvblk_submit_opts o = submit_opts();
			uint64_t t = 0;
			const int r = kvblk_submit(dev.get(), &d, 1, &o, &t);
			return r ? r : int(kvblk_wait(dev.get(), t, -1, nullptr));
		});
	};
	auto s1 = submit_at(kObj);
	auto s2 = submit_at(2 * kObj);
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (slot_waits.load() < 2 && std::chrono::steady_clock::now() < end)
		std::this_thread::yield();
	ASSERT_EQ(slot_waits.load(), 2);
	EXPECT_EQ(kvblk_wait(dev.get(), a, -1, nullptr), 1); /* frees the slot: one submitter is woken */
	const bool s1_done = s1.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
	const bool s2_done = s2.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
	if (!s1_done || !s2_done) {
		/* The wake-up was swallowed: free a slot once more so that the test can end. */
		AlignedBuf more(kObj);
		const kvblk_desc d = plain_desc(3 * kObj, kObj, more.data(), 3);
		kvblk_result r{};
		kvblk_load_many(dev.get(), &d, 1, &r, nullptr);
	}
	EXPECT_TRUE(s1_done && s2_done) << "a submitter slept beside a free slot";
	const int r1 = s1.get(), r2 = s2.get();
	EXPECT_EQ(std::min(r1, r2), -EAGAIN) << "one failed on its slot";
	EXPECT_EQ(std::max(r1, r2), 1) << "the other got the slot and its batch ran";
	EXPECT_EQ(taken.load(), 2);
}

} // namespace

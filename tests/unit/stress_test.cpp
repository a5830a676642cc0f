// SPDX-License-Identifier: MIT
// The shared-handle stress test: 8 threads doing random submit / reap / wait / cancel /
// load_many / register-check-unregister / fork / close-and-reopen on three shared handles
// (uring, psync with max_batches 4, threadpool), a fixed number of operations per thread
// from a printed seed (KVBLK_STRESS_SEED=N repeats a run, KVBLK_STRESS_OPS=N per thread
// changes its length). Handles are shared the way the Python binding shares them: calls
// under a shared lock, close under the exclusive one after kvblk_shutdown() woke every
// thread waiting on the handle (a reaper in kvblk_reap(-1), a submitter waiting for a slot).
//
// Checked: every submitted batch ends exactly once (taken by a reap or a wait, or ended by
// a close), every object that reports success holds the right bytes and every other one
// -ECANCELED (nothing else fails), a registered buffer can be unregistered once its batch
// is taken, and a child of fork() gets -EBADFD at once from every call while the parent's
// threads go on. It runs in the unit suite and, built with ThreadSanitizer and
// AddressSanitizer, in `make tsan` and `make asan`.
#include "test_util.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <poll.h>
#include <random>
#include <set>
#include <shared_mutex>
#include <sys/wait.h>
#include <thread>

using namespace kvblk_test;

namespace {

constexpr uint64_t kObj = 16 * KiB;
constexpr uint64_t kObjects = 64;
constexpr int kThreads = 8;

/* One submitted batch: its memory lives here until it ends. */
struct Flight {
	uint32_t n = 0;
	std::vector<kvblk_desc> descs;
	std::vector<kvblk_result> res;
	std::unique_ptr<AlignedBuf> mem;
	uint32_t buf = KVBLK_BUF_NONE; /* registered for this batch; unregistered once it is taken */
};

struct Slot {
	const char *name;
	kvblk_open_opts opts;
	std::shared_mutex use;		/* shared: a call on dev; exclusive: close and reopen */
	std::atomic<bool> closing{false};
	kvblk_dev *dev = nullptr;	/* under use */
	std::mutex mu;			/* flights, orphans */
	std::map<uint64_t, std::unique_ptr<Flight>> flights;
	std::set<uint64_t> orphans;	/* batch entries reaped before their submitter recorded them */
};

struct Totals {
	std::atomic<uint64_t> submitted{0}, ended{0}, ok_objects{0}, cancelled_objects{0}, reaps{0}, waits{0},
		cancels{0}, loads{0}, registrations{0}, forks{0}, closes{0}, woken{0}, ops{0};
};

class Stress {
public:
	Stress(std::string path, uint64_t seed) : path_(std::move(path)), seed_(seed)
	{
		slots_[0].name = "uring";
		slots_[0].opts = make_opts(KVBLK_BACKEND_URING, 2, 8);
		slots_[1].name = "psync";
		slots_[1].opts = make_opts(KVBLK_BACKEND_PSYNC);
		slots_[1].opts.max_batches = 4;
		slots_[2].name = "threadpool";
		slots_[2].opts = make_opts(KVBLK_BACKEND_THREADPOOL, 2);
		for (Slot &s : slots_)
			EXPECT_EQ(kvblk_open(path_.c_str(), &s.opts, &s.dev), 0) << s.name << ": " << kvblk_last_error();
	}

	void worker(int id, uint64_t ops)
	{
		std::mt19937_64 rng(seed_ * 1000003 + uint64_t(id));
		AlignedBuf reg(4 * kObj);
		for (uint64_t i = 0; i < ops && !::testing::Test::HasFailure(); i++) {
			Slot &s = slots_[rng() % 3];
			const unsigned op = unsigned(rng() % 100);
			if (op < 2) {
				close_and_reopen(s);
			} else {
				std::shared_lock<std::shared_mutex> lk(s.use, std::defer_lock);
				if (s.closing.load() || !lk.try_lock())
					continue; /* being closed: come back later */
				if (op < 40)
					submit(s, rng);
				else if (op < 60)
					reap(s, rng);
				else if (op < 75)
					wait(s, rng);
				else if (op < 85)
					cancel(s, rng);
				else if (op < 92)
					load_many(s, rng);
				else if (op < 99)
					register_churn(s, reg, rng);
				else
					fork_child(s);
			}
			t_.ops++;
		}
		done_++;
	}

	/* End: wake what still waits (close and reopen every handle), then close for good. */
	void finish()
	{
		for (Slot &s : slots_) {
			close_and_reopen(s, false);
			std::lock_guard<std::mutex> g(s.mu);
			EXPECT_TRUE(s.flights.empty()) << s.name;
		}
	}

	/* While workers run: a handle whose remaining workers all wait with nothing to come is woken. */
	void unstick_when_idle(const std::vector<std::thread> &threads)
	{
		uint64_t last = t_.ops.load();
		auto since = std::chrono::steady_clock::now();
		while (done_.load() < int(threads.size())) {
			std::this_thread::sleep_for(std::chrono::milliseconds(20));
			const uint64_t now_ops = t_.ops.load();
			if (now_ops != last) {
				last = now_ops;
				since = std::chrono::steady_clock::now();
			} else if (std::chrono::steady_clock::now() - since > std::chrono::milliseconds(200)) {
				for (Slot &s : slots_)
					close_and_reopen(s);
				since = std::chrono::steady_clock::now();
			}
		}
	}

	const Totals &totals() const { return t_; }

private:
	/* A flight is over (taken, or ended by a close): results final. Checks and frees it. */
	void end_flight(Slot &s, std::unique_ptr<Flight> f, bool closed)
	{
		for (uint32_t k = 0; k < f->n; k++) {
			const kvblk_result &r = f->res[k];
			const kvblk_desc &d = f->descs[k];
			EXPECT_EQ(r.tag, d.tag);
			if (r.status == 0) {
				EXPECT_EQ(r.bytes, d.length);
				const uint8_t *mem = f->mem->data() + k * kObj;
				EXPECT_EQ(std::memcmp(mem, expected_bytes(d.offset, d.length, kObj).data(), d.length), 0)
					<< s.name << ": object " << k << " at " << d.offset;
				t_.ok_objects++;
			} else {
				EXPECT_EQ(r.status, -ECANCELED) << s.name;
				EXPECT_EQ(r.bytes, 0u);
				t_.cancelled_objects++;
			}
		}
		if (f->buf != KVBLK_BUF_NONE && !closed) {
			EXPECT_EQ(kvblk_unregister_buffer(s.dev, f->buf), 0) << s.name << ": " << kvblk_last_error();
		}
		t_.ended++;
	}

	/* The batch entry of @ticket was taken (use held). */
	void taken(Slot &s, uint64_t ticket)
	{
		std::unique_ptr<Flight> f;
		{
			std::lock_guard<std::mutex> g(s.mu);
			auto it = s.flights.find(ticket);
			if (it == s.flights.end()) {
				s.orphans.insert(ticket);
				return;
			}
			f = std::move(it->second);
			s.flights.erase(it);
		}
		end_flight(s, std::move(f), false);
	}

	void submit(Slot &s, std::mt19937_64 &rng)
	{
		auto f = std::make_unique<Flight>();
		f->n = 1 + uint32_t(rng() % 4);
		f->res.resize(f->n);
		f->mem = std::make_unique<AlignedBuf>(f->n * kObj);
		const bool registered = rng() % 4 == 0;
		if (registered && kvblk_register_buffer(s.dev, KVBLK_MEM_HOST, f->mem->data(), f->n * kObj, &f->buf) != 0)
			f->buf = KVBLK_BUF_NONE;
		for (uint32_t k = 0; k < f->n; k++) {
			const uint64_t off = (rng() % kObjects) * kObj;
			f->descs.push_back(f->buf == KVBLK_BUF_NONE ? plain_desc(off, kObj, f->mem->data() + k * kObj, rng())
								     : buf_desc(off, kObj, f->buf, k * kObj, rng()));
		}
		kvblk_submit_opts o;
		kvblk_submit_opts_init(&o, sizeof(o));
		o.results = f->res.data();
		o.flags = (rng() % 4 == 0 ? KVBLK_SUBMIT_PRIORITY : 0) | (rng() % 3 == 0 ? KVBLK_SUBMIT_PER_OBJECT : 0) |
			  (rng() % 2 ? KVBLK_SUBMIT_NONBLOCK : 0);
		uint64_t t = 0;
		const int r = kvblk_submit(s.dev, f->descs.data(), f->n, &o, &t);
		if (r) {
			EXPECT_TRUE(r == -EAGAIN || r == -ECANCELED) << s.name << ": " << r << " " << kvblk_last_error();
			if (f->buf != KVBLK_BUF_NONE) {
				EXPECT_EQ(kvblk_unregister_buffer(s.dev, f->buf), 0);
			}
			return;
		}
		t_.submitted++;
		std::lock_guard<std::mutex> g(s.mu);
		if (s.orphans.erase(t)) { /* a reaper took it already */
			std::unique_ptr<Flight> mine = std::move(f);
			end_flight(s, std::move(mine), false);
			return;
		}
		s.flights.emplace(t, std::move(f));
	}

	void reap(Slot &s, std::mt19937_64 &rng)
	{
		kvblk_cqe c[8];
		const int64_t timeouts[] = {0, 1'000'000, 20'000'000, -1};
		const int r = kvblk_reap(s.dev, c, 8, uint32_t(rng() % 3), timeouts[rng() % 4]);
		if (r < 0) {
			EXPECT_EQ(r, -ECANCELED) << s.name << ": " << kvblk_last_error();
			t_.woken++;
			return;
		}
		t_.reaps++;
		for (int k = 0; k < r; k++)
			if (c[k].flags & KVBLK_CQE_BATCH)
				taken(s, c[k].ticket);
	}

	uint64_t random_ticket(Slot &s, std::mt19937_64 &rng)
	{
		std::lock_guard<std::mutex> g(s.mu);
		if (s.flights.empty())
			return rng(); /* not outstanding: -ENOENT */
		auto it = s.flights.begin();
		std::advance(it, long(rng() % s.flights.size()));
		return it->first;
	}

	void wait(Slot &s, std::mt19937_64 &rng)
	{
		const uint64_t t = random_ticket(s, rng);
		const int64_t timeouts[] = {0, 1'000'000, -1};
		const int r = kvblk_wait(s.dev, t, timeouts[rng() % 3], nullptr);
		if (r < 0) {
			EXPECT_TRUE(r == -ETIME || r == -ENOENT || r == -ECANCELED) << s.name << ": " << kvblk_last_error();
			return;
		}
		t_.waits++;
		taken(s, t);
	}

	void cancel(Slot &s, std::mt19937_64 &rng)
	{
		const int r = kvblk_cancel(s.dev, random_ticket(s, rng));
		EXPECT_TRUE(r == 0 || r == -ENOENT) << s.name << ": " << kvblk_last_error();
		t_.cancels++;
	}

	void load_many(Slot &s, std::mt19937_64 &rng)
	{
		AlignedBuf mem(2 * kObj);
		const uint64_t a = (rng() % kObjects) * kObj, b = (rng() % kObjects) * kObj;
		const kvblk_desc d[2] = {plain_desc(a, kObj, mem.data(), 1), plain_desc(b, kObj, mem.data() + kObj, 2)};
		kvblk_result r[2];
		const int ret = kvblk_load_many(s.dev, d, 2, r, nullptr);
		if (ret == -ECANCELED)
			return; /* the handle was shut down for a close */
		EXPECT_EQ(ret, 2) << s.name << ": " << kvblk_last_error();
		EXPECT_EQ(std::memcmp(mem.data(), expected_bytes(a, kObj, kObj).data(), kObj), 0);
		EXPECT_EQ(std::memcmp(mem.data() + kObj, expected_bytes(b, kObj, kObj).data(), kObj), 0);
		t_.loads++;
	}

	void register_churn(Slot &s, AlignedBuf &reg, std::mt19937_64 &rng)
	{
		uint32_t id = 0;
		ASSERT_EQ(kvblk_register_buffer(s.dev, KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0) << kvblk_last_error();
		if (rng() % 2) {
			const int r = kvblk_check_buffer(s.dev, id);
			EXPECT_TRUE(r == 0 || r == -ECANCELED) << s.name << ": " << r << " " << kvblk_last_error();
		}
		EXPECT_EQ(kvblk_unregister_buffer(s.dev, id), 0) << kvblk_last_error();
		t_.registrations++;
	}

	/* A child made while the other threads work: every call on the inherited handle -EBADFD. */
	void fork_child(Slot &s)
	{
		kvblk_dev *d = s.dev;
		/*
		 * Made before fork(): the child of a threaded parent must not allocate (a lock of
		 * the allocator may have been held by another thread: ASan's hung the child here).
		 */
		AlignedBuf m(kObj);
		const pid_t pid = fork();
		if (pid == 0) {
			kvblk_cqe c[2];
			const kvblk_desc desc = plain_desc(0, kObj, m.data(), 0);
			kvblk_result r;
			uint64_t t = 0;
			int bad = 0;
			bad |= kvblk_reap(d, c, 2, 1, -1) != -EBADFD;
			bad |= (kvblk_submit(d, &desc, 1, nullptr, &t) != -EBADFD) << 1;
			bad |= (kvblk_wait(d, 1, -1, nullptr) != -EBADFD) << 2;
			bad |= (kvblk_load_many(d, &desc, 1, &r, nullptr) != -EBADFD) << 3;
			bad |= (kvblk_shutdown(d) != -EBADFD) << 4;
			kvblk_close(d);
			_exit(bad);
		}
		ASSERT_GT(pid, 0);
		int status = 0;
		const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
		while (waitpid(pid, &status, WNOHANG) == 0) {
			if (std::chrono::steady_clock::now() > end) {
				kill(pid, SIGKILL);
				waitpid(pid, &status, 0);
				FAIL() << s.name << ": the child of fork() hung";
			}
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		}
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << s.name << ": child status " << status;
		t_.forks++;
	}

	/* Wake every thread waiting on the handle, close it, end its batches, open it again. */
	void close_and_reopen(Slot &s, bool reopen = true)
	{
		if (s.closing.exchange(true))
			return; /* another thread is at it */
		{
			std::shared_lock<std::shared_mutex> lk(s.use);
			EXPECT_EQ(kvblk_shutdown(s.dev), 0);
		}
		std::unique_lock<std::shared_mutex> lk(s.use);
		kvblk_close(s.dev); /* queued batches cancelled, those in flight waited for */
		s.dev = nullptr;
		std::map<uint64_t, std::unique_ptr<Flight>> left;
		{
			std::lock_guard<std::mutex> g(s.mu);
			left.swap(s.flights);
			s.orphans.clear();
		}
		for (auto &kv : left)
			end_flight(s, std::move(kv.second), true);
		t_.closes++;
		if (reopen) {
			EXPECT_EQ(kvblk_open(path_.c_str(), &s.opts, &s.dev), 0) << s.name << ": " << kvblk_last_error();
		}
		s.closing = false;
	}

	std::string path_;
	uint64_t seed_;
	Slot slots_[3];
	Totals t_;
	std::atomic<int> done_{0};
};

uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = std::getenv(name);
	return v && *v ? std::strtoull(v, nullptr, 0) : dflt;
}

TEST(StressSharedHandles, eight_threads_submit_reap_wait_cancel_close_fork_register)
{
	TempDir dir;
	const std::string path = dir.file("store");
	write_pattern_file(path, kObjects, kObj);
	const uint64_t seed = env_u64("KVBLK_STRESS_SEED", std::random_device{}());
	const uint64_t ops = env_u64("KVBLK_STRESS_OPS", 1500);
	std::printf("[ stress   ] seed %llu (KVBLK_STRESS_SEED=%llu repeats it), %d threads x %llu operations\n",
		    (unsigned long long)seed, (unsigned long long)seed, kThreads, (unsigned long long)ops);
	RecordProperty("seed", std::to_string(seed));
	Stress st(path, seed);
	std::vector<std::thread> threads;
	for (int i = 0; i < kThreads; i++)
		threads.emplace_back([&, i] { st.worker(i, ops); });
	st.unstick_when_idle(threads);
	for (std::thread &t : threads)
		t.join();
	st.finish();
	const Totals &t = st.totals();
	std::printf("[ stress   ] %llu batches submitted, %llu ended (%llu objects read, %llu cancelled); %llu reaps, "
		    "%llu waits, %llu cancels, %llu load_many, %llu registrations, %llu forks, %llu closes, %llu waits "
		    "ended by kvblk_shutdown\n",
		    (unsigned long long)t.submitted.load(), (unsigned long long)t.ended.load(),
		    (unsigned long long)t.ok_objects.load(), (unsigned long long)t.cancelled_objects.load(),
		    (unsigned long long)t.reaps.load(), (unsigned long long)t.waits.load(),
		    (unsigned long long)t.cancels.load(), (unsigned long long)t.loads.load(),
		    (unsigned long long)t.registrations.load(), (unsigned long long)t.forks.load(),
		    (unsigned long long)t.closes.load(), (unsigned long long)t.woken.load());
	EXPECT_EQ(t.ended.load(), t.submitted.load()) << "every batch ends exactly once (seed " << seed << ")";
	EXPECT_GT(t.submitted.load(), 0u);
	EXPECT_GT(t.ok_objects.load(), 0u);
	EXPECT_GT(t.closes.load(), 0u);
	EXPECT_GT(t.forks.load(), 0u);
}

} // namespace

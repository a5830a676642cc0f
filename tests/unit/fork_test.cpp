// SPDX-License-Identifier: MIT
// A handle belongs to the process that opened it (kvblk.h, "Processes"): a child made by
// fork() gets -EBADFD from every call on the inherited handle, kvblk_close() of it harms
// nothing, a handle the child opens itself works, and the parent's handle goes on loading
// exact bytes, into registered buffers too, with a batch that was outstanding at the fork.
#include "gate.hpp"
#include "test_util.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <csignal>
#include <poll.h>
#include <thread>

using namespace kvblk_test;

namespace {

constexpr uint64_t kObj = 64 * KiB;
constexpr uint64_t kObjects = 16;

/*
 * Run @fn in a forked child, which returns 0 (all checks held) or the number of the first
 * failed check; the child's kvblk_last_error() comes back with it. A child that has not
 * finished after 60 s is killed and reported as check 255 (a hang is a failure, not a
 * ctest timeout).
 */
template <class F> std::pair<int, std::string> in_child(F fn)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return {254, "pipe2 failed"};
	const pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		const int code = fn();
		char msg[512];
		const int len = std::snprintf(msg, sizeof(msg), "%s", kvblk_last_error());
		if (write(p[1], msg, size_t(std::min(len, int(sizeof(msg)) - 1))) < 0)
			_exit(253);
		_exit(code);
	}
	close(p[1]);
	pollfd pfd{p[0], POLLIN, 0};
	std::string msg;
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
	for (;;) {
		const int r = poll(&pfd, 1, 100);
		if (r > 0) {
			char b[512];
			const ssize_t n = read(p[0], b, sizeof(b));
			if (n <= 0)
				break; /* the child is gone (EOF) */
			msg.append(b, size_t(n));
		}
		if (std::chrono::steady_clock::now() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, nullptr, 0);
			close(p[0]);
			return {255, "the child hung: " + msg};
		}
	}
	close(p[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status))
		return {256 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0), "the child died by a signal: " + msg};
	return {WEXITSTATUS(status), msg};
}

struct ForkCase {
	const char *name;
	kvblk_backend backend;
	uint32_t workers;
};

const ForkCase kForkCases[] = {
	{"psync", KVBLK_BACKEND_PSYNC, 0},
	{"threadpool", KVBLK_BACKEND_THREADPOOL, 4},
	{"uring1", KVBLK_BACKEND_URING, 1},
	{"uring2", KVBLK_BACKEND_URING, 2},
};

class ForkTest : public ::testing::TestWithParam<ForkCase> {
protected:
	void SetUp() override
	{
		path_ = dir_.file("store");
		write_pattern_file(path_, kObjects, kObj);
		opts_ = make_opts(GetParam().backend, GetParam().workers);
		dev_ = open_dev(path_, opts_);
		ASSERT_TRUE(dev_);
		ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, reg_.data(), reg_.size(), &buf_), 0)
			<< kvblk_last_error();
	}

	/* Load objects @first.. into the registered buffer and a plain one; both exact. */
	void load_exact(kvblk_dev *d, uint32_t buf, uint8_t *reg, uint64_t first, bool *ok)
	{
		AlignedBuf plain(2 * kObj);
		const kvblk_desc descs[] = {
			buf_desc(first * kObj, kObj, buf, 0, 1),
			buf_desc((first + 1) * kObj, kObj, buf, kObj, 2),
			plain_desc((first + 2) * kObj, 2 * kObj, plain.data(), 3),
		};
		kvblk_result r[3] = {};
		*ok = kvblk_load_many(d, descs, 3, r, nullptr) == 3 &&
		      std::memcmp(reg, expected_bytes(first * kObj, 2 * kObj, kObj).data(), 2 * kObj) == 0 &&
		      std::memcmp(plain.data(), expected_bytes((first + 2) * kObj, 2 * kObj, kObj).data(), 2 * kObj) ==
			      0;
	}

	TempDir dir_;
	std::string path_;
	kvblk_open_opts opts_{};
	DevPtr dev_;
	AlignedBuf reg_{2 * kObj, 0x5A};
	uint32_t buf_ = 0;
};

/* Every call on the inherited handle fails with -EBADFD and touches nothing. */
int child_checks(kvblk_dev *dev, uint32_t buf, uint8_t *reg, const std::string &path, const kvblk_open_opts &o,
		 uint64_t outstanding)
{
	int step = 0;
#define CHECK(cond)                                                                                                    \
	do {                                                                                                           \
		step++;                                                                                                \
		if (!(cond))                                                                                           \
			return step;                                                                                   \
	} while (0)
	AlignedBuf own(kObj, 0xC3);
	std::memset(reg, 0xC3, 2 * kObj); /* the child's copy of the registered buffer */
	kvblk_desc d[2] = {plain_desc(0, kObj, own.data(), 7), buf_desc(kObj, kObj, buf, 0, 8)};
	kvblk_result r[2] = {{11, 0, 0, 0}, {11, 0, 0, 0}};
	kvblk_batch_info bi = new_batch_info();
	bi.bad_index = 5;
	CHECK(kvblk_load_many(dev, d, 2, r, &bi) == -EBADFD);				/* 1 */
	CHECK(bi.bad_index == -1);							/* 2 */
	CHECK(std::strstr(kvblk_last_error(), "fork") != nullptr);			/* 3 */
	CHECK(own.all(0, kObj, 0xC3) && reg[0] == 0xC3 && reg[2 * kObj - 1] == 0xC3);	/* 4 */
	CHECK(kvblk_store_many(dev, d, 1, r, nullptr) == -EBADFD);			/* 5 */
	uint64_t ticket = 0;
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	CHECK(kvblk_submit(dev, d, 1, &so, &ticket) == -EBADFD && ticket == 0);	/* 6 */
	CHECK(so.bad_index == -1);							/* 7 */
	kvblk_cqe cqe[4];
	CHECK(kvblk_reap(dev, cqe, 4, 0, 0) == -EBADFD);				/* 8 */
	CHECK(kvblk_wait(dev, outstanding, 0, nullptr) == -EBADFD);			/* 9 */
	CHECK(kvblk_cancel(dev, outstanding) == -EBADFD);				/* 10 */
	CHECK(kvblk_event_fd(dev) == -EBADFD);						/* 11 */
	kvblk_dev_info info{};
	info.info_size = sizeof(info);
	CHECK(kvblk_get_info(dev, &info) == -EBADFD);					/* 12 */
	CHECK(kvblk_get_target_info(dev, 0, &info) == -EBADFD);			/* 13 */
	kvblk_stats st{};
	st.stats_size = sizeof(st);
	CHECK(kvblk_get_stats(dev, &st) == -EBADFD);					/* 14 */
	CHECK(kvblk_reset_stats(dev) == -EBADFD);					/* 15 */
	uint32_t id = 99;
	CHECK(kvblk_register_buffer(dev, KVBLK_MEM_HOST, own.data(), kObj, &id) == -EBADFD && id == 99); /* 16 */
	CHECK(kvblk_unregister_buffer(dev, buf) == -EBADFD);				/* 17 */
	CHECK(kvblk_add_target(dev, path.c_str(), 0, &id) == -EBADFD && id == 99);	/* 18 */
	CHECK(kvblk_add_target_fd(dev, 0, 0, &id) == -EBADFD);				/* 19 */
	CHECK(kvblk_remove_target(dev, 1) == -EBADFD);					/* 20 */
	CHECK(kvblk_set_staging(dev, 0, 0) == -EBADFD);					/* 21 */
	CHECK(kvblk_register_dmabuf(dev, 0, 0, 4096, &id) == -EBADFD);			/* 22 */
	CHECK(kvblk_flush(dev, 0, 0) == -EBADFD);					/* 23 */
	CHECK(kvblk_check_buffer(dev, buf) == -EBADFD);					/* 24 */
	CHECK(kvblk_shutdown(dev) == -EBADFD);						/* 25 */
	kvblk_close(dev); /* frees nothing of the parent's; must return */
	CHECK(true);									/* 26 */

#if defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer cannot start threads in a child of a multi-threaded fork (it exits 66):
	 * the handle of its own is checked in the plain and ASan builds. */
	(void)o;
	(void)r;
	return 0;
#endif
	/* A handle of its own works, plain and registered. */
	kvblk_dev *mine = nullptr;
	CHECK(kvblk_open(path.c_str(), &o, &mine) == 0);				/* 27 */
	uint32_t mybuf = 0;
	CHECK(kvblk_register_buffer(mine, KVBLK_MEM_HOST, reg, 2 * kObj, &mybuf) == 0); /* 28 */
	kvblk_desc md[2] = {plain_desc(3 * kObj, kObj, own.data(), 1), buf_desc(4 * kObj, kObj, mybuf, kObj, 2)};
	CHECK(kvblk_load_many(mine, md, 2, r, nullptr) == 2);				/* 29 */
	CHECK(std::memcmp(own.data(), expected_bytes(3 * kObj, kObj, kObj).data(), kObj) == 0); /* 30 */
	CHECK(std::memcmp(reg + kObj, expected_bytes(4 * kObj, kObj, kObj).data(), kObj) == 0); /* 31 */
	kvblk_close(mine);
#undef CHECK
	return 0;
}

TEST_P(ForkTest, child_gets_ebadfd_and_its_own_handle_works_parent_unharmed)
{
	bool ok = false;
	load_exact(dev_.get(), buf_, reg_.data(), 0, &ok);
	ASSERT_TRUE(ok) << kvblk_last_error();

	/* A batch outstanding across the fork: the parent takes it afterwards. */
	AlignedBuf pending(kObj, 0x11);
	const kvblk_desc pd = plain_desc(9 * kObj, kObj, pending.data(), 9);
	uint64_t ticket = 0;
	ASSERT_EQ(kvblk_submit(dev_.get(), &pd, 1, nullptr, &ticket), 0) << kvblk_last_error();

	kvblk_dev *dev = dev_.get();
	const auto [code, msg] = in_child([&] { return child_checks(dev, buf_, reg_.data(), path_, opts_, ticket); });
	EXPECT_EQ(code, 0) << "first failed check in the child: " << code << "; its last error: " << msg;

	ASSERT_EQ(kvblk_wait(dev_.get(), ticket, -1, nullptr), 1) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(pending.data(), expected_bytes(9 * kObj, kObj, kObj).data(), kObj), 0);
	for (uint64_t first = 0; first + 4 <= kObjects; first += 4) {
		std::memset(reg_.data(), 0, reg_.size());
		load_exact(dev_.get(), buf_, reg_.data(), first, &ok);
		ASSERT_TRUE(ok) << "parent load at object " << first << " after the fork: " << kvblk_last_error();
	}
	const kvblk_stats st = get_stats(dev_.get());
	EXPECT_EQ(st.errors_io + st.errors_other + st.errors_eagain, 0u);
	EXPECT_EQ(kvblk_unregister_buffer(dev_.get(), buf_), 0) << "the child unregistered the parent's buffer";
}

/* A child that only closes the inherited handle (what a C++ or Python destructor does). */
TEST_P(ForkTest, close_in_child_leaves_parent_working)
{
	kvblk_dev *dev = dev_.get();
	const auto [code, msg] = in_child([&] {
		kvblk_close(dev);
		return 0;
	});
	EXPECT_EQ(code, 0) << msg;
	bool ok = false;
	load_exact(dev_.get(), buf_, reg_.data(), 4, &ok);
	EXPECT_TRUE(ok) << kvblk_last_error();
}

/*
 * Whatever the parent's threads do at the fork: one holds the scheduler's lock (stopped in
 * the slot-wait seam, which runs under it), one waits in kvblk_reap(), one in kvblk_wait().
 * Every call in the child still returns -EBADFD at once (a lock copied held stays held
 * there), kvblk_close() of the copy returns, and the parent's threads end by
 * kvblk_shutdown() afterwards.
 */
TEST_P(ForkTest, child_gets_ebadfd_whatever_the_parent_threads_do)
{
	Gate in_lock;
	std::atomic<int> slot_waits{0};
	kvblk::testing::Seams s;
	s.on_slot_wait = [&] {
		if (slot_waits++ == 0)
			in_lock.wait(); /* holds the scheduler's mutex until opened */
	};
	SeamGuard sg(s);
	kvblk_open_opts o = opts_;
	o.max_batches = 1;
	DevPtr dev = open_dev(path_, o);
	ASSERT_TRUE(dev);
	GateOpener go{in_lock};
	AlignedBuf a(kObj), b(kObj), reg(2 * kObj);
	uint32_t buf = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &buf), 0);
	const kvblk_desc da = plain_desc(0, kObj, a.data(), 1), db = plain_desc(kObj, kObj, b.data(), 2);
	uint64_t ta = 0;
	ASSERT_EQ(kvblk_submit(dev.get(), &da, 1, nullptr, &ta), 0); /* holds the only slot until taken */
	kvblk_cqe c[4];
	auto reaper = std::async(std::launch::async, [&] { return kvblk_reap(dev.get(), c, 4, 4, -1); });
	auto submitter = std::async(std::launch::async, [&] {
		uint64_t t = 0;
		return kvblk_submit(dev.get(), &db, 1, nullptr, &t);
	});
	ASSERT_TRUE(in_lock.wait_arrived()) << "a parent thread holds the scheduler's lock";

	kvblk_dev *d = dev.get();
	const auto [code, msg] = in_child([&] { return child_checks(d, buf, reg.data(), path_, opts_, ta); });
	EXPECT_EQ(code, 0) << "first failed check in the child: " << code << "; its last error: " << msg;

	in_lock.open();
	ASSERT_EQ(kvblk_shutdown(dev.get()), 0);
	EXPECT_EQ(submitter.get(), -ECANCELED);
	const int reaped = reaper.get();
	EXPECT_TRUE(reaped == -ECANCELED || reaped == 1) << reaped; /* batch a's entry, if it was there */
}

INSTANTIATE_TEST_SUITE_P(Backends, ForkTest, ::testing::ValuesIn(kForkCases),
			 [](const ::testing::TestParamInfo<ForkCase> &i) { return std::string(i.param.name); });

} // namespace

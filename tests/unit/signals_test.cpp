// SPDX-License-Identifier: MIT
// Threads that libkvblk starts block every signal (libkvblk/threads.hpp): a process-directed
// signal is delivered to one of the program's threads, never to a dispatch, ring, lane,
// threadpool or copy-engine thread. Checked on the threads' own masks (SigBlk in
// /proc/self/task/TID/status), which is deterministic: which thread the kernel picks for a
// signal is not. The program's thread opens every device with nothing blocked, so a library
// thread that merely inherited its creator's mask fails the check.
#include "test_util.hpp"

#include "libkvblk/copy_engine.hpp"
#include "libkvblk/lanes.hpp"

#include <algorithm>
#include <csignal>
#include <dirent.h>
#include <fstream>
#include <sys/syscall.h>

using namespace kvblk_test;

namespace {

constexpr uint64_t kObj = 64 * KiB;

/* The signals a program typically handles or waits for; every one must be blocked. */
const int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPROF, SIGALRM, SIGPIPE};

/* Threads of the process before the test (a sanitizer's own thread, say): not checked. */
std::vector<long> g_before;

/* SigBlk of every thread of this process but the calling one and g_before: tid -> mask. */
std::vector<std::pair<long, uint64_t>> other_threads_masks()
{
	std::vector<std::pair<long, uint64_t>> out;
	const long self = syscall(SYS_gettid);
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return out;
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		const long tid = std::atol(e->d_name);
		if (tid == self || std::find(g_before.begin(), g_before.end(), tid) != g_before.end())
			continue;
		std::ifstream st(std::string("/proc/self/task/") + e->d_name + "/status");
		std::string line;
		while (std::getline(st, line))
			if (line.rfind("SigBlk:", 0) == 0)
				out.emplace_back(tid, std::stoull(line.substr(7), nullptr, 16));
	}
	closedir(d);
	return out;
}

/* At least @min_threads other threads exist, and every one blocks every signal of kSignals. */
void expect_library_threads_block_signals(size_t min_threads, const char *what)
{
	const auto masks = other_threads_masks();
	EXPECT_GE(masks.size(), min_threads) << what << ": the library threads were not found";
	for (const auto &[tid, mask] : masks)
		for (int sig : kSignals)
			EXPECT_TRUE(mask & (1ull << (sig - 1)))
				<< what << ": thread " << tid << " does not block signal " << sig << " (SigBlk " << std::hex
				<< mask << ")";
}

class SignalMaskTest : public StoreTest {
protected:
	void SetUp() override
	{
		StoreTest::SetUp();
		/* The creator blocks nothing: a thread that inherits its mask blocks nothing either. */
		sigset_t none;
		sigemptyset(&none);
		ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &none, nullptr), 0);
		g_before.clear();
		for (const auto &[tid, mask] : other_threads_masks())
			g_before.push_back(tid);
	}
};

/* Opens @b, runs one submitted batch (the dispatch thread of psync/threadpool is made then). */
void open_and_submit(const std::string &path, kvblk_backend b, uint32_t workers, DevPtr *out)
{
	*out = open_dev(path, make_opts(b, workers));
	ASSERT_TRUE(*out);
	AlignedBuf mem(kObj);
	const kvblk_desc d = plain_desc(0, kObj, mem.data(), 1);
	kvblk_submit_opts o;
	kvblk_submit_opts_init(&o, sizeof(o));
	uint64_t t = 0;
	ASSERT_EQ(kvblk_submit(out->get(), &d, 1, &o, &t), 0) << kvblk_last_error();
	ASSERT_EQ(kvblk_wait(out->get(), t, -1, nullptr), 1) << kvblk_last_error();
}

TEST_F(SignalMaskTest, dispatch_and_threadpool_threads_block_signals)
{
	DevPtr psync, pool;
	open_and_submit(path_, KVBLK_BACKEND_PSYNC, 0, &psync);
	expect_library_threads_block_signals(1, "psync dispatch thread");
	open_and_submit(path_, KVBLK_BACKEND_THREADPOOL, 3, &pool);
	expect_library_threads_block_signals(1 + 3 + 1, "threadpool workers and dispatch thread");
}

TEST_F(SignalMaskTest, ring_threads_block_signals)
{
	DevPtr uring;
	open_and_submit(path_, KVBLK_BACKEND_URING, 2, &uring);
	expect_library_threads_block_signals(2, "io_uring ring threads");
}

TEST_F(SignalMaskTest, lane_and_copy_engine_threads_block_signals)
{
	kvblk::detail::BackendConfig c;
	c.fd = -1;
	c.path = "lane";
	c.logical_block_size = 512;
	c.mem_align = 512;
	c.max_cmd_bytes = 64 * KiB;
	c.queue_depth = 4;
	c.workers = 1;
	int err = 0;
	auto psync = kvblk::detail::make_psync_backend(c, &err);
	ASSERT_TRUE(psync) << err;
	kvblk::detail::Lanes lanes(std::move(psync), nullptr);
	auto lane1 = kvblk::detail::make_psync_backend(c, &err);
	ASSERT_TRUE(lane1) << err;
	lanes.add_lane(std::move(lane1));
	kvblk::detail::HostCopyEngine engine{kvblk::detail::HostCopyEngine::Options{}};
	expect_library_threads_block_signals(2, "lane thread and host copy engine thread");
}

} // namespace

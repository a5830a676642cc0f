// SPDX-License-Identifier: MIT
// The reaper thread: the only caller of kvblk_reap() on the store's kvblk_dev. Each of the
// store's asynchronous libkvblk batches carries its IoOp in user_data; the thread hands every
// per-object entry and the batch entry to it. It sleeps in poll(2) on libkvblk's eventfd and
// a wake-up eventfd of its own (close). The checksum threads run what verify_post() queues.
#include "store.hpp"

#include <algorithm>
#include <cerrno>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace kvblk::kvstore {
namespace {

void reaper_main(Store &s)
{
	const int dev_fd = kvblk_event_fd(s.dev);
	kvblk_cqe cqes[256];
	for (;;) {
		const int n = kvblk_reap(s.dev, cqes, 256, 0, 0);
		for (int i = 0; i < n; i++) {
			auto *op = reinterpret_cast<IoOp *>(uintptr_t(cqes[i].user_data));
			if (cqes[i].flags & KVBLK_CQE_BATCH)
				op->on_batch(cqes[i]);
			else
				op->on_object(cqes[i]);
		}
		if (n > 0)
			continue;
		{
			std::lock_guard<std::mutex> lk(s.io_mu);
			if (s.reaper_stop.load() && s.ios_in_flight == 0)
				return;
		}
		pollfd p[2] = {{dev_fd, POLLIN, 0}, {s.wake_fd, POLLIN, 0}};
		if (poll(p, 2, 1000) > 0 && (p[1].revents & POLLIN)) {
			uint64_t v;
			if (read(s.wake_fd, &v, sizeof(v)) < 0) {
				/* EAGAIN: another wake-up took it. */
			}
		}
	}
}

void verifier_main(Store &s)
{
	std::unique_lock<std::mutex> lk(s.verify_mu);
	for (;;) {
		s.verify_cv.wait(lk, [&] { return s.verify_stop || !s.verify_q.empty(); });
		if (s.verify_q.empty())
			return; /* stop, and nothing left */
		std::function<void()> fn = std::move(s.verify_q.front());
		s.verify_q.pop_front();
		lk.unlock();
		fn();
		lk.lock();
	}
}

} // namespace

void stop_verifiers(Store &s)
{
	{
		std::lock_guard<std::mutex> lk(s.verify_mu);
		s.verify_stop = true;
	}
	s.verify_cv.notify_all();
	for (std::thread &t : s.verifiers)
		t.join();
	s.verifiers.clear();
}

bool verify_post(Store &s, std::function<void()> fn) noexcept
{
	if (s.verifiers.empty())
		return false;
	try {
		std::lock_guard<std::mutex> lk(s.verify_mu);
		s.verify_q.push_back(std::move(fn));
	} catch (...) {
		return false;
	}
	s.verify_cv.notify_one();
	return true;
}

int submit_io(Store &s, IoOp *op, const kvblk_desc *descs, uint32_t n, uint32_t flags, kvblk_result *results,
	      int32_t *bad_index)
{
	kvblk_submit_opts o;
	kvblk_submit_opts_init(&o, sizeof(o));
	o.flags = flags;
	o.user_data = uint64_t(uintptr_t(op));
	o.results = results;
	{
		std::lock_guard<std::mutex> lk(s.io_mu);
		s.ios_in_flight++;
	}
	uint64_t ticket;
	const int ret = kvblk_submit(s.dev, descs, n, &o, &ticket);
	if (bad_index)
		*bad_index = o.bad_index;
	if (ret) {
		const std::string why = kvblk_last_error();
		io_ended(s);
		return fail(ret, "%s", why.c_str());
	}
	return 0;
}

void io_ended(Store &s) noexcept
{
	std::lock_guard<std::mutex> lk(s.io_mu);
	s.ios_in_flight--;
	s.io_cv.notify_all();
}

int start_reaper(Store &s)
{
	s.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s.wake_fd < 0)
		return fail(-errno, "kvblk store: eventfd: %s", errno_name(errno).c_str());
	/* Library threads take no process-directed signals. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	/*
	 * One checksum thread per CPU beside the reaper, at most 4 (ISA-L's CRC32C runs at
	 * memory speed, about 20 GB/s a core; 4 keep ahead of a PCIe 5 drive). None on one CPU:
	 * the reaper checks everything itself. A thread that cannot start leaves fewer.
	 */
	const unsigned n = std::min(4u, std::thread::hardware_concurrency());
	for (unsigned i = 0; n > 1 && i < n; i++) {
		try {
			s.verifiers.emplace_back([&s] { verifier_main(s); });
		} catch (const std::system_error &) {
			break;
		}
	}
	try {
		s.reaper = std::thread([&s] { reaper_main(s); });
	} catch (const std::system_error &e) {
		pthread_sigmask(SIG_SETMASK, &old, nullptr);
		stop_verifiers(s);
		return fail(-EAGAIN, "kvblk store: cannot start its reaper thread: %s", e.what());
	}
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return 0;
}

void stop_reaper(Store &s)
{
	if (!s.reaper.joinable())
		return;
	s.reaper_stop.store(true);
	const uint64_t one = 1;
	if (write(s.wake_fd, &one, sizeof(one)) < 0) {
		/* The counter cannot overflow here; nothing to do. */
	}
	s.reaper.join();
	/* No IoOp is left, so no check is queued or running. */
	stop_verifiers(s);
}

} // namespace kvblk::kvstore

// SPDX-License-Identifier: MIT
// The threads libkvblk starts (dispatch, io_uring rings, the kmod ring, lanes, the threadpool,
// the test copy engine) are the library's, not the program's: they run with every signal
// blocked, so that a process-directed signal (SIGINT, SIGTERM, SIGCHLD, SIGPROF, ...) goes to
// one of the program's threads, where its handler, sigwait(2) or signalfd(2) expects it, and
// never interrupts a library thread's system calls. Faults (SIGSEGV, SIGBUS, ...) raised by a
// library thread itself are still delivered to it: the kernel does not hold back a signal
// that the thread's own instruction caused.
#pragma once

#include <csignal>
#include <pthread.h>
#include <thread>
#include <utility>

namespace kvblk::detail {

/*
 * std::thread(@fn) with every signal blocked from its first instruction: the new thread
 * inherits the mask of the creating thread, which has every signal blocked for the duration
 * of the creation only. Throws what std::thread throws (std::system_error).
 */
template <class F> std::thread start_library_thread(F &&fn)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	struct Restore {
		const sigset_t &old;
		~Restore() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
	} restore{old};
	return std::thread(std::forward<F>(fn));
}

} // namespace kvblk::detail

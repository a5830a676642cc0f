// SPDX-License-Identifier: MIT
// A wait that a signal handler interrupts: kvblk_reap() and kvblk_wait() sleep on a futex
// word (a sequence number that the scheduler bumps, under its mutex, whenever what a waiter
// waits for may have changed) rather than on a std::condition_variable, whose wait absorbs
// EINTR. The data itself stays under the scheduler's mutex: the futex only sleeps and wakes.
//
// The wait always has an absolute CLOCK_MONOTONIC deadline (a far one for "no limit"): the
// kernel then ends it with EINTR whenever a signal handler runs on the thread, whether the
// handler was installed with SA_RESTART or not (as poll(2) and sem_wait(3) do), instead of
// restarting it.
#pragma once

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <ctime>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kvblk::detail {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
	      "a futex word must be a plain 32-bit integer");

/* A deadline that never comes (CLOCK_MONOTONIC ns, about 146 years after boot). */
inline constexpr uint64_t kNoDeadline = uint64_t(1) << 62;

/* Wake every thread sleeping in futex_wait_until() on @word. */
inline void futex_wake_all(std::atomic<uint32_t> &word) noexcept
{
	syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

/*
 * Sleep while @word holds @seen, at most until @deadline_ns (CLOCK_MONOTONIC). Returns 0 when
 * woken, when @word no longer holds @seen, or spuriously (the caller checks its condition
 * again); -ETIMEDOUT once the deadline has passed; -EINTR when a signal handler ran on this
 * thread.
 */
inline int futex_wait_until(std::atomic<uint32_t> &word, uint32_t seen, uint64_t deadline_ns) noexcept
{
	const timespec ts{time_t(deadline_ns / 1000000000u), long(deadline_ns % 1000000000u)};
	const long r = syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT_BITSET_PRIVATE, seen, &ts,
			       nullptr, FUTEX_BITSET_MATCH_ANY);
	if (r == 0)
		return 0;
	switch (errno) {
	case ETIMEDOUT:
		return -ETIMEDOUT;
	case EINTR:
		return -EINTR;
	default: /* EAGAIN: @word changed before the sleep */
		return 0;
	}
}

} // namespace kvblk::detail

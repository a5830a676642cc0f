// SPDX-License-Identifier: MIT
// A handle belongs to the process that opened it. After fork(2) the child holds a copy of
// the handle whose rings, threads, kvblk.ko context and registrations are the parent's (or
// gone: the child has none of the parent's threads, and locks held by them at the fork stay
// held in the child). Every public call on such a copy fails with -EBADFD before it reads
// anything of the handle but these two numbers; kvblk_close() on it frees nothing.
#pragma once

#include <cstdint>
#include <sys/types.h>

namespace kvblk::detail {

/**
 * struct Owner - the process a handle belongs to.
 * @pid: getpid() at kvblk_open() (also catches a child made by a raw clone(2), which runs
 *       no pthread_atfork() handler).
 * @gen: fork_generation() at kvblk_open() (also catches a grandchild whose pid happens to
 *       equal the opener's after the opener exited).
 */
struct Owner {
	pid_t pid = 0;
	uint64_t gen = 0;
};

/* The calling process: arms the pthread_atfork() handler on first use. */
Owner current_owner() noexcept;

/* Whether the calling process is @o's (one atomic load and getpid()). */
bool owned_by_caller(const Owner &o) noexcept;

/*
 * 0 when the calling process owns the handle; else -EBADFD with kvblk_last_error() naming
 * @fn, the opener's pid and what to do instead.
 */
int check_owner(const Owner &o, const char *fn) noexcept;

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
#include "fork_guard.hpp"

#include "last_error.hpp"

#include <atomic>
#include <cerrno>
#include <mutex>
#include <pthread.h>
#include <unistd.h>

namespace kvblk::detail {
namespace {

/* +1 in every child made by fork(2) (glibc runs the handler in the child before fork returns). */
std::atomic<uint64_t> g_generation{0};

void on_fork_child() noexcept
{
	g_generation.fetch_add(1, std::memory_order_relaxed);
}

void arm() noexcept
{
	static std::once_flag once;
	std::call_once(once, [] { pthread_atfork(nullptr, nullptr, on_fork_child); });
}

} // namespace

Owner current_owner() noexcept
{
	arm();
	return Owner{getpid(), g_generation.load(std::memory_order_relaxed)};
}

bool owned_by_caller(const Owner &o) noexcept
{
	return o.gen == g_generation.load(std::memory_order_relaxed) && o.pid == getpid();
}

int check_owner(const Owner &o, const char *fn) noexcept
{
	if (owned_by_caller(o))
		return 0;
	return fail(-EBADFD,
		    "%s: this handle was opened by process %d and was inherited through fork(); it "
		    "cannot be used in process %d (its rings, threads and registrations are the "
		    "opener's): open a handle of its own with kvblk_open() here",
		    fn, int(o.pid), int(getpid()));
}

} // namespace kvblk::detail

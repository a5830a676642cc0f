// SPDX-License-Identifier: MIT
// The C API of libkvblk: versions and names, open/close, device info and stats. Opening's
// work is in open.cpp, buffer registration in registration.cpp, batches (kvblk_submit() and
// the calls built on it) in submit.cpp.
#include "async.hpp"
#include "backend.hpp"
#include "buffers.hpp"
#include "device.hpp"
#include "lanes.hpp"
#include "last_error.hpp"
#include "mapping.hpp"
#include "open.hpp"
#include "struct_size.hpp"
#include "target.hpp"
#include "testing.hpp"

#include <kvblk/kvblk.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unistd.h>
#include <vector>

using namespace kvblk::detail;

namespace {

#define KVBLK_STRINGIFY_(x) #x
#define KVBLK_STRINGIFY(x) KVBLK_STRINGIFY_(x)
constexpr const char *kVersion = KVBLK_STRINGIFY(KVBLK_VERSION_MAJOR) "." KVBLK_STRINGIFY(
	KVBLK_VERSION_MINOR) "." KVBLK_STRINGIFY(KVBLK_VERSION_PATCH);

constexpr const char *kBackendNames[KVBLK_BACKEND_MAX] = {
	"auto", "uring", "threadpool", "psync", "kmod", "uring_cmd",
};

constexpr const char *kPathNames[KVBLK_PATH_MAX] = {"host", "p2p", "staged"};

} // namespace

namespace kvblk::detail {

int fail_device_kind_of(kvblk_backend b, int kind) noexcept
{
	const char *name = b < KVBLK_BACKEND_MAX ? kBackendNames[b] : "unknown";
	if (kind == KVBLK_MEM_DMABUF)
		return fail(-EOPNOTSUPP,
			    "dma-buf destinations need the kmod backend with a kvblk.ko that reports "
			    "KVBLK_FEAT_MEM_DMABUF: backend %s has no CPU path into a dma-buf",
			    name);
	return fail(-EOPNOTSUPP, "backend %s cannot DMA into CUDA memory", name);
}

} // namespace kvblk::detail

extern "C" {

const char *kvblk_version(void) noexcept
{
	return kVersion;
}

int kvblk_check_version(int major, int minor) noexcept
{
	return major == KVBLK_VERSION_MAJOR && minor >= 0 && minor <= KVBLK_VERSION_MINOR;
}

const char *kvblk_last_error(void) noexcept
{
	return last_error();
}

const char *kvblk_path_name(int path) noexcept
{
	if (path < 0 || path >= KVBLK_PATH_MAX)
		return "unknown";
	return kPathNames[path];
}

const char *kvblk_backend_name(int backend) noexcept
{
	if (backend < 0 || backend >= KVBLK_BACKEND_MAX)
		return "unknown";
	return kBackendNames[backend];
}

int kvblk_backend_from_name(const char *name) noexcept
{
	if (name)
		for (int i = 0; i < KVBLK_BACKEND_MAX; i++)
			if (std::strcmp(name, kBackendNames[i]) == 0)
				return i;
	return fail(-EINVAL, "backend name \"%s\" is not one of auto, uring, threadpool, psync, kmod, uring_cmd",
		    name ? name : "(null)");
}

void kvblk_open_opts_init(struct kvblk_open_opts *opts, size_t size) noexcept
{
	if (!opts || size < sizeof(size_t))
		return;
	std::memset(opts, 0, size);
	opts->opts_size = size;
}

int kvblk_open(const char *path, const struct kvblk_open_opts *opts, kvblk_dev **out) noexcept
{
	try {
		return open_device(path, opts, out);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_open: out of memory");
	} catch (...) {
		return fail(-ENOMEM, "kvblk_open: unexpected failure");
	}
}

void kvblk_close(kvblk_dev *dev) noexcept
{
	if (!dev)
		return;
	/*
	 * A copy inherited through fork(): its rings, kvblk.ko context and registrations are the
	 * parent's and its threads do not exist here. Nothing is torn down (that would unregister
	 * the parent's buffers or wait for threads that are not there) and nothing is freed (a
	 * lock a parent thread held at the fork stays held); the child's copies of the handle's
	 * file descriptors (all O_CLOEXEC) close when the child execs or exits.
	 */
	if (!owned_by_caller(dev->owner))
		return;
	/* Queued batches end -ECANCELED, batches in flight are waited for; then the threads go. */
	dev->sched->close();
	dev->sched.reset();
	dev->stager.release_pool(*dev->backend, dev->buffers); /* waits for its copies */
	dev->backend.reset(); /* joins its threads, tears down rings and their fixed buffers */
	delete dev;	      /* closes every target */
}

int kvblk_get_info(kvblk_dev *dev, struct kvblk_dev_info *info) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_get_info") : 0)
		return owner;
	if (!dev || !info)
		return fail(-EINVAL, "kvblk_get_info: NULL %s", dev ? "info" : "dev");
	int ret = check_output_size("kvblk_get_info", "info_size", info->info_size, KVBLK_DEV_INFO_SIZE_V0_2);
	if (ret)
		return ret;
	kvblk_dev_info i = dev->info;
	i.targets = dev->targets.count();
	copy_out(info, info->info_size, &i, sizeof(i));
	return 0;
}

int kvblk_get_stats(kvblk_dev *dev, struct kvblk_stats *stats) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_get_stats") : 0)
		return owner;
	if (!dev || !stats)
		return fail(-EINVAL, "kvblk_get_stats: NULL %s", dev ? "stats" : "dev");
	int ret = check_output_size("kvblk_get_stats", "stats_size", stats->stats_size, KVBLK_STATS_SIZE_V0_1);
	if (ret)
		return ret;
	kvblk_stats s{};
	s.stats_size = sizeof(s);
	dev->stats.snapshot(&s);
	s.staging_pool_bytes = dev->stager.pool_bytes();
	copy_out(stats, stats->stats_size, &s, sizeof(s));
	return 0;
}

int kvblk_reset_stats(kvblk_dev *dev) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_reset_stats") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_reset_stats: NULL dev");
	dev->stats.reset();
	return 0;
}

} // extern "C"

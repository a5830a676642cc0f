// SPDX-License-Identifier: MIT
// The C API of libkvblk: open/close, backend choice, buffer registration and the small
// query functions. Batches (kvblk_submit() and the calls built on it) are in submit.cpp.
#include "async.hpp"
#include "backend.hpp"
#include "buffers.hpp"
#include "device.hpp"
#include "lanes.hpp"
#include "last_error.hpp"
#include "mapping.hpp"
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

using ull = unsigned long long;

#define KVBLK_STRINGIFY_(x) #x
#define KVBLK_STRINGIFY(x) KVBLK_STRINGIFY_(x)
constexpr const char *kVersion = KVBLK_STRINGIFY(KVBLK_VERSION_MAJOR) "." KVBLK_STRINGIFY(
	KVBLK_VERSION_MINOR) "." KVBLK_STRINGIFY(KVBLK_VERSION_PATCH);

constexpr const char *kBackendNames[KVBLK_BACKEND_MAX] = {
	"auto", "uring", "threadpool", "psync", "kmod", "uring_cmd",
};

constexpr const char *kKmodNode = "/dev/kvblk";

constexpr const char *kPathNames[KVBLK_PATH_MAX] = {"host", "p2p", "staged"};

/* The backend to serve the device and why. */
struct BackendChoice {
	kvblk_backend backend = KVBLK_BACKEND_AUTO;
	std::string reason;
};

/* Explicit option, else KVBLK_BACKEND, else AUTO (decided once the target is open). */
int resolve_requested_backend(uint32_t requested, BackendChoice *c)
{
	c->backend = kvblk_backend(requested);
	if (requested != KVBLK_BACKEND_AUTO) {
		c->reason = std::string(kBackendNames[requested]) + ": requested in kvblk_open_opts.backend";
	} else if (const char *env = std::getenv("KVBLK_BACKEND"); env && *env) {
		int b = kvblk_backend_from_name(env);
		if (b < 0)
			return fail(-EINVAL,
				    "KVBLK_BACKEND=%s is not a backend (auto, uring, threadpool, psync, kmod, uring_cmd)",
				    env);
		c->backend = kvblk_backend(b);
		if (b != KVBLK_BACKEND_AUTO)
			c->reason = std::string(kBackendNames[b]) + ": KVBLK_BACKEND=" + env;
	}
	return 0;
}

/*
 * AUTO: uring_cmd for an NVMe generic char device (nothing else can serve it); kmod for a
 * whole PCIe NVMe namespace when kvblk.ko is loaded and the page cache is not asked for;
 * else uring. The reason names what decided it.
 */
void choose_auto_backend(const Target &t, BackendChoice *c)
{
	const kvblk::testing::Seams *s = kvblk::testing::active();
	const char *node = s && s->kmod_node ? s->kmod_node : kKmodNode;
	c->backend = KVBLK_BACKEND_URING;
	if (t.nvme_generic) {
		c->backend = KVBLK_BACKEND_URING_CMD;
		c->reason = "uring_cmd: " + t.path + " is an NVMe generic char device, which only uring_cmd serves";
	} else if (access(node, F_OK) != 0) {
		c->reason = std::string("uring: ") + node + " not present (kvblk.ko not loaded)";
	} else if (!t.nvme_pcie_namespace) {
		c->reason = "uring: " + t.path + " " + t.not_nvme_pcie;
	} else if (t.buffered) {
		c->reason = "uring: KVBLK_OPEN_BUFFERED asks for the page cache, which kvblk.ko bypasses";
	} else {
		c->backend = KVBLK_BACKEND_KMOD;
		c->reason = "kmod: " + t.path + " is a PCIe NVMe namespace and " + node + " is present";
	}
}

/* Backends that cannot serve @t at all: 0, or -EOPNOTSUPP with the reason. */
int check_backend_fits(kvblk_backend b, const Target &t)
{
	const char *name = kvblk_backend_name(b);
	if (t.nvme_generic && b != KVBLK_BACKEND_URING_CMD)
		return fail(-EOPNOTSUPP,
			    "%s is an NVMe generic char device: only the uring_cmd backend serves it "
			    "(backend %s was asked for; open the block device /dev/%s instead)",
			    t.path.c_str(), name, t.disk.c_str());
	if (t.buffered && (b == KVBLK_BACKEND_KMOD || b == KVBLK_BACKEND_URING_CMD))
		return fail(-EOPNOTSUPP,
			    "backend %s always bypasses the page cache: KVBLK_OPEN_BUFFERED cannot be honoured",
			    name);
	return 0;
}

/* Range checks of the options that need no target. */
int check_options(const kvblk_open_opts &o)
{
	if (o.flags & ~KVBLK_OPEN_FLAGS_ALL)
		return fail(-EINVAL, "kvblk_open: unknown flags 0x%x", o.flags & ~KVBLK_OPEN_FLAGS_ALL);
	if (o.backend >= KVBLK_BACKEND_MAX)
		return fail(-EINVAL, "kvblk_open: backend %u is not an enum kvblk_backend", o.backend);
	if (o.queue_depth > KVBLK_MAX_QUEUE_DEPTH)
		return fail(-EINVAL, "kvblk_open: queue_depth %u is out of range 1..%u", o.queue_depth,
			    KVBLK_MAX_QUEUE_DEPTH);
	if (o.workers > KVBLK_MAX_WORKERS)
		return fail(-EINVAL, "kvblk_open: workers %u is out of range 1..%u", o.workers, KVBLK_MAX_WORKERS);
	if (o.max_descs > KVBLK_MAX_DESCS_LIMIT)
		return fail(-EINVAL, "kvblk_open: max_descs %u is out of range 1..%u", o.max_descs,
			    KVBLK_MAX_DESCS_LIMIT);
	if (o.max_cmd_bytes && o.max_cmd_bytes < 4096)
		return fail(-EINVAL, "kvblk_open: max_cmd_bytes %llu is below 4096", ull(o.max_cmd_bytes));
	if ((o.flags & KVBLK_OPEN_CREATE) && !(o.flags & KVBLK_OPEN_WRITE))
		return fail(-EINVAL, "kvblk_open: KVBLK_OPEN_CREATE needs KVBLK_OPEN_WRITE (a file created for "
				     "loads only would hold nothing)");
	if ((o.flags & KVBLK_OPEN_CREATE) && o.create_bytes == 0)
		return fail(-EINVAL, "kvblk_open: KVBLK_OPEN_CREATE needs create_bytes > 0");
	if (o.max_batches > KVBLK_MAX_BATCHES)
		return fail(-EINVAL, "kvblk_open: max_batches %u is out of range 1..%u", o.max_batches,
			    KVBLK_MAX_BATCHES);
	if (o.reserved)
		return fail(-EINVAL, "kvblk_open: reserved is %u, must be 0", o.reserved);
	return 0;
}

/*
 * Effective largest command: a multiple of the block size, within the device's limit and
 * 1 GiB. @dflt when the caller left max_cmd_bytes 0 (0: the device's limit).
 */
int effective_max_cmd(const kvblk_open_opts &o, const Target &t, uint64_t dflt, uint64_t *out)
{
	const uint32_t lbs = t.logical_block_size;
	uint64_t v = o.max_cmd_bytes ? o.max_cmd_bytes : dflt ? dflt : kMaxCmdBytesLimit;
	if (v % lbs)
		return fail(-EINVAL, "kvblk_open: max_cmd_bytes %llu is not a multiple of the logical block size %u",
			    ull(v), lbs);
	uint64_t limit = kMaxCmdBytesLimit;
	if (t.device_max_cmd_bytes)
		limit = std::min(limit, t.device_max_cmd_bytes);
	limit -= limit % lbs;
	if (limit < lbs)
		limit = lbs;
	*out = std::min(v, limit);
	return 0;
}

std::unique_ptr<Backend> create_backend(kvblk_backend b, BackendConfig &cfg, int *err)
{
	switch (b) {
	case KVBLK_BACKEND_KMOD:
		return make_kmod_backend(cfg, err);
	case KVBLK_BACKEND_URING_CMD:
		return make_uring_cmd_backend(cfg, err);
	case KVBLK_BACKEND_URING:
		return make_uring_backend(cfg, err);
	case KVBLK_BACKEND_THREADPOOL:
		return make_threadpool_backend(cfg, err);
	case KVBLK_BACKEND_PSYNC:
		return make_psync_backend(cfg, err);
	default:
		*err = fail(-EOPNOTSUPP, "backend %s is not implemented in this libkvblk", kvblk_backend_name(b));
		return nullptr;
	}
}

int open_device(const char *path, const kvblk_open_opts *user_opts, kvblk_dev **out)
{
	if (!path || !out)
		return fail(-EINVAL, "kvblk_open: NULL %s", path ? "out" : "path");
	kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	if (user_opts) {
		/* 0.2 callers pass the smaller size; a newer caller's extra fields must be 0. */
		int ret = check_input_size("kvblk_open", "opts_size", user_opts, user_opts->opts_size,
					   KVBLK_OPEN_OPTS_SIZE_V0_2, sizeof(o));
		if (ret)
			return ret;
		copy_in(&o, sizeof(o), user_opts, user_opts->opts_size);
	}
	int ret = check_options(o);
	if (ret)
		return ret;
	BackendChoice choice;
	ret = resolve_requested_backend(o.backend, &choice);
	if (ret)
		return ret;

	auto dev = std::make_unique<kvblk_dev>();
	dev->owner = current_owner();
	auto entry = std::make_unique<TargetEntry>();
	ret = open_target(path, o.flags, o.create_bytes, &entry->t);
	if (ret)
		return ret;
	entry->size = entry->t.capacity;
	dev->targets.install0(std::move(entry)); /* closed with the device from here on */
	const Target &t = dev->t0();
	const bool automatic = choice.backend == KVBLK_BACKEND_AUTO;
	if (automatic)
		choose_auto_backend(t, &choice);
	ret = check_backend_fits(choice.backend, t);
	if (ret)
		return ret;

	BackendConfig cfg;
	describe_target(cfg, t);
	cfg.eagain_retries = o.eagain_retries ? o.eagain_retries : KVBLK_DEFAULT_EAGAIN_RETRIES;
	switch (choice.backend) {
	case KVBLK_BACKEND_URING:
	case KVBLK_BACKEND_URING_CMD:
	case KVBLK_BACKEND_KMOD: /* its stores go through uring; loads report kvblk.ko's cap */
		cfg.queue_depth = o.queue_depth ? o.queue_depth : KVBLK_DEFAULT_QUEUE_DEPTH;
		cfg.workers = o.workers ? o.workers : KVBLK_DEFAULT_WORKERS;
		break;
	case KVBLK_BACKEND_THREADPOOL:
		cfg.queue_depth = 1; /* each thread keeps one command in flight */
		cfg.workers = o.workers ? o.workers : KVBLK_DEFAULT_THREADS;
		break;
	default:
		cfg.queue_depth = 1;
		cfg.workers = 1;
		break;
	}
	const uint32_t requested_qd = cfg.queue_depth;
	/* kmod: the kernel splits objects itself; by default at its own limit. */
	const uint64_t dflt_cmd = choice.backend == KVBLK_BACKEND_KMOD ? 0 : KVBLK_DEFAULT_MAX_CMD_BYTES;
	ret = effective_max_cmd(o, t, dflt_cmd, &cfg.max_cmd_bytes);
	if (!ret)
		dev->backend = create_backend(choice.backend, cfg, &ret);
	if (ret && automatic && choice.backend == KVBLK_BACKEND_KMOD) {
		/* AUTO never fails for want of kvblk.ko: uring serves, and the reason says why. */
		choice.backend = KVBLK_BACKEND_URING;
		choice.reason = "uring: kvblk.ko cannot serve " + t.path + ": " + last_error();
		cfg.note.clear();
		cfg.queue_depth = o.queue_depth ? o.queue_depth : KVBLK_DEFAULT_QUEUE_DEPTH;
		ret = effective_max_cmd(o, t, KVBLK_DEFAULT_MAX_CMD_BYTES, &cfg.max_cmd_bytes);
		if (!ret)
			dev->backend = create_backend(choice.backend, cfg, &ret);
	}
	if (ret)
		return ret;
	dev->targets.t0().max_cmd_bytes = cfg.max_cmd_bytes;
	dev->targets.t0().queue_depth = cfg.queue_depth;
	dev->targets.t0().workers = cfg.workers;
	dev->config = cfg;
	/*
	 * A kmod device serves the targets added later on lanes of their own (lanes.cpp). The
	 * kmod backend reports kvblk.ko's max_inflight as its queue depth; the lanes' uring rings
	 * (and their stores) take the depth that was asked for, as the device's own stores do.
	 */
	if (choice.backend == KVBLK_BACKEND_KMOD) {
		BackendConfig lane_base = cfg;
		lane_base.queue_depth = requested_qd;
		dev->backend = make_kmod_lanes(std::move(dev->backend), lane_base);
	}

	kvblk_dev_info &info = dev->info;
	info.info_size = sizeof(info);
	info.backend = choice.backend;
	info.flags = (t.blockdev ? KVBLK_INFO_BLOCKDEV : 0) | (t.buffered ? KVBLK_INFO_BUFFERED : 0) |
		     (t.writable ? KVBLK_INFO_WRITABLE : 0);
	info.logical_block_size = t.logical_block_size;
	info.mem_align = t.mem_align;
	info.capacity = t.capacity;
	info.max_cmd_bytes = cfg.max_cmd_bytes;
	info.queue_depth = cfg.queue_depth;
	info.workers = cfg.workers;
	info.max_descs = o.max_descs ? o.max_descs : KVBLK_DEFAULT_MAX_DESCS;
	if (!cfg.note.empty())
		choice.reason += "; " + cfg.note;
	std::snprintf(info.backend_reason, sizeof(info.backend_reason), "%s", choice.reason.c_str());
	info.async = dev->backend->async_mode();
	info.max_batches = o.max_batches ? o.max_batches : KVBLK_DEFAULT_MAX_BATCHES;
	info.targets = 1;

	kvblk_dev *d = dev.get();
	/* The dispatch thread: a staged batch holds the staging pool (io_mutex) while it runs. */
	auto run_sync = [d](Job &job) {
		if (job.path != KVBLK_PATH_STAGED)
			return d->backend->run(job.batch);
		std::lock_guard<std::mutex> io(d->io_mutex);
		const int ret = d->stager.run(*d->backend, job.batch);
		job.note = d->stager.copy_note();
		return ret;
	};
	dev->sched = std::make_unique<Scheduler>(*dev->backend, dev->stats, info.max_batches, run_sync);
	ret = dev->sched->init();
	if (ret) {
		dev->sched.reset();
		dev->backend.reset();
		return ret; /* the targets close with the device */
	}
	*out = dev.release();
	return 0;
}

/*
 * Register CUDA memory [base, base + len) in the reserved slot @slot: P2P when the backend
 * can, else staged. 0, or -errno with the message set (the caller releases the slot).
 */
int register_cuda(kvblk_dev *dev, uint32_t slot, uint8_t *base, uint64_t len, uint32_t *path)
{
	const uint64_t addr = uint64_t(uintptr_t(base));
	int ret = dev->backend->register_device_buffer(slot, KVBLK_MEM_CUDA, -1, addr, len);
	if (ret == 0) {
		*path = KVBLK_PATH_P2P;
		return 0;
	}
	if (ret != -EOPNOTSUPP)
		return ret;
	const bool kmod = dev->backend->kind() == KVBLK_BACKEND_KMOD;
	const std::string why = last_error();

	std::lock_guard<std::mutex> io(dev->io_mutex);
	ret = dev->stager.ensure_engine();
	if (ret)
		return ret;
	std::string bad;
	ret = dev->stager.engine()->check_device_range(addr, len, &bad);
	if (ret)
		return fail(ret, "kvblk_register_buffer: KVBLK_MEM_CUDA range %p + %llu: %s", static_cast<void *>(base),
			    ull(len), bad.c_str());
	ret = dev->stager.ensure_pool(*dev->backend, dev->buffers, dev->t0().logical_block_size,
				      dev->t0().mem_align);
	if (ret)
		return ret;
	dev->staged_buffers++;
	if (kmod)
		dev->stats.record_p2p_fallback();
	*path = KVBLK_PATH_STAGED;
	set_last_error("buffer %u: CUDA memory is loaded through the staged path (%s; %u pinned bounce buffers of "
		       "%llu bytes, copies by %s)",
		       slot, why.c_str(), dev->stager.buffers(), ull(dev->stager.buffer_bytes()),
		       dev->stager.engine()->name().c_str());
	return 0;
}

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
	dev->sched->shutdown();
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

int kvblk_register_buffer(kvblk_dev *dev, int kind, void *addr, uint64_t len, uint32_t *id) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_register_buffer") : 0)
		return owner;
	if (!dev || !addr || !id || len == 0)
		return fail(-EINVAL, "kvblk_register_buffer: %s", !dev ? "NULL dev" : !addr ? "NULL addr" :
								   !id	  ? "NULL id" : "len is 0");
	if (kind == KVBLK_MEM_DMABUF)
		return fail(-EINVAL, "kvblk_register_buffer: register a dma-buf with kvblk_register_dmabuf()");
	if (kind != KVBLK_MEM_HOST && kind != KVBLK_MEM_CUDA && kind != KVBLK_MEM_P2PDMA)
		return fail(-EINVAL, "kvblk_register_buffer: unknown memory kind %d", kind);
	const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
	if (kind == KVBLK_MEM_P2PDMA && (uintptr_t(addr) % page || len % page))
		return fail(-EINVAL, "kvblk_register_buffer: P2PDMA range %p + %llu is not page aligned", addr,
			    ull(len));
	if (uintptr_t(addr) % dev->info.mem_align)
		return fail(-EINVAL, "kvblk_register_buffer: address %p is not aligned to mem_align %u", addr,
			    dev->info.mem_align);
	uint64_t end;
	if (__builtin_add_overflow(uint64_t(uintptr_t(addr)), len, &end) || end > uint64_t(UINTPTR_MAX))
		return fail(-EINVAL, "kvblk_register_buffer: address %p + length %llu overflows", addr, ull(len));

	if (kind == KVBLK_MEM_HOST) {
		/* Every backend the same: loads write into it, and the kernel pins it writable. */
		std::string why;
		if (int ret = check_writable_range(addr, len, &why))
			return fail(ret, "kvblk_register_buffer: host range %p + %llu cannot be a destination: %s",
				    addr, ull(len), why.c_str());
	}
	uint32_t slot;
	auto *base = static_cast<uint8_t *>(addr);
	if (dev->buffers.reserve(kind, base, len, &slot))
		return fail(-ENOSPC, "kvblk_register_buffer: %u buffers are registered already (the limit)",
			    kMaxBuffers);
	if (kind == KVBLK_MEM_CUDA) {
		uint32_t path = KVBLK_PATH_HOST;
		int ret;
		try {
			ret = register_cuda(dev, slot, base, len, &path);
		} catch (const std::bad_alloc &) {
			ret = fail(-ENOMEM, "kvblk_register_buffer: out of memory");
		}
		if (ret) {
			dev->buffers.release(slot);
			return ret;
		}
		dev->buffers.publish(slot, -1, path);
		*id = slot;
		return 0;
	}
	if (kind == KVBLK_MEM_P2PDMA) {
		/* kvblk.ko pins it per load; O_DIRECT reads DMA into it themselves. */
		if (dev->backend->kind() == KVBLK_BACKEND_KMOD) {
			const int ret = dev->backend->register_device_buffer(slot, KVBLK_MEM_P2PDMA, -1,
									     uint64_t(uintptr_t(base)), len);
			if (ret) {
				dev->buffers.release(slot);
				return ret;
			}
		}
		dev->buffers.publish(slot, -1, KVBLK_PATH_P2P);
		*id = slot;
		return 0;
	}
	BufferRegistration reg = dev->backend->register_buffer(slot, base, len);
	if (reg.error) {
		dev->buffers.release(slot);
		return fail(reg.error, "kvblk_register_buffer: %s", reg.note.c_str());
	}
	if (reg.fell_back) {
		dev->stats.record_memlock_fallback();
		set_last_error("%s", reg.note.c_str());
	}
	dev->buffers.publish(slot, reg.fixed_index);
	*id = slot;
	return 0;
}

int kvblk_register_dmabuf(kvblk_dev *dev, int fd, uint64_t offset, uint64_t len, uint32_t *id) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_register_dmabuf") : 0)
		return owner;
	if (!dev || !id || fd < 0 || len == 0)
		return fail(-EINVAL, "kvblk_register_dmabuf: %s", !dev ? "NULL dev" : !id ? "NULL id" :
								  fd < 0 ? "fd < 0" : "len is 0");
	const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
	uint64_t end;
	if (offset % page || len % page)
		return fail(-EINVAL, "kvblk_register_dmabuf: offset %llu and length %llu must be multiples of the "
				     "page size %llu", ull(offset), ull(len), ull(page));
	if (__builtin_add_overflow(offset, len, &end))
		return fail(-EINVAL, "kvblk_register_dmabuf: offset %llu + length %llu overflows", ull(offset),
			    ull(len));
	uint32_t slot;
	if (dev->buffers.reserve(KVBLK_MEM_DMABUF, nullptr, len, &slot))
		return fail(-ENOSPC, "kvblk_register_dmabuf: %u buffers are registered already (the limit)",
			    kMaxBuffers);
	const int ret = dev->backend->register_device_buffer(slot, KVBLK_MEM_DMABUF, fd, offset, len);
	if (ret) {
		dev->buffers.release(slot);
		return ret;
	}
	dev->buffers.publish(slot, -1, KVBLK_PATH_P2P);
	*id = slot;
	return 0;
}

int kvblk_set_staging(kvblk_dev *dev, uint32_t buffers, uint64_t buffer_bytes) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_set_staging") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_set_staging: NULL dev");
	const uint32_t nb = buffers ? buffers : KVBLK_DEFAULT_STAGING_BUFFERS;
	const uint64_t bb = buffer_bytes ? buffer_bytes : KVBLK_DEFAULT_STAGING_BUFFER_BYTES;
	if (nb > KVBLK_MAX_STAGING_BUFFERS)
		return fail(-EINVAL, "kvblk_set_staging: %u buffers is out of range 1..%u", nb,
			    KVBLK_MAX_STAGING_BUFFERS);
	if (bb < dev->t0().logical_block_size || bb > KVBLK_MAX_STAGING_BUFFER_BYTES)
		return fail(-EINVAL, "kvblk_set_staging: buffer_bytes %llu is out of range %u..%u", ull(bb),
			    dev->t0().logical_block_size, KVBLK_MAX_STAGING_BUFFER_BYTES);
	try {
		std::lock_guard<std::mutex> io(dev->io_mutex);
		dev->stager.release_pool(*dev->backend, dev->buffers);
		dev->stager.configure(nb, bb);
		if (dev->staged_buffers)
			return dev->stager.ensure_pool(*dev->backend, dev->buffers, dev->t0().logical_block_size,
						       dev->t0().mem_align);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_set_staging: out of memory");
	}
	return 0;
}

int kvblk_unregister_buffer(kvblk_dev *dev, uint32_t id) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_unregister_buffer") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_unregister_buffer: NULL dev");
	RegisteredBuffer b;
	int ret = dev->buffers.begin_unregister(id, &b);
	if (ret == -ENOENT)
		return fail(ret, "kvblk_unregister_buffer: buffer id %u is not registered", id);
	if (ret == -EBUSY)
		return fail(ret, "kvblk_unregister_buffer: a load into buffer %u is running", id);
	dev->backend->unregister_buffer(id, b.fixed_index);
	if (b.path == KVBLK_PATH_STAGED) {
		std::lock_guard<std::mutex> io(dev->io_mutex);
		dev->staged_buffers--; /* the pool stays until close or kvblk_set_staging() */
	}
	dev->buffers.release(id);
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

// SPDX-License-Identifier: MIT
// kvblk_open()'s work: options, backend choice and set-up (open.hpp).
#include "open.hpp"

#include "async.hpp"
#include "backend.hpp"
#include "buffers.hpp"
#include "defaults.hpp"
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

constexpr const char *kKmodNode = "/dev/kvblk";

/* The backend to serve the device and why. */
struct BackendChoice {
	kvblk_backend backend = KVBLK_BACKEND_AUTO;
	std::string reason;
};

/* Explicit option, else the process's default backend (defaults.hpp: kvblk_set_default(),
 * KVBLK_BACKEND), else AUTO (decided once the target is open). */
void resolve_requested_backend(uint32_t requested, const DefaultsSnapshot &dfl, BackendChoice *c)
{
	c->backend = kvblk_backend(requested);
	if (requested != KVBLK_BACKEND_AUTO) {
		c->reason = std::string(kvblk_backend_name(int(requested))) + ": requested in kvblk_open_opts.backend";
	} else if (dfl.backend != KVBLK_BACKEND_AUTO) {
		c->backend = kvblk_backend(dfl.backend);
		c->reason = std::string(kvblk_backend_name(int(dfl.backend))) + ": " + dfl.backend_origin;
	}
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

} // namespace

namespace kvblk::detail {

bool clamp_to_unsplit(kvblk_backend b, const Target &t, BackendConfig &cfg)
{
	const uint32_t lbs = t.logical_block_size;
	if (b != KVBLK_BACKEND_URING || !t.blockdev || t.buffered || !t.unsplit_bytes || !lbs)
		return false;
	const uint64_t lim = t.unsplit_bytes - t.unsplit_bytes % lbs;
	if (lim < lbs || cfg.max_cmd_bytes <= lim)
		return false;
	cfg.note = "max_cmd_bytes " + std::to_string(cfg.max_cmd_bytes) + " lowered to " +
		   std::to_string(lim) + ": the block layer would split larger reads from a fixed buffer "
		   "(queue/max_sectors_kb, queue/max_segments), and io_uring would issue each split one "
		   "again from a worker thread";
	cfg.max_cmd_bytes = lim;
	return true;
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
	/* Options left 0 take the process's defaults, as they are now (defaults.hpp). */
	DefaultsSnapshot dfl;
	ret = snapshot_defaults("kvblk_open", &dfl);
	if (ret)
		return ret;
	BackendChoice choice;
	resolve_requested_backend(o.backend, dfl, &choice);

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
	cfg.eagain_retries = o.eagain_retries ? o.eagain_retries : dfl.eagain_retries;
	switch (choice.backend) {
	case KVBLK_BACKEND_URING:
	case KVBLK_BACKEND_URING_CMD:
	case KVBLK_BACKEND_KMOD: /* its stores go through uring; loads report kvblk.ko's cap */
		cfg.queue_depth = o.queue_depth ? o.queue_depth : dfl.queue_depth;
		cfg.workers = o.workers ? o.workers : dfl.rings;
		break;
	case KVBLK_BACKEND_THREADPOOL:
		cfg.queue_depth = 1; /* each thread keeps one command in flight */
		cfg.workers = o.workers ? o.workers : dfl.threads;
		break;
	default:
		cfg.queue_depth = 1;
		cfg.workers = 1;
		break;
	}
	const uint32_t requested_qd = cfg.queue_depth;
	/* kmod: the kernel splits objects itself; at its own limit unless a default was set. */
	const uint64_t dflt_cmd =
		choice.backend == KVBLK_BACKEND_KMOD && !dfl.max_cmd_bytes_set ? 0 : dfl.max_cmd_bytes;
	ret = effective_max_cmd(o, t, dflt_cmd, &cfg.max_cmd_bytes);
	clamp_to_unsplit(choice.backend, t, cfg);
	if (!ret)
		dev->backend = create_backend(choice.backend, cfg, &ret);
	if (ret && automatic && choice.backend == KVBLK_BACKEND_KMOD) {
		/* AUTO never fails for want of kvblk.ko: uring serves, and the reason says why. */
		choice.backend = KVBLK_BACKEND_URING;
		choice.reason = "uring: kvblk.ko cannot serve " + t.path + ": " + last_error();
		cfg.note.clear();
		cfg.queue_depth = o.queue_depth ? o.queue_depth : dfl.queue_depth;
		ret = effective_max_cmd(o, t, dfl.max_cmd_bytes, &cfg.max_cmd_bytes);
		clamp_to_unsplit(choice.backend, t, cfg);
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
	if (const kvblk::testing::Seams *s = kvblk::testing::active(); s && s->wrap_backend)
		dev->backend = s->wrap_backend(std::move(dev->backend));

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
	info.max_descs = o.max_descs ? o.max_descs : dfl.max_descs;
	if (!cfg.note.empty())
		choice.reason += "; " + cfg.note;
	std::snprintf(info.backend_reason, sizeof(info.backend_reason), "%s", choice.reason.c_str());
	info.async = dev->backend->async_mode();
	info.max_batches = o.max_batches ? o.max_batches : dfl.max_batches;
	dev->staging_default_buffers = dfl.staging_buffers;
	dev->staging_default_bytes = dfl.staging_buffer_bytes;
	dev->stager.configure(dfl.staging_buffers, dfl.staging_buffer_bytes);
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

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// The target calls of the C API: kvblk_add_target(), kvblk_add_target_fd(),
// kvblk_remove_target(), kvblk_get_target_info().
#include "device.hpp"
#include "last_error.hpp"
#include "open.hpp"
#include "struct_size.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <new>

using namespace kvblk::detail;

namespace {

using ull = unsigned long long;

constexpr uint32_t kTargetFlags = KVBLK_OPEN_WRITE | KVBLK_OPEN_BUFFERED;

int check_add_args(const char *fn, kvblk_dev *dev, uint32_t flags, const uint32_t *id)
{
	if (!dev || !id)
		return fail(-EINVAL, "%s: NULL %s", fn, dev ? "id" : "dev");
	if (flags & ~kTargetFlags)
		return fail(-EINVAL, "%s: flags 0x%x: only KVBLK_OPEN_WRITE and KVBLK_OPEN_BUFFERED apply to a target",
			    fn, flags);
	return 0;
}

/* Give opened target @t an id: the backend checks and takes it, then batches may name it. */
int add_opened(kvblk_dev *dev, const char *fn, std::unique_ptr<TargetEntry> e, uint32_t *id)
{
	Target &t = e->t;
	const kvblk_backend kind = dev->backend->kind();
	if (t.nvme_generic && kind != KVBLK_BACKEND_URING_CMD) {
		close_target(&t);
		return fail(-EOPNOTSUPP, "%s: %s is an NVMe generic char device: only a uring_cmd device serves it "
					 "(this device is %s)", fn, t.path.c_str(), kvblk_backend_name(kind));
	}
	uint32_t slot;
	if (dev->targets.reserve(&slot)) {
		close_target(&t);
		return fail(-ENOSPC, "%s: %u targets are added already (KVBLK_MAX_TARGETS)", fn, KVBLK_MAX_TARGETS);
	}
	BackendConfig cfg = dev->config;
	describe_target(cfg, t);
	cfg.note.clear();
	int ret = dev->backend->add_target(slot, cfg);
	if (ret == 0 && cfg.max_cmd_bytes % t.logical_block_size) {
		dev->backend->remove_target(slot);
		ret = fail(-EOPNOTSUPP,
			   "%s: %s has %u-byte blocks; commands of this device are %llu bytes, not a multiple (open "
			   "the device with a max_cmd_bytes that is)",
			   fn, t.path.c_str(), t.logical_block_size, ull(cfg.max_cmd_bytes));
	}
	if (ret) {
		dev->targets.release(slot);
		close_target(&t);
		return ret;
	}
	/* A backend may need destinations aligned more strictly than the target said (kvblk.ko). */
	t.mem_align = std::max(t.mem_align, cfg.mem_align);
	/* uring on a block device: its own queue's limit, not target 0's (IoObject.max_cmd). */
	std::string served_why;
	if (clamp_to_unsplit(dev->backend->target_kind(slot, IoDir::read, &served_why), t, cfg))
		e->cmd_note = cfg.note;
	e->max_cmd_bytes = cfg.max_cmd_bytes;
	e->queue_depth = cfg.queue_depth;
	e->workers = cfg.workers;
	e->size.store(t.capacity, std::memory_order_relaxed);
	dev->targets.publish(slot, std::move(e));
	*id = slot;
	return 0;
}

} // namespace

extern "C" {

int kvblk_add_target(kvblk_dev *dev, const char *path, uint32_t flags, uint32_t *id) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_add_target") : 0)
		return owner;
	int ret = check_add_args("kvblk_add_target", dev, flags, id);
	if (ret)
		return ret;
	if (!path)
		return fail(-EINVAL, "kvblk_add_target: NULL path");
	try {
		auto e = std::make_unique<TargetEntry>();
		ret = open_target(path, flags, 0, &e->t);
		if (ret)
			return ret;
		return add_opened(dev, "kvblk_add_target", std::move(e), id);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_add_target: out of memory");
	}
}

int kvblk_add_target_fd(kvblk_dev *dev, int fd, uint32_t flags, uint32_t *id) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_add_target_fd") : 0)
		return owner;
	int ret = check_add_args("kvblk_add_target_fd", dev, flags, id);
	if (ret)
		return ret;
	try {
		auto e = std::make_unique<TargetEntry>();
		ret = open_target_fd(fd, flags, &e->t);
		if (ret)
			return ret;
		return add_opened(dev, "kvblk_add_target_fd", std::move(e), id);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_add_target_fd: out of memory");
	}
}

int kvblk_remove_target(kvblk_dev *dev, uint32_t id) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_remove_target") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_remove_target: NULL dev");
	if (id == 0)
		return fail(-EINVAL, "kvblk_remove_target: target 0 is kvblk_open()'s path; it lives until kvblk_close()");
	std::unique_ptr<TargetEntry> e;
	const int ret = dev->targets.begin_remove(id, &e);
	if (ret == -ENOENT)
		return fail(ret, "kvblk_remove_target: target %u is not added", id);
	if (ret == -EBUSY)
		return fail(ret, "kvblk_remove_target: a batch that names target %u is running", id);
	dev->backend->remove_target(id);
	close_target(&e->t);
	dev->targets.release(id);
	return 0;
}

int kvblk_get_target_info(kvblk_dev *dev, uint32_t id, struct kvblk_dev_info *info) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_get_target_info") : 0)
		return owner;
	if (!dev || !info)
		return fail(-EINVAL, "kvblk_get_target_info: NULL %s", dev ? "info" : "dev");
	int ret = check_output_size("kvblk_get_target_info", "info_size", info->info_size, KVBLK_DEV_INFO_SIZE_V0_2);
	if (ret)
		return ret;
	kvblk_dev_info i = dev->info;
	std::string cmd_note;
	try {
		{
			/* The table's lock (every batch's prepare takes it) only for the entry's fields. */
			auto lock = dev->targets.lock();
			const TargetEntry *e = dev->targets.find_locked(id);
			if (!e)
				return fail(-ENOENT, "kvblk_get_target_info: target %u is not added", id);
			const Target &t = e->t;
			i.flags = (t.blockdev ? KVBLK_INFO_BLOCKDEV : 0) | (t.buffered ? KVBLK_INFO_BUFFERED : 0) |
				  (t.writable ? KVBLK_INFO_WRITABLE : 0);
			i.logical_block_size = t.logical_block_size;
			i.mem_align = t.mem_align;
			i.capacity = current_size(t);
			i.max_cmd_bytes = e->max_cmd_bytes;
			i.queue_depth = e->queue_depth;
			i.workers = e->workers;
			cmd_note = e->cmd_note;
		}
		/* Which backend serves it: the lanes' lock, not the table's (a removal meanwhile is the caller's race). */
		std::string reason;
		i.backend = dev->backend->target_kind(id, IoDir::read, &reason);
		if (reason.empty() && id != 0)
			reason = std::string(kvblk_backend_name(int(i.backend))) + ": serves every target of the device";
		if (!cmd_note.empty())
			reason += (reason.empty() ? "" : "; ") + cmd_note;
		if (!reason.empty())
			std::snprintf(i.backend_reason, sizeof(i.backend_reason), "%s", reason.c_str());
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_get_target_info: out of memory");
	}
	i.targets = dev->targets.count();
	copy_out(info, info->info_size, &i, sizeof(i));
	return 0;
}

} // extern "C"

// SPDX-License-Identifier: MIT
// kvblk_flush(): make completed stores durable. One synchronous flush per target on the
// calling thread: fdatasync(2) of the target's own fd (a block device: the kernel sends a
// cache flush; a file: data, allocation and size), or an NVMe Flush command for an NVMe
// generic char device, whose fsync does nothing. The targets are pinned meanwhile, so
// kvblk_remove_target() cannot close an fd being flushed (-EBUSY, as for a batch).
#include "device.hpp"
#include "last_error.hpp"

#include <kvblk/kvblk.h>

#include <cerrno>
#include <linux/nvme_ioctl.h>
#include <new>
#include <string>
#include <sys/ioctl.h>
#include <unistd.h>
#include <vector>

using namespace kvblk::detail;

namespace {

constexpr uint8_t kNvmeCmdFlush = 0x00;

/* Flush one target: 0 or -errno with the message set. */
int flush_target(uint32_t id, const Target &t)
{
	if (t.nvme_generic) {
		const int nsid = ioctl(t.fd, NVME_IOCTL_ID);
		if (nsid <= 0) {
			const int e = nsid < 0 ? errno : EIO;
			return fail(-e, "kvblk_flush: target %u (%s): NVME_IOCTL_ID: %s", id, t.path.c_str(),
				    errno_text(e).c_str());
		}
		nvme_passthru_cmd cmd{};
		cmd.opcode = kNvmeCmdFlush;
		cmd.nsid = uint32_t(nsid);
		const int ret = ioctl(t.fd, NVME_IOCTL_IO_CMD, &cmd);
		if (ret < 0) {
			const int e = errno;
			return fail(-e, "kvblk_flush: target %u (%s): NVMe Flush: %s", id, t.path.c_str(),
				    errno_text(e).c_str());
		}
		if (ret > 0)
			return fail(-EIO, "kvblk_flush: target %u (%s): the controller failed the NVMe Flush "
					  "(status 0x%x)", id, t.path.c_str(), unsigned(ret));
		return 0;
	}
	if (fdatasync(t.fd) != 0) {
		const int e = errno;
		return fail(-e, "kvblk_flush: target %u (%s): fdatasync: %s; stores to it since the last "
				"successful flush may be lost: store them again",
			    id, t.path.c_str(), errno_text(e).c_str());
	}
	return 0;
}

int flush(kvblk_dev *dev, uint32_t target)
{
	/* Unpinned on every way out, an exception (std::bad_alloc) from the lists included. */
	struct Pinned {
		TargetTable &table;
		TargetPins pins;
		~Pinned() { table.unpin(pins); }
	} pinned{dev->targets, {}};
	TargetPins &pins = pinned.pins;
	std::vector<std::pair<uint32_t, const Target *>> todo;
	{
		auto lock = dev->targets.lock();
		const uint64_t serial = dev->targets.next_serial();
		if (target != KVBLK_TARGET_ALL) {
			TargetEntry *e = dev->targets.find_locked(target);
			if (!e)
				return fail(-ENOENT, "kvblk_flush: target %u is not added", target);
			if (!e->t.writable)
				return fail(-EBADF, "kvblk_flush: target %u (%s) was not opened with KVBLK_OPEN_WRITE: "
						    "no store reaches it", target, e->t.path.c_str());
			dev->targets.pin_locked(target, serial, &pins);
			todo.emplace_back(target, &e->t);
		} else {
			for (uint32_t id = 0; id < dev->targets.slots_locked(); id++) {
				TargetEntry *e = dev->targets.find_locked(id);
				if (!e || !e->t.writable)
					continue;
				dev->targets.pin_locked(id, serial, &pins);
				todo.emplace_back(id, &e->t);
			}
		}
	}
	int first = 0;
	std::string why;
	for (const auto &[id, t] : todo) {
		const int ret = flush_target(id, *t);
		if (ret && !first) {
			first = ret;
			why = last_error();
		}
	}
	if (first)
		set_last_error("%s", why.c_str());
	return first;
}

} // namespace

extern "C" {

int kvblk_flush(kvblk_dev *dev, uint32_t target, uint32_t flags) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_flush") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_flush: NULL dev");
	if (flags)
		return fail(-EINVAL, "kvblk_flush: flags 0x%x must be 0", flags);
	try {
		return flush(dev, target);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_flush: out of memory");
	}
}

} // extern "C"

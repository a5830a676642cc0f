// SPDX-License-Identifier: MIT
// Buffer registration: kvblk_register_buffer(), kvblk_register_dmabuf(),
// kvblk_set_staging() and kvblk_unregister_buffer(); CUDA memory goes P2P where the
// backend can, else through the staging pool.
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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace kvblk::detail;

MemlockText::MemlockText() noexcept
{
	rlimit rl{};
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		std::snprintf(s, sizeof(s), "unknown");
	else if (rl.rlim_cur == RLIM_INFINITY)
		std::snprintf(s, sizeof(s), "unlimited");
	else
		std::snprintf(s, sizeof(s), "%llu bytes (%llu KiB)", (unsigned long long)rl.rlim_cur,
			      (unsigned long long)(rl.rlim_cur >> 10));
}

namespace {

using ull = unsigned long long;

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

/*
 * kvblk_register_buffer() after the owner check. Allocations (messages, the mapping check) may
 * throw std::bad_alloc only before a slot is reserved; after that nothing throws (the CUDA
 * path catches its own), so the caller's catch leaves nothing behind.
 */
int register_buffer(kvblk_dev *dev, int kind, void *addr, uint64_t len, uint32_t *id)
{
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
		return fail(reg.error, "kvblk_register_buffer: %s", reg.note);
	}
	if (reg.fell_back) {
		dev->stats.record_memlock_fallback();
		set_last_error("%s", reg.note);
	}
	dev->buffers.publish(slot, reg.fixed_index);
	*id = slot;
	return 0;
}

} // namespace

extern "C" {

int kvblk_register_buffer(kvblk_dev *dev, int kind, void *addr, uint64_t len, uint32_t *id) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_register_buffer") : 0)
		return owner;
	try {
		return register_buffer(dev, kind, addr, len, id);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_register_buffer: out of memory");
	}
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
	const uint32_t nb = buffers ? buffers : dev->staging_default_buffers; /* the process's defaults */
	const uint64_t bb = buffer_bytes ? buffer_bytes : dev->staging_default_bytes;
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

} // extern "C"

// SPDX-License-Identifier: MIT
// kvblk_get_buffer_info(): what a registered buffer is (kind, path, address, length), for
// layers over libkvblk that are handed buffer ids (the kvblk store decides from it whether
// the CPU can check a destination's bytes).
#include "buffers.hpp"
#include "device.hpp"
#include "last_error.hpp"
#include "struct_size.hpp"

#include <kvblk/kvblk.h>

#include <cerrno>

using namespace kvblk::detail;

extern "C" {

int kvblk_get_buffer_info(kvblk_dev *dev, uint32_t id, struct kvblk_buffer_info *info) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_get_buffer_info") : 0)
		return owner;
	if (!dev || !info)
		return fail(-EINVAL, "kvblk_get_buffer_info: NULL %s", dev ? "info" : "dev");
	if (int ret = check_output_size("kvblk_get_buffer_info", "info_size", info->info_size,
					sizeof(struct kvblk_buffer_info)))
		return ret;
	kvblk_buffer_info i{};
	i.info_size = sizeof(i);
	{
		auto lock = dev->buffers.lock();
		const RegisteredBuffer *b = id < kMaxBuffers ? dev->buffers.find_locked(id) : nullptr;
		if (!b)
			return fail(-ENOENT, "kvblk_get_buffer_info: buffer %u is not registered", id);
		i.kind = uint32_t(b->kind);
		i.path = b->path;
		i.addr = uint64_t(uintptr_t(b->base));
		i.len = b->len;
		i.stale = b->stale ? 1 : 0;
	}
	copy_out(info, info->info_size, &i, sizeof(i));
	return 0;
}

} // extern "C"

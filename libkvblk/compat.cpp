// SPDX-License-Identifier: MIT
// The two versions of kvblk_load_many() and kvblk_store_many(), bound to their names with
// .symver (libkvblk.map lists the names in both nodes):
//  - @KVBLK_0.1: programs built against the 0.1 and 0.2 headers call these (their references
//    were bound to kvblk_load_many@KVBLK_0.1 when they were linked); they pass 40-byte
//    descriptors, which have no target (target 0) and whose flags must be 0;
//  - @@KVBLK_0.3, the default: 48-byte descriptors. A static link (kvblk_static) resolves
//    the plain name to it.
// The descriptors are read in place (DescView): old programs pay no copy.
#include "device.hpp"
#include "last_error.hpp"

#include <new>

using namespace kvblk::detail;

namespace {

int batch(IoDir dir, kvblk_dev *dev, const void *descs, size_t desc_size, uint32_t n, kvblk_result *results,
	  kvblk_batch_info *info) noexcept
{
	try {
		return do_batch(dev, dir, DescView(descs, desc_size), n, results, info);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "%s: out of memory", dir == IoDir::read ? "kvblk_load_many" : "kvblk_store_many");
	}
}

} // namespace

extern "C" {

int kvblk_load_many_v0_3(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n, struct kvblk_result *results,
			 struct kvblk_batch_info *info) noexcept;
int kvblk_store_many_v0_3(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n,
			  struct kvblk_result *results, struct kvblk_batch_info *info) noexcept;
int kvblk_load_many_v0_1(kvblk_dev *dev, const void *descs, uint32_t n, struct kvblk_result *results,
			 struct kvblk_batch_info *info) noexcept;
int kvblk_store_many_v0_1(kvblk_dev *dev, const void *descs, uint32_t n, struct kvblk_result *results,
			  struct kvblk_batch_info *info) noexcept;

__asm__(".symver kvblk_load_many_v0_1, kvblk_load_many@KVBLK_0.1");
__asm__(".symver kvblk_store_many_v0_1, kvblk_store_many@KVBLK_0.1");
__asm__(".symver kvblk_load_many_v0_3, kvblk_load_many@@KVBLK_0.3");
__asm__(".symver kvblk_store_many_v0_3, kvblk_store_many@@KVBLK_0.3");

int kvblk_load_many_v0_3(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n, struct kvblk_result *results,
			 struct kvblk_batch_info *info) noexcept
{
	return batch(IoDir::read, dev, descs, sizeof(*descs), n, results, info);
}

int kvblk_store_many_v0_3(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n,
			  struct kvblk_result *results, struct kvblk_batch_info *info) noexcept
{
	return batch(IoDir::write, dev, descs, sizeof(*descs), n, results, info);
}

int kvblk_load_many_v0_1(kvblk_dev *dev, const void *descs, uint32_t n, struct kvblk_result *results,
			 struct kvblk_batch_info *info) noexcept
{
	return batch(IoDir::read, dev, descs, kDescSizeV0_2, n, results, info);
}

int kvblk_store_many_v0_1(kvblk_dev *dev, const void *descs, uint32_t n, struct kvblk_result *results,
			  struct kvblk_batch_info *info) noexcept
{
	return batch(IoDir::write, dev, descs, kDescSizeV0_2, n, results, info);
}

} // extern "C"

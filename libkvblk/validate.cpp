// SPDX-License-Identifier: MIT
#include "validate.hpp"

#include "last_error.hpp"

#include <cerrno>

namespace kvblk::detail {
namespace {

using ull = unsigned long long;

/* Check one descriptor; 0 and *obj filled, or -errno with the message set. */
int check_one(IoDir dir, uint32_t i, const kvblk_desc &d, const ValidationLimits &lim,
	      const BufferTable &table, IoObject *obj)
{
	const char *mem_word = dir == IoDir::read ? "destination" : "source";
	const uint32_t lbs = lim.logical_block_size;

	if (d.flags != 0)
		return fail(-EINVAL, "descriptor %u: flags 0x%x must be 0", i, d.flags);
	if (d.length == 0)
		return fail(-EINVAL, "descriptor %u: length is 0", i);
	if (d.offset % lbs)
		return fail(-EINVAL, "descriptor %u: offset %llu is not a multiple of the logical block size %u",
			    i, ull(d.offset), lbs);
	if (d.length % lbs)
		return fail(-EINVAL, "descriptor %u: length %llu is not a multiple of the logical block size %u",
			    i, ull(d.length), lbs);
	uint64_t end;
	if (__builtin_add_overflow(d.offset, d.length, &end))
		return fail(-EINVAL, "descriptor %u: offset %llu + length %llu overflows 64 bits", i,
			    ull(d.offset), ull(d.length));
	if (end > lim.capacity)
		return fail(-ERANGE,
			    "descriptor %u: offset %llu + length %llu = %llu reaches past the end "
			    "(capacity %llu bytes)",
			    i, ull(d.offset), ull(d.length), ull(end), ull(lim.capacity));

	uint8_t *mem;
	if (d.buf_id != KVBLK_BUF_NONE) {
		const RegisteredBuffer *b = table.find_locked(d.buf_id);
		if (!b)
			return fail(-ENOENT, "descriptor %u: buffer id %u is not registered", i, d.buf_id);
		uint64_t buf_end;
		if (__builtin_add_overflow(d.addr, d.length, &buf_end) || buf_end > b->len)
			return fail(-EINVAL,
				    "descriptor %u: %s range [%llu, %llu + %llu) exceeds registered "
				    "buffer %u of %llu bytes",
				    i, mem_word, ull(d.addr), ull(d.addr), ull(d.length), d.buf_id, ull(b->len));
		mem = b->base + d.addr;
		obj->fixed_index = b->fixed_index;
		obj->buf_offset = d.addr;
		obj->path = b->path;
	} else {
		if (d.addr == 0)
			return fail(-EINVAL, "descriptor %u: %s address is NULL", i, mem_word);
		uint64_t mem_end;
		if (__builtin_add_overflow(d.addr, d.length, &mem_end) || mem_end > uint64_t(UINTPTR_MAX))
			return fail(-EINVAL, "descriptor %u: %s address 0x%llx + length %llu overflows", i,
				    mem_word, ull(d.addr), ull(d.length));
		mem = reinterpret_cast<uint8_t *>(uintptr_t(d.addr));
		obj->fixed_index = -1;
		obj->buf_offset = 0;
		obj->path = KVBLK_PATH_HOST;
	}
	if (uintptr_t(mem) % lim.mem_align)
		return fail(-EINVAL, "descriptor %u: %s address %p is not aligned to mem_align %u", i,
			    mem_word, static_cast<void *>(mem), lim.mem_align);

	obj->offset = d.offset;
	obj->length = d.length;
	obj->mem = mem;
	obj->buf_id = d.buf_id;
	return 0;
}

} // namespace

int validate_descs(IoDir dir, const kvblk_desc *descs, uint32_t n, const ValidationLimits &lim,
		   const BufferTable &table, IoObject *objects, PinSet *pins, int32_t *bad_index)
{
	pins->reset();
	for (uint32_t i = 0; i < n; i++) {
		int ret = check_one(dir, i, descs[i], lim, table, &objects[i]);
		if (ret) {
			*bad_index = int32_t(i);
			pins->reset();
			return ret;
		}
		if (descs[i].buf_id != KVBLK_BUF_NONE)
			pins->set(descs[i].buf_id);
	}
	*bad_index = -1;
	return 0;
}

} // namespace kvblk::detail

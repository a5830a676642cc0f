// SPDX-License-Identifier: MIT
#include "validate.hpp"

#include "last_error.hpp"

#include <cerrno>
#include <string>

namespace kvblk::detail {
namespace {

using ull = unsigned long long;

/* Check one descriptor; 0 and *obj, *geo filled, or -errno with the message set. */
int check_one(uint32_t i, const kvblk_desc &d, bool v0_2, BatchCheck *c, IoObject *obj, Geometry *geo)
{
	const IoDir dir = c->dir;
	const char *mem_word = dir == IoDir::read ? "destination" : "source";

	if (v0_2 && d.flags != 0)
		return fail(-EINVAL, "descriptor %u: flags 0x%x must be 0", i, d.flags);
	if (d.flags & ~KVBLK_DESC_FLAGS_ALL)
		return fail(-EINVAL, "descriptor %u: unknown flags 0x%x", i, d.flags & ~KVBLK_DESC_FLAGS_ALL);
	if (d.reserved != 0)
		return fail(-EINVAL, "descriptor %u: reserved is %u, must be 0", i, d.reserved);
	const bool unaligned = d.flags & KVBLK_DESC_UNALIGNED;
	const bool short_eof = d.flags & KVBLK_DESC_SHORT_EOF;
	if (short_eof && dir == IoDir::write)
		return fail(-EINVAL, "descriptor %u: KVBLK_DESC_SHORT_EOF is for loads only; a store may not pass "
				     "the end of its target", i);

	TargetEntry *te = c->last_te;
	if (!te || d.target != c->last_target) {
		te = c->targets->find_locked(d.target);
		if (!te)
			return fail(-ENOENT, "descriptor %u: target %u is not added", i, d.target);
		c->targets->pin_locked(d.target, c->serial, c->target_pins);
		c->last_te = te;
		c->last_target = d.target;
	}
	const Target &t = te->t;
	if (dir == IoDir::write && !t.writable)
		return fail(-EBADF, "descriptor %u: target %u (%s) was not added with KVBLK_OPEN_WRITE", i, d.target,
			    t.path.c_str());
	if (dir == IoDir::read && !t.readable)
		return fail(-EBADF, "descriptor %u: target %u (%s) is write-only (its fd was opened O_WRONLY)", i,
			    d.target, t.path.c_str());
	c->any_buffered |= t.buffered;

	const uint32_t lbs = t.logical_block_size;
	const uint64_t size = te->size.load(std::memory_order_relaxed);
	if (d.length == 0)
		return fail(-EINVAL, "descriptor %u: length is 0", i);
	if (!unaligned && d.offset % lbs)
		return fail(-EINVAL, "descriptor %u: offset %llu is not a multiple of the logical block size %u%s",
			    i, ull(d.offset), lbs, d.target ? " of its target" : "");
	if (!unaligned && d.length % lbs)
		return fail(-EINVAL, "descriptor %u: length %llu is not a multiple of the logical block size %u%s",
			    i, ull(d.length), lbs, d.target ? " of its target" : "");
	uint64_t end;
	if (__builtin_add_overflow(d.offset, d.length, &end))
		return fail(-EINVAL, "descriptor %u: offset %llu + length %llu overflows 64 bits", i,
			    ull(d.offset), ull(d.length));
	/*
	 * An unaligned store whose offset or end falls inside a block reads that block to write it
	 * back: on a write-only target the read would fail after the aligned middle was written.
	 */
	if (unaligned && dir == IoDir::write && !t.readable && (d.offset % lbs || end % lbs))
		return fail(-EBADF,
			    "descriptor %u: target %u (%s) is write-only (its fd was opened O_WRONLY), and an "
			    "unaligned store reads the blocks of its edges to write them back",
			    i, d.target, t.path.c_str());
	/* KVBLK_DESC_SHORT_EOF: a regular file's end cuts the load short (a device has no end of file). */
	const bool is_file = !t.blockdev && !t.nvme_generic;
	const bool cut = end > size && short_eof && is_file;
	if (end > size && !cut)
		return fail(-ERANGE,
			    "descriptor %u: offset %llu + length %llu = %llu reaches past the end "
			    "(target %u: capacity %llu bytes)%s",
			    i, ull(d.offset), ull(d.length), ull(end), d.target, ull(size),
			    !is_file || dir == IoDir::write ? ""
			    : "; KVBLK_DESC_SHORT_EOF loads what the file holds instead");

	uint8_t *mem;
	if (d.buf_id != KVBLK_BUF_NONE) {
		const RegisteredBuffer *b = c->last_buf;
		if (!b || d.buf_id != c->last_buf_id) {
			b = c->buffers->find_locked(d.buf_id);
			if (!b)
				return fail(-ENOENT, "descriptor %u: buffer id %u is not registered", i, d.buf_id);
			c->pins->set(d.buf_id);
			c->last_buf = b;
			c->last_buf_id = d.buf_id;
		}
		if (b->stale)
			return fail(-ESTALE,
				    "descriptor %u: buffer %u no longer maps the pages pinned when it was "
				    "registered (kvblk_check_buffer() found them replaced or unmapped): "
				    "unregister it and register it again",
				    i, d.buf_id);
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
		if ((unaligned || short_eof) && (b->kind != KVBLK_MEM_HOST || b->path != KVBLK_PATH_HOST))
			return fail(-EINVAL,
				    "descriptor %u: %s needs a host memory %s; buffer %u is device memory (its edges "
				    "are copied by the CPU)",
				    i, unaligned ? "KVBLK_DESC_UNALIGNED" : "KVBLK_DESC_SHORT_EOF", mem_word, d.buf_id);
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
	if (!unaligned && uintptr_t(mem) % t.mem_align)
		return fail(-EINVAL, "descriptor %u: %s address %p is not aligned to mem_align %u%s", i,
			    mem_word, static_cast<void *>(mem), t.mem_align, d.target ? " of its target" : "");

	/*
	 * An unaligned store that reaches into a file's last block, cut short by the end of the
	 * file, writes that block back through a buffered descriptor (O_DIRECT needs whole blocks).
	 */
	int tail_fd = -1;
	if (unaligned && dir == IoDir::write && is_file && size % lbs && (end + lbs - 1) / lbs * lbs > size) {
		if (int ret = open_tail_writer(&te->t, &tail_fd)) {
			const std::string why = last_error();
			return fail(ret, "descriptor %u: %s", i, why.c_str());
		}
	}

	obj->offset = d.offset;
	obj->length = cut ? (d.offset < size ? size - d.offset : 0) : d.length;
	obj->mem = mem;
	obj->buf_id = d.buf_id;
	obj->fd = t.fd;
	obj->target = d.target;
	obj->max_cmd = te->max_cmd_bytes;
	obj->min_length = 0;
	obj->positional = false;
	*geo = Geometry{lbs, t.mem_align, size, unaligned || cut, cut, tail_fd};
	c->any_unaligned |= unaligned || cut;
	return 0;
}

} // namespace

int validate_descs(const DescView &descs, uint32_t n, BatchCheck *c, int32_t *bad_index)
{
	c->pins->reset();
	c->any_unaligned = false;
	c->any_buffered = false;
	c->last_te = nullptr;
	c->last_buf = nullptr;
	for (uint32_t i = 0; i < n; i++) {
		int ret = check_one(i, descs[i], descs.v0_2(), c, &c->objects[i], &c->geometry[i]);
		if (ret) {
			*bad_index = int32_t(i);
			c->pins->reset();
			return ret;
		}
	}
	*bad_index = -1;
	return 0;
}

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
#include "unaligned.hpp"

#include "last_error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kvblk::detail {
namespace {

using ull = unsigned long long;

uint64_t round_down(uint64_t v, uint64_t a) { return v / a * a; }
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* One batch's bounce area of @total bytes aligned to @align into *@out; 0 or -ENOMEM. */
int alloc_bounce(std::unique_ptr<uint8_t, BounceFree> *out, uint64_t *len, uint64_t total, size_t align,
		 const char *what)
{
	void *p = nullptr;
	if (posix_memalign(&p, align, total))
		return fail(-ENOMEM, "%s: cannot allocate %llu bounce bytes", what, ull(total));
	out->reset(static_cast<uint8_t *>(p));
	*len = total;
	return 0;
}

} // namespace

void BounceFree::operator()(uint8_t *p) const noexcept
{
	std::free(p);
}

int UnalignedBatch::expand(const IoObject *objs, const Geometry *geo, uint32_t n, int32_t *bad_index)
{
	objs_ = objs;
	geo_ = geo;
	n_ = n;
	parts_.clear();
	owner_.clear();
	device_bytes_.clear();
	fixups_.clear();
	bounced_.assign(n, 0);
	bounce_.reset();
	bounce_len_ = 0;
	*bad_index = -1;

	std::vector<uint64_t> bounce_off; /* part -> offset in the bounce area, or UINT64_MAX */
	uint64_t total = 0;
	uint64_t align = 4096;
	try {
		parts_.reserve(n);
		owner_.reserve(n);
		device_bytes_.reserve(n);
		bounce_off.reserve(n);

		/* A bounce part [start, end) of object @i; its wanted bytes [o.offset + dst, + len). */
		auto add_bounce = [&](uint32_t i, uint64_t start, uint64_t end, uint64_t dst, uint64_t len) -> bool {
			const IoObject &o = objs[i];
			const Geometry &g = geo[i];
			const uint64_t a = std::max<uint64_t>(g.lbs, g.mem_align);
			const uint64_t off = round_up(total, a);
			if (off + (end - start) > kMaxBounceBytes)
				return false;
			align = std::max(align, a);
			total = off + (end - start);
			IoObject p = o;
			p.offset = start;
			p.length = end - start;
			p.mem = nullptr; /* set once the area exists */
			p.buf_id = KVBLK_BUF_NONE;
			p.fixed_index = -1;
			p.buf_offset = 0;
			p.path = KVBLK_PATH_HOST;
			/* The file ends inside the last covering block: read up to its end. */
			p.min_length = end > g.size ? g.size - start : 0;
			fixups_.push_back(Fixup{uint32_t(parts_.size()), off + (o.offset + dst - start), dst, len});
			parts_.push_back(p);
			owner_.push_back(i);
			device_bytes_.push_back(std::min(end, g.size) - start);
			bounce_off.push_back(off);
			bounced_[i] = 1;
			return true;
		};
		auto add_direct = [&](uint32_t i, uint64_t start, uint64_t end) {
			const IoObject &o = objs[i];
			IoObject p = o;
			const uint64_t d = start - o.offset;
			p.offset = start;
			p.length = end - start;
			p.mem = o.mem + d;
			p.buf_offset = o.buf_offset + d;
			p.min_length = 0;
			parts_.push_back(p);
			owner_.push_back(i);
			device_bytes_.push_back(end - start);
			bounce_off.push_back(UINT64_MAX);
		};

		for (uint32_t i = 0; i < n; i++) {
			const IoObject &o = objs[i];
			const Geometry &g = geo[i];
			const uint64_t b = g.lbs, end = o.offset + o.length;
			const bool mem_ok = uintptr_t(o.mem) % g.mem_align == 0;
			if (o.length == 0)
				continue; /* KVBLK_DESC_SHORT_EOF at or past the end of the file: nothing to read */
			if (!g.unaligned || (o.offset % b == 0 && o.length % b == 0 && mem_ok)) {
				add_direct(i, o.offset, end);
				continue;
			}
			const uint64_t mid0 = round_up(o.offset, b), mid1 = round_down(end, b);
			const uint64_t lo = round_down(o.offset, b), hi = round_up(end, b);
			bool fits;
			if (mid0 >= mid1 || uintptr_t(o.mem + (mid0 - o.offset)) % g.mem_align) {
				/* No whole block inside, or its destination is not aligned: bounce it all. */
				fits = add_bounce(i, lo, hi, 0, o.length);
			} else {
				fits = true;
				if (o.offset < mid0)
					fits = add_bounce(i, lo, mid0, 0, mid0 - o.offset);
				if (fits)
					add_direct(i, mid0, mid1);
				if (fits && mid1 < end)
					fits = add_bounce(i, mid1, hi, mid1 - o.offset, end - mid1);
			}
			if (!fits) {
				*bad_index = int32_t(i);
				return fail(-E2BIG,
					    "descriptor %u: the bounce blocks of this batch's KVBLK_DESC_UNALIGNED "
					    "objects pass %llu MiB; split the batch or align the destinations (an "
					    "object whose aligned middle has a misaligned destination is bounced whole)",
					    i, ull(kMaxBounceBytes >> 20));
			}
		}
		if (total) {
			if (int ret = alloc_bounce(&bounce_, &bounce_len_, total, align, "unaligned loads"))
				return ret;
			for (size_t k = 0; k < parts_.size(); k++)
				if (bounce_off[k] != UINT64_MAX)
					parts_[k].mem = bounce_.get() + bounce_off[k];
		}
		part_results_.assign(parts_.size(), kvblk_result{0, 0, 0, 0});
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "unaligned loads: out of memory for a batch of %u objects", n);
	}
	return 0;
}

void UnalignedBatch::finish(kvblk_result *results, UnalignedTotals *tot) noexcept
{
	for (uint32_t i = 0; i < n_; i++) {
		results[i].status = 0;
		results[i].bytes = 0;
	}
	/* Fold: the first failed part of an object (parts are in object order) decides. */
	for (uint32_t p = 0; p < parts_.size(); p++) {
		kvblk_result &r = results[owner_[p]];
		if (r.status == 0 && part_results_[p].status)
			r.status = part_results_[p].status;
	}
	for (const Fixup &f : fixups_) {
		const uint32_t i = owner_[f.part];
		if (results[i].status == 0)
			std::memcpy(objs_[i].mem + f.dst, bounce_.get() + f.src, f.len);
	}
	uint64_t dev = 0;
	for (uint32_t p = 0; p < parts_.size(); p++)
		if (results[owner_[p]].status == 0)
			dev += device_bytes_[p];
	tot->bytes_device += dev;
	for (uint32_t i = 0; i < n_; i++) {
		if (results[i].status)
			continue;
		results[i].bytes = objs_[i].length;
		if (bounced_[i])
			tot->objects++;
		if (geo_[i].cut)
			tot->short_objects++;
	}
	/* Extra bytes: device bytes of the bounced, succeeded objects beyond their lengths. */
	for (uint32_t p = 0; p < parts_.size(); p++) {
		const uint32_t i = owner_[p];
		if (bounced_[i] && results[i].status == 0)
			tot->extra_bytes += device_bytes_[p];
	}
	for (uint32_t i = 0; i < n_; i++)
		if (bounced_[i] && results[i].status == 0)
			tot->extra_bytes -= objs_[i].length;
}

int UnalignedStore::expand(const IoObject *objs, const Geometry *geo, uint32_t n, LockNode *lock,
			   int32_t *bad_index)
{
	objs_ = objs;
	n_ = n;
	*bad_index = -1;
	bounce_.reset();
	bounce_len_ = 0;

	/* A bounce copy of an object's misaligned whole blocks, done once the area exists. */
	struct Whole {
		uint32_t obj;
		uint64_t src;	/* offset in the object */
		uint64_t dst;	/* offset in the bounce area */
		uint64_t len;
	};
	std::vector<Whole> wholes;
	std::vector<uint64_t> read_off, write_off; /* bounce offset per read / write, or UINT64_MAX */
	uint64_t total = 0;
	uint64_t align = 4096;
	try {
		parts_.assign(n, Parts{{-1, -1}, -1, false});
		edges_.clear();
		copies_.clear();
		reads_.clear();
		all_.clear();
		all_edge_.clear();
		lock->ranges.clear();
		lock->ranges.reserve(n);
		all_.reserve(n);
		all_edge_.reserve(n);
		write_off.reserve(n);
		std::map<std::pair<uint32_t, uint64_t>, uint32_t> edge_of; /* (target, block) -> edge */

		/* Room for @len bytes aligned for target @g; UINT64_MAX past kMaxBounceBytes. */
		auto room = [&](const Geometry &g, uint64_t len) -> uint64_t {
			const uint64_t a = std::max<uint64_t>(g.lbs, g.mem_align);
			const uint64_t off = round_up(total, a);
			if (off + len > kMaxBounceBytes)
				return UINT64_MAX;
			align = std::max(align, a);
			total = off + len;
			return off;
		};
		auto add_write = [&](const IoObject &p, uint64_t boff, int32_t edge) {
			all_.push_back(p);
			all_edge_.push_back(edge);
			write_off.push_back(boff);
		};
		/* The part [start, end) of object @i, from its own source (@boff UINT64_MAX) or the bounce area. */
		auto part = [&](uint32_t i, uint64_t start, uint64_t end, bool bounce) {
			IoObject p = objs[i];
			const uint64_t d = start - p.offset;
			p.offset = start;
			p.length = end - start;
			p.min_length = 0;
			p.positional = false;
			if (bounce) {
				p.mem = nullptr; /* set once the area exists */
				p.buf_id = KVBLK_BUF_NONE;
				p.fixed_index = -1;
				p.buf_offset = 0;
				p.path = KVBLK_PATH_HOST;
			} else {
				p.mem += d;
				p.buf_offset += d;
			}
			return p;
		};
		/* The edge block at @block of object @i: found or added. UINT32_MAX: no room. */
		auto edge = [&](uint32_t i, uint64_t block) -> uint32_t {
			const IoObject &o = objs[i];
			const Geometry &g = geo[i];
			auto it = edge_of.find({o.target, block});
			uint32_t e;
			if (it != edge_of.end()) {
				e = it->second;
			} else {
				const uint64_t b = g.lbs;
				const uint64_t off = room(g, b);
				if (off == UINT64_MAX)
					return UINT32_MAX;
				/* The end of the file cuts the block short: read up to it, write back up to it. */
				const uint64_t bytes = std::min(b, g.size - block);
				IoObject r = part(i, block, block + b, true);
				r.min_length = bytes < b ? bytes : 0;
				IoObject w = part(i, block, block + bytes, true);
				if (bytes < b) {
					w.fd = g.tail_fd;
					w.positional = true;
				}
				e = uint32_t(edges_.size());
				edges_.push_back(Edge{uint32_t(reads_.size()), uint32_t(all_.size()), bytes, false});
				reads_.push_back(r);
				read_off.push_back(off);
				add_write(w, off, int32_t(e));
				edge_of.emplace(std::make_pair(o.target, block), e);
				lock->ranges.push_back(LockRange{o.target, block, block + b, true});
			}
			/* This object's bytes in the block. */
			const uint64_t b = geo[i].lbs, end = o.offset + o.length;
			const uint64_t from = std::max(o.offset, block), to = std::min(end, block + b);
			copies_.push_back(Copy{i, e, from - o.offset, read_off[edges_[e].read] + (from - block), to - from});
			return e;
		};

		for (uint32_t i = 0; i < n; i++) {
			const IoObject &o = objs[i];
			const Geometry &g = geo[i];
			const uint64_t b = g.lbs, end = o.offset + o.length;
			const bool mem_ok = uintptr_t(o.mem) % g.mem_align == 0;
			Parts &pt = parts_[i];
			if (!g.unaligned || (o.offset % b == 0 && o.length % b == 0 && mem_ok)) {
				pt.whole = int32_t(all_.size());
				add_write(part(i, o.offset, end, false), UINT64_MAX, -1);
				lock->ranges.push_back(LockRange{o.target, o.offset, end, false});
				continue;
			}
			const uint64_t mid0 = round_up(o.offset, b), mid1 = round_down(end, b);
			bool fits = true;
			int k = 0;
			if (o.offset % b) {
				const uint32_t e = edge(i, round_down(o.offset, b));
				fits = e != UINT32_MAX;
				pt.edge[k++] = int32_t(e);
			}
			/* A tail in another block than the head's. */
			if (fits && end % b && (o.offset % b == 0 || mid1 >= mid0)) {
				const uint32_t e = edge(i, mid1);
				fits = e != UINT32_MAX;
				pt.edge[k++] = int32_t(e);
			}
			if (fits && mid0 < mid1) {
				const bool src_ok = uintptr_t(o.mem + (mid0 - o.offset)) % g.mem_align == 0;
				uint64_t off = UINT64_MAX;
				if (!src_ok) {
					off = room(g, mid1 - mid0);
					fits = off != UINT64_MAX;
					if (fits)
						wholes.push_back(Whole{i, mid0 - o.offset, off, mid1 - mid0});
				}
				if (fits) {
					pt.whole = int32_t(all_.size());
					add_write(part(i, mid0, mid1, !src_ok), off, -1);
					lock->ranges.push_back(LockRange{o.target, mid0, mid1, false});
				}
			}
			pt.bounced = true;
			if (!fits) {
				*bad_index = int32_t(i);
				return fail(-E2BIG,
					    "descriptor %u: the bounce blocks of this batch's KVBLK_DESC_UNALIGNED "
					    "objects pass %llu MiB; split the batch or align the sources (a misaligned "
					    "source's whole blocks are copied into the bounce area)",
					    i, ull(kMaxBounceBytes >> 20));
			}
		}
		if (total) {
			if (int ret = alloc_bounce(&bounce_, &bounce_len_, total, align, "unaligned stores"))
				return ret;
			for (size_t k = 0; k < reads_.size(); k++)
				reads_[k].mem = bounce_.get() + read_off[k];
			for (size_t k = 0; k < all_.size(); k++)
				if (write_off[k] != UINT64_MAX)
					all_[k].mem = bounce_.get() + write_off[k];
			for (const Whole &w : wholes)
				std::memcpy(bounce_.get() + w.dst, objs[w.obj].mem + w.src, w.len);
		}
		read_results_.assign(reads_.size(), kvblk_result{0, 0, 0, 0});
		all_status_.assign(all_.size(), 0);
		writes_.reserve(all_.size());
		issued_.reserve(all_.size());
		write_results_.reserve(all_.size());
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "unaligned stores: out of memory for a batch of %u objects", n);
	}
	lock->prepare();
	if (!has_reads())
		fill();
	return 0;
}

void UnalignedStore::fill() noexcept
{
	for (const Copy &c : copies_)
		if (read_results_[edges_[c.edge].read].status == 0)
			std::memcpy(bounce_.get() + c.dst, objs_[c.obj].mem + c.src, c.len);
	writes_.clear();
	issued_.clear();
	for (uint32_t k = 0; k < all_.size(); k++) {
		const int32_t e = all_edge_[k];
		const int32_t st = e < 0 ? 0 : read_results_[edges_[uint32_t(e)].read].status;
		all_status_[k] = st;
		if (st)
			continue; /* the block could not be read: never written back */
		writes_.push_back(all_[k]);
		issued_.push_back(k);
	}
	/* Room reserved by expand(): no allocation. */
	write_results_.assign(writes_.size(), kvblk_result{0, 0, 0, 0});
}

void UnalignedStore::finish(kvblk_result *results, StoreTotals *tot) noexcept
{
	for (uint32_t k = 0; k < issued_.size(); k++)
		all_status_[issued_[k]] = write_results_[k].status;
	for (Edge &e : edges_)
		e.used = false;
	uint64_t dev = 0;
	for (uint32_t i = 0; i < n_; i++) {
		const Parts &pt = parts_[i];
		int32_t st = 0;
		for (int32_t e : pt.edge) {
			if (e < 0 || st)
				continue;
			const Edge &ed = edges_[uint32_t(e)];
			st = read_results_[ed.read].status;
			if (!st)
				st = all_status_[ed.write];
		}
		if (!st && pt.whole >= 0)
			st = all_status_[uint32_t(pt.whole)];
		results[i].status = st;
		results[i].bytes = st ? 0 : objs_[i].length;
		if (st)
			continue;
		for (int32_t e : pt.edge)
			if (e >= 0)
				edges_[uint32_t(e)].used = true;
		if (pt.whole >= 0)
			dev += all_[uint32_t(pt.whole)].length;
		if (pt.bounced)
			tot->objects++;
	}
	for (const Edge &e : edges_) {
		if (!e.used)
			continue;
		dev += 2 * e.bytes; /* read, and written back */
		tot->read_bytes += e.bytes;
	}
	tot->bytes_device += dev;
}

} // namespace kvblk::detail

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

} // namespace

void UnalignedBatch::Free::operator()(uint8_t *p) const noexcept
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
			void *p = nullptr;
			if (posix_memalign(&p, align, total))
				return fail(-ENOMEM, "unaligned loads: cannot allocate %llu bounce bytes", ull(total));
			bounce_.reset(static_cast<uint8_t *>(p));
			bounce_len_ = total;
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

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// kvblk_kvstore_check(): an fsck of an open store. Every object of the index is checked
// against its class and the other objects (two keys on one slot), and with
// KVBLK_KVSTORE_CHECK_DATA read into host memory (all drives at once, in groups of at most
// 256 MiB) and checked against its CRC32C. With KVBLK_KVSTORE_CHECK_REPAIR what fails is
// dropped: a DEL the writer commits (or the open, for KVBLK_KVSTORE_OPEN_RECOVER).
#include "store.hpp"

#include "crc32c.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>

namespace kvblk::kvstore {
namespace {

constexpr uint64_t kGroupBytes = 256u << 20;

uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

void problem(kvblk_kvstore_check_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void problem(kvblk_kvstore_check_report *rep, const char *fmt, ...)
{
	if (rep->first_problem[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rep->first_problem, sizeof(rep->first_problem), fmt, ap);
	va_end(ap);
}

} // namespace

int check_store(kvblk_kvstore *s, uint32_t flags, kvblk_kvstore_check_report *rep)
{
	const size_t sz = rep->report_size;
	memset(rep, 0, std::min<size_t>(sz, 64u << 10));
	rep->report_size = sz;
	for (const ReplayReport &r : s->replay) {
		rep->superblocks_bad += r.superblocks_bad;
		rep->checkpoints_bad += r.checkpoints_bad;
		rep->journal_tail_discarded += r.tail_discarded;
		if (r.damaged)
			problem(rep, "journal damaged: %s (what preceded the damage was kept)", r.damage.c_str());
	}
	/* Pin every object (a reader) so that none is freed while it is checked. */
	std::vector<Obj *> objs;
	{
		std::lock_guard<std::mutex> lk(s->index_mu);
		objs.reserve(s->index.size());
		for (auto &[k, o] : s->index) {
			o->readers++;
			objs.push_back(o);
		}
	}
	std::sort(objs.begin(), objs.end(), [](const Obj *a, const Obj *b) {
		return std::tie(a->drive, a->cls, a->slot) < std::tie(b->drive, b->cls, b->slot);
	});
	std::vector<bool> bad(objs.size(), false);
	for (size_t i = 0; i < objs.size(); i++) {
		const Obj *o = objs[i];
		const Drive &d = *s->drives[o->drive];
		if (d.target == UINT32_MAX)
			continue;
		if (o->slot >= d.sb.classes[o->cls].nr_slots || o->length > d.sb.classes[o->cls].slot_bytes) {
			bad[i] = true;
			problem(rep, "key of %zu bytes on drive %u: slot %llu of class %u out of range", o->key.size(),
				o->drive, (unsigned long long)o->slot, o->cls);
		}
		if (i && objs[i - 1]->drive == o->drive && objs[i - 1]->cls == o->cls && objs[i - 1]->slot == o->slot) {
			bad[i] = bad[i - 1] = true;
			problem(rep, "two keys on drive %u class %u slot %llu", o->drive, o->cls,
				(unsigned long long)o->slot);
		}
	}
	rep->objects = objs.size();
	int err = 0;
	if (flags & KVBLK_KVSTORE_CHECK_DATA) {
		/* Interleaved over the drives, in groups of at most kGroupBytes. */
		std::vector<size_t> order;
		{
			std::vector<std::vector<size_t>> per(s->drives.size());
			for (size_t i = 0; i < objs.size(); i++)
				if (s->drives[objs[i]->drive]->ok())
					per[objs[i]->drive].push_back(i);
			for (size_t r = 0;; r++) {
				bool any = false;
				for (auto &v : per)
					if (r < v.size()) {
						order.push_back(v[r]);
						any = true;
					}
				if (!any)
					break;
			}
		}
		for (size_t at = 0; at < order.size() && !err;) {
			std::vector<kvblk_desc> descs;
			std::vector<uint64_t> off;
			std::vector<size_t> which;
			uint64_t bytes = 0;
			for (; at < order.size() && descs.size() < s->max_descs; at++) {
				const Obj *o = objs[order[at]];
				const Drive &d = *s->drives[o->drive];
				const uint64_t full = round_up(o->length, d.lba);
				if (!descs.empty() && bytes + full > kGroupBytes)
					break;
				kvblk_desc x{};
				x.target = d.target;
				x.offset = slot_offset(d, o->cls, o->slot);
				x.length = full;
				x.buf_id = KVBLK_BUF_NONE;
				descs.push_back(x);
				off.push_back(bytes);
				which.push_back(order[at]);
				bytes += full;
			}
			AlignedBuf buf(bytes);
			for (size_t k = 0; k < descs.size(); k++)
				descs[k].addr = uint64_t(uintptr_t(buf.p + off[k]));
			std::vector<kvblk_result> res(descs.size());
			const int ret = kvblk_load_many(s->dev, descs.data(), uint32_t(descs.size()), res.data(), nullptr);
			if (ret < 0) {
				err = fail(ret, "kvblk_kvstore_check: reading objects: %s", kvblk_last_error());
				break;
			}
			for (size_t k = 0; k < descs.size(); k++) {
				const Obj *o = objs[which[k]];
				if (res[k].status) {
					bad[which[k]] = true;
					problem(rep, "drive %u class %u slot %llu: read failed: %s", o->drive, o->cls,
						(unsigned long long)o->slot, errno_name(res[k].status).c_str());
					continue;
				}
				rep->bytes_checked += o->length;
				if (crc32c(0, buf.p + off[k], o->length) != o->crc) {
					bad[which[k]] = true;
					problem(rep, "drive %u class %u slot %llu: CRC32C mismatch (key of %zu bytes)", o->drive,
						o->cls, (unsigned long long)o->slot, o->key.size());
				}
			}
		}
	}
	bool drops = false;
	{
		std::lock_guard<std::mutex> lk(s->index_mu);
		for (size_t i = 0; i < objs.size(); i++) {
			Obj *o = objs[i];
			if (bad[i]) {
				rep->bad_objects++;
				if ((flags & KVBLK_KVSTORE_CHECK_REPAIR) && o->in_index) {
					retire_locked(*s, o);
					o->readers++; /* the drop list's hold */
					s->drops.push_back(o);
					rep->repaired++;
					drops = true;
				}
			}
			put_reader_locked(*s, o);
		}
	}
	if (drops)
		writer_kick(*s);
	if (err)
		return err;
	return int(std::min<uint64_t>(rep->bad_objects, INT32_MAX));
}

} // namespace kvblk::kvstore

// SPDX-License-Identifier: MIT
// Gets: look every key up at submit, read the objects found through one asynchronous
// libkvblk batch (in parts when a drive's share passes drive_budget_bytes), check each
// object's CRC32C as its per-object completion comes (host memory), then unpin, touch the
// LRU order, drop what failed, and post the store's completion.
#include "store.hpp"

#include "crc32c.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvblk::kvstore {
namespace {

uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* Errors that say the device is gone rather than one object failing. */
bool device_gone(int status)
{
	return status == -ENODEV || status == -ENXIO;
}

constexpr uint64_t kVerifyGroupBytes = 256u << 20;

struct GetItem {
	uint32_t op = 0;
	Obj *obj = nullptr;
	bool host = true;
	uint8_t *host_addr = nullptr;
	uint32_t buf_id = KVBLK_BUF_NONE;
	uint64_t addr = 0;
	int status = 1; /* 1: not known yet */
};

struct GetOp final : IoOp {
	Store &s;
	std::unique_ptr<Batch> b;
	std::vector<GetItem> items;
	std::vector<std::vector<uint32_t>> parts; /* item indices */
	size_t part = 0;
	bool verifying = false;
	std::vector<uint32_t> cur;		  /* item of each descriptor in flight */
	std::vector<kvblk_desc> descs;
	std::vector<kvblk_result> res;
	AlignedBuf verify_buf;
	std::vector<uint64_t> verify_off;
	uint32_t path = KVBLK_PATH_HOST;
	uint32_t backend = 0;
	bool backend_set = false;

	GetOp(Store &st, std::unique_ptr<Batch> bt) : s(st), b(std::move(bt)) {}

	void judge(uint32_t di)
	{
		GetItem &it = items[cur[di]];
		const int st = res[di].status;
		if (verifying) {
			if (st == 0 && crc32c(0, verify_buf.p + verify_off[di], it.obj->length) != it.obj->crc)
				it.status = -EBADMSG;
			else if (st)
				it.status = st;
			return;
		}
		if (st) {
			it.status = st;
			return;
		}
		if (it.host && crc32c(0, it.host_addr, it.obj->length) != it.obj->crc) {
			it.status = -EBADMSG;
			return;
		}
		it.status = 0;
	}

	void on_object(const kvblk_cqe &cqe) override
	{
		if (cqe.index < cur.size() && items[cur[cqe.index]].status == 1)
			judge(cqe.index);
	}

	/* Build and submit the descriptors of the next part (or verify group); false when none is left. */
	bool next()
	{
		for (;;) {
			cur.clear();
			descs.clear();
			if (!verifying && part < parts.size()) {
				for (uint32_t k : parts[part]) {
					GetItem &it = items[k];
					const Drive &d = *s.drives[it.obj->drive];
					kvblk_desc x{};
					x.target = d.target;
					x.offset = slot_offset(d, it.obj->cls, it.obj->slot);
					x.buf_id = it.buf_id;
					x.addr = it.addr;
					x.tag = k;
					const uint64_t cap = b->ops[it.op].length;
					const uint64_t full = round_up(it.obj->length, d.lba);
					const uintptr_t where = it.host ? uintptr_t(it.host_addr) : uintptr_t(it.addr);
					if (!it.host || (where % d.mem_align == 0 && cap >= full)) {
						x.length = full;
					} else {
						x.length = it.obj->length;
						x.flags = KVBLK_DESC_UNALIGNED;
					}
					descs.push_back(x);
					cur.push_back(k);
				}
				part++;
			} else {
				if (!verifying) {
					verifying = !!(b->flags & KVBLK_KVSTORE_SUBMIT_VERIFY);
					part = 0;
				}
				if (!verifying)
					return false;
				/* Device-memory hits, read once more into host memory and checked. */
				uint64_t bytes = 0;
				verify_off.clear();
				while (part < items.size()) {
					GetItem &it = items[part];
					if (it.host || it.status != 0) {
						part++;
						continue;
					}
					const Drive &d = *s.drives[it.obj->drive];
					const uint64_t full = round_up(it.obj->length, d.lba);
					if (!cur.empty() && bytes + full > kVerifyGroupBytes)
						break;
					kvblk_desc x{};
					x.target = d.target;
					x.offset = slot_offset(d, it.obj->cls, it.obj->slot);
					x.length = full;
					x.buf_id = KVBLK_BUF_NONE;
					x.tag = part;
					verify_off.push_back(bytes);
					bytes += full;
					descs.push_back(x);
					cur.push_back(uint32_t(part));
					part++;
				}
				if (cur.empty())
					return false;
				verify_buf = AlignedBuf(bytes);
				for (size_t i = 0; i < descs.size(); i++)
					descs[i].addr = uint64_t(uintptr_t(verify_buf.p + verify_off[i]));
			}
			if (descs.empty())
				continue;
			res.assign(descs.size(), kvblk_result{});
			const uint32_t fl = KVBLK_SUBMIT_PER_OBJECT |
					    ((b->flags & KVBLK_KVSTORE_SUBMIT_PRIORITY) ? KVBLK_SUBMIT_PRIORITY : 0);
			int32_t bad = -1;
			const int ret = submit_io(s, this, descs.data(), uint32_t(descs.size()), fl, res.data(), &bad);
			if (ret == 0)
				return true;
			if (bad >= 0 && size_t(bad) < cur.size() && (ret == -ERANGE || ret == -EBADF)) {
				/*
				 * libkvblk refused the batch for one drive: it is smaller than the store (a
				 * file cut short, a device shrunk) or gone. That drive fails; the part is
				 * issued again without its objects.
				 */
				Drive &d = *s.drives[items[cur[size_t(bad)]].obj->drive];
				fail_drive(s, d, std::string("a read was refused: ") + kvblk_kvstore_last_error());
				std::vector<uint32_t> keep;
				for (uint32_t k : cur) {
					if (items[k].obj->drive == d.index)
						items[k].status = -ENODEV;
					else
						keep.push_back(k);
				}
				if (!keep.empty()) {
					if (verifying) {
						/* Rebuild the group from the kept items. */
						for (uint32_t k : keep)
							items[k].status = 0;
						part = keep.front();
					} else {
						parts.insert(parts.begin() + long(part), keep);
					}
				}
				continue;
			}
			/* Refused otherwise: fail this part's objects with the reason, go on with the rest. */
			for (uint32_t k : cur)
				if (items[k].status == 1 || verifying)
					items[k].status = ret;
		}
	}

	void on_batch(const kvblk_cqe &cqe) override
	{
		if (!backend_set) {
			backend = cqe.backend;
			backend_set = true;
		}
		if (!verifying && cqe.path > path)
			path = cqe.path;
		for (uint32_t i = 0; i < cur.size(); i++)
			if (items[cur[i]].status == 1 || verifying)
				judge(i);
		Store &st = s;
		if (next()) {
			io_ended(st); /* the one just ended; next() counted the new one */
			return;
		}
		finish();
		delete this;
		io_ended(st);
	}

	void finish()
	{
		uint64_t bytes = 0, hits = 0, bad = 0, errs = 0;
		bool drops = false;
		std::vector<uint32_t> gone, probe;
		{
			std::lock_guard<std::mutex> lk(s.index_mu);
			for (GetItem &it : items) {
				kvblk_kvstore_result &r = b->results[it.op];
				if (it.status == 1)
					it.status = -ECANCELED;
				r.status = it.status;
				Drive &d = *s.drives[it.obj->drive];
				if (it.status == 0) {
					hits++;
					bytes += it.obj->length;
					d.dc->bytes_read.fetch_add(it.obj->length, std::memory_order_relaxed);
					if (it.obj->in_index) {
						lru_unlink(s, it.obj);
						lru_push_front(s, it.obj);
					}
				} else {
					if (it.status == -EBADMSG)
						bad++;
					else
						errs++;
					if (it.status != -ECANCELED)
						d.dc->read_errors.fetch_add(1, std::memory_order_relaxed);
					if (it.status == -EBADMSG && it.obj->in_index) {
						/*
						 * Its bytes cannot be trusted: the key goes, a DEL the writer
						 * commits (a read-only store: a miss for this session only,
						 * nothing written). Other read errors keep the key: the drive's
						 * probe decides about the drive.
						 */
						retire_locked(s, it.obj);
						if (s.flags & KVBLK_KVSTORE_OPEN_RDONLY) {
							it.obj->removal_durable = true;
						} else {
							it.obj->readers++; /* the drop list's, until its DEL is durable */
							s.drops.push_back(it.obj);
							drops = true;
						}
					}
					if (device_gone(it.status))
						gone.push_back(it.obj->drive);
					else if (it.status == -EIO || it.status == -ENOLINK)
						probe.push_back(it.obj->drive);
				}
				put_reader_locked(s, it.obj);
			}
		}
		for (uint32_t dix : gone)
			fail_drive(s, *s.drives[dix], "a read reported the device gone");
		s.ctr->hits.fetch_add(hits, std::memory_order_relaxed);
		s.ctr->checksum_failures.fetch_add(bad, std::memory_order_relaxed);
		s.ctr->get_errors.fetch_add(errs, std::memory_order_relaxed);
		s.ctr->bytes_read.fetch_add(bytes, std::memory_order_relaxed);
		if (s.flags & KVBLK_KVSTORE_OPEN_RDONLY)
			probe.clear(); /* no writer thread: a read-only store never probes */
		if (drops || !probe.empty()) {
			std::lock_guard<std::mutex> lk(s.writer_mu);
			for (uint32_t dix : probe)
				s.probe_mask |= 1ull << dix;
			s.writer_cv.notify_all();
		}
		finish_batch(s, std::move(b), path, backend, bytes);
	}
};

} // namespace

int resolve_host(Store &s, uint32_t buf_id, uint64_t addr, uint64_t len, bool *host, uint8_t **host_addr,
		 uint32_t *path)
{
	if (buf_id == KVBLK_BUF_NONE) {
		*host = true;
		*host_addr = reinterpret_cast<uint8_t *>(uintptr_t(addr));
		*path = KVBLK_PATH_HOST;
		return 0;
	}
	kvblk_buffer_info bi{};
	bi.info_size = sizeof(bi);
	if (int ret = kvblk_get_buffer_info(s.dev, buf_id, &bi))
		return ret;
	uint64_t end;
	if (__builtin_add_overflow(addr, len, &end) || end > bi.len)
		return -EINVAL;
	*host = bi.kind == KVBLK_MEM_HOST;
	*host_addr = *host ? reinterpret_cast<uint8_t *>(uintptr_t(bi.addr + addr)) : nullptr;
	*path = bi.path;
	return 0;
}

int start_get(Store &s, std::unique_ptr<Batch> b)
{
	const uint32_t n = uint32_t(b->ops.size());
	/* Where each destination is (resolved when the batch was checked). */
	std::vector<GetItem> cand(n);
	for (uint32_t i = 0; i < n; i++) {
		const OpCopy &op = b->ops[i];
		GetItem &it = cand[i];
		it.op = i;
		it.buf_id = op.buf_id;
		it.addr = op.addr;
		it.host = op.is_host;
		it.host_addr = op.host;
	}
	auto op = std::make_unique<GetOp>(s, std::move(b));
	Batch &bt = *op->b;
	uint64_t misses = 0, errs = 0;
	{
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (uint32_t i = 0; i < n; i++) {
			kvblk_kvstore_result &r = bt.results[i];
			const OpCopy &oc = bt.ops[i];
			auto f = s.index.find(oc.key);
			if (f == s.index.end()) {
				r.status = -ENOENT;
				misses++;
				continue;
			}
			Obj *o = f->second;
			const Drive &d = *s.drives[o->drive];
			r.length = o->length;
			r.meta_len = uint32_t(o->meta.size());
			r.drive = o->drive;
			if (oc.meta_out && oc.meta_cap)
				memcpy(oc.meta_out, o->meta.data(), std::min<size_t>(oc.meta_cap, o->meta.size()));
			if (!d.ok()) {
				r.status = -ENODEV;
				errs++;
				continue;
			}
			GetItem &it = cand[i];
			const uint64_t full = round_up(o->length, d.lba);
			if (oc.length < o->length || (!it.host && oc.length < full)) {
				r.status = -EMSGSIZE;
				errs++;
				continue;
			}
			if (!it.host && it.addr % d.mem_align) {
				r.status = -EINVAL;
				errs++;
				continue;
			}
			it.obj = o;
			o->readers++;
			op->items.push_back(it);
		}
	}
	s.ctr->misses.fetch_add(misses, std::memory_order_relaxed);
	s.ctr->get_errors.fetch_add(errs, std::memory_order_relaxed);
	if (op->items.empty()) {
		finish_batch(s, std::move(op->b), KVBLK_PATH_HOST, 0, 0);
		return 0;
	}
	/* Interleave the drives, then cut into parts of at most drive_budget bytes per drive. */
	std::vector<std::vector<uint32_t>> per(s.drives.size());
	for (uint32_t k = 0; k < op->items.size(); k++)
		per[op->items[k].obj->drive].push_back(k);
	std::vector<uint32_t> order;
	for (size_t round = 0; order.size() < op->items.size(); round++)
		for (auto &v : per)
			if (round < v.size())
				order.push_back(v[round]);
	/*
	 * Parts: at most drive_budget bytes per drive, max_descs objects, and KVBLK_MAX_BOUNCE_BYTES of
	 * libkvblk's bounce (a destination not aligned to the drive's mem_align is read whole through
	 * it; one whose room ends inside the last block, that block): past it libkvblk refuses the
	 * batch (-E2BIG).
	 */
	std::vector<uint64_t> used(s.drives.size(), 0);
	uint64_t bounce = 0;
	op->parts.emplace_back();
	for (uint32_t k : order) {
		const GetItem &it = op->items[k];
		const Obj *o = it.obj;
		const Drive &d = *s.drives[o->drive];
		const uint64_t len = o->length;
		const uint64_t full = round_up(len, d.lba);
		uint64_t b = 0;
		if (it.host && uintptr_t(it.host_addr) % d.mem_align)
			b = full;
		else if (it.host && bt.ops[it.op].length < full)
			b = d.lba;
		auto &p = op->parts.back();
		if (!p.empty() && (used[o->drive] + len > s.drive_budget || p.size() >= s.max_descs ||
				   bounce + b > KVBLK_MAX_BOUNCE_BYTES)) {
			op->parts.emplace_back();
			std::fill(used.begin(), used.end(), 0);
			bounce = 0;
		}
		op->parts.back().push_back(k);
		used[o->drive] += len;
		bounce += b;
	}
	GetOp *raw = op.release();
	if (!raw->next()) {
		/* Nothing could be submitted: every item carries the refusal. */
		raw->finish();
		delete raw;
	}
	return 0;
}

} // namespace kvblk::kvstore

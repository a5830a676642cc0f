// SPDX-License-Identifier: MIT
// The writer thread: puts, deletes, drops of damaged objects, drive probes and checkpoints,
// one after another, in the order of docs/kvstore-format.md section 7: evictions durable
// before their slots are written; data written and flushed before its records; records
// committed before the keys are published.
#include "store.hpp"

#include "crc32c.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <signal.h>

namespace kvblk::kvstore {
namespace {

uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

bool device_gone(int status)
{
	return status == -ENODEV || status == -ENXIO;
}

/* The data writes of a put: the writer waits for the reaper to hand over the batch entry. */
struct PutIo final : IoOp {
	std::mutex mu;
	std::condition_variable cv;
	bool done = false;
	void on_object(const kvblk_cqe &) override {}
	void on_batch(const kvblk_cqe &) override
	{
		std::lock_guard<std::mutex> lk(mu);
		done = true;
		cv.notify_all();
	}
	void wait()
	{
		std::unique_lock<std::mutex> lk(mu);
		cv.wait(lk, [&] { return done; });
	}
};

struct PutItem {
	uint32_t op = 0;
	uint8_t cls = 0;
	uint32_t drive = UINT32_MAX;
	uint64_t slot = 0;
	int status = 1; /* 1: going on */
	uint32_t crc = 0;
	AlignedBuf bounce;
};

/* Commit @recs (per drive); a drive whose commit fails is failed; returns the failed drives. */
std::vector<bool> commit_all(Store &s, std::map<uint32_t, std::vector<Record>> &recs)
{
	std::vector<bool> bad(s.drives.size(), false);
	for (auto &[dix, v] : recs) {
		Drive &d = *s.drives[dix];
		if (!d.ok()) {
			bad[dix] = true;
			continue;
		}
		if (int ret = commit_records(s, d, v)) {
			fail_drive(s, d, std::string("journal commit failed: ") + kvblk_kvstore_last_error());
			d.dc->write_errors.fetch_add(1, std::memory_order_relaxed);
			(void)ret;
			bad[dix] = true;
		}
	}
	return bad;
}

/* The records one unit of work (a key) adds, each to its drive. */
using Unit = std::vector<std::pair<uint32_t, Record>>;

/*
 * A deletion of @o: its DEL, and while a drive of the store is missing a tombstone too (that
 * drive may hold an older copy of the key; docs/kvstore-format.md section 8). index_mu held.
 */
void add_deletion(Store &s, Unit &u, const Obj *o)
{
	Record r;
	r.type = kRecDel;
	r.cls = o->cls;
	r.slot = o->slot;
	r.gen = s.next_gen++;
	r.key = o->key;
	if (s.degraded_open) {
		Record t;
		t.type = kRecTomb;
		t.gen = r.gen;
		t.key = o->key;
		s.tombs[o->key] = {r.gen, o->drive};
		u.emplace_back(o->drive, std::move(t));
	}
	u.emplace_back(o->drive, std::move(r));
}

/*
 * Commit @units in groups, each drive's share of a group within its group_limit(), one group
 * after another; after each, @done(from, to, bad) applies units [from, to) (bad: the drives whose
 * commit failed). Keys become visible group by group, each once its records are durable.
 */
void commit_groups(Store &s, std::vector<Unit> &units,
		   const std::function<void(size_t, size_t, const std::vector<bool> &)> &done)
{
	size_t from = 0;
	while (from < units.size()) {
		std::map<uint32_t, std::vector<Record>> recs;
		std::vector<uint64_t> bytes(s.drives.size(), 0);
		size_t to = from;
		for (; to < units.size(); to++) {
			std::vector<uint64_t> more(s.drives.size(), 0);
			for (const auto &[d, r] : units[to])
				more[d] += record_bytes(r.key.size(), r.meta.size());
			bool fits = true;
			for (size_t d = 0; d < more.size(); d++)
				if (more[d] && bytes[d] + more[d] > group_limit(*s.drives[d]))
					fits = false;
			if (!fits && to > from)
				break;
			for (auto &[d, r] : units[to]) {
				bytes[d] += record_bytes(r.key.size(), r.meta.size());
				recs[d].push_back(std::move(r));
			}
		}
		const std::vector<bool> bad = commit_all(s, recs);
		done(from, to, bad);
		from = to;
	}
}

void run_put(Store &s, std::unique_ptr<Batch> b)
{
	const uint32_t n = uint32_t(b->ops.size());
	std::vector<PutItem> items(n);
	std::vector<Obj *> victims;
	/* 1. Slots. */
	{
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (uint32_t i = 0; i < n; i++) {
			PutItem &it = items[i];
			it.op = i;
			const int c = class_for(s, b->ops[i].length);
			it.cls = uint8_t(c);
			const size_t before = victims.size();
			const int ret = alloc_slot_locked(s, b->ops[i].key, it.cls, &it.drive, &it.slot, &victims);
			if (ret)
				it.status = ret;
			(void)before;
		}
	}
	/* 2. Evictions: their deletion durable before their slots are written. */
	if (!victims.empty()) {
		std::vector<Unit> units(victims.size());
		{
			std::lock_guard<std::mutex> lk(s.index_mu);
			for (size_t v = 0; v < victims.size(); v++)
				add_deletion(s, units[v], victims[v]);
		}
		std::vector<bool> bad(s.drives.size(), false);
		commit_groups(s, units, [&](size_t, size_t, const std::vector<bool> &b2) {
			for (size_t d = 0; d < bad.size(); d++)
				bad[d] = bad[d] || b2[d];
		});
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (Obj *o : victims) {
			try {
				if (s.evicted.size() >= kMaxEvictedKept) {
					s.evicted.pop_front();
					s.ctr->evictions_dropped.fetch_add(1, std::memory_order_relaxed);
				}
				s.evicted.push_back(Evicted{o->key, o->drive, o->length, o->gen});
			} catch (...) {
				s.ctr->evictions_dropped.fetch_add(1, std::memory_order_relaxed);
			}
			s.ctr->evictions.fetch_add(1, std::memory_order_relaxed);
			delete o; /* its slot went to a put of this batch */
		}
		for (PutItem &it : items)
			if (it.status == 1 && bad[it.drive])
				it.status = -EIO;
	}
	/* 3. The data, all in flight; CRCs from the sources meanwhile. */
	std::vector<kvblk_desc> descs;
	std::vector<uint32_t> owner;
	for (PutItem &it : items) {
		if (it.status != 1)
			continue;
		const OpCopy &op = b->ops[it.op];
		const Drive &d = *s.drives[it.drive];
		const uint64_t off = slot_offset(d, it.cls, it.slot);
		const uint64_t prefix = op.length / d.lba * d.lba;
		const bool aligned = uintptr_t(op.host) % d.mem_align == 0;
		kvblk_desc x{};
		x.target = d.target;
		x.tag = it.op;
		if (aligned && prefix) {
			x.offset = off;
			x.length = prefix;
			if (op.buf_id != KVBLK_BUF_NONE) {
				x.buf_id = op.buf_id;
				x.addr = op.addr;
			} else {
				x.buf_id = KVBLK_BUF_NONE;
				x.addr = uint64_t(uintptr_t(op.host));
			}
			descs.push_back(x);
			owner.push_back(it.op);
		}
		const uint64_t from = aligned ? prefix : 0;
		if (from < op.length) {
			const uint64_t rest = round_up(op.length - from, d.lba);
			it.bounce = AlignedBuf(rest);
			memcpy(it.bounce.p, op.host + from, op.length - from);
			x.offset = off + from;
			x.length = rest;
			x.buf_id = KVBLK_BUF_NONE;
			x.addr = uint64_t(uintptr_t(it.bounce.p));
			descs.push_back(x);
			owner.push_back(it.op);
		}
	}
	std::vector<kvblk_result> res(descs.size());
	bool crcs = false;
	for (size_t at = 0; at < descs.size();) {
		/* The next chunk: descriptors of items still going on. */
		std::vector<kvblk_desc> chunk;
		std::vector<size_t> idx;
		for (; at < descs.size() && chunk.size() < s.max_descs; at++) {
			if (items[owner[at]].status != 1)
				continue;
			chunk.push_back(descs[at]);
			idx.push_back(at);
		}
		while (!chunk.empty()) {
			std::vector<kvblk_result> r(chunk.size());
			PutIo io;
			int32_t bad = -1;
			const int ret = submit_io(s, &io, chunk.data(), uint32_t(chunk.size()), KVBLK_SUBMIT_STORE,
						  r.data(), &bad);
			if (ret == 0) {
				if (!crcs) {
					for (PutItem &it : items)
						if (it.status == 1)
							it.crc = crc32c(0, b->ops[it.op].host, b->ops[it.op].length);
					crcs = true;
				}
				io.wait();
				io_ended(s);
				for (size_t k = 0; k < chunk.size(); k++)
					res[idx[k]] = r[k];
				break;
			}
			if (bad >= 0 && size_t(bad) < chunk.size() && (ret == -ERANGE || ret == -EBADF)) {
				/* One drive refused (cut short, gone): it fails, the rest is written. */
				const uint32_t dix = items[owner[idx[size_t(bad)]]].drive;
				fail_drive(s, *s.drives[dix], std::string("a write was refused: ") + kvblk_kvstore_last_error());
				std::vector<kvblk_desc> keep;
				std::vector<size_t> kidx;
				for (size_t k = 0; k < chunk.size(); k++) {
					PutItem &it = items[owner[idx[k]]];
					if (it.drive == dix) {
						it.status = -ENODEV;
						continue;
					}
					keep.push_back(chunk[k]);
					kidx.push_back(idx[k]);
				}
				chunk.swap(keep);
				idx.swap(kidx);
				continue;
			}
			for (size_t k = 0; k < chunk.size(); k++)
				res[idx[k]].status = ret;
			break;
		}
	}
	if (!crcs)
		for (PutItem &it : items)
			if (it.status == 1)
				it.crc = crc32c(0, b->ops[it.op].host, b->ops[it.op].length);
	for (size_t k = 0; k < descs.size(); k++) {
		PutItem &it = items[owner[k]];
		if (res[k].status && it.status == 1)
			it.status = res[k].status;
	}
	/* Items whose CRC was not computed (a refused first submit): compute now for consistency. */
	std::vector<bool> written(s.drives.size(), false);
	{
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (PutItem &it : items) {
			if (it.status == 1) {
				written[it.drive] = true;
				continue;
			}
			if (it.drive != UINT32_MAX && it.status != -ENOSPC && it.status != -ENODEV) {
				/* Nothing durable names the slot: it is free again at once. */
				free_slot_locked(s, it.drive, it.cls, it.slot);
			}
		}
	}
	for (PutItem &it : items)
		if (it.status != 1 && it.status != -ENOSPC && it.status != -ENODEV && it.drive != UINT32_MAX) {
			s.drives[it.drive]->dc->write_errors.fetch_add(1, std::memory_order_relaxed);
			if (device_gone(it.status))
				fail_drive(s, *s.drives[it.drive], "a write reported the device gone");
		}
	/* 4. The data durable. */
	for (uint32_t dix = 0; dix < s.drives.size(); dix++) {
		if (!written[dix])
			continue;
		Drive &d = *s.drives[dix];
		if (int ret = flush_drive(s, d)) {
			fail_drive(s, d, std::string("flush failed: ") + kvblk_kvstore_last_error());
			for (PutItem &it : items)
				if (it.status == 1 && it.drive == dix)
					it.status = ret;
		}
	}
	/* 5. The records (and deletions of keys that moved to another drive). */
	std::vector<Unit> units(n);
	std::vector<uint64_t> gens(n, 0);
	{
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (PutItem &it : items) {
			if (it.status != 1)
				continue;
			const OpCopy &op = b->ops[it.op];
			Record r;
			r.type = kRecPut;
			r.cls = it.cls;
			r.crc = it.crc;
			r.slot = it.slot;
			r.length = op.length;
			r.gen = gens[it.op] = s.next_gen++;
			r.key = op.key;
			r.meta = op.meta;
			auto f = s.index.find(op.key);
			if (f != s.index.end() && f->second->drive != it.drive) {
				Record del;
				del.type = kRecDel;
				del.cls = f->second->cls;
				del.slot = f->second->slot;
				del.gen = r.gen;
				del.key = op.key;
				units[it.op].emplace_back(f->second->drive, std::move(del));
			}
			units[it.op].emplace_back(it.drive, std::move(r));
		}
	}
	/* 6. Publish, group by group. */
	uint64_t stored = 0, errors = 0;
	commit_groups(s, units, [&](size_t from, size_t to, const std::vector<bool> &bad) {
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (size_t i = from; i < to; i++) {
			PutItem &it = items[i];
			kvblk_kvstore_result &r = b->results[it.op];
			const OpCopy &op = b->ops[it.op];
			if (it.status == 1 && bad[it.drive])
				it.status = -EIO;
			if (it.status != 1) {
				r.status = it.status;
				r.drive = it.drive;
				errors++;
				continue;
			}
			Obj *o = new (std::nothrow) Obj;
			if (!o) {
				/* The record is durable: the key reappears at the next open. */
				r.status = -ENOMEM;
				errors++;
				continue;
			}
			o->key = op.key;
			o->meta = op.meta;
			o->drive = it.drive;
			o->cls = it.cls;
			o->slot = it.slot;
			o->length = op.length;
			o->crc = it.crc;
			o->gen = gens[it.op];
			publish_locked(s, o);
			r.status = 0;
			r.length = op.length;
			r.drive = it.drive;
			stored += op.length;
			s.drives[it.drive]->dc->bytes_written.fetch_add(op.length, std::memory_order_relaxed);
		}
	});
	s.ctr->bytes_written.fetch_add(stored, std::memory_order_relaxed);
	s.ctr->put_errors.fetch_add(errors, std::memory_order_relaxed);
	finish_batch(s, std::move(b), KVBLK_PATH_HOST, 0, stored);
}

void run_delete(Store &s, std::unique_ptr<Batch> b)
{
	const uint32_t n = uint32_t(b->ops.size());
	std::vector<Unit> units(n);
	std::vector<Obj *> gone(n, nullptr);
	{
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (uint32_t i = 0; i < n; i++) {
			kvblk_kvstore_result &r = b->results[i];
			auto f = s.index.find(b->ops[i].key);
			if (f == s.index.end()) {
				r.status = -ENOENT;
				continue;
			}
			Obj *o = f->second;
			r.drive = o->drive;
			r.length = o->length;
			if (!s.drives[o->drive]->ok()) {
				r.status = -ENODEV;
				continue;
			}
			retire_locked(s, o);
			add_deletion(s, units[i], o);
			gone[i] = o;
		}
	}
	commit_groups(s, units, [&](size_t from, size_t to, const std::vector<bool> &bad) {
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (size_t i = from; i < to; i++) {
			Obj *o = gone[i];
			if (!o)
				continue;
			b->results[i].status = bad[o->drive] ? -EIO : 0;
			removal_durable_locked(s, o);
		}
	});
	finish_batch(s, std::move(b), KVBLK_PATH_HOST, 0, 0);
}

} // namespace

void run_drops(Store &s)
{
	std::vector<Obj *> drops;
	std::vector<Unit> units;
	{
		std::lock_guard<std::mutex> lk(s.index_mu);
		drops.swap(s.drops);
		units.resize(drops.size());
		for (size_t i = 0; i < drops.size(); i++)
			add_deletion(s, units[i], drops[i]);
	}
	commit_groups(s, units, [&](size_t from, size_t to, const std::vector<bool> &) {
		std::lock_guard<std::mutex> lk(s.index_mu);
		for (size_t i = from; i < to; i++) {
			drops[i]->removal_durable = true;
			put_reader_locked(s, drops[i]); /* the drop list's hold */
		}
	});
}

namespace {

void run_probes(Store &s, uint64_t mask)
{
	AlignedBuf blk(kBlock);
	for (uint32_t dix = 0; dix < s.drives.size() && dix < 64; dix++) {
		if (!(mask & (1ull << dix)))
			continue;
		Drive &d = *s.drives[dix];
		if (!d.ok())
			continue;
		if (read_meta(s, d, kSbOffset[0], blk.p, kBlock))
			fail_drive(s, d, std::string("a read failed and the drive does not answer: ") +
						 kvblk_kvstore_last_error());
	}
}

void checkpoints_due(Store &s)
{
	for (auto &dp : s.drives)
		if (dp->ok() && dp->target != UINT32_MAX && checkpoint_due(*dp))
			if (write_checkpoint(s, *dp))
				fail_drive(s, *dp, std::string("checkpoint failed: ") + kvblk_kvstore_last_error());
}

void writer_main(Store &s)
{
	std::unique_lock<std::mutex> lk(s.writer_mu);
	for (;;) {
		s.writer_cv.wait(lk, [&] {
			std::lock_guard<std::mutex> ik(s.index_mu);
			return s.writer_stop || !s.writer_q.empty() || !s.drops.empty() || s.probe_mask;
		});
		const uint64_t probes = s.probe_mask;
		s.probe_mask = 0;
		bool drops;
		{
			std::lock_guard<std::mutex> ik(s.index_mu);
			drops = !s.drops.empty();
		}
		std::unique_ptr<Batch> b;
		if (!s.writer_q.empty() && !s.writer_stop) {
			b = std::move(s.writer_q.front());
			s.writer_q.pop_front();
		}
		if (!b && !drops && !probes && s.writer_stop)
			break;
		s.writer_busy = true;
		lk.unlock();
		if (probes)
			run_probes(s, probes);
		if (drops)
			run_drops(s);
		if (b) {
			if (b->kind == KVBLK_KVSTORE_PUT)
				run_put(s, std::move(b));
			else
				run_delete(s, std::move(b));
		}
		checkpoints_due(s);
		lk.lock();
		s.writer_busy = false;
		s.writer_cv.notify_all();
	}
	/* Batches that never started end cancelled (their waiters wake). */
	while (!s.writer_q.empty()) {
		std::unique_ptr<Batch> b = std::move(s.writer_q.front());
		s.writer_q.pop_front();
		for (size_t i = 0; i < b->ops.size(); i++)
			b->results[i].status = -ECANCELED;
		lk.unlock();
		finish_batch(s, std::move(b), KVBLK_PATH_HOST, 0, 0);
		lk.lock();
	}
}

} // namespace

void writer_enqueue(Store &s, std::unique_ptr<Batch> b)
{
	std::lock_guard<std::mutex> lk(s.writer_mu);
	s.writer_q.push_back(std::move(b));
	s.writer_cv.notify_all();
}

void writer_kick(Store &s)
{
	std::lock_guard<std::mutex> lk(s.writer_mu);
	s.writer_cv.notify_all();
}

int start_writer(Store &s)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	try {
		s.writer = std::thread([&s] { writer_main(s); });
	} catch (const std::system_error &e) {
		pthread_sigmask(SIG_SETMASK, &old, nullptr);
		return fail(-EAGAIN, "kvblk store: cannot start its writer thread: %s", e.what());
	}
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return 0;
}

void stop_writer(Store &s)
{
	if (!s.writer.joinable())
		return;
	{
		std::lock_guard<std::mutex> lk(s.writer_mu);
		s.writer_stop = true;
		s.writer_cv.notify_all();
	}
	s.writer.join();
}

void finish_batch(Store &s, std::unique_ptr<Batch> b, uint32_t path, uint32_t backend, uint64_t bytes)
{
	kvblk_cqe c{};
	c.ticket = b->ticket;
	c.user_data = b->user_data;
	c.flags = KVBLK_CQE_BATCH;
	c.index = uint32_t(b->ops.size());
	c.bytes = bytes;
	c.tag = b->kind;
	c.path = path;
	c.backend = backend;
	for (size_t i = 0; i < b->ops.size(); i++) {
		const int st = b->results[i].status;
		if (st) {
			c.failed++;
			if (!c.status)
				c.status = st;
		}
	}
	c.elapsed_ns = now_ns() - b->t_submit;
	s.cq.post(c);
}

} // namespace kvblk::kvstore

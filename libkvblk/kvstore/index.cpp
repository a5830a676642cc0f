// SPDX-License-Identifier: MIT
// The in-memory index: keys to objects, the LRU list of every class, the slot allocators of
// every drive and class, and placement (docs/kvstore-format.md, section 9). Every function
// here runs with Store::index_mu held and does no I/O.
//
// An object leaves the index (retire_locked()) when it is deleted, replaced, evicted or
// dropped; its slot is free again only when both the record that removed it is durable and
// no get is reading it (removal_durable_locked(), put_reader_locked()): a slot is never
// written while a durable record or a reader still needs its bytes.
#include "store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvblk::kvstore {
namespace {

/* 64-bit FNV-1a, then a final mix: placement only needs a well spread, stable hash. */
uint64_t hash64(std::string_view key, uint64_t seed) noexcept
{
	uint64_t h = 0xcbf29ce484222325ull ^ (seed * 0x9e3779b97f4a7c15ull);
	for (unsigned char c : key) {
		h ^= c;
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

void release_obj(Store &s, Obj *o) noexcept
{
	free_slot_locked(s, o->drive, o->cls, o->slot);
	delete o;
}

} // namespace

void lru_unlink(Store &s, Obj *o) noexcept
{
	Obj *&head = s.lru_head[o->cls];
	Obj *&tail = s.lru_tail[o->cls];
	if (o->lru_prev)
		o->lru_prev->lru_next = o->lru_next;
	else if (head == o)
		head = o->lru_next;
	if (o->lru_next)
		o->lru_next->lru_prev = o->lru_prev;
	else if (tail == o)
		tail = o->lru_prev;
	o->lru_prev = o->lru_next = nullptr;
}

void lru_push_front(Store &s, Obj *o) noexcept
{
	Obj *&head = s.lru_head[o->cls];
	Obj *&tail = s.lru_tail[o->cls];
	o->lru_prev = nullptr;
	o->lru_next = head;
	if (head)
		head->lru_prev = o;
	head = o;
	if (!tail)
		tail = o;
}

void free_slot_locked(Store &s, uint32_t drive, uint8_t cls, uint64_t slot) noexcept
{
	SlotAlloc &a = s.drives[drive]->alloc[cls];
	try {
		a.free.push_back(slot);
	} catch (...) {
		/* Out of memory: the slot is lost until the next open, which finds it free. */
	}
}

void retire_locked(Store &s, Obj *o) noexcept
{
	if (!o->in_index)
		return;
	auto it = s.index.find(o->key);
	if (it != s.index.end() && it->second == o)
		s.index.erase(it);
	lru_unlink(s, o);
	o->in_index = false;
	Drive &d = *s.drives[o->drive];
	d.alloc[o->cls].objects--;
	d.objects--;
	s.objects--;
	s.bytes_stored -= o->length;
	s.list_epoch.fetch_add(1, std::memory_order_relaxed);
}

void removal_durable_locked(Store &s, Obj *o) noexcept
{
	o->removal_durable = true;
	if (o->readers == 0)
		release_obj(s, o);
}

void put_reader_locked(Store &s, Obj *o) noexcept
{
	if (--o->readers == 0 && !o->in_index && o->removal_durable)
		release_obj(s, o);
}

void publish_locked(Store &s, Obj *o) noexcept
{
	auto it = s.index.find(o->key);
	if (it != s.index.end()) {
		Obj *old = it->second;
		retire_locked(s, old);
		/* The new record names the key: the old one's removal is durable with it. */
		removal_durable_locked(s, old);
	}
	s.index.emplace(std::string_view(o->key), o);
	adopt_locked(s, o);
}

void adopt_locked(Store &s, Obj *o) noexcept
{
	o->in_index = true;
	lru_push_front(s, o);
	Drive &d = *s.drives[o->drive];
	d.alloc[o->cls].objects++;
	d.objects++;
	s.objects++;
	s.bytes_stored += o->length;
	s.list_epoch.fetch_add(1, std::memory_order_relaxed);
}

int class_for(const Store &s, uint64_t length) noexcept
{
	for (uint32_t c = 0; c < s.geo.nr_classes; c++)
		if (s.geo.classes[c].slot_bytes >= length)
			return int(c);
	return -1;
}

void fail_drive(Store &s, Drive &d, const std::string &why)
{
	std::lock_guard<std::mutex> lk(s.index_mu);
	if (d.state.load() == KVBLK_KVSTORE_DRIVE_OK) {
		d.why_failed = why;
		d.state.store(KVBLK_KVSTORE_DRIVE_FAILED);
		if (d.dc)
			d.dc->state.store(KVBLK_KVSTORE_DRIVE_FAILED);
	}
}

int alloc_slot_locked(Store &s, std::string_view key, uint8_t cls, uint32_t *drive, uint64_t *slot,
		      std::vector<Obj *> *victims)
{
	/* Rendezvous hashing over the drives that serve: the key's drive while the set holds. */
	int primary = -1;
	uint64_t best = 0, total_free = 0;
	uint32_t serving = 0;
	for (const auto &dp : s.drives) {
		const Drive &d = *dp;
		if (!d.ok())
			continue;
		serving++;
		total_free += d.alloc[cls].free_count();
		const uint64_t h = hash64(key, d.index + 1);
		if (primary < 0 || h > best) {
			best = h;
			primary = int(d.index);
		}
	}
	if (primary < 0)
		return -ENODEV;
	int pick = -1;
	const uint64_t pf = s.drives[primary]->alloc[cls].free_count();
	const uint64_t mean_others = serving > 1 ? (total_free - pf) / (serving - 1) : 0;
	if (pf > 0 && pf * 2 >= mean_others) {
		pick = primary;
	} else {
		uint64_t most = 0;
		for (const auto &dp : s.drives)
			if (dp->ok() && dp->alloc[cls].free_count() > most) {
				most = dp->alloc[cls].free_count();
				pick = int(dp->index);
			}
	}
	if (pick >= 0) {
		SlotAlloc &a = s.drives[pick]->alloc[cls];
		if (!a.free.empty()) {
			*slot = a.free.back();
			a.free.pop_back();
		} else {
			*slot = a.hwm++;
		}
		*drive = uint32_t(pick);
		return 0;
	}
	if (s.when_full != KVBLK_KVSTORE_EVICT_LRU)
		return -ENOSPC;
	/* Every serving drive's class is full: evict the least recently used object not being read. */
	for (Obj *o = s.lru_tail[cls]; o; o = o->lru_prev) {
		if (o->readers || !s.drives[o->drive]->ok())
			continue;
		retire_locked(s, o);
		victims->push_back(o);
		*drive = o->drive;
		*slot = o->slot;
		return 0;
	}
	return -ENOSPC;
}

} // namespace kvblk::kvstore

// SPDX-License-Identifier: MIT
// Create, open and close (docs/kvstore-format.md, sections 2, 3 and 8): the layout of a new
// store, the checks of an existing one (nothing is written until every drive's superblock
// has been read and accepted), the replay of every drive and the merge of their indexes.
#include "store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <map>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace kvblk::kvstore {
namespace {

using ull = unsigned long long;

uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* The kvblk_dev over @paths (drive i = target i) and a flock on each. */
struct Opened {
	kvblk_dev *dev = nullptr;
	std::vector<int> locks;
	std::vector<kvblk_dev_info> info;
	~Opened()
	{
		if (dev)
			kvblk_close(dev);
		for (int fd : locks)
			lock_fd_close(fd);
	}
};

int open_drives(const char *const *paths, uint32_t n, const kvblk_kvstore_open_opts &o, bool write,
		const char *fn, Opened *out)
{
	/* The same file or device twice would be two drives on one medium. */
	std::set<std::pair<dev_t, ino_t>> seen;
	for (uint32_t i = 0; i < n; i++) {
		if (!paths[i])
			return fail(-EINVAL, "%s: path %u is NULL", fn, i);
		struct stat st;
		if (stat(paths[i], &st) == 0) {
			const auto id = S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode) ? std::make_pair(st.st_rdev, ino_t(0))
										   : std::make_pair(st.st_dev, st.st_ino);
			if (!seen.insert(id).second)
				return fail(-EINVAL, "%s: %s is given twice (as the same file or device)", fn, paths[i]);
		}
	}
	kvblk_open_opts oo;
	kvblk_open_opts_init(&oo, sizeof(oo));
	oo.backend = o.backend;
	oo.queue_depth = o.queue_depth;
	oo.workers = o.workers;
	oo.max_cmd_bytes = o.max_cmd_bytes;
	oo.max_descs = o.max_descs;
	oo.flags = write ? KVBLK_OPEN_WRITE : 0;
	oo.max_batches = std::min<uint32_t>(KVBLK_MAX_BATCHES, (o.max_batches ? o.max_batches : 256) * 2 + 16);
	if (int ret = kvblk_open(paths[0], &oo, &out->dev))
		return fail(ret, "%s: drive %s: %s", fn, paths[0], kvblk_last_error());
	for (uint32_t i = 1; i < n; i++) {
		uint32_t id;
		if (int ret = kvblk_add_target(out->dev, paths[i], write ? KVBLK_OPEN_WRITE : 0, &id))
			return fail(ret, "%s: drive %s: %s", fn, paths[i], kvblk_last_error());
		if (id != i)
			return fail(-EINVAL, "%s: drive %s became target %u, not %u", fn, paths[i], id, i);
	}
	out->info.resize(n);
	for (uint32_t i = 0; i < n; i++) {
		kvblk_dev_info &inf = out->info[i];
		inf.info_size = sizeof(inf);
		if (int ret = kvblk_get_target_info(out->dev, i, &inf))
			return fail(ret, "%s: drive %s: %s", fn, paths[i], kvblk_last_error());
		if (inf.logical_block_size > kBlock)
			return fail(-EOPNOTSUPP, "%s: drive %s: logical block size %u is over %llu (not supported)",
				    fn, paths[i], inf.logical_block_size, ull(kBlock));
	}
	for (uint32_t i = 0; i < n; i++) {
		const int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return fail(-errno, "%s: drive %s: %s", fn, paths[i], errno_name(errno).c_str());
		out->locks.push_back(fd);
		lock_fd_add(fd);
		/*
		 * A few tries over 100 ms: a child forked by the process that held the drive keeps the
		 * lock until its fork handler has closed its copy (util.cpp, lock_fd_add()).
		 */
		int r = -1;
		for (int tries = 0; tries < 20 && (r = flock(fd, (write ? LOCK_EX : LOCK_SH) | LOCK_NB)) != 0 &&
				    errno == EWOULDBLOCK; tries++)
			usleep(5000);
		if (r != 0) {
			const int e = errno;
			return fail(e == EWOULDBLOCK ? -EBUSY : -e, "%s: drive %s is open in another kvblk store (%s)",
				    fn, paths[i], e == EWOULDBLOCK ? "flock held" : errno_name(e).c_str());
		}
	}
	return 0;
}

/* Read both superblock copies of target @t. *res: 0, or the error of the better copy. */
int read_superblocks(kvblk_dev *dev, uint32_t t, Superblock *sb, bool *ro_only, int *bad_copies, std::string *why)
{
	AlignedBuf b(kBlock);
	int best = -EMEDIUMTYPE;
	*bad_copies = 0;
	kvblk_dev_info ti{};
	ti.info_size = sizeof(ti);
	if (kvblk_get_target_info(dev, t, &ti) == 0 && ti.capacity < kSbOffset[1] + kBlock) {
		*why = "too small to hold one (" + std::to_string(ti.capacity) + " bytes)";
		return -EMEDIUMTYPE;
	}
	std::string first_why;
	for (int copy = 0; copy < 2; copy++) {
		kvblk_desc x{};
		x.offset = kSbOffset[copy];
		x.length = kBlock;
		x.addr = uint64_t(uintptr_t(b.p));
		x.buf_id = KVBLK_BUF_NONE;
		x.target = t;
		kvblk_result r{};
		const int ret = kvblk_load_many(dev, &x, 1, &r, nullptr);
		if (ret < 0 || r.status) {
			*why = kvblk_last_error();
			return ret < 0 ? ret : r.status;
		}
		std::string w;
		bool ro = false;
		const int d = decode_superblock(b.p, sb, &ro, &w);
		if (d == 0) {
			*ro_only = ro;
			return 0;
		}
		/* A copy without magic next to a good one is damaged too (only both without: not a store). */
		(*bad_copies)++;
		if (first_why.empty() || (best == -EMEDIUMTYPE && d != -EMEDIUMTYPE))
			first_why = w;
		if (best == -EMEDIUMTYPE || d == -EPROTONOSUPPORT)
			best = d;
	}
	*why = first_why;
	return best;
}

/*
 * Per-drive replay state: the objects that hold after its replay, made as the records come
 * (the record's strings moved into them), keyed by views of their own keys.
 */
struct DriveIndex {
	std::unordered_map<std::string_view, Obj *> keys;
	std::unordered_map<uint64_t, Obj *> owners; /* (cls << 56 | slot) -> object */
	std::vector<uint64_t> max_slot;		    /* per class: highest slot + 1 named by a PUT */
	std::unordered_map<std::string, uint64_t> tombs; /* key -> its newest tombstone's gen */
	uint64_t max_gen = 0;
	uint64_t dropped = 0;
	~DriveIndex()
	{
		for (auto &[k, o] : keys)
			delete o;
	}
	void remove(Obj *o)
	{
		owners.erase(owner_key(o->cls, o->slot));
		keys.erase(o->key);
		delete o;
	}
	static uint64_t owner_key(uint8_t cls, uint64_t slot) { return (uint64_t(cls) << 56) | slot; }
};

void apply_record(DriveIndex &di, Record &r, uint32_t drive)
{
	di.max_gen = std::max(di.max_gen, r.gen);
	if (r.type == kRecTomb) {
		uint64_t &g = di.tombs[r.key];
		g = std::max(g, r.gen);
		return;
	}
	auto it = di.keys.find(r.key);
	if (r.type == kRecDel) {
		/*
		 * A DEL removes the object at the slot it names, and only an older one: a DEL queued for
		 * an object that the key has since been put anew over (a dropped object) must not remove
		 * the newer one.
		 */
		if (it != di.keys.end() && it->second->gen < r.gen && it->second->cls == r.cls &&
		    it->second->slot == r.slot)
			di.remove(it->second);
		return;
	}
	di.max_slot[r.cls] = std::max(di.max_slot[r.cls], r.slot + 1);
	if (it != di.keys.end()) {
		if (it->second->gen >= r.gen)
			return; /* an older record of a key already newer */
		di.remove(it->second);
	}
	/* A later record took the slot: whatever held it before is gone. */
	auto own = di.owners.find(DriveIndex::owner_key(r.cls, r.slot));
	if (own != di.owners.end()) {
		di.remove(own->second);
		di.dropped++;
	}
	Obj *o = new Obj;
	o->key = std::move(r.key);
	o->meta = std::move(r.meta);
	o->drive = drive;
	o->cls = r.cls;
	o->slot = r.slot;
	o->length = r.length;
	o->crc = r.crc;
	o->gen = r.gen;
	di.owners.emplace(DriveIndex::owner_key(r.cls, r.slot), o);
	di.keys.emplace(std::string_view(o->key), o);
}

} // namespace

Store::~Store()
{
	stop_verifiers(*this); /* an open that failed after start_reaper() */
	if (dev)
		kvblk_close(dev);
	for (auto &dp : drives)
		lock_fd_close(dp->lock_fd);
	for (auto &[k, o] : index)
		delete o;
	for (Obj *o : drops)
		delete o;
	if (wake_fd >= 0)
		close(wake_fd);
	stats_detach(*this);
}

/* Open the store over @paths: everything but threads and the final checkpoint. */
int open_store(const char *const *paths, uint32_t n, const kvblk_kvstore_open_opts &o, const char *fn,
	       std::unique_ptr<kvblk_kvstore> *out, std::vector<ReplayReport> *reports)
{
	const bool write = !(o.flags & KVBLK_KVSTORE_OPEN_RDONLY);
	auto op = std::make_unique<Opened>();
	if (int ret = open_drives(paths, n, o, write, fn, op.get()))
		return ret;
	/* Every drive's superblock before anything else. */
	std::vector<Superblock> sbs(n);
	std::vector<int> bad_copies(n, 0);
	bool any_ro = false;
	for (uint32_t i = 0; i < n; i++) {
		std::string why;
		bool ro = false;
		const int ret = read_superblocks(op->dev, i, &sbs[i], &ro, &bad_copies[i], &why);
		if (ret == -EMEDIUMTYPE)
			return fail(ret, "%s: %s is not a kvblk store (%s)", fn, paths[i], why.c_str());
		if (ret == -EPROTONOSUPPORT)
			return fail(ret, "%s: %s holds a kvblk store of a newer format: %s", fn, paths[i], why.c_str());
		if (ret)
			return fail(ret, "%s: %s: both superblock copies are damaged (%s)", fn, paths[i], why.c_str());
		any_ro |= ro;
	}
	if (any_ro && write)
		return fail(-EPROTONOSUPPORT, "%s: the store has features this library may read but not write: "
					      "open it with KVBLK_KVSTORE_OPEN_RDONLY", fn);
	const Superblock &g = sbs[0];
	std::vector<int> by_index(g.drive_count, -1);
	for (uint32_t i = 0; i < n; i++) {
		const Superblock &sb = sbs[i];
		if (sb.store_uuid != g.store_uuid || sb.drive_count != g.drive_count || sb.members != g.members)
			return fail(-EXDEV, "%s: %s and %s belong to different kvblk stores (%s, %s)", fn, paths[0],
				    paths[i], uuid_text(g.store_uuid).c_str(), uuid_text(sb.store_uuid).c_str());
		if (sb.nr_classes != g.nr_classes || sb.max_key != g.max_key || sb.max_meta != g.max_meta)
			return fail(-EUCLEAN, "%s: %s disagrees with %s on the store's classes or limits", fn, paths[i],
				    paths[0]);
		for (uint32_t c = 0; c < g.nr_classes; c++)
			if (sb.classes[c].slot_bytes != g.classes[c].slot_bytes)
				return fail(-EUCLEAN, "%s: %s disagrees with %s on class %u's slot size", fn, paths[i],
					    paths[0], c);
		if (by_index[sb.drive_index] >= 0)
			return fail(-EXDEV, "%s: %s and %s are both drive %u of the store", fn,
				    paths[by_index[sb.drive_index]], paths[i], sb.drive_index);
		by_index[sb.drive_index] = int(i);
		if (op->info[i].capacity < sb.drive_bytes)
			return fail(-ERANGE, "%s: %s holds %llu bytes, less than the %llu its store was made with", fn,
				    paths[i], ull(op->info[i].capacity), ull(sb.drive_bytes));
	}
	std::string missing;
	for (uint32_t d = 0; d < g.drive_count; d++)
		if (by_index[d] < 0)
			missing += (missing.empty() ? "" : ", ") + std::to_string(d) + " (" + uuid_text(g.members[d]) + ")";
	if (!missing.empty() && !(o.flags & KVBLK_KVSTORE_OPEN_DEGRADED))
		return fail(-ENODEV, "%s: the store has %u drives; missing: drive %s (open with "
				     "KVBLK_KVSTORE_OPEN_DEGRADED to serve the others)", fn, g.drive_count, missing.c_str());

	auto s = std::make_unique<kvblk_kvstore>();
	s->owner = getpid();
	s->flags = o.flags;
	s->when_full = o.when_full;
	s->drive_budget = o.drive_budget_bytes ? o.drive_budget_bytes : (1ull << 30);
	s->geo = g;
	{
		kvblk_dev_info di{};
		di.info_size = sizeof(di);
		kvblk_get_info(op->dev, &di);
		s->max_descs = di.max_descs;
	}
	s->lru_head.assign(g.nr_classes, nullptr);
	s->lru_tail.assign(g.nr_classes, nullptr);
	for (uint32_t d = 0; d < g.drive_count; d++) {
		auto dr = std::make_unique<Drive>();
		dr->index = d;
		dr->alloc.resize(g.nr_classes);
		if (by_index[d] >= 0) {
			const uint32_t t = uint32_t(by_index[d]);
			dr->target = t;
			dr->path = paths[t];
			dr->sb = sbs[t];
			dr->lba = op->info[t].logical_block_size;
			dr->mem_align = std::max<uint32_t>(op->info[t].mem_align, 1);
			dr->lock_fd = op->locks[t];
			op->locks[t] = -1;
			for (uint32_t c = 0; c < g.nr_classes; c++)
				dr->alloc[c].nr_slots = dr->sb.classes[c].nr_slots;
		} else {
			dr->state.store(KVBLK_KVSTORE_DRIVE_MISSING);
			dr->why_failed = "not given to the open";
			dr->sb = g; /* the shape only */
			dr->sb.drive_index = d;
			dr->sb.drive_uuid = g.members[d];
			for (uint32_t c = 0; c < g.nr_classes; c++)
				dr->alloc[c].nr_slots = 0; /* its slots are not known */
		}
		s->drives.push_back(std::move(dr));
	}
	s->dev = op->dev;
	op->dev = nullptr;
	stats_attach(*s);

	/* Replay every drive, then merge by generation. */
	const bool recover = o.flags & KVBLK_KVSTORE_OPEN_RECOVER;
	reports->assign(g.drive_count, ReplayReport{});
	std::vector<DriveIndex> idx(g.drive_count);
	for (uint32_t d = 0; d < g.drive_count; d++) {
		Drive &dr = *s->drives[d];
		if (dr.target == UINT32_MAX)
			continue;
		(*reports)[d].superblocks_bad = uint32_t(bad_copies[dr.target]);
		idx[d].max_slot.assign(g.nr_classes, 0);
		uint64_t slots = 0;
		for (uint32_t c = 0; c < g.nr_classes; c++)
			slots += dr.sb.classes[c].nr_slots;
		idx[d].keys.reserve(std::min<uint64_t>(slots, 1u << 20));
		idx[d].owners.reserve(std::min<uint64_t>(slots, 1u << 20));
		const int ret = replay_drive(*s, dr, recover, &(*reports)[d],
					     [&](Record &r, uint64_t) { apply_record(idx[d], r, d); });
		if (ret)
			return ret;
		for (uint32_t c = 0; c < g.nr_classes; c++)
			dr.alloc[c].hwm = std::max(dr.alloc[c].hwm, idx[d].max_slot[c]);
		s->next_gen = std::max(s->next_gen, idx[d].max_gen + 1);
	}
	/* The same key on two drives: the higher generation wins; the other's slot is free. */
	size_t total = 0;
	for (const auto &x : idx)
		total += x.keys.size();
	std::vector<Obj *> all;
	all.reserve(total);
	std::unordered_map<std::string_view, Obj *> adopted;
	{
		std::unordered_map<std::string_view, size_t> at; /* key -> index in all (several drives only) */
		if (g.drive_count > 1)
			at.reserve(total);
		for (uint32_t d = 0; d < g.drive_count; d++) {
			for (auto &[k, o] : idx[d].keys) {
				if (g.drive_count > 1) {
					auto it = at.find(std::string_view(o->key));
					if (it != at.end()) {
						const size_t i = it->second;
						Obj *cur = all[i];
						if (cur->gen < o->gen) {
							/* The map's key views the object it is about to lose: re-key it. */
							at.erase(it);
							delete cur;
							all[i] = o;
							at.emplace(std::string_view(o->key), i);
						} else {
							delete o;
						}
						/* The loser's drive still names its slot: checkpoints are written. */
						s->open_rewrite = true;
						continue;
					}
					at.emplace(std::string_view(o->key), all.size());
				}
				all.push_back(o);
			}
			if (g.drive_count == 1)
				adopted.swap(idx[d].keys); /* the index, as it is: no second hashing */
			idx[d].keys.clear(); /* owned by @all now */
			idx[d].owners.clear();
		}
	}
	/*
	 * Tombstones: a key deleted while a drive was missing may still have an older copy there;
	 * every copy older than the key's newest tombstone goes. Kept (and checkpointed) while a
	 * drive is still missing, dropped once all are here (the checkpoints written below then
	 * name neither the copies nor the tombstones).
	 */
	std::unordered_map<std::string, std::pair<uint64_t, uint32_t>> tombs;
	for (uint32_t d = 0; d < g.drive_count; d++)
		for (const auto &[k, gen] : idx[d].tombs) {
			auto &t = tombs[k];
			if (gen > t.first)
				t = {gen, d};
		}
	if (!tombs.empty()) {
		std::vector<Obj *> kept;
		kept.reserve(all.size());
		for (Obj *ob : all) {
			auto t = tombs.find(ob->key);
			if (t != tombs.end() && ob->gen < t->second.first) {
				adopted.erase(std::string_view(ob->key));
				delete ob;
				s->open_rewrite = true;
				continue;
			}
			kept.push_back(ob);
		}
		all.swap(kept);
	}
	s->degraded_open = !missing.empty();
	if (s->degraded_open)
		s->tombs = std::move(tombs);
	else if (!tombs.empty())
		s->open_rewrite = true;
	/*
	 * Generations never repeat across sessions, whichever drives were present: at least the
	 * wall clock in ns (a drive missing now may hold generations above what the others know).
	 * A clock stepped back past an earlier session's puts defeats this.
	 */
	{
		timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		s->next_gen = std::max<uint64_t>(s->next_gen, uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec));
	}
	std::vector<std::vector<std::vector<bool>>> used(g.drive_count);
	for (uint32_t d = 0; d < g.drive_count; d++) {
		used[d].resize(g.nr_classes);
		for (uint32_t c = 0; c < g.nr_classes; c++)
			used[d][c].assign(s->drives[d]->alloc[c].hwm, false);
	}
	for (const Obj *ob : all)
		used[ob->drive][ob->cls][ob->slot] = true;
	std::sort(all.begin(), all.end(), [](const Obj *a, const Obj *b) { return a->gen < b->gen; });
	{
		std::lock_guard<std::mutex> lk(s->index_mu);
		if (g.drive_count == 1) {
			s->index.swap(adopted);
			for (Obj *ob : all)
				adopt_locked(*s, ob);
		} else {
			s->index.reserve(all.size());
			for (Obj *ob : all)
				publish_locked(*s, ob);
		}
		for (uint32_t d = 0; d < g.drive_count; d++)
			for (uint32_t c = 0; c < g.nr_classes; c++) {
				SlotAlloc &a = s->drives[d]->alloc[c];
				a.free.clear();
				for (uint64_t slot = a.hwm; slot-- > 0;)
					if (!used[d][c][slot])
						a.free.push_back(slot);
			}
	}
	if (int ret = s->cq.init(o.max_batches ? o.max_batches : 256))
		return fail(ret, "%s: eventfd: %s", fn, errno_name(ret).c_str());
	*out = std::move(s);
	return 0;
}

namespace {

struct Layout {
	uint64_t drive_bytes, ckpt_bytes, journal_bytes;
	std::vector<ClassGeom> classes;
};

/* Lay out one drive of @bytes; 0 or -ENOSPC with the message. */
int lay_out(uint64_t bytes, const std::vector<kvblk_kvstore_class> &cls, uint64_t journal, uint32_t max_key,
	    uint32_t max_meta, const char *path, Layout *out)
{
	const uint64_t drive = bytes / kBlock * kBlock;
	uint64_t J = journal;
	if (!J)
		J = std::clamp<uint64_t>(drive / 64 / kBlock * kBlock, kMinJournalBytes, kDefaultJournalBytes);
	uint64_t W = 0;
	for (const auto &c : cls)
		W += c.weight ? c.weight : 1;
	const uint64_t rec = max_record_bytes(max_key, max_meta);
	auto place = [&](uint64_t ckpt, std::vector<ClassGeom> *g) -> uint64_t {
		const uint64_t start = align_up(kMetaStart + 2 * ckpt + J, kAreaAlign);
		const uint64_t slack = uint64_t(cls.size()) * kAreaAlign;
		const uint64_t data = drive > start + slack ? drive - start - slack : 0;
		uint64_t off = start, total = 0;
		g->clear();
		for (const auto &c : cls) {
			ClassGeom x;
			x.slot_bytes = c.slot_bytes;
			const unsigned __int128 share = (unsigned __int128)data * (c.weight ? c.weight : 1) / W;
			x.nr_slots = uint64_t(share / c.slot_bytes);
			x.offset = off;
			off = align_up(off + x.nr_slots * x.slot_bytes, kAreaAlign);
			total += x.nr_slots;
			g->push_back(x);
		}
		return total;
	};
	std::vector<ClassGeom> g;
	const uint64_t s0 = place(align_up(kBlock + rec, kBlock), &g);
	const uint64_t ckpt = align_up(kBlock + std::max<uint64_t>(s0, 1) * rec, kBlock);
	place(ckpt, &g);
	uint64_t need = align_up(kMetaStart + 2 * ckpt + J, kAreaAlign);
	bool short_of = false;
	for (const auto &x : g) {
		need += align_up(x.slot_bytes, kAreaAlign);
		short_of |= x.nr_slots == 0;
	}
	if (short_of)
		return fail(-ENOSPC, "kvblk_kvstore_create: %s holds %llu bytes; the store's metadata and one slot of "
				     "every class need at least %llu (more when the classes' weights are uneven)",
			    path, ull(drive), ull(need));
	out->drive_bytes = drive;
	out->ckpt_bytes = ckpt;
	out->journal_bytes = J;
	out->classes = g;
	return 0;
}

int check_create_opts(const kvblk_kvstore_create_opts *c, kvblk_kvstore_create_opts *out,
		      std::vector<kvblk_kvstore_class> *cls)
{
	const char *fn = "kvblk_kvstore_create";
	kvblk_kvstore_create_opts_init(out, sizeof(*out));
	if (c) {
		if (c->opts_size < sizeof(*c) || c->opts_size > (64u << 10))
			return fail(-EINVAL, "%s: opts_size %zu (expected %zu)", fn, c->opts_size, sizeof(*c));
		*out = *c;
	}
	if (out->flags & ~KVBLK_KVSTORE_CREATE_FLAGS_ALL)
		return fail(-EINVAL, "%s: unknown create flags 0x%x", fn, out->flags & ~KVBLK_KVSTORE_CREATE_FLAGS_ALL);
	for (uint64_t r : out->reserved)
		if (r)
			return fail(-EINVAL, "%s: reserved fields must be 0", fn);
	if (out->nr_classes > KVBLK_KVSTORE_MAX_CLASSES)
		return fail(-EINVAL, "%s: %u classes (at most %u)", fn, out->nr_classes, KVBLK_KVSTORE_MAX_CLASSES);
	if (out->nr_classes == 0) {
		cls->push_back(kvblk_kvstore_class{4u << 20, 1, 0});
	} else {
		for (uint32_t i = 0; i < out->nr_classes; i++) {
			const auto &x = out->classes[i];
			if (!x.slot_bytes || x.slot_bytes % KVBLK_KVSTORE_SLOT_ALIGN || x.reserved)
				return fail(-EINVAL, "%s: class %u: slot_bytes %llu is not a non-zero multiple of %u%s", fn,
					    i, ull(x.slot_bytes), KVBLK_KVSTORE_SLOT_ALIGN, x.reserved ? " (or reserved != 0)" : "");
			cls->push_back(x);
		}
	}
	std::sort(cls->begin(), cls->end(), [](const auto &a, const auto &b) { return a.slot_bytes < b.slot_bytes; });
	for (size_t i = 1; i < cls->size(); i++)
		if ((*cls)[i].slot_bytes == (*cls)[i - 1].slot_bytes)
			return fail(-EINVAL, "%s: two classes of %llu-byte slots", fn, ull((*cls)[i].slot_bytes));
	if (out->journal_bytes && (out->journal_bytes % kBlock || out->journal_bytes < kMinJournalBytes))
		return fail(-EINVAL, "%s: journal_bytes %llu is not a multiple of 4096 of at least %llu", fn,
			    ull(out->journal_bytes), ull(kMinJournalBytes));
	if (!out->max_key_bytes)
		out->max_key_bytes = KVBLK_KVSTORE_DEFAULT_MAX_KEY;
	if (out->max_key_bytes > KVBLK_KVSTORE_MAX_KEY)
		return fail(-EINVAL, "%s: max_key_bytes %u is over %u", fn, out->max_key_bytes, KVBLK_KVSTORE_MAX_KEY);
	if (out->max_meta_bytes == UINT32_MAX)
		out->max_meta_bytes = 0;
	else if (!out->max_meta_bytes)
		out->max_meta_bytes = KVBLK_KVSTORE_DEFAULT_MAX_META;
	if (out->max_meta_bytes > KVBLK_KVSTORE_MAX_META)
		return fail(-EINVAL, "%s: max_meta_bytes %u is over %u", fn, out->max_meta_bytes, KVBLK_KVSTORE_MAX_META);
	return 0;
}

/* Files this call made, removed again unless the create succeeds. */
struct Made {
	std::vector<std::string> files;
	bool keep = false;
	~Made()
	{
		if (!keep)
			for (const auto &f : files)
				unlink(f.c_str());
	}
};

int make_file(const char *path, uint64_t bytes, Made *made)
{
	/*
	 * Refused before anything is allocated when the file system has less room: an fallocate(2)
	 * that runs out fills the file system before it fails, and every other writer on it
	 * meanwhile gets ENOSPC.
	 */
	std::string dir = path;
	const auto slash = dir.rfind('/');
	dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
	struct statvfs v;
	if (statvfs(dir.c_str(), &v) == 0 && uint64_t(v.f_bavail) * v.f_frsize < bytes)
		return fail(-ENOSPC, "kvblk_kvstore_create: %s: %llu bytes asked, the file system has %llu free "
				     "(nothing was created)", path, ull(bytes), ull(uint64_t(v.f_bavail) * v.f_frsize));
	const int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(-errno, "kvblk_kvstore_create: cannot create %s: %s", path, errno_name(errno).c_str());
	made->files.push_back(path);
	const int r = posix_fallocate(fd, 0, off_t(bytes));
	close(fd);
	if (r)
		return fail(-r, "kvblk_kvstore_create: %s: preallocating %llu bytes: %s%s", path, ull(bytes),
			    errno_name(r).c_str(), r == ENOSPC ? " (the file system has less free space; nothing is left "
								 "behind)" : "");
	return 0;
}

} // namespace

int create_store(const char *const *paths, uint32_t n, const kvblk_kvstore_create_opts *copts,
		 const kvblk_kvstore_open_opts &o, std::vector<std::string> *made_files)
{
	const char *fn = "kvblk_kvstore_create";
	kvblk_kvstore_create_opts c;
	std::vector<kvblk_kvstore_class> cls;
	if (int ret = check_create_opts(copts, &c, &cls))
		return ret;
	Made made;
	for (uint32_t i = 0; i < n; i++) {
		if (!paths[i])
			return fail(-EINVAL, "%s: path %u is NULL", fn, i);
		struct stat st;
		if (stat(paths[i], &st) == 0) {
			if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode) && !S_ISCHR(st.st_mode))
				return fail(-EOPNOTSUPP, "%s: %s is neither a block device, an NVMe generic char device "
							 "nor a regular file", fn, paths[i]);
			continue;
		}
		if (errno != ENOENT)
			return fail(-errno, "%s: %s: %s", fn, paths[i], errno_name(errno).c_str());
		if (!c.file_bytes)
			return fail(-ENOENT, "%s: %s does not exist (set file_bytes to create it as a file)", fn, paths[i]);
		if (int ret = make_file(paths[i], c.file_bytes, &made))
			return ret;
	}
	Opened op;
	if (int ret = open_drives(paths, n, o, true, fn, &op))
		return ret;
	std::vector<Layout> lay(n);
	for (uint32_t i = 0; i < n; i++) {
		Superblock old;
		bool ro;
		int bad;
		std::string why;
		const int ret = read_superblocks(op.dev, i, &old, &ro, &bad, &why);
		if (ret != -EMEDIUMTYPE && !(c.flags & KVBLK_KVSTORE_CREATE_FORCE))
			return fail(-EEXIST, "%s: %s already holds a kvblk store%s (KVBLK_KVSTORE_CREATE_FORCE overwrites it)",
				    fn, paths[i], ret ? " (damaged or of another format)" : "");
		if (int r = lay_out(op.info[i].capacity, cls, c.journal_bytes, c.max_key_bytes, c.max_meta_bytes, paths[i],
				    &lay[i]))
			return r;
	}
	Superblock sb;
	sb.drive_count = n;
	sb.nr_classes = uint32_t(cls.size());
	sb.store_uuid = new_uuid();
	sb.max_key = c.max_key_bytes;
	sb.max_meta = c.max_meta_bytes;
	timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	sb.created_ns = uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
	for (uint32_t i = 0; i < n; i++)
		sb.members[i] = new_uuid();
	/* A store to read the metadata through (no threads): write_meta() needs a Store. */
	kvblk_kvstore tmp;
	tmp.dev = op.dev;
	tmp.geo = sb;
	tmp.flags = KVBLK_KVSTORE_OPEN_RDONLY; /* its counters on the heap */
	stats_attach(tmp);
	struct Disown {
		kvblk_kvstore &t;
		~Disown() { t.dev = nullptr; } /* @op closes the device */
	} disown{tmp};
	AlignedBuf zero(kSbOffset[1] + kBlock), blk(kBlock);
	for (uint32_t i = 0; i < n; i++) {
		Drive d;
		d.index = i;
		d.target = i;
		d.path = paths[i];
		/* Old superblocks go first: a create cut short leaves no store that looks whole. */
		if (int ret = write_meta(tmp, d, 0, zero.p, kSbOffset[1] + kBlock))
			return ret;
		if (int ret = flush_drive(tmp, d))
			return ret;
	}
	for (uint32_t i = 0; i < n; i++) {
		Superblock x = sb;
		x.drive_index = i;
		x.drive_uuid = sb.members[i];
		x.drive_bytes = lay[i].drive_bytes;
		x.ckpt_offset = kMetaStart;
		x.ckpt_bytes = lay[i].ckpt_bytes;
		x.journal_offset = kMetaStart + 2 * lay[i].ckpt_bytes;
		x.journal_bytes = lay[i].journal_bytes;
		for (size_t k = 0; k < lay[i].classes.size(); k++)
			x.classes[k] = lay[i].classes[k];
		Drive d;
		d.index = i;
		d.target = i;
		d.path = paths[i];
		d.sb = x;
		/* An empty checkpoint in area 0, area 1 and the journal's first block zero. */
		CkptHeader h;
		h.store_uuid = sb.store_uuid;
		h.drive_index = i;
		h.nr_classes = sb.nr_classes;
		h.payload_crc = 0; /* CRC32C of nothing */
		encode_ckpt_header(h, blk.p);
		int ret = write_meta(tmp, d, x.ckpt_offset, blk.p, kBlock);
		if (!ret)
			ret = write_meta(tmp, d, x.ckpt_offset + x.ckpt_bytes, zero.p, kBlock);
		if (!ret)
			ret = write_meta(tmp, d, x.journal_offset, zero.p, kBlock);
		if (!ret)
			ret = flush_drive(tmp, d);
		if (!ret) {
			encode_superblock(x, blk.p);
			ret = write_meta(tmp, d, kSbOffset[0], blk.p, kBlock);
			if (!ret)
				ret = write_meta(tmp, d, kSbOffset[1], blk.p, kBlock);
			if (!ret)
				ret = flush_drive(tmp, d);
		}
		if (ret)
			return ret;
	}
	made.keep = true;
	*made_files = made.files;
	return 0;
}

void close_store(kvblk_kvstore *s)
{
	stop_writer(*s);
	{
		std::unique_lock<std::mutex> lk(s->io_mu);
		s->io_cv.wait(lk, [&] { return s->ios_in_flight == 0; });
	}
	stop_reaper(*s);
	if (!(s->flags & KVBLK_KVSTORE_OPEN_RDONLY) && !s->no_final_checkpoint)
		for (auto &dp : s->drives)
			if (dp->ok() && dp->target != UINT32_MAX && dp->jnl.tail != dp->jnl.ckpt_pos[dp->jnl.newest])
				write_checkpoint(*s, *dp);
	s->cq.shutdown();
	kvblk_close(s->dev);
	s->dev = nullptr;
	for (auto &dp : s->drives) {
		lock_fd_close(dp->lock_fd);
		dp->lock_fd = -1;
	}
	delete s;
}

} // namespace kvblk::kvstore

namespace kvblk::kvstore {

int identify(const char *path, Superblock *sb, uint32_t *ok_copies)
{
	kvblk_open_opts oo;
	kvblk_open_opts_init(&oo, sizeof(oo));
	/* Any backend reads two blocks; io_uring needs no module and no privilege (an NVMe
	 * generic char device: uring_cmd, the only backend that takes one). */
	struct stat st;
	oo.backend = stat(path, &st) == 0 && S_ISCHR(st.st_mode) ? KVBLK_BACKEND_URING_CMD : KVBLK_BACKEND_URING;
	kvblk_dev *dev = nullptr;
	if (int ret = kvblk_open(path, &oo, &dev)) {
		oo.backend = KVBLK_BACKEND_PSYNC;
		if (kvblk_open(path, &oo, &dev))
			return fail(ret, "kvblk_kvstore_identify: %s: %s", path, kvblk_last_error());
	}
	bool ro;
	int bad = 0;
	std::string why;
	const int ret = read_superblocks(dev, 0, sb, &ro, &bad, &why);
	kvblk_close(dev);
	if (ret == -EMEDIUMTYPE)
		return fail(ret, "kvblk_kvstore_identify: %s is not a kvblk store (%s)", path, why.c_str());
	if (ret == -EPROTONOSUPPORT)
		return fail(ret, "kvblk_kvstore_identify: %s holds a kvblk store of a newer format: %s", path, why.c_str());
	if (ret)
		return fail(ret, "kvblk_kvstore_identify: %s: both superblock copies are damaged (%s)", path, why.c_str());
	*ok_copies = 2 - uint32_t(bad);
	return 0;
}

} // namespace kvblk::kvstore

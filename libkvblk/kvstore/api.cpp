// SPDX-License-Identifier: MIT
// The C entry points of <kvblk/kvstore.h>: argument checks, the batch copy made at submit,
// and the queries. Every entry point is noexcept: out of memory is -ENOMEM.
#include "store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <unordered_set>
#include <csignal>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvblk::kvstore {

int open_store(const char *const *paths, uint32_t n, const kvblk_kvstore_open_opts &o, const char *fn,
	       std::unique_ptr<kvblk_kvstore> *out, std::vector<ReplayReport> *reports);
int create_store(const char *const *paths, uint32_t n, const kvblk_kvstore_create_opts *copts,
		 const kvblk_kvstore_open_opts &o, std::vector<std::string> *made_files);
void close_store(kvblk_kvstore *s);
int check_store(kvblk_kvstore *s, uint32_t flags, kvblk_kvstore_check_report *rep);

namespace {

using ull = unsigned long long;

int check_owner(const kvblk_kvstore *s, const char *fn)
{
	if (s && s->owner != getpid())
		return fail(-EBADFD, "%s: this store was opened by process %d; a child made by fork() cannot use it "
				     "(open the store anew)", fn, int(s->owner));
	return 0;
}

int open_common(const char *const *paths, uint32_t n, const kvblk_kvstore_open_opts *opts, const char *fn,
		kvblk_kvstore **out, bool created)
{
	kvblk_kvstore_open_opts o;
	kvblk_kvstore_open_opts_init(&o, sizeof(o));
	if (opts) {
		if (opts->opts_size < sizeof(*opts) || opts->opts_size > (64u << 10))
			return fail(-EINVAL, "%s: opts_size %zu (expected %zu)", fn, opts->opts_size, sizeof(*opts));
		o = *opts;
		o.opts_size = sizeof(o);
	}
	if (o.flags & ~KVBLK_KVSTORE_OPEN_FLAGS_ALL)
		return fail(-EINVAL, "%s: unknown open flags 0x%x", fn, o.flags & ~KVBLK_KVSTORE_OPEN_FLAGS_ALL);
	if ((o.flags & KVBLK_KVSTORE_OPEN_RDONLY) && (o.flags & KVBLK_KVSTORE_OPEN_RECOVER))
		return fail(-EINVAL, "%s: KVBLK_KVSTORE_OPEN_RECOVER writes: not with KVBLK_KVSTORE_OPEN_RDONLY", fn);
	if (o.when_full > KVBLK_KVSTORE_REFUSE)
		return fail(-EINVAL, "%s: when_full %u is neither KVBLK_KVSTORE_EVICT_LRU nor _REFUSE", fn, o.when_full);
	if (o.max_batches > KVBLK_MAX_BATCHES)
		return fail(-EINVAL, "%s: max_batches %u is over %u", fn, o.max_batches, KVBLK_MAX_BATCHES);
	if (o.reserved32)
		return fail(-EINVAL, "%s: reserved fields must be 0", fn);
	for (uint64_t r : o.reserved)
		if (r)
			return fail(-EINVAL, "%s: reserved fields must be 0", fn);
	if (o.max_descs > KVBLK_MAX_DESCS_LIMIT)
		return fail(-EINVAL, "%s: max_descs %u is over %u", fn, o.max_descs, KVBLK_MAX_DESCS_LIMIT);
	std::unique_ptr<kvblk_kvstore> s;
	std::vector<ReplayReport> reps;
	if (int ret = open_store(paths, n, o, fn, &s, &reps))
		return ret;
	if (int ret = start_reaper(*s))
		return ret;
	bool damaged = false, replayed = false;
	for (const auto &r : reps) {
		damaged |= r.damaged;
		replayed |= r.commits > 0 || r.tail_discarded > 0;
	}
	kvblk_kvstore *raw = s.release();
	raw->replay = reps;
	if (damaged) {
		/* RECOVER: what the damage may have touched is found by reading every object. */
		kvblk_kvstore_check_report rep{};
		rep.report_size = sizeof(rep);
		const int ret = check_store(raw, KVBLK_KVSTORE_CHECK_DATA | KVBLK_KVSTORE_CHECK_REPAIR, &rep);
		if (ret < 0) {
			const std::string why = kvblk_kvstore_last_error();
			/* Nothing unchecked may become a checkpoint: the next open finds the damage again. */
			raw->no_final_checkpoint = true;
			close_store(raw);
			return fail(ret, "%s: recovery: %s", fn, why.c_str());
		}
		run_drops(*raw);
		replayed = true;
	}
	/* A checkpoint now, before the writer runs (it alone writes journals after this): the next
	 * open replays nothing. */
	if ((replayed || created || raw->open_rewrite) && !(o.flags & KVBLK_KVSTORE_OPEN_RDONLY))
		for (auto &dp : raw->drives)
			if (dp->ok() && dp->target != UINT32_MAX && write_checkpoint(*raw, *dp))
				fail_drive(*raw, *dp, std::string("checkpoint failed: ") + kvblk_kvstore_last_error());
	/* A read-only store writes nothing: no writer thread (no puts, deletes, drops or probes). */
	if (!(o.flags & KVBLK_KVSTORE_OPEN_RDONLY)) {
		if (int ret = start_writer(*raw)) {
			const std::string why = kvblk_kvstore_last_error();
			close_store(raw);
			return fail(ret, "%s", why.c_str());
		}
	}
	*out = raw;
	return 0;
}

/* Check @ops and copy them into a Batch; -errno with *bad (the op) and results filled. */
int build_batch(kvblk_kvstore *s, uint32_t kind, const kvblk_kvstore_op *ops, uint32_t n, Batch *b, int32_t *bad)
{
	const char *fn = "kvblk_kvstore_submit";
	*bad = -1;
	b->ops.resize(n);
	std::unordered_set<std::string_view> seen;
	const bool unique = kind == KVBLK_KVSTORE_PUT || kind == KVBLK_KVSTORE_DELETE;
	if (unique)
		seen.reserve(n);
	const uint64_t largest = s->geo.classes[s->geo.nr_classes - 1].slot_bytes;
	for (uint32_t i = 0; i < n; i++) {
		const kvblk_kvstore_op &op = ops[i];
		OpCopy &c = b->ops[i];
		*bad = int32_t(i);
		if (!op.key || op.key_len == 0 || op.key_len > s->geo.max_key)
			return fail(-EINVAL, "%s: op %u: key of %u bytes (1..%u, not NULL)", fn, i, op.key_len,
				    s->geo.max_key);
		if (op.flags)
			return fail(-EINVAL, "%s: op %u: flags 0x%x must be 0", fn, i, op.flags);
		if (op.meta_len && !op.meta)
			return fail(-EINVAL, "%s: op %u: meta is NULL with meta_len %u", fn, i, op.meta_len);
		c.key.assign(static_cast<const char *>(op.key), op.key_len);
		c.tag = op.tag;
		c.buf_id = op.buf_id;
		c.addr = op.addr;
		c.length = op.length;
		if (unique && !seen.insert(std::string_view(c.key)).second)
			return fail(-EINVAL, "%s: op %u: the same key as an earlier op of the batch", fn, i);
		if (kind == KVBLK_KVSTORE_PUT) {
			if (op.length == 0 || op.length > largest)
				return fail(-EINVAL, "%s: op %u: put length %llu (1..%llu, the largest class)", fn, i,
					    ull(op.length), ull(largest));
			if (op.meta_len > s->geo.max_meta)
				return fail(-EINVAL, "%s: op %u: %u bytes of metadata (at most %u)", fn, i, op.meta_len,
					    s->geo.max_meta);
			c.meta.assign(static_cast<const char *>(op.meta), op.meta_len);
			bool host;
			uint32_t path;
			const int ret = resolve_host(*s, op.buf_id, op.addr, op.length, &host, &c.host, &path);
			if (ret == -EINVAL)
				return fail(-EINVAL, "%s: op %u: addr + length pass the end of buffer %u", fn, i, op.buf_id);
			if (ret)
				return fail(-ENOENT, "%s: op %u: buffer %u is not registered", fn, i, op.buf_id);
			if (!host)
				return fail(-EOPNOTSUPP, "%s: op %u: buffer %u is device memory: puts come from host memory",
					    fn, i, op.buf_id);
			if (!c.host)
				return fail(-EINVAL, "%s: op %u: NULL source", fn, i);
		} else if (kind == KVBLK_KVSTORE_GET) {
			if (op.length == 0)
				return fail(-EINVAL, "%s: op %u: a get needs room (length 0)", fn, i);
			if (op.buf_id == KVBLK_BUF_NONE && !op.addr)
				return fail(-EINVAL, "%s: op %u: NULL destination", fn, i);
			uint32_t path;
			const int ret = resolve_host(*s, op.buf_id, op.addr, op.length, &c.is_host, &c.host, &path);
			if (ret == -EINVAL)
				return fail(-EINVAL, "%s: op %u: addr + length pass the end of buffer %u", fn, i, op.buf_id);
			if (ret)
				return fail(-ENOENT, "%s: op %u: buffer %u is not registered", fn, i, op.buf_id);
			c.meta_out = op.meta;
			c.meta_cap = op.meta_len;
		} else if (kind == KVBLK_KVSTORE_EXISTS) {
			c.meta_out = op.meta;
			c.meta_cap = op.meta_len;
		}
	}
	*bad = -1;
	return 0;
}

void reject_results(kvblk_kvstore_result *results, uint32_t n, int32_t bad, int err, const kvblk_kvstore_op *ops)
{
	if (!results)
		return;
	for (uint32_t i = 0; i < n; i++) {
		results[i] = kvblk_kvstore_result{};
		results[i].status = int32_t(i) == bad ? err : -ECANCELED;
		results[i].tag = ops ? ops[i].tag : 0;
		results[i].drive = UINT32_MAX;
	}
}

int submit(kvblk_kvstore *s, uint32_t kind, const kvblk_kvstore_op *ops, uint32_t n,
	   kvblk_kvstore_submit_opts *opts, uint64_t *ticket, bool claimed)
{
	const char *fn = "kvblk_kvstore_submit";
	if (int ret = check_owner(s, fn))
		return ret;
	if (!s || !ops || !ticket)
		return fail(-EINVAL, "%s: NULL %s", fn, !s ? "store" : !ops ? "ops" : "ticket");
	kvblk_kvstore_submit_opts o;
	kvblk_kvstore_submit_opts_init(&o, sizeof(o));
	if (opts) {
		if (opts->opts_size < sizeof(*opts) || opts->opts_size > (64u << 10))
			return fail(-EINVAL, "%s: opts_size %zu (expected %zu)", fn, opts->opts_size, sizeof(*opts));
		o = *opts;
		opts->bad_index = -1;
	}
	if (kind < KVBLK_KVSTORE_GET || kind > KVBLK_KVSTORE_DELETE)
		return fail(-EINVAL, "%s: unknown kind %u", fn, kind);
	if (o.flags & ~KVBLK_KVSTORE_SUBMIT_FLAGS_ALL)
		return fail(-EINVAL, "%s: unknown flags 0x%x", fn, o.flags & ~KVBLK_KVSTORE_SUBMIT_FLAGS_ALL);
	if (n == 0)
		return fail(-EINVAL, "%s: no ops", fn);
	if (n > s->max_descs)
		return fail(-E2BIG, "%s: %u ops; the store takes at most %u per batch (split the batch, or open "
				    "the store with a larger kvblk_kvstore_open_opts.max_descs)", fn, n, s->max_descs);
	if ((s->flags & KVBLK_KVSTORE_OPEN_RDONLY) && (kind == KVBLK_KVSTORE_PUT || kind == KVBLK_KVSTORE_DELETE))
		return fail(-EROFS, "%s: the store was opened read-only", fn);
	auto b = std::make_unique<Batch>();
	b->kind = kind;
	b->flags = o.flags;
	b->user_data = o.user_data;
	int32_t bad;
	if (int ret = build_batch(s, kind, ops, n, b.get(), &bad)) {
		const std::string why = kvblk_kvstore_last_error();
		reject_results(o.results, n, bad, ret, ops);
		if (opts)
			opts->bad_index = bad;
		set_error("%s", why.c_str());
		return ret;
	}
	if (o.results) {
		b->results = o.results;
	} else {
		b->own_results.resize(n);
		b->results = b->own_results.data();
	}
	for (uint32_t i = 0; i < n; i++) {
		b->results[i] = kvblk_kvstore_result{};
		b->results[i].tag = ops[i].tag;
		b->results[i].drive = UINT32_MAX;
		b->results[i].status = 0;
	}
	if (int ret = s->cq.begin(o.flags & KVBLK_KVSTORE_SUBMIT_NONBLOCK, claimed, &b->ticket))
		return fail(ret, "%s: %s", fn, ret == -EAGAIN ? "max_batches batches are outstanding; reap some first"
							      : "the store is closing");
	b->t_submit = now_ns();
	*ticket = b->ticket;
	switch (kind) {
	case KVBLK_KVSTORE_GET: {
		s->ctr->gets.fetch_add(n, std::memory_order_relaxed);
		const uint64_t t = b->ticket;
		if (int ret = start_get(*s, std::move(b))) {
			s->cq.abort(t);
			return ret;
		}
		return 0;
	}
	case KVBLK_KVSTORE_PUT:
		s->ctr->puts.fetch_add(n, std::memory_order_relaxed);
		writer_enqueue(*s, std::move(b));
		return 0;
	case KVBLK_KVSTORE_DELETE:
		s->ctr->deletes.fetch_add(n, std::memory_order_relaxed);
		writer_enqueue(*s, std::move(b));
		return 0;
	default: {
		s->ctr->exists.fetch_add(n, std::memory_order_relaxed);
		{
			std::lock_guard<std::mutex> lk(s->index_mu);
			for (uint32_t i = 0; i < n; i++) {
				kvblk_kvstore_result &r = b->results[i];
				const OpCopy &oc = b->ops[i];
				auto f = s->index.find(oc.key);
				if (f == s->index.end()) {
					r.status = -ENOENT;
					continue;
				}
				const Obj *ob = f->second;
				r.length = ob->length;
				r.meta_len = uint32_t(ob->meta.size());
				r.drive = ob->drive;
				r.status = s->drives[ob->drive]->ok() ? 0 : -ENODEV;
				if (oc.meta_out && oc.meta_cap)
					memcpy(oc.meta_out, ob->meta.data(), std::min<size_t>(oc.meta_cap, ob->meta.size()));
			}
		}
		finish_batch(*s, std::move(b), KVBLK_PATH_HOST, 0, 0);
		return 0;
	}
	}
}

/* The synchronous calls: submit, wait for the batch; @fn names the caller in errors. */
int sync_batch(kvblk_kvstore *s, uint32_t kind, const kvblk_kvstore_op *ops, uint32_t n,
	       kvblk_kvstore_result *results, const char *fn) noexcept
{
	if (!results)
		return fail(-EINVAL, "%s: NULL results", fn);
	try {
		kvblk_kvstore_submit_opts o;
		kvblk_kvstore_submit_opts_init(&o, sizeof(o));
		o.results = results;
		uint64_t t;
		if (int ret = submit(s, kind, ops, n, &o, &t, true))
			return ret;
		kvblk_cqe c{};
		s->cq.wait(t, -1, &c);
		return int(c.index - c.failed);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "%s: out of memory", fn);
	}
}

/* Copy @key into @buf at *used; false when it does not fit. */
bool take_key(const std::string &k, uint32_t drive, uint64_t length, uint64_t gen, kvblk_kvstore_key *out,
	      void *buf, size_t buf_len, size_t *used)
{
	if (*used + k.size() > buf_len)
		return false;
	auto *dst = static_cast<uint8_t *>(buf) + *used;
	memcpy(dst, k.data(), k.size());
	out->key = dst;
	out->key_len = uint32_t(k.size());
	out->drive = drive;
	out->length = length;
	out->gen = gen;
	*used += k.size();
	return true;
}

} // namespace
} // namespace kvblk::kvstore

using namespace kvblk::kvstore;

extern "C" {

void kvblk_kvstore_create_opts_init(struct kvblk_kvstore_create_opts *opts, size_t size) noexcept
{
	if (!opts)
		return;
	memset(opts, 0, size);
	opts->opts_size = size;
}

void kvblk_kvstore_open_opts_init(struct kvblk_kvstore_open_opts *opts, size_t size) noexcept
{
	if (!opts)
		return;
	memset(opts, 0, size);
	opts->opts_size = size;
}

void kvblk_kvstore_submit_opts_init(struct kvblk_kvstore_submit_opts *opts, size_t size) noexcept
{
	if (!opts)
		return;
	memset(opts, 0, size);
	opts->opts_size = size;
	opts->bad_index = -1;
}

int kvblk_kvstore_create(const char *const *paths, uint32_t nr_paths, const struct kvblk_kvstore_create_opts *copts,
			 const struct kvblk_kvstore_open_opts *oopts, kvblk_kvstore **out) noexcept
{
	const char *fn = "kvblk_kvstore_create";
	if (!paths || !out)
		return fail(-EINVAL, "%s: NULL %s", fn, !paths ? "paths" : "out");
	if (nr_paths == 0 || nr_paths > KVBLK_KVSTORE_MAX_DRIVES)
		return fail(-EINVAL, "%s: %u drives (1..%u)", fn, nr_paths, KVBLK_KVSTORE_MAX_DRIVES);
	if (oopts && (oopts->flags & (KVBLK_KVSTORE_OPEN_RDONLY | KVBLK_KVSTORE_OPEN_DEGRADED |
				      KVBLK_KVSTORE_OPEN_RECOVER)))
		return fail(-EINVAL, "%s: RDONLY, DEGRADED and RECOVER are open flags, not create flags", fn);
	try {
		kvblk_kvstore_open_opts o;
		kvblk_kvstore_open_opts_init(&o, sizeof(o));
		if (oopts) {
			if (oopts->opts_size < sizeof(*oopts) || oopts->opts_size > (64u << 10))
				return fail(-EINVAL, "%s: open opts_size %zu (expected %zu)", fn, oopts->opts_size,
					    sizeof(*oopts));
			o = *oopts;
		}
		std::vector<std::string> made;
		if (int ret = create_store(paths, nr_paths, copts, o, &made))
			return ret;
		const int ret = open_common(paths, nr_paths, oopts, fn, out, true);
		if (ret) {
			/* Nothing is left behind: the files this call made go again. */
			for (const auto &f : made)
				unlink(f.c_str());
		}
		return ret;
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "%s: out of memory", fn);
	}
}

int kvblk_kvstore_open(const char *const *paths, uint32_t nr_paths, const struct kvblk_kvstore_open_opts *opts,
		       kvblk_kvstore **out) noexcept
{
	const char *fn = "kvblk_kvstore_open";
	if (!paths || !out)
		return fail(-EINVAL, "%s: NULL %s", fn, !paths ? "paths" : "out");
	if (nr_paths == 0 || nr_paths > KVBLK_KVSTORE_MAX_DRIVES)
		return fail(-EINVAL, "%s: %u drives (1..%u)", fn, nr_paths, KVBLK_KVSTORE_MAX_DRIVES);
	try {
		return open_common(paths, nr_paths, opts, fn, out, false);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "%s: out of memory", fn);
	}
}

void kvblk_kvstore_close(kvblk_kvstore *store) noexcept
{
	if (!store || store->owner != getpid())
		return;
	close_store(store);
}

kvblk_dev *kvblk_kvstore_dev(kvblk_kvstore *store) noexcept
{
	return store ? store->dev : nullptr;
}

int kvblk_kvstore_submit(kvblk_kvstore *store, uint32_t kind, const struct kvblk_kvstore_op *ops, uint32_t n,
			 struct kvblk_kvstore_submit_opts *opts, uint64_t *ticket) noexcept
{
	try {
		return submit(store, kind, ops, n, opts, ticket, false);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_kvstore_submit: out of memory");
	}
}

int kvblk_kvstore_reap(kvblk_kvstore *store, struct kvblk_cqe *cqes, uint32_t max, uint32_t min_complete,
		       int64_t timeout_ns) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_reap"))
		return ret;
	if (!store || !cqes || !max || min_complete > max)
		return fail(-EINVAL, "kvblk_kvstore_reap: %s", !store ? "NULL store" : !cqes ? "NULL cqes" :
							       !max ? "max is 0" : "min_complete > max");
	return store->cq.reap(cqes, max, min_complete, timeout_ns);
}

int kvblk_kvstore_wait(kvblk_kvstore *store, uint64_t ticket, int64_t timeout_ns, struct kvblk_cqe *cqe) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_wait"))
		return ret;
	if (!store)
		return fail(-EINVAL, "kvblk_kvstore_wait: NULL store");
	kvblk_cqe c{};
	const int ret = store->cq.wait(ticket, timeout_ns, &c);
	if (ret == -ENOENT)
		return fail(ret, "kvblk_kvstore_wait: ticket %llu is not outstanding", ull(ticket));
	if (ret == -ETIME)
		return fail(ret, "kvblk_kvstore_wait: ticket %llu: the timeout passed", ull(ticket));
	if (cqe)
		*cqe = c;
	return int(c.index - c.failed);
}

int kvblk_kvstore_event_fd(kvblk_kvstore *store) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_event_fd"))
		return ret;
	if (!store)
		return fail(-EINVAL, "kvblk_kvstore_event_fd: NULL store");
	return store->cq.fd();
}

int kvblk_kvstore_get(kvblk_kvstore *store, const struct kvblk_kvstore_op *ops, uint32_t n,
		      struct kvblk_kvstore_result *results) noexcept
{
	return sync_batch(store, KVBLK_KVSTORE_GET, ops, n, results, "kvblk_kvstore_get");
}

int kvblk_kvstore_put(kvblk_kvstore *store, const struct kvblk_kvstore_op *ops, uint32_t n,
		      struct kvblk_kvstore_result *results) noexcept
{
	return sync_batch(store, KVBLK_KVSTORE_PUT, ops, n, results, "kvblk_kvstore_put");
}

int kvblk_kvstore_exists(kvblk_kvstore *store, const struct kvblk_kvstore_op *ops, uint32_t n,
			 struct kvblk_kvstore_result *results) noexcept
{
	return sync_batch(store, KVBLK_KVSTORE_EXISTS, ops, n, results, "kvblk_kvstore_exists");
}

int kvblk_kvstore_delete(kvblk_kvstore *store, const struct kvblk_kvstore_op *ops, uint32_t n,
			 struct kvblk_kvstore_result *results) noexcept
{
	return sync_batch(store, KVBLK_KVSTORE_DELETE, ops, n, results, "kvblk_kvstore_delete");
}

int kvblk_kvstore_evicted(kvblk_kvstore *store, struct kvblk_kvstore_key *keys, uint32_t max, void *buf,
			  size_t buf_len) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_evicted"))
		return ret;
	if (!store || !keys || !max || !buf)
		return fail(-EINVAL, "kvblk_kvstore_evicted: NULL argument or max 0");
	std::lock_guard<std::mutex> lk(store->index_mu);
	uint32_t n = 0;
	size_t used = 0;
	while (n < max && !store->evicted.empty()) {
		const Evicted &e = store->evicted.front();
		if (!take_key(e.key, e.drive, e.length, e.gen, &keys[n], buf, buf_len, &used))
			break;
		store->evicted.pop_front();
		n++;
	}
	return int(n);
}

int kvblk_kvstore_list(kvblk_kvstore *store, uint64_t *cursor, struct kvblk_kvstore_key *keys, uint32_t max,
		       void *buf, size_t buf_len) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_list"))
		return ret;
	if (!store || !cursor || !keys || !max || !buf)
		return fail(-EINVAL, "kvblk_kvstore_list: NULL argument or max 0");
	try {
		/* In generation order: a key present for the whole walk keeps its generation. */
		std::vector<const Obj *> next;
		std::lock_guard<std::mutex> lk(store->index_mu);
		auto older = [](const Obj *a, const Obj *b) { return a->gen < b->gen; };
		for (const auto &[k, o] : store->index) {
			if (o->gen <= *cursor)
				continue;
			if (next.size() < max) {
				next.push_back(o);
				std::push_heap(next.begin(), next.end(), older);
			} else if (o->gen < next.front()->gen) {
				std::pop_heap(next.begin(), next.end(), older);
				next.back() = o;
				std::push_heap(next.begin(), next.end(), older);
			}
		}
		std::sort(next.begin(), next.end(), older);
		uint32_t n = 0;
		size_t used = 0;
		for (const Obj *o : next) {
			if (!take_key(o->key, o->drive, o->length, o->gen, &keys[n], buf, buf_len, &used))
				break;
			*cursor = o->gen;
			n++;
		}
		if (n == 0 && next.empty())
			*cursor = 0;
		else if (n == 0)
			return fail(-ENOSPC, "kvblk_kvstore_list: buf_len %zu cannot hold the next key (%zu bytes)",
				    buf_len, next.front()->key.size());
		return int(n);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_kvstore_list: out of memory");
	}
}

int kvblk_kvstore_get_info(kvblk_kvstore *store, struct kvblk_kvstore_info *info) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_get_info"))
		return ret;
	if (!store || !info || info->info_size < sizeof(*info))
		return fail(-EINVAL, "kvblk_kvstore_get_info: NULL argument or info_size too small");
	const size_t sz = info->info_size;
	memset(info, 0, std::min<size_t>(sz, 64u << 10));
	info->info_size = sz;
	const Superblock &g = store->geo;
	info->format_version = g.version;
	info->drives = g.drive_count;
	info->nr_classes = g.nr_classes;
	memcpy(info->uuid, g.store_uuid.data(), 16);
	info->max_key_bytes = g.max_key;
	info->max_meta_bytes = g.max_meta;
	info->flags = store->flags;
	info->when_full = store->when_full;
	std::lock_guard<std::mutex> lk(store->index_mu);
	info->objects = store->objects;
	info->bytes_stored = store->bytes_stored;
	for (const auto &dp : store->drives) {
		if (dp->ok())
			info->drives_ok++;
		if (dp->target != UINT32_MAX)
			info->journal_bytes = dp->sb.journal_bytes;
		for (uint32_t c = 0; c < g.nr_classes; c++) {
			auto &ci = info->classes[c];
			ci.slot_bytes = g.classes[c].slot_bytes;
			ci.slots += dp->target != UINT32_MAX ? dp->sb.classes[c].nr_slots : 0;
			if (dp->ok())
				ci.slots_free += dp->alloc[c].free_count();
			ci.objects += dp->alloc[c].objects;
		}
	}
	return 0;
}

int kvblk_kvstore_get_drive_info(kvblk_kvstore *store, uint32_t index, struct kvblk_kvstore_drive_info *info) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_drive_info"))
		return ret;
	if (!store || !info || info->info_size < sizeof(*info))
		return fail(-EINVAL, "kvblk_kvstore_drive_info: NULL argument or info_size too small");
	if (index >= store->drives.size())
		return fail(-ENOENT, "kvblk_kvstore_drive_info: the store has %zu drives", store->drives.size());
	const size_t sz = info->info_size;
	memset(info, 0, std::min<size_t>(sz, 64u << 10));
	info->info_size = sz;
	const Drive &d = *store->drives[index];
	info->index = d.index;
	info->state = d.state.load();
	memcpy(info->uuid, d.sb.drive_uuid.data(), 16);
	snprintf(info->path, sizeof(info->path), "%s", d.path.c_str());
	info->bytes_read = d.dc->bytes_read.load();
	info->bytes_written = d.dc->bytes_written.load();
	info->read_errors = d.dc->read_errors.load();
	info->write_errors = d.dc->write_errors.load();
	std::lock_guard<std::mutex> lk(store->index_mu);
	snprintf(info->why_failed, sizeof(info->why_failed), "%s", d.why_failed.c_str());
	if (d.target != UINT32_MAX) {
		info->bytes = d.sb.drive_bytes;
		for (uint32_t c = 0; c < store->geo.nr_classes; c++) {
			info->data_bytes += d.sb.classes[c].nr_slots * d.sb.classes[c].slot_bytes;
			info->slots += d.sb.classes[c].nr_slots;
			info->slots_free += d.alloc[c].free_count();
		}
	}
	info->objects = d.objects;
	return 0;
}

int kvblk_kvstore_get_stats(kvblk_kvstore *store, struct kvblk_kvstore_stats *stats) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_get_stats"))
		return ret;
	if (!store || !stats || stats->stats_size < sizeof(*stats))
		return fail(-EINVAL, "kvblk_kvstore_get_stats: NULL argument or stats_size too small");
	const size_t sz = stats->stats_size;
	memset(stats, 0, std::min<size_t>(sz, 64u << 10));
	stats->stats_size = sz;
	const Counters &c = *store->ctr;
	stats->gets = c.gets.load();
	stats->puts = c.puts.load();
	stats->exists = c.exists.load();
	stats->deletes = c.deletes.load();
	stats->hits = c.hits.load();
	stats->misses = c.misses.load();
	stats->checksum_failures = c.checksum_failures.load();
	stats->get_errors = c.get_errors.load();
	stats->put_errors = c.put_errors.load();
	stats->evictions = c.evictions.load();
	stats->evictions_dropped = c.evictions_dropped.load();
	stats->bytes_read = c.bytes_read.load();
	stats->bytes_written = c.bytes_written.load();
	stats->journal_commits = c.journal_commits.load();
	stats->checkpoints = c.checkpoints.load();
	stats->flushes = c.flushes.load();
	for (const auto &dp : store->drives)
		if (!dp->ok())
			stats->degraded = 1;
	return 0;
}

int kvblk_kvstore_reset_stats(kvblk_kvstore *store) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_reset_stats"))
		return ret;
	if (!store)
		return fail(-EINVAL, "kvblk_kvstore_reset_stats: NULL store");
	store->ctr->reset();
	for (auto &dp : store->drives)
		for (auto *c : {&dp->dc->bytes_read, &dp->dc->bytes_written, &dp->dc->read_errors, &dp->dc->write_errors})
			c->store(0, std::memory_order_relaxed);
	return 0;
}

int kvblk_kvstore_check(kvblk_kvstore *store, uint32_t flags, struct kvblk_kvstore_check_report *report) noexcept
{
	if (int ret = check_owner(store, "kvblk_kvstore_check"))
		return ret;
	if (!store || !report || report->report_size < sizeof(*report))
		return fail(-EINVAL, "kvblk_kvstore_check: NULL argument or report_size too small");
	if (flags & ~KVBLK_KVSTORE_CHECK_FLAGS_ALL)
		return fail(-EINVAL, "kvblk_kvstore_check: unknown flags 0x%x", flags & ~KVBLK_KVSTORE_CHECK_FLAGS_ALL);
	if ((flags & KVBLK_KVSTORE_CHECK_REPAIR) && (store->flags & KVBLK_KVSTORE_OPEN_RDONLY))
		return fail(-EROFS, "kvblk_kvstore_check: repair writes; the store was opened read-only");
	try {
		return check_store(store, flags, report);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_kvstore_check: out of memory");
	}
}

} // extern "C"

namespace kvblk::kvstore {
int identify(const char *path, Superblock *sb, uint32_t *ok_copies);
}

namespace {

/* The live counters file of store @uuid: mapped read-only, or nullptr (-ESRCH). */
const kvblk::kvstore::SharedStats *map_live(const kvblk::kvstore::Uuid &uuid, int *pid)
{
	using namespace kvblk::kvstore;
	const std::string p = "/dev/shm/kvblk-kvstore-" + uuid_text(uuid);
	const int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return nullptr;
	struct stat st;
	void *m = MAP_FAILED;
	if (fstat(fd, &st) == 0 && uint64_t(st.st_size) >= sizeof(SharedStats))
		m = mmap(nullptr, sizeof(SharedStats), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return nullptr;
	auto *x = static_cast<const SharedStats *>(m);
	if (memcmp(x->magic, "KVBLKSTA", 8) != 0 || x->version != kSharedStatsVersion ||
	    memcmp(x->uuid, uuid.data(), 16) != 0 || x->pid <= 0 || (kill(x->pid, 0) != 0 && errno == ESRCH)) {
		munmap(m, sizeof(SharedStats));
		return nullptr;
	}
	*pid = x->pid;
	return x;
}

} // namespace

extern "C" {

int kvblk_kvstore_identify(const char *path, struct kvblk_kvstore_identity *id) noexcept
{
	if (!path || !id || id->identity_size < sizeof(*id))
		return fail(-EINVAL, "kvblk_kvstore_identify: NULL argument or identity_size too small");
	try {
		Superblock sb;
		uint32_t ok = 0;
		if (int ret = identify(path, &sb, &ok))
			return ret;
		const size_t sz = id->identity_size;
		memset(id, 0, std::min<size_t>(sz, 64u << 10));
		id->identity_size = sz;
		id->format_version = sb.version;
		id->drive_index = sb.drive_index;
		id->drive_count = sb.drive_count;
		id->nr_classes = sb.nr_classes;
		memcpy(id->store_uuid, sb.store_uuid.data(), 16);
		memcpy(id->drive_uuid, sb.drive_uuid.data(), 16);
		id->drive_bytes = sb.drive_bytes;
		id->created_ns = sb.created_ns;
		id->journal_bytes = sb.journal_bytes;
		id->max_key_bytes = sb.max_key;
		id->max_meta_bytes = sb.max_meta;
		for (uint32_t c = 0; c < sb.nr_classes; c++) {
			id->slot_bytes[c] = sb.classes[c].slot_bytes;
			id->slots[c] = sb.classes[c].nr_slots;
		}
		id->superblocks_ok = ok;
		int pid = 0;
		if (const SharedStats *x = map_live(sb.store_uuid, &pid)) {
			id->live_pid = pid;
			munmap(const_cast<SharedStats *>(x), sizeof(SharedStats));
		}
		return 0;
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_kvstore_identify: out of memory");
	}
}

int kvblk_kvstore_peek_stats(const char *path, struct kvblk_kvstore_stats *stats,
			     struct kvblk_kvstore_drive_info *drives, uint32_t max_drives) noexcept
{
	if (!path || !stats || stats->stats_size < sizeof(*stats) || (max_drives && !drives))
		return fail(-EINVAL, "kvblk_kvstore_peek_stats: NULL argument or stats_size too small");
	for (uint32_t i = 0; i < max_drives; i++)
		if (drives[i].info_size < sizeof(drives[i]))
			return fail(-EINVAL, "kvblk_kvstore_peek_stats: drives[%u].info_size too small", i);
	try {
		Superblock sb;
		uint32_t ok = 0;
		if (int ret = identify(path, &sb, &ok))
			return ret;
		int pid = 0;
		const SharedStats *x = map_live(sb.store_uuid, &pid);
		if (!x)
			return fail(-ESRCH, "kvblk_kvstore_peek_stats: no process has store %s open for writing",
				    uuid_text(sb.store_uuid).c_str());
		const size_t sz = stats->stats_size;
		memset(stats, 0, std::min<size_t>(sz, 64u << 10));
		stats->stats_size = sz;
		const Counters &c = x->ctr;
		stats->gets = c.gets.load();
		stats->puts = c.puts.load();
		stats->exists = c.exists.load();
		stats->deletes = c.deletes.load();
		stats->hits = c.hits.load();
		stats->misses = c.misses.load();
		stats->checksum_failures = c.checksum_failures.load();
		stats->get_errors = c.get_errors.load();
		stats->put_errors = c.put_errors.load();
		stats->evictions = c.evictions.load();
		stats->evictions_dropped = c.evictions_dropped.load();
		stats->bytes_read = c.bytes_read.load();
		stats->bytes_written = c.bytes_written.load();
		stats->journal_commits = c.journal_commits.load();
		stats->checkpoints = c.checkpoints.load();
		stats->flushes = c.flushes.load();
		const uint32_t n = std::min<uint32_t>(x->drives, KVBLK_KVSTORE_MAX_DRIVES);
		for (uint32_t d = 0; d < n; d++) {
			if (x->drive[d].state.load() != KVBLK_KVSTORE_DRIVE_OK)
				stats->degraded = 1;
			if (d >= max_drives)
				continue;
			kvblk_kvstore_drive_info &di = drives[d];
			const size_t dsz = di.info_size;
			memset(&di, 0, std::min<size_t>(dsz, 64u << 10));
			di.info_size = dsz;
			di.index = d;
			di.state = x->drive[d].state.load();
			memcpy(di.uuid, sb.members[d].data(), 16);
			di.bytes_read = x->drive[d].bytes_read.load();
			di.bytes_written = x->drive[d].bytes_written.load();
			di.read_errors = x->drive[d].read_errors.load();
			di.write_errors = x->drive[d].write_errors.load();
		}
		munmap(const_cast<SharedStats *>(x), sizeof(SharedStats));
		return int(n);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_kvstore_peek_stats: out of memory");
	}
}

} // extern "C"

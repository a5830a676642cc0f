// SPDX-License-Identifier: MIT
/*
 * kvstore.hpp: header-only C++ wrapper of the kvblk store, <kvblk/kvstore.h> (C++17 or later;
 * since 0.4). The C header is the contract: every member below says which C call it makes.
 *
 *   kvblk::KvStoreCreateOptions c;
 *   c.classes = {{256 << 10, 1}, {4 << 20, 4}};          // slot sizes and weights
 *   kvblk::KvStore s = kvblk::KvStore::create({"/dev/nvme1n1", "/dev/nvme2n1"}, c); // throws kvblk::Error
 *   kvblk_kvstore_result r = s.put("key", data.data(), data.size());  // r.status: 0 or -errno
 *   r = s.get("key", dst, room);                                     // -ENOENT: a miss
 *
 *   std::vector<kvblk_kvstore_op> ops = {kvblk::KvStore::get_op(k0, d0, room0), ...};
 *   std::vector<kvblk_kvstore_result> res(ops.size());
 *   std::size_t hits = s.get(ops, res);                 // each key's status in res[i].status
 *   for (const kvblk::KvStoreKey &k : s.evicted()) forget(k.key);   // keep an engine's index true
 *
 * Errors of a whole call throw kvblk::Error (<kvblk/kvblk.hpp>), a std::system_error whose
 * code() is the errno (std::generic_category()) and whose what() names the call and carries
 * kvblk_kvstore_last_error(). What becomes of each key (a miss, a checksum failure, a full
 * class, a failed drive) does not throw: it is in the key's kvblk_kvstore_result, and the
 * batch calls return how many keys have status 0.
 *
 * Lifetimes: keys and metadata of ops are copied when a batch is submitted (the ops and the
 * strings they point at may go right after the call); get destinations, put sources and the
 * results of a submitted batch belong to the store until its completion is reaped or waited
 * for. A Buffer registered on the store must not outlive it.
 *
 * Threads and processes: as the C store. A KvStore may be used from several threads at once,
 * except close(), destruction and assignment, which must not race other calls. In a child made
 * by fork() the calls throw Error with EBADFD (dev() and event_fd() aside), destruction frees
 * nothing, and the store cannot be opened again while the child holds the drives' flock(2)
 * locks (kvblk_kvstore_create(3)).
 */
#ifndef KVBLK_KVSTORE_HPP
#define KVBLK_KVSTORE_HPP

#include <kvblk/kvblk.hpp>
#include <kvblk/kvstore.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvblk {

namespace detail {

/* Throw Error for a negative return @rc of store call @call, with kvblk_kvstore_last_error(). */
[[noreturn]] inline void throw_kvstore_error(int rc, const char *call)
{
	std::string msg(call);
	const char *w = kvblk_kvstore_last_error();
	const std::string_view why = w ? w : "";
	if (why.substr(0, msg.size() + 1) == msg + ":")
		msg = why; /* the reason names the call already */
	else if (!why.empty())
		msg += ": " + std::string(why);
	throw Error(rc, msg);
}

inline int kvstore_check(int rc, const char *call)
{
	if (rc < 0)
		throw_kvstore_error(rc, call);
	return rc;
}

/* A size as the C API's uint32_t; a larger one becomes UINT32_MAX, which the store refuses. */
inline uint32_t clamp_u32(std::size_t n) noexcept
{
	return n > UINT32_MAX ? UINT32_MAX : uint32_t(n);
}

} // namespace detail

/** kvblk::KvStoreClass - one slot size class (struct kvblk_kvstore_class). */
struct KvStoreClass {
	/** Bytes per slot, a non-zero multiple of KVBLK_KVSTORE_SLOT_ALIGN (4096). */
	uint64_t slot_bytes = 0;
	/** Share of every drive's data area, relative to the other classes' weights; 0 is taken as 1. */
	uint32_t weight = 1;
};

/**
 * kvblk::KvStoreCreateOptions - kvblk_kvstore_create_opts with names; 0 means the default.
 * @classes:        empty: one class of 4 MiB slots; at most KVBLK_KVSTORE_MAX_CLASSES (16),
 *                  in any order, no two of one size.
 * @force:          KVBLK_KVSTORE_CREATE_FORCE: overwrite a drive that holds a kvblk store.
 * @file_bytes:     size of every drive that is a regular file that does not exist yet (it is
 *                  created and preallocated); 0: such a path fails with ENOENT.
 * @journal_bytes:  journal ring per drive, a multiple of 4096 and at least 4 MiB; 0: 64 MiB
 *                  (1/64 of a smaller drive).
 * @max_key_bytes:  longest key, 1..KVBLK_KVSTORE_MAX_KEY; 0: 512.
 * @max_meta_bytes: longest metadata per object, 0..KVBLK_KVSTORE_MAX_META; empty: 128; 0 is
 *                  no metadata at all (the C struct's UINT32_MAX).
 */
struct KvStoreCreateOptions {
	std::vector<KvStoreClass> classes = {};
	bool force = false;
	uint64_t file_bytes = 0;
	uint64_t journal_bytes = 0;
	uint32_t max_key_bytes = 0;
	std::optional<uint32_t> max_meta_bytes = std::nullopt;

	/** The C option struct; throws Error (EINVAL) for more classes than the struct holds. */
	[[nodiscard]] kvblk_kvstore_create_opts to_c() const
	{
		kvblk_kvstore_create_opts c;
		kvblk_kvstore_create_opts_init(&c, sizeof(c));
		if (classes.size() > KVBLK_KVSTORE_MAX_CLASSES)
			throw Error(-EINVAL, "kvblk_kvstore_create: " + std::to_string(classes.size()) +
						     " classes (at most " + std::to_string(KVBLK_KVSTORE_MAX_CLASSES) + ")");
		c.flags = force ? KVBLK_KVSTORE_CREATE_FORCE : 0u;
		c.nr_classes = uint32_t(classes.size());
		for (std::size_t i = 0; i < classes.size(); i++) {
			c.classes[i].slot_bytes = classes[i].slot_bytes;
			c.classes[i].weight = classes[i].weight;
		}
		c.file_bytes = file_bytes;
		c.journal_bytes = journal_bytes;
		c.max_key_bytes = max_key_bytes;
		if (max_meta_bytes)
			c.max_meta_bytes = *max_meta_bytes ? *max_meta_bytes : UINT32_MAX;
		return c;
	}
};

/** What a put does when its class is full on every drive (kvblk_kvstore_open_opts.when_full). */
enum class WhenFull : uint32_t {
	evict_lru = KVBLK_KVSTORE_EVICT_LRU, /* evict the least recently used objects (default) */
	refuse = KVBLK_KVSTORE_REFUSE,	     /* never evict: the key fails with -ENOSPC */
};

/**
 * kvblk::KvStoreOptions - kvblk_kvstore_open_opts with names; 0 means the default.
 * @backend, @queue_depth, @workers, @max_cmd_bytes: of the store's kvblk_dev, as
 *                     kvblk::Options (AUTO: kvblk.ko where it serves, else io_uring).
 * @when_full:         WhenFull::evict_lru or WhenFull::refuse.
 * @max_batches:       batches outstanding at once, 1..65536; 0: 256.
 * @max_descs:         keys per batch (and descriptors per libkvblk call), 1..2^20; 0: 65536.
 * @drive_budget_bytes: bytes of one get batch in flight per drive; 0: 1 GiB.
 * @read_only:         KVBLK_KVSTORE_OPEN_RDONLY: no put or delete (EROFS), nothing written.
 * @degraded:          KVBLK_KVSTORE_OPEN_DEGRADED: open although drives are missing.
 * @recover:           KVBLK_KVSTORE_OPEN_RECOVER: open a damaged store, keeping what can be
 *                     trusted (not with @read_only).
 * create() refuses @read_only, @degraded and @recover (EINVAL).
 */
struct KvStoreOptions {
	Backend backend = Backend::automatic;
	uint32_t queue_depth = 0;
	uint32_t workers = 0;
	uint64_t max_cmd_bytes = 0;
	WhenFull when_full = WhenFull::evict_lru;
	uint32_t max_batches = 0;
	uint64_t drive_budget_bytes = 0;
	uint32_t max_descs = 0;
	bool read_only = false;
	bool degraded = false;
	bool recover = false;

	/** The C option struct. */
	[[nodiscard]] kvblk_kvstore_open_opts to_c() const noexcept
	{
		kvblk_kvstore_open_opts o;
		kvblk_kvstore_open_opts_init(&o, sizeof(o));
		o.flags = (read_only ? KVBLK_KVSTORE_OPEN_RDONLY : 0u) | (degraded ? KVBLK_KVSTORE_OPEN_DEGRADED : 0u) |
			  (recover ? KVBLK_KVSTORE_OPEN_RECOVER : 0u);
		o.backend = uint32_t(backend);
		o.queue_depth = queue_depth;
		o.workers = workers;
		o.when_full = uint32_t(when_full);
		o.max_batches = max_batches;
		o.drive_budget_bytes = drive_budget_bytes;
		o.max_cmd_bytes = max_cmd_bytes;
		o.max_descs = max_descs;
		return o;
	}
};

/** A batch's kind (kvblk_kvstore_submit()'s @kind); erase is KVBLK_KVSTORE_DELETE. */
enum class KvStoreKind : uint32_t {
	get = KVBLK_KVSTORE_GET,
	put = KVBLK_KVSTORE_PUT,
	exists = KVBLK_KVSTORE_EXISTS,
	erase = KVBLK_KVSTORE_DELETE,
};

/**
 * kvblk::KvStoreSubmitOptions - kvblk_kvstore_submit_opts with names (C++20 designated
 * initializers work: {.results = r, .user_data = 7}).
 * @results:   empty, or one result per op, written as the batch completes; must stay valid
 *             until its completion is reaped or waited for. When an op rejects the batch, its
 *             result holds the error and every other -ECANCELED.
 * @user_data: returned in the batch's kvblk_cqe.
 * @nonblock:  KVBLK_KVSTORE_SUBMIT_NONBLOCK: throw Error (EAGAIN) instead of waiting when
 *             max_batches batches are outstanding.
 * @priority:  KVBLK_KVSTORE_SUBMIT_PRIORITY (get): ahead of queued batches.
 * @verify:    KVBLK_KVSTORE_SUBMIT_VERIFY (get): also read objects loaded into device memory
 *             into host memory and check their CRC32C.
 */
struct KvStoreSubmitOptions {
	Span<kvblk_kvstore_result> results = {};
	uint64_t user_data = 0;
	bool nonblock = false;
	bool priority = false;
	bool verify = false;
};

/** kvblk::KvStoreCheckOptions - kvblk_kvstore_check()'s flags. */
struct KvStoreCheckOptions {
	bool data = false;   /* KVBLK_KVSTORE_CHECK_DATA: also read every object, check its CRC32C */
	bool repair = false; /* KVBLK_KVSTORE_CHECK_REPAIR: delete the bad objects (not read-only) */
};

/**
 * kvblk::KvStoreKey - a key the store handed back (struct kvblk_kvstore_key, its bytes copied).
 * @key:    its bytes (any bytes: keys are opaque).
 * @drive:  the drive it was on.
 * @length: its object's length.
 * @gen:    the generation of its object (grows with every put and delete of the store).
 */
struct KvStoreKey {
	std::string key;
	uint32_t drive = 0;
	uint64_t length = 0;
	uint64_t gen = 0;
};

/**
 * kvblk::KvStorePeek - kvblk_kvstore_peek_stats(): the live counters of a store another
 * process (or this one) has open for writing.
 * @stats:  the store's counters.
 * @drives: one entry per drive of the store (the fields only the serving process knows,
 *          path, objects and slots, are 0).
 */
struct KvStorePeek {
	kvblk_kvstore_stats stats{};
	std::vector<kvblk_kvstore_drive_info> drives;
};

/**
 * kvblk::KvStore - an open kvblk store, closed on destruction (kvblk_kvstore_close(): every
 * outstanding batch finished, a checkpoint written). Move-only; an empty KvStore (default
 * made, moved from, closed) throws Error (EINVAL) from every call that needs a store.
 */
class KvStore {
public:
	KvStore() noexcept = default;

	/** Own @store (from kvblk_kvstore_create() or _open()); NULL makes an empty KvStore. */
	explicit KvStore(kvblk_kvstore *store) noexcept : s_(store) {}

	/**
	 * Make a new, empty store over @drives (block devices, files, or with Backend::uring_cmd
	 * NVMe generic char devices; drive i is @drives[i]) and
	 * open it (kvblk_kvstore_create(); throws Error: EEXIST a drive holds a store and @c.force
	 * is not set, ENOSPC a drive too small, EBUSY a drive open in another store, ...).
	 */
	[[nodiscard]] static KvStore create(const std::vector<std::string> &drives,
					    const KvStoreCreateOptions &c = KvStoreCreateOptions(),
					    const KvStoreOptions &o = KvStoreOptions())
	{
		const std::vector<const char *> p = paths(drives);
		const kvblk_kvstore_create_opts cc = c.to_c();
		const kvblk_kvstore_open_opts oc = o.to_c();
		kvblk_kvstore *s = nullptr;
		detail::kvstore_check(kvblk_kvstore_create(p.data(), detail::clamp_u32(p.size()), &cc, &oc, &s),
				      "kvblk_kvstore_create");
		return KvStore(s);
	}

	/**
	 * Open the store on @drives, in any order (kvblk_kvstore_open(); throws Error: EMEDIUMTYPE
	 * not a store, EUCLEAN damaged, ENODEV a drive missing, EBUSY open in another store, ...).
	 */
	[[nodiscard]] static KvStore open(const std::vector<std::string> &drives,
					  const KvStoreOptions &o = KvStoreOptions())
	{
		const std::vector<const char *> p = paths(drives);
		const kvblk_kvstore_open_opts oc = o.to_c();
		kvblk_kvstore *s = nullptr;
		detail::kvstore_check(kvblk_kvstore_open(p.data(), detail::clamp_u32(p.size()), &oc, &s),
				      "kvblk_kvstore_open");
		return KvStore(s);
	}

	KvStore(const KvStore &) = delete;
	KvStore &operator=(const KvStore &) = delete;
	KvStore(KvStore &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
	/** Close this store, then take @o's. */
	KvStore &operator=(KvStore &&o) noexcept
	{
		if (this != &o) {
			close();
			s_ = std::exchange(o.s_, nullptr);
		}
		return *this;
	}
	~KvStore() noexcept { close(); }

	/** Close now (kvblk_kvstore_close()); the KvStore becomes empty. */
	void close() noexcept
	{
		kvblk_kvstore_close(s_);
		s_ = nullptr;
	}

	/** The C handle (still owned by this KvStore). */
	[[nodiscard]] kvblk_kvstore *get() const noexcept { return s_; }

	/** Give up ownership: the caller closes the returned handle. */
	[[nodiscard]] kvblk_kvstore *release() noexcept { return std::exchange(s_, nullptr); }

	[[nodiscard]] explicit operator bool() const noexcept { return s_ != nullptr; }

	/**
	 * The kvblk_dev the store moves its bytes through (kvblk_kvstore_dev(); drive i is its
	 * target i); NULL when empty. Owned by the store: never store through it, remove its
	 * targets or close it.
	 */
	[[nodiscard]] kvblk_dev *dev() const noexcept { return kvblk_kvstore_dev(s_); }

	/**
	 * Register [addr, addr+len) on dev() for ops that name it (get_op()/put_op() with a
	 * Buffer); unregistered when the Buffer goes, which must be before this store closes.
	 * Throws Error (kvblk_register_buffer(); the message carries kvblk_last_error()).
	 */
	[[nodiscard]] Buffer register_buffer(void *addr, uint64_t len, MemKind kind = MemKind::host)
	{
		uint32_t id = KVBLK_BUF_NONE;
		detail::check(kvblk_register_buffer(dev(), int(kind), addr, len, &id), "kvblk_register_buffer");
		return Buffer(dev(), id, addr, len);
	}

	/* ------------------------------------------------------------- ops */

	/**
	 * An op that gets @key into host memory @dst with @room bytes; @meta (nullptr: none)
	 * receives up to @meta_room bytes of the object's metadata. @key's bytes must stay valid
	 * until the batch is submitted (they are copied then).
	 */
	[[nodiscard]] static kvblk_kvstore_op get_op(std::string_view key, void *dst, uint64_t room, uint64_t tag = 0,
						     void *meta = nullptr, uint32_t meta_room = 0) noexcept
	{
		kvblk_kvstore_op o = key_op(key, tag, meta, meta_room);
		o.addr = uint64_t(reinterpret_cast<uintptr_t>(dst));
		o.length = room;
		return o;
	}

	/** As get_op() above, into registered buffer @buf at byte @offset. */
	[[nodiscard]] static kvblk_kvstore_op get_op(std::string_view key, const Buffer &buf, uint64_t offset,
						     uint64_t room, uint64_t tag = 0, void *meta = nullptr,
						     uint32_t meta_room = 0) noexcept
	{
		kvblk_kvstore_op o = key_op(key, tag, meta, meta_room);
		o.buf_id = buf.id();
		o.addr = offset;
		o.length = room;
		return o;
	}

	/**
	 * An op that puts @length bytes from host memory @src under @key, with metadata @meta
	 * (stored with the object; the store only reads it, though the C field is not const).
	 */
	[[nodiscard]] static kvblk_kvstore_op put_op(std::string_view key, const void *src, uint64_t length,
						     std::string_view meta = {}, uint64_t tag = 0) noexcept
	{
		kvblk_kvstore_op o = key_op(key, tag);
		o.addr = uint64_t(reinterpret_cast<uintptr_t>(src));
		o.length = length;
		set_put_meta(&o, meta);
		return o;
	}

	/** As put_op() above, from registered host buffer @buf at byte @offset. */
	[[nodiscard]] static kvblk_kvstore_op put_op(std::string_view key, const Buffer &buf, uint64_t offset,
						     uint64_t length, std::string_view meta = {},
						     uint64_t tag = 0) noexcept
	{
		kvblk_kvstore_op o = key_op(key, tag);
		o.buf_id = buf.id();
		o.addr = offset;
		o.length = length;
		set_put_meta(&o, meta);
		return o;
	}

	/**
	 * An op that names only @key: for exists and erase batches; an exists op may receive up to
	 * @meta_room bytes of the object's metadata at @meta.
	 */
	[[nodiscard]] static kvblk_kvstore_op key_op(std::string_view key, uint64_t tag = 0, void *meta = nullptr,
						     uint32_t meta_room = 0) noexcept
	{
		kvblk_kvstore_op o{};
		o.key = key.data();
		o.key_len = detail::clamp_u32(key.size());
		o.buf_id = KVBLK_BUF_NONE;
		o.meta = meta;
		o.meta_len = meta ? meta_room : 0;
		o.tag = tag;
		return o;
	}

	/* --------------------------------------------------- synchronous batches */

	/**
	 * Get ops.size() keys (kvblk_kvstore_get()); @results must be as long. Returns the number
	 * of hits; each key's status is in @results (0 a hit, -ENOENT a miss, -EBADMSG, -EMSGSIZE,
	 * -ENODEV ...). Throws Error when the call fails (a bad op: the message names it, and its
	 * result holds the error; EBADFD ...): no key was attempted then.
	 */
	std::size_t get(Span<const kvblk_kvstore_op> ops, Span<kvblk_kvstore_result> results)
	{
		return batch(kvblk_kvstore_get, "kvblk_kvstore_get", ops, results);
	}

	/** Put ops.size() objects (kvblk_kvstore_put()); returns the number stored; as get(). */
	std::size_t put(Span<const kvblk_kvstore_op> ops, Span<kvblk_kvstore_result> results)
	{
		return batch(kvblk_kvstore_put, "kvblk_kvstore_put", ops, results);
	}

	/** Look ops.size() keys up (kvblk_kvstore_exists()); returns the number present; as get(). */
	std::size_t exists(Span<const kvblk_kvstore_op> ops, Span<kvblk_kvstore_result> results)
	{
		return batch(kvblk_kvstore_exists, "kvblk_kvstore_exists", ops, results);
	}

	/** Delete ops.size() keys (kvblk_kvstore_delete()); returns the number deleted; as get(). */
	std::size_t erase(Span<const kvblk_kvstore_op> ops, Span<kvblk_kvstore_result> results)
	{
		return batch(kvblk_kvstore_delete, "kvblk_kvstore_delete", ops, results);
	}

	/** get() that returns the results (one per op). */
	[[nodiscard]] std::vector<kvblk_kvstore_result> get(Span<const kvblk_kvstore_op> ops)
	{
		std::vector<kvblk_kvstore_result> r(ops.size());
		get(ops, r);
		return r;
	}

	/** put() that returns the results. */
	[[nodiscard]] std::vector<kvblk_kvstore_result> put(Span<const kvblk_kvstore_op> ops)
	{
		std::vector<kvblk_kvstore_result> r(ops.size());
		put(ops, r);
		return r;
	}

	/** exists() that returns the results. */
	[[nodiscard]] std::vector<kvblk_kvstore_result> exists(Span<const kvblk_kvstore_op> ops)
	{
		std::vector<kvblk_kvstore_result> r(ops.size());
		exists(ops, r);
		return r;
	}

	/** erase() that returns the results. */
	[[nodiscard]] std::vector<kvblk_kvstore_result> erase(Span<const kvblk_kvstore_op> ops)
	{
		std::vector<kvblk_kvstore_result> r(ops.size());
		erase(ops, r);
		return r;
	}

	/* ------------------------------------------------------------ one key */

	/**
	 * Get @key into @dst (@room bytes of host memory): its result (status 0 a hit, -ENOENT a
	 * miss, -EMSGSIZE with its length when @room is too small ...). Throws as get().
	 */
	[[nodiscard]] kvblk_kvstore_result get(std::string_view key, void *dst, uint64_t room, void *meta = nullptr,
					       uint32_t meta_room = 0)
	{
		return one(kvblk_kvstore_get, "kvblk_kvstore_get", get_op(key, dst, room, 0, meta, meta_room));
	}

	/** Put @length bytes at @src under @key, with @meta: its result (0 stored). Throws as put(). */
	kvblk_kvstore_result put(std::string_view key, const void *src, uint64_t length, std::string_view meta = {})
	{
		return one(kvblk_kvstore_put, "kvblk_kvstore_put", put_op(key, src, length, meta));
	}

	/** Whether @key is present: its result (0 present, with its length; -ENOENT absent). */
	[[nodiscard]] kvblk_kvstore_result exists(std::string_view key)
	{
		return one(kvblk_kvstore_exists, "kvblk_kvstore_exists", key_op(key));
	}

	/** Delete @key: its result (0 deleted, durable; -ENOENT it was absent). */
	kvblk_kvstore_result erase(std::string_view key)
	{
		return one(kvblk_kvstore_delete, "kvblk_kvstore_delete", key_op(key));
	}

	/* ------------------------------------------------- asynchronous batches */

	/**
	 * Queue a batch of @kind and return its ticket at once (kvblk_kvstore_submit()). Throws
	 * Error when it is refused (nothing queued; EAGAIN with nonblock at max_batches; a bad op:
	 * the message names it). The ops may go when this returns; destinations, sources and
	 * @o.results stay the store's until the completion is reaped or waited for.
	 */
	[[nodiscard]] Ticket submit(KvStoreKind kind, Span<const kvblk_kvstore_op> ops,
				    const KvStoreSubmitOptions &o = KvStoreSubmitOptions())
	{
		if (!o.results.empty() && o.results.size() != ops.size())
			throw Error(-EINVAL, "kvblk_kvstore_submit: " + std::to_string(ops.size()) + " ops but " +
						     std::to_string(o.results.size()) + " results");
		kvblk_kvstore_submit_opts c;
		kvblk_kvstore_submit_opts_init(&c, sizeof(c));
		c.flags = (o.nonblock ? KVBLK_KVSTORE_SUBMIT_NONBLOCK : 0u) |
			  (o.priority ? KVBLK_KVSTORE_SUBMIT_PRIORITY : 0u) | (o.verify ? KVBLK_KVSTORE_SUBMIT_VERIFY : 0u);
		c.user_data = o.user_data;
		c.results = o.results.empty() ? nullptr : o.results.data();
		Ticket t;
		detail::kvstore_check(kvblk_kvstore_submit(s_, uint32_t(kind), ops.data(), detail::clamp_u32(ops.size()),
							   &c, &t.id),
				      "kvblk_kvstore_submit");
		return t;
	}

	/**
	 * Take up to cqes.size() batch completions, waiting until @min_complete are there or
	 * @timeout passed (negative: no limit); returns how many were taken (kvblk_kvstore_reap();
	 * throws Error). Each is a kvblk_cqe: status (the first failed key's, 0 if none), failed,
	 * index (keys), bytes, tag (the KvStoreKind), user_data, ticket.
	 */
	std::size_t reap(Span<kvblk_cqe> cqes, uint32_t min_complete = 0,
			 std::chrono::nanoseconds timeout = std::chrono::nanoseconds(-1))
	{
		return std::size_t(detail::kvstore_check(kvblk_kvstore_reap(s_, cqes.data(), detail::clamp_u32(cqes.size()),
									     min_complete, timeout.count()),
							 "kvblk_kvstore_reap"));
	}

	/**
	 * Wait for batch @t and take its completion (into @cqe unless nullptr); returns the number
	 * of keys with status 0 (kvblk_kvstore_wait(); throws Error: ENOENT @t not outstanding).
	 */
	std::size_t wait(Ticket t, kvblk_cqe *cqe = nullptr)
	{
		return std::size_t(detail::kvstore_check(kvblk_kvstore_wait(s_, t.id, -1, cqe), "kvblk_kvstore_wait"));
	}

	/** As wait(), at most @timeout: std::nullopt when it passed (the batch stays outstanding). */
	std::optional<std::size_t> wait_for(Ticket t, std::chrono::nanoseconds timeout, kvblk_cqe *cqe = nullptr)
	{
		const int rc = kvblk_kvstore_wait(s_, t.id, timeout.count(), cqe);
		if (rc == -ETIME)
			return std::nullopt;
		return std::size_t(detail::kvstore_check(rc, "kvblk_kvstore_wait"));
	}

	/**
	 * The eventfd readable while completions wait to be reaped (kvblk_kvstore_event_fd(); owned
	 * by the store: do not close it; throws Error).
	 */
	[[nodiscard]] int event_fd() const
	{
		return detail::kvstore_check(kvblk_kvstore_event_fd(s_), "kvblk_kvstore_event_fd");
	}

	/* ------------------------------------------------------------- keys */

	/**
	 * Take up to @max of the keys eviction removed, oldest first (kvblk_kvstore_evicted(); by
	 * default all that wait); taken keys leave the store's list. Throws Error.
	 */
	[[nodiscard]] std::vector<KvStoreKey> evicted(std::size_t max = SIZE_MAX)
	{
		std::vector<KvStoreKey> out;
		const uint32_t chunk = uint32_t(std::min<std::size_t>(max, kChunk));
		if (chunk == 0)
			return out;
		std::vector<kvblk_kvstore_key> k(chunk);
		/* Room for @chunk keys of the longest length: the first key always fits, so 0 is "none". */
		std::vector<char> buf(std::size_t(chunk) * key_room());
		while (out.size() < max) {
			const uint32_t want = uint32_t(std::min<std::size_t>(chunk, max - out.size()));
			const int n = detail::kvstore_check(kvblk_kvstore_evicted(s_, k.data(), want, buf.data(), buf.size()),
							    "kvblk_kvstore_evicted");
			append(k, n, &out);
			if (n == 0)
				break;
		}
		return out;
	}

	/**
	 * One page of the walk over the keys present (kvblk_kvstore_list()): start with @cursor 0;
	 * it is updated, and 0 again when the walk is over. At most @max keys. Throws Error.
	 */
	[[nodiscard]] std::vector<KvStoreKey> list(uint64_t &cursor, uint32_t max)
	{
		std::vector<KvStoreKey> out;
		std::vector<kvblk_kvstore_key> k(max ? max : 1);
		std::vector<char> buf(std::size_t(k.size()) * key_room());
		const int n = detail::kvstore_check(kvblk_kvstore_list(s_, &cursor, k.data(), max, buf.data(), buf.size()),
						    "kvblk_kvstore_list");
		append(k, n, &out);
		return out;
	}

	/** Every key present, in no particular order (the whole walk of list()). Throws Error. */
	[[nodiscard]] std::vector<KvStoreKey> list()
	{
		std::vector<KvStoreKey> out;
		uint64_t cursor = 0;
		do {
			std::vector<KvStoreKey> page = list(cursor, kChunk);
			out.insert(out.end(), std::make_move_iterator(page.begin()), std::make_move_iterator(page.end()));
		} while (cursor != 0);
		return out;
	}

	/* ------------------------------------------------------------- info */

	/** What the store is (kvblk_kvstore_get_info(); throws Error). */
	[[nodiscard]] kvblk_kvstore_info info() const
	{
		kvblk_kvstore_info i{};
		i.info_size = sizeof(i);
		detail::kvstore_check(kvblk_kvstore_get_info(s_, &i), "kvblk_kvstore_get_info");
		return i;
	}

	/** Drive @index (kvblk_kvstore_get_drive_info(); throws Error: ENOENT no such drive). */
	[[nodiscard]] kvblk_kvstore_drive_info drive_info(uint32_t index) const
	{
		kvblk_kvstore_drive_info d{};
		d.info_size = sizeof(d);
		detail::kvstore_check(kvblk_kvstore_get_drive_info(s_, index, &d), "kvblk_kvstore_get_drive_info");
		return d;
	}

	/** Every drive, by index (throws Error). */
	[[nodiscard]] std::vector<kvblk_kvstore_drive_info> drive_infos() const
	{
		const uint32_t n = info().drives;
		std::vector<kvblk_kvstore_drive_info> v;
		v.reserve(n);
		for (uint32_t i = 0; i < n; i++)
			v.push_back(drive_info(i));
		return v;
	}

	/** The counters since open or reset_stats() (kvblk_kvstore_get_stats(); throws Error). */
	[[nodiscard]] kvblk_kvstore_stats stats() const
	{
		kvblk_kvstore_stats s{};
		s.stats_size = sizeof(s);
		detail::kvstore_check(kvblk_kvstore_get_stats(s_, &s), "kvblk_kvstore_get_stats");
		return s;
	}

	/** Zero the counters, not the drives' state (kvblk_kvstore_reset_stats(); throws Error). */
	void reset_stats() { detail::kvstore_check(kvblk_kvstore_reset_stats(s_), "kvblk_kvstore_reset_stats"); }

	/**
	 * Check the store (kvblk_kvstore_check(), an fsck): the report; bad_objects is 0 when it
	 * is clean. Throws Error (EROFS: repair on a read-only store).
	 */
	kvblk_kvstore_check_report check(const KvStoreCheckOptions &o = KvStoreCheckOptions())
	{
		kvblk_kvstore_check_report r{};
		r.report_size = sizeof(r);
		const uint32_t flags =
			(o.data ? KVBLK_KVSTORE_CHECK_DATA : 0u) | (o.repair ? KVBLK_KVSTORE_CHECK_REPAIR : 0u);
		detail::kvstore_check(kvblk_kvstore_check(s_, flags, &r), "kvblk_kvstore_check");
		return r;
	}

	/* --------------------------------------------- without an open store */

	/**
	 * What drive @path's superblock says, without opening the store (kvblk_kvstore_identify();
	 * no lock, nothing written; throws Error: EMEDIUMTYPE not a store).
	 */
	[[nodiscard]] static kvblk_kvstore_identity identify(const std::string &path)
	{
		kvblk_kvstore_identity id{};
		id.identity_size = sizeof(id);
		detail::kvstore_check(kvblk_kvstore_identify(path.c_str(), &id), "kvblk_kvstore_identify");
		return id;
	}

	/**
	 * The live counters of the store drive @path belongs to, as the process that has it open
	 * for writing counts them (kvblk_kvstore_peek_stats(); throws Error: ESRCH none has).
	 */
	[[nodiscard]] static KvStorePeek peek_stats(const std::string &path)
	{
		KvStorePeek p;
		p.stats.stats_size = sizeof(p.stats);
		p.drives.resize(KVBLK_KVSTORE_MAX_DRIVES);
		for (auto &d : p.drives)
			d.info_size = sizeof(d);
		const int n = detail::kvstore_check(
			kvblk_kvstore_peek_stats(path.c_str(), &p.stats, p.drives.data(), uint32_t(p.drives.size())),
			"kvblk_kvstore_peek_stats");
		p.drives.resize(std::min<std::size_t>(std::size_t(n), p.drives.size()));
		return p;
	}

	/** CRC32C (Castagnoli; "123456789" gives 0xE3069283) of @len bytes, continuing @crc (0 to start). */
	[[nodiscard]] static uint32_t crc32c(const void *buf, std::size_t len, uint32_t crc = 0) noexcept
	{
		return kvblk_kvstore_crc32c(crc, buf, len);
	}

private:
	using BatchFn = int (*)(kvblk_kvstore *, const kvblk_kvstore_op *, uint32_t, kvblk_kvstore_result *);

	static constexpr uint32_t kChunk = 1024; /* keys per evicted()/list() call */

	static std::vector<const char *> paths(const std::vector<std::string> &drives)
	{
		std::vector<const char *> p;
		p.reserve(drives.size());
		for (const std::string &d : drives)
			p.push_back(d.c_str());
		return p;
	}

	static void set_put_meta(kvblk_kvstore_op *o, std::string_view meta) noexcept
	{
		o->meta = meta.empty() ? nullptr : const_cast<char *>(meta.data());
		o->meta_len = detail::clamp_u32(meta.size());
	}

	/* Bytes that hold any key of this store. */
	std::size_t key_room() const { return std::max<std::size_t>(info().max_key_bytes, 1); }

	static void append(const std::vector<kvblk_kvstore_key> &k, int n, std::vector<KvStoreKey> *out)
	{
		for (int i = 0; i < n; i++)
			out->push_back(KvStoreKey{std::string(static_cast<const char *>(k[i].key), k[i].key_len), k[i].drive,
						  k[i].length, k[i].gen});
	}

	std::size_t batch(BatchFn fn, const char *call, Span<const kvblk_kvstore_op> ops,
			  Span<kvblk_kvstore_result> results)
	{
		if (results.size() != ops.size())
			throw Error(-EINVAL, std::string(call) + ": " + std::to_string(ops.size()) + " ops but " +
						     std::to_string(results.size()) + " results");
		return std::size_t(detail::kvstore_check(
			fn(s_, ops.data(), detail::clamp_u32(ops.size()), results.data()), call));
	}

	kvblk_kvstore_result one(BatchFn fn, const char *call, const kvblk_kvstore_op &op)
	{
		kvblk_kvstore_result r{};
		detail::kvstore_check(fn(s_, &op, 1, &r), call);
		return r;
	}

	kvblk_kvstore *s_ = nullptr;
};

} // namespace kvblk

#endif /* KVBLK_KVSTORE_HPP */

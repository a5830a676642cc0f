/* SPDX-License-Identifier: MIT */
/*
 * kvblk store: KV-cache objects by key, on one or more drives (since 0.4).
 *
 * Engines keep KV cache by key (LMCache's key strings, SGLang's page hashes) and ask
 * "exists / get / put / delete" in batches. The store maps keys to fixed-size slots on
 * block devices, partitions, md/dm devices, NVMe-oF namespaces or preallocated files, keeps
 * a crash-safe journaled index on every drive, a CRC32C per object checked on the load path,
 * and spreads objects over the drives with per-drive failure isolation. It is a layer over
 * libkvblk's public C API (<kvblk/kvblk.h>): every byte it moves, data and index alike, goes
 * through one kvblk_dev whose targets are the drives, with the backend chosen as
 * kvblk_open() chooses it (kvblk.ko, io_uring, ...). The on-disk format, the journal and
 * what a crash can leave are in docs/kvstore-format.md.
 *
 * Conventions are libkvblk's: 0 or a count on success, a negative errno on failure, the
 * reason for the last failing call on this thread in kvblk_kvstore_last_error(); option
 * structs start with their size (set by the *_init() function); units are bytes, times ns.
 *
 * Keys are opaque byte strings of 1..max_key_bytes bytes (set at create, at most
 * KVBLK_KVSTORE_MAX_KEY; the default 512 holds LMCache's key strings and SGLang's 64-byte
 * hex hashes with any suffix). Each object may carry up to max_meta_bytes of the caller's
 * metadata (shape, dtype, format...), stored in the index with it and returned by get and
 * exists.
 *
 * Batches are asynchronous: kvblk_kvstore_submit() checks a batch, queues it and returns a
 * ticket; its completion (a struct kvblk_cqe, as libkvblk's) is taken with
 * kvblk_kvstore_reap() or kvblk_kvstore_wait(), and kvblk_kvstore_event_fd() is readable
 * while completions wait. Each key of a batch gets its own status in a results array. The
 * synchronous calls (kvblk_kvstore_get() ...) are submit + wait.
 *
 * Several drives: a drive missing at an open (KVBLK_KVSTORE_OPEN_DEGRADED) may hold older
 * copies of keys; generations grow with the wall clock across sessions so that what is put
 * meanwhile wins when the drive returns, and deletions made meanwhile are kept as tombstones
 * until an open with every drive present (a wall clock stepped back past an earlier
 * session's puts defeats this).
 *
 * Threads: one store may be used from several threads at once, as a kvblk_dev;
 * kvblk_kvstore_close() must not race other calls. A store starts two threads: one takes
 * libkvblk's completions of gets (and checks their checksums), one runs puts, deletes and
 * checkpoints in order (puts and deletes are serialised: each is made durable before the
 * next starts). Processes: a store belongs to the process that opened it; in a child made
 * by fork(2) every call on the inherited handle returns -EBADFD and
 * kvblk_kvstore_close() frees nothing. Two stores (in this or another process) cannot open
 * the same drive for writing at once: each drive is locked with flock(2) (LOCK_EX; LOCK_SH
 * with KVBLK_KVSTORE_OPEN_RDONLY), and a drive that is locked fails the open with -EBUSY.
 */
#ifndef KVBLK_KVSTORE_H
#define KVBLK_KVSTORE_H

#include <kvblk/kvblk.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Limits. */
#define KVBLK_KVSTORE_MAX_DRIVES	64u	/* drives per store */
#define KVBLK_KVSTORE_MAX_CLASSES	16u	/* slot size classes per store */
#define KVBLK_KVSTORE_MAX_KEY		1024u	/* bytes: the largest max_key_bytes */
#define KVBLK_KVSTORE_MAX_META		1024u	/* bytes: the largest max_meta_bytes */
#define KVBLK_KVSTORE_DEFAULT_MAX_KEY	512u
#define KVBLK_KVSTORE_DEFAULT_MAX_META	128u
#define KVBLK_KVSTORE_SLOT_ALIGN	4096u	/* slot sizes are multiples of this */
#define KVBLK_KVSTORE_FORMAT_VERSION	1u	/* on-disk format this library writes */

/** kvblk_kvstore_last_error() - reason for the last failing store call on this thread; "" if none. */
const char *kvblk_kvstore_last_error(void) KVBLK_NOEXCEPT;

/* ----------------------------------------------------------- create/open */

/**
 * struct kvblk_kvstore_class - one slot size class, chosen at create.
 * @slot_bytes: bytes per slot, a multiple of KVBLK_KVSTORE_SLOT_ALIGN (4096); an object of
 *              length L goes to the class with the smallest slot_bytes >= L.
 * @weight:     share of every drive's data area given to this class, relative to the
 *              other classes' weights (1, 4, 4: one ninth, four ninths, four ninths);
 *              0 is taken as 1.
 * @reserved:   must be 0.
 */
struct kvblk_kvstore_class {
	uint64_t slot_bytes;
	uint32_t weight;
	uint32_t reserved;
};

/* kvblk_kvstore_create_opts.flags */
#define KVBLK_KVSTORE_CREATE_FORCE	(1u << 0) /* overwrite a drive that holds a kvblk store */
#define KVBLK_KVSTORE_CREATE_FLAGS_ALL	(KVBLK_KVSTORE_CREATE_FORCE)

/**
 * struct kvblk_kvstore_create_opts - how kvblk_kvstore_create() lays a store out; fill with
 * kvblk_kvstore_create_opts_init(), then set at least one class.
 * @opts_size:      sizeof(struct kvblk_kvstore_create_opts).
 * @flags:          KVBLK_KVSTORE_CREATE_*.
 * @nr_classes:     classes used, 1..KVBLK_KVSTORE_MAX_CLASSES; 0 = one class of 4 MiB slots.
 * @classes:        the classes; any order (sorted by slot_bytes on disk); no two alike.
 * @file_bytes:     size of every drive that is a regular file that does not exist yet:
 *                  it is created with this size and preallocated (fallocate(2); a file
 *                  system without fallocate refuses with -EOPNOTSUPP). 0: such a path is
 *                  an error (-ENOENT). An existing file keeps its size.
 * @journal_bytes:  journal ring per drive, a multiple of 4096, >= 4 MiB; 0 = 64 MiB (or
 *                  1/64 of the drive when that is smaller, at least 4 MiB).
 * @max_key_bytes:  longest key, 1..KVBLK_KVSTORE_MAX_KEY; 0 = 512.
 * @max_meta_bytes: longest metadata per object, 0..KVBLK_KVSTORE_MAX_META;
 *                  UINT32_MAX = 0 bytes; 0 = 128.
 * @reserved:       must be 0.
 */
struct kvblk_kvstore_create_opts {
	size_t opts_size;
	uint32_t flags;
	uint32_t nr_classes;
	struct kvblk_kvstore_class classes[KVBLK_KVSTORE_MAX_CLASSES];
	uint64_t file_bytes;
	uint64_t journal_bytes;
	uint32_t max_key_bytes;
	uint32_t max_meta_bytes;
	uint64_t reserved[4];
};

/** kvblk_kvstore_create_opts_init() - zero @opts and set opts_size to @size (pass sizeof(*opts)). */
void kvblk_kvstore_create_opts_init(struct kvblk_kvstore_create_opts *opts, size_t size) KVBLK_NOEXCEPT;

/* kvblk_kvstore_open_opts.flags */
#define KVBLK_KVSTORE_OPEN_RDONLY	(1u << 0) /* nothing written: no put/delete, no replay written back */
#define KVBLK_KVSTORE_OPEN_DEGRADED	(1u << 1) /* open although drives are missing (their keys are misses) */
#define KVBLK_KVSTORE_OPEN_RECOVER	(1u << 2) /* open a damaged store: keep what can be trusted (below) */
#define KVBLK_KVSTORE_OPEN_FLAGS_ALL	(KVBLK_KVSTORE_OPEN_RDONLY | KVBLK_KVSTORE_OPEN_DEGRADED | \
					 KVBLK_KVSTORE_OPEN_RECOVER)

/* kvblk_kvstore_open_opts.when_full */
#define KVBLK_KVSTORE_EVICT_LRU		0u /* evict least recently used objects (default) */
#define KVBLK_KVSTORE_REFUSE		1u /* never evict: a put that finds no slot fails -ENOSPC */

/**
 * struct kvblk_kvstore_open_opts - how a store is served; kvblk_kvstore_open_opts_init().
 * @opts_size:       sizeof(struct kvblk_kvstore_open_opts).
 * @flags:           KVBLK_KVSTORE_OPEN_*.
 * @backend:         enum kvblk_backend of the kvblk_dev over the drives; AUTO as
 *                   kvblk_open() (kvblk.ko where it serves, else io_uring).
 * @queue_depth:     as kvblk_open_opts.queue_depth; 0 = libkvblk's default.
 * @workers:         as kvblk_open_opts.workers; 0 = libkvblk's default.
 * @when_full:       KVBLK_KVSTORE_EVICT_LRU or KVBLK_KVSTORE_REFUSE.
 * @max_batches:     store batches outstanding at once (submitted and not yet reaped or
 *                   waited for), 1..65536; 0 = 256. A submit beyond it waits, or fails
 *                   with -EAGAIN with KVBLK_KVSTORE_SUBMIT_NONBLOCK.
 * @drive_budget_bytes: bytes of one get batch in flight per drive at once: a batch whose
 *                   objects on one drive sum to more is issued in parts, each part once the
 *                   one before it has completed; the objects of every drive are issued
 *                   interleaved, so that every drive is busy from the start. 0 = 1 GiB.
 * @max_cmd_bytes:   as kvblk_open_opts.max_cmd_bytes; 0 = libkvblk's default.
 * @max_descs:       keys per batch, and descriptors per libkvblk call, as
 *                   kvblk_open_opts.max_descs (1..2^20); 0 = libkvblk's default (65536).
 * @reserved32:      must be 0.
 * @reserved:        must be 0.
 */
struct kvblk_kvstore_open_opts {
	size_t opts_size;
	uint32_t flags;
	uint32_t backend;
	uint32_t queue_depth;
	uint32_t workers;
	uint32_t when_full;
	uint32_t max_batches;
	uint64_t drive_budget_bytes;
	uint64_t max_cmd_bytes;
	uint32_t max_descs;
	uint32_t reserved32;
	uint64_t reserved[3];
};

/** kvblk_kvstore_open_opts_init() - zero @opts and set opts_size to @size (pass sizeof(*opts)). */
void kvblk_kvstore_open_opts_init(struct kvblk_kvstore_open_opts *opts, size_t size) KVBLK_NOEXCEPT;

typedef struct kvblk_kvstore kvblk_kvstore;

/**
 * kvblk_kvstore_create() - make a new, empty store over @nr_paths drives and open it.
 * @paths:    drives: block devices (whole NVMe namespaces, partitions, md, dm, NVMe-oF
 *            namespaces, loop...), regular files (see @copts->file_bytes), or, with
 *            @oopts->backend KVBLK_BACKEND_URING_CMD, NVMe generic char devices (/dev/ngXnY).
 *            Drive i of the store is @paths[i]; each may have its own size and logical
 *            block size (at most 4096).
 * @nr_paths: 1..KVBLK_KVSTORE_MAX_DRIVES.
 * @copts:    layout; NULL = one class of 4 MiB slots and the defaults.
 * @oopts:    how to serve it once made (as kvblk_kvstore_open()); NULL = defaults.
 *            KVBLK_KVSTORE_OPEN_RDONLY and _DEGRADED are -EINVAL here.
 * @out:      receives the open store; untouched on failure.
 *
 * Every drive gets two superblocks, two checkpoint areas, a journal ring and a data area
 * divided among the classes by weight (docs/kvstore-format.md). Everything is written and
 * flushed (kvblk_flush()) before the call returns. A drive that already holds a kvblk
 * store is refused (-EEXIST) unless KVBLK_KVSTORE_CREATE_FORCE; nothing is checked for
 * other contents (a file system on the device is overwritten). On failure nothing is left
 * behind: files this call created are removed; a drive already written keeps a superblock
 * that fails to open (-EUCLEAN) only when the failure came between two drives' writes.
 *
 * Errors: -EINVAL NULL @paths or @out, @nr_paths 0 or too many, a path given twice, a bad
 * option (class size not a multiple of 4096 or 0, two classes alike, weights, limits,
 * reserved not 0); -EEXIST a drive holds a store (no FORCE); -ENOENT a file path does not
 * exist and @copts->file_bytes is 0; -ENOSPC a drive (or the file system, for a new file)
 * is too small for the metadata and one slot of every class: kvblk_kvstore_last_error()
 * says how much it needs; -EBUSY a drive is open in another store; -EOPNOTSUPP a drive's
 * logical block size is over 4096, or fallocate(2) is not supported; the errors of
 * kvblk_open() and kvblk_add_target() for each drive, and of the writes.
 */
int kvblk_kvstore_create(const char *const *paths, uint32_t nr_paths,
			 const struct kvblk_kvstore_create_opts *copts,
			 const struct kvblk_kvstore_open_opts *oopts, kvblk_kvstore **out) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_open() - open a store made by kvblk_kvstore_create().
 * @paths:    its drives, in any order (each drive's superblock says which it is); all of
 *            them unless KVBLK_KVSTORE_OPEN_DEGRADED.
 * @nr_paths: 1..KVBLK_KVSTORE_MAX_DRIVES.
 * @opts:     NULL = defaults.
 * @out:      receives the store; untouched on failure.
 *
 * Reads each drive's superblocks (either copy may be damaged), its newest valid
 * checkpoint and the journal after it, and rebuilds the index: a key is present with the
 * newest record of it that the journal made durable; a record whose slot a later record
 * took is dropped. Nothing is written while checking: a path that is not a kvblk store,
 * is damaged, or is of a newer format fails the open and is left as it was. After
 * replay the store writes a checkpoint (not with KVBLK_KVSTORE_OPEN_RDONLY), so the next
 * open replays nothing. LRU order after an open is the order of the objects' puts.
 *
 * Errors: -EINVAL NULL argument, bad option, a path given twice; -EMEDIUMTYPE a path holds
 * no kvblk store (no magic in either superblock copy); -EUCLEAN a drive's metadata is
 * damaged beyond what the rules in docs/kvstore-format.md recover (both superblock copies,
 * both checkpoints, or a journal damaged before its last commit): kvblk_kvstore_last_error()
 * says where. KVBLK_KVSTORE_OPEN_RECOVER (not with RDONLY) opens such a store anyway: the
 * records before the damage are kept, every object is read and those whose CRC32C fails
 * are dropped, and a fresh checkpoint is written (`kvblkctl store check --repair`;
 * both superblock copies, or both checkpoints, damaged stays -EUCLEAN: there is no index
 * to start from); -EPROTONOSUPPORT the
 * store is of a newer format (or needs features this library lacks: read-only open
 * allowed when only read-only-compatible features are unknown); -EXDEV the drives belong
 * to different stores, or two paths are the same drive of the store; -ENODEV a drive of the
 * store is not among @paths (without KVBLK_KVSTORE_OPEN_DEGRADED); -ERANGE a drive is
 * smaller now than when the store was made; -EBUSY a drive is open in another store
 * (flock); the errors of kvblk_open() and kvblk_add_target().
 */
int kvblk_kvstore_open(const char *const *paths, uint32_t nr_paths,
		       const struct kvblk_kvstore_open_opts *opts, kvblk_kvstore **out) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_close() - finish every outstanding batch, write a checkpoint, close.
 * NULL is a no-op. Batches queued and not started end with -ECANCELED per key; batches
 * running are waited for; completions nobody took are dropped. A checkpoint is written
 * (not read-only) so that the next open replays nothing; failing that, the journal still
 * holds everything and the next open replays it. In a fork child: frees nothing, returns.
 */
void kvblk_kvstore_close(kvblk_kvstore *store) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_dev() - the kvblk_dev the store moves its bytes through (drive i is target
 * i of it). Use it to register destinations and sources (kvblk_register_buffer(),
 * kvblk_register_dmabuf()), whose ids the store's batches then name, and for
 * kvblk_get_stats()/kvblk_get_info(). Never store, submit, reap, wait or cancel through it,
 * remove its targets, or close it: the store owns it (its reaper thread takes every completion
 * of it). NULL for a NULL store.
 */
kvblk_dev *kvblk_kvstore_dev(kvblk_kvstore *store) KVBLK_NOEXCEPT;

/* ------------------------------------------------------------ batches */

/**
 * struct kvblk_kvstore_op - one key of a batch.
 * @key:      the key's bytes (1..max_key_bytes; compared byte for byte).
 * @key_len:  bytes at @key.
 * @buf_id:   KVBLK_BUF_NONE: @addr is a host pointer; else a buffer id registered on
 *            kvblk_kvstore_dev(), @addr a byte offset into it.
 * @addr:     get: the destination; put: the source; exists, delete: ignored (0).
 * @length:   get: bytes of room at the destination (the object must fit: -EMSGSIZE
 *            otherwise, with the object's length in its result); put: the object's length,
 *            1..the largest class's slot_bytes; exists, delete: 0.
 * @meta:     put: @meta_len bytes of metadata stored with the object (NULL when 0); get
 *            and exists: where the object's metadata is copied, room for @meta_len bytes
 *            (NULL when 0; a longer metadata is cut to @meta_len, its result says how long
 *            it is).
 * @meta_len: bytes at @meta; put: at most max_meta_bytes.
 * @flags:    0.
 * @tag:      the caller's value, copied to the key's result.
 *
 * Alignment: none is required. A host destination whose address is aligned to the drive's
 * mem_align and whose room covers the object's last block is read straight into; one whose
 * room ends inside that block is read with KVBLK_DESC_UNALIGNED (the last block through
 * libkvblk's bounce); one whose address is not aligned is read whole through that bounce
 * and copied (a get issues such objects in parts of at most KVBLK_MAX_BOUNCE_BYTES of
 * bounce). Align destinations to the page for the direct path. A put's source is written
 * straight from its address when aligned (only a last partial block through a store-owned
 * bounce block), else through a bounce copy of the whole object. Device memory (CUDA, dma-buf, P2PDMA buffers) must be aligned to the
 * drive's mem_align with room for the object rounded up to its logical block size.
 */
struct kvblk_kvstore_op {
	const void *key;
	uint32_t key_len;
	uint32_t buf_id;
	uint64_t addr;
	uint64_t length;
	void *meta;
	uint32_t meta_len;
	uint32_t flags;
	uint64_t tag;
};

/**
 * struct kvblk_kvstore_result - what became of one key.
 * @status:   get: 0 a hit, the object's bytes are at the destination and (host memory)
 *            their CRC32C matched; -ENOENT a miss; -EBADMSG the bytes read do not match
 *            the object's CRC32C (counted in checksum_failures; the key is dropped from
 *            the store, the next get of it is a miss); -EMSGSIZE the destination is
 *            smaller than the object (@length says how large it is); -ENODEV its drive
 *            has failed or is missing; -EIO and the other errors of
 *            struct kvblk_result for its read; -ECANCELED not attempted (a rejected
 *            batch, or the store closed before it ran).
 *            put: 0 the object is durable and visible (replacing the key's older object);
 *            -ENOSPC no slot for it (KVBLK_KVSTORE_REFUSE, or every slot of its class is
 *            being read); -ENODEV no healthy drive has its class; -EIO a write or flush
 *            failed (the key keeps its older object, if any).
 *            exists: 0 present; -ENOENT absent; -ENODEV on a failed drive.
 *            delete: 0 was present and is deleted (durable); -ENOENT absent; -ENODEV its
 *            drive has failed (nothing deleted); -EIO the journal commit failed (the key is
 *            gone for this session and its drive failed; it may come back at the next open).
 *            A get that fails with -EBADMSG drops the key; other read errors keep it.
 * @meta_len: get, exists: the object's metadata length (may be more than op.meta_len).
 * @length:   get, exists: the object's length (also on -EMSGSIZE); put: bytes stored.
 * @tag:      the op's tag.
 * @drive:    the drive that holds (get, exists, delete) or received (put) the key; UINT32_MAX
 *            when none.
 * @reserved: 0.
 */
struct kvblk_kvstore_result {
	int32_t status;
	uint32_t meta_len;
	uint64_t length;
	uint64_t tag;
	uint32_t drive;
	uint32_t reserved;
};

/* Batch kinds (kvblk_kvstore_submit()'s @kind). */
#define KVBLK_KVSTORE_GET	1u
#define KVBLK_KVSTORE_PUT	2u
#define KVBLK_KVSTORE_EXISTS	3u
#define KVBLK_KVSTORE_DELETE	4u

/* kvblk_kvstore_submit_opts.flags */
#define KVBLK_KVSTORE_SUBMIT_NONBLOCK	(1u << 0) /* -EAGAIN instead of waiting for a batch slot */
#define KVBLK_KVSTORE_SUBMIT_PRIORITY	(1u << 1) /* get: ahead of queued batches (KVBLK_SUBMIT_PRIORITY) */
#define KVBLK_KVSTORE_SUBMIT_VERIFY	(1u << 2) /* get: also check device-memory objects (below) */
#define KVBLK_KVSTORE_SUBMIT_FLAGS_ALL	(KVBLK_KVSTORE_SUBMIT_NONBLOCK | KVBLK_KVSTORE_SUBMIT_PRIORITY | \
					 KVBLK_KVSTORE_SUBMIT_VERIFY)

/**
 * struct kvblk_kvstore_submit_opts - options of kvblk_kvstore_submit(); fill with
 * kvblk_kvstore_submit_opts_init().
 * @opts_size: sizeof(struct kvblk_kvstore_submit_opts).
 * @flags:     KVBLK_KVSTORE_SUBMIT_*.
 * @bad_index: out: the rejected op's index when the submit fails because of one; else -1.
 * @user_data: the caller's value, returned in the batch's kvblk_cqe.
 * @results:   NULL or n results, written as the batch completes; they must stay valid
 *             until its completion is reaped or waited for. On a rejected submit the
 *             rejected op's result holds the error and every other -ECANCELED.
 */
struct kvblk_kvstore_submit_opts {
	size_t opts_size;
	uint32_t flags;
	int32_t bad_index;
	uint64_t user_data;
	struct kvblk_kvstore_result *results;
};

/** kvblk_kvstore_submit_opts_init() - zero @opts and set opts_size to @size. */
void kvblk_kvstore_submit_opts_init(struct kvblk_kvstore_submit_opts *opts, size_t size) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_submit() - queue a batch of @n keys and return.
 * @store:  the store.
 * @kind:   KVBLK_KVSTORE_GET, _PUT, _EXISTS or _DELETE.
 * @ops:    @n ops; free again when the call returns (keys and metadata are copied; get
 *          destinations and put sources belong to the store until the batch's completion
 *          is taken).
 * @n:      1..the store's kvblk_dev max_descs (65536 by default; a larger batch is
 *          refused with -E2BIG: split it, or open with a larger max_descs).
 * @opts:   NULL = no results array, user_data 0.
 * @ticket: receives the batch's ticket, nonzero and never reused by this store.
 *
 * Every op is checked before anything is queued; a bad one rejects the batch (bad_index).
 * The same key twice in one put or delete batch is a bad op.
 *
 * get: every key is looked up at submit; the objects found are read all in flight
 * together, over every drive at once (interleaved, at most drive_budget_bytes per drive
 * in flight), and each object's CRC32C is computed over the destination and compared
 * before the key is reported a hit (host memory). Device memory (CUDA, dma-buf, P2PDMA:
 * libkvblk's kvblk_path p2p or staged) cannot be read by the CPU: what is checked there
 * is the object's index record (key, length, generation, its slot not taken by a later
 * record), not the bytes, unless KVBLK_KVSTORE_SUBMIT_VERIFY: then each such object is
 * also read a second time into host memory and its CRC32C checked, which shows that the
 * drive returned the stored bytes, not that the DMA into the device delivered them. A get
 * is a use (LRU). An object read while a put replaces the key stays readable: the old slot
 * is reused only after its last reader completes.
 *
 * put: each object gets a slot on a drive chosen by its key (rendezvous hashing over the
 * healthy drives) unless that drive's class is fuller than another's (then the drive with
 * the most free slots), freed slots before never-written ones; when the class is full on
 * every drive, the least recently used objects of the class are evicted (never one being
 * read) and reported (kvblk_kvstore_evicted()); their deletion is made durable before
 * their slots are written. The objects' CRC32C is computed while they are written; then
 * each drive written is flushed, the index records are written to its journal and
 * flushed: only then is a key visible to get and exists, and its result 0. A put of a key
 * that is present replaces it (its old object stays readable until then).
 *
 * exists: answered at submit from the index (the completion is queued at once).
 * delete: the deletions are written to the journals and flushed before completion; a
 * deleted key is a miss at once.
 *
 * Return: 0. Errors (nothing queued): -EINVAL NULL argument, unknown @kind or flag, a bad
 * op (key empty or over max_key_bytes, metadata over max_meta_bytes, put length 0 or over
 * the largest class, a key twice, op flags not 0), opts_size wrong; -EROFS put or delete
 * on a store opened KVBLK_KVSTORE_OPEN_RDONLY; -ENOENT an op names an unknown buffer id;
 * -EOPNOTSUPP a put from device memory; -E2BIG @n too large; -EAGAIN (NONBLOCK) max_batches
 * outstanding; -EBADFD inherited through fork(); -ENOMEM.
 */
int kvblk_kvstore_submit(kvblk_kvstore *store, uint32_t kind, const struct kvblk_kvstore_op *ops,
			 uint32_t n, struct kvblk_kvstore_submit_opts *opts, uint64_t *ticket) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_reap() - take batch completions, as kvblk_reap().
 * Each completion is a struct kvblk_cqe with flags KVBLK_CQE_BATCH: @ticket, @user_data,
 * @status (0 when every key's status is 0, else the first non-zero one in op order),
 * @failed (keys with a non-zero status: misses count), @index (the number of keys),
 * @bytes (get: bytes of the hits; put: bytes stored), @tag (the batch kind), @path
 * (enum kvblk_path of the reads), @backend, @elapsed_ns (submit to completion).
 * Return: entries taken (0..@max). Errors: -EINVAL NULL argument, @max 0, @min_complete >
 * @max; -EBADFD inherited through fork().
 */
int kvblk_kvstore_reap(kvblk_kvstore *store, struct kvblk_cqe *cqes, uint32_t max,
		       uint32_t min_complete, int64_t timeout_ns) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_wait() - wait for batch @ticket and take its completion.
 * @cqe: NULL or where its completion is copied.
 * Return: the number of keys with status 0. Errors: -ETIME the timeout passed (still
 * outstanding); -ENOENT @ticket is not outstanding; -EINVAL NULL @store; -EBADFD.
 */
int kvblk_kvstore_wait(kvblk_kvstore *store, uint64_t ticket, int64_t timeout_ns,
		       struct kvblk_cqe *cqe) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_event_fd() - an eventfd readable while completions wait to be reaped
 * (kvblk_kvstore_reap() clears it when it empties the queue). Owned by the store.
 * Return: the fd. Errors: -EINVAL NULL @store.
 */
int kvblk_kvstore_event_fd(kvblk_kvstore *store) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_get(), _put(), _exists(), _delete() - one batch, synchronously
 * (kvblk_kvstore_submit() + kvblk_kvstore_wait()), @results required.
 * Return: the number of keys with status 0. Errors: those of kvblk_kvstore_submit().
 */
int kvblk_kvstore_get(kvblk_kvstore *store, const struct kvblk_kvstore_op *ops, uint32_t n,
		      struct kvblk_kvstore_result *results) KVBLK_NOEXCEPT;
int kvblk_kvstore_put(kvblk_kvstore *store, const struct kvblk_kvstore_op *ops, uint32_t n,
		      struct kvblk_kvstore_result *results) KVBLK_NOEXCEPT;
int kvblk_kvstore_exists(kvblk_kvstore *store, const struct kvblk_kvstore_op *ops, uint32_t n,
			 struct kvblk_kvstore_result *results) KVBLK_NOEXCEPT;
int kvblk_kvstore_delete(kvblk_kvstore *store, const struct kvblk_kvstore_op *ops, uint32_t n,
			 struct kvblk_kvstore_result *results) KVBLK_NOEXCEPT;

/* ----------------------------------------------------- evictions, keys */

/**
 * struct kvblk_kvstore_key - a key handed back by the store.
 * @key:     its bytes (in the caller's @buf).
 * @key_len: bytes.
 * @drive:   the drive it was on.
 * @length:  its object's length.
 * @gen:     the generation of its object (docs/kvstore-format.md).
 */
struct kvblk_kvstore_key {
	const void *key;
	uint32_t key_len;
	uint32_t drive;
	uint64_t length;
	uint64_t gen;
};

/**
 * kvblk_kvstore_evicted() - take keys that eviction removed, oldest first, so that an
 * engine's own index stays true. Keys accumulate from the open on (at most 1,048,576;
 * beyond that the oldest are dropped and counted in evictions_dropped) until taken.
 * @keys: room for @max keys; their bytes are copied into @buf (@buf_len bytes).
 * Return: keys taken (0 when none, or when the first does not fit @buf). Errors: -EINVAL
 * NULL argument or @max 0; -EBADFD.
 */
int kvblk_kvstore_evicted(kvblk_kvstore *store, struct kvblk_kvstore_key *keys, uint32_t max,
			  void *buf, size_t buf_len) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_list() - walk the keys present, in no particular order.
 * @cursor: 0 to start; updated; 0 again when the walk is over. Keys put or deleted during
 *          a walk may or may not be seen; no key present for the whole walk is missed or
 *          seen twice.
 * @keys, @max, @buf, @buf_len: as kvblk_kvstore_evicted().
 * Return: keys written. Errors: -EINVAL NULL argument or @max 0; -ENOSPC @buf_len cannot
 * hold the next key; -EBADFD.
 */
int kvblk_kvstore_list(kvblk_kvstore *store, uint64_t *cursor, struct kvblk_kvstore_key *keys,
		       uint32_t max, void *buf, size_t buf_len) KVBLK_NOEXCEPT;

/* ---------------------------------------------------- info, stats, check */

/* kvblk_kvstore_drive_info.state */
#define KVBLK_KVSTORE_DRIVE_OK		0u /* serving */
#define KVBLK_KVSTORE_DRIVE_FAILED	1u /* a write, flush or its device failed: its keys fail -ENODEV */
#define KVBLK_KVSTORE_DRIVE_MISSING	2u /* not given to a KVBLK_KVSTORE_OPEN_DEGRADED open */

/**
 * struct kvblk_kvstore_drive_info - one drive; kvblk_kvstore_get_drive_info().
 * @info_size:     sizeof(*info).
 * @index:         its index in the store (as created).
 * @state:         KVBLK_KVSTORE_DRIVE_*.
 * @uuid:          its drive UUID.
 * @path:          the path it was opened by ("" when missing).
 * @bytes:         bytes of it the store uses (its size at create).
 * @data_bytes:    bytes of slots.
 * @objects:       objects on it.
 * @slots, @slots_free: slots in all classes, and of those, free.
 * @bytes_read, @bytes_written: data moved by gets and puts since open.
 * @read_errors, @write_errors: objects that failed to read, to write (with their flushes
 *                 and journal commits) since open.
 * @why_failed:    for a failed drive, the error that failed it.
 */
struct kvblk_kvstore_drive_info {
	size_t info_size;
	uint32_t index;
	uint32_t state;
	uint8_t uuid[16];
	char path[256];
	uint64_t bytes;
	uint64_t data_bytes;
	uint64_t objects;
	uint64_t slots;
	uint64_t slots_free;
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t read_errors;
	uint64_t write_errors;
	char why_failed[160];
};

/**
 * struct kvblk_kvstore_class_info - one class as the store has it.
 * @slot_bytes: bytes per slot.
 * @slots:      slots of this class on all drives (the missing ones included).
 * @slots_free: free (never written or freed) on drives that serve.
 * @objects:    objects in it.
 */
struct kvblk_kvstore_class_info {
	uint64_t slot_bytes;
	uint64_t slots;
	uint64_t slots_free;
	uint64_t objects;
};

/**
 * struct kvblk_kvstore_info - the store; kvblk_kvstore_get_info().
 * @info_size:      sizeof(*info).
 * @format_version: of the store on disk.
 * @drives:         drives of the store; @drives_ok of them serve.
 * @uuid:           the store's UUID.
 * @nr_classes:     classes; @classes[0..nr_classes) describe them.
 * @max_key_bytes, @max_meta_bytes: as created.
 * @objects:        keys present.
 * @bytes_stored:   sum of their lengths.
 * @journal_bytes:  journal ring per drive.
 * @flags:          KVBLK_KVSTORE_OPEN_* it was opened with.
 * @when_full:      KVBLK_KVSTORE_EVICT_LRU or _REFUSE.
 */
struct kvblk_kvstore_info {
	size_t info_size;
	uint32_t format_version;
	uint32_t drives;
	uint32_t drives_ok;
	uint32_t nr_classes;
	uint8_t uuid[16];
	uint32_t max_key_bytes;
	uint32_t max_meta_bytes;
	uint64_t objects;
	uint64_t bytes_stored;
	uint64_t journal_bytes;
	uint32_t flags;
	uint32_t when_full;
	struct kvblk_kvstore_class_info classes[KVBLK_KVSTORE_MAX_CLASSES];
};

/** kvblk_kvstore_get_info() - fill @info (set info_size first). Errors: -EINVAL; -EBADFD. */
int kvblk_kvstore_get_info(kvblk_kvstore *store, struct kvblk_kvstore_info *info) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_get_drive_info() - fill @info for drive @index (set info_size first).
 * Errors: -EINVAL NULL argument, info_size too small; -ENOENT no such drive; -EBADFD.
 */
int kvblk_kvstore_get_drive_info(kvblk_kvstore *store, uint32_t index,
			     struct kvblk_kvstore_drive_info *info) KVBLK_NOEXCEPT;

/**
 * struct kvblk_kvstore_stats - counters since open or kvblk_kvstore_reset_stats().
 * @stats_size:        sizeof(*stats).
 * @gets, @puts, @exists, @deletes: keys asked for, per kind.
 * @hits, @misses:     get keys found (and checked) and not found.
 * @checksum_failures: get keys whose bytes did not match their CRC32C (-EBADMSG).
 * @get_errors:        get keys that failed otherwise (-EIO, -ENODEV, -EMSGSIZE ...).
 * @put_errors:        put keys that failed.
 * @evictions:         objects evicted to make room.
 * @evictions_dropped: evicted keys dropped from the list kvblk_kvstore_evicted() drains
 *                     because nobody took them.
 * @bytes_read, @bytes_written: object bytes of hits and of stored puts.
 * @journal_commits:   journal commits written (each one write and one flush per drive).
 * @checkpoints:       checkpoints written.
 * @flushes:           drive flushes (kvblk_flush()) issued.
 * @degraded:          1 while a drive is failed or missing.
 */
struct kvblk_kvstore_stats {
	size_t stats_size;
	uint64_t gets;
	uint64_t puts;
	uint64_t exists;
	uint64_t deletes;
	uint64_t hits;
	uint64_t misses;
	uint64_t checksum_failures;
	uint64_t get_errors;
	uint64_t put_errors;
	uint64_t evictions;
	uint64_t evictions_dropped;
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t journal_commits;
	uint64_t checkpoints;
	uint64_t flushes;
	uint64_t degraded;
};

/** kvblk_kvstore_get_stats() - copy the counters (set stats_size first). Errors: -EINVAL; -EBADFD. */
int kvblk_kvstore_get_stats(kvblk_kvstore *store, struct kvblk_kvstore_stats *stats) KVBLK_NOEXCEPT;

/** kvblk_kvstore_reset_stats() - zero the counters (not the drives' state). Errors: -EINVAL; -EBADFD. */
int kvblk_kvstore_reset_stats(kvblk_kvstore *store) KVBLK_NOEXCEPT;

/**
 * struct kvblk_kvstore_identity - what one drive's superblock says; kvblk_kvstore_identify().
 * @identity_size:  sizeof(*id), set by the caller.
 * @format_version: of the store.
 * @drive_index:    this drive's index in its store; @drive_count drives in all.
 * @nr_classes:     classes; @slot_bytes[c] and @slots[c] (on this drive) describe class c.
 * @store_uuid, @drive_uuid: the store's and this drive's UUIDs.
 * @drive_bytes:    bytes of the drive the store uses.
 * @created_ns:     when the store was made (CLOCK_REALTIME ns).
 * @journal_bytes:  this drive's journal ring.
 * @max_key_bytes, @max_meta_bytes: as created.
 * @live_pid:       a process that has the store open for writing now (its counters are
 *                  readable with kvblk_kvstore_peek_stats()), or 0.
 * @superblocks_ok: valid superblock copies (1 or 2).
 */
struct kvblk_kvstore_identity {
	size_t identity_size;
	uint32_t format_version;
	uint32_t drive_index;
	uint32_t drive_count;
	uint32_t nr_classes;
	uint8_t store_uuid[16];
	uint8_t drive_uuid[16];
	uint64_t drive_bytes;
	uint64_t created_ns;
	uint64_t journal_bytes;
	uint32_t max_key_bytes;
	uint32_t max_meta_bytes;
	uint64_t slot_bytes[KVBLK_KVSTORE_MAX_CLASSES];
	uint64_t slots[KVBLK_KVSTORE_MAX_CLASSES];
	int32_t live_pid;
	uint32_t superblocks_ok;
};

/**
 * kvblk_kvstore_identify() - read the superblocks of drive @path without opening the store
 * (no lock taken, nothing written; works while another process has it open).
 * Errors: -EINVAL NULL argument or identity_size too small; -EMEDIUMTYPE not a kvblk store;
 * -EUCLEAN both superblock copies damaged; -EPROTONOSUPPORT a newer format; the errors of
 * kvblk_open() for @path.
 */
int kvblk_kvstore_identify(const char *path, struct kvblk_kvstore_identity *id) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_peek_stats() - the live counters of the store drive @path belongs to, as the
 * process that has it open counts them (they live in /dev/shm/kvblk-kvstore-<UUID> while it is
 * open for writing): @stats, and for each of its drives up to @max_drives, @drives[i]
 * (set each info_size first; the fields a process outside the store cannot know, path,
 * objects and slots, are 0).
 * Return: the number of drives of the store. Errors: -EINVAL NULL @path or @stats, sizes too
 * small; -ESRCH no process has the store open for writing (or it died: its file is stale);
 * the errors of kvblk_kvstore_identify().
 */
int kvblk_kvstore_peek_stats(const char *path, struct kvblk_kvstore_stats *stats,
			     struct kvblk_kvstore_drive_info *drives, uint32_t max_drives) KVBLK_NOEXCEPT;

/* kvblk_kvstore_check() flags */
#define KVBLK_KVSTORE_CHECK_DATA	(1u << 0) /* also read every object and check its CRC32C */
#define KVBLK_KVSTORE_CHECK_REPAIR	(1u << 1) /* drop what fails (journaled deletes); not RDONLY */
#define KVBLK_KVSTORE_CHECK_FLAGS_ALL	(KVBLK_KVSTORE_CHECK_DATA | KVBLK_KVSTORE_CHECK_REPAIR)

/**
 * struct kvblk_kvstore_check_report - what kvblk_kvstore_check() found (an fsck).
 * @report_size:   sizeof(*report).
 * @objects:       objects checked; @bad_objects of them failed (CRC32C, a read error,
 *                 a slot out of its class, two keys on one slot, a length over its slot).
 * @bytes_checked: object bytes read (KVBLK_KVSTORE_CHECK_DATA).
 * @repaired:      bad objects dropped (KVBLK_KVSTORE_CHECK_REPAIR).
 * @superblocks_bad: superblock copies that failed their checks (a good copy served).
 * @checkpoints_bad: checkpoint areas whose header or payload failed (0 or 1 is normal
 *                 when the store was never closed: one area may be unwritten).
 * @journal_tail_discarded: journal commits at the end of a journal that were not
 *                 complete (a crash during a commit; their keys were never reported).
 * @first_problem: the first problem found, "" if none.
 */
struct kvblk_kvstore_check_report {
	size_t report_size;
	uint64_t objects;
	uint64_t bad_objects;
	uint64_t bytes_checked;
	uint64_t repaired;
	uint32_t superblocks_bad;
	uint32_t checkpoints_bad;
	uint64_t journal_tail_discarded;
	char first_problem[256];
};

/**
 * kvblk_kvstore_check() - check an open store: every index entry against its class and
 * the other entries, and with KVBLK_KVSTORE_CHECK_DATA every object's bytes against its
 * CRC32C (read through libkvblk into host memory, all drives at once). Runs while other
 * threads use the store (objects put meanwhile may not be checked). With
 * KVBLK_KVSTORE_CHECK_REPAIR the bad objects are deleted (journaled), so later gets miss.
 * Return: the number of bad objects (0: clean). Errors: -EINVAL NULL argument or unknown
 * flag; -EROFS REPAIR on a read-only store; -ENOMEM; -EBADFD.
 */
int kvblk_kvstore_check(kvblk_kvstore *store, uint32_t flags,
			struct kvblk_kvstore_check_report *report) KVBLK_NOEXCEPT;

/**
 * kvblk_kvstore_crc32c() - the CRC32C (Castagnoli, as iSCSI and ext4: reflected, initial
 * and final value 0xFFFFFFFF; "123456789" gives 0xE3069283) of @len bytes, continuing
 * @crc (0 to start). The store's object checksum, computed with the CPU's crc32c
 * instructions (ISA-L). Return: the CRC.
 */
uint32_t kvblk_kvstore_crc32c(uint32_t crc, const void *buf, size_t len) KVBLK_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* KVBLK_KVSTORE_H */

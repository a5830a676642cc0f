// SPDX-License-Identifier: MIT
// struct kvblk_kvstore and what its files share. The store is a layer over libkvblk's public
// C API (kvblk.h): this folder includes no header of libkvblk's internals, and every byte it
// moves, objects and metadata alike, goes through the store's kvblk_dev.
//
// Threads and locks:
//  - index_mu guards the index (keys, LRU lists, slot allocators, drive object counts) and
//    the Obj fields other than the immutable placement. Never held across I/O.
//  - The writer thread (writer.cpp) runs puts, deletes, drops and checkpoints one after
//    another; it alone writes journals and checkpoints, so a drive's journal state
//    (Drive::jnl) is its own after the open.
//  - The reaper thread (reaper.cpp) takes every completion of the store's asynchronous
//    libkvblk batches (gets, and the data writes of puts) and drives them on. Synchronous
//    libkvblk calls (metadata I/O) never reach it: libkvblk claims them for their caller.
#pragma once

#include "cq.hpp"
#include "format.hpp"

#include <kvblk/kvblk.h>
#include <kvblk/kvstore.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kvblk::kvstore {

/* Set this thread's kvblk_kvstore_last_error() (printf format); the err form returns @err. */
void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
std::string errno_name(int err);

/*
 * struct Obj - one object of the index.
 * @key, @meta:   its key and metadata.
 * @drive, @cls, @slot: where it lives (immutable).
 * @length, @crc, @gen: as its PUT record says.
 * @readers:      gets in flight reading its slot: while > 0 the slot is not reused.
 * @in_index:     the key maps to it (else it was retired: deleted, replaced, evicted, dropped).
 * @removal_durable: retired and the record that removed it is durable: its slot is free once
 *                no reader is left.
 * @lru_prev/next: its class's LRU list (most recent at the head), while in_index.
 */
struct Obj {
	std::string key;
	std::string meta;
	uint32_t drive = 0;
	uint8_t cls = 0;
	uint64_t slot = 0;
	uint64_t length = 0;
	uint32_t crc = 0;
	uint64_t gen = 0;
	uint32_t readers = 0;
	bool in_index = false;
	bool removal_durable = false;
	Obj *lru_prev = nullptr;
	Obj *lru_next = nullptr;
};

/* struct SlotAlloc - the slots of one class on one drive. */
struct SlotAlloc {
	uint64_t nr_slots = 0;
	uint64_t hwm = 0;		  /* slots [0, hwm) were written at some time */
	std::vector<uint64_t> free;	  /* freed slots below hwm, most recently freed last */
	uint64_t objects = 0;		  /* objects of the index here */
	[[nodiscard]] uint64_t free_count() const noexcept { return free.size() + (nr_slots - hwm); }
};

/* struct JournalState - a drive's journal and checkpoints (the writer thread's after open). */
struct JournalState {
	uint64_t next_seq = 1;
	uint64_t tail = 0;		  /* logical position of the next commit */
	uint64_t ckpt_seq[2] = {0, 0};	  /* per checkpoint area: the seq it covers (valid ones) */
	uint64_t ckpt_pos[2] = {0, 0};	  /* per area: its journal position */
	bool ckpt_valid[2] = {false, false};
	int newest = 0;			  /* the area with the newest valid checkpoint */
	[[nodiscard]] uint64_t live_start() const noexcept
	{
		const int older = 1 - newest;
		return ckpt_valid[older] ? ckpt_pos[older] : ckpt_pos[newest];
	}
};

/* struct Drive - one drive of the store. */
struct Drive {
	uint32_t index = 0;
	uint32_t target = UINT32_MAX;  /* its kvblk_dev target; UINT32_MAX: missing */
	std::string path;
	int lock_fd = -1;
	Superblock sb;
	uint32_t lba = 512;
	uint32_t mem_align = 512;
	std::atomic<uint32_t> state{KVBLK_KVSTORE_DRIVE_OK};
	std::string why_failed;	       /* under Store::index_mu */
	std::vector<SlotAlloc> alloc;  /* per class; under index_mu */
	uint64_t objects = 0;	       /* under index_mu */
	JournalState jnl;
	struct DriveCounters *dc = nullptr; /* its counters, in Store::shared */
	[[nodiscard]] bool ok() const noexcept { return state.load() == KVBLK_KVSTORE_DRIVE_OK; }
};

/* The byte offset of slot @slot of class @cls on drive @d. */
inline uint64_t slot_offset(const Drive &d, uint8_t cls, uint64_t slot) noexcept
{
	return d.sb.classes[cls].offset + slot * d.sb.classes[cls].slot_bytes;
}

/* Counters (relaxed atomics), in the order of struct kvblk_kvstore_stats. */
struct Counters {
	std::atomic<uint64_t> gets{0}, puts{0}, exists{0}, deletes{0}, hits{0}, misses{0},
		checksum_failures{0}, get_errors{0}, put_errors{0}, evictions{0}, evictions_dropped{0},
		bytes_read{0}, bytes_written{0}, journal_commits{0}, checkpoints{0}, flushes{0};
	void reset() noexcept;
};

/* One drive's counters (and its state, mirrored for readers in other processes). */
struct DriveCounters {
	std::atomic<uint64_t> bytes_read{0}, bytes_written{0}, read_errors{0}, write_errors{0};
	std::atomic<uint32_t> state{0};
	uint32_t reserved = 0;
};

/*
 * struct SharedStats - the counters of an open store, in a file of /dev/shm named after the
 * store's UUID (shared_stats_path()), so that `kvblkctl store stats` reads them live from
 * another process; a heap copy when /dev/shm cannot hold it. Layout version kSharedStatsVersion.
 */
inline constexpr uint32_t kSharedStatsVersion = 1;
struct SharedStats {
	char magic[8];	/* "KVBLKSTA" */
	uint32_t version;
	int32_t pid;	/* the process that has the store open */
	uint8_t uuid[16];
	uint32_t drives;
	uint32_t reserved;
	Counters ctr;
	DriveCounters drive[KVBLK_KVSTORE_MAX_DRIVES];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

struct Store;

/*
 * struct IoOp - an asynchronous libkvblk batch of the store; the reaper calls on_object() for
 * each of its per-object entries and on_batch() for its batch entry (then never again).
 */
struct IoOp {
	virtual ~IoOp() = default;
	virtual void on_object(const kvblk_cqe &cqe) = 0;
	virtual void on_batch(const kvblk_cqe &cqe) = 0;
};

/* struct OpCopy - one op of a batch as the store keeps it (key and metadata copied). */
struct OpCopy {
	std::string key;
	std::string meta;    /* put: the metadata to store */
	uint32_t buf_id = KVBLK_BUF_NONE;
	uint64_t addr = 0;
	uint64_t length = 0;
	uint8_t *host = nullptr;  /* put: the source's host address; get: the destination's (host memory) */
	bool is_host = true;	  /* get: the destination is host memory (the CPU checks its CRC32C) */
	void *meta_out = nullptr; /* get, exists: where metadata goes */
	uint32_t meta_cap = 0;
	uint64_t tag = 0;
};

/* struct Batch - a submitted store batch until its completion is posted. */
struct Batch {
	uint32_t kind = 0;
	uint32_t flags = 0;
	uint64_t ticket = 0;
	uint64_t user_data = 0;
	uint64_t t_submit = 0;
	std::vector<OpCopy> ops;
	kvblk_kvstore_result *results = nullptr;
	std::vector<kvblk_kvstore_result> own_results;
};

/* An evicted key, until kvblk_kvstore_evicted() takes it. */
struct Evicted {
	std::string key;
	uint32_t drive = 0;
	uint64_t length = 0;
	uint64_t gen = 0;
};
inline constexpr size_t kMaxEvictedKept = 1u << 20;

struct Store {
	pid_t owner = 0;
	kvblk_dev *dev = nullptr;
	uint32_t flags = 0;	 /* KVBLK_KVSTORE_OPEN_* */
	uint32_t when_full = KVBLK_KVSTORE_EVICT_LRU;
	uint64_t drive_budget = 1ull << 30;
	uint32_t max_descs = 65536;
	Superblock geo;		 /* drive 0's superblock minus the per-drive fields: the store's shape */
	std::vector<std::unique_ptr<Drive>> drives; /* by drive index */

	/* The index. */
	std::mutex index_mu;
	std::unordered_map<std::string_view, Obj *> index;
	std::vector<Obj *> lru_head, lru_tail; /* per class */
	std::vector<Obj *> drops;	 /* retired objects whose DEL the writer must commit */
	std::deque<Evicted> evicted;	 /* for kvblk_kvstore_evicted(), oldest first */
	uint64_t next_gen = 1;
	/*
	 * Deletions made while a drive is missing (tombstones): key -> (gen, drive that keeps the
	 * record). Written into that drive's checkpoints; dropped once every drive is present at
	 * an open (the merge applies them). degraded_open: a drive was missing at the open.
	 */
	std::unordered_map<std::string, std::pair<uint64_t, uint32_t>> tombs;
	bool degraded_open = false;
	bool open_rewrite = false; /* the open's merge changed what the drives say: checkpoint them */
	bool no_final_checkpoint = false; /* a failed RECOVER: leave the journal to the next open */
	uint64_t objects = 0, bytes_stored = 0;
	std::atomic<uint64_t> list_epoch{0};

	CompletionQueue cq;
	SharedStats *shared = nullptr; /* mapped (shared_fd >= 0) or allocated */
	bool shared_mapped = false;
	std::string shared_path;
	Counters *ctr = nullptr;	 /* &shared->ctr */
	std::vector<struct ReplayReport> replay; /* what the open found, per drive (check reports it) */

	/* The writer thread. */
	std::thread writer;
	std::mutex writer_mu;
	std::condition_variable writer_cv;
	std::deque<std::unique_ptr<Batch>> writer_q;
	bool writer_stop = false;
	bool writer_busy = false;
	uint64_t probe_mask = 0; /* drives whose reads failed: the writer checks they still answer */

	/* The reaper thread. */
	std::thread reaper;
	int wake_fd = -1;
	std::atomic<bool> reaper_stop{false};
	std::mutex io_mu;
	std::condition_variable io_cv;
	uint64_t ios_in_flight = 0; /* IoOps submitted and not yet ended */

	~Store();
};

/* Make the store's counters (shared file or heap); never fails for want of /dev/shm. */
void stats_attach(Store &s);
void stats_detach(Store &s) noexcept;

/* now in CLOCK_MONOTONIC ns. */
uint64_t now_ns() noexcept;

/* --- metadata I/O through the store's kvblk_dev (meta_io.cpp); 0 or -errno with the message set. */
int read_meta(Store &s, const Drive &d, uint64_t offset, void *buf, uint64_t len);
int write_meta(Store &s, const Drive &d, uint64_t offset, const void *buf, uint64_t len);
int flush_drive(Store &s, Drive &d);
/* An aligned, zeroed buffer of @len bytes for metadata I/O. */
struct AlignedBuf {
	uint8_t *p = nullptr;
	size_t len = 0;
	AlignedBuf() = default;
	explicit AlignedBuf(size_t n);
	~AlignedBuf();
	AlignedBuf(const AlignedBuf &) = delete;
	AlignedBuf &operator=(const AlignedBuf &) = delete;
	AlignedBuf(AlignedBuf &&o) noexcept : p(o.p), len(o.len) { o.p = nullptr; o.len = 0; }
	AlignedBuf &operator=(AlignedBuf &&o) noexcept;
};

/* --- the journal and checkpoints (journal.cpp) */
/*
 * Commit @recs to drive @d's journal as one group (each commit written and flushed); 0 or
 * -errno. The group's records must take at most group_limit() bytes (-E2BIG otherwise):
 * callers cut larger sets and publish after each group. Writer thread (or open, alone).
 */
int commit_records(Store &s, Drive &d, const std::vector<Record> &recs);
uint64_t group_limit(const Drive &d) noexcept;
/* Write a checkpoint of drive @d's objects (writer thread, or open/close alone). */
int write_checkpoint(Store &s, Drive &d);
/* Whether drive @d's journal calls for a checkpoint now. */
bool checkpoint_due(const Drive &d) noexcept;

/* What the replay of one drive found (open.cpp and check). */
struct ReplayReport {
	uint32_t superblocks_bad = 0;
	uint32_t checkpoints_bad = 0;
	uint64_t tail_discarded = 0;
	uint64_t commits = 0;
	bool damaged = false;	    /* the journal is damaged before its end */
	std::string damage;
	uint64_t max_seq_seen = 0;  /* the highest seq of any valid header in the ring */
};
/*
 * Read drive @d's checkpoint and journal and give every record, in order, to @apply (which may
 * move its strings)
 * (checkpoint records first, then the journal's); set d.jnl and the class high-water marks.
 * 0; -EUCLEAN (damaged: *rep says where; with @recover the records before the damage are
 * given and 0 returned); other -errno.
 */
int replay_drive(Store &s, Drive &d, bool recover, ReplayReport *rep,
		 const std::function<void(Record &, uint64_t seq)> &apply);

/* --- the index (index.cpp); all with index_mu held */
void lru_unlink(Store &s, Obj *o) noexcept;
void lru_push_front(Store &s, Obj *o) noexcept;
/* Take @o out of the index (it stays allocated while readers or its removal is not durable). */
void retire_locked(Store &s, Obj *o) noexcept;
/* The removal of retired @o is durable: free its slot once no reader is left. */
void removal_durable_locked(Store &s, Obj *o) noexcept;
/* A reader of @o is done. */
void put_reader_locked(Store &s, Obj *o) noexcept;
/* Publish @o (new) for its key. */
void publish_locked(Store &s, Obj *o) noexcept;
/* The rest of publish_locked() for @o already in the map (the open's replay). */
void adopt_locked(Store &s, Obj *o) noexcept;
void free_slot_locked(Store &s, uint32_t drive, uint8_t cls, uint64_t slot) noexcept;
/* The class for an object of @length bytes, or -1 when it is larger than every class. */
int class_for(const Store &s, uint64_t length) noexcept;
/*
 * A slot for a put of @key into class @cls: 0 with *drive, *slot; evicted objects (their
 * removal not yet durable) are appended to @victims. -ENOSPC / -ENODEV with nothing taken.
 */
int alloc_slot_locked(Store &s, std::string_view key, uint8_t cls, uint32_t *drive, uint64_t *slot,
		      std::vector<Obj *> *victims);
/* Mark drive @d failed with @why (first reason kept). */
void fail_drive(Store &s, Drive &d, const std::string &why);

/* --- the threads */
int start_writer(Store &s);
void stop_writer(Store &s);
int start_reaper(Store &s);
void stop_reaper(Store &s);
/* Commit the pending drops now (open, before the writer starts). */
void run_drops(Store &s);
/* Queue a put or delete batch for the writer. */
void writer_enqueue(Store &s, std::unique_ptr<Batch> b);
void writer_kick(Store &s);
/*
 * Submit an asynchronous libkvblk batch whose completions go to @op (reaper.cpp). On a refusal
 * *bad_index (when not NULL) names the descriptor libkvblk refused, or -1.
 */
int submit_io(Store &s, IoOp *op, const kvblk_desc *descs, uint32_t n, uint32_t flags, kvblk_result *results,
	      int32_t *bad_index = nullptr);
/* The reaper's op ended (from on_batch(), last thing it does with the store). */
void io_ended(Store &s) noexcept;

/* Post batch @b's completion (results filled) and free it. */
void finish_batch(Store &s, std::unique_ptr<Batch> b, uint32_t path, uint32_t backend, uint64_t bytes);

/* --- gets (get.cpp) */
int start_get(Store &s, std::unique_ptr<Batch> b);

/* Whether buffer @id (or a plain pointer) is host memory: *host_addr its address. */
int resolve_host(Store &s, uint32_t buf_id, uint64_t addr, uint64_t len, bool *host, uint8_t **host_addr,
		 uint32_t *path);

} // namespace kvblk::kvstore

/* The C handle is the Store. */
struct kvblk_kvstore : kvblk::kvstore::Store {};

// SPDX-License-Identifier: MIT
// The internal backend interface: everything a backend (psync, threadpool, uring today;
// kmod and uring_cmd later) needs to know about libkvblk, and nothing more.
//
// A backend receives batches that batch.cpp has already validated and normalised: every
// object is in range, block aligned (unaligned loads and stores arrive as their aligned parts;
// the one exception is IoObject.positional, a file's cut-short last block written back), its
// memory is resolved to a host pointer, and its registered buffer and target are pinned
// against unregistration and removal until the batch's completion is taken. The
// backend moves the bytes, fills one result per object and counts what it did.
//
// To add a backend: derive from Backend, implement kind() and run() (and the buffer hooks if
// the backend maps registered memory itself), add a factory below and a case in
// create_backend() (open.cpp). Such a backend is served asynchronously by the device's
// dispatch thread (async.hpp), one batch after another. A backend that can keep several
// batches in flight itself reports KVBLK_ASYNC_NATIVE and implements start() and cancel().
#pragma once

#include <kvblk/kvblk.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

namespace kvblk::detail {

/* Registered buffers per device; a buffer id is a slot index below this. */
inline constexpr uint32_t kMaxBuffers = 1024;

/* Largest single command: pread(2)/pwrite(2) transfer at most 2 GiB - 4 KiB at a time. */
inline constexpr uint64_t kMaxCmdBytesLimit = 1ull << 30;

enum class IoDir : uint8_t { read, write };

/**
 * struct IoObject - one validated object of a batch.
 * @offset:      device or file byte offset (multiple of the logical block size).
 * @length:      bytes (> 0, multiple of the logical block size, offset + length <= capacity;
 *               not a multiple only when @positional).
 * @mem:         host address of the destination (source for stores), aligned to mem_align.
 * @buf_id:      registered buffer id, or KVBLK_BUF_NONE for a plain pointer.
 * @buf_offset:  byte offset of @mem inside buffer @buf_id (0 for plain pointers).
 * @fixed_index: index in the backend's fixed-buffer table (what register_buffer() returned
 *               for @buf_id), or -1: no fixed buffer, use plain I/O on @mem.
 * @path:        enum kvblk_path of the destination: HOST; P2P (device memory the backend
 *               registered with register_device_buffer(): @mem is a device address, never
 *               touched by the CPU); STAGED (device memory served by the Stager: backends
 *               never see such objects).
 * @fd:          the object's target, opened by the library (O_DIRECT unless buffered): host
 *               backends read and write this fd, so one batch spans any number of targets.
 * @target:      the target id (kvblk_desc.target); backends that keep per-target state
 *               (uring_cmd's namespace id, kmod's kvblk.ko target index, the kmod lanes)
 *               look it up by this.
 * @min_length:  0: all @length bytes must move. Otherwise a read may end early at the end of
 *               the file once @min_length bytes are in: a read that comes back short (0
 *               bytes included) with the object's bytes in reaching object offset
 *               >= @min_length completes the object successfully, without resubmitting the
 *               rest. Set for the covering block of a file's unaligned last bytes
 *               (unaligned.cpp), whose end lies past the end of the file.
 * @max_cmd:     largest command for its target (TargetEntry.max_cmd_bytes: a target added to a
 *               uring device is cut at its own block layer's unsplit limit), or 0: the
 *               backend's max_cmd_bytes. The uring backends cut it at the smaller of the two.
 * @positional:  move it with pread(2)/pwrite(2)-like I/O on @fd as it is (io_uring read and
 *               write, pwrite): @fd is not the target's O_DIRECT descriptor and @length need
 *               not be a multiple of the block size. Set for the write-back of a file's last
 *               block cut short by its end (an unaligned store, unaligned.cpp): @fd is the
 *               target's buffered descriptor (open_tail_writer()). Backends that address the
 *               target by @target instead of @fd (kmod) must use @fd for it.
 */
struct IoObject {
	uint64_t offset;
	uint64_t length;
	uint8_t *mem;
	uint32_t buf_id;
	int32_t fixed_index;
	uint64_t buf_offset;
	uint32_t path = KVBLK_PATH_HOST;
	int fd = -1;
	uint32_t target = 0;
	uint64_t min_length = 0;
	uint64_t max_cmd = 0;
	bool positional = false;
};

/* Whether a short read of object @o whose bytes in now reach object offset @at completes it. */
inline bool eof_is_complete(const IoObject &o, uint64_t at) noexcept
{
	return o.min_length != 0 && at >= o.min_length;
}

/**
 * struct BatchCounters - what a backend did for one batch (summed into kvblk_stats).
 * @commands:        read/write commands issued, every resubmission included.
 * @short_resubmits: resubmissions of the rest of a short transfer.
 * @eagain_retries:  resubmissions after -EAGAIN.
 * @cq_overflows:    completion-queue overflows observed.
 * @inflight_peak:   most commands in flight at once during the batch.
 * @cmd_lat_hist:    per-command latency, bucket lat_bucket(ns) (uring backends).
 * @staged_copies:   host-to-device copies queued by the staged path (staging.cpp).
 * @served_by:       bit (1 << enum kvblk_backend) of every backend that served part of the
 *                   batch, when more than one may have (the kmod lanes, lanes.cpp); 0: the
 *                   device's own backend served all of it.
 */
struct BatchCounters {
	uint64_t commands = 0;
	uint64_t short_resubmits = 0;
	uint64_t eagain_retries = 0;
	uint64_t cq_overflows = 0;
	uint64_t inflight_peak = 0;
	std::array<uint64_t, KVBLK_LAT_BUCKETS> cmd_lat_hist{};
	uint64_t staged_copies = 0;
	uint32_t served_by = 0;

	/* Sum @o into this (peaks: the larger one). */
	void merge(const BatchCounters &o) noexcept
	{
		commands += o.commands;
		short_resubmits += o.short_resubmits;
		eagain_retries += o.eagain_retries;
		cq_overflows += o.cq_overflows;
		if (o.inflight_peak > inflight_peak)
			inflight_peak = o.inflight_peak;
		for (size_t i = 0; i < cmd_lat_hist.size(); i++)
			cmd_lat_hist[i] += o.cmd_lat_hist[i];
		staged_copies += o.staged_copies;
		served_by |= o.served_by;
	}
};

/*
 * class BatchSink - who is told about a batch's progress (the scheduler's job, async.hpp).
 * Every method may be called from any I/O thread, concurrently for different objects.
 */
class BatchSink {
public:
	/* Result @i is written (status and bytes); at most once per object. */
	virtual void object_done(uint32_t i) noexcept = 0;
	/* kvblk_cancel() asked the batch to end: objects not yet issued end with -ECANCELED. */
	[[nodiscard]] virtual bool cancelled() const noexcept = 0;
	/*
	 * start() only: every result is written and the counters are final; @err as run()
	 * returns it. The backend does not touch the batch afterwards.
	 */
	virtual void batch_done(int err) noexcept = 0;

protected:
	~BatchSink() = default;
};

/**
 * struct Batch - one batch (kvblk_submit(), kvblk_load_many(), ...) as a backend sees it.
 * @dir:      read (load) or write (store).
 * @objects:  @count validated objects.
 * @results:  @count results. On entry: tag set, status 0, bytes 0. The backend writes
 *            status (0 or -errno) and bytes (length on success, else 0) of every object
 *            exactly once.
 * @counters: zero on entry; the backend fills it.
 * @sink:     nullptr, or told of every object as its result is written (backends that
 *            cannot say it per object leave that to the caller) and asked for cancellation.
 * @id:       the batch's ticket (what cancel() names); 0 for batches nobody can cancel.
 * @priority: KVBLK_SUBMIT_PRIORITY: its commands go ahead of those of other batches.
 * @object_notice: the sink posts an entry per object (KVBLK_SUBMIT_PER_OBJECT) as soon as
 *            object_done() comes: a backend that learns results early only at a cost (kmod's
 *            per-object CQEs) pays it only then. Others call object_done() either way.
 */
struct Batch {
	IoDir dir;
	const IoObject *objects;
	uint32_t count;
	kvblk_result *results;
	BatchCounters counters;
	BatchSink *sink = nullptr;
	uint64_t id = 0;
	bool priority = false;
	bool object_notice = false;

	/* Result @i is written: tell the sink. */
	void object_done(uint32_t i) noexcept
	{
		if (sink)
			sink->object_done(i);
	}
	/* Whether objects not yet issued should end with -ECANCELED. */
	[[nodiscard]] bool cancelled() const noexcept { return sink && sink->cancelled(); }
};

/*
 * struct MemlockText - RLIMIT_MEMLOCK in words ("unlimited", "N bytes (K KiB)", "unknown"),
 * in a buffer of its own: the registration paths that name the limit allocate nothing.
 */
struct MemlockText {
	char s[64];
	MemlockText() noexcept;
};

/**
 * struct BufferRegistration - what a backend made of kvblk_register_buffer().
 * @fixed_index: index to put in IoObject.fixed_index, or -1 (plain I/O into the buffer).
 * @fell_back:   the backend wanted a fixed mapping and the kernel refused it; counted in
 *               stats.memlock_fallbacks and @note says why (named limit and value).
 * @note:        message for kvblk_last_error() when @fell_back or @error ("" if none); a
 *               fixed array, so that register_buffer() (noexcept) allocates nothing.
 * @error:       0, or -errno: the range itself is unusable (-EFAULT: not mapped, or not
 *               writable, when the kernel pinned it); registration fails with it and
 *               nothing of it stays registered.
 */
struct BufferRegistration {
	int32_t fixed_index = -1;
	bool fell_back = false;
	char note[400] = "";
	int error = 0;

	/* Set @note to @s (cut to fit). */
	void set_note(const char *s) noexcept { std::snprintf(note, sizeof(note), "%s", s); }
	/* Append "; " and @s to a non-empty @note, or set it (cut to fit). */
	void append_note(const char *s) noexcept
	{
		const size_t l = std::strlen(note);
		std::snprintf(note + l, sizeof(note) - l, "%s%s", l ? "; " : "", s);
	}
};

/**
 * struct BackendConfig - the opened target and the effective options.
 * @fd:                 the target, opened O_DIRECT unless @buffered, O_RDWR if @writable.
 *                      Host backends read IoObject.fd instead (several targets per device);
 *                      kmod and uring_cmd use it to attach to their namespace.
 * @path:               as given to kvblk_open().
 * @blockdev:           @fd is a block device.
 * @buffered:           opened without O_DIRECT.
 * @writable:           opened for writing.
 * @logical_block_size: offset/length granularity (objects are already checked against it).
 * @mem_align:          memory alignment (objects are already checked against it).
 * @capacity:           bytes.
 * @max_cmd_bytes:      largest command, a multiple of @logical_block_size, <= 1 GiB.
 * @queue_depth:        commands in flight per ring.
 * @workers:            rings or threads.
 * @eagain_retries:     resubmissions of a command after -EAGAIN before its object fails.
 * @note:               out (kmod, uring_cmd factories): a few words open.cpp appends to
 *                      kvblk_dev_info.backend_reason (the device node a path was mapped to).
 */
struct BackendConfig {
	int fd = -1;
	std::string path;
	bool blockdev = false;
	bool buffered = false;
	bool writable = false;
	uint32_t logical_block_size = 0;
	uint32_t mem_align = 0;
	uint64_t capacity = 0;
	uint64_t max_cmd_bytes = 0;
	uint32_t queue_depth = 0;
	uint32_t workers = 0;
	uint32_t eagain_retries = 0;
	std::string note;
};

/*
 * Describe the opened target @t in @cfg (fd, path, kind, geometry); the options in @cfg stay.
 * Templated on the target type so that this header need not include target.hpp.
 */
template <class OpenedTarget>
inline void describe_target(BackendConfig &cfg, const OpenedTarget &t)
{
	cfg.fd = t.fd;
	cfg.path = t.path;
	cfg.blockdev = t.blockdev;
	cfg.buffered = t.buffered;
	cfg.writable = t.writable;
	cfg.logical_block_size = t.logical_block_size;
	cfg.mem_align = t.mem_align;
	cfg.capacity = t.capacity;
}

/**
 * class Backend - serves the batches of one device.
 *
 * Calls of run() are serialised by the caller (the device's dispatch thread runs one batch
 * at a time). A KVBLK_ASYNC_NATIVE backend also takes start() from any thread, concurrently
 * with run() and with other start() calls: it keeps the commands of every started batch in
 * flight together. register_buffer()/unregister_buffer() may run on other threads
 * concurrently with both; a buffer is never unregistered while a batch that uses it is
 * outstanding.
 */
class Backend {
public:
	virtual ~Backend() = default;

	/* enum kvblk_backend this object implements (never AUTO). */
	[[nodiscard]] virtual kvblk_backend kind() const noexcept = 0;

	/*
	 * enum kvblk_backend that serves batches of direction @dir: kind(), unless the backend
	 * hands that direction to another one (kmod serves stores through uring with a kvblk.ko
	 * without KVBLK_FEAT_STORE). Reported in
	 * kvblk_batch_info.backend and counted in stats.batches_by_backend.
	 */
	[[nodiscard]] virtual kvblk_backend kind_for(IoDir dir) const noexcept
	{
		(void)dir;
		return kind();
	}

	/* enum kvblk_path the data takes. */
	[[nodiscard]] virtual kvblk_path path() const noexcept { return KVBLK_PATH_HOST; }

	/*
	 * Move every object of @batch; synchronous. Return 0 once every result is written
	 * (per-object failures are results, not a return value). Return -errno only when
	 * nothing was submitted (for example -ENOMEM while setting up); the caller then
	 * marks every object -ECANCELED.
	 */
	virtual int run(Batch &batch) noexcept = 0;

	/*
	 * How batches progress after kvblk_submit(): KVBLK_ASYNC_THREAD (the default) means the
	 * device's dispatch thread calls run() for one batch after another; KVBLK_ASYNC_NATIVE
	 * means start() and cancel() below are used instead.
	 */
	[[nodiscard]] virtual kvblk_async async_mode() const noexcept { return KVBLK_ASYNC_THREAD; }

	/*
	 * KVBLK_ASYNC_NATIVE: whether start() takes @batch (its objects, results and sink set).
	 * False sends it to run() on the device's dispatch thread instead, which the scheduler
	 * creates when the first such batch comes (kmod: loads into plain pointers).
	 */
	[[nodiscard]] virtual bool can_start(const Batch &batch) const noexcept
	{
		(void)batch;
		return true;
	}

	/*
	 * KVBLK_ASYNC_NATIVE: whether start() may be called from inside BatchSink::batch_done()
	 * of another batch, on the thread that completes it (the scheduler starts the write
	 * phase of an unaligned store's read-modify-write that way). False sends such stores to
	 * run() on the device's dispatch thread, both phases in turn.
	 */
	[[nodiscard]] virtual bool starts_from_batch_done() const noexcept { return false; }

	/*
	 * KVBLK_ASYNC_NATIVE: whether a synchronous call (kvblk_load_many()) that finds the
	 * dispatch path idle is better served by run() on the caller's thread than by start()
	 * and a wait (kmod: one ioctl instead of a round trip through the ring's thread).
	 */
	[[nodiscard]] virtual bool run_sync_inline() const noexcept { return false; }

	/*
	 * KVBLK_ASYNC_NATIVE: take @batch (@batch.sink set) and return at once; the backend calls
	 * batch.sink->batch_done() exactly once, from any thread, when every result is written.
	 * @batch stays valid until then. The default serves it synchronously.
	 */
	virtual void start(Batch &batch) noexcept { batch.sink->batch_done(run(batch)); }

	/*
	 * KVBLK_ASYNC_NATIVE: end the objects of the started batch @id none of whose commands
	 * were issued with -ECANCELED (their object_done() and possibly batch_done() are called,
	 * possibly on this thread). Unknown or fully issued batches: nothing happens.
	 */
	virtual void cancel(uint64_t id) noexcept { (void)id; }

	/*
	 * A buffer was registered as id @id (< kMaxBuffers, unique among live buffers).
	 * Map it if the backend can (io_uring fixed buffer, kernel DMA mapping). Never fails:
	 * a backend that cannot map it returns fixed_index -1 and plain I/O is used.
	 */
	virtual BufferRegistration register_buffer(uint32_t id, uint8_t *base, uint64_t len) noexcept
	{
		(void)id;
		(void)base;
		(void)len;
		return {};
	}

	/*
	 * Register device memory for DMA straight into it (KVBLK_PATH_P2P) as buffer id @id:
	 * @kind KVBLK_MEM_CUDA (@addr a CUDA device address), KVBLK_MEM_DMABUF (@dmabuf_fd,
	 * @addr a byte offset into it) or KVBLK_MEM_P2PDMA (@addr a user mapping of P2PDMA
	 * pages; kmod only, the userspace backends read into it with O_DIRECT), @len bytes. 0 on success (undone by
	 * unregister_buffer(@id, -1)); -EOPNOTSUPP with kvblk_last_error() set when this backend
	 * or its kernel side cannot (the caller then stages CUDA memory, and refuses a dma-buf);
	 * any other -errno is a refusal of this range, also with the message set.
	 */
	virtual int register_device_buffer(uint32_t id, int kind, int dmabuf_fd, uint64_t addr,
					   uint64_t len) noexcept
	{
		(void)id;
		(void)dmabuf_fd;
		(void)addr;
		(void)len;
		return fail_device_kind(kind);
	}

	/*
	 * kvblk_check_buffer() of host buffer @id, as far as this backend's kernel side can
	 * compare its own pins: 0 intact (or nothing pinned there), -ESTALE the pinned pages are
	 * no longer what the range maps (kvblk_last_error() set), -EOPNOTSUPP the kernel side
	 * cannot tell, other -errno with the message set. Backends without kernel pins: 0.
	 */
	virtual int check_buffer(uint32_t id) noexcept
	{
		(void)id;
		return 0;
	}

	/* Undo register_buffer(); @fixed_index is what it returned. */
	virtual void unregister_buffer(uint32_t id, int32_t fixed_index) noexcept
	{
		(void)id;
		(void)fixed_index;
	}

	/*
	 * Target @id (>= 1) was added: @t describes it (t.fd opened by the library, which also
	 * closes it after remove_target()). Return 0 to serve its objects (they carry t.fd in
	 * IoObject.fd), or -errno with kvblk_last_error() set to refuse it. Host backends take any
	 * target; uring_cmd takes NVMe generic char devices; kmod attaches it to its own kvblk.ko
	 * context (KVBLK_FEAT_TARGETS) or refuses it; the kmod lanes place it (lane 0's kmod
	 * backend first). The backend may set @t's max_cmd_bytes, queue_depth and workers to what
	 * it uses for the target, raise its mem_align (kvblk.ko's buffer alignment), and set
	 * t.note to a few words on how it serves it. Called with
	 * no batch naming @id running; may run concurrently with batches on other targets.
	 */
	virtual int add_target(uint32_t id, BackendConfig &t) noexcept
	{
		(void)id;
		(void)t;
		return 0;
	}

	/* Forget target @id (no batch names it any more). */
	virtual void remove_target(uint32_t id) noexcept { (void)id; }

	/*
	 * enum kvblk_backend that serves target @id's objects in direction @dir, and why (for
	 * kvblk_get_target_info()); *reason is left alone when the device's own reason holds.
	 */
	[[nodiscard]] virtual kvblk_backend target_kind(uint32_t id, IoDir dir, std::string *reason) const noexcept
	{
		(void)id;
		(void)reason;
		return kind_for(dir);
	}

protected:
	int fail_device_kind(int kind) const noexcept;
};

/* -EOPNOTSUPP with the reason that backend @b cannot DMA into memory of @kind (core.cpp). */
int fail_device_kind_of(kvblk_backend b, int kind) noexcept;

inline int Backend::fail_device_kind(int kind) const noexcept
{
	return fail_device_kind_of(kind_for(IoDir::read), kind);
}

/*
 * Factories. On failure they return nullptr with *err = -errno and kvblk_last_error() set.
 */
std::unique_ptr<Backend> make_psync_backend(const BackendConfig &cfg, int *err);
std::unique_ptr<Backend> make_threadpool_backend(const BackendConfig &cfg, int *err);
std::unique_ptr<Backend> make_uring_backend(const BackendConfig &cfg, int *err);
/*
 * These two may lower cfg.max_cmd_bytes and change cfg.queue_depth to what the kernel side
 * allows (kvblk.ko's attach, the NVMe queue limits of a passthrough command); open.cpp
 * reports the values they leave in kvblk_dev_info.
 */
std::unique_ptr<Backend> make_kmod_backend(BackendConfig &cfg, int *err);
std::unique_ptr<Backend> make_uring_cmd_backend(BackendConfig &cfg, int *err);

/* CLOCK_MONOTONIC in ns. */
inline uint64_t now_ns() noexcept
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/* Histogram bucket of a latency: [2^i, 2^(i+1)) us; < 2 us in bucket 0; the last takes the rest. */
inline unsigned lat_bucket(uint64_t ns) noexcept
{
	uint64_t us = ns / 1000;
	if (us < 2)
		return 0;
	unsigned b = 63u - unsigned(__builtin_clzll(us));
	return b < KVBLK_LAT_BUCKETS ? b : KVBLK_LAT_BUCKETS - 1;
}

} // namespace kvblk::detail

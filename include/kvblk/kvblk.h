/* SPDX-License-Identifier: MIT */
/*
 * libkvblk: load many KV-cache objects from NVMe (or any block device or
 * regular file) into memory with many commands in flight.
 *
 * Conventions (as liburing and SPDK):
 *  - Every function returns 0 or a count on success and a negative errno on
 *    failure. errno is never read by the caller's contract and never relied on.
 *  - Per-object outcomes are in struct kvblk_result.status as 0 or -errno.
 *  - A human-readable reason for the last failing call on this thread is in
 *    kvblk_last_error(): "descriptor 17: offset 4097 is not a multiple of the
 *    logical block size 4096".
 *  - Option and output structs start with a size_t *_size field, set by
 *    the *_init() function, so the library can grow them without breaking
 *    binaries built against an older header.
 *  - Units: bytes unless a name says otherwise; times in ns.
 *
 * Thread safety (since 0.3): one kvblk_dev may be used from several threads
 * at once. Any number of threads may call kvblk_submit(), kvblk_load_many()
 * and kvblk_store_many() while others call kvblk_reap(), kvblk_wait() and
 * kvblk_cancel(); every completion is delivered exactly once (to the one
 * kvblk_reap() or kvblk_wait() that takes it) and a ticket is never reused
 * while it is outstanding. Registration and target calls may run concurrently
 * with batches. kvblk_close() must not race any other call on the handle,
 * a thread blocked in kvblk_reap() or kvblk_wait() included: to stop such
 * threads, call kvblk_shutdown() (from any thread; it wakes every one of
 * them at once and keeps later calls from waiting), let them return, then
 * call kvblk_close().
 *
 * A handle is freed only by kvblk_close(): one the program drops without
 * closing keeps its threads, rings, kvblk.ko context, registrations and
 * outstanding batches (and so the memory they load into) until the process
 * exits. The C++ wrapper (kvblk.hpp) and the Python binding close theirs when
 * the object is destroyed or collected.
 *
 * Waits and signals (since 0.4): a signal handler that runs on a thread
 * waiting in kvblk_reap() or kvblk_wait() ends the wait with -EINTR (nothing
 * taken; the batches stay outstanding), whether the handler was installed
 * with SA_RESTART or not, as poll(2) does; pthread_kill(3) with such a
 * handler wakes one thread. kvblk_load_many() and kvblk_store_many() are not
 * interrupted: their batch owns the caller's memory until it ends. The threads
 * libkvblk starts (dispatch, io_uring rings, lanes, threadpool) block every
 * signal, so process-directed signals reach the program's own threads.
 *
 * Batches are asynchronous underneath: kvblk_submit() queues a batch and
 * returns a ticket; kvblk_load_many()/kvblk_store_many() are kvblk_submit()
 * + kvblk_wait() with the same contract as before.
 *
 * Processes (since 0.3): a handle belongs to the process that opened it. Its
 * io_uring rings, threads, kvblk.ko context and buffer registrations are that
 * process's; a child made by fork(2) (Python multiprocessing, engine worker
 * processes) inherits only a copy that must not be used: every call on it
 * returns -EBADFD at once, before it touches anything the parent shares (a
 * lock or a wait of the parent's threads included, whatever they were doing
 * at the fork), and kvblk_last_error() says so. kvblk_close() of the
 * inherited copy frees and unregisters nothing (it returns at once); the
 * child's copies of the
 * handle's file descriptors (all O_CLOEXEC) close when it execs or exits.
 * The child opens a handle of its own with kvblk_open(). The parent is never
 * affected: its batches in flight at the fork complete, and its registered
 * buffers stay its own (the kernel gives the child copies of pinned pages;
 * the rings are not mapped into the child at all). kvblk.ko enforces the
 * same rule for its contexts: an ioctl from another address space fails
 * with -EBADFD (include/uapi/linux/kvblk.h), so even a raw ioctl on the
 * inherited /dev/kvblk fd cannot touch the parent's registrations.
 */
#ifndef KVBLK_KVBLK_H
#define KVBLK_KVBLK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define KVBLK_NOEXCEPT noexcept
extern "C" {
#else
#define KVBLK_NOEXCEPT
#endif

#define KVBLK_VERSION_MAJOR 0
#define KVBLK_VERSION_MINOR 4
#define KVBLK_VERSION_PATCH 0

/** kvblk_version() - "MAJOR.MINOR.PATCH" of the loaded library. */
const char *kvblk_version(void) KVBLK_NOEXCEPT;

/**
 * kvblk_check_version() - 1 if the loaded library is ABI-compatible with a
 * program built against headers MAJOR.MINOR (same major, library minor >=
 * minor), else 0. KVBLK_CHECK_VERSION() passes this header's numbers.
 */
int kvblk_check_version(int major, int minor) KVBLK_NOEXCEPT;
#define KVBLK_CHECK_VERSION() kvblk_check_version(KVBLK_VERSION_MAJOR, KVBLK_VERSION_MINOR)

/** kvblk_last_error() - reason for the last failing call on this thread; "" if none. */
const char *kvblk_last_error(void) KVBLK_NOEXCEPT;

/* ------------------------------------------------------------------ open */

/**
 * enum kvblk_backend - how a device is served.
 * @KVBLK_BACKEND_AUTO:       kmod when /dev/kvblk exists, the target is a whole
 *                            NVMe namespace on a PCIe controller (not a
 *                            partition, not the multipath head) and
 *                            KVBLK_OPEN_BUFFERED is not given; uring_cmd for an
 *                            NVMe generic char device (/dev/ngXnY); else uring.
 *                            When kvblk.ko is chosen but refuses the namespace
 *                            (a metadata/PI format, ...), uring serves. The
 *                            reason is in kvblk_dev_info.backend_reason. The
 *                            process-wide default backend (kvblk_set_default(),
 *                            else the environment variable KVBLK_BACKEND:
 *                            auto|uring|threadpool|psync|kmod|uring_cmd)
 *                            overrides AUTO only.
 * @KVBLK_BACKEND_URING:      io_uring, O_DIRECT, every object of a batch in
 *                            flight together up to the queue depth, objects
 *                            split into commands of max_cmd_bytes; fixed
 *                            buffers for registered destinations; targets
 *                            0..255 as each ring's registered files (no file
 *                            reference taken per command); @workers rings
 *                            on @workers threads. A kvblk_load_many() or
 *                            kvblk_store_many() that finds a ring idle and nothing
 *                            queued submits and reaps on the calling thread (no
 *                            wake-up of the ring's thread and back; with
 *                            several rings only a batch of at most queue_depth
 *                            commands, a deeper one is spread over the rings).
 * @KVBLK_BACKEND_THREADPOOL: @workers threads each reading whole objects with
 *                            pread(2) (O_DIRECT).
 * @KVBLK_BACKEND_PSYNC:      one object at a time, one pread(2) of at most
 *                            max_cmd_bytes at a time (queue depth 1: the
 *                            baseline of today's loaders).
 * @KVBLK_BACKEND_KMOD:       kvblk.ko through /dev/kvblk: an NVMe namespace on
 *                            PCIe (/dev/nvmeXnY, or a partition of it) read with
 *                            NVMe commands that the module builds, all of a call
 *                            in flight together (up to the module's max_inflight
 *                            tunable, reported as queue_depth). Registered
 *                            buffers are pinned and DMA-mapped by the module once.
 *                            Plain pointers (KVBLK_BUF_NONE) are pinned and mapped
 *                            for the duration of each call (their pages count
 *                            against RLIMIT_MEMLOCK while it runs; an object
 *                            whose pages cannot be registered fails with that
 *                            errno, -ENOMEM for the limit): register buffers that
 *                            are loaded into repeatedly. Destinations must be
 *                            anonymous, shmem or hugetlb memory (the module
 *                            refuses to pin file mappings: such objects fail
 *                            with -EOPNOTSUPP). kvblk_store_many() on a kmod
 *                            device opened with KVBLK_OPEN_WRITE (the namespace
 *                            is then opened O_RDWR; without it, O_RDONLY) goes
 *                            through the module too when it writes
 *                            (KVBLK_FEAT_STORE): through its block-layer engine,
 *                            which the library attaches the same fd to a second
 *                            time when the PRP engine (which only reads) serves
 *                            loads; sources follow the rules of destinations
 *                            (pinned: writable anonymous, shmem or hugetlb
 *                            memory). With an older module, stores are served by
 *                            the uring backend on the same device and reported
 *                            and counted as uring (kvblk_batch_info.backend,
 *                            stats.batches_by_backend); backend_reason says
 *                            which. kvblk_flush() is fdatasync() either way.
 * @KVBLK_BACKEND_URING_CMD:  NVMe Read/Write commands passed through io_uring
 *                            (IORING_OP_URING_CMD, 128-byte SQEs) to the
 *                            namespace's generic char device: @path is
 *                            /dev/ngXnY, or /dev/nvmeXnY, which is mapped to its
 *                            /dev/ngXnY (backend_reason names it). A partition,
 *                            another block device or a file: -EOPNOTSUPP.
 *                            Commands of max_cmd_bytes, @queue_depth in flight per
 *                            ring, @workers rings; no fixed buffers; synchronous
 *                            calls on the calling thread as with URING. Needs what
 *                            the kernel requires for NVMe passthrough
 *                            (CAP_SYS_ADMIN on Linux 6.1).
 */
enum kvblk_backend {
	KVBLK_BACKEND_AUTO = 0,
	KVBLK_BACKEND_URING = 1,
	KVBLK_BACKEND_THREADPOOL = 2,
	KVBLK_BACKEND_PSYNC = 3,
	KVBLK_BACKEND_KMOD = 4,
	KVBLK_BACKEND_URING_CMD = 5,
	KVBLK_BACKEND_MAX
};

/** kvblk_backend_name() - "auto", "uring", ...; "unknown" when out of range. */
const char *kvblk_backend_name(int backend) KVBLK_NOEXCEPT;

/** kvblk_backend_from_name() - enum kvblk_backend for a name, or -EINVAL. */
int kvblk_backend_from_name(const char *name) KVBLK_NOEXCEPT;

/* kvblk_open_opts.flags */
#define KVBLK_OPEN_WRITE	(1u << 0) /* open read-write: kvblk_store_many() allowed */
#define KVBLK_OPEN_BUFFERED	(1u << 1) /* no O_DIRECT: page cache used; every batch counted */
#define KVBLK_OPEN_CREATE	(1u << 2) /* with KVBLK_OPEN_WRITE: create a regular file of create_bytes
					   * (sparse: ftruncate(2)), or extend a shorter one */
#define KVBLK_OPEN_FLAGS_ALL	(KVBLK_OPEN_WRITE | KVBLK_OPEN_BUFFERED | KVBLK_OPEN_CREATE)

/* Built-in defaults and limits; 0 in an option means "the default" (since 0.4 the
 * process-wide one: kvblk_get_default()). */
#define KVBLK_DEFAULT_QUEUE_DEPTH	64u		/* commands in flight per ring */
#define KVBLK_DEFAULT_WORKERS		1u		/* rings (uring) */
#define KVBLK_DEFAULT_THREADS		8u		/* threads (threadpool) */
#define KVBLK_DEFAULT_MAX_CMD_BYTES	(128u << 10)	/* bytes per command */
#define KVBLK_DEFAULT_MAX_DESCS		65536u		/* descriptors per call */
#define KVBLK_MAX_QUEUE_DEPTH		4096u
#define KVBLK_MAX_WORKERS		64u
#define KVBLK_MAX_DESCS_LIMIT		(1u << 20)
#define KVBLK_DEFAULT_EAGAIN_RETRIES	16u
#define KVBLK_DEFAULT_MAX_BATCHES	256u		/* outstanding batches (since 0.3) */
#define KVBLK_MAX_BATCHES		65536u
#define KVBLK_MAX_TARGETS		65536u		/* targets per device (since 0.3) */

/**
 * struct kvblk_open_opts - options of kvblk_open(); fill with kvblk_open_opts_init().
 * An option left 0 takes the process-wide default (since 0.4; the defaults named below are
 * the built-in ones, which KVBLK_* environment variables and kvblk_set_default() change:
 * "process-wide defaults" at the end of this header).
 * @opts_size:      sizeof(struct kvblk_open_opts), set by kvblk_open_opts_init().
 * @backend:        enum kvblk_backend; default AUTO.
 * @queue_depth:    commands in flight per ring (uring, uring_cmd), 1..4096; default 64.
 * @workers:        rings (uring, uring_cmd) or threads (threadpool), 1..64;
 *                  default 1 ring / 8 threads.
 * @flags:          KVBLK_OPEN_*.
 * @max_cmd_bytes:  largest read or write command, a multiple of the logical
 *                  block size, >= 4096; default 128 KiB (kmod: the module's
 *                  max_cmd_bytes from its attach). Clamped to the device's
 *                  limit (max_hw_sectors_kb) for block devices, and to 1 GiB;
 *                  kmod: to the module's limit; uring_cmd: also to 65536
 *                  LBAs and (queue/max_segments - 1) pages; uring on a block
 *                  device: also to queue/max_sectors_kb and, on kernels before
 *                  6.11, to queue/max_segments pages of 4 KiB: the largest
 *                  read into a page-aligned fixed buffer that the block layer
 *                  takes without a split (a split one io_uring issues again
 *                  from a worker thread: block/blk-merge.c, bio_split_rw(),
 *                  REQ_NOWAIT);
 *                  kvblk_dev_info.backend_reason then says so (a block device
 *                  added with kvblk_add_target() to a uring device gets its
 *                  own such limit: kvblk_get_target_info()).
 * @max_descs:      descriptors accepted per call, 1..2^20; default 65536.
 * @eagain_retries: resubmissions of a command that completes with -EAGAIN
 *                  before its object fails with -EAGAIN; default 16.
 * @create_bytes:   size of the file created with KVBLK_OPEN_CREATE (> 0).
 *
 * Since 0.3 (a caller built against 0.2 passes the smaller opts_size,
 * KVBLK_OPEN_OPTS_SIZE_V0_2, and gets the defaults of the fields below):
 * @max_batches:    batches outstanding at once (submitted and not yet reaped
 *                  or waited for), 1..KVBLK_MAX_BATCHES; default 256. A
 *                  kvblk_submit() beyond it waits, or fails with -EAGAIN with
 *                  KVBLK_SUBMIT_NONBLOCK.
 * @reserved:       must be 0.
 */
struct kvblk_open_opts {
	size_t opts_size;
	uint32_t backend;
	uint32_t queue_depth;
	uint32_t workers;
	uint32_t flags;
	uint64_t max_cmd_bytes;
	uint32_t max_descs;
	uint32_t eagain_retries;
	uint64_t create_bytes;
	uint32_t max_batches;
	uint32_t reserved;
};

/* sizeof(struct kvblk_open_opts) of 0.2: the smallest opts_size accepted. */
#define KVBLK_OPEN_OPTS_SIZE_V0_2 (offsetof(struct kvblk_open_opts, max_batches))

/** kvblk_open_opts_init() - zero @opts and set opts_size to @size (pass sizeof(*opts)). */
void kvblk_open_opts_init(struct kvblk_open_opts *opts, size_t size) KVBLK_NOEXCEPT;

typedef struct kvblk_dev kvblk_dev;

/**
 * kvblk_open() - open a block device or regular file for loads.
 * @path: block device (/dev/nvme0n1, /dev/sda2), regular file, or NVMe
 *        generic char device (/dev/ng0n1; backend uring_cmd only).
 * @opts: options, or NULL for all defaults.
 * @out:  receives the handle; untouched on failure.
 *
 * All I/O uses O_DIRECT unless KVBLK_OPEN_BUFFERED is given. A block device
 * is opened O_NOATIME (no atime update of the device node per read, as fio
 * opens one), or without it where open(2) refuses it (EPERM: not the node's
 * owner and no CAP_FOWNER); a regular file keeps its atime.
 * Errors: -EINVAL bad option (out of range, unknown flag, KVBLK_OPEN_CREATE
 * without KVBLK_OPEN_WRITE, opts_size below
 * KVBLK_OPEN_OPTS_SIZE_V0_2 or above 64 KiB, or larger than this library's
 * struct with non-zero bytes it does not know; reserved not 0);
 * -ENOENT, -EACCES, -EISDIR and other open(2) errors of @path;
 * -EOPNOTSUPP, which on Linux is the same value as -ENOTSUP (one error,
 * told apart only by kvblk_last_error()): @path is neither a block device,
 * a regular file nor an NVMe generic char device (a FIFO or socket is
 * refused from stat(2), without being opened, so nothing can block); the
 * file system refuses O_DIRECT (try KVBLK_OPEN_BUFFERED); or the requested
 * backend cannot serve @path: kmod with kvblk.ko not loaded or refusing
 * the device, uring_cmd on anything but a whole NVMe namespace, kmod or
 * uring_cmd with KVBLK_OPEN_BUFFERED, an NVMe generic char device with any
 * backend but uring_cmd; -ENOSYS io_uring is not available (uring
 * backends); -ENOMEM.
 */
int kvblk_open(const char *path, const struct kvblk_open_opts *opts, kvblk_dev **out) KVBLK_NOEXCEPT;

/**
 * kvblk_close() - end every outstanding batch, unregister every buffer, close
 * the device. NULL is a no-op. Batches still queued are cancelled (their
 * objects not issued end with -ECANCELED, as kvblk_cancel() does), batches in
 * flight are waited for, and completions nobody took are dropped: when it
 * returns, no destination or results array is written any more (every
 * results array is final: what a batch's completion would have said is
 * there). Threads that libkvblk started for the handle are joined (the kmod
 * io_uring thread, shared by the process's kmod devices, with the last of
 * them). It must not run concurrently with any other call on @dev, nor may
 * any call follow it: a thread waiting in kvblk_reap() or kvblk_wait() on
 * @dev is woken with kvblk_shutdown() first. On a handle inherited through
 * fork(2) it returns at once and frees nothing (see "Processes" above).
 */
void kvblk_close(kvblk_dev *dev) KVBLK_NOEXCEPT;

/* kvblk_dev_info.flags */
#define KVBLK_INFO_BLOCKDEV	(1u << 0) /* target is a block device */
#define KVBLK_INFO_BUFFERED	(1u << 1) /* opened without O_DIRECT */
#define KVBLK_INFO_WRITABLE	(1u << 2) /* opened for writing */

/**
 * struct kvblk_dev_info - what kvblk_get_info() reports.
 * @info_size:          sizeof(struct kvblk_dev_info), set by the caller.
 * @backend:            enum kvblk_backend actually chosen (never AUTO).
 * @flags:              KVBLK_INFO_*.
 * @logical_block_size: offset and length granularity in bytes (BLKSSZGET
 *                      for block devices; statx STATX_DIOALIGN offset
 *                      alignment for files, else the file system block size).
 * @mem_align:          required alignment of destination addresses in bytes
 *                      (statx dio_mem_align, else the logical block size).
 * @capacity:           device or file size in bytes at open time.
 * @max_cmd_bytes:      effective largest command.
 * @queue_depth:        effective queue depth per ring (1 for psync and threadpool;
 *                      kmod: the module's max_inflight tunable for the namespace,
 *                      stores included; stores through uring, with a kvblk.ko
 *                      without KVBLK_FEAT_STORE, use the requested depth).
 * @workers:            effective rings or threads.
 * @max_descs:          effective descriptor limit per call.
 * @backend_reason:     why @backend was chosen, NUL-terminated.
 *
 * Since 0.3 (an info_size of 0.2, KVBLK_DEV_INFO_SIZE_V0_2, gets the fields
 * above; the fields above describe target 0, the path given to kvblk_open()):
 * @async:              enum kvblk_async: how kvblk_submit() batches progress.
 * @max_batches:        effective kvblk_open_opts.max_batches.
 * @targets:            targets currently added, target 0 included.
 * @reserved2:          0.
 */
struct kvblk_dev_info {
	size_t info_size;
	uint32_t backend;
	uint32_t flags;
	uint32_t logical_block_size;
	uint32_t mem_align;
	uint64_t capacity;
	uint64_t max_cmd_bytes;
	uint32_t queue_depth;
	uint32_t workers;
	uint32_t max_descs;
	uint32_t reserved;
	char backend_reason[160];
	uint32_t async;
	uint32_t max_batches;
	uint32_t targets;
	uint32_t reserved2;
};

/* sizeof(struct kvblk_dev_info) of 0.2: the smallest info_size accepted. */
#define KVBLK_DEV_INFO_SIZE_V0_2 (offsetof(struct kvblk_dev_info, async))

/**
 * enum kvblk_async - how a device's batches progress after kvblk_submit() (since 0.3).
 * @KVBLK_ASYNC_NATIVE: uring, uring_cmd: the batches share the device's io_uring
 *                      rings, served by one thread per ring; commands of every
 *                      outstanding batch are in flight together up to the
 *                      queue depth. No thread per batch (a KVBLK_DESC_UNALIGNED
 *                      store's edge reads and then its writes, since 0.4).
 *                      kmod when kvblk.ko takes io_uring commands
 *                      (KVBLK_FEAT_URING_CMD): every batch is one or more
 *                      kvblk.ko batches (max_descs descriptors each) in flight
 *                      together on one io_uring shared by all kmod devices of
 *                      the process, with one thread (made with the first kmod
 *                      device, ended with the last); no thread per device.
 *                      Loads into plain pointers (KVBLK_BUF_NONE, or a buffer
 *                      kvblk.ko did not register) go there too: their pages
 *                      are registered with kvblk.ko around their commands,
 *                      at most 256 ranges per pass of a batch and 512 at once
 *                      for all the device's batches on the ring (a batch past
 *                      that waits until another's pass ends; a
 *                      kvblk_load_many() on the calling thread registers
 *                      its own passes outside that count). Each range counts
 *                      against RLIMIT_MEMLOCK while its pass runs, so the
 *                      passes of batches in flight together share the limit:
 *                      an object whose range does not fit then fails with
 *                      -ENOMEM, and only that object. Loads with a
 *                      KVBLK_DESC_UNALIGNED object that ends in a file
 *                      target's cut-short last block (read with pread(2)),
 *                      stores with a KVBLK_DESC_UNALIGNED edge (since 0.4: the
 *                      edge reads, then the writes, one after the other),
 *                      batches naming targets the device's kvblk.ko context
 *                      does not serve (see kvblk_add_target()) and staged
 *                      CUDA batches go to a dispatch thread as below, created
 *                      for the device when the first such batch comes.
 *                      kvblk_cancel() ends the kvblk.ko batches not yet
 *                      handed to the kernel (and passes not yet started);
 *                      one handed over runs to its end. A kvblk_load_many()
 *                      that finds no batch queued or running on the dispatch
 *                      thread is still LOAD_MANY ioctls on the calling thread.
 * @KVBLK_ASYNC_THREAD: psync, threadpool, and kmod on a kvblk.ko without
 *                      io_uring commands: one dispatch thread per device
 *                      hands queued batches to the backend one after another
 *                      (kmod: LOAD_MANY ioctls per batch and target). A
 *                      kvblk_load_many() or kvblk_store_many() that finds no
 *                      batch queued or running is served on the calling thread
 *                      instead (still one batch at a time).
 */
enum kvblk_async {
	KVBLK_ASYNC_NATIVE = 1,
	KVBLK_ASYNC_THREAD = 2,
};

/**
 * kvblk_get_info() - fill @info; set info->info_size = sizeof(*info) first.
 * An info_size between KVBLK_DEV_INFO_SIZE_V0_2 and sizeof(*info) gets that
 * many bytes; a larger one gets the rest zeroed (up to 64 KiB).
 * Errors: -EINVAL NULL argument, info_size below KVBLK_DEV_INFO_SIZE_V0_2 or
 * above 64 KiB.
 */
int kvblk_get_info(kvblk_dev *dev, struct kvblk_dev_info *info) KVBLK_NOEXCEPT;

/* ------------------------------------------------------- targets (0.3) */

/**
 * kvblk_add_target() - add a block device or regular file that descriptors
 * can name in kvblk_desc.target (since 0.3).
 * @dev:   device. Target 0 is the path given to kvblk_open().
 * @path:  block device or regular file, opened and checked as kvblk_open()
 *         opens its path (O_DIRECT unless KVBLK_OPEN_BUFFERED; a FIFO, socket
 *         or directory is refused without being opened for I/O).
 * @flags: KVBLK_OPEN_WRITE (stores allowed), KVBLK_OPEN_BUFFERED; other
 *         KVBLK_OPEN_* flags -EINVAL.
 * @id:    receives the target id (the smallest free id >= 1).
 *
 * One batch may name any number of targets: every object of every target is
 * in flight together. Each target has its own logical block size, memory
 * alignment and capacity (kvblk_get_target_info()); descriptors are checked
 * against their own target's. uring/threadpool/psync devices read every
 * target through their own rings or threads. A kmod device whose kvblk.ko
 * takes several targets per context (KVBLK_FEAT_TARGETS) attaches every added
 * block device (an NVMe namespace, a partition, md, dm, loop, null_blk...) and
 * regular file to its own kvblk.ko context (KVBLK_ATTACH_F_ADD_TARGET, with
 * the rights @flags ask: O_RDWR for KVBLK_OPEN_WRITE): the block-layer
 * engine serves it (an nvme-pci namespace of the same controller also gets
 * the PRP engine for device memory; device memory on any other added target
 * fails at its objects with -EOPNOTSUPP), and a batch over any mix of targets
 * is one KVBLK_IOC_LOAD_MANY (through kvblk_submit(), one io_uring command per
 * max_descs descriptors), reported and counted once as kmod; a file's last
 * block cut short by its end (KVBLK_DESC_UNALIGNED) is read with pread(2).
 * Such a target's mem_align is at least kvblk.ko's buffer alignment for it
 * (4 through the block layer) where the device or file system said less.
 * Targets that context does not take (KVBLK_OPEN_BUFFERED, a kvblk.ko without
 * KVBLK_FEAT_TARGETS or that refuses the attach) are served as before: a
 * block device that kvblk.ko attaches by a kvblk.ko context of its own, files
 * and the rest by the uring backend; a batch is then split between them
 * (the backend that served each part is counted in
 * stats.batches_by_backend). kvblk_get_target_info()'s backend and
 * backend_reason say which serves a target and why. A uring_cmd device takes
 * NVMe generic char devices only.
 * Errors: -EINVAL NULL argument or unknown flag; -ENOSPC KVBLK_MAX_TARGETS
 * reached; the errors of kvblk_open() for @path (-EISDIR a directory,
 * -EOPNOTSUPP (== -ENOTSUP) a FIFO, socket or other file that is not a block
 * device or regular file); -EOPNOTSUPP also: the device's backend cannot serve it (an NVMe
 * generic char device on anything but a uring_cmd device; anything else on a
 * uring_cmd device; a block size that does not divide the device's
 * max_cmd_bytes; a uring_cmd namespace whose commands are smaller).
 */
int kvblk_add_target(kvblk_dev *dev, const char *path, uint32_t flags, uint32_t *id) KVBLK_NOEXCEPT;

/**
 * kvblk_add_target_fd() - add a target from a file descriptor the caller
 * opened (since 0.3). Rights follow @fd: its access mode decides whether the
 * target can be read (O_RDONLY, O_RDWR) and written (O_WRONLY, O_RDWR,
 * needed with KVBLK_OPEN_WRITE). libkvblk opens its own description of the
 * same file (through /proc/self/fd, with O_DIRECT unless KVBLK_OPEN_BUFFERED)
 * and never changes @fd's flags; the caller may close @fd afterwards.
 * An O_WRONLY @fd added with KVBLK_OPEN_WRITE is a store-only target: loads
 * naming it fail with -EBADF. A FIFO, socket or directory is refused from
 * fstat(2) of @fd alone (-EOPNOTSUPP == -ENOTSUP, -EISDIR), before anything is opened.
 * Errors: -EBADF @fd is not open, or opened O_PATH, or its access mode does
 * not allow what @flags ask for (O_RDONLY with KVBLK_OPEN_WRITE, O_WRONLY
 * without it); the other errors of kvblk_add_target().
 */
int kvblk_add_target_fd(kvblk_dev *dev, int fd, uint32_t flags, uint32_t *id) KVBLK_NOEXCEPT;

/**
 * kvblk_remove_target() - close target @id (>= 1; target 0 lives until
 * kvblk_close()) (since 0.3). Its id may be handed out again afterwards.
 * kvblk.ko has no detach: a target of a kmod device's own kvblk.ko context
 * (see kvblk_add_target()) stays attached in the module, its file held
 * open there (a loop device or md array cannot be torn down, a file system
 * not unmounted) until kvblk_close(); libkvblk no longer names it. Adding it
 * again attaches it anew; a context takes 4096 attaches in its life
 * (KVBLK_CTX_MAX_TARGETS), after which added block devices get a kvblk.ko
 * context of their own and files the uring backend, as above.
 * Errors: -EINVAL @id is 0; -ENOENT no such target; -EBUSY an outstanding
 * batch names it (wait for or reap it first).
 */
int kvblk_remove_target(kvblk_dev *dev, uint32_t id) KVBLK_NOEXCEPT;

/**
 * kvblk_get_target_info() - what kvblk_get_info() reports, for target @id
 * (since 0.3): backend and backend_reason of the backend that serves it,
 * flags, logical_block_size, mem_align, capacity (now: files are sized
 * again when each batch starts), and that backend's max_cmd_bytes (a block
 * device served by uring: lowered to what its own queue takes unsplit, as
 * kvblk_open_opts.max_cmd_bytes says, its objects cut there, and
 * backend_reason says so), queue_depth and workers (kmod device: a target of the device's kvblk.ko
 * context reports target 0's max_inflight, which caps every batch; one with
 * a kvblk.ko context of its own, that context's max_inflight; a target
 * served by uring, the queue depth and workers the device was opened with).
 * Errors: those of kvblk_get_info(); -ENOENT no such target.
 */
int kvblk_get_target_info(kvblk_dev *dev, uint32_t id, struct kvblk_dev_info *info) KVBLK_NOEXCEPT;

/* --------------------------------------------------------------- buffers */

/**
 * enum kvblk_mem_kind - kind of a registered destination.
 * @KVBLK_MEM_HOST:   host memory (any user mapping).
 * @KVBLK_MEM_CUDA:   CUDA device memory (a device address from cudaMalloc() or
 *                    the driver API; since 0.2). Loaded by DMA straight into it
 *                    (KVBLK_PATH_P2P) on a kmod device whose kvblk.ko reports
 *                    KVBLK_FEAT_MEM_CUDA, else through the staged path
 *                    (KVBLK_PATH_STAGED): see kvblk_register_buffer().
 * @KVBLK_MEM_DMABUF: a byte range of a dma-buf; registered with
 *                    kvblk_register_dmabuf() only (since 0.2).
 * @KVBLK_MEM_P2PDMA: a user mapping of PCI P2PDMA memory, e.g. an mmap() of
 *                    /sys/bus/pci/devices/<bdf>/p2pmem/allocate (a device BAR
 *                    on kernels with CONFIG_PCI_P2PDMA; since 0.2). NVMe DMA
 *                    goes straight into it (KVBLK_PATH_P2P): see
 *                    kvblk_register_buffer().
 * @KVBLK_MEM_KIND_MAX: one past the last kind (since 0.4).
 */
#ifndef __KVBLK_MEM_KIND_DEFINED /* the same enum as <linux/kvblk.h>'s, one guard */
#define __KVBLK_MEM_KIND_DEFINED
enum kvblk_mem_kind {
	KVBLK_MEM_HOST = 0,
	KVBLK_MEM_CUDA = 1,
	KVBLK_MEM_DMABUF = 2,
	KVBLK_MEM_P2PDMA = 3,
	KVBLK_MEM_KIND_MAX,
};
#endif

/** Buffer id meaning "addr is a plain host pointer, not a registered buffer". */
#define KVBLK_BUF_NONE UINT32_MAX

/**
 * kvblk_register_buffer() - register a destination once, use it in many loads.
 * @dev:  device.
 * @kind: KVBLK_MEM_HOST, KVBLK_MEM_CUDA or KVBLK_MEM_P2PDMA.
 * @addr: start, aligned to kvblk_dev_info.mem_align (a CUDA device address
 *        for KVBLK_MEM_CUDA).
 * @len:  bytes, > 0.
 * @id:   receives the buffer id (small integer, never KVBLK_BUF_NONE).
 *
 * The uring backends register the range as an io_uring fixed buffer so that
 * reads into it skip per-I/O page pinning; kmod registers it with kvblk.ko
 * (pinned and DMA-mapped once; the page-aligned cover of the range is
 * registered). If the kernel refuses for want of resources (RLIMIT_MEMLOCK:
 * the message names the limit; a buffer over 1 GiB for io_uring), the buffer
 * still works (plain reads; kmod: per-call registration as for plain
 * pointers) and stats.memlock_fallbacks counts it; the call then returns 0
 * and kvblk_last_error() holds that message. A KVBLK_MEM_HOST range must be
 * mapped and writable from end to end on every backend (checked against the
 * process's mappings): read-only memory or a range with a hole fails with
 * -EFAULT, nothing registered and nothing counted (a read-only source for
 * stores can still be passed as a plain pointer). At most
 * 1024 buffers per device (the staging pool below takes up to
 * KVBLK_MAX_STAGING_BUFFERS of them).
 *
 * What registration pins, and for how long: uring (as a fixed buffer) and
 * kmod pin the pages that back the range when this call runs, until
 * kvblk_unregister_buffer() or kvblk_close(). Loads into the buffer go to
 * those pages. The range must therefore stay mapped to the same memory while
 * it is registered: munmap(2), mremap(2), mmap(MAP_FIXED) over it, or
 * madvise(MADV_DONTNEED, MADV_FREE, MADV_REMOVE) replace what the program
 * sees at those addresses while loads still go to the old pages, which the
 * program can no longer read; such loads report success. Unregister first,
 * or register again afterwards. kvblk_check_buffer() finds out whether this
 * happened. On a kmod device whose kvblk.ko reports KVBLK_FEAT_MM_GUARD
 * the module also watches the range itself: a load into a buffer whose
 * pinned pages are no longer what the range maps is not sent; that object
 * fails with -ESTALE and the batch's other objects with -ECANCELED (no
 * kvblk_check_buffer() needed first). (psync and threadpool, and buffers that fell back, read into
 * whatever is mapped when each read runs, as for plain pointers.) After
 * fork(2) the parent keeps the pinned pages and the child gets copies.
 *
 * KVBLK_MEM_CUDA (since 0.2). On a kmod device whose kvblk.ko reports
 * KVBLK_FEAT_MEM_CUDA the range is registered with the module (nvidia-p2p):
 * @addr must be 64 KiB aligned (the GPU page size), the range is rounded up to
 * a multiple of 64 KiB and must lie inside one allocation; loads DMA straight
 * into it and report KVBLK_PATH_P2P. If the module refuses with -EOPNOTSUPP
 * (e.g. a GPU without persistent nvidia-p2p pins: MIG instances, vGPU) the
 * buffer is staged as below; any other refusal fails the call with its
 * errno. Everywhere else (userspace backends, or a
 * kvblk.ko without KVBLK_FEAT_MEM_CUDA) the buffer is served by the staged
 * path: reads go into a pool of pinned host bounce buffers through the
 * device's backend and are copied to the GPU with cudaMemcpyAsync, reads and
 * copies overlapping; loads report KVBLK_PATH_STAGED and stats count them. The
 * call then returns 0 with kvblk_last_error() saying that the buffer is staged
 * and why; a kmod device also counts it in stats.p2p_fallbacks. The CUDA
 * runtime is loaded with dlopen() on first use ($KVBLK_CUDART, then
 * libcudart.so.13, libcudart.so.12, libcudart.so); the first staged
 * registration allocates the pool (kvblk_set_staging()), which may wait for a
 * load running on another thread. Stores from CUDA buffers are not supported.
 *
 * KVBLK_MEM_P2PDMA (since 0.2): @addr and @len page aligned. On a kmod device
 * the range goes to the module (it must report KVBLK_FEAT_MEM_P2PDMA, else
 * -EOPNOTSUPP: no fallback), which checks it is P2PDMA memory the NVMe
 * controller can reach and pins it per load (the kernel forbids long-term
 * pins of P2PDMA pages). The other backends read into it with O_DIRECT, the
 * kernel's block layer doing the peer-to-peer DMA (never an io_uring fixed
 * buffer, which would need a long-term pin). Loads report KVBLK_PATH_P2P.
 * Errors: -EINVAL NULL/zero/misaligned argument, unknown kind, or (CUDA)
 * @addr is not CUDA device memory; -EFAULT (KVBLK_MEM_HOST) part of the
 * range is not mapped or not writable (kvblk_last_error() names the bytes);
 * -EBADFD the handle was inherited through fork(); -EOPNOTSUPP kind not supported by this
 * backend or build, or (CUDA, staged) no CUDA runtime could be loaded:
 * kvblk_last_error() says "CUDA runtime not found (tried ...)"; -ENODEV
 * (CUDA, staged) the runtime found no GPU; -ENOSPC too many buffers; -ENOMEM
 * (also: the bounce buffers could not be allocated or page-locked); kmod P2P
 * registrations also the errors of KVBLK_IOC_REGISTER_BUFFER
 * (include/uapi/linux/kvblk.h).
 */
int kvblk_register_buffer(kvblk_dev *dev, int kind, void *addr, uint64_t len,
			  uint32_t *id) KVBLK_NOEXCEPT;

/**
 * kvblk_register_dmabuf() - register a byte range of a dma-buf as a destination (since 0.2).
 * @dev:    device.
 * @fd:     the dma-buf's file descriptor (kept open by the caller; kvblk.ko
 *          holds its own reference while registered).
 * @offset: byte offset into the dma-buf, a multiple of the page size.
 * @len:    bytes, > 0, a multiple of the page size.
 * @id:     receives the buffer id; descriptors address it with offsets from 0.
 *
 * Only kvblk.ko can DMA into a dma-buf: the device must use the kmod backend
 * and the module must report KVBLK_FEAT_MEM_DMABUF. Loads into it report
 * KVBLK_PATH_P2P. There is no staged path (no CPU view of a dma-buf is used).
 * Errors: -EINVAL NULL @dev/@id, @fd < 0, zero @len, @offset or @len not page
 * aligned, overflow; -EOPNOTSUPP the backend is not kmod or the module lacks
 * KVBLK_FEAT_MEM_DMABUF (kvblk_last_error() says which); -ENOSPC too many
 * buffers; -ENOMEM; and the errors of KVBLK_IOC_REGISTER_BUFFER for
 * KVBLK_MEM_DMABUF (-EBADF not a dma-buf, -EACCES exported without write
 * access, ...).
 */
int kvblk_register_dmabuf(kvblk_dev *dev, int fd, uint64_t offset, uint64_t len,
			  uint32_t *id) KVBLK_NOEXCEPT;

/* Staging pool defaults and limits (kvblk_set_staging()). */
#define KVBLK_DEFAULT_STAGING_BUFFERS		4u
#define KVBLK_DEFAULT_STAGING_BUFFER_BYTES	(8u << 20)
#define KVBLK_MAX_STAGING_BUFFERS		64u
#define KVBLK_MAX_STAGING_BUFFER_BYTES		(1u << 30)

/**
 * kvblk_set_staging() - size the staged path's bounce-buffer pool (since 0.2).
 * @dev:          device.
 * @buffers:      bounce buffers (each its own copy stream), 1..64; 0 = the default
 *                (4, or the process-wide staging_buffers when @dev was opened).
 * @buffer_bytes: bytes per buffer (the largest read into one; rounded down to
 *                a multiple of logical_block_size, at least one block),
 *                logical_block_size..1 GiB; 0 = the default (8 MiB, or the
 *                process-wide staging_buffer_bytes when @dev was opened). A device
 *                starts with the pool of those defaults.
 *
 * Staged loads never hold more than @buffers * @buffer_bytes of bounce memory
 * (rounded up to pages); stats.staging_pool_bytes shows what is allocated. A
 * pool that exists is freed (after the running load, if any) and allocated
 * again with the new size at once when staged buffers are registered, else at
 * the next staged registration.
 * Errors: -EINVAL NULL @dev or a value out of range; -ENOMEM, -EOPNOTSUPP,
 * -ENODEV as for the staged registration that reallocates the pool.
 */
int kvblk_set_staging(kvblk_dev *dev, uint32_t buffers, uint64_t buffer_bytes) KVBLK_NOEXCEPT;

/**
 * kvblk_unregister_buffer() - forget a buffer id.
 * Errors: -ENOENT unknown @id; -EBUSY a load into it is running on another thread.
 */
int kvblk_unregister_buffer(kvblk_dev *dev, uint32_t id) KVBLK_NOEXCEPT;

/**
 * struct kvblk_buffer_info - a registered buffer, as kvblk_get_buffer_info() reports it
 * (since 0.4).
 * @info_size: sizeof(struct kvblk_buffer_info), set by the caller.
 * @kind:      enum kvblk_mem_kind it was registered as.
 * @path:      enum kvblk_path its loads take: KVBLK_PATH_HOST for host memory,
 *             KVBLK_PATH_P2P (DMA into device memory) or KVBLK_PATH_STAGED (CUDA memory
 *             through the bounce pool).
 * @addr:      the address it was registered at (KVBLK_MEM_HOST, KVBLK_MEM_P2PDMA: the
 *             process's virtual address; KVBLK_MEM_CUDA: the CUDA device address;
 *             KVBLK_MEM_DMABUF: 0).
 * @len:       bytes registered.
 * @stale:     1 when kvblk_check_buffer() found it replaced (batches naming it fail with
 *             -ESTALE), else 0.
 * @reserved:  0.
 */
struct kvblk_buffer_info {
	size_t info_size;
	uint32_t kind;
	uint32_t path;
	uint64_t addr;
	uint64_t len;
	uint32_t stale;
	uint32_t reserved;
};

/**
 * kvblk_get_buffer_info() - what buffer @id is (since 0.4): a layer over libkvblk that is
 * handed buffer ids (the kvblk store, <kvblk/kvstore.h>) learns from it whether the CPU can
 * read the memory (kind KVBLK_MEM_HOST) and where.
 * Errors: -EINVAL NULL @dev or @info, info_size below sizeof(struct kvblk_buffer_info) of 0.4
 * or above 64 KiB (a larger one gets the rest zeroed); -ENOENT @id is not registered (or is
 * being unregistered); -EBADFD the handle was inherited through fork().
 */
int kvblk_get_buffer_info(kvblk_dev *dev, uint32_t id, struct kvblk_buffer_info *info) KVBLK_NOEXCEPT;

/**
 * kvblk_check_buffer() - whether registered host buffer @id still maps the
 * memory it was registered with (since 0.3).
 *
 * For an io_uring fixed buffer (uring backend) every page is probed: 8 bytes
 * of each page are set to a token through the program's mapping, copied out
 * through the pinned pages with one 8-byte io_uring write per page, compared
 * and restored. A page whose token does not come back was replaced (see
 * kvblk_register_buffer(): what registration pins). Other buffers (psync,
 * threadpool, uring_cmd, a fixed-buffer fallback) have no pinned pages: only
 * the mapping is checked (mapped and writable end to end). On a kmod device
 * kvblk.ko compares the pages it pinned with those the range maps now
 * (KVBLK_IOC_CHECK_BUFFER; a page walk of the range only when the kernel saw
 * it invalidated since the last comparison), and a store buffer's io_uring
 * pins (KVBLK_OPEN_WRITE) are probed as above.
 * When it finds the buffer replaced or unmapped, the buffer becomes stale:
 * every later batch naming it fails with -ESTALE (bad_index names the
 * descriptor) until kvblk_unregister_buffer(); register the range again.
 *
 * Do not touch the buffer's memory and run no batch that names it during the
 * call (its first 8 bytes of each page briefly hold the token). Cost: one
 * 8-byte write command per page (about a microsecond each: ~0.3 s per GiB of
 * 4 KiB pages), issued as one batch of the device (it takes a batch slot and
 * waits its turn behind queued batches as kvblk_load_many() does; since 0.4),
 * sharing the rings with other batches.
 * Call it after code that may have remapped the memory, not per load.
 *
 * Return: 0 intact. Errors: -ESTALE pages replaced (kvblk_last_error() names
 * the first byte), or found stale before; -EFAULT part of the range is no
 * longer mapped or no longer writable (the buffer is stale from then on too);
 * -ENOENT unknown @id; -EINVAL NULL @dev, or @id is not KVBLK_MEM_HOST;
 * -EBUSY a batch that names @id is outstanding; -EOPNOTSUPP a kmod device
 * whose kvblk.ko cannot compare its pins (no KVBLK_FEAT_MM_GUARD: a module
 * older than this library; the mapping was found intact); -EBADFD the handle
 * was inherited through fork(); -ECANCELED the handle is shut down
 * (kvblk_shutdown(); since 0.4); -ENOMEM, and the errors of memfd_create(2).
 */
int kvblk_check_buffer(kvblk_dev *dev, uint32_t id) KVBLK_NOEXCEPT;

/* ----------------------------------------------------------- load/store */

/* kvblk_desc.flags (since 0.3) */
#define KVBLK_DESC_UNALIGNED	(1u << 0) /* load or store (since 0.4) exactly though not block aligned (below) */
#define KVBLK_DESC_SHORT_EOF	(1u << 1) /* load: a file's end cuts it short, not -ERANGE (since 0.4; below) */
#define KVBLK_DESC_FLAGS_ALL	(KVBLK_DESC_UNALIGNED | KVBLK_DESC_SHORT_EOF)
#define KVBLK_MAX_BOUNCE_BYTES	(256u << 20) /* bounce blocks per batch for KVBLK_DESC_UNALIGNED */

/**
 * struct kvblk_desc - one object (a KV-cache blob) to load or store.
 * @offset: byte offset in the target; multiple of its logical_block_size
 *          (any value with KVBLK_DESC_UNALIGNED).
 * @length: bytes; > 0, multiple of logical_block_size (any value > 0 with
 *          KVBLK_DESC_UNALIGNED).
 * @addr:   with @buf_id == KVBLK_BUF_NONE: host virtual address of the
 *          destination (source for stores), aligned to mem_align;
 *          otherwise byte offset into registered buffer @buf_id, with
 *          base + @addr aligned to mem_align (any address with
 *          KVBLK_DESC_UNALIGNED).
 * @buf_id: registered buffer id, or KVBLK_BUF_NONE.
 * @flags:  KVBLK_DESC_* (0 in 0.2).
 * @tag:    caller's tag; reported back in the result.
 * @target: target id (kvblk_add_target()); 0 is kvblk_open()'s path (since 0.3).
 * @reserved: must be 0 (since 0.3).
 *
 * KVBLK_DESC_UNALIGNED, loads (since 0.3): @offset, @length and the
 * destination address may be any values (host memory destinations). The
 * block-aligned part whose destination is suitably aligned is read straight
 * into the destination; the unaligned edges are read as whole covering
 * blocks into a bounce buffer of the library and copied, so at most two
 * extra blocks per object are read (kvblk_batch_info.bytes_device counts
 * them). When the aligned middle's destination is not aligned to mem_align,
 * the whole object's covering blocks are bounced. A file's last bytes
 * (size % logical_block_size) are loadable this way: the covering block
 * that the end of the file cuts short is read up to the end (a short read
 * there is success, and bytes_device counts only the bytes up to the end).
 * The bounce blocks of one batch are at most KVBLK_MAX_BOUNCE_BYTES
 * (-E2BIG, naming the descriptor that passes it). Registered destinations
 * must be KVBLK_MEM_HOST buffers. Without the flag the alignment rules
 * above hold (-EINVAL).
 *
 * KVBLK_DESC_UNALIGNED, stores (since 0.4; 0.3 refused it with -EINVAL):
 * @offset, @length and the source address may be any values (host memory
 * sources; registered ones must be KVBLK_MEM_HOST buffers), and a later
 * load of the range returns exactly the bytes stored. The whole blocks
 * inside the object are written straight from the source when it is
 * aligned to mem_align there, else copied into the library's bounce area
 * first (when the store is submitted) and written from it. An unaligned
 * head or tail is a read-modify-write of its covering block: the block is
 * read into the bounce area, the object's bytes are copied over it and the
 * block is written back, so the block's bytes outside the object keep the
 * values read. Objects of one batch whose edges share a block share its one
 * read and one write (their byte ranges may not overlap, as for every
 * store). kvblk_batch_info.bytes_device counts the blocks read and the
 * blocks written; the bounce blocks (edges and copied whole blocks) count
 * against KVBLK_MAX_BOUNCE_BYTES (-E2BIG). A file's last partial block
 * (its size % logical_block_size bytes): a store may end in it, never past
 * the end of the file (-ERANGE; stores never grow a file): the block is
 * read up to the end of the file and written back up to the end only,
 * through a second descriptor of the file, write-only and without O_DIRECT
 * (the page cache; O_DIRECT cannot write a partial block), that the library
 * opens through /proc/self/fd when the first such store is submitted and
 * keeps until the target is removed or closed (an open(2) error, e.g.
 * -EACCES, rejects the call naming the descriptor). kvblk_flush() makes it
 * durable as any store.
 * Serialisation: on one handle (kvblk_dev), a store whose ranges meet a
 * block that another store read-modify-writes waits until that store has
 * completed, and a store that read-modify-writes a block waits for the
 * stores before it that write that block, in submission order (kvblk_submit()
 * order, over every thread; the waiting batch is outstanding but not started,
 * counted in stats.store_range_waits). So stores in flight together never
 * lose each other's bytes in a shared block. Block-aligned stores that meet
 * no such block are not ordered among themselves (as before 0.4). Nothing
 * orders a store with loads (a load of a block being read-modify-written sees
 * the old bytes or the new ones), nor with another handle, another process or
 * another target of the same handle naming the same file (the locks are per
 * target id): their writes into a block between its read and its write-back
 * are lost. On failure (status != 0) the object's own bytes on the target are
 * undefined (some parts may have been written), but a block is only written
 * back after its read succeeded, so the bytes around the object keep their
 * values.
 *
 * KVBLK_DESC_SHORT_EOF (loads only; since 0.4): a descriptor that reaches
 * past the end of a regular file (its size when the batch starts) is not
 * rejected: the object is cut at the end of the file and succeeds with
 * kvblk_result.bytes = the bytes the file holds from @offset (0 when @offset
 * is at or past the end: nothing is read), as pread(2) returns a short
 * count. The destination's bytes past result.bytes are not written (they
 * keep what they held). The cut end, which is rarely block aligned, is read
 * the way KVBLK_DESC_UNALIGNED reads a file's last bytes (its covering block
 * through the bounce area), so the flag needs a host memory destination
 * (-EINVAL for device memory); the descriptor's own @offset, @length and
 * address still follow the alignment rules above unless KVBLK_DESC_UNALIGNED
 * is given too. Block devices and NVMe generic char devices have no end of
 * file: past their capacity is -ERANGE with or without the flag. A file
 * that shrinks while the batch runs fails the objects whose reads meet the
 * new end (-ENODATA, as without the flag). Stores: -EINVAL.
 *
 * Growth: 0.2's struct ended after @tag (40 bytes). Programs built against
 * the 0.2 header keep calling the KVBLK_0.1 versions of kvblk_load_many()
 * and kvblk_store_many(), which read 40-byte descriptors (target 0).
 */
struct kvblk_desc {
	uint64_t offset;
	uint64_t length;
	uint64_t addr;
	uint32_t buf_id;
	uint32_t flags;
	uint64_t tag;
	uint32_t target;
	uint32_t reserved;
};

/**
 * struct kvblk_result - outcome of one descriptor.
 * @status: 0, or -errno: -EIO an I/O error on one of its commands (for a
 *          KVBLK_DESC_UNALIGNED store, also on the read of an edge block it
 *          shares with another object of the batch); -EAGAIN
 *          still -EAGAIN after eagain_retries resubmissions; -ENODATA the
 *          device or file ended early: the file shrank while the batch ran
 *          (a short read that made no progress; not for the last covering
 *          block of a KVBLK_DESC_UNALIGNED object, which may end at the end
 *          of the file). See "End of file" below;
 *          -ECANCELED not attempted because the call was rejected, or
 *          ended by kvblk_cancel() (or kvblk_close()) before it was issued; or the
 *          input error of the rejected descriptor. kmod loads also:
 *          -ENOLINK the path to the controller failed during the call
 *          (reset, removal; a retry may succeed); -ENOMEM, -EOPNOTSUPP or
 *          -EFAULT its plain destination could not be registered with
 *          kvblk.ko (RLIMIT_MEMLOCK, a file mapping, unmapped memory);
 *          -EINTR the caller was being killed. Staged loads (CUDA
 *          destinations) also: -EIO when a copy to the device failed; CUDA
 *          reports copy errors per stream, so this fails every object with a
 *          piece in that bounce buffer's fill (small objects share a buffer;
 *          kvblk_last_error() carries the CUDA error text).
 * @reserved: 0.
 * @bytes:  bytes transferred: @length on success (a load that
 *          KVBLK_DESC_SHORT_EOF cut at the end of a file: the bytes that
 *          exist, less than @length, possibly 0). On -ENODATA: the number
 *          of bytes from the start of the object that were read and are
 *          valid in the destination (psync, threadpool, uring, uring_cmd;
 *          0 when another command of the object failed too, for a
 *          KVBLK_DESC_UNALIGNED or staged object, and on kmod); the rest of
 *          the destination is undefined. 0 on any other failure.
 * @tag:    the descriptor's tag.
 *
 * End of file (since 0.3), one rule for loads: a target's end is its size
 * when the batch starts (a regular file is sized with fstat(2) for every
 * batch, so bytes appended since are loadable; a block device keeps its
 * capacity). A descriptor that reaches past that end is an input error: the
 * whole call is rejected before anything is read (-ERANGE, bad_index names
 * it, the others -ECANCELED), unless it is a load with KVBLK_DESC_SHORT_EOF
 * from a regular file (since 0.4): then it is cut at the end, status 0 and
 * @bytes the bytes that exist, possibly 0 (struct kvblk_desc). A file that
 * shrinks while the batch runs fails
 * only the objects whose reads meet the new end: -ENODATA with @bytes as
 * above, never a destination half written without saying how much is valid;
 * the other objects complete. A file's last size % logical_block_size bytes
 * are loadable with KVBLK_DESC_UNALIGNED (struct kvblk_desc).
 */
struct kvblk_result {
	int32_t status;
	uint32_t reserved;
	uint64_t bytes;
	uint64_t tag;
};

/**
 * enum kvblk_path - where the data went. A batch's path is STAGED when any of
 * its objects was staged, else P2P when any went straight into device
 * memory, else HOST.
 */
enum kvblk_path {
	KVBLK_PATH_HOST = 0,	/* DMA into host memory */
	KVBLK_PATH_P2P = 1,	/* DMA straight into device (GPU) memory */
	KVBLK_PATH_STAGED = 2,	/* host bounce, then a copy to the device */
	KVBLK_PATH_MAX
};

/** kvblk_path_name() - "host", "p2p", "staged"; "unknown" when out of range (since 0.2). */
const char *kvblk_path_name(int path) KVBLK_NOEXCEPT;

/**
 * struct kvblk_batch_info - optional per-call report.
 * @info_size:  sizeof(struct kvblk_batch_info), set by the caller.
 * @backend:    enum kvblk_backend that served this call (uring for stores
 *              on a kmod device); for a staged call, the backend that read
 *              into the bounce buffers.
 * @path:       enum kvblk_path of the call (see enum kvblk_path).
 * @bad_index:  index of the rejected descriptor when the call fails because
 *              of one (-EINVAL, -ERANGE, -ENOENT, -E2BIG for bounce blocks,
 *              -EOPNOTSUPP); -1 otherwise: whenever no descriptor is at
 *              fault (NULL argument, @n == 0, @n > max_descs, -EBADF,
 *              -EBADFD, -ENOMEM) and on success. Written on every call whose
 *              info_size is acceptable.
 * @failed:     descriptors with status != 0.
 * @bytes:      bytes transferred in all.
 * @commands:   read or write commands issued (resubmissions included).
 * @elapsed_ns: wall time of the call (kvblk_wait(): from kvblk_submit() to
 *              the batch's completion).
 *
 * Since 0.3 (an info_size of 0.2, KVBLK_BATCH_INFO_SIZE_V0_2, gets the
 * fields above):
 * @bytes_device: bytes moved to or from the targets: @bytes plus the
 *              covering blocks read for KVBLK_DESC_UNALIGNED edges; for
 *              stores (since 0.4), the bytes written (edge blocks whole,
 *              cut at the end of a file) plus the edge blocks read for
 *              their read-modify-writes (a block objects share, once).
 * @ticket:     the batch's ticket.
 * @user_data:  kvblk_submit_opts.user_data.
 */
struct kvblk_batch_info {
	size_t info_size;
	uint32_t backend;
	uint32_t path;
	int32_t bad_index;
	uint32_t failed;
	uint64_t bytes;
	uint64_t commands;
	uint64_t elapsed_ns;
	uint64_t bytes_device;
	uint64_t ticket;
	uint64_t user_data;
};

/* sizeof(struct kvblk_batch_info) of 0.2: the smallest info_size accepted. */
#define KVBLK_BATCH_INFO_SIZE_V0_2 (offsetof(struct kvblk_batch_info, bytes_device))

/**
 * kvblk_load_many() - read @n objects, all in flight together; synchronous.
 * @dev:     device.
 * @descs:   @n descriptors.
 * @n:       1..max_descs.
 * @results: @n results, written for every descriptor.
 * @info:    optional report (NULL to skip); set info_size first.
 *
 * Every descriptor is checked before anything is submitted. A bad one
 * fails the whole call, nothing is read, its result holds the reason,
 * the others hold -ECANCELED, and info->bad_index names it.
 * After that, an I/O error fails its own object and no other.
 *
 * Since 0.3 this is kvblk_submit() + kvblk_wait(): the batch shares the
 * rings with batches other threads submitted, and waits for a free slot
 * when max_batches are outstanding.
 *
 * Return: number of descriptors with status 0 (== @n when all succeeded).
 * Errors (whole call, nothing read):
 *  -EINVAL   NULL argument, @n == 0, or a bad descriptor: offset or length
 *            not a multiple of logical_block_size, zero length, address not
 *            aligned to mem_align (none of these three with
 *            KVBLK_DESC_UNALIGNED), offset + length overflows, registered
 *            buffer range exceeded, flags not 0 (0.2 descriptors), device
 *            memory with KVBLK_DESC_UNALIGNED or KVBLK_DESC_SHORT_EOF,
 *            KVBLK_DESC_SHORT_EOF on a store; or its destination overlaps
 *            the destination of an earlier descriptor of the call (identical
 *            included; through plain pointers, registered buffers or both,
 *            compared by address: the bytes would depend on which read
 *            completes last; a KVBLK_DESC_SHORT_EOF object's destination is
 *            the bytes it reads): bad_index names the lowest descriptor that
 *            overlaps an earlier one, kvblk_last_error() names both. Stores:
 *            two descriptors whose ranges of one target overlap, the same
 *            way (their sources may overlap; KVBLK_DESC_UNALIGNED objects
 *            whose edges only share a block do not overlap);
 *  -EBADFD   @dev was inherited through fork() (see "Processes" above);
 *  -EOPNOTSUPP (kvblk_store_many()) a descriptor's source is device memory;
 *  -ENOENT   a descriptor names an unregistered buffer id or an unknown
 *            target (added and not removed);
 *  -ESTALE   a descriptor names a buffer that kvblk_check_buffer() found
 *            replaced or unmapped;
 *  -EBADF    a load from a write-only target (info->bad_index -1, as below);
 *  -ERANGE   a descriptor reaches past the end of the device or file (a
 *            load with KVBLK_DESC_SHORT_EOF from a file is cut instead);
 *  -E2BIG    @n > max_descs; or the bounce blocks of KVBLK_DESC_UNALIGNED
 *            descriptors pass KVBLK_MAX_BOUNCE_BYTES (bad_index names the
 *            first that does not fit);
 *  -EINVAL   also: info_size below KVBLK_BATCH_INFO_SIZE_V0_2 or above
 *            64 KiB (a larger one than this library's gets the rest zeroed),
 *            unknown descriptor flags, reserved not 0;
 *  -ECANCELED the handle is shut down (kvblk_shutdown(); also while the call
 *            waited for a free batch slot; since 0.4);
 *  -ENOMEM.
 * Once its batch is queued the call returns only when the batch has ended:
 * neither a signal nor kvblk_shutdown() ends that wait.
 */
int kvblk_load_many(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n,
		    struct kvblk_result *results, struct kvblk_batch_info *info) KVBLK_NOEXCEPT;

/**
 * kvblk_store_many() - write @n objects; same shape, rules and return as
 * kvblk_load_many(), data flowing from memory to the device.
 * Extra error: -EBADF a descriptor's target was not opened (added) with
 * KVBLK_OPEN_WRITE: the whole call, info->bad_index -1, as in 0.2; or
 * (since 0.4) a KVBLK_DESC_UNALIGNED descriptor whose offset or end is not
 * a multiple of the logical block size names a write-only target (an
 * O_WRONLY fd): its edge blocks would have to be read. Nothing is written.
 * For regular files, stores may not extend the file: -ERANGE past its end
 * (create it with KVBLK_OPEN_CREATE and create_bytes).
 *
 * Unaligned stores (since 0.4): a descriptor with KVBLK_DESC_UNALIGNED may
 * have any offset, length (> 0) and source address; its unaligned head and
 * tail are read-modify-writes of their covering blocks and may end inside a
 * file's last partial block (struct kvblk_desc). Serialisation guarantee, on
 * one handle only: a store that read-modify-writes a block and every other
 * store of the handle that writes that block run one after the other, in
 * submission order, whichever threads submit them, so no store loses
 * another's bytes in a shared block; a store waiting for that is outstanding
 * (it holds a batch slot) and counted in stats.store_range_waits. Other
 * handles, processes, and loads are not ordered with it (struct kvblk_desc
 * says what that means). Errors as above, and: -E2BIG the bounce blocks of
 * the call's KVBLK_DESC_UNALIGNED objects pass KVBLK_MAX_BOUNCE_BYTES;
 * -EINVAL KVBLK_DESC_SHORT_EOF (loads only), or device memory with
 * KVBLK_DESC_UNALIGNED; the errors of open(2) (-EACCES, -EMFILE, ...) when
 * the buffered descriptor that writes a file's last partial block cannot be
 * opened (bad_index names the descriptor).
 */
int kvblk_store_many(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n,
		     struct kvblk_result *results, struct kvblk_batch_info *info) KVBLK_NOEXCEPT;

/* Every target of the device (kvblk_flush()). */
#define KVBLK_TARGET_ALL UINT32_MAX

/**
 * kvblk_flush() - make completed stores durable (since 0.3).
 * @dev:    device.
 * @target: a target id (0: kvblk_open()'s path), or KVBLK_TARGET_ALL for every
 *          target opened with KVBLK_OPEN_WRITE.
 * @flags:  0.
 *
 * Durability: a store's completion (kvblk_store_many() returning, its batch
 * reaped or waited for) says the device or file system accepted the data;
 * it may still sit in a volatile write cache (the NVMe controller's, the
 * page cache of a KVBLK_OPEN_BUFFERED target) and, for a file, the blocks a
 * store allocated (KVBLK_OPEN_CREATE makes a sparse file) are not yet on
 * disk. When kvblk_flush() returns 0, every store to the flushed targets that
 * completed before the call is on stable storage and survives a power loss,
 * with the file metadata needed to read it back (its size, its blocks):
 * fdatasync(2) of the target (a block device: the kernel sends the device a
 * cache flush; a file: its data and allocation, the journal committed), or
 * for an NVMe generic char device (uring_cmd) an NVMe Flush command of its
 * namespace. Stores still in flight during the call are not covered; flush
 * again after they complete. Loads never need it.
 *
 * Cost: one synchronous flush per target, on the calling thread, while other
 * threads' batches go on: on a device with a volatile write cache it lasts
 * as long as the device takes to write that cache out (tens of microseconds
 * when clean to many milliseconds after large stores); a file also pays a
 * journal commit. Flush once after a group of stores, not after each.
 *
 * Return: 0. Errors: -EINVAL NULL @dev or @flags not 0; -ENOENT @target is
 * not added; -EBADF @target was not opened with KVBLK_OPEN_WRITE (nothing of
 * it to flush); -EIO (and the other errors of fdatasync(2): -ENOSPC, -EDQUOT)
 * write-back of some stored data failed: which data is lost is not known,
 * store it again; an NVMe Flush the controller failed: -EIO. With
 * KVBLK_TARGET_ALL every writable target is flushed even after one fails;
 * the first error is returned and kvblk_last_error() names its target.
 */
int kvblk_flush(kvblk_dev *dev, uint32_t target, uint32_t flags) KVBLK_NOEXCEPT;

/* ------------------------------------------------- asynchronous (0.3) */

/* kvblk_submit_opts.flags */
#define KVBLK_SUBMIT_STORE	(1u << 0) /* write the objects (kvblk_store_many() rules) */
#define KVBLK_SUBMIT_PRIORITY	(1u << 1) /* ahead of every queued batch without it */
#define KVBLK_SUBMIT_NONBLOCK	(1u << 2) /* -EAGAIN instead of waiting for a free batch slot */
#define KVBLK_SUBMIT_PER_OBJECT	(1u << 3) /* one kvblk_cqe per object, then the batch's */
#define KVBLK_SUBMIT_FLAGS_ALL	(KVBLK_SUBMIT_STORE | KVBLK_SUBMIT_PRIORITY | \
				 KVBLK_SUBMIT_NONBLOCK | KVBLK_SUBMIT_PER_OBJECT)

/**
 * struct kvblk_submit_opts - options of kvblk_submit(); fill with
 * kvblk_submit_opts_init() (since 0.3).
 * @opts_size: sizeof(struct kvblk_submit_opts).
 * @flags:     KVBLK_SUBMIT_*.
 * @bad_index: out: index of the rejected descriptor when kvblk_submit()
 *             fails because of one; -1 otherwise.
 * @user_data: the caller's value, returned in every kvblk_cqe of the batch.
 * @results:   NULL, or @n results that the library writes as the objects
 *             complete (status, bytes, tag, as kvblk_load_many()). The
 *             array must stay valid until the batch's completion has been
 *             reaped or waited for. On a rejected submit it holds the
 *             rejection as kvblk_load_many() writes it.
 */
struct kvblk_submit_opts {
	size_t opts_size;
	uint32_t flags;
	int32_t bad_index;
	uint64_t user_data;
	struct kvblk_result *results;
};

/** kvblk_submit_opts_init() - zero @opts and set opts_size to @size (since 0.3). */
void kvblk_submit_opts_init(struct kvblk_submit_opts *opts, size_t size) KVBLK_NOEXCEPT;

/**
 * kvblk_submit() - queue a batch of @n objects and return (since 0.3).
 * @dev:    device.
 * @descs:  @n descriptors, checked exactly as kvblk_load_many() checks them
 *          before anything is queued; the array is free again on return.
 * @n:      1..max_descs.
 * @opts:   options (NULL: a load, no results array, user_data 0).
 * @ticket: receives the batch's ticket: nonzero, unique on this handle
 *          (never reused).
 *
 * Destinations (sources for stores) belong to the library until the batch's
 * completion is reaped (kvblk_reap()) or waited for (kvblk_wait()); so do the
 * registered buffers it names (kvblk_unregister_buffer() gives -EBUSY) and
 * its targets (kvblk_remove_target() gives -EBUSY). Batches progress in
 * submission order, KVBLK_SUBMIT_PRIORITY ones first; commands of several
 * batches are in flight together (enum kvblk_async).
 *
 * KVBLK_SUBMIT_PER_OBJECT: each object also gets a KVBLK_CQE_OBJECT entry,
 * before the batch's entry, once its results entry is written and its bytes
 * are in place. It comes as soon as the backend knows the object's result.
 * On the kmod backend that is as the object's own kvblk.ko descriptors
 * complete when the module posts one CQE per descriptor (its features have
 * KVBLK_FEAT_URING_PER_OBJECT: a kernel whose io_uring has multishot
 * commands with provided buffers, such as 7.2; each descriptor costs one
 * more CQE and a 32-byte record on the library's ring), else all when the
 * batch ends. The records come from one pool of 2048 per process:
 * when it runs dry (more than 2048 descriptors completing between two
 * turns of the ring's thread, over all per-object batches) kvblk.ko stops
 * that batch's records, and its remaining objects get their entries when
 * it ends. Batches with a KVBLK_DESC_UNALIGNED object, and batches split
 * over several lanes, get every object's entry when they end. Either way
 * every object gets exactly one, and the batch entry comes last.
 *
 * Return: 0. Errors (nothing queued): those of kvblk_load_many() for the
 * batch (opts->bad_index names a bad descriptor); -EINVAL unknown flag, or
 * opts_size below sizeof(struct kvblk_submit_opts) of 0.3, above 64 KiB, or
 * larger with non-zero unknown bytes; -EAGAIN with KVBLK_SUBMIT_NONBLOCK while
 * max_batches are outstanding; -EBADF a store on a target not opened for
 * writing; -ECANCELED the handle is shut down (kvblk_shutdown(), also while
 * this call waited for a free batch slot); -EAGAIN or -ENOMEM the device's
 * dispatch thread cannot be started.
 */
int kvblk_submit(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n,
		 struct kvblk_submit_opts *opts, uint64_t *ticket) KVBLK_NOEXCEPT;

/* kvblk_cqe.flags */
#define KVBLK_CQE_BATCH		(1u << 0) /* the batch is over: its last entry */
#define KVBLK_CQE_OBJECT	(1u << 1) /* one object (KVBLK_SUBMIT_PER_OBJECT) */

/**
 * struct kvblk_cqe - one completion (since 0.3). 64 bytes.
 * @ticket:     kvblk_submit()'s ticket.
 * @user_data:  kvblk_submit_opts.user_data.
 * @status:     batch: 0 when every object succeeded, else the -errno of the
 *              first failed object (in descriptor order); object: its status.
 * @flags:      KVBLK_CQE_BATCH or KVBLK_CQE_OBJECT.
 * @failed:     batch: objects with status != 0; object: 0 or 1.
 * @index:      object: its descriptor index; batch: the number of objects.
 * @bytes:      bytes transferred (batch: all objects; object: its own).
 * @tag:        object: its descriptor's tag; batch: 0.
 * @path:       enum kvblk_path.
 * @backend:    enum kvblk_backend that served it (the first, when a batch
 *              was served by several).
 * @elapsed_ns: batch: from kvblk_submit() to completion; object: 0.
 */
struct kvblk_cqe {
	uint64_t ticket;
	uint64_t user_data;
	int32_t status;
	uint32_t flags;
	uint32_t failed;
	uint32_t index;
	uint64_t bytes;
	uint64_t tag;
	uint32_t path;
	uint32_t backend;
	uint64_t elapsed_ns;
};

/**
 * kvblk_reap() - take completions (since 0.3).
 * @dev:          device.
 * @cqes:         room for @max entries.
 * @max:          >= 1.
 * @min_complete: wait until at least this many entries are available
 *                (<= @max), or until @timeout_ns passes; 0 never waits.
 * @timeout_ns:   CLOCK_MONOTONIC ns to wait at most; < 0 waits without limit.
 *
 * Entries come in completion order; a batch's object entries come before
 * its batch entry. Taking a batch entry ends the batch: its ticket is no
 * longer outstanding and its memory is the caller's again.
 * A wait for @min_complete entries also ends early, taking what is there,
 * when a signal handler runs on the calling thread or when kvblk_shutdown()
 * is called (on any thread; after it, the call does not wait at all).
 * Return: entries taken, 0..@max (fewer than @min_complete when the timeout
 * passed or the wait ended early). Errors (nothing taken): -EINVAL NULL
 * argument, @max 0, @min_complete > @max; -EINTR a signal handler ran on the
 * calling thread while it waited (installed with SA_RESTART or not; since
 * 0.4); -ECANCELED fewer than @min_complete entries and the handle is shut
 * down (kvblk_shutdown(); since 0.4); -EBADFD inherited through fork().
 */
int kvblk_reap(kvblk_dev *dev, struct kvblk_cqe *cqes, uint32_t max, uint32_t min_complete,
	       int64_t timeout_ns) KVBLK_NOEXCEPT;

/**
 * kvblk_wait() - wait for the batch @ticket and take its completion (since 0.3).
 * @timeout_ns: as kvblk_reap(); 0 only checks.
 * @info:       optional report of the batch (as kvblk_load_many()).
 *
 * Takes every entry of the batch (its object entries too): kvblk_reap() will
 * not see them. Return: number of objects with status 0. Errors: -ETIME the
 * timeout passed (the batch stays outstanding); -ENOENT @ticket is not
 * outstanding (never submitted, or already reaped or waited for); -EINVAL
 * NULL @dev or @info with a bad info_size; -EINTR a signal handler ran on the
 * calling thread while it waited (installed with SA_RESTART or not; the
 * batch stays outstanding; since 0.4); -ECANCELED the batch has not completed
 * and the handle is shut down (kvblk_shutdown(): the call does not wait, and
 * one waiting returns; the batch stays outstanding, kvblk_close() ends it;
 * since 0.4); -ENOMEM; -EBADFD inherited through fork().
 */
int kvblk_wait(kvblk_dev *dev, uint64_t ticket, int64_t timeout_ns,
	       struct kvblk_batch_info *info) KVBLK_NOEXCEPT;

/**
 * kvblk_cancel() - ask the batch @ticket to end early (since 0.3).
 * Objects none of whose commands were issued end with -ECANCELED; objects
 * with commands in flight finish as they complete (a running staged batch,
 * KVBLK_PATH_STAGED: its objects not yet read into a bounce buffer, seen at
 * the start of its next round of bounce-buffer fills; since 0.4). The batch still completes
 * (reap or wait for it): only then are its destinations the caller's again.
 * Return: 0 request taken (also when every object was already issued).
 * Errors: -ENOENT @ticket is not outstanding or its completion is already
 * queued; -EINVAL NULL @dev.
 */
int kvblk_cancel(kvblk_dev *dev, uint64_t ticket) KVBLK_NOEXCEPT;

/**
 * kvblk_shutdown() - wake every thread waiting on @dev and keep later calls
 * from waiting, before kvblk_close() (since 0.4).
 *
 * Unlike every other call, it may run concurrently with any call on @dev
 * but kvblk_close(), from any thread (a signal handler excepted: it takes a
 * lock). From the moment it returns:
 *  - every kvblk_reap() and kvblk_wait() on @dev that was waiting has
 *    returned or is returning at once: kvblk_reap() with the entries
 *    available (-ECANCELED when none), kvblk_wait() with the batch's result
 *    if it has completed, else -ECANCELED (the batch stays outstanding);
 *  - later calls never wait: a kvblk_reap() that would wait (min_complete
 *    more than the entries there, a timeout other than 0) takes what is
 *    there, -ECANCELED when that is none; kvblk_wait() takes a completed
 *    batch or returns -ECANCELED;
 *  - kvblk_submit(), kvblk_load_many(), kvblk_store_many() and
 *    kvblk_check_buffer() fail with -ECANCELED, nothing queued, also those
 *    that were waiting for a free batch slot (max_batches).
 * The batches outstanding are not cancelled and go on: kvblk_cancel() them,
 * or let kvblk_close() cancel what is queued and wait for what is in flight.
 * A kvblk_load_many() or kvblk_store_many() whose batch was queued before
 * still waits for its end. Other calls (registration, targets, stats,
 * kvblk_cancel()) work as before. The shutdown cannot be undone: the handle
 * is only good for draining completions and kvblk_close().
 *
 * The way to stop a program's completion threads: set the program's own
 * stop flag, call kvblk_shutdown(), join the threads (each sees -ECANCELED
 * from its wait, or the flag), then kvblk_close(). No wake-up is lost: a
 * thread that was about to wait when kvblk_shutdown() ran does not wait.
 *
 * Return: 0, also when called again. Errors: -EINVAL NULL @dev; -EBADFD
 * inherited through fork() (it returns at once and touches nothing).
 */
int kvblk_shutdown(kvblk_dev *dev) KVBLK_NOEXCEPT;

/**
 * kvblk_event_fd() - an eventfd that is readable while completions wait to
 * be reaped (since 0.3). Owned by @dev (closed by kvblk_close()); poll it
 * with poll/epoll/asyncio, then call kvblk_reap(). Reading it is allowed but
 * not needed: kvblk_reap() clears it when it empties the queue. Completions
 * taken by kvblk_wait() do not make it readable. Return: the fd; -EINVAL NULL @dev.
 */
int kvblk_event_fd(kvblk_dev *dev) KVBLK_NOEXCEPT;

/* ----------------------------------------------------------------- stats */

/* Latency histograms: bucket i counts events with latency in [2^i, 2^(i+1)) us;
 * bucket 0 also counts < 1 us, the last bucket everything above. */
#define KVBLK_LAT_BUCKETS 32

/**
 * struct kvblk_stats - counters since open or the last kvblk_reset_stats().
 * @stats_size:        sizeof(struct kvblk_stats), set by the caller.
 * @batches:           successful load_many/store_many calls (not rejected).
 * @objects:           descriptors in those calls.
 * @commands:          read/write commands issued (resubmissions included).
 * @bytes_read:        bytes loaded by objects that succeeded (partial
 *                     progress of failed objects is not counted).
 * @bytes_written:     bytes stored.
 * @rejected_batches:  calls rejected by input checks (nothing submitted).
 * @errors_io:         objects failed with -EIO.
 * @errors_eagain:     objects failed with -EAGAIN after every retry.
 * @errors_other:      objects failed with any other errno.
 * @eagain_retries:    commands resubmitted after -EAGAIN.
 * @short_resubmits:   commands resubmitted for the rest of a short transfer.
 * @memlock_fallbacks: registrations that could not become io_uring fixed
 *                     buffers or kvblk.ko registrations (RLIMIT_MEMLOCK) and
 *                     use plain reads (kmod: per-call registration) instead.
 * @buffered_batches:  batches served through the page cache (KVBLK_OPEN_BUFFERED).
 * @cq_overflows:      io_uring completion queue overflows observed (the
 *                     kernel kept the completions; counted for tuning).
 * @inflight_peak:     most commands in flight at once (not reported by kmod
 *                     loads: see the module's sysfs stats/inflight_peak).
 * @batches_by_backend: batches per enum kvblk_backend that served them.
 * @batch_lat_hist:    per-batch latency histogram (see KVBLK_LAT_BUCKETS).
 * @cmd_lat_hist:      per-command latency histogram (uring backends only).
 *
 * Since 0.2 (a caller built against 0.1 passes the smaller stats_size and
 * gets the fields above):
 * @batches_by_path:    batches per enum kvblk_path they reported.
 * @bytes_by_path:      bytes of succeeded objects per enum kvblk_path of their
 *                      own destination (a staged batch's host objects count
 *                      as host).
 * @staged_copies:      host-to-device copies issued by the staged path (one
 *                      per bounce-buffer fill).
 * @staging_pool_bytes: bounce memory allocated now (a level, not reset):
 *                      at most buffers * buffer_bytes of kvblk_set_staging(),
 *                      rounded up to pages.
 * @p2p_fallbacks:      CUDA registrations on a kmod device that are staged
 *                      because kvblk.ko lacks KVBLK_FEAT_MEM_CUDA.
 *
 * Since 0.3 (KVBLK_STATS_SIZE_V0_2 gets the fields above):
 * @priority_batches:   batches submitted with KVBLK_SUBMIT_PRIORITY.
 * @cancelled_objects:  objects ended with -ECANCELED by kvblk_cancel().
 * @outstanding_peak:   most batches outstanding at once.
 * @unaligned_objects:  objects loaded with KVBLK_DESC_UNALIGNED that needed
 *                      a bounced edge (since 0.4 also loads whose end
 *                      KVBLK_DESC_SHORT_EOF cut inside a block).
 * @unaligned_extra_bytes: bytes of covering blocks read beyond what those
 *                      objects wanted.
 *
 * Since 0.4 (KVBLK_STATS_SIZE_V0_3 gets the fields above):
 * @unaligned_stores:   objects stored with KVBLK_DESC_UNALIGNED that went
 *                      through the bounce area (an edge block
 *                      read-modify-written, or a misaligned source copied),
 *                      succeeded ones only.
 * @rmw_read_bytes:     bytes of edge blocks read to be written back by those
 *                      stores (a block that objects of one batch share
 *                      counts once; cut at the end of a file).
 * @store_range_waits:  store batches that had to wait for earlier stores of
 *                      the handle before they started, because one of the
 *                      two read-modify-writes a block the other writes.
 * @short_eof_objects:  loads that KVBLK_DESC_SHORT_EOF cut at the end of a
 *                      file (result.bytes < length), succeeded ones only.
 */
struct kvblk_stats {
	size_t stats_size;
	uint64_t batches;
	uint64_t objects;
	uint64_t commands;
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t rejected_batches;
	uint64_t errors_io;
	uint64_t errors_eagain;
	uint64_t errors_other;
	uint64_t eagain_retries;
	uint64_t short_resubmits;
	uint64_t memlock_fallbacks;
	uint64_t buffered_batches;
	uint64_t cq_overflows;
	uint64_t inflight_peak;
	uint64_t batches_by_backend[KVBLK_BACKEND_MAX];
	uint64_t batch_lat_hist[KVBLK_LAT_BUCKETS];
	uint64_t cmd_lat_hist[KVBLK_LAT_BUCKETS];
	uint64_t batches_by_path[KVBLK_PATH_MAX];
	uint64_t bytes_by_path[KVBLK_PATH_MAX];
	uint64_t staged_copies;
	uint64_t staging_pool_bytes;
	uint64_t p2p_fallbacks;
	uint64_t priority_batches;
	uint64_t cancelled_objects;
	uint64_t outstanding_peak;
	uint64_t unaligned_objects;
	uint64_t unaligned_extra_bytes;
	uint64_t unaligned_stores;
	uint64_t rmw_read_bytes;
	uint64_t store_range_waits;
	uint64_t short_eof_objects;
};

/* sizeof(struct kvblk_stats) of 0.1: the smallest stats_size accepted. */
#define KVBLK_STATS_SIZE_V0_1 (offsetof(struct kvblk_stats, batches_by_path))
/* sizeof(struct kvblk_stats) of 0.2. */
#define KVBLK_STATS_SIZE_V0_2 (offsetof(struct kvblk_stats, priority_batches))
/* sizeof(struct kvblk_stats) of 0.3 (since 0.4). */
#define KVBLK_STATS_SIZE_V0_3 (offsetof(struct kvblk_stats, unaligned_stores))

/**
 * kvblk_get_stats() - copy the counters; set stats->stats_size first.
 * A stats_size between KVBLK_STATS_SIZE_V0_1 and sizeof(struct kvblk_stats)
 * gets the first stats_size bytes; bytes beyond what this library knows are zeroed.
 * Errors: -EINVAL NULL argument or stats_size below KVBLK_STATS_SIZE_V0_1 or
 * above 64 KiB.
 */
int kvblk_get_stats(kvblk_dev *dev, struct kvblk_stats *stats) KVBLK_NOEXCEPT;

/** kvblk_reset_stats() - zero every counter. Errors: -EINVAL NULL @dev. */
int kvblk_reset_stats(kvblk_dev *dev) KVBLK_NOEXCEPT;

/* ------------------------------------------- process-wide defaults (0.4) */

/**
 * DOC: process-wide defaults (since 0.4)
 *
 * An option left 0 in struct kvblk_open_opts (and kvblk_set_staging()'s 0 arguments) takes
 * the process's default for it. The defaults are one table in the library, each entry with a
 * name, an environment variable and a built-in value (docs/defaults.md lists them, generated
 * from this table):
 *
 *   name                  variable                    built-in     range
 *   backend               KVBLK_BACKEND               auto         auto, uring, threadpool,
 *                                                                  psync, kmod, uring_cmd
 *   queue_depth           KVBLK_QUEUE_DEPTH           64           1..4096
 *   rings                 KVBLK_RINGS                 1            1..64
 *   threads               KVBLK_THREADS               8            1..64
 *   max_cmd_bytes         KVBLK_MAX_CMD_BYTES         131072       4096..1 GiB
 *   max_descs             KVBLK_MAX_DESCS             65536        1..2^20
 *   max_batches           KVBLK_MAX_BATCHES           256          1..65536
 *   eagain_retries        KVBLK_EAGAIN_RETRIES        16           1..65536
 *   staging_buffers       KVBLK_STAGING_BUFFERS       4            1..64
 *   staging_buffer_bytes  KVBLK_STAGING_BUFFER_BYTES  8388608      4096..1 GiB
 *
 * The effective default is, first to last: the value the program set with
 * kvblk_set_default(); else the environment variable, read at each use (a variable set in
 * the process before a kvblk_open() counts); else the built-in value. kvblk_open() takes a
 * snapshot of every default when it starts: a later change affects later opens only.
 * Variables hold a decimal number, a size with a suffix K, M, G (powers of 1024; KiB, MiB,
 * GiB too) for the byte values, or a backend's name for KVBLK_BACKEND; empty means unset. A
 * variable that does not parse or is out of range makes every kvblk_open() fail with
 * -EINVAL naming it (kvblk_get_default() too), until it is fixed or the program sets that
 * default. Python's kvblk.defaults reads and sets the same table through these calls.
 *
 * How each applies: backend replaces KVBLK_BACKEND_AUTO in kvblk_open_opts.backend (an
 * explicit backend is never replaced; a default of auto chooses as AUTO does); rings is
 * kvblk_open_opts.workers for uring and uring_cmd, threads for threadpool; max_cmd_bytes
 * applies to every backend but kmod, which splits objects at kvblk.ko's own limit unless the
 * default was set (by the program or the variable); staging_* size the staged path's pool
 * (kvblk_set_staging()) of devices opened afterwards.
 */

/* kvblk_default_info.source */
enum kvblk_default_source {
	KVBLK_DEFAULT_BUILTIN = 0,	/* the library's built-in value */
	KVBLK_DEFAULT_ENV = 1,		/* the environment variable */
	KVBLK_DEFAULT_SET = 2,		/* kvblk_set_default() */
};

/**
 * struct kvblk_default_info - one process-wide default (since 0.4).
 * @info_size: sizeof(struct kvblk_default_info), set by the caller.
 * @name:      "queue_depth", ... (static storage, never freed).
 * @env:       its environment variable, "KVBLK_QUEUE_DEPTH".
 * @unit:      what the value counts: "backend" (an enum kvblk_backend), "commands",
 *             "rings", "threads", "bytes", "descriptors", "batches", "retries", "buffers".
 * @doc:       one sentence: what it sets.
 * @builtin:   the built-in value.
 * @min, @max: the range kvblk_set_default() and the variable accept.
 * @value:     the effective value now (@builtin when the variable is invalid).
 * @source:    enum kvblk_default_source of @value.
 * @error:     0, or -EINVAL: the variable is set but invalid (kvblk_open() fails meanwhile).
 */
struct kvblk_default_info {
	size_t info_size;
	const char *name;
	const char *env;
	const char *unit;
	const char *doc;
	uint64_t builtin;
	uint64_t min;
	uint64_t max;
	uint64_t value;
	uint32_t source;
	int32_t error;
};

/**
 * kvblk_get_default() - the effective process-wide default @name into *@value (since 0.4).
 * Errors: -EINVAL NULL argument, or the variable of @name is set and invalid
 * (kvblk_last_error() names it and says why); -ENOENT no default is called @name.
 */
int kvblk_get_default(const char *name, uint64_t *value) KVBLK_NOEXCEPT;

/**
 * kvblk_set_default() - set the process-wide default @name to @value for the kvblk_open()
 * calls that start afterwards, on every thread (since 0.4). It wins over the environment
 * variable until kvblk_reset_default(). Thread safe.
 * Errors: -EINVAL NULL @name, or @value outside the default's range (kvblk_last_error()
 * gives the range; nothing changed); -ENOENT no default is called @name.
 */
int kvblk_set_default(const char *name, uint64_t value) KVBLK_NOEXCEPT;

/**
 * kvblk_reset_default() - forget what kvblk_set_default() set for @name, or for every
 * default when @name is NULL: the environment variable or the built-in value applies again
 * (since 0.4). Errors: -ENOENT no default is called @name.
 */
int kvblk_reset_default(const char *name) KVBLK_NOEXCEPT;

/**
 * kvblk_get_default_info() - describe default number @index, 0 and up, in table order
 * (since 0.4): iterate until -ENOENT to list them all. An info_size above this library's
 * struct gets the rest zeroed (up to 64 KiB).
 * Errors: -EINVAL NULL @info or info_size below sizeof(struct kvblk_default_info) of 0.4 or
 * above 64 KiB; -ENOENT @index is past the last default.
 */
int kvblk_get_default_info(uint32_t index, struct kvblk_default_info *info) KVBLK_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* KVBLK_KVBLK_H */

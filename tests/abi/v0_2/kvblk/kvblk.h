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
 * Thread safety: one kvblk_dev may be used from several threads; calls of
 * kvblk_load_many()/kvblk_store_many() on one device are serialised inside
 * the library (open one device per submitting thread for parallel callers).
 * Registration calls may run concurrently with loads.
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
#define KVBLK_VERSION_MINOR 2
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
 *                            environment variable KVBLK_BACKEND (auto|uring|
 *                            threadpool|psync|kmod|uring_cmd) overrides AUTO only.
 * @KVBLK_BACKEND_URING:      io_uring, O_DIRECT, every object of a batch in
 *                            flight together up to the queue depth, objects
 *                            split into commands of max_cmd_bytes; fixed
 *                            buffers for registered destinations; @workers rings
 *                            on @workers threads.
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
 *                            with -EOPNOTSUPP). The module only reads:
 *                            kvblk_store_many() on a kmod device (opened with
 *                            KVBLK_OPEN_WRITE) is served by the uring backend on
 *                            the same device, and is reported and counted as
 *                            uring (kvblk_batch_info.backend,
 *                            stats.batches_by_backend).
 * @KVBLK_BACKEND_URING_CMD:  NVMe Read/Write commands passed through io_uring
 *                            (IORING_OP_URING_CMD, 128-byte SQEs) to the
 *                            namespace's generic char device: @path is
 *                            /dev/ngXnY, or /dev/nvmeXnY, which is mapped to its
 *                            /dev/ngXnY (backend_reason names it). A partition,
 *                            another block device or a file: -EOPNOTSUPP.
 *                            Commands of max_cmd_bytes, @queue_depth in flight per
 *                            ring, @workers rings; no fixed buffers. Needs what
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
#define KVBLK_OPEN_CREATE	(1u << 2) /* create a regular file of create_bytes, or extend a shorter one */
#define KVBLK_OPEN_FLAGS_ALL	(KVBLK_OPEN_WRITE | KVBLK_OPEN_BUFFERED | KVBLK_OPEN_CREATE)

/* Defaults and limits; 0 in an option means "the default". */
#define KVBLK_DEFAULT_QUEUE_DEPTH	64u		/* commands in flight per ring */
#define KVBLK_DEFAULT_WORKERS		1u		/* rings (uring) */
#define KVBLK_DEFAULT_THREADS		8u		/* threads (threadpool) */
#define KVBLK_DEFAULT_MAX_CMD_BYTES	(128u << 10)	/* bytes per command */
#define KVBLK_DEFAULT_MAX_DESCS		65536u		/* descriptors per call */
#define KVBLK_MAX_QUEUE_DEPTH		4096u
#define KVBLK_MAX_WORKERS		64u
#define KVBLK_MAX_DESCS_LIMIT		(1u << 20)
#define KVBLK_DEFAULT_EAGAIN_RETRIES	16u

/**
 * struct kvblk_open_opts - options of kvblk_open(); fill with kvblk_open_opts_init().
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
 *                  LBAs and (queue/max_segments - 1) pages.
 * @max_descs:      descriptors accepted per call, 1..2^20; default 65536.
 * @eagain_retries: resubmissions of a command that completes with -EAGAIN
 *                  before its object fails with -EAGAIN; default 16.
 * @create_bytes:   size of the file created with KVBLK_OPEN_CREATE (> 0).
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
};

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
 * All I/O uses O_DIRECT unless KVBLK_OPEN_BUFFERED is given.
 * Errors: -EINVAL bad option (out of range, unknown flag, opts_size too small,
 * or larger with non-zero bytes this library does not know);
 * -ENOENT, -EACCES, -EISDIR and other open(2) errors of @path; -ENOTSUP
 * @path is neither a block device, a regular file nor an NVMe generic char
 * device; -EOPNOTSUPP the file system refuses O_DIRECT (try
 * KVBLK_OPEN_BUFFERED) or the requested backend cannot serve @path
 * (kvblk_last_error() says why): kmod with kvblk.ko not loaded or refusing
 * the device, uring_cmd on anything but a whole NVMe namespace, kmod or
 * uring_cmd with KVBLK_OPEN_BUFFERED, an NVMe generic char device with any
 * backend but uring_cmd; -ENOSYS io_uring is not available (uring
 * backends); -ENOMEM.
 */
int kvblk_open(const char *path, const struct kvblk_open_opts *opts, kvblk_dev **out) KVBLK_NOEXCEPT;

/**
 * kvblk_close() - wait for nothing (loads are synchronous), unregister every
 * buffer, close the device. NULL is a no-op.
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
 *                      while its stores through uring use the requested depth).
 * @workers:            effective rings or threads.
 * @max_descs:          effective descriptor limit per call.
 * @backend_reason:     why @backend was chosen, NUL-terminated.
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
};

/**
 * kvblk_get_info() - fill @info; set info->info_size = sizeof(*info) first.
 * Errors: -EINVAL NULL argument or info_size too small.
 */
int kvblk_get_info(kvblk_dev *dev, struct kvblk_dev_info *info) KVBLK_NOEXCEPT;

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
 */
enum kvblk_mem_kind {
	KVBLK_MEM_HOST = 0,
	KVBLK_MEM_CUDA = 1,
	KVBLK_MEM_DMABUF = 2,
	KVBLK_MEM_P2PDMA = 3,
};

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
 * registered). If the kernel refuses (usually RLIMIT_MEMLOCK: the message
 * names the limit), the buffer still works (plain reads; kmod: per-call
 * registration as for plain pointers) and stats.memlock_fallbacks counts it;
 * the call then returns 0 and kvblk_last_error() holds that message. At most
 * 1024 buffers per device (the staging pool below takes up to
 * KVBLK_MAX_STAGING_BUFFERS of them).
 *
 * KVBLK_MEM_CUDA (since 0.2). On a kmod device whose kvblk.ko reports
 * KVBLK_FEAT_MEM_CUDA the range is registered with the module (nvidia-p2p):
 * @addr must be 64 KiB aligned (the GPU page size), the range is rounded up to
 * a multiple of 64 KiB and must lie inside one allocation; loads DMA straight
 * into it and report KVBLK_PATH_P2P. If the module refuses, the call fails
 * with its errno (no fallback). Everywhere else (userspace backends, or a
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
 * @addr is not CUDA device memory; -EOPNOTSUPP kind not supported by this
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
 * KVBLK_MEM_DMABUF (-EBADF not a dma-buf, ...).
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
 * @buffers:      bounce buffers (each its own copy stream), 1..64; 0 = default 4.
 * @buffer_bytes: bytes per buffer (the largest read into one; rounded down to
 *                a multiple of logical_block_size, at least one block),
 *                logical_block_size..1 GiB; 0 = default 8 MiB.
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

/* ----------------------------------------------------------- load/store */

/**
 * struct kvblk_desc - one object (a KV-cache blob) to load or store.
 * @offset: byte offset on the device or file; multiple of logical_block_size.
 * @length: bytes; > 0, multiple of logical_block_size.
 * @addr:   with @buf_id == KVBLK_BUF_NONE: host virtual address of the
 *          destination (source for stores), aligned to mem_align;
 *          otherwise byte offset into registered buffer @buf_id, with
 *          base + @addr aligned to mem_align.
 * @buf_id: registered buffer id, or KVBLK_BUF_NONE.
 * @flags:  must be 0.
 * @tag:    caller's tag; reported back in the result.
 */
struct kvblk_desc {
	uint64_t offset;
	uint64_t length;
	uint64_t addr;
	uint32_t buf_id;
	uint32_t flags;
	uint64_t tag;
};

/**
 * struct kvblk_result - outcome of one descriptor.
 * @status: 0, or -errno: -EIO an I/O error on one of its commands; -EAGAIN
 *          still -EAGAIN after eagain_retries resubmissions; -ENODATA the
 *          device or file ended early (short read that made no progress);
 *          -ECANCELED not attempted because the call was rejected; or the
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
 * @bytes:  bytes transferred: @length on success, 0 on failure.
 * @tag:    the descriptor's tag.
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
 * @bad_index:  index of the first rejected descriptor when the call returns
 *              -EINVAL, -ERANGE or -ENOENT because of one; -1 otherwise.
 * @failed:     descriptors with status != 0.
 * @bytes:      bytes transferred in all.
 * @commands:   read or write commands issued (resubmissions included).
 * @elapsed_ns: wall time of the call.
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
};

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
 * Return: number of descriptors with status 0 (== @n when all succeeded).
 * Errors (whole call, nothing read):
 *  -EINVAL   NULL argument, @n == 0, or a bad descriptor: offset or length
 *            not a multiple of logical_block_size, zero length, address not
 *            aligned to mem_align, offset + length overflows, registered
 *            buffer range exceeded, flags not 0;
 *  -EOPNOTSUPP (kvblk_store_many()) a descriptor's source is device memory;
 *  -ENOENT   a descriptor names an unregistered buffer id;
 *  -ERANGE   a descriptor reaches past the end of the device or file;
 *  -E2BIG    @n > max_descs;
 *  -ENOMEM.
 */
int kvblk_load_many(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n,
		    struct kvblk_result *results, struct kvblk_batch_info *info) KVBLK_NOEXCEPT;

/**
 * kvblk_store_many() - write @n objects; same shape, rules and return as
 * kvblk_load_many(), data flowing from memory to the device.
 * Extra error: -EBADF the device was not opened with KVBLK_OPEN_WRITE.
 * For regular files, stores may not extend the file: -ERANGE past its end
 * (create it with KVBLK_OPEN_CREATE and create_bytes).
 */
int kvblk_store_many(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n,
		     struct kvblk_result *results, struct kvblk_batch_info *info) KVBLK_NOEXCEPT;

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
};

/* sizeof(struct kvblk_stats) of 0.1: the smallest stats_size accepted. */
#define KVBLK_STATS_SIZE_V0_1 (offsetof(struct kvblk_stats, batches_by_path))

/**
 * kvblk_get_stats() - copy the counters; set stats->stats_size first.
 * A stats_size between KVBLK_STATS_SIZE_V0_1 and sizeof(struct kvblk_stats)
 * gets the first stats_size bytes; bytes beyond what this library knows are zeroed.
 * Errors: -EINVAL NULL argument or stats_size below KVBLK_STATS_SIZE_V0_1.
 */
int kvblk_get_stats(kvblk_dev *dev, struct kvblk_stats *stats) KVBLK_NOEXCEPT;

/** kvblk_reset_stats() - zero every counter. Errors: -EINVAL NULL @dev. */
int kvblk_reset_stats(kvblk_dev *dev) KVBLK_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* KVBLK_KVBLK_H */

/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * kvblk: batched multi-object NVMe reads into registered memory.
 *
 * This header is the contract between kvblk.ko and userspace. It follows
 * Documentation/driver-api/ioctl.rst and Documentation/process/botching-up-ioctls.rst:
 * fixed-size, naturally aligned structs; pointers carried as __u64; every
 * struct starts with @size (bytes the caller filled in) and @flags; reserved
 * fields must be zero; numbers are _IO*-encoded with the magic 0xBA
 * (unused in Documentation/userspace-api/ioctl/ioctl-number.rst).
 *
 * Model
 * -----
 * Each open of /dev/kvblk is a context. A context attaches one target, or
 * several (KVBLK_ATTACH_F_ADD_TARGET, "Several targets per context"
 * below), each given as an fd the caller already holds: a block device (an NVMe
 * namespace, a partition, an md or dm device, loop, virtio-blk, ...) or a
 * regular file on a file system with direct I/O (ext4, xfs). Engines
 * serve the targets, chosen at attach (enum kvblk_engine):
 *  - the block-layer engine, the default everywhere: bios to the block
 *    device (KVBLK_ENGINE_BIO) or direct-I/O reads through the file system
 *    (KVBLK_ENGINE_FILE); the block layer and the file system split,
 *    map, check limits, apply partition offsets, throttle and account,
 *    as for pread(O_DIRECT) on the same fd. It serves every block device
 *    and every regular file, and destinations with struct pages (host
 *    memory; P2PDMA pages on a queue that takes them).
 *  - the PRP engine (KVBLK_ENGINE_PRP): NVMe Read passthrough with PRPs
 *    built by kvblk on a namespace (or partition) of an nvme-pci
 *    controller. On such a target attached without a flag it serves the
 *    destinations without struct pages (CUDA through nvidia-p2p, dma-buf),
 *    object by object beside the block layer; with
 *    KVBLK_ATTACH_F_ENGINE_PRP it serves all of them (an opt-in).
 * Each target has its own engines; each batch reports which served it.
 * Destination memory is registered once (pinned; DMA-mapped for the NVMe
 * controller where the PRP engine serves it) and named by a buffer id.
 * KVBLK_IOC_LOAD_MANY then reads a batch of objects, each described by one
 * struct kvblk_io_desc, with all of their commands in flight together. Every
 * descriptor gets its own status.
 *
 * Struct growth (iommufd rules)
 * -----------------------------
 * @size smaller than the first version of a struct: -EINVAL.
 * @size larger than the kernel knows: accepted only if every byte past the
 * kernel's struct is zero, else -E2BIG. @size above the page size (4096 on
 * x86-64): -E2BIG, whatever the bytes (as clone3() and openat2() do). Output
 * fields are written back only up to min(@size, kernel size).
 *
 * The kernel matches an ioctl number on its type, number and direction and
 * ignores its size bits, which encode the first version of each struct: a
 * struct grows through @size, never through a new number.
 *
 * Errors common to every ioctl
 * ----------------------------
 * -EBADFD  the caller's address space is not the one that opened the
 *          context (a fork() child, an fd passed to another process): see
 *          "Processes and remapped host buffers" at the end; checked first.
 * -ENOTTY  unknown ioctl number.
 * -EFAULT  a user pointer (the argument, @descs, @results, @addr) is not
 *          readable or writable.
 * -EINVAL  @size too small, unknown bit in @flags, a reserved field not zero.
 * -E2BIG   @size larger than the kernel's struct with a non-zero tail, or
 *          larger than the page size.
 */
#ifndef _UAPI_LINUX_KVBLK_H
#define _UAPI_LINUX_KVBLK_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KVBLK_IOC_MAGIC 0xBA

/* Version of this interface; bumped when an ioctl or struct is added. */
#define KVBLK_API_VERSION 2

/*
 * Feature bits returned by KVBLK_IOC_GET_FEATURES (a __u64).
 * @KVBLK_FEAT_PRP_ENGINE:  NVMe Read passthrough with module-built PRPs on
 *                          nvme-pci namespaces.
 * @KVBLK_FEAT_BIO_ENGINE:  block-layer engine for block devices (any block
 *                          device; KVBLK_ATTACH_F_ENGINE_BIO).
 * @KVBLK_FEAT_FILE_ENGINE: block-layer engine for regular files (direct I/O
 *                          through the file system).
 * @KVBLK_FEAT_MEM_HOST:    KVBLK_MEM_HOST registrations.
 * @KVBLK_FEAT_MEM_CUDA:    KVBLK_MEM_CUDA registrations (nvidia-p2p found).
 * @KVBLK_FEAT_MEM_DMABUF:  KVBLK_MEM_DMABUF registrations.
 * @KVBLK_FEAT_MEM_P2PDMA:  KVBLK_MEM_P2PDMA registrations (CONFIG_PCI_P2PDMA).
 */
#define KVBLK_FEAT_PRP_ENGINE	(1ULL << 0)
#define KVBLK_FEAT_BIO_ENGINE	(1ULL << 1)
#define KVBLK_FEAT_MEM_HOST	(1ULL << 2)
#define KVBLK_FEAT_MEM_CUDA	(1ULL << 3)
#define KVBLK_FEAT_MEM_DMABUF	(1ULL << 4)
#define KVBLK_FEAT_MEM_P2PDMA	(1ULL << 5)
#define KVBLK_FEAT_FILE_ENGINE	(1ULL << 6)

/* Engines, reported in kvblk_attach.engine and kvblk_load_many.engine. */
enum kvblk_engine {
	KVBLK_ENGINE_NONE = 0,
	KVBLK_ENGINE_PRP = 1,	/* NVMe Read passthrough, PRPs built by kvblk */
	KVBLK_ENGINE_BIO = 2,	/* block layer: bios to the block device */
	KVBLK_ENGINE_FILE = 3,	/* block layer: direct I/O through the file system */
};

/*
 * Destination memory kinds, kvblk_buf_reg.kind. libkvblk's <kvblk/kvblk.h>
 * declares the same enum under the same guard, so that a program may include
 * both headers, in either order.
 */
#ifndef __KVBLK_MEM_KIND_DEFINED
#define __KVBLK_MEM_KIND_DEFINED
enum kvblk_mem_kind {
	KVBLK_MEM_HOST = 0,	/* anonymous, shmem or hugetlb user memory */
	KVBLK_MEM_CUDA = 1,	/* CUDA device address range (nvidia-p2p) */
	KVBLK_MEM_DMABUF = 2,	/* a dma-buf fd and a byte range of it */
	KVBLK_MEM_P2PDMA = 3,	/* user mapping of PCI P2PDMA pages (p2pmem/allocate) */
	KVBLK_MEM_KIND_MAX,
};
#endif

/**
 * struct kvblk_attach - ioctl(KVBLK_IOC_ATTACH)
 * @size:         in: sizeof(struct kvblk_attach): KVBLK_ATTACH_SIZE_VER0 (88,
 *                without @buf_align) or more.
 * @flags:        in: 0 or one of KVBLK_ATTACH_F_ENGINE_BIO (the
 *                block-layer engine only, also on an nvme-pci namespace)
 *                and KVBLK_ATTACH_F_ENGINE_PRP (the PRP engine for all
 *                memory: an opt-in where it measures faster). Without
 *                either: a regular file gets the file engine, any block
 *                device the block-layer engine; a namespace or partition
 *                of an nvme-pci controller also gets the PRP engine as the
 *                alternative for memory without struct pages (CUDA,
 *                dma-buf, P2PDMA) when the PRP engine's checks pass and
 *                the context's such memory is (to be) mapped for its PCI
 *                function ("Several targets per context"); @engines says
 *                whether it did. When the PRP checks fail the attach still
 *                succeeds, with the block-layer engine alone (the kernel
 *                log names the reason). On a partition the PRP engine
 *                needs CAP_SYS_ADMIN (its commands address the whole
 *                namespace; the nvme driver's own passthrough asks the
 *                same): KVBLK_ATTACH_F_ENGINE_PRP without it is -EPERM, and
 *                without a flag the partition gets the block-layer engine
 *                alone. Either may be combined with
 *                KVBLK_ATTACH_F_ADD_TARGET (add a target to the context;
 *                since API version 2).
 * @bdev_fd:      in: fd of the target: a block device (/dev/nvme0n1,
 *                /dev/nvme0n1p2, /dev/md0, /dev/dm-0, /dev/loop0, ...) or a
 *                regular file, opened with O_RDONLY or O_RDWR. kvblk never
 *                reads what this fd could not: not past the live end of the
 *                device, partition or file.
 * @nsid:         out: the NVMe namespace id (from the nvme driver) when
 *                the target is a namespace or partition of an nvme-pci
 *                controller whose PRP engine checks passed at this attach,
 *                else 0 (0 too when the context's memory is mapped for
 *                another PCI function). Non-zero whenever @engines has
 *                KVBLK_ENGINE_PRP's bit, and also without it when the
 *                namespace's PCI function was being removed during the
 *                attach: whether the PRP engine serves the target is
 *                @engines, never @nsid.
 * @lba_size:     out: bytes per logical block of the device (for a file:
 *                of the file system's device); every offset and length in
 *                struct kvblk_io_desc is a multiple of it.
 * @max_cmd_bytes: out: objects are split into commands of at most this
 *                many bytes: for the PRP engine min(module tunable,
 *                controller limit from MDTS, as queue/max_hw_sectors_kb);
 *                for the block-layer engines the module tunable (any
 *                buffer offset: a command's bio_vec table is its own, not
 *                bounded by BIO_MAX_VECS), and the block layer splits
 *                further to the device's limits (queue/max_sectors_kb,
 *                max_segments).
 * @capacity:     out: bytes addressable through @bdev_fd now (the
 *                partition's size for a partition, the file's size for a
 *                file). Offsets are relative to its start. Re-read at every
 *                KVBLK_IOC_LOAD_MANY.
 * @start_lba:    out: first LBA of the partition on the disk (0 for a whole
 *                disk and for a file).
 * @nr_hw_queues: out: blk-mq hardware queues of the device (for a file:
 *                of the file system's device, e.g. non-zero on NVMe or
 *                virtio-blk); 0 for a bio-based device such as md or dm.
 * @engine:       out: enum kvblk_engine: the target's default engine, which
 *                serves every object whose memory it reaches (for the
 *                block-layer engines: memory with struct pages).
 * @reserved:     must be 0.
 * @reserved2:    must be 0.
 * @buf_align:    out: kvblk_io_desc.buf_offset must be a multiple of this: 4
 *                for the PRP engine (dword-aligned PRP1), the device's DMA
 *                alignment (at least 4) for a block device through the
 *                block layer, max(@lba_size, DMA alignment) for a file.
 *                Only written when @size covers it.
 * @reserved3:    must be 0.
 * @target:       out: the index of the target this attach added (0 for
 *                the first; see KVBLK_ATTACH_F_ADD_TARGET). Only written
 *                when @size covers it (KVBLK_ATTACH_SIZE_VER2).
 * @reserved4:    must be 0.
 * @engines:      out: every engine that may serve the target, a bit
 *                (1 << enum kvblk_engine) each: @engine's, and
 *                KVBLK_ENGINE_PRP's when a target attached without an
 *                engine flag has the PRP engine for memory without struct
 *                pages. Only written when @size covers it
 *                (KVBLK_ATTACH_SIZE_VER3).
 * @reserved5:    must be 0.
 *
 * Without KVBLK_ATTACH_F_ADD_TARGET, one attach per context: a second one
 * fails with -EBUSY (as in 0.2). With it, see "Several targets per
 * context" below for its rules and errors.
 * Errors: -EBADF @bdev_fd is not an open fd; -EISDIR it is a directory;
 * -ENOTBLK it is neither a block device nor a regular file (a pipe, a
 * socket, a character device); -EACCES it was opened without read access
 * (O_WRONLY or O_PATH); -EINVAL both engine flags, an unknown flag, or a
 * reserved field not 0; -EOPNOTSUPP (the kernel log names the reason):
 * KVBLK_ATTACH_F_ENGINE_PRP on a target that is not a namespace or
 * partition of an nvme-pci controller (a file, the bio-based multipath
 * head, a non-PCIe transport, another device), or that the PRP engine
 * refuses (metadata or protection information in its LBA format, or its
 * attach self-check failed: a Read past the namespace's end was not seen
 * as failed, or a good Read not as successful, so the engine could not
 * report a failed load; the block-layer engine is unaffected), or whose
 * PCI function bounces all DMA through swiotlb (swiotlb=force, a
 * confidential VM), or whose DMA mask does not reach all memory (some
 * mappings would bounce; the default attach takes the block-layer engine
 * in both cases), a device being removed, an empty device or partition, a
 * partition not aligned to the logical block size, or a file on a file
 * system without a block device or without direct I/O; -ENODEV
 * (KVBLK_ATTACH_F_ENGINE_PRP) the namespace's PCI function is being removed
 * or its nvme driver was unbound (without a flag the target then gets the
 * block-layer engine alone); -EPERM KVBLK_ATTACH_F_ENGINE_PRP on a
 * partition without CAP_SYS_ADMIN; -EINTR a fatal signal arrived while the
 * PRP engine's attach probe waited for a request (a queue frozen for a
 * controller reset); -EBUSY already attached; -EFAULT the argument is not
 * writable (nothing attached); -ENOMEM.
 */
struct kvblk_attach {
	__u32 size;
	__u32 flags;
	__s32 bdev_fd;
	__u32 nsid;
	__u32 lba_size;
	__u32 max_cmd_bytes;
	__u64 capacity;
	__u64 start_lba;
	__u32 nr_hw_queues;
	__u32 engine;
	__u64 reserved;
	__u64 reserved2[4];
	/* Since KVBLK_ATTACH_SIZE_VER1. */
	__u32 buf_align;
	__u32 reserved3;
	/* Since KVBLK_ATTACH_SIZE_VER2 (several targets). */
	__u32 target;
	__u32 reserved4;
	/* Since KVBLK_ATTACH_SIZE_VER3 (per-object engines). */
	__u32 engines;
	__u32 reserved5;
};

/* kvblk_attach.flags */
#define KVBLK_ATTACH_F_ENGINE_BIO	(1U << 0)
#define KVBLK_ATTACH_F_ENGINE_PRP	(1U << 1)
/* Since API version 2: see "Several targets per context". */
#define KVBLK_ATTACH_F_ADD_TARGET	(1U << 2)
#define KVBLK_ATTACH_F_ALL		(KVBLK_ATTACH_F_ENGINE_BIO | \
					 KVBLK_ATTACH_F_ENGINE_PRP | \
					 KVBLK_ATTACH_F_ADD_TARGET)

/**
 * struct kvblk_buf_reg - ioctl(KVBLK_IOC_REGISTER_BUFFER)
 * @size:      in: sizeof(struct kvblk_buf_reg).
 * @flags:     in: must be 0.
 * @kind:      in: enum kvblk_mem_kind.
 * @dmabuf_fd: in: the dma-buf for KVBLK_MEM_DMABUF; must be 0 otherwise.
 * @addr:      in: start of the range: a user virtual address for
 *             KVBLK_MEM_HOST and KVBLK_MEM_P2PDMA (page aligned), a CUDA
 *             device address for KVBLK_MEM_CUDA (64 KiB aligned, the GPU page
 *             size of nvidia-p2p), a byte offset into the dma-buf for
 *             KVBLK_MEM_DMABUF (page aligned).
 * @len:       in: bytes; a multiple of the page size (64 KiB for CUDA);
 *             at most 64 GiB per registration.
 * @buf_id:    out: id to use in kvblk_io_desc.buf_id (never 0).
 * @reserved:  must be 0.
 * @reserved2: must be 0.
 *
 * Host memory must be anonymous, shmem (memfd, MAP_SHARED|MAP_ANONYMOUS,
 * tmpfs files) or hugetlb memory: mappings of other files are refused, since
 * a long-term pin of page cache pages breaks file system writeback. It is
 * pinned (pin_user_pages(FOLL_WRITE | FOLL_LONGTERM), under the same
 * mmap_read_lock as the check of its mappings) and charged to the
 * caller's RLIMIT_MEMLOCK like io_uring fixed buffers, unless the caller has
 * CAP_IPC_LOCK; then, once a target of the context was attached with
 * KVBLK_ATTACH_F_ENGINE_PRP, DMA-mapped once for that NVMe controller.
 * Otherwise host memory is only pinned: the block-layer engines map nothing
 * of their own, the block layer maps each I/O for the device that serves
 * it. Memory without struct pages (CUDA, dma-buf) and P2PDMA memory are
 * mapped for the NVMe PCI function of the context's first target the PRP
 * engine serves (with the flag, or as the alternative engine of a namespace
 * attached without one: kvblk_attach.engines).
 * Requires an attached context.
 * Errors: -ENXIO not attached; -EINVAL unknown @kind, @dmabuf_fd not 0 for
 * another kind, bad alignment, zero @len, @len above 64 GiB, or @addr+@len
 * overflows; -ENOMEM RLIMIT_MEMLOCK exceeded or no memory; -EFAULT the range
 * is not mapped; -EOPNOTSUPP the kind is not available in this kernel or
 * module (GET_FEATURES says which are), CUDA or dma-buf memory on a
 * context none of whose targets has the PRP engine (they go through the
 * PRP engine only: attach an nvme-pci namespace without
 * KVBLK_ATTACH_F_ENGINE_BIO first; P2PDMA memory may also go in bios, see
 * below), the range maps memory other than
 * anonymous, shmem or hugetlb memory (the kernel log says so), or the DMA
 * mapping has a segment that is not 4 KiB aligned (an IOMMU or bounce
 * buffer the PRP rules cannot describe; the kernel log shows it); -EIO the
 * DMA mapping does not cover the whole range, or dma_map_sgtable() failed
 * with its "unknown cause" (-EINVAL also comes from it, as its own
 * documentation in kernel/dma/mapping.c lists); -EINTR a fatal signal arrived
 * while pinning; -ENOSPC too many buffers (1024 per context); -ENODEV the
 * NVMe PCI function of the context's PRP target was removed (or its nvme
 * driver unbound) since attach: nothing can be mapped for it any more.
 *
 * A dma-buf (KVBLK_MEM_DMABUF) is imported as a dynamic importer that
 * accepts peer-to-peer memory: attached to the NVMe controller, pinned,
 * mapped, the exporter's pending moves waited for; only the DMA addresses
 * of the exporter's mapping are used. The registration holds the dma-buf:
 * @dmabuf_fd may be closed afterwards. It is not charged to
 * RLIMIT_MEMLOCK. If the exporter revokes the memory (it notifies its
 * importers, e.g. on device removal), kvblk stops new commands into the
 * buffer, waits for those in flight and unmaps it before the exporter
 * goes on; later loads into it fail with -ENODEV per object (struct
 * kvblk_desc_result); it must still be unregistered. Errors for dma-buf:
 * -EBADF @dmabuf_fd is not an open fd or not a dma-buf; -EACCES the
 * dma-buf was exported without write access (its file lacks FMODE_WRITE:
 * the controller writes into it); -EINVAL @addr + @len beyond the
 * dma-buf's size; -EINTR a signal arrived while waiting
 * for the exporter's pending moves (restarted instead for SA_RESTART
 * handlers); -EOPNOTSUPP and -EIO as above, for the exporter's mapping;
 * any other error of the exporter's attach, pin or map as it returned it,
 * e.g. -ENODEV the memory was revoked, -EOPNOTSUPP the exporter refuses
 * this device or peer-to-peer access.
 *
 * CUDA memory (KVBLK_MEM_CUDA) is pinned persistently through the NVIDIA
 * driver's nvidia-p2p interface (nvidia_p2p_get_pages_persistent) and
 * DMA-mapped for the NVMe controller; it is not charged to RLIMIT_MEMLOCK.
 * @addr must lie in a cudaMalloc()'ed allocation of the calling process.
 * The pin keeps the GPU memory until the buffer is unregistered (or the
 * context closed), even across cudaFree, so loads never race a free. GPUs
 * without persistent pins (MIG instances, vGPU) are served through a
 * dma-buf of the allocation instead (KVBLK_MEM_DMABUF): pins with a free
 * callback are not used, since NVIDIA frees their tables when the callback
 * returns, which can come while a registration is still being built.
 * Errors for CUDA: -EINVAL @addr or @len not a multiple of 64 KiB;
 * -EOPNOTSUPP nvidia-p2p is not available (nvidia.ko not loaded, or too
 * old for persistent pins: GET_FEATURES lacks KVBLK_FEAT_MEM_CUDA), the GPU
 * has no persistent pins (MIG, vGPU), the NVMe controller is not a PCI
 * device, the driver refused the pin or the DMA mapping for a reason other
 * than those below, or its tables have a version or page size this module
 * does not know (the kernel log says which); -EFAULT the range is not
 * (wholly) CUDA device memory of the caller that nvidia-p2p can pin;
 * -ENOMEM.
 *
 * P2PDMA memory (KVBLK_MEM_P2PDMA) is a user mapping of PCI P2PDMA pages,
 * e.g. an mmap() of /sys/bus/pci/devices/<bdf>/p2pmem/allocate (a GPU BAR
 * or an NVMe controller memory buffer; kernels with CONFIG_PCI_P2PDMA).
 * The kernel refuses long-term pins of such pages (mm/gup.c), so
 * registration only checks the range: every page is P2PDMA memory and,
 * when a target of the context has the PRP engine, the provider and that
 * NVMe controller can reach each other (the kernel's P2PDMA distance check:
 * under one PCIe switch, or through a host bridge known to forward
 * peer-to-peer traffic). Each LOAD_MANY then pins the window of the range
 * its descriptors touch until its last command completes: objects through
 * the block-layer engine go in bios as those pages (the driver maps each
 * request; the target's queue must take P2PDMA pages), objects through the
 * PRP engine are mapped by kvblk for the batch. Not charged to RLIMIT_MEMLOCK. Loads come from the
 * registering process (the context's owner: another address space gets
 * -EBADFD for every ioctl). Errors for P2PDMA: -EOPNOTSUPP the kernel
 * has no P2PDMA (GET_FEATURES lacks KVBLK_FEAT_MEM_P2PDMA); -EINVAL a page
 * of the range is not P2PDMA memory, or belongs to another provider than
 * the range's first page (one registration, one provider); -EREMOTEIO the provider and the NVMe
 * controller cannot reach each other (the kernel log names both);
 * -EFAULT, -EINTR, -ENOMEM as for host memory.
 */
struct kvblk_buf_reg {
	__u32 size;
	__u32 flags;
	__u32 kind;
	__s32 dmabuf_fd;
	__u64 addr;
	__u64 len;
	__u32 buf_id;
	__u32 reserved;
	__u64 reserved2[2];
};

/**
 * struct kvblk_buf_unreg - ioctl(KVBLK_IOC_UNREGISTER_BUFFER)
 * @size:     in: sizeof(struct kvblk_buf_unreg).
 * @flags:    in: must be 0.
 * @buf_id:   in: id returned by KVBLK_IOC_REGISTER_BUFFER.
 * @reserved: must be 0.
 *
 * Unmaps and unpins the buffer (also a stale one). Closing the context does the same for every
 * buffer still registered, after the last in-flight command completes.
 * Errors: -ENOENT unknown @buf_id (also before attach: no buffer exists);
 * -EBUSY a batch that targets the buffer is still in flight (nothing is
 * changed; retry after it completes).
 */
struct kvblk_buf_unreg {
	__u32 size;
	__u32 flags;
	__u32 buf_id;
	__u32 reserved;
};

/**
 * struct kvblk_io_desc - one object to read (named struct kvblk_desc up to
 * kvblk 0.3.0, same layout: renamed so that libkvblk's <kvblk/kvblk.h>, whose
 * struct kvblk_desc is the library's descriptor, can be included with this
 * header)
 * @offset:     byte offset on the attached target (partition-relative; in
 *              the file for a file); a multiple of kvblk_attach.lba_size.
 * @length:     bytes; non-zero, a multiple of lba_size, at most 4 GiB.
 * @buf_offset: byte offset into the registered buffer; a multiple of
 *              kvblk_attach.buf_align: 4 for the PRP engine (NVMe PRP
 *              entries are dword aligned: NVMe Base Specification 2.0,
 *              4.1.1 "Physical Region Page Entry and List"), the device's
 *              DMA alignment (at least 4) for a block device through the
 *              block layer, max(lba_size, DMA alignment of the file
 *              system's device) for a file.
 * @buf_id:     registered buffer that receives the data.
 * @flags:      must be 0.
 * @tag:        caller's 64-bit tag, carried unchanged into the tracepoints
 *              of every NVMe command of this object.
 * @target:     index of the context's target to read from (kvblk_attach.
 *              target); 0, the first target, for a caller whose
 *              descriptors end before it (@desc_bytes 40, a 0.2 program).
 *              An index the context has not attached: -EINVAL (see
 *              kvblk_load_many.bad_index). Since KVBLK_DESC_SIZE_VER1.
 * @reserved:   must be 0 (else -EINVAL for that descriptor).
 *
 * Offsets, lengths, alignment and the size check below are those of the
 * descriptor's own target, as it is when the batch starts.
 * [offset, offset+length) must lie inside the target as it is when the
 * batch starts: the device's or partition's size, the file's size (else
 * -ERANGE, also when offset + length wraps past 2^64) and
 * [buf_offset, buf_offset+length) inside the buffer (else -EINVAL).
 */
struct kvblk_io_desc {
	__u64 offset;
	__u64 length;
	__u64 buf_offset;
	__u32 buf_id;
	__u32 flags;
	__u64 tag;
	/* Since KVBLK_DESC_SIZE_VER1 (several targets). */
	__u32 target;
	__u32 reserved;
};

/**
 * struct kvblk_desc_result - per-descriptor outcome
 * @status:   0, or a negative errno: -EIO a media or other device error on
 *            one of the object's commands (NVMe status mapped by the nvme
 *            driver; for the block-layer engines any failed bio or
 *            direct-I/O read, whatever the block layer's status, except
 *            the one below), also a command cancelled by a controller
 *            reset or a timeout (the nvme driver fails those as aborted by
 *            the host);
 *            -ENOLINK the command could not be sent or was failed because
 *            the namespace is being removed (its disk dead or its capacity
 *            dropped to 0: also a command cancelled with -EIO then), or the
 *            path is not live (the block layer's BLK_STS_TRANSPORT);
 *            retrying later may succeed for the latter;
 *            -ENODATA (file engine) the read came back short: the file
 *            was truncated while the batch ran; the object's bytes are
 *            not reported;
 *            -ENOSPC (file engine, a store) the file system had no space
 *            or quota left to fill a hole of the file;
 *            -ENODATA (file engine, a store) the write came back short
 *            (the file was truncated while the batch ran, or the file
 *            system stopped early): part of the object may have been
 *            written;
 *            -EIO also: writing back the block device's dirty page cache
 *            over the object's range before the load failed (as it fails
 *            pread(O_DIRECT)); no command was sent for the object;
 *            -ENODEV the destination buffer was revoked (a dma-buf revoked
 *            by its exporter; CUDA memory is pinned persistently and never
 *            revoked) before the object's commands were sent: no command
 *            wrote into it after that;
 *            or (PRP engine) it was mapped for an NVMe PCI function that
 *            has since been removed and is unmapped now (also an object
 *            whose commands completed before the removal when its bytes
 *            still needed a CPU sync, swiotlb or non-coherent DMA, that the
 *            removal's unmap left undone);
 *            -ESTALE (PRP engine) the namespace's LBA format changed after
 *            the batch began (a Format NVM during the batch, or a format
 *            the block layer does not show: an extended LBA with
 *            protection information, found by a one-LBA probe Read when
 *            the batch's first command, or the first after its commands
 *            drained, is sent): this object and every later one of the
 *            same target fail so, without a command; objects whose
 *            commands were sent before are exact; attach again;
 *            -ERANGE (PRP engine) the partition was shrunk during the
 *            batch and the object's command reaches past its new end;
 *            -ETXTBSY (a store) the target became active swap during the
 *            batch;
 *            unregister the buffer; -ECANCELED not attempted (the call failed as a whole, or the
 *            caller was killed before it was submitted), or the input error
 *            of a rejected descriptor (-EINVAL, -ERANGE, -E2BIG, -EXDEV,
 *            -ESTALE, -EPERM, -EACCES; for a store also -EBADF, -EROFS,
 *            -ETXTBSY, -EOPNOTSUPP).
 *            For a store, a failed object's bytes on the device are
 *            undefined (some of its commands may have been written).
 * @reserved: set to 0 by the kernel.
 * @bytes:    bytes that landed: @length on success, 0 otherwise (an object
 *            is reported whole or not at all); for a store, bytes written.
 */
struct kvblk_desc_result {
	__s32 status;
	__u32 reserved;
	__u64 bytes;
};

/*
 * kvblk_load_many.flags (KVBLK_FEAT_STORE; see "Stores" below)
 * @KVBLK_LOAD_F_STORE:   the batch writes: device <- memory. Every descriptor
 *                        of the batch stores its buffer range at its offset.
 * @KVBLK_LOAD_F_DURABLE: with KVBLK_LOAD_F_STORE only: an object succeeds
 *                        only once its bytes are on stable media (-EINVAL
 *                        without KVBLK_LOAD_F_STORE).
 */
#define KVBLK_LOAD_F_STORE	(1U << 0)
#define KVBLK_LOAD_F_DURABLE	(1U << 1)
#define KVBLK_LOAD_F_ALL	(KVBLK_LOAD_F_STORE | KVBLK_LOAD_F_DURABLE)

/**
 * struct kvblk_load_many - ioctl(KVBLK_IOC_LOAD_MANY)
 * @size:        in: sizeof(struct kvblk_load_many).
 * @flags:       in: 0 (a load), or KVBLK_LOAD_F_STORE, optionally with
 *               KVBLK_LOAD_F_DURABLE (a store: see "Stores" below). Any
 *               other bit, or KVBLK_LOAD_F_DURABLE alone: -EINVAL.
 * @nr_descs:    in: descriptors in @descs; 1 .. the max_descs tunable
 *               (default 4096, at most 65536).
 * @desc_bytes:  in: sizeof(struct kvblk_io_desc) as the caller knows it; >= 40
 *               and at most the page size (else -E2BIG for the call).
 *               Bytes of a descriptor past the kernel's struct must be zero
 *               (else that descriptor is rejected with -E2BIG).
 * @descs:       in: user pointer to @nr_descs descriptors.
 * @results:     in: user pointer to @nr_descs struct kvblk_desc_result.
 * @result_bytes: in: sizeof(struct kvblk_desc_result) as the caller knows it; >= 16
 *               and at most the page size (else -E2BIG for the call).
 *               The kernel writes the first 16 bytes of each result.
 * @bad_index:   out: index of the first rejected descriptor when the call
 *               fails with -EINVAL, -ERANGE, -E2BIG, -EXDEV or -ESTALE
 *               because of one, with -EPERM or -EACCES (the first
 *               descriptor of a target the permission checks refused),
 *               (stores) -EBADF, -EROFS, -ETXTBSY or -EOPNOTSUPP, or
 *               -ENODEV (the descriptor's buffer was revoked, or the PCI
 *               function it is mapped for removed); -1 otherwise
 *               (-ENOMEM included: the call's, not a descriptor's; every
 *               result is then -ECANCELED).
 * @nr_ok:       out: descriptors whose status is 0.
 * @engine:      out: enum kvblk_engine that served the batch when one
 *               engine served every descriptor; KVBLK_ENGINE_MIXED when
 *               several did (targets of different engines, or on one
 *               namespace host memory through the block layer and memory
 *               without struct pages through the PRP engine: @engines
 *               says which).
 * @nr_cmds:     out: commands issued for the batch: NVMe Read commands
 *               (PRP engine), bios before the block layer split them
 *               (KVBLK_ENGINE_BIO), direct-I/O reads or writes
 *               (KVBLK_ENGINE_FILE).
 * @elapsed_ns:  out: CLOCK_MONOTONIC ns from first submission to last completion.
 * @reserved:    must be 0.
 * @engines:     out: the engines that served the batch's objects, a bit
 *               mask of (1 << enum kvblk_engine); 0 when the call was
 *               rejected before submission. Since KVBLK_LOAD_MANY_SIZE_VER1.
 * @nr_targets:  out: distinct targets the batch named; 0 when the call was
 *               rejected before submission. Since KVBLK_LOAD_MANY_SIZE_VER1.
 *
 * When the batch starts, the per-call checks of read(2) (of write(2) for a
 * store) run on the fd of every target the batch names, once per target
 * over the byte range its descriptors span: rw_verify_area(), that is the
 * LSM's file permission hook and fanotify's permission events, as io_uring
 * runs them per request; a refusal fails the call before anything else
 * (-EPERM from a fanotify listener's deny, -EACCES or another errno from an
 * LSM). A batch that moved bytes of a target reports an access (a store: a
 * modification) on its fd, as read(2) and write(2) do (inotify IN_ACCESS,
 * IN_MODIFY; fanotify FAN_ACCESS, FAN_MODIFY).
 * Then the engine of every target the batch names
 * re-reads that target's size and logical block size (and, for the PRP
 * engine, checks the namespace's LBA format is still the one attached).
 * Before a load from a block device, the device's dirty page cache over
 * each object's range is written back and waited for, as pread(O_DIRECT)
 * does (a file's file system does the same in its direct I/O): a buffered
 * write not yet written back is what the load reads.
 * Every descriptor is validated against its own target before anything
 * is submitted; one bad descriptor fails the whole call, reads nothing,
 * and is named by @bad_index (its result carries the reason, the others
 * -ECANCELED).
 * Then the batch as a whole: no two descriptors' destinations may overlap
 * (the bytes would depend on completion order): the lowest index whose
 * destination intersects that of an earlier descriptor is rejected with
 * -EINVAL. Destinations are compared by user virtual address for host and
 * P2PDMA memory (also across two registrations of the same memory), by
 * CUDA address for CUDA memory, and per registration for a dma-buf. And
 * no destination may be a host registration found stale (see "Processes
 * and remapped host buffers"): -ESTALE for the first such descriptor.
 * Then every object is split into commands of at most its target's
 * max_cmd_bytes and all of them are put in flight together, bounded by the
 * max_inflight tunable. The call returns when every command has completed.
 * Once the header itself is accepted, the results and the output fields
 * above are written on every return except -EINTR, -EFAULT, and -E2BIG for
 * @nr_descs, @desc_bytes or @result_bytes (checked with the header: nothing
 * is written then). A call rejected before submission leaves every result
 * -ECANCELED but the rejected descriptor's.
 *
 * Return: the number of descriptors with status 0 (== @nr_descs when all
 * succeeded); an I/O error fails only its own descriptor.
 * Errors (whole call): -ENXIO not attached; -EINVAL a bad descriptor or
 * one whose destination overlaps an earlier one's (see @bad_index),
 * @nr_descs 0, or @desc_bytes / @result_bytes too small;
 * -ESTALE (PRP engine) the namespace was reformatted to another LBA size
 * or to a format with metadata that the block layer shows, since attach:
 * attach again (@bad_index names the first descriptor of that target; a
 * format found only once the batch runs fails objects instead, see
 * struct kvblk_desc_result); or a descriptor names a
 * host buffer whose range no longer maps the pages pinned at registration
 * (@bad_index names it, its result is -ESTALE): unregister it and register
 * the range again;
 * -ENODEV (PRP engine) the target's NVMe PCI function was removed (or its
 * nvme driver unbound) since attach: kvblk released its DMA state for it;
 * every later call naming the target fails so (@bad_index names the first
 * descriptor of that target); close the context;
 * -EPERM, -EACCES (or another errno of the kernel's file permission
 * hooks) the permission checks of read(2)/write(2) refused a target: a
 * fanotify permission listener denied the access (-EPERM), an LSM refused
 * it (-EACCES); @bad_index names the target's first descriptor, nothing
 * was read or written;
 * -ERANGE a descriptor reaches past its target's end (see @bad_index);
 * -EXDEV a descriptor's buffer cannot be reached by any engine of its
 * target: memory without struct pages (CUDA, dma-buf) on a target without
 * the PRP engine (md, dm, loop, a file, the multipath head, a namespace
 * attached with KVBLK_ATTACH_F_ENGINE_BIO or whose PRP checks failed:
 * kvblk_attach.engines), P2PDMA memory on such a target whose queue does
 * not take P2PDMA pages in bios (or whose engine is the file engine), or a
 * buffer not mapped for the target's PCI function (see "Several targets
 * per context"); @bad_index names it and the kernel log says which case;
 * -E2BIG @nr_descs above max_descs or @desc_bytes / @result_bytes above the
 * page size (no results written), or a descriptor with a non-zero byte past
 * struct kvblk_io_desc (see @bad_index); -ENOMEM; -EINTR a fatal signal arrived
 * while copying the descriptors, pinning or waiting: commands already issued
 * still complete into the pinned buffer, which stays pinned until they do;
 * another error of the kernel's page lookup (get_user_pages_fast(), e.g.
 * -EHWPOISON) while comparing a host buffer the process remapped with the
 * pages pinned for it (see "Processes and remapped host buffers").
 * A KVBLK_MEM_P2PDMA destination is pinned and mapped per call; when that
 * fails the call fails before any command, @bad_index names the first
 * descriptor that targets it and its result carries the reason: -EFAULT the
 * range is no longer mapped or belongs to another process, -EINVAL,
 * -EREMOTEIO or -ENOMEM as at registration.
 */
struct kvblk_load_many {
	__u32 size;
	__u32 flags;
	__u32 nr_descs;
	__u32 desc_bytes;
	__u64 descs;
	__u64 results;
	__u32 result_bytes;
	__s32 bad_index;
	__u32 nr_ok;
	__u32 engine;
	__u64 nr_cmds;
	__u64 elapsed_ns;
	__u64 reserved[2];
	/* Since KVBLK_LOAD_MANY_SIZE_VER1 (several targets). */
	__u32 engines;
	__u32 nr_targets;
};

/*
 * Several targets per context (API version 2)
 * --------------------------------------------
 * KVBLK_IOC_ATTACH with KVBLK_ATTACH_F_ADD_TARGET adds a target to the
 * context (the first one too, when the flag is given on the first
 * attach) and returns its index in kvblk_attach.target: 0 for the
 * context's first target, then 1, 2, ... in attach order. Indexes are
 * never reused; a target stays attached until the context is closed,
 * which releases every target (there is no detach). Each target has its
 * own engine, chosen as for the first (the flags above), its own geometry
 * (re-read for every target a batch names, when the batch starts) and its
 * own rights (its fd's). A descriptor names its target in
 * kvblk_io_desc.target; a batch may name any mix of them.
 *
 * Engines per object: each descriptor is served by its target's default
 * engine (kvblk_attach.engine) when that reaches the buffer (the
 * block-layer engines: memory with struct pages; P2PDMA pages only through
 * the bio engine to a queue that takes them, such as nvme-pci's when its
 * controller can reach peer memory), else by the target's PRP
 * engine when it has one (kvblk_attach.engines; memory without struct
 * pages); kvblk_load_many.engines reports every engine a batch used, so a
 * batch of host and dma-buf objects on one namespace reports both.
 *
 * DMA mapping: registered memory is DMA-mapped for at most one NVMe PCI
 * function per context, the one of the context's first target the PRP
 * engine serves (its default, or its alternative for memory without struct
 * pages); host memory only once a target was attached with
 * KVBLK_ATTACH_F_ENGINE_PRP, and only when registered after it. So without
 * an engine flag, an added nvme-pci namespace gets the PRP engine as its
 * alternative only when it is on the context's first such PCI function (or
 * the context has none yet); otherwise the block-layer engine alone, which
 * needs no mapping of kvblk's own. A descriptor that names a PRP target
 * whose PCI function the buffer is not mapped for, or a target without the
 * PRP engine and a buffer without pages (CUDA, dma-buf, P2PDMA), is
 * rejected with -EXDEV (see kvblk_load_many.bad_index).
 *
 * Counters and tracepoints stay per disk (/sys/kernel/kvblk/<disk>/): each
 * command and object is counted on its own target's disk, each batch once
 * on every disk it read from; kvblk_batch_start and kvblk_batch_end carry
 * the disk of the batch's first descriptor, kvblk_cmd_* their own. The
 * max_descs and max_inflight tunables of a batch are those of the
 * context's target 0's disk.
 *
 * Errors of KVBLK_IOC_ATTACH with KVBLK_ATTACH_F_ADD_TARGET, besides those
 * of struct kvblk_attach (all checked for every target: the fd must allow
 * reads, O_PATH fds, directories, pipes, sockets and character devices are
 * refused): -EINVAL @size below KVBLK_ATTACH_SIZE_VER2 (the caller could
 * not read the index); -ENOSPC the context has KVBLK_CTX_MAX_TARGETS
 * targets;
 * -EXDEV KVBLK_ATTACH_F_ENGINE_PRP on a namespace of another NVMe PCI
 * function than the context's first PRP target, or on a context that has
 * host buffers registered while no target had that flag (those buffers
 * are only pinned, not mapped for it). -EBUSY is not returned for an attached context.
 */
#define KVBLK_CTX_MAX_TARGETS	4096

/* GET_FEATURES: this module takes several targets per context. */
#define KVBLK_FEAT_TARGETS	(1ULL << 7)

/* kvblk_load_many.engine when the batch's targets have different engines. */
#define KVBLK_ENGINE_MIXED	255

/* The first (smallest accepted) size of each struct. */
#define KVBLK_ATTACH_SIZE_VER0		88
#define KVBLK_ATTACH_SIZE_VER1		96	/* + buf_align, reserved3 */
#define KVBLK_ATTACH_SIZE_VER2		104	/* + target, reserved4 */
#define KVBLK_ATTACH_SIZE_VER3		112	/* + engines, reserved5 */
#define KVBLK_BUF_REG_SIZE_VER0		56
#define KVBLK_BUF_UNREG_SIZE_VER0	16
#define KVBLK_LOAD_MANY_SIZE_VER0	80
#define KVBLK_LOAD_MANY_SIZE_VER1	88	/* + engines, nr_targets */
#define KVBLK_DESC_SIZE_VER0		40
#define KVBLK_DESC_SIZE_VER1		48	/* + target, reserved */
#define KVBLK_DESC_RESULT_SIZE_VER0	16

/*
 * KVBLK_IOC_GET_FEATURES: writes a __u64 of KVBLK_FEAT_* bits. Needs no attach.
 */
#define KVBLK_IOC_GET_FEATURES		_IOR(KVBLK_IOC_MAGIC, 0x00, __u64)
#define KVBLK_IOC_ATTACH		_IOWR(KVBLK_IOC_MAGIC, 0x01, struct kvblk_attach)
#define KVBLK_IOC_REGISTER_BUFFER	_IOWR(KVBLK_IOC_MAGIC, 0x02, struct kvblk_buf_reg)
#define KVBLK_IOC_UNREGISTER_BUFFER	_IOW(KVBLK_IOC_MAGIC, 0x03, struct kvblk_buf_unreg)
#define KVBLK_IOC_LOAD_MANY		_IOWR(KVBLK_IOC_MAGIC, 0x10, struct kvblk_load_many)

/*
 * ---- Asynchronous batches through io_uring (KVBLK_FEAT_URING_CMD) ----
 *
 * An IORING_OP_URING_CMD SQE on the /dev/kvblk fd submits one LOAD_MANY
 * batch; its one CQE comes when every command of the batch completed:
 *
 *   sqe->opcode  IORING_OP_URING_CMD, sqe->fd the context's fd (or a fixed
 *                file), sqe->cmd_op KVBLK_URING_CMD_LOAD_MANY;
 *   sqe->cmd     struct kvblk_uring_cmd (16 bytes: fits a 64-byte SQE,
 *                IORING_SETUP_SQE128 is not needed).
 *
 * The command area carries a pointer to a struct kvblk_load_many exactly
 * as KVBLK_IOC_LOAD_MANY takes it, not the batch itself, as ublk's control
 * commands carry their buffer's address: the header grows by its @size
 * rule, its output fields and the per-descriptor results are written back
 * into the caller's memory as the ioctl writes them, and the descriptors
 * are already behind a pointer; so one batch layer serves both paths and
 * a 64-byte SQE is enough.
 *
 * The batch is the ioctl's: the same checks in the same order, the same
 * results, output fields and errors; the CQE's res is what the ioctl
 * would return: the number of descriptors with status 0, or the call's
 * -errno (then, where the ioctl writes results, they were written too).
 * Results and output fields are written before the CQE is posted, by the
 * task that submitted the SQE. The header, the descriptors and the
 * results must stay valid until the CQE is reaped (the header and the
 * descriptors are read when the SQE is issued, which IOSQE_ASYNC or
 * SQPOLL may delay). The batch is always read, validated and submitted
 * by io_uring's worker (io-wq, which shares the task's address space): an
 * inline issue (io_uring_enter(), the SQPOLL thread) returns -EAGAIN to
 * io_uring at once, which issues it again there, so that the ring's other
 * submitters and its SQPOLL thread never wait for a batch. There it may
 * sleep: on the context's lock and, when the batch has more commands than
 * the max_inflight tunable, until commands of its own complete. Any
 * number of batches may be in flight on a context, each bounded by
 * max_inflight on its own.
 *
 * CQE res errors besides those of struct kvblk_load_many:
 * -EOPNOTSUPP the module was built for a kernel without what it needs
 * (GET_FEATURES lacks KVBLK_FEAT_URING_CMD), or a ring made with
 * IORING_SETUP_IOPOLL where io_uring asks for polled completion (6.1,
 * 6.12; 7.2 runs the batch as on any ring); -ENOTTY another sqe->cmd_op;
 * -EINVAL an unknown @flags bit, or @reserved not 0; -EBADFD the ring's
 * task is not in the context's address space (see "Processes and
 * remapped host buffers"); -EFAULT @load_many unreadable; -EINTR the submitting task
 * was killed during submission, or exited before the batch ended (nothing
 * is written back then; commands in flight still complete into the
 * pinned buffers first).
 *
 * Teardown: the ring waits for the batch (closing the ring fd, or the
 * process exiting, returns once every batch in flight ended); nothing
 * stays pinned or in flight after that. A batch cannot be cancelled
 * (IORING_OP_ASYNC_CANCEL does not find it); it ends when its commands
 * complete. One CQE per batch, unless the batch asks for one per object
 * too (KVBLK_URING_F_PER_OBJECT, below).
 */
#define KVBLK_FEAT_URING_CMD	(1ULL << 8)

/*
 * One CQE per object (KVBLK_URING_F_PER_OBJECT, KVBLK_FEAT_URING_PER_OBJECT)
 * ----------------------------------------------------------------------
 * With KVBLK_URING_F_PER_OBJECT in kvblk_uring_cmd.flags, the batch also
 * posts one CQE per descriptor as that descriptor completes, before its
 * final CQE. The SQE must then be a multishot command with a provided
 * buffer group:
 *
 *   sqe->uring_cmd_flags  IORING_URING_CMD_MULTISHOT;
 *   sqe->flags            IOSQE_BUFFER_SELECT (io_uring requires it with
 *                         IORING_URING_CMD_MULTISHOT and refuses either
 *                         without the other: -EINVAL);
 *   sqe->buf_group        the group the records go to (a buffer ring,
 *                         IORING_REGISTER_PBUF_RING, or buffers of
 *                         IORING_OP_PROVIDE_BUFFERS), each buffer at least
 *                         KVBLK_URING_OBJ_SIZE_VER0 bytes.
 *
 * Per descriptor, not per object of the caller's: the module knows only
 * descriptors, so a program that split one object into several
 * descriptors (libkvblk does above its size limit) gets one CQE for each.
 * A descriptor completes when every command of it completed, or when it
 * failed without them (a revoked buffer, a submission stopped by a fatal
 * signal: -ECANCELED); its per-object CQE then carries:
 *
 *   cqe->user_data  the SQE's, as the final CQE's;
 *   cqe->flags      IORING_CQE_F_MORE | IORING_CQE_F_BUFFER, the buffer id
 *                   in the upper 16 bits (IORING_CQE_BUFFER_SHIFT);
 *   cqe->res        the bytes of the record written into that buffer:
 *                   sizeof(struct kvblk_uring_obj) of the module, or the
 *                   buffer's length if that is shorter (a module newer than
 *                   the program writes no more than the buffer holds; an
 *                   older module writes less than a newer program's struct:
 *                   fields past @res bytes were not written). Never
 *                   negative: the descriptor's own status is in the record.
 *
 * The record (struct kvblk_uring_obj) names the descriptor by its index
 * and its tag and carries the status and bytes its entry of the results
 * array will carry: the same values, as final. Memory the descriptor
 * loaded is complete and visible to the CPU when its CQE is posted (the
 * PRP engine's mapping was synced for it); for a store, its bytes were
 * written (durable with KVBLK_LOAD_F_DURABLE).
 *
 * Ordering: per-object CQEs come in completion order, not in index order;
 * each descriptor gets at most one; every one of them is posted before the
 * batch's final CQE (no IORING_CQE_F_MORE), which is the same as without
 * the flag (res: descriptors with status 0, or -errno; results and the
 * header's output fields written before it). The final CQE and the results
 * array are always complete and authoritative; per-object CQEs are an
 * early notice of part of them.
 *
 * No buffer left: when a descriptor completes and the group has no buffer
 * (or one shorter than KVBLK_URING_OBJ_SIZE_VER0, which is given back
 * unused; or the record cannot be written into it: -EFAULT; or the CQ
 * ring overflowed and io_uring could not keep the CQE), that descriptor
 * and every later one of the batch get no per-object CQE: the stream
 * stops for the rest of the batch, it never resumes, so the descriptors
 * that got one are exactly those whose records arrived, and the others
 * are known from the results array once the final CQE came. A program
 * that counts per-object CQEs and finds fewer than nr_descs at the final
 * CQE had buffers run out. A batch rejected before submission (the final
 * CQE's res is its -errno: a bad descriptor, -ENOMEM, ...) posts no
 * per-object CQE at all; one whose final CQE says -EINTR (the task was
 * killed while submitting, or exited) may have posted some before, and
 * those records are right, but no more come and nothing else is written.
 *
 * Records are written and CQEs posted by the submitting task (io_uring
 * task work), never from the completion interrupt: completions that
 * arrive together are posted together, in one run of that task's work,
 * when the task next runs task work (returning to user space, waiting in
 * io_uring_enter(); with IORING_SETUP_DEFER_TASKRUN only when it waits
 * for CQEs).
 *
 * Errors (the only CQE, res): -EOPNOTSUPP the module was built for a
 * kernel whose io_uring has no multishot commands with provided buffers
 * (GET_FEATURES lacks KVBLK_FEAT_URING_PER_OBJECT: 6.1, 6.12); -EINVAL
 * KVBLK_URING_F_PER_OBJECT on an SQE without IORING_URING_CMD_MULTISHOT,
 * or IORING_URING_CMD_MULTISHOT without KVBLK_URING_F_PER_OBJECT; then
 * those of any batch. Teardown is as without the flag.
 */
#define KVBLK_FEAT_URING_PER_OBJECT	(1ULL << 10)

/* kvblk_uring_cmd.flags: one CQE per descriptor too (see above). */
#define KVBLK_URING_F_PER_OBJECT	(1U << 0)
#define KVBLK_URING_F_ALL		KVBLK_URING_F_PER_OBJECT

/**
 * struct kvblk_uring_cmd - the SQE command area of KVBLK_URING_CMD_LOAD_MANY
 * @load_many: user pointer to a struct kvblk_load_many.
 * @flags:     KVBLK_URING_F_* (0: one CQE per batch); unknown bits -EINVAL.
 * @reserved:  must be 0.
 *
 * Fixed at 16 bytes (a 64-byte SQE's command area); new options come as
 * @flags bits, new batch fields through kvblk_load_many.size.
 */
struct kvblk_uring_cmd {
	__u64 load_many;
	__u32 flags;
	__u32 reserved;
};

/**
 * struct kvblk_uring_obj - the record of a per-object CQE
 * @index:    the descriptor's index in the batch (0 .. nr_descs - 1).
 * @status:   0 or -errno, as kvblk_desc_result.status of that index.
 * @tag:      the descriptor's kvblk_io_desc.tag, copied.
 * @bytes:    as kvblk_desc_result.bytes: the descriptor's length on
 *            success, 0 otherwise.
 * @reserved: 0; later fields come here and after (see cqe->res for how
 *            many bytes were written).
 *
 * Written by the kernel into a provided buffer; a buffer must hold at
 * least KVBLK_URING_OBJ_SIZE_VER0 bytes, and the kernel writes
 * min(buffer length, its own sizeof) bytes (cqe->res).
 */
struct kvblk_uring_obj {
	__u32 index;
	__s32 status;
	__u64 tag;
	__u64 bytes;
	__u64 reserved;
};

#define KVBLK_URING_OBJ_SIZE_VER0	32

#define KVBLK_URING_CMD_LOAD_MANY	_IOWR(KVBLK_IOC_MAGIC, 0x10, struct kvblk_uring_cmd)

/*
 * ---- Stores (KVBLK_FEAT_STORE) ----
 *
 * KVBLK_IOC_LOAD_MANY (and KVBLK_URING_CMD_LOAD_MANY, which shares the
 * batch) with KVBLK_LOAD_F_STORE in kvblk_load_many.flags writes: each
 * descriptor's bytes [buf_offset, buf_offset + length) of its registered
 * buffer go to [offset, offset + length) of its target. Everything else is
 * the load's: the descriptors, their checks (alignment, the target's live
 * end: -ERANGE), the results, the output fields, the per-object status and
 * the whole-call errors. A program built before this flag existed passes
 * 0 and is unaffected.
 *
 * Engines: the block-layer engines write. KVBLK_ENGINE_BIO issues
 * REQ_OP_WRITE bios over the buffer's pinned pages; the block device's
 * page cache over each object's range is written back and invalidated
 * before its first bio and invalidated again when the batch ends, as for
 * pwrite(O_DIRECT). KVBLK_ENGINE_FILE issues direct-I/O kiocbs through the
 * file's own ->write_iter, under the file system's freeze protection, as
 * io_uring and aio do; the file system keeps its page cache coherent.
 * The PRP engine (NVMe Read passthrough) does not write.
 *
 * Files are not extended: a store must lie inside the file's size when
 * the batch starts (else -ERANGE, as a load); preallocate the file
 * (fallocate(), ftruncate()) first. Holes inside the file are filled
 * (the file system allocates them).
 *
 * Overlap: a store's sources may overlap (they are only read). Its
 * destinations may not: two descriptors whose device ranges intersect
 * (same target, or two targets of the same disk or the same file) would
 * leave bytes that depend on completion order; the lowest index whose
 * range intersects an earlier one's is rejected with -EINVAL (@bad_index).
 * Ranges are compared per disk (absolute, partition start included) for
 * block devices and per inode for files; a file and the block device under
 * its file system are not compared with each other.
 *
 * KVBLK_LOAD_F_DURABLE: an object's status is 0 only once its bytes are on
 * stable media. KVBLK_ENGINE_BIO sets REQ_FUA on every write bio (the
 * block layer drops it for a device without a volatile write cache and
 * emulates it with a flush after the write where the device lacks FUA);
 * every object is durable by its own commands' completion, so a failed
 * object never hides behind another's flush, and no command waits for the
 * whole batch. On NVMe, FUA is a bit of the Write command: no extra
 * command. KVBLK_ENGINE_FILE sets IOCB_DSYNC on every kiocb: the file
 * system makes the data and the metadata needed to read it back durable
 * its own way before the kiocb completes (iomap: a FUA write for a pure
 * overwrite, else a sync of the range and the log), as pwrite() on an
 * O_DSYNC fd does. Without the flag, stored bytes may sit in the device's
 * volatile cache (and a file's new allocations in memory) until a flush:
 * fsync()/fdatasync() of the target's fd, which is cheaper once after many
 * stores than DURABLE on each.
 *
 * Rights follow the fd, checked for every target a store batch names
 * before anything is submitted; the first descriptor of a refused target
 * fails the call and is named by @bad_index (its result carries the
 * errno, the others -ECANCELED):
 * -EBADF      the target's fd was not opened for writing (O_RDONLY), or
 *             was opened with O_APPEND (a write there would go to the
 *             file's end, not to the descriptor's offset);
 * -EROFS      the block device is read-only now (BLKROSET, a write-protected
 *             device: bdev_read_only()), or the file's file system is
 *             mounted read-only;
 * -ETXTBSY    the block device or file is active swap (pwrite() refuses
 *             it the same way);
 * -EOPNOTSUPP the target is served by the PRP engine (it reads only; attach
 *             the same fd again with KVBLK_ATTACH_F_ENGINE_BIO |
 *             KVBLK_ATTACH_F_ADD_TARGET and name that target), or the
 *             object's source has no struct pages (CUDA, dma-buf), which
 *             only the PRP engine of a default-attached nvme-pci namespace
 *             could reach, or its file has no ->write_iter.
 * A store batch that names a PRP target therefore fails, whatever its
 * other targets are: nothing of it is written.
 *
 * Counters: /sys/kernel/kvblk/<disk>/stats/bytes counts bytes loaded,
 * bytes_written bytes stored; the other counters count loads and stores
 * alike.
 */
#define KVBLK_FEAT_STORE	(1ULL << 9)

/*
 * ---- Processes and remapped host buffers (since KVBLK_API_VERSION 2) ----
 *
 * A context belongs to the address space (mm) of the process that opened
 * /dev/kvblk. Every ioctl on it (and any later submission interface) from
 * another address space fails with -EBADFD before it reads its argument:
 * a child made by fork() that uses the inherited fd, a process that
 * received the fd over a unix socket, or the opener itself after execve()
 * (a new address space) if the fd was not O_CLOEXEC. Nothing of the owner changes: its
 * registrations, batches in flight and later loads are untouched, and a
 * child's close() of its copy only drops that copy. A child opens its own
 * context. KVBLK_FEAT_MM_GUARD says the module enforces this rule and the
 * next one (the first holds on every kernel; the second needs
 * CONFIG_MMU_NOTIFIER, which every distribution kernel has).
 *
 * A KVBLK_MEM_HOST registration keeps the pages it pinned until it is
 * unregistered. If the program later replaces the memory of the registered
 * range (munmap() and mmap() again at the same address, madvise(
 * MADV_DONTNEED) of private anonymous memory, a hole punched in a shmem
 * file, mremap() over it), loads would land in pages the program no longer
 * sees. With KVBLK_FEAT_MM_GUARD the module watches the range
 * (an mmu interval notifier): after any invalidation of it, the next load
 * that names the buffer, or KVBLK_IOC_CHECK_BUFFER, compares the pages the
 * range maps now with the pinned ones (a read-only page walk that may fault
 * in a page the way a read would). If one differs or the range is no longer
 * mapped, the registration is stale from then on: every LOAD_MANY naming it
 * fails with -ESTALE before anything is submitted (@bad_index names the
 * first such descriptor, whose result carries -ESTALE) until it is
 * unregistered; register the range again.
 * Not stale: changes that keep the pinned pages mapped there: mprotect()
 * (pages made PROT_NONE cannot be compared: they are compared again at
 * each load until they are accessible, and meanwhile loads go on into the
 * pinned pages),
 * fork() (the parent keeps pinned pages; fork() copies them for the child,
 * and a MADV_DONTFORK range is not touched at all), a transparent huge page
 * split, MADV_DONTNEED of a shared (shmem) mapping whose page stays in the
 * file, soft-dirty tracking, unmapping memory elsewhere. Long-term pinned
 * pages are not migrated (NUMA balancing, compaction); if a kernel ever
 * moved one, the comparison would report it stale. The check happens when
 * a batch starts: a program that replaces the memory while its own batch
 * runs races with itself.
 */

/* KVBLK_IOC_GET_FEATURES: the two rules above are enforced. */
#define KVBLK_FEAT_MM_GUARD	(1ULL << 16)

/* kvblk_buf_check.state */
enum kvblk_buf_state {
	KVBLK_BUF_INTACT = 0,	/* the range maps the pinned pages */
	KVBLK_BUF_STALE = 1,	/* replaced: loads fail with -ESTALE */
	KVBLK_BUF_REVOKED = 2,	/* dma-buf memory revoked (-ENODEV) */
	KVBLK_BUF_UNTRACKED = 3, /* a kind the module does not compare */
};

/**
 * struct kvblk_buf_check - ioctl(KVBLK_IOC_CHECK_BUFFER)
 * @size:     in: sizeof(struct kvblk_buf_check): KVBLK_BUF_CHECK_SIZE_VER0.
 * @flags:    in: must be 0.
 * @buf_id:   in: id returned by KVBLK_IOC_REGISTER_BUFFER.
 * @state:    out: enum kvblk_buf_state, as a load naming the buffer would
 *            find it now: KVBLK_BUF_INTACT or KVBLK_BUF_STALE for host
 *            memory (compared now if the range was invalidated since the
 *            last comparison), KVBLK_BUF_REVOKED or KVBLK_BUF_UNTRACKED
 *            for other kinds (P2PDMA memory is pinned per batch and needs
 *            no comparison).
 * @reserved: must be 0.
 * @reserved2: must be 0.
 *
 * Errors: -EBADFD from another address space (see above); -ENOENT unknown
 * @buf_id; -EINVAL a flag or reserved field not 0; -EINTR a fatal signal
 * arrived while comparing; -ENOMEM.
 */
struct kvblk_buf_check {
	__u32 size;
	__u32 flags;
	__u32 buf_id;
	__u32 state;
	__u64 reserved[2];
};

#define KVBLK_BUF_CHECK_SIZE_VER0	32

#define KVBLK_IOC_CHECK_BUFFER		_IOWR(KVBLK_IOC_MAGIC, 0x20, struct kvblk_buf_check)

/* ---- end of processes and remapped host buffers ---- */

#endif /* _UAPI_LINUX_KVBLK_H */

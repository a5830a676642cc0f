/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kvblk.h - internal declarations shared by the files of kvblk.ko.
 *
 * Object model:
 *   struct kvblk_ctx    one per open of /dev/kvblk (file->private_data).
 *   struct kvblk_ns     one per disk (gendisk) with an attached context:
 *                       the disk itself, one of its partitions, or a file
 *                       on a file system on it; owns the counters,
 *                       tunables, /sys/kernel/kvblk/<disk>/ and, once a
 *                       PRP context attaches, the PRP list dma_pools.
 *   struct kvblk_buf    a registered, pinned destination (DMA-mapped for
 *                       the NVMe controller when the PRP engine serves).
 *   struct kvblk_batch  one KVBLK_IOC_LOAD_MANY call while its commands are
 *                       in flight; may outlive the call (fatal signal).
 *
 * Lifetimes: a batch holds a reference on its context and one on every
 * buffer it targets; a context holds its namespace object and the file
 * (block device or regular file) it attached. So nothing a command targets is unmapped, unpinned or
 * freed before the command completes, whatever the caller does.
 */
#ifndef KVBLK_INTERNAL_H
#define KVBLK_INTERNAL_H

#include <linux/atomic.h>
#include <linux/blk_types.h>
#include <linux/bvec.h>
#include <linux/fs.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/llist.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/sizes.h>
#include <linux/xarray.h>

#include <uapi/linux/kvblk.h>

#include "compat.h"

/* NVMe controller page: Linux always programs CC.MPS for 4 KiB. */
#define KVBLK_CTRL_PAGE_SHIFT	12
#define KVBLK_CTRL_PAGE_SIZE	SZ_4K
/* PRP entries per PRP list page. */
#define KVBLK_PRPS_PER_PAGE	(KVBLK_CTRL_PAGE_SIZE / 8)

/* Tunable ranges (module parameters and per-namespace sysfs files). */
#define KVBLK_MAX_CMD_BYTES_MIN		KVBLK_CTRL_PAGE_SIZE
#define KVBLK_MAX_CMD_BYTES_MAX		(8U << 20)
#define KVBLK_MAX_CMD_BYTES_DEF		SZ_1M
#define KVBLK_MAX_INFLIGHT_MIN		1U
#define KVBLK_MAX_INFLIGHT_MAX		65536U
#define KVBLK_MAX_INFLIGHT_DEF		256U
/* The most command slots a context keeps between batches (batch.c). */
#define KVBLK_SPARE_SLOTS_MAX		KVBLK_MAX_INFLIGHT_DEF
#define KVBLK_MAX_DESCS_MIN		1U
#define KVBLK_MAX_DESCS_MAX		65536U
#define KVBLK_MAX_DESCS_DEF		4096U
/* The largest batch (in descriptors) a context keeps for its next (batch.c): 64 KiB. */
#define KVBLK_SPARE_BATCH_OBJS_MAX	896U

/*
 * PRP list pages one command can need: a command of KVBLK_MAX_CMD_BYTES_MAX
 * starting at a dword offset touches 2049 controller pages; PRP1 takes one,
 * the list the other 2048, 511 per chained page and 512 in the last.
 */
#define KVBLK_MAX_PRP_PAGES	5
/*
 * Short PRP lists: 256-byte blocks of 32 entries, as nvme-pci's small pool;
 * a 128 KiB command at any dword offset needs at most 32 list entries.
 */
#define KVBLK_PRP_SMALL_BYTES	256
#define KVBLK_PRP_SMALL_ENTRIES	(KVBLK_PRP_SMALL_BYTES / 8)
/*
 * A submitter that waits for a free command slot is woken when this
 * fraction of the batch's slots is free again (at least one), not on every
 * completion: one wake-up (and one plug flush) refills the queue by that
 * many commands.
 */
#define KVBLK_SLOT_WAKE_DIV	4

#define KVBLK_MAX_BUFS		1024
#define KVBLK_MAX_BUF_BYTES	(64ULL << 30)
#define KVBLK_MAX_DESC_BYTES	(4ULL << 30)

#define KVBLK_HIST_BUCKETS	32

/* enum kvblk_engine values, for per-engine counts. */
#define KVBLK_ENGINE_NR		(KVBLK_ENGINE_FILE + 1)

/* Error kinds counted per namespace (stats/errors_*). */
enum kvblk_err_kind {
	/*
	 * BLK_STS_IOERR: device errors; also commands cancelled by a reset or
	 * a timeout, which the nvme driver fails as host-aborted.
	 */
	KVBLK_ERR_IO,
	KVBLK_ERR_MEDIA,	/* BLK_STS_MEDIUM: unrecovered read, ... */
	KVBLK_ERR_TRANSPORT,	/* BLK_STS_TRANSPORT: path not live */
	KVBLK_ERR_OTHER,	/* any other status: target, not supported */
	KVBLK_ERR_NR,
};

/* Per-CPU counters of one namespace; summed when sysfs is read. */
struct kvblk_pcpu_stats {
	u64 batches;
	u64 batches_interrupted;
	u64 objects;
	u64 objects_failed;
	u64 commands;
	u64 bytes;			/* loaded */
	u64 bytes_written;		/* stored (KVBLK_LOAD_F_STORE) */
	u64 errors[KVBLK_ERR_NR];
	u64 cmd_lat[KVBLK_HIST_BUCKETS];
	u64 batch_lat[KVBLK_HIST_BUCKETS];
};

struct kvblk_stats {
	struct kvblk_pcpu_stats __percpu *pcpu;
	atomic_t inflight;
	atomic_t inflight_peak;
};

/*
 * Identity and limits of a disk, found by the first attach. The NVMe
 * fields (dma_dev, nsid) are set only by a PRP attach; the block-layer
 * and file engines re-read the geometry at every batch instead.
 */
struct kvblk_ns_info {
	struct gendisk *disk;
	struct request_queue *q;
	struct device *dma_dev;		/* the NVMe PCI function, or NULL */
	dev_t devt;			/* of the whole disk */
	u32 nsid;			/* 0 unless NVMe through the PRP engine */
	u32 lba_shift;
	u32 hw_max_bytes;		/* queue_max_hw_sectors in bytes */
	u32 nr_hw_queues;
};

/* PRP list pools of one namespace's NVMe PCI function (prp.c). */
struct kvblk_prp_pools {
	struct dma_pool *page;		/* 4 KiB list pages, chained */
	struct dma_pool *small;		/* KVBLK_PRP_SMALL_BYTES lists */
};

struct kvblk_ns {
	struct kobject kobj;		/* /sys/kernel/kvblk/<disk> */
	struct list_head node;		/* kvblk_ns_list, under kvblk_ns_lock */
	unsigned int users;		/* attached contexts, kvblk_ns_lock */
	struct kvblk_ns_info info;	/* info.dma_dev is referenced */
	struct kvblk_prp_pools prp_pools; /* set by the first PRP attach */
	unsigned int engine_users[KVBLK_ENGINE_NR]; /* kvblk_ns_lock */
	char name[DISK_NAME_LEN + 24];	/* disk name, or <disk>@<diskseq> */
	/* Tunables: READ_ONCE()/WRITE_ONCE(). */
	u32 max_cmd_bytes;
	u32 max_inflight;
	u32 max_descs;
	struct kvblk_stats stats;
	/*
	 * Removal of the NVMe PCI function (removal.c): @dead is set once the
	 * nvme driver let go of it; from then on no PRP batch begins on the
	 * namespace (-ENODEV). @prp_batches counts the batches that entered
	 * it (kvblk_prp_enter(), once their descriptors and memory were
	 * checked) and whose commands did not all complete yet (they may hold
	 * PRP lists of its pools and issue commands with its mappings);
	 * the removal waits on @prp_wq for none to be left, then frees the
	 * pools under @dma_lock.
	 */
	bool dead;
	atomic_t prp_batches;
	wait_queue_head_t prp_wq;
	struct mutex dma_lock;		/* prp_pools teardown */
	struct list_head dead_node;	/* removal.c, its own list */
};

struct kvblk_engine_ops;

/*
 * One target of a context (uapi: kvblk_attach.target): a block device or a
 * regular file, with the engines chosen for it at attach: @engine serves
 * every object whose memory it reaches; @alt, when set (the PRP engine on
 * an nvme-pci namespace attached without an engine flag), serves the
 * objects whose memory has no struct pages. Fixed once published in the
 * context's table; freed with the context.
 */
struct kvblk_tgt {
	struct kvblk_ns *ns;		/* its disk's object, one user */
	const struct kvblk_engine_ops *engine;	/* the default */
	const struct kvblk_engine_ops *alt;	/* for page-less memory, or NULL */
	struct file *file;		/* the attached fd's file, held */
	u32 index;			/* kvblk_attach.target */
	u32 max_cmd_bytes;		/* @engine's split size, fixed at attach */
	u32 prp_max_cmd_bytes;		/* the PRP engine's, or 0 without it */
	u32 lba_shift;			/* logical block size at attach */
	u64 start_bytes;		/* partition start on the disk */
	u64 capacity;			/* bytes addressable at attach */
};

struct kvblk_ctx {
	struct kref ref;
	struct mm_struct *mm;		/* the opener's; mmgrab()'ed (ctx.c) */
	struct mutex lock;		/* attach and the buffer table */
	struct kvblk_ns *ns;		/* target 0's; NULL until attached */
	struct xarray tgts;		/* index -> struct kvblk_tgt */
	unsigned int nr_tgts;		/* under @lock */
	/*
	 * The NVMe PCI function registered memory is mapped for: that of the
	 * first PRP target (referenced through its namespace object), or
	 * NULL. Set under @lock.
	 */
	struct device *dma_dev;
	struct kvblk_ns *dma_ns;	/* the namespace dma_dev came with */
	/*
	 * Host memory is mapped for @dma_dev too: set by the first target
	 * attached with KVBLK_ATTACH_F_ENGINE_PRP. Otherwise host memory is
	 * only pinned (the block layer maps each I/O) and only memory without
	 * struct pages is mapped for @dma_dev. Under @lock.
	 */
	bool map_host;
	unsigned int nr_bufs;
	struct xarray bufs;		/* buf_id -> struct kvblk_buf */
	/*
	 * The command slots the last released batch left, with the bvec
	 * arrays of the block-layer engines they keep: the next batch takes
	 * them instead of allocating (and zeroing) its own and allocating a
	 * bvec array per slot again (batch.c, kvblk_slots_keep()). One array
	 * at most; only xchg()'ed. Freed with the context.
	 */
	struct kvblk_slots *spare_slots;
	/*
	 * The last released batch, for the next one of at most as many
	 * descriptors (kvblk_batch_keep()): kernels that zero every slab
	 * allocation (init_on_alloc=1, Debian's default) spent 7% of the
	 * guest's CPU per 4 KiB load in batches of 64 zeroing a new one
	 * (make vmbench-cpu, 6.1, 2026-12-06). Only xchg()'ed; freed with
	 * the context.
	 */
	struct kvblk_batch *spare_batch;
};

/* One DMA segment of a registered buffer. */
struct kvblk_dma_seg {
	dma_addr_t addr;
	u64 off;			/* byte offset in the buffer */
	u64 len;
};

struct kvblk_buf;

/**
 * struct kvblk_mem_ops - a destination memory provider (one per kind).
 * @name:    kind name for messages ("host", "cuda", "dmabuf", "p2pdma").
 * @release: undo what the provider's create did: unmap, unpin, put. Called
 *           once, when the last reference goes, in process context; never
 *           while a command targets the buffer. For a revoked buffer it
 *           must not touch what revocation handed back.
 * @bind:    for memory that must not stay pinned between calls (P2PDMA
 *           pages: mm/gup.c refuses FOLL_LONGTERM for them so that their
 *           provider can always be unbound): pin [@off, @off + @len) of
 *           @buf for one batch and return a buffer whose ->pages cover just
 *           that window (for the block-layer engine, which the block layer
 *           maps per I/O) and, when @map, whose segments map it for
 *           @buf->dev (for the PRP engine); it holds @buf and counts in its
 *           ->inflight until released. Called by the caller of LOAD_MANY in
 *           its own process context. NULL for memory pinned at
 *           registration. Returns an ERR_PTR on failure.
 * @unmap:   the DMA device is going away (removal.c): drop the DMA mapping
 *           now, while the device still exists; @release must then skip
 *           the unmap (buf->dma_gone is set before this is called). Called
 *           once, when no command targets the buffer, in process context.
 *           NULL for kinds that keep no mapping between batches.
 * @check:   whether the memory the registering program maps at the
 *           buffer's range is still the memory registered: 0 intact,
 *           -ESTALE replaced (from then on, until unregistered), -EINTR,
 *           -ENOMEM. Called in the owner's process context, while a
 *           reference is held. NULL for kinds that are not compared.
 */
struct kvblk_mem_ops {
	const char *name;
	void (*release)(struct kvblk_buf *buf);
	struct kvblk_buf *(*bind)(struct kvblk_buf *buf, u64 off, u64 len,
				  bool map);
	void (*unmap)(struct kvblk_buf *buf);
	int (*check)(struct kvblk_buf *buf);
};

/*
 * A registered destination. Every provider turns its memory into the same
 * table of DMA segments for the namespace's NVMe PCI function, so the PRP
 * builder and the submit path never look at the kind.
 *
 * Revocable memory (a dma-buf whose exporter moves or revokes it; CUDA
 * memory is pinned persistently and never revoked) is fenced per command:
 * the submit path brackets each command with kvblk_buf_dma_begin()/
 * kvblk_buf_dma_end(), and kvblk_buf_revoke() marks the buffer revoked and
 * then waits until no command targets it. Loads into a revoked buffer fail
 * with -ENODEV.
 */
struct kvblk_buf {
	struct kref ref;
	atomic_t inflight;		/* descriptors of live batches */
	u32 id;
	u32 kind;			/* enum kvblk_mem_kind */
	u64 len;
	u64 addr;			/* kvblk_buf_reg.addr (overlap checks) */
	struct device *dev;		/* mapped for; referenced */
	const struct kvblk_mem_ops *ops;
	void *priv;			/* the provider's state */
	struct page **pages;		/* host memory's pinned pages, or NULL */
	const u32 *runs;		/* kvblk_bvec_runs() of @pages, or NULL */
	struct kvblk_dma_seg *segs;	/* kvmalloc'ed, freed by the core */
	unsigned int nr_segs;
	bool need_sync;			/* dma_need_sync(): swiotlb, non-coherent */
	/*
	 * @dev was removed and the mapping dropped (removal.c): loads into it
	 * through the PRP engine fail with -ENODEV. Set under the removal's
	 * write lock, once no command targets the buffer.
	 */
	bool dma_gone;
	struct list_head dma_node;	/* removal.c: buffers mapped for a device */
	bool revocable;
	/* Revocation fence; used only when @revocable. */
	spinlock_t dma_lock;
	unsigned int dma_cmds;		/* commands targeting it now */
	bool revoked;
	wait_queue_head_t dma_wq;
};

/* Host memory provider state (mem_host.c). */
struct kvblk_mem_host {
	struct page **pages;
	u32 *runs;			/* kvblk_bvec_runs() of @pages, or NULL */
	unsigned long nr_pages;
	struct sg_table *sgts;		/* DMA mappings, KVBLK_HOST_MAP_PAGES each */
	unsigned int nr_sgts;
	struct user_struct *user;	/* charged RLIMIT_MEMLOCK, or NULL */
	unsigned long addr;		/* user address of the range */
#if IS_ENABLED(CONFIG_MMU_NOTIFIER)
	/* mem_host.c: is the range still mapping @pages? */
	struct mmu_interval_notifier mni;
	bool mni_live;			/* inserted */
	struct mutex check_lock;	/* one comparison at a time */
	unsigned long checked_seq;	/* mni sequence of the last comparison */
	bool stale;			/* replaced; sticky */
#endif
};

/*
 * PRP lists of one command slot, allocated by its first command that needs
 * them and reused by the slot's next commands until the batch is released.
 */
struct kvblk_prp {
	__le64 *small;			/* a short list, or NULL */
	dma_addr_t small_dma;
	unsigned int nr_pages;		/* 4 KiB list pages held */
	__le64 *va[KVBLK_MAX_PRP_PAGES];
	dma_addr_t dma[KVBLK_MAX_PRP_PAGES];
};

struct kvblk_batch;

/*
 * One command in flight (a slot of its batch): an NVMe Read, a bio or a
 * kiocb, covering [done, done + bytes) of object obj.
 */
struct kvblk_cmd {
	struct llist_node free_node;	/* on a free list of its batch */
	struct kvblk_batch *b;
	u32 obj;			/* descriptor index */
	u32 bytes;
	u64 done;			/* offset of the command in its object */
	u64 slba;			/* disk LBA (partition start included) */
	u64 start_ns;
	/* The target and engine whose state the slot keeps, or NULL. */
	const struct kvblk_tgt *state_tgt;
	const struct kvblk_engine_ops *state_engine;
	union {				/* what the engine keeps per slot */
		struct kvblk_prp prp;	/* engine_prp.c */
		struct {		/* engine_bio.c, engine_file.c */
			union {
				struct bio bio;		/* engine_bio.c */
				struct kiocb iocb;	/* engine_file.c */
			};
			/* The slot's bio_vec array (bvec.c), kept until released. */
			struct bio_vec *bvec;
			unsigned int nr_bvec;
		} blk;
	};
};

/*
 * An array of command slots: a batch uses its first kvblk_batch.nr_slots;
 * back in its context (kvblk_ctx.spare_slots) each slot keeps at most a
 * block-layer engine's bvec array, and no target.
 */
struct kvblk_slots {
	unsigned int nr;
	struct kvblk_cmd cmd[];
};

/* One object (descriptor) of a batch. */
struct kvblk_btgt;

struct kvblk_obj {
	struct kvblk_btgt *bt;		/* its target in this batch */
	struct kvblk_buf *buf;		/* referenced, inflight counted */
	u64 offset;			/* device byte offset, partition-relative */
	u64 length;
	u64 buf_offset;
	u64 tag;
	int status;			/* 0 or first -errno, cmpxchg() */
	/*
	 * Only with kvblk_batch.obj_end (one CQE per object, uring.c): its
	 * commands in flight, + 1 while it is being submitted; its entry on
	 * kvblk_batch.events once it completed; whether kvblk_obj_sync()
	 * already synced what the PRP engine's mapping received.
	 */
	atomic_t pending;
	bool synced;
	struct llist_node done_node;
};

enum kvblk_batch_owner {
	KVBLK_BATCH_WAITING,		/* the caller waits for it */
	KVBLK_BATCH_DONE,		/* every command completed */
	KVBLK_BATCH_ABANDONED,		/* the caller left (fatal signal) */
};

/*
 * A target as one batch sees it through one of its engines: its live
 * geometry, read by that engine's begin() when the batch starts. A batch
 * whose objects of one target go through both of its engines has two.
 */
struct kvblk_btgt {
	const struct kvblk_tgt *t;
	const struct kvblk_engine_ops *engine;	/* @t->engine or @t->alt */
	u32 max_cmd_bytes;
	u32 lba_shift;
	u32 align_mask;			/* buf_offset alignment - 1 */
	u32 nr_objs;			/* descriptors that name it */
	/*
	 * Sticky failure of its objects not yet submitted: -ENOLINK (its disk
	 * is going away) or -ESTALE (PRP engine: its LBA format changed).
	 * Written by the submitter only.
	 */
	int fail;
	/* The engine's done() ran (batch.c, kvblk_batch_btgts_done()). */
	bool done;
	/* The engine's enter() succeeded (engine.h). */
	bool entered;
	/* An object of it moved its bytes (kvblk_batch_notify()). */
	bool moved;
	/* The same target through its other engine in this batch, or NULL. */
	struct kvblk_btgt *twin;
	/*
	 * PRP engine: its requests allocated and not yet completed; a command
	 * that finds none re-checks the namespace (engine_prp.c).
	 */
	atomic_t prp_rqs;
	u64 capacity;
	/* A store: the byte range its objects write, [wr_start, wr_end). */
	u64 wr_start;
	u64 wr_end;
};

/*
 * Per-batch arrays that small batches keep without an allocation (batch.c;
 * five allocations a batch were a measured share of a batch of 8 objects,
 * make vmbench-cpu 2026-12-06). Room for min(2 x the context's targets,
 * the batch's descriptors) (target, engine) pairs is needed: up to
 * KVBLK_BATCH_INLINE_BTGTS it is in the batch (kvblk_batch.btgts_inline:
 * one target through both its engines, or two descriptors). A context of
 * at most KVBLK_BATCH_STACK_TGTS targets has the batch's lookup map and
 * access spans on the stack; at most KVBLK_BATCH_STACK_DESCS descriptors
 * are copied in onto the stack (384 bytes).
 */
#define KVBLK_BATCH_INLINE_BTGTS	2
#define KVBLK_BATCH_STACK_TGTS		4
#define KVBLK_BATCH_STACK_DESCS		8

struct kvblk_batch {
	struct kvblk_ctx *ctx;		/* referenced */
	struct kvblk_ns *ns;		/* first descriptor's disk, for traces */
	u64 id;
	u32 nr_objs;
	u32 nr_init;			/* @objs validated, in order: only they are initialised */
	u32 cap;			/* room for @objs (>= nr_objs: a kept batch) */
	u32 nr_btgts;			/* (target, engine) pairs used */
	u32 nr_tgts;			/* targets the batch names */
	struct kvblk_btgt *btgts;	/* @btgts_inline or kvmalloc'ed; nr_btgts used */
	u32 engines;			/* 1 << enum kvblk_engine, per btgt */
	u64 nr_cmds;			/* commands issued */
	u64 t_first;			/* first submission, ns */
	/*
	 * The submitter's clock for kvblk_cmd_issue() (ns): read when a run
	 * of submissions starts (kvblk_submit_all(), each take-back of freed
	 * slots in kvblk_slot_get(), the PRP engine's back-off and its
	 * recheck read), not per command (a clock read was 5% of a batch of
	 * 4 KiB loads under QEMU; the block layer caches its own per plug).
	 */
	u64 t_issue;
	u64 t_done;			/* last completion, ns */
	atomic_t pending;		/* commands in flight, +1 while submitting */
	atomic_t owner;			/* enum kvblk_batch_owner */
	bool interrupted;
	bool store;			/* KVBLK_LOAD_F_STORE: device <- memory */
	bool durable;			/* KVBLK_LOAD_F_DURABLE */
	struct completion done;
	struct work_struct free_work;	/* release of an abandoned batch */
	/*
	 * The caller's header (outputs filled in at the end), where it lives
	 * and its size; how submission ended (kvblk_batch_submit()).
	 */
	struct kvblk_load_many lm;
	void __user *uarg;
	u32 usize;
	int submit_ret;
	/*
	 * Asynchronous batch (uring.c): called by the last completion, in any
	 * context, instead of waking a waiter; it owns the batch from then on
	 * and ends it with kvblk_batch_finish() in the caller's task.
	 */
	void (*end)(struct kvblk_batch *b);
	void *end_data;
	/*
	 * One CQE per object (uring.c): called once per object when it
	 * completed (its last command, or submission failed it), in any
	 * context, before the batch's end. @events and @end_node are uring.c's:
	 * completed objects and the batch's end, for its task work.
	 */
	void (*obj_end)(struct kvblk_batch *b, struct kvblk_obj *o);
	struct llist_head events;
	struct llist_node end_node;
	/*
	 * Command slots: at most max_inflight commands in flight. end_io puts
	 * a slot on @free_list (lock-free) and counts it in @nr_free; the
	 * submitter takes the whole list at once into @local, which only it
	 * touches, and sleeps on @slot_wq until @wake_mark slots are free.
	 */
	struct llist_head free_list;
	atomic_t nr_free;
	struct llist_node *local;
	wait_queue_head_t slot_wq;
	unsigned int nr_slots;
	unsigned int wake_mark;
	struct kvblk_cmd *slots;	/* the first @nr_slots of @slot_arr */
	struct kvblk_slots *slot_arr;
	/*
	 * Not zeroed when the batch is allocated or taken again from its
	 * context (kvblk_batch_alloc(); nothing else may follow them): a pair
	 * is initialised when the batch adds it, an object when it is
	 * validated, so a kept batch costs no zeroing of its objects.
	 */
	struct kvblk_btgt btgts_inline[KVBLK_BATCH_INLINE_BTGTS];
	struct kvblk_obj objs[];
};

/* main.c */
extern struct workqueue_struct *kvblk_wq;

/* ioctl.c */
long kvblk_ioctl(struct file *file, unsigned int cmd, unsigned long arg);
int kvblk_copy_in(void *dst, size_t ksize, const void __user *uarg,
		  size_t min_size, u32 *usize);
int kvblk_copy_out(void __user *uarg, const void *src, size_t ksize, u32 usize);
int kvblk_copy_out_locked(void __user *uarg, const void *src, size_t ksize,
			  u32 usize);

/* ctx.c */
struct kvblk_ctx *kvblk_ctx_alloc(void);
void kvblk_ctx_get(struct kvblk_ctx *ctx);
void kvblk_ctx_put(struct kvblk_ctx *ctx);
struct kvblk_ns *kvblk_ctx_ns(struct kvblk_ctx *ctx);
bool kvblk_ctx_owner(const struct kvblk_ctx *ctx);
struct kvblk_tgt *kvblk_ctx_tgt(struct kvblk_ctx *ctx, u32 index);

/* attach.c */
long kvblk_ioctl_attach(struct kvblk_ctx *ctx, void __user *uarg);
int kvblk_reject(struct gendisk *disk, const char *why);

/* ns.c */
int kvblk_ns_init(void);
void kvblk_ns_exit(void);
struct kvblk_ns *kvblk_ns_get(const struct kvblk_ns_info *info, u32 engines);
void kvblk_ns_put(struct kvblk_ns *ns, u32 engines);
void kvblk_ns_prp_batch_end(struct kvblk_ns *ns);
unsigned int kvblk_ns_kill_dev(struct device *dev, struct list_head *dead);
void kvblk_ns_drain(struct kvblk_ns *ns);
void kvblk_ns_killed(struct kvblk_ns *ns);

/* removal.c: removal of an NVMe PCI function with DMA state of kvblk's */
int kvblk_removal_init(void);
void kvblk_removal_exit(void);
int kvblk_dma_reg_begin(struct kvblk_ctx *ctx, bool host,
			struct device **dma_dev);
void kvblk_dma_reg_end(struct kvblk_buf *buf);
void kvblk_dma_buf_lock(struct kvblk_buf *buf);
void kvblk_dma_buf_unlock(struct kvblk_buf *buf);
int kvblk_dma_map_begin(struct device *dev);
bool kvblk_dma_use_begin(struct kvblk_buf *buf);
void kvblk_dma_use_end(void);

/* buffer.c: registration and what every kind shares */
long kvblk_ioctl_register(struct kvblk_ctx *ctx, void __user *uarg);
long kvblk_ioctl_unregister(struct kvblk_ctx *ctx, void __user *uarg);
long kvblk_ioctl_check_buffer(struct kvblk_ctx *ctx, void __user *uarg);
u64 kvblk_mem_features(void);
struct kvblk_buf *kvblk_buf_alloc(struct device *dev, u32 kind, u64 len,
				  const struct kvblk_mem_ops *ops);
void kvblk_buf_abort(struct kvblk_buf *buf);
int kvblk_buf_segs_from_sgts(struct kvblk_buf *buf, struct sg_table *sgts,
			     unsigned int nr, u64 skip);
int kvblk_buf_segs_from_sgt(struct kvblk_buf *buf, struct sg_table *sgt,
			    u64 skip);
int kvblk_buf_segs_from_addrs(struct kvblk_buf *buf, const dma_addr_t *addrs,
			      unsigned int nr, u64 chunk);
void kvblk_buf_put(struct kvblk_buf *buf);
unsigned int kvblk_buf_seg(const struct kvblk_buf *buf, u64 off);
void kvblk_buf_sync(const struct kvblk_buf *buf, u64 off, u64 len,
		    bool for_cpu);
int kvblk_buf_dma_begin(struct kvblk_buf *buf);
void kvblk_buf_dma_end(struct kvblk_buf *buf);
void kvblk_buf_revoke(struct kvblk_buf *buf);

/*
 * Memory providers. Each create function returns a buffer whose segment
 * table covers @r->len bytes, or an ERR_PTR with the errno documented for
 * struct kvblk_buf_reg. @dev is the NVMe controller's DMA device.
 */
struct kvblk_buf *kvblk_mem_host_create(struct device *dev,
					const struct kvblk_buf_reg *r);

/* mem_host.c: pinning and mapping shared with the P2PDMA provider */
int kvblk_pin_user(unsigned long addr, unsigned long nr_pages,
		   unsigned int gup_flags, struct page **pages);
#define KVBLK_GUP_LONGTERM	(FOLL_WRITE | FOLL_LONGTERM)
int kvblk_map_pages(struct device *dev, struct page **pages,
		    unsigned long nr_pages, struct sg_table *sgt);

/* mem_cuda.c: nvidia-p2p, resolved at run time */
struct kvblk_buf *kvblk_mem_cuda_create(struct device *dev,
					const struct kvblk_buf_reg *r);
bool kvblk_mem_cuda_available(void);

/*
 * The optional parts: a file each, which kmod/Kbuild builds only when
 * conftest.sh defines KVBLK_WITH_<PART> (conftest.h, conftest.mk). Without
 * it the stubs below stand in: the kind or command is refused as if the
 * module did not know it, and its KVBLK_FEAT_* bit stays clear.
 */

/* mem_p2pdma.c: PCI P2PDMA memory (KVBLK_WITH_P2PDMA) */
#ifdef KVBLK_WITH_P2PDMA
struct kvblk_buf *kvblk_mem_p2pdma_create(struct kvblk_ctx *ctx,
					  const struct kvblk_buf_reg *r);
static inline bool kvblk_mem_p2pdma_supported(void)
{
	return true;
}
#else
static inline struct kvblk_buf *
kvblk_mem_p2pdma_create(struct kvblk_ctx *ctx, const struct kvblk_buf_reg *r)
{
	pr_info_ratelimited("register: %s[%d]: this kernel has no PCI P2PDMA (CONFIG_PCI_P2PDMA, FOLL_PCI_P2PDMA)\n",
			    current->comm, task_pid_nr(current));
	return ERR_PTR(-EOPNOTSUPP);
}

static inline bool kvblk_mem_p2pdma_supported(void)
{
	return false;
}
#endif

/* mem_dmabuf.c: dma-buf memory (KVBLK_WITH_DMABUF) */
#ifdef KVBLK_WITH_DMABUF
struct kvblk_buf *kvblk_mem_dmabuf_create(struct device *dev,
					  const struct kvblk_buf_reg *r);
static inline bool kvblk_mem_dmabuf_supported(void)
{
	return true;
}
#else
static inline struct kvblk_buf *
kvblk_mem_dmabuf_create(struct device *dev, const struct kvblk_buf_reg *r)
{
	pr_info_ratelimited("register: %s[%d]: memory kind %u is not served by this module (see KVBLK_IOC_GET_FEATURES)\n",
			    current->comm, task_pid_nr(current), r->kind);
	return ERR_PTR(-EOPNOTSUPP);
}

static inline bool kvblk_mem_dmabuf_supported(void)
{
	return false;
}
#endif

/* prp.c */
int kvblk_prp_pools_create(struct kvblk_prp_pools *pools, struct device *dev,
			   const char *name);
void kvblk_prp_pools_destroy(struct kvblk_prp_pools *pools);
int kvblk_prp_build(struct kvblk_prp_pools *pools, const struct kvblk_buf *buf,
		    u64 off, u32 len, struct kvblk_prp *prp, __le64 *prp1,
		    __le64 *prp2, gfp_t gfp);
void kvblk_prp_free(struct kvblk_prp_pools *pools, struct kvblk_prp *prp);

/* batch.c */
struct kvblk_batch *kvblk_batch_prepare(struct kvblk_ctx *ctx,
					void __user *uarg);
void kvblk_batch_submit(struct kvblk_batch *b);
void kvblk_slots_free(struct kvblk_slots *s);
long kvblk_batch_finish(struct kvblk_batch *b, long ret);
int kvblk_obj_sync(struct kvblk_obj *o);
long kvblk_ioctl_load_many(struct kvblk_ctx *ctx, void __user *uarg);

/*
 * uring.c: IORING_OP_URING_CMD on /dev/kvblk (KVBLK_WITH_URING_CMD).
 * Without it file_operations.uring_cmd stays NULL: io_uring itself answers
 * -EOPNOTSUPP, as for any file without the operation.
 */
#ifdef KVBLK_WITH_URING_CMD
struct io_uring_cmd;
int kvblk_uring_cmd(struct io_uring_cmd *ioucmd, unsigned int issue_flags);
static inline bool kvblk_uring_cmd_supported(void)
{
	return true;
}

/* Multishot commands with provided buffers (KVBLK_URING_F_PER_OBJECT). */
static inline bool kvblk_uring_per_object_supported(void)
{
#ifdef KVBLK_HAVE_URING_CMD_MSHOT
	return true;
#else
	return false;
#endif
}
#else
#define kvblk_uring_cmd NULL
static inline bool kvblk_uring_cmd_supported(void)
{
	return false;
}

static inline bool kvblk_uring_per_object_supported(void)
{
	return false;
}
#endif

/* batch_check.c: whole-batch rules after each descriptor was validated */
int kvblk_batch_check(struct kvblk_batch *b, u32 *bad);

/* stats.c */
int kvblk_stats_init(struct kvblk_stats *st);
void kvblk_stats_free(struct kvblk_stats *st);
unsigned int kvblk_lat_bucket(u64 ns);
void kvblk_stats_inflight_inc(struct kvblk_stats *st);
extern const struct attribute_group kvblk_stats_group;
void kvblk_slot_bytes_add(long bytes);
extern const struct attribute_group kvblk_root_group;

/* tunables.c */
extern unsigned int g_max_cmd_bytes;
extern unsigned int g_max_inflight;
extern unsigned int g_max_descs;
extern const struct attribute_group kvblk_tunables_group;

#endif /* KVBLK_INTERNAL_H */

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * engine.h - the interface between the batch layer and an engine.
 *
 * The load path reads top-down:
 *
 *   ioctl.c       KVBLK_IOC_LOAD_MANY
 *   batch.c       copy-in, validation, splitting into commands, command
 *                 slots (max_inflight), results, the killable wait
 *   engine_*.c    how one command reaches the device:
 *                   engine_prp.c   NVMe Read passthrough, PRPs built by kvblk
 *                   engine_bio.c   a bio over the buffer's pages (read or
 *                                  write)
 *                   engine_file.c  a direct-I/O kiocb through ->read_iter
 *                                  or ->write_iter
 *   bvec.c        the block-layer engines' bio_vec array per command slot
 *   mem_*.c       the destination memory (pinned pages, DMA segments)
 *
 * A target's engines are chosen at attach (attach.c) and never change: its
 * default engine, and for an nvme-pci namespace attached without an engine
 * flag whose PRP checks passed, the PRP engine as the alternative for
 * memory without struct pages (CUDA, dma-buf, P2PDMA windows). Each object
 * of a batch is served by the first of them that reaches its memory
 * (batch.c, kvblk_obj_engine()). A context may attach several targets, and
 * one batch may span targets and engines: the batch layer calls each engine
 * for the commands of its own (target, engine) pairs.
 * The batch layer owns every piece of state shared by the engines: the
 * objects, the command slots, the counters and tracepoints, the status of
 * each object (first error wins) and the batch's lifetime. An engine fills
 * in the command, hands it to the device and, when it completes, calls
 * kvblk_cmd_end() from any context.
 */
#ifndef KVBLK_ENGINE_H
#define KVBLK_ENGINE_H

#include <linux/blkdev.h>

#include "kvblk.h"

/**
 * struct kvblk_engine_ops - one engine.
 * @name:      for sysfs (engine) and messages: "prp", "bio", "file".
 * @id:        enum kvblk_engine, reported in kvblk_attach.engine and
 *             kvblk_load_many.engine.
 * @dma_mapped: registered memory must be DMA-mapped for the NVMe PCI
 *             function (the engine hands bus addresses to the device);
 *             otherwise host memory is only pinned and the block layer
 *             maps each I/O itself.
 * @stores:    the engine writes too (a batch with @b->store): its @submit
 *             writes the buffer's bytes to the device, durably when
 *             @b->durable.
 * @begin:     called once per batch for every target the batch names
 *             (@bt->t) through this engine (@bt->engine), before the
 *             descriptors it serves are validated, in the
 *             caller's process context: read the target's live geometry
 *             into @bt (@bt->capacity, @bt->lba_shift, @bt->align_mask,
 *             @bt->max_cmd_bytes). Returns 0 or an errno that fails the
 *             whole call (documented for struct kvblk_load_many).
 *             Nothing the removal of a device waits for is taken here:
 *             what comes after @begin (the checks of the caller's memory,
 *             which may fault on memory the caller controls: userfaultfd,
 *             FUSE) must not hold up a removal (review-2 N3).
 * @enter:     called once per batch for every target whose @begin
 *             succeeded, after every descriptor was validated and the
 *             caller's memory checked and pinned (batch.c,
 *             kvblk_batch_enter()), so that nothing after it can wait on
 *             the caller: take what the removal of the device waits for.
 *             Sets @bt->entered on success. Returns 0 or an errno that
 *             fails the whole call. May be NULL.
 * @done:      every command of the batch that @begin succeeded for has
 *             completed (or none will be issued), and the slots' state of
 *             engines that map memory (@dma_mapped) was released: let go
 *             of what only commands needed. Any context (the last
 *             completion's, often hard IRQ). Called once. May be NULL.
 * @end:       the batch that @begin succeeded for is released (no command
 *             of it in flight, its slots' @dma_mapped state released).
 *             Process context. May be NULL.
 * @submit:    issue one command: @cmd->obj, bytes [@cmd->done, @cmd->done
 *             + @cmd->bytes) of the object. Process context, @plug held.
 *             Calls kvblk_cmd_issue() just before the command can
 *             complete, then hands it to the device; from there on the
 *             command belongs to the completion, which calls
 *             kvblk_cmd_end() exactly once. Returns 0, or an errno with
 *             nothing issued: -ENODEV the buffer was revoked or its
 *             mapping's device removed (fails this object only),
 *             -ENOLINK the device is going away, -EINTR, -ENOMEM (stop
 *             the batch).
 * @slot_release: free what a slot kept between its commands (PRP lists,
 *             a bvec array) for target @t. Called before the slot serves a
 *             target of another engine or disk (its last command
 *             completed) and, for a @dma_mapped engine, when the batch's
 *             last command completed. May be NULL. An engine that is not
 *             @dma_mapped keeps nothing of its target or disk in a slot:
 *             its slots go back to their context with their state
 *             (kvblk_slots_keep()), and its @slot_release is called with
 *             @t NULL when the context drops them (an array replaced or
 *             too small, the context freed).
 */
struct kvblk_engine_ops {
	const char *name;
	u32 id;
	bool dma_mapped;
	bool stores;
	int (*begin)(struct kvblk_batch *b, struct kvblk_btgt *bt);
	int (*enter)(struct kvblk_btgt *bt);
	void (*done)(struct kvblk_btgt *bt);
	void (*end)(struct kvblk_btgt *bt);
	int (*submit)(struct kvblk_batch *b, struct kvblk_cmd *cmd,
		      struct blk_plug *plug);
	void (*slot_release)(const struct kvblk_tgt *t, struct kvblk_cmd *cmd);
};

extern const struct kvblk_engine_ops kvblk_engine_prp;
extern const struct kvblk_engine_ops kvblk_engine_bio;
extern const struct kvblk_engine_ops kvblk_engine_file;

/**
 * kvblk_engine_mask() - a target's engines as kvblk_ns_get() counts them.
 * @engine: the default engine.
 * @alt: the alternative engine, or NULL.
 *
 * Return: 1 << @engine->id, with 1 << @alt->id when @alt is set.
 */
static inline u32 kvblk_engine_mask(const struct kvblk_engine_ops *engine,
				    const struct kvblk_engine_ops *alt)
{
	return BIT(engine->id) | (alt ? BIT(alt->id) : 0);
}

/**
 * kvblk_disk_going() - is the disk being removed?
 * @disk: the disk.
 * @q: its queue.
 *
 * True once it is dead (kvblk_disk_dead()) and already when its capacity
 * dropped to 0: the nvme driver sets it so before it deletes the disk (a
 * bio past it fails with -EIO), as the loop driver does when its file is
 * detached. Objects of a batch on such a disk fail with -ENOLINK.
 */
static inline bool kvblk_disk_going(struct gendisk *disk,
				    struct request_queue *q)
{
	return kvblk_disk_dead(disk, q) || !get_capacity(disk);
}

/* batch.c: what every engine calls. */
void kvblk_cmd_issue(struct kvblk_batch *b, struct kvblk_cmd *cmd, u32 hwq);
void kvblk_cmd_end(struct kvblk_cmd *cmd, int err, enum kvblk_err_kind kind,
		   u32 hwq);
int kvblk_status_errno(blk_status_t sts, enum kvblk_err_kind *kind);

/* bvec.c: the block-layer engines' bio_vec arrays, one per command slot. */
u32 *kvblk_bvec_runs(struct page *const *pages, unsigned long nr);
int kvblk_bvec_fill(struct kvblk_cmd *cmd, const struct kvblk_buf *buf,
		    u64 off, u32 len, u32 max_bytes);
void kvblk_bvec_release(const struct kvblk_tgt *t, struct kvblk_cmd *cmd);

/* engine_bio.c */
bool kvblk_bio_p2pdma(const struct kvblk_tgt *t);

/* engine_prp.c: attach-time checks of the PRP engine. */
bool kvblk_prp_capable(struct gendisk *disk);
int kvblk_prp_probe(struct file *file, struct block_device *bdev,
		    struct kvblk_ns_info *info);
u32 kvblk_prp_max_cmd(const struct kvblk_ns *ns,
		      const struct kvblk_ns_info *info);

#endif /* KVBLK_ENGINE_H */

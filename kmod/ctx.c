// SPDX-License-Identifier: GPL-2.0
/*
 * ctx.c - the per-open context of /dev/kvblk and its release.
 */
#include <linux/file.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "engine.h"
#include "kvblk.h"

/**
 * kvblk_ctx_alloc() - a new, unattached context.
 *
 * The context holds a module reference until it is freed, so that a batch
 * that outlives the file (fatal signal, then close) keeps the module's code
 * and workqueue alive until its last command completes.
 *
 * The context belongs to the caller's address space: it holds the mm_struct
 * (mmgrab(), not the address space itself) so that kvblk_ctx_owner() can
 * compare it with every caller's, and the pointer cannot be reused by a new
 * process while the context lives.
 *
 * Return: the context with one reference, or NULL (no memory).
 */
struct kvblk_ctx *kvblk_ctx_alloc(void)
{
	struct kvblk_ctx *ctx;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return NULL;
	kref_init(&ctx->ref);
	ctx->mm = current->mm;
	if (ctx->mm)
		mmgrab(ctx->mm);
	mutex_init(&ctx->lock);
	xa_init_flags(&ctx->bufs, XA_FLAGS_ALLOC);
	xa_init(&ctx->tgts);
	/* Called from open(): the file already pins the module. */
	__module_get(THIS_MODULE);
	return ctx;
}

/**
 * kvblk_ctx_get() - take a reference on a context.
 * @ctx: context.
 */
void kvblk_ctx_get(struct kvblk_ctx *ctx)
{
	kref_get(&ctx->ref);
}

static void kvblk_ctx_free(struct kref *ref)
{
	struct kvblk_ctx *ctx = container_of(ref, struct kvblk_ctx, ref);
	struct kvblk_buf *buf;
	struct kvblk_tgt *t;
	unsigned long id;

	/* No batch is left: each held a reference. */
	kvblk_slots_free(ctx->spare_slots);
	kvfree(ctx->spare_batch);
	xa_for_each(&ctx->bufs, id, buf) {
		xa_erase(&ctx->bufs, id);
		kvblk_buf_put(buf);
	}
	xa_destroy(&ctx->bufs);
	/* Every target: its disk's object and its file. */
	xa_for_each(&ctx->tgts, id, t) {
		xa_erase(&ctx->tgts, id);
		kvblk_ns_put(t->ns, kvblk_engine_mask(t->engine, t->alt));
		fput(t->file);
		kfree(t);
	}
	xa_destroy(&ctx->tgts);
	mutex_destroy(&ctx->lock);
	if (ctx->mm)
		mmdrop(ctx->mm);
	kfree(ctx);
	module_put(THIS_MODULE);
}

/**
 * kvblk_ctx_put() - drop a reference; the last one releases everything.
 * @ctx: context.
 *
 * Context: process context (may unpin pages and sleep).
 */
void kvblk_ctx_put(struct kvblk_ctx *ctx)
{
	kref_put(&ctx->ref, kvblk_ctx_free);
}

/**
 * kvblk_ctx_ns() - the disk object of a context's target 0.
 * @ctx: context.
 *
 * Return: the object, or NULL when not attached. Once set it does not
 * change for the life of the context.
 */
struct kvblk_ns *kvblk_ctx_ns(struct kvblk_ctx *ctx)
{
	/* Pairs with smp_store_release() in kvblk_ioctl_attach(). */
	return smp_load_acquire(&ctx->ns);
}

/**
 * kvblk_ctx_owner() - whether the caller may use a context.
 * @ctx: context.
 *
 * A context belongs to the address space that opened it: a child made by
 * fork() shares the open file but not the memory its registrations pinned
 * or its batches' descriptors point into, and a command it could send
 * would read the parent's destinations and race with the parent's calls.
 * Such a caller gets -EBADFD from every ioctl (ioctl.c) and changes nothing.
 *
 * Return: true when the caller runs in the context's mm.
 */
bool kvblk_ctx_owner(const struct kvblk_ctx *ctx)
{
	return ctx->mm && ctx->mm == current->mm;
}

/**
 * kvblk_ctx_tgt() - a target of a context.
 * @ctx: context.
 * @index: kvblk_attach.target.
 *
 * Return: the target, or NULL when the context has no such target. A
 * target, once found, lives as long as the context.
 */
struct kvblk_tgt *kvblk_ctx_tgt(struct kvblk_ctx *ctx, u32 index)
{
	return xa_load(&ctx->tgts, index);
}

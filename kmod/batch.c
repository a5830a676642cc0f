// SPDX-License-Identifier: GPL-2.0
/*
 * batch.c - KVBLK_IOC_LOAD_MANY, written once for every engine.
 *
 * 1. Copy the descriptors in; for every target the batch names, its engine
 *    reads the target's live geometry (engine.h, ->begin); validate every
 *    descriptor against its own target's (and, for a store, the target's
 *    write rights): one bad descriptor fails the call before anything is
 *    submitted (bad_index).
 * 2. Split each object into commands of at most its target's max_cmd_bytes.
 * 3. For each command: a slot (at most max_inflight in flight), then the
 *    engine's ->submit (an NVMe Read with kvblk's PRPs, a bio, a kiocb;
 *    a store batch writes, through the engines that write), all under one
 *    plug.
 * 4. The engine's completion calls kvblk_cmd_end() (any context): it
 *    records the object's status (first error wins) and returns the slot,
 *    lock-free; it wakes a submitter that waits for slots only once a
 *    quarter of them is free again, not per completion. The submitter
 *    takes every returned slot at once. A slot keeps its engine state (PRP
 *    lists, a bvec array) for its next command; the block-layer engines'
 *    bvec arrays stay for the context's next batch (kvblk_slots_keep()).
 *    The last completion ends the batch.
 * 5. The caller waits killably. If it is killed, the batch is abandoned to
 *    the last completion, which releases it from a workqueue: until then it
 *    keeps its buffers (pinned and mapped) and its context alive.
 */
#include <linux/blk-mq.h>
#include <linux/dmapool.h>
#include <linux/fsnotify.h>
#include <linux/log2.h>
#include <linux/pagemap.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "engine.h"
#include "kvblk.h"
#include "trace.h"

static atomic64_t kvblk_batch_seq = ATOMIC64_INIT(0);

/**
 * kvblk_status_errno() - per-object status of a failed command.
 * @sts: the block layer's status, not BLK_STS_OK.
 * @kind: out: the error counter it goes to.
 *
 * Return: -ENOLINK for a lost path (BLK_STS_TRANSPORT), else -EIO.
 */
int kvblk_status_errno(blk_status_t sts, enum kvblk_err_kind *kind)
{
	int err = blk_status_to_errno(sts);

	if (sts == BLK_STS_MEDIUM)
		*kind = KVBLK_ERR_MEDIA;
	else if (sts == BLK_STS_IOERR)
		*kind = KVBLK_ERR_IO;
	else if (sts == BLK_STS_TRANSPORT)
		*kind = KVBLK_ERR_TRANSPORT;
	else
		*kind = KVBLK_ERR_OTHER;
	/* The uapi reports a lost path as -ENOLINK and any other failure as -EIO. */
	return err == -ENOLINK ? -ENOLINK : -EIO;
}

/*
 * A batch of @nr descriptors: the context's last one when it has room
 * (kvblk_batch_keep()), else a new one. Only the header is zeroed; what
 * follows it is initialised when used.
 */
static struct kvblk_batch *kvblk_batch_alloc(struct kvblk_ctx *ctx,
					     struct kvblk_ns *ns, u32 nr)
{
	struct kvblk_batch *b = xchg(&ctx->spare_batch, NULL);
	u32 cap = nr;

	BUILD_BUG_ON(offsetof(struct kvblk_batch, objs) !=
		     offsetofend(struct kvblk_batch, btgts_inline));
	if (b && b->cap >= nr) {
		cap = b->cap;
	} else {
		kvfree(b);
		b = kvmalloc(struct_size(b, objs, nr), GFP_KERNEL_ACCOUNT);
		if (!b)
			return NULL;
	}
	memset(b, 0, offsetof(struct kvblk_batch, btgts_inline));
	b->cap = cap;
	b->ctx = ctx;
	b->ns = ns;
	b->nr_objs = nr;
	atomic_set(&b->pending, 1);
	atomic_set(&b->owner, KVBLK_BATCH_WAITING);
	init_completion(&b->done);
	init_llist_head(&b->free_list);
	init_llist_head(&b->events);
	atomic_set(&b->nr_free, 0);
	init_waitqueue_head(&b->slot_wq);
	kvblk_ctx_get(ctx);
	return b;
}

/* Free what a slot keeps between its commands (PRP lists, a bvec array). */
static void kvblk_slot_state_release(struct kvblk_cmd *cmd)
{
	if (!cmd->state_engine)
		return;
	if (cmd->state_engine->slot_release)
		cmd->state_engine->slot_release(cmd->state_tgt, cmd);
	memset(&cmd->prp, 0, sizeof(cmd->prp));
	memset(&cmd->blk, 0, sizeof(cmd->blk));
	cmd->state_tgt = NULL;
	cmd->state_engine = NULL;
}

/**
 * kvblk_slots_free() - free an array of command slots and what they keep.
 * @s: the array, or NULL. No command of it is in flight.
 *
 * Context: process context (kvfree()).
 */
void kvblk_slots_free(struct kvblk_slots *s)
{
	unsigned int i;

	if (!s)
		return;
	for (i = 0; i < s->nr; i++)
		kvblk_slot_state_release(&s->cmd[i]);
	kvblk_slot_bytes_add(-(long)struct_size(s, cmd, s->nr));
	kvfree(s);
}

/*
 * A released batch's slots go back to its context for the next batch.
 * Engines that map memory keep a target's disk in a slot (PRP lists of its
 * pool), which the next batch may not reach: that state is released (by
 * kvblk_batch_engines_done() already, for a submitted batch). What the
 * block-layer engines keep, a bvec array, belongs to no target: it stays,
 * and the slot forgets its target. The context keeps one array, the larger
 * of this and the one it has, of at most KVBLK_SPARE_SLOTS_MAX slots: at the
 * default max_inflight and max_cmd_bytes (1 MiB commands: 257-entry bvec
 * arrays, 8 KiB slab objects) about 2 MiB per open file, at the largest
 * max_cmd_bytes (8 MiB) about 8 MiB, charged to its memory cgroup and held
 * until the file is closed; a batch of that size allocated as much anyway.
 */
static void kvblk_slots_keep(struct kvblk_ctx *ctx, struct kvblk_slots *s)
{
	/* Read before the xchg(): from then on another batch may take @s. */
	unsigned int nr = s->nr;
	struct kvblk_slots *old;
	unsigned int i;

	if (nr > KVBLK_SPARE_SLOTS_MAX) {
		kvblk_slots_free(s);
		return;
	}
	for (i = 0; i < s->nr; i++) {
		struct kvblk_cmd *cmd = &s->cmd[i];

		if (cmd->state_engine && cmd->state_engine->dma_mapped)
			kvblk_slot_state_release(cmd);
		cmd->state_tgt = NULL;
		cmd->b = NULL;
	}
	old = xchg(&ctx->spare_slots, s);
	/*
	 * Batches that overlapped (io_uring) each return one: keep the larger,
	 * free whatever the context held instead (s, or one kept meanwhile).
	 */
	if (old && old->nr > nr)
		old = xchg(&ctx->spare_slots, old);
	kvblk_slots_free(old);
}

/*
 * @nr command slots for the batch: the context's spare array when it has
 * as many (kvblk_slots_keep()), else a new zeroed one.
 */
static int kvblk_batch_alloc_slots(struct kvblk_batch *b, unsigned int nr)
{
	struct kvblk_slots *s = xchg(&b->ctx->spare_slots, NULL);
	unsigned int i;

	if (s && s->nr < nr) {
		kvblk_slots_free(s);
		s = NULL;
	}
	if (!s) {
		s = kvzalloc(struct_size(s, cmd, nr), GFP_KERNEL_ACCOUNT);
		if (!s)
			return -ENOMEM;
		s->nr = nr;
		kvblk_slot_bytes_add(struct_size(s, cmd, nr));
	}
	b->slot_arr = s;
	b->slots = s->cmd;
	/* Only the submitter runs yet: every slot goes to its own list. */
	for (i = 0; i < nr; i++) {
		b->slots[i].free_node.next = b->local;
		b->local = &b->slots[i].free_node;
	}
	b->nr_slots = nr;
	b->wake_mark = max(1U, nr / KVBLK_SLOT_WAKE_DIV);
	return 0;
}

/* Each engine's done() for every target the batch began on, once. */
static void kvblk_batch_btgts_done(struct kvblk_batch *b)
{
	u32 i;

	for (i = 0; i < b->nr_btgts; i++) {
		struct kvblk_btgt *bt = &b->btgts[i];

		if (bt->done)
			continue;
		bt->done = true;
		if (bt->engine->done)
			bt->engine->done(bt);
	}
}

/*
 * Every command of the batch completed: what only commands needed goes
 * now, in the completion's context, before anyone collects the batch (the
 * caller, its io_uring task work, or the workqueue for a killed caller,
 * may come much later). The PRP lists the slots kept go back to their
 * namespaces' pools (dma_pool_free() is IRQ-safe) and the PRP engine stops
 * counting the batch (kvblk_prp_done()): the removal of an NVMe PCI
 * function waits for that (kvblk_ns_drain()), so for the batch's
 * preparation after kvblk_prp_begin() and for its commands, which the nvme
 * driver completes or cancels, never for anyone to collect the batch. The
 * block-layer engines' bvec arrays stay with the slots, which the release
 * hands to the context (kvblk_slots_keep()).
 */
static void kvblk_batch_engines_done(struct kvblk_batch *b)
{
	u32 i;

	for (i = 0; i < b->nr_slots; i++) {
		struct kvblk_cmd *cmd = &b->slots[i];

		if (cmd->state_engine && cmd->state_engine->dma_mapped)
			kvblk_slot_state_release(cmd);
	}
	kvblk_batch_btgts_done(b);
}

/*
 * Count a submitted batch on the disk of every target it named: objects
 * per target, the batch once per disk.
 */
static void kvblk_batch_count(struct kvblk_batch *b)
{
	u64 lat = b->t_done - b->t_first;
	u32 i, j;

	for (i = 0; i < b->nr_btgts; i++) {
		struct kvblk_ns *ns = b->btgts[i].t->ns;

		this_cpu_add(ns->stats.pcpu->objects, b->btgts[i].nr_objs);
		for (j = 0; j < i; j++)
			if (b->btgts[j].t->ns == ns)
				break;
		if (j < i)
			continue;	/* this disk's batch is counted */
		this_cpu_inc(ns->stats.pcpu->batches);
		if (b->interrupted)
			this_cpu_inc(ns->stats.pcpu->batches_interrupted);
		if (b->nr_cmds)
			this_cpu_inc(ns->stats.pcpu->batch_lat[kvblk_lat_bucket(lat)]);
	}
}

/*
 * A released batch (nothing of it referenced any more) goes back to its
 * context for the next batch, as its slots do: the context keeps one, the
 * larger of this and the one it has, of at most KVBLK_SPARE_BATCH_OBJS_MAX
 * descriptors (64 KiB at most), until the file is closed.
 */
static void kvblk_batch_keep(struct kvblk_ctx *ctx, struct kvblk_batch *b)
{
	/* Read before the xchg(): from then on another batch may take @b. */
	u32 cap = b->cap;
	struct kvblk_batch *old;

	BUILD_BUG_ON(offsetof(struct kvblk_batch, objs) +
		     KVBLK_SPARE_BATCH_OBJS_MAX * sizeof(struct kvblk_obj) > SZ_64K);
	if (cap > KVBLK_SPARE_BATCH_OBJS_MAX) {
		kvfree(b);
		return;
	}
	old = xchg(&ctx->spare_batch, b);
	if (old && old->cap > cap)
		old = xchg(&ctx->spare_batch, old);
	kvfree(old);
}

/*
 * Drop everything the batch holds. Process context: the last buffer or
 * context reference unpins pages and releases the block device file.
 */
static void kvblk_batch_release(struct kvblk_batch *b, bool submitted)
{
	struct kvblk_ctx *ctx;
	u32 i;

	for (i = 0; i < b->nr_init; i++) {
		struct kvblk_obj *o = &b->objs[i];

		if (submitted && o->status)
			this_cpu_inc(o->bt->t->ns->stats.pcpu->objects_failed);
		atomic_dec(&o->buf->inflight);
		kvblk_buf_put(o->buf);
	}
	if (submitted)
		kvblk_batch_count(b);
	/* No command is in flight: the slots go back to the context. */
	if (b->slot_arr)
		kvblk_slots_keep(b->ctx, b->slot_arr);
	/* A batch rejected before submission never reached its done. */
	kvblk_batch_btgts_done(b);
	for (i = 0; i < b->nr_btgts; i++)
		if (b->btgts[i].engine->end)
			b->btgts[i].engine->end(&b->btgts[i]);
	if (b->btgts != b->btgts_inline)
		kvfree(b->btgts);
	ctx = b->ctx;
	kvblk_batch_keep(ctx, b);
	kvblk_ctx_put(ctx);
}

static void kvblk_batch_free_work(struct work_struct *work)
{
	struct kvblk_batch *b = container_of(work, struct kvblk_batch, free_work);

	trace_kvblk_batch_end(b, 0, b->nr_cmds ? b->t_done - b->t_first : 0,
			      -EINTR);
	kvblk_batch_release(b, true);
}

/* The last command completed (or none was issued). Any context. */
static void kvblk_batch_done(struct kvblk_batch *b)
{
	b->t_done = ktime_get_ns();
	kvblk_batch_engines_done(b);
	if (b->end) {
		/* Asynchronous (uring.c): nobody waits, the end callback owns b. */
		b->end(b);
		return;
	}
	if (atomic_xchg(&b->owner, KVBLK_BATCH_DONE) == KVBLK_BATCH_ABANDONED) {
		INIT_WORK(&b->free_work, kvblk_batch_free_work);
		queue_work(kvblk_wq, &b->free_work);
	} else {
		/*
		 * The waiter frees b: complete_all() is the last access here.
		 * _all, so that no wait consumes it: a killed waiter that lost
		 * the race waits on it again (kvblk_ioctl_load_many()).
		 */
		complete_all(&b->done);
	}
}

/*
 * end_io gives a slot back. Any context, lock-free. The submitter is woken
 * only when wake_mark slots are free: the count only grows while it sleeps
 * (it alone takes slots), so the completion that brings it to the mark sees
 * it, and every slot in flight completes. The fully ordered
 * atomic_inc_return() and wq_has_sleeper() pair with the waiter's queueing
 * before it tests the count.
 */
static void kvblk_slot_put(struct kvblk_batch *b, struct kvblk_cmd *cmd)
{
	llist_add(&cmd->free_node, &b->free_list);
	if (atomic_inc_return(&b->nr_free) >= b->wake_mark &&
	    wq_has_sleeper(&b->slot_wq))
		wake_up(&b->slot_wq);
}

/* The submitter gives back a slot it took but did not use. */
static void kvblk_slot_unget(struct kvblk_batch *b, struct kvblk_cmd *cmd)
{
	cmd->free_node.next = b->local;
	b->local = &cmd->free_node;
}

/*
 * The most requests blk_start_plug_nr_ios() lets a plug take at once:
 * BLK_MAX_REQUEST_COUNT (block/blk-mq.h: 32 from 6.1 to 7.2).
 */
#define KVBLK_PLUG_MAX_IOS	32

/*
 * Tell the block layer that about @n commands of @b follow under @plug:
 * the next request it allocates takes up to @n tags in one pass over the
 * tag bitmap and keeps the rest in the plug for the commands after it
 * (what io_uring asks through blk_start_plug_nr_ios(), not exported: the
 * field it sets, struct blk_plug.nr_ios in include/linux/blkdev.h, 6.1 to
 * 7.2; tag allocation was 3% of a batch of 4 KiB loads under QEMU).
 * Requests left unused are freed by blk_finish_plug() or when the task
 * sleeps. Only where @plug is the task's plug (a caller's plug around ours
 * makes ours unused), and not for a batch with PRP commands: the PRP
 * engine allocates its requests itself, each after the queue's checks
 * (kvblk_alloc_rq(): a frozen or dying queue), which a request cached in
 * the plug would skip.
 */
static void kvblk_plug_expect(const struct kvblk_batch *b,
			      struct blk_plug *plug, unsigned int n)
{
	if (current->plug == plug && n > 1 &&
	    !(b->engines & BIT(KVBLK_ENGINE_PRP)))
		plug->nr_ios = min_t(unsigned int, n, KVBLK_PLUG_MAX_IOS);
}

/*
 * A free command slot: from the submitter's own list, else every slot the
 * completions gave back since the last look, taken at once (the plug told
 * that as many commands follow); waits (killably, plug flushed) while none
 * is free.
 */
static struct kvblk_cmd *kvblk_slot_get(struct kvblk_batch *b,
					struct blk_plug *plug)
{
	struct llist_node *n;
	int ret;

	for (;;) {
		n = b->local;
		if (n) {
			b->local = n->next;
			return llist_entry(n, struct kvblk_cmd, free_node);
		}
		if (!llist_empty(&b->free_list)) {
			unsigned int taken = 0;

			b->local = llist_del_all(&b->free_list);
			for (n = b->local; n; n = n->next)
				taken++;
			/* A new run: its commands' submission time. */
			b->t_issue = ktime_get_ns();
			kvblk_plug_expect(b, plug, taken);
			/*
			 * A completion may have listed its slot and not yet
			 * counted it: the count dips below zero for a moment.
			 */
			atomic_sub(taken, &b->nr_free);
			continue;
		}

		blk_finish_plug(plug);
		/* Freezable: a suspend does not wait for a long batch (review L8). */
		ret = wait_event_state(b->slot_wq,
				       atomic_read(&b->nr_free) >= b->wake_mark,
				       (TASK_KILLABLE | TASK_FREEZABLE));
		blk_start_plug(plug);
		if (ret)
			return ERR_PTR(-EINTR);
	}
}

/*
 * One CQE per object: a command of @o completed, or its submission ended;
 * the last tells uring.c. Any context; @o's status is final then (each
 * command set it before its fully ordered decrement).
 */
static void kvblk_obj_put(struct kvblk_batch *b, struct kvblk_obj *o)
{
	if (b->obj_end && atomic_dec_and_test(&o->pending))
		b->obj_end(b, o);
}

/**
 * kvblk_cmd_issue() - a command is about to be handed to the device.
 * @b: its batch.
 * @cmd: the command; it may complete as soon as the engine hands it over.
 * @hwq: blk-mq hardware queue for the tracepoint (0 when not known).
 *
 * Counts the command in the batch and the counters and traces it. Its
 * submission time is the batch's @t_issue: when the submitter's current
 * run of commands began (kvblk_submit_all(), or its last take-back of
 * freed slots).
 */
void kvblk_cmd_issue(struct kvblk_batch *b, struct kvblk_cmd *cmd, u32 hwq)
{
	struct kvblk_ns *ns = b->objs[cmd->obj].bt->t->ns;
	u64 now = b->t_issue;

	if (!b->nr_cmds)
		b->t_first = now;
	b->nr_cmds++;
	cmd->start_ns = now;
	if (b->obj_end)
		atomic_inc(&b->objs[cmd->obj].pending);
	atomic_inc(&b->pending);
	kvblk_stats_inflight_inc(&ns->stats);
	trace_kvblk_cmd_submit(cmd, hwq, 0, 0);
}

/**
 * kvblk_cmd_end() - a command completed.
 * @cmd: the command of kvblk_cmd_issue().
 * @err: 0, or the object's status for this failure (-EIO, -ENOLINK, ...).
 * @kind: the error counter when @err is not 0.
 * @hwq: as for kvblk_cmd_issue().
 *
 * Context: any (hard or soft IRQ, process). The first error of an object
 * wins. After this, the batch may be gone unless this was its last
 * command.
 */
void kvblk_cmd_end(struct kvblk_cmd *cmd, int err, enum kvblk_err_kind kind,
		   u32 hwq)
{
	struct kvblk_batch *b = cmd->b;
	struct kvblk_obj *obj = &b->objs[cmd->obj];
	struct kvblk_ns *ns = obj->bt->t->ns;
	u64 lat = ktime_get_ns() - cmd->start_ns;

	if (err) {
		this_cpu_inc(ns->stats.pcpu->errors[kind]);
		cmpxchg(&obj->status, 0, err);
	} else if (b->store) {
		this_cpu_add(ns->stats.pcpu->bytes_written, cmd->bytes);
	} else {
		this_cpu_add(ns->stats.pcpu->bytes, cmd->bytes);
	}
	this_cpu_inc(ns->stats.pcpu->commands);
	this_cpu_inc(ns->stats.pcpu->cmd_lat[kvblk_lat_bucket(lat)]);
	atomic_dec(&ns->stats.inflight);
	trace_kvblk_cmd_complete(cmd, hwq, err, lat);

	kvblk_buf_dma_end(obj->buf);
	kvblk_slot_put(b, cmd);
	/* Before the batch's end, which may free b. */
	kvblk_obj_put(b, obj);
	if (atomic_dec_and_test(&b->pending))
		kvblk_batch_done(b);
}

static int kvblk_submit_cmd(struct kvblk_batch *b, u32 i, u64 done, u32 len,
			    struct blk_plug *plug)
{
	struct kvblk_obj *o = &b->objs[i];
	const struct kvblk_engine_ops *engine = o->bt->engine;
	const struct kvblk_tgt *t = o->bt->t;
	struct kvblk_cmd *cmd;
	int ret;

	cmd = kvblk_slot_get(b, plug);
	if (IS_ERR(cmd))
		return PTR_ERR(cmd);
	/*
	 * Engine state of another engine or disk (PRP lists of its pool). A
	 * slot back from an earlier batch keeps a bvec array, and no target.
	 */
	if (cmd->state_engine && (cmd->state_engine != engine ||
				  (cmd->state_tgt && cmd->state_tgt->ns != t->ns)))
		kvblk_slot_state_release(cmd);
	cmd->state_tgt = t;
	cmd->state_engine = engine;
	cmd->b = b;
	cmd->obj = i;
	cmd->bytes = len;
	cmd->done = done;
	cmd->slba = (t->start_bytes + o->offset + done) >> o->bt->lba_shift;
	ret = engine->submit(b, cmd, plug);
	if (ret)
		kvblk_slot_unget(b, cmd);	/* with its engine state, for the next */
	return ret;
}

/*
 * Submit every command of the batch. Returns 0, or why it stopped early:
 * -EINTR fatal signal, -ENOMEM; the objects not wholly submitted then
 * carry -ECANCELED. Any other error of an engine fails its own object
 * only (documented for struct kvblk_desc_result: -ENODEV its buffer was
 * revoked or unmapped, -ESTALE, -ERANGE, -ETXTBSY, ...), and -ENOLINK (its
 * disk is going away) and -ESTALE (its LBA format changed) fail every
 * later object of the same target too, without a command: the objects of
 * the batch's other targets go on (review-2 N6). An object that failed
 * before submission (kvblk_batch_write_back()) is skipped.
 */
static int kvblk_submit_all(struct kvblk_batch *b)
{
	struct blk_plug plug;
	unsigned int first_run = 0;
	int ret = 0;
	u32 i;

	/* The commands of the first run: up to a slot each. */
	for (i = 0; i < b->nr_objs && first_run < b->nr_slots; i++)
		first_run += DIV_ROUND_UP_ULL(b->objs[i].length,
					      b->objs[i].bt->max_cmd_bytes);
	b->t_issue = ktime_get_ns();
	blk_start_plug(&plug);
	kvblk_plug_expect(b, &plug, min(first_run, b->nr_slots));
	for (i = 0; i < b->nr_objs && !ret; i++) {
		struct kvblk_obj *o = &b->objs[i];
		u64 done;
		u32 len;

		/* Held while its commands go out (kvblk_obj_put()). */
		atomic_set(&o->pending, 1);
		if (o->bt->fail)
			cmpxchg(&o->status, 0, o->bt->fail);
		/* One that failed before submission has no command. */
		for (done = o->status ? o->length : 0; done < o->length;
		     done += len) {
			len = min_t(u64, o->length - done, o->bt->max_cmd_bytes);
			/* A killed caller stops submitting at once. */
			if (fatal_signal_pending(current))
				ret = -EINTR;
			else
				ret = kvblk_submit_cmd(b, i, done, len, &plug);
			if (!ret)
				continue;
			if (ret == -EINTR || ret == -ENOMEM) {
				cmpxchg(&o->status, 0, -ECANCELED);
				break;
			}
			/* This object fails; with these its target does too. */
			if (ret == -ENOLINK || ret == -ESTALE)
				o->bt->fail = ret;
			cmpxchg(&o->status, 0, ret);
			ret = 0;
			break;
		}
		kvblk_obj_put(b, o);
	}
	blk_finish_plug(&plug);
	for (; i < b->nr_objs; i++) {
		cmpxchg(&b->objs[i].status, 0, -ECANCELED);
		/* Never submitted: it completed now. */
		atomic_set(&b->objs[i].pending, 1);
		kvblk_obj_put(b, &b->objs[i]);
	}
	return ret;
}

/*
 * The batch's view of target @t through @engine: found in @map (target
 * index * 2, + 1 for its alternative engine -> batch target + 1), else
 * added and its live geometry read by the engine's begin(). Returns the
 * batch target, or an ERR_PTR with begin()'s error. Under ctx->lock.
 */
static struct kvblk_btgt *kvblk_batch_tgt(struct kvblk_batch *b, u32 *map,
					  const struct kvblk_tgt *t,
					  const struct kvblk_engine_ops *engine)
{
	u32 slot = t->index * 2 + (engine != t->engine);
	struct kvblk_btgt *bt;
	int ret;

	if (map[slot])
		return &b->btgts[map[slot] - 1];
	bt = &b->btgts[b->nr_btgts];
	*bt = (struct kvblk_btgt){ .t = t, .engine = engine };
	ret = engine->begin(b, bt);
	if (ret)
		return ERR_PTR(ret);
	map[slot] = ++b->nr_btgts;
	if (map[slot ^ 1]) {
		bt->twin = &b->btgts[map[slot ^ 1] - 1];
		bt->twin->twin = bt;
	} else {
		b->nr_tgts++;
	}
	b->engines |= BIT(engine->id);
	return bt;
}

/*
 * Can @engine reach @buf on target @t? The PRP engine hands the controller
 * the bus addresses the buffer was mapped for; the block-layer engines need
 * its pages: host memory's, pinned at registration, or P2PDMA pages, pinned
 * per batch (kvblk_bind_all()), which only the bio engine puts in bios and
 * only on a queue that takes them.
 */
static bool kvblk_engine_reaches(const struct kvblk_engine_ops *engine,
				 const struct kvblk_tgt *t,
				 const struct kvblk_buf *buf)
{
	if (engine->dma_mapped)
		return buf->dev && buf->dev == t->ns->info.dma_dev;
	if (buf->kind == KVBLK_MEM_P2PDMA)
		return engine == &kvblk_engine_bio && kvblk_bio_p2pdma(t);
	return buf->pages;
}

/*
 * The engine that serves an object of target @t into @buf: the target's
 * default engine when it reaches the memory, else its alternative (the PRP
 * engine for memory without struct pages), else none (NULL).
 */
static const struct kvblk_engine_ops *
kvblk_obj_engine(const struct kvblk_tgt *t, const struct kvblk_buf *buf)
{
	if (kvblk_engine_reaches(t->engine, t, buf))
		return t->engine;
	if (t->alt && kvblk_engine_reaches(t->alt, t, buf))
		return t->alt;
	return NULL;
}

/*
 * Descriptor @i names target @t and a buffer that none of its engines
 * reaches: -EXDEV (bad_index names the descriptor), with a log line that
 * says why.
 */
static int kvblk_unreachable(const struct kvblk_tgt *t,
			     const struct kvblk_buf *buf, u32 i)
{
	if (buf->kind == KVBLK_MEM_P2PDMA && !t->engine->dma_mapped && !t->alt)
		pr_info_ratelimited("load: %s[%d]: descriptor %u: p2pdma memory: target %u (%s) has no PRP engine, and its queue takes no P2PDMA pages in bios (or its engine is not the bio engine)\n",
				    current->comm, task_pid_nr(current), i,
				    t->index, t->ns->name);
	else if (!buf->pages && !t->engine->dma_mapped && !t->alt)
		pr_info_ratelimited("load: %s[%d]: descriptor %u: %s memory has no struct pages for the block layer, and target %u (%s) has no PRP engine (not an nvme-pci namespace, its PRP checks failed, or attached with KVBLK_ATTACH_F_ENGINE_BIO)\n",
				    current->comm, task_pid_nr(current), i,
				    buf->ops->name, t->index, t->ns->name);
	else
		pr_info_ratelimited("load: %s[%d]: descriptor %u: %s buffer %u is not mapped for the PCI function of target %u (%s)\n",
				    current->comm, task_pid_nr(current), i,
				    buf->ops->name, buf->id, t->index, t->ns->name);
	return -EXDEV;
}

/*
 * May a store batch write to target @bt->t through engine @bt->engine (the
 * PRP engine, which serves memory without struct pages on a namespace whose
 * default engine is the bio engine, only reads)? Rights follow the attached
 * fd, as for pwrite() on it. Errors as documented under "Stores" in the
 * uapi header.
 */
static int kvblk_store_allowed(const struct kvblk_btgt *bt)
{
	struct file *file = bt->t->file;
	struct inode *inode = file_inode(file);

	if (!bt->engine->stores)
		return -EOPNOTSUPP;
	if (!(file->f_mode & FMODE_WRITE) || (file->f_flags & O_APPEND))
		return -EBADF;
	if (S_ISBLK(inode->i_mode) ?
	    bdev_read_only(I_BDEV(file->f_mapping->host)) : IS_RDONLY(inode))
		return -EROFS;
	/*
	 * Active swap (a device's inode is its mapping's host, not the device
	 * node): pwrite() refuses it too (blkdev_write_iter(),
	 * generic_write_checks()).
	 */
	if (IS_SWAPFILE(file->f_mapping->host))
		return -ETXTBSY;
	return file->f_op->write_iter ? 0 : -EOPNOTSUPP;
}

/*
 * The per-call checks of read(2) and write(2) on the fd of every target
 * the batch names, over the byte range its descriptors span there:
 * rw_verify_area(), that is the LSM's file permission hook
 * (security_file_permission(): SELinux, AppArmor, ...) and fanotify's
 * permission events (FAN_ACCESS_PERM; 6.8 and later also the range events
 * of fsnotify_file_area_perm()), as io_uring's reads and writes run them
 * per request. Before the descriptors are validated and any engine began:
 * a permission listener answers when it likes, and nothing of the batch
 * is held meanwhile (no lock, no count the removal of a PCI function
 * waits for). One call per target per batch (not per descriptor): the
 * whole batch is one access, as one preadv() is. Returns 0 or the hook's
 * errno, *bad set to the refused target's first descriptor. Descriptors
 * that name no target or an impossible range are left to
 * kvblk_validate(), which refuses them.
 */
static int kvblk_batch_access(struct kvblk_ctx *ctx, struct kvblk_batch *b,
			      const struct kvblk_io_desc *descs, u32 *bad)
{
	struct kvblk_span {
		u64 lo;
		u64 hi;
		u32 first;
	} *span, span_stack[KVBLK_BATCH_STACK_TGTS];
	u32 nr, i;
	int err = 0;

	mutex_lock(&ctx->lock);
	nr = ctx->nr_tgts;
	mutex_unlock(&ctx->lock);
	if (!nr)
		return 0;
	span = span_stack;
	if (nr <= ARRAY_SIZE(span_stack))
		memset(span_stack, 0, sizeof(span_stack));
	else
		span = kvcalloc(nr, sizeof(*span), GFP_KERNEL);
	if (!span)
		return -ENOMEM;
	for (i = 0; i < b->nr_objs; i++) {
		const struct kvblk_io_desc *d = &descs[i];
		struct kvblk_span *sp;

		if (d->target >= nr || !d->length || d->offset > LLONG_MAX ||
		    d->length > LLONG_MAX - d->offset)
			continue;
		sp = &span[d->target];
		if (!sp->hi) {
			sp->lo = d->offset;
			sp->first = i;
		}
		sp->lo = min(sp->lo, d->offset);
		sp->hi = max(sp->hi, d->offset + d->length);
	}
	for (i = 0; i < nr && !err; i++) {
		struct kvblk_tgt *t;
		loff_t pos = span[i].lo;

		if (!span[i].hi)
			continue;
		/* Targets stay until the context is freed; the batch holds it. */
		t = kvblk_ctx_tgt(ctx, i);
		/* write(2) refuses an fd without write access first (-EBADF). */
		if (!t || (b->store && !(t->file->f_mode & FMODE_WRITE)))
			continue;
		err = rw_verify_area(b->store ? WRITE : READ, t->file, &pos,
				     span[i].hi - span[i].lo);
		if (err)
			*bad = span[i].first;
	}
	if (span != span_stack)
		kvfree(span);
	return err;
}

/*
 * What pread(O_DIRECT) on a block device does before it reads: write back
 * the device's dirty page cache over the range and wait for it
 * (blkdev_read_iter(): filemap_write_and_wait_range(), kiocb_write_and_wait()
 * on later kernels), so that a buffered write not yet written back is
 * what a load reads (review-2 N4). Per object of every block device target
 * (bio and PRP engines; the file engine's file system does it itself in
 * its direct I/O, iomap_dio_rw()), free when the device has no page cache
 * (mapping->nrpages). A write-back error fails the object (-EIO) before
 * it has a command, as it fails the pread(). Stores write back and drop
 * the cache per object themselves (engine_bio.c). Caller's process
 * context, before submission.
 */
static void kvblk_batch_write_back(struct kvblk_batch *b)
{
	u32 i;

	if (b->store)
		return;
	for (i = 0; i < b->nr_objs; i++) {
		struct kvblk_obj *o = &b->objs[i];
		struct file *file = o->bt->t->file;
		int err;

		if (!S_ISBLK(file_inode(file)->i_mode) ||
		    !file->f_mapping->nrpages)
			continue;
		err = filemap_write_and_wait_range(file->f_mapping, o->offset,
						   o->offset + o->length - 1);
		if (err)
			o->status = -EIO;
	}
}

/*
 * What read(2) and write(2) report when they moved bytes: an access or
 * modify event on the fd of every target the batch moved bytes of, once
 * per target (inotify IN_ACCESS/IN_MODIFY, fanotify FAN_ACCESS/FAN_MODIFY).
 */
static void kvblk_batch_notify(struct kvblk_batch *b)
{
	u32 i;

	for (i = 0; i < b->nr_objs; i++)
		if (!b->objs[i].status)
			b->objs[i].bt->moved = true;
	for (i = 0; i < b->nr_btgts; i++) {
		struct kvblk_btgt *bt = &b->btgts[i];

		/* Its target's other engine, listed first, reported it. */
		if (!bt->moved || (bt->twin && bt->twin < bt && bt->twin->moved))
			continue;
		if (b->store)
			fsnotify_modify(bt->t->file);
		else
			fsnotify_access(bt->t->file);
	}
}

/*
 * Read the live geometry of every target the batch names, validate every
 * descriptor against its own target's and take a reference on its buffer.
 * Returns 0 or the first descriptor's error, with *bad set to its index.
 */
static int kvblk_validate(struct kvblk_ctx *ctx, struct kvblk_batch *b,
			  const struct kvblk_io_desc *descs, u32 *bad, u64 *nr_cmds,
			  u64 *bytes)
{
	struct kvblk_buf *last_buf = NULL;
	u32 *map, nr_map, nr_bt, last_id = 0;
	u32 map_stack[2 * KVBLK_BATCH_STACK_TGTS];
	int err = 0;
	u32 i;

	*nr_cmds = 0;
	*bytes = 0;
	mutex_lock(&ctx->lock);
	nr_map = ctx->nr_tgts;
	/*
	 * Two per target: its default engine and its alternative. Few
	 * targets: the map on the stack; few pairs possible: they are in the
	 * batch itself (KVBLK_BATCH_INLINE_BTGTS).
	 */
	map = map_stack;
	if (nr_map * 2 <= ARRAY_SIZE(map_stack))
		memset(map_stack, 0, sizeof(map_stack));
	else
		map = kvcalloc(nr_map * 2, sizeof(*map), GFP_KERNEL);
	nr_bt = min(nr_map * 2, b->nr_objs);
	b->btgts = b->btgts_inline;
	if (nr_bt > ARRAY_SIZE(b->btgts_inline))
		b->btgts = kvmalloc_array(nr_bt, sizeof(*b->btgts),
					  GFP_KERNEL_ACCOUNT);
	if (!map || !b->btgts) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < b->nr_objs; i++) {
		const struct kvblk_io_desc *d = &descs[i];
		const struct kvblk_engine_ops *engine = NULL;
		struct kvblk_obj *o = &b->objs[i];
		struct kvblk_buf *buf;
		struct kvblk_btgt *bt;
		struct kvblk_tgt *t;
		u64 lba_mask;

		t = d->target < nr_map ? kvblk_ctx_tgt(ctx, d->target) : NULL;
		if (!t) {
			err = -EINVAL;
			*bad = i;
			break;
		}
		/*
		 * The object's engine follows its memory; geometry and rules
		 * are that engine's (the default's when it reaches none).
		 * Runs of descriptors into one buffer: one lookup per run.
		 */
		if (!last_buf || d->buf_id != last_id) {
			last_buf = xa_load(&ctx->bufs, d->buf_id);
			last_id = d->buf_id;
		}
		buf = last_buf;
		if (buf)
			engine = kvblk_obj_engine(t, buf);
		bt = kvblk_batch_tgt(b, map, t, engine ?: t->engine);
		if (IS_ERR(bt)) {
			err = PTR_ERR(bt);
			*bad = i;
			break;
		}
		/* A target a store may not write: refused at its first descriptor. */
		if (b->store && !bt->nr_objs) {
			err = kvblk_store_allowed(bt);
			if (err) {
				*bad = i;
				break;
			}
		}
		lba_mask = (1ULL << bt->lba_shift) - 1;
		if (d->flags || d->reserved || !d->length ||
		    d->length > KVBLK_MAX_DESC_BYTES ||
		    ((d->offset | d->length) & lba_mask))
			err = -EINVAL;
		else if (d->offset > bt->capacity ||
			 d->length > bt->capacity - d->offset)
			err = -ERANGE;
		else if (d->buf_offset & bt->align_mask)
			err = -EINVAL;
		else if (!buf || d->buf_offset > buf->len ||
			 d->length > buf->len - d->buf_offset)
			err = -EINVAL;
		else if (!engine)
			err = kvblk_unreachable(t, buf, i);
		if (err) {
			*bad = i;
			break;
		}
		kref_get(&buf->ref);
		atomic_inc(&buf->inflight);
		*o = (struct kvblk_obj){
			.bt = bt,
			.buf = buf,
			.offset = d->offset,
			.length = d->length,
			.buf_offset = d->buf_offset,
			.tag = d->tag,
		};
		b->nr_init = i + 1;
		if (b->store) {
			if (!bt->nr_objs || d->offset < bt->wr_start)
				bt->wr_start = d->offset;
			bt->wr_end = max(bt->wr_end, d->offset + d->length);
		}
		bt->nr_objs++;
		*nr_cmds += DIV_ROUND_UP_ULL(d->length, bt->max_cmd_bytes);
		*bytes += d->length;
	}
out:
	mutex_unlock(&ctx->lock);
	if (map != map_stack)
		kvfree(map);
	return err;
}

/*
 * Memory that is pinned per batch (kvblk_mem_ops.bind): replace each such
 * buffer of the batch by one pinned for the window its objects touch (and
 * mapped when the PRP engine serves one of them), and rebase their offsets
 * into it. Before any command is sent, so
 * that a failure rejects the call at the first descriptor of that buffer
 * (*bad).
 */
static int kvblk_bind_all(struct kvblk_batch *b, u32 *bad)
{
	u32 i, j;

	for (i = 0; i < b->nr_objs; i++) {
		struct kvblk_buf *reg = b->objs[i].buf, *win;
		u64 lo = U64_MAX, hi = 0;

		bool map = false;

		if (!reg->ops->bind)
			continue;
		for (j = i; j < b->nr_objs; j++) {
			struct kvblk_obj *o = &b->objs[j];

			if (o->buf != reg)
				continue;
			lo = min(lo, round_down(o->buf_offset, PAGE_SIZE));
			hi = max(hi, round_up(o->buf_offset + o->length, PAGE_SIZE));
			/* Mapped by kvblk for the PRP engine only. */
			map |= o->bt->engine->dma_mapped;
		}
		win = reg->ops->bind(reg, lo, hi - lo, map);
		if (IS_ERR(win)) {
			*bad = i;
			return PTR_ERR(win);
		}
		/* Each object holds a reference on the window instead. */
		for (j = i; j < b->nr_objs; j++) {
			struct kvblk_obj *o = &b->objs[j];

			if (o->buf != reg)
				continue;
			if (j != i)
				kref_get(&win->ref);
			atomic_inc(&win->inflight);
			o->buf = win;
			o->buf_offset -= lo;
			atomic_dec(&reg->inflight);
			kvblk_buf_put(reg);
		}
	}
	return 0;
}

/*
 * Every engine's enter() for every target the batch began on, once its
 * descriptors were validated and its memory checked and pinned: nothing
 * after this waits on the caller, so what a device's removal waits for is
 * taken only now (engine.h, review-2 N3). A failure names the first
 * descriptor of that target; the targets entered are left by their
 * engines' done() when the batch is released.
 */
static int kvblk_batch_enter(struct kvblk_batch *b, u32 *bad)
{
	u32 i, j;
	int ret;

	for (i = 0; i < b->nr_btgts; i++) {
		struct kvblk_btgt *bt = &b->btgts[i];

		if (!bt->engine->enter)
			continue;
		ret = bt->engine->enter(bt);
		if (!ret)
			continue;
		for (j = 0; j < b->nr_objs && b->objs[j].bt != bt; j++)
			;
		*bad = j;
		return ret;
	}
	return 0;
}

/*
 * Copy the descriptors in; a caller's larger struct must have a zero tail.
 * Returns 0, -EFAULT, -EINTR (fatal signal) or -E2BIG with *bad set.
 */
static int kvblk_copy_descs(const struct kvblk_load_many *lm,
			    struct kvblk_io_desc *descs, u32 *bad)
{
	u32 i;
	int ret;

	if (lm->desc_bytes == sizeof(*descs))
		return copy_from_user(descs, u64_to_user_ptr(lm->descs),
				      (size_t)lm->nr_descs * sizeof(*descs)) ?
		       -EFAULT : 0;
	for (i = 0; i < lm->nr_descs; i++) {
		if (fatal_signal_pending(current))
			return -EINTR;
		cond_resched();
		ret = copy_struct_from_user(&descs[i], sizeof(*descs),
					    u64_to_user_ptr(lm->descs +
							    (u64)i * lm->desc_bytes),
					    lm->desc_bytes);
		if (ret) {
			*bad = i;
			return ret;
		}
	}
	return 0;
}

static int kvblk_put_result(const struct kvblk_load_many *lm, u32 i,
			    int status, u64 bytes)
{
	struct kvblk_desc_result r = { .status = status, .bytes = bytes };
	void __user *p = u64_to_user_ptr(lm->results + (u64)i * lm->result_bytes);

	return copy_to_user(p, &r, sizeof(r)) ? -EFAULT : 0;
}

/* Results of a call that failed before submission: @bad gets @err. */
static int kvblk_put_rejected(const struct kvblk_load_many *lm, s32 bad,
			      int err)
{
	u32 i;

	for (i = 0; i < lm->nr_descs; i++)
		if (kvblk_put_result(lm, i, (s32)i == bad ? err : -ECANCELED, 0))
			return -EFAULT;
	return 0;
}

/*
 * Killable wait for the last completion. Freezable too: a batch may run
 * for minutes (65536 objects of up to 4 GiB), and a TASK_KILLABLE sleep
 * that is not would make every suspend in the meantime fail ("Freezing of
 * tasks failed"; review L8); nothing is held here, and the commands
 * complete while the task is frozen. The hung-task detector skips
 * killable sleeps.
 */
static int kvblk_wait_done(struct kvblk_batch *b)
{
	return wait_for_completion_state(&b->done,
					 TASK_KILLABLE | TASK_FREEZABLE) ? -EINTR : 0;
}

/*
 * Check the header of @lm (already copied in). Returns 0, or the call's
 * error when nothing may be written back (see struct kvblk_load_many).
 */
static int kvblk_check_header(struct kvblk_ctx *ctx,
			      const struct kvblk_load_many *lm)
{
	struct kvblk_ns *ns = kvblk_ctx_ns(ctx);

	if ((lm->flags & ~KVBLK_LOAD_F_ALL) || lm->reserved[0] || lm->reserved[1])
		return -EINVAL;
	if ((lm->flags & KVBLK_LOAD_F_DURABLE) && !(lm->flags & KVBLK_LOAD_F_STORE))
		return -EINVAL;
	if (!lm->nr_descs || lm->desc_bytes < KVBLK_DESC_SIZE_VER0 ||
	    lm->result_bytes < KVBLK_DESC_RESULT_SIZE_VER0)
		return -EINVAL;
	/* Bounds the zero-tail scan per descriptor (clone3()/openat2() rule). */
	if (lm->desc_bytes > PAGE_SIZE || lm->result_bytes > PAGE_SIZE)
		return -E2BIG;
	if (lm->nr_descs > (ns ? READ_ONCE(ns->max_descs) : READ_ONCE(g_max_descs)))
		return -E2BIG;
	return 0;
}

/**
 * kvblk_batch_prepare() - the first half of a LOAD_MANY, before submission.
 * @ctx: context.
 * @uarg: user pointer to struct kvblk_load_many.
 *
 * Copies the header and the descriptors in, reads the live geometry of
 * every target named, validates every descriptor and the batch as a whole,
 * binds per-batch memory and allocates the command slots. Nothing is
 * submitted. Caller's process context (the context's owner).
 *
 * Return: the batch, ready for kvblk_batch_submit(); or an ERR_PTR with
 * the call's error, after the results and header were written back as
 * struct kvblk_load_many says for a call rejected before submission.
 */
struct kvblk_batch *kvblk_batch_prepare(struct kvblk_ctx *ctx,
					void __user *uarg)
{
	struct kvblk_io_desc *descs = NULL, descs_stack[KVBLK_BATCH_STACK_DESCS];
	struct kvblk_load_many lm;
	struct kvblk_batch *b = NULL;
	struct kvblk_ns *ns;
	u64 nr_cmds, bytes;
	u32 usize, bad = 0;
	int ret;

	ret = kvblk_copy_in(&lm, sizeof(lm), uarg, KVBLK_LOAD_MANY_SIZE_VER0, &usize);
	if (ret)
		return ERR_PTR(ret);
	ret = kvblk_check_header(ctx, &lm);
	if (ret)
		return ERR_PTR(ret);

	lm.bad_index = -1;
	lm.nr_ok = 0;
	lm.engine = KVBLK_ENGINE_NONE;
	lm.engines = 0;
	lm.nr_targets = 0;
	lm.nr_cmds = 0;
	lm.elapsed_ns = 0;

	ns = kvblk_ctx_ns(ctx);
	if (!ns) {
		ret = -ENXIO;
		goto out_reject;
	}
	descs = descs_stack;
	if (lm.nr_descs > ARRAY_SIZE(descs_stack))
		descs = kvmalloc_array(lm.nr_descs, sizeof(*descs), GFP_KERNEL_ACCOUNT);
	b = kvblk_batch_alloc(ctx, ns, lm.nr_descs);
	if (!descs || !b) {
		ret = -ENOMEM;
		goto out_reject;
	}
	b->store = lm.flags & KVBLK_LOAD_F_STORE;
	b->durable = lm.flags & KVBLK_LOAD_F_DURABLE;
	ret = kvblk_copy_descs(&lm, descs, &bad);
	if (ret) {
		if (ret == -E2BIG)
			lm.bad_index = bad;
		goto out_reject;
	}
	/*
	 * read(2)'s and write(2)'s permission checks on every target; then
	 * each target's geometry as it is now (size, block size, alignment),
	 * and every descriptor against its own target's.
	 */
	ret = kvblk_batch_access(ctx, b, descs, &bad);
	if (!ret)
		ret = kvblk_validate(ctx, b, descs, &bad, &nr_cmds, &bytes);
	if (!ret)
		ret = kvblk_batch_check(b, &bad);
	if (!ret)
		ret = kvblk_bind_all(b, &bad);
	if (!ret)
		ret = kvblk_batch_enter(b, &bad);
	if (ret) {
		/* Out of memory is the call's, whichever descriptor met it. */
		if (ret != -ENOMEM)
			lm.bad_index = bad;
		goto out_reject;
	}
	/* The batch tracepoints carry the first descriptor's disk. */
	b->ns = b->objs[0].bt->t->ns;
	if (descs != descs_stack)
		kvfree(descs);
	descs = NULL;
	kvblk_batch_write_back(b);

	ret = kvblk_batch_alloc_slots(b, min_t(u64, nr_cmds,
					       READ_ONCE(ns->max_inflight)));
	if (ret)
		goto out_reject;

	b->id = atomic64_inc_return(&kvblk_batch_seq);
	trace_kvblk_batch_start(b, nr_cmds, bytes);
	/* One engine, or several: see kvblk_load_many.engine and .engines. */
	lm.engines = b->engines;
	lm.nr_targets = b->nr_tgts;
	lm.engine = is_power_of_2(b->engines) ? ilog2(b->engines) :
		    KVBLK_ENGINE_MIXED;
	b->lm = lm;
	b->uarg = uarg;
	b->usize = usize;
	return b;

out_reject:
	if (descs != descs_stack)
		kvfree(descs);
	if (b)
		kvblk_batch_release(b, false);
	if (ret == -EINTR)
		return ERR_PTR(ret);	/* killed while copying descriptors: write nothing */
	/*
	 * -EFAULT copying the descriptors: the results may be unwritable too.
	 * Results or a header that cannot be written make the call -EFAULT:
	 * the caller would read results that say nothing (review L9).
	 */
	if ((ret != -EFAULT || lm.bad_index >= 0) &&
	    kvblk_put_rejected(&lm, lm.bad_index, ret))
		ret = -EFAULT;
	if (kvblk_copy_out(uarg, &lm, sizeof(lm), usize))
		ret = -EFAULT;
	return ERR_PTR(ret);
}

/**
 * kvblk_batch_submit() - put every command of a prepared batch in flight.
 * @b: from kvblk_batch_prepare(), with @b->end set for an asynchronous
 *     batch.
 *
 * Returns when every command was handed to its engine, or when submission
 * stopped early (b->submit_ret: -EINTR fatal signal, -ENOMEM, -ENOLINK the
 * queue is going away; the objects not submitted carry their status). For
 * a synchronous batch (no @b->end) the caller then waits for b->done; an
 * asynchronous batch may be ended, and @b gone, as soon as this returns.
 */
void kvblk_batch_submit(struct kvblk_batch *b)
{
	b->submit_ret = kvblk_submit_all(b);
	if (atomic_dec_and_test(&b->pending))
		kvblk_batch_done(b);
}

/**
 * kvblk_obj_sync() - make what an object loaded visible to the CPU.
 * @o: an object of a batch, every command of it completed with status 0.
 *
 * Syncs what the PRP engine's mapping received (nothing for the other
 * engines), once: before its per-object CQE (uring.c), else when the
 * batch finishes. Process context.
 *
 * Return: 0; -ENODEV when the bytes needed a sync (swiotlb, non-coherent
 * DMA) and the mapping is gone: the removal of its PCI function unmapped
 * it meanwhile (it no longer waits for batches whose commands completed),
 * without copying anything back; the object's bytes are not in memory.
 */
int kvblk_obj_sync(struct kvblk_obj *o)
{
	int ret = 0;

	if (o->synced)
		return 0;
	o->synced = true;
	if (!o->bt->engine->dma_mapped || !o->buf->need_sync)
		return 0;
	if (kvblk_dma_use_begin(o->buf)) {
		kvblk_buf_sync(o->buf, o->buf_offset, o->length, true);
		kvblk_dma_use_end();
	} else {
		ret = -ENODEV;
	}
	return ret;
}

/**
 * kvblk_batch_finish() - the end of a batch whose commands all completed.
 * @b: the batch; released here.
 * @ret: 0, or how submission or the wait ended (-EINTR: the caller was
 *       killed, nothing is written back).
 *
 * Syncs what the PRP engine's mapping received, writes the per-object
 * results and the header's output fields into the caller's memory, traces
 * the end and releases the batch. Process context of the context's owner
 * (its address space) unless @ret is -EINTR. Nothing is synced for a
 * caller that was killed, as nothing is written back: the syncs can take
 * long (a bounce copy per page; DMA-API debugging), so a synchronous
 * caller killed while they run stops them at the next object (an object's
 * own sync, kvblk_buf_sync(), runs to its end) and the batch counts as
 * interrupted.
 *
 * Return: descriptors with status 0, or the call's error.
 */
long kvblk_batch_finish(struct kvblk_batch *b, long ret)
{
	struct kvblk_load_many *lm = &b->lm;
	u32 i;

	for (i = 0; i < b->nr_objs; i++) {
		struct kvblk_obj *o = &b->objs[i];

		if (o->status)
			continue;
		if (ret != -EINTR && !b->end && fatal_signal_pending(current)) {
			b->interrupted = true;
			ret = -EINTR;
		}
		if (ret != -EINTR && kvblk_obj_sync(o)) {
			o->status = -ENODEV;
			continue;
		}
		lm->nr_ok++;
	}
	lm->nr_cmds = b->nr_cmds;
	lm->elapsed_ns = b->nr_cmds ? b->t_done - b->t_first : 0;
	if (ret != -EINTR)
		kvblk_batch_notify(b);
	/* A lost queue fails objects, not the call. */
	if (!ret || ret == -ENOLINK)
		ret = lm->nr_ok;

	if (ret != -EINTR) {
		for (i = 0; i < b->nr_objs; i++) {
			struct kvblk_obj *o = &b->objs[i];

			if (kvblk_put_result(lm, i, o->status,
					     o->status ? 0 : o->length)) {
				ret = -EFAULT;
				break;
			}
		}
		if (kvblk_copy_out(b->uarg, lm, sizeof(*lm), b->usize))
			ret = -EFAULT;
	}
	trace_kvblk_batch_end(b, lm->nr_ok, lm->elapsed_ns, ret);
	kvblk_batch_release(b, true);
	return ret;
}

/**
 * kvblk_ioctl_load_many() - KVBLK_IOC_LOAD_MANY: submit a batch and wait.
 * @ctx: context.
 * @uarg: user pointer to struct kvblk_load_many.
 *
 * Once the header is accepted, every outcome writes the per-descriptor
 * results and the header's output fields (best effort when the call fails
 * as a whole).
 *
 * Return: descriptors with status 0; errors as documented for
 * struct kvblk_load_many.
 */
long kvblk_ioctl_load_many(struct kvblk_ctx *ctx, void __user *uarg)
{
	struct kvblk_batch *b;
	long ret;

	b = kvblk_batch_prepare(ctx, uarg);
	if (IS_ERR(b))
		return PTR_ERR(b);
	kvblk_batch_submit(b);
	/* Synchronous: b lives until kvblk_batch_finish() (or its abandon). */
	ret = b->submit_ret;
	if (ret == -EINTR || kvblk_wait_done(b)) {
		b->interrupted = true;
		/* Full barrier: the completion side sees ->interrupted. */
		if (atomic_xchg(&b->owner, KVBLK_BATCH_ABANDONED) != KVBLK_BATCH_DONE)
			return -EINTR;	/* the last completion releases b */
		/* It completed meanwhile: wait until complete_all() is done with b. */
		wait_for_completion(&b->done);
		ret = -EINTR;
	} else if (fatal_signal_pending(current)) {
		/* Killed, but every command completed before we noticed. */
		b->interrupted = true;
		ret = -EINTR;
	}
	return kvblk_batch_finish(b, ret);
}

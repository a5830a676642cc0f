// SPDX-License-Identifier: GPL-2.0
/*
 * uring.c - IORING_OP_URING_CMD on /dev/kvblk: LOAD_MANY without a waiting
 * thread.
 *
 * One SQE is one batch of batch.c, the same one KVBLK_IOC_LOAD_MANY runs:
 * issuing prepares and submits it (kvblk_batch_prepare(),
 * kvblk_batch_submit()) and returns -EIOCBQUEUED; the batch's last
 * completion (any context, often hard IRQ) calls kvblk_uring_end(), which
 * only queues task work; the task work runs in the submitting task, where
 * kvblk_batch_finish() writes the results into its memory and releases the
 * batch, then posts the CQE. So copy_to_user() never runs in IRQ context
 * or in a thread without the caller's address space: if io_uring runs the
 * task work elsewhere (the task exited: a kernel worker), nothing is
 * written (kvblk_ctx_owner() is false there) and the CQE says -EINTR.
 *
 * One CQE per object (KVBLK_URING_F_PER_OBJECT, a multishot SQE with a
 * provided buffer group): batch.c calls kvblk_uring_obj_end() when each
 * object completed, in any context; it and the batch's end only put a node
 * on the batch's event list (lock-free), and whoever finds the list empty
 * queues the task work, so completions that arrive before the task runs
 * it are posted in one run. The task work takes the whole list, posts a
 * record and a CQE (IORING_CQE_F_MORE) per object in completion order,
 * and ends the batch when it reaches the end node, always the last one
 * added: the batch's last completion comes after each object's. A new
 * event while the task work runs queues it again (io_uring took the
 * request off its list before calling it).
 *
 * Kernel differences (compat.h, conftest.sh): the header (6.1
 * <linux/io_uring.h>, later <linux/io_uring/cmd.h>), where the command
 * area is, io_uring_cmd_done()'s arguments and the task-work callback's;
 * multishot commands with provided buffers (io_uring_cmd_buffer_select(),
 * io_uring_mshot_cmd_post_cqe(): 7.2, URING_CMD_MSHOT) for one CQE per
 * object. Built only when conftest.sh sets KVBLK_WITH_URING_CMD
 * (kmod/Kbuild); kvblk.h has the stubs otherwise.
 */
#include <linux/fs.h>
#include <linux/uaccess.h>

#include "kvblk.h"

#ifdef KVBLK_HAVE_IO_URING_CMD_H
#include <linux/io_uring/cmd.h>
#else
#include <linux/io_uring.h>
#endif

/* What the command keeps in io_uring_cmd::pdu while its batch runs. */
struct kvblk_uring_pdu {
	struct kvblk_batch *b;
	u16 buf_group;		/* per object: the records' buffer group */
	bool stopped;		/* per object: no more CQEs for this batch */
};

static struct kvblk_uring_pdu *kvblk_uring_pdu(struct io_uring_cmd *ioucmd)
{
	BUILD_BUG_ON(sizeof(struct kvblk_uring_pdu) > sizeof(ioucmd->pdu));
	return (struct kvblk_uring_pdu *)ioucmd->pdu;
}

/* The SQE's command area, read once when the command is issued. */
static const void *kvblk_uring_sqe_cmd(struct io_uring_cmd *ioucmd)
{
#ifdef KVBLK_HAVE_URING_CMD_SQE
	return ioucmd->sqe->cmd;
#else
	return ioucmd->cmd;
#endif
}

static void kvblk_uring_done(struct io_uring_cmd *ioucmd, long ret,
			     unsigned int issue_flags)
{
#ifdef KVBLK_HAVE_URING_CMD_DONE_3
	io_uring_cmd_done(ioucmd, ret, issue_flags);
#else
	io_uring_cmd_done(ioucmd, ret, 0, issue_flags);
#endif
}

/* Task work: the submitting task ends the batch and posts the CQE. */
static void kvblk_uring_finish(struct io_uring_cmd *ioucmd,
			       unsigned int issue_flags)
{
	struct kvblk_batch *b = kvblk_uring_pdu(ioucmd)->b;
	long ret = b->submit_ret;

	/* Not the caller's address space (the task exited): write nothing. */
	if (!kvblk_ctx_owner(b->ctx)) {
		b->interrupted = true;
		ret = -EINTR;
	}
	ret = kvblk_batch_finish(b, ret);
	kvblk_uring_done(ioucmd, ret, issue_flags);
}

#ifdef KVBLK_HAVE_URING_CMD_MSHOT
/*
 * Task work: the record and CQE of object @o. The first object that finds
 * no usable buffer, or whose CQE io_uring could not post, stops the stream
 * for the rest of the batch (see the uapi header): the records posted are
 * exactly those the program received.
 */
static void kvblk_uring_post(struct io_uring_cmd *ioucmd, struct kvblk_obj *o,
			     unsigned int issue_flags)
{
	struct kvblk_uring_pdu *pdu = kvblk_uring_pdu(ioucmd);
	struct kvblk_batch *b = pdu->b;
	struct kvblk_uring_obj rec = { .index = o - b->objs, .tag = o->tag };
	struct io_br_sel sel;
	size_t len = 0, n;

	BUILD_BUG_ON(sizeof(rec) != KVBLK_URING_OBJ_SIZE_VER0);
	/* Not the caller's address space (the task exited): write nothing. */
	if (pdu->stopped || !kvblk_ctx_owner(b->ctx)) {
		pdu->stopped = true;
		return;
	}
	sel = io_uring_cmd_buffer_select(ioucmd, pdu->buf_group, &len,
					 issue_flags);
	if (sel.val < 0 || !sel.addr) {
		pdu->stopped = true;	/* -ENOBUFS: none selected */
		return;
	}
	n = min(len, sizeof(rec));
	if (!o->status && kvblk_obj_sync(o))
		o->status = -ENODEV;
	rec.status = o->status;
	rec.bytes = o->status ? 0 : o->length;
	if (len < KVBLK_URING_OBJ_SIZE_VER0 || copy_to_user(sel.addr, &rec, n)) {
		/* 0: the buffer goes back unused, no CQE, the request not failed. */
		sel.val = 0;
		io_uring_mshot_cmd_post_cqe(ioucmd, &sel, issue_flags);
		pdu->stopped = true;
		return;
	}
	sel.val = n;
	/* true: the CQE was not posted (CQ overflow without memory). */
	if (io_uring_mshot_cmd_post_cqe(ioucmd, &sel, issue_flags))
		pdu->stopped = true;
}

static bool kvblk_uring_per_object(struct io_uring_cmd *ioucmd)
{
	return ioucmd->flags & IORING_URING_CMD_MULTISHOT;
}
#else
static void kvblk_uring_post(struct io_uring_cmd *ioucmd, struct kvblk_obj *o,
			     unsigned int issue_flags)
{
}

static bool kvblk_uring_per_object(struct io_uring_cmd *ioucmd)
{
	return false;
}
#endif

/*
 * Task work: every object completed since the last run, in completion
 * order, then, once its end node came, the batch's end.
 */
static void kvblk_uring_run(struct io_uring_cmd *ioucmd,
			    unsigned int issue_flags)
{
	struct kvblk_batch *b = kvblk_uring_pdu(ioucmd)->b;
	struct llist_node *n, *next;

	n = llist_reverse_order(llist_del_all(&b->events));
	for (; n; n = next) {
		next = n->next;
		if (n == &b->end_node) {
			/* The last node ever added; b is released here. */
			kvblk_uring_finish(ioucmd, issue_flags);
			return;
		}
		kvblk_uring_post(ioucmd, container_of(n, struct kvblk_obj,
						      done_node), issue_flags);
	}
}

#ifdef KVBLK_HAVE_URING_CMD_TW_REQ
static void kvblk_uring_tw(struct io_tw_req tw_req, io_tw_token_t tw)
{
	kvblk_uring_run(io_uring_cmd_from_tw(tw_req),
			IO_URING_CMD_TASK_WORK_ISSUE_FLAGS);
}
#else
static void kvblk_uring_tw(struct io_uring_cmd *ioucmd, unsigned int issue_flags)
{
	kvblk_uring_run(ioucmd, issue_flags);
}
#endif

/* An event for the task work, queued by whoever finds the list empty. */
static void kvblk_uring_event(struct kvblk_batch *b, struct llist_node *n)
{
	if (llist_add(n, &b->events))
		io_uring_cmd_complete_in_task(b->end_data, kvblk_uring_tw);
}

/* The batch's last completion: any context. */
static void kvblk_uring_end(struct kvblk_batch *b)
{
	kvblk_uring_event(b, &b->end_node);
}

#ifdef KVBLK_HAVE_URING_CMD_MSHOT
/* Completion of an object (batch.c): any context. */
static void kvblk_uring_obj_end(struct kvblk_batch *b, struct kvblk_obj *o)
{
	kvblk_uring_event(b, &o->done_node);
}
#endif

/**
 * kvblk_uring_cmd() - file_operations.uring_cmd of /dev/kvblk.
 * @ioucmd: the command; its SQE's command area is a struct kvblk_uring_cmd.
 * @issue_flags: io_uring's issue flags.
 *
 * Context: io_uring's io-wq worker (its address space): issued inline
 * (IO_URING_F_NONBLOCK: the submitting task or the SQPOLL thread), it
 * returns -EAGAIN at once and io_uring issues it again there, where it
 * may sleep (see the uapi header).
 *
 * Return: -EIOCBQUEUED, the CQE following when the batch ends (and, with
 * KVBLK_URING_F_PER_OBJECT, one before it per object); or the CQE's error
 * now: as for KVBLK_IOC_LOAD_MANY, and -EBADFD, -ENOTTY, -EINVAL,
 * -EOPNOTSUPP as "Asynchronous batches through io_uring" and "One CQE per
 * object" in include/uapi/linux/kvblk.h say.
 */
int kvblk_uring_cmd(struct io_uring_cmd *ioucmd, unsigned int issue_flags)
{
	struct kvblk_ctx *ctx = ioucmd->file->private_data;
	struct kvblk_uring_cmd cmd;
	struct kvblk_batch *b;

	if (!kvblk_ctx_owner(ctx))
		return -EBADFD;
	if (ioucmd->cmd_op != KVBLK_URING_CMD_LOAD_MANY)
		return -ENOTTY;
	/* Completions come through task work, never through polling. */
	if (issue_flags & IO_URING_F_IOPOLL)
		return -EOPNOTSUPP;
	/*
	 * Issued inline (io_uring_enter() with the ring's lock held, or its
	 * SQPOLL thread): preparing and submitting a batch sleeps (the
	 * context's lock, faults on the descriptors, allocations, waiting for
	 * its own command slots when it has more commands than max_inflight),
	 * and the ring's other submitters and its SQPOLL thread would wait
	 * for all of it. -EAGAIN: io_uring issues it again from its io-wq
	 * worker, where it may block (review-2 N10). io_uring keeps a copy of
	 * the SQE for that.
	 */
	if (issue_flags & IO_URING_F_NONBLOCK)
		return -EAGAIN;
	/* The SQE is shared with user space: one copy, then only that. */
	memcpy(&cmd, kvblk_uring_sqe_cmd(ioucmd), sizeof(cmd));
	if ((cmd.flags & ~KVBLK_URING_F_ALL) || cmd.reserved)
		return -EINVAL;
	/* A multishot SQE (with buffer select) if and only if per object. */
	if (cmd.flags & KVBLK_URING_F_PER_OBJECT) {
		if (!kvblk_uring_per_object_supported())
			return -EOPNOTSUPP;
		if (!kvblk_uring_per_object(ioucmd))
			return -EINVAL;
	} else if (kvblk_uring_per_object(ioucmd)) {
		return -EINVAL;
	}

	b = kvblk_batch_prepare(ctx, u64_to_user_ptr(cmd.load_many));
	if (IS_ERR(b))
		return PTR_ERR(b);
	b->end = kvblk_uring_end;
	b->end_data = ioucmd;
	kvblk_uring_pdu(ioucmd)->b = b;
#ifdef KVBLK_HAVE_URING_CMD_MSHOT
	if (cmd.flags & KVBLK_URING_F_PER_OBJECT) {
		b->obj_end = kvblk_uring_obj_end;
		kvblk_uring_pdu(ioucmd)->buf_group =
			READ_ONCE(ioucmd->sqe->buf_group);
		kvblk_uring_pdu(ioucmd)->stopped = false;
	}
#endif
	/* From here the batch ends through kvblk_uring_end(), even if killed. */
	kvblk_batch_submit(b);
	return -EIOCBQUEUED;
}

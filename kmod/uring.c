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
 * Kernel differences (compat.h, conftest.sh): the header (6.1
 * <linux/io_uring.h>, later <linux/io_uring/cmd.h>), where the command
 * area is, io_uring_cmd_done()'s arguments and the task-work callback's.
 * Built only when conftest.sh sets KVBLK_WITH_URING_CMD (kmod/Kbuild);
 * kvblk.h has the stubs otherwise.
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

#ifdef KVBLK_HAVE_URING_CMD_TW_REQ
static void kvblk_uring_tw(struct io_tw_req tw_req, io_tw_token_t tw)
{
	kvblk_uring_finish(io_uring_cmd_from_tw(tw_req),
			   IO_URING_CMD_TASK_WORK_ISSUE_FLAGS);
}
#else
static void kvblk_uring_tw(struct io_uring_cmd *ioucmd, unsigned int issue_flags)
{
	kvblk_uring_finish(ioucmd, issue_flags);
}
#endif

/* The batch's last completion: any context. */
static void kvblk_uring_end(struct kvblk_batch *b)
{
	io_uring_cmd_complete_in_task(b->end_data, kvblk_uring_tw);
}

/**
 * kvblk_uring_cmd() - file_operations.uring_cmd of /dev/kvblk.
 * @ioucmd: the command; its SQE's command area is a struct kvblk_uring_cmd.
 * @issue_flags: io_uring's issue flags.
 *
 * Context: the submitting task, or io_uring's worker or SQPOLL thread (its
 * address space); may sleep (see the uapi header).
 *
 * Return: -EIOCBQUEUED, the CQE following when the batch ends; or the
 * CQE's error now: as for KVBLK_IOC_LOAD_MANY, and -EBADFD, -ENOTTY,
 * -EINVAL, -EOPNOTSUPP as "Asynchronous batches through io_uring" in
 * include/uapi/linux/kvblk.h says.
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
	/* The SQE is shared with user space: one copy, then only that. */
	memcpy(&cmd, kvblk_uring_sqe_cmd(ioucmd), sizeof(cmd));
	if (cmd.flags || cmd.reserved)
		return -EINVAL;

	b = kvblk_batch_prepare(ctx, u64_to_user_ptr(cmd.load_many));
	if (IS_ERR(b))
		return PTR_ERR(b);
	b->end = kvblk_uring_end;
	b->end_data = ioucmd;
	kvblk_uring_pdu(ioucmd)->b = b;
	/* From here the batch ends through kvblk_uring_end(), even if killed. */
	kvblk_batch_submit(b);
	return -EIOCBQUEUED;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * engine_file.c - the block-layer engine for regular files: each command is
 * one direct-I/O kiocb (IOCB_DIRECT) through the file's own ->read_iter,
 * over an ITER_BVEC iterator of the registered buffer's pinned pages (the
 * slot's bio_vec array, bvec.c),
 * completed asynchronously through ->ki_complete.
 *
 * The file system does what it does for pread(O_DIRECT) on the same fd:
 * it maps extents, reads holes as zeros, writes back dirty page cache
 * over the range first (a buffered write is seen by the next load), and
 * stops at the file's size. The file's size is read at every batch; a
 * descriptor past it is refused, and a read that comes back short (the
 * file was truncated while the batch ran) fails its object with -ENODATA:
 * nothing stale or foreign is reported as data.
 *
 * A store batch (KVBLK_LOAD_F_STORE) sends each command through the file's
 * ->write_iter instead, as an asynchronous direct write does (io_uring,
 * aio): IOCB_WRITE, the file system's freeze protection taken at
 * submission and handed to the completion (kiocb_start_write() and
 * kiocb_end_write()), IOCB_DSYNC when it must be durable (the file system
 * syncs what the write needs its own way before completing it). The file
 * system invalidates its page cache over the range and fills holes; the
 * batch layer keeps every store inside the file's size, so no store
 * extends the file (unless the file shrank meanwhile).
 */
#include <linux/blkdev.h>
#include <linux/fs.h>
#include <linux/log2.h>
#include <linux/uio.h>

#include "engine.h"
#include "kvblk.h"

static void kvblk_file_complete(struct kiocb *iocb, long ret)
{
	struct kvblk_cmd *cmd = container_of(iocb, struct kvblk_cmd, blk.iocb);
	enum kvblk_err_kind kind = KVBLK_ERR_OTHER;
	int err = 0;

	/* A write hands the file system's freeze protection back here. */
	if (iocb->ki_flags & IOCB_WRITE)
		kvblk_kiocb_end_write(iocb);
	if (ret == -ENOSPC || ret == -EDQUOT) {
		err = -ENOSPC;		/* a store filling a hole */
	} else if (ret == -ETXTBSY) {
		/* Swapped on since the batch began (generic_write_checks()). */
		err = -ETXTBSY;
	} else if (ret < 0) {
		err = ret == -ENOLINK ? -ENOLINK : -EIO;
		kind = ret == -ENODATA ? KVBLK_ERR_MEDIA :
		       ret == -ENOLINK ? KVBLK_ERR_TRANSPORT : KVBLK_ERR_IO;
	} else if (ret != cmd->bytes) {
		err = -ENODATA;		/* short: the file ended before it */
	}
	kvblk_cmd_end(cmd, err, kind, 0);
}

static int kvblk_file_submit(struct kvblk_batch *b, struct kvblk_cmd *cmd,
			     struct blk_plug *plug)
{
	struct kvblk_obj *o = &b->objs[cmd->obj];
	struct file *file = o->bt->t->file;
	struct kiocb *iocb = &cmd->blk.iocb;
	struct iov_iter iter;
	int nr;
	ssize_t ret;

	/* Swapped on since the batch began: pwrite() refuses it too. */
	if (b->store && IS_SWAPFILE(file_inode(file)))
		return -ETXTBSY;
	nr = kvblk_bvec_fill(cmd, o->buf, o->buf_offset + cmd->done, cmd->bytes,
			     o->bt->max_cmd_bytes);
	if (nr < 0)
		return nr;
	ret = kvblk_buf_dma_begin(o->buf);
	if (ret)
		return ret;
	/*
	 * READ is ITER_DEST, WRITE ITER_SOURCE on the kernels that have the
	 * names.
	 */
	iov_iter_bvec(&iter, b->store ? WRITE : READ, cmd->blk.bvec, nr,
		      cmd->bytes);

	init_sync_kiocb(iocb, file);
	iocb->ki_pos = o->offset + cmd->done;
	iocb->ki_flags |= IOCB_DIRECT;
	iocb->ki_complete = kvblk_file_complete;
	if (b->store) {
		iocb->ki_flags |= IOCB_WRITE;
		if (b->durable)
			iocb->ki_flags |= IOCB_DSYNC;
		kvblk_kiocb_start_write(iocb);
	}

	kvblk_cmd_issue(b, cmd, 0);
	/* cmd belongs to the completion from here on. */
	if (b->store)
		ret = file->f_op->write_iter(iocb, &iter);
	else
		ret = file->f_op->read_iter(iocb, &iter);
	if (ret != -EIOCBQUEUED)
		kvblk_file_complete(iocb, ret);
	return 0;
}

/*
 * The file as it is now: its size, and the alignment its direct I/O
 * demands (the file system's block device: logical block size for offsets,
 * lengths and, since direct I/O checks the start and length of every
 * bio_vec entry against it, the buffer offset too, which must also meet the
 * queue's DMA alignment: kvblk_attach.buf_align).
 */
static int kvblk_file_begin(struct kvblk_batch *b, struct kvblk_btgt *bt)
{
	struct file *file = bt->t->file;
	struct block_device *bdev = file_inode(file)->i_sb->s_bdev;
	unsigned int lba = bdev_logical_block_size(bdev);

	bt->lba_shift = ilog2(lba);
	bt->capacity = i_size_read(file_inode(file));
	bt->align_mask = (lba - 1) | queue_dma_alignment(bdev_get_queue(bdev)) | 3;
	bt->max_cmd_bytes = round_down(bt->t->max_cmd_bytes, lba);
	return bt->max_cmd_bytes ? 0 : -EOPNOTSUPP;
}

const struct kvblk_engine_ops kvblk_engine_file = {
	.name		= "file",
	.id		= KVBLK_ENGINE_FILE,
	.dma_mapped	= false,
	.stores		= true,
	.begin		= kvblk_file_begin,
	.submit		= kvblk_file_submit,
	.slot_release	= kvblk_bvec_release,
};

// SPDX-License-Identifier: GPL-2.0
/*
 * engine_bio.c - the block-layer engine for block devices: each command is
 * one bio over the registered buffer's pinned pages, submitted under the
 * batch's plug to the block device of the command's target (a whole disk or
 * a partition of it).
 *
 * Everything else is the block layer's, as for pread(O_DIRECT) on the same
 * fd: the partition offset and the end-of-device check, splitting to the
 * device's limits (md RAID stripes, dm targets, NVMe MDTS), DMA mapping
 * per I/O, cgroup throttling, disk statistics and the status of every bio
 * (bi_status). So it serves any block device: an NVMe namespace or its
 * partition, the NVMe multipath head, NVMe-oF namespaces, md and dm
 * devices, loop, virtio-blk. Memory: host memory's pages, and PCI P2PDMA
 * pages (pinned per batch) on a queue that takes them.
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/log2.h>

#include "engine.h"
#include "kvblk.h"

/* Pages of one command at most, so that one bio holds it at any offset. */
#define KVBLK_BIO_MAX_CMD_BYTES	((BIO_MAX_VECS - 1) * PAGE_SIZE)

static void kvblk_bio_end_io(struct bio *bio)
{
	struct kvblk_cmd *cmd = bio->bi_private;
	const struct kvblk_ns_info *info = &cmd->b->objs[cmd->obj].bt->t->ns->info;
	enum kvblk_err_kind kind = KVBLK_ERR_OTHER;
	int err = 0;

	if (bio->bi_status)
		err = kvblk_status_errno(bio->bi_status, &kind);
	/*
	 * A bio failed because its disk went away (cancelled by the driver,
	 * or refused by a queue already dying: -EIO) reports the lost path,
	 * as the objects the submitter finds the disk dead for do.
	 */
	if (err == -EIO && kind == KVBLK_ERR_IO &&
	    kvblk_disk_going(info->disk, info->q)) {
		err = -ENOLINK;
		kind = KVBLK_ERR_TRANSPORT;
	}
	bio_put(bio);
	kvblk_cmd_end(cmd, err, kind, 0);
}

/**
 * kvblk_bio_add_pages() - add a byte range of a buffer's pages to a bio.
 * @bio: a bio with room for every page of the range.
 * @buf: registered host memory (->pages set, page-aligned start).
 * @off: byte offset in the buffer.
 * @len: bytes.
 *
 * Return: 0, or -EIO if the bio refused a page (cannot happen when it has
 * room: bio_add_page() only checks the vector count).
 */
static int kvblk_bio_add_pages(struct bio *bio, const struct kvblk_buf *buf,
			       u64 off, u32 len)
{
	while (len) {
		unsigned int poff = off & (PAGE_SIZE - 1);
		unsigned int n = min_t(u64, len, PAGE_SIZE - poff);

		if (bio_add_page(bio, buf->pages[off >> PAGE_SHIFT], n, poff) != n)
			return -EIO;
		off += n;
		len -= n;
	}
	return 0;
}

static int kvblk_bio_submit(struct kvblk_batch *b, struct kvblk_cmd *cmd,
			    struct blk_plug *plug)
{
	struct kvblk_obj *o = &b->objs[cmd->obj];
	struct block_device *bdev = I_BDEV(o->bt->t->file->f_mapping->host);
	u64 off = o->buf_offset + cmd->done;
	unsigned int nr = DIV_ROUND_UP((off & (PAGE_SIZE - 1)) + cmd->bytes,
				       PAGE_SIZE);
	struct bio *bio;
	int ret;

	if (kvblk_disk_going(bdev->bd_disk, bdev_get_queue(bdev)))
		return -ENOLINK;
	ret = kvblk_buf_dma_begin(o->buf);
	if (ret)
		return ret;
	bio = bio_alloc(bdev, nr, REQ_OP_READ, GFP_KERNEL);
	if (!bio) {
		kvblk_buf_dma_end(o->buf);
		return -ENOMEM;
	}
	bio->bi_iter.bi_sector = (o->offset + cmd->done) >> SECTOR_SHIFT;
	/*
	 * P2PDMA pages: never merged with another bio into one request (the
	 * driver maps a request through one P2PDMA provider or none; newer
	 * kernels' bio_add_page() sets this itself).
	 */
	if (o->buf->kind == KVBLK_MEM_P2PDMA)
		bio->bi_opf |= REQ_NOMERGE;
	bio->bi_private = cmd;
	bio->bi_end_io = kvblk_bio_end_io;
	ret = kvblk_bio_add_pages(bio, o->buf, off, cmd->bytes);
	if (ret) {
		bio_put(bio);
		kvblk_buf_dma_end(o->buf);
		return ret;
	}
	kvblk_cmd_issue(b, cmd, 0);
	/* cmd belongs to the completion from here on. */
	submit_bio(bio);
	return 0;
}

/*
 * The device as it is now: its size (a partition shrunk, a device resized
 * while attached), logical block size and buffer alignment (what O_DIRECT
 * on the device demands: the queue's DMA alignment).
 */
static int kvblk_bio_begin(struct kvblk_batch *b, struct kvblk_btgt *bt)
{
	struct block_device *bdev = I_BDEV(bt->t->file->f_mapping->host);
	unsigned int lba = bdev_logical_block_size(bdev);

	bt->lba_shift = ilog2(lba);
	bt->capacity = (u64)bdev_nr_sectors(bdev) << SECTOR_SHIFT;
	/* A device being removed fails each object with -ENOLINK (submit). */
	if (kvblk_disk_going(bdev->bd_disk, bdev_get_queue(bdev)))
		bt->capacity = bt->t->capacity;
	bt->align_mask = queue_dma_alignment(bdev_get_queue(bdev)) | 3;
	bt->max_cmd_bytes = round_down(min_t(u32, bt->t->max_cmd_bytes,
					     KVBLK_BIO_MAX_CMD_BYTES), lba);
	return bt->max_cmd_bytes ? 0 : -EOPNOTSUPP;
}

const struct kvblk_engine_ops kvblk_engine_bio = {
	.name		= "bio",
	.id		= KVBLK_ENGINE_BIO,
	.dma_mapped	= false,
	.begin		= kvblk_bio_begin,
	.submit		= kvblk_bio_submit,
};

/**
 * kvblk_bio_p2pdma() - may bios to this target carry PCI P2PDMA pages?
 * @t: a target of the bio engine.
 *
 * Return: whether its queue says so (QUEUE_FLAG_PCI_P2PDMA: nvme-pci sets
 * it when the controller's DMA can reach peer memory), as for O_DIRECT
 * into P2PDMA pages.
 */
bool kvblk_bio_p2pdma(const struct kvblk_tgt *t)
{
	struct block_device *bdev = I_BDEV(t->file->f_mapping->host);

	return blk_queue_pci_p2pdma(bdev_get_queue(bdev));
}

/**
 * kvblk_bio_max_cmd() - the split size of the block-layer engines.
 * @tunable: the max_cmd_bytes tunable.
 *
 * Return: at most @tunable and what one bio holds at any buffer offset
 * (BIO_MAX_VECS - 1 pages); the block layer splits further to the
 * device's limits.
 */
u32 kvblk_bio_max_cmd(u32 tunable)
{
	return min_t(u32, tunable, KVBLK_BIO_MAX_CMD_BYTES);
}

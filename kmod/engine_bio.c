// SPDX-License-Identifier: GPL-2.0
/*
 * engine_bio.c - the block-layer engine for block devices: each command is
 * one bio over the registered buffer's pinned pages, submitted under the
 * batch's plug to the block device of the command's target (a whole disk or
 * a partition of it). The bio is the command slot's own (struct
 * kvblk_cmd.blk), pointed at the slot's bio_vec array (bvec.c): no
 * allocation and no per-page call per command.
 *
 * Everything else is the block layer's, as for pread(O_DIRECT) on the same
 * fd: the partition offset and the end-of-device check, splitting to the
 * device's limits (md RAID stripes, dm targets, NVMe MDTS), DMA mapping
 * per I/O, cgroup throttling, disk statistics and the status of every bio
 * (bi_status). So it serves any block device: an NVMe namespace or its
 * partition, the NVMe multipath head, NVMe-oF namespaces, md and dm
 * devices, loop, virtio-blk. Memory: host memory's pages, and PCI P2PDMA
 * pages (pinned per batch) on a queue that takes them.
 *
 * A store batch (KVBLK_LOAD_F_STORE) issues REQ_OP_WRITE bios over the
 * same pages, with REQ_FUA when it must be durable: each object is then
 * on stable media when its own bios complete, with no flush of the whole
 * device and no wait for the rest of the batch (the block layer turns FUA
 * into a post-flush where the device lacks it, and drops it where the
 * device has no volatile cache). Like pwrite(O_DIRECT) on the device, it
 * writes back and drops the device's page cache over an object's range
 * before its first bio, and drops it over the batch's range again when the
 * batch ends, so that a buffered read afterwards sees the stored bytes.
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/log2.h>
#include <linux/pagemap.h>

#include "engine.h"
#include "kvblk.h"

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
	/* bio_endio() already did; the slot's next command reinitialises it. */
	bio_uninit(bio);
	kvblk_cmd_end(cmd, err, kind, 0);
}

/*
 * Drop the block device's cached pages over bytes [@start, @end) of it,
 * written back first when @write_back (a store writes under the page cache,
 * as direct I/O does). Process context. A page that cannot be dropped (being
 * written back by someone else) stays: the kernel's own direct writes
 * tolerate that the same way.
 */
static void kvblk_bio_drop_cache(struct address_space *mapping, u64 start,
				 u64 end, bool write_back)
{
	if (!mapping->nrpages || start >= end)
		return;
	if (write_back)
		filemap_write_and_wait_range(mapping, start, end - 1);
	invalidate_inode_pages2_range(mapping, start >> PAGE_SHIFT,
				      (end - 1) >> PAGE_SHIFT);
}

static int kvblk_bio_submit(struct kvblk_batch *b, struct kvblk_cmd *cmd,
			    struct blk_plug *plug)
{
	struct kvblk_obj *o = &b->objs[cmd->obj];
	struct file *file = o->bt->t->file;
	struct block_device *bdev = I_BDEV(file->f_mapping->host);
	u64 off = o->buf_offset + cmd->done;
	blk_opf_t opf = REQ_OP_READ;
	struct bio *bio = &cmd->blk.bio;
	int nr, ret;

	if (kvblk_disk_going(bdev->bd_disk, bdev_get_queue(bdev)))
		return -ENOLINK;
	nr = kvblk_bvec_fill(cmd, o->buf, off, cmd->bytes, o->bt->max_cmd_bytes);
	if (nr < 0)
		return nr;
	if (b->store) {
		/* Swapped on since the batch began: pwrite() refuses it too. */
		if (IS_SWAPFILE(file->f_mapping->host))
			return -ETXTBSY;
		/* As a direct write does: O_DIRECT's REQ_SYNC | REQ_IDLE. */
		opf = REQ_OP_WRITE | REQ_SYNC | REQ_IDLE;
		if (b->durable)
			opf |= REQ_FUA;
		if (!cmd->done)
			kvblk_bio_drop_cache(file->f_mapping, o->offset,
					     o->offset + o->length, true);
	}
	ret = kvblk_buf_dma_begin(o->buf);
	if (ret)
		return ret;
	/*
	 * The whole table at once, which the block layer only reads (as
	 * bio_iov_bvec_set() hands it an iterator's). It may hold more than
	 * BIO_MAX_VECS entries, as an io_uring fixed buffer's iterator does:
	 * that bounds bios allocated from a bio_set, not bios over a table of
	 * their own, and the block layer splits by bytes and segments
	 * (bio_split_rw(), block/blk-merge.c), never by entries. So a command
	 * is as large as the tunable says, whatever its buffer's offset: 1 MiB
	 * is one command, not 1020 KiB and 4 KiB.
	 */
	bio_init(bio, bdev, cmd->blk.bvec, nr, opf);
	bio->bi_vcnt = nr;
	bio->bi_iter.bi_size = cmd->bytes;
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
	bt->max_cmd_bytes = round_down(bt->t->max_cmd_bytes, lba);
	return bt->max_cmd_bytes ? 0 : -EOPNOTSUPP;
}

/* A store's batch ended: what was read into the page cache meanwhile goes. */
static void kvblk_bio_end(struct kvblk_btgt *bt)
{
	kvblk_bio_drop_cache(bt->t->file->f_mapping, bt->wr_start, bt->wr_end,
			     false);
}

const struct kvblk_engine_ops kvblk_engine_bio = {
	.name		= "bio",
	.id		= KVBLK_ENGINE_BIO,
	.dma_mapped	= false,
	.stores		= true,
	.begin		= kvblk_bio_begin,
	.end		= kvblk_bio_end,
	.submit		= kvblk_bio_submit,
	.slot_release	= kvblk_bvec_release,
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

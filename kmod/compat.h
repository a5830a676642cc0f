/* SPDX-License-Identifier: GPL-2.0 */
/*
 * compat.h - kernel interface differences, keyed on conftest.sh results.
 *
 * Only feature tests select code here (KVBLK_HAVE_*), never version numbers.
 * The optional parts (KVBLK_WITH_*: dma-buf, P2PDMA, io_uring command) are
 * decided by conftest.sh as well, which defines them in conftest.h and has
 * kmod/Kbuild build their files; kvblk.h stubs them out otherwise.
 */
#ifndef KVBLK_COMPAT_H
#define KVBLK_COMPAT_H

#include "conftest.h"

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/swiotlb.h>
#ifdef KVBLK_HAVE_BLK_INTEGRITY_H
#include <linux/blk-integrity.h>
#endif

#ifndef KVBLK_HAVE_SYM_NVME_INIT_REQUEST
#error "kvblk: this kernel's nvme-core does not export nvme_init_request()"
#endif
#ifndef KVBLK_HAVE_BLK_EXECUTE_RQ_NOWAIT_2
#error "kvblk: needs blk_execute_rq_nowait(rq, at_head) (request end_io API)"
#endif
#ifndef KVBLK_HAVE_RQ_END_IO_RET
#error "kvblk: needs rq_end_io_fn returning enum rq_end_io_ret"
#endif
#ifndef KVBLK_HAVE_PIN_USER_PAGES_LONGTERM
#error "kvblk: needs pin_user_pages_fast() with FOLL_LONGTERM"
#endif

/*
 * nvme_init_request() is exported GPL by nvme-core but declared only in the
 * driver's private drivers/nvme/host/nvme.h, which kernel header packages do
 * not ship. Same prototype from 6.0 to 7.2 (drivers/nvme/host/core.c).
 */
struct nvme_command;
void nvme_init_request(struct request *req, struct nvme_command *cmd);

/*
 * The end_io callback returns enum rq_end_io_ret (6.0 on); newer kernels
 * (7.2 has it) also pass the completion batch as a third argument.
 */
#ifdef KVBLK_HAVE_RQ_END_IO_IOB
#define KVBLK_END_IO_ARGS \
	struct request *rq, blk_status_t sts, const struct io_comp_batch *iob
#else
#define KVBLK_END_IO_ARGS struct request *rq, blk_status_t sts
#endif

/**
 * kvblk_integrity_bytes() - metadata bytes per LBA known to the block layer.
 * @q: the namespace's queue.
 *
 * Non-zero for an integrity profile and also for separate metadata without
 * protection information, for which the nvme driver registers no profile
 * (blk_get_integrity() then returns NULL on older kernels).
 *
 * Return: bytes, 0 when the LBA format has no metadata the block layer sees.
 */
static inline unsigned int kvblk_integrity_bytes(struct request_queue *q)
{
#if defined(KVBLK_HAVE_LIMITS_INTEGRITY_METADATA_SIZE)
	return q->limits.integrity.metadata_size;
#elif defined(KVBLK_HAVE_LIMITS_INTEGRITY_TUPLE_SIZE)
	return q->limits.integrity.tuple_size;
#elif defined(KVBLK_HAVE_QUEUE_INTEGRITY_TUPLE_SIZE)
	return q->integrity.tuple_size;
#elif defined(CONFIG_BLK_DEV_INTEGRITY)
#error "kvblk: cannot find the queue's integrity metadata size"
#else
	/* No integrity support: nvme gives metadata formats no capacity. */
	return 0;
#endif
}

/**
 * kvblk_dev_force_bounce() - does every DMA of @dev bounce through swiotlb?
 * @dev: a DMA device.
 *
 * Return: true under swiotlb=force or in a confidential VM (SEV, TDX),
 * where a mapping holds bounce buffers for as long as it exists.
 */
static inline bool kvblk_dev_force_bounce(struct device *dev)
{
#ifdef KVBLK_HAVE_SWIOTLB_FORCE_BOUNCE
	return is_swiotlb_force_bounce(dev);
#else
	return false;
#endif
}

/**
 * kvblk_dev_partial_bounce() - may some DMA mappings of @dev bounce?
 * @dev: a DMA device.
 *
 * Return: true when the memory the system has needs more address bits
 * than @dev's DMA mask gives (dma_get_required_mask(): without an IOMMU
 * the direct mapping's need; with one, 32 bits, which the IOMMU's
 * addresses always fit), so that a mapping of high memory would go
 * through swiotlb.
 */
static inline bool kvblk_dev_partial_bounce(struct device *dev)
{
	return dma_get_required_mask(dev) > dma_get_mask(dev);
}

/**
 * kvblk_disk_dead() - has the disk been removed (del_gendisk())?
 * @disk: disk.
 * @q: its queue.
 *
 * Return: true once the disk or its queue is marked dead or dying.
 */
static inline bool kvblk_disk_dead(struct gendisk *disk, struct request_queue *q)
{
#ifdef KVBLK_HAVE_GD_DEAD
	if (test_bit(GD_DEAD, &disk->state))
		return true;
#endif
	return blk_queue_dying(q);
}

#ifndef KVBLK_HAVE_BDEV_NR_SECTORS
static inline sector_t bdev_nr_sectors(struct block_device *bdev)
{
	return i_size_read(bdev->bd_inode) >> SECTOR_SHIFT;
}
#endif

#ifndef KVBLK_HAVE_DMA_MAX_MAPPING_SIZE
static inline size_t dma_max_mapping_size(struct device *dev)
{
	return SIZE_MAX;
}
#endif

/*
 * Freeze protection of an asynchronous write (file engine stores): taken at
 * submission, released by the completion, which may run in another context;
 * lockdep is told the submitter let go of it.
 */
#ifdef KVBLK_HAVE_KIOCB_START_WRITE
#define kvblk_kiocb_start_write(iocb)	kiocb_start_write(iocb)
#define kvblk_kiocb_end_write(iocb)	kiocb_end_write(iocb)
#else
static inline void kvblk_kiocb_start_write(struct kiocb *iocb)
{
	struct super_block *sb = file_inode(iocb->ki_filp)->i_sb;

	sb_start_write(sb);
	__sb_writers_release(sb, SB_FREEZE_WRITE);
}

static inline void kvblk_kiocb_end_write(struct kiocb *iocb)
{
	struct super_block *sb = file_inode(iocb->ki_filp)->i_sb;

	__sb_writers_acquired(sb, SB_FREEZE_WRITE);
	sb_end_write(sb);
}
#endif

#endif /* KVBLK_COMPAT_H */

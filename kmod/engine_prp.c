// SPDX-License-Identifier: GPL-2.0
/*
 * engine_prp.c - the PRP engine: NVMe Read passthrough with PRPs that kvblk
 * builds from the buffer's DMA segments (prp.c).
 *
 * Each command is a driver-private passthrough request on the namespace's
 * blk-mq queue (blk_mq_alloc_request + nvme_init_request), executed under
 * the batch's plug so that one doorbell write covers many commands. A
 * request without a bio is not data-mapped by nvme-pci: the PRPs built here
 * reach the controller as they are. The block layer checks nothing on this
 * path, so attach checks the namespace (kvblk_prp_probe()) and every batch
 * re-reads its geometry (kvblk_prp_begin()).
 *
 * It serves what bios cannot carry: memory without struct pages (CUDA
 * through nvidia-p2p, dma-buf, P2PDMA windows) on a PCIe NVMe namespace
 * attached without an engine flag, object by object beside the block-layer
 * engine (its default there), and all memory of a target attached with
 * KVBLK_ATTACH_F_ENGINE_PRP, an opt-in where it measures faster.
 */
#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/nvme.h>
#include <linux/nvme_ioctl.h>
#include <linux/pci.h>
#include <linux/sched/signal.h>

#include "engine.h"
#include "kvblk.h"

/*
 * The head of the nvme driver's per-request data, struct nvme_request
 * (drivers/nvme/host/nvme.h: the same first members from 6.1 to 7.2); the
 * header is private, so mirrored here.
 */
struct kvblk_nvme_request_head {
	struct nvme_command *cmd;
	union nvme_result result;
	u8 genctr;
	u8 retries;
	u8 flags;
	u16 status;
};

/*
 * Test hook, for the VM tests of the attach self-check only (kmod/README.md,
 * "Test hooks"): read the NVMe status at this byte offset of the nvme
 * driver's request data instead of at the mirror's, as a drifted private
 * layout would. -1, the default, is the mirror; a set value applies to
 * every later command (loads too) and refuses later PRP attaches.
 */
#define KVBLK_TEST_STATUS_OFFSET_MAX	30
static int kvblk_test_status_offset = -1;

static void kvblk_selfcheck_forget(void);

static int kvblk_test_status_offset_set(const char *val,
					const struct kernel_param *kp)
{
	int v;

	if (kstrtoint(val, 0, &v) || v < -1 ||
	    v > KVBLK_TEST_STATUS_OFFSET_MAX || (v > 0 && (v & 1)))
		return -EINVAL;
	WRITE_ONCE(kvblk_test_status_offset, v);
	kvblk_selfcheck_forget();
	return 0;
}

static const struct kernel_param_ops kvblk_test_status_offset_ops = {
	.set	= kvblk_test_status_offset_set,
	.get	= param_get_int,
};
module_param_cb(test_status_offset, &kvblk_test_status_offset_ops,
		&kvblk_test_status_offset, 0644);
MODULE_PARM_DESC(test_status_offset,
		 "tests only: byte offset (even, 0..30) of the request data read as the NVMe status instead of struct nvme_request's (-1, default); PRP attaches are then refused by the self-check");

/*
 * Test hook, for the VM test of the attach probe's removal ordering only
 * (kmod/README.md, "Test hooks"; review-2 N9a): an attach's probe sleeps
 * this many milliseconds with its page mapped for the PCI function, before
 * its Read, so that a test can remove the function meanwhile. The removal
 * must wait for the probe's unmap (kvblk_dma_map_begin()). 0, the default,
 * does not sleep.
 */
#define KVBLK_TEST_PROBE_HOLD_MS_MAX	10000
static unsigned int kvblk_test_probe_hold_ms;

static int kvblk_test_probe_hold_ms_set(const char *val,
					const struct kernel_param *kp)
{
	unsigned int v;

	if (kstrtouint(val, 0, &v) || v > KVBLK_TEST_PROBE_HOLD_MS_MAX)
		return -EINVAL;
	WRITE_ONCE(kvblk_test_probe_hold_ms, v);
	return 0;
}

static const struct kernel_param_ops kvblk_test_probe_hold_ms_ops = {
	.set	= kvblk_test_probe_hold_ms_set,
	.get	= param_get_uint,
};
module_param_cb(test_probe_hold_ms, &kvblk_test_probe_hold_ms_ops,
		&kvblk_test_probe_hold_ms, 0644);
MODULE_PARM_DESC(test_probe_hold_ms,
		 "tests only: an attach's probe sleeps this long (ms, 0..10000) with its page mapped, before its Read (0, default: no sleep)");

/* The test hook above: log, sleep with the probe page mapped, log. */
static void kvblk_test_probe_hold(struct gendisk *disk)
{
	unsigned int ms = READ_ONCE(kvblk_test_probe_hold_ms);

	if (likely(!ms))
		return;
	pr_info("attach %s: test hook: probe page mapped, holding it %u ms\n",
		disk->disk_name, ms);
	msleep(ms);
	pr_info("attach %s: test hook: probe hold over\n", disk->disk_name);
}

/*
 * Test hook test_dma_mask_bits (kmod/README.md, "Test hooks"; review M5):
 * the PRP engine's checks take the NVMe PCI function's DMA mask as this
 * many bits instead of its own, as on a device with a small mask, whose
 * mappings of high memory bounce through swiotlb. QEMU's NVMe has a 64-bit
 * mask, so only this makes kvblk_prp_partial_bounce() true there. 0, the
 * default, takes the device's own mask.
 */
static unsigned int kvblk_test_dma_mask_bits;

static int kvblk_test_dma_mask_bits_set(const char *val,
					const struct kernel_param *kp)
{
	unsigned int v;

	if (kstrtouint(val, 0, &v) || (v && (v < 12 || v > 64)))
		return -EINVAL;
	WRITE_ONCE(kvblk_test_dma_mask_bits, v);
	return 0;
}

static const struct kernel_param_ops kvblk_test_dma_mask_bits_ops = {
	.set	= kvblk_test_dma_mask_bits_set,
	.get	= param_get_uint,
};
module_param_cb(test_dma_mask_bits, &kvblk_test_dma_mask_bits_ops,
		&kvblk_test_dma_mask_bits, 0644);
MODULE_PARM_DESC(test_dma_mask_bits,
		 "tests only: the PRP engine's checks take the NVMe function's DMA mask as this many bits (12..64; 0, default: its own mask)");

/*
 * May some DMA mappings of @dev bounce (kvblk_dev_partial_bounce(), with
 * the test hook's mask when it is set)?
 */
static bool kvblk_prp_partial_bounce(struct device *dev)
{
	unsigned int bits = READ_ONCE(kvblk_test_dma_mask_bits);

	if (bits)
		return dma_get_required_mask(dev) > DMA_BIT_MASK(bits);
	return kvblk_dev_partial_bounce(dev);
}

/* The NVMe status (SCT 10:8, SC 7:0) of a completed request, as kvblk reads it. */
static u16 kvblk_nvme_status(struct request *rq)
{
	const struct kvblk_nvme_request_head *nr = blk_mq_rq_to_pdu(rq);
	int off = READ_ONCE(kvblk_test_status_offset);

	if (unlikely(off >= 0))	/* even: a u16 of the 8-byte aligned pdu */
		return READ_ONCE(*(const u16 *)((const u8 *)nr + off)) & 0x7ff;
	return READ_ONCE(nr->status) & 0x7ff;
}

/*
 * The command's outcome. Newer kernels complete passthrough requests in
 * batches (blk_mq_add_to_batch() admits failed ones: 7.2), and the batch
 * path calls end_io with BLK_STS_OK whatever the NVMe status was; the nvme
 * driver's own passthrough end_io reads the status from its request data
 * for that reason. So does kvblk: a non-zero NVMe status (SCT and SC, NVMe
 * Base Specification 2.0, 4.2.3 "Status Field Definition") fails the
 * command even when @sts says OK, mapped the way nvme_error_status() does
 * for the classes the uapi tells apart. Whether kvblk reads that status
 * where the nvme driver writes it is proven at every PRP attach
 * (kvblk_prp_selfcheck()).
 */
static blk_status_t kvblk_cmd_status(struct request *rq, blk_status_t sts)
{
	u16 st = kvblk_nvme_status(rq);

	if (sts || !st)
		return sts;
	/*
	 * Media and Data Integrity Errors; of those, End-to-end Guard,
	 * Application and Reference Tag Check Errors (282h-284h) are
	 * protection errors, as nvme_error_status() says.
	 */
	if (st >= 0x282 && st <= 0x284)
		return BLK_STS_PROTECTION;
	if (st >> 8 == 0x2)
		return BLK_STS_MEDIUM;
	if (st == NVME_SC_HOST_PATH_ERROR)
		return BLK_STS_TRANSPORT;
	return BLK_STS_IOERR;		/* also a command aborted by the host */
}

/*
 * The object's status for a Read that failed with @sts (kvblk_cmd_status(),
 * not BLK_STS_OK): a load's command, or the probe Read that stands for it
 * (kvblk_prp_recheck()). Commands the nvme driver cancels because the
 * controller is going away (host-aborted: -EIO) report the lost path, as
 * the ones that find the queue dying do.
 */
static int kvblk_prp_errno(const struct kvblk_ns_info *info, blk_status_t sts,
			   enum kvblk_err_kind *kind)
{
	int err = kvblk_status_errno(sts, kind);

	if (err == -EIO && *kind == KVBLK_ERR_IO &&
	    kvblk_disk_going(info->disk, info->q)) {
		err = -ENOLINK;
		*kind = KVBLK_ERR_TRANSPORT;
	}
	return err;
}

static enum rq_end_io_ret kvblk_prp_end_io(KVBLK_END_IO_ARGS)
{
	struct kvblk_cmd *cmd = rq->end_io_data;
	struct kvblk_btgt *bt = cmd->b->objs[cmd->obj].bt;
	const struct kvblk_ns_info *info = &bt->t->ns->info;
	enum kvblk_err_kind kind = KVBLK_ERR_OTHER;
	int err = 0;

	/*
	 * Before the request is freed (RQ_END_IO_FREE): the count may only
	 * ever be lower than the requests that hold the queue.
	 */
	atomic_dec(&bt->prp_rqs);

	sts = kvblk_cmd_status(rq, sts);
	if (sts)
		err = kvblk_prp_errno(info, sts, &kind);
	kvblk_cmd_end(cmd, err, kind, rq->mq_hctx->queue_num);
	return RQ_END_IO_FREE;
}

/*
 * Back off until one of our commands completes or a jiffy passes, the plug
 * flushed meanwhile. Returns 0 or -EINTR (fatal signal).
 */
static int kvblk_prp_backoff(struct kvblk_batch *b, struct blk_plug *plug)
{
	int nfree = atomic_read(&b->nr_free);
	long ret;

	blk_finish_plug(plug);
	ret = wait_event_killable_timeout(b->slot_wq,
					  atomic_read(&b->nr_free) != nfree, 1);
	blk_start_plug(plug);
	b->t_issue = ktime_get_ns();	/* a new run of submissions */
	return ret < 0 ? -EINTR : 0;
}

/*
 * A request on the namespace's queue. NOWAIT, so that requests held in the
 * plug are flushed before sleeping; on a tag shortage (or a queue frozen
 * for a controller reset) back off until one of our commands completes or
 * a jiffy passes. NOWAIT gives the same -EWOULDBLOCK for a frozen and for a
 * dying queue, so a removed disk is told apart by its own state: -ENOLINK.
 */
static struct request *kvblk_alloc_rq(struct kvblk_batch *b,
				      const struct kvblk_ns *ns,
				      struct blk_plug *plug)
{
	struct request *rq;
	long ret;

	for (;;) {
		rq = blk_mq_alloc_request(ns->info.q, REQ_OP_DRV_IN,
					  BLK_MQ_REQ_NOWAIT);
		if (!IS_ERR(rq))
			return rq;
		ret = PTR_ERR(rq);
		if (ret != -EWOULDBLOCK && ret != -EBUSY)
			return ERR_PTR(-ENOLINK);	/* queue dying: device gone */
		if (kvblk_disk_dead(ns->info.disk, ns->info.q))
			return ERR_PTR(-ENOLINK);
		if (kvblk_prp_backoff(b, plug))
			return ERR_PTR(-EINTR);
	}
}

static int kvblk_probe_ext_lba(const struct kvblk_ns_info *info, u64 slba,
			       struct gendisk *disk, bool selfcheck, bool attach,
			       blk_status_t *sts);

/*
 * The namespace's LBA format as the batch's commands need it: the one of
 * the attach. Called with a request of the batch allocated on the queue,
 * when none of its other requests on this target is outstanding.
 *
 * Why then, and why that is enough: the nvme driver changes a namespace's
 * format (a Format NVM, a rescan after another host formatted it) only
 * with its queue frozen, and a freeze completes only once every request
 * allocated on the queue was freed. The batch counts its allocated
 * requests per target (kvblk_btgt.prp_rqs, dropped in end_io before the
 * request is freed, so never above the truth); between two of its
 * allocations the count only falls. So while the count stays above zero
 * no freeze, hence no format, can have completed, and a command that finds
 * it at zero (the batch's first, or the first after the pipeline drained,
 * as it must for a freeze to complete) checks again here, holding a
 * request, so that no format can complete until that command is done. A
 * format during a long batch is therefore found before the first command
 * built for the old format would reach the device (review-2 N2).
 *
 * What is checked: the capacity (0: a format the nvme driver cannot use,
 * or removal: -ENOLINK), the logical block size and the metadata the
 * block layer sees (-ESTALE), and the device itself, with one Read of
 * @slba, the first LBA of the command about to be submitted, into a probe
 * area with a canary behind it (kvblk_probe_ext_lba(), the attach's probe,
 * without its failing Read): unless exactly the LBA's data arrives,
 * -ESTALE. The block layer is not enough: an extended-LBA format with
 * protection information is invisible to it (the nvme driver sets PRACT
 * for its own I/O and registers no integrity profile), and after a Format
 * NVM the nvme driver unfreezes the queue before its rescan updates the
 * LBA size (nvme_passthru_end()), so for a moment the device has the new
 * format and the block layer the old one. That Read costs one 1-LBA
 * command per batch per target, and one more after each drain.
 *
 * The probe reads the command's own first LBA, not the target's: a Read
 * that fails there (a media error) would fail the command too, so it fails
 * the object the command belongs to and no other, with the status that
 * command would have had (kvblk_prp_errno(), counted in the namespace's
 * error counters as the command's would be). A grown defect at one LBA
 * fails only the objects that cover it. One exception: after a format to
 * a larger LBA that the block layer does not show yet, @slba may lie past
 * the device's new end, and that Read fails too (LBA Out of Range). So a
 * failed probe is followed by a probe of the target's first LBA, which
 * finds such a format (-ESTALE); when that one reads exactly its LBA, or
 * fails as well, the first failure stands.
 *
 * Return: 0; -ESTALE (logged), -ENOLINK, -EAGAIN (no request for the probe
 * now: back off and try again), the probe Read's failure as the command's
 * (-EIO; -ENOLINK for a lost path), -ENOMEM.
 */
static int kvblk_prp_recheck(struct kvblk_btgt *bt, u64 slba,
			     struct blk_plug *plug)
{
	struct block_device *bdev = I_BDEV(bt->t->file->f_mapping->host);
	struct kvblk_ns_info info = bt->t->ns->info;
	struct gendisk *disk = info.disk;
	u64 first = bt->t->start_bytes >> bt->lba_shift;
	enum kvblk_err_kind kind;
	blk_status_t sts = BLK_STS_OK;
	unsigned int lba, md;
	int ret;

	if (!get_capacity(disk))
		return -ENOLINK;
	lba = bdev_logical_block_size(bdev);
	md = kvblk_integrity_bytes(info.q);
	if (lba != 1U << bt->lba_shift || md) {
		pr_info_ratelimited("load %s: the namespace's LBA format changed during the batch (logical block %u, attached %u, metadata %u bytes): the target's objects not yet submitted fail with ESTALE; attach again\n",
				    disk->disk_name, lba, 1U << bt->lba_shift, md);
		return -ESTALE;
	}
	info.lba_shift = bt->lba_shift;
	/* The probe waits: what the plug holds goes to the device first. */
	blk_finish_plug(plug);
	ret = kvblk_probe_ext_lba(&info, slba, disk, false, false, &sts);
	/*
	 * Failed there: a defect of that LBA, or an LBA past the end of a
	 * format with larger LBAs that the block layer does not show yet.
	 * The target's first LBA tells them apart (it moves more than the
	 * LBA's data after such a format).
	 */
	if (ret == -EIO && slba != first) {
		int ret2 = kvblk_probe_ext_lba(&info, first, disk, false, false,
					       NULL);

		if (ret2 && ret2 != -EIO)
			ret = ret2;
	}
	blk_start_plug(plug);
	if (ret == -EBADMSG) {
		pr_info_ratelimited("load %s: a Read of one LBA did not move exactly the LBA's data: the namespace was reformatted (with metadata the block layer does not show, or on the device before the nvme driver's rescan): the target's objects not yet submitted fail with ESTALE; attach again\n",
				    disk->disk_name);
		return -ESTALE;
	}
	if (ret == -ENODEV)
		return -ENOLINK;	/* the nvme driver let go of it */
	if (ret == -EIO && sts) {
		ret = kvblk_prp_errno(&info, sts, &kind);
		this_cpu_inc(bt->t->ns->stats.pcpu->errors[kind]);
	}
	return ret;
}

/*
 * One NVMe Read. The revocation fence is taken once the request is
 * allocated, just before execution, so that a revocation never waits behind
 * a submitter backing off on a frozen queue.
 */
static int kvblk_prp_submit(struct kvblk_batch *b, struct kvblk_cmd *cmd,
			    struct blk_plug *plug)
{
	struct kvblk_obj *o = &b->objs[cmd->obj];
	struct kvblk_btgt *bt = o->bt;
	struct kvblk_ns *ns = bt->t->ns;
	struct block_device *bdev = I_BDEV(bt->t->file->f_mapping->host);
	u64 off = o->buf_offset + cmd->done;
	struct nvme_command c;
	struct request *rq;
	__le64 prp1, prp2;
	int ret;

	/*
	 * Mapped for a PCI function since removed (removal.c): unmapped. It
	 * cannot become so during the batch: the removal waits for it.
	 */
	if (READ_ONCE(o->buf->dma_gone))
		return -ENODEV;
	if (!get_capacity(ns->info.disk))
		return -ENOLINK;	/* being removed (kvblk_prp_begin()) */
	/*
	 * A partition shrunk during the batch (BLKPG resize: no freeze): what
	 * lies past its new end is not this target's any more.
	 */
	if (o->offset + cmd->done + cmd->bytes >
	    (u64)bdev_nr_sectors(bdev) << SECTOR_SHIFT)
		return -ERANGE;
	for (;;) {
		rq = kvblk_alloc_rq(b, ns, plug);
		if (IS_ERR(rq))
			return PTR_ERR(rq);
		if (atomic_inc_return(&bt->prp_rqs) > 1)
			break;
		ret = kvblk_prp_recheck(bt, cmd->slba, plug);
		if (!ret) {
			/* It may have read the disk: a new run. */
			b->t_issue = ktime_get_ns();
			break;
		}
		atomic_dec(&bt->prp_rqs);
		blk_mq_free_request(rq);
		if (ret != -EAGAIN)
			return ret;
		if (kvblk_prp_backoff(b, plug))
			return -EINTR;
	}
	ret = kvblk_buf_dma_begin(o->buf);
	if (ret)
		goto out_free_rq;
	ret = kvblk_prp_build(&ns->prp_pools, o->buf, off, cmd->bytes,
			      &cmd->prp, &prp1, &prp2, GFP_KERNEL);
	if (ret)
		goto out_dma_end;
	kvblk_buf_sync(o->buf, off, cmd->bytes, false);

	memset(&c, 0, sizeof(c));
	c.rw.opcode = nvme_cmd_read;
	c.rw.nsid = cpu_to_le32(ns->info.nsid);
	c.rw.slba = cpu_to_le64(cmd->slba);
	c.rw.length = cpu_to_le16((cmd->bytes >> bt->lba_shift) - 1);
	c.rw.dptr.prp1 = prp1;
	c.rw.dptr.prp2 = prp2;

	nvme_init_request(rq, &c);
	rq->end_io = kvblk_prp_end_io;
	rq->end_io_data = cmd;
	kvblk_cmd_issue(b, cmd, rq->mq_hctx->queue_num);
	/* cmd belongs to the completion from here on. */
	blk_execute_rq_nowait(rq, false);
	return 0;

out_dma_end:
	kvblk_buf_dma_end(o->buf);
out_free_rq:
	atomic_dec(&bt->prp_rqs);
	blk_mq_free_request(rq);
	return ret;
}

/*
 * The namespace as it is now. The PRP engine computes NLB and SLBA itself,
 * so a namespace reformatted to another LBA size, or to a format with
 * metadata, since attach would transfer the wrong number of bytes: such a
 * batch fails as a whole with -ESTALE (a change found after the batch
 * began fails its objects instead: kvblk_prp_recheck()). The size is
 * re-read too (a partition shrunk while attached is read no further than
 * its new end).
 */
static int kvblk_prp_begin(struct kvblk_batch *b, struct kvblk_btgt *bt)
{
	struct block_device *bdev = I_BDEV(bt->t->file->f_mapping->host);
	struct kvblk_ns *ns = bt->t->ns;
	const struct kvblk_ns_info *info = &ns->info;
	unsigned int lba, md;

	bt->lba_shift = bt->t->lba_shift;
	bt->align_mask = 3;	/* PRP1 is dword aligned */
	bt->max_cmd_bytes = bt->t->prp_max_cmd_bytes;
	bt->capacity = bt->t->capacity;
	/* Seen again, ordered against the removal, by kvblk_prp_enter(). */
	if (READ_ONCE(ns->dead))
		return -ENODEV;
	/*
	 * A namespace being removed fails each object with -ENOLINK (submit);
	 * so does one whose capacity is 0 with the same format (a format the
	 * nvme driver cannot use gets capacity 0 too, and it was not removed:
	 * the objects fail alike).
	 */
	if (kvblk_disk_going(info->disk, info->q))
		return 0;
	lba = bdev_logical_block_size(bdev);
	md = kvblk_integrity_bytes(info->q);
	if (lba != 1U << bt->lba_shift || md) {
		pr_info_ratelimited("load %s: the namespace's LBA format changed since attach (logical block %u, attached %u, metadata %u bytes); attach again\n",
				    info->disk->disk_name, lba, 1U << bt->lba_shift, md);
		return -ESTALE;
	}
	bt->capacity = (u64)bdev_nr_sectors(bdev) << SECTOR_SHIFT;
	return 0;
}

/*
 * The batch's descriptors and memory were checked (batch.c,
 * kvblk_batch_enter()): from here on it only allocates, maps what the PRP
 * engine needs and issues commands, none of which waits on the caller.
 * Counted until every command of the batch completed (kvblk_prp_done(),
 * which the batch calls from its last completion): the removal of the PCI
 * function waits for that before it frees the PRP pools and the mappings;
 * never for the caller to collect the batch, nor for a check of the
 * caller's memory that faults on a userfaultfd or FUSE mapping (review-2
 * N3: that is why this is not done in kvblk_prp_begin()).
 *
 * Return: 0; -ENODEV the PCI function is being removed.
 */
static int kvblk_prp_enter(struct kvblk_btgt *bt)
{
	struct kvblk_ns *ns = bt->t->ns;

	atomic_inc(&ns->prp_batches);
	/* Count, then read ->dead: pairs with smp_mb() in kvblk_ns_drain(). */
	smp_mb__after_atomic();
	if (READ_ONCE(ns->dead)) {
		kvblk_ns_prp_batch_end(ns);
		return -ENODEV;
	}
	bt->entered = true;
	return 0;
}

/* Every command of the batch that entered @bt's namespace completed. */
static void kvblk_prp_done(struct kvblk_btgt *bt)
{
	if (bt->entered)
		kvblk_ns_prp_batch_end(bt->t->ns);
}

static void kvblk_prp_slot_release(const struct kvblk_tgt *t,
				   struct kvblk_cmd *cmd)
{
	kvblk_prp_free(&t->ns->prp_pools, &cmd->prp);
}

const struct kvblk_engine_ops kvblk_engine_prp = {
	.name		= "prp",
	.id		= KVBLK_ENGINE_PRP,
	.dma_mapped	= true,
	.stores		= false,	/* Read passthrough only */
	.begin		= kvblk_prp_begin,
	.enter		= kvblk_prp_enter,
	.done		= kvblk_prp_done,
	.submit		= kvblk_prp_submit,
	.slot_release	= kvblk_prp_slot_release,
};

/* ---- attach ------------------------------------------------------------- */

/*
 * Find the NVMe PCI function behind @disk. The nvme core adds a namespace
 * disk under its controller device (class "nvme"), whose parent is the
 * transport's device: the pci_dev for nvme-pci. The multipath head disk
 * hangs under the subsystem device (class "nvme-subsystem") and is
 * bio-based.
 */
#define KVBLK_PRP_NOT_NVME "not an NVMe namespace (the PRP engine serves only those)"

static int kvblk_find_nvme_pci(struct gendisk *disk, struct request_queue *q,
			       struct device **dma_dev)
{
	struct module *owner = disk->fops->owner;
	struct device *ctrl = disk_to_dev(disk)->parent;

	if (owner && strcmp(module_name(owner), "nvme_core"))
		return kvblk_reject(disk, KVBLK_PRP_NOT_NVME);
	if (!ctrl || !ctrl->class)
		return kvblk_reject(disk, KVBLK_PRP_NOT_NVME);
	if (!strcmp(ctrl->class->name, "nvme-subsystem") || !queue_is_mq(q))
		return kvblk_reject(disk,
				    "NVMe multipath head (bio-based); the PRP engine needs a controller's own namespace (nvme_core.multipath=N)");
	if (strcmp(ctrl->class->name, "nvme"))
		return kvblk_reject(disk, KVBLK_PRP_NOT_NVME);
	if (!ctrl->parent || !dev_is_pci(ctrl->parent))
		return kvblk_reject(disk,
				    "NVMe namespace not on a PCIe controller (fabrics or other transport)");
	/*
	 * The PRP engine maps registered memory once, for as long as it is
	 * registered: through swiotlb that would hold bounce buffers (64 MiB
	 * for the whole system by default) until unregistered, and every load
	 * would copy anyway. The block layer maps each I/O instead.
	 */
	if (kvblk_dev_force_bounce(ctrl->parent))
		return kvblk_reject(disk,
				    "the NVMe PCI function bounces all DMA through swiotlb (swiotlb=force or a confidential VM): registrations would hold bounce buffers for their lifetime; the block-layer engine (the default) serves it");
	/*
	 * Nor where only some mappings would bounce: a DMA mask that does not
	 * reach all memory without an IOMMU (review M5). kvblk never syncs a
	 * dma-buf exporter's mapping, and a host registration would hold its
	 * bounce slots while registered.
	 */
	if (kvblk_prp_partial_bounce(ctrl->parent))
		return kvblk_reject(disk,
				    "the NVMe PCI function's DMA mask does not reach all memory (mappings may bounce through swiotlb): the block-layer engine (the default) serves it");
	*dma_dev = ctrl->parent;
	return 0;
}

/**
 * kvblk_prp_capable() - could the PRP engine serve this disk at all?
 * @disk: the disk.
 *
 * Return: true for a blk-mq namespace of an nvme-pci controller whose DMA
 * does not all bounce through swiotlb (the checks of kvblk_prp_probe() may
 * still refuse its LBA format).
 */
bool kvblk_prp_capable(struct gendisk *disk)
{
	struct module *owner = disk->fops->owner;
	struct device *ctrl = disk_to_dev(disk)->parent;

	/* As kvblk_find_nvme_pci(): no owner is a built-in nvme driver. */
	return (!owner || !strcmp(module_name(owner), "nvme_core")) && ctrl &&
	       ctrl->class && !strcmp(ctrl->class->name, "nvme") &&
	       queue_is_mq(disk->queue) && ctrl->parent &&
	       dev_is_pci(ctrl->parent) &&
	       !kvblk_dev_force_bounce(ctrl->parent) &&
	       !kvblk_prp_partial_bounce(ctrl->parent);
}

/* The namespace id as the nvme driver knows it, through its own ioctl. */
static int kvblk_nsid(struct file *file, u32 *nsid)
{
	long ret;

	if (!file->f_op->unlocked_ioctl)
		return -EOPNOTSUPP;
	ret = file->f_op->unlocked_ioctl(file, NVME_IOCTL_ID, 0);
	if (ret <= 0 || ret > U32_MAX)
		return -EOPNOTSUPP;
	*nsid = ret;
	return 0;
}

/*
 * One probe Read through the same path as a load's command: a passthrough
 * request built by nvme_init_request(), executed with
 * blk_execute_rq_nowait(), its outcome read in end_io by the same status
 * functions as kvblk_prp_end_io(). The caller waits for it uninterruptibly
 * (the command names its stack and pages); the nvme driver's timeout
 * bounds the wait.
 */
struct kvblk_probe_io {
	struct completion done;
	blk_status_t sts;	/* what a load's command would report */
	u16 nvme_status;	/* the NVMe status as kvblk reads it */
	/* the head of the request data, logged when the self-check fails */
	u8 pdu_head[sizeof(struct kvblk_nvme_request_head)];
};

static enum rq_end_io_ret kvblk_probe_end_io(KVBLK_END_IO_ARGS)
{
	struct kvblk_probe_io *io = rq->end_io_data;

	io->nvme_status = kvblk_nvme_status(rq);
	io->sts = kvblk_cmd_status(rq, sts);
	memcpy(io->pdu_head, blk_mq_rq_to_pdu(rq), sizeof(io->pdu_head));
	complete(&io->done);
	return RQ_END_IO_FREE;
}

/*
 * A request for a probe: NOWAIT, so that a queue frozen (a reset, a
 * format) or short of tags never blocks uninterruptibly. @attach: back
 * off killably until there is one; else (a batch's submitter, holding a
 * request of its own) -EAGAIN at once, its caller backs off.
 */
static struct request *kvblk_probe_rq(const struct kvblk_ns_info *info,
				      bool attach)
{
	struct request *rq;

	for (;;) {
		rq = blk_mq_alloc_request(info->q, REQ_OP_DRV_IN,
					  BLK_MQ_REQ_NOWAIT);
		if (!IS_ERR(rq))
			return rq;
		if (PTR_ERR(rq) != -EWOULDBLOCK && PTR_ERR(rq) != -EBUSY)
			return ERR_PTR(-ENODEV);	/* queue dying */
		if (kvblk_disk_dead(info->disk, info->q))
			return ERR_PTR(-ENODEV);
		if (!attach)
			return ERR_PTR(-EAGAIN);
		if (schedule_timeout_killable(1) && fatal_signal_pending(current))
			return ERR_PTR(-EINTR);
	}
}

static int kvblk_probe_read(const struct kvblk_ns_info *info,
			    struct nvme_command *c, struct kvblk_probe_io *io,
			    bool attach)
{
	struct request *rq;

	rq = kvblk_probe_rq(info, attach);
	if (IS_ERR(rq))
		return PTR_ERR(rq);
	init_completion(&io->done);
	nvme_init_request(rq, c);
	rq->end_io = kvblk_probe_end_io;
	rq->end_io_data = io;
	blk_execute_rq_nowait(rq, false);
	wait_for_completion_io(&io->done);
	return 0;
}

static int kvblk_selfcheck_refuse(struct gendisk *disk, const char *what,
				  const struct kvblk_probe_io *io)
{
	pr_warn_ratelimited("attach %s: PRP engine self-check failed: %s (NVMe status as kvblk reads it %#05x, load status %d); kvblk's mirror of the nvme driver's private struct nvme_request does not match this kernel, so a failed load could complete as success: PRP engine refused (the block-layer engine, KVBLK_ATTACH_F_ENGINE_BIO, does not read it)\n",
			    disk->disk_name, what, io->nvme_status,
			    blk_status_to_errno(io->sts));
	/* where the status really is: the request data's first bytes */
	pr_warn_ratelimited("attach %s: request data at completion: %*ph (the status is at byte %zu of kvblk's mirror)\n",
			    disk->disk_name, (int)sizeof(io->pdu_head),
			    io->pdu_head,
			    offsetof(struct kvblk_nvme_request_head, status));
	return -EOPNOTSUPP;
}

/*
 * The failing Read of the self-check costs an entry in the controller's
 * Error Information Log (and, on controllers that count those, SMART's
 * "Number of Error Information Log Entries", which smartd reports as a
 * drive problem), and any member of the kvblk group may attach as often
 * as it likes (review-2 N8). What it proves, where the nvme driver stores
 * a command's NVMe status, holds for as long as the nvme driver that made
 * the disk is loaded. So its verdict is kept per disk
 * (gendisk::diskseq, never reused while the system runs; a driver reload
 * makes new disks) for the last KVBLK_SELFCHECK_DISKS disks checked, and
 * forgotten when test_status_offset changes what kvblk reads. One failing
 * Read per disk, not per attach.
 */
#define KVBLK_SELFCHECK_DISKS	64
static struct {
	u64 diskseq;		/* 0: unused */
	int verdict;		/* 0 passed, -EOPNOTSUPP refused */
} kvblk_selfcheck_cache[KVBLK_SELFCHECK_DISKS];
static unsigned int kvblk_selfcheck_next;
static DEFINE_MUTEX(kvblk_selfcheck_lock);

static bool kvblk_selfcheck_cached(u64 diskseq, int *verdict)
{
	bool found = false;
	unsigned int i;

	mutex_lock(&kvblk_selfcheck_lock);
	for (i = 0; i < KVBLK_SELFCHECK_DISKS && !found; i++) {
		if (kvblk_selfcheck_cache[i].diskseq == diskseq) {
			*verdict = kvblk_selfcheck_cache[i].verdict;
			found = true;
		}
	}
	mutex_unlock(&kvblk_selfcheck_lock);
	return found;
}

static void kvblk_selfcheck_store(u64 diskseq, int verdict)
{
	mutex_lock(&kvblk_selfcheck_lock);
	kvblk_selfcheck_cache[kvblk_selfcheck_next].diskseq = diskseq;
	kvblk_selfcheck_cache[kvblk_selfcheck_next].verdict = verdict;
	kvblk_selfcheck_next = (kvblk_selfcheck_next + 1) % KVBLK_SELFCHECK_DISKS;
	mutex_unlock(&kvblk_selfcheck_lock);
}

static void kvblk_selfcheck_forget(void)
{
	mutex_lock(&kvblk_selfcheck_lock);
	memset(kvblk_selfcheck_cache, 0, sizeof(kvblk_selfcheck_cache));
	mutex_unlock(&kvblk_selfcheck_lock);
}

/*
 * The attach self-check: does kvblk see failures? A load's per-command
 * status comes from the nvme driver's private request data (see
 * kvblk_cmd_status()); if that layout drifted, a failed Read would complete
 * as success. So issue a Read that must fail, one LBA at the namespace's
 * size (NLB 0): a controller fails it with LBA Out of Range (SCT 0h, SC
 * 80h: NVMe Base Specification 1.4, 4.6.1.2.1 "Generic Command Status
 * Definition", Figure 129, "Status Code - Generic Command Status Values,
 * NVM Command Set"; since 2.0 in the NVM Command Set Specification), some
 * with Invalid Field in Command (SC 02h). kvblk must read exactly that
 * status and report the command failed. The good Read of
 * kvblk_probe_ext_lba() must then read status 0 and report success. The
 * failing Read transfers no data (PRP1 names the probe page anyway) and
 * leaves an entry in the controller's error log; the nvme driver does not
 * log it (RQF_QUIET, or passthru_err_log_enabled off on 6.12+). Once per
 * disk (kvblk_selfcheck_cache).
 */
static int kvblk_prp_selfcheck(const struct kvblk_ns_info *info,
			       dma_addr_t dma, struct gendisk *disk)
{
	u64 nsze = get_capacity(disk) >> (info->lba_shift - SECTOR_SHIFT);
	struct nvme_command c = { };
	struct kvblk_probe_io io;
	int ret;

	if (kvblk_selfcheck_cached(disk->diskseq, &ret)) {
		if (ret)
			pr_info_ratelimited("attach %s: PRP engine refused: the self-check of this disk failed before\n",
					    disk->disk_name);
		return ret;
	}
	c.rw.opcode = nvme_cmd_read;
	c.rw.nsid = cpu_to_le32(info->nsid);
	c.rw.slba = cpu_to_le64(nsze);
	c.rw.length = 0;
	c.rw.dptr.prp1 = cpu_to_le64(dma);
	ret = kvblk_probe_read(info, &c, &io, true);
	if (ret)
		return ret;
	if (io.nvme_status != NVME_SC_LBA_RANGE &&
	    io.nvme_status != NVME_SC_INVALID_FIELD)
		ret = kvblk_selfcheck_refuse(disk,
					     "a Read past the namespace's end did not read as LBA Out of Range (0x080) or Invalid Field (0x002)",
					     &io);
	else if (!io.sts)
		ret = kvblk_selfcheck_refuse(disk,
					     "a Read past the namespace's end was reported as success",
					     &io);
	kvblk_selfcheck_store(disk->diskseq, ret);
	return ret;
}

/*
 * Did the probe Read fail with a media error of its LBA: a status of the
 * Media and Data Integrity Errors type (SCT 2h; Unrecovered Read Error is
 * 281h), read from where the self-check just proved kvblk reads the
 * status, reported as a load's command would report it (BLK_STS_MEDIUM, or
 * BLK_STS_PROTECTION for 282h-284h)? That is the medium, not the driver.
 */
static bool kvblk_probe_media_error(const struct kvblk_probe_io *io)
{
	return io->nvme_status >> 8 == 0x2 &&
	       (io->sts == BLK_STS_MEDIUM || io->sts == BLK_STS_PROTECTION);
}

/*
 * Does a Read of one LBA move exactly the LBA's data? On nvme-pci an
 * extended-LBA format (metadata interleaved with the data) with protection
 * information is not visible to the block layer: the nvme driver sets PRACT
 * so that the controller strips the PI, and registers no integrity profile.
 * A passthrough Read would transfer data and metadata, lba + ms bytes per
 * LBA, past the PRPs of the object. So read one LBA, @slba (attach: the
 * attached range's first, or a later one when that has a media error,
 * kvblk_prp_probe(); a batch's re-check: the first of the command about to
 * be submitted), into the probe area with canary bytes behind it,
 * and refuse the namespace
 * if the canary changes (or, read twice with two fills, the LBA's last bytes
 * stay the fill: less than an LBA arrived, the device's LBA is smaller than
 * the block layer says). The data starts half an LBA before a page boundary,
 * so PRP2 is needed and names the next page, where any excess lands. The
 * metadata pointer (MPTR) names a third page of canary: a separate-metadata
 * format the block layer did not report writes there instead of to bus
 * address 0. The data itself is never returned. With @selfcheck the same
 * probe area serves the self-check's failing Read first
 * (kvblk_prp_selfcheck()), and this Read is its good one: it must read as
 * success through the load status path. @attach: attach's (logs why it
 * refuses, waits killably for a request), else a batch's re-check
 * (kvblk_prp_recheck(), -EAGAIN when no request is free now).
 *
 * The probe page is mapped for the PCI function, so it is mapped and
 * unmapped under the removal's read side, with the nvme driver still bound
 * (kvblk_dma_map_begin()): an unmap after the device was deleted would be
 * the NULL dereference of review finding H1 (review-2 N9).
 *
 * @sts, when not NULL, receives the status of a good Read that failed, as
 * a load's command reads it (kvblk_cmd_status()).
 *
 * Return: 0; -EBADMSG more or less than the LBA's data arrived (a format
 * with metadata, another LBA size; refused with a log line at attach); -EIO the good Read failed
 * (attach: -EOPNOTSUPP, logged, unless a media error: -ENODATA, logged);
 * the self-check's -EOPNOTSUPP; -ENODEV the nvme driver let go of the
 * function or the queue is dying; -EAGAIN; -EINTR; -ENOMEM.
 */
#define KVBLK_PROBE_BYTES	(4 * KVBLK_CTRL_PAGE_SIZE)
/* LBAs an attach probes at most when each fails with a media error. */
#define KVBLK_PROBE_MEDIA_LBAS	8

static int kvblk_probe_ext_lba(const struct kvblk_ns_info *info, u64 slba,
			       struct gendisk *disk, bool selfcheck, bool attach,
			       blk_status_t *sts)
{
	unsigned int order = get_order(KVBLK_PROBE_BYTES);
	u32 lba = 1U << info->lba_shift;
	u32 off = KVBLK_CTRL_PAGE_SIZE - lba / 2;
	struct nvme_command c = { };
	struct kvblk_probe_io io;
	struct page *page;
	unsigned int pass;
	dma_addr_t dma;
	u8 *va, fill;
	int ret;

	if (lba > KVBLK_CTRL_PAGE_SIZE)
		return attach ? kvblk_reject(disk, "LBA larger than 4 KiB") :
			-EBADMSG;
	page = alloc_pages(GFP_KERNEL, order);
	if (!page)
		return -ENOMEM;
	va = page_address(page);
	ret = kvblk_dma_map_begin(info->dma_dev);
	if (ret)
		goto out_free_page;
	/*
	 * Two fills at most: the LBA's last bytes still the fill after the
	 * Read means less than the LBA arrived (the device's LBA is smaller
	 * than the one the command was built for), or that the data ends with
	 * the fill's bytes; the second fill tells them apart.
	 */
	for (pass = 0; pass < 2; pass++) {
		fill = pass ? 0xa5 : 0x5a;
		memset(va, fill, KVBLK_PROBE_BYTES);
		dma = dma_map_page(info->dma_dev, page, 0, KVBLK_PROBE_BYTES,
				   DMA_FROM_DEVICE);
		if (dma_mapping_error(info->dma_dev, dma)) {
			ret = -ENOMEM;
			break;
		}
		if (attach && !pass)
			kvblk_test_probe_hold(disk);
		ret = selfcheck && !pass ? kvblk_prp_selfcheck(info, dma, disk) : 0;
		if (!ret) {
			memset(&c, 0, sizeof(c));
			c.rw.opcode = nvme_cmd_read;
			c.rw.nsid = cpu_to_le32(info->nsid);
			c.rw.slba = cpu_to_le64(slba);
			c.rw.length = 0;
			c.rw.metadata = cpu_to_le64(dma + 2 * KVBLK_CTRL_PAGE_SIZE);
			c.rw.dptr.prp1 = cpu_to_le64(dma + off);
			/* PRP2 only when the transfer crosses a page (reserved otherwise). */
			if (off + lba > KVBLK_CTRL_PAGE_SIZE)
				c.rw.dptr.prp2 = cpu_to_le64(dma + KVBLK_CTRL_PAGE_SIZE);
			ret = kvblk_probe_read(info, &c, &io, attach);
		}
		dma_unmap_page(info->dma_dev, dma, KVBLK_PROBE_BYTES,
			       DMA_FROM_DEVICE);
		if (ret)
			break;
		if (io.nvme_status || io.sts) {
			if (sts)
				*sts = io.sts ? io.sts : BLK_STS_IOERR;
			ret = -EIO;
			break;
		}
		/* More than the LBA's data: metadata, or a larger LBA. */
		if (memchr_inv(va + off + lba, fill, KVBLK_PROBE_BYTES - off - lba)) {
			ret = -EBADMSG;
			break;
		}
		ret = memchr_inv(va + off + lba - 8, fill, 8) ? 0 : -EBADMSG;
		if (!ret)
			break;
	}
	kvblk_dma_reg_end(NULL);
	if (ret == -EIO && attach && kvblk_probe_media_error(&io)) {
		pr_info_ratelimited("attach %s: the probe Read of LBA %llu failed with a media error (NVMe status %#05x, load status %d)\n",
				    disk->disk_name, slba, io.nvme_status,
				    blk_status_to_errno(io.sts));
		ret = -ENODATA;
	} else if (ret == -EIO && attach)
		ret = kvblk_selfcheck_refuse(disk,
					     "a good Read of the attached range's first LBA (or the first without a media error) was reported failed (or the device failed it)",
					     &io);
	else if (ret == -EBADMSG && attach)
		ret = kvblk_reject(disk,
				   "LBA format with metadata, or not the LBA size the block layer shows (a Read of one LBA does not move exactly the LBA's data)");
out_free_page:
	__free_pages(page, order);
	return ret;
}

/**
 * kvblk_prp_probe() - can the PRP engine serve this namespace (or partition)?
 * @file: the attached block device file (for the nvme driver's ioctl).
 * @bdev: its block device.
 * @info: out: the namespace's identity and limits.
 *
 * The PRP engine issues NVMe Read passthrough commands that the block
 * layer does not check, so this checks everything itself: the disk is a
 * blk-mq NVMe namespace (not the multipath head) on a PCIe controller; the
 * LBA format has no metadata or protection information (no integrity
 * profile, and a probe Read moves exactly one LBA of data); the namespace
 * id comes from the nvme driver.
 *
 * The probe Read reads the attached range's first LBA; when that fails with
 * a media error, the next one, up to KVBLK_PROBE_MEDIA_LBAS LBAs.
 *
 * Return: 0; -EOPNOTSUPP with a kernel log line naming the reason; -EIO
 * (logged) when each probed LBA failed with a media error; -ENODEV;
 * -EINTR; -ENOMEM.
 */
int kvblk_prp_probe(struct file *file, struct block_device *bdev,
		    struct kvblk_ns_info *info)
{
	struct gendisk *disk = bdev->bd_disk;
	struct request_queue *q = bdev_get_queue(bdev);
	unsigned int lba = bdev_logical_block_size(bdev);
	u64 first, nr, i;
	int ret;

	memset(info, 0, sizeof(*info));
	ret = kvblk_find_nvme_pci(disk, q, &info->dma_dev);
	if (ret)
		return ret;
	if (kvblk_disk_dead(disk, q))
		return kvblk_reject(disk, "disk is being removed");
	/*
	 * Not blk_get_integrity(): separate metadata without protection
	 * information has no integrity profile but a metadata size.
	 */
	if (blk_get_integrity(disk) || kvblk_integrity_bytes(q))
		return kvblk_reject(disk,
				    "LBA format with metadata or protection information");
	if (!get_capacity(disk))
		return kvblk_reject(disk,
				    "namespace has no usable capacity (LBA format not supported by the nvme driver)");
	if (!is_power_of_2(lba) || lba < SECTOR_SIZE)
		return kvblk_reject(disk, "unexpected logical block size");
	ret = kvblk_nsid(file, &info->nsid);
	if (ret)
		return kvblk_reject(disk, "nvme driver did not report a namespace id");

	info->disk = disk;
	info->q = q;
	info->devt = disk_devt(disk);
	info->lba_shift = ilog2(lba);
	info->hw_max_bytes = min_t(u64, (u64)queue_max_hw_sectors(q) << SECTOR_SHIFT,
				   U32_MAX);
	info->nr_hw_queues = q->nr_hw_queues;
	if ((u64)get_start_sect(bdev) << SECTOR_SHIFT & (lba - 1))
		return kvblk_reject(disk, "partition not aligned to the LBA size");
	first = ((u64)get_start_sect(bdev) << SECTOR_SHIFT) >> info->lba_shift;
	nr = clamp_t(u64, bdev_nr_sectors(bdev) >> (info->lba_shift - SECTOR_SHIFT),
		     1, KVBLK_PROBE_MEDIA_LBAS);
	/*
	 * The probe reads the attached range's first LBA. A media error there
	 * proves nothing about kvblk or the nvme driver (the self-check's
	 * failing Read, the first LBA's pass, already showed that kvblk reads
	 * the status where the driver writes it), and a drive with one bad
	 * sector at its start can still serve loads elsewhere (an object over
	 * it fails with -EIO, as any PRP command with a media error does).
	 * So the next LBAs are probed, a few at most; the range is refused
	 * only when none of them reads.
	 */
	for (i = 0; i < nr; i++) {
		ret = kvblk_probe_ext_lba(info, first + i, disk, !i, true, NULL);
		if (ret != -ENODATA)
			return ret;
	}
	pr_warn_ratelimited("attach %s: PRP engine refused: the probe Read of each of the attached range's first %llu LBAs (%llu to %llu) failed with a media error; the engine needs one of them to read (the block-layer engine, KVBLK_ATTACH_F_ENGINE_BIO, does not probe)\n",
			    disk->disk_name, nr, first, first + nr - 1);
	return -EIO;
}

/**
 * kvblk_prp_max_cmd() - the largest PRP command for a target.
 * @ns: its namespace object.
 * @info: what this attach's probe found (kvblk_prp_probe()): its LBA size
 *        and the controller's limit now, not the first attach's.
 *
 * Return: min(max_cmd_bytes tunable, the controller's limit (MDTS), 65536
 * LBAs: NLB's 16 bits), a multiple of the LBA size; 0 if the LBA is larger.
 */
u32 kvblk_prp_max_cmd(const struct kvblk_ns *ns,
		      const struct kvblk_ns_info *info)
{
	u64 max = min(READ_ONCE(ns->max_cmd_bytes), info->hw_max_bytes);

	max = min_t(u64, max, (u64)65536 << info->lba_shift);
	return round_down(max, 1U << info->lba_shift);
}

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

static int kvblk_test_status_offset_set(const char *val,
					const struct kernel_param *kp)
{
	int v;

	if (kstrtoint(val, 0, &v) || v < -1 ||
	    v > KVBLK_TEST_STATUS_OFFSET_MAX || (v > 0 && (v & 1)))
		return -EINVAL;
	WRITE_ONCE(kvblk_test_status_offset, v);
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
	if (st >> 8 == 0x2)		/* Media and Data Integrity Errors */
		return BLK_STS_MEDIUM;
	if (st == NVME_SC_HOST_PATH_ERROR)
		return BLK_STS_TRANSPORT;
	return BLK_STS_IOERR;		/* also a command aborted by the host */
}

static enum rq_end_io_ret kvblk_prp_end_io(KVBLK_END_IO_ARGS)
{
	struct kvblk_cmd *cmd = rq->end_io_data;
	const struct kvblk_ns_info *info = &cmd->b->objs[cmd->obj].bt->t->ns->info;
	enum kvblk_err_kind kind = KVBLK_ERR_OTHER;
	int err = 0;

	sts = kvblk_cmd_status(rq, sts);
	if (sts)
		err = kvblk_status_errno(sts, &kind);
	/*
	 * Commands the nvme driver cancels because the controller is going
	 * away (host-aborted: -EIO) report the lost path, as the ones that
	 * find the queue dying do.
	 */
	if (err == -EIO && kind == KVBLK_ERR_IO &&
	    kvblk_disk_going(info->disk, info->q)) {
		err = -ENOLINK;
		kind = KVBLK_ERR_TRANSPORT;
	}
	kvblk_cmd_end(cmd, err, kind, rq->mq_hctx->queue_num);
	return RQ_END_IO_FREE;
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
	int nfree;
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

		blk_finish_plug(plug);
		nfree = atomic_read(&b->nr_free);
		ret = wait_event_killable_timeout(b->slot_wq,
						  atomic_read(&b->nr_free) != nfree, 1);
		blk_start_plug(plug);
		if (ret < 0)
			return ERR_PTR(-EINTR);
	}
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
	struct kvblk_ns *ns = o->bt->t->ns;
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
	rq = kvblk_alloc_rq(b, ns, plug);
	if (IS_ERR(rq))
		return PTR_ERR(rq);
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
	c.rw.length = cpu_to_le16((cmd->bytes >> o->bt->lba_shift) - 1);
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
	blk_mq_free_request(rq);
	return ret;
}

/*
 * The namespace as it is now. The PRP engine computes NLB and SLBA itself,
 * so a namespace reformatted to another LBA size, or to a format with
 * metadata, since attach would transfer the wrong number of bytes: such a
 * batch fails as a whole with -ESTALE. The size is re-read too (a
 * partition shrunk while attached is read no further than its new end).
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
	/*
	 * Counted until every command of the batch completed (kvblk_prp_done(),
	 * which the batch calls from its last completion): the removal of the
	 * PCI function waits for that before it frees the PRP pools and the
	 * mappings; never for the caller to collect the batch.
	 */
	atomic_inc(&ns->prp_batches);
	/* Count, then read ->dead: pairs with smp_mb() in kvblk_ns_drain(). */
	smp_mb__after_atomic();
	if (READ_ONCE(ns->dead)) {
		kvblk_ns_prp_batch_end(ns);
		return -ENODEV;
	}
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
		kvblk_ns_prp_batch_end(ns);
		pr_info_ratelimited("load %s: the namespace's LBA format changed since attach (logical block %u, attached %u, metadata %u bytes); attach again\n",
				    info->disk->disk_name, lba, 1U << bt->lba_shift, md);
		return -ESTALE;
	}
	bt->capacity = (u64)bdev_nr_sectors(bdev) << SECTOR_SHIFT;
	return 0;
}

/* Every command of the batch that began on @bt's namespace completed. */
static void kvblk_prp_done(struct kvblk_btgt *bt)
{
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

	return owner && !strcmp(module_name(owner), "nvme_core") && ctrl &&
	       ctrl->class && !strcmp(ctrl->class->name, "nvme") &&
	       queue_is_mq(disk->queue) && ctrl->parent &&
	       dev_is_pci(ctrl->parent) &&
	       !kvblk_dev_force_bounce(ctrl->parent);
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
};

static enum rq_end_io_ret kvblk_probe_end_io(KVBLK_END_IO_ARGS)
{
	struct kvblk_probe_io *io = rq->end_io_data;

	io->nvme_status = kvblk_nvme_status(rq);
	io->sts = kvblk_cmd_status(rq, sts);
	complete(&io->done);
	return RQ_END_IO_FREE;
}

static int kvblk_probe_read(const struct kvblk_ns_info *info,
			    struct nvme_command *c, struct kvblk_probe_io *io)
{
	struct request *rq;

	rq = blk_mq_alloc_request(info->q, REQ_OP_DRV_IN, 0);
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
	return -EOPNOTSUPP;
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
 * log it (RQF_QUIET, or passthru_err_log_enabled off on 6.12+).
 */
static int kvblk_prp_selfcheck(const struct kvblk_ns_info *info,
			       dma_addr_t dma, struct gendisk *disk)
{
	u64 nsze = get_capacity(disk) >> (info->lba_shift - SECTOR_SHIFT);
	struct nvme_command c = { };
	struct kvblk_probe_io io;
	int ret;

	c.rw.opcode = nvme_cmd_read;
	c.rw.nsid = cpu_to_le32(info->nsid);
	c.rw.slba = cpu_to_le64(nsze);
	c.rw.length = 0;
	c.rw.dptr.prp1 = cpu_to_le64(dma);
	ret = kvblk_probe_read(info, &c, &io);
	if (ret)
		return ret;
	if (io.nvme_status != NVME_SC_LBA_RANGE &&
	    io.nvme_status != NVME_SC_INVALID_FIELD)
		return kvblk_selfcheck_refuse(disk,
					      "a Read past the namespace's end did not read as LBA Out of Range (0x080) or Invalid Field (0x002)",
					      &io);
	if (!io.sts)
		return kvblk_selfcheck_refuse(disk,
					      "a Read past the namespace's end was reported as success",
					      &io);
	return 0;
}

/*
 * Does a Read of one LBA move more than the LBA's data? On nvme-pci an
 * extended-LBA format (metadata interleaved with the data) with protection
 * information is not visible to the block layer: the nvme driver sets PRACT
 * so that the controller strips the PI, and registers no integrity profile.
 * A passthrough Read would transfer data and metadata, lba + ms bytes per
 * LBA, past the PRPs of the object. So read the attached range's first LBA
 * into the probe area with canary bytes behind it, and refuse the namespace
 * if the canary changes. The data starts half an LBA before a page boundary,
 * so PRP2 is needed and names the next page, where any excess lands. The
 * metadata pointer (MPTR) names a third page of canary: a separate-metadata
 * format the block layer did not report writes there instead of to bus
 * address 0. The data itself is never returned. The same probe area serves
 * the self-check's failing Read first (kvblk_prp_selfcheck()); this Read
 * is its good one: it must read as success through the load status path.
 */
#define KVBLK_PROBE_BYTES	(4 * KVBLK_CTRL_PAGE_SIZE)

static int kvblk_probe_ext_lba(const struct kvblk_ns_info *info, u64 slba,
			       struct gendisk *disk)
{
	unsigned int order = get_order(KVBLK_PROBE_BYTES);
	u32 lba = 1U << info->lba_shift;
	u32 off = KVBLK_CTRL_PAGE_SIZE - lba / 2;
	struct nvme_command c = { };
	struct kvblk_probe_io io;
	struct page *page;
	dma_addr_t dma;
	u8 *va;
	int ret;

	if (lba > KVBLK_CTRL_PAGE_SIZE)
		return kvblk_reject(disk, "LBA larger than 4 KiB");
	page = alloc_pages(GFP_KERNEL, order);
	if (!page)
		return -ENOMEM;
	va = page_address(page);
	memset(va, 0x5a, KVBLK_PROBE_BYTES);
	dma = dma_map_page(info->dma_dev, page, 0, KVBLK_PROBE_BYTES,
			   DMA_FROM_DEVICE);
	if (dma_mapping_error(info->dma_dev, dma)) {
		ret = -ENOMEM;
		goto out_free_page;
	}

	ret = kvblk_prp_selfcheck(info, dma, disk);
	if (ret)
		goto out_unmap;

	c.rw.opcode = nvme_cmd_read;
	c.rw.nsid = cpu_to_le32(info->nsid);
	c.rw.slba = cpu_to_le64(slba);
	c.rw.length = 0;
	c.rw.metadata = cpu_to_le64(dma + 2 * KVBLK_CTRL_PAGE_SIZE);
	c.rw.dptr.prp1 = cpu_to_le64(dma + off);
	/* PRP2 only when the transfer crosses a page (reserved otherwise). */
	if (off + lba > KVBLK_CTRL_PAGE_SIZE)
		c.rw.dptr.prp2 = cpu_to_le64(dma + KVBLK_CTRL_PAGE_SIZE);
	ret = kvblk_probe_read(info, &c, &io);
	if (ret)
		goto out_unmap;
	dma_unmap_page(info->dma_dev, dma, KVBLK_PROBE_BYTES, DMA_FROM_DEVICE);

	if (io.nvme_status || io.sts)
		ret = kvblk_selfcheck_refuse(disk,
					     "a good Read of the attached range's first LBA was reported failed (or the device failed it)",
					     &io);
	else if (memchr_inv(va + off + lba, 0x5a, KVBLK_PROBE_BYTES - off - lba))
		ret = kvblk_reject(disk,
				   "LBA format with metadata (a Read moves more than the LBA's data)");
	else
		ret = 0;
	goto out_free_page;

out_unmap:
	dma_unmap_page(info->dma_dev, dma, KVBLK_PROBE_BYTES, DMA_FROM_DEVICE);
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
 * Return: 0; -EOPNOTSUPP with a kernel log line naming the reason; -ENOMEM.
 */
int kvblk_prp_probe(struct file *file, struct block_device *bdev,
		    struct kvblk_ns_info *info)
{
	struct gendisk *disk = bdev->bd_disk;
	struct request_queue *q = bdev_get_queue(bdev);
	unsigned int lba = bdev_logical_block_size(bdev);
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
	return kvblk_probe_ext_lba(info, ((u64)get_start_sect(bdev) << SECTOR_SHIFT) >>
				   info->lba_shift, disk);
}

/**
 * kvblk_prp_max_cmd() - the largest PRP command for a namespace.
 * @ns: the namespace object.
 *
 * Return: min(max_cmd_bytes tunable, the controller's limit (MDTS), 65536
 * LBAs: NLB's 16 bits), a multiple of the LBA size; 0 if the LBA is larger.
 */
u32 kvblk_prp_max_cmd(const struct kvblk_ns *ns)
{
	u64 max = min(READ_ONCE(ns->max_cmd_bytes), ns->info.hw_max_bytes);

	max = min_t(u64, max, (u64)65536 << ns->info.lba_shift);
	return round_down(max, 1U << ns->info.lba_shift);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * attach.c - KVBLK_IOC_ATTACH: bind a context to an NVMe namespace given as
 * an fd of its block device (or of a partition of it).
 *
 * The PRP engine issues NVMe Read passthrough commands that the block layer
 * does not check, so attach checks everything itself: the fd allows reads;
 * the disk is a blk-mq NVMe namespace (not the multipath head) on a PCIe
 * controller; the LBA format has no metadata or protection information (no
 * integrity profile, and a probe Read moves exactly one LBA of data); the
 * namespace id comes from the nvme driver; a partition bounds every access.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/nvme.h>
#include <linux/nvme_ioctl.h>
#include <linux/pci.h>

#include "kvblk.h"

static int kvblk_reject(struct gendisk *disk, const char *why)
{
	pr_info_ratelimited("attach %s: %s\n", disk->disk_name, why);
	return -EOPNOTSUPP;
}

/*
 * Find the NVMe PCI function behind @disk. The nvme core adds a namespace
 * disk under its controller device (class "nvme"), whose parent is the
 * transport's device: the pci_dev for nvme-pci. The multipath head disk
 * hangs under the subsystem device (class "nvme-subsystem") and is
 * bio-based.
 */
static int kvblk_find_nvme_pci(struct gendisk *disk, struct request_queue *q,
			       struct device **dma_dev)
{
	struct module *owner = disk->fops->owner;
	struct device *ctrl = disk_to_dev(disk)->parent;

	if (owner && strcmp(module_name(owner), "nvme_core"))
		return kvblk_reject(disk, "not an NVMe namespace");
	if (!ctrl || !ctrl->class)
		return kvblk_reject(disk, "not an NVMe namespace");
	if (!strcmp(ctrl->class->name, "nvme-subsystem") || !queue_is_mq(q))
		return kvblk_reject(disk,
				    "NVMe multipath head (bio-based); the PRP engine needs a controller's own namespace (nvme_core.multipath=N)");
	if (strcmp(ctrl->class->name, "nvme"))
		return kvblk_reject(disk, "not an NVMe namespace");
	if (!ctrl->parent || !dev_is_pci(ctrl->parent))
		return kvblk_reject(disk,
				    "NVMe namespace not on a PCIe controller (fabrics or other transport)");
	*dma_dev = ctrl->parent;
	return 0;
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

static int kvblk_probe_bdev(struct file *file, struct block_device *bdev,
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
 * address 0. The data itself is never returned.
 */
#define KVBLK_PROBE_BYTES	(4 * KVBLK_CTRL_PAGE_SIZE)

static int kvblk_probe_ext_lba(const struct kvblk_ns_info *info, u64 slba,
			       struct gendisk *disk)
{
	unsigned int order = get_order(KVBLK_PROBE_BYTES);
	u32 lba = 1U << info->lba_shift;
	u32 off = KVBLK_CTRL_PAGE_SIZE - lba / 2;
	struct nvme_command c = { };
	struct request *rq;
	struct page *page;
	blk_status_t sts;
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

	c.rw.opcode = nvme_cmd_read;
	c.rw.nsid = cpu_to_le32(info->nsid);
	c.rw.slba = cpu_to_le64(slba);
	c.rw.length = 0;
	c.rw.metadata = cpu_to_le64(dma + 2 * KVBLK_CTRL_PAGE_SIZE);
	c.rw.dptr.prp1 = cpu_to_le64(dma + off);
	/* PRP2 only when the transfer crosses a page (reserved otherwise). */
	if (off + lba > KVBLK_CTRL_PAGE_SIZE)
		c.rw.dptr.prp2 = cpu_to_le64(dma + KVBLK_CTRL_PAGE_SIZE);
	rq = blk_mq_alloc_request(info->q, REQ_OP_DRV_IN, 0);
	if (IS_ERR(rq)) {
		ret = PTR_ERR(rq);
		goto out_unmap;
	}
	nvme_init_request(rq, &c);
	sts = blk_execute_rq(rq, false);
	blk_mq_free_request(rq);
	dma_unmap_page(info->dma_dev, dma, KVBLK_PROBE_BYTES, DMA_FROM_DEVICE);

	if (sts)
		ret = kvblk_reject(disk, "reading the first LBA to check the LBA format failed");
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

/* Largest command: the tunable, the controller (MDTS) and NLB's 16 bits. */
static u32 kvblk_eff_max_cmd(const struct kvblk_ns *ns)
{
	u64 max = min(READ_ONCE(ns->max_cmd_bytes), ns->info.hw_max_bytes);

	max = min_t(u64, max, (u64)65536 << ns->info.lba_shift);
	return round_down(max, 1U << ns->info.lba_shift);
}

/**
 * kvblk_ioctl_attach() - KVBLK_IOC_ATTACH.
 * @ctx: context.
 * @uarg: user pointer to struct kvblk_attach.
 *
 * Return: 0; errors as documented for struct kvblk_attach.
 */
long kvblk_ioctl_attach(struct kvblk_ctx *ctx, void __user *uarg)
{
	struct kvblk_attach a;
	struct kvblk_ns_info info;
	struct block_device *bdev;
	struct kvblk_ns *ns;
	struct file *file;
	u64 start, capacity;
	u32 usize, max_cmd;
	long ret;

	ret = kvblk_copy_in(&a, sizeof(a), uarg, KVBLK_ATTACH_SIZE_VER0, &usize);
	if (ret)
		return ret;
	if (a.flags || a.reserved || memchr_inv(a.reserved2, 0, sizeof(a.reserved2)))
		return -EINVAL;

	mutex_lock(&ctx->lock);
	if (ctx->ns) {
		ret = -EBUSY;
		goto out_unlock;
	}

	/* fget_raw(): an O_PATH fd is found too, and refused with -EACCES. */
	file = fget_raw(a.bdev_fd);
	if (!file) {
		ret = -EBADF;
		goto out_unlock;
	}
	if (!S_ISBLK(file_inode(file)->i_mode)) {
		ret = -ENOTBLK;
		goto out_fput;
	}
	if ((file->f_mode & FMODE_PATH) || !(file->f_mode & FMODE_READ)) {
		ret = -EACCES;
		goto out_fput;
	}
	bdev = I_BDEV(file->f_mapping->host);
	ret = kvblk_probe_bdev(file, bdev, &info);
	if (ret)
		goto out_fput;

	start = (u64)get_start_sect(bdev) << SECTOR_SHIFT;
	capacity = (u64)bdev_nr_sectors(bdev) << SECTOR_SHIFT;
	if (!capacity) {
		ret = kvblk_reject(bdev->bd_disk, "empty partition");
		goto out_fput;
	}
	if ((start | capacity) & ((1ULL << info.lba_shift) - 1)) {
		ret = kvblk_reject(bdev->bd_disk, "partition not aligned to the LBA size");
		goto out_fput;
	}

	ret = kvblk_probe_ext_lba(&info, start >> info.lba_shift, bdev->bd_disk);
	if (ret)
		goto out_fput;

	ns = kvblk_ns_get(&info);
	if (IS_ERR(ns)) {
		ret = PTR_ERR(ns);
		goto out_fput;
	}
	max_cmd = kvblk_eff_max_cmd(ns);
	if (!max_cmd) {
		ret = kvblk_reject(bdev->bd_disk, "LBA larger than the command size limit");
		goto out_ns_put;
	}

	a.nsid = info.nsid;
	a.lba_size = 1U << info.lba_shift;
	a.max_cmd_bytes = max_cmd;
	a.capacity = capacity;
	a.start_lba = start >> info.lba_shift;
	a.nr_hw_queues = info.nr_hw_queues;
	a.engine = KVBLK_ENGINE_PRP;
	ret = kvblk_copy_out(uarg, &a, sizeof(a), usize);
	if (ret)
		goto out_ns_put;

	ctx->bdev_file = file;
	ctx->start_bytes = start;
	ctx->capacity = capacity;
	ctx->max_cmd_bytes = max_cmd;
	/* Publish last: readers use kvblk_ctx_ns() without the lock. */
	smp_store_release(&ctx->ns, ns);
	mutex_unlock(&ctx->lock);
	return 0;

out_ns_put:
	kvblk_ns_put(ns);
out_fput:
	fput(file);
out_unlock:
	mutex_unlock(&ctx->lock);
	return ret;
}

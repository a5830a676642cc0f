// SPDX-License-Identifier: GPL-2.0
/*
 * attach.c - KVBLK_IOC_ATTACH: add a target, given as an fd the caller
 * opened for reading, to a context (its first, or with
 * KVBLK_ATTACH_F_ADD_TARGET one more, up to KVBLK_CTX_MAX_TARGETS), and
 * choose the target's engines (engine.h):
 *
 *   regular file                     file engine (direct I/O kiocbs)
 *   block device, KVBLK_ATTACH_F_ENGINE_BIO
 *                                    block-layer engine (bios) only
 *   block device, KVBLK_ATTACH_F_ENGINE_PRP
 *                                    PRP engine for all memory, or
 *                                    -EOPNOTSUPP
 *   nvme-pci namespace or partition  block-layer engine; and the PRP
 *                                    engine for memory without struct
 *                                    pages when its checks pass and the
 *                                    context's page-less memory is (to be)
 *                                    mapped for its PCI function
 *   any other block device           block-layer engine
 *
 * Rights follow the fd: it must allow reads (FMODE_READ, not O_PATH), and
 * every load reads only what a pread() on it could.
 */
#include <linux/blkdev.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/log2.h>

#include "engine.h"
#include "kvblk.h"

/**
 * kvblk_reject() - refuse an attach with a kernel log line.
 * @disk: the disk.
 * @why: the reason.
 *
 * Return: -EOPNOTSUPP.
 */
int kvblk_reject(struct gendisk *disk, const char *why)
{
	pr_info_ratelimited("attach %s: %s\n", disk->disk_name, why);
	return -EOPNOTSUPP;
}

/* Identity and limits of a disk for the block-layer engines. */
static void kvblk_blk_info(struct block_device *bdev, struct kvblk_ns_info *info)
{
	struct request_queue *q = bdev_get_queue(bdev);

	memset(info, 0, sizeof(*info));
	info->disk = bdev->bd_disk;
	info->q = q;
	info->devt = disk_devt(bdev->bd_disk);
	info->lba_shift = ilog2(bdev_logical_block_size(bdev));
	info->hw_max_bytes = min_t(u64, (u64)queue_max_hw_sectors(q) << SECTOR_SHIFT,
				   U32_MAX);
	info->nr_hw_queues = queue_is_mq(q) ? q->nr_hw_queues : 0;
}

/*
 * Can the file system do direct I/O on this file? FMODE_CAN_ODIRECT, set at
 * open (a macro in 6.1, 6.12 and 7.2: tested by name, not by version;
 * kernels without it say so through a_ops->direct_IO).
 */
static bool kvblk_file_can_odirect(struct file *file)
{
#ifdef FMODE_CAN_ODIRECT
	return file->f_mode & FMODE_CAN_ODIRECT;
#else
	return file->f_mapping->a_ops && file->f_mapping->a_ops->direct_IO;
#endif
}

/* What attach finds out about a target before it is added. */
struct kvblk_target {
	const struct kvblk_engine_ops *engine;
	const struct kvblk_engine_ops *alt;	/* PRP for page-less memory */
	struct kvblk_ns_info info;
	u64 start;		/* partition start on the disk, bytes */
	u64 capacity;		/* bytes */
};

/*
 * May the caller have the PRP engine on @bdev? Its commands address the
 * whole namespace and kvblk's arithmetic keeps them inside a partition, so
 * on a partition it takes CAP_SYS_ADMIN, as the nvme driver's own
 * passthrough does since 6.2 (nvme_cmd_allowed(): "Passthrough commands
 * can always access the entire device"; review M3). A whole namespace
 * needs only the fd's read access, as there.
 */
static bool kvblk_prp_allowed(struct block_device *bdev)
{
	return !bdev_is_partition(bdev) || capable(CAP_SYS_ADMIN);
}

static int kvblk_attach_file(struct file *file, u32 flags,
			     struct kvblk_target *t)
{
	struct super_block *sb = file_inode(file)->i_sb;

	if (flags & KVBLK_ATTACH_F_ENGINE_PRP)
		return -EOPNOTSUPP;	/* NVMe commands address namespaces */
	if (!sb->s_bdev || !file->f_op->read_iter || !kvblk_file_can_odirect(file)) {
		pr_info_ratelimited("attach: %pD: the file system has no block device or no direct I/O\n",
				    file);
		return -EOPNOTSUPP;
	}
	kvblk_blk_info(sb->s_bdev, &t->info);
	t->engine = &kvblk_engine_file;
	t->start = 0;
	t->capacity = i_size_read(file_inode(file));
	return 0;
}

/*
 * Can the PRP engine serve, on @dma_dev, the memory of @ctx it would serve:
 * page-less memory only (@all false), or all of it (@all,
 * KVBLK_ATTACH_F_ENGINE_PRP)? Memory is mapped for one PCI function per
 * context, the first PRP-capable target's; host memory only once a target
 * attached with KVBLK_ATTACH_F_ENGINE_PRP asked for it, so host buffers
 * registered before that are not mapped.
 */
static bool kvblk_ctx_maps_for(struct kvblk_ctx *ctx, struct device *dma_dev,
			       bool all)
{
	struct kvblk_buf *buf;
	unsigned long id;

	if (ctx->dma_dev && ctx->dma_dev != dma_dev)
		return false;
	if (!all || ctx->map_host)
		return true;
	xa_for_each(&ctx->bufs, id, buf)
		if (!buf->dev)
			return false;	/* host memory, pinned only */
	return true;
}

/*
 * The engines of a block device target, found without the context's lock
 * (the PRP engine's probe issues Reads and waits for them): what depends
 * on the context is checked by kvblk_attach_ctx() under it.
 */
static int kvblk_attach_bdev(struct file *file, u32 flags,
			     struct kvblk_target *t)
{
	struct block_device *bdev = I_BDEV(file->f_mapping->host);
	struct kvblk_ns_info prp;
	int ret;

	t->start = (u64)get_start_sect(bdev) << SECTOR_SHIFT;
	t->capacity = (u64)bdev_nr_sectors(bdev) << SECTOR_SHIFT;
	if (kvblk_disk_dead(bdev->bd_disk, bdev_get_queue(bdev)))
		return kvblk_reject(bdev->bd_disk, "disk is being removed");
	if (!t->capacity)
		return kvblk_reject(bdev->bd_disk, "empty device or partition");

	if (flags & KVBLK_ATTACH_F_ENGINE_PRP) {
		if (!kvblk_prp_allowed(bdev)) {
			pr_info_ratelimited("attach %s: the PRP engine on a partition needs CAP_SYS_ADMIN (NVMe commands address the whole namespace)\n",
					    bdev->bd_disk->disk_name);
			return -EPERM;
		}
		ret = kvblk_prp_probe(file, bdev, &t->info);
		if (ret)
			return ret;
		t->engine = &kvblk_engine_prp;
		return 0;
	}

	kvblk_blk_info(bdev, &t->info);
	if ((t->start | t->capacity) & ((1ULL << t->info.lba_shift) - 1))
		return kvblk_reject(bdev->bd_disk,
				    "partition not aligned to the logical block size");
	t->engine = &kvblk_engine_bio;
	if ((flags & KVBLK_ATTACH_F_ENGINE_BIO) ||
	    !kvblk_prp_capable(bdev->bd_disk))
		return 0;
	if (!kvblk_prp_allowed(bdev)) {
		pr_info_ratelimited("attach %s: block-layer engine only: the PRP engine (memory without struct pages) on a partition needs CAP_SYS_ADMIN\n",
				    bdev->bd_disk->disk_name);
		return 0;
	}
	/*
	 * An nvme-pci namespace: the PRP engine serves its memory without
	 * struct pages, if its checks pass (else the block-layer engine
	 * alone: the kernel log names the reason).
	 */
	ret = kvblk_prp_probe(file, bdev, &prp);
	if (ret == -ENOMEM || ret == -EINTR)
		return ret;
	if (ret)
		return 0;
	t->alt = &kvblk_engine_prp;
	t->info.dma_dev = prp.dma_dev;
	t->info.nsid = prp.nsid;
	return 0;
}

/*
 * What depends on the context, under its lock: memory is mapped for one
 * PCI function per context (kvblk_ctx_maps_for()).
 */
static int kvblk_attach_ctx(struct kvblk_ctx *ctx, struct kvblk_target *t)
{
	struct gendisk *disk = t->info.disk;

	if (t->engine == &kvblk_engine_prp &&
	    !kvblk_ctx_maps_for(ctx, t->info.dma_dev, true)) {
		pr_info_ratelimited("attach %s: the context's buffers are not mapped for the PCI function the PRP engine needs here\n",
				    disk->disk_name);
		return -EXDEV;
	}
	if (t->alt && !kvblk_ctx_maps_for(ctx, t->info.dma_dev, false)) {
		pr_info_ratelimited("attach %s: block-layer engine only: the context's memory without struct pages is mapped for another PCI function\n",
				    disk->disk_name);
		t->alt = NULL;
		t->info.dma_dev = NULL;
		t->info.nsid = 0;
	}
	return 0;
}

/*
 * The target behind @file: its engine, its disk and its window. Errors as
 * documented for struct kvblk_attach.
 */
static int kvblk_attach_target(struct file *file, u32 flags,
			       struct kvblk_target *t)
{
	umode_t mode = file_inode(file)->i_mode;

	if (S_ISDIR(mode))
		return -EISDIR;
	if (!S_ISBLK(mode) && !S_ISREG(mode))
		return -ENOTBLK;	/* pipes, sockets, character devices */
	if ((file->f_mode & FMODE_PATH) || !(file->f_mode & FMODE_READ))
		return -EACCES;
	if (S_ISREG(mode))
		return kvblk_attach_file(file, flags, t);
	return kvblk_attach_bdev(file, flags, t);
}

/* Can the context take one more target? Under its lock. */
static int kvblk_attach_room(struct kvblk_ctx *ctx, u32 flags)
{
	if (ctx->nr_tgts && !(flags & KVBLK_ATTACH_F_ADD_TARGET))
		return -EBUSY;
	if (ctx->nr_tgts >= KVBLK_CTX_MAX_TARGETS)
		return -ENOSPC;
	return 0;
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
	struct kvblk_target t;
	struct kvblk_tgt *tgt;
	struct kvblk_ns *ns;
	struct file *file;
	u32 usize, max_cmd, lba;
	long ret;

	ret = kvblk_copy_in(&a, sizeof(a), uarg, KVBLK_ATTACH_SIZE_VER0, &usize);
	if (ret)
		return ret;
	if ((a.flags & ~KVBLK_ATTACH_F_ALL) || a.reserved ||
	    memchr_inv(a.reserved2, 0, sizeof(a.reserved2)) || a.reserved3 ||
	    a.reserved4 || a.reserved5)
		return -EINVAL;
	if ((a.flags & KVBLK_ATTACH_F_ENGINE_BIO) &&
	    (a.flags & KVBLK_ATTACH_F_ENGINE_PRP))
		return -EINVAL;
	/* Adding a target: the caller must be able to read its index. */
	if ((a.flags & KVBLK_ATTACH_F_ADD_TARGET) &&
	    usize < KVBLK_ATTACH_SIZE_VER2)
		return -EINVAL;

	/* Cheap checks first; checked again under the lock below. */
	mutex_lock(&ctx->lock);
	ret = kvblk_attach_room(ctx, a.flags);
	mutex_unlock(&ctx->lock);
	if (ret)
		return ret;
	/* Resident before the lock: written back there without faults. */
	if (kvblk_copy_out(uarg, &a, sizeof(a), usize))
		return -EFAULT;

	/* fget_raw(): an O_PATH fd is found too, and refused with -EACCES. */
	file = fget_raw(a.bdev_fd);
	if (!file)
		return -EBADF;
	/*
	 * Without the context's lock: the PRP engine's probe issues Reads
	 * and waits for them (a queue frozen for a reset can take long), and
	 * the context's other threads need not wait for that (review-2 N8).
	 */
	memset(&t, 0, sizeof(t));
	ret = kvblk_attach_target(file, a.flags, &t);
	if (ret)
		goto out_fput;
	tgt = kzalloc(sizeof(*tgt), GFP_KERNEL_ACCOUNT);
	if (!tgt) {
		ret = -ENOMEM;
		goto out_fput;
	}

	mutex_lock(&ctx->lock);
	ret = kvblk_attach_room(ctx, a.flags);
	if (!ret)
		ret = kvblk_attach_ctx(ctx, &t);
	if (ret)
		goto out_free_tgt;
	ns = kvblk_ns_get(&t.info, kvblk_engine_mask(t.engine, t.alt));
	if (IS_ERR(ns) && PTR_ERR(ns) == -ENODEV && t.alt) {
		/* Its PCI function is going away: the block layer alone. */
		t.alt = NULL;
		ns = kvblk_ns_get(&t.info, kvblk_engine_mask(t.engine, t.alt));
	}
	if (IS_ERR(ns)) {
		ret = PTR_ERR(ns);
		goto out_free_tgt;
	}
	lba = 1U << t.info.lba_shift;
	if (t.engine == &kvblk_engine_prp || t.alt == &kvblk_engine_prp)
		tgt->prp_max_cmd_bytes = kvblk_prp_max_cmd(ns, &t.info);
	if (t.engine == &kvblk_engine_prp)
		max_cmd = tgt->prp_max_cmd_bytes;
	else
		max_cmd = round_down(READ_ONCE(ns->max_cmd_bytes), lba);
	if (!max_cmd || (t.alt && !tgt->prp_max_cmd_bytes)) {
		ret = kvblk_reject(t.info.disk, "logical block larger than the command size limit");
		goto out_ns_put;
	}

	tgt->ns = ns;
	tgt->engine = t.engine;
	tgt->alt = t.alt;
	tgt->file = file;
	tgt->index = ctx->nr_tgts;
	tgt->start_bytes = t.start;
	tgt->capacity = t.capacity;
	tgt->max_cmd_bytes = max_cmd;
	tgt->lba_shift = t.info.lba_shift;
	ret = xa_insert(&ctx->tgts, tgt->index, tgt, GFP_KERNEL_ACCOUNT);
	if (ret)
		goto out_ns_put;

	a.nsid = t.info.nsid;
	a.lba_size = lba;
	a.max_cmd_bytes = max_cmd;
	a.capacity = t.capacity;
	a.start_lba = t.start >> t.info.lba_shift;
	a.nr_hw_queues = t.info.nr_hw_queues;
	a.engine = t.engine->id;
	a.engines = kvblk_engine_mask(t.engine, t.alt);
	a.buf_align = t.engine == &kvblk_engine_prp ? 4 :
		      t.engine == &kvblk_engine_file ?
		      max_t(u32, lba, queue_dma_alignment(t.info.q) + 1) :
		      max_t(u32, 4, queue_dma_alignment(t.info.q) + 1);
	a.target = tgt->index;
	ret = kvblk_copy_out_locked(uarg, &a, sizeof(a), usize);
	if (ret) {
		xa_erase(&ctx->tgts, tgt->index);
		goto out_ns_put;
	}

	/*
	 * Memory without struct pages registered from now on is mapped for
	 * its PCI function; host memory too once the PRP engine serves all.
	 */
	if ((t.engine->dma_mapped || t.alt) && !ctx->dma_dev) {
		ctx->dma_dev = ns->info.dma_dev;
		ctx->dma_ns = ns;
	}
	if (t.engine->dma_mapped)
		ctx->map_host = true;
	ctx->nr_tgts++;
	if (!tgt->index) {
		/* Publish last: kvblk_ctx_ns() reads it without the lock. */
		smp_store_release(&ctx->ns, ns);
	}
	mutex_unlock(&ctx->lock);
	return 0;

out_ns_put:
	kvblk_ns_put(ns, kvblk_engine_mask(t.engine, t.alt));
out_free_tgt:
	mutex_unlock(&ctx->lock);
	kfree(tgt);
out_fput:
	fput(file);
	return ret;
}

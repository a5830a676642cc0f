// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk dma-buf destinations (KVBLK_MEM_DMABUF).
 *
 * A registration names a dma-buf fd and a byte range of it. kvblk imports
 * it as a dynamic importer that accepts peer-to-peer addresses (GPU or
 * other device memory without struct pages), pins it so that the exporter
 * does not move it, maps it for the namespace's NVMe PCI function, waits
 * for the exporter's pending kernel work (moves, clears) and builds the
 * buffer's segment table from the DMA addresses alone: an exporter may
 * hand out tables without pages (7.2 with CONFIG_DMABUF_DEBUG removes
 * them on purpose). The shape is that of the RDMA pinned importer,
 * ib_umem_dmabuf_get_pinned() in the RDMA core (drivers/infiniband/core/,
 * umem_dmabuf).
 *
 * Locking follows the convention 7.2 enforces and 6.1 already accepts:
 * attach, detach, get and put without the dma-buf's reservation lock;
 * pin, unpin, map and unmap with it held (dma_buf_map_attachment() asserts
 * it for dynamic attachments in 6.1, for every attachment in 7.2).
 *
 * The mapping is made DMA_BIDIRECTIONAL, like the RDMA importer's, and
 * like the mapping 6.1's dma_buf_dynamic_attach() makes and caches itself
 * when the exporter is not dynamic (nvidia's has no pin): the controller
 * writes only part of the range, and the bytes around the objects must
 * stay what they were, also through a bounce buffer.
 *
 * No CPU syncs (need_sync stays false): the addresses belong to the
 * exporter's mapping, and CPU access to a dma-buf goes through its
 * exporter (DMA_BUF_IOCTL_SYNC, dma_buf_begin_cpu_access()).
 *
 * Revocation. Pinned memory is not moved (include/linux/dma-buf.h, 6.1,
 * dma_buf_ops.pin: "the DMA-buf can't be moved any more"), so a
 * notification on a pinned attachment means the exporter takes its
 * memory back: a device being removed or reset, VFIO's revoke (7.x).
 * The notification is .move_notify in 6.1 and 6.12 and
 * .invalidate_mappings in 7.2, called with the reservation lock held.
 * 7.2 documents what the exporter may assume
 * (drivers/dma-buf/dma-buf.c, kernel-doc of dma_buf_invalidate_mappings()
 * and dma_buf_attach_revocable()): after the callback returns the importer
 * may still write until the fences it added to the reservation object
 * signal, and may read until it unmaps, which a revocable importer must do
 * within bounded time; and (struct dma_buf, "DYNAMIC IMPORTER RULES")
 * importers set fences for any access they cannot disable from the
 * callback. kvblk adds no fences (NVMe commands are not dma fences), so
 * it disables all access before it returns, as the revocable RDMA
 * importer does: 7.x ib_umem_dmabuf_revoke_locked() (RDMA core) unmaps
 * and unpins inside the callback, and the mlx5 driver's callback,
 * mlx5_ib_dmabuf_invalidate_cb() (6.1 drivers/infiniband/hw/mlx5/mr.c),
 * sleeps there until the device stopped using the mapping (a UMR work
 * request it waits for) and then unmaps:
 *
 *  1. kvblk_buf_revoke(): no new command targets the buffer (its objects
 *     fail with -ENODEV), and the callback sleeps until the commands that
 *     do have completed. Completions never take the reservation lock, and
 *     the nvme driver completes or cancels every command within its I/O
 *     timeout, so the wait is bounded (microseconds to milliseconds when
 *     the controller is healthy).
 *  2. Unmap and unpin, still under the lock the exporter holds.
 *
 * When the callback returns, no command writes into the memory and kvblk
 * holds no mapping of it: the exporter may reuse it at once, even without
 * waiting for fences. The buffer stays registered, dead, until it is
 * unregistered or its context closes; then only detach and put remain.
 *
 * Built only when conftest.sh sets KVBLK_WITH_DMABUF (kmod/Kbuild); kvblk.h
 * has the stub otherwise.
 */
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "kvblk.h"

/*
 * The dma-buf exports are in namespace DMA_BUF. MODULE_IMPORT_NS() takes
 * a token up to 6.12 and a string in 7.2; both expand to this.
 */
MODULE_INFO(import_ns, "DMA_BUF");

#define KVBLK_DMABUF_DIR	DMA_BIDIRECTIONAL

/*
 * Provider state. @dmabuf and @attach are fixed from creation on; @sgt and
 * @pinned change only under the dma-buf's reservation lock.
 */
struct kvblk_mem_dmabuf {
	struct dma_buf *dmabuf;			/* referenced */
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;			/* NULL: not mapped */
	bool pinned;
};

/* Give the mapping and the pin back to the exporter. */
static void kvblk_dmabuf_unmap_locked(struct kvblk_mem_dmabuf *d)
{
	dma_resv_assert_held(d->dmabuf->resv);
	if (d->sgt) {
		dma_buf_unmap_attachment(d->attach, d->sgt, KVBLK_DMABUF_DIR);
		d->sgt = NULL;
	}
	if (d->pinned) {
		dma_buf_unpin(d->attach);
		d->pinned = false;
	}
}

/*
 * The exporter's notification (move_notify / invalidate_mappings), with
 * the reservation lock held: revoke, see the top of this file. Before the
 * mapping exists (creation not past its pin) there is nothing to revoke:
 * creation maps wherever the memory is then. After release's unmap the
 * buffer is going away anyway.
 */
static void kvblk_dmabuf_invalidate(struct dma_buf_attachment *attach)
{
	struct kvblk_buf *buf = attach->importer_priv;
	struct kvblk_mem_dmabuf *d = buf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (!d->sgt)
		return;
	kvblk_buf_revoke(buf);
	kvblk_dmabuf_unmap_locked(d);
	pr_info_ratelimited("dma-buf of exporter %s revoked: buffer %u (%llu bytes) unmapped, loads into it fail with ENODEV\n",
			    attach->dmabuf->exp_name, buf->id, buf->len);
}

static const struct dma_buf_attach_ops kvblk_dmabuf_attach_ops = {
	.allow_peer2peer = true,
#ifdef KVBLK_HAVE_DMA_BUF_OPS_INVALIDATE_MAPPINGS
	.invalidate_mappings = kvblk_dmabuf_invalidate,
#else
	.move_notify = kvblk_dmabuf_invalidate,
#endif
};

static void kvblk_mem_dmabuf_release(struct kvblk_buf *buf)
{
	struct kvblk_mem_dmabuf *d = buf->priv;
	struct dma_buf *dmabuf = d->dmabuf;

	/* Detached already if its PCI function was removed (below). */
	if (d->attach) {
		dma_resv_lock(dmabuf->resv, NULL);
		kvblk_dmabuf_unmap_locked(d);
		dma_resv_unlock(dmabuf->resv);
		/* No notification reaches this attachment after detach. */
		dma_buf_detach(dmabuf, d->attach);
	}
	dma_buf_put(dmabuf);
	kfree(d);
}

/*
 * kvblk_mem_ops.unmap: the NVMe PCI function is being removed. The
 * exporter's mapping was made for it: give it and the pin back now, as a
 * revocation does, and detach, all while the device still exists.
 *
 * The detach is what releases the mapping of an exporter that is not
 * dynamic (no .pin: NVIDIA's nv-dmabuf, udmabuf) on 6.1 and 6.12: there
 * dma_buf_dynamic_attach() maps the buffer itself when the importer and
 * the exporter differ in dynamic-ness and keeps that mapping in the
 * attachment (attach->sgt); dma_buf_unmap_attachment() of it returns at
 * once, and the exporter's unmap_dma_buf runs only in dma_buf_detach().
 * Left to the release (unregister, close), that unmap would run after
 * device_del() released the function from its IOMMU group: the NULL
 * dereference of review finding H1 (review-2 N1). The attachment is then
 * gone; the release only drops the dma-buf.
 */
static void kvblk_mem_dmabuf_unmap(struct kvblk_buf *buf)
{
	struct kvblk_mem_dmabuf *d = buf->priv;

	dma_resv_lock(d->dmabuf->resv, NULL);
	kvblk_buf_revoke(buf);
	kvblk_dmabuf_unmap_locked(d);
	dma_resv_unlock(d->dmabuf->resv);
	/* No notification reaches this attachment after detach. */
	dma_buf_detach(d->dmabuf, d->attach);
	d->attach = NULL;
}

static const struct kvblk_mem_ops kvblk_mem_dmabuf_ops = {
	.name = "dmabuf",
	.release = kvblk_mem_dmabuf_release,
	.unmap = kvblk_mem_dmabuf_unmap,
};

/*
 * Pin, map, wait for the exporter's kernel fences and build the segments,
 * all under the reservation lock, so that a notification sees either no
 * mapping or the finished buffer.
 */
static int kvblk_dmabuf_map(struct kvblk_buf *buf, u64 offset)
{
	struct kvblk_mem_dmabuf *d = buf->priv;
	struct dma_resv *resv = d->dmabuf->resv;
	struct sg_table *sgt;
	long t;
	int ret;

	dma_resv_lock(resv, NULL);
	ret = dma_buf_pin(d->attach);
	if (ret)
		goto out_unlock;
	d->pinned = true;
	sgt = dma_buf_map_attachment(d->attach, KVBLK_DMABUF_DIR);
	if (IS_ERR_OR_NULL(sgt)) {
		ret = sgt ? PTR_ERR(sgt) : -ENOMEM;
		goto out_unmap;
	}
	d->sgt = sgt;
	/* The memory may still be in motion (a move or clear in flight). */
	t = dma_resv_wait_timeout(resv, DMA_RESV_USAGE_KERNEL, true,
				  MAX_SCHEDULE_TIMEOUT);
	if (t <= 0) {
		ret = t ? t : -ETIMEDOUT;
		goto out_unmap;
	}
	ret = kvblk_buf_segs_from_sgt(buf, sgt, offset);
	if (ret)
		goto out_unmap;
	dma_resv_unlock(resv);
	return 0;

out_unmap:
	kvblk_dmabuf_unmap_locked(d);
out_unlock:
	dma_resv_unlock(resv);
	return ret;
}

/**
 * kvblk_mem_dmabuf_create() - import, pin and map a range of a dma-buf.
 * @dev: the NVMe controller's DMA device.
 * @r: the request: @r->dmabuf_fd, @r->addr (byte offset in the dma-buf)
 *     and @r->len, both page aligned (checked by the caller).
 *
 * Return: the buffer, or ERR_PTR: -EBADF @r->dmabuf_fd is not an open fd
 * or not a dma-buf; -EACCES the dma-buf was exported without write access;
 * -EINVAL the range reaches past the dma-buf's size;
 * -EOPNOTSUPP a DMA segment of the exporter's mapping is not 4 KiB aligned
 * (the kernel log shows it); -EIO the mapping is shorter than the dma-buf;
 * -ERESTARTSYS a signal arrived while waiting for the exporter's pending
 * moves; -ENOMEM; or what the exporter's attach, pin or map returned (for
 * instance -ENODEV for revoked memory, -EOPNOTSUPP for a device or a
 * peer-to-peer path it refuses).
 */
struct kvblk_buf *kvblk_mem_dmabuf_create(struct device *dev,
					  const struct kvblk_buf_reg *r)
{
	struct kvblk_mem_dmabuf *d;
	struct dma_buf *dmabuf;
	struct kvblk_buf *buf;
	int ret;

	/* -EBADF: no such fd; -EINVAL: an fd, but not a dma-buf. */
	dmabuf = dma_buf_get(r->dmabuf_fd);
	if (IS_ERR(dmabuf))
		return ERR_PTR(-EBADF);
	/*
	 * The controller writes into it: the exporter must have granted write
	 * access (dma_buf_export() with O_RDWR; a PRIME export without DRM_RDWR
	 * is read-only).
	 */
	if (!(dmabuf->file->f_mode & FMODE_WRITE)) {
		ret = -EACCES;
		goto out_put;
	}
	if (r->addr > dmabuf->size || r->len > dmabuf->size - r->addr) {
		ret = -EINVAL;
		goto out_put;
	}

	d = kzalloc(sizeof(*d), GFP_KERNEL_ACCOUNT);
	if (!d) {
		ret = -ENOMEM;
		goto out_put;
	}
	d->dmabuf = dmabuf;
	buf = kvblk_buf_alloc(dev, KVBLK_MEM_DMABUF, r->len,
			      &kvblk_mem_dmabuf_ops);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto out_free;
	}
	buf->priv = d;
	buf->revocable = true;

	d->attach = dma_buf_dynamic_attach(dmabuf, dev, &kvblk_dmabuf_attach_ops,
					   buf);
	if (IS_ERR(d->attach)) {
		ret = PTR_ERR(d->attach);
		goto out_abort;
	}
	ret = kvblk_dmabuf_map(buf, r->addr);
	if (ret)
		goto out_detach;
	return buf;

out_detach:
	dma_buf_detach(dmabuf, d->attach);
out_abort:
	kvblk_buf_abort(buf);
out_free:
	kfree(d);
out_put:
	if (ret != -EINVAL && ret != -ENOMEM && ret != -ERESTARTSYS)
		pr_info_ratelimited("register: %s[%d]: dma-buf of exporter %s: import failed (%d)\n",
				    current->comm, task_pid_nr(current),
				    dmabuf->exp_name, ret);
	dma_buf_put(dmabuf);
	return ERR_PTR(ret);
}

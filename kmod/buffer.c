// SPDX-License-Identifier: GPL-2.0
/*
 * buffer.c - KVBLK_IOC_REGISTER_BUFFER / KVBLK_IOC_UNREGISTER_BUFFER and
 * what every destination kind shares.
 *
 * A provider per memory kind (mem_host.c, ...) pins or imports the memory
 * and maps it for the namespace's NVMe PCI function; this file turns the
 * mapping into a table of DMA segments, the one form every kind becomes and
 * the PRP builder reads, owns the buffer's lifetime (a kref: the context's
 * id table and every batch that targets it hold one) and fences revocable
 * memory against in-flight commands.
 */
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "engine.h"
#include "kvblk.h"

/**
 * kvblk_buf_alloc() - a new buffer with no segments yet.
 * @dev: the DMA device the memory is (to be) mapped for; referenced.
 * @kind: enum kvblk_mem_kind.
 * @len: bytes.
 * @ops: the provider; @ops->release runs when the last reference goes.
 *
 * The provider sets ->priv and builds the segments
 * (kvblk_buf_segs_from_sgt() or kvblk_buf_segs_from_addrs()); on failure
 * before returning the buffer it calls kvblk_buf_abort() and undoes its own
 * work itself.
 *
 * Return: the buffer (one reference) or ERR_PTR(-ENOMEM).
 */
struct kvblk_buf *kvblk_buf_alloc(struct device *dev, u32 kind, u64 len,
				  const struct kvblk_mem_ops *ops)
{
	struct kvblk_buf *buf;

	buf = kzalloc(sizeof(*buf), GFP_KERNEL_ACCOUNT);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	kref_init(&buf->ref);
	atomic_set(&buf->inflight, 0);
	buf->kind = kind;
	buf->len = len;
	buf->ops = ops;
	buf->dev = get_device(dev);
	spin_lock_init(&buf->dma_lock);
	init_waitqueue_head(&buf->dma_wq);
	INIT_LIST_HEAD(&buf->dma_node);
	return buf;
}

/**
 * kvblk_buf_abort() - free a buffer whose creation failed.
 * @buf: from kvblk_buf_alloc(), never handed out.
 *
 * Does not call ->release: the provider undoes its own work.
 */
void kvblk_buf_abort(struct kvblk_buf *buf)
{
	kvfree(buf->segs);
	put_device(buf->dev);
	kfree(buf);
}

static void kvblk_buf_free(struct kref *ref)
{
	struct kvblk_buf *buf = container_of(ref, struct kvblk_buf, ref);

	/* Not while its device's removal unmaps it (removal.c). */
	kvblk_dma_buf_lock(buf);
	buf->ops->release(buf);
	kvblk_dma_buf_unlock(buf);
	kvblk_buf_abort(buf);
}

/* Append [a, a + len) to the table, merging with a contiguous predecessor. */
static int kvblk_buf_add_seg(struct kvblk_buf *buf, dma_addr_t a, u64 len,
			     u64 *off)
{
	struct kvblk_dma_seg *prev = buf->nr_segs ? &buf->segs[buf->nr_segs - 1] : NULL;

	/* Every PRP entry after the first must start a 4 KiB page. */
	if ((a | len) & (KVBLK_CTRL_PAGE_SIZE - 1)) {
		pr_warn_ratelimited("register: %s: DMA segment %pad+%llu not 4 KiB aligned\n",
				    buf->ops->name, &a, len);
		return -EOPNOTSUPP;
	}
	if (prev && prev->addr + prev->len == a) {
		prev->len += len;
	} else {
		buf->segs[buf->nr_segs].addr = a;
		buf->segs[buf->nr_segs].off = *off;
		buf->segs[buf->nr_segs].len = len;
		buf->nr_segs++;
	}
	*off += len;
	return 0;
}

/**
 * kvblk_buf_segs_from_sgts() - segment table from DMA-mapped sg_tables.
 * @buf: buffer without segments; its first @buf->len bytes are described.
 * @sgts: @nr mapped tables, in buffer order; only sg_dma_address() and
 *        sg_dma_len() are read (a dma-buf exporter may hand out tables
 *        without pages).
 * @nr: tables.
 * @skip: bytes of the mapping before the buffer's first byte (a dma-buf
 *        registration's offset).
 *
 * Return: 0; -EOPNOTSUPP a segment the PRP rules cannot describe (not 4 KiB
 * aligned: the kernel log shows it); -EIO the mapping ends before @skip +
 * @buf->len; -ENOMEM.
 */
int kvblk_buf_segs_from_sgts(struct kvblk_buf *buf, struct sg_table *sgts,
			     unsigned int nr, u64 skip)
{
	unsigned int nents = 0, t, i;
	struct scatterlist *sg;
	u64 off = 0;
	int ret;

	for (t = 0; t < nr; t++)
		nents += sgts[t].nents;
	buf->segs = kvmalloc_array(max(nents, 1U), sizeof(*buf->segs),
				   GFP_KERNEL_ACCOUNT);
	if (!buf->segs)
		return -ENOMEM;
	for (t = 0; t < nr && off < buf->len; t++) {
		for_each_sgtable_dma_sg(&sgts[t], sg, i) {
			dma_addr_t a = sg_dma_address(sg);
			u64 len = sg_dma_len(sg);

			if (off == buf->len)
				break;
			if (skip >= len) {
				skip -= len;
				continue;
			}
			a += skip;
			len -= skip;
			skip = 0;
			len = min(len, buf->len - off);
			ret = kvblk_buf_add_seg(buf, a, len, &off);
			if (ret)
				return ret;
		}
	}
	return off == buf->len ? 0 : -EIO;
}

/**
 * kvblk_buf_segs_from_sgt() - segment table from one DMA-mapped sg_table.
 * @buf: buffer without segments.
 * @sgt: mapped table.
 * @skip: bytes of the mapping before the buffer's first byte.
 *
 * kvblk_buf_segs_from_sgts() with one table.
 *
 * Return: as kvblk_buf_segs_from_sgts().
 */
int kvblk_buf_segs_from_sgt(struct kvblk_buf *buf, struct sg_table *sgt,
			    u64 skip)
{
	return kvblk_buf_segs_from_sgts(buf, sgt, 1, skip);
}

/**
 * kvblk_buf_segs_from_addrs() - segment table from equal-sized DMA chunks.
 * @buf: buffer without segments.
 * @addrs: @nr DMA addresses, each the start of @chunk bytes (the
 *         dma_addresses[] of an nvidia-p2p mapping: 64 KiB GPU pages).
 * @nr: entries; @nr * @chunk must cover @buf->len.
 * @chunk: bytes per entry, a multiple of 4 KiB.
 *
 * Return: 0; -EOPNOTSUPP an address not 4 KiB aligned; -EIO @nr * @chunk
 * is below @buf->len; -ENOMEM.
 */
int kvblk_buf_segs_from_addrs(struct kvblk_buf *buf, const dma_addr_t *addrs,
			      unsigned int nr, u64 chunk)
{
	unsigned int i;
	u64 off = 0;
	int ret;

	if ((u64)nr * chunk < buf->len)
		return -EIO;
	buf->segs = kvmalloc_array(max(nr, 1U), sizeof(*buf->segs),
				   GFP_KERNEL_ACCOUNT);
	if (!buf->segs)
		return -ENOMEM;
	for (i = 0; i < nr && off < buf->len; i++) {
		ret = kvblk_buf_add_seg(buf, addrs[i],
					min(chunk, buf->len - off), &off);
		if (ret)
			return ret;
	}
	return 0;
}

/**
 * kvblk_buf_put() - drop a reference on a buffer.
 * @buf: buffer.
 *
 * Context: process context; the last reference unmaps and unpins (sleeps).
 */
void kvblk_buf_put(struct kvblk_buf *buf)
{
	kref_put(&buf->ref, kvblk_buf_free);
}

/**
 * kvblk_buf_seg() - the DMA segment holding a byte of a buffer.
 * @buf: buffer.
 * @off: byte offset, below buf->len.
 *
 * Return: index of the last segment that starts at or before @off.
 */
unsigned int kvblk_buf_seg(const struct kvblk_buf *buf, u64 off)
{
	unsigned int lo = 0, hi = buf->nr_segs;

	while (hi - lo > 1) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (buf->segs[mid].off <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/**
 * kvblk_buf_sync() - hand a byte range to the device or back to the CPU.
 * @buf: buffer.
 * @off: byte offset in the buffer.
 * @len: bytes.
 * @for_cpu: true after the device wrote the range, false before.
 *
 * A no-op unless the mapping needs syncs (swiotlb bouncing, non-coherent
 * DMA). Only the range is synced, so bytes outside it are never touched.
 * A DMA segment can merge pages that are not physically contiguous (an
 * IOMMU maps them to one IOVA range), and the sync calls translate only the
 * start address, so the range is synced page by page: within one CPU page
 * both the bus and the physical addresses are contiguous.
 *
 * Context: process context; may sleep. An object can span gigabytes and a
 * batch thousands of commands, and each page's sync can cost: a bounce copy
 * under swiotlb, and with CONFIG_DMA_API_DEBUG a search of the debug hash
 * that grows with the offset into an IOMMU-merged segment (6.1's debug
 * kernel with an IOMMU spent 89 s in one batch's syncs, soft lockups in
 * both directions), so the loop yields between pages.
 */
void kvblk_buf_sync(const struct kvblk_buf *buf, u64 off, u64 len,
		    bool for_cpu)
{
	unsigned int i;

	if (!buf->need_sync || !len)
		return;
	for (i = kvblk_buf_seg(buf, off); i < buf->nr_segs && len; i++) {
		const struct kvblk_dma_seg *s = &buf->segs[i];
		u64 end = min(off + len, s->off + s->len);

		while (off < end) {
			/* The buffer starts page aligned: off's page is a CPU page. */
			u64 n = min_t(u64, end - off,
				      PAGE_SIZE - (off & (PAGE_SIZE - 1)));
			dma_addr_t a = s->addr + (off - s->off);

			if (for_cpu)
				dma_sync_single_for_cpu(buf->dev, a, n,
							DMA_FROM_DEVICE);
			else
				dma_sync_single_for_device(buf->dev, a, n,
							   DMA_FROM_DEVICE);
			off += n;
			len -= n;
			cond_resched();
		}
	}
}

/**
 * kvblk_buf_dma_begin() - a command is about to target the buffer.
 * @buf: buffer.
 *
 * Pairs with kvblk_buf_dma_end() when the command completes. Free for
 * memory that cannot be revoked.
 *
 * Return: 0, or -ENODEV when the buffer was revoked (its memory is gone).
 */
int kvblk_buf_dma_begin(struct kvblk_buf *buf)
{
	int ret = 0;

	if (!buf->revocable)
		return 0;
	spin_lock_irq(&buf->dma_lock);
	if (buf->revoked)
		ret = -ENODEV;
	else
		buf->dma_cmds++;
	spin_unlock_irq(&buf->dma_lock);
	return ret;
}

/**
 * kvblk_buf_dma_end() - a command that targeted the buffer completed.
 * @buf: buffer.
 *
 * Context: any, including the completion's hard interrupt.
 */
void kvblk_buf_dma_end(struct kvblk_buf *buf)
{
	unsigned long flags;

	if (!buf->revocable)
		return;
	spin_lock_irqsave(&buf->dma_lock, flags);
	if (!--buf->dma_cmds && buf->revoked)
		wake_up_all(&buf->dma_wq);
	spin_unlock_irqrestore(&buf->dma_lock, flags);
}

/**
 * kvblk_buf_revoke() - the memory is going away: fence it.
 * @buf: a revocable buffer.
 *
 * Stops new commands into the buffer (they fail with -ENODEV, each failing
 * its own object) and waits until no command targets it, so that the caller
 * may hand the memory back as soon as this returns. Commands complete or
 * are cancelled by the nvme driver's timeout, so the wait is bounded.
 * Idempotent.
 *
 * Context: process context; sleeps. Takes only @buf's own lock, so it may
 * be called from a provider's invalidation callback.
 */
void kvblk_buf_revoke(struct kvblk_buf *buf)
{
	spin_lock_irq(&buf->dma_lock);
	buf->revoked = true;
	spin_unlock_irq(&buf->dma_lock);
	wait_event(buf->dma_wq, !READ_ONCE(buf->dma_cmds));
}

/*
 * Alignment of addr and len per kind: the CPU page, or the 64 KiB GPU page
 * of nvidia-p2p (NVIDIA's GPUDirect RDMA documentation, Kernel API).
 */
static u64 kvblk_mem_align(u32 kind)
{
	return kind == KVBLK_MEM_CUDA ? SZ_64K : PAGE_SIZE;
}

/**
 * kvblk_mem_features() - the KVBLK_FEAT_MEM_* bits this module serves now.
 *
 * Return: a mask of KVBLK_FEAT_MEM_HOST, _CUDA, _DMABUF, _P2PDMA.
 */
u64 kvblk_mem_features(void)
{
	u64 f = KVBLK_FEAT_MEM_HOST;

	if (kvblk_mem_dmabuf_supported())
		f |= KVBLK_FEAT_MEM_DMABUF;
	if (kvblk_mem_cuda_available())
		f |= KVBLK_FEAT_MEM_CUDA;
	if (kvblk_mem_p2pdma_supported())
		f |= KVBLK_FEAT_MEM_P2PDMA;
	return f;
}

static struct kvblk_buf *kvblk_mem_create(struct device *dev,
					  const struct kvblk_buf_reg *r)
{
	switch (r->kind) {
	case KVBLK_MEM_HOST:
		return kvblk_mem_host_create(dev, r);
	case KVBLK_MEM_CUDA:
		return kvblk_mem_cuda_create(dev, r);
	case KVBLK_MEM_DMABUF:
		return kvblk_mem_dmabuf_create(dev, r);
	default:
		pr_info_ratelimited("register: %s[%d]: memory kind %u is not served by this module (see KVBLK_IOC_GET_FEATURES)\n",
				    current->comm, task_pid_nr(current), r->kind);
		return ERR_PTR(-EOPNOTSUPP);
	}
}

/**
 * kvblk_ioctl_register() - KVBLK_IOC_REGISTER_BUFFER.
 * @ctx: context.
 * @uarg: user pointer to struct kvblk_buf_reg.
 *
 * Return: 0; errors as documented for struct kvblk_buf_reg.
 */
long kvblk_ioctl_register(struct kvblk_ctx *ctx, void __user *uarg)
{
	struct kvblk_buf_reg r;
	struct kvblk_buf *buf;
	struct device *dma_dev;
	struct kvblk_ns *ns;
	u32 usize, id;
	u64 align;
	long ret;

	ret = kvblk_copy_in(&r, sizeof(r), uarg, KVBLK_BUF_REG_SIZE_VER0, &usize);
	if (ret)
		return ret;
	if (r.flags || r.reserved || memchr_inv(r.reserved2, 0, sizeof(r.reserved2)))
		return -EINVAL;
	if (r.kind >= KVBLK_MEM_KIND_MAX)
		return -EINVAL;
	if (r.kind != KVBLK_MEM_DMABUF && r.dmabuf_fd)
		return -EINVAL;
	align = kvblk_mem_align(r.kind);
	if (!r.len || r.len > KVBLK_MAX_BUF_BYTES || !IS_ALIGNED(r.addr, align) ||
	    !IS_ALIGNED(r.len, align) || r.addr + r.len < r.addr)
		return -EINVAL;

	ns = kvblk_ctx_ns(ctx);
	if (!ns)
		return -ENXIO;
	/* Resident before the lock: written back there without faults. */
	if (kvblk_copy_out(uarg, &r, sizeof(r), usize))
		return -EFAULT;

	/* Cheap check first; the insert below checks again. */
	mutex_lock(&ctx->lock);
	ret = ctx->nr_bufs >= KVBLK_MAX_BUFS ? -ENOSPC : 0;
	mutex_unlock(&ctx->lock);
	if (ret)
		return ret;

	/*
	 * The PRP engine hands bus addresses to the controller: memory it
	 * serves is DMA-mapped for it now: memory without struct pages
	 * always, host memory only when a target was attached with
	 * KVBLK_ATTACH_F_ENGINE_PRP. The block-layer engines only need pinned
	 * pages (the block layer maps each I/O for whatever device serves
	 * it).
	 */
	/*
	 * P2PDMA pages may also go in bios (checked per batch). Their range
	 * is pinned before the removal's read side is taken, and only mapped
	 * under it (kvblk_mem_p2pdma_create(): review-2 N3).
	 */
	if (r.kind == KVBLK_MEM_P2PDMA) {
		buf = kvblk_mem_p2pdma_create(ctx, &r);
	} else {
		/* The function of the context's first PRP target, unless removed. */
		ret = kvblk_dma_reg_begin(ctx, r.kind == KVBLK_MEM_HOST, &dma_dev);
		if (ret)
			return ret;
		if (!dma_dev && r.kind != KVBLK_MEM_HOST) {
			pr_info_ratelimited("register: %s[%d]: memory kind %u is served by the PRP engine only, and no target of this context has it (attach an nvme-pci namespace without KVBLK_ATTACH_F_ENGINE_BIO)\n",
					    current->comm, task_pid_nr(current), r.kind);
			return -EOPNOTSUPP;
		}
		buf = kvblk_mem_create(dma_dev, &r);
		if (dma_dev)
			kvblk_dma_reg_end(IS_ERR(buf) ? NULL : buf);
	}
	if (IS_ERR(buf))
		return PTR_ERR(buf);

	mutex_lock(&ctx->lock);
	ret = xa_alloc(&ctx->bufs, &id, buf, XA_LIMIT(1, KVBLK_MAX_BUFS),
		       GFP_KERNEL);
	if (ret) {
		mutex_unlock(&ctx->lock);
		ret = ret == -EBUSY ? -ENOSPC : ret;
		goto out_put_buf;
	}
	buf->id = id;
	buf->addr = r.addr;
	ctx->nr_bufs++;
	r.buf_id = id;
	ret = kvblk_copy_out_locked(uarg, &r, sizeof(r), usize);
	if (ret) {
		xa_erase(&ctx->bufs, id);
		ctx->nr_bufs--;
		mutex_unlock(&ctx->lock);
		goto out_put_buf;
	}
	mutex_unlock(&ctx->lock);
	return 0;

out_put_buf:
	kvblk_buf_put(buf);
	return ret;
}

/**
 * kvblk_ioctl_unregister() - KVBLK_IOC_UNREGISTER_BUFFER.
 * @ctx: context.
 * @uarg: user pointer to struct kvblk_buf_unreg.
 *
 * Return: 0; -ENOENT unknown id; -EBUSY a batch targeting it is in flight.
 */
long kvblk_ioctl_unregister(struct kvblk_ctx *ctx, void __user *uarg)
{
	struct kvblk_buf_unreg u;
	struct kvblk_buf *buf;
	u32 usize;
	long ret;

	ret = kvblk_copy_in(&u, sizeof(u), uarg, KVBLK_BUF_UNREG_SIZE_VER0, &usize);
	if (ret)
		return ret;
	if (u.flags || u.reserved)
		return -EINVAL;

	mutex_lock(&ctx->lock);
	buf = xa_load(&ctx->bufs, u.buf_id);
	if (!buf) {
		ret = -ENOENT;
	} else if (atomic_read(&buf->inflight)) {
		ret = -EBUSY;
	} else {
		xa_erase(&ctx->bufs, u.buf_id);
		ctx->nr_bufs--;
	}
	mutex_unlock(&ctx->lock);
	if (!ret)
		kvblk_buf_put(buf);
	return ret;
}

/**
 * kvblk_ioctl_check_buffer() - KVBLK_IOC_CHECK_BUFFER.
 * @ctx: context.
 * @uarg: user pointer to struct kvblk_buf_check.
 *
 * Return: 0 with the state written; errors as documented for struct
 * kvblk_buf_check.
 */
long kvblk_ioctl_check_buffer(struct kvblk_ctx *ctx, void __user *uarg)
{
	struct kvblk_buf_check c;
	struct kvblk_buf *buf;
	u32 usize;
	long ret;

	ret = kvblk_copy_in(&c, sizeof(c), uarg, KVBLK_BUF_CHECK_SIZE_VER0,
			    &usize);
	if (ret)
		return ret;
	if (c.flags || c.reserved[0] || c.reserved[1])
		return -EINVAL;

	mutex_lock(&ctx->lock);
	buf = xa_load(&ctx->bufs, c.buf_id);
	if (buf)
		kref_get(&buf->ref);
	mutex_unlock(&ctx->lock);
	if (!buf)
		return -ENOENT;

	if (buf->ops->check) {
		ret = buf->ops->check(buf);
		c.state = ret == -ESTALE ? KVBLK_BUF_STALE : KVBLK_BUF_INTACT;
		ret = ret == -ESTALE ? 0 : ret;
	} else if (buf->revocable && READ_ONCE(buf->revoked)) {
		c.state = KVBLK_BUF_REVOKED;
	} else {
		c.state = KVBLK_BUF_UNTRACKED;
	}
	kvblk_buf_put(buf);
	if (ret)
		return ret;
	return kvblk_copy_out(uarg, &c, sizeof(c), usize);
}

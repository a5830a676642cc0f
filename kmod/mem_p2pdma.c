// SPDX-License-Identifier: GPL-2.0
/*
 * mem_p2pdma.c - PCI P2PDMA destinations (KVBLK_MEM_P2PDMA).
 *
 * A user mapping of PCI P2PDMA pages: how a device BAR (a GPU's, or an NVMe
 * controller memory buffer published as p2pmem) appears to user space on
 * kernels with CONFIG_PCI_P2PDMA, through the provider's
 * /sys/bus/pci/devices/<bdf>/p2pmem/allocate file. Pages are pinned with
 * FOLL_PCI_P2PDMA (without it GUP refuses P2PDMA pages) and mapped for the
 * NVMe controller with dma_map_sgtable(), whose P2PDMA handling
 * (drivers/pci/p2pdma.c, kernel/dma/direct.c, drivers/iommu/dma-iommu.c)
 * uses the provider's bus address when both devices sit under one PCIe
 * switch, or the CPU physical address through the host bridge where the
 * bridge is known to forward peer-to-peer traffic; for any other pair the
 * mapping fails with -EREMOTEIO. Kernel-apis.md section 6 has the facts.
 *
 * The kernel refuses long-term pins of P2PDMA pages (mm/gup.c: FOLL_LONGTERM
 * together with FOLL_PCI_P2PDMA warns and fails, so that the provider's
 * pages can always be unplugged). So registration only checks the range:
 * it pins it briefly, checks every page is P2PDMA memory and, when the
 * context has an NVMe PCI function to map for (a target with the PRP
 * engine), that the provider and that controller can reach each other, and
 * lets go. Each LOAD_MANY then pins the window its descriptors touch for
 * the batch's lifetime, like an O_DIRECT read into the same memory would
 * (kvblk_mem_ops.bind), and maps it only for objects the PRP engine serves:
 * the block-layer engine puts the pinned pages in bios (on a queue with
 * QUEUE_FLAG_PCI_P2PDMA, such as nvme-pci's when the controller supports
 * it), and the driver maps each request.
 *
 * P2PDMA pages are device memory, not RAM: they are not charged to
 * RLIMIT_MEMLOCK (the provider's pool bounds them) and never dirtied.
 *
 * Built only when conftest.sh sets KVBLK_WITH_P2PDMA (CONFIG_PCI_P2PDMA and
 * FOLL_PCI_P2PDMA; kmod/Kbuild); kvblk.h has the stubs otherwise.
 */
#include <linux/dma-mapping.h>
#include <linux/memremap.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "kvblk.h"

#define KVBLK_GUP_P2PDMA	(FOLL_WRITE | FOLL_PCI_P2PDMA)

#ifndef KVBLK_HAVE_PAGE_PGMAP
static inline struct dev_pagemap *page_pgmap(const struct page *page)
{
	return page->pgmap;
}
#endif

/* A registration: a range of the registering process's address space. */
struct kvblk_p2pdma_range {
	struct mm_struct *mm;		/* mmgrab()ed */
	unsigned long addr;
};

/* One batch's pin and mapping of a window of a registration. */
struct kvblk_p2pdma_pin {
	struct kvblk_buf *parent;	/* referenced, inflight counted */
	struct page **pages;
	unsigned long nr_pages;
	struct sg_table sgt;
};

/*
 * Names the mapping that backs @addr for messages: the p2pmem/allocate
 * file of its provider, whose path holds the provider's PCI address.
 * @dev is NULL for a context whose block layer maps each I/O (no device
 * to map for at registration).
 */
static void kvblk_p2pdma_refused(struct device *dev, unsigned long addr,
				 const char *why)
{
	const char *who = dev ? dev_name(dev) : "the block layer";
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;

	mmap_read_lock(mm);
	vma = find_vma(mm, addr);
	if (vma && vma->vm_start <= addr && vma->vm_file)
		pr_info_ratelimited("register: %s[%d]: p2pdma memory of %pD4 %s %s\n",
				    current->comm, task_pid_nr(current),
				    vma->vm_file, why, who);
	else
		pr_info_ratelimited("register: %s[%d]: p2pdma memory at %#lx %s %s\n",
				    current->comm, task_pid_nr(current), addr,
				    why, who);
	mmap_read_unlock(mm);
}

/* Undo kvblk_p2pdma_map(), if it mapped: under the removal's read side. */
static void kvblk_p2pdma_unmap(struct kvblk_p2pdma_pin *p, struct device *dev)
{
	if (!p->sgt.sgl)
		return;
	dma_unmap_sgtable(dev, &p->sgt, DMA_FROM_DEVICE, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(&p->sgt);		/* p->sgt.sgl = NULL */
}

/* Undo kvblk_p2pdma_pin() and kvblk_p2pdma_map(). */
static void kvblk_p2pdma_unpin(struct kvblk_p2pdma_pin *p, struct device *dev)
{
	kvblk_p2pdma_unmap(p, dev);
	unpin_user_pages(p->pages, p->nr_pages);
	kvfree(p->pages);
}

/*
 * Pin @nr_pages pages at @addr and check that every one is P2PDMA memory
 * of one provider. @dev (the function the window will be mapped for, or
 * NULL) only names it in messages. May fault: called without the
 * removal's read side (review-2 N3).
 */
static int kvblk_p2pdma_pin(struct kvblk_p2pdma_pin *p, struct device *dev,
			    unsigned long addr, unsigned long nr_pages)
{
	struct page *first;
	unsigned long i;
	int ret;

	/*
	 * The first page alone first: a range that is not P2PDMA memory at
	 * all (ordinary anonymous memory, up to 64 GiB) is refused before its
	 * page array is allocated and the whole of it faulted in and pinned
	 * (review L1).
	 */
	ret = kvblk_pin_user(addr, 1, KVBLK_GUP_P2PDMA, &first);
	if (ret)
		return ret;
	ret = is_pci_p2pdma_page(first) ? 0 : -EINVAL;
	unpin_user_page(first);
	if (ret) {
		kvblk_p2pdma_refused(dev, addr, "is not P2PDMA memory; not mapped for");
		return ret;
	}
	p->nr_pages = nr_pages;
	p->pages = kvmalloc_array(nr_pages, sizeof(*p->pages), GFP_KERNEL_ACCOUNT);
	if (!p->pages)
		return -ENOMEM;
	ret = kvblk_pin_user(addr, nr_pages, KVBLK_GUP_P2PDMA, p->pages);
	if (ret)
		goto out_free;
	for (i = 0; i < nr_pages; i++) {
		if (!is_pci_p2pdma_page(p->pages[i])) {
			kvblk_p2pdma_refused(dev, addr + (i << PAGE_SHIFT),
					     "is not P2PDMA memory; not mapped for");
			ret = -EINVAL;
			goto out_unpin;
		}
		/*
		 * One provider per range: a bio (and a request) is mapped by
		 * the P2PDMA rules of its first page's provider (7.x
		 * blk_rq_dma_map_iter_start()), and upstream's bio_add_page()
		 * refuses a page of another (review-2 N7).
		 */
		if (page_pgmap(p->pages[i]) != page_pgmap(p->pages[0])) {
			kvblk_p2pdma_refused(dev, addr + (i << PAGE_SHIFT),
					     "belongs to another P2PDMA provider than the range's first page; not mapped for");
			ret = -EINVAL;
			goto out_unpin;
		}
	}
	return 0;

out_unpin:
	unpin_user_pages(p->pages, nr_pages);
out_free:
	kvfree(p->pages);
	return ret;
}

/*
 * Map the pinned window (at @addr, for messages) for @dev, under the
 * removal's read side (kvblk_dma_map_begin()); names the pair when the
 * kernel refuses to map it.
 */
static int kvblk_p2pdma_map(struct kvblk_p2pdma_pin *p, struct device *dev,
			    unsigned long addr)
{
	int ret = kvblk_map_pages(dev, p->pages, p->nr_pages, &p->sgt);

	if (ret == -EREMOTEIO)
		kvblk_p2pdma_refused(dev, addr,
				     "cannot be reached (the kernel's P2PDMA distance check refuses the pair) by");
	return ret;
}

static void kvblk_p2pdma_pin_release(struct kvblk_buf *buf)
{
	struct kvblk_p2pdma_pin *p = buf->priv;
	struct kvblk_buf *parent = p->parent;

	kvblk_p2pdma_unpin(p, buf->dev);
	kfree(p);
	atomic_dec(&parent->inflight);
	kvblk_buf_put(parent);
}

/*
 * kvblk_mem_ops.unmap: the NVMe PCI function the window was mapped for is
 * going away, the batch's commands completed (the batch itself may be
 * collected much later): drop the mapping now; the pages stay pinned until
 * the batch is released.
 */
static void kvblk_p2pdma_pin_unmap(struct kvblk_buf *buf)
{
	kvblk_p2pdma_unmap(buf->priv, buf->dev);
}

static const struct kvblk_mem_ops kvblk_p2pdma_pin_ops = {
	.name = "p2pdma",
	.release = kvblk_p2pdma_pin_release,
	.unmap = kvblk_p2pdma_pin_unmap,
};

/* kvblk_mem_ops.bind: pin (and with @map, map) one window for one batch. */
static struct kvblk_buf *kvblk_p2pdma_bind(struct kvblk_buf *parent, u64 off,
					   u64 len, bool map)
{
	struct device *dev = map ? parent->dev : NULL;
	struct kvblk_p2pdma_range *range = parent->priv;
	struct kvblk_p2pdma_pin *p;
	struct kvblk_buf *buf;
	int ret;

	/* The range is an address in its registering process only. */
	if (current->mm != range->mm)
		return ERR_PTR(-EFAULT);
	if (!PAGE_ALIGNED(off) || !PAGE_ALIGNED(len) || !len)
		return ERR_PTR(-EINVAL);
	p = kzalloc(sizeof(*p), GFP_KERNEL_ACCOUNT);
	if (!p)
		return ERR_PTR(-ENOMEM);
	if (map && !dev) {
		ret = -EXDEV;	/* mapped for no PCI function */
		goto out_free;
	}
	/*
	 * Pinned first, outside the removal's read side: the pin looks the
	 * pages up as an access would, and a fault on a range the caller
	 * remapped (userfaultfd, FUSE) must not hold up a removal.
	 */
	ret = kvblk_p2pdma_pin(p, parent->dev, range->addr + off, len >> PAGE_SHIFT);
	if (ret)
		goto out_free;
	/*
	 * Mapped for the PCI function under the removal's read side with its
	 * driver bound, and listed (kvblk_dma_reg_end()): the removal unmaps
	 * the window while the function exists, however late the batch is
	 * released (review-2 N3).
	 */
	if (map) {
		ret = kvblk_dma_map_begin(dev);
		if (ret) {
			kvblk_p2pdma_unpin(p, NULL);
			goto out_free;
		}
		ret = kvblk_p2pdma_map(p, dev, range->addr + off);
		if (ret)
			goto out_unpin;
	}
	buf = kvblk_buf_alloc(dev, KVBLK_MEM_P2PDMA, len, &kvblk_p2pdma_pin_ops);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto out_unpin;
	}
	if (map) {
		ret = kvblk_buf_segs_from_sgt(buf, &p->sgt, 0);
		if (ret) {
			kvblk_buf_abort(buf);
			goto out_unpin;
		}
		buf->priv = p;
		kvblk_dma_reg_end(buf);
	}
	buf->pages = p->pages;	/* the block-layer engine's bios */
	kref_get(&parent->ref);
	atomic_inc(&parent->inflight);
	p->parent = parent;
	buf->priv = p;
	buf->id = parent->id;
	return buf;

out_unpin:
	kvblk_p2pdma_unpin(p, dev);
	if (map)
		kvblk_dma_reg_end(NULL);
out_free:
	kfree(p);
	return ERR_PTR(ret);
}

static void kvblk_p2pdma_range_release(struct kvblk_buf *buf)
{
	struct kvblk_p2pdma_range *range = buf->priv;

	mmdrop(range->mm);
	kfree(range);
}

static const struct kvblk_mem_ops kvblk_mem_p2pdma_ops = {
	.name = "p2pdma",
	.release = kvblk_p2pdma_range_release,
	.bind = kvblk_p2pdma_bind,
};

/*
 * The NVMe PCI function @ctx maps registered memory for, or NULL, for
 * messages only: a pin's refusal names it before the removal's read side
 * is taken. Set once by an attach, and referenced through its namespace
 * object for the context's lifetime.
 */
static struct device *kvblk_p2pdma_ctx_dev(struct kvblk_ctx *ctx)
{
	struct device *dev;

	mutex_lock(&ctx->lock);
	dev = ctx->dma_dev;
	mutex_unlock(&ctx->lock);
	return dev;
}

/**
 * kvblk_mem_p2pdma_create() - register a user range of P2PDMA pages.
 * @ctx: the registering context. When it has a target with the PRP engine,
 *       the range is mapped for that target's NVMe PCI function; else only
 *       the block-layer engine can serve the range, on a queue that takes
 *       P2PDMA pages.
 * @r: the request; @r->addr and @r->len are page aligned.
 *
 * Checks the range now (pinned, then mapped once when there is a function
 * to map for, then released); each load pins the window it needs and maps
 * it for the PRP engine. The range is pinned before the removal's read side
 * is taken (kvblk_dma_reg_begin()) and only mapped and unmapped under it:
 * the pin looks the pages up as an access would, and a range the caller
 * mapped onto memory its own process serves (a userfaultfd range whose
 * faults it handles, a FUSE file) waits in that fault before any page can
 * be found not to be P2PDMA memory; a removal of the function must not wait
 * for it (review-2 N3). The buffer is on the removal's list when returned
 * (kvblk_dma_reg_end()).
 *
 * Return: the buffer, or ERR_PTR: -EFAULT (unmapped range), -EINVAL (a
 * page of the range is not P2PDMA memory, or not of the first page's
 * provider), -ENODEV (the function to map for was removed), -EREMOTEIO
 * (the kernel's P2PDMA check finds no path between the provider and the
 * function; the kernel log names both), -EOPNOTSUPP (a segment the PRP
 * rules cannot describe), -EINTR, -ENOMEM.
 */
struct kvblk_buf *kvblk_mem_p2pdma_create(struct kvblk_ctx *ctx,
					  const struct kvblk_buf_reg *r)
{
	struct kvblk_p2pdma_range *range;
	struct kvblk_p2pdma_pin pin = { };
	struct kvblk_buf *buf;
	struct device *dev;
	int ret;

	ret = kvblk_p2pdma_pin(&pin, kvblk_p2pdma_ctx_dev(ctx), r->addr,
			       r->len >> PAGE_SHIFT);
	if (ret)
		return ERR_PTR(ret);
	/* The function of the context's first PRP target, unless removed. */
	ret = kvblk_dma_reg_begin(ctx, false, &dev);
	if (ret)
		goto out_unpin;
	if (dev) {
		ret = kvblk_p2pdma_map(&pin, dev, r->addr);
		if (ret)
			goto out_end;
	}
	/* The PRP rules hold for every window if they hold for the whole. */
	buf = kvblk_buf_alloc(dev, KVBLK_MEM_P2PDMA, r->len,
			      &kvblk_mem_p2pdma_ops);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto out_unmap;
	}
	ret = dev ? kvblk_buf_segs_from_sgt(buf, &pin.sgt, 0) : 0;
	kvfree(buf->segs);
	buf->segs = NULL;
	buf->nr_segs = 0;
	if (ret)
		goto out_abort;

	range = kzalloc(sizeof(*range), GFP_KERNEL_ACCOUNT);
	if (!range) {
		ret = -ENOMEM;
		goto out_abort;
	}
	range->addr = r->addr;
	range->mm = current->mm;
	mmgrab(range->mm);
	buf->priv = range;
	kvblk_p2pdma_unmap(&pin, dev);
	if (dev)
		kvblk_dma_reg_end(buf);
	kvblk_p2pdma_unpin(&pin, NULL);	/* unmapped: unpins only */
	return buf;

out_abort:
	kvblk_buf_abort(buf);
out_unmap:
	kvblk_p2pdma_unmap(&pin, dev);
out_end:
	if (dev)
		kvblk_dma_reg_end(NULL);
out_unpin:
	kvblk_p2pdma_unpin(&pin, NULL);
	return ERR_PTR(ret);
}

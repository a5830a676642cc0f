// SPDX-License-Identifier: GPL-2.0
/*
 * prp.c - NVMe PRP1/PRP2/PRP lists for a window of a registered buffer.
 *
 * Rules (NVMe Base Specification 2.0, 4.1.1 "Physical Region Page Entry and
 * List"), with the controller page size of 4 KiB that Linux programs:
 *  - PRP1 addresses the first byte and may have a dword-aligned offset into
 *    its page; it covers up to the end of that page.
 *  - If the rest fits in one page, PRP2 addresses that page.
 *  - Otherwise PRP2 addresses a PRP list: 4 KiB pages of 512 entries, each
 *    entry a page-aligned address; when more entries follow than fit, the
 *    last entry of a list page points to the next list page.
 * The list pages come from a dma_pool of the NVMe PCI function, so their bus
 * addresses are what the controller must see, with or without an IOMMU.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dmapool.h>

#include "kvblk.h"

/**
 * kvblk_prp_pool_create() - the PRP list page pool of one NVMe PCI function.
 * @dev: the NVMe PCI function's device.
 * @name: pool name (copied).
 *
 * Return: the pool, or NULL (no memory).
 */
struct dma_pool *kvblk_prp_pool_create(struct device *dev, const char *name)
{
	char pool_name[48];

	snprintf(pool_name, sizeof(pool_name), "kvblk-prp-%s", name);
	return dma_pool_create(pool_name, dev, KVBLK_CTRL_PAGE_SIZE,
			       KVBLK_CTRL_PAGE_SIZE, 0);
}

/* A cursor over the buffer's DMA segments. */
struct kvblk_prp_iter {
	const struct kvblk_dma_seg *seg;
	dma_addr_t addr;	/* current bus address */
	u64 left;		/* bytes left in the current segment */
};

static void kvblk_prp_iter_start(struct kvblk_prp_iter *it,
				 const struct kvblk_buf *buf, u64 off)
{
	it->seg = &buf->segs[kvblk_buf_seg(buf, off)];
	it->addr = it->seg->addr + (off - it->seg->off);
	it->left = it->seg->len - (off - it->seg->off);
}

static void kvblk_prp_iter_advance(struct kvblk_prp_iter *it, u64 n)
{
	it->addr += n;
	it->left -= n;
	if (!it->left) {
		/* The caller never advances past the buffer's end. */
		it->seg++;
		it->addr = it->seg->addr;
		it->left = it->seg->len;
	}
}

/**
 * kvblk_prp_free() - return a command's PRP list pages to the pool.
 * @pool: the pool they came from.
 * @prp: the command's list pages; emptied.
 *
 * Context: any (the pool's lock is irq-safe).
 */
void kvblk_prp_free(struct dma_pool *pool, struct kvblk_prp *prp)
{
	while (prp->nr_pages) {
		prp->nr_pages--;
		dma_pool_free(pool, prp->va[prp->nr_pages],
			      prp->dma[prp->nr_pages]);
	}
}

/**
 * kvblk_prp_build() - PRP entries for [@off, @off + @len) of a buffer.
 * @pool: PRP list page pool of the buffer's device.
 * @buf: registered buffer; the window lies inside it.
 * @off: byte offset in the buffer, a multiple of 4.
 * @len: bytes, > 0, at most KVBLK_MAX_CMD_BYTES_MAX.
 * @prp: out: list pages used (free with kvblk_prp_free()).
 * @prp1: out: PRP1, little endian.
 * @prp2: out: PRP2 (0, a page, or the first list page), little endian.
 * @gfp: allocation flags for list pages.
 *
 * Return: 0, or -ENOMEM (nothing is left allocated).
 */
int kvblk_prp_build(struct dma_pool *pool, const struct kvblk_buf *buf,
		    u64 off, u32 len, struct kvblk_prp *prp, __le64 *prp1,
		    __le64 *prp2, gfp_t gfp)
{
	struct kvblk_prp_iter it;
	unsigned int nr, idx;
	__le64 *list;
	dma_addr_t list_dma;
	u32 first;

	prp->nr_pages = 0;
	kvblk_prp_iter_start(&it, buf, off);
	*prp1 = cpu_to_le64(it.addr);
	first = KVBLK_CTRL_PAGE_SIZE - (it.addr & (KVBLK_CTRL_PAGE_SIZE - 1));
	if (len <= first) {
		*prp2 = 0;
		return 0;
	}
	kvblk_prp_iter_advance(&it, first);
	len -= first;

	/* From here on every entry is a whole, aligned controller page. */
	nr = DIV_ROUND_UP(len, KVBLK_CTRL_PAGE_SIZE);
	if (nr == 1) {
		*prp2 = cpu_to_le64(it.addr);
		return 0;
	}

	list = dma_pool_alloc(pool, gfp, &list_dma);
	if (!list)
		return -ENOMEM;
	prp->va[0] = list;
	prp->dma[0] = list_dma;
	prp->nr_pages = 1;
	*prp2 = cpu_to_le64(list_dma);

	for (idx = 0; nr; nr--) {
		/* Last slot of a full page, more than one entry to go: chain. */
		if (idx == KVBLK_PRPS_PER_PAGE - 1 && nr > 1) {
			if (WARN_ON_ONCE(prp->nr_pages == KVBLK_MAX_PRP_PAGES))
				goto out_free;
			list = dma_pool_alloc(pool, gfp, &list_dma);
			if (!list)
				goto out_free;
			prp->va[prp->nr_pages - 1][idx] = cpu_to_le64(list_dma);
			prp->va[prp->nr_pages] = list;
			prp->dma[prp->nr_pages] = list_dma;
			prp->nr_pages++;
			idx = 0;
		}
		list[idx++] = cpu_to_le64(it.addr);
		if (nr > 1)
			kvblk_prp_iter_advance(&it, KVBLK_CTRL_PAGE_SIZE);
	}
	return 0;

out_free:
	kvblk_prp_free(pool, prp);
	return -ENOMEM;
}

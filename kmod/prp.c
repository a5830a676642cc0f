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
 * The lists come from dma_pools of the NVMe PCI function, so their bus
 * addresses are what the controller must see, with or without an IOMMU.
 */
#include <linux/dmapool.h>

#include "kvblk.h"

/**
 * kvblk_prp_pools_create() - the PRP list pools of one NVMe PCI function.
 * @pools: out: the pools.
 * @dev: the NVMe PCI function's device.
 * @name: pool name suffix (copied).
 *
 * Two pools, as nvme-pci keeps: 256-byte lists of up to 32 entries (every
 * command of up to 128 KiB, whatever its offset) and whole 4 KiB list pages
 * for longer commands. dma_pool_alloc() clears each block it hands out when
 * init_on_alloc is on (want_init_on_alloc(): Debian's kernels set
 * CONFIG_INIT_ON_ALLOC_DEFAULT_ON), whatever the gfp flags say, so a short
 * list costs a 256-byte clear instead of a 4 KiB one; the slot that holds
 * it keeps it for the whole batch (struct kvblk_prp).
 *
 * Return: 0, or -ENOMEM (nothing is left allocated).
 */
int kvblk_prp_pools_create(struct kvblk_prp_pools *pools, struct device *dev,
			   const char *name)
{
	char pool_name[48];

	snprintf(pool_name, sizeof(pool_name), "kvblk-prp-%s", name);
	pools->page = dma_pool_create(pool_name, dev, KVBLK_CTRL_PAGE_SIZE,
				      KVBLK_CTRL_PAGE_SIZE, 0);
	snprintf(pool_name, sizeof(pool_name), "kvblk-prp256-%s", name);
	pools->small = dma_pool_create(pool_name, dev, KVBLK_PRP_SMALL_BYTES,
				       KVBLK_PRP_SMALL_BYTES, 0);
	if (!pools->page || !pools->small) {
		kvblk_prp_pools_destroy(pools);
		return -ENOMEM;
	}
	return 0;
}

/**
 * kvblk_prp_pools_destroy() - destroy the pools of kvblk_prp_pools_create().
 * @pools: the pools; either may be NULL.
 */
void kvblk_prp_pools_destroy(struct kvblk_prp_pools *pools)
{
	dma_pool_destroy(pools->small);
	dma_pool_destroy(pools->page);
	pools->small = NULL;
	pools->page = NULL;
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
 * kvblk_prp_free() - return a slot's PRP lists to their pools.
 * @pools: the pools they came from.
 * @prp: the slot's lists; emptied.
 *
 * Context: any (the pools' locks are irq-safe). Only once no command of the
 * slot is in flight.
 */
void kvblk_prp_free(struct kvblk_prp_pools *pools, struct kvblk_prp *prp)
{
	if (prp->small) {
		dma_pool_free(pools->small, prp->small, prp->small_dma);
		prp->small = NULL;
	}
	while (prp->nr_pages) {
		prp->nr_pages--;
		dma_pool_free(pools->page, prp->va[prp->nr_pages],
			      prp->dma[prp->nr_pages]);
	}
}

/* Make sure the slot holds @nr list pages. */
static int kvblk_prp_pages(struct kvblk_prp_pools *pools, struct kvblk_prp *prp,
			   unsigned int nr, gfp_t gfp)
{
	if (WARN_ON_ONCE(nr > KVBLK_MAX_PRP_PAGES))
		return -ENOMEM;
	while (prp->nr_pages < nr) {
		prp->va[prp->nr_pages] = dma_pool_alloc(pools->page, gfp,
							&prp->dma[prp->nr_pages]);
		if (!prp->va[prp->nr_pages])
			return -ENOMEM;
		prp->nr_pages++;
	}
	return 0;
}

/**
 * kvblk_prp_build() - PRP entries for [@off, @off + @len) of a buffer.
 * @pools: PRP list pools of the buffer's device.
 * @buf: registered buffer; the window lies inside it.
 * @off: byte offset in the buffer, a multiple of 4.
 * @len: bytes, > 0, at most KVBLK_MAX_CMD_BYTES_MAX.
 * @prp: the command slot's lists: reused when they are there, allocated when
 *       not, kept for the slot's next command (free with kvblk_prp_free()).
 *       Only the entries the command uses are written: the controller reads
 *       no further than the transfer length (and the chain pointers) says.
 * @prp1: out: PRP1, little endian.
 * @prp2: out: PRP2 (0, a page, or the first list), little endian.
 * @gfp: allocation flags for lists.
 *
 * Return: 0, or -ENOMEM (the slot keeps what it had).
 */
int kvblk_prp_build(struct kvblk_prp_pools *pools, const struct kvblk_buf *buf,
		    u64 off, u32 len, struct kvblk_prp *prp, __le64 *prp1,
		    __le64 *prp2, gfp_t gfp)
{
	struct kvblk_prp_iter it;
	unsigned int nr, idx, page;
	__le64 *list;
	u32 first;

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

	if (nr <= KVBLK_PRP_SMALL_ENTRIES) {
		/* One short list, never chained. */
		if (!prp->small) {
			prp->small = dma_pool_alloc(pools->small, gfp,
						    &prp->small_dma);
			if (!prp->small)
				return -ENOMEM;
		}
		*prp2 = cpu_to_le64(prp->small_dma);
		for (idx = 0; idx < nr; idx++) {
			prp->small[idx] = cpu_to_le64(it.addr);
			if (idx + 1 < nr)
				kvblk_prp_iter_advance(&it, KVBLK_CTRL_PAGE_SIZE);
		}
		return 0;
	}

	/* 511 entries and a chain pointer per page but the last, 512 there. */
	if (kvblk_prp_pages(pools, prp,
			    DIV_ROUND_UP(nr - 1, KVBLK_PRPS_PER_PAGE - 1), gfp))
		return -ENOMEM;
	*prp2 = cpu_to_le64(prp->dma[0]);
	list = prp->va[0];
	for (idx = 0, page = 0; nr; nr--) {
		/* Last slot of a full page, more than one entry to go: chain. */
		if (idx == KVBLK_PRPS_PER_PAGE - 1 && nr > 1) {
			list[idx] = cpu_to_le64(prp->dma[++page]);
			list = prp->va[page];
			idx = 0;
		}
		list[idx++] = cpu_to_le64(it.addr);
		if (nr > 1)
			kvblk_prp_iter_advance(&it, KVBLK_CTRL_PAGE_SIZE);
	}
	return 0;
}

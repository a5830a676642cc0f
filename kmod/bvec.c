// SPDX-License-Identifier: GPL-2.0
/*
 * bvec.c - registered memory as the block-layer engines hand it to the
 * block layer: a byte range of a buffer's pinned pages as a bio_vec array.
 *
 * Each command slot keeps its array (struct kvblk_cmd.blk) from its first
 * command on, across its batches (the context keeps the slots between
 * them, batch.c kvblk_slots_keep()), so a command costs no
 * allocation and no call per page: engine_bio.c points its bio at the
 * array, engine_file.c its ITER_BVEC iterator, and the block layer and the
 * file system use the entries as they are (bio_iov_bvec_set() for the
 * iterator), as they do for io_uring's registered buffers.
 *
 * Pages that follow each other in memory share one multi-page entry (the
 * block layer has taken those since 5.1; bio_add_page() merges the same
 * way), so a huge page of the buffer is one entry, not 512. ZONE_DEVICE
 * pages (PCI P2PDMA) stay one entry each, as do all pages on KMSAN kernels,
 * where bio_add_page() does not merge either. A host registration finds
 * its runs of such pages once (kvblk_bvec_runs(), as io_uring coalesces a
 * fixed buffer of huge pages at registration), and a command then costs
 * one step per run rather than per page: a 1 MiB command inside a huge
 * page was 256 steps of this file's loop, about 4.7 us of guest CPU under
 * QEMU's emulation (2026-12-05, docs/results.md).
 */
#include <linux/bvec.h>
#include <linux/mm.h>
#include <linux/slab.h>

#include "engine.h"
#include "kvblk.h"

/* May @next continue the multi-page entry that ends with @prev? */
static bool kvblk_bvec_follows(struct page *prev, struct page *next)
{
	if (IS_ENABLED(CONFIG_KMSAN))
		return false;
	if (is_zone_device_page(prev) || is_zone_device_page(next))
		return false;
	/* The same page arithmetic the bvec iterators use. */
	return next == prev + 1 && page_to_pfn(next) == page_to_pfn(prev) + 1;
}

/**
 * kvblk_bvec_runs() - the runs of consecutive pages of a pinned range.
 * @pages: @nr pinned pages.
 * @nr: pages, > 0.
 *
 * Context: process context (allocates).
 * Return: an array of @nr counts, kvfree()d by the caller: entry i is how
 * many pages from @pages[i] on continue each other in memory as
 * kvblk_bvec_fill() merges them (1 where @pages[i + 1] does not continue
 * @pages[i]); or NULL when it could not be allocated (kvblk_bvec_fill()
 * then looks at each page).
 */
u32 *kvblk_bvec_runs(struct page *const *pages, unsigned long nr)
{
	u32 *runs = kvmalloc_array(nr, sizeof(*runs), GFP_KERNEL_ACCOUNT);
	unsigned long i;

	if (!runs)
		return NULL;
	runs[nr - 1] = 1;
	for (i = nr - 1; i-- > 0;) {
		bool more = runs[i + 1] < U32_MAX &&
			    kvblk_bvec_follows(pages[i], pages[i + 1]);

		runs[i] = more ? runs[i + 1] + 1 : 1;
	}
	return runs;
}

/**
 * kvblk_bvec_fill() - describe bytes of a buffer in its slot's bio_vec array.
 * @cmd: the command slot. Its array (@cmd->blk.bvec, @cmd->blk.nr_bvec) is
 *       allocated by the first command that needs more entries, for the
 *       largest command of @max_bytes, and kept until kvblk_bvec_release().
 * @buf: registered memory with ->pages (host memory, or P2PDMA pages pinned
 *       for the batch), and ->runs where the registration found them.
 * @off: byte offset in @buf.
 * @len: bytes, 0 < @len <= @max_bytes.
 * @max_bytes: the largest command of the slot's target in this batch
 *       (struct kvblk_btgt.max_cmd_bytes).
 *
 * Context: process context (may allocate).
 * Return: the number of entries filled (at least 1), or -ENOMEM when the
 * array could not be allocated (nothing changed).
 */
int kvblk_bvec_fill(struct kvblk_cmd *cmd, const struct kvblk_buf *buf,
		    u64 off, u32 len, u32 max_bytes)
{
	unsigned int poff = off & (PAGE_SIZE - 1);
	unsigned int nr = DIV_ROUND_UP(poff + len, PAGE_SIZE);
	struct page **pages = &buf->pages[off >> PAGE_SHIFT];
	struct bio_vec *bv;
	unsigned int i, n = 0;

	/* bio_init() and bi_vcnt count entries in an unsigned short. */
	BUILD_BUG_ON(KVBLK_MAX_CMD_BYTES_MAX / PAGE_SIZE + 1 > USHRT_MAX);
	if (cmd->blk.nr_bvec < nr) {
		unsigned int want = max_t(unsigned int, nr,
					  DIV_ROUND_UP(max_bytes, PAGE_SIZE) + 1);

		bv = kvmalloc_array(want, sizeof(*bv), GFP_KERNEL_ACCOUNT);
		if (!bv)
			return -ENOMEM;
		kvblk_bvec_release(NULL, cmd);
		cmd->blk.bvec = bv;
		cmd->blk.nr_bvec = want;
		kvblk_slot_bytes_add(want * sizeof(*bv));
	}
	bv = cmd->blk.bvec;
	if (buf->runs) {
		/* One entry per run: the runs are maximal, so none continues another. */
		const u32 *runs = &buf->runs[off >> PAGE_SHIFT];

		for (i = 0; i < nr; n++) {
			unsigned int k = min_t(u32, runs[i], nr - i);
			unsigned int take = min_t(u64, len,
						  ((u64)k << PAGE_SHIFT) - poff);

			bv[n].bv_page = pages[i];
			bv[n].bv_offset = poff;
			bv[n].bv_len = take;
			len -= take;
			poff = 0;
			i += k;
		}
		return n;
	}
	for (i = 0; i < nr; i++) {
		unsigned int take = min_t(u32, len, PAGE_SIZE - poff);

		if (n && kvblk_bvec_follows(pages[i - 1], pages[i])) {
			bv[n - 1].bv_len += take;
		} else {
			bv[n].bv_page = pages[i];
			bv[n].bv_offset = poff;
			bv[n].bv_len = take;
			n++;
		}
		len -= take;
		poff = 0;
	}
	return n;
}

/**
 * kvblk_bvec_release() - free a slot's bio_vec array.
 * @t: the target its commands served (unused).
 * @cmd: the slot; no command of it in flight.
 *
 * The block-layer engines' &kvblk_engine_ops.slot_release.
 */
void kvblk_bvec_release(const struct kvblk_tgt *t, struct kvblk_cmd *cmd)
{
	kvblk_slot_bytes_add(-(long)(cmd->blk.nr_bvec * sizeof(*cmd->blk.bvec)));
	kvfree(cmd->blk.bvec);
	cmd->blk.bvec = NULL;
	cmd->blk.nr_bvec = 0;
}

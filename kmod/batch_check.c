// SPDX-License-Identifier: GPL-2.0
/*
 * batch_check.c - rules over a whole batch, after every descriptor passed
 * its own checks (batch.c) and before anything is submitted:
 *  - no two objects' destinations overlap: the bytes would depend on the
 *    order in which commands complete, which is always a caller's bug
 *    (for a load the memory ranges, for a store the device ranges);
 *  - no destination is a host buffer whose mapping the program replaced
 *    since registration (mem_host.c, kvblk_mem_ops.check).
 * Either failure rejects the call with the descriptor named in @bad_index.
 */
#include <linux/slab.h>
#include <linux/sort.h>

#include "kvblk.h"

/*
 * A destination range in one address space: @space 0 for user virtual
 * addresses (host and P2PDMA memory, whatever registration names them),
 * 1 for CUDA device addresses, 2 + buffer id for a dma-buf registration
 * (offsets into the dma-buf). A store batch compares device ranges
 * instead (kvblk_store_span_of()).
 */
struct kvblk_span {
	u64 space;
	u64 start;
	u64 end;
};

static int kvblk_span_cmp(const void *a, const void *b)
{
	const struct kvblk_span *x = a, *y = b;

	if (x->space != y->space)
		return x->space < y->space ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

/*
 * A store's destination: for a block device its disk (@space: the gendisk's
 * address) and the absolute byte range on it, partition start included; for
 * a file its inode and the range in the file.
 */
static void kvblk_store_span_of(const struct kvblk_obj *o, struct kvblk_span *s)
{
	const struct kvblk_tgt *t = o->bt->t;
	struct inode *inode = file_inode(t->file);

	if (S_ISBLK(inode->i_mode)) {
		s->space = (uintptr_t)t->ns->info.disk;
		s->start = t->start_bytes + o->offset;
	} else {
		s->space = (uintptr_t)inode;
		s->start = o->offset;
	}
	s->end = s->start + o->length;
}

static void kvblk_span_of(const struct kvblk_batch *b, const struct kvblk_obj *o,
			  struct kvblk_span *s)
{
	const struct kvblk_buf *buf = o->buf;

	if (b->store) {
		kvblk_store_span_of(o, s);
		return;
	}

	switch (buf->kind) {
	case KVBLK_MEM_CUDA:
		s->space = 1;
		break;
	case KVBLK_MEM_DMABUF:
		s->space = 2 + (u64)buf->id;
		break;
	default:
		s->space = 0;
		break;
	}
	s->start = buf->addr + o->buf_offset;
	s->end = s->start + o->length;
}

/* Whether two of the first @n objects' destinations intersect. */
static bool kvblk_any_overlap(const struct kvblk_batch *b, u32 n,
			      struct kvblk_span *s)
{
	u32 i;

	for (i = 0; i < n; i++)
		kvblk_span_of(b, &b->objs[i], &s[i]);
	sort(s, n, sizeof(*s), kvblk_span_cmp, NULL);
	for (i = 1; i < n; i++)
		if (s[i].space == s[i - 1].space && s[i].start < s[i - 1].end)
			return true;
	return false;
}

/*
 * The usual layout: each destination after the one before it (by space,
 * then address) and not reaching into it. Then the sorted sweep of
 * kvblk_any_overlap() would find nothing: one pass, nothing allocated or
 * sorted (the sort was 3% of a batch of 64 4 KiB loads, 2026-12-06).
 */
static bool kvblk_ascending_disjoint(const struct kvblk_batch *b)
{
	struct kvblk_span prev, cur;
	u32 i;

	kvblk_span_of(b, &b->objs[0], &prev);
	for (i = 1; i < b->nr_objs; i++) {
		kvblk_span_of(b, &b->objs[i], &cur);
		if (cur.space < prev.space ||
		    (cur.space == prev.space && cur.start < prev.end))
			return false;
		prev = cur;
	}
	return true;
}

/*
 * Overlapping destinations: -EINVAL with *bad the lowest index whose
 * destination intersects that of an earlier descriptor. O(n) for a good
 * batch in ascending order, O(n log n) for another good one; the error
 * path searches the shortest overlapping prefix.
 */
static int kvblk_check_overlap(const struct kvblk_batch *b, u32 *bad)
{
	struct kvblk_span *s;
	u32 lo, hi;
	int ret = 0;

	if (b->nr_objs < 2 || kvblk_ascending_disjoint(b))
		return 0;
	s = kvmalloc_array(b->nr_objs, sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	if (kvblk_any_overlap(b, b->nr_objs, s)) {
		/* The prefix [0, hi] overlaps; [0, lo] does not. */
		lo = 0;
		hi = b->nr_objs - 1;
		while (hi - lo > 1) {
			u32 mid = lo + (hi - lo) / 2;

			if (kvblk_any_overlap(b, mid + 1, s))
				hi = mid;
			else
				lo = mid;
			cond_resched();
		}
		*bad = hi;
		ret = -EINVAL;
	}
	kvfree(s);
	return ret;
}

/**
 * kvblk_batch_check() - the rules that span a batch's descriptors.
 * @b: a batch whose objects were validated and hold their buffers.
 * @bad: out: the rejected descriptor when this fails with one.
 *
 * Context: the caller of LOAD_MANY, in the context's address space.
 * Return: 0; -EINVAL two destinations overlap (*bad, see
 * kvblk_check_overlap()); -ESTALE the first descriptor whose host buffer
 * no longer maps its pinned pages (*bad); -EINTR, -ENOMEM (*bad set to
 * the descriptor being checked).
 */
int kvblk_batch_check(struct kvblk_batch *b, u32 *bad)
{
	u32 i;
	int ret;

	ret = kvblk_check_overlap(b, bad);
	if (ret)
		return ret;
	for (i = 0; i < b->nr_objs; i++) {
		struct kvblk_buf *buf = b->objs[i].buf;

		/* After the first object of a buffer this is a sequence read. */
		if (!buf->ops->check)
			continue;
		ret = buf->ops->check(buf);
		if (ret) {
			*bad = i;
			return ret;
		}
	}
	return 0;
}

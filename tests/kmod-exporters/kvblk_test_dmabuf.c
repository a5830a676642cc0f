// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_test_dmabuf: a test-only dma-buf exporter of host pages.
 *
 * /dev/kvblk_test_dmabuf makes dma-bufs of zeroed host pages
 * (kvblk_test_dmabuf.h is its interface). The exporter is dynamic: it has
 * pin/unpin, so importers such as kvblk.ko attach with
 * dma_buf_dynamic_attach() and receive move notifications; a buffer made
 * with KVBLK_TEST_DMABUF_F_STATIC has an exporter without them (not
 * dynamic, as NVIDIA's and udmabuf), which 6.1 and 6.12 map at attach and
 * unmap only at detach. Each
 * attachment's map builds an sg_table over the pages and maps it with
 * dma_map_sgtable() for the attaching device, so that an IOMMU translates
 * exactly what the importer was given. Counters of live buffers,
 * attachments, mappings and pins let the tests check that an importer
 * gives back everything it took.
 *
 * REVOKE plays an exporter that takes its memory back: notify, wait for
 * the reservation object's fences, require every mapping to be gone, then
 * poison the pages so that any later write by an importer is visible.
 *
 * Locking: the buffer's state (revoked, each attachment's mapping) changes
 * only under the dma-buf's reservation lock, which the dma-buf core holds
 * around pin, unpin, map and unmap of dynamic exporters (a static buffer's
 * one mapping is made at attach and dropped at detach without it). No user memory is
 * touched under that lock (a page fault would take mmap_lock, which ranks
 * above it).
 *
 * Needs kmod/conftest.h for the same kernel (make -C kmod first): 7.2
 * renamed dma_buf_move_notify() to dma_buf_invalidate_mappings().
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "conftest.h"
#include "kvblk_test_dmabuf.h"

MODULE_INFO(import_ns, "DMA_BUF");

struct tdb_buf {
	struct page **pages;
	unsigned long nr_pages;
	bool revoked;			/* reservation lock */
};

/* Per attachment: its one mapping (reservation lock). */
struct tdb_attach {
	struct sg_table *sgt;
	enum dma_data_direction dir;
};

static atomic64_t tdb_nr_buffers = ATOMIC64_INIT(0);
static atomic64_t tdb_nr_attach = ATOMIC64_INIT(0);
static atomic64_t tdb_nr_maps = ATOMIC64_INIT(0);
static atomic64_t tdb_nr_pins = ATOMIC64_INIT(0);
static atomic64_t tdb_nr_revokes = ATOMIC64_INIT(0);

static void tdb_notify_importers(struct dma_buf *dmabuf)
{
#ifdef KVBLK_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
	dma_buf_invalidate_mappings(dmabuf);
#else
	dma_buf_move_notify(dmabuf);
#endif
}

static int tdb_attach(struct dma_buf *dmabuf,
		      struct dma_buf_attachment *attach)
{
	struct tdb_buf *b = dmabuf->priv;
	struct tdb_attach *a;

	/* Unlocked read: a revoke right after this is seen by map and pin. */
	if (READ_ONCE(b->revoked))
		return -ENODEV;
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	attach->priv = a;
	atomic64_inc(&tdb_nr_attach);
	return 0;
}

static void tdb_detach(struct dma_buf *dmabuf,
		       struct dma_buf_attachment *attach)
{
	struct tdb_attach *a = attach->priv;

	WARN_ON_ONCE(a->sgt);
	kfree(a);
	atomic64_dec(&tdb_nr_attach);
}

static int tdb_pin(struct dma_buf_attachment *attach)
{
	struct tdb_buf *b = attach->dmabuf->priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	if (b->revoked)
		return -ENODEV;
	atomic64_inc(&tdb_nr_pins);
	return 0;
}

static void tdb_unpin(struct dma_buf_attachment *attach)
{
	dma_resv_assert_held(attach->dmabuf->resv);
	atomic64_dec(&tdb_nr_pins);
}

static struct sg_table *tdb_map(struct dma_buf_attachment *attach,
				enum dma_data_direction dir)
{
	struct tdb_buf *b = attach->dmabuf->priv;
	struct tdb_attach *a = attach->priv;
	unsigned int max_seg;
	struct sg_table *sgt;
	int ret;

	/*
	 * A static buffer is mapped by the dma-buf core at attach without the
	 * reservation lock (6.1 drivers/dma-buf/dma-buf.c,
	 * dma_buf_dynamic_attach(): it locks only for a dynamic exporter),
	 * before the attachment is visible to anyone else.
	 */
	if (dma_buf_is_dynamic(attach->dmabuf))
		dma_resv_assert_held(attach->dmabuf->resv);
	if (b->revoked)
		return ERR_PTR(-ENODEV);
	if (a->sgt)
		return ERR_PTR(-EBUSY);	/* one mapping per attachment */
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	max_seg = round_down(min_t(unsigned int, dma_get_max_seg_size(attach->dev),
				   UINT_MAX), PAGE_SIZE);
	ret = sg_alloc_table_from_pages_segment(sgt, b->pages, b->nr_pages, 0,
						b->nr_pages << PAGE_SHIFT,
						max_seg, GFP_KERNEL);
	if (ret)
		goto out_free;
	ret = dma_map_sgtable(attach->dev, sgt, dir, 0);
	if (ret)
		goto out_free_table;
	a->sgt = sgt;
	a->dir = dir;
	atomic64_inc(&tdb_nr_maps);
	return sgt;

out_free_table:
	sg_free_table(sgt);
out_free:
	kfree(sgt);
	return ERR_PTR(ret);
}

static void tdb_unmap(struct dma_buf_attachment *attach, struct sg_table *sgt,
		      enum dma_data_direction dir)
{
	struct tdb_attach *a = attach->priv;

	WARN_ON_ONCE(sgt != a->sgt);
	dma_unmap_sgtable(attach->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(sgt);
	a->sgt = NULL;
	atomic64_dec(&tdb_nr_maps);
}

static void tdb_free_pages(struct tdb_buf *b, unsigned long n)
{
	while (n--)
		__free_page(b->pages[n]);
	kvfree(b->pages);
	kfree(b);
}

static void tdb_release(struct dma_buf *dmabuf)
{
	struct tdb_buf *b = dmabuf->priv;

	tdb_free_pages(b, b->nr_pages);
	atomic64_dec(&tdb_nr_buffers);
}

static const struct dma_buf_ops tdb_ops = {
	.attach = tdb_attach,
	.detach = tdb_detach,
	.pin = tdb_pin,
	.unpin = tdb_unpin,
	.map_dma_buf = tdb_map,
	.unmap_dma_buf = tdb_unmap,
	.release = tdb_release,
};

/*
 * KVBLK_TEST_DMABUF_F_STATIC: no pin/unpin, so not a dynamic exporter, as
 * NVIDIA's nv-dmabuf and udmabuf are: 6.1 and 6.12 map it when a dynamic
 * importer attaches and keep that mapping until it detaches.
 */
static const struct dma_buf_ops tdb_static_ops = {
	.attach = tdb_attach,
	.detach = tdb_detach,
	.map_dma_buf = tdb_map,
	.unmap_dma_buf = tdb_unmap,
	.release = tdb_release,
};

static long tdb_create(struct kvblk_test_dmabuf_create __user *uarg)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp);
	struct kvblk_test_dmabuf_create c;
	struct dma_buf *dmabuf;
	struct tdb_buf *b;
	unsigned long i;
	int fd;

	if (copy_from_user(&c, uarg, sizeof(c)))
		return -EFAULT;
	if ((c.flags & ~(KVBLK_TEST_DMABUF_F_RDONLY |
			 KVBLK_TEST_DMABUF_F_STATIC)) || !c.len ||
	    c.len > KVBLK_TEST_DMABUF_MAX_BYTES || !PAGE_ALIGNED(c.len))
		return -EINVAL;
	b = kzalloc(sizeof(*b), GFP_KERNEL);
	if (!b)
		return -ENOMEM;
	b->nr_pages = c.len >> PAGE_SHIFT;
	b->pages = kvcalloc(b->nr_pages, sizeof(*b->pages), GFP_KERNEL);
	if (!b->pages) {
		kfree(b);
		return -ENOMEM;
	}
	/* Page by page: the importer gets a table of many segments. */
	for (i = 0; i < b->nr_pages; i++) {
		b->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!b->pages[i]) {
			tdb_free_pages(b, i);
			return -ENOMEM;
		}
	}

	exp.ops = c.flags & KVBLK_TEST_DMABUF_F_STATIC ? &tdb_static_ops : &tdb_ops;
	exp.size = c.len;
	exp.flags = c.flags & KVBLK_TEST_DMABUF_F_RDONLY ? O_RDONLY : O_RDWR;
	exp.priv = b;
	dmabuf = dma_buf_export(&exp);
	if (IS_ERR(dmabuf)) {
		tdb_free_pages(b, b->nr_pages);
		return PTR_ERR(dmabuf);
	}
	atomic64_inc(&tdb_nr_buffers);
	fd = dma_buf_fd(dmabuf, O_CLOEXEC);
	if (fd < 0) {
		dma_buf_put(dmabuf);	/* releases b */
		return fd;
	}
	/* The fd is installed: only the output can fail now. */
	c.fd = fd;
	if (copy_to_user(uarg, &c, sizeof(c)))
		return -EFAULT;
	return fd;
}

/* A dma-buf of this module, referenced; ERR_PTR(-EBADF or -EINVAL). */
static struct dma_buf *tdb_get(int fd)
{
	struct dma_buf *dmabuf = dma_buf_get(fd);

	if (IS_ERR(dmabuf))
		return dmabuf;
	if (dmabuf->ops != &tdb_ops && dmabuf->ops != &tdb_static_ops) {
		dma_buf_put(dmabuf);
		return ERR_PTR(-EINVAL);
	}
	return dmabuf;
}

/* Hand the pages to the CPU (@to_cpu) or back to every live mapping. */
static void tdb_sync_locked(struct dma_buf *dmabuf, bool to_cpu)
{
	struct dma_buf_attachment *attach;

	dma_resv_assert_held(dmabuf->resv);
	list_for_each_entry(attach, &dmabuf->attachments, node) {
		struct tdb_attach *a = attach->priv;

		if (!a->sgt)
			continue;
		if (to_cpu)
			dma_sync_sgtable_for_cpu(attach->dev, a->sgt, a->dir);
		else
			dma_sync_sgtable_for_device(attach->dev, a->sgt, a->dir);
	}
}

/* Copy between the pages at @off and @kbuf, @len bytes. */
static void tdb_copy(struct tdb_buf *b, u64 off, char *kbuf, u64 len,
		     bool to_pages)
{
	while (len) {
		unsigned long pg = off >> PAGE_SHIFT;
		size_t in = offset_in_page(off);
		size_t n = min_t(u64, len, PAGE_SIZE - in);
		char *va = kmap_local_page(b->pages[pg]);

		if (to_pages)
			memcpy(va + in, kbuf, n);
		else
			memcpy(kbuf, va + in, n);
		kunmap_local(va);
		off += n;
		kbuf += n;
		len -= n;
	}
}

static long tdb_rw(struct kvblk_test_dmabuf_rw __user *uarg, bool write)
{
	struct kvblk_test_dmabuf_rw rw;
	struct dma_buf *dmabuf;
	void *kbuf;
	long ret;

	if (copy_from_user(&rw, uarg, sizeof(rw)))
		return -EFAULT;
	dmabuf = tdb_get(rw.fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	ret = -EINVAL;
	if (rw.flags || !rw.len || rw.len > KVBLK_TEST_DMABUF_MAX_BYTES ||
	    rw.offset > dmabuf->size || rw.len > dmabuf->size - rw.offset)
		goto out_put;
	ret = -ENOMEM;
	kbuf = kvmalloc(rw.len, GFP_KERNEL);
	if (!kbuf)
		goto out_put;
	ret = -EFAULT;
	if (write && copy_from_user(kbuf, u64_to_user_ptr(rw.ptr), rw.len))
		goto out_free;
	ret = dma_resv_lock_interruptible(dmabuf->resv, NULL);
	if (ret)
		goto out_free;
	tdb_sync_locked(dmabuf, true);
	tdb_copy(dmabuf->priv, rw.offset, kbuf, rw.len, write);
	if (write)
		tdb_sync_locked(dmabuf, false);
	dma_resv_unlock(dmabuf->resv);
	ret = 0;
	if (!write && copy_to_user(u64_to_user_ptr(rw.ptr), kbuf, rw.len))
		ret = -EFAULT;
out_free:
	kvfree(kbuf);
out_put:
	dma_buf_put(dmabuf);
	return ret;
}

static long tdb_revoke(int __user *uarg)
{
	struct dma_buf_attachment *attach;
	struct dma_buf *dmabuf;
	struct tdb_buf *b;
	unsigned int live = 0;
	unsigned long i;
	long ret = 0;
	int fd;

	if (get_user(fd, uarg))
		return -EFAULT;
	dmabuf = tdb_get(fd);
	if (IS_ERR(dmabuf))
		return PTR_ERR(dmabuf);
	b = dmabuf->priv;
	dma_resv_lock(dmabuf->resv, NULL);
	if (b->revoked) {
		ret = -EALREADY;
		goto out_unlock;
	}
	WRITE_ONCE(b->revoked, true);
	atomic64_inc(&tdb_nr_revokes);
	tdb_notify_importers(dmabuf);
	/* What any exporter waits for before it reuses the memory. */
	dma_resv_wait_timeout(dmabuf->resv, DMA_RESV_USAGE_BOOKKEEP, false,
			      MAX_SCHEDULE_TIMEOUT);
	list_for_each_entry(attach, &dmabuf->attachments, node) {
		struct tdb_attach *a = attach->priv;

		if (a->sgt)
			live++;
	}
	if (live) {
		pr_info("revoke: %u importer mapping(s) survived the notification; memory not reclaimed\n",
			live);
		ret = -EBUSY;
		goto out_unlock;
	}
	/* Taken back: from here on any write by an importer is a bug. */
	for (i = 0; i < b->nr_pages; i++) {
		char *va = kmap_local_page(b->pages[i]);

		memset(va, KVBLK_TEST_DMABUF_POISON, PAGE_SIZE);
		kunmap_local(va);
	}
out_unlock:
	dma_resv_unlock(dmabuf->resv);
	dma_buf_put(dmabuf);
	return ret;
}

static long tdb_counts(struct kvblk_test_dmabuf_counts __user *uarg)
{
	struct kvblk_test_dmabuf_counts c = {
		.buffers = atomic64_read(&tdb_nr_buffers),
		.attachments = atomic64_read(&tdb_nr_attach),
		.mappings = atomic64_read(&tdb_nr_maps),
		.pins = atomic64_read(&tdb_nr_pins),
		.revokes = atomic64_read(&tdb_nr_revokes),
	};

	return copy_to_user(uarg, &c, sizeof(c)) ? -EFAULT : 0;
}

static long tdb_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case KVBLK_TEST_DMABUF_CREATE:
		return tdb_create(uarg);
	case KVBLK_TEST_DMABUF_READ:
		return tdb_rw(uarg, false);
	case KVBLK_TEST_DMABUF_WRITE:
		return tdb_rw(uarg, true);
	case KVBLK_TEST_DMABUF_REVOKE:
		return tdb_revoke(uarg);
	case KVBLK_TEST_DMABUF_COUNTS:
		return tdb_counts(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations tdb_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = tdb_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice tdb_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kvblk_test_dmabuf",
	.fops = &tdb_fops,
	.mode = 0600,
};

module_misc_device(tdb_misc);

MODULE_DESCRIPTION("kvblk test-only dma-buf exporter of host pages (never installed)");
MODULE_LICENSE("GPL");

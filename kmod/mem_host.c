// SPDX-License-Identifier: GPL-2.0
/*
 * mem_host.c - host memory destinations (KVBLK_MEM_HOST).
 *
 * A host buffer is pinned once (FOLL_WRITE | FOLL_LONGTERM), charged to the
 * owner's RLIMIT_MEMLOCK the way io_uring charges fixed buffers (unless the
 * caller has CAP_IPC_LOCK), and, for the PRP engine, DMA-mapped once for the
 * namespace's NVMe PCI function (dma_map_sgtable()). The block-layer engines
 * use the pinned pages (buf->pages) and never a mapping of kvblk's.
 *
 * The pins keep the pages, not the program's mapping of them: a program
 * that unmaps and maps the range again, or drops it with MADV_DONTNEED, no
 * longer sees the pinned pages. An mmu interval notifier on the range
 * notes every invalidation that can change which pages it maps; the next
 * load or KVBLK_IOC_CHECK_BUFFER then compares the pages the range maps now
 * with the pinned ones (kvblk_mem_host_check()) and marks the buffer stale
 * when one differs. Invalidations that never change the pages (protection
 * changes: mprotect(), fork()'s write-protection, NUMA hinting, soft-dirty)
 * are not noted; anything else only causes a comparison, so a false alarm
 * (an unmap attempt that failed on a pinned page) costs a page walk, never
 * an -ESTALE.
 */
#include <linux/capability.h>
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/hugetlb_inline.h>
#include <linux/shmem_fs.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>

#include "engine.h"
#include "kvblk.h"

#ifdef KVBLK_HAVE_USER_LOCKED_VM
static int kvblk_account_mem(struct user_struct *user, unsigned long pages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long cur = atomic_long_read(&user->locked_vm);
	unsigned long new;

	do {
		new = cur + pages;
		if (new < cur || new > limit)
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, new));
	return 0;
}

static void kvblk_unaccount_mem(struct user_struct *user, unsigned long pages)
{
	atomic_long_sub(pages, &user->locked_vm);
}
#else
/* No per-user locked_vm: only CAP_IPC_LOCK callers may register. */
static int kvblk_account_mem(struct user_struct *user, unsigned long pages)
{
	return -ENOMEM;
}

static void kvblk_unaccount_mem(struct user_struct *user, unsigned long pages)
{
}
#endif

#if IS_ENABLED(CONFIG_MMU_NOTIFIER)
static bool kvblk_mem_host_invalidate(struct mmu_interval_notifier *mni,
				      const struct mmu_notifier_range *range,
				      unsigned long cur_seq)
{
	switch (range->event) {
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_SOFT_DIRTY:
		/* The same pages stay mapped. */
		break;
	default:
		/* Only a sequence bump: the next load compares the pages. */
		mmu_interval_set_seq(mni, cur_seq);
		break;
	}
	return true;
}

static const struct mmu_interval_notifier_ops kvblk_mem_host_mni_ops = {
	.invalidate = kvblk_mem_host_invalidate,
};

/*
 * Watch the range before pinning it: an invalidation between the pin and
 * the insertion would otherwise go unnoticed. The sequence read before the
 * pin makes the first load compare if anything happened meanwhile.
 */
static int kvblk_mem_host_watch(struct kvblk_mem_host *h, unsigned long len)
{
	int ret;

	mutex_init(&h->check_lock);
	ret = mmu_interval_notifier_insert(&h->mni, current->mm, h->addr, len,
					   &kvblk_mem_host_mni_ops);
	if (ret)
		return ret;
	h->mni_live = true;
	h->checked_seq = mmu_interval_read_begin(&h->mni);
	return 0;
}

static void kvblk_mem_host_unwatch(struct kvblk_mem_host *h)
{
	if (h->mni_live)
		mmu_interval_notifier_remove(&h->mni);
	h->mni_live = false;
}

/* Pages compared per page walk. */
#define KVBLK_CHECK_CHUNK	(PAGE_SIZE / sizeof(struct page *))

/*
 * Compare the pages the range maps now with the pinned ones: 0 all match,
 * -ESTALE one differs or is no longer mapped, 1 inconclusive, or the error
 * of the page lookup as it came (-EINTR on a fatal signal, -ENOMEM, ...).
 * A readable page is looked up as a read would (a missing anonymous page
 * becomes the zero page, never the pinned one). Pages the
 * program made inaccessible (PROT_NONE) cannot be looked up: they neither
 * make the buffer stale nor count as compared (1), so the next load
 * compares again, also once the program makes them accessible (which
 * notifies nothing).
 */
static int kvblk_mem_host_compare(struct kvblk_mem_host *h)
{
	unsigned long end = h->addr + (h->nr_pages << PAGE_SHIFT);
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	struct page **cur;
	unsigned long i = 0;
	bool unsure = false;
	int ret = 0;

	cur = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!cur)
		return -ENOMEM;
	while (i < h->nr_pages && !ret) {
		unsigned long addr = h->addr + (i << PAGE_SHIFT);
		int n = min_t(unsigned long, h->nr_pages - i, KVBLK_CHECK_CHUNK);
		int got, j;

		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		got = get_user_pages_fast(addr, n, 0, cur);
		if (got < 0 && got != -EFAULT) {
			ret = got;	/* -ENOMEM, -EINTR (fatal signal), ... */
			break;
		}
		for (j = 0; j < max(got, 0); j++) {
			if (cur[j] != h->pages[i + j])
				ret = -ESTALE;
			put_page(cur[j]);
		}
		if (ret)
			break;
		if (got == n) {
			i += n;
			cond_resched();
			continue;
		}
		/* Page i + max(got, 0) could not be looked up: why? */
		i += max(got, 0);
		addr = h->addr + (i << PAGE_SHIFT);
		if (mmap_read_lock_killable(mm)) {
			ret = -EINTR;
			break;
		}
		vma = vma_lookup(mm, addr);
		if (!vma || (vma->vm_flags & VM_READ))
			ret = -ESTALE;	/* unmapped, or readable yet no page */
		else		/* inaccessible: skip the rest of this VMA */
			i += (min(vma->vm_end, end) - addr) >> PAGE_SHIFT;
		unsure = true;
		mmap_read_unlock(mm);
	}
	kfree(cur);
	return ret ? ret : unsure;
}

static int kvblk_mem_host_check(struct kvblk_buf *buf)
{
	struct kvblk_mem_host *h = buf->priv;
	unsigned long seq;
	int ret = 0;

	if (READ_ONCE(h->stale))
		return -ESTALE;
	if (!mmu_interval_check_retry(&h->mni, READ_ONCE(h->checked_seq)))
		return 0;

	if (mutex_lock_killable(&h->check_lock))
		return -EINTR;
	while (!h->stale && mmu_interval_check_retry(&h->mni, h->checked_seq)) {
		seq = mmu_interval_read_begin(&h->mni);
		ret = kvblk_mem_host_compare(h);
		if (ret == -ESTALE) {
			WRITE_ONCE(h->stale, true);
			pr_info_ratelimited("%s[%d]: buffer %u: the registered range at 0x%lx no longer maps the pinned pages (unmapped, replaced or dropped): loads into it fail with -ESTALE until it is registered again\n",
					    current->comm, task_pid_nr(current),
					    buf->id, h->addr);
		}
		if (ret) {
			/* Inconclusive: loads go on, the next one compares. */
			ret = ret == 1 ? 0 : ret;
			break;
		}
		/* An invalidation during the comparison: compare again. */
		if (!mmu_interval_read_retry(&h->mni, seq))
			WRITE_ONCE(h->checked_seq, seq);
	}
	if (h->stale)
		ret = -ESTALE;
	mutex_unlock(&h->check_lock);
	return ret;
}
#else
static int kvblk_mem_host_watch(struct kvblk_mem_host *h, unsigned long len)
{
	return 0;
}

static void kvblk_mem_host_unwatch(struct kvblk_mem_host *h)
{
}
#endif /* CONFIG_MMU_NOTIFIER */

static void kvblk_mem_host_free(struct kvblk_mem_host *h)
{
	kvblk_mem_host_unwatch(h);
	if (h->user) {
		kvblk_unaccount_mem(h->user, h->nr_pages);
		free_uid(h->user);
	}
	kvfree(h->runs);
	kvfree(h->pages);
	kfree(h);
}

/*
 * Pages per DMA mapping of a host buffer. With CONFIG_DMA_API_DEBUG each
 * sync finds its mapping by walking the debug hash back from the synced
 * address to the start of the mapped segment, one 8 KiB bucket per step
 * (kernel/dma/debug.c, bucket_find_contain()). Behind an IOMMU a whole
 * registration maps to one segment, so each page that kvblk_buf_sync()
 * syncs costs a walk as long as its offset: 6.1's debug kernel needed
 * minutes for one 128 MiB batch. Mapped in 256 KiB pieces there, a walk is
 * at most 32 steps. Other kernels map the buffer at once (one IOVA range
 * behind an IOMMU, the fewest PRP segments).
 */
#ifdef CONFIG_DMA_API_DEBUG
#define KVBLK_HOST_MAP_PAGES	(SZ_256K >> PAGE_SHIFT)
#else
#define KVBLK_HOST_MAP_PAGES	ULONG_MAX
#endif

/* Unmaps and frees the first @n of @h's mapped tables. */
static void kvblk_mem_host_unmap_n(struct device *dev,
				   struct kvblk_mem_host *h, unsigned int n,
				   unsigned long attrs)
{
	while (n--) {
		dma_unmap_sgtable(dev, &h->sgts[n], DMA_FROM_DEVICE, attrs);
		sg_free_table(&h->sgts[n]);
	}
	kvfree(h->sgts);
	h->sgts = NULL;
	h->nr_sgts = 0;
}

/*
 * DMA-maps @h's pages for @dev, KVBLK_HOST_MAP_PAGES per table. Returns 0
 * or kvblk_map_pages()'s error, nothing left mapped.
 */
static int kvblk_mem_host_map(struct device *dev, struct kvblk_mem_host *h)
{
	unsigned long per = min_t(unsigned long, KVBLK_HOST_MAP_PAGES,
				  h->nr_pages);
	unsigned int n = DIV_ROUND_UP(h->nr_pages, per), i;
	int ret;

	h->sgts = kvcalloc(n, sizeof(*h->sgts), GFP_KERNEL_ACCOUNT);
	if (!h->sgts)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		unsigned long first = (unsigned long)i * per;

		ret = kvblk_map_pages(dev, h->pages + first,
				      min(per, h->nr_pages - first),
				      &h->sgts[i]);
		if (ret) {
			kvblk_mem_host_unmap_n(dev, h, i, 0);
			return ret;
		}
		cond_resched();
	}
	h->nr_sgts = n;
	return 0;
}

/* kvblk_mem_ops.unmap: the mapping's device is being removed. */
static void kvblk_mem_host_unmap(struct kvblk_buf *buf)
{
	struct kvblk_mem_host *h = buf->priv;

	kvblk_mem_host_unmap_n(buf->dev, h, h->nr_sgts, DMA_ATTR_SKIP_CPU_SYNC);
}

static void kvblk_mem_host_release(struct kvblk_buf *buf)
{
	struct kvblk_mem_host *h = buf->priv;

	/* Ranges were synced for the CPU after each batch: skip the rest. */
	if (buf->dev && !buf->dma_gone)
		kvblk_mem_host_unmap_n(buf->dev, h, h->nr_sgts,
				       DMA_ATTR_SKIP_CPU_SYNC);
	unpin_user_pages_dirty_lock(h->pages, h->nr_pages, true);
	kvblk_mem_host_free(h);
}

static const struct kvblk_mem_ops kvblk_mem_host_ops = {
	.name = "host",
	.release = kvblk_mem_host_release,
	.unmap = kvblk_mem_host_unmap,
#if IS_ENABLED(CONFIG_MMU_NOTIFIER)
	.check = kvblk_mem_host_check,
#endif
};

/*
 * Long-term pins are for anonymous, shmem and hugetlb memory only: a page
 * of a regular file's page cache written by DMA behind the file system's
 * back can break writeback. 6.5 and later refuse FOLL_LONGTERM on such
 * mappings in GUP itself (mm/gup.c, writable_file_mapping_allowed() and
 * its GUP-fast twin); 6.1 pins them. So the check and the pin run under
 * one mmap_read_lock (kvblk_mem_host_pin()): a program that maps a file
 * over the range after the check needs the write lock, and waits until the
 * pages are pinned, as io_uring's buffer registration does on 6.1.
 */
static int kvblk_check_vmas_locked(struct mm_struct *mm, unsigned long addr,
				   unsigned long len)
{
	unsigned long end = addr + len;
	struct vm_area_struct *vma;

	mmap_assert_locked(mm);
	while (addr < end) {
		vma = find_vma(mm, addr);
		if (!vma || vma->vm_start > addr)
			return -EFAULT;
		if (!vma_is_anonymous(vma) && !is_vm_hugetlb_page(vma) &&
		    !(vma->vm_file && shmem_file(vma->vm_file))) {
			pr_info_ratelimited("register: %s[%d]: only anonymous, shmem or hugetlb memory can be pinned\n",
					    current->comm, task_pid_nr(current));
			return -EOPNOTSUPP;
		}
		addr = vma->vm_end;
	}
	return 0;
}

/* pin_user_pages() as each kernel declares it; mmap_lock held. */
static long kvblk_pin_user_pages_locked(unsigned long addr, unsigned long nr,
					unsigned int gup_flags,
					struct page **pages)
{
#ifdef KVBLK_HAVE_PIN_USER_PAGES_VMAS
	return pin_user_pages(addr, nr, gup_flags, pages, NULL);
#else
	return pin_user_pages(addr, nr, gup_flags, pages);
#endif
}

/*
 * Check the range's mappings and pin it long-term under one
 * mmap_read_lock. Returns 0, -EFAULT, -EOPNOTSUPP, -EINTR or another error
 * of pin_user_pages(); nothing stays pinned on error.
 */
static int kvblk_mem_host_pin(unsigned long addr, unsigned long nr_pages,
			      struct page **pages)
{
	struct mm_struct *mm = current->mm;
	unsigned long done = 0;
	long ret;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	ret = kvblk_check_vmas_locked(mm, addr, nr_pages << PAGE_SHIFT);
	while (!ret && done < nr_pages) {
		ret = kvblk_pin_user_pages_locked(addr + (done << PAGE_SHIFT),
						  nr_pages - done,
						  KVBLK_GUP_LONGTERM,
						  pages + done);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			break;
		}
		done += ret;
		ret = fatal_signal_pending(current) ? -EINTR : 0;
	}
	mmap_read_unlock(mm);
	if (ret && done)
		unpin_user_pages(pages, done);
	return ret;
}

/**
 * kvblk_pin_user() - pin a user range for DMA into it.
 * @addr: page-aligned user address.
 * @nr_pages: pages.
 * @gup_flags: FOLL_WRITE | FOLL_PCI_P2PDMA for P2PDMA pages, pinned for
 *             one batch (pin_user_pages_fast(): no mapping check is tied to
 *             it; host memory pinned while registered goes through
 *             kvblk_mem_host_pin() instead).
 * @pages: receives @nr_pages page pointers.
 *
 * Return: 0, or -EFAULT (unmapped), -EINTR (fatal signal), another error
 * of pin_user_pages_fast(); nothing stays pinned on error.
 */
int kvblk_pin_user(unsigned long addr, unsigned long nr_pages,
		   unsigned int gup_flags, struct page **pages)
{
	unsigned long done = 0;
	int ret;

	while (done < nr_pages) {
		int n = min_t(unsigned long, nr_pages - done, INT_MAX);

		ret = pin_user_pages_fast(addr + (done << PAGE_SHIFT), n,
					  gup_flags,
					  pages + done);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			goto out_unpin;
		}
		done += ret;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto out_unpin;
		}
	}
	return 0;

out_unpin:
	if (done)
		unpin_user_pages(pages, done);
	return ret;
}

/**
 * kvblk_map_pages() - an sg_table over pinned pages, DMA-mapped for @dev.
 * @dev: the NVMe controller's DMA device.
 * @pages: @nr_pages pages.
 * @nr_pages: pages.
 * @sgt: receives the mapped table (DMA_FROM_DEVICE).
 *
 * Segments are capped at the device's DMA segment and mapping sizes.
 *
 * Return: 0; -ENOMEM; -EREMOTEIO P2PDMA pages the device cannot reach
 * (the kernel's P2PDMA map type for the pair is "not supported");
 * -EINVAL, -EIO other mapping failures.
 */
int kvblk_map_pages(struct device *dev, struct page **pages,
		    unsigned long nr_pages, struct sg_table *sgt)
{
	unsigned int max_seg;
	int ret;

	max_seg = min_t(size_t, dma_get_max_seg_size(dev),
			dma_max_mapping_size(dev));
	max_seg = min_t(size_t, max_seg, UINT_MAX);
	max_seg = round_down(max_seg, PAGE_SIZE);
	ret = sg_alloc_table_from_pages_segment(sgt, pages, nr_pages, 0,
						(u64)nr_pages << PAGE_SHIFT,
						max_seg, GFP_KERNEL_ACCOUNT);
	if (ret)
		return ret;
	ret = dma_map_sgtable(dev, sgt, DMA_FROM_DEVICE, 0);
	if (ret) {
		sg_free_table(sgt);
		return ret == -EREMOTEIO || ret == -EINVAL || ret == -EIO ?
		       ret : -ENOMEM;
	}
	return 0;
}

/**
 * kvblk_mem_host_create() - pin, charge and DMA-map a host buffer.
 * @dev: the NVMe controller's DMA device, or NULL: pin only (the
 *       block-layer engines map each I/O through the block layer).
 * @r: the request; @r->addr and @r->len are page aligned (checked by the
 *     caller).
 *
 * Return: the buffer, or ERR_PTR: -ENOMEM (RLIMIT_MEMLOCK or no memory,
 * or no DMA mapping space), -EFAULT (unmapped range), -EOPNOTSUPP (not
 * anonymous, shmem or hugetlb memory; a segment the PRP rules cannot
 * describe), -EINTR (fatal signal while pinning), -EIO (the mapping does
 * not cover the range; or dma_map_sgtable() failed for another reason),
 * -EINVAL, -EREMOTEIO (dma_map_sgtable()'s own, kvblk_map_pages()).
 */
struct kvblk_buf *kvblk_mem_host_create(struct device *dev,
					const struct kvblk_buf_reg *r)
{
	struct kvblk_mem_host *h;
	struct kvblk_buf *buf;
	unsigned int i;
	int ret;

	h = kzalloc(sizeof(*h), GFP_KERNEL_ACCOUNT);
	if (!h)
		return ERR_PTR(-ENOMEM);
	h->nr_pages = r->len >> PAGE_SHIFT;
	h->addr = r->addr;

	if (!capable(CAP_IPC_LOCK)) {
		h->user = get_uid(current_user());
		ret = kvblk_account_mem(h->user, h->nr_pages);
		if (ret) {
			free_uid(h->user);
			kfree(h);
			return ERR_PTR(ret);
		}
	}

	h->pages = kvmalloc_array(h->nr_pages, sizeof(*h->pages),
				  GFP_KERNEL_ACCOUNT);
	if (!h->pages) {
		ret = -ENOMEM;
		goto out_free;
	}
	ret = kvblk_mem_host_watch(h, r->len);
	if (ret)
		goto out_free;
	ret = kvblk_mem_host_pin(r->addr, h->nr_pages, h->pages);
	if (ret)
		goto out_free;
	/* For the block-layer engines' bio_vec tables (bvec.c); NULL is slower, not wrong. */
	h->runs = kvblk_bvec_runs(h->pages, h->nr_pages);
	if (!dev) {
		buf = kvblk_buf_alloc(NULL, KVBLK_MEM_HOST, r->len,
				      &kvblk_mem_host_ops);
		if (IS_ERR(buf)) {
			ret = PTR_ERR(buf);
			goto out_unpin;
		}
		buf->priv = h;
		buf->pages = h->pages;
		buf->runs = h->runs;
		return buf;
	}
	ret = kvblk_mem_host_map(dev, h);
	if (ret)
		goto out_unpin;

	buf = kvblk_buf_alloc(dev, KVBLK_MEM_HOST, r->len, &kvblk_mem_host_ops);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto out_unmap;
	}
	buf->priv = h;
	buf->pages = h->pages;
	buf->runs = h->runs;
	ret = kvblk_buf_segs_from_sgts(buf, h->sgts, h->nr_sgts, 0);
	if (ret) {
		kvblk_buf_abort(buf);
		goto out_unmap;
	}
	for (i = 0; i < buf->nr_segs && !buf->need_sync; i++)
		buf->need_sync = dma_need_sync(dev, buf->segs[i].addr);
	return buf;

out_unmap:
	kvblk_mem_host_unmap_n(dev, h, h->nr_sgts, 0);
out_unpin:
	unpin_user_pages(h->pages, h->nr_pages);
out_free:
	kvblk_mem_host_free(h);
	return ERR_PTR(ret);
}

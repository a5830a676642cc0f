// SPDX-License-Identifier: GPL-2.0
/*
 * mem_host.c - host memory destinations (KVBLK_MEM_HOST).
 *
 * A host buffer is pinned once (FOLL_WRITE | FOLL_LONGTERM), charged to the
 * owner's RLIMIT_MEMLOCK the way io_uring charges fixed buffers (unless the
 * caller has CAP_IPC_LOCK), and, for the PRP engine, DMA-mapped once for the
 * namespace's NVMe PCI function (dma_map_sgtable()). The block-layer engines
 * use the pinned pages (buf->pages) and never a mapping of kvblk's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/mmap_lock.h>
#include <linux/hugetlb_inline.h>
#include <linux/shmem_fs.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>

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

static void kvblk_mem_host_free(struct kvblk_mem_host *h)
{
	if (h->user) {
		kvblk_unaccount_mem(h->user, h->nr_pages);
		free_uid(h->user);
	}
	kvfree(h->pages);
	kfree(h);
}

static void kvblk_mem_host_release(struct kvblk_buf *buf)
{
	struct kvblk_mem_host *h = buf->priv;

	if (buf->dev) {
		/* Ranges were synced for the CPU after each batch: skip the rest. */
		dma_unmap_sgtable(buf->dev, &h->sgt, DMA_FROM_DEVICE,
				  DMA_ATTR_SKIP_CPU_SYNC);
		sg_free_table(&h->sgt);
	}
	unpin_user_pages_dirty_lock(h->pages, h->nr_pages, true);
	kvblk_mem_host_free(h);
}

static const struct kvblk_mem_ops kvblk_mem_host_ops = {
	.name = "host",
	.release = kvblk_mem_host_release,
};

/*
 * Long-term pins are for anonymous, shmem and hugetlb memory only: a page
 * of a regular file's page cache written by DMA behind the file system's
 * back can break writeback (newer kernels refuse FOLL_LONGTERM on such
 * mappings themselves; older ones allow it). Checked once before pinning.
 */
static int kvblk_check_vmas(unsigned long addr, unsigned long len)
{
	struct mm_struct *mm = current->mm;
	unsigned long end = addr + len;
	struct vm_area_struct *vma;
	int ret = 0;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	while (addr < end) {
		vma = find_vma(mm, addr);
		if (!vma || vma->vm_start > addr) {
			ret = -EFAULT;
			break;
		}
		if (!vma_is_anonymous(vma) && !is_vm_hugetlb_page(vma) &&
		    !(vma->vm_file && shmem_file(vma->vm_file))) {
			pr_info_ratelimited("register: %s[%d]: only anonymous, shmem or hugetlb memory can be pinned\n",
					    current->comm, task_pid_nr(current));
			ret = -EOPNOTSUPP;
			break;
		}
		addr = vma->vm_end;
	}
	mmap_read_unlock(mm);
	return ret;
}

/**
 * kvblk_pin_user() - pin a user range for DMA into it.
 * @addr: page-aligned user address.
 * @nr_pages: pages.
 * @gup_flags: FOLL_WRITE | FOLL_LONGTERM (KVBLK_GUP_LONGTERM) for memory
 *             pinned while registered; FOLL_WRITE | FOLL_PCI_P2PDMA for
 *             P2PDMA pages, pinned for one batch.
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
 * Return: the buffer, or ERR_PTR: -ENOMEM (RLIMIT_MEMLOCK or no memory),
 * -EFAULT (unmapped range), -EOPNOTSUPP (not anonymous, shmem or hugetlb
 * memory; a segment the PRP rules cannot describe), -EINTR (fatal signal
 * while pinning), -EIO (the mapping does not cover the range).
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
	ret = kvblk_check_vmas(r->addr, r->len);
	if (ret)
		goto out_free;
	ret = kvblk_pin_user(r->addr, h->nr_pages, KVBLK_GUP_LONGTERM, h->pages);
	if (ret)
		goto out_free;
	if (!dev) {
		buf = kvblk_buf_alloc(NULL, KVBLK_MEM_HOST, r->len,
				      &kvblk_mem_host_ops);
		if (IS_ERR(buf)) {
			ret = PTR_ERR(buf);
			goto out_unpin;
		}
		buf->priv = h;
		buf->pages = h->pages;
		return buf;
	}
	ret = kvblk_map_pages(dev, h->pages, h->nr_pages, &h->sgt);
	if (ret) {
		ret = -ENOMEM;
		goto out_unpin;
	}

	buf = kvblk_buf_alloc(dev, KVBLK_MEM_HOST, r->len, &kvblk_mem_host_ops);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto out_unmap;
	}
	buf->priv = h;
	buf->pages = h->pages;
	ret = kvblk_buf_segs_from_sgt(buf, &h->sgt, 0);
	if (ret) {
		kvblk_buf_abort(buf);
		goto out_unmap;
	}
	for (i = 0; i < buf->nr_segs && !buf->need_sync; i++)
		buf->need_sync = dma_need_sync(dev, buf->segs[i].addr);
	return buf;

out_unmap:
	dma_unmap_sgtable(dev, &h->sgt, DMA_FROM_DEVICE, 0);
	sg_free_table(&h->sgt);
out_unpin:
	unpin_user_pages(h->pages, h->nr_pages);
out_free:
	kvblk_mem_host_free(h);
	return ERR_PTR(ret);
}

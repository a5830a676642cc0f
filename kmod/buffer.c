// SPDX-License-Identifier: GPL-2.0
/*
 * buffer.c - KVBLK_IOC_REGISTER_BUFFER / KVBLK_IOC_UNREGISTER_BUFFER.
 *
 * A host buffer is pinned once (FOLL_WRITE | FOLL_LONGTERM), charged to the
 * owner's RLIMIT_MEMLOCK the way io_uring charges fixed buffers (unless the
 * caller has CAP_IPC_LOCK), and DMA-mapped once for the namespace's NVMe PCI
 * function. The mapping is kept as a table of DMA segments, the one form
 * every memory kind becomes and the PRP builder reads.
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

static void kvblk_buf_free(struct kref *ref)
{
	struct kvblk_buf *buf = container_of(ref, struct kvblk_buf, ref);

	kvfree(buf->segs);
	/* Ranges were synced for the CPU after each batch: skip the rest. */
	dma_unmap_sgtable(buf->dev, &buf->sgt, DMA_FROM_DEVICE,
			  DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(&buf->sgt);
	unpin_user_pages_dirty_lock(buf->pages, buf->nr_pages, true);
	kvfree(buf->pages);
	if (buf->user) {
		kvblk_unaccount_mem(buf->user, buf->nr_pages);
		free_uid(buf->user);
	}
	put_device(buf->dev);
	kfree(buf);
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
		}
	}
}

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

static int kvblk_pin(struct kvblk_buf *buf, unsigned long addr)
{
	unsigned long done = 0;
	int ret;

	while (done < buf->nr_pages) {
		int n = min_t(unsigned long, buf->nr_pages - done, INT_MAX);

		ret = pin_user_pages_fast(addr + (done << PAGE_SHIFT), n,
					  FOLL_WRITE | FOLL_LONGTERM,
					  buf->pages + done);
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
		unpin_user_pages(buf->pages, done);
	return ret;
}

/* Build the segment table from the DMA mapping and check PRP rules. */
static int kvblk_build_segs(struct kvblk_buf *buf)
{
	struct scatterlist *sg;
	unsigned int i;
	u64 off = 0;

	buf->segs = kvmalloc_array(buf->sgt.nents, sizeof(*buf->segs),
				   GFP_KERNEL_ACCOUNT);
	if (!buf->segs)
		return -ENOMEM;
	for_each_sgtable_dma_sg(&buf->sgt, sg, i) {
		dma_addr_t a = sg_dma_address(sg);
		u32 len = sg_dma_len(sg);

		/* Every PRP entry after the first must start a 4 KiB page. */
		if ((a | len) & (KVBLK_CTRL_PAGE_SIZE - 1)) {
			pr_warn_ratelimited("DMA segment %pad+%u not 4 KiB aligned\n",
					    &a, len);
			return -EOPNOTSUPP;
		}
		buf->segs[i].addr = a;
		buf->segs[i].off = off;
		buf->segs[i].len = len;
		if (dma_need_sync(buf->dev, a))
			buf->need_sync = true;
		off += len;
	}
	buf->nr_segs = buf->sgt.nents;
	if (off != buf->len)
		return -EIO;
	return 0;
}

static struct kvblk_buf *kvblk_buf_create_host(struct device *dev, u64 addr,
					       u64 len)
{
	struct kvblk_buf *buf;
	unsigned int max_seg;
	int ret;

	buf = kzalloc(sizeof(*buf), GFP_KERNEL_ACCOUNT);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	kref_init(&buf->ref);
	atomic_set(&buf->inflight, 0);
	buf->len = len;
	buf->nr_pages = len >> PAGE_SHIFT;
	buf->dev = dev;

	if (!capable(CAP_IPC_LOCK)) {
		buf->user = get_uid(current_user());
		ret = kvblk_account_mem(buf->user, buf->nr_pages);
		if (ret)
			goto out_put_user;
	}

	buf->pages = kvmalloc_array(buf->nr_pages, sizeof(*buf->pages),
				    GFP_KERNEL_ACCOUNT);
	if (!buf->pages) {
		ret = -ENOMEM;
		goto out_unaccount;
	}

	ret = kvblk_check_vmas(addr, len);
	if (ret)
		goto out_free_pages;
	ret = kvblk_pin(buf, addr);
	if (ret)
		goto out_free_pages;

	max_seg = min_t(size_t, dma_get_max_seg_size(dev),
			dma_max_mapping_size(dev));
	max_seg = min_t(size_t, max_seg, UINT_MAX);
	max_seg = round_down(max_seg, PAGE_SIZE);
	ret = sg_alloc_table_from_pages_segment(&buf->sgt, buf->pages,
						buf->nr_pages, 0, len, max_seg,
						GFP_KERNEL_ACCOUNT);
	if (ret)
		goto out_unpin;

	ret = dma_map_sgtable(dev, &buf->sgt, DMA_FROM_DEVICE, 0);
	if (ret) {
		ret = -ENOMEM;
		goto out_free_sgt;
	}

	ret = kvblk_build_segs(buf);
	if (ret)
		goto out_unmap;

	get_device(dev);
	return buf;

out_unmap:
	kvfree(buf->segs);
	dma_unmap_sgtable(dev, &buf->sgt, DMA_FROM_DEVICE, 0);
out_free_sgt:
	sg_free_table(&buf->sgt);
out_unpin:
	unpin_user_pages(buf->pages, buf->nr_pages);
out_free_pages:
	kvfree(buf->pages);
out_unaccount:
	if (buf->user)
		kvblk_unaccount_mem(buf->user, buf->nr_pages);
out_put_user:
	if (buf->user)
		free_uid(buf->user);
	kfree(buf);
	return ERR_PTR(ret);
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
	struct kvblk_ns *ns;
	u32 usize, id;
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
	if (r.kind != KVBLK_MEM_HOST)
		return -EOPNOTSUPP;
	if (!r.len || r.len > KVBLK_MAX_BUF_BYTES || !PAGE_ALIGNED(r.addr) ||
	    !PAGE_ALIGNED(r.len) || r.addr + r.len < r.addr)
		return -EINVAL;

	ns = kvblk_ctx_ns(ctx);
	if (!ns)
		return -ENXIO;

	/* Cheap check first; the insert below checks again. */
	mutex_lock(&ctx->lock);
	ret = ctx->nr_bufs >= KVBLK_MAX_BUFS ? -ENOSPC : 0;
	mutex_unlock(&ctx->lock);
	if (ret)
		return ret;

	buf = kvblk_buf_create_host(ns->info.dma_dev, r.addr, r.len);
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
	ctx->nr_bufs++;
	r.buf_id = id;
	ret = kvblk_copy_out(uarg, &r, sizeof(r), usize);
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

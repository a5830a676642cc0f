// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_fake_nvp2p.c - test-only stand-in for nvidia.ko's nvidia-p2p
 * interface, over host pages. Never installed; the VM suite loads it before
 * kvblk.ko, which finds its exports with symbol_get() as it would find the
 * NVIDIA driver's.
 *
 * "GPU memory" is a set of 64 KiB physically contiguous chunks (order-4 page
 * blocks) at a fake device virtual address, made and freed through
 * /dev/kvblk_fake_gpu (kvblk_fake_nvp2p.h). The nvidia_p2p_* functions
 * follow the behaviour kmod/nv-p2p.h describes:
 *  - get_pages needs a free callback; get_pages_persistent does not (and can
 *    be switched off, as on MIG);
 *  - a free (ioctl or close of the owning file) calls each callback without
 *    holding any lock of this module, then unlinks that registration's page
 *    table and frees its DMA mappings itself, then frees the table at once,
 *    poisoned (as NVIDIA's nv_p2p_mem_info_free_callback() does, so a user
 *    of a table after its callback returned reads garbage); put_pages on a
 *    table whose callback runs blocks until the callback has returned;
 *    put_pages on a table freed that way returns 0 and touches nothing (as
 *    NVIDIA's does: its RM lookup finds the table gone). Only the address of
 *    a freed table is remembered (until put or module exit), so such a late
 *    put is recognised;
 *  - dma_unmap_pages never blocks on a callback;
 *  - free_page_table / free_dma_mapping are no-ops (as in current drivers).
 * Counts of everything handed out are kept so that tests can check that
 * they return to their baseline.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "nv-p2p.h"
#include "kvblk_fake_nvp2p.h"

#define FAKE_CHUNK		SZ_64K
#define FAKE_CHUNK_ORDER	get_order(SZ_64K)
#define FAKE_MAX_ALLOC		(1ULL << 30)
#define FAKE_VA_BASE		0x7e0000000000ULL

static bool g_persistent = true;
module_param_named(persistent, g_persistent, bool, 0644);
MODULE_PARM_DESC(persistent, "nvidia_p2p_get_pages_persistent() works (else -ENOTSUPP). Default: 1");

static uint g_pt_version = NVIDIA_P2P_PAGE_TABLE_VERSION;
module_param_named(pt_version, g_pt_version, uint, 0644);
MODULE_PARM_DESC(pt_version, "Version put into page tables. Default: 0x00020000");

static uint g_map_version = NVIDIA_P2P_DMA_MAPPING_VERSION;
module_param_named(map_version, g_map_version, uint, 0644);
MODULE_PARM_DESC(map_version, "Version put into DMA mappings. Default: 0x00020003");

struct fake_alloc {
	struct list_head node;		/* fake_allocs or fake_quarantine */
	u64 va;
	u64 len;
	unsigned int nr;		/* 64 KiB chunks */
	struct page **chunks;
	struct file *owner;
	unsigned int refs;		/* 1 until freed + registrations */
	bool freed;			/* its address is gone */
	bool quarantine;		/* poison and keep when the last ref goes */
};

struct fake_reg {
	struct list_head node;		/* fake_regs */
	u64 id;
	struct fake_alloc *alloc;	/* referenced */
	unsigned int first;		/* first chunk */
	void (*free_callback)(void *data);	/* NULL: persistent */
	void *data;
	bool in_callback;
	struct list_head maps;
	struct nvidia_p2p_page_table pt;
	struct nvidia_p2p_page *pages;
	struct nvidia_p2p_page **page_ptrs;
};

/* The address of a table a free callback freed, for a late put_pages. */
struct fake_dead {
	struct list_head node;		/* fake_dead_regs */
	const struct nvidia_p2p_page_table *pt;	/* never dereferenced */
};

struct fake_map {
	struct list_head node;		/* fake_reg.maps */
	struct fake_reg *reg;
	struct pci_dev *peer;		/* referenced */
	struct nvidia_p2p_dma_mapping m;
};

/* Everything below; never held while a free callback runs. */
static DEFINE_MUTEX(fake_lock);
static DECLARE_WAIT_QUEUE_HEAD(fake_wq);	/* a registration went away */
static LIST_HEAD(fake_allocs);
static LIST_HEAD(fake_quarantine);
static LIST_HEAD(fake_regs);
static LIST_HEAD(fake_dead_regs);	/* struct fake_dead */
static u64 fake_next_va = FAKE_VA_BASE;
static u64 fake_next_id = 1;
static struct kvblk_fake_gpu_stats fake_stats;

static void fake_pages_free(struct fake_alloc *a)
{
	unsigned int i;

	for (i = 0; i < a->nr; i++)
		if (a->chunks[i])
			__free_pages(a->chunks[i], FAKE_CHUNK_ORDER);
	kvfree(a->chunks);
	kfree(a);
}

/* Drop a reference; the last one frees the pages or quarantines them. */
static void fake_alloc_put(struct fake_alloc *a)
{
	unsigned int i;

	lockdep_assert_held(&fake_lock);
	if (--a->refs)
		return;
	list_del(&a->node);
	fake_stats.allocs--;
	if (!a->quarantine) {
		fake_pages_free(a);
		return;
	}
	for (i = 0; i < a->nr; i++)
		memset(page_address(a->chunks[i]), KVBLK_FAKE_GPU_POISON,
		       FAKE_CHUNK);
	list_add_tail(&a->node, &fake_quarantine);
	fake_stats.quarantined++;
}

static struct fake_alloc *fake_alloc_find(u64 va)
{
	struct fake_alloc *a;

	list_for_each_entry(a, &fake_allocs, node)
		if (!a->freed && a->va == va)
			return a;
	return NULL;
}

/* The live allocation holding [va, va + len), or NULL. */
static struct fake_alloc *fake_alloc_range(u64 va, u64 len)
{
	struct fake_alloc *a;

	list_for_each_entry(a, &fake_allocs, node)
		if (!a->freed && va >= a->va && len <= a->len &&
		    va - a->va <= a->len - len)
			return a;
	return NULL;
}

static struct fake_reg *fake_reg_find(struct nvidia_p2p_page_table *pt)
{
	struct fake_reg *r;

	list_for_each_entry(r, &fake_regs, node)
		if (&r->pt == pt)
			return r;
	return NULL;
}

static bool fake_reg_exists(u64 id)
{
	struct fake_reg *r;
	bool found = false;

	mutex_lock(&fake_lock);
	list_for_each_entry(r, &fake_regs, node)
		if (r->id == id)
			found = true;
	mutex_unlock(&fake_lock);
	return found;
}

static void fake_map_free(struct fake_map *fm)
{
	unsigned int i;

	lockdep_assert_held(&fake_lock);
	for (i = 0; i < fm->m.entries; i++)
		dma_unmap_page(&fm->peer->dev, fm->m.dma_addresses[i], FAKE_CHUNK,
			       DMA_BIDIRECTIONAL);
	list_del(&fm->node);
	pci_dev_put(fm->peer);
	kfree(fm->m.dma_addresses);
	kfree(fm);
	fake_stats.dma_mappings--;
}

/*
 * Free a registration and whatever mappings are left of it; @dead: a free
 * callback ended it: poison the table and remember only its address on
 * fake_dead_regs (if that allocation fails, a late put counts as an error).
 */
static void fake_reg_free(struct fake_reg *r, bool dead)
{
	struct fake_map *fm, *tmp;

	lockdep_assert_held(&fake_lock);
	list_for_each_entry_safe(fm, tmp, &r->maps, node)
		fake_map_free(fm);
	list_del(&r->node);
	fake_stats.page_tables--;
	if (!r->free_callback)
		fake_stats.persistent--;
	fake_alloc_put(r->alloc);
	r->alloc = NULL;
	kvfree(r->page_ptrs);
	kvfree(r->pages);
	r->page_ptrs = NULL;
	r->pages = NULL;
	if (dead) {
		struct fake_dead *d = kzalloc(sizeof(*d), GFP_KERNEL);

		if (d) {
			d->pt = &r->pt;
			list_add_tail(&d->node, &fake_dead_regs);
		}
		memset(r, KVBLK_FAKE_GPU_POISON, sizeof(*r));
	}
	kfree(r);
	wake_up_all(&fake_wq);
}

/* A late put_pages of a table a callback unlinked: forget it, return 0. */
static bool fake_reg_put_dead(struct nvidia_p2p_page_table *pt)
{
	struct fake_dead *d;

	lockdep_assert_held(&fake_lock);
	list_for_each_entry(d, &fake_dead_regs, node) {
		if (d->pt == pt) {
			list_del(&d->node);
			kfree(d);
			return true;
		}
	}
	return false;
}

static int fake_get(u64 va, u64 len, struct nvidia_p2p_page_table **page_table,
		    void (*free_callback)(void *data), void *data)
{
	struct fake_alloc *a;
	struct fake_reg *r;
	unsigned int i, n;

	if (!page_table || !len || !IS_ALIGNED(va, FAKE_CHUNK) ||
	    !IS_ALIGNED(len, FAKE_CHUNK))
		return -EINVAL;
	n = len / FAKE_CHUNK;
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	r->pages = kvcalloc(n, sizeof(*r->pages), GFP_KERNEL);
	r->page_ptrs = kvcalloc(n, sizeof(*r->page_ptrs), GFP_KERNEL);
	if (!r->pages || !r->page_ptrs) {
		kvfree(r->pages);
		kvfree(r->page_ptrs);
		kfree(r);
		return -ENOMEM;
	}
	INIT_LIST_HEAD(&r->maps);
	r->free_callback = free_callback;
	r->data = data;

	mutex_lock(&fake_lock);
	a = fake_alloc_range(va, len);
	if (!a) {
		mutex_unlock(&fake_lock);
		kvfree(r->pages);
		kvfree(r->page_ptrs);
		kfree(r);
		return -EINVAL;
	}
	a->refs++;
	r->alloc = a;
	r->first = (va - a->va) / FAKE_CHUNK;
	for (i = 0; i < n; i++) {
		r->pages[i].physical_address =
			page_to_phys(a->chunks[r->first + i]);
		r->page_ptrs[i] = &r->pages[i];
	}
	r->pt.version = READ_ONCE(g_pt_version);
	r->pt.page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	r->pt.pages = r->page_ptrs;
	r->pt.entries = n;
	r->id = fake_next_id++;
	list_add_tail(&r->node, &fake_regs);
	fake_stats.page_tables++;
	if (!free_callback)
		fake_stats.persistent++;
	mutex_unlock(&fake_lock);
	*page_table = &r->pt;
	return 0;
}

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	if (p2p_token || va_space || !free_callback)
		return -EINVAL;
	return fake_get(virtual_address, length, page_table, free_callback,
			data);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	if (!READ_ONCE(g_persistent))
		return -ENOTSUPP;
	if (flags)
		return -EINVAL;
	return fake_get(virtual_address, length, page_table, NULL, NULL);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_get_pages_persistent);

static int fake_put(struct nvidia_p2p_page_table *pt, bool persistent)
{
	struct fake_reg *r;
	u64 id;

	mutex_lock(&fake_lock);
	r = fake_reg_find(pt);
	if (!r && !persistent && fake_reg_put_dead(pt)) {
		mutex_unlock(&fake_lock);
		return 0;
	}
	if (!r || !r->free_callback != persistent) {
		fake_stats.errors++;
		mutex_unlock(&fake_lock);
		pr_err("put_pages%s of an unknown page table\n",
		       persistent ? "_persistent" : "");
		return -EINVAL;
	}
	if (r->in_callback) {
		/* Like NVIDIA's RM: wait for the callback; the table is gone. */
		id = r->id;
		mutex_unlock(&fake_lock);
		wait_event(fake_wq, !fake_reg_exists(id));
		mutex_lock(&fake_lock);
		fake_reg_put_dead(pt);
		mutex_unlock(&fake_lock);
		return 0;
	}
	if (!list_empty(&r->maps)) {
		fake_stats.errors++;
		pr_err("put_pages%s of a page table still DMA-mapped\n",
		       persistent ? "_persistent" : "");
	}
	fake_reg_free(r, false);
	mutex_unlock(&fake_lock);
	return 0;
}

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	return fake_put(page_table, false);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	if (flags)
		return -EINVAL;
	return fake_put(page_table, true);
}
EXPORT_SYMBOL_GPL(nvidia_p2p_put_pages_persistent);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	struct fake_map *fm;
	struct fake_reg *r;
	unsigned int i;
	int ret = 0;

	if (!peer || !dma_mapping)
		return -EINVAL;
	mutex_lock(&fake_lock);
	r = fake_reg_find(page_table);
	if (!r || r->in_callback) {
		ret = -EINVAL;
		goto out_unlock;
	}
	fm = kzalloc(sizeof(*fm), GFP_KERNEL);
	if (!fm) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	fm->m.dma_addresses = kcalloc(r->pt.entries, sizeof(u64), GFP_KERNEL);
	if (!fm->m.dma_addresses) {
		kfree(fm);
		ret = -ENOMEM;
		goto out_unlock;
	}
	fm->reg = r;
	fm->peer = pci_dev_get(peer);
	fm->m.version = READ_ONCE(g_map_version);
	fm->m.page_size_type = NVIDIA_P2P_PAGE_SIZE_64KB;
	fm->m.pci_dev = peer;
	for (i = 0; i < r->pt.entries; i++) {
		dma_addr_t d = dma_map_page(&peer->dev,
					    r->alloc->chunks[r->first + i], 0,
					    FAKE_CHUNK, DMA_BIDIRECTIONAL);

		if (dma_mapping_error(&peer->dev, d)) {
			ret = -ENOMEM;
			break;
		}
		fm->m.dma_addresses[i] = d;
		fm->m.entries = i + 1;
	}
	list_add_tail(&fm->node, &r->maps);
	fake_stats.dma_mappings++;
	if (ret)
		fake_map_free(fm);
	else
		*dma_mapping = &fm->m;
out_unlock:
	mutex_unlock(&fake_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct fake_map *fm;
	struct fake_reg *r;

	mutex_lock(&fake_lock);
	r = fake_reg_find(page_table);
	if (r) {
		list_for_each_entry(fm, &r->maps, node) {
			if (&fm->m == dma_mapping && fm->peer == peer) {
				fake_map_free(fm);
				mutex_unlock(&fake_lock);
				return 0;
			}
		}
	}
	fake_stats.errors++;
	mutex_unlock(&fake_lock);
	pr_err("dma_unmap_pages of an unknown mapping\n");
	return -EINVAL;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_dma_unmap_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_page_table);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	return 0;
}
EXPORT_SYMBOL_GPL(nvidia_p2p_free_dma_mapping);

/*
 * cudaFree: the address goes away at once; every callback registration is
 * called back (no lock held), then its tables are freed; the pages follow
 * when no persistent registration holds them.
 */
static void fake_free(struct fake_alloc *a, bool quarantine)
{
	struct fake_reg *r;
	bool found;

	lockdep_assert_held(&fake_lock);
	a->freed = true;
	a->quarantine = quarantine;
	do {
		found = false;
		list_for_each_entry(r, &fake_regs, node) {
			if (r->alloc == a && r->free_callback && !r->in_callback) {
				found = true;
				break;
			}
		}
		if (!found)
			break;
		r->in_callback = true;
		fake_stats.callbacks++;
		mutex_unlock(&fake_lock);
		r->free_callback(r->data);
		mutex_lock(&fake_lock);
		fake_reg_free(r, true);
	} while (true);
	fake_alloc_put(a);
}

static long fake_ioctl_alloc(struct file *file, void __user *uarg)
{
	struct kvblk_fake_gpu_alloc req;
	struct fake_alloc *a;
	unsigned int i;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (!req.len || !IS_ALIGNED(req.len, FAKE_CHUNK) ||
	    req.len > FAKE_MAX_ALLOC)
		return -EINVAL;
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	a->len = req.len;
	a->nr = req.len / FAKE_CHUNK;
	a->chunks = kvcalloc(a->nr, sizeof(*a->chunks), GFP_KERNEL);
	if (!a->chunks) {
		kfree(a);
		return -ENOMEM;
	}
	for (i = 0; i < a->nr; i++) {
		a->chunks[i] = alloc_pages(GFP_KERNEL | __GFP_ZERO | __GFP_NOWARN,
					   FAKE_CHUNK_ORDER);
		if (!a->chunks[i]) {
			fake_pages_free(a);
			return -ENOMEM;
		}
	}
	a->owner = file;
	a->refs = 1;
	mutex_lock(&fake_lock);
	a->va = fake_next_va;
	/* A 64 KiB hole between allocations catches off-by-one ranges. */
	fake_next_va += a->len + FAKE_CHUNK;
	list_add_tail(&a->node, &fake_allocs);
	fake_stats.allocs++;
	mutex_unlock(&fake_lock);
	req.va = a->va;
	if (copy_to_user(uarg, &req, sizeof(req))) {
		mutex_lock(&fake_lock);
		fake_free(a, false);
		mutex_unlock(&fake_lock);
		return -EFAULT;
	}
	return 0;
}

static long fake_ioctl_free(void __user *uarg)
{
	struct kvblk_fake_gpu_free req;
	struct fake_alloc *a;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	if (req.pad || (req.flags & ~KVBLK_FAKE_GPU_FREE_QUARANTINE))
		return -EINVAL;
	mutex_lock(&fake_lock);
	a = fake_alloc_find(req.va);
	if (a)
		fake_free(a, req.flags & KVBLK_FAKE_GPU_FREE_QUARANTINE);
	mutex_unlock(&fake_lock);
	return a ? 0 : -EINVAL;
}

static long fake_ioctl_io(void __user *uarg, bool write)
{
	struct kvblk_fake_gpu_io req;
	struct fake_alloc *a;
	char __user *u;
	long ret = 0;
	u64 off, end;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	u = u64_to_user_ptr(req.uptr);
	mutex_lock(&fake_lock);
	a = fake_alloc_find(req.va);
	if (!a || req.off > a->len || req.len > a->len - req.off) {
		ret = -EINVAL;
		goto out_unlock;
	}
	for (off = req.off, end = req.off + req.len; off < end; ) {
		u64 n = min_t(u64, end - off, FAKE_CHUNK - off % FAKE_CHUNK);
		char *k = page_address(a->chunks[off / FAKE_CHUNK]) +
			  off % FAKE_CHUNK;
		unsigned long left;

		if (write)
			left = copy_from_user(k, u, n);
		else
			left = copy_to_user(u, k, n);
		if (left) {
			ret = -EFAULT;
			break;
		}
		off += n;
		u += n;
	}
out_unlock:
	mutex_unlock(&fake_lock);
	return ret;
}

static long fake_ioctl_qcheck(void __user *uarg)
{
	struct kvblk_fake_gpu_qcheck req;
	struct fake_alloc *a, *found = NULL;
	unsigned int i, j;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	mutex_lock(&fake_lock);
	list_for_each_entry(a, &fake_quarantine, node)
		if (a->va == req.va)
			found = a;
	if (found) {
		list_del(&found->node);
		fake_stats.quarantined--;
	}
	mutex_unlock(&fake_lock);
	if (!found)
		return -EINVAL;
	req.bad_bytes = 0;
	for (i = 0; i < found->nr; i++) {
		const u8 *p = page_address(found->chunks[i]);

		for (j = 0; j < FAKE_CHUNK; j++)
			req.bad_bytes += p[j] != KVBLK_FAKE_GPU_POISON;
	}
	fake_pages_free(found);
	return copy_to_user(uarg, &req, sizeof(req)) ? -EFAULT : 0;
}

static long fake_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;
	struct kvblk_fake_gpu_stats st;

	switch (cmd) {
	case KVBLK_FAKE_GPU_ALLOC:
		return fake_ioctl_alloc(file, uarg);
	case KVBLK_FAKE_GPU_FREE:
		return fake_ioctl_free(uarg);
	case KVBLK_FAKE_GPU_READ:
		return fake_ioctl_io(uarg, false);
	case KVBLK_FAKE_GPU_WRITE:
		return fake_ioctl_io(uarg, true);
	case KVBLK_FAKE_GPU_QCHECK:
		return fake_ioctl_qcheck(uarg);
	case KVBLK_FAKE_GPU_STATS:
		mutex_lock(&fake_lock);
		st = fake_stats;
		mutex_unlock(&fake_lock);
		return copy_to_user(uarg, &st, sizeof(st)) ? -EFAULT : 0;
	default:
		return -ENOTTY;
	}
}

/* The owner went away (a CUDA context of a dying process): free its memory. */
static int fake_release(struct inode *inode, struct file *file)
{
	struct fake_alloc *a, *tmp;
	bool found;

	mutex_lock(&fake_lock);
	do {
		found = false;
		list_for_each_entry(a, &fake_allocs, node) {
			if (a->owner == file && !a->freed) {
				found = true;
				break;
			}
		}
		/* fake_free() drops the lock: look again from the start. */
		if (found)
			fake_free(a, false);
	} while (found);
	list_for_each_entry_safe(a, tmp, &fake_quarantine, node) {
		if (a->owner == file) {
			list_del(&a->node);
			fake_stats.quarantined--;
			fake_pages_free(a);
		}
	}
	mutex_unlock(&fake_lock);
	return 0;
}

static const struct file_operations fake_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = fake_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.release = fake_release,
};

static struct miscdevice fake_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kvblk_fake_gpu",
	.fops = &fake_fops,
	.mode = 0600,
};

static int __init fake_init(void)
{
	return misc_register(&fake_misc);
}

static void __exit fake_exit(void)
{
	struct fake_alloc *a, *tmp;
	struct fake_dead *d, *dtmp;

	misc_deregister(&fake_misc);
	list_for_each_entry_safe(a, tmp, &fake_quarantine, node) {
		list_del(&a->node);
		fake_pages_free(a);
	}
	list_for_each_entry_safe(d, dtmp, &fake_dead_regs, node) {
		list_del(&d->node);
		kfree(d);
	}
	/* Files are closed and symbol users gone: nothing else can be left. */
	WARN_ON(!list_empty(&fake_allocs) || !list_empty(&fake_regs));
}

module_init(fake_init);
module_exit(fake_exit);

MODULE_DESCRIPTION("kvblk test-only stand-in for the nvidia-p2p interface");
MODULE_LICENSE("GPL");

// SPDX-License-Identifier: GPL-2.0
/*
 * mem_cuda.c - CUDA device memory destinations (KVBLK_MEM_CUDA) through
 * NVIDIA's nvidia-p2p interface (GPUDirect RDMA).
 *
 * The GPU pages of the range are pinned, with
 * nvidia_p2p_get_pages_persistent() where the driver has it and it works
 * (not on MIG or vGPU), else with nvidia_p2p_get_pages() and a free
 * callback, then DMA-mapped for the namespace's NVMe PCI function with
 * nvidia_p2p_dma_map_pages(): one DMA address per 64 KiB GPU page, which
 * becomes the buffer's segment table. Loads then take the same PRP path as
 * host memory.
 *
 * kvblk.ko does not link against nvidia.ko: every registration resolves the
 * nvidia_p2p_* functions with __symbol_get() (which also pins the exporting
 * module) and drops them when the buffer is released, so the module loads
 * and serves host memory on machines without the NVIDIA driver, and
 * nvidia.ko cannot be unloaded under a registered buffer.
 *
 * Facts about the interface: kmod/nv-p2p.h and shared/notes/kernel-apis.md
 * section 4.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "kvblk.h"

#ifdef KVBLK_HAVE_NV_P2P_H
#include KVBLK_NV_P2P_HEADER	/* the NVIDIA driver's (found by kmod/Kbuild) */
#else
#include "nv-p2p.h"	/* the project's declaration */
#endif

#define KVBLK_GPU_PAGE	SZ_64K

/* The nvidia_p2p_* functions, resolved at run time. */
struct kvblk_nvp2p {
	typeof(&nvidia_p2p_get_pages) get_pages;
	typeof(&nvidia_p2p_put_pages) put_pages;
	typeof(&nvidia_p2p_dma_map_pages) dma_map_pages;
	typeof(&nvidia_p2p_dma_unmap_pages) dma_unmap_pages;
	typeof(&nvidia_p2p_free_page_table) free_page_table;
	typeof(&nvidia_p2p_free_dma_mapping) free_dma_mapping;
	/*
	 * Both or neither: older drivers (and their headers) lack them, so
	 * the types are spelled out here.
	 */
	int (*get_pages_persistent)(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);
	int (*put_pages_persistent)(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);
};

static const struct {
	const char *name;
	size_t off;
	bool optional;
} kvblk_nvp2p_syms[] = {
	{ "nvidia_p2p_get_pages", offsetof(struct kvblk_nvp2p, get_pages) },
	{ "nvidia_p2p_put_pages", offsetof(struct kvblk_nvp2p, put_pages) },
	{ "nvidia_p2p_dma_map_pages", offsetof(struct kvblk_nvp2p, dma_map_pages) },
	{ "nvidia_p2p_dma_unmap_pages", offsetof(struct kvblk_nvp2p, dma_unmap_pages) },
	{ "nvidia_p2p_free_page_table", offsetof(struct kvblk_nvp2p, free_page_table) },
	{ "nvidia_p2p_free_dma_mapping", offsetof(struct kvblk_nvp2p, free_dma_mapping) },
	{ "nvidia_p2p_get_pages_persistent",
	  offsetof(struct kvblk_nvp2p, get_pages_persistent), true },
	{ "nvidia_p2p_put_pages_persistent",
	  offsetof(struct kvblk_nvp2p, put_pages_persistent), true },
};

static void **kvblk_nvp2p_slot(struct kvblk_nvp2p *nv, unsigned int i)
{
	return (void **)((char *)nv + kvblk_nvp2p_syms[i].off);
}

static void kvblk_nvp2p_put(struct kvblk_nvp2p *nv)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(kvblk_nvp2p_syms); i++) {
		void **slot = kvblk_nvp2p_slot(nv, i);

		if (*slot)
			__symbol_put(kvblk_nvp2p_syms[i].name);
		*slot = NULL;
	}
}

/*
 * Resolve and hold every function. Return: 0, or -EOPNOTSUPP when a
 * required one is not exported (no NVIDIA driver loaded, or one without
 * GPL exports of nvidia-p2p); nothing is held then.
 */
static int kvblk_nvp2p_get(struct kvblk_nvp2p *nv)
{
	unsigned int i;

	memset(nv, 0, sizeof(*nv));
	for (i = 0; i < ARRAY_SIZE(kvblk_nvp2p_syms); i++) {
		*kvblk_nvp2p_slot(nv, i) = __symbol_get(kvblk_nvp2p_syms[i].name);
		if (!*kvblk_nvp2p_slot(nv, i) && !kvblk_nvp2p_syms[i].optional) {
			kvblk_nvp2p_put(nv);
			return -EOPNOTSUPP;
		}
	}
	if (!nv->get_pages_persistent != !nv->put_pages_persistent) {
		if (nv->get_pages_persistent)
			__symbol_put("nvidia_p2p_get_pages_persistent");
		if (nv->put_pages_persistent)
			__symbol_put("nvidia_p2p_put_pages_persistent");
		nv->get_pages_persistent = NULL;
		nv->put_pages_persistent = NULL;
	}
	return 0;
}

/**
 * kvblk_mem_cuda_available() - whether nvidia-p2p can be used now.
 *
 * Return: true when the NVIDIA driver (or a stand-in) exports it.
 */
bool kvblk_mem_cuda_available(void)
{
	struct kvblk_nvp2p nv;

	if (kvblk_nvp2p_get(&nv))
		return false;
	kvblk_nvp2p_put(&nv);
	return true;
}

/*
 * Ownership of the NVIDIA tables of a callback registration, in ->state.
 *
 * Two parties may end a registration: release (the last reference to the
 * buffer went: unregister, close, or a failed registration) and NVIDIA's
 * free callback (cudaFree, or the owning process died). After the callback
 * returns NVIDIA frees the page table and every DMA mapping of it, so
 * whoever comes second must keep its hands off them, and neither may free
 * what the other still uses. Each claims the tables with one cmpxchg from
 * CREATING or LIVE:
 *
 *   callback wins (-> REVOKING): it fences the buffer (kvblk_buf_revoke():
 *     no new command, none in flight), hands the tables back the way
 *     NVIDIA's guide says (free_dma_mapping/free_page_table, no-ops in
 *     current drivers; never put_pages) and completes ->gone (-> GONE).
 *     Release, or a registration that was still being created, waits for
 *     ->gone (the callback uses the buffer until then) and makes no NVIDIA
 *     call at all.
 *
 *   release wins (-> RELEASING): no command targets the buffer (release runs
 *     only then), so nothing needs fencing. It unmaps, completes ->unmapped
 *     and calls put_pages. A callback that comes now sees RELEASING and
 *     waits for ->unmapped before it returns, so NVIDIA frees the tables
 *     only after our unmap is done with them, never during it. put_pages
 *     blocks while a callback runs; if the callback has already returned,
 *     put_pages finds the table unlinked from RM's tracker and returns 0
 *     without touching it (nv-p2p.c: rm_p2p_put_pages() gives
 *     NV_ERR_OBJECT_NOT_FOUND, mapped to success for non-persistent
 *     tables). After put_pages returns no callback is made, so the state
 *     word is freed only when no callback can use it. The fake driver of
 *     the tests behaves the same way.
 *
 * Deadlock freedom: the callback takes no lock (the buffer's own fence
 * spinlock and wait queue only) and waits only for our unmap, which needs
 * no NVIDIA lock held around a callback (it neither calls put_pages nor
 * waits for anything that would); release waits for the callback only when
 * the callback won, and the callback then waits for in-flight NVMe
 * commands, which complete or time out on their own.
 *
 * Persistent registrations have no callback and use none of this.
 */
enum {
	KVBLK_CUDA_CREATING,	/* create owns the tables */
	KVBLK_CUDA_LIVE,	/* registered */
	KVBLK_CUDA_REVOKING,	/* the free callback claimed them */
	KVBLK_CUDA_GONE,	/* ... and returned: NVIDIA frees them */
	KVBLK_CUDA_RELEASING,	/* release claimed them */
};

struct kvblk_mem_cuda {
	struct kvblk_nvp2p nv;		/* held while the buffer exists */
	struct kvblk_buf *buf;
	struct pci_dev *pdev;		/* the NVMe function (buf->dev) */
	u64 va;
	bool persistent;
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *map;
	atomic_t state;
	struct completion gone;		/* the callback returned */
	struct completion unmapped;	/* release unmapped */
};

static void kvblk_cuda_free_callback(void *data)
{
	struct kvblk_mem_cuda *c = data;
	int old = atomic_read(&c->state);

	do {
		if (old == KVBLK_CUDA_RELEASING) {
			wait_for_completion(&c->unmapped);
			return;
		}
		if (old != KVBLK_CUDA_CREATING && old != KVBLK_CUDA_LIVE) {
			/* A second callback for one table: never made. */
			pr_warn_ratelimited("cuda: free callback for a revoked buffer\n");
			return;
		}
	} while (!atomic_try_cmpxchg(&c->state, &old, KVBLK_CUDA_REVOKING));

	kvblk_buf_revoke(c->buf);
	/* While creating, the tables may not be assigned yet. */
	if (old == KVBLK_CUDA_LIVE) {
		c->nv.free_dma_mapping(c->map);
		c->nv.free_page_table(c->pt);
	}
	pr_info_ratelimited("cuda: buffer %u (GPU address 0x%llx) revoked: the CUDA allocation was freed\n",
			    c->buf->id, c->va);
	atomic_set(&c->state, KVBLK_CUDA_GONE);
	complete(&c->gone);
}

/*
 * Hand the tables back (see the state comment above). Return: true when the
 * free callback came first (the allocation was freed under us).
 */
static bool kvblk_cuda_unpin(struct kvblk_mem_cuda *c)
{
	int old, ret;

	if (c->persistent) {
		if (c->map)
			c->nv.dma_unmap_pages(c->pdev, c->pt, c->map);
		ret = c->nv.put_pages_persistent(c->va, c->pt, 0);
		if (ret)
			pr_warn_ratelimited("cuda: nvidia_p2p_put_pages_persistent: %d\n", ret);
		return false;
	}

	old = atomic_read(&c->state);
	do {
		if (old != KVBLK_CUDA_CREATING && old != KVBLK_CUDA_LIVE) {
			wait_for_completion(&c->gone);
			return true;
		}
	} while (!atomic_try_cmpxchg(&c->state, &old, KVBLK_CUDA_RELEASING));

	if (c->map)
		c->nv.dma_unmap_pages(c->pdev, c->pt, c->map);
	complete(&c->unmapped);
	/* A callback racing us has returned when this returns (see above). */
	ret = c->nv.put_pages(0, 0, c->va, c->pt);
	if (ret)
		pr_debug("cuda: nvidia_p2p_put_pages: %d\n", ret);
	return false;
}

static void kvblk_mem_cuda_release(struct kvblk_buf *buf)
{
	struct kvblk_mem_cuda *c = buf->priv;

	kvblk_cuda_unpin(c);
	kvblk_nvp2p_put(&c->nv);
	kfree(c);
}

static const struct kvblk_mem_ops kvblk_mem_cuda_ops = {
	.name = "cuda",
	.release = kvblk_mem_cuda_release,
};

/* nvidia-p2p's errno as documented for struct kvblk_buf_reg. */
static int kvblk_cuda_pin_errno(int ret)
{
	switch (ret) {
	case -EINVAL:	/* not a pinnable CUDA allocation of this process */
		return -EFAULT;
	case -ENOMEM:
		return -ENOMEM;
	default:
		return -EOPNOTSUPP;
	}
}

static int kvblk_cuda_pin(struct kvblk_mem_cuda *c, u64 len)
{
	int ret = -EOPNOTSUPP;

	if (c->nv.get_pages_persistent) {
		/* Flags 0: NVIDIA_P2P_FLAGS_DEFAULT (a DMA-mappable pin). */
		ret = c->nv.get_pages_persistent(c->va, len, &c->pt, 0);
		if (!ret) {
			c->persistent = true;
			return 0;
		}
		/* Not on MIG or vGPU: the callback variant may still work. */
		pr_debug("cuda: nvidia_p2p_get_pages_persistent: %d, trying nvidia_p2p_get_pages\n",
			 ret);
		if (ret == -ENOMEM)
			return ret;
	}
	c->buf->revocable = true;
	ret = c->nv.get_pages(0, 0, c->va, len, &c->pt,
			      kvblk_cuda_free_callback, c);
	if (ret) {
		pr_info_ratelimited("register: %s[%d]: nvidia_p2p_get_pages(0x%llx, %llu): %d\n",
				    current->comm, task_pid_nr(current), c->va,
				    len, ret);
		return kvblk_cuda_pin_errno(ret);
	}
	return 0;
}

/* What kvblk needs of the tables, beyond what the driver checks itself. */
static int kvblk_cuda_check_pt(const struct nvidia_p2p_page_table *pt, u64 len)
{
	if (!NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(pt)) {
		pr_info_ratelimited("register: %s[%d]: nvidia-p2p page table version 0x%08x, built for 0x%08x\n",
				    current->comm, task_pid_nr(current),
				    pt->version, NVIDIA_P2P_PAGE_TABLE_VERSION);
		return -EOPNOTSUPP;
	}
	if (pt->page_size != NVIDIA_P2P_PAGE_SIZE_64KB ||
	    (u64)pt->entries * KVBLK_GPU_PAGE < len) {
		pr_info_ratelimited("register: %s[%d]: nvidia-p2p page table with page size type %u, %u entries for %llu bytes\n",
				    current->comm, task_pid_nr(current),
				    pt->page_size, pt->entries, len);
		return -EOPNOTSUPP;
	}
	return 0;
}

static int kvblk_cuda_check_map(const struct nvidia_p2p_dma_mapping *map,
				const struct nvidia_p2p_page_table *pt)
{
	if (!NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(map)) {
		pr_info_ratelimited("register: %s[%d]: nvidia-p2p DMA mapping version 0x%08x, built for 0x%08x\n",
				    current->comm, task_pid_nr(current),
				    map->version, NVIDIA_P2P_DMA_MAPPING_VERSION);
		return -EOPNOTSUPP;
	}
	if (map->page_size_type != NVIDIA_P2P_PAGE_SIZE_64KB ||
	    map->entries != pt->entries) {
		pr_info_ratelimited("register: %s[%d]: nvidia-p2p DMA mapping with page size type %u, %u entries for %u pages\n",
				    current->comm, task_pid_nr(current),
				    map->page_size_type, map->entries,
				    pt->entries);
		return -EOPNOTSUPP;
	}
	return 0;
}

/**
 * kvblk_mem_cuda_create() - pin and DMA-map a CUDA device address range.
 * @dev: the NVMe controller's DMA device (a PCI function).
 * @r: the request; @r->addr and @r->len are 64 KiB aligned (checked by the
 *     caller).
 *
 * Return: the buffer, or ERR_PTR: -EOPNOTSUPP (no nvidia-p2p exports: the
 * NVIDIA driver is not loaded; the controller is not a PCI device; the
 * driver refused for another reason; table versions or page size this
 * module does not know: the kernel log says which), -EFAULT (the range is
 * not CUDA device memory of the caller that nvidia-p2p can pin, or it was
 * freed during the registration), -ENOMEM, -EIO (the mapping does not
 * cover the range).
 */
struct kvblk_buf *kvblk_mem_cuda_create(struct device *dev,
					const struct kvblk_buf_reg *r)
{
	struct kvblk_mem_cuda *c;
	struct kvblk_buf *buf;
	int ret, old;

	BUILD_BUG_ON(sizeof(dma_addr_t) != sizeof(u64));

	if (!dev_is_pci(dev)) {
		pr_info_ratelimited("register: %s[%d]: CUDA memory needs an NVMe controller on PCI\n",
				    current->comm, task_pid_nr(current));
		return ERR_PTR(-EOPNOTSUPP);
	}
	c = kzalloc(sizeof(*c), GFP_KERNEL_ACCOUNT);
	if (!c)
		return ERR_PTR(-ENOMEM);
	if (kvblk_nvp2p_get(&c->nv)) {
		pr_info_ratelimited("register: %s[%d]: CUDA memory needs nvidia-p2p (nvidia.ko with GPL exports), which is not loaded\n",
				    current->comm, task_pid_nr(current));
		kfree(c);
		return ERR_PTR(-EOPNOTSUPP);
	}
	c->pdev = to_pci_dev(dev);
	c->va = r->addr;
	atomic_set(&c->state, KVBLK_CUDA_CREATING);
	init_completion(&c->gone);
	init_completion(&c->unmapped);

	buf = kvblk_buf_alloc(dev, KVBLK_MEM_CUDA, r->len, &kvblk_mem_cuda_ops);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto out_put_syms;
	}
	buf->priv = c;
	c->buf = buf;

	ret = kvblk_cuda_pin(c, r->len);
	if (ret)
		goto out_abort;
	ret = kvblk_cuda_check_pt(c->pt, r->len);
	if (ret)
		goto out_unpin;
	ret = c->nv.dma_map_pages(c->pdev, c->pt, &c->map);
	if (ret) {
		pr_info_ratelimited("register: %s[%d]: nvidia_p2p_dma_map_pages for %s: %d\n",
				    current->comm, task_pid_nr(current),
				    pci_name(c->pdev), ret);
		c->map = NULL;
		ret = ret == -ENOMEM ? -ENOMEM : -EOPNOTSUPP;
		goto out_unpin;
	}
	ret = kvblk_cuda_check_map(c->map, c->pt);
	if (ret)
		goto out_unpin;
	/* BAR pages mapped by the driver: coherent, never synced (need_sync). */
	ret = kvblk_buf_segs_from_addrs(buf, (const dma_addr_t *)c->map->dma_addresses,
					c->map->entries, KVBLK_GPU_PAGE);
	if (ret)
		goto out_unpin;

	if (!c->persistent) {
		old = KVBLK_CUDA_CREATING;
		if (!atomic_try_cmpxchg(&c->state, &old, KVBLK_CUDA_LIVE))
			goto out_unpin;	/* freed meanwhile: -EFAULT below */
	}
	return buf;

out_unpin:
	/*
	 * The allocation freed during the registration makes the driver's
	 * later calls fail (dma_map_pages on a table being freed): -EFAULT,
	 * whatever failed.
	 */
	if (kvblk_cuda_unpin(c))
		ret = -EFAULT;
out_abort:
	kvblk_buf_abort(buf);
out_put_syms:
	kvblk_nvp2p_put(&c->nv);
	kfree(c);
	return ERR_PTR(ret);
}

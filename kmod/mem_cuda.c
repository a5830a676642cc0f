// SPDX-License-Identifier: GPL-2.0
/*
 * mem_cuda.c - CUDA device memory destinations (KVBLK_MEM_CUDA) through
 * NVIDIA's nvidia-p2p interface (GPUDirect RDMA).
 *
 * The GPU pages of the range are pinned with
 * nvidia_p2p_get_pages_persistent() and DMA-mapped for the namespace's NVMe
 * PCI function with nvidia_p2p_dma_map_pages(): one DMA address per 64 KiB
 * GPU page, which becomes the buffer's segment table. Loads then take the
 * same PRP path as host memory. A persistent pin keeps the GPU memory until
 * kvblk puts it (cudaFree does not take it away), so a registration never
 * races the application's free.
 *
 * Pins with a free callback (nvidia_p2p_get_pages(), the only kind on MIG
 * and vGPU) are not used: NVIDIA calls the callback from its own free path
 * and frees the page table and its DMA mappings as soon as the callback
 * returns. A free that comes while a registration is still being built
 * (between nvidia_p2p_get_pages() and the end of nvidia_p2p_dma_map_pages())
 * would free the tables under kvblk, or under the NVIDIA driver's own
 * dma_map_pages; the callback cannot wait for the registration either,
 * because the free path holds the driver's locks that dma_map_pages takes
 * (nv-p2p.c in NVIDIA's open kernel modules). Such GPUs are served through a
 * dma-buf of the allocation (KVBLK_MEM_DMABUF, cuMemGetHandleForAddressRange),
 * whose revocation protocol has no such window (mem_dmabuf.c).
 *
 * kvblk.ko does not link against nvidia.ko: every registration resolves the
 * nvidia_p2p_* functions with __symbol_get() (which also pins the exporting
 * module) and drops them when the buffer is released, so the module loads
 * and serves host memory on machines without the NVIDIA driver, and
 * nvidia.ko cannot be unloaded under a registered buffer.
 *
 * Facts about the interface: kmod/nv-p2p.h.
 */
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

/*
 * The nvidia_p2p_* functions, resolved at run time. The persistent pair
 * is spelled out: drivers older than its introduction (and their headers)
 * lack it.
 */
struct kvblk_nvp2p {
	int (*get_pages_persistent)(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);
	int (*put_pages_persistent)(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);
	int (*dma_map_pages)(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);
	int (*dma_unmap_pages)(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);
};

static const struct {
	const char *name;
	size_t off;
} kvblk_nvp2p_syms[] = {
	{ "nvidia_p2p_get_pages_persistent",
	  offsetof(struct kvblk_nvp2p, get_pages_persistent) },
	{ "nvidia_p2p_put_pages_persistent",
	  offsetof(struct kvblk_nvp2p, put_pages_persistent) },
	{ "nvidia_p2p_dma_map_pages", offsetof(struct kvblk_nvp2p, dma_map_pages) },
	{ "nvidia_p2p_dma_unmap_pages", offsetof(struct kvblk_nvp2p, dma_unmap_pages) },
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
 * Resolve and hold every function. Return: 0, or -EOPNOTSUPP when one is
 * not exported (no NVIDIA driver loaded, one without GPL exports of
 * nvidia-p2p, or one too old for persistent pins); nothing is held then.
 */
static int kvblk_nvp2p_get(struct kvblk_nvp2p *nv)
{
	unsigned int i;

	memset(nv, 0, sizeof(*nv));
	for (i = 0; i < ARRAY_SIZE(kvblk_nvp2p_syms); i++) {
		*kvblk_nvp2p_slot(nv, i) = __symbol_get(kvblk_nvp2p_syms[i].name);
		if (!*kvblk_nvp2p_slot(nv, i)) {
			kvblk_nvp2p_put(nv);
			return -EOPNOTSUPP;
		}
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

struct kvblk_mem_cuda {
	struct kvblk_nvp2p nv;		/* held while the buffer exists */
	struct kvblk_buf *buf;
	struct pci_dev *pdev;		/* the NVMe function (buf->dev) */
	u64 va;
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *map;
};

/* Unmap and hand the pin back. */
static void kvblk_cuda_unpin(struct kvblk_mem_cuda *c)
{
	int ret;

	if (c->map)
		c->nv.dma_unmap_pages(c->pdev, c->pt, c->map);
	ret = c->nv.put_pages_persistent(c->va, c->pt, 0);
	if (ret)
		pr_warn_ratelimited("cuda: nvidia_p2p_put_pages_persistent: %d\n", ret);
}

static void kvblk_mem_cuda_release(struct kvblk_buf *buf)
{
	struct kvblk_mem_cuda *c = buf->priv;

	kvblk_cuda_unpin(c);
	kvblk_nvp2p_put(&c->nv);
	kfree(c);
}

/*
 * kvblk_mem_ops.unmap: the NVMe PCI function is being removed: drop its
 * mapping of the GPU pages now; the pin is handed back at release.
 */
static void kvblk_mem_cuda_unmap(struct kvblk_buf *buf)
{
	struct kvblk_mem_cuda *c = buf->priv;

	if (c->map)
		c->nv.dma_unmap_pages(c->pdev, c->pt, c->map);
	c->map = NULL;
}

static const struct kvblk_mem_ops kvblk_mem_cuda_ops = {
	.name = "cuda",
	.release = kvblk_mem_cuda_release,
	.unmap = kvblk_mem_cuda_unmap,
};

static int kvblk_cuda_pin(struct kvblk_mem_cuda *c, u64 len)
{
	/* Flags 0: NVIDIA_P2P_FLAGS_DEFAULT (a DMA-mappable pin). */
	int ret = c->nv.get_pages_persistent(c->va, len, &c->pt, 0);

	switch (ret) {
	case 0:
		return 0;
	case -EINVAL:	/* not a pinnable CUDA allocation of this process */
		pr_info_ratelimited("register: %s[%d]: nvidia_p2p_get_pages_persistent(0x%llx, %llu): -EINVAL: not CUDA device memory of this process\n",
				    current->comm, task_pid_nr(current), c->va, len);
		return -EFAULT;
	case -ENOMEM:
		return -ENOMEM;
	default:	/* -ENOTSUPP on MIG and vGPU, or another refusal */
		pr_info_ratelimited("register: %s[%d]: nvidia_p2p_get_pages_persistent(0x%llx, %llu): %d: no persistent pin on this GPU (MIG and vGPU have none); register a dma-buf of the allocation (KVBLK_MEM_DMABUF) instead\n",
				    current->comm, task_pid_nr(current), c->va,
				    len, ret);
		return -EOPNOTSUPP;
	}
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
 * NVIDIA driver is not loaded, or too old for persistent pins; the GPU
 * has no persistent pins (MIG, vGPU); the controller is not a PCI device;
 * the driver refused for another reason; table versions or page size this
 * module does not know: the kernel log says which), -EFAULT (the range is
 * not CUDA device memory of the caller that nvidia-p2p can pin), -ENOMEM,
 * -EIO (the mapping does not cover the range).
 */
struct kvblk_buf *kvblk_mem_cuda_create(struct device *dev,
					const struct kvblk_buf_reg *r)
{
	struct kvblk_mem_cuda *c;
	struct kvblk_buf *buf;
	int ret;

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

	return buf;

out_unpin:
	kvblk_cuda_unpin(c);
out_abort:
	kvblk_buf_abort(buf);
out_put_syms:
	kvblk_nvp2p_put(&c->nv);
	kfree(c);
	return ERR_PTR(ret);
}

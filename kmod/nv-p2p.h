/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kvblk's own declaration of NVIDIA's nvidia-p2p kernel interface
 * (GPUDirect RDMA), used when the NVIDIA driver source is not installed.
 *
 * Written by the kvblk project from NVIDIA's documentation ("Developing a
 * Linux Kernel Module using GPUDirect RDMA", section Kernel API), read
 * against open-gpu-kernel-modules 595.45.04 (kernel-open/nvidia/nv-p2p.h). It is not
 * NVIDIA's header. When that header is installed (/usr/src/nvidia-* /nvidia/
 * nv-p2p.h), kmod/Kbuild finds it, defines KVBLK_HAVE_NV_P2P_H and the build
 * uses it instead of this file.
 *
 * Only what kvblk.ko and the test module tests/kmod-exporters/
 * kvblk_fake_nvp2p.c use is declared. The layouts of the structures, as far
 * as declared, and the prototypes must match the driver's: kvblk.ko reads
 * the tables nvidia.ko hands out and calls its functions through pointers
 * resolved at run time (symbol_get), so nothing here is checked by the
 * linker. Every symbol is exported GPL-only by the open kernel modules.
 */
#ifndef KVBLK_NV_P2P_H
#define KVBLK_NV_P2P_H

#include <linux/types.h>

struct pci_dev;

/*
 * Versions of the tables: major in the upper 16 bits, minor in the lower.
 * A table is usable when its major equals the one compiled against and its
 * minor is at least that one (fields are only ever appended). Values as in
 * the driver's header.
 */
#define NVIDIA_P2P_MAJOR_VERSION_MASK	0xffff0000U
#define NVIDIA_P2P_MINOR_VERSION_MASK	0x0000ffffU
#define NVIDIA_P2P_MAJOR_VERSION(v)	(((v) & NVIDIA_P2P_MAJOR_VERSION_MASK) >> 16)
#define NVIDIA_P2P_MINOR_VERSION(v)	((v) & NVIDIA_P2P_MINOR_VERSION_MASK)
#define NVIDIA_P2P_VERSION_COMPATIBLE(p, v) ({				\
	u32 __have = (p)->version, __want = (v);			\
									\
	NVIDIA_P2P_MAJOR_VERSION(__have) == NVIDIA_P2P_MAJOR_VERSION(__want) && \
	NVIDIA_P2P_MINOR_VERSION(__have) >= NVIDIA_P2P_MINOR_VERSION(__want); \
})

#define NVIDIA_P2P_PAGE_TABLE_VERSION	0x00020000U
#define NVIDIA_P2P_PAGE_TABLE_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_PAGE_TABLE_VERSION)

#define NVIDIA_P2P_DMA_MAPPING_VERSION	0x00020003U
#define NVIDIA_P2P_DMA_MAPPING_VERSION_COMPATIBLE(p) \
	NVIDIA_P2P_VERSION_COMPATIBLE(p, NVIDIA_P2P_DMA_MAPPING_VERSION)

/*
 * GPU page sizes a table can report. The driver always reports 64 KiB
 * (notes section 4: NVRM_P2P_PAGESIZE_BIG_64K); kvblk refuses anything else.
 */
enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB,
	NVIDIA_P2P_PAGE_SIZE_128KB,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

/* page_table->flags: the pages may be mapped cacheable by the CPU. */
#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE	0x1

/* Flags of the persistent calls: 0, or force a BAR1 mapping (no DMA map). */
#define NVIDIA_P2P_FLAGS_DEFAULT		0
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING	1

/* The persistent variant exists in this interface (driver 470 and later). */
#define NVIDIA_P2P_CAP_GET_PAGES_PERSISTENT_API

/*
 * One GPU page: its bus address in the GPU's BAR1. The driver's structure
 * continues with register data of old GPU generations, which kvblk never
 * reads (it is only ever reached through a pointer).
 */
struct nvidia_p2p_page {
	u64 physical_address;
};

/* The pinned pages of one GPU virtual address range. */
struct nvidia_p2p_page_table {
	u32 version;			/* NVIDIA_P2P_PAGE_TABLE_VERSION */
	u32 page_size;			/* enum nvidia_p2p_page_size_type */
	struct nvidia_p2p_page **pages;	/* @entries pointers */
	u32 entries;
	u8 *gpu_uuid;
	u32 flags;			/* NVIDIA_P2P_PAGE_TABLE_FLAGS_* */
};

/* The pages of a page table mapped for one peer PCI device. */
struct nvidia_p2p_dma_mapping {
	u32 version;			/* NVIDIA_P2P_DMA_MAPPING_VERSION */
	enum nvidia_p2p_page_size_type page_size_type;
	u32 entries;
	u64 *dma_addresses;		/* @entries, one per GPU page */
	void *private;
	struct pci_dev *pci_dev;	/* the peer it was mapped for */
};

/*
 * Pin the GPU pages of [virtual_address, +length) of the calling process's
 * CUDA address space (p2p_token and va_space 0) and return their table.
 * Both must be 64 KiB aligned (-EINVAL otherwise). @free_callback is
 * mandatory: the driver calls it with @data when the allocation is freed or
 * its process dies; after it returns the driver frees the table and every
 * DMA mapping of it. May sleep.
 */
int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length, struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);

/*
 * Release a table of nvidia_p2p_get_pages(). Blocks while the table's free
 * callback runs; after it returns the callback is never called. A table
 * the driver already tore down (its callback has returned) is not touched:
 * the call returns 0 (notes section 4; nv-p2p.c, nv_p2p_put_pages()).
 */
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);

/*
 * Pin without a callback: the pages stay until
 * nvidia_p2p_put_pages_persistent(), even across cudaFree. Not available on
 * MIG or vGPU (and reported to fail with -EINVAL on GeForce parts).
 * @flags: NVIDIA_P2P_FLAGS_*.
 */
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);

/* Release a persistent table; @flags must be 0. */
int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);

/* Map every page of @page_table for DMA by @peer (an IOVA behind an IOMMU). */
int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);

/* Undo nvidia_p2p_dma_map_pages(). */
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);

/*
 * For use in a free callback only: hand the table, or a mapping of it, back
 * to the driver. No-ops in current drivers, which free both themselves
 * after the callback returns; NVIDIA's guide still calls them there.
 */
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

#endif /* KVBLK_NV_P2P_H */

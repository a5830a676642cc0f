/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * kvblk_fake_nvp2p.h - control interface of the test-only module
 * kvblk_fake_nvp2p.ko (tests/kmod-exporters), a stand-in for nvidia.ko's
 * nvidia-p2p interface over host pages. Never installed.
 *
 * /dev/kvblk_fake_gpu: each open file owns the "GPU allocations" it makes;
 * closing it frees them (like a CUDA context when its process dies), which
 * runs the free callbacks of their non-persistent registrations.
 *
 * Module parameters (/sys/module/kvblk_fake_nvp2p/parameters/, 0644):
 *   persistent   1 (default): nvidia_p2p_get_pages_persistent() works; 0: it
 *                fails with -ENOTSUPP (as on MIG or vGPU), so kvblk.ko uses
 *                nvidia_p2p_get_pages() with a free callback.
 *   pt_version   version put into page tables (default 0x00020000).
 *   map_version  version put into DMA mappings (default 0x00020003).
 */
#ifndef KVBLK_FAKE_NVP2P_H
#define KVBLK_FAKE_NVP2P_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KVBLK_FAKE_GPU_DEV	"/dev/kvblk_fake_gpu"
/* The GPU page: allocations, addresses and lengths are multiples of it. */
#define KVBLK_FAKE_GPU_PAGE	65536ULL

/**
 * struct kvblk_fake_gpu_alloc - KVBLK_FAKE_GPU_ALLOC
 * @len: in: bytes, a non-zero multiple of 64 KiB, at most 1 GiB.
 * @va:  out: the fake device virtual address (64 KiB aligned, never 0).
 *
 * Physically contiguous 64 KiB chunks, zero-filled. Errors: -EINVAL bad
 * @len; -ENOMEM.
 */
struct kvblk_fake_gpu_alloc {
	__u64 len;
	__u64 va;
};

/* Poison the pages and keep them (see KVBLK_FAKE_GPU_QCHECK). */
#define KVBLK_FAKE_GPU_FREE_QUARANTINE	(1U << 0)
/* The byte quarantined pages are filled with. */
#define KVBLK_FAKE_GPU_POISON		0xa5

/**
 * struct kvblk_fake_gpu_free - KVBLK_FAKE_GPU_FREE (cudaFree)
 * @va:    in: an allocation's address.
 * @flags: in: 0 or KVBLK_FAKE_GPU_FREE_QUARANTINE.
 * @pad:   must be 0.
 *
 * Calls the free callback of every non-persistent registration of the
 * allocation, one after the other, and returns when all returned; then
 * frees their page tables and DMA mappings. The pages stay while a
 * persistent registration holds them. Errors: -EINVAL unknown @va or flag.
 */
struct kvblk_fake_gpu_free {
	__u64 va;
	__u32 flags;
	__u32 pad;
};

/**
 * struct kvblk_fake_gpu_io - KVBLK_FAKE_GPU_READ / KVBLK_FAKE_GPU_WRITE
 * @va:   in: an allocation's address (not freed).
 * @off:  in: byte offset in it.
 * @len:  in: bytes.
 * @uptr: in: user buffer of @len bytes.
 *
 * Copies between the allocation and @uptr. Errors: -EINVAL unknown @va or
 * range outside it; -EFAULT.
 */
struct kvblk_fake_gpu_io {
	__u64 va;
	__u64 off;
	__u64 len;
	__u64 uptr;
};

/**
 * struct kvblk_fake_gpu_qcheck - KVBLK_FAKE_GPU_QCHECK
 * @va:        in: address of an allocation freed with
 *             KVBLK_FAKE_GPU_FREE_QUARANTINE.
 * @bad_bytes: out: bytes that are no longer KVBLK_FAKE_GPU_POISON (written
 *             after the free callbacks returned).
 *
 * Releases the quarantined pages. Errors: -EINVAL not in quarantine (also
 * while a persistent registration still holds the pages).
 */
struct kvblk_fake_gpu_qcheck {
	__u64 va;
	__u64 bad_bytes;
};

/**
 * struct kvblk_fake_gpu_stats - KVBLK_FAKE_GPU_STATS, module-wide counts
 * @allocs:       allocations whose pages are held (not freed, or freed but
 *                pinned by a persistent registration), quarantine excluded.
 * @quarantined:  allocations in quarantine.
 * @page_tables:  page tables handed out and not yet put or freed.
 * @persistent:   of @page_tables, from nvidia_p2p_get_pages_persistent().
 * @dma_mappings: DMA mappings handed out and not yet unmapped or freed.
 * @callbacks:    free callbacks called (total since load).
 * @errors:       misuse seen (put of a table with mappings left, unknown
 *                table or mapping, ...; each is also logged).
 */
struct kvblk_fake_gpu_stats {
	__u64 allocs;
	__u64 quarantined;
	__u64 page_tables;
	__u64 persistent;
	__u64 dma_mappings;
	__u64 callbacks;
	__u64 errors;
};

#define KVBLK_FAKE_GPU_MAGIC	0xf6
#define KVBLK_FAKE_GPU_ALLOC	_IOWR(KVBLK_FAKE_GPU_MAGIC, 1, struct kvblk_fake_gpu_alloc)
#define KVBLK_FAKE_GPU_FREE	_IOW(KVBLK_FAKE_GPU_MAGIC, 2, struct kvblk_fake_gpu_free)
#define KVBLK_FAKE_GPU_READ	_IOW(KVBLK_FAKE_GPU_MAGIC, 3, struct kvblk_fake_gpu_io)
#define KVBLK_FAKE_GPU_WRITE	_IOW(KVBLK_FAKE_GPU_MAGIC, 4, struct kvblk_fake_gpu_io)
#define KVBLK_FAKE_GPU_QCHECK	_IOWR(KVBLK_FAKE_GPU_MAGIC, 5, struct kvblk_fake_gpu_qcheck)
#define KVBLK_FAKE_GPU_STATS	_IOR(KVBLK_FAKE_GPU_MAGIC, 6, struct kvblk_fake_gpu_stats)

#endif /* KVBLK_FAKE_NVP2P_H */

/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * Ioctls of the test-only dma-buf exporter
 * (tests/kmod-exporters/kvblk_test_dmabuf.c, /dev/kvblk_test_dmabuf).
 *
 * The module exports host pages as dma-bufs so that the VM tests can
 * register them with kvblk.ko (KVBLK_MEM_DMABUF). It is a dynamic exporter
 * (pin/unpin), maps for whatever device attaches, counts what importers
 * hold, and can revoke a buffer the way an exporter that takes its memory
 * back does. Test-only: never installed.
 *
 * Every ioctl returns 0 or -1 with errno; CREATE also returns the new fd.
 */
#ifndef KVBLK_TEST_DMABUF_H
#define KVBLK_TEST_DMABUF_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KVBLK_TEST_DMABUF_NODE		"/dev/kvblk_test_dmabuf"
/* Largest dma-buf CREATE makes, and the largest READ or WRITE. */
#define KVBLK_TEST_DMABUF_MAX_BYTES	(256ULL << 20)
/* What REVOKE writes over every byte once no importer can write any more. */
#define KVBLK_TEST_DMABUF_POISON	0xDB

/**
 * struct kvblk_test_dmabuf_create - KVBLK_TEST_DMABUF_CREATE
 * @len:   in: bytes, a non-zero multiple of the page size, at most
 *         KVBLK_TEST_DMABUF_MAX_BYTES. The pages are zeroed.
 * @fd:    out: the dma-buf fd (O_RDWR | O_CLOEXEC, or O_RDONLY with
 *         KVBLK_TEST_DMABUF_F_RDONLY); also the return value.
 * @flags: in: 0, KVBLK_TEST_DMABUF_F_RDONLY (the exporter grants read
 *         access only: the dma-buf's file lacks FMODE_WRITE), and/or
 *         KVBLK_TEST_DMABUF_F_STATIC (below).
 *
 * Errors: -EINVAL bad @len or @flags; -ENOMEM.
 */
struct kvblk_test_dmabuf_create {
	__u64 len;
	__s32 fd;
	__u32 flags;
};

#define KVBLK_TEST_DMABUF_F_RDONLY	(1U << 0)
/*
 * The buffer's exporter is not dynamic (no pin/unpin), as NVIDIA's and
 * udmabuf are: 6.1 and 6.12 map it when a dynamic importer attaches and
 * unmap it only when it detaches. REVOKE notifies no importer of it.
 */
#define KVBLK_TEST_DMABUF_F_STATIC	(1U << 1)

/**
 * struct kvblk_test_dmabuf_rw - KVBLK_TEST_DMABUF_READ / _WRITE
 * @fd:     a dma-buf of this module.
 * @flags:  must be 0.
 * @offset: byte offset in the dma-buf.
 * @len:    bytes, at most KVBLK_TEST_DMABUF_MAX_BYTES.
 * @ptr:    user buffer of @len bytes (destination of READ, source of WRITE).
 *
 * CPU access as an exporter does it: under the reservation lock, with the
 * importers' live mappings synced for the CPU (READ) or back to their
 * devices (WRITE). Works on a revoked buffer too (READ shows the poison).
 * Errors: -EBADF @fd is not a dma-buf; -EINVAL not one of this module's,
 * @flags, or the range is outside it; -EFAULT; -ENOMEM; -EINTR.
 */
struct kvblk_test_dmabuf_rw {
	__s32 fd;
	__u32 flags;
	__u64 offset;
	__u64 len;
	__u64 ptr;
};

/**
 * struct kvblk_test_dmabuf_counts - KVBLK_TEST_DMABUF_COUNTS
 * @buffers:     dma-bufs of this module alive now (fds or importers hold them).
 * @attachments: attachments alive now, over all buffers.
 * @mappings:    mappings (map_dma_buf not yet unmapped) alive now.
 * @pins:        pins not yet unpinned. Kernels built without
 *               CONFIG_DMABUF_MOVE_NOTIFY (Debian 6.1, 6.12) pin once more
 *               for every mapping of a dynamic importer.
 * @revokes:     REVOKE calls that revoked a buffer, since the module loaded.
 */
struct kvblk_test_dmabuf_counts {
	__s64 buffers;
	__s64 attachments;
	__s64 mappings;
	__s64 pins;
	__s64 revokes;
};

#define KVBLK_TEST_DMABUF_MAGIC	0xBB

#define KVBLK_TEST_DMABUF_CREATE \
	_IOWR(KVBLK_TEST_DMABUF_MAGIC, 0x01, struct kvblk_test_dmabuf_create)
#define KVBLK_TEST_DMABUF_READ \
	_IOW(KVBLK_TEST_DMABUF_MAGIC, 0x02, struct kvblk_test_dmabuf_rw)
#define KVBLK_TEST_DMABUF_WRITE \
	_IOW(KVBLK_TEST_DMABUF_MAGIC, 0x03, struct kvblk_test_dmabuf_rw)
/*
 * KVBLK_TEST_DMABUF_REVOKE (argument: pointer to the dma-buf fd, an int):
 * under the reservation lock, marks the buffer revoked (attach, pin and
 * map fail with -ENODEV from then on), notifies every dynamic importer
 * (dma_buf_move_notify(), 7.2: dma_buf_invalidate_mappings()), waits for
 * every fence of the reservation object, and then, if no importer still
 * holds a mapping, takes the memory back: writes
 * KVBLK_TEST_DMABUF_POISON over every byte. A later write by an importer
 * shows up as bytes that are not the poison.
 * Errors: -EBADF, -EINVAL as for READ; -EALREADY already revoked; -EBUSY
 * an importer kept a mapping through the notification (nothing poisoned).
 */
#define KVBLK_TEST_DMABUF_REVOKE \
	_IOW(KVBLK_TEST_DMABUF_MAGIC, 0x04, int)
#define KVBLK_TEST_DMABUF_COUNTS \
	_IOR(KVBLK_TEST_DMABUF_MAGIC, 0x05, struct kvblk_test_dmabuf_counts)

#endif /* KVBLK_TEST_DMABUF_H */

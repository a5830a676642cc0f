// SPDX-License-Identifier: MIT
// The opened target (block device or regular file) and what the kernel says about it.
#pragma once

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace kvblk::detail {

/**
 * struct Target - an opened block device, regular file, or NVMe generic char device.
 * @fd:                   open file descriptor (O_DIRECT unless @buffered).
 * @blockdev:             a block device (else a regular file).
 * @buffered:             opened without O_DIRECT (KVBLK_OPEN_BUFFERED).
 * @readable:             loads allowed (always, except a target added from an O_WRONLY fd).
 * @writable:             opened for writing (KVBLK_OPEN_WRITE).
 * @logical_block_size:   BLKSSZGET; for files statx dio_offset_align, else st_blksize.
 * @mem_align:            statx dio_mem_align, else @logical_block_size.
 * @capacity:             BLKGETSIZE64 or st_size, bytes.
 * @device_max_cmd_bytes: queue/max_hw_sectors_kb of a block device in bytes; 0 = unknown.
 * @unsplit_bytes:        a block device's largest io_uring read or write from a fixed buffer
 *                        that the block layer issues unsplit (fixed_read_unsplit_bytes()
 *                        of its queue, bio_split.hpp); 0 = unknown or not a block device.
 * @nvme_pcie_namespace:  a whole NVMe namespace on a PCIe controller (kmod candidate).
 * @not_nvme_pcie:        when not @nvme_pcie_namespace: why, as words that follow the path
 *                        ("is a regular file, not a PCIe NVMe namespace").
 * @nvme_generic:         an NVMe generic char device (/dev/ngXnY, opened without O_DIRECT):
 *                        only the uring_cmd backend can serve it. Sized from the sysfs
 *                        entry of its namespace's block device (@disk).
 * @disk:                 sysfs name of the block device (nvme0n1, nvme0n1p2, sda); for
 *                        @nvme_generic the namespace's block device (nvme0n1).
 * @rdev:                 device number of a block device or of the char device.
 * @dev, @ino:            st_dev and st_ino of the opened file (kvblk_add_target_fd() checks
 *                        that its reopen reached the caller's file).
 * @tail_fd:              a regular file's second descriptor, write-only and without O_DIRECT,
 *                        through which a KVBLK_DESC_UNALIGNED store writes back the file's
 *                        last block cut short by its end (open_tail_writer()); -1 until the
 *                        first such store (and for a @buffered target, whose @fd serves).
 */
struct Target {
	int fd = -1;
	std::string path;
	bool blockdev = false;
	bool buffered = false;
	bool readable = true;
	bool writable = false;
	uint32_t logical_block_size = 0;
	uint32_t mem_align = 0;
	uint64_t capacity = 0;
	uint64_t device_max_cmd_bytes = 0;
	uint64_t unsplit_bytes = 0;
	bool nvme_pcie_namespace = false;
	std::string not_nvme_pcie;
	bool nvme_generic = false;
	std::string disk;
	dev_t rdev = 0;
	dev_t dev = 0;
	ino_t ino = 0;
	int tail_fd = -1;
};

/*
 * Open @path (block device, regular file, or NVMe generic char device) with KVBLK_OPEN_* @flags (create_bytes for KVBLK_OPEN_CREATE) and fill @t.
 * Returns 0 or -errno with kvblk_last_error() set; on failure nothing stays open.
 */
int open_target(const char *path, uint32_t flags, uint64_t create_bytes, Target *t);

/*
 * Open the caller's @fd as a target (kvblk_add_target_fd()): rights follow its access mode
 * (F_GETFL; O_PATH or a mode that does not allow what @flags ask: -EBADF), a FIFO, socket or
 * directory is refused from fstat(2) alone, and the file is reopened through
 * /proc/self/fd/@fd (O_DIRECT unless KVBLK_OPEN_BUFFERED) so that @fd's own open file
 * description is never changed. 0 or -errno with kvblk_last_error() set.
 */
int open_target_fd(int fd, uint32_t flags, Target *t);

/*
 * The descriptor that writes @t's last block cut short by the end of the file (a length
 * that is not a multiple of the block size, which O_DIRECT refuses): @t's own fd when it is
 * @buffered, else t->tail_fd, opened on first use through /proc/self/fd/<t->fd> write-only
 * without O_DIRECT (the page cache: the kernel writes it back, and O_DIRECT reads of the range
 * write it back first). Callers serialise (the target table's lock). 0 and *fd, or -errno with
 * kvblk_last_error() set (the errors of open(2)).
 */
int open_tail_writer(Target *t, int *fd);

/* Close what open_target() opened. */
void close_target(Target *t) noexcept;

} // namespace kvblk::detail

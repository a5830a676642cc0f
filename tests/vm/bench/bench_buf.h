/* SPDX-License-Identifier: MIT */
/*
 * What make vmbench-cpu's C drivers share (loadloop.c: libkvblk; bareloop.c: bare
 * io_uring): the clock of their windows and the buffer every leg reads into, so that the
 * legs compared with each other get the same memory.
 */
#ifndef KVBLK_BENCH_BUF_H
#define KVBLK_BENCH_BUF_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BENCH_HUGE_2M (2u << 20)

/* CLOCK_MONOTONIC in seconds. */
static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/**
 * struct bench_buf - a destination buffer of @len bytes at @mem.
 * @map, @map_len: the mapping it lies in (freed by bench_buf_free()).
 */
struct bench_buf {
	unsigned char *mem;
	uint64_t len;
	void *map;
	uint64_t map_len;
};

/*
 * @len bytes of private anonymous memory (as an application's buffers) aligned to 2 MiB,
 * madvise(MADV_HUGEPAGE)d and touched before any registration: transparent huge pages where
 * the kernel has them, as kmod_bench -H's and fio's f4/f5 (--iomem_align=2m) buffers are, so
 * that no leg pays for 4 KiB pages another does not (from 6.11 io_uring coalesces such a
 * fixed buffer into one bio_vec per huge page). A failed madvise() is reported on stderr
 * under @prog and is not fatal. Returns 0, or -errno of mmap().
 */
static inline int bench_buf_alloc(struct bench_buf *b, uint64_t len, const char *prog)
{
	b->map_len = len + BENCH_HUGE_2M;
	b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->map == MAP_FAILED)
		return -errno;
	b->mem = (unsigned char *)(((uintptr_t)b->map + BENCH_HUGE_2M - 1) &
				   ~(uintptr_t)(BENCH_HUGE_2M - 1));
	b->len = len;
	if (madvise(b->mem, len, MADV_HUGEPAGE))
		fprintf(stderr, "%s: madvise(MADV_HUGEPAGE): %s\n", prog, strerror(errno));
	memset(b->mem, 0, len);
	return 0;
}

static inline void bench_buf_free(struct bench_buf *b)
{
	munmap(b->map, b->map_len);
}

#endif

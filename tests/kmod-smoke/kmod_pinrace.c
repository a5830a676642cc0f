// SPDX-License-Identifier: MIT
/*
 * kmod_pinrace: host-buffer registration racing a file mapped over its range
 * (issue 14 item 4; kmod/mem_host.c checks the mappings and pins under one
 * mmap_read_lock).
 *
 *   kmod_pinrace BLOCKDEV FILE [ITERATIONS]
 *
 * FILE is a regular file of at least 64 KiB on a disk file system (ext4:
 * not tmpfs, whose shmem pages kvblk may pin). A thread flips a 64 KiB range
 * between a MAP_SHARED writable mapping of FILE and anonymous memory
 * (mmap MAP_FIXED both ways) while the main thread registers the range,
 * ITERATIONS times (default 2000). Each registration must fail with
 * EOPNOTSUPP (a file mapping) or EFAULT (unmapped for an instant), or
 * succeed. After a registration that succeeded, the thread parks with FILE
 * mapped over the range, and the buffer is loaded from BLOCKDEV offset 0
 * (bytes that are not FILE's 0x5a fill): pinned anonymous pages are no
 * longer what the range maps, so the call must fail with ESTALE and write
 * nothing; had the registration pinned FILE's page cache, the range would
 * map the pinned pages again and the load would write into them. So FILE,
 * read through the page cache, must still be all 0x5a. The buffer is
 * unregistered before the next round. Exit 0 pass, 1 fail.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "smoke_check.h"

#define SPAN	(64u << 10)

static char *range;
static int file_fd;
/* park: 0 run, 1 stop with FILE mapped, 2 stop with anonymous memory mapped;
 * parked: the mode the thread stopped in, 0 while it runs. */
static atomic_int stop, park, parked;
static atomic_long flips;

static void park_here(int mode)
{
	if (atomic_load(&park) != mode)
		return;
	atomic_store(&parked, mode);
	while (atomic_load(&park) == mode)
		;
	atomic_store(&parked, 0);
}

/* Ask the flipper to stop in @mode (0: let it run) and wait until it did. */
static void park_in(int mode)
{
	atomic_store(&park, mode);
	while (atomic_load(&parked) != mode)
		;
}

static void *flipper(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		void *p = mmap(range, SPAN, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_FIXED, file_fd, 0);

		if (p == MAP_FAILED) {
			perror("mmap file");
			exit(1);
		}
		park_here(1);
		p = mmap(range, SPAN, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap anon");
			exit(1);
		}
		atomic_fetch_add(&flips, 1);
		park_here(2);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static char want[SPAN] __attribute__((aligned(4096)));
	static char got[SPAN];
	long iters = argc > 3 ? atol(argv[3]) : 2000;
	long ok = 0, refused = 0, fault = 0, i;
	struct kvblk_attach a = { .size = sizeof(a) };
	pthread_t th;
	int ctx, bdev, dfd;

	if (argc < 3) {
		fprintf(stderr, "usage: %s BLOCKDEV FILE [ITERATIONS]\n", argv[0]);
		return 2;
	}
	file_fd = open(argv[2], O_RDWR);
	bdev = open(argv[1], O_RDONLY);
	dfd = open(argv[1], O_RDONLY | O_DIRECT);
	ctx = open("/dev/kvblk", O_RDWR);
	if (file_fd < 0 || bdev < 0 || dfd < 0 || ctx < 0) {
		perror("open");
		return 1;
	}
	memset(got, 0x5a, SPAN);
	if (pwrite(file_fd, got, SPAN, 0) != SPAN || fsync(file_fd)) {
		perror("fill FILE");
		return 1;
	}
	/* What a load writes: the device's first bytes, not FILE's fill. */
	if (pread(dfd, want, SPAN, 0) != SPAN) {
		perror("pread BLOCKDEV");
		return 1;
	}
	memset(got, 0x5a, SPAN);
	if (!memcmp(want, got, SPAN)) {
		fprintf(stderr, "FAIL: %s starts with 0x5a bytes: the check would be blind\n", argv[1]);
		return 1;
	}
	a.bdev_fd = bdev;
	if (ioctl(ctx, KVBLK_IOC_ATTACH, &a)) {
		perror("KVBLK_IOC_ATTACH");
		return 1;
	}
	range = mmap(NULL, SPAN, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (range == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (pthread_create(&th, NULL, flipper, NULL)) {
		perror("pthread_create");
		return 1;
	}

	for (i = 0; i < iters && !failures; i++) {
		struct kvblk_buf_reg r = {
			.size = sizeof(r), .kind = KVBLK_MEM_HOST,
			.addr = (unsigned long)range, .len = SPAN,
		};
		struct kvblk_buf_unreg u = { .size = sizeof(u) };
		struct kvblk_io_desc d = { .length = SPAN };
		struct kvblk_desc_result res = { 0 };
		struct kvblk_load_many lm = {
			.size = sizeof(lm), .nr_descs = 1,
			.desc_bytes = KVBLK_DESC_SIZE_VER0,
			.descs = (unsigned long)&d, .results = (unsigned long)&res,
			.result_bytes = sizeof(res),
		};
		int ret;

		/*
		 * Every tenth round registers while anonymous memory is mapped
		 * (it must succeed), so that the checked path runs however
		 * the threads are scheduled; the others race the flipper.
		 */
		if (i % 10 == 9)
			park_in(2);
		if (ioctl(ctx, KVBLK_IOC_REGISTER_BUFFER, &r)) {
			CHECK(i % 10 != 9,
			      "round %ld: REGISTER_BUFFER of anonymous memory: errno %d", i, errno);
			park_in(0);
			CHECK(errno == EOPNOTSUPP || errno == EFAULT,
			      "round %ld: REGISTER_BUFFER errno %d (%s), want EOPNOTSUPP or EFAULT",
			      i, errno, strerror(errno));
			if (errno == EOPNOTSUPP)
				refused++;
			else
				fault++;
			continue;
		}
		ok++;
		/* FILE mapped over the range until the check is done. */
		park_in(0);
		park_in(1);
		d.buf_id = r.buf_id;
		/* A stale host buffer fails the call (uapi: -ESTALE, bad_index 0). */
		ret = ioctl(ctx, KVBLK_IOC_LOAD_MANY, &lm);
		CHECK(ret == -1 && errno == ESTALE && lm.bad_index == 0 &&
		      res.status == -ESTALE,
		      "round %ld: LOAD_MANY into a buffer the range no longer maps: ret %d errno %d bad_index %d status %d, want -1, ESTALE, 0, -ESTALE",
		      i, ret, ret < 0 ? errno : 0, lm.bad_index, res.status);
		/* FILE's page cache: unchanged unless kvblk pinned it. */
		CHECK(pread(file_fd, got, SPAN, 0) == SPAN, "round %ld: pread FILE", i);
		for (size_t k = 0; k < SPAN; k++) {
			if (got[k] != 0x5a) {
				CHECK(0, "round %ld: FILE byte %zu is 0x%02x after a load into a registered buffer: its page cache was pinned",
				      i, k, (unsigned char)got[k]);
				break;
			}
		}
		u.buf_id = r.buf_id;
		CHECK(!ioctl(ctx, KVBLK_IOC_UNREGISTER_BUFFER, &u),
		      "round %ld: UNREGISTER_BUFFER errno %d", i, errno);
		park_in(0);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	printf("%ld rounds, %ld mapping flips: %ld registered (anonymous: checked, ESTALE, FILE intact), %ld refused (EOPNOTSUPP), %ld unmapped (EFAULT)\n",
	       i, atomic_load(&flips), ok, refused, fault);
	CHECK(ok > 0 && refused > 0,
	      "the race did not exercise both outcomes (registered %ld, refused %ld)",
	      ok, refused);
	close(ctx);
	return failures ? 1 : 0;
}

// SPDX-License-Identifier: MIT
/*
 * kmod_cost - the CPU cost of one LOAD_MANY call as seen by its caller,
 * for comparing two builds of kvblk.ko in one VM (kmod/README.md, "What
 * read(2) and write(2) check": what those checks cost).
 *
 * usage: kmod_cost CALLS TARGET...
 *
 * Attaches every TARGET to one context (the first plainly, the rest with
 * KVBLK_ATTACH_F_ADD_TARGET), registers 1 MiB, then times CALLS calls of
 * each of two batches with one 4 KiB object per target (object i at byte
 * 4096 * i of its target, buffer offset 8 KiB * i):
 *   reject  the last descriptor's buffer offset is misaligned: the call
 *           copies, checks permission and validates everything, then
 *           fails with EINVAL before any I/O;
 *   load    the same batch, valid: one read per target.
 * Prints "reject NS_PER_CALL load NS_PER_CALL targets N": wall time per
 * call (CLOCK_MONOTONIC), the mean of the fastest of ten windows of
 * CALLS / 10 calls. Exit 0, 1 failure, 4 skip.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvblk.h>

#define MAX_T 256

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	static struct kvblk_io_desc d[MAX_T];
	static struct kvblk_desc_result res[MAX_T];
	struct kvblk_buf_reg reg = { .size = sizeof(reg), .kind = KVBLK_MEM_HOST };
	struct kvblk_load_many lm;
	int kfd, n, i, calls, c, w, want;
	double t0, t_rej, t_load;
	void *buf;

	if (argc < 3 || argc - 2 > MAX_T || atoi(argv[1]) < 10) {
		fprintf(stderr, "usage: kmod_cost CALLS TARGET...\n");
		return 2;
	}
	calls = atoi(argv[1]);
	n = argc - 2;
	kfd = open("/dev/kvblk", O_RDWR);
	if (kfd < 0) {
		printf("SKIP: /dev/kvblk: %s\n", strerror(errno));
		return 4;
	}
	for (i = 0; i < n; i++) {
		struct kvblk_attach a = { .size = sizeof(a) };
		int fd = open(argv[2 + i], O_RDONLY);

		a.flags = i ? KVBLK_ATTACH_F_ADD_TARGET : 0;
		a.bdev_fd = fd;
		if (fd < 0 || ioctl(kfd, KVBLK_IOC_ATTACH, &a)) {
			fprintf(stderr, "attach %s: %s\n", argv[2 + i], strerror(errno));
			return 1;
		}
	}
	buf = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	reg.addr = (uintptr_t)buf;
	reg.len = 1 << 20;
	if (buf == MAP_FAILED || ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &reg)) {
		fprintf(stderr, "register: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < n; i++)
		d[i] = (struct kvblk_io_desc){ .offset = 4096ULL * i, .length = 4096,
					       .buf_offset = 8192ULL * i,
					       .buf_id = reg.buf_id, .tag = i,
					       .target = i };
	memset(&lm, 0, sizeof(lm));
	lm.size = sizeof(lm);
	lm.nr_descs = n;
	lm.desc_bytes = sizeof(d[0]);
	lm.descs = (uintptr_t)d;
	lm.results = (uintptr_t)res;
	lm.result_bytes = sizeof(res[0]);

	for (want = 0; want < 2; want++) {
		double best = 1e18;

		d[n - 1].buf_offset = 8192ULL * (n - 1) + (want ? 0 : 2);
		/* Ten windows; the fastest one's mean (the others met noise). */
		for (w = 0; w < 10; w++) {
			t0 = now_ns();
			for (c = 0; c < calls / 10; c++) {
				int r = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);

				if (want ? r != n : !(r < 0 && errno == EINVAL)) {
					fprintf(stderr, "call %d: %d (%s)\n", c, r,
						r < 0 ? strerror(errno) : "");
					return 1;
				}
			}
			if ((now_ns() - t0) / (calls / 10) < best)
				best = (now_ns() - t0) / (calls / 10);
		}
		if (want)
			t_load = best;
		else
			t_rej = best;
	}
	printf("reject %.0f load %.0f targets %d\n", t_rej, t_load, n);
	return 0;
}

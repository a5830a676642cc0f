// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_stall - a batch whose process does not collect it (review-2 N3),
 * for tests/selftests/kvblk/vm-ns-removal.sh.
 *
 * usage: kvblk_stall DEV
 *
 * Attaches DEV with the PRP engine, registers 4 MiB, and submits one
 * LOAD_MANY of 16 objects of 64 KiB through IORING_OP_URING_CMD on a ring
 * made with IORING_SETUP_DEFER_TASKRUN: the batch's commands complete, but
 * its task work (which writes the results and releases the batch) runs
 * only when this process waits for CQEs. Once DEV's command counter shows
 * the 16 commands completed, it prints "STALLED" and stops itself
 * (SIGSTOP). The PCI function's removal must not wait for it.
 *
 * The emulated controller can lose a command around a controller reset;
 * the nvme driver then recovers it (timeout, abort, timeout, reset: two I/O
 * timeouts, 10 s each in vm-ns-removal.sh) and fails it with -EIO. So the
 * commands get WAIT_S seconds to complete, and the "STALLED" line says how
 * long they took. The lost command may be the one-LBA Read with which the
 * PRP engine checks the namespace's format before a batch's first command
 * (kvblk_prp_recheck()): its object then fails with -EIO without a command,
 * and the counter stops one short. Hence the batch counts as done also when
 * nothing is in flight on DEV and the counter has not moved for QUIET_S
 * seconds (longer than the driver's recovery), after it moved at least once;
 * the "STALLED" line says how many commands completed (CI of 2026-12-05 and
 * a make check the same day, both on 6.1 with an IOMMU: 15 of 16, the
 * driver's log showing one command lost after its first reset).
 *
 * After SIGCONT: the CQE must come, its objects each exact (pread(O_DIRECT)
 * before), -ENODEV (completed before the removal, and the mapping that
 * still needed a CPU sync is gone) or -EIO (a command the driver timed
 * out and failed: counted on the "EIO" line, and the caller accepts it
 * only when the driver logged a timeout meanwhile), never another status;
 * a second batch on the context must fail with ENODEV (the function was
 * removed). Prints the outcome; exit 0 pass, 1 fail, 4 skip.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "kvblk_utils.h"

#define NR	16
#define OBJ	(64 << 10)
#define LEN	(4 << 20)
#define WAIT_S	90
#define QUIET_S	30

/* /sys/kernel/kvblk/DISK/stats/NAME, or -1. */
static long long kvblk_stat(const char *disk, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/kernel/kvblk/%s/stats/%s", disk, name);
	return read_ll(path);
}

int main(int argc, char **argv)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SINGLE_ISSUER |
					      IORING_SETUP_DEFER_TASKRUN };
	struct kvblk_attach a = { .size = sizeof(a), .flags = KVBLK_ATTACH_F_ENGINE_PRP };
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST };
	struct kvblk_io_desc d[NR];
	struct kvblk_desc_result res[NR];
	struct kvblk_load_many lm;
	struct kvblk_uring_cmd cmd;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	const char *disk;
	unsigned char *mem, *want;
	long long c0, c, last;
	int moved, kfd, bfd, i, ret, bad = 0, eio = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: kvblk_stall DEV\n");
		return 2;
	}
	disk = strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1];
	kfd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	bfd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (kfd < 0 || bfd < 0) {
		printf("SKIP: open /dev/kvblk or %s: %s\n", argv[1], strerror(errno));
		return 4;
	}
	a.bdev_fd = bfd;
	if (ioctl(kfd, KVBLK_IOC_ATTACH, &a)) {
		fprintf(stderr, "FAIL: attach %s (PRP): %s\n", argv[1], strerror(errno));
		return 1;
	}
	mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
		   MAP_POPULATE, -1, 0);
	want = aligned_alloc(4096, NR * OBJ);
	if (mem == MAP_FAILED || !want)
		return 1;
	r.addr = (uintptr_t)mem;
	r.len = LEN;
	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &r)) {
		fprintf(stderr, "FAIL: register: %s\n", strerror(errno));
		return 1;
	}
	ret = open(argv[1], O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (ret < 0 || pread(ret, want, NR * OBJ, 0) != NR * OBJ) {
		fprintf(stderr, "FAIL: pread(O_DIRECT) %s\n", argv[1]);
		return 1;
	}
	close(ret);
	ret = io_uring_queue_init_params(8, &ring, &p);
	if (ret) {
		printf("SKIP: io_uring with IORING_SETUP_DEFER_TASKRUN: %s\n", strerror(-ret));
		return 4;
	}

	memset(d, 0, sizeof(d));
	for (i = 0; i < NR; i++) {
		d[i].offset = (__u64)i * OBJ;
		d[i].length = OBJ;
		d[i].buf_offset = (__u64)i * OBJ;
		d[i].buf_id = r.buf_id;
		d[i].tag = i;
	}
	lm_init(&lm, d, res, NR);
	memset(&cmd, 0, sizeof(cmd));
	cmd.load_many = (uintptr_t)&lm;
	memset(mem, 0xee, LEN);
	c0 = kvblk_stat(disk, "commands");
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, kfd, NULL, 0, 0);
	sqe->cmd_op = KVBLK_URING_CMD_LOAD_MANY;
	memcpy(sqe->cmd, &cmd, sizeof(cmd));
	/* Submitted, but never waited for: the task work stays queued. */
	ret = io_uring_submit(&ring);
	if (ret != 1) {
		fprintf(stderr, "FAIL: io_uring_submit: %d\n", ret);
		return 1;
	}
	/* In 10 ms steps. */
	for (i = 0, moved = 0, last = c0;; i++) {
		c = kvblk_stat(disk, "commands");
		if (c >= c0 + NR)
			break;
		if (c != last) {
			last = c;
			moved = i;
		}
		if (c > c0 && i - moved >= QUIET_S * 100 && kvblk_stat(disk, "inflight") == 0)
			break;
		if (i >= WAIT_S * 100) {
			fprintf(stderr, "FAIL: the batch's %d commands did not complete in %d s (commands %lld, before %lld; inflight %lld)\n",
				NR, WAIT_S, c, c0, kvblk_stat(disk, "inflight"));
			return 1;
		}
		usleep(10000);
	}
	printf("STALLED: %lld of %d commands completed in %.2f s, the batch not collected\n",
	       c - c0, NR, i / 100.0);
	fflush(stdout);
	raise(SIGSTOP);

	/* Continued after the removal: collect it now. */
	ret = io_uring_wait_cqe(&ring, &cqe);
	if (ret) {
		fprintf(stderr, "FAIL: io_uring_wait_cqe: %s\n", strerror(-ret));
		return 1;
	}
	printf("CQE res %d\n", cqe->res);
	if (cqe->res < 0) {
		fprintf(stderr, "FAIL: the batch failed as a whole: %d\n", cqe->res);
		bad++;
	}
	for (i = 0; i < NR && cqe->res >= 0; i++) {
		if (res[i].status == 0) {
			if (res[i].bytes != OBJ || memcmp(mem + (size_t)i * OBJ,
							  want + (size_t)i * OBJ, OBJ)) {
				fprintf(stderr, "FAIL: object %d: status 0, bytes differ\n", i);
				bad++;
			}
		} else if (res[i].status == -EIO) {
			eio++;
		} else if (res[i].status != -ENODEV) {
			fprintf(stderr, "FAIL: object %d: status %d\n", i, res[i].status);
			bad++;
		}
	}
	io_uring_cqe_seen(&ring, cqe);
	printf("EIO %d\n", eio);
	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	if (ret >= 0 || errno != ENODEV) {
		fprintf(stderr, "FAIL: a batch after the removal: %d (%s), want ENODEV\n",
			ret, ret < 0 ? strerror(errno) : "success");
		bad++;
	}
	io_uring_queue_exit(&ring);
	close(kfd);
	printf("%s\n", bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}

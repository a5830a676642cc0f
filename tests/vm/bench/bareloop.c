/* SPDX-License-Identifier: MIT */
/*
 * kvblk_bareloop: read the first BYTES of DEVICE over and over with io_uring and nothing
 * else: no libkvblk, no fio. The leanest userspace path there is to one device, the per-CPU
 * ceiling of make vmbench-cpu's userspace legs beside fio's searched points (fio's own
 * per-I/O work, its io_u bookkeeping and job loop, is no part of a load path).
 *
 * usage: kvblk_bareloop DEVICE BYTES CMD QD FIXED SECONDS [CHECK [SETUP]]
 *
 * One ring of QD entries (SETUP "defer", the default: IORING_SETUP_SINGLE_ISSUER |
 * IORING_SETUP_DEFER_TASKRUN where the kernel has them (6.1), else as "coop"; "coop":
 * IORING_SETUP_COOP_TASKRUN, as libkvblk's rings, whose several threads rule out
 * SINGLE_ISSUER; "none": no flag), DEVICE its registered file 0
 * (IOSQE_FIXED_FILE: no fget()/fput() per read), opened O_DIRECT. QD reads of CMD bytes in
 * flight, at consecutive offsets wrapping at BYTES, each into its own CMD-sized slot of one
 * buffer aligned to 2 MiB and madvise(MADV_HUGEPAGE)d (as kvblk_loadloop's and fio's f4/f5
 * buffers are). Each round submits the whole queue depth in one io_uring_enter() and waits
 * in it for all QD completions (fio's iodepth_batch_submit = iodepth_batch_complete_min =
 * QD, and one libkvblk batch of QD objects).
 *   FIXED  1: the buffer is registered and read with IORING_OP_READ_FIXED (fio's fixedbufs:
 *          no pinning per read; before 6.11 one bio_vec per 4 KiB page, so a read of more
 *          pages than the queue's max_segments is split). 0: IORING_OP_READ, the pages pinned
 *          per read, where the block layer merges a huge page's 4 KiB pages into one segment.
 *   CHECK  1: the first round's reads are compared with pread(2) of DEVICE (exit 1 when one
 *          differs).
 * Runs for SECONDS after the first round (the bench ends it earlier with SIGTERM), then
 * prints GB/s (10^9 bytes). Exit: 0; 1 on an error or a short read; 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_buf.h"

struct bare {
	struct io_uring ring;
	unsigned char *mem;
	uint64_t total, cmd, next;
	uint32_t qd;
	int fixed;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "kvblk_bareloop: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* Queue slot @i's next read (the offsets run on, wrapping at the store's end). */
static void queue_read(struct bare *b, uint32_t i)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
	unsigned char *dst = b->mem + (uint64_t)i * b->cmd;

	if (!sqe)
		die("io_uring_get_sqe", -EBUSY);	/* QD entries, QD reads: cannot happen */
	if (b->fixed)
		io_uring_prep_read_fixed(sqe, 0, dst, (unsigned)b->cmd, b->next, 0);
	else
		io_uring_prep_read(sqe, 0, dst, (unsigned)b->cmd, b->next);
	sqe->flags |= IOSQE_FIXED_FILE;
	sqe->user_data = i;
	b->next += b->cmd;
	if (b->next + b->cmd > b->total)
		b->next = 0;
}

/*
 * Submit the queued reads and wait until all QD completed (io_uring_enter() may come back
 * earlier, on a signal: every slot must be free before it is queued again): the reads done.
 */
static uint32_t round_trip(struct bare *b)
{
	struct io_uring_cqe *cqe;
	unsigned head, n, seen = 0;
	int rc;

	while (seen < b->qd) {
		rc = io_uring_submit_and_wait(&b->ring, b->qd - seen);
		if (rc < 0 && rc != -EINTR)
			die("io_uring_submit_and_wait", rc);
		n = 0;
		io_uring_for_each_cqe(&b->ring, head, cqe) {
			if (cqe->res != (int)b->cmd) {
				if (cqe->res < 0)
					die("read", cqe->res);
				fprintf(stderr, "kvblk_bareloop: short read: %d of %llu bytes\n",
					cqe->res, (unsigned long long)b->cmd);
				exit(1);
			}
			n++;
		}
		io_uring_cq_advance(&b->ring, n);
		seen += n;
	}
	return seen;
}

static int ring_init(struct bare *b, const char *setup)
{
	static const unsigned flags[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,	/* 6.1 */
		IORING_SETUP_COOP_TASKRUN,					/* 5.19 */
		0,
	};
	const char *names[] = { "SINGLE_ISSUER|DEFER_TASKRUN", "COOP_TASKRUN", "none" };
	unsigned i = !strcmp(setup, "coop") ? 1 : !strcmp(setup, "none") ? 2 : 0;
	int rc = -EINVAL;

	for (; i < sizeof(flags) / sizeof(flags[0]); i++) {
		rc = io_uring_queue_init(b->qd, &b->ring, flags[i]);
		if (rc == 0) {
			fprintf(stderr, "kvblk_bareloop: ring setup flags %s\n", names[i]);
			return 0;
		}
		if (rc != -EINVAL)
			break;
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct bare b = { 0 };
	const char *dev, *setup = "defer";
	uint64_t len, done = 0;
	double secs, t0, t;
	struct bench_buf bb = { 0 };
	int fd, rc, check = 0;

	if (argc < 7) {
		fprintf(stderr, "usage: %s DEVICE BYTES CMD QD FIXED SECONDS [CHECK [SETUP]]\n", argv[0]);
		return 2;
	}
	dev = argv[1];
	b.total = strtoull(argv[2], NULL, 0);
	b.cmd = strtoull(argv[3], NULL, 0);
	b.qd = (uint32_t)strtoul(argv[4], NULL, 0);
	b.fixed = !strcmp(argv[5], "1");
	secs = strtod(argv[6], NULL);
	if (argc > 7)
		check = !strcmp(argv[7], "1");
	if (argc > 8)
		setup = argv[8];
	if (!b.cmd || b.cmd > (1u << 30) || b.cmd % 512 || !b.qd || b.qd > 4096 || b.total < b.cmd) {
		fprintf(stderr, "kvblk_bareloop: want CMD a multiple of 512 up to 1 GiB, "
			"0 < QD <= 4096, BYTES >= CMD\n");
		return 2;
	}

	fd = open(dev, O_RDONLY | O_DIRECT | O_NOATIME);
	if (fd < 0 && errno == EPERM)	/* not the node's owner: as libkvblk, without O_NOATIME */
		fd = open(dev, O_RDONLY | O_DIRECT);
	if (fd < 0)
		die(dev, -errno);
	rc = ring_init(&b, setup);
	if (rc < 0)
		die("io_uring_queue_init", rc);
	rc = io_uring_register_files(&b.ring, &fd, 1);
	if (rc < 0)
		die("io_uring_register_files", rc);

	len = (uint64_t)b.qd * b.cmd;
	rc = bench_buf_alloc(&bb, len, "kvblk_bareloop");
	if (rc < 0)
		die("mmap", rc);
	b.mem = bb.mem;
	if (b.fixed) {
		struct iovec iov = { .iov_base = b.mem, .iov_len = len };

		rc = io_uring_register_buffers(&b.ring, &iov, 1);
		if (rc < 0)
			die("io_uring_register_buffers", rc);
	}

	/* The first round: warm-up, and the data check. */
	for (uint32_t i = 0; i < b.qd; i++)
		queue_read(&b, i);
	round_trip(&b);
	if (check) {
		unsigned char *want = malloc(b.cmd);
		int cfd = open(dev, O_RDONLY);	/* buffered: any alignment */

		if (!want)
			die("malloc", -ENOMEM);
		if (cfd < 0)
			die(dev, -errno);
		for (uint32_t i = 0; i < b.qd; i++) {
			uint64_t off = (uint64_t)i * b.cmd % (b.total / b.cmd * b.cmd);

			if (pread(cfd, want, b.cmd, (off_t)off) != (ssize_t)b.cmd)
				die("pread", -errno);
			if (memcmp(want, b.mem + (uint64_t)i * b.cmd, b.cmd)) {
				fprintf(stderr, "kvblk_bareloop: the read at %llu differs from pread\n",
					(unsigned long long)off);
				return 1;
			}
		}
		close(cfd);
		free(want);
	}

	t0 = bench_now();
	do {
		for (uint32_t i = 0; i < b.qd; i++)
			queue_read(&b, i);
		done += round_trip(&b) * b.cmd;
		t = bench_now();
	} while (t - t0 < secs);
	printf("bare io_uring %s: %.3f GB/s (%llu MiB in %.2f s)\n", b.fixed ? "fixed" : "unfixed",
	       done / (t - t0) / 1e9, (unsigned long long)(done >> 20), t - t0);
	io_uring_queue_exit(&b.ring);
	bench_buf_free(&bb);
	close(fd);
	return 0;
}

// SPDX-License-Identifier: MIT
/*
 * kmod_bench - throughput and CPU cost of one kvblk.ko engine on one target
 * (tests/vm/bench/guest-engines-bench.sh).
 *
 * usage: kmod_bench -e prp|bio [-H] [-u] TARGET STORE_BYTES OBJ_BYTES BATCH SECONDS
 *
 * Attaches TARGET with KVBLK_ATTACH_F_ENGINE_PRP or _BIO, registers one host
 * buffer of BATCH objects (-H: 2 MiB aligned and madvise(MADV_HUGEPAGE), so
 * that its pages are physically contiguous where the kernel gives huge
 * pages; otherwise plain anonymous memory) and loads [0, STORE_BYTES) of TARGET in
 * OBJ_BYTES objects, BATCH per LOAD_MANY call, round and round for SECONDS.
 * The command size and the commands in flight are kvblk.ko's max_cmd_bytes
 * and max_inflight (set by the caller). The first batch is checked byte for
 * byte against pread(O_DIRECT) and not timed; every call must succeed.
 * -u: each batch goes as one IORING_OP_URING_CMD (KVBLK_URING_CMD_LOAD_MANY)
 * on a ring of the context's fd instead of the ioctl, one batch in flight,
 * its CQE awaited before the next (the ioctl's shape through io_uring);
 * exit 4 when the module lacks KVBLK_FEAT_URING_CMD.
 * Prints one line: "engine GB/s cpu_s_per_GB bytes seconds cpu_s", where
 * cpu_s is the process's user + system time (getrusage: submission and the
 * completion work done in its context; interrupt time is not charged to it).
 * Exit: 0, 1 failure, 4 skip (no /dev/kvblk).
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
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvblk.h>
#include <liburing.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void usage(void)
{
	fprintf(stderr, "usage: kmod_bench -e prp|bio [-H] [-u] TARGET STORE_BYTES OBJ_BYTES BATCH SECONDS\n");
	exit(2);
}

/* One LOAD_MANY through io_uring: the CQE's res, as the ioctl's return. */
static int uring_load(struct io_uring *ring, int kfd, struct kvblk_load_many *lm)
{
	struct kvblk_uring_cmd cmd = { .load_many = (uintptr_t)lm };
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int ret;

	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, kfd, NULL, 0, 0);
	sqe->cmd_op = KVBLK_URING_CMD_LOAD_MANY;
	memcpy(sqe->cmd, &cmd, sizeof(cmd));
	ret = io_uring_submit_and_wait(ring, 1);
	if (ret < 0)
		return ret;
	ret = io_uring_wait_cqe(ring, &cqe);
	if (ret)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return ret;
}

int main(int argc, char **argv)
{
	struct kvblk_attach at = { .size = sizeof(at) };
	struct kvblk_buf_reg reg = { .size = sizeof(reg), .kind = KVBLK_MEM_HOST };
	uint64_t store, obj, bytes = 0, pos = 0;
	struct kvblk_desc_result *res;
	struct kvblk_load_many lm;
	struct kvblk_io_desc *d;
	unsigned int batch, k;
	double secs, t0, c0, t, c;
	int kfd, tfd, dfd, ret, first = 1, huge = 0, uring = 0;
	struct io_uring ring;
	uint8_t *buf, *ref;
	__u64 feat = 0;

	while (argc >= 9 && (!strcmp(argv[3], "-H") || !strcmp(argv[3], "-u"))) {
		if (argv[3][1] == 'H')
			huge = 1;
		else
			uring = 1;
		memmove(&argv[3], &argv[4], (argc - 3) * sizeof(*argv));
		argc--;
	}
	if (argc != 8 || strcmp(argv[1], "-e"))
		usage();
	if (!strcmp(argv[2], "prp"))
		at.flags = KVBLK_ATTACH_F_ENGINE_PRP;
	else if (!strcmp(argv[2], "bio"))
		at.flags = KVBLK_ATTACH_F_ENGINE_BIO;
	else
		usage();
	store = strtoull(argv[4], NULL, 0);
	obj = strtoull(argv[5], NULL, 0);
	batch = strtoul(argv[6], NULL, 0);
	secs = atof(argv[7]);
	if (!obj || obj % 4096 || !batch || batch > 4096 || store < obj * batch)
		usage();
	store -= store % (obj * batch);

	kfd = open("/dev/kvblk", O_RDWR);
	if (kfd < 0) {
		printf("SKIP: /dev/kvblk: %s\n", strerror(errno));
		return 4;
	}
	if (uring) {
		if (ioctl(kfd, KVBLK_IOC_GET_FEATURES, &feat) || !(feat & KVBLK_FEAT_URING_CMD)) {
			printf("SKIP: kvblk.ko lacks KVBLK_FEAT_URING_CMD\n");
			return 4;
		}
		ret = io_uring_queue_init(4, &ring, 0);
		if (ret) {
			fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret));
			return 1;
		}
	}
	tfd = open(argv[3], O_RDONLY);
	dfd = open(argv[3], O_RDONLY | O_DIRECT);
	if (tfd < 0 || dfd < 0) {
		fprintf(stderr, "open %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	at.bdev_fd = tfd;
	if (ioctl(kfd, KVBLK_IOC_ATTACH, &at)) {
		fprintf(stderr, "attach %s (%s): %s\n", argv[3], argv[2], strerror(errno));
		return 1;
	}
	if (huge) {
		const size_t hp = 2u << 20;
		uint8_t *m = mmap(NULL, obj * batch + hp, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		buf = m == MAP_FAILED ? m :
		      (uint8_t *)(((uintptr_t)m + hp - 1) & ~(uintptr_t)(hp - 1));
		if (buf != MAP_FAILED) {
			if (madvise(buf, obj * batch, MADV_HUGEPAGE))
				fprintf(stderr, "madvise(MADV_HUGEPAGE): %s\n", strerror(errno));
			memset(buf, 0, obj * batch);
		}
	} else {
		buf = mmap(NULL, obj * batch, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	}
	ref = mmap(NULL, obj, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	d = calloc(batch, sizeof(*d));
	res = calloc(batch, sizeof(*res));
	if (buf == MAP_FAILED || ref == MAP_FAILED || !d || !res)
		return 1;
	reg.addr = (uintptr_t)buf;
	reg.len = obj * batch;
	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &reg)) {
		fprintf(stderr, "register: %s\n", strerror(errno));
		return 1;
	}
	memset(&lm, 0, sizeof(lm));
	t0 = now();
	c0 = cpu_s();
	do {
		for (k = 0; k < batch; k++) {
			d[k].offset = pos;
			d[k].length = obj;
			d[k].buf_offset = k * obj;
			d[k].buf_id = reg.buf_id;
			pos = (pos + obj) % store;
		}
		lm.size = sizeof(lm);
		lm.nr_descs = batch;
		lm.desc_bytes = sizeof(*d);
		lm.descs = (uintptr_t)d;
		lm.results = (uintptr_t)res;
		lm.result_bytes = sizeof(*res);
		ret = uring ? uring_load(&ring, kfd, &lm) : ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
		if (ret != (int)batch) {
			fprintf(stderr, "LOAD_MANY%s: %d (%s), nr_ok %u\n", uring ? " (uring_cmd)" : "",
				ret, strerror(ret < 0 && uring ? -ret : errno), lm.nr_ok);
			return 1;
		}
		bytes += obj * batch;
		if (first) {	/* the first batch, checked and not timed */
			for (k = 0; k < batch; k++) {
				if (pread(dfd, ref, obj, d[k].offset) != (ssize_t)obj ||
				    memcmp(ref, buf + k * obj, obj)) {
					fprintf(stderr, "object at %llu differs from pread\n",
						(unsigned long long)d[k].offset);
					return 1;
				}
			}
			first = 0;
			bytes = 0;
			t0 = now();
			c0 = cpu_s();
		}
		t = now() - t0;
	} while (t < secs);
	c = cpu_s() - c0;
	printf("%s%s %.3f %.3f %llu %.3f %.3f\n", argv[2], uring ? "-uring" : "", bytes / t / 1e9,
	       c / (bytes / 1e9), (unsigned long long)bytes, t, c);
	return 0;
}

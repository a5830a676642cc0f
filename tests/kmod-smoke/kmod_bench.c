// SPDX-License-Identifier: MIT
/*
 * kmod_bench - throughput and CPU cost of one kvblk.ko engine on one target
 * (tests/vm/bench/guest-engines-bench.sh).
 *
 * usage: kmod_bench -e prp|bio [-H] TARGET STORE_BYTES OBJ_BYTES BATCH SECONDS
 *
 * Attaches TARGET with KVBLK_ATTACH_F_ENGINE_PRP or _BIO, registers one host
 * buffer of BATCH objects (-H: 2 MiB aligned and madvise(MADV_HUGEPAGE), so
 * that its pages are physically contiguous where the kernel gives huge
 * pages; otherwise plain anonymous memory) and loads [0, STORE_BYTES) of TARGET in
 * OBJ_BYTES objects, BATCH per LOAD_MANY call, round and round for SECONDS.
 * The command size and the commands in flight are kvblk.ko's max_cmd_bytes
 * and max_inflight (set by the caller). The first batch is checked byte for
 * byte against pread(O_DIRECT) and not timed; every call must succeed.
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
	fprintf(stderr, "usage: kmod_bench -e prp|bio [-H] TARGET STORE_BYTES OBJ_BYTES BATCH SECONDS\n");
	exit(2);
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
	int kfd, tfd, dfd, first = 1, huge = 0;
	uint8_t *buf, *ref;

	if (argc == 9 && !strcmp(argv[3], "-H")) {
		huge = 1;
		memmove(&argv[3], &argv[4], 5 * sizeof(*argv));
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
		if (ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm) != (int)batch) {
			fprintf(stderr, "LOAD_MANY: %s, nr_ok %u\n", strerror(errno), lm.nr_ok);
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
	printf("%s %.3f %.3f %llu %.3f %.3f\n", argv[2], bytes / t / 1e9,
	       c / (bytes / 1e9), (unsigned long long)bytes, t, c);
	return 0;
}

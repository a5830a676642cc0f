/* SPDX-License-Identifier: MIT */
/*
 * kvblk_c_load: the C side of python/bench/bench_python.py. Loads objects [0, N) of OBJ bytes
 * (back to back from byte 0 of PATH) with kvblk_load_many(), BATCH objects per call, into a
 * window of page-aligned, pre-faulted host memory registered as one buffer per batch slot:
 * the loop kvblk-bench times (tools/kvblk-bench/runner.cpp), without its store and checks.
 * The Python side runs the same loop through the kvblk package, so the two differ only in
 * the binding's cost.
 *
 * Usage: kvblk_c_load PATH OBJ_BYTES N BATCH BACKEND QD WINDOW_BATCHES PASSES
 * Prints one line per pass: "gbps <GB/s> seconds <s> bytes <n>" (GB = 1e9 bytes).
 * Exit 0, or 1 with the reason on stderr.
 */
#include <kvblk/kvblk.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int die(const char *what, int rc)
{
	fprintf(stderr, "kvblk_c_load: %s: %s (%d): %s\n", what, strerror(-rc), rc, kvblk_last_error());
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 9) {
		fprintf(stderr, "usage: %s PATH OBJ_BYTES N BATCH BACKEND QD WINDOW_BATCHES PASSES\n", argv[0]);
		return 2;
	}
	const char *path = argv[1];
	const uint64_t obj = strtoull(argv[2], NULL, 0);
	const uint32_t n = (uint32_t)strtoul(argv[3], NULL, 0);
	const uint32_t batch = (uint32_t)strtoul(argv[4], NULL, 0);
	const int backend = kvblk_backend_from_name(argv[5]);
	const uint32_t qd = (uint32_t)strtoul(argv[6], NULL, 0);
	const uint32_t window = (uint32_t)strtoul(argv[7], NULL, 0);
	const int passes = atoi(argv[8]);
	if (backend < 0 || !obj || !n || !batch || !window || n % batch || passes < 1) {
		fprintf(stderr, "kvblk_c_load: bad arguments (N must be a multiple of BATCH)\n");
		return 2;
	}

	struct kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	o.backend = (uint32_t)backend;
	o.queue_depth = qd;
	kvblk_dev *dev;
	int rc = kvblk_open(path, &o, &dev);
	if (rc < 0)
		return die("kvblk_open", rc);

	const uint64_t slot_bytes = obj * batch;
	uint8_t *mem = mmap(NULL, slot_bytes * window, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
			    -1, 0);
	if (mem == MAP_FAILED) {
		perror("kvblk_c_load: mmap");
		return 1;
	}
	uint32_t *ids = calloc(window, sizeof(*ids));
	struct kvblk_desc *d = calloc((size_t)n, sizeof(*d));
	struct kvblk_result *r = calloc(batch, sizeof(*r));
	if (!ids || !d || !r)
		return die("calloc", -12);
	for (uint32_t w = 0; w < window; w++) {
		rc = kvblk_register_buffer(dev, KVBLK_MEM_HOST, mem + w * slot_bytes, slot_bytes, &ids[w]);
		if (rc < 0)
			return die("kvblk_register_buffer", rc);
	}
	/* Descriptors built once, before timing, as the Python side does. */
	for (uint32_t i = 0; i < n; i++) {
		const uint32_t b = i / batch;
		d[i] = (struct kvblk_desc){ .offset = (uint64_t)i * obj, .length = obj,
					    .addr = (uint64_t)(i % batch) * obj,
					    .buf_id = ids[b % window], .tag = i };
	}

	for (int p = 0; p < passes; p++) {
		const double t0 = now_s();
		for (uint32_t b = 0; b < n / batch; b++) {
			rc = kvblk_load_many(dev, d + (size_t)b * batch, batch, r, NULL);
			if (rc < 0)
				return die("kvblk_load_many", rc);
			if ((uint32_t)rc != batch) {
				fprintf(stderr, "kvblk_c_load: batch %u: %u of %u objects failed\n", b, batch - rc, batch);
				return 1;
			}
		}
		const double s = now_s() - t0;
		printf("gbps %.4f seconds %.6f bytes %llu\n", (double)obj * n / s / 1e9, s,
		       (unsigned long long)(obj * n));
		fflush(stdout);
	}
	kvblk_close(dev);
	munmap(mem, slot_bytes * window);
	free(ids);
	free(d);
	free(r);
	return 0;
}

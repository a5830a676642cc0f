/* SPDX-License-Identifier: MIT */
/*
 * libkvblk_c_load.so: the C side of python/bench/bench_python.py. The benchmark opens one
 * device and one registered window from Python and hands the same handle, descriptors and
 * results array to this loop and to the package's Device.load_many() loop, alternating
 * between them chunk by chunk, so the two differ only in the cost of the binding. The loop is
 * the one kvblk-bench times (tools/kvblk-bench/runner.cpp): back-to-back kvblk_load_many()
 * calls of @batch descriptors each.
 */
#include <kvblk/kvblk.h>

#include <stdint.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/**
 * kvblk_c_load_run() - load @descs[0, @n) with kvblk_load_many(), @batch per call.
 * @results: room for @batch results (reused by every call).
 * @ns:      receives the wall time of the loop in ns (CLOCK_MONOTONIC).
 * @failed:  receives the index of the first descriptor that failed, or -1.
 * Return: 0, or the -errno of a rejected call, or -EIO when an object failed (@failed says which).
 */
int kvblk_c_load_run(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n, uint32_t batch,
		     struct kvblk_result *results, uint64_t *ns, int64_t *failed)
{
	const uint64_t t0 = now_ns();
	*failed = -1;
	for (uint32_t s = 0; s < n; s += batch) {
		const uint32_t k = n - s < batch ? n - s : batch;
		int rc = kvblk_load_many(dev, descs + s, k, results, NULL);
		if (rc < 0)
			return rc;
		if ((uint32_t)rc != k) {
			for (uint32_t i = 0; i < k; i++)
				if (results[i].status) {
					*failed = (int64_t)s + i;
					break;
				}
			return -5; /* -EIO */
		}
	}
	*ns = now_ns() - t0;
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * libkvblk_c_kvstore.so: the C side of python/bench/bench_kvstore.py. The benchmark opens one
 * store from Python (kvblk.KVStore) and hands its kvblk_kvstore handle, keys and buffers to
 * these functions and to the package's KVStore.get()/put(), alternating between them round by
 * round, so that the two differ only in the cost of the binding. The C leg is what an engine
 * written in C does: an op array built once, then one synchronous kvblk_kvstore_get() or
 * kvblk_kvstore_put() per batch.
 */
#include <kvblk/kvstore.h>

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/**
 * kvblk_c_kvstore_ops() - an op array of @n ops: key i is @key_len[i] bytes of @keys from the
 * sum of the lengths before it; its buffer @addr[i] (host pointer) of @len[i] bytes. The caller
 * keeps @keys and the buffers valid while the array is used; free it with kvblk_c_kvstore_free().
 * Return: the array, or NULL (out of memory).
 */
struct kvblk_kvstore_op *kvblk_c_kvstore_ops(uint32_t n, const char *keys, const uint32_t *key_len,
					     const uint64_t *addr, const uint64_t *len)
{
	struct kvblk_kvstore_op *ops = calloc(n, sizeof(*ops));
	size_t off = 0;

	if (!ops)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		ops[i].key = keys + off;
		ops[i].key_len = key_len[i];
		ops[i].buf_id = KVBLK_BUF_NONE;
		ops[i].addr = addr[i];
		ops[i].length = len[i];
		ops[i].tag = i;
		off += key_len[i];
	}
	return ops;
}

void kvblk_c_kvstore_free(void *p)
{
	free(p);
}

/**
 * kvblk_c_kvstore_run() - one synchronous batch of @n @ops: kvblk_kvstore_get() (@kind
 * KVBLK_KVSTORE_GET) or kvblk_kvstore_put() (_PUT).
 * @results: room for @n results.
 * @ns:      receives the wall time of the call in ns (CLOCK_MONOTONIC).
 * @failed:  receives the index of the first key whose status is not 0, or -1.
 * Return: 0; the -errno of a rejected batch; -EIO (-5) when a key failed (@failed says which).
 */
int kvblk_c_kvstore_run(kvblk_kvstore *st, uint32_t kind, const struct kvblk_kvstore_op *ops, uint32_t n,
			struct kvblk_kvstore_result *results, uint64_t *ns, int64_t *failed)
{
	const uint64_t t0 = now_ns();
	int rc;

	*failed = -1;
	rc = kind == KVBLK_KVSTORE_GET ? kvblk_kvstore_get(st, ops, n, results)
				       : kvblk_kvstore_put(st, ops, n, results);
	*ns = now_ns() - t0;
	if (rc < 0)
		return rc;
	if ((uint32_t)rc != n) {
		for (uint32_t i = 0; i < n; i++)
			if (results[i].status) {
				*failed = i;
				break;
			}
		return -5; /* -EIO */
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * kvstore_fill - put N keys into a kvblk store (kvblkctl's store tests): key "key-I" holds
 * LEN bytes, byte j = (I * 31 + j) & 0xff. With --hold it then gets every key back once,
 * prints "ready" and keeps the store open until stdin closes (live counters for
 * `kvblkctl store stats`). Exit 0 when every put (and get) succeeded.
 * usage: kvstore_fill [--hold] N LEN DRIVE...
 */
#include <kvblk/kvstore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	int hold = argc > 1 && strcmp(argv[1], "--hold") == 0;
	if (argc < 4 + hold) {
		fprintf(stderr, "usage: kvstore_fill [--hold] N LEN DRIVE...\n");
		return 2;
	}
	unsigned n = (unsigned)atoi(argv[1 + hold]);
	unsigned long len = strtoul(argv[2 + hold], NULL, 0);
	const char *const *drives = (const char *const *)&argv[3 + hold];
	unsigned nd = (unsigned)(argc - 3 - hold);
	kvblk_kvstore *s;
	if (kvblk_kvstore_open(drives, nd, NULL, &s)) {
		fprintf(stderr, "kvstore_fill: %s\n", kvblk_kvstore_last_error());
		return 1;
	}
	struct kvblk_kvstore_op *ops = calloc(n, sizeof(*ops));
	struct kvblk_kvstore_result *res = calloc(n, sizeof(*res));
	char (*keys)[32] = calloc(n, 32);
	unsigned char *data = malloc((size_t)n * len);
	for (unsigned i = 0; i < n; i++) {
		snprintf(keys[i], 32, "key-%u", i);
		for (unsigned long j = 0; j < len; j++)
			data[(size_t)i * len + j] = (unsigned char)(i * 31 + j);
		ops[i].key = keys[i];
		ops[i].key_len = (uint32_t)strlen(keys[i]);
		ops[i].buf_id = KVBLK_BUF_NONE;
		ops[i].addr = (uint64_t)(uintptr_t)(data + (size_t)i * len);
		ops[i].length = len;
	}
	int rc = kvblk_kvstore_put(s, ops, n, res) == (int)n ? 0 : 1;
	if (!rc && hold) {
		memset(data, 0, (size_t)n * len);
		rc = kvblk_kvstore_get(s, ops, n, res) == (int)n ? 0 : 1;
		printf("ready\n");
		fflush(stdout);
		while (getchar() != EOF)
			;
	}
	if (rc)
		fprintf(stderr, "kvstore_fill: %s\n", kvblk_kvstore_last_error());
	kvblk_kvstore_close(s);
	return rc;
}

/* SPDX-License-Identifier: MIT */
/*
 * The kvblk store from C (docs/kvstore.md): make a store over a file, put a batch of KV
 * chunks by key, get them back asynchronously through the store's eventfd, print what the
 * store counted. Exit 0 when every byte came back.
 * usage: kvstore_example PATH   (PATH: a file to create, or a block device to overwrite)
 */
#include <kvblk/kvstore.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNKS 8
#define CHUNK (4u << 20) /* one 4 MiB chunk per key, as a tensor-parallel rank's KV */

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH\n", argv[0]);
		return 2;
	}
	const char *drives[] = {argv[1]};
	struct kvblk_kvstore_create_opts c;
	kvblk_kvstore_create_opts_init(&c, sizeof(c));
	c.nr_classes = 2; /* 256 KiB tails and 4 MiB chunks */
	c.classes[0] = (struct kvblk_kvstore_class){256u << 10, 1, 0};
	c.classes[1] = (struct kvblk_kvstore_class){4u << 20, 4, 0};
	c.file_bytes = 256ull << 20; /* a new file of 256 MiB, preallocated */
	kvblk_kvstore *s;
	if (kvblk_kvstore_create(drives, 1, &c, NULL, &s)) {
		fprintf(stderr, "create: %s\n", kvblk_kvstore_last_error());
		return 1;
	}
	char keys[CHUNKS][64];
	unsigned char *src = malloc((size_t)CHUNKS * CHUNK), *dst = calloc(CHUNKS, CHUNK);
	struct kvblk_kvstore_op ops[CHUNKS];
	struct kvblk_kvstore_result res[CHUNKS];
	for (int i = 0; i < CHUNKS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "meta-llama/Llama-3.1-8B@8@%d@%016x@bfloat16", i, 0xabcd0000u + i);
		memset(src + (size_t)i * CHUNK, 'a' + i, CHUNK);
		ops[i] = (struct kvblk_kvstore_op){.key = keys[i], .key_len = (uint32_t)strlen(keys[i]),
						   .buf_id = KVBLK_BUF_NONE,
						   .addr = (uint64_t)(uintptr_t)(src + (size_t)i * CHUNK), .length = CHUNK};
	}
	/* A put is durable and visible when it returns (data flushed, then its journal record). */
	if (kvblk_kvstore_put(s, ops, CHUNKS, res) != CHUNKS) {
		fprintf(stderr, "put: %s\n", kvblk_kvstore_last_error());
		return 1;
	}
	/* Get them back asynchronously: submit, wait on the eventfd, reap. */
	for (int i = 0; i < CHUNKS; i++)
		ops[i].addr = (uint64_t)(uintptr_t)(dst + (size_t)i * CHUNK);
	struct kvblk_kvstore_submit_opts so;
	kvblk_kvstore_submit_opts_init(&so, sizeof(so));
	so.results = res;
	uint64_t ticket;
	if (kvblk_kvstore_submit(s, KVBLK_KVSTORE_GET, ops, CHUNKS, &so, &ticket)) {
		fprintf(stderr, "submit: %s\n", kvblk_kvstore_last_error());
		return 1;
	}
	struct pollfd p = {.fd = kvblk_kvstore_event_fd(s), .events = POLLIN};
	struct kvblk_cqe cqe;
	while (kvblk_kvstore_reap(s, &cqe, 1, 0, 0) == 0)
		poll(&p, 1, -1);
	int ok = cqe.ticket == ticket && cqe.status == 0 && memcmp(src, dst, (size_t)CHUNKS * CHUNK) == 0;
	struct kvblk_kvstore_stats st;
	st.stats_size = sizeof(st);
	kvblk_kvstore_get_stats(s, &st);
	printf("%d chunks of 4 MiB: %llu hits, %llu checksum failures, %llu journal commits; bytes %s\n", CHUNKS,
	       (unsigned long long)st.hits, (unsigned long long)st.checksum_failures,
	       (unsigned long long)st.journal_commits, ok ? "equal" : "DIFFER");
	kvblk_kvstore_close(s);
	free(src);
	free(dst);
	return ok ? 0 : 1;
}

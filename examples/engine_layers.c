/* SPDX-License-Identifier: MIT */
/*
 * Layer-by-layer KV load, as a serving engine does it: every layer's batch is
 * submitted at once (layer 0 first in line), the engine waits on the eventfd
 * and "computes" each layer as soon as its batch completes, while the later
 * layers are still loading.
 *
 * usage: engine_layers FILE   (created: the example stores the layers first,
 *                              then loads them back and checks every byte)
 */
#include <kvblk/kvblk.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 8, CHUNKS = 16, CHUNK = 256 << 10 };	/* 8 x 16 x 256 KiB = 32 MiB */

static unsigned char byte_at(uint64_t off) { return (unsigned char)(off * 2654435761u >> 13); }

int main(int argc, char **argv)
{
	const uint64_t layer_bytes = (uint64_t)CHUNKS * CHUNK;
	struct kvblk_open_opts o;
	struct kvblk_desc d[CHUNKS];
	struct kvblk_result r[LAYERS][CHUNKS];
	uint64_t ticket[LAYERS];
	int done[LAYERS] = { 0 }, next = 0, bad = 0;
	kvblk_dev *dev;
	unsigned char *mem;
	uint32_t buf;

	kvblk_open_opts_init(&o, sizeof(o));
	o.flags = KVBLK_OPEN_WRITE | KVBLK_OPEN_CREATE;
	o.create_bytes = LAYERS * layer_bytes;
	if (argc < 2 || kvblk_open(argv[1], &o, &dev) < 0) {
		fprintf(stderr, "open: %s\n", kvblk_last_error());
		return 1;
	}
	if (posix_memalign((void **)&mem, 4096, LAYERS * layer_bytes) ||
	    kvblk_register_buffer(dev, KVBLK_MEM_HOST, mem, LAYERS * layer_bytes, &buf) < 0)
		return 1;

	/* Layer l, chunk c: file bytes and buffer bytes at l * layer_bytes + c * CHUNK. */
	for (uint64_t i = 0; i < LAYERS * layer_bytes; i++)
		mem[i] = byte_at(i);
	for (int l = 0; l < LAYERS; l++) {
		for (int c = 0; c < CHUNKS; c++) {
			uint64_t off = l * layer_bytes + (uint64_t)c * CHUNK;
			d[c] = (struct kvblk_desc){ .offset = off, .length = CHUNK, .addr = off,
						    .buf_id = buf, .tag = (uint64_t)l << 32 | c };
		}
		if (kvblk_store_many(dev, d, CHUNKS, r[l], NULL) != CHUNKS) {
			fprintf(stderr, "store layer %d: %s\n", l, kvblk_last_error());
			return 1;
		}
	}
	memset(mem, 0, LAYERS * layer_bytes);

	/* Submit every layer; layer 0 is needed first, so it jumps the queue. */
	for (int l = 0; l < LAYERS; l++) {
		struct kvblk_submit_opts so;

		kvblk_submit_opts_init(&so, sizeof(so));
		so.flags = l == 0 ? KVBLK_SUBMIT_PRIORITY : 0;
		so.user_data = (uint64_t)l;
		so.results = r[l];
		for (int c = 0; c < CHUNKS; c++) {
			uint64_t off = l * layer_bytes + (uint64_t)c * CHUNK;
			d[c] = (struct kvblk_desc){ .offset = off, .length = CHUNK, .addr = off,
						    .buf_id = buf, .tag = (uint64_t)l << 32 | c };
		}
		if (kvblk_submit(dev, d, CHUNKS, &so, &ticket[l]) < 0) {
			fprintf(stderr, "submit layer %d: %s (descriptor %d)\n", l, kvblk_last_error(),
				so.bad_index);
			return 1;
		}
	}

	/* The engine's loop: sleep on the eventfd, reap, compute every layer that is ready in order. */
	struct pollfd pfd = { .fd = kvblk_event_fd(dev), .events = POLLIN };
	while (next < LAYERS) {
		struct kvblk_cqe cqe[LAYERS];
		int n;

		if (poll(&pfd, 1, 10000) <= 0) {
			fprintf(stderr, "no completion in 10 s\n");
			return 1;
		}
		n = kvblk_reap(dev, cqe, LAYERS, 0, 0);
		for (int i = 0; i < n; i++) {
			int l = (int)cqe[i].user_data;

			if (cqe[i].status)
				fprintf(stderr, "layer %d: %u objects failed (%d)\n", l, cqe[i].failed,
					cqe[i].status);
			done[l] = 1;
		}
		for (; next < LAYERS && done[next]; next++) {	/* "compute" layer next */
			const unsigned char *p = mem + next * layer_bytes;

			for (uint64_t i = 0; i < layer_bytes; i++)
				bad += p[i] != byte_at(next * layer_bytes + i);
			printf("layer %d ready (ticket %llu): %s\n", next, (unsigned long long)ticket[next],
			       bad ? "BYTES DIFFER" : "bytes exact");
		}
	}
	kvblk_close(dev);
	free(mem);
	return bad ? 1 : 0;
}

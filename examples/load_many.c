/* SPDX-License-Identifier: MIT */
/* Load 4 KV objects of 1 MiB with one call: usage: load_many FILE_OR_DEVICE */
#include <kvblk/kvblk.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	enum { N = 4, OBJ = 1 << 20 };
	struct kvblk_desc d[N];
	struct kvblk_result r[N];
	struct kvblk_dev_info info = { .info_size = sizeof(info) };
	struct kvblk_batch_info bi = { .info_size = sizeof(bi) };
	kvblk_dev *dev;
	uint32_t buf;
	void *mem;
	int ret;

	if (argc < 2 || kvblk_open(argv[1], NULL, &dev) < 0) {	/* backend "auto" */
		fprintf(stderr, "open: %s\n", kvblk_last_error());
		return 1;
	}
	kvblk_get_info(dev, &info);
	if (posix_memalign(&mem, 4096, N * OBJ) ||
	    kvblk_register_buffer(dev, KVBLK_MEM_HOST, mem, N * OBJ, &buf) < 0)
		return 1;
	for (int i = 0; i < N; i++)	/* object i: device bytes [i MiB, i+1 MiB) */
		d[i] = (struct kvblk_desc){ .offset = (uint64_t)i * OBJ, .length = OBJ,
					    .addr = (uint64_t)i * OBJ, .buf_id = buf, .tag = 100 + i };
	ret = kvblk_load_many(dev, d, N, r, &bi);
	if (ret < 0)
		fprintf(stderr, "load_many: %s (descriptor %d)\n", kvblk_last_error(), bi.bad_index);
	for (int i = 0; ret >= 0 && i < N; i++)
		printf("tag %llu: status %d, %llu bytes\n", (unsigned long long)r[i].tag,
		       r[i].status, (unsigned long long)r[i].bytes);
	printf("%d/%d ok via %s (%s)\n", ret, N, kvblk_backend_name(bi.backend), info.backend_reason);
	kvblk_close(dev);
	free(mem);
	return ret == N ? 0 : 1;
}

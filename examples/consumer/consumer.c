/* SPDX-License-Identifier: MIT */
/*
 * An engine built outside this tree against an installed libkvblk-dev: writes a file of
 * 8 objects whose every byte is known, loads objects 1, 4 and 6 into one registered buffer
 * with one kvblk_load_many() call, and checks every byte. Exit 0 when all are right.
 * usage: kvblk-consumer FILE   (created, 8 x 64 KiB, removed again)
 */
#include <kvblk/kvblk.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NOBJ = 8, OBJ = 64 << 10, N = 3 };

static unsigned char byte_at(uint64_t off)
{
	return (unsigned char)((off * 2654435761u) >> 7 ^ off >> 16);
}

int main(int argc, char **argv)
{
	static const uint32_t pick[N] = { 1, 4, 6 };
	struct kvblk_desc d[N];
	struct kvblk_result r[N];
	unsigned char *mem;
	kvblk_dev *dev;
	uint32_t buf;
	int fd, ret, bad = 0;

	if (argc != 2 || !KVBLK_CHECK_VERSION()) {
		fprintf(stderr, "usage: %s FILE (library %s)\n", argv[0], kvblk_version());
		return 2;
	}
	if (posix_memalign((void **)&mem, 4096, NOBJ * OBJ))
		return 1;
	for (uint64_t o = 0; o < NOBJ * OBJ; o++)
		mem[o] = byte_at(o);
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || pwrite(fd, mem, NOBJ * OBJ, 0) != NOBJ * OBJ || fsync(fd) || close(fd)) {
		perror(argv[1]);
		return 1;
	}
	memset(mem, 0, NOBJ * OBJ);
	if (kvblk_open(argv[1], NULL, &dev) < 0) {
		fprintf(stderr, "kvblk_open: %s\n", kvblk_last_error());
		unlink(argv[1]);
		return 1;
	}
	ret = kvblk_register_buffer(dev, KVBLK_MEM_HOST, mem, N * OBJ, &buf);
	for (int i = 0; ret == 0 && i < N; i++)
		d[i] = (struct kvblk_desc){ .offset = (uint64_t)pick[i] * OBJ, .length = OBJ,
					    .addr = (uint64_t)i * OBJ, .buf_id = buf, .tag = pick[i] };
	if (ret == 0)
		ret = kvblk_load_many(dev, d, N, r, NULL);
	if (ret != N)
		fprintf(stderr, "load: %d (%s)\n", ret, kvblk_last_error());
	for (int i = 0; ret == N && i < N; i++) {
		if (r[i].status != 0 || r[i].bytes != OBJ)
			bad++;
		for (uint64_t b = 0; b < OBJ; b++)
			if (mem[(uint64_t)i * OBJ + b] != byte_at((uint64_t)pick[i] * OBJ + b)) {
				fprintf(stderr, "object %u: byte %llu wrong\n", pick[i],
					(unsigned long long)b);
				bad++;
				break;
			}
	}
	kvblk_close(dev);
	unlink(argv[1]);
	free(mem);
	printf("kvblk %s: %d objects loaded, %d wrong\n", kvblk_version(), ret, bad);
	return ret == N && bad == 0 ? 0 : 1;
}

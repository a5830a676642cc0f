/* SPDX-License-Identifier: MIT */
/*
 * A program as it was built against libkvblk 0.2: compiled with the verbatim 0.2 header
 * (v0_2/kvblk/kvblk.h: 40-byte descriptors, the 0.2 sizes of every struct) and linked
 * against a stub built from the 0.2 version map, so its references are
 * kvblk_load_many@KVBLK_0.1 and friends. Run against today's libkvblk.so.0 it must keep
 * working: loads and stores with 40-byte descriptors, results, and the 0.2-sized
 * batch_info, dev_info and stats, with nothing written past their 0.2 ends.
 *
 * Usage: kvblk_abi_v0_2 DIR BACKEND (psync|threadpool|uring). Exit 0 when every check holds.
 */
#define _GNU_SOURCE
#include <kvblk/kvblk.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OBJ 65536u
#define OBJS 8u
#define CANARY 0xA5A5A5A5A5A5A5A5ull

static int failures;

#define CHECK(cond, ...)                                                                       \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);              \
			fprintf(stderr, __VA_ARGS__);                                          \
			fprintf(stderr, " (last error: %s)\n", kvblk_last_error());          \
			failures++;                                                            \
		}                                                                              \
	} while (0)

/* The 0.2 structs followed by canaries: nothing may be written past their 0.2 size. */
struct guarded_batch_info {
	struct kvblk_batch_info bi;
	uint64_t canary[4];
};
struct guarded_dev_info {
	struct kvblk_dev_info di;
	uint64_t canary[4];
};
struct guarded_stats {
	struct kvblk_stats st;
	uint64_t canary[4];
};

static uint8_t byte_at(uint64_t off) { return (uint8_t)(off * 131 + (off >> 12) * 7 + 3); }

static int canaries_ok(const uint64_t *c)
{
	for (int i = 0; i < 4; i++)
		if (c[i] != CANARY)
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s DIR BACKEND\n", argv[0]);
		return 2;
	}
	_Static_assert(sizeof(struct kvblk_desc) == 40, "this is the 0.2 header");

	char path[4096];
	snprintf(path, sizeof(path), "%s/kvblk-abi-v0_2-XXXXXX", argv[1]);
	int fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 2;
	}
	uint8_t *pattern = malloc((size_t)OBJ * OBJS);
	for (uint64_t i = 0; i < (uint64_t)OBJ * OBJS; i++)
		pattern[i] = byte_at(i);
	if (pwrite(fd, pattern, (size_t)OBJ * OBJS, 0) != (ssize_t)OBJ * OBJS) {
		perror("pwrite");
		return 2;
	}
	close(fd);

	struct kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o)); /* the 0.2 size */
	o.backend = (uint32_t)kvblk_backend_from_name(argv[2]);
	o.flags = KVBLK_OPEN_WRITE;
	kvblk_dev *dev = NULL;
	int rc = kvblk_open(path, &o, &dev);
	CHECK(rc == 0, "kvblk_open(%s, 0.2 opts_size %zu) = %d", path, sizeof(o), rc);
	if (rc) {
		unlink(path);
		return 1;
	}
	CHECK(kvblk_check_version(0, 2) == 1, "a 0.2 program is compatible");

	struct guarded_dev_info gdi;
	memset(&gdi, 0, sizeof(gdi));
	gdi.di.info_size = sizeof(gdi.di);
	for (int i = 0; i < 4; i++)
		gdi.canary[i] = CANARY;
	CHECK(kvblk_get_info(dev, &gdi.di) == 0, "kvblk_get_info with the 0.2 info_size");
	CHECK(gdi.di.backend == o.backend, "backend %u", gdi.di.backend);
	CHECK(gdi.di.capacity == (uint64_t)OBJ * OBJS, "capacity %llu", (unsigned long long)gdi.di.capacity);
	CHECK(canaries_ok(gdi.canary), "kvblk_get_info wrote past the 0.2 struct");
	const uint32_t lbs = gdi.di.logical_block_size;

	/* Loads: 40-byte descriptors, plain and registered destinations, out of order. */
	uint8_t *plain = aligned_alloc(4096, (size_t)OBJ * 4);
	uint8_t *reg = aligned_alloc(4096, (size_t)OBJ * 4);
	memset(plain, 0xEE, (size_t)OBJ * 4);
	memset(reg, 0xEE, (size_t)OBJ * 4);
	uint32_t buf = 0;
	CHECK(kvblk_register_buffer(dev, KVBLK_MEM_HOST, reg, (uint64_t)OBJ * 4, &buf) == 0, "register");
	struct kvblk_desc d[8];
	struct kvblk_result r[8];
	for (uint32_t i = 0; i < 8; i++) {
		const uint64_t obj = (i * 5) % OBJS;
		d[i].offset = obj * OBJ;
		d[i].length = OBJ;
		d[i].addr = i < 4 ? (uint64_t)(uintptr_t)(plain + (uint64_t)i * OBJ) : (uint64_t)(i - 4) * OBJ;
		d[i].buf_id = i < 4 ? KVBLK_BUF_NONE : buf;
		d[i].flags = 0;
		d[i].tag = 1000 + i;
	}
	struct guarded_batch_info gbi;
	memset(&gbi, 0, sizeof(gbi));
	gbi.bi.info_size = sizeof(gbi.bi);
	for (int i = 0; i < 4; i++)
		gbi.canary[i] = CANARY;
	rc = kvblk_load_many(dev, d, 8, r, &gbi.bi);
	CHECK(rc == 8, "kvblk_load_many = %d", rc);
	for (uint32_t i = 0; i < 8; i++) {
		const uint8_t *got = i < 4 ? plain + (uint64_t)i * OBJ : reg + (uint64_t)(i - 4) * OBJ;
		CHECK(r[i].status == 0 && r[i].bytes == OBJ && r[i].tag == 1000 + i && r[i].reserved == 0,
		      "result %u: status %d bytes %llu tag %llu", i, r[i].status, (unsigned long long)r[i].bytes,
		      (unsigned long long)r[i].tag);
		CHECK(memcmp(got, pattern + d[i].offset, OBJ) == 0, "object %u: wrong bytes", i);
	}
	CHECK(gbi.bi.failed == 0 && gbi.bi.bytes == 8ull * OBJ && gbi.bi.bad_index == -1 &&
		      gbi.bi.backend == o.backend && gbi.bi.path == KVBLK_PATH_HOST && gbi.bi.commands >= 8,
	      "batch_info: failed %u bytes %llu bad_index %d backend %u commands %llu", gbi.bi.failed,
	      (unsigned long long)gbi.bi.bytes, gbi.bi.bad_index, gbi.bi.backend,
	      (unsigned long long)gbi.bi.commands);
	CHECK(canaries_ok(gbi.canary), "kvblk_load_many wrote past the 0.2 batch_info");

	/* Stores, read back. */
	uint8_t *src = aligned_alloc(4096, OBJ);
	memset(src, 0x3C, OBJ);
	struct kvblk_desc sd = {2 * (uint64_t)OBJ, OBJ, (uint64_t)(uintptr_t)src, KVBLK_BUF_NONE, 0, 77};
	rc = kvblk_store_many(dev, &sd, 1, r, &gbi.bi);
	CHECK(rc == 1 && r[0].status == 0 && r[0].tag == 77, "kvblk_store_many = %d, status %d", rc, r[0].status);
	CHECK(canaries_ok(gbi.canary), "kvblk_store_many wrote past the 0.2 batch_info");
	struct kvblk_desc ld = {2 * (uint64_t)OBJ, OBJ, (uint64_t)(uintptr_t)plain, KVBLK_BUF_NONE, 0, 78};
	rc = kvblk_load_many(dev, &ld, 1, r, NULL);
	CHECK(rc == 1 && memcmp(plain, src, OBJ) == 0, "store then load: %d", rc);

	/* The 0.2 rules: a bad descriptor is named; flags must be 0. */
	d[2].offset += lbs / 2;
	rc = kvblk_load_many(dev, d, 4, r, &gbi.bi);
	CHECK(rc == -EINVAL && gbi.bi.bad_index == 2 && r[2].status == -EINVAL && r[0].status == -ECANCELED,
	      "misaligned offset: %d, bad_index %d", rc, gbi.bi.bad_index);
	d[2].offset -= lbs / 2;
	d[3].flags = 1;
	rc = kvblk_load_many(dev, d, 4, r, &gbi.bi);
	CHECK(rc == -EINVAL && gbi.bi.bad_index == 3, "flags 1 from a 0.2 program: %d, bad_index %d", rc,
	      gbi.bi.bad_index);
	d[3].flags = 0;
	CHECK(canaries_ok(gbi.canary), "a rejected call wrote past the 0.2 batch_info");

	struct guarded_stats gs;
	memset(&gs, 0, sizeof(gs));
	gs.st.stats_size = sizeof(gs.st);
	for (int i = 0; i < 4; i++)
		gs.canary[i] = CANARY;
	CHECK(kvblk_get_stats(dev, &gs.st) == 0, "kvblk_get_stats with the 0.2 stats_size");
	CHECK(gs.st.batches == 3 && gs.st.objects == 10 && gs.st.bytes_read == 9ull * OBJ &&
		      gs.st.bytes_written == OBJ && gs.st.rejected_batches == 2 &&
		      gs.st.batches_by_backend[o.backend] == 3 && gs.st.bytes_by_path[KVBLK_PATH_HOST] == 10ull * OBJ,
	      "stats: batches %llu objects %llu read %llu written %llu rejected %llu",
	      (unsigned long long)gs.st.batches, (unsigned long long)gs.st.objects,
	      (unsigned long long)gs.st.bytes_read, (unsigned long long)gs.st.bytes_written,
	      (unsigned long long)gs.st.rejected_batches);
	CHECK(canaries_ok(gs.canary), "kvblk_get_stats wrote past the 0.2 stats");

	kvblk_close(dev);
	unlink(path);
	free(pattern);
	free(plain);
	free(reg);
	free(src);
	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("ok: a 0.2 program on libkvblk %s (%s)\n", kvblk_version(), argv[2]);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_store_test - stores through kvblk.ko (KVBLK_LOAD_F_STORE,
 * KVBLK_FEAT_STORE), byte-exact, with canaries: every byte around a stored
 * range is compared too, on the device and in the source buffer.
 *
 * Devices (tests/selftests/kvblk/vm-store.sh sets them up in the VM):
 *   KVBLK_STORE_BLKDEV  a scratch block device (memory-backed null_blk),
 *                       overwritten freely: the block-layer engine
 *   KVBLK_STORE_DIRS    colon-separated mount points of scratch file
 *                       systems (ext4, xfs): the file engine
 *   KVBLK_TEST_DEVICE   the emulated NVMe namespace (/dev/nvme0n1): the PRP
 *                       engine's refusal (nothing written) and a bio-engine
 *                       store that puts the original bytes back afterwards
 *
 *   feature_and_flags   KVBLK_FEAT_STORE; an unknown flag and DURABLE alone:
 *                       -EINVAL, nothing written, no result written
 *   bdev_roundtrip      plain and durable stores of three objects (one of
 *                       several commands): results, header, counters;
 *                       O_DIRECT and buffered reads see them, the bytes
 *                       between them are unchanged
 *   bdev_rights         an O_RDONLY target: -EBADF at its first descriptor
 *                       (bad_index, results), O_APPEND too, a device set
 *                       read-only (BLKROSET): -EROFS; nothing written; the
 *                       O_RDONLY target still loads
 *   bdev_bounds         past the end: -ERANGE; overlapping device ranges:
 *                       -EINVAL at the later one; overlapping sources: fine
 *   prp_refused         a target attached with KVBLK_ATTACH_F_ENGINE_PRP:
 *                       -EOPNOTSUPP, alone and after a
 *                       block-layer target in the same batch; nothing written
 *   nvme_bio_restore    the namespace through the block-layer engine (its
 *                       default there): store,
 *                       read back, store the original back
 *   files               per file system: a store over data and one into a
 *                       hole, plain and durable, read back (O_DIRECT and
 *                       buffered), the size unchanged; past the end -ERANGE
 *                       (no extension); O_RDONLY and O_APPEND -EBADF
 *   uring_store         the same flags through KVBLK_URING_CMD_LOAD_MANY: two
 *                       store batches in flight on one ring, each CQE res the
 *                       object count and the bytes on the device; a refused
 *                       one (O_RDONLY target): res -EBADF, bad_index, results
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/kvblk.h>

/* The 6.1 harness has unused parameters of its own. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#include "kvblk_utils.h"

#define KIB		1024ULL
#define MIB		(1024ULL * KIB)
#define REGION		(4 * MIB)	/* the part of a scratch target tests touch */
#define BUF_BYTES	(8 * MIB)
#define MAX_TGTS	4
#define UNWRITTEN	0x77		/* result bytes before the call */

/* Bytes of @len from a seed: each test's data differs from the last one's. */
static void fill(unsigned char *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 32);
	}
}

static void *alloc_aligned(size_t len)
{
	void *p = NULL;

	return posix_memalign(&p, 4096, len) ? NULL : p;
}

/* pread/pwrite of [off, off + len), O_DIRECT unless @buffered; 0 or -errno. */
static int rw_path(const char *path, bool write, bool buffered, uint64_t off,
		   void *buf, size_t len)
{
	int fd = open(path, (write ? O_RDWR : O_RDONLY) | (buffered ? 0 : O_DIRECT) |
			    O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);
	if (write && n == (ssize_t)len && fsync(fd))
		n = -1;
	close(fd);
	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? 0 : -EIO;
}

static uint64_t dev_size(const char *path)
{
	uint64_t sz = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (ioctl(fd, BLKGETSIZE64, &sz))
			sz = 0;
		close(fd);
	}
	return sz;
}

/* First byte where @a and @b differ, or -1. */
static long long differ(const unsigned char *a, const unsigned char *b, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (a[i] != b[i])
			return i;
	return -1;
}

/* A context with targets and one registered host buffer (BUF_BYTES). */
struct sctx {
	int kfd;
	unsigned int nr;
	struct kvblk_attach a[MAX_TGTS];
	__u32 buf_id;
	unsigned char *mem;
};

static int sctx_open(struct sctx *c)
{
	memset(c, 0, sizeof(*c));
	c->kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	return c->kfd < 0 ? -errno : 0;
}

/* Attach @path opened with @oflags as the next target; its index or -errno. */
static int sctx_add(struct sctx *c, const char *path, int oflags, __u32 aflags)
{
	struct kvblk_attach *a = &c->a[c->nr];
	int fd, ret = 0;

	if (c->nr == MAX_TGTS)
		return -ENOSPC;
	fd = open(path, oflags | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->flags = aflags | KVBLK_ATTACH_F_ADD_TARGET;
	a->bdev_fd = fd;
	if (ioctl(c->kfd, KVBLK_IOC_ATTACH, a))
		ret = -errno;
	close(fd);
	return ret ? ret : (int)c->nr++;
}

static int sctx_register(struct sctx *c)
{
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST };

	c->mem = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (c->mem == MAP_FAILED) {
		c->mem = NULL;
		return -ENOMEM;
	}
	r.addr = (uintptr_t)c->mem;
	r.len = BUF_BYTES;
	if (ioctl(c->kfd, KVBLK_IOC_REGISTER_BUFFER, &r))
		return -errno;
	c->buf_id = r.buf_id;
	return 0;
}

static void sctx_close(struct sctx *c)
{
	if (c->kfd >= 0)
		close(c->kfd);
	if (c->mem)
		munmap(c->mem, BUF_BYTES);
	c->kfd = -1;
	c->mem = NULL;
}

static struct kvblk_io_desc desc(__u32 target, uint64_t off, uint64_t len,
				 uint64_t buf_off, __u32 buf_id)
{
	struct kvblk_io_desc d = {
		.offset = off, .length = len, .buf_offset = buf_off,
		.buf_id = buf_id, .tag = off, .target = target,
	};

	return d;
}

/* One LOAD_MANY with @flags; the ioctl's return or -errno; results in @r. */
static long batch(struct sctx *c, __u32 flags, struct kvblk_io_desc *d,
		  unsigned int n, struct kvblk_desc_result *r,
		  struct kvblk_load_many *lm)
{
	memset(lm, 0, sizeof(*lm));
	memset(r, UNWRITTEN, n * sizeof(*r));
	lm->size = sizeof(*lm);
	lm->flags = flags;
	lm->nr_descs = n;
	lm->desc_bytes = sizeof(*d);
	lm->descs = (uintptr_t)d;
	lm->results = (uintptr_t)r;
	lm->result_bytes = sizeof(*r);
	if (ioctl(c->kfd, KVBLK_IOC_LOAD_MANY, lm) < 0)
		return -errno;
	return lm->nr_ok;
}

static long long stat_of(const char *disk, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/kernel/kvblk/%s/stats/%s", disk, name);
	return read_ll(path);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static __u64 features(void)
{
	__u64 f = 0;
	int kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);

	if (kfd >= 0) {
		if (ioctl(kfd, KVBLK_IOC_GET_FEATURES, &f))
			f = 0;
		close(kfd);
	}
	return f;
}

/*
 * A scratch target's region: written with background bytes first (the
 * canaries between stored ranges), then what a test expects in @want.
 */
struct region {
	const char *path;
	unsigned char *want;
	unsigned char *got;
};

static int region_init(struct region *g, const char *path, uint64_t seed)
{
	int ret;

	g->path = path;
	g->want = alloc_aligned(REGION);
	g->got = alloc_aligned(REGION);
	if (!g->want || !g->got)
		return -ENOMEM;
	fill(g->want, REGION, seed);
	ret = rw_path(path, true, false, 0, g->want, REGION);
	return ret;
}

/* The target equals @want: through O_DIRECT and, if @buffered, the page cache. */
static long long region_check(struct region *g, bool buffered)
{
	if (rw_path(g->path, false, buffered, 0, g->got, REGION))
		return -2;
	return differ(g->want, g->got, REGION);
}

static void region_free(struct region *g)
{
	free(g->want);
	free(g->got);
}

static const char *scratch_bdev(void)
{
	return getenv("KVBLK_STORE_BLKDEV");
}

TEST(feature_and_flags)
{
	struct kvblk_desc_result r[1];
	struct kvblk_load_many lm;
	struct kvblk_io_desc d[1];
	struct region g;
	struct sctx c;
	unsigned int i;

	ASSERT_NE(0ULL, features() & KVBLK_FEAT_STORE);
	if (!scratch_bdev())
		SKIP(return, "KVBLK_STORE_BLKDEV is not set");
	ASSERT_EQ(0, sctx_open(&c));
	ASSERT_EQ(0, sctx_add(&c, scratch_bdev(), O_RDWR, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ(0, sctx_register(&c));
	ASSERT_EQ(0, region_init(&g, scratch_bdev(), 11));
	fill(c.mem, BUF_BYTES, 12);
	d[0] = desc(0, 64 * KIB, 64 * KIB, 0, c.buf_id);

	/* An unknown bit, DURABLE without STORE, unknown with STORE. */
	EXPECT_EQ(-EINVAL, batch(&c, 1U << 2, d, 1, r, &lm));
	EXPECT_EQ(-EINVAL, batch(&c, KVBLK_LOAD_F_DURABLE, d, 1, r, &lm));
	EXPECT_EQ(-EINVAL, batch(&c, KVBLK_LOAD_F_STORE | (1U << 31), d, 1, r, &lm));
	/* Header errors: nothing written back, not even the results. */
	for (i = 0; i < sizeof(r); i++)
		EXPECT_EQ(UNWRITTEN, ((unsigned char *)r)[i]);
	EXPECT_EQ(-1, region_check(&g, false));
	region_free(&g);
	sctx_close(&c);
}

/* Three objects, one of several commands, at page and sub-page offsets. */
static void store_roundtrip(struct __test_metadata *_metadata, __u32 flags,
			   uint64_t seed)
{
	const char *dev = scratch_bdev(), *disk;
	struct kvblk_desc_result r[3];
	struct kvblk_load_many lm;
	struct kvblk_io_desc d[3];
	long long w0, b0;
	struct region g;
	struct sctx c;
	unsigned int i;
	uint64_t sum = 0;

	disk = base_name(dev);
	ASSERT_EQ(0, sctx_open(&c));
	ASSERT_EQ(0, sctx_add(&c, dev, O_RDWR, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ((__u32)KVBLK_ENGINE_BIO, c.a[0].engine);
	ASSERT_EQ(0, sctx_register(&c));
	ASSERT_EQ(0, region_init(&g, dev, seed));
	/* The page cache holds the old bytes: the store must drop them. */
	ASSERT_EQ(-1, region_check(&g, true));
	fill(c.mem, BUF_BYTES, seed + 1);

	d[0] = desc(0, 4 * KIB, 8 * KIB, 0, c.buf_id);
	d[1] = desc(0, 64 * KIB + 4 * KIB, MIB + 12 * KIB, 1 * MIB + 4 * KIB, c.buf_id);
	d[2] = desc(0, 3 * MIB, 256 * KIB, 5 * MIB, c.buf_id);
	w0 = stat_of(disk, "bytes_written");
	b0 = stat_of(disk, "bytes");
	ASSERT_EQ(3, batch(&c, flags, d, 3, r, &lm));
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(0, r[i].status);
		EXPECT_EQ(d[i].length, r[i].bytes);
		memcpy(g.want + d[i].offset, c.mem + d[i].buf_offset, d[i].length);
		sum += d[i].length;
	}
	EXPECT_EQ(3U, lm.nr_ok);
	EXPECT_EQ(-1, lm.bad_index);
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, lm.engine);
	EXPECT_LE(4ULL, lm.nr_cmds);	/* d[1] is more than one bio */
	EXPECT_EQ(w0 + (long long)sum, stat_of(disk, "bytes_written"));
	EXPECT_EQ(b0, stat_of(disk, "bytes"));

	EXPECT_EQ(-1, region_check(&g, false));
	EXPECT_EQ(-1, region_check(&g, true));
	/* And a load through kvblk.ko gives them back. */
	memset(c.mem, 0, BUF_BYTES);
	ASSERT_EQ(3, batch(&c, 0, d, 3, r, &lm));
	for (i = 0; i < 3; i++)
		EXPECT_EQ(-1, differ(c.mem + d[i].buf_offset, g.want + d[i].offset,
				     d[i].length));
	region_free(&g);
	sctx_close(&c);
}

TEST(bdev_roundtrip)
{
	if (!scratch_bdev())
		SKIP(return, "KVBLK_STORE_BLKDEV is not set");
	store_roundtrip(_metadata, KVBLK_LOAD_F_STORE, 21);
	store_roundtrip(_metadata, KVBLK_LOAD_F_STORE | KVBLK_LOAD_F_DURABLE, 31);
}

TEST(bdev_rights)
{
	const char *dev = scratch_bdev();
	struct kvblk_desc_result r[2];
	struct kvblk_load_many lm;
	struct kvblk_io_desc d[2];
	struct region g;
	struct sctx c;
	int one = 1, zero = 0, fd;

	if (!dev)
		SKIP(return, "KVBLK_STORE_BLKDEV is not set");
	ASSERT_EQ(0, sctx_open(&c));
	ASSERT_EQ(0, sctx_add(&c, dev, O_RDWR, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ(1, sctx_add(&c, dev, O_RDONLY, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ(2, sctx_add(&c, dev, O_RDWR | O_APPEND, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ(0, sctx_register(&c));
	ASSERT_EQ(0, region_init(&g, dev, 41));
	fill(c.mem, BUF_BYTES, 42);

	/* The writable target first, then the read-only one: refused at 1. */
	d[0] = desc(0, 0, 64 * KIB, 0, c.buf_id);
	d[1] = desc(1, MIB, 64 * KIB, MIB, c.buf_id);
	EXPECT_EQ(-EBADF, batch(&c, KVBLK_LOAD_F_STORE, d, 2, r, &lm));
	EXPECT_EQ(1, lm.bad_index);
	EXPECT_EQ(-ECANCELED, r[0].status);
	EXPECT_EQ(-EBADF, r[1].status);
	EXPECT_EQ(0ULL, r[1].bytes);
	EXPECT_EQ(0ULL, lm.nr_cmds);
	EXPECT_EQ(0U, lm.engines);
	/* Durable changes nothing about rights. */
	EXPECT_EQ(-EBADF, batch(&c, KVBLK_LOAD_F_STORE | KVBLK_LOAD_F_DURABLE,
				d, 2, r, &lm));
	EXPECT_EQ(1, lm.bad_index);
	/* O_APPEND: a write would go to the end, not to the offset. */
	d[1].target = 2;
	EXPECT_EQ(-EBADF, batch(&c, KVBLK_LOAD_F_STORE, d, 2, r, &lm));
	EXPECT_EQ(1, lm.bad_index);
	EXPECT_EQ(-1, region_check(&g, false));
	/* The read-only target still loads. */
	d[1].target = 1;
	EXPECT_EQ(1, batch(&c, 0, &d[1], 1, r, &lm));
	EXPECT_EQ(-1, differ(c.mem + MIB, g.want + MIB, 64 * KIB));

	/* A device set read-only after attach: -EROFS, then writable again. */
	fill(c.mem, BUF_BYTES, 43);
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioctl(fd, BLKROSET, &one));
	EXPECT_EQ(-EROFS, batch(&c, KVBLK_LOAD_F_STORE, d, 1, r, &lm));
	EXPECT_EQ(0, lm.bad_index);
	EXPECT_EQ(-EROFS, r[0].status);
	ASSERT_EQ(0, ioctl(fd, BLKROSET, &zero));
	close(fd);
	EXPECT_EQ(-1, region_check(&g, false));
	EXPECT_EQ(1, batch(&c, KVBLK_LOAD_F_STORE, d, 1, r, &lm));
	memcpy(g.want, c.mem, 64 * KIB);
	EXPECT_EQ(-1, region_check(&g, false));
	region_free(&g);
	sctx_close(&c);
}

TEST(bdev_bounds)
{
	const char *dev = scratch_bdev();
	struct kvblk_desc_result r[3];
	struct kvblk_load_many lm;
	struct kvblk_io_desc d[3];
	unsigned char *tail, *tail2;
	struct region g;
	struct sctx c;
	uint64_t cap;

	if (!dev)
		SKIP(return, "KVBLK_STORE_BLKDEV is not set");
	cap = dev_size(dev);
	ASSERT_LT(REGION + MIB, cap);
	ASSERT_EQ(0, sctx_open(&c));
	ASSERT_EQ(0, sctx_add(&c, dev, O_RDWR, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ(0, sctx_register(&c));
	ASSERT_EQ(0, region_init(&g, dev, 51));
	fill(c.mem, BUF_BYTES, 52);
	tail = alloc_aligned(64 * KIB);
	tail2 = alloc_aligned(64 * KIB);
	ASSERT_NE(NULL, tail);
	ASSERT_NE(NULL, tail2);
	fill(tail, 64 * KIB, 53);
	ASSERT_EQ(0, rw_path(dev, true, false, cap - 64 * KIB, tail, 64 * KIB));

	/* Past the live end: -ERANGE at that descriptor, nothing written. */
	d[0] = desc(0, 0, 64 * KIB, 0, c.buf_id);
	d[1] = desc(0, cap - 4 * KIB, 8 * KIB, MIB, c.buf_id);
	EXPECT_EQ(-ERANGE, batch(&c, KVBLK_LOAD_F_STORE, d, 2, r, &lm));
	EXPECT_EQ(1, lm.bad_index);
	EXPECT_EQ(-ERANGE, r[1].status);
	d[1].offset = cap;
	d[1].length = 4 * KIB;
	EXPECT_EQ(-ERANGE, batch(&c, KVBLK_LOAD_F_STORE, d, 2, r, &lm));
	EXPECT_EQ(1, lm.bad_index);
	EXPECT_EQ(0, rw_path(dev, false, false, cap - 64 * KIB, tail2, 64 * KIB));
	EXPECT_EQ(-1, differ(tail, tail2, 64 * KIB));

	/* Device ranges that overlap: the later one is refused. */
	d[1] = desc(0, 2 * MIB, 64 * KIB, MIB, c.buf_id);
	d[2] = desc(0, 32 * KIB, 64 * KIB, 2 * MIB, c.buf_id);
	EXPECT_EQ(-EINVAL, batch(&c, KVBLK_LOAD_F_STORE, d, 3, r, &lm));
	EXPECT_EQ(2, lm.bad_index);
	EXPECT_EQ(-EINVAL, r[2].status);
	EXPECT_EQ(-1, region_check(&g, false));

	/* Sources that overlap are only read: one buffer range, two places. */
	d[1] = desc(0, 2 * MIB, 64 * KIB, 0, c.buf_id);
	EXPECT_EQ(2, batch(&c, KVBLK_LOAD_F_STORE, d, 2, r, &lm));
	memcpy(g.want, c.mem, 64 * KIB);
	memcpy(g.want + 2 * MIB, c.mem, 64 * KIB);
	EXPECT_EQ(-1, region_check(&g, false));
	free(tail);
	free(tail2);
	region_free(&g);
	sctx_close(&c);
}

TEST(prp_refused)
{
	const char *nvme = test_device(), *dev = scratch_bdev();
	unsigned char *before, *after;
	struct kvblk_desc_result r[2];
	struct kvblk_load_many lm;
	struct kvblk_io_desc d[2];
	struct region g;
	struct sctx c;
	uint64_t cap = dev_size(nvme), off;
	int prp;

	ASSERT_LT(4 * MIB, cap);
	off = cap - 2 * MIB;
	before = alloc_aligned(MIB);
	after = alloc_aligned(MIB);
	ASSERT_NE(NULL, before);
	ASSERT_NE(NULL, after);
	ASSERT_EQ(0, rw_path(nvme, false, false, off, before, MIB));

	ASSERT_EQ(0, sctx_open(&c));
	/* The block-layer engine is the default: PRP only when asked for. */
	prp = sctx_add(&c, nvme, O_RDWR, KVBLK_ATTACH_F_ENGINE_PRP);
	if (prp == -EOPNOTSUPP) {
		sctx_close(&c);
		SKIP(return, "%s refuses the PRP engine (see the kernel log)", nvme);
	}
	ASSERT_EQ(0, prp);
	ASSERT_EQ((__u32)KVBLK_ENGINE_PRP, c.a[0].engine);
	ASSERT_EQ(0, sctx_register(&c));
	fill(c.mem, BUF_BYTES, 61);
	d[0] = desc(0, off, MIB, 0, c.buf_id);
	EXPECT_EQ(-EOPNOTSUPP, batch(&c, KVBLK_LOAD_F_STORE, d, 1, r, &lm));
	EXPECT_EQ(0, lm.bad_index);
	EXPECT_EQ(-EOPNOTSUPP, r[0].status);
	EXPECT_EQ(0ULL, lm.nr_cmds);
	EXPECT_EQ(-EOPNOTSUPP, batch(&c, KVBLK_LOAD_F_STORE | KVBLK_LOAD_F_DURABLE,
				     d, 1, r, &lm));
	/* It still loads. */
	EXPECT_EQ(1, batch(&c, 0, d, 1, r, &lm));
	EXPECT_EQ(-1, differ(c.mem, before, MIB));
	sctx_close(&c);

	/* A block-layer target and the PRP one in one store batch: refused at the PRP one. */
	if (dev) {
		ASSERT_EQ(0, sctx_open(&c));
		ASSERT_EQ(0, sctx_add(&c, nvme, O_RDWR, KVBLK_ATTACH_F_ENGINE_PRP));
		ASSERT_EQ(1, sctx_add(&c, dev, O_RDWR, KVBLK_ATTACH_F_ENGINE_BIO));
		ASSERT_EQ((__u32)KVBLK_ENGINE_PRP, c.a[0].engine);
		ASSERT_EQ(0, sctx_register(&c));
		ASSERT_EQ(0, region_init(&g, dev, 62));
		fill(c.mem, BUF_BYTES, 63);
		d[0] = desc(1, 0, 64 * KIB, 2 * MIB, c.buf_id);
		d[1] = desc(0, off, MIB, 0, c.buf_id);
		EXPECT_EQ(-EOPNOTSUPP, batch(&c, KVBLK_LOAD_F_STORE, d, 2, r, &lm));
		EXPECT_EQ(1, lm.bad_index);
		EXPECT_EQ(-ECANCELED, r[0].status);
		EXPECT_EQ(-EOPNOTSUPP, r[1].status);
		EXPECT_EQ(-1, region_check(&g, false));
		region_free(&g);
		sctx_close(&c);
	}
	ASSERT_EQ(0, rw_path(nvme, false, false, off, after, MIB));
	EXPECT_EQ(-1, differ(before, after, MIB));
	free(before);
	free(after);
}

TEST(nvme_bio_restore)
{
	const char *nvme = test_device();
	unsigned char *orig, *got;
	struct kvblk_desc_result r[2];
	struct kvblk_load_many lm;
	struct kvblk_io_desc d[2];
	struct sctx c;
	uint64_t cap = dev_size(nvme), off;
	long ret;

	ASSERT_LT(8 * MIB, cap);
	off = cap - 4 * MIB;
	orig = alloc_aligned(2 * MIB);
	got = alloc_aligned(2 * MIB);
	ASSERT_NE(NULL, orig);
	ASSERT_NE(NULL, got);
	/* The region and 1 MiB of canaries around the stored 256 KiB pieces. */
	ASSERT_EQ(0, rw_path(nvme, false, false, off, orig, 2 * MIB));
	ASSERT_EQ(0, sctx_open(&c));
	ASSERT_EQ(0, sctx_add(&c, nvme, O_RDWR, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ((__u32)KVBLK_ENGINE_BIO, c.a[0].engine);
	ASSERT_EQ(0, sctx_register(&c));
	fill(c.mem, BUF_BYTES, 71);
	d[0] = desc(0, off + 256 * KIB, 256 * KIB, 0, c.buf_id);
	d[1] = desc(0, off + MIB, 512 * KIB, MIB, c.buf_id);
	ret = batch(&c, KVBLK_LOAD_F_STORE | KVBLK_LOAD_F_DURABLE, d, 2, r, &lm);
	EXPECT_EQ(2, ret);
	EXPECT_EQ(0, rw_path(nvme, false, false, off, got, 2 * MIB));
	EXPECT_EQ(-1, differ(got, orig, 256 * KIB));
	EXPECT_EQ(-1, differ(got + 256 * KIB, c.mem, 256 * KIB));
	EXPECT_EQ(-1, differ(got + 512 * KIB, orig + 512 * KIB, 512 * KIB));
	EXPECT_EQ(-1, differ(got + MIB, c.mem + MIB, 512 * KIB));
	EXPECT_EQ(-1, differ(got + MIB + 512 * KIB, orig + MIB + 512 * KIB, 512 * KIB));

	/* Put the namespace's own bytes back (later cases read its pattern). */
	memcpy(c.mem, orig + 256 * KIB, 256 * KIB);
	memcpy(c.mem + MIB, orig + MIB, 512 * KIB);
	ASSERT_EQ(2, batch(&c, KVBLK_LOAD_F_STORE | KVBLK_LOAD_F_DURABLE, d, 2, r, &lm));
	ASSERT_EQ(0, rw_path(nvme, false, false, off, got, 2 * MIB));
	EXPECT_EQ(-1, differ(got, orig, 2 * MIB));
	free(orig);
	free(got);
	sctx_close(&c);
}

/* Store tests on a file of @dir's file system. */
static void file_case(struct __test_metadata *_metadata, const char *dir)
{
	struct kvblk_desc_result r[2];
	struct kvblk_load_many lm;
	struct kvblk_io_desc d[2];
	char path[512];
	struct region g;
	struct sctx c;
	struct stat st;
	int fd, pass;

	snprintf(path, sizeof(path), "%s/kvblk-store.bin", dir);
	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ASSERT_LE(0, fd);
	/* REGION bytes of data, then a hole of 1 MiB: the file is REGION + 1 MiB. */
	ASSERT_EQ(0, ftruncate(fd, REGION + MIB));
	close(fd);
	ASSERT_EQ(0, region_init(&g, path, 81));

	ASSERT_EQ(0, sctx_open(&c));
	ASSERT_EQ(0, sctx_add(&c, path, O_RDWR, 0));
	ASSERT_EQ((__u32)KVBLK_ENGINE_FILE, c.a[0].engine);
	ASSERT_EQ(1, sctx_add(&c, path, O_RDONLY, 0));
	ASSERT_EQ(2, sctx_add(&c, path, O_RDWR | O_APPEND, 0));
	ASSERT_EQ(0, sctx_register(&c));

	for (pass = 0; pass < 2; pass++) {
		__u32 flags = KVBLK_LOAD_F_STORE | (pass ? KVBLK_LOAD_F_DURABLE : 0);

		/* Populate the page cache with the old bytes. */
		ASSERT_EQ(-1, region_check(&g, true));
		fill(c.mem, BUF_BYTES, 82 + pass);
		d[0] = desc(0, 8 * KIB + pass * 64 * KIB, 24 * KIB, 0, c.buf_id);
		d[1] = desc(0, MIB + 4 * KIB, 1 * MIB + 8 * KIB, 2 * MIB, c.buf_id);
		ASSERT_EQ(2, batch(&c, flags, d, 2, r, &lm));
		EXPECT_EQ((__u32)KVBLK_ENGINE_FILE, lm.engine);
		EXPECT_EQ(0, r[0].status);
		EXPECT_EQ(d[1].length, r[1].bytes);
		memcpy(g.want + d[0].offset, c.mem, d[0].length);
		memcpy(g.want + d[1].offset, c.mem + 2 * MIB, d[1].length);
		EXPECT_EQ(-1, region_check(&g, false));
		EXPECT_EQ(-1, region_check(&g, true));
	}

	/* Into the hole past REGION: allocated, read back, the size unchanged. */
	fill(c.mem, BUF_BYTES, 85);
	d[0] = desc(0, REGION + 128 * KIB, 64 * KIB, 0, c.buf_id);
	ASSERT_EQ(1, batch(&c, KVBLK_LOAD_F_STORE | KVBLK_LOAD_F_DURABLE, d, 1, r, &lm));
	memset(g.got, 0, 256 * KIB);
	ASSERT_EQ(0, rw_path(path, false, false, REGION, g.got, 256 * KIB));
	EXPECT_EQ(-1, differ(g.got + 128 * KIB, c.mem, 64 * KIB));
	EXPECT_EQ(0, g.got[0]);
	EXPECT_EQ(0, g.got[128 * KIB - 1]);
	EXPECT_EQ(0, g.got[192 * KIB]);
	ASSERT_EQ(0, stat(path, &st));
	EXPECT_EQ(REGION + MIB, (uint64_t)st.st_size);

	/* Past the end: -ERANGE, the file not extended. */
	d[0] = desc(0, REGION + MIB - 4 * KIB, 8 * KIB, 0, c.buf_id);
	EXPECT_EQ(-ERANGE, batch(&c, KVBLK_LOAD_F_STORE, d, 1, r, &lm));
	EXPECT_EQ(0, lm.bad_index);
	d[0].offset = REGION + MIB;
	EXPECT_EQ(-ERANGE, batch(&c, KVBLK_LOAD_F_STORE, d, 1, r, &lm));
	ASSERT_EQ(0, stat(path, &st));
	EXPECT_EQ(REGION + MIB, (uint64_t)st.st_size);

	/* Rights: O_RDONLY and O_APPEND targets refused, nothing written. */
	fill(c.mem, BUF_BYTES, 86);
	d[0] = desc(0, 0, 4 * KIB, 0, c.buf_id);
	d[1] = desc(1, 3 * MIB, 4 * KIB, 4 * KIB, c.buf_id);
	EXPECT_EQ(-EBADF, batch(&c, KVBLK_LOAD_F_STORE, d, 2, r, &lm));
	EXPECT_EQ(1, lm.bad_index);
	d[1].target = 2;
	EXPECT_EQ(-EBADF, batch(&c, KVBLK_LOAD_F_STORE, d, 2, r, &lm));
	EXPECT_EQ(1, lm.bad_index);
	EXPECT_EQ(-1, region_check(&g, false));
	ASSERT_EQ(0, stat(path, &st));
	EXPECT_EQ(REGION + MIB, (uint64_t)st.st_size);

	sctx_close(&c);
	region_free(&g);
	unlink(path);
}

TEST(files)
{
	const char *dirs = getenv("KVBLK_STORE_DIRS");
	char *copy, *dir, *save = NULL;
	int n = 0;

	if (!dirs || !*dirs)
		SKIP(return, "KVBLK_STORE_DIRS is not set");
	copy = strdup(dirs);
	ASSERT_NE(NULL, copy);
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		TH_LOG("file system at %s", dir);
		file_case(_metadata, dir);
		n++;
	}
	free(copy);
	EXPECT_LT(0, n);
}

/* An IORING_OP_URING_CMD SQE carrying @lm. */
static void prep_store(struct io_uring *ring, int kfd, struct kvblk_load_many *lm,
		       __u64 user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct kvblk_uring_cmd cmd = { .load_many = (uintptr_t)lm };

	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, kfd, NULL, 0, 0);
	sqe->cmd_op = KVBLK_URING_CMD_LOAD_MANY;
	memcpy(sqe->cmd, &cmd, sizeof(cmd));
	sqe->user_data = user_data;
}

static void header(struct kvblk_load_many *lm, __u32 flags, struct kvblk_io_desc *d,
		   unsigned int n, struct kvblk_desc_result *r)
{
	memset(lm, 0, sizeof(*lm));
	memset(r, UNWRITTEN, n * sizeof(*r));
	lm->size = sizeof(*lm);
	lm->flags = flags;
	lm->nr_descs = n;
	lm->desc_bytes = sizeof(*d);
	lm->descs = (uintptr_t)d;
	lm->results = (uintptr_t)r;
	lm->result_bytes = sizeof(*r);
}

TEST(uring_store)
{
	const char *dev = scratch_bdev();
	struct kvblk_desc_result r[3][2];
	struct kvblk_load_many lm[3];
	struct kvblk_io_desc d[3][2];
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	int res[3] = { 1, 1, 1 };
	struct region g;
	struct sctx c;
	unsigned int i;

	if (!dev)
		SKIP(return, "KVBLK_STORE_BLKDEV is not set");
	if (!(features() & KVBLK_FEAT_URING_CMD))
		SKIP(return, "no KVBLK_FEAT_URING_CMD");
	ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
	ASSERT_EQ(0, sctx_open(&c));
	ASSERT_EQ(0, sctx_add(&c, dev, O_RDWR, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ(1, sctx_add(&c, dev, O_RDONLY, KVBLK_ATTACH_F_ENGINE_BIO));
	ASSERT_EQ(0, sctx_register(&c));
	ASSERT_EQ(0, region_init(&g, dev, 91));
	fill(c.mem, BUF_BYTES, 92);

	/* Batches 0 and 1 store (1 durably), batch 2 names the O_RDONLY target. */
	d[0][0] = desc(0, 0, 128 * KIB, 0, c.buf_id);
	d[0][1] = desc(0, MIB, 64 * KIB, MIB, c.buf_id);
	d[1][0] = desc(0, 2 * MIB, 512 * KIB, 2 * MIB, c.buf_id);
	d[1][1] = desc(0, 3 * MIB + 4 * KIB, 4 * KIB, 3 * MIB, c.buf_id);
	d[2][0] = desc(0, 256 * KIB, 4 * KIB, 4 * MIB, c.buf_id);
	d[2][1] = desc(1, 512 * KIB, 4 * KIB, 5 * MIB, c.buf_id);
	header(&lm[0], KVBLK_LOAD_F_STORE, d[0], 2, r[0]);
	header(&lm[1], KVBLK_LOAD_F_STORE | KVBLK_LOAD_F_DURABLE, d[1], 2, r[1]);
	header(&lm[2], KVBLK_LOAD_F_STORE, d[2], 2, r[2]);
	for (i = 0; i < 3; i++)
		prep_store(&ring, c.kfd, &lm[i], i);
	ASSERT_EQ(3, io_uring_submit(&ring));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
		ASSERT_GT(3ULL, cqe->user_data);
		res[cqe->user_data] = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
	}
	EXPECT_EQ(2, res[0]);
	EXPECT_EQ(2, res[1]);
	EXPECT_EQ(-EBADF, res[2]);
	EXPECT_EQ(1, lm[2].bad_index);
	EXPECT_EQ(-ECANCELED, r[2][0].status);
	EXPECT_EQ(-EBADF, r[2][1].status);
	for (i = 0; i < 2; i++) {
		unsigned int k;

		EXPECT_EQ(-1, lm[i].bad_index);
		EXPECT_EQ(2U, lm[i].nr_ok);
		for (k = 0; k < 2; k++) {
			EXPECT_EQ(0, r[i][k].status);
			EXPECT_EQ(d[i][k].length, r[i][k].bytes);
			memcpy(g.want + d[i][k].offset, c.mem + d[i][k].buf_offset,
			       d[i][k].length);
		}
	}
	EXPECT_EQ(-1, region_check(&g, false));
	EXPECT_EQ(-1, region_check(&g, true));
	io_uring_queue_exit(&ring);
	region_free(&g);
	sctx_close(&c);
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk dma-buf selftests: KVBLK_MEM_DMABUF registrations of dma-bufs made
 * by the test-only exporter (tests/kmod-exporters/kvblk_test_dmabuf.ko,
 * /dev/kvblk_test_dmabuf), run in the test VM (tests/vm) on its emulated
 * namespace, every byte of which is known (tests/vm/pattern.h).
 *
 * What lands is read back through the exporter (KVBLK_TEST_DMABUF_READ)
 * and compared with pread(O_DIRECT) of the same device range and with the
 * pattern; bytes around the objects must keep the fill the test wrote.
 * After every test the exporter's live attachments, mappings, pins and
 * buffers are back to what they were before it (within SETTLE_MS).
 *
 * Revocation: the exporter's REVOKE notifies importers under the
 * reservation lock, waits for the fences, requires every mapping to be
 * gone and then writes a poison byte over the whole buffer. kvblk's
 * notification callback waits for the commands in flight and unmaps, so
 * the poison must stay intact whatever was in flight, and later loads into
 * the buffer fail with -ENODEV per object.
 *
 * The kernel's own exporter too: udmabuf_objects_land registers a udmabuf
 * (a dma-buf over memfd pages, /dev/udmabuf, CONFIG_UDMABUF: Debian 7.2 has
 * it, 6.1 does not and skips) and reads what landed through the memfd.
 *
 * Environment: KVBLK_TEST_DEVICE (default /dev/nvme0n1; only read). Needs
 * root, /dev/kvblk and /dev/kvblk_test_dmabuf (exit 4, skip, without them).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvblk.h>
#include <linux/loop.h>
#include <linux/udmabuf.h>

#include "tests/kmod-exporters/kvblk_test_dmabuf.h"
#include "tests/vm/pattern.h"

/* The 6.1 harness has one unused parameter of its own (its SIGALRM handler). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#include "kvblk_utils.h"

#define SYSFS_ROOT		"/sys/kernel/kvblk"
#define MIB			(1ULL << 20)
#define FILL			0xA5
#define SETTLE_MS		5000
#define MAX_DBUFS		8U
/* Revocation test: objects per batch and their size. */
#define RV_OBJS			64
#define RV_OBJ_BYTES		(256ULL << 10)
#define RV_MAX_BATCHES		400
#define RV_MAX_INFLIGHT		16

/* ---- helpers ------------------------------------------------------------ */

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* @file of the test device's namespace directory in sysfs. */
static void ns_path(char *path, size_t size, const char *file)
{
	const char *dev = test_device(), *base = strrchr(dev, '/');

	snprintf(path, size, SYSFS_ROOT "/%s/%s", base ? base + 1 : dev, file);
}

/* stats/inflight of the test device's namespace; -1 when absent. */
static long long ns_inflight(void)
{
	char path[PATH_MAX];

	ns_path(path, sizeof(path), "stats/inflight");
	return read_ll(path);
}

/* Sets the namespace's max_inflight tunable; the old value, or -1. */
static long long ns_set_max_inflight(long long v)
{
	char path[PATH_MAX], text[32];
	long long old;
	int fd, n;

	ns_path(path, sizeof(path), "max_inflight");
	old = read_ll(path);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = snprintf(text, sizeof(text), "%lld\n", v);
	if (write(fd, text, n) != n)
		old = -1;
	close(fd);
	return old;
}

static int tdb_counts(int tfd, struct kvblk_test_dmabuf_counts *c)
{
	return ioctl(tfd, KVBLK_TEST_DMABUF_COUNTS, c) ? -errno : 0;
}

/* A new dma-buf of @len bytes, every byte @fill; the fd or -errno. */
static int tdb_create(int tfd, uint64_t len, int fill)
{
	struct kvblk_test_dmabuf_create c = { .len = len };
	struct kvblk_test_dmabuf_rw rw;
	unsigned char *p;
	int fd, ret = 0;

	fd = ioctl(tfd, KVBLK_TEST_DMABUF_CREATE, &c);
	if (fd < 0)
		return -errno;
	if (fd != c.fd) {
		close(fd);
		return -EPROTO;
	}
	p = malloc(len);
	if (!p) {
		close(fd);
		return -ENOMEM;
	}
	memset(p, fill, len);
	rw = (struct kvblk_test_dmabuf_rw){ .fd = fd, .len = len, .ptr = (uintptr_t)p };
	if (ioctl(tfd, KVBLK_TEST_DMABUF_WRITE, &rw))
		ret = -errno;
	free(p);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* The whole content of dma-buf @dfd (@len bytes), malloc'ed; NULL on error. */
static unsigned char *tdb_read_all(int tfd, int dfd, uint64_t len)
{
	unsigned char *p = malloc(len);
	struct kvblk_test_dmabuf_rw rw = { .fd = dfd, .len = len, .ptr = (uintptr_t)p };

	if (p && ioctl(tfd, KVBLK_TEST_DMABUF_READ, &rw)) {
		free(p);
		return NULL;
	}
	return p;
}

static int tdb_revoke(int tfd, int dfd)
{
	return ioctl(tfd, KVBLK_TEST_DMABUF_REVOKE, &dfd) ? -errno : 0;
}

/* REGISTER_BUFFER of a dma-buf range; 0 (id in *id) or -errno. */
static int reg_dmabuf(int kfd, int dfd, uint64_t off, uint64_t len, uint32_t *id)
{
	struct kvblk_buf_reg r = {
		.size = sizeof(r),
		.kind = KVBLK_MEM_DMABUF,
		.dmabuf_fd = dfd,
		.addr = off,
		.len = len,
	};

	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &r))
		return -errno;
	if (id)
		*id = r.buf_id;
	return 0;
}

static int reg_host(int kfd, void *p, uint64_t len, uint32_t *id)
{
	struct kvblk_buf_reg r = {
		.size = sizeof(r),
		.kind = KVBLK_MEM_HOST,
		.addr = (uintptr_t)p,
		.len = len,
	};

	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &r))
		return -errno;
	*id = r.buf_id;
	return 0;
}

static int unreg(int kfd, uint32_t id)
{
	struct kvblk_buf_unreg u = { .size = sizeof(u), .buf_id = id };

	return ioctl(kfd, KVBLK_IOC_UNREGISTER_BUFFER, &u) ? -errno : 0;
}

/* LOAD_MANY: its return value or -errno; *lm holds the output fields. */
static int load(int kfd, const struct kvblk_io_desc *d, struct kvblk_desc_result *res,
		uint32_t n, struct kvblk_load_many *lm)
{
	int ret;

	*lm = (struct kvblk_load_many){
		.size = sizeof(*lm),
		.nr_descs = n,
		.desc_bytes = sizeof(*d),
		.descs = (uintptr_t)d,
		.results = (uintptr_t)res,
		.result_bytes = sizeof(*res),
	};
	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, lm);
	return ret < 0 ? -errno : ret;
}

/* @len bytes at device offset @off with O_DIRECT; malloc'ed, NULL on error. */
static unsigned char *pread_direct(uint64_t off, uint64_t len)
{
	uint64_t alen = (len + 4095) & ~4095ULL;
	void *p = NULL;
	ssize_t n;
	int fd;

	fd = open(test_device(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (posix_memalign(&p, 4096, alen)) {
		close(fd);
		return NULL;
	}
	n = pread(fd, p, len, (off_t)off);
	close(fd);
	if (n != (ssize_t)len) {
		free(p);
		return NULL;
	}
	return p;
}

/* First index in [from, to) of @p whose byte is not @b, or -1. */
static long long first_not(const unsigned char *p, uint64_t from, uint64_t to, int b)
{
	for (uint64_t i = from; i < to; i++)
		if (p[i] != (unsigned char)b)
			return (long long)i;
	return -1;
}

/* ---- fixture ------------------------------------------------------------- */

FIXTURE(dmabuf) {
	int tfd;			/* /dev/kvblk_test_dmabuf */
	int kfd;			/* /dev/kvblk, attached */
	int dev_fd;
	struct kvblk_attach at;
	struct kvblk_test_dmabuf_counts base;
	int dbufs[MAX_DBUFS];
	unsigned int nr_dbufs;
	long long saved_max_inflight;	/* restored by teardown when >= 0 */
};

FIXTURE_SETUP(dmabuf)
{
	__u64 feat = 0;

	self->tfd = self->kfd = self->dev_fd = -1;
	self->nr_dbufs = 0;
	self->saved_max_inflight = -1;
	if (access(KVBLK_TEST_DMABUF_NODE, F_OK))
		SKIP(return, KVBLK_TEST_DMABUF_NODE " missing (insmod kvblk_test_dmabuf.ko)");
	if (access(KVBLK_NODE, F_OK))
		SKIP(return, KVBLK_NODE " missing (insmod kvblk.ko)");
	self->tfd = open(KVBLK_TEST_DMABUF_NODE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->tfd) TH_LOG("open %s: %s", KVBLK_TEST_DMABUF_NODE, strerror(errno));
	ASSERT_EQ(0, tdb_counts(self->tfd, &self->base));

	self->kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->kfd) TH_LOG("open %s: %s", KVBLK_NODE, strerror(errno));
	ASSERT_EQ(0, ioctl(self->kfd, KVBLK_IOC_GET_FEATURES, &feat));
	ASSERT_NE(0ULL, feat & KVBLK_FEAT_MEM_DMABUF)
		TH_LOG("kvblk.ko does not report KVBLK_FEAT_MEM_DMABUF (features 0x%llx)",
		       (unsigned long long)feat);

	self->dev_fd = open(test_device(), O_RDONLY | O_CLOEXEC);
	if (self->dev_fd < 0)
		SKIP(return, "%s: %s", test_device(), strerror(errno));
	memset(&self->at, 0, sizeof(self->at));
	self->at.size = sizeof(self->at);
	self->at.bdev_fd = self->dev_fd;
	ASSERT_EQ(0, ioctl(self->kfd, KVBLK_IOC_ATTACH, &self->at))
		TH_LOG("attach %s: %s", test_device(), strerror(errno));
}

FIXTURE_TEARDOWN(dmabuf)
{
	struct kvblk_test_dmabuf_counts c = { 0 };
	uint64_t end = now_ms() + SETTLE_MS;

	if (self->saved_max_inflight >= 0)
		ns_set_max_inflight(self->saved_max_inflight);
	if (self->kfd >= 0)
		close(self->kfd);
	if (self->dev_fd >= 0)
		close(self->dev_fd);
	for (unsigned int i = 0; i < self->nr_dbufs; i++)
		close(self->dbufs[i]);
	if (self->tfd < 0)
		return;
	/* Everything kvblk took from the exporter comes back. */
	for (;;) {
		ASSERT_EQ(0, tdb_counts(self->tfd, &c));
		if ((c.buffers == self->base.buffers && c.attachments == self->base.attachments &&
		     c.mappings == self->base.mappings && c.pins == self->base.pins) ||
		    now_ms() >= end)
			break;
		sleep_ms(10);
	}
	EXPECT_EQ(self->base.buffers, c.buffers);
	EXPECT_EQ(self->base.attachments, c.attachments);
	EXPECT_EQ(self->base.mappings, c.mappings);
	EXPECT_EQ(self->base.pins, c.pins);
	close(self->tfd);
}

/* A dma-buf kept open until teardown; the fd, or a failed assertion. */
#define NEW_DBUF(len, fill) ({						\
	int __fd = tdb_create(self->tfd, (len), (fill));		\
	ASSERT_LE(0, __fd) TH_LOG("exporter CREATE: %s", strerror(-__fd)); \
	ASSERT_GT(MAX_DBUFS, self->nr_dbufs);				\
	self->dbufs[self->nr_dbufs++] = __fd;				\
	__fd; })

/* ---- tests --------------------------------------------------------------- */

/*
 * Objects of awkward sizes (LBA multiples, not page multiples on 512-byte
 * LBAs; larger than a command so that they split) at dword-aligned,
 * page-straddling buffer offsets, in one batch, land where they belong;
 * the bytes between them keep the fill.
 */
TEST_F_TIMEOUT(dmabuf, unaligned_objects_land, 120)
{
	const uint64_t L = self->at.lba_size, C = self->at.max_cmd_bytes;
	/* C: the default engine's split, at least the PRP engine's (1 MiB by default). */
	const uint64_t len = 8 * MIB;
	const uint64_t sizes[] = { L, 3 * L, 5 * L, 4096 + L, 7 * L, C - L, C + L,
				   2 * C + 3 * L, 13 * L, 64 * 1024 + 9 * L };
	const uint32_t n = sizeof(sizes) / sizeof(sizes[0]);
	struct kvblk_io_desc d[sizeof(sizes) / sizeof(sizes[0])];
	struct kvblk_desc_result res[sizeof(sizes) / sizeof(sizes[0])];
	struct kvblk_load_many lm;
	uint64_t cursor = 4, gap_from = 0;
	unsigned char *got;
	uint32_t id, i;
	int dfd;

	dfd = NEW_DBUF(len, FILL);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, 0, len, &id));
	for (i = 0; i < n; i++) {
		uint64_t span = self->at.capacity - sizes[i];

		d[i] = (struct kvblk_io_desc){
			.offset = ((i * 2654435761ULL * L) % span) / L * L,
			.length = sizes[i],
			.buf_offset = cursor,
			.buf_id = id,
			.tag = 0xd0000 + i,
		};
		cursor = (cursor + sizes[i] + 12 + i * 4) & ~3ULL;
	}
	ASSERT_GE(len, cursor);

	ASSERT_EQ((int)n, load(self->kfd, d, res, n, &lm));
	EXPECT_EQ(n, lm.nr_ok);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(0, res[i].status) TH_LOG("object %u", i);
		EXPECT_EQ(d[i].length, res[i].bytes) TH_LOG("object %u", i);
	}

	got = tdb_read_all(self->tfd, dfd, len);
	ASSERT_NE(NULL, got);
	for (i = 0; i < n; i++) {
		unsigned char *want = pread_direct(d[i].offset, d[i].length);

		ASSERT_NE(NULL, want) TH_LOG("pread(O_DIRECT) %llu+%llu",
					     (unsigned long long)d[i].offset,
					     (unsigned long long)d[i].length);
		EXPECT_EQ(0, memcmp(got + d[i].buf_offset, want, d[i].length))
			TH_LOG("object %u (%llu bytes at buffer offset %llu) differs from pread",
			       i, (unsigned long long)d[i].length,
			       (unsigned long long)d[i].buf_offset);
		EXPECT_EQ(-1, kvblk_pattern_check(got + d[i].buf_offset, d[i].offset, d[i].length))
			TH_LOG("object %u is not the pattern of its device range", i);
		EXPECT_EQ(-1, first_not(got, gap_from, d[i].buf_offset, FILL))
			TH_LOG("fill before object %u overwritten", i);
		gap_from = d[i].buf_offset + d[i].length;
		free(want);
	}
	EXPECT_EQ(-1, first_not(got, gap_from, len, FILL));
	free(got);
	EXPECT_EQ(0, unreg(self->kfd, id));
}

/*
 * The engines of a namespace attached without a flag (the fixture's): the
 * block-layer engine by default, the PRP engine for memory without struct
 * pages. A dma-buf object is served by the PRP engine, byte-exact; host
 * and dma-buf objects in one batch are served by both (@engines has both
 * bits, one target).
 */
TEST_F_TIMEOUT(dmabuf, default_attach_dmabuf_through_prp, 120)
{
	const uint64_t L = self->at.lba_size, len = 2 * MIB;
	struct kvblk_io_desc d[3];
	struct kvblk_desc_result res[3];
	struct kvblk_load_many lm;
	unsigned char *got, *host, *want;
	uint32_t id = 0, hid = 0, i;
	int dfd;

	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, self->at.engine);
	ASSERT_EQ((1U << KVBLK_ENGINE_BIO) | (1U << KVBLK_ENGINE_PRP), self->at.engines)
		TH_LOG("the PRP engine is not available on %s", test_device());
	dfd = NEW_DBUF(len, FILL);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, 0, len, &id));
	host = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, host);
	memset(host, FILL, len);
	ASSERT_EQ(0, reg_host(self->kfd, host, len, &hid));

	/* dma-buf alone: the PRP engine. */
	d[0] = (struct kvblk_io_desc){ .offset = 8 * L, .length = 64 * 1024 + 3 * L,
				       .buf_offset = 4, .buf_id = id, .tag = 1 };
	ASSERT_EQ(1, load(self->kfd, d, res, 1, &lm));
	EXPECT_EQ((__u32)KVBLK_ENGINE_PRP, lm.engine);
	EXPECT_EQ(1U << KVBLK_ENGINE_PRP, lm.engines);
	EXPECT_EQ(1U, lm.nr_targets);

	/* Host, dma-buf, host: both engines, one target. */
	d[0] = (struct kvblk_io_desc){ .offset = 16 * L, .length = 128 * 1024,
				       .buf_offset = 0, .buf_id = hid, .tag = 2 };
	d[1] = (struct kvblk_io_desc){ .offset = 1 * MIB, .length = 32 * L,
				       .buf_offset = 1 * MIB + 4, .buf_id = id, .tag = 3 };
	d[2] = (struct kvblk_io_desc){ .offset = 2 * MIB, .length = 8 * L,
				       .buf_offset = 1 * MIB, .buf_id = hid, .tag = 4 };
	ASSERT_EQ(3, load(self->kfd, d, res, 3, &lm));
	EXPECT_EQ((__u32)KVBLK_ENGINE_MIXED, lm.engine);
	EXPECT_EQ((1U << KVBLK_ENGINE_BIO) | (1U << KVBLK_ENGINE_PRP), lm.engines);
	EXPECT_EQ(1U, lm.nr_targets);
	EXPECT_EQ(3U, lm.nr_ok);

	got = tdb_read_all(self->tfd, dfd, len);
	ASSERT_NE(NULL, got);
	for (i = 0; i < 3; i++) {
		const unsigned char *mem = d[i].buf_id == id ? got : host;

		EXPECT_EQ(0, res[i].status) TH_LOG("object %u", i);
		want = pread_direct(d[i].offset, d[i].length);
		ASSERT_NE(NULL, want);
		EXPECT_EQ(0, memcmp(mem + d[i].buf_offset, want, d[i].length))
			TH_LOG("object %u differs from pread(O_DIRECT)", i);
		EXPECT_EQ(-1, kvblk_pattern_check(mem + d[i].buf_offset, d[i].offset,
						  d[i].length))
			TH_LOG("object %u is not the pattern of its device range", i);
		free(want);
	}
	/* The first load's object, then the fill around the second. */
	want = pread_direct(8 * L, 64 * 1024 + 3 * L);
	ASSERT_NE(NULL, want);
	EXPECT_EQ(0, memcmp(got + 4, want, 64 * 1024 + 3 * L));
	free(want);
	EXPECT_EQ(-1, first_not(got, 0, 4, FILL));
	EXPECT_EQ(-1, first_not(got, 4 + 64 * 1024 + 3 * L, 1 * MIB + 4, FILL));
	EXPECT_EQ(-1, first_not(got, 1 * MIB + 4 + 32 * L, len, FILL));
	EXPECT_EQ(-1, first_not(host, 128 * 1024, 1 * MIB, FILL));
	EXPECT_EQ(-1, first_not(host, 1 * MIB + 8 * L, len, FILL));
	free(got);
	EXPECT_EQ(0, unreg(self->kfd, id));
	EXPECT_EQ(0, unreg(self->kfd, hid));
	munmap(host, len);
}

/*
 * A target without the PRP engine (the same namespace added with
 * KVBLK_ATTACH_F_ENGINE_BIO): a dma-buf object naming it is refused with
 * -EXDEV at its own index (bad_index), nothing submitted, the rest
 * -ECANCELED; the same object on the fixture's target loads.
 */
TEST_F_TIMEOUT(dmabuf, dmabuf_on_bio_only_target_exdev, 120)
{
	const uint64_t L = self->at.lba_size, len = 1 * MIB;
	struct kvblk_attach a = { .size = sizeof(a) };
	struct kvblk_io_desc d[2];
	struct kvblk_desc_result res[2];
	struct kvblk_load_many lm;
	unsigned char *got;
	uint32_t id;
	int dfd;

	a.bdev_fd = self->dev_fd;
	a.flags = KVBLK_ATTACH_F_ADD_TARGET | KVBLK_ATTACH_F_ENGINE_BIO;
	ASSERT_EQ(0, ioctl(self->kfd, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(1U, a.target);
	EXPECT_EQ(1U << KVBLK_ENGINE_BIO, a.engines);
	dfd = NEW_DBUF(len, FILL);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, 0, len, &id));

	d[0] = (struct kvblk_io_desc){ .offset = 0, .length = 8 * L, .buf_id = id,
				       .target = 0, .tag = 1 };
	d[1] = (struct kvblk_io_desc){ .offset = 0, .length = 8 * L, .buf_id = id,
				       .buf_offset = 64 * 1024, .target = 1, .tag = 2 };
	EXPECT_EQ(-EXDEV, load(self->kfd, d, res, 2, &lm));
	EXPECT_EQ(1, lm.bad_index);
	EXPECT_EQ(-EXDEV, res[1].status);
	EXPECT_EQ(-ECANCELED, res[0].status);
	got = tdb_read_all(self->tfd, dfd, len);
	ASSERT_NE(NULL, got);
	EXPECT_EQ(-1, first_not(got, 0, len, FILL)) TH_LOG("a refused batch wrote");
	free(got);

	d[1].target = 0;
	EXPECT_EQ(2, load(self->kfd, d, res, 2, &lm));
	EXPECT_EQ((__u32)KVBLK_ENGINE_PRP, lm.engine);
	EXPECT_EQ(0, unreg(self->kfd, id));
}

/*
 * A store from a dma-buf on a default-attached namespace (opened O_RDWR, so
 * that the fd allows it): only the PRP alternative reaches that memory, and
 * it reads only, so the batch is refused at that descriptor with
 * -EOPNOTSUPP (bad_index), the other object -ECANCELED, and nothing reaches
 * the device.
 */
TEST_F_TIMEOUT(dmabuf, store_from_dmabuf_refused, 120)
{
	const uint64_t L = self->at.lba_size, len = 1 * MIB;
	struct kvblk_attach a = { .size = sizeof(a) };
	struct kvblk_io_desc d[2];
	struct kvblk_desc_result res[2];
	struct kvblk_load_many lm;
	unsigned char *before, *after;
	__u64 feat = 0;
	uint32_t id = 0, hid = 0;
	void *host;
	int dfd, fd;

	ASSERT_EQ(0, ioctl(self->kfd, KVBLK_IOC_GET_FEATURES, &feat));
	if (!(feat & KVBLK_FEAT_STORE))
		SKIP(return, "kvblk.ko without stores");
	fd = open(test_device(), O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", test_device(), strerror(errno));
	a.bdev_fd = fd;
	a.flags = KVBLK_ATTACH_F_ADD_TARGET;
	ASSERT_EQ(0, ioctl(self->kfd, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s", strerror(errno));
	close(fd);
	ASSERT_EQ(1U, a.target);
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, a.engine);
	ASSERT_EQ((1U << KVBLK_ENGINE_BIO) | (1U << KVBLK_ENGINE_PRP), a.engines)
		TH_LOG("the PRP engine is not available on %s", test_device());
	dfd = NEW_DBUF(len, FILL);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, 0, len, &id));
	host = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, host);
	memset(host, FILL, len);
	ASSERT_EQ(0, reg_host(self->kfd, host, len, &hid));
	before = pread_direct(0, 2 * MIB);
	ASSERT_NE(NULL, before);

	/* A host object first (the bio engine would write it), then the dma-buf one. */
	d[0] = (struct kvblk_io_desc){ .offset = 1 * MIB, .length = 8 * L, .buf_id = hid,
				       .target = 1, .tag = 1 };
	d[1] = (struct kvblk_io_desc){ .offset = 0, .length = 8 * L, .buf_id = id,
				       .target = 1, .tag = 2 };
	lm = (struct kvblk_load_many){
		.size = sizeof(lm),
		.flags = KVBLK_LOAD_F_STORE,
		.nr_descs = 2,
		.desc_bytes = sizeof(d[0]),
		.descs = (uintptr_t)d,
		.results = (uintptr_t)res,
		.result_bytes = sizeof(res[0]),
	};
	EXPECT_EQ(-1, ioctl(self->kfd, KVBLK_IOC_LOAD_MANY, &lm));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(1, lm.bad_index);
	EXPECT_EQ(-ECANCELED, res[0].status);
	EXPECT_EQ(-EOPNOTSUPP, res[1].status);
	EXPECT_EQ(0ULL, lm.nr_cmds);
	after = pread_direct(0, 2 * MIB);
	ASSERT_NE(NULL, after);
	EXPECT_EQ(0, memcmp(before, after, 2 * MIB)) TH_LOG("a refused store wrote");
	free(before);
	free(after);
	EXPECT_EQ(0, unreg(self->kfd, id));
	EXPECT_EQ(0, unreg(self->kfd, hid));
	munmap(host, len);
}

/*
 * A loop device over a sparse file of @len bytes: its fd (read-only) and
 * path in *path, or -errno. *ctl gets the bound /dev/loopN fd to detach.
 */
static int loop_setup(uint64_t len, char *path, size_t plen, int *ctl)
{
	char file[] = "/tmp/kvblk-dmabuf-loop.XXXXXX";
	int cfd, ffd, lfd, n, ret;

	if (access("/dev/loop-control", F_OK) && system("modprobe loop 2>/dev/null"))
		return -ENODEV;
	cfd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (cfd < 0)
		return -errno;
	ffd = mkstemp(file);
	if (ffd < 0 || ftruncate(ffd, (off_t)len)) {
		ret = -errno;
		close(cfd);
		return ret;
	}
	unlink(file);
	n = ioctl(cfd, LOOP_CTL_GET_FREE);
	close(cfd);
	if (n < 0) {
		close(ffd);
		return -errno;
	}
	snprintf(path, plen, "/dev/loop%d", n);
	lfd = open(path, O_RDWR | O_CLOEXEC);
	if (lfd < 0 || ioctl(lfd, LOOP_SET_FD, ffd)) {
		ret = -errno;
		if (lfd >= 0)
			close(lfd);
		close(ffd);
		return ret;
	}
	close(ffd);
	*ctl = lfd;
	ret = open(path, O_RDONLY | O_CLOEXEC);
	return ret < 0 ? -errno : ret;
}

/*
 * A block device that is no nvme-pci namespace (a loop device) has no PRP
 * engine: a dma-buf object naming it is refused with -EXDEV at its own
 * index, nothing written; host memory on it loads through the block layer.
 */
TEST_F_TIMEOUT(dmabuf, dmabuf_on_loop_target_exdev, 120)
{
	const uint64_t len = 1 * MIB;
	struct kvblk_attach a = { .size = sizeof(a) };
	struct kvblk_io_desc d[2];
	struct kvblk_desc_result res[2];
	struct kvblk_load_many lm;
	char path[64];
	unsigned char *got;
	int dfd, lfd, ctl = -1;
	uint32_t id;

	lfd = loop_setup(16 * MIB, path, sizeof(path), &ctl);
	if (lfd < 0)
		SKIP(return, "no loop device: %s", strerror(-lfd));
	a.bdev_fd = lfd;
	a.flags = KVBLK_ATTACH_F_ADD_TARGET;
	EXPECT_EQ(0, ioctl(self->kfd, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s: %s", path, strerror(errno));
	EXPECT_EQ(1U, a.target);
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, a.engine);
	EXPECT_EQ(1U << KVBLK_ENGINE_BIO, a.engines);
	dfd = NEW_DBUF(len, FILL);
	EXPECT_EQ(0, reg_dmabuf(self->kfd, dfd, 0, len, &id));

	d[0] = (struct kvblk_io_desc){ .offset = 0, .length = 4096, .buf_id = id,
				       .target = 0, .tag = 1 };
	d[1] = (struct kvblk_io_desc){ .offset = 0, .length = 4096, .buf_id = id,
				       .buf_offset = 64 * 1024, .target = 1, .tag = 2 };
	EXPECT_EQ(-EXDEV, load(self->kfd, d, res, 2, &lm));
	EXPECT_EQ(1, lm.bad_index);
	EXPECT_EQ(-EXDEV, res[1].status);
	EXPECT_EQ(-ECANCELED, res[0].status);
	got = tdb_read_all(self->tfd, dfd, len);
	EXPECT_NE(NULL, got);
	if (got)
		EXPECT_EQ(-1, first_not(got, 0, len, FILL)) TH_LOG("a refused batch wrote");
	free(got);
	EXPECT_EQ(0, unreg(self->kfd, id));
	close(self->kfd);	/* the context lets go of the loop device */
	self->kfd = -1;
	close(lfd);
	ioctl(ctl, LOOP_CLR_FD, 0);
	close(ctl);
}

/*
 * A registration at a non-zero offset of the dma-buf: buffer offset 0 is
 * dma-buf byte @off; nothing before or after the registered range changes;
 * the registered length, not the dma-buf's, bounds the descriptors.
 */
TEST_F_TIMEOUT(dmabuf, registration_at_offset, 120)
{
	const uint64_t L = self->at.lba_size, pg = (uint64_t)sysconf(_SC_PAGESIZE);
	const uint64_t len = 2 * MIB, off = 5 * pg, rlen = 1 * MIB;
	struct kvblk_io_desc d[3];
	struct kvblk_desc_result res[3];
	struct kvblk_load_many lm;
	unsigned char *got;
	uint32_t id, i;
	int dfd;

	dfd = NEW_DBUF(len, FILL);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, off, rlen, &id));
	d[0] = (struct kvblk_io_desc){ .offset = 0, .length = 3 * L, .buf_offset = 0, .buf_id = id };
	d[1] = (struct kvblk_io_desc){ .offset = 40 * MIB, .length = 9 * L,
				    .buf_offset = 7 * pg + 4, .buf_id = id };
	/* Ends exactly at the end of the registered range. */
	d[2] = (struct kvblk_io_desc){ .offset = 100 * MIB + L, .length = 2 * L,
				    .buf_offset = rlen - 2 * L, .buf_id = id };
	ASSERT_EQ(3, load(self->kfd, d, res, 3, &lm));

	got = tdb_read_all(self->tfd, dfd, len);
	ASSERT_NE(NULL, got);
	for (i = 0; i < 3; i++) {
		unsigned char *want = pread_direct(d[i].offset, d[i].length);

		ASSERT_NE(NULL, want);
		EXPECT_EQ(0, res[i].status);
		EXPECT_EQ(0, memcmp(got + off + d[i].buf_offset, want, d[i].length))
			TH_LOG("object %u is not at dma-buf offset %llu", i,
			       (unsigned long long)(off + d[i].buf_offset));
		free(want);
	}
	EXPECT_EQ(-1, first_not(got, 0, off, FILL)) TH_LOG("bytes before the registered range changed");
	EXPECT_EQ(-1, first_not(got, off + 3 * L, off + 7 * pg + 4, FILL));
	EXPECT_EQ(-1, first_not(got, off + rlen, len, FILL)) TH_LOG("bytes after the registered range changed");
	free(got);

	/* One LBA past the registered length, though inside the dma-buf: rejected. */
	d[0] = (struct kvblk_io_desc){ .offset = 0, .length = 2 * L, .buf_offset = rlen - L,
				    .buf_id = id };
	EXPECT_EQ(-EINVAL, load(self->kfd, d, res, 1, &lm));
	EXPECT_EQ(0, lm.bad_index);
	EXPECT_EQ(0, unreg(self->kfd, id));
}

/* offset + len beyond the dma-buf's size: -EINVAL, and nothing stays attached. */
TEST_F(dmabuf, range_beyond_dmabuf_einval)
{
	const uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), len = 1 * MIB;
	struct kvblk_test_dmabuf_counts c;
	uint32_t id;
	int dfd;

	dfd = NEW_DBUF(len, 0);
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, 0, len + pg, NULL));
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, len, pg, NULL));
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, len - pg, 2 * pg, NULL));
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, 1ULL << 40, pg, NULL));
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, ~0ULL - pg + 1, pg, NULL));
	ASSERT_EQ(0, tdb_counts(self->tfd, &c));
	EXPECT_EQ(self->base.attachments, c.attachments);
	/* The last page alone is fine. */
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, len - pg, pg, &id));
	EXPECT_EQ(0, unreg(self->kfd, id));
}

/* Offset or length not page aligned, or zero length: -EINVAL. */
TEST_F(dmabuf, misaligned_einval)
{
	const uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	int dfd;

	dfd = NEW_DBUF(1 * MIB, 0);
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, 100, pg, NULL));
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, 512, pg, NULL));
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, 0, pg + 512, NULL));
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, pg, 4, NULL));
	EXPECT_EQ(-EINVAL, reg_dmabuf(self->kfd, dfd, 0, 0, NULL));
}

/* Not an fd, a closed fd, an fd that is not a dma-buf: -EBADF. */
TEST_F(dmabuf, bad_fd_ebadf)
{
	const uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST, .len = pg };
	int nul, closed, mfd;

	EXPECT_EQ(-EBADF, reg_dmabuf(self->kfd, -1, 0, pg, NULL));
	EXPECT_EQ(-EBADF, reg_dmabuf(self->kfd, INT_MAX, 0, pg, NULL));
	closed = dup(self->kfd);
	ASSERT_LE(0, closed);
	close(closed);
	EXPECT_EQ(-EBADF, reg_dmabuf(self->kfd, closed, 0, pg, NULL));
	nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, nul);
	EXPECT_EQ(-EBADF, reg_dmabuf(self->kfd, nul, 0, pg, NULL));
	close(nul);
	mfd = memfd_create("kvblk-not-a-dmabuf", MFD_CLOEXEC);
	ASSERT_LE(0, mfd);
	ASSERT_EQ(0, ftruncate(mfd, 1 * MIB));
	EXPECT_EQ(-EBADF, reg_dmabuf(self->kfd, mfd, 0, pg, NULL));
	close(mfd);
	EXPECT_EQ(-EBADF, reg_dmabuf(self->kfd, self->kfd, 0, pg, NULL));

	/* A dma-buf fd is accepted for no other kind. */
	r.dmabuf_fd = NEW_DBUF(pg, 0);
	EXPECT_EQ(-1, ioctl(self->kfd, KVBLK_IOC_REGISTER_BUFFER, &r));
	EXPECT_EQ(EINVAL, errno);
}

/*
 * The device writes into a registered dma-buf, so the exporter must have
 * granted write access: a dma-buf exported read-only (its file lacks
 * FMODE_WRITE) is refused with -EACCES, holding no attachment.
 */
TEST_F(dmabuf, read_only_dmabuf_eacces)
{
	const uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	struct kvblk_test_dmabuf_create c = { .len = pg, .flags = KVBLK_TEST_DMABUF_F_RDONLY };
	struct kvblk_test_dmabuf_counts n;
	int dfd;

	dfd = ioctl(self->tfd, KVBLK_TEST_DMABUF_CREATE, &c);
	ASSERT_LE(0, dfd);
	EXPECT_EQ(O_RDONLY, fcntl(dfd, F_GETFL) & O_ACCMODE);
	EXPECT_EQ(-EACCES, reg_dmabuf(self->kfd, dfd, 0, pg, NULL));
	ASSERT_EQ(0, tdb_counts(self->tfd, &n));
	EXPECT_EQ(self->base.attachments, n.attachments);
	close(dfd);
}

/*
 * What a registration holds of the exporter: one attachment, one mapping,
 * pins; two registrations of one dma-buf hold two of each. The registration
 * keeps the dma-buf alive after its fd is closed, and loads still work.
 */
TEST_F_TIMEOUT(dmabuf, registration_holds_and_returns, 120)
{
	const uint64_t L = self->at.lba_size, len = 1 * MIB;
	struct kvblk_test_dmabuf_counts c1, c2, c3;
	struct kvblk_io_desc d;
	struct kvblk_desc_result res;
	struct kvblk_load_many lm;
	uint32_t id1, id2;
	int dfd;

	dfd = tdb_create(self->tfd, len, FILL);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, 0, len, &id1));
	ASSERT_EQ(0, tdb_counts(self->tfd, &c1));
	EXPECT_EQ(self->base.buffers + 1, c1.buffers);
	EXPECT_EQ(self->base.attachments + 1, c1.attachments);
	EXPECT_EQ(self->base.mappings + 1, c1.mappings);
	EXPECT_LE(self->base.pins + 1, c1.pins);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, len / 2, len / 2, &id2));
	ASSERT_EQ(0, tdb_counts(self->tfd, &c2));
	EXPECT_EQ(c1.attachments + 1, c2.attachments);
	EXPECT_EQ(c1.mappings + 1, c2.mappings);
	EXPECT_EQ(c1.pins - self->base.pins, c2.pins - c1.pins);

	/* Only kvblk holds the dma-buf now. */
	close(dfd);
	ASSERT_EQ(0, tdb_counts(self->tfd, &c3));
	EXPECT_EQ(self->base.buffers + 1, c3.buffers);
	d = (struct kvblk_io_desc){ .offset = 8 * MIB, .length = 4 * L, .buf_offset = 4, .buf_id = id2 };
	EXPECT_EQ(1, load(self->kfd, &d, &res, 1, &lm));
	EXPECT_EQ(0, res.status);

	EXPECT_EQ(0, unreg(self->kfd, id1));
	ASSERT_EQ(0, tdb_counts(self->tfd, &c3));
	EXPECT_EQ(c1.attachments, c3.attachments);
	EXPECT_EQ(c1.mappings, c3.mappings);
	EXPECT_EQ(c1.pins, c3.pins);
	EXPECT_EQ(0, unreg(self->kfd, id2));
	ASSERT_EQ(0, tdb_counts(self->tfd, &c3));
	EXPECT_EQ(self->base.buffers, c3.buffers);
	EXPECT_EQ(self->base.attachments, c3.attachments);
	EXPECT_EQ(self->base.mappings, c3.mappings);
	EXPECT_EQ(self->base.pins, c3.pins);
}

/*
 * Revocation with nothing in flight: kvblk unmaps and unpins inside the
 * notification (the exporter sees no mapping left and poisons), the buffer
 * stays registered; objects into it fail alone with -ENODEV while those of
 * the same batch into host memory succeed; the revoked dma-buf cannot be
 * registered again; unregister detaches.
 */
TEST_F_TIMEOUT(dmabuf, revoke_idle_enodev_per_object, 120)
{
	const uint64_t L = self->at.lba_size, len = 1 * MIB;
	struct kvblk_test_dmabuf_counts c;
	struct kvblk_io_desc d[4];
	struct kvblk_desc_result res[4];
	struct kvblk_load_many lm;
	unsigned char *host, *got;
	uint32_t id[2], i;	/* dma-buf, host */
	int dfd;

	dfd = NEW_DBUF(len, FILL);
	host = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, host);
	memset(host, FILL, len);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, 0, len, &id[0]));
	ASSERT_EQ(0, reg_host(self->kfd, host, len, &id[1]));

	ASSERT_EQ(0, tdb_revoke(self->tfd, dfd));
	EXPECT_EQ(-EALREADY, tdb_revoke(self->tfd, dfd));
	ASSERT_EQ(0, tdb_counts(self->tfd, &c));
	EXPECT_EQ(self->base.attachments + 1, c.attachments);
	EXPECT_EQ(self->base.mappings, c.mappings);
	EXPECT_EQ(self->base.pins, c.pins);

	for (i = 0; i < 4; i++)
		d[i] = (struct kvblk_io_desc){ .offset = (i + 1) * MIB, .length = 3 * L,
					    .buf_offset = i * 64 * 1024 + 8,
					    .buf_id = i & 1 ? id[1] : id[0], .tag = i };
	EXPECT_EQ(2, load(self->kfd, d, res, 4, &lm));
	EXPECT_EQ(2U, lm.nr_ok);
	for (i = 0; i < 4; i++) {
		if (i & 1) {
			EXPECT_EQ(0, res[i].status);
			EXPECT_EQ(-1, kvblk_pattern_check(host + d[i].buf_offset, d[i].offset,
							  d[i].length));
		} else {
			EXPECT_EQ(-ENODEV, res[i].status);
			EXPECT_EQ(0ULL, res[i].bytes);
		}
	}
	got = tdb_read_all(self->tfd, dfd, len);
	ASSERT_NE(NULL, got);
	EXPECT_EQ(-1, first_not(got, 0, len, KVBLK_TEST_DMABUF_POISON));
	free(got);

	/* The exporter refuses new importers of revoked memory. */
	EXPECT_EQ(-ENODEV, reg_dmabuf(self->kfd, dfd, 0, len, NULL));
	EXPECT_EQ(0, unreg(self->kfd, id[0]));
	EXPECT_EQ(0, unreg(self->kfd, id[1]));
	munmap(host, len);
}

struct rv_loader {
	int kfd;
	uint32_t id;
	uint64_t capacity;
	uint32_t lba;
	/* out */
	int batches_done;		/* __atomic */
	int bad_status;			/* a status other than 0 and -ENODEV */
	int call_error;			/* a LOAD_MANY that failed as a whole */
	uint32_t mixed_ok, mixed_enodev; /* the batch that saw the revocation */
	bool saw_enodev;
};

/* Batches of RV_OBJS objects into the whole dma-buf until one meets the revocation. */
static void *rv_loader_fn(void *arg)
{
	struct rv_loader *l = arg;
	struct kvblk_io_desc d[RV_OBJS];
	struct kvblk_desc_result res[RV_OBJS];
	struct kvblk_load_many lm;
	int b, ret;

	for (b = 0; b < RV_MAX_BATCHES && !l->saw_enodev; b++) {
		uint32_t ok = 0, gone = 0, i;

		for (i = 0; i < RV_OBJS; i++) {
			uint64_t span = l->capacity - RV_OBJ_BYTES;

			d[i] = (struct kvblk_io_desc){
				.offset = ((uint64_t)(b * RV_OBJS + i) * 7919 * l->lba) % span
					  / l->lba * l->lba,
				.length = RV_OBJ_BYTES,
				.buf_offset = i * RV_OBJ_BYTES,
				.buf_id = l->id,
				.tag = ((uint64_t)b << 32) | i,
			};
		}
		ret = load(l->kfd, d, res, RV_OBJS, &lm);
		if (ret < 0) {
			l->call_error = ret;
			break;
		}
		for (i = 0; i < RV_OBJS; i++) {
			if (res[i].status == 0 && res[i].bytes == RV_OBJ_BYTES)
				ok++;
			else if (res[i].status == -ENODEV && res[i].bytes == 0)
				gone++;
			else
				l->bad_status = res[i].status ? res[i].status : -EPROTO;
		}
		if (gone) {
			l->saw_enodev = true;
			l->mixed_ok = ok;
			l->mixed_enodev = gone;
		}
		__atomic_store_n(&l->batches_done, b + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/*
 * Revocation while a batch has commands in flight: REVOKE returns (kvblk's
 * callback waited for the commands and unmapped: no -EBUSY), the exporter's
 * poison is never overwritten afterwards (no write after revocation), every
 * object reports 0 or -ENODEV, and every later load into the buffer fails
 * with -ENODEV per object. No hang: every wait here is bounded. With
 * max_inflight at RV_MAX_INFLIGHT a batch of RV_OBJS objects is still being
 * submitted while its first commands are in flight, so the revocation
 * usually lands in the middle of a batch (logged, not required).
 */
TEST_F_TIMEOUT(dmabuf, revoke_during_inflight_loads, 300)
{
	const uint64_t len = RV_OBJS * RV_OBJ_BYTES;
	struct rv_loader l = { 0 };
	struct kvblk_io_desc d[RV_OBJS];
	struct kvblk_desc_result res[RV_OBJS];
	struct kvblk_test_dmabuf_counts c;
	struct kvblk_load_many lm;
	long long inflight = 0;
	uint64_t t0, t_revoke, end;
	pthread_t th;
	unsigned char *got;
	uint32_t i;
	int dfd, ret;

	dfd = NEW_DBUF(len, FILL);
	ASSERT_EQ(0, reg_dmabuf(self->kfd, dfd, 0, len, &l.id));
	self->saved_max_inflight = ns_set_max_inflight(RV_MAX_INFLIGHT);
	ASSERT_LE(0, self->saved_max_inflight);
	l.kfd = self->kfd;
	l.capacity = self->at.capacity;
	l.lba = self->at.lba_size;
	ASSERT_EQ(0, pthread_create(&th, NULL, rv_loader_fn, &l));

	/* After one whole batch, catch the next one with commands in flight. */
	end = now_ms() + 60000;
	while (!__atomic_load_n(&l.batches_done, __ATOMIC_ACQUIRE) && now_ms() < end)
		sleep_ms(1);
	while (now_ms() < end && (inflight = ns_inflight()) <= 0)
		;
	t0 = now_ms();
	ret = tdb_revoke(self->tfd, dfd);
	t_revoke = now_ms() - t0;
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(0, ret) TH_LOG("REVOKE: %s (EBUSY: kvblk kept its mapping)", strerror(-ret));
	TH_LOG("revoked with %lld command(s) in flight in %llu ms; that batch: %u ok, %u ENODEV; %d batches",
	       inflight, (unsigned long long)t_revoke, l.mixed_ok, l.mixed_enodev, l.batches_done);
	EXPECT_LT(0, inflight) TH_LOG("no command was in flight when REVOKE ran");
	EXPECT_EQ(0, l.call_error);
	EXPECT_EQ(0, l.bad_status);
	EXPECT_TRUE(l.saw_enodev);

	ASSERT_EQ(0, tdb_counts(self->tfd, &c));
	EXPECT_EQ(self->base.mappings, c.mappings);
	EXPECT_EQ(self->base.pins, c.pins);

	/* Later loads: -ENODEV for every object, nothing written. */
	for (i = 0; i < RV_OBJS; i++)
		d[i] = (struct kvblk_io_desc){ .offset = i * MIB, .length = l.lba,
					    .buf_offset = i * RV_OBJ_BYTES, .buf_id = l.id };
	EXPECT_EQ(0, load(self->kfd, d, res, RV_OBJS, &lm));
	EXPECT_EQ(0U, lm.nr_ok);
	for (i = 0; i < RV_OBJS; i++)
		EXPECT_EQ(-ENODEV, res[i].status);

	got = tdb_read_all(self->tfd, dfd, len);
	ASSERT_NE(NULL, got);
	EXPECT_EQ(-1, first_not(got, 0, len, KVBLK_TEST_DMABUF_POISON))
		TH_LOG("a byte was written after the revocation returned");
	free(got);
	EXPECT_EQ(0, unreg(self->kfd, l.id));
}

/*
 * A process killed while it has a dma-buf registered and loads in flight
 * gives everything back: its context is released (once its last command
 * completes), the attachment detached, the mapping and pins returned, the
 * dma-buf freed.
 */
TEST_F_TIMEOUT(dmabuf, child_killed_with_registered_dmabuf, 120)
{
	struct kvblk_test_dmabuf_counts c = { 0 };
	int pfd[2], status;
	uint64_t end;
	char ready;
	pid_t pid;

	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct kvblk_attach at = { .size = sizeof(at) };
		struct kvblk_io_desc d[16];
		struct kvblk_desc_result res[16];
		struct kvblk_load_many lm;
		uint64_t len = 16 * RV_OBJ_BYTES;
		int kfd, dev, dfd;
		uint32_t id, i;

		close(pfd[0]);
		kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
		dev = open(test_device(), O_RDONLY | O_CLOEXEC);
		at.bdev_fd = dev;
		if (kfd < 0 || dev < 0 || ioctl(kfd, KVBLK_IOC_ATTACH, &at))
			_exit(2);
		dfd = tdb_create(self->tfd, len, FILL);
		if (dfd < 0 || reg_dmabuf(kfd, dfd, 0, len, &id))
			_exit(3);
		close(dfd);	/* only the registration holds it */
		for (i = 0; i < 16; i++)
			d[i] = (struct kvblk_io_desc){ .offset = i * 3 * MIB, .length = RV_OBJ_BYTES,
						    .buf_offset = i * RV_OBJ_BYTES, .buf_id = id };
		if (write(pfd[1], "r", 1) != 1)
			_exit(4);
		for (;;)
			load(kfd, d, res, 16, &lm);
	}
	close(pfd[1]);
	ASSERT_EQ(1, read(pfd[0], &ready, 1)) TH_LOG("the child failed before its loads");
	close(pfd[0]);
	end = now_ms() + 10000;
	while (now_ms() < end && ns_inflight() <= 0)
		;
	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));

	end = now_ms() + SETTLE_MS;
	do {
		ASSERT_EQ(0, tdb_counts(self->tfd, &c));
		if (c.buffers == self->base.buffers && c.attachments == self->base.attachments &&
		    c.mappings == self->base.mappings && c.pins == self->base.pins)
			break;
		sleep_ms(10);
	} while (now_ms() < end);
	EXPECT_EQ(self->base.buffers, c.buffers);
	EXPECT_EQ(self->base.attachments, c.attachments);
	EXPECT_EQ(self->base.mappings, c.mappings);
	EXPECT_EQ(self->base.pins, c.pins);
	EXPECT_EQ(0, ns_inflight());
}

/*
 * udmabuf, the kernel's exporter of memfd pages (not a dynamic exporter:
 * kvblk's pin is a no-op there and the mapping is static): objects of
 * awkward sizes at dword-aligned offsets land where they belong, read back
 * through the memfd; the bytes between them keep the fill.
 */
TEST(udmabuf_objects_land)
{
	const uint64_t len = 4 * MIB;
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = len };
	struct kvblk_attach at = { .size = sizeof(at) };
	struct kvblk_io_desc d[4];
	struct kvblk_desc_result res[4];
	struct kvblk_load_many lm;
	unsigned char *mem, *want;
	int kfd, bfd, mfd, ufd, dfd;
	uint64_t L, cursor = 4;
	__u64 feat = 0;
	uint32_t id, i;

	if (access("/dev/udmabuf", F_OK))
		SKIP(return, "no /dev/udmabuf (CONFIG_UDMABUF; Debian 7.2 has it, 6.1 does not)");
	kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	if (kfd < 0)
		SKIP(return, KVBLK_NODE " missing (insmod kvblk.ko)");
	ASSERT_EQ(0, ioctl(kfd, KVBLK_IOC_GET_FEATURES, &feat));
	ASSERT_NE(0ULL, feat & KVBLK_FEAT_MEM_DMABUF);
	bfd = open(test_device(), O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, bfd);
	at.bdev_fd = bfd;
	ASSERT_EQ(0, ioctl(kfd, KVBLK_IOC_ATTACH, &at)) TH_LOG("attach: %s", strerror(errno));
	L = at.lba_size;

	/* udmabuf wants a sealed-against-shrinking memfd. */
	mfd = memfd_create("kvblk-udmabuf", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	ASSERT_LE(0, mfd);
	ASSERT_EQ(0, ftruncate(mfd, (off_t)len));
	ASSERT_EQ(0, fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK));
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT_NE(MAP_FAILED, mem);
	memset(mem, FILL, len);
	ufd = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, ufd);
	c.memfd = (__u32)mfd;
	dfd = ioctl(ufd, UDMABUF_CREATE, &c);
	ASSERT_LE(0, dfd) TH_LOG("UDMABUF_CREATE: %s", strerror(errno));

	ASSERT_EQ(0, reg_dmabuf(kfd, dfd, 0, len, &id));
	const uint64_t sizes[4] = { L, 3 * L, at.max_cmd_bytes + L, 64 * 1024 + 5 * L };
	for (i = 0; i < 4; i++) {
		d[i] = (struct kvblk_io_desc){ .offset = (1 + 50 * i) * L * 8, .length = sizes[i],
					   .buf_id = id, .buf_offset = cursor, .tag = i };
		cursor += sizes[i] + 4096 + 8;	/* a gap, and dword (not page) alignment */
	}
	ASSERT_EQ(4, load(kfd, d, res, 4, &lm));
	for (i = 0; i < 4; i++) {
		EXPECT_EQ(0, res[i].status);
		want = pread_direct(d[i].offset, d[i].length);
		ASSERT_NE(NULL, want);
		EXPECT_EQ(0, memcmp(mem + d[i].buf_offset, want, d[i].length))
			TH_LOG("object %u differs from pread(O_DIRECT)", i);
		free(want);
		/* The gap after each object keeps the fill. */
		EXPECT_EQ(-1, first_not(mem, d[i].buf_offset + d[i].length,
					d[i].buf_offset + d[i].length + 4096, FILL));
	}
	EXPECT_EQ(-1, first_not(mem, 0, 4, FILL));
	EXPECT_EQ(0, unreg(kfd, id));
	close(dfd);
	close(ufd);
	munmap(mem, len);
	close(mfd);
	close(kfd);
	close(bfd);
}

TEST_HARNESS_MAIN

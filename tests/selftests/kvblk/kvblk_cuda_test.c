// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk CUDA (nvidia-p2p) provider selftests, against the test-only
 * stand-in for nvidia.ko, kvblk_fake_nvp2p.ko (tests/kmod-exporters), whose
 * "GPU memory" is host pages this program can read back.
 *
 * Written from include/uapi/linux/kvblk.h (KVBLK_MEM_CUDA) and
 * tests/kmod-exporters/kvblk_fake_nvp2p.h. Run by
 * tests/selftests/kvblk/vm-cuda.sh in the test VM, in two phases:
 *
 *   KVBLK_CUDA_EXPECT=absent   kvblk.ko without the fake module: only
 *                              cuda_absent runs (the rest skip).
 *   KVBLK_CUDA_EXPECT=present  the fake module is loaded: every other test
 *                              runs. kvblk.ko pins persistently only; with
 *                              the fake's persistent pins switched off (as
 *                              on MIG) registration is refused.
 *
 * After every test the fake module's counts of allocations, page tables and
 * DMA mappings are back to their baseline and it saw no misuse.
 *
 * Environment: KVBLK_TEST_DEVICE (default /dev/nvme0n1), an NVMe namespace
 * the test only reads.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "kselftest_harness.h"

#include "kvblk_utils.h"
#include "../../kmod-exporters/kvblk_fake_nvp2p.h"

#define FAKE_PARAMS	"/sys/module/kvblk_fake_nvp2p/parameters/"
#define GPU_PAGE	65536ULL
#define SETTLE_MS	10000

static const char *expect(void)
{
	const char *e = getenv("KVBLK_CUDA_EXPECT");

	return e ? e : "";
}

static int write_param(const char *name, const char *val)
{
	char path[256];
	int fd, ret = 0;

	snprintf(path, sizeof(path), FAKE_PARAMS "%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		ret = -errno;
	close(fd);
	return ret;
}

static int ioc(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static int attach(int kfd, const char *dev, struct kvblk_attach *a)
{
	int bfd = open(dev, O_RDONLY | O_CLOEXEC);
	int ret;

	if (bfd < 0)
		return -errno;
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->bdev_fd = bfd;
	ret = ioc(kfd, KVBLK_IOC_ATTACH, a);
	close(bfd);
	return ret;
}

/* Register [va, va + len) as CUDA memory: buf_id (> 0) or -errno. */
static int reg_cuda(int kfd, uint64_t va, uint64_t len)
{
	struct kvblk_buf_reg r = {
		.size = sizeof(r), .kind = KVBLK_MEM_CUDA, .addr = va, .len = len,
	};
	int ret = ioc(kfd, KVBLK_IOC_REGISTER_BUFFER, &r);

	return ret ? ret : (int)r.buf_id;
}

static int unreg(int kfd, uint32_t id)
{
	struct kvblk_buf_unreg u = { .size = sizeof(u), .buf_id = id };

	return ioc(kfd, KVBLK_IOC_UNREGISTER_BUFFER, &u);
}

static int gpu_alloc(int gfd, uint64_t len, uint64_t *va)
{
	struct kvblk_fake_gpu_alloc a = { .len = len };
	int ret = ioc(gfd, KVBLK_FAKE_GPU_ALLOC, &a);

	*va = a.va;
	return ret;
}

static int gpu_free(int gfd, uint64_t va, uint32_t flags)
{
	struct kvblk_fake_gpu_free f = { .va = va, .flags = flags };

	return ioc(gfd, KVBLK_FAKE_GPU_FREE, &f);
}

static int gpu_io(int gfd, bool write, uint64_t va, uint64_t off, void *p,
		  uint64_t len)
{
	struct kvblk_fake_gpu_io io = {
		.va = va, .off = off, .len = len, .uptr = (uintptr_t)p,
	};

	return ioc(gfd, write ? KVBLK_FAKE_GPU_WRITE : KVBLK_FAKE_GPU_READ, &io);
}

static int gpu_stats(struct kvblk_fake_gpu_stats *st)
{
	int fd = open(KVBLK_FAKE_GPU_DEV, O_RDWR | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = ioc(fd, KVBLK_FAKE_GPU_STATS, st);
	close(fd);
	return ret;
}

/*
 * Waits (bounded) until the fake module holds exactly what it held at
 * @base: closing a context or a killed batch releases from a workqueue.
 */
static bool gpu_settled(const struct kvblk_fake_gpu_stats *base,
			struct kvblk_fake_gpu_stats *st)
{
	uint64_t end = now_ms() + SETTLE_MS;

	do {
		int ret = gpu_stats(st);

		if (ret) {
			fprintf(stderr, "# reading %s stats: %s\n",
				KVBLK_FAKE_GPU_DEV, strerror(-ret));
			memset(st, 0xff, sizeof(*st));	/* never equal: retry */
		}
		if (st->allocs == base->allocs && st->page_tables == base->page_tables &&
		    st->persistent == base->persistent &&
		    st->dma_mappings == base->dma_mappings &&
		    st->quarantined == base->quarantined && st->errors == base->errors)
			return true;
		usleep(20000);
	} while (now_ms() < end);
	return false;
}

static int load(int kfd, struct kvblk_io_desc *d, struct kvblk_desc_result *res,
		uint32_t n, struct kvblk_load_many *lm)
{
	lm_init(lm, d, res, n);
	return ioctl(kfd, KVBLK_IOC_LOAD_MANY, lm) < 0 ? -errno : 0;
}

/* ---- without the fake module ------------------------------------------- */

TEST(cuda_absent)
{
	struct kvblk_attach a;
	uint64_t feat = 0;
	int kfd, ret;

	if (strcmp(expect(), "absent"))
		SKIP(return, "KVBLK_CUDA_EXPECT is not 'absent'");
	ASSERT_NE(0, access(KVBLK_FAKE_GPU_DEV, F_OK)) TH_LOG("the fake module is loaded");
	kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, kfd);
	ASSERT_EQ(0, ioc(kfd, KVBLK_IOC_GET_FEATURES, &feat));
	EXPECT_EQ(0ULL, feat & KVBLK_FEAT_MEM_CUDA);
	EXPECT_NE(0ULL, feat & KVBLK_FEAT_MEM_HOST);
	ASSERT_EQ(0, attach(kfd, test_device(), &a));
	/* Alignment is checked before the provider: still -EINVAL. */
	EXPECT_EQ(-EINVAL, reg_cuda(kfd, 0x7e0000001000ULL, GPU_PAGE));
	ret = reg_cuda(kfd, 0x7e0000000000ULL, GPU_PAGE);
	EXPECT_EQ(-EOPNOTSUPP, ret);
	close(kfd);
}

/* ---- with the fake module ------------------------------------------------ */

FIXTURE(cuda) {
	int kfd, gfd, dfd;
	struct kvblk_attach a;
	struct kvblk_fake_gpu_stats base;
};

FIXTURE_SETUP(cuda)
{
	self->kfd = self->gfd = self->dfd = -1;
	if (strcmp(expect(), "present"))
		SKIP(return, "KVBLK_CUDA_EXPECT is not 'present'");
	ASSERT_EQ(0, access(KVBLK_FAKE_GPU_DEV, F_OK)) TH_LOG("the fake module is not loaded");
	ASSERT_EQ(0, write_param("persistent", "1"));
	ASSERT_EQ(0, gpu_stats(&self->base));
	self->kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->kfd);
	self->gfd = open(KVBLK_FAKE_GPU_DEV, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->gfd);
	self->dfd = open(test_device(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, self->dfd);
	ASSERT_EQ(0, attach(self->kfd, test_device(), &self->a));
}

/*
 * This harness runs a test's body after its setup SKIPped (it only
 * reports the skip): every test of the fixture starts with this.
 */
#define SKIPPED_IN_SETUP() do { if (_metadata->skip) return; } while (0)

FIXTURE_TEARDOWN(cuda)
{
	struct kvblk_fake_gpu_stats st;

	if (self->kfd >= 0)
		close(self->kfd);
	if (self->gfd >= 0)
		close(self->gfd);
	if (self->dfd >= 0)
		close(self->dfd);
	if (strcmp(expect(), "present"))
		return;
	write_param("persistent", "1");
	write_param("pt_version", "0x00020000");
	write_param("map_version", "0x00020003");
	EXPECT_TRUE(gpu_settled(&self->base, &st)) {
		TH_LOG("fake nvidia-p2p counts not back to baseline: allocs %llu/%llu, page tables %llu/%llu (persistent %llu/%llu), DMA mappings %llu/%llu, quarantined %llu/%llu, errors %llu/%llu",
		       st.allocs, self->base.allocs, st.page_tables, self->base.page_tables,
		       st.persistent, self->base.persistent, st.dma_mappings,
		       self->base.dma_mappings, st.quarantined, self->base.quarantined,
		       st.errors, self->base.errors);
	}
}

TEST_F(cuda, features_report_cuda)
{
	uint64_t feat = 0;

	SKIPPED_IN_SETUP();

	ASSERT_EQ(0, ioc(self->kfd, KVBLK_IOC_GET_FEATURES, &feat));
	EXPECT_NE(0ULL, feat & KVBLK_FEAT_MEM_CUDA);
}

/* Every registration is one persistent pin and one DMA mapping. */
TEST_F(cuda, persistent_pin_and_counts)
{
	struct kvblk_fake_gpu_stats st;
	uint64_t va;
	int id;

	SKIPPED_IN_SETUP();

	ASSERT_EQ(0, gpu_alloc(self->gfd, 4 * GPU_PAGE, &va));
	id = reg_cuda(self->kfd, va, 4 * GPU_PAGE);
	ASSERT_LT(0, id);
	ASSERT_EQ(0, gpu_stats(&st));
	EXPECT_EQ(self->base.page_tables + 1, st.page_tables);
	EXPECT_EQ(self->base.dma_mappings + 1, st.dma_mappings);
	EXPECT_EQ(self->base.persistent + 1, st.persistent);
	/* A second registration of the same range is a second pin. */
	ASSERT_LT(0, reg_cuda(self->kfd, va + GPU_PAGE, GPU_PAGE));
	ASSERT_EQ(0, gpu_stats(&st));
	EXPECT_EQ(self->base.page_tables + 2, st.page_tables);
	EXPECT_EQ(0, unreg(self->kfd, id));
	ASSERT_EQ(0, gpu_stats(&st));
	EXPECT_EQ(self->base.page_tables + 1, st.page_tables);
	EXPECT_EQ(self->base.dma_mappings + 1, st.dma_mappings);
	/* The other one goes with the context (teardown checks the counts). */
}

TEST_F(cuda, misaligned_registration_einval)
{
	uint64_t va;

	SKIPPED_IN_SETUP();

	ASSERT_EQ(0, gpu_alloc(self->gfd, 4 * GPU_PAGE, &va));
	EXPECT_EQ(-EINVAL, reg_cuda(self->kfd, va + 4096, GPU_PAGE));
	EXPECT_EQ(-EINVAL, reg_cuda(self->kfd, va + 32768, GPU_PAGE));
	EXPECT_EQ(-EINVAL, reg_cuda(self->kfd, va, GPU_PAGE + 4096));
	EXPECT_EQ(-EINVAL, reg_cuda(self->kfd, va, 4096));
	EXPECT_EQ(-EINVAL, reg_cuda(self->kfd, va, 0));
	/* Aligned but not (wholly) GPU memory: nvidia-p2p refuses, -EFAULT. */
	EXPECT_EQ(-EFAULT, reg_cuda(self->kfd, va, 5 * GPU_PAGE));
	EXPECT_EQ(-EFAULT, reg_cuda(self->kfd, va - GPU_PAGE, GPU_PAGE));
	EXPECT_EQ(0, gpu_free(self->gfd, va, 0));
	EXPECT_EQ(-EFAULT, reg_cuda(self->kfd, va, GPU_PAGE));
}

TEST_F(cuda, table_versions_checked)
{
	uint64_t va;
	int id;

	SKIPPED_IN_SETUP();

	ASSERT_EQ(0, gpu_alloc(self->gfd, 2 * GPU_PAGE, &va));
	ASSERT_EQ(0, write_param("pt_version", "0x00030000"));
	EXPECT_EQ(-EOPNOTSUPP, reg_cuda(self->kfd, va, GPU_PAGE));
	ASSERT_EQ(0, write_param("pt_version", "0x00010000"));
	EXPECT_EQ(-EOPNOTSUPP, reg_cuda(self->kfd, va, GPU_PAGE));
	ASSERT_EQ(0, write_param("pt_version", "0x00020001"));	/* newer minor: fine */
	id = reg_cuda(self->kfd, va, GPU_PAGE);
	EXPECT_LT(0, id);
	EXPECT_EQ(0, unreg(self->kfd, id));
	ASSERT_EQ(0, write_param("pt_version", "0x00020000"));
	ASSERT_EQ(0, write_param("map_version", "0x00020002"));	/* older minor */
	EXPECT_EQ(-EOPNOTSUPP, reg_cuda(self->kfd, va, GPU_PAGE));
	ASSERT_EQ(0, write_param("map_version", "0x00030003"));
	EXPECT_EQ(-EOPNOTSUPP, reg_cuda(self->kfd, va, GPU_PAGE));
	ASSERT_EQ(0, write_param("map_version", "0x00020007"));
	id = reg_cuda(self->kfd, va, GPU_PAGE);
	EXPECT_LT(0, id);
	EXPECT_EQ(0, unreg(self->kfd, id));
}

/*
 * Objects of sizes that are no multiple of the GPU page, at dword-aligned
 * buffer offsets inside and across 64 KiB GPU pages, in one batch, into a
 * registration that starts one GPU page into its allocation: each lands at
 * its offset with the bytes pread(O_DIRECT) reads, and no byte around them
 * (also outside the registered range) changes.
 */
TEST_F(cuda, unaligned_objects_land_exactly)
{
	const uint64_t lba = self->a.lba_size;
	const uint64_t alloc_len = 10 * GPU_PAGE, reg_off = GPU_PAGE;
	const uint64_t reg_len = 8 * GPU_PAGE;
	/* Device offsets in 4 KiB units, lengths in LBAs, buffer offsets in bytes. */
	struct {
		uint64_t dev_4k, lbas, buf_off;
	} obj[] = {
		{ 0, 1, 0 },
		{ 3, 3, 4096 + 4 },
		{ 100, 3, GPU_PAGE - 4 },			/* straddles pages 0/1 */
		{ 7, 9, GPU_PAGE + 12288 + 60 },
		{ 1000, 20, 2 * GPU_PAGE - 3 * 4096 + 8 },	/* straddles 1/2 */
		{ 4097, 2, 3 * GPU_PAGE + 32764 },
		{ 5000, 60, 4 * GPU_PAGE - 512 + 16 },		/* across pages 3..7 */
		{ 123, 1, 8 * GPU_PAGE - 4096 },		/* ends at the range's end */
	};
	const uint32_t n = sizeof(obj) / sizeof(obj[0]);
	struct kvblk_io_desc d[sizeof(obj) / sizeof(obj[0])];
	struct kvblk_desc_result res[sizeof(obj) / sizeof(obj[0])];
	struct kvblk_load_many lm;
	unsigned char *got, *want, *dio;
	uint64_t va, i, j;
	int id;

	SKIPPED_IN_SETUP();

	got = malloc(alloc_len);
	want = malloc(alloc_len);
	ASSERT_NE(NULL, got);
	ASSERT_NE(NULL, want);
	ASSERT_EQ(0, posix_memalign((void **)&dio, 4096, 4 * 1024 * 1024));
	ASSERT_EQ(0, gpu_alloc(self->gfd, alloc_len, &va));
	memset(want, 0x5a, alloc_len);
	ASSERT_EQ(0, gpu_io(self->gfd, true, va, 0, want, alloc_len));
	id = reg_cuda(self->kfd, va + reg_off, reg_len);
	ASSERT_LT(0, id);

	for (i = 0; i < n; i++) {
		uint64_t len = obj[i].lbas * lba;
		uint64_t off = obj[i].dev_4k * 4096;

		ASSERT_LT((uint64_t)0, len);
		ASSERT_GE(reg_len, obj[i].buf_off + len);
		ASSERT_GE(self->a.capacity, off + len);
		d[i] = (struct kvblk_io_desc){
			.offset = off, .length = len, .buf_offset = obj[i].buf_off,
			.buf_id = (uint32_t)id, .tag = 0xc0da0000 + i,
		};
		ASSERT_GE((uint64_t)4 * 1024 * 1024, len);
		ASSERT_EQ((ssize_t)len, pread(self->dfd, dio, len, off));
		memcpy(want + reg_off + obj[i].buf_off, dio, len);
	}
	/* The objects must not overlap each other in the buffer. */
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			ASSERT_TRUE(d[i].buf_offset + d[i].length <= d[j].buf_offset ||
				    d[j].buf_offset + d[j].length <= d[i].buf_offset);

	ASSERT_EQ(0, load(self->kfd, d, res, n, &lm));
	EXPECT_EQ(n, lm.nr_ok);
	for (i = 0; i < n; i++) {
		EXPECT_EQ(0, res[i].status);
		EXPECT_EQ(d[i].length, res[i].bytes);
	}
	ASSERT_EQ(0, gpu_io(self->gfd, false, va, 0, got, alloc_len));
	for (i = 0; i < alloc_len; i++) {
		if (got[i] != want[i]) {
			TH_LOG("first difference at allocation byte %llu (GPU page %llu): got 0x%02x, want 0x%02x",
			       (unsigned long long)i, (unsigned long long)(i / GPU_PAGE),
			       got[i], want[i]);
			break;
		}
	}
	EXPECT_EQ(alloc_len, i);
	EXPECT_EQ(0, unreg(self->kfd, id));
	EXPECT_EQ(0, gpu_free(self->gfd, va, 0));
	free(got);
	free(want);
	free(dio);
}

/* ---- revocation during in-flight loads ----------------------------------- */

/*
 * Batches of 1024 objects of 16 KiB, each in its own slot of a 16 MiB
 * buffer (kvblk.ko refuses a batch whose destinations overlap); the exit
 * cases' first batch loads the first REVOKE_SLOTS of them.
 */
#define REVOKE_OBJS	1024U
#define REVOKE_OBJ	(16 * 1024ULL)
#define REVOKE_SLOTS	64U
#define REVOKE_LEN	(REVOKE_OBJS * REVOKE_OBJ)

struct loader {
	int kfd;
	uint32_t id;
	volatile int started;
	volatile int stop;
	int batches, mixed, err;
	uint64_t ok, enodev, other;
	int other_status;
};

static void fill_batch(struct kvblk_io_desc *d, uint32_t id, uint64_t lba_capacity)
{
	for (unsigned int i = 0; i < REVOKE_OBJS; i++)
		d[i] = (struct kvblk_io_desc){
			.offset = (i * REVOKE_OBJ * 7) % (lba_capacity - REVOKE_OBJ),
			.length = REVOKE_OBJ,
			.buf_offset = i * REVOKE_OBJ,
			.buf_id = id, .tag = i,
		};
	for (unsigned int i = 0; i < REVOKE_OBJS; i++)
		d[i].offset &= ~4095ULL;
}

static uint64_t g_capacity;

static void *loader_main(void *arg)
{
	struct loader *l = arg;
	struct kvblk_io_desc d[REVOKE_OBJS];
	struct kvblk_desc_result res[REVOKE_OBJS];
	struct kvblk_load_many lm;
	bool saw_enodev = false;

	fill_batch(d, l->id, g_capacity);
	while (!l->stop && !saw_enodev && l->batches < 200) {
		l->started = 1;
		l->err = load(l->kfd, d, res, REVOKE_OBJS, &lm);
		if (l->err)
			break;
		l->batches++;
		if (lm.nr_ok && lm.nr_ok < REVOKE_OBJS)
			l->mixed++;
		for (unsigned int i = 0; i < REVOKE_OBJS; i++) {
			if (res[i].status == 0) {
				l->ok++;
			} else if (res[i].status == -ENODEV) {
				l->enodev++;
				saw_enodev = true;
			} else {
				l->other++;
				l->other_status = res[i].status;
			}
		}
	}
	return NULL;
}

/*
 * cudaFree while loads into the buffer are in flight: the persistent pin
 * outlives the free, so every load, during and after it, succeeds; the
 * pages go (poisoned, quarantined by the fake module) only when the buffer
 * is unregistered, and nothing is written into them after that.
 */
TEST_F_TIMEOUT(cuda, free_during_loads, 300)
{
	struct kvblk_io_desc d[REVOKE_OBJS];
	struct kvblk_desc_result res[REVOKE_OBJS];
	struct kvblk_fake_gpu_qcheck q = { 0 };
	struct kvblk_fake_gpu_stats st0, st1;
	struct kvblk_load_many lm;
	struct loader l = { .kfd = self->kfd };
	pthread_t t;
	uint64_t va;
	int id;

	SKIPPED_IN_SETUP();

	g_capacity = self->a.capacity;
	ASSERT_EQ(0, gpu_alloc(self->gfd, REVOKE_LEN, &va));
	id = reg_cuda(self->kfd, va, REVOKE_LEN);
	ASSERT_LT(0, id);
	l.id = (uint32_t)id;
	ASSERT_EQ(0, gpu_stats(&st0));

	ASSERT_EQ(0, pthread_create(&t, NULL, loader_main, &l));
	while (!l.started)
		usleep(100);
	usleep(20000);
	EXPECT_EQ(0, gpu_free(self->gfd, va, KVBLK_FAKE_GPU_FREE_QUARANTINE));
	ASSERT_EQ(0, gpu_stats(&st1));
	EXPECT_EQ(st0.callbacks, st1.callbacks);
	usleep(50000);
	l.stop = 1;
	ASSERT_EQ(0, pthread_join(t, NULL));
	TH_LOG("%d batches during the free (%d cut by it): %llu objects loaded, %llu -ENODEV, %llu other",
	       l.batches, l.mixed, (unsigned long long)l.ok, (unsigned long long)l.enodev,
	       (unsigned long long)l.other);
	EXPECT_EQ(0, l.err);
	EXPECT_EQ(0ULL, l.other) TH_LOG("an object failed with %d", l.other_status);
	EXPECT_EQ(0ULL, l.enodev);
	EXPECT_LT(0, l.batches);

	/* After the free. */
	fill_batch(d, (uint32_t)id, self->a.capacity);
	ASSERT_EQ(0, load(self->kfd, d, res, REVOKE_OBJS, &lm));
	for (unsigned int i = 0; i < REVOKE_OBJS; i++) {
		EXPECT_EQ(0, res[i].status);
		EXPECT_EQ(REVOKE_OBJ, res[i].bytes);
	}
	EXPECT_EQ(REVOKE_OBJS, lm.nr_ok);
	/* The pages are quarantined only when the pin goes. */
	q.va = va;
	EXPECT_EQ(-EINVAL, ioc(self->gfd, KVBLK_FAKE_GPU_QCHECK, &q));
	EXPECT_EQ(0, unreg(self->kfd, (uint32_t)id));
	EXPECT_EQ(0, ioc(self->gfd, KVBLK_FAKE_GPU_QCHECK, &q));
	EXPECT_EQ(0ULL, q.bad_bytes);
}

/*
 * A GPU without persistent pins (MIG, vGPU: the fake's persistent=0) is
 * refused with -EOPNOTSUPP: kvblk.ko never takes a free-callback pin, whose
 * tables NVIDIA frees when the callback returns (kmod/README.md). Nothing is
 * pinned or mapped (the teardown checks the fake's counts).
 */
TEST_F(cuda, callback_only_gpu_refused)
{
	struct kvblk_fake_gpu_stats st;
	uint64_t va;

	SKIPPED_IN_SETUP();

	ASSERT_EQ(0, gpu_alloc(self->gfd, 4 * GPU_PAGE, &va));
	ASSERT_EQ(0, write_param("persistent", "0"));
	EXPECT_EQ(-EOPNOTSUPP, reg_cuda(self->kfd, va, 4 * GPU_PAGE));
	ASSERT_EQ(0, gpu_stats(&st));
	EXPECT_EQ(self->base.page_tables, st.page_tables);
	EXPECT_EQ(self->base.dma_mappings, st.dma_mappings);
	/* The same range pins once the GPU allows persistent pins. */
	ASSERT_EQ(0, write_param("persistent", "1"));
	EXPECT_LT(0, reg_cuda(self->kfd, va, 4 * GPU_PAGE));
	EXPECT_EQ(0, gpu_free(self->gfd, va, 0));
}

/* cudaFree of a registered buffer with nothing in flight, then unregister. */
TEST_F(cuda, free_then_unregister)
{
	struct kvblk_io_desc d = { .length = self->a.lba_size, .tag = 1 };
	struct kvblk_desc_result res;
	struct kvblk_load_many lm;
	uint64_t va;
	int id;

	SKIPPED_IN_SETUP();

	ASSERT_EQ(0, gpu_alloc(self->gfd, 2 * GPU_PAGE, &va));
	id = reg_cuda(self->kfd, va, 2 * GPU_PAGE);
	ASSERT_LT(0, id);
	d.buf_id = (uint32_t)id;
	ASSERT_EQ(0, load(self->kfd, &d, &res, 1, &lm));
	EXPECT_EQ(0, res.status);
	ASSERT_EQ(0, gpu_free(self->gfd, va, 0));
	ASSERT_EQ(0, load(self->kfd, &d, &res, 1, &lm));
	EXPECT_EQ(0, res.status);
	EXPECT_EQ(0, unreg(self->kfd, (uint32_t)id));
}

/* ---- races between cudaFree, registration and release --------------------- */

struct racer {
	int gfd;
	uint64_t va;
	unsigned int spin;
	volatile int go;
	int ret;
};

/* Frees the allocation a moment (@spin loops) after the main thread says go. */
static void *free_main(void *arg)
{
	struct racer *r = arg;

	while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
		;
	for (volatile unsigned int i = 0; i < r->spin; i++)
		;
	r->ret = gpu_free(r->gfd, r->va, 0);
	return NULL;
}

/*
 * cudaFree racing the registration of the same memory (even rounds) and
 * racing its release (odd rounds: unregister while the free runs). A
 * registration either fails with -EFAULT (freed before the pin) or yields a
 * buffer that loads; nothing leaks, nothing is put twice (the fake module
 * counts misuse, the teardown checks it), no warning, no free callback.
 * Outcomes are logged: which windows were hit depends on timing.
 */
TEST_F_TIMEOUT(cuda, free_races_register_and_release, 300)
{
	struct kvblk_io_desc d = { .length = self->a.lba_size, .tag = 7 };
	unsigned int reg_ok = 0, reg_fault = 0;
	struct kvblk_fake_gpu_stats st0, st1;
	uint64_t release_callbacks = 0;
	struct kvblk_desc_result res;
	struct kvblk_load_many lm;
	struct racer r;
	pthread_t t;
	int id, i;

	SKIPPED_IN_SETUP();
	srand(1234);
	for (i = 0; i < 400; i++) {
		bool reg_race = !(i & 1);

		/* Release races get shorter delays: unregister is quick. */
		r = (struct racer){ .gfd = self->gfd,
				    .spin = rand() % (reg_race ? 20000 : 2000) };
		ASSERT_EQ(0, gpu_alloc(self->gfd, 8 * GPU_PAGE, &r.va));
		ASSERT_EQ(0, pthread_create(&t, NULL, free_main, &r));
		if (reg_race)
			__atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
		id = reg_cuda(self->kfd, r.va, 8 * GPU_PAGE);
		if (id > 0) {
			/* No ASSERT before go: the free thread must not be left spinning. */
			reg_ok++;
			d.buf_id = (uint32_t)id;
			EXPECT_EQ(0, load(self->kfd, &d, &res, 1, &lm));
			/* The pin holds the memory, freed or not. */
			EXPECT_EQ(0, res.status);
			EXPECT_EQ(0, gpu_stats(&st0));
			__atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
			EXPECT_EQ(0, unreg(self->kfd, (uint32_t)id));
		} else {
			__atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
			EXPECT_EQ(-EFAULT, id);
			reg_fault++;
		}
		ASSERT_EQ(0, pthread_join(t, NULL));
		ASSERT_EQ(0, r.ret);
		if (!reg_race && id > 0) {
			ASSERT_EQ(0, gpu_stats(&st1));
			release_callbacks += st1.callbacks - st0.callbacks;
		}
	}
	TH_LOG("400 rounds: %u registered, %u refused (-EFAULT: freed before the pin)",
	       reg_ok, reg_fault);
	/* No free callback ever: kvblk.ko holds persistent pins only. */
	EXPECT_EQ(0ULL, release_callbacks);
}

/* ---- process exit with registered buffers -------------------------------- */

/*
 * A child registers CUDA memory and leaves with it registered: it exits,
 * or is killed during a batch. Its files close in fd order, so @gpu_first
 * decides whether the allocation is freed before or after its
 * kvblk context releases the buffer. Counts return to baseline either way.
 */
static void exit_child(const char *dev, bool gpu_first, bool kill_mid)
{
	struct kvblk_io_desc d[REVOKE_OBJS];
	struct kvblk_desc_result res[REVOKE_OBJS];
	struct kvblk_load_many lm;
	struct kvblk_attach a;
	int kfd, gfd, id;
	uint64_t va;

	if (gpu_first) {
		gfd = open(KVBLK_FAKE_GPU_DEV, O_RDWR);
		kfd = open(KVBLK_NODE, O_RDWR);
	} else {
		kfd = open(KVBLK_NODE, O_RDWR);
		gfd = open(KVBLK_FAKE_GPU_DEV, O_RDWR);
	}
	if (kfd < 0 || gfd < 0 || attach(kfd, dev, &a) ||
	    gpu_alloc(gfd, REVOKE_LEN, &va))
		_exit(10);
	id = reg_cuda(kfd, va, REVOKE_LEN);
	if (id <= 0)
		_exit(11);
	fill_batch(d, (uint32_t)id, a.capacity);
	/* One small batch that must succeed, then leave (or loop, and be killed). */
	if (load(kfd, d, res, REVOKE_SLOTS, &lm) || lm.nr_ok != REVOKE_SLOTS)
		_exit(12);
	if (kill_mid) {
		if (fork() == 0) {
			usleep(20000);
			kill(getppid(), SIGKILL);
			_exit(0);
		}
		for (;;)
			load(kfd, d, res, REVOKE_OBJS, &lm);
	}
	_exit(0);
}

static void run_exit_case(struct __test_metadata *_metadata, const char *dev,
			  const struct kvblk_fake_gpu_stats *base, bool gpu_first,
			  bool kill_mid)
{
	struct kvblk_fake_gpu_stats st;
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		exit_child(dev, gpu_first, kill_mid);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	if (kill_mid) {
		ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
			TH_LOG("child status 0x%x", status);
	} else {
		ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
			TH_LOG("child status 0x%x", status);
	}
	EXPECT_TRUE(gpu_settled(base, &st)) {
		TH_LOG("after the child (gpu fd first %d, killed %d): page tables %llu/%llu, mappings %llu/%llu, allocs %llu/%llu",
		       gpu_first, kill_mid, st.page_tables, base->page_tables,
		       st.dma_mappings, base->dma_mappings, st.allocs, base->allocs);
	}
}

TEST_F_TIMEOUT(cuda, process_exit_with_registered_buffers, 300)
{
	SKIPPED_IN_SETUP();
	run_exit_case(_metadata, test_device(), &self->base, true, false);
	run_exit_case(_metadata, test_device(), &self->base, false, false);
	run_exit_case(_metadata, test_device(), &self->base, true, true);
	run_exit_case(_metadata, test_device(), &self->base, false, true);
}

TEST_HARNESS_MAIN

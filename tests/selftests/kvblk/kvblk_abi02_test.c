// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_abi02_test - a program built against the 0.2 uapi header keeps
 * working.
 *
 * Built with uapi-0.2/linux/kvblk.h, a frozen copy of the header as it was
 * before several targets per context (API version 1: struct kvblk_attach
 * of 96 bytes, struct kvblk_desc of 40, struct kvblk_load_many of 80),
 * never with include/uapi: the ioctl numbers encode those sizes, and the
 * structs are zero-filled as a 0.2 program fills them. Against the running
 * kvblk.ko it attaches the test namespace, registers host memory and loads
 * batches with 40-byte descriptors; every object must equal the VM's
 * pattern and pread(O_DIRECT), bytes around the objects and past the 0.2
 * structs untouched, the engine reported as 0.2 knew it, a second attach
 * -EBUSY as in 0.2, the 0.2 input errors unchanged.
 *
 * Environment: KVBLK_TEST_DEVICE (default /dev/nvme0n1).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/kvblk.h>	/* uapi-0.2/linux/kvblk.h: see the Makefile */

#include "kselftest_harness.h"

#include "kvblk_utils.h"
#include "tests/vm/pattern.h"

/* The header this program is built with is the 0.2 one. */
_Static_assert(KVBLK_API_VERSION == 1, "built against a newer uapi header");
_Static_assert(sizeof(struct kvblk_attach) == 96, "0.2 struct kvblk_attach");
_Static_assert(sizeof(struct kvblk_desc) == 40, "0.2 struct kvblk_desc");
_Static_assert(sizeof(struct kvblk_load_many) == 80, "0.2 struct kvblk_load_many");

#define NR 16
#define BUF_BYTES (16UL << 20)
#define CANARY 0x77
#define TAIL 64		/* sentinel bytes behind each 0.2 struct */

FIXTURE(abi02) {
	int kfd, bfd, dfd;
	unsigned char *buf;
	/* Each struct with sentinel bytes behind it: nothing past 0.2 is written. */
	unsigned char a_mem[sizeof(struct kvblk_attach) + TAIL];
	unsigned char lm_mem[sizeof(struct kvblk_load_many) + TAIL];
	struct kvblk_attach *a;
	struct kvblk_load_many *lm;
	uint32_t buf_id;
};

FIXTURE_SETUP(abi02)
{
	struct kvblk_buf_reg r;

	self->kfd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	if (self->kfd < 0)
		SKIP(return, "/dev/kvblk: %s", strerror(errno));
	self->bfd = open(test_device(), O_RDONLY | O_CLOEXEC);
	self->dfd = open(test_device(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, self->bfd) TH_LOG("%s: %s", test_device(), strerror(errno));
	ASSERT_LE(0, self->dfd);

	memset(self->a_mem, 0xee, sizeof(self->a_mem));
	self->a = (struct kvblk_attach *)self->a_mem;
	memset(self->a, 0, sizeof(*self->a));
	self->a->size = sizeof(*self->a);
	self->a->bdev_fd = self->bfd;
	ASSERT_EQ(0, ioctl(self->kfd, KVBLK_IOC_ATTACH, self->a)) TH_LOG("attach: %s", strerror(errno));
	for (size_t i = sizeof(*self->a); i < sizeof(self->a_mem); i++) {
		ASSERT_EQ(0xee, self->a_mem[i]) TH_LOG("attach wrote byte %zu past the 0.2 struct", i);
	}

	self->buf = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->buf);
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.kind = KVBLK_MEM_HOST;
	r.addr = (uintptr_t)self->buf;
	r.len = BUF_BYTES;
	ASSERT_EQ(0, ioctl(self->kfd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("register: %s", strerror(errno));
	self->buf_id = r.buf_id;
	self->lm = (struct kvblk_load_many *)self->lm_mem;
}

FIXTURE_TEARDOWN(abi02)
{
	if (self->kfd >= 0)
		close(self->kfd);
	if (self->buf && self->buf != MAP_FAILED)
		munmap(self->buf, BUF_BYTES);
	close(self->bfd);
	close(self->dfd);
}

static long load(struct __test_metadata *_metadata, FIXTURE_DATA(abi02) *self,
		 struct kvblk_desc *d, struct kvblk_desc_result *r, unsigned int n)
{
	memset(self->lm_mem, 0xee, sizeof(self->lm_mem));
	memset(self->lm, 0, sizeof(*self->lm));
	self->lm->size = sizeof(*self->lm);
	self->lm->nr_descs = n;
	self->lm->desc_bytes = sizeof(*d);
	self->lm->descs = (uintptr_t)d;
	self->lm->results = (uintptr_t)r;
	self->lm->result_bytes = sizeof(*r);
	long ret = ioctl(self->kfd, KVBLK_IOC_LOAD_MANY, self->lm);

	for (size_t i = sizeof(*self->lm); i < sizeof(self->lm_mem); i++) {
		EXPECT_EQ(0xee, self->lm_mem[i]) TH_LOG("LOAD_MANY wrote byte %zu past the 0.2 struct", i);
	}
	return ret;
}

/* Batches of 40-byte descriptors read exactly what pread(O_DIRECT) reads. */
TEST_F(abi02, load_many_old_structs_exact)
{
	struct kvblk_desc d[NR];
	struct kvblk_desc_result r[NR];
	uint64_t lba = self->a->lba_size, cap = self->a->capacity;
	uint64_t seed = 0x3243f6a8885a308dULL;

	for (int round = 0; round < 4; round++) {
		uint64_t bo = 4096;

		memset(self->buf, CANARY, BUF_BYTES);
		memset(d, 0, sizeof(d));
		for (int i = 0; i < NR; i++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			d[i].length = (1 + seed % 64) * lba;
			d[i].offset = (seed >> 20) % ((cap - d[i].length) / lba) * lba;
			d[i].buf_offset = bo + (i % 3) * self->a->buf_align;
			d[i].buf_id = self->buf_id;
			d[i].tag = i;
			bo = (d[i].buf_offset + d[i].length + 8191) / 4096 * 4096;
		}
		ASSERT_EQ(NR, load(_metadata, self, d, r, NR)) TH_LOG("round %d: %s", round, strerror(errno));
		EXPECT_EQ((__u32)NR, self->lm->nr_ok);
		EXPECT_EQ(-1, self->lm->bad_index);
		/* The one engine serving the one target, as 0.2 reported it. */
		EXPECT_EQ(self->a->engine, self->lm->engine);
		for (int i = 0; i < NR; i++) {
			unsigned char *ref;
			uint64_t end = d[i].buf_offset + d[i].length;
			uint64_t next = i + 1 < NR ? d[i + 1].buf_offset : end + 4096;

			EXPECT_EQ(0, r[i].status) TH_LOG("round %d obj %d", round, i);
			EXPECT_EQ(d[i].length, r[i].bytes);
			EXPECT_EQ(-1, kvblk_pattern_check(self->buf + d[i].buf_offset,
							  self->a->start_lba * lba + d[i].offset,
							  d[i].length)) TH_LOG("round %d obj %d", round, i);
			ASSERT_EQ(0, posix_memalign((void **)&ref, 4096, d[i].length));
			ASSERT_EQ((ssize_t)d[i].length, pread(self->dfd, ref, d[i].length, d[i].offset));
			EXPECT_EQ(0, memcmp(ref, self->buf + d[i].buf_offset, d[i].length))
				TH_LOG("round %d obj %d differs from pread(O_DIRECT)", round, i);
			free(ref);
			for (uint64_t j = end; j < next; j++)
				if (self->buf[j] != CANARY) {
					EXPECT_EQ(CANARY, self->buf[j]) TH_LOG("canary at %llu", (unsigned long long)j);
					break;
				}
		}
	}
}

/* 0.2: one target per context; a second attach is refused. */
TEST_F(abi02, second_attach_ebusy)
{
	struct kvblk_attach a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.bdev_fd = self->bfd;
	EXPECT_EQ(-1, ioctl(self->kfd, KVBLK_IOC_ATTACH, &a));
	EXPECT_EQ(EBUSY, errno);
}

/* 0.2's input errors: past the end -ERANGE, a bad flag -EINVAL, bad_index. */
TEST_F(abi02, input_errors_unchanged)
{
	struct kvblk_desc d[2];
	struct kvblk_desc_result r[2];

	memset(d, 0, sizeof(d));
	memset(self->buf, CANARY, 1 << 20);
	d[0].length = self->a->lba_size;
	d[0].buf_id = self->buf_id;
	d[1] = d[0];
	d[1].offset = self->a->capacity;
	d[1].buf_offset = 65536;
	EXPECT_EQ(-1, load(_metadata, self, d, r, 2));
	EXPECT_EQ(ERANGE, errno);
	EXPECT_EQ(1, self->lm->bad_index);
	EXPECT_EQ(-ERANGE, r[1].status);
	EXPECT_EQ(-ECANCELED, r[0].status);
	d[1].offset = 0;
	d[1].flags = 1;
	EXPECT_EQ(-1, load(_metadata, self, d, r, 2));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(1, self->lm->bad_index);
	for (int i = 0; i < 1 << 20; i++)
		if (self->buf[i] != CANARY) {
			EXPECT_EQ(CANARY, self->buf[i]) TH_LOG("a refused batch wrote at %d", i);
			break;
		}
}

TEST_HARNESS_MAIN

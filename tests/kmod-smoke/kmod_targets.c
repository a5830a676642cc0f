// SPDX-License-Identifier: MIT
/*
 * kmod_targets - several targets per kvblk.ko context (uapi version 2).
 *
 * One context attaches namespace A (target 0: KVBLK_ATTACH_F_ENGINE_PRP, the
 * context's buffers are mapped for A's controller), namespace B of another
 * controller (target 1: without a flag the block-layer engine alone, since
 * the context's memory is mapped for A's PCI function; KVBLK_ATTACH_F_ENGINE_PRP
 * there is refused with -EXDEV), a regular file (target 2: the file
 * engine) and a block device that is no NVMe namespace, a loop device
 * (target 3: the block-layer engine). A attached again without a flag after
 * the buffer: the block-layer engine, with the PRP engine for page-less
 * memory. One buffer; then ROUNDS batches of objects interleaved over the
 * four targets, each batch ONE LOAD_MANY, every object at its own target's
 * alignment, with canary bytes around every object. Every object must equal
 * pread(O_DIRECT) of its own target's fd (and for A and B the VM's pattern:
 * B's byte b is pattern byte KVBLK_VM_NS2_OFFSET + b, so a read served by
 * the wrong namespace never matches). Each batch reports engine
 * KVBLK_ENGINE_MIXED, engines = PRP|BIO|FILE, nr_targets = 4, and each
 * disk's sysfs counters move by exactly its own share: objects, commands,
 * bytes, one batch per disk (the four targets are on four disks).
 * Also: a descriptor past its own target's live end (-ERANGE) or naming a
 * target the context lacks (-EINVAL) fails the call with bad_index, nothing
 * read; descriptors of 40 bytes (0.2) all read target 0; rights are
 * checked for every added target (O_WRONLY and O_PATH -EACCES, a directory
 * -EISDIR, a pipe, a socket and /dev/null -ENOTBLK) and a refused attach
 * uses no index; KVBLK_ATTACH_F_ADD_TARGET with a 0.2-sized struct -EINVAL;
 * a second plain attach -EBUSY as in 0.2.
 *
 * usage: kmod_targets DEV_A DEV_B FILE DEV_C (DEV_C: not the disk under FILE)
 * Environment: KVBLK_VM_NS2_OFFSET (bytes, K/M/G suffix allowed; default
 * 64M),
 * KMOD_TARGETS_ROUNDS (default 8).
 * Exit: 0 pass, 1 fail, 4 skip (no /dev/kvblk).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "../vm/pattern.h"

#define SMOKE_SEED 0x13198a2e03707344ULL
#include "smoke_check.h"

#define CANARY 0x5c
#define NT 4
#define MAX_OBJS 60
#define BUF_BYTES (48ULL << 20)

struct tgt {
	const char *path;
	int fd, dfd;		/* O_RDONLY (attached), O_DIRECT (reference) */
	struct kvblk_attach a;
	char disk[64];
	uint64_t pattern_base;	/* pattern offset of byte 0, or UINT64_MAX */
};

static const char *stat_names[] = { "batches", "objects", "commands", "bytes" };

static void whole_disk(const char *dev, char *name, size_t len)
{
	char path[PATH_MAX + 32], real[PATH_MAX];
	struct stat st;
	dev_t d;
	char *slash;

	snprintf(name, len, "?");
	if (stat(dev, &st))
		return;
	d = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(d), minor(d));
	if (!realpath(path, real))
		return;
	snprintf(path, sizeof(path), "%s/partition", real);
	if (!access(path, F_OK)) {
		slash = strrchr(real, '/');
		if (slash)
			*slash = 0;
	}
	slash = strrchr(real, '/');
	snprintf(name, len, "%.60s", slash ? slash + 1 : real);
}

/* "64M", "1G", "4096": bytes. */
static uint64_t parse_bytes(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'G': case 'g': return v << 30;
	case 'M': case 'm': return v << 20;
	case 'K': case 'k': return v << 10;
	default: return v;
	}
}

static long long stat_u64(const char *disk, const char *file)
{
	char path[256];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/kvblk/%s/stats/%s", disk, file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static int attach(int kfd, int fd, uint32_t flags, uint32_t size,
		  struct kvblk_attach *a)
{
	memset(a, 0, sizeof(*a));
	a->size = size;
	a->flags = flags;
	a->bdev_fd = fd;
	return ioctl(kfd, KVBLK_IOC_ATTACH, a) ? -errno : 0;
}

static void expect_add_refused(int kfd, const char *what, int fd, uint32_t flags,
			       int err)
{
	struct kvblk_attach a;
	int ret = attach(kfd, fd, flags | KVBLK_ATTACH_F_ADD_TARGET, sizeof(a), &a);

	CHECK(ret == -err, "add target %s: %d, want %d", what, ret, -err);
}

static unsigned char *direct_read(int dfd, uint64_t off, uint64_t len)
{
	unsigned char *p;
	uint64_t done = 0;

	if (posix_memalign((void **)&p, 4096, len ? len : 4096))
		return NULL;
	while (done < len) {
		ssize_t n = pread(dfd, p + done, len - done, off + done);

		if (n <= 0) {
			free(p);
			return NULL;
		}
		done += n;
	}
	return p;
}

static long load(int kfd, struct kvblk_io_desc *d, unsigned int n, uint32_t desc_bytes,
		 struct kvblk_desc_result *r, struct kvblk_load_many *lm)
{
	memset(lm, 0, sizeof(*lm));
	lm->size = sizeof(*lm);
	lm->nr_descs = n;
	lm->desc_bytes = desc_bytes;
	lm->descs = (uintptr_t)d;
	lm->results = (uintptr_t)r;
	lm->result_bytes = sizeof(*r);
	return ioctl(kfd, KVBLK_IOC_LOAD_MANY, lm) < 0 ? -errno : (long)lm->nr_ok;
}

static bool all_canary(const unsigned char *p, uint64_t len)
{
	uint64_t i;

	for (i = 0; i < len; i++)
		if (p[i] != CANARY)
			return false;
	return true;
}

/* One random batch over every target; returns objects per target in @per. */
static void round_check(int kfd, struct tgt *t, uint32_t buf_id,
			unsigned char *buf, unsigned int round)
{
	struct kvblk_io_desc d[MAX_OBJS];
	struct kvblk_desc_result r[MAX_OBJS];
	struct kvblk_load_many lm;
	long long before[NT][4], after[NT][4];
	uint64_t want_obj[NT] = { 0 }, want_cmd[NT] = { 0 }, want_bytes[NT] = { 0 };
	unsigned int n = NT + rnd() % (MAX_OBJS - NT), k, i, j;
	uint64_t bo = 4096;
	long ret;

	memset(buf, CANARY, BUF_BYTES);
	memset(d, 0, sizeof(d));
	for (k = 0; k < n; k++) {
		struct tgt *x = &t[k < NT ? k : rnd() % NT];
		uint64_t lba = x->a.lba_size, align = x->a.buf_align;
		uint64_t maxlen = 3ULL * x->a.max_cmd_bytes + 5 * lba;
		uint64_t len = (1 + rnd() % (maxlen / lba)) * lba;

		if (len > x->a.capacity)
			len = x->a.capacity / lba * lba;
		d[k].target = x->a.target;
		d[k].length = len;
		d[k].offset = rnd() % ((x->a.capacity - len) / lba + 1) * lba;
		bo = (bo + align - 1) / align * align;
		/* Sometimes off a page boundary, as the alignment allows. */
		if (align < 4096 && rnd() % 2)
			bo += align * (1 + rnd() % (4096 / align - 1));
		if (bo + len + 4096 > BUF_BYTES)
			break;
		d[k].buf_offset = bo;
		d[k].buf_id = buf_id;
		d[k].tag = ((uint64_t)round << 16) | k;
		bo += len + 4096;
		i = d[k].target;
		want_obj[i]++;
		want_cmd[i] += (len + x->a.max_cmd_bytes - 1) / x->a.max_cmd_bytes;
		want_bytes[i] += len;
	}
	n = k;
	for (i = 0; i < NT; i++)
		for (j = 0; j < 4; j++)
			before[i][j] = stat_u64(t[i].disk, stat_names[j]);

	ret = load(kfd, d, n, sizeof(d[0]), r, &lm);
	CHECK(ret == (long)n, "round %u: LOAD_MANY %ld, want %u", round, ret, n);
	CHECK(lm.engine == KVBLK_ENGINE_MIXED, "round %u: engine %u", round, lm.engine);
	CHECK(lm.engines == ((1U << KVBLK_ENGINE_PRP) | (1U << KVBLK_ENGINE_BIO) |
			     (1U << KVBLK_ENGINE_FILE)),
	      "round %u: engines %#x", round, lm.engines);
	CHECK(lm.nr_targets == NT, "round %u: nr_targets %u", round, lm.nr_targets);

	for (k = 0; k < n; k++) {
		struct tgt *x = &t[d[k].target];
		unsigned char *ref = direct_read(x->dfd, d[k].offset, d[k].length);
		uint64_t next = k + 1 < n ? d[k + 1].buf_offset : BUF_BYTES;

		CHECK(r[k].status == 0 && r[k].bytes == d[k].length,
		      "round %u obj %u (target %u): status %d bytes %llu", round, k,
		      d[k].target, r[k].status, (unsigned long long)r[k].bytes);
		CHECK(ref && !memcmp(buf + d[k].buf_offset, ref, d[k].length),
		      "round %u obj %u (target %u %s+%llu len %llu): differs from pread(O_DIRECT)",
		      round, k, d[k].target, x->path, (unsigned long long)d[k].offset,
		      (unsigned long long)d[k].length);
		if (x->pattern_base != UINT64_MAX)
			CHECK(kvblk_pattern_check(buf + d[k].buf_offset,
						  x->pattern_base + d[k].offset,
						  d[k].length) == -1,
			      "round %u obj %u (target %u): not the pattern of its namespace",
			      round, k, d[k].target);
		CHECK(all_canary(buf + d[k].buf_offset + d[k].length,
				 next - d[k].buf_offset - d[k].length),
		      "round %u obj %u: canary after it overwritten", round, k);
		free(ref);
	}
	CHECK(all_canary(buf, d[0].buf_offset), "round %u: canary before obj 0", round);

	for (i = 0; i < NT; i++) {
		for (j = 0; j < 4; j++)
			after[i][j] = stat_u64(t[i].disk, stat_names[j]);
		/* Targets on one disk share its counters (not so here). */
		CHECK(after[i][0] - before[i][0] == 1,
		      "round %u %s: batches +%lld, want +1", round, t[i].disk,
		      after[i][0] - before[i][0]);
		CHECK(after[i][1] - before[i][1] == (long long)want_obj[i],
		      "round %u %s: objects +%lld, want +%llu", round, t[i].disk,
		      after[i][1] - before[i][1], (unsigned long long)want_obj[i]);
		/* Commands before the block layer splits them, per engine. */
		CHECK(after[i][2] - before[i][2] == (long long)want_cmd[i],
		      "round %u %s: commands +%lld, want +%llu", round, t[i].disk,
		      after[i][2] - before[i][2], (unsigned long long)want_cmd[i]);
		CHECK(after[i][3] - before[i][3] == (long long)want_bytes[i],
		      "round %u %s: bytes +%lld, want +%llu", round, t[i].disk,
		      after[i][3] - before[i][3], (unsigned long long)want_bytes[i]);
	}
}

int main(int argc, char **argv)
{
	struct tgt t[NT];
	struct kvblk_attach a;
	struct kvblk_buf_reg reg = { .size = sizeof(reg), .kind = KVBLK_MEM_HOST };
	struct kvblk_io_desc d[4];
	struct kvblk_desc_result r[4];
	struct kvblk_load_many lm;
	const char *e = getenv("KVBLK_VM_NS2_OFFSET");
	unsigned int rounds = getenv("KMOD_TARGETS_ROUNDS") ?
			      atoi(getenv("KMOD_TARGETS_ROUNDS")) : 8, i;
	unsigned char *buf;
	int kfd, ret;

	if (argc != 5) {
		fprintf(stderr, "usage: kmod_targets DEV_A DEV_B FILE DEV_C\n");
		return 2;
	}
	kfd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	if (kfd < 0) {
		printf("SKIP: /dev/kvblk: %s\n", strerror(errno));
		return 4;
	}
	for (i = 0; i < NT; i++) {
		t[i].path = argv[1 + i];
		t[i].fd = open(t[i].path, O_RDONLY | O_CLOEXEC);
		t[i].dfd = open(t[i].path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (t[i].fd < 0 || t[i].dfd < 0) {
			fprintf(stderr, "FAIL: open %s: %s\n", t[i].path, strerror(errno));
			return 1;
		}
		whole_disk(t[i].path, t[i].disk, sizeof(t[i].disk));
	}
	t[0].pattern_base = 0;
	t[1].pattern_base = e ? parse_bytes(e) : 64ULL << 20;
	t[2].pattern_base = UINT64_MAX;
	t[3].pattern_base = UINT64_MAX;

	/* Adding a target needs a struct that can carry its index. */
	ret = attach(kfd, t[0].fd, KVBLK_ATTACH_F_ADD_TARGET, KVBLK_ATTACH_SIZE_VER1, &a);
	CHECK(ret == -EINVAL, "ADD_TARGET with a 96-byte struct: %d", ret);

	ret = attach(kfd, t[0].fd, KVBLK_ATTACH_F_ENGINE_PRP, sizeof(a), &t[0].a);
	CHECK(!ret && t[0].a.target == 0 && t[0].a.engine == KVBLK_ENGINE_PRP &&
	      t[0].a.engines == 1U << KVBLK_ENGINE_PRP,
	      "attach A: %d target %u engine %u engines %#x", ret, t[0].a.target,
	      t[0].a.engine, t[0].a.engines);
	/* 0.2 rule: a second plain attach is refused. */
	ret = attach(kfd, t[1].fd, 0, sizeof(a), &a);
	CHECK(ret == -EBUSY, "second attach without ADD_TARGET: %d", ret);

	/* Rights and kinds are checked for every added target. */
	{
		int wfd = open(t[1].path, O_WRONLY | O_CLOEXEC);
		int pfd = open(t[1].path, O_PATH | O_CLOEXEC);
		int dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		int sv[2] = { -1, -1 }, pp[2] = { -1, -1 };

		CHECK(!pipe(pp) && !socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "pipe/socketpair");
		expect_add_refused(kfd, "O_WRONLY", wfd, 0, EACCES);
		expect_add_refused(kfd, "O_PATH", pfd, 0, EACCES);
		expect_add_refused(kfd, "directory", dfd, 0, EISDIR);
		expect_add_refused(kfd, "pipe", pp[0], 0, ENOTBLK);
		expect_add_refused(kfd, "socket", sv[0], 0, ENOTBLK);
		expect_add_refused(kfd, "/dev/null", nfd, 0, ENOTBLK);
		expect_add_refused(kfd, "closed fd", 1000, 0, EBADF);
		/* B is on another PCI function than the one buffers map for. */
		expect_add_refused(kfd, "B with the PRP engine", t[1].fd,
				   KVBLK_ATTACH_F_ENGINE_PRP, EXDEV);
		expect_add_refused(kfd, "PRP on a file", t[2].fd,
				   KVBLK_ATTACH_F_ENGINE_PRP, EOPNOTSUPP);
		close(wfd);
		close(pfd);
		close(dfd);
		close(nfd);
		close(pp[0]);
		close(pp[1]);
		close(sv[0]);
		close(sv[1]);
	}

	ret = attach(kfd, t[1].fd, KVBLK_ATTACH_F_ADD_TARGET, sizeof(a), &t[1].a);
	CHECK(!ret && t[1].a.target == 1 && t[1].a.engine == KVBLK_ENGINE_BIO &&
	      t[1].a.engines == 1U << KVBLK_ENGINE_BIO,
	      "add B: %d target %u engine %u engines %#x (refused attaches must use no index)",
	      ret, t[1].a.target, t[1].a.engine, t[1].a.engines);
	ret = attach(kfd, t[2].fd, KVBLK_ATTACH_F_ADD_TARGET, sizeof(a), &t[2].a);
	CHECK(!ret && t[2].a.target == 2 && t[2].a.engine == KVBLK_ENGINE_FILE,
	      "add file: %d target %u engine %u", ret, t[2].a.target, t[2].a.engine);
	ret = attach(kfd, t[3].fd, KVBLK_ATTACH_F_ADD_TARGET, sizeof(a), &t[3].a);
	CHECK(!ret && t[3].a.target == 3 && t[3].a.engine == KVBLK_ENGINE_BIO &&
	      t[3].a.engines == 1U << KVBLK_ENGINE_BIO,
	      "add %s: %d target %u engine %u engines %#x", t[3].path, ret,
	      t[3].a.target, t[3].a.engine, t[3].a.engines);
	CHECK(strcmp(t[3].disk, t[2].disk) && strcmp(t[3].disk, t[0].disk) &&
	      strcmp(t[3].disk, t[1].disk),
	      "%s is on a disk of another target (%s)", t[3].path, t[3].disk);
	if (failures)
		goto out;
	for (i = 0; i < NT; i++)
		printf("target %u: %s (%s) engine %u lba %u max_cmd %u buf_align %u capacity %llu\n",
		       i, t[i].path, t[i].disk, t[i].a.engine, t[i].a.lba_size,
		       t[i].a.max_cmd_bytes, t[i].a.buf_align,
		       (unsigned long long)t[i].a.capacity);

	buf = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg.addr = (uintptr_t)buf;
	reg.len = BUF_BYTES;
	CHECK(buf != MAP_FAILED && !ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &reg),
	      "REGISTER: %s", strerror(errno));
	if (failures)
		goto out;

	/*
	 * A target attached after the buffer: A again, the same PCI function,
	 * without a flag: the block layer, PRP for memory without pages.
	 */
	{
		struct kvblk_attach a2;

		ret = attach(kfd, t[0].fd, KVBLK_ATTACH_F_ADD_TARGET, sizeof(a2), &a2);
		CHECK(!ret && a2.target == NT && a2.engine == KVBLK_ENGINE_BIO &&
		      a2.engines == ((1U << KVBLK_ENGINE_BIO) | (1U << KVBLK_ENGINE_PRP)),
		      "add A again: %d target %u engine %u engines %#x", ret,
		      a2.target, a2.engine, a2.engines);
	}

	for (i = 0; i < rounds; i++)
		round_check(kfd, t, reg.buf_id, buf, i);
	printf("%u batches over A (prp), B (bio), a file and %s (bio): %s\n", rounds, t[3].path,
	       failures ? "FAIL" : "ok");

	/* Each descriptor is checked against its own target's live end. */
	memset(buf, CANARY, BUF_BYTES);
	memset(d, 0, sizeof(d));
	d[0].target = 0;
	d[0].length = 65536;
	d[1].target = 1;
	d[1].offset = t[1].a.capacity - 4096;	/* inside A, past B's end */
	d[1].length = 8192;
	d[1].buf_offset = 1 << 20;
	d[0].buf_id = d[1].buf_id = reg.buf_id;
	ret = load(kfd, d, 2, sizeof(d[0]), r, &lm);
	CHECK(ret == -ERANGE && lm.bad_index == 1 && r[1].status == -ERANGE &&
	      r[0].status == -ECANCELED && all_canary(buf, 2 << 20),
	      "past B's end: %d bad_index %d status %d/%d", ret, lm.bad_index,
	      r[0].status, r[1].status);
	d[1].offset = 0;
	d[1].target = NT + 1;	/* no such target (NT is A again) */
	ret = load(kfd, d, 2, sizeof(d[0]), r, &lm);
	CHECK(ret == -EINVAL && lm.bad_index == 1 && r[1].status == -EINVAL &&
	      all_canary(buf, 2 << 20),
	      "unknown target: %d bad_index %d status %d", ret, lm.bad_index,
	      r[1].status);
	d[1].target = 1;
	d[1].reserved = 1;
	ret = load(kfd, d, 2, sizeof(d[0]), r, &lm);
	CHECK(ret == -EINVAL && lm.bad_index == 1, "reserved: %d bad_index %d",
	      ret, lm.bad_index);
	d[1].reserved = 0;

	/* 40-byte descriptors (0.2): no target field, every object target 0. */
	{
		unsigned char old[2][KVBLK_DESC_SIZE_VER0];
		unsigned char *ref;

		d[0].offset = 1 << 20;
		d[1].offset = 8 << 20;
		d[1].length = 4096;
		d[1].target = 1;	/* not copied: 40 bytes only */
		memcpy(old[0], &d[0], sizeof(old[0]));
		memcpy(old[1], &d[1], sizeof(old[1]));
		ret = load(kfd, (struct kvblk_io_desc *)old, 2, KVBLK_DESC_SIZE_VER0, r, &lm);
		CHECK(ret == 2 && lm.engine == KVBLK_ENGINE_PRP && lm.nr_targets == 1,
		      "40-byte descriptors: %d engine %u targets %u", ret, lm.engine,
		      lm.nr_targets);
		ref = direct_read(t[0].dfd, 8 << 20, 4096);
		CHECK(ref && !memcmp(buf + (1 << 20), ref, 4096),
		      "40-byte descriptor 1 did not read target 0");
		free(ref);
	}
	printf("input rules per target: %s\n", failures ? "FAIL" : "ok");
out:
	close(kfd);	/* releases every target */
	for (i = 0; i < NT; i++) {
		close(t[i].fd);
		close(t[i].dfd);
	}
	if (failures) {
		printf("kmod-targets: FAIL (%d checks failed)\n", failures);
		return 1;
	}
	printf("kmod-targets: PASS\n");
	return 0;
}

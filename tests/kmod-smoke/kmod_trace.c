// SPDX-License-Identifier: MIT
/*
 * kmod_trace - batches whose engine, direction and targets are known, for
 * the VM case kmod-trace (tests/vm/cases/kmod-trace.sh), which records
 * kvblk's tracepoints while this runs and checks them against what this
 * prints.
 *
 * One context: target 0 the namespace with KVBLK_ATTACH_F_ENGINE_PRP,
 * target 1 the same namespace without a flag (the block-layer engine), both
 * read-only; target 2 a scratch block device and target 3 a scratch file,
 * both O_RDWR (the only targets stored to). Batches: a load through the bio
 * engine, one through the PRP engine, one through the file engine, one
 * over all four targets, a store over the scratch device and the file, a
 * store over the scratch device alone, and a store that names the PRP
 * target (refused with EOPNOTSUPP before anything is submitted). Every
 * object has its own tag; each object's length makes it at least two
 * commands where its target's command size allows. The call's own report
 * (engine, engines, nr_targets, nr_cmds, nr_ok) is checked here.
 *
 * Prints, for the case script, one line per object and per batch:
 *   expect obj tag=0x.. tgt=N engine=prp|bio|file dir=load|store cmds=N
 *   expect batch tag=0x.. dir=load|store engines=prp|bio|file tgts=N descs=N cmds=N
 *   expect none tag=0x..          (a refused batch's objects: no event)
 * where a batch's tag is its first object's and engines lists the engines
 * in the order prp, bio, file, joined by '|' (as the tracepoint prints
 * them). The values are what was asked for (attach flags, targets named,
 * direction), not what the call reported.
 *
 * usage: kmod_trace NVME_DEV SCRATCH_DEV SCRATCH_FILE
 * Each target needs 16 MiB. SCRATCH_DEV and SCRATCH_FILE are overwritten
 * (bytes [0, 12 MiB) of the device, [4, 8 MiB) of the file); the namespace
 * is only read.
 * Exit: 0 pass, 1 fail, 4 skip (no /dev/kvblk).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "smoke_check.h"

#define NT		4
#define MAX_OBJS	8
#define BUF_BYTES	(32ULL << 20)
#define OBJ_MAX		(4ULL << 20)	/* longest object */
#define TAG_BASE	0x7ace000000000000ULL

static const char *const engine_names[] = {
	[KVBLK_ENGINE_PRP] = "prp",
	[KVBLK_ENGINE_BIO] = "bio",
	[KVBLK_ENGINE_FILE] = "file",
};

struct tgt {
	const char *path;
	int fd;
	uint32_t engine;	/* the engine asked for */
	struct kvblk_attach a;
};

static struct tgt t[NT];
static int kfd;
static uint32_t buf_id;

static const char *engine_name(uint32_t e)
{
	return e < sizeof(engine_names) / sizeof(engine_names[0]) &&
	       engine_names[e] ? engine_names[e] : "?";
}

/* "prp|bio|file" for a mask of 1 << enum kvblk_engine, in that order. */
static void engines_str(uint32_t mask, char *s, size_t len)
{
	static const uint32_t order[] = {
		KVBLK_ENGINE_PRP, KVBLK_ENGINE_BIO, KVBLK_ENGINE_FILE,
	};
	size_t i, n = 0;

	s[0] = 0;
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (mask & (1U << order[i]))
			n += snprintf(s + n, len - n, "%s%s", n ? "|" : "",
				      engine_name(order[i]));
}

static int attach(int fd, uint32_t flags, struct kvblk_attach *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->flags = flags;
	a->bdev_fd = fd;
	return ioctl(kfd, KVBLK_IOC_ATTACH, a) ? -errno : 0;
}

/* Object length on target @i: two commands and a half, at most OBJ_MAX. */
static uint64_t obj_len(unsigned int i)
{
	uint64_t mc = t[i].a.max_cmd_bytes, lba = t[i].a.lba_size;
	uint64_t len = mc * 2 + mc / 2;

	if (len > OBJ_MAX)
		len = OBJ_MAX;
	return len / lba * lba;
}

/*
 * One batch: object k on target tgts[k], each at device offset k * OBJ_MAX
 * (so that no two objects of a store overlap). @want: the call's return
 * (the number of objects, or -errno for a refused batch).
 */
static void batch(unsigned int id, const char *what, bool store,
		  const unsigned int *tgts, unsigned int n, long want)
{
	struct kvblk_io_desc d[MAX_OBJS];
	struct kvblk_desc_result r[MAX_OBJS];
	struct kvblk_load_many lm;
	uint32_t engines = 0, named = 0, tgt_mask = 0;
	uint64_t cmds = 0, bo = 0, obj_cmds[MAX_OBJS];
	bool fits = true;
	char es[32];
	unsigned int k;
	long ret;

	memset(d, 0, sizeof(d));
	for (k = 0; k < n; k++) {
		unsigned int i = tgts[k];

		d[k].target = i;
		d[k].offset = k * OBJ_MAX;
		d[k].length = obj_len(i);
		d[k].buf_id = buf_id;
		d[k].buf_offset = bo;
		d[k].tag = TAG_BASE | ((uint64_t)id << 16) | k;
		bo += (d[k].length + 8191) / 4096 * 4096;
		obj_cmds[k] = (d[k].length + t[i].a.max_cmd_bytes - 1) /
			      t[i].a.max_cmd_bytes;
		cmds += obj_cmds[k];
		engines |= 1U << t[i].engine;
		if (!(tgt_mask & (1U << i)))
			named++;
		tgt_mask |= 1U << i;
		if (d[k].offset + d[k].length > t[i].a.capacity)
			fits = false;
		CHECK(fits, "%s: target %u (%s) too small: %llu bytes", what, i,
		      t[i].path, (unsigned long long)t[i].a.capacity);
	}
	if (!fits)
		return;
	memset(&lm, 0, sizeof(lm));
	lm.size = sizeof(lm);
	lm.flags = store ? KVBLK_LOAD_F_STORE : 0;
	lm.nr_descs = n;
	lm.desc_bytes = sizeof(d[0]);
	lm.descs = (uintptr_t)d;
	lm.results = (uintptr_t)r;
	lm.result_bytes = sizeof(r[0]);
	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm) < 0 ? -errno : (long)lm.nr_ok;
	CHECK(ret == want, "%s: LOAD_MANY %ld, want %ld (bad_index %d)", what,
	      ret, want, lm.bad_index);
	if (want < 0) {
		for (k = 0; k < n; k++)
			printf("expect none tag=0x%" PRIx64 "\n", (uint64_t)d[k].tag);
		return;
	}
	engines_str(engines, es, sizeof(es));
	CHECK(lm.engines == engines && lm.nr_targets == named &&
	      lm.nr_cmds == cmds &&
	      lm.engine == (!(engines & (engines - 1)) ?
			    (uint32_t)__builtin_ctz(engines) : KVBLK_ENGINE_MIXED),
	      "%s: engine %u engines %#x targets %u cmds %llu, want engines %#x (%s) targets %u cmds %llu",
	      what, lm.engine, lm.engines, lm.nr_targets,
	      (unsigned long long)lm.nr_cmds, engines, es, named,
	      (unsigned long long)cmds);
	for (k = 0; k < n; k++) {
		CHECK(r[k].status == 0, "%s: object %u status %d", what, k,
		      r[k].status);
		printf("expect obj tag=0x%" PRIx64 " tgt=%u engine=%s dir=%s cmds=%" PRIu64 "\n",
		       (uint64_t)d[k].tag, tgts[k], engine_name(t[tgts[k]].engine),
		       store ? "store" : "load", obj_cmds[k]);
	}
	printf("expect batch tag=0x%" PRIx64 " dir=%s engines=%s tgts=%u descs=%u cmds=%" PRIu64 "\n",
	       (uint64_t)d[0].tag, store ? "store" : "load", es, named, n, cmds);
	fprintf(stderr, "# %s: %u objects, %" PRIu64 " commands, engines %s\n",
		what, n, cmds, es);
}

int main(int argc, char **argv)
{
	static const unsigned int bio_load[] = { 1, 1 }, prp_load[] = { 0, 0 },
		file_load[] = { 3 }, all_load[] = { 0, 1, 2, 3 },
		mixed_store[] = { 2, 3, 2 }, bio_store[] = { 2, 2 },
		prp_store[] = { 2, 0 };
	struct kvblk_buf_reg reg = { .size = sizeof(reg), .kind = KVBLK_MEM_HOST };
	unsigned char *buf;
	unsigned int i;
	int ret;

	if (argc != 4) {
		fprintf(stderr, "usage: kmod_trace NVME_DEV SCRATCH_DEV SCRATCH_FILE\n");
		return 2;
	}
	kfd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	if (kfd < 0) {
		printf("SKIP: /dev/kvblk: %s\n", strerror(errno));
		return 4;
	}
	t[0].path = t[1].path = argv[1];
	t[2].path = argv[2];
	t[3].path = argv[3];
	t[0].engine = KVBLK_ENGINE_PRP;
	t[1].engine = KVBLK_ENGINE_BIO;
	t[2].engine = KVBLK_ENGINE_BIO;
	t[3].engine = KVBLK_ENGINE_FILE;
	for (i = 0; i < NT; i++) {
		t[i].fd = open(t[i].path, (i < 2 ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (t[i].fd < 0) {
			fprintf(stderr, "FAIL: open %s: %s\n", t[i].path, strerror(errno));
			return 1;
		}
		ret = attach(t[i].fd, (i ? KVBLK_ATTACH_F_ADD_TARGET : 0) |
			     (i == 0 ? KVBLK_ATTACH_F_ENGINE_PRP : 0), &t[i].a);
		CHECK(!ret && t[i].a.target == i && t[i].a.engine == t[i].engine &&
		      t[i].a.max_cmd_bytes && t[i].a.lba_size,
		      "attach %s as target %u: %d, target %u engine %u (want %s)",
		      t[i].path, i, ret, t[i].a.target, t[i].a.engine,
		      engine_name(t[i].engine));
	}
	if (failures)
		goto out;

	buf = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(buf != MAP_FAILED, "mmap: %s", strerror(errno));
	if (failures)
		goto out;
	/* What the stores write: not zeros, so that a store is visible. */
	for (i = 0; i < BUF_BYTES; i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	reg.addr = (uintptr_t)buf;
	reg.len = BUF_BYTES;
	CHECK(!ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &reg), "REGISTER: %s",
	      strerror(errno));
	if (failures)
		goto out;
	buf_id = reg.buf_id;

	batch(1, "bio load", false, bio_load, 2, 2);
	batch(2, "prp load", false, prp_load, 2, 2);
	batch(3, "file load", false, file_load, 1, 1);
	batch(4, "load over every target", false, all_load, 4, 4);
	batch(5, "store over the device and the file", true, mixed_store, 3, 3);
	batch(6, "bio store", true, bio_store, 2, 2);
	/* The PRP engine does not write: refused before submission. */
	batch(7, "store naming the PRP target", true, prp_store, 2, -EOPNOTSUPP);
out:
	close(kfd);
	for (i = 0; i < NT; i++)
		if (t[i].fd >= 0)
			close(t[i].fd);
	if (failures) {
		fprintf(stderr, "kmod-trace: FAIL (%d checks failed)\n", failures);
		return 1;
	}
	return 0;
}

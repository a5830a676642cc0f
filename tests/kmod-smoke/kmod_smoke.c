// SPDX-License-Identifier: MIT
/*
 * kmod_smoke - functional smoke test of kvblk.ko's data path.
 *
 * Attaches a namespace, registers a buffer, issues KVBLK_IOC_LOAD_MANY for
 * objects of many sizes (not multiples of max_cmd_bytes, some at odd dword
 * offsets of the buffer, some needing chained PRP lists when the command
 * size allows) and compares every byte against pread(O_DIRECT) of the same
 * device range. Bytes of the buffer outside the objects must be untouched.
 * It also checks that the namespace's sysfs counters moved by exactly the
 * batch's numbers.
 *
 * usage: kmod_smoke [TARGET]   (default $KVBLK_TEST_DEVICE, else /dev/nvme0n1)
 * TARGET is a block device (any: NVMe, partition, md, dm, loop) or a
 * regular file (the file engine); the engine expected is the one the uapi
 * promises: file for a file, prp with KMOD_SMOKE_ENGINE=prp (attach flag
 * KVBLK_ATTACH_F_ENGINE_PRP: the PRP engine's lists and MDTS splits), bio
 * with KMOD_SMOKE_ENGINE=bio (KVBLK_ATTACH_F_ENGINE_BIO) and without a flag
 * on any block device, an nvme-pci namespace included.
 * KMOD_SMOKE_HOLD=N keeps the context attached N seconds before the loads
 * (to try rmmod while attached).
 * KMOD_SMOKE_ROUNDS=N random batches (default 4) of KMOD_SMOKE_OBJS objects
 * (default 48) of at most KMOD_SMOKE_MAXLEN bytes (default 3 commands) into
 * a buffer of KMOD_SMOKE_BUF_MB MiB (default 64).
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
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <linux/kvblk.h>

#define SMOKE_SEED 0x9e3779b97f4a7c15ULL
#include "smoke_check.h"

#define GUARD 0xa5

/* Device byte offset of an injected media error (VM blkdebug), or none. */
static uint64_t dev_bad = UINT64_MAX;

static long long sysfs_u64(const char *disk, const char *file)
{
	char path[512];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/kvblk/%s/%s", disk, file);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * The whole disk's name (kvblk's sysfs directory) for a disk, a partition
 * (its disk) or a regular file (the disk of its file system).
 */
static const char *whole_disk(const char *dev)
{
	static char name[256];
	char path[PATH_MAX + 32], real[PATH_MAX];
	struct stat st;
	dev_t d;
	char *slash;

	snprintf(name, sizeof(name), "?");
	if (stat(dev, &st))
		return name;
	d = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u", major(d), minor(d));
	if (!realpath(path, real))
		return name;
	snprintf(path, sizeof(path), "%s/partition", real);
	if (!access(path, F_OK)) {
		slash = strrchr(real, '/');
		if (slash)
			*slash = 0;
	}
	slash = strrchr(real, '/');
	snprintf(name, sizeof(name), "%.200s", slash ? slash + 1 : real);
	return name;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 0) : def;
}

/*
 * The engine the uapi promises for this target and these attach flags: the
 * block layer's by default, PRP only when asked for.
 */
static uint32_t expected_engine(const char *dev, bool prp)
{
	struct stat st;

	if (!stat(dev, &st) && S_ISREG(st.st_mode))
		return KVBLK_ENGINE_FILE;
	return prp ? KVBLK_ENGINE_PRP : KVBLK_ENGINE_BIO;
}

static uint32_t want_engine;
static uint32_t buf_align = 4;

/* A buffer misalignment the engine accepts (a multiple of buf_align). */
static uint32_t mis_ok(uint32_t mis)
{
	return mis - mis % buf_align;
}

struct counters {
	long long batches, objects, commands, bytes, inflight;
};

static void read_counters(const char *disk, struct counters *c)
{
	c->batches = sysfs_u64(disk, "stats/batches");
	c->objects = sysfs_u64(disk, "stats/objects");
	c->commands = sysfs_u64(disk, "stats/commands");
	c->bytes = sysfs_u64(disk, "stats/bytes");
	c->inflight = sysfs_u64(disk, "stats/inflight");
}

/* Reads [off, off+len) of the device with O_DIRECT into a fresh buffer. */
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

struct plan {
	struct kvblk_io_desc d[64];
	unsigned int n;
};

/* Objects laid out one after another in the buffer, with guard gaps. */
static int add_obj(struct plan *p, uint64_t dev_off, uint64_t len,
		   uint64_t *buf_cursor, uint32_t misalign, uint32_t buf_id,
		   uint64_t buf_len)
{
	uint64_t bo = (*buf_cursor + 4095) / 4096 * 4096 + mis_ok(misalign);

	if (dev_off <= dev_bad && dev_bad < dev_off + len)
		return 0;	/* keep clear of the injected error */

	if (p->n >= 64 || bo + len + 64 > buf_len)
		return -1;
	p->d[p->n] = (struct kvblk_io_desc){
		.offset = dev_off,
		.length = len,
		.buf_offset = bo,
		.buf_id = buf_id,
		.tag = 0x6b76000000000000ULL | p->n,
	};
	p->n++;
	*buf_cursor = bo + len + 64;	/* at least 64 guard bytes between */
	return 0;
}

static int run_batch(int kfd, int dfd, const char *disk, unsigned char *buf,
		     uint64_t buf_len, const struct plan *p, const char *what)
{
	struct kvblk_desc_result res[64];
	struct kvblk_load_many lm;
	struct counters c0, c1;
	uint64_t bytes = 0;
	unsigned int i;
	long ret;

	memset(buf, GUARD, buf_len);
	memset(res, 0x5a, sizeof(res));
	for (i = 0; i < p->n; i++)
		bytes += p->d[i].length;
	read_counters(disk, &c0);

	memset(&lm, 0, sizeof(lm));
	lm.size = sizeof(lm);
	lm.nr_descs = p->n;
	lm.desc_bytes = sizeof(struct kvblk_io_desc);
	lm.descs = (uintptr_t)p->d;
	lm.results = (uintptr_t)res;
	lm.result_bytes = sizeof(struct kvblk_desc_result);
	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	CHECK(ret == (long)p->n, "%s: LOAD_MANY returned %ld errno %d, want %u",
	      what, ret, ret < 0 ? errno : 0, p->n);
	CHECK(lm.nr_ok == p->n, "%s: nr_ok %u", what, lm.nr_ok);
	CHECK(lm.bad_index == -1, "%s: bad_index %d", what, lm.bad_index);
	CHECK(lm.engine == want_engine, "%s: engine %u, want %u", what, lm.engine,
	      want_engine);

	for (i = 0; i < p->n; i++) {
		const struct kvblk_io_desc *d = &p->d[i];
		unsigned char *want;

		CHECK(res[i].status == 0 && res[i].bytes == d->length &&
		      res[i].reserved == 0,
		      "%s: obj %u status %d bytes %" PRIu64, what, i,
		      res[i].status, (uint64_t)res[i].bytes);
		want = direct_read(dfd, d->offset, d->length);
		CHECK(want, "%s: pread O_DIRECT of obj %u failed", what, i);
		if (!want)
			continue;
		if (memcmp(buf + d->buf_offset, want, d->length)) {
			uint64_t k = 0;

			while (buf[d->buf_offset + k] == want[k])
				k++;
			CHECK(0, "%s: obj %u (dev %" PRIu64 "+%" PRIu64 " -> buf %" PRIu64
			      ") differs at byte %" PRIu64, what, i,
			      (uint64_t)d->offset, (uint64_t)d->length,
			      (uint64_t)d->buf_offset, k);
		}
		free(want);
	}

	/* Everything outside the objects still holds the guard byte. */
	{
		unsigned char *mark = calloc(1, buf_len);
		uint64_t k, bad = 0;

		for (i = 0; i < p->n; i++)
			memset(mark + p->d[i].buf_offset, 1, p->d[i].length);
		for (k = 0; k < buf_len; k++)
			if (!mark[k] && buf[k] != GUARD && !bad++)
				CHECK(0, "%s: guard byte at buffer offset %" PRIu64
				      " overwritten", what, k);
		free(mark);
	}

	read_counters(disk, &c1);
	CHECK(c1.batches - c0.batches == 1, "%s: stats/batches moved by %lld",
	      what, c1.batches - c0.batches);
	CHECK(c1.objects - c0.objects == p->n, "%s: stats/objects moved by %lld",
	      what, c1.objects - c0.objects);
	CHECK(c1.commands - c0.commands == (long long)lm.nr_cmds,
	      "%s: stats/commands moved by %lld, nr_cmds %" PRIu64, what,
	      c1.commands - c0.commands, (uint64_t)lm.nr_cmds);
	CHECK(c1.bytes - c0.bytes == (long long)bytes,
	      "%s: stats/bytes moved by %lld, want %" PRIu64, what,
	      c1.bytes - c0.bytes, bytes);
	CHECK(c1.inflight == 0, "%s: stats/inflight %lld", what, c1.inflight);
	printf("%s: %u objects, %" PRIu64 " bytes, %" PRIu64 " commands, %" PRIu64
	       " us: ok\n", what, p->n, bytes, (uint64_t)lm.nr_cmds,
	       (uint64_t)lm.elapsed_ns / 1000);
	return 0;
}

static void media_error_check(int kfd, int dfd, const char *disk,
			      unsigned char *buf, uint32_t buf_id, uint64_t lba,
			      uint64_t mc, uint64_t bad)
{
	struct kvblk_io_desc d[3] = {
		{ .offset = bad - 2 * lba, .length = 4 * lba, .buf_id = buf_id,
		  .buf_offset = 0, .tag = 1 },
		{ .offset = 0, .length = 8 * lba, .buf_id = buf_id,
		  .buf_offset = 1 << 20, .tag = 2 },
		{ .offset = bad + 64 * lba, .length = 2 * mc + lba,
		  .buf_id = buf_id, .buf_offset = (2 << 20) + mis_ok(4), .tag = 3 },
	};
	struct kvblk_desc_result r[3];
	struct kvblk_load_many lm = {
		.size = sizeof(lm), .nr_descs = 3,
		.desc_bytes = sizeof(d[0]), .descs = (uintptr_t)d,
		.result_bytes = sizeof(r[0]), .results = (uintptr_t)r,
	};
	long m0 = sysfs_u64(disk, "stats/errors_media");
	long f0 = sysfs_u64(disk, "stats/objects_failed");
	long ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	unsigned int i;

	CHECK(ret == 2 && lm.nr_ok == 2, "media error: ret %ld nr_ok %u", ret,
	      lm.nr_ok);
	CHECK(r[0].status == -EIO && r[0].bytes == 0,
	      "media error: object 0 status %d bytes %" PRIu64, r[0].status,
	      (uint64_t)r[0].bytes);
	for (i = 1; i < 3; i++) {
		unsigned char *want = direct_read(dfd, d[i].offset, d[i].length);

		CHECK(r[i].status == 0 && r[i].bytes == d[i].length,
		      "media error: object %u status %d", i, r[i].status);
		CHECK(want && !memcmp(buf + d[i].buf_offset, want, d[i].length),
		      "media error: object %u data differs", i);
		free(want);
	}
	CHECK(sysfs_u64(disk, "stats/errors_media") - m0 == 1,
	      "media error: stats/errors_media moved by %lld",
	      sysfs_u64(disk, "stats/errors_media") - m0);
	CHECK(sysfs_u64(disk, "stats/objects_failed") - f0 == 1,
	      "media error: stats/objects_failed moved by %lld",
	      sysfs_u64(disk, "stats/objects_failed") - f0);
	printf("media error at byte %" PRIu64 ": object 0 status %d, objects 1-2 ok\n",
	       bad, r[0].status);
}

int main(int argc, char **argv)
{
	const char *dev = argc > 1 ? argv[1] : getenv("KVBLK_TEST_DEVICE");
	struct kvblk_attach at;
	struct kvblk_buf_reg reg;
	struct kvblk_buf_unreg ur;
	const char *disk;
	uint64_t feat = 0, buf_len, cur, lba, mc, cap, bad_off = UINT64_MAX;
	unsigned char *buf;
	struct plan p;
	int kfd, dfd, bfd;
	unsigned int i, round, nrounds, nobjs;
	uint64_t maxlen;

	if (!dev)
		dev = "/dev/nvme0n1";
	if (getenv("KVBLK_VM_BAD_BYTE_OFFSET"))
		bad_off = strtoull(getenv("KVBLK_VM_BAD_BYTE_OFFSET"), NULL, 0);
	disk = whole_disk(dev);

	kfd = open("/dev/kvblk", O_RDWR);
	if (kfd < 0) {
		printf("SKIP: /dev/kvblk: %s\n", strerror(errno));
		return 4;
	}
	CHECK(ioctl(kfd, KVBLK_IOC_GET_FEATURES, &feat) == 0, "GET_FEATURES");
	CHECK(feat & KVBLK_FEAT_PRP_ENGINE, "no PRP engine: 0x%" PRIx64, feat);
	CHECK(feat & KVBLK_FEAT_MEM_HOST, "no host memory: 0x%" PRIx64, feat);

	bfd = open(dev, O_RDONLY);
	dfd = open(dev, O_RDONLY | O_DIRECT);
	if (bfd < 0 || dfd < 0) {
		fprintf(stderr, "FAIL: open %s: %s\n", dev, strerror(errno));
		return 1;
	}
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.bdev_fd = bfd;
	{
		const char *e = getenv("KMOD_SMOKE_ENGINE");
		bool bio = e && !strcmp(e, "bio"), prp = e && !strcmp(e, "prp");

		if (bio)
			at.flags = KVBLK_ATTACH_F_ENGINE_BIO;
		if (prp)
			at.flags = KVBLK_ATTACH_F_ENGINE_PRP;
		want_engine = expected_engine(dev, prp);
	}
	if (ioctl(kfd, KVBLK_IOC_ATTACH, &at)) {
		fprintf(stderr, "FAIL: ATTACH %s: %s\n", dev, strerror(errno));
		return 1;
	}
	if (getenv("KMOD_SMOKE_HOLD")) {	/* keep the context attached a while */
		printf("attached; holding for %s s\n", getenv("KMOD_SMOKE_HOLD"));
		fflush(stdout);
		sleep(atoi(getenv("KMOD_SMOKE_HOLD")));
	}
	/* One attach per context; an fd without read access is refused. */
	{
		struct kvblk_attach a2 = { .size = sizeof(a2), .bdev_fd = bfd };
		int k2 = open("/dev/kvblk", O_RDWR);
		int wfd = open(dev, O_WRONLY);
		int pfd = open(dev, O_PATH);

		CHECK(ioctl(kfd, KVBLK_IOC_ATTACH, &a2) == -1 && errno == EBUSY,
		      "second ATTACH: errno %d, want EBUSY", errno);
		a2.bdev_fd = wfd;
		CHECK(wfd >= 0 && ioctl(k2, KVBLK_IOC_ATTACH, &a2) == -1 &&
		      errno == EACCES, "ATTACH of an O_WRONLY fd: errno %d, want EACCES",
		      errno);
		a2.bdev_fd = pfd;
		CHECK(pfd >= 0 && ioctl(k2, KVBLK_IOC_ATTACH, &a2) == -1 &&
		      errno == EACCES, "ATTACH of an O_PATH fd: errno %d, want EACCES",
		      errno);
		close(wfd);
		close(pfd);
		close(k2);
	}
	lba = at.lba_size;
	mc = at.max_cmd_bytes;
	cap = at.capacity;
	printf("attach %s: nsid %u lba %" PRIu64 " max_cmd_bytes %" PRIu64
	       " capacity %" PRIu64 " start_lba %" PRIu64 " hw_queues %u engine %u engines %#x\n",
	       dev, at.nsid, lba, mc, cap, (uint64_t)at.start_lba, at.nr_hw_queues,
	       at.engine, at.engines);
	CHECK(at.engine == want_engine, "engine %u, want %u", at.engine, want_engine);
	CHECK(at.engines & (1U << want_engine), "engines %#x without engine %u",
	      at.engines, want_engine);
	CHECK(mc >= lba && mc % lba == 0, "max_cmd_bytes %" PRIu64, mc);
	CHECK(at.buf_align >= 4 && !(at.buf_align & (at.buf_align - 1)),
	      "buf_align %u", at.buf_align);
	if (at.buf_align >= 4)
		buf_align = at.buf_align;
	if (at.engines & (1U << KVBLK_ENGINE_PRP)) {
		char path[512];
		FILE *f;
		unsigned int nsid = 0;

		snprintf(path, sizeof(path), "/sys/block/%s/nsid", disk);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%u", &nsid) == 1)
				CHECK(nsid == at.nsid, "nsid %u, sysfs says %u",
				      at.nsid, nsid);
			fclose(f);
		}
	}

	if (bad_off != UINT64_MAX && bad_off >= at.start_lba * lba &&
	    bad_off - at.start_lba * lba < cap)
		dev_bad = bad_off - at.start_lba * lba;

	buf_len = env_u64("KMOD_SMOKE_BUF_MB", 64) << 20;
	buf = mmap(NULL, buf_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		fprintf(stderr, "FAIL: mmap: %s\n", strerror(errno));
		return 1;
	}
	memset(buf, GUARD, buf_len);
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.kind = KVBLK_MEM_HOST;
	reg.addr = (uintptr_t)buf;
	reg.len = buf_len;
	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &reg)) {
		fprintf(stderr, "FAIL: REGISTER_BUFFER: %s\n", strerror(errno));
		return 1;
	}
	printf("registered %" PRIu64 " MiB as buffer %u\n", buf_len >> 20,
	       reg.buf_id);

	/* Round 0: fixed shapes around max_cmd_bytes and page boundaries. */
	memset(&p, 0, sizeof(p));
	cur = 0;
	{
		uint64_t shapes[][2] = {	/* length, buffer misalignment */
			{ lba, 0 },
			{ lba, 4 },
			{ 3 * lba, 0 },
			{ 4096 + lba, 4092 },
			{ mc, 0 },
			{ mc, 12 },
			{ mc - lba, 2044 },
			{ mc + lba, 0 },
			{ 2 * mc + 3 * lba, 1028 },
			{ 3 * mc - lba, 4 },
			{ 5 * mc + lba, 3000 },
			{ 1ULL << 21, 16 },	/* 2 MiB: > 512 PRPs if one command */
			{ (1ULL << 21) + 3 * lba, 4088 },
		};
		uint64_t dev_off = 0;

		for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
			uint64_t len = (shapes[i][0] + lba - 1) / lba * lba;

			if (dev_off + len > cap)
				dev_off = 0;
			if (add_obj(&p, dev_off, len, &cur, shapes[i][1],
				    reg.buf_id, buf_len))
				break;
			dev_off += len + 7 * lba;
		}
		/* One object at the very end of the device. */
		add_obj(&p, cap - 8 * lba, 8 * lba, &cur, 512, reg.buf_id, buf_len);
	}
	run_batch(kfd, dfd, disk, buf, buf_len, &p, "shapes");

	/* Rounds 1..: random objects at random places. */
	nrounds = env_u64("KMOD_SMOKE_ROUNDS", 4);
	nobjs = env_u64("KMOD_SMOKE_OBJS", 48);
	maxlen = env_u64("KMOD_SMOKE_MAXLEN", 3 * mc + 2 * lba);
	if (maxlen > cap)
		maxlen = cap;
	for (round = 1; round <= nrounds; round++) {
		char what[32];

		memset(&p, 0, sizeof(p));
		cur = 0;
		for (i = 0; i < nobjs && i < 64; i++) {
			uint64_t nlb = 1 + rnd() % (maxlen / lba);
			uint64_t len = nlb * lba;
			uint64_t dev_off = (rnd() % ((cap - len) / lba + 1)) * lba;
			uint32_t mis = (rnd() % 1024) * 4;

			if (add_obj(&p, dev_off, len, &cur, mis, reg.buf_id,
				    buf_len))
				break;
		}
		snprintf(what, sizeof(what), "random-%u", round);
		run_batch(kfd, dfd, disk, buf, buf_len, &p, what);
		if (failures)
			break;
	}

	/*
	 * With a read error injected below the controller (the VM's blkdebug
	 * variant exports its byte offset), exactly the object covering it
	 * fails, with -EIO, and is counted as a media error; the others land.
	 */
	if (dev_bad != UINT64_MAX && dev_bad >= 2 * lba &&
	    dev_bad + 64 * lba + 2 * mc + lba <= cap)
		media_error_check(kfd, dfd, disk, buf, reg.buf_id, lba, mc, dev_bad);

	/* A descriptor reaching past the end fails the call with -ERANGE. */
	{
		struct kvblk_io_desc d[2] = {
			{ .offset = 0, .length = lba, .buf_id = reg.buf_id },
			{ .offset = cap - cap % lba - lba, .length = 2 * lba,
			  .buf_id = reg.buf_id, .buf_offset = 8192 },
		};
		struct kvblk_desc_result r[2];
		struct kvblk_load_many lm = {
			.size = sizeof(lm), .nr_descs = 2,
			.desc_bytes = sizeof(d[0]), .descs = (uintptr_t)d,
			.result_bytes = sizeof(r[0]), .results = (uintptr_t)r,
		};
		long ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);

		CHECK(ret == -1 && errno == ERANGE && lm.bad_index == 1 &&
		      r[1].status == -ERANGE && r[0].status == -ECANCELED,
		      "past-the-end: ret %ld errno %d bad_index %d status %d/%d",
		      ret, errno, lm.bad_index, r[0].status, r[1].status);
		printf("past-the-end descriptor: ERANGE, bad_index 1: %s\n",
		       lm.bad_index == 1 ? "ok" : "FAIL");
	}

	memset(&ur, 0, sizeof(ur));
	ur.size = sizeof(ur);
	ur.buf_id = reg.buf_id;
	CHECK(ioctl(kfd, KVBLK_IOC_UNREGISTER_BUFFER, &ur) == 0,
	      "UNREGISTER_BUFFER: %s", strerror(errno));
	close(kfd);
	close(bfd);
	close(dfd);
	munmap(buf, buf_len);

	if (failures) {
		printf("kmod-smoke: FAIL (%d checks failed)\n", failures);
		return 1;
	}
	printf("kmod-smoke: PASS\n");
	return 0;
}

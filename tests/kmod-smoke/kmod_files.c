// SPDX-License-Identifier: MIT
/*
 * kmod_files - kvblk.ko's file engine on regular files of a file system
 * (ext4, xfs): direct-I/O kiocbs through the file's own ->read_iter.
 *
 * In DIR it writes NFILES chunk files (16 KiB .. 1 MiB, a multiple of
 * 4 KiB; every fifth with a hole in the middle; half of them fsync'ed, the
 * rest left dirty in the page cache), each word a function of (file, offset).
 * Each file is attached to a context of its own (one target per context)
 * and loaded in one batch of 1-4 objects into its own part of one mapping,
 * with canary bytes around every object. Every object must equal the
 * expected bytes (zeros in the hole) and pread(O_DIRECT) of the file.
 * Then every file is attached to ONE context (KVBLK_ATTACH_F_ADD_TARGET,
 * target i = file i, its fd closed after attach) and all of them are
 * loaded whole in ONE batch, one object per file, canary pages between,
 * each compared with the bytes written and pread(O_DIRECT); a descriptor
 * naming a target the context lacks is refused (-EINVAL, bad_index).
 * Then:
 *   - a buffered write without fsync, then a load: the written bytes;
 *   - the size is read per batch: an append is loadable by the next batch,
 *     a range past the (new) end after a truncate is refused (-ERANGE);
 *   - a file truncated while a batch reads it (another thread truncates it
 *     to 0 and writes another file, which may take its freed blocks): each
 *     object is exact (the bytes before the truncate) or failed with
 *     -ENODATA or -EIO and 0 bytes reported, never other bytes; canaries
 *     intact (truncate_during_batch());
 *   - offsets not a multiple of the logical block size: -EINVAL;
 *   - rights follow the fd: O_WRONLY and O_PATH -EACCES, a directory
 *     -EISDIR, a pipe -ENOTBLK; KVBLK_ATTACH_F_ENGINE_PRP -EOPNOTSUPP.
 *
 * usage: kmod_files DIR [NFILES]   (default 200; above 200 the files are
 *        16 KiB .. 128 KiB, so that 1,000 fit the scratch namespace)
 * Exit: 0 pass, 1 fail, 4 skip (no /dev/kvblk).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/kvblk.h>

#define SMOKE_SEED 0x243f6a8885a308d3ULL
#include "smoke_check.h"

#define CANARY 0xc3
#define MAX_OBJS 4

/* The word at byte offset @off (a multiple of 8) of file @i, generation @gen. */
static uint64_t word(unsigned int i, unsigned int gen, uint64_t off)
{
	return off ^ ((uint64_t)i << 40) ^ ((uint64_t)gen << 56) ^ 0x6b76626c6b000000ULL;
}

static void fill(unsigned char *p, unsigned int i, unsigned int gen,
		 uint64_t off, uint64_t len)
{
	uint64_t k;

	for (k = 0; k < len; k += 8) {
		uint64_t w = word(i, gen, off + k);

		memcpy(p + k, &w, 8);
	}
}

struct chunk {
	char path[512];
	uint64_t size;
	uint64_t hole_off, hole_len;	/* reads as zeros */
	unsigned int gen;		/* generation of the bytes outside the hole */
};

static int write_all(int fd, const void *p, uint64_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n <= 0)
			return -1;
		p = (const char *)p + n;
		len -= n;
		off += n;
	}
	return 0;
}

static unsigned int size_units = 64;	/* chunk sizes: 1..size_units x 16 KiB */

static int make_chunk(const char *dir, unsigned int i, struct chunk *c)
{
	unsigned char *p;
	int fd, ret = 0;

	snprintf(c->path, sizeof(c->path), "%s/chunk-%04u", dir, i);
	c->size = (1 + rnd() % size_units) * 16384;
	c->gen = 0;
	c->hole_off = c->hole_len = 0;
	if (i % 5 == 4 && c->size >= 3 * 16384) {
		c->hole_off = c->size / 3 / 4096 * 4096;
		c->hole_len = c->size / 3 / 4096 * 4096;
	}
	p = malloc(c->size);
	fd = open(c->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (!p || fd < 0) {
		free(p);
		return -1;
	}
	fill(p, i, 0, 0, c->size);
	if (c->hole_len) {
		if (ftruncate(fd, c->size) ||
		    write_all(fd, p, c->hole_off, 0) ||
		    write_all(fd, p + c->hole_off + c->hole_len,
			      c->size - c->hole_off - c->hole_len,
			      c->hole_off + c->hole_len))
			ret = -1;
	} else if (write_all(fd, p, c->size, 0)) {
		ret = -1;
	}
	if (!ret && i % 2)
		ret = fsync(fd);
	close(fd);
	free(p);
	return ret;
}

/* Expected bytes of [off, off + len) of chunk @i. */
static void expect(const struct chunk *c, unsigned int i, uint64_t off,
		   uint64_t len, unsigned char *out)
{
	fill(out, i, c->gen, off, len);
	if (c->hole_len) {
		uint64_t a = off > c->hole_off ? off : c->hole_off;
		uint64_t e = off + len < c->hole_off + c->hole_len ?
			     off + len : c->hole_off + c->hole_len;

		if (a < e)
			memset(out + (a - off), 0, e - a);
	}
}

struct ctx {
	int kfd, ffd;
	uint32_t buf_id, lba;
	unsigned char *buf;
	uint64_t buf_len;
};

static int ctx_open(struct ctx *x, const char *path, unsigned char *buf,
		    uint64_t buf_len)
{
	struct kvblk_attach a = { .size = sizeof(a) };
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST };

	x->kfd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	x->ffd = open(path, O_RDONLY | O_CLOEXEC);
	if (x->kfd < 0 || x->ffd < 0)
		return -1;
	a.bdev_fd = x->ffd;
	if (ioctl(x->kfd, KVBLK_IOC_ATTACH, &a)) {
		fprintf(stderr, "FAIL: ATTACH %s: %s\n", path, strerror(errno));
		return -1;
	}
	CHECK(a.engine == KVBLK_ENGINE_FILE, "%s: engine %u", path, a.engine);
	CHECK(a.nsid == 0 && a.start_lba == 0, "%s: nsid %u start_lba %llu", path,
	      a.nsid, (unsigned long long)a.start_lba);
	CHECK(a.buf_align >= a.lba_size, "%s: buf_align %u lba %u", path,
	      a.buf_align, a.lba_size);
	x->lba = a.lba_size;
	r.addr = (uintptr_t)buf;
	r.len = buf_len;
	if (ioctl(x->kfd, KVBLK_IOC_REGISTER_BUFFER, &r)) {
		fprintf(stderr, "FAIL: REGISTER %s: %s\n", path, strerror(errno));
		return -1;
	}
	x->buf_id = r.buf_id;
	x->buf = buf;
	x->buf_len = buf_len;
	return 0;
}

static void ctx_close(struct ctx *x)
{
	close(x->kfd);
	close(x->ffd);
}

static long load(struct ctx *x, struct kvblk_io_desc *d, unsigned int n,
		 struct kvblk_desc_result *r, struct kvblk_load_many *lm)
{
	unsigned int k;

	for (k = 0; k < n; k++)
		d[k].buf_id = x->buf_id;
	memset(lm, 0, sizeof(*lm));
	lm->size = sizeof(*lm);
	lm->nr_descs = n;
	lm->desc_bytes = sizeof(*d);
	lm->descs = (uintptr_t)d;
	lm->results = (uintptr_t)r;
	lm->result_bytes = sizeof(*r);
	return ioctl(x->kfd, KVBLK_IOC_LOAD_MANY, lm);
}

/* pread(O_DIRECT) of [off, off + len) into an aligned buffer. */
static unsigned char *direct_read(const char *path, uint64_t off, uint64_t len)
{
	unsigned char *p;
	uint64_t done = 0;
	int fd = open(path, O_RDONLY | O_DIRECT);

	if (fd < 0 || posix_memalign((void **)&p, 4096, len)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while (done < len) {
		ssize_t n = pread(fd, p + done, len - done, off + done);

		if (n <= 0) {
			free(p);
			close(fd);
			return NULL;
		}
		done += n;
	}
	close(fd);
	return p;
}

/*
 * Load [0, size) of chunk @i in 1..MAX_OBJS objects into @x's buffer at
 * page-aligned places with canary gaps; check every byte.
 */
static void load_check(struct ctx *x, const struct chunk *c, unsigned int i,
		       uint64_t from, uint64_t to, const char *what)
{
	struct kvblk_io_desc d[MAX_OBJS];
	struct kvblk_desc_result r[MAX_OBJS];
	struct kvblk_load_many lm;
	unsigned int n = 1 + rnd() % MAX_OBJS, k;
	uint64_t off = from, bo = 0, used = 0;
	unsigned char *want;
	long ret;

	memset(x->buf, CANARY, x->buf_len);
	memset(d, 0, sizeof(d));
	for (k = 0; k < n && off < to; k++) {
		uint64_t len = (to - off) / x->lba;

		len = (k == n - 1 ? len : 1 + rnd() % len) * x->lba;
		d[k].offset = off;
		d[k].length = len;
		d[k].buf_offset = bo;
		d[k].tag = ((uint64_t)i << 8) | k;
		off += len;
		bo += (len + 4095) / 4096 * 4096 + 4096;	/* a canary page */
	}
	n = k;
	ret = load(x, d, n, r, &lm);
	CHECK(ret == (long)n && lm.nr_ok == n && lm.engine == KVBLK_ENGINE_FILE,
	      "%s %s: LOAD_MANY %ld (errno %d) nr_ok %u engine %u", what, c->path,
	      ret, ret < 0 ? errno : 0, lm.nr_ok, lm.engine);
	for (k = 0; k < n; k++) {
		unsigned char *dio;

		CHECK(r[k].status == 0 && r[k].bytes == d[k].length,
		      "%s %s: obj %u status %d bytes %llu", what, c->path, k,
		      r[k].status, (unsigned long long)r[k].bytes);
		want = malloc(d[k].length);
		expect(c, i, d[k].offset, d[k].length, want);
		CHECK(!memcmp(x->buf + d[k].buf_offset, want, d[k].length),
		      "%s %s: obj %u (file %llu+%llu) differs from the bytes written",
		      what, c->path, k, (unsigned long long)d[k].offset,
		      (unsigned long long)d[k].length);
		dio = direct_read(c->path, d[k].offset, d[k].length);
		CHECK(dio && !memcmp(dio, want, d[k].length),
		      "%s %s: pread(O_DIRECT) of obj %u differs", what, c->path, k);
		free(dio);
		free(want);
		used = d[k].buf_offset + d[k].length;
	}
	/* Canaries: everything outside the objects is untouched. */
	for (k = 0; k <= n; k++) {
		uint64_t a = k ? d[k - 1].buf_offset + d[k - 1].length : 0;
		uint64_t e = k < n ? d[k].buf_offset : used + 8192;
		uint64_t j;

		if (e > x->buf_len)
			e = x->buf_len;
		for (j = a; j < e; j++)
			if (x->buf[j] != CANARY) {
				CHECK(0, "%s %s: canary at buffer offset %llu overwritten",
				      what, c->path, (unsigned long long)j);
				break;
			}
	}
}

/* ---- a file truncated while a batch reads it ---------------------------- */

#define TRUNC_FILE	9999u		/* chunk number of its words */
#define TRUNC_BYTES	(8u << 20)
#define TRUNC_OBJ	(128u << 10)
#define TRUNC_OBJS	(TRUNC_BYTES / TRUNC_OBJ)
#define TRUNC_ROUNDS	8

struct truncator {
	const char *path, *other;
	unsigned int delay_us;
	const unsigned char *foreign;
	int ret;
};

/* After @delay_us: truncate the file to 0, then write another one of the same size. */
static void *truncator_run(void *arg)
{
	struct truncator *t = arg;
	int fd = open(t->path, O_WRONLY), ofd;

	usleep(t->delay_us);
	t->ret = fd < 0 || ftruncate(fd, 0);
	ofd = open(t->other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	t->ret |= ofd < 0 || write_all(ofd, t->foreign, TRUNC_BYTES, 0) || fsync(ofd);
	if (fd >= 0)
		close(fd);
	if (ofd >= 0)
		close(ofd);
	return NULL;
}

static void truncate_during_batch(const char *dir)
{
	static const unsigned int delays_us[TRUNC_ROUNDS] = {
		0, 500, 2000, 5000, 10000, 20000, 50000, 100000 };
	unsigned char *want = malloc(TRUNC_BYTES), *foreign = malloc(TRUNC_BYTES);
	uint64_t buf_len = (uint64_t)TRUNC_OBJS * (TRUNC_OBJ + 4096) + 4096;
	struct kvblk_io_desc d[TRUNC_OBJS];
	struct kvblk_desc_result r[TRUNC_OBJS];
	unsigned int round, k, exact = 0, failed = 0;
	char path[512], other[512];
	unsigned int old_inflight = 256;
	struct kvblk_load_many lm;
	unsigned char *buf;
	FILE *inflight;
	struct ctx x;
	long ret;
	int fd;

	snprintf(path, sizeof(path), "%s/truncated", dir);
	snprintf(other, sizeof(other), "%s/foreign", dir);
	buf = mmap(NULL, buf_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!want || !foreign || buf == MAP_FAILED) {
		CHECK(0, "truncate during a batch: out of memory");
		return;
	}
	fill(want, TRUNC_FILE, 0, 0, TRUNC_BYTES);
	fill(foreign, TRUNC_FILE + 1, 3, 0, TRUNC_BYTES);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && !write_all(fd, want, TRUNC_BYTES, 0) && !fsync(fd),
	      "write %s", path);
	if (fd >= 0)
		close(fd);
	/*
	 * Two commands in flight (the default for the namespace object this
	 * attach creates, the disk's only context): the batch submits its
	 * commands one after another while the truncate comes, so that some
	 * are issued after it.
	 */
	inflight = fopen("/sys/module/kvblk/parameters/max_inflight", "r+");
	if (!inflight || fscanf(inflight, "%u", &old_inflight) != 1 ||
	    fseek(inflight, 0, SEEK_SET) || fprintf(inflight, "2\n") < 0 ||
	    fflush(inflight))
		CHECK(0, "setting kvblk's max_inflight parameter to 2");
	ret = ctx_open(&x, path, buf, buf_len);
	if (inflight) {
		rewind(inflight);
		fprintf(inflight, "%u\n", old_inflight);
		fclose(inflight);
	}
	if (ret) {
		failures++;
		return;
	}
	for (round = 0; round < TRUNC_ROUNDS && !failures; round++) {
		struct truncator t = { path, other, delays_us[round], foreign, 0 };
		unsigned int ok = 0, bad = 0;
		pthread_t th;

		/* The file back at full size, on disk (the freed blocks reused). */
		fd = open(path, O_WRONLY);
		CHECK(fd >= 0 && !write_all(fd, want, TRUNC_BYTES, 0) && !fsync(fd),
		      "rewrite %s", path);
		if (fd >= 0)
			close(fd);
		unlink(other);
		memset(buf, CANARY, buf_len);
		memset(d, 0, sizeof(d));
		for (k = 0; k < TRUNC_OBJS; k++) {
			/* Back to front: the truncate meets objects still to come. */
			d[k].offset = (uint64_t)(TRUNC_OBJS - 1 - k) * TRUNC_OBJ;
			d[k].length = TRUNC_OBJ;
			d[k].buf_offset = 4096 + (uint64_t)k * (TRUNC_OBJ + 4096);
			d[k].tag = k;
		}
		if (pthread_create(&th, NULL, truncator_run, &t)) {
			CHECK(0, "pthread_create");
			break;
		}
		ret = load(&x, d, TRUNC_OBJS, r, &lm);
		pthread_join(th, NULL);
		CHECK(!t.ret, "round %u: truncating and writing %s failed", round, other);
		/* The truncate may come first: the whole batch is then past the end. */
		if (ret < 0) {
			CHECK(errno == ERANGE, "round %u: LOAD_MANY errno %d", round, errno);
			for (k = 0; k < buf_len; k++)
				if (buf[k] != CANARY) {
					CHECK(0, "round %u: call failed but buffer byte %u written",
					      round, k);
					break;
				}
			printf("truncate round %u (%u us): the truncate came first (ERANGE)\n",
			       round, t.delay_us);
			continue;
		}
		for (k = 0; k < TRUNC_OBJS; k++) {
			const unsigned char *got = buf + d[k].buf_offset;

			if (r[k].status == 0) {
				CHECK(r[k].bytes == TRUNC_OBJ && !memcmp(got, want + d[k].offset, TRUNC_OBJ),
				      "round %u obj %u (file %llu): status 0 but not the file's bytes%s",
				      round, k, (unsigned long long)d[k].offset,
				      !memcmp(got, foreign + d[k].offset, TRUNC_OBJ) ?
				      " (another file's)" : "");
				ok++;
			} else {
				CHECK((r[k].status == -ENODATA || r[k].status == -EIO) &&
				      r[k].bytes == 0,
				      "round %u obj %u: status %d bytes %llu", round, k,
				      r[k].status, (unsigned long long)r[k].bytes);
				bad++;
			}
			CHECK(got[-1] == CANARY && got[TRUNC_OBJ] == CANARY,
			      "round %u obj %u: canary overwritten", round, k);
		}
		for (k = 0; k < 4096; k++)
			CHECK(buf[k] == CANARY, "round %u: canary before the first object", round);
		printf("truncate round %u (%u us): %u objects exact, %u failed\n",
		       round, t.delay_us, ok, bad);
		exact += ok;
		failed += bad;
	}
	printf("file truncated during batches: %u objects exact, %u failed (ENODATA/EIO): %s\n",
	       exact, failed, failures ? "FAIL" : "ok");
	ctx_close(&x);
	munmap(buf, buf_len);
	unlink(path);
	unlink(other);
	free(want);
	free(foreign);
}

/*
 * Every file a target of one context, all loaded whole in one batch: one
 * LOAD_MANY, nfiles targets, each object byte-exact, canaries intact.
 */
static void one_context_all_files(struct chunk *c, unsigned int nfiles)
{
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST };
	struct kvblk_io_desc *d = calloc(nfiles, sizeof(*d));
	struct kvblk_desc_result *res = calloc(nfiles, sizeof(*res));
	struct kvblk_load_many lm = { .size = sizeof(lm) };
	int kfd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	uint64_t len = 0, bo = 0, j;
	unsigned char *buf;
	unsigned int i;
	long ret;

	for (i = 0; i < nfiles; i++)
		len += (c[i].size + 4095) / 4096 * 4096 + 4096;
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!d || !res || kfd < 0 || buf == MAP_FAILED) {
		CHECK(0, "one context: setup: %s", strerror(errno));
		return;
	}
	memset(buf, CANARY, len);
	for (i = 0; i < nfiles; i++) {
		struct kvblk_attach a = { .size = sizeof(a),
					  .flags = KVBLK_ATTACH_F_ADD_TARGET };
		int fd = open(c[i].path, O_RDONLY | O_CLOEXEC);

		a.bdev_fd = fd;
		ret = ioctl(kfd, KVBLK_IOC_ATTACH, &a);
		/* The context holds the file: the fd is not needed any more. */
		close(fd);
		if (ret || a.target != i || a.engine != KVBLK_ENGINE_FILE) {
			CHECK(0, "one context: attach %s: ret %ld errno %d target %u engine %u",
			      c[i].path, ret, ret ? errno : 0, a.target, a.engine);
			goto out;
		}
		d[i].target = i;
		d[i].offset = 0;
		d[i].length = c[i].size;
		d[i].buf_offset = bo;
		d[i].tag = i;
		bo += (c[i].size + 4095) / 4096 * 4096 + 4096;
	}
	r.addr = (uintptr_t)buf;
	r.len = len;
	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &r)) {
		CHECK(0, "one context: REGISTER: %s", strerror(errno));
		goto out;
	}
	for (i = 0; i < nfiles; i++)
		d[i].buf_id = r.buf_id;
	lm.nr_descs = nfiles;
	lm.desc_bytes = sizeof(*d);
	lm.descs = (uintptr_t)d;
	lm.results = (uintptr_t)res;
	lm.result_bytes = sizeof(*res);

	/* A target the context lacks: the whole call refused, nothing read. */
	d[nfiles / 2].target = nfiles;
	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	CHECK(ret == -1 && errno == EINVAL && lm.bad_index == (int)(nfiles / 2) &&
	      res[nfiles / 2].status == -EINVAL && res[0].status == -ECANCELED,
	      "one context: unknown target: ret %ld errno %d bad_index %d status %d",
	      ret, errno, lm.bad_index, res[nfiles / 2].status);
	for (j = 0; j < len; j++)
		if (buf[j] != CANARY) {
			CHECK(0, "one context: a refused batch wrote at %llu",
			      (unsigned long long)j);
			break;
		}
	d[nfiles / 2].target = nfiles / 2;

	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	CHECK(ret == (long)nfiles && lm.nr_ok == nfiles &&
	      lm.engine == KVBLK_ENGINE_FILE &&
	      lm.engines == 1U << KVBLK_ENGINE_FILE && lm.nr_targets == nfiles,
	      "one context: LOAD_MANY %ld (errno %d) nr_ok %u engine %u engines %#x targets %u",
	      ret, ret < 0 ? errno : 0, lm.nr_ok, lm.engine, lm.engines,
	      lm.nr_targets);
	for (i = 0; i < nfiles && failures < 20; i++) {
		unsigned char *want = malloc(c[i].size);
		unsigned char *dio = direct_read(c[i].path, 0, c[i].size);
		uint64_t end = d[i].buf_offset + c[i].size;
		uint64_t next = i + 1 < nfiles ? d[i + 1].buf_offset : len;

		CHECK(res[i].status == 0 && res[i].bytes == c[i].size,
		      "one context: %s status %d bytes %llu", c[i].path,
		      res[i].status, (unsigned long long)res[i].bytes);
		expect(&c[i], i, 0, c[i].size, want);
		CHECK(!memcmp(buf + d[i].buf_offset, want, c[i].size),
		      "one context: %s differs from the bytes written", c[i].path);
		CHECK(dio && !memcmp(dio, want, c[i].size),
		      "one context: pread(O_DIRECT) of %s differs", c[i].path);
		for (j = end; j < next; j++)
			if (buf[j] != CANARY) {
				CHECK(0, "one context: canary after %s overwritten at %llu",
				      c[i].path, (unsigned long long)j);
				break;
			}
		free(want);
		free(dio);
	}
out:
	close(kfd);	/* releases every target */
	munmap(buf, len);
	free(d);
	free(res);
}

static void expect_attach_errno(const char *what, int fd, uint32_t flags, int err)
{
	struct kvblk_attach a = { .size = sizeof(a), .bdev_fd = fd, .flags = flags };
	int k = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	int ret = ioctl(k, KVBLK_IOC_ATTACH, &a);

	CHECK(ret == -1 && errno == err, "attach %s: ret %d errno %d, want %d",
	      what, ret, ret ? errno : 0, err);
	close(k);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;
	unsigned int nfiles = argc > 2 ? atoi(argv[2]) : 200, i;
	uint64_t max_size = 64 * 16384, slice = max_size + (128 << 10);
	struct chunk *c;
	unsigned char *map;
	struct ctx x;
	int t;

	if (!dir) {
		fprintf(stderr, "usage: kmod_files DIR [NFILES]\n");
		return 2;
	}
	t = open("/dev/kvblk", O_RDWR);
	if (t < 0) {
		printf("SKIP: /dev/kvblk: %s\n", strerror(errno));
		return 4;
	}
	close(t);
	if (nfiles > 200)
		size_units = 8;
	c = calloc(nfiles, sizeof(*c));
	map = mmap(NULL, slice * 2, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!c || map == MAP_FAILED)
		return 1;

	for (i = 0; i < nfiles; i++)
		if (make_chunk(dir, i, &c[i])) {
			fprintf(stderr, "FAIL: writing %s: %s\n", c[i].path, strerror(errno));
			return 1;
		}
	printf("%u chunk files written in %s\n", nfiles, dir);

	/* Every file, a context of its own, one batch each. */
	for (i = 0; i < nfiles && !failures; i++) {
		if (ctx_open(&x, c[i].path, map, slice)) {
			failures++;
			break;
		}
		load_check(&x, &c[i], i, 0, c[i].size, "chunk");
		ctx_close(&x);
	}
	printf("%u files loaded and checked: %s\n", i, failures ? "FAIL" : "ok");

	if (!failures) {
		one_context_all_files(c, nfiles);
		printf("%u files as %u targets of one context, one batch: %s\n",
		       nfiles, nfiles, failures ? "FAIL" : "ok");
	}

	/* One file, several batches: coherence, size per batch, input rules. */
	if (!failures && ctx_open(&x, c[0].path, map, slice) == 0) {
		struct kvblk_io_desc d[1] = { { 0 } };
		struct kvblk_desc_result r[1];
		struct kvblk_load_many lm;
		unsigned char *p = malloc(max_size + 65536);
		int wfd = open(c[0].path, O_WRONLY);
		uint64_t half = c[0].size / 2 / 4096 * 4096;
		long ret;

		/* A buffered write, no fsync: the next load returns it. */
		c[0].gen = 1;
		c[0].hole_len = 0;
		fill(p, 0, 1, 0, c[0].size);
		CHECK(wfd >= 0 && !write_all(wfd, p, c[0].size, 0), "rewrite");
		load_check(&x, &c[0], 0, 0, c[0].size, "after buffered write");
		printf("buffered write then load: %s\n", failures ? "FAIL" : "ok");

		/* Append 64 KiB (buffered): the next batch sees the new size. */
		fill(p, 0, 1, c[0].size, 65536);
		CHECK(!write_all(wfd, p, 65536, c[0].size), "append");
		c[0].size += 65536;
		load_check(&x, &c[0], 0, c[0].size - 65536, c[0].size, "after append");
		d[0].offset = c[0].size - 4096;
		d[0].length = 8192;
		ret = load(&x, d, 1, r, &lm);
		CHECK(ret == -1 && errno == ERANGE && r[0].status == -ERANGE,
		      "past the end: ret %ld errno %d status %d", ret, errno, r[0].status);

		/* Truncate to half: past the new end is refused. */
		CHECK(!ftruncate(wfd, half), "truncate");
		c[0].size = half;
		d[0].offset = half;
		d[0].length = 4096;
		ret = load(&x, d, 1, r, &lm);
		CHECK(ret == -1 && errno == ERANGE && lm.bad_index == 0,
		      "past the truncated end: ret %ld errno %d bad_index %d", ret,
		      errno, lm.bad_index);
		load_check(&x, &c[0], 0, 0, half, "after truncate");
		printf("size read per batch (append, truncate): %s\n", failures ? "FAIL" : "ok");

		/* Offsets and buffer offsets follow the logical block size. */
		d[0].offset = 512 % x.lba ? 512 : 1;
		d[0].length = x.lba;
		d[0].buf_offset = 0;
		ret = load(&x, d, 1, r, &lm);
		CHECK(ret == -1 && errno == EINVAL, "unaligned offset: ret %ld errno %d",
		      ret, errno);
		d[0].offset = 0;
		d[0].buf_offset = 4;
		ret = load(&x, d, 1, r, &lm);
		CHECK(ret == -1 && errno == EINVAL, "buf_offset 4: ret %ld errno %d",
		      ret, errno);

		/* Rights follow the fd; only what the engine serves. */
		expect_attach_errno("O_WRONLY", wfd, 0, EACCES);
		{
			int pfd = open(c[0].path, O_PATH);
			int dfd = open(dir, O_RDONLY | O_DIRECTORY);
			int rfd = open(c[0].path, O_RDONLY);
			int pp[2];

			expect_attach_errno("O_PATH", pfd, 0, EACCES);
			expect_attach_errno("directory", dfd, 0, EISDIR);
			expect_attach_errno("PRP on a file", rfd,
					    KVBLK_ATTACH_F_ENGINE_PRP, EOPNOTSUPP);
			if (!pipe(pp)) {
				expect_attach_errno("pipe", pp[0], 0, ENOTBLK);
				close(pp[0]);
				close(pp[1]);
			}
			close(pfd);
			close(dfd);
			close(rfd);
		}
		printf("input rules and rights: %s\n", failures ? "FAIL" : "ok");
		close(wfd);
		free(p);
		ctx_close(&x);
	}

	if (!failures)
		truncate_during_batch(dir);

	for (i = 0; i < nfiles; i++)
		unlink(c[i].path);
	if (failures) {
		printf("kmod-files: FAIL (%d checks failed)\n", failures);
		return 1;
	}
	printf("kmod-files: PASS\n");
	return 0;
}

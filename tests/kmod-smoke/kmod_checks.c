// SPDX-License-Identifier: MIT
/*
 * kmod_checks - what read(2) and write(2) on a target's fd would enforce or
 * report, checked through kvblk.ko (the VM case tests/vm/cases/rw-checks.sh;
 * the second review's N5 and N6, tests/vm/cases.list):
 *
 *   kmod_checks perm TARGET
 *       A fanotify listener (FAN_CLASS_CONTENT, FAN_ACCESS_PERM on TARGET)
 *       denies every access: pread() on the fd fails with EPERM, and so
 *       must a load: the call fails with EPERM, bad_index 0, that
 *       descriptor's result -EPERM, no byte of the buffer written, and the
 *       listener saw an event of this process. Then it allows: the load is
 *       exact (pread(O_DIRECT)).
 *   kmod_checks notify TARGET
 *       inotify IN_ACCESS on TARGET after a load, IN_MODIFY after a store
 *       (TARGET is scratch: its first 8 KiB are overwritten with the bytes
 *       they held).
 *   kmod_checks swap TARGET
 *       TARGET is active swap (the case swapon'ed it): pwrite() on an
 *       O_RDWR fd fails with ETXTBSY, and so must a store: the call fails
 *       with ETXTBSY, bad_index 0, nothing written.
 *   kmod_checks dying A B CMD
 *       A and B attached to one context; CMD (system(3)) takes A's
 *       capacity to 0; a batch alternating A and B: A's objects -ENOLINK,
 *       B's exact (pread(O_DIRECT) of B), canaries intact.
 *
 * Exit: 0 pass, 1 fail, 4 skip.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "smoke_check.h"

#define GUARD 0xa5
#define OBJ 4096
#define MAX_OBJS 8

static int kfd;

static int attach(int fd, uint32_t flags)
{
	struct kvblk_attach at;

	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.flags = flags;
	at.bdev_fd = fd;
	if (ioctl(kfd, KVBLK_IOC_ATTACH, &at) < 0)
		return -errno;
	printf("attached fd %d: target %u engine %u lba_size %u\n", fd,
	       at.target, at.engine, at.lba_size);
	return at.target;
}

/* A buffer of @len bytes filled with the canary, registered: its id. */
static uint32_t reg_buf(uint8_t **buf, size_t len)
{
	struct kvblk_buf_reg reg;

	*buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*buf == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(*buf, GUARD, len);
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.kind = KVBLK_MEM_HOST;
	reg.addr = (uintptr_t)*buf;
	reg.len = len;
	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &reg) < 0) {
		fprintf(stderr, "FAIL: register: %s\n", strerror(errno));
		exit(1);
	}
	return reg.buf_id;
}

/*
 * One batch: object i is OBJ bytes at offs[i] of target tgts[i], at buffer
 * offset OBJ * (2i + 1) (a page of canary before each). Returns the call's
 * value or -errno; results in @res, the header in @lm.
 */
static int load(uint32_t buf_id, int n, const uint32_t *tgts,
		const uint64_t *offs, bool store, struct kvblk_desc_result *res,
		struct kvblk_load_many *lm)
{
	struct kvblk_io_desc d[MAX_OBJS];
	int i, ret;

	memset(d, 0, sizeof(d));
	for (i = 0; i < n; i++) {
		d[i].offset = offs[i];
		d[i].length = OBJ;
		d[i].buf_offset = (uint64_t)OBJ * (2 * i + 1);
		d[i].buf_id = buf_id;
		d[i].tag = i;
		d[i].target = tgts[i];
	}
	memset(lm, 0, sizeof(*lm));
	memset(res, 0x77, sizeof(*res) * n);
	lm->size = sizeof(*lm);
	lm->flags = store ? KVBLK_LOAD_F_STORE : 0;
	lm->nr_descs = n;
	lm->desc_bytes = sizeof(d[0]);
	lm->descs = (uintptr_t)d;
	lm->results = (uintptr_t)res;
	lm->result_bytes = sizeof(res[0]);
	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, lm);
	return ret < 0 ? -errno : ret;
}

/* Bytes of @buf outside the objects of @n and @skip_objs still the canary? */
static bool canary_ok(const uint8_t *buf, size_t len, int n, bool objs_too)
{
	size_t k;

	for (k = 0; k < len; k++) {
		bool in_obj = (k / OBJ) % 2 == 1 && (int)(k / OBJ / 2) < n;

		if ((objs_too || !in_obj) && buf[k] != GUARD) {
			fprintf(stderr, "byte %zu of the buffer is 0x%02x\n", k, buf[k]);
			return false;
		}
	}
	return true;
}

/* @buf + @boff equals pread(O_DIRECT) of @path at @off? */
static bool same_as_pread(const char *path, uint64_t off, const uint8_t *p)
{
	uint8_t *ref;
	bool same;
	int fd;

	if (posix_memalign((void **)&ref, 4096, OBJ))
		return false;
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0 || pread(fd, ref, OBJ, off) != OBJ) {
		fprintf(stderr, "pread(O_DIRECT) %s at %" PRIu64 ": %s\n", path,
			off, strerror(errno));
		free(ref);
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	same = !memcmp(ref, p, OBJ);
	free(ref);
	return same;
}

/* ---- perm -------------------------------------------------------------- */

static int fan_fd;
static volatile int fan_verdict = FAN_DENY;
static volatile int fan_events, fan_own;

static void *fan_listen(void *arg)
{
	char evbuf[4096] __attribute__((aligned(8)));
	ssize_t len;

	(void)arg;
	while ((len = read(fan_fd, evbuf, sizeof(evbuf))) > 0) {
		struct fanotify_event_metadata *m = (void *)evbuf;

		for (; FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
			struct fanotify_response r = { .fd = m->fd };

			if (m->mask & FAN_ACCESS_PERM) {
				fan_events++;
				if (m->pid == getpid())
					fan_own++;
				r.response = fan_verdict;
				if (write(fan_fd, &r, sizeof(r)) != sizeof(r))
					perror("fanotify response");
			}
			if (m->fd >= 0)
				close(m->fd);
		}
	}
	return NULL;
}

static int perm(const char *path)
{
	struct kvblk_desc_result res[1];
	struct kvblk_load_many lm;
	uint32_t tgt0 = 0, id;
	uint64_t off0 = 0;
	pthread_t th;
	uint8_t *buf, page[OBJ] __attribute__((aligned(4096)));
	int tfd, ret;

	fan_fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY | O_LARGEFILE);
	if (fan_fd < 0) {
		printf("SKIP: fanotify_init(FAN_CLASS_CONTENT): %s (CONFIG_FANOTIFY_ACCESS_PERMISSIONS?)\n",
		       strerror(errno));
		return 4;
	}
	if (fanotify_mark(fan_fd, FAN_MARK_ADD, FAN_ACCESS_PERM, AT_FDCWD, path) < 0) {
		fprintf(stderr, "fanotify_mark %s: %s\n", path, strerror(errno));
		return 1;
	}
	/*
	 * Opened after the mark: since 6.14 a file opened while no permission
	 * watch covered it gets no permission events at all
	 * (FMODE_NONOTIFY_PERM), for read(2) as for a load.
	 */
	tfd = open(path, O_RDONLY);
	if (tfd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		return 1;
	}
	pthread_create(&th, NULL, fan_listen, NULL);
	if (attach(tfd, 0) < 0)
		return 1;
	id = reg_buf(&buf, 4 * OBJ);

	/* The kernel's own read(2) first: denied. */
	ret = pread(tfd, page, sizeof(page), 0);
	CHECK(ret < 0 && errno == EPERM, "pread with the listener denying: %d (%s), want EPERM",
	      ret, ret < 0 ? strerror(errno) : "success");
	fan_events = fan_own = 0;
	ret = load(id, 1, &tgt0, &off0, false, res, &lm);
	printf("denied: LOAD_MANY %d, bad_index %d, result %d, events %d (own %d)\n",
	       ret, lm.bad_index, res[0].status, fan_events, fan_own);
	CHECK(ret == -EPERM, "load with the listener denying: %d, want -EPERM", ret);
	CHECK(lm.bad_index == 0, "bad_index %d, want 0", lm.bad_index);
	CHECK(res[0].status == -EPERM && res[0].bytes == 0,
	      "result status %d bytes %llu, want -EPERM 0", res[0].status,
	      (unsigned long long)res[0].bytes);
	CHECK(fan_own >= 1, "the listener saw %d access events of this process", fan_own);
	CHECK(canary_ok(buf, 4 * OBJ, 1, true), "bytes written by a denied load");

	fan_verdict = FAN_ALLOW;
	fan_events = fan_own = 0;
	ret = load(id, 1, &tgt0, &off0, false, res, &lm);
	printf("allowed: LOAD_MANY %d, result %d, events %d (own %d)\n", ret,
	       res[0].status, fan_events, fan_own);
	CHECK(ret == 1 && res[0].status == 0, "load with the listener allowing: %d, status %d",
	      ret, res[0].status);
	CHECK(fan_own >= 1, "the listener saw %d access events of this process", fan_own);
	CHECK(same_as_pread(path, 0, buf + OBJ), "allowed load differs from pread(O_DIRECT)");
	CHECK(canary_ok(buf, 4 * OBJ, 1, false), "canary changed");
	fanotify_mark(fan_fd, FAN_MARK_REMOVE, FAN_ACCESS_PERM, AT_FDCWD, path);
	return 0;
}

/* ---- notify ------------------------------------------------------------ */

/* The inotify events of @ifd now, ORed. */
static uint32_t inotify_mask(int ifd)
{
	char evbuf[4096] __attribute__((aligned(8)));
	struct pollfd p = { .fd = ifd, .events = POLLIN };
	uint32_t mask = 0;
	ssize_t len, k;

	while (poll(&p, 1, 200) > 0) {
		len = read(ifd, evbuf, sizeof(evbuf));
		for (k = 0; k < len;) {
			struct inotify_event *e = (void *)(evbuf + k);

			mask |= e->mask;
			k += sizeof(*e) + e->len;
		}
	}
	return mask;
}

static int notify(const char *path)
{
	struct kvblk_desc_result res[2];
	struct kvblk_load_many lm;
	uint32_t tgts[2] = { 0, 0 }, id, m;
	uint64_t offs[2] = { 0, OBJ };
	uint8_t *buf;
	int tfd, ifd, ret;

	tfd = open(path, O_RDWR);
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (tfd < 0 || ifd < 0) {
		fprintf(stderr, "open %s / inotify: %s\n", path, strerror(errno));
		return 1;
	}
	if (attach(tfd, 0) < 0)
		return 1;
	id = reg_buf(&buf, 5 * OBJ);
	if (inotify_add_watch(ifd, path, IN_ACCESS | IN_MODIFY) < 0) {
		fprintf(stderr, "inotify_add_watch %s: %s\n", path, strerror(errno));
		return 1;
	}
	inotify_mask(ifd);	/* drain */
	ret = load(id, 2, tgts, offs, false, res, &lm);
	m = inotify_mask(ifd);
	printf("load: %d, inotify mask %#x\n", ret, m);
	CHECK(ret == 2, "load: %d", ret);
	CHECK(m & IN_ACCESS, "no IN_ACCESS after a load (mask %#x)", m);
	CHECK(!(m & IN_MODIFY), "IN_MODIFY after a load (mask %#x)", m);
	/* The same bytes back: the target is unchanged, but written. */
	ret = load(id, 2, tgts, offs, true, res, &lm);
	m = inotify_mask(ifd);
	printf("store: %d, inotify mask %#x\n", ret, m);
	CHECK(ret == 2, "store: %d", ret);
	CHECK(m & IN_MODIFY, "no IN_MODIFY after a store (mask %#x)", m);
	CHECK(same_as_pread(path, 0, buf + OBJ) && same_as_pread(path, OBJ, buf + 3 * OBJ),
	      "the stored bytes differ from pread(O_DIRECT)");
	return 0;
}

/* ---- swap -------------------------------------------------------------- */

static int swap(const char *path)
{
	struct kvblk_desc_result res[1];
	struct kvblk_load_many lm;
	uint32_t tgt0 = 0, id;
	uint64_t off0 = 1 << 20;
	uint8_t *buf, page[OBJ] __attribute__((aligned(4096)));
	int tfd, ret;

	tfd = open(path, O_RDWR);
	if (tfd < 0) {
		fprintf(stderr, "open %s O_RDWR: %s\n", path, strerror(errno));
		return 1;
	}
	memset(page, 0x3c, sizeof(page));
	ret = pwrite(tfd, page, sizeof(page), off0);
	CHECK(ret < 0 && errno == ETXTBSY, "pwrite to active swap: %d (%s), want ETXTBSY",
	      ret, ret < 0 ? strerror(errno) : "success");
	if (attach(tfd, 0) < 0)
		return 1;
	id = reg_buf(&buf, 2 * OBJ);
	memset(buf + OBJ, 0x3c, OBJ);
	ret = load(id, 1, &tgt0, &off0, true, res, &lm);
	printf("store to active swap: %d, bad_index %d, result %d\n", ret,
	       lm.bad_index, res[0].status);
	CHECK(ret == -ETXTBSY, "store to active swap: %d, want -ETXTBSY", ret);
	CHECK(lm.bad_index == 0 && res[0].status == -ETXTBSY,
	      "bad_index %d result %d, want 0 and -ETXTBSY", lm.bad_index, res[0].status);
	CHECK(!same_as_pread(path, off0, buf + OBJ), "the refused store reached the device");
	/* A load is fine (read(2) of swap is). */
	ret = load(id, 1, &tgt0, &off0, false, res, &lm);
	CHECK(ret == 1, "load from active swap: %d", ret);
	return 0;
}

/* ---- dying ------------------------------------------------------------- */

static int dying(const char *a, const char *b, const char *cmd)
{
	struct kvblk_desc_result res[MAX_OBJS];
	struct kvblk_load_many lm;
	uint32_t tgts[MAX_OBJS], id;
	uint64_t offs[MAX_OBJS];
	int fa, fb, ta, tb, i, n = 6, ret;
	uint8_t *buf;

	fa = open(a, O_RDONLY);
	fb = open(b, O_RDONLY);
	if (fa < 0 || fb < 0) {
		fprintf(stderr, "open %s, %s: %s\n", a, b, strerror(errno));
		return 1;
	}
	ta = attach(fa, 0);
	tb = attach(fb, KVBLK_ATTACH_F_ADD_TARGET);
	if (ta < 0 || tb < 0)
		return 1;
	id = reg_buf(&buf, (2 * n + 1) * OBJ);
	printf("run: %s\n", cmd);
	fflush(stdout);
	if (system(cmd)) {
		fprintf(stderr, "FAIL: '%s' failed\n", cmd);
		return 1;
	}
	for (i = 0; i < n; i++) {
		tgts[i] = i % 2 ? tb : ta;
		offs[i] = (uint64_t)(i + 1) * 64 * 1024;
	}
	ret = load(id, n, tgts, offs, false, res, &lm);
	printf("batch over A (capacity 0) and B: %d, nr_ok %u\n", ret, lm.nr_ok);
	CHECK(ret == n / 2, "returned %d, want %d (B's objects)", ret, n / 2);
	for (i = 0; i < n; i++) {
		printf("  object %d target %s status %d bytes %llu\n", i,
		       i % 2 ? "B" : "A", res[i].status,
		       (unsigned long long)res[i].bytes);
		if (i % 2) {
			CHECK(res[i].status == 0 && res[i].bytes == OBJ,
			      "B's object %d: status %d", i, res[i].status);
			CHECK(same_as_pread(b, offs[i], buf + OBJ * (2 * i + 1)),
			      "B's object %d differs from pread(O_DIRECT)", i);
		} else {
			CHECK(res[i].status == -ENOLINK, "A's object %d: status %d, want -ENOLINK",
			      i, res[i].status);
		}
	}
	for (i = 0; i < n; i += 2)
		memset(buf + OBJ * (2 * i + 1), GUARD, OBJ);
	CHECK(canary_ok(buf, (2 * n + 1) * OBJ, n, false), "canary changed");
	for (i = 0; i < n; i += 2)
		CHECK(buf[OBJ * (2 * i + 1)] == GUARD, "A's object %d was written", i);
	return 0;
}

int main(int argc, char **argv)
{
	int ret;

	if (argc < 3) {
		fprintf(stderr, "usage: kmod_checks perm|notify|swap TARGET | dying A B CMD\n");
		return 2;
	}
	kfd = open("/dev/kvblk", O_RDWR);
	if (kfd < 0) {
		printf("SKIP: /dev/kvblk: %s\n", strerror(errno));
		return 4;
	}
	if (!strcmp(argv[1], "perm"))
		ret = perm(argv[2]);
	else if (!strcmp(argv[1], "notify"))
		ret = notify(argv[2]);
	else if (!strcmp(argv[1], "swap"))
		ret = swap(argv[2]);
	else if (!strcmp(argv[1], "dying") && argc == 5)
		ret = dying(argv[2], argv[3], argv[4]);
	else
		ret = 2;
	if (ret)
		return ret;
	if (failures) {
		fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
		return 1;
	}
	printf("PASS\n");
	return 0;
}

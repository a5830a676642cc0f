// SPDX-License-Identifier: MIT
/*
 * kmod_access - what an unprivileged user can and cannot do with /dev/kvblk
 * (issue 14 item 5; run by tests/vm/cases/kmod-access.sh as users made there,
 * with /dev/kvblk root:kvblk 0660 as packaging/60-kvblk.rules makes it).
 *
 * usage: kmod_access outsider
 *        kmod_access member OWN DENIED
 *        kmod_access holder OWN DIR
 *        kmod_access foreign OWN ID
 *
 * outsider  not in group kvblk: open(/dev/kvblk) fails with EACCES for
 *           reading, writing or both; an O_PATH fd of it takes no ioctl
 *           (EBADF), and reopening that fd through /proc/self/fd fails EACCES.
 * member    in group kvblk, not in group disk. OWN: a block device node the
 *           user may open read-write; DENIED: one of the same disk it may not
 *           open (root 0600). ATTACH of an O_WRONLY fd of OWN: EACCES; of an
 *           O_PATH fd of OWN: EACCES; DENIED cannot be opened for reading or
 *           writing (EACCES), its O_PATH fd is refused by ATTACH (EACCES) and
 *           cannot be reopened readable through /proc/self/fd (EACCES); no fd
 *           (-1) is EBADF, the kvblk fd itself ENOTBLK; none of these attached
 *           the context (REGISTER_BUFFER still ENXIO). A module parameter
 *           cannot be written (EACCES). Then ATTACH of an O_RDONLY fd of OWN
 *           works, a batch of objects equals pread(O_DIRECT) of OWN byte for
 *           byte, and a registration past RLIMIT_MEMLOCK fails with ENOMEM.
 * holder    attaches OWN, registers a buffer filled with 0xa5, writes its id
 *           to DIR/id and waits (at most 120 s) for DIR/go; then its buffer
 *           must still be all 0xa5, and a load into it is exact.
 * foreign   attaches OWN and uses buffer id ID (the holder's) before
 *           registering anything: LOAD_MANY fails EINVAL with bad_index 0 and
 *           that descriptor's status -EINVAL, UNREGISTER_BUFFER and
 *           CHECK_BUFFER fail ENOENT (buffer ids are per context). Its own
 *           registration then loads exactly.
 * Exit: 0 pass, 1 fail, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "smoke_check.h"

#define DEV "/dev/kvblk"
#define BUF_LEN (1U << 20)
#define GUARD 0xa5

/* @what failed (-1) with errno @want; says so on success. */
#define EXPECT_ERR(ret, want, ...)					\
	do {								\
		int e_ = errno;						\
		CHECK((ret) < 0 && e_ == (want), __VA_ARGS__);		\
		if ((ret) < 0 && e_ == (want)) {			\
			printf("ok: ");					\
			printf(__VA_ARGS__);				\
			printf(": %s\n", strerror(want));		\
		} else if ((ret) >= 0) {				\
			fprintf(stderr, "  (it succeeded)\n");		\
		} else {						\
			fprintf(stderr, "  (errno %d %s, want %s)\n",	\
				e_, strerror(e_), strerror(want));	\
		}							\
	} while (0)

static int attach(int kfd, int fd, struct kvblk_attach *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->bdev_fd = fd;
	return ioctl(kfd, KVBLK_IOC_ATTACH, a);
}

static int reg(int kfd, void *addr, uint64_t len, uint32_t *id)
{
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST,
				   .addr = (uintptr_t)addr, .len = len };
	int ret = ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &r);

	if (!ret && id)
		*id = r.buf_id;
	return ret;
}

static void *anon(size_t len, int fill)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	memset(p, fill, len);
	return p;
}

static int open_kvblk(void)
{
	int kfd = open(DEV, O_RDWR | O_CLOEXEC);

	if (kfd < 0) {
		fprintf(stderr, "FAIL open %s: %s\n", DEV, strerror(errno));
		exit(1);
	}
	return kfd;
}

/*
 * Loads @n objects of @len bytes, object i from target offset i * @stride
 * into buffer offset i * @len, and compares each with pread(O_DIRECT) of
 * @path. Returns the failures it found.
 */
static int load_exact(int kfd, uint32_t id, uint8_t *buf, const char *path,
		      unsigned int n, uint64_t len, uint64_t stride)
{
	struct kvblk_io_desc d[16];
	struct kvblk_desc_result res[16];
	struct kvblk_load_many lm = { .size = sizeof(lm) };
	int before = failures, fd, ret;
	uint8_t *ref;
	unsigned int i;

	if (n > 16 || n * len > BUF_LEN)
		abort();
	memset(d, 0, sizeof(d));
	memset(res, 0xff, sizeof(res));
	for (i = 0; i < n; i++) {
		d[i].offset = i * stride;
		d[i].length = len;
		d[i].buf_offset = i * len;
		d[i].buf_id = id;
		d[i].tag = i;
	}
	lm.nr_descs = n;
	lm.desc_bytes = sizeof(d[0]);
	lm.descs = (uintptr_t)d;
	lm.results = (uintptr_t)res;
	lm.result_bytes = sizeof(res[0]);
	/* Returns the number of descriptors with status 0. */
	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	CHECK(ret == (int)n, "LOAD_MANY of %u objects returned %d (%s)", n, ret,
	      ret < 0 ? strerror(errno) : "objects ok");
	if (ret < 0)
		return failures - before;
	CHECK(lm.nr_ok == n, "nr_ok %u, want %u", lm.nr_ok, n);
	ref = anon(len, 0);
	fd = open(path, O_RDONLY | O_DIRECT);
	CHECK(fd >= 0, "open %s O_DIRECT: %s", path, strerror(errno));
	for (i = 0; i < n && fd >= 0; i++) {
		CHECK(res[i].status == 0 && res[i].bytes == len,
		      "object %u: status %d bytes %" PRIu64, i,
		      res[i].status, (uint64_t)res[i].bytes);
		CHECK(pread(fd, ref, len, d[i].offset) == (ssize_t)len,
		      "pread %s at %" PRIu64, path, (uint64_t)d[i].offset);
		CHECK(!memcmp(ref, buf + d[i].buf_offset, len),
		      "object %u differs from pread(O_DIRECT) of %s", i, path);
	}
	if (fd >= 0)
		close(fd);
	munmap(ref, len);
	if (failures == before)
		printf("ok: %u objects of %" PRIu64 " bytes loaded, equal to pread(O_DIRECT) of %s\n",
		       n, len, path);
	return failures - before;
}

static void outsider(void)
{
	char proc[64];
	int fd, ret;
	uint64_t feat;

	fd = open(DEV, O_RDWR);
	EXPECT_ERR(fd, EACCES, "outsider: open(%s, O_RDWR)", DEV);
	fd = open(DEV, O_RDONLY);
	EXPECT_ERR(fd, EACCES, "outsider: open(%s, O_RDONLY)", DEV);
	fd = open(DEV, O_WRONLY);
	EXPECT_ERR(fd, EACCES, "outsider: open(%s, O_WRONLY)", DEV);
	/* O_PATH needs no permission on the file, and gives nothing. */
	fd = open(DEV, O_PATH);
	CHECK(fd >= 0, "outsider: open(%s, O_PATH): %s", DEV, strerror(errno));
	if (fd < 0)
		return;
	ret = ioctl(fd, KVBLK_IOC_GET_FEATURES, &feat);
	EXPECT_ERR(ret, EBADF, "outsider: GET_FEATURES on an O_PATH fd of %s", DEV);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ret = open(proc, O_RDWR);
	EXPECT_ERR(ret, EACCES, "outsider: reopen of that O_PATH fd through %s", proc);
	close(fd);
}

static void member(const char *own, const char *denied)
{
	struct kvblk_attach a;
	struct rlimit rl;
	char proc[64];
	uint8_t *buf, *big;
	uint32_t id;
	uint64_t feat;
	int kfd, fd, pfd, ret;

	kfd = open_kvblk();
	printf("ok: member opened %s read-write\n", DEV);
	CHECK(ioctl(kfd, KVBLK_IOC_GET_FEATURES, &feat) == 0, "GET_FEATURES: %s",
	      strerror(errno));

	fd = open(own, O_WRONLY);
	CHECK(fd >= 0, "open(%s, O_WRONLY): %s", own, strerror(errno));
	ret = attach(kfd, fd, &a);
	EXPECT_ERR(ret, EACCES, "ATTACH of an O_WRONLY fd of %s", own);
	close(fd);

	fd = open(own, O_PATH);
	CHECK(fd >= 0, "open(%s, O_PATH): %s", own, strerror(errno));
	ret = attach(kfd, fd, &a);
	EXPECT_ERR(ret, EACCES, "ATTACH of an O_PATH fd of %s", own);
	close(fd);

	fd = open(denied, O_RDONLY);
	EXPECT_ERR(fd, EACCES, "open(%s, O_RDONLY) (root 0600)", denied);
	fd = open(denied, O_WRONLY);
	EXPECT_ERR(fd, EACCES, "open(%s, O_WRONLY)", denied);
	pfd = open(denied, O_PATH);
	CHECK(pfd >= 0, "open(%s, O_PATH): %s", denied, strerror(errno));
	ret = attach(kfd, pfd, &a);
	EXPECT_ERR(ret, EACCES, "ATTACH of an O_PATH fd of %s", denied);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDONLY);
	EXPECT_ERR(fd, EACCES, "reopen of that O_PATH fd through %s for reading", proc);
	close(pfd);
	ret = attach(kfd, -1, &a);
	EXPECT_ERR(ret, EBADF, "ATTACH of fd -1");
	ret = attach(kfd, kfd, &a);
	EXPECT_ERR(ret, ENOTBLK, "ATTACH of the /dev/kvblk fd itself");

	buf = anon(BUF_LEN, GUARD);
	ret = reg(kfd, buf, BUF_LEN, NULL);
	EXPECT_ERR(ret, ENXIO, "REGISTER_BUFFER after the refused attaches (not attached)");

	fd = open("/sys/module/kvblk/parameters/max_descs", O_WRONLY);
	EXPECT_ERR(fd, EACCES, "open of module parameter max_descs for writing");

	fd = open(own, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open(%s, O_RDONLY): %s", own, strerror(errno));
	ret = attach(kfd, fd, &a);
	CHECK(ret == 0, "ATTACH of an O_RDONLY fd of %s: %s", own, strerror(errno));
	if (ret)
		return;
	printf("ok: ATTACH of an O_RDONLY fd of %s: lba_size %u capacity %" PRIu64
	       " engine %u\n", own, a.lba_size, (uint64_t)a.capacity, a.engine);
	ret = reg(kfd, buf, BUF_LEN, &id);
	CHECK(ret == 0, "REGISTER_BUFFER of 1 MiB: %s", strerror(errno));
	if (ret)
		return;
	load_exact(kfd, id, buf, own, 8, 64 << 10, 3 << 20);

	/* 1 MiB is pinned; allow 1 MiB more and ask for 2 MiB. */
	CHECK(getrlimit(RLIMIT_MEMLOCK, &rl) == 0, "getrlimit");
	rl.rlim_cur = 2 * BUF_LEN;
	CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, "setrlimit(RLIMIT_MEMLOCK, 2 MiB): %s",
	      strerror(errno));
	big = anon(2 * BUF_LEN, 0);
	ret = reg(kfd, big, 2 * BUF_LEN, NULL);
	EXPECT_ERR(ret, ENOMEM, "REGISTER_BUFFER of 2 MiB with 1 MiB pinned and RLIMIT_MEMLOCK 2 MiB");
	close(kfd);
	close(fd);
}

static void holder(const char *own, const char *dir)
{
	char path[256];
	struct kvblk_attach a;
	uint8_t *buf;
	uint32_t id, i;
	FILE *f;
	int kfd, fd;

	kfd = open_kvblk();
	fd = open(own, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "holder: open(%s): %s", own, strerror(errno));
	CHECK(attach(kfd, fd, &a) == 0, "holder: ATTACH: %s", strerror(errno));
	buf = anon(BUF_LEN, GUARD);
	CHECK(reg(kfd, buf, BUF_LEN, &id) == 0, "holder: REGISTER_BUFFER: %s", strerror(errno));
	if (failures)
		return;
	snprintf(path, sizeof(path), "%s/id.tmp", dir);
	f = fopen(path, "w");
	CHECK(f != NULL, "holder: %s: %s", path, strerror(errno));
	if (!f)
		return;
	fprintf(f, "%u\n", id);
	fclose(f);
	{
		char final[256];

		snprintf(final, sizeof(final), "%s/id", dir);
		CHECK(rename(path, final) == 0, "holder: rename: %s", strerror(errno));
	}
	printf("ok: holder registered buffer id %u and waits\n", id);
	fflush(stdout);
	snprintf(path, sizeof(path), "%s/go", dir);
	for (i = 0; i < 1200 && access(path, F_OK); i++)
		usleep(100 * 1000);
	CHECK(i < 1200, "holder: no %s after 120 s", path);
	for (i = 0; i < BUF_LEN; i++) {
		if (buf[i] != GUARD) {
			CHECK(0, "holder: its buffer changed at offset %u (0x%02x)", i, buf[i]);
			break;
		}
	}
	if (i == BUF_LEN)
		printf("ok: holder's buffer %u untouched while another user's context named its id\n", id);
	load_exact(kfd, id, buf, own, 4, 4096, 1 << 20);
	close(kfd);
	close(fd);
}

static void foreign(const char *own, uint32_t id)
{
	struct kvblk_io_desc d = { .length = 4096, .buf_id = id };
	struct kvblk_desc_result res = { .status = 12345 };
	struct kvblk_load_many lm = { .size = sizeof(lm), .nr_descs = 1,
				      .desc_bytes = sizeof(d), .descs = (uintptr_t)&d,
				      .results = (uintptr_t)&res,
				      .result_bytes = sizeof(res) };
	struct kvblk_buf_unreg u = { .size = sizeof(u), .buf_id = id };
	struct kvblk_buf_check c = { .size = sizeof(c), .buf_id = id };
	struct kvblk_attach a;
	uint8_t *buf;
	uint32_t mine;
	int kfd, fd, ret;

	kfd = open_kvblk();
	fd = open(own, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "foreign: open(%s): %s", own, strerror(errno));
	CHECK(attach(kfd, fd, &a) == 0, "foreign: ATTACH: %s", strerror(errno));
	if (failures)
		return;
	ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	EXPECT_ERR(ret, EINVAL, "LOAD_MANY naming the other user's buffer id %u", id);
	CHECK(lm.bad_index == 0 && res.status == -EINVAL,
	      "bad_index %d status %d, want 0 and %d", lm.bad_index, res.status, -EINVAL);
	ret = ioctl(kfd, KVBLK_IOC_UNREGISTER_BUFFER, &u);
	EXPECT_ERR(ret, ENOENT, "UNREGISTER_BUFFER of the other user's buffer id %u", id);
	ret = ioctl(kfd, KVBLK_IOC_CHECK_BUFFER, &c);
	EXPECT_ERR(ret, ENOENT, "CHECK_BUFFER of the other user's buffer id %u", id);

	buf = anon(BUF_LEN, 0);
	CHECK(reg(kfd, buf, BUF_LEN, &mine) == 0, "foreign: REGISTER_BUFFER: %s", strerror(errno));
	if (!failures) {
		printf("ok: its own registration got id %u (ids are per context)\n", mine);
		load_exact(kfd, mine, buf, own, 4, 4096, 1 << 20);
	}
	close(kfd);
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "outsider"))
		outsider();
	else if (argc == 4 && !strcmp(argv[1], "member"))
		member(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "holder"))
		holder(argv[2], argv[3]);
	else if (argc == 4 && !strcmp(argv[1], "foreign"))
		foreign(argv[2], (uint32_t)strtoul(argv[3], NULL, 0));
	else {
		fprintf(stderr, "usage: kmod_access outsider | member OWN DENIED | holder OWN DIR | foreign OWN ID\n");
		return 2;
	}
	printf("%s: %s (uid %u)\n", argv[1], failures ? "FAIL" : "PASS", getuid());
	return failures ? 1 : 0;
}

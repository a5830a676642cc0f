// SPDX-License-Identifier: MIT
/*
 * kmod_hold - attach a kvblk.ko context, change the target under it with a
 * shell command while it stays attached, then load one batch and check
 * every object against what the uapi promises (the VM cases in tests/vm/cases).
 *
 * usage: kmod_hold [-e prp|bio] [-A ERRNO] [-P] [-r CMD] [-D CMD] [-c ERRNO]
 *                  [-n N] [-R CMD] TARGET [OFF:LEN[*N][=EXPECT] ...]
 *
 *   -e prp|bio  attach flag KVBLK_ATTACH_F_ENGINE_PRP or _BIO (default: none)
 *   -A ERRNO    attach must fail with this errno (e.g. EOPNOTSUPP); then
 *               nothing else runs and the exit status says whether it did
 *   -P          read the objects' reference bytes with pread(O_DIRECT)
 *               once, before CMD, and compare with those (for a CMD that
 *               takes the device away but leaves its bytes as they were)
 *   -r CMD      run CMD with system(3) after attach, before the batch
 *               (it must exit 0)
 *   -D CMD      run CMD while the first batch is in flight: a child waits
 *               until the whole disk's stats/commands counter moved, then
 *               runs it (it must exit 0); -P reads the references before
 *               the batch then
 *   -c ERRNO    the LOAD_MANY call itself must fail with ERRNO (ESTALE,
 *               ERANGE): no byte of the buffer may change
 *   -n N        load the batch N times (default 1), CMD before the first
 *   -R CMD      after those batches run CMD (it must exit 0), then load the
 *               batch once more: every object must now succeed, exact
 *   OFF:LEN     an object: LEN bytes at byte offset OFF of TARGET (K, M, G
 *               suffixes; sums and differences such as 20M-4K). Objects lie in one registered buffer, each
 *               page-aligned with a 4 KiB gap of canary around it.
 *               *N: N objects of LEN bytes at OFF, OFF + LEN, ...
 *   EXPECT      "|"-separated statuses the object may end with: ok (the
 *               default), EIO, ENOLINK, ENODATA, ... An object that ends
 *               with status 0 must equal pread(O_DIRECT) of TARGET (a fresh
 *               open, after CMD) byte for byte and report LEN bytes.
 *
 * Every byte of the buffer outside the objects (the canary, 0xa5) must be
 * unchanged after every call, whatever the outcome. Prints the attach's
 * lba_size, capacity, engine and engines and every object's status.
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
#include <sys/wait.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "smoke_check.h"

#define GUARD 0xa5
#define GAP 4096
#define MAX_OBJS 4096

struct obj {
	uint64_t off, len, buf_off;
	char expect[64];
	uint8_t *ref;		/* -P: the bytes read before CMD */
};

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "EIO", EIO }, { "ENOLINK", ENOLINK }, { "ENODATA", ENODATA },
	{ "ESTALE", ESTALE }, { "ERANGE", ERANGE }, { "EINVAL", EINVAL },
	{ "EOPNOTSUPP", EOPNOTSUPP }, { "ENODEV", ENODEV },
	{ "ECANCELED", ECANCELED }, { "EACCES", EACCES }, { "EPERM", EPERM },
};

static int errno_of(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (!strcmp(errnames[i].name, name))
			return errnames[i].err;
	fprintf(stderr, "unknown errno name %s\n", name);
	exit(2);
}

static const char *name_of(int err)
{
	static char buf[24];
	size_t i;

	if (!err)
		return "ok";
	for (i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (errnames[i].err == err)
			return errnames[i].name;
	snprintf(buf, sizeof(buf), "errno%d", err);
	return buf;
}

/* Is status @st (0 or -errno) one of "ok|EIO|..."? */
static bool allowed(const char *expect, int st)
{
	char tmp[64], *tok, *save;

	snprintf(tmp, sizeof(tmp), "%s", expect);
	for (tok = strtok_r(tmp, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
		if (!strcmp(tok, "ok") ? st == 0 : st == -errno_of(tok))
			return true;
	}
	return false;
}

/* A size: a number with an optional K, M or G suffix. */
static uint64_t parse_one(const char *s, char **end)
{
	uint64_t v = strtoull(s, end, 0);

	if (**end == 'K' || **end == 'k')
		v <<= 10, (*end)++;
	else if (**end == 'M' || **end == 'm')
		v <<= 20, (*end)++;
	else if (**end == 'G' || **end == 'g')
		v <<= 30, (*end)++;
	return v;
}

/* Sizes added or subtracted left to right: 20M-4K, 1M+512. */
static uint64_t parse_size(const char *s, char **end)
{
	uint64_t v = parse_one(s, end);

	while (**end == '+' || **end == '-') {
		char op = *(*end)++;
		uint64_t w = parse_one(*end, end);

		v = op == '+' ? v + w : v - w;
	}
	return v;
}

static void check_guard(const uint8_t *buf, uint64_t len, const struct obj *o,
			int n, const char *when)
{
	uint64_t pos = 0;
	int i;

	for (i = 0; i <= n; i++) {
		uint64_t end = i < n ? o[i].buf_off : len;

		for (; pos < end; pos++) {
			if (buf[pos] != GUARD) {
				CHECK(0, "%s: canary byte at buffer offset %" PRIu64
				      " changed to 0x%02x", when, pos, buf[pos]);
				return;
			}
		}
		if (i < n)
			pos = o[i].buf_off + o[i].len;
	}
}

/* pread(O_DIRECT) of object @o of @target into a new page-aligned buffer. */
static uint8_t *read_ref(const char *target, const struct obj *o, int idx)
{
	uint64_t alen = (o->len + 4095) & ~4095ULL;
	uint8_t *ref;
	ssize_t got;
	int fd;

	fd = open(target, O_RDONLY | O_DIRECT);
	CHECK(fd >= 0, "open %s: %s", target, strerror(errno));
	if (fd < 0)
		return NULL;
	ref = mmap(NULL, alen, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ref == MAP_FAILED) {
		close(fd);
		CHECK(0, "mmap");
		return NULL;
	}
	got = pread(fd, ref, alen, o->off);
	close(fd);
	CHECK(got >= (ssize_t)o->len, "object %d: pread(O_DIRECT) at %" PRIu64
	      " returned %zd (%s), want %" PRIu64, idx, o->off, got,
	      got < 0 ? strerror(errno) : "short", o->len);
	if (got < (ssize_t)o->len) {
		munmap(ref, alen);
		return NULL;
	}
	return ref;
}

/* Object @o in @buf equals its reference bytes (-P) or pread(O_DIRECT) now. */
static void check_bytes(const char *target, const uint8_t *buf,
			const struct obj *o, int idx)
{
	uint8_t *ref = o->ref ? o->ref : read_ref(target, o, idx);
	uint64_t k = 0;

	if (!ref)
		return;
	if (memcmp(ref, buf + o->buf_off, o->len)) {
		while (ref[k] == buf[o->buf_off + k])
			k++;
		CHECK(0, "object %d (%" PRIu64 ":%" PRIu64 "): byte %" PRIu64
		      " is 0x%02x, pread says 0x%02x", idx, o->off, o->len, k,
		      buf[o->buf_off + k], ref[k]);
	}
	if (!o->ref)
		munmap(ref, (o->len + 4095) & ~4095ULL);
}

static int run(const char *cmd)
{
	int ret;

	printf("run: %s\n", cmd);
	fflush(stdout);
	ret = system(cmd);
	if (ret != 0)
		fprintf(stderr, "FAIL: '%s' exited with %d\n", cmd, ret);
	return ret != 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: kmod_hold [-e prp|bio] [-A ERRNO] [-P] [-r CMD] [-D CMD] [-c ERRNO] [-n N] [-R CMD] TARGET [OFF:LEN[*N][=EXPECT] ...]\n");
	exit(2);
}

/* The whole disk's command counter (/sys/kernel/kvblk/<disk>/stats), or -1. */
static long long disk_commands(const char *target)
{
	const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	char path[256], line[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/kvblk/%s/stats/commands", base);
	f = fopen(path, "r");
	if (f) {
		if (fgets(line, sizeof(line), f))
			v = atoll(line);
		fclose(f);
	}
	return v;
}

/* -D: a child that runs @cmd once the batch's commands started. */
static pid_t during(const char *target, const char *cmd)
{
	long long c0 = disk_commands(target);
	pid_t pid = fork();
	int i;

	if (pid)
		return pid;
	for (i = 0; i < 100000 && disk_commands(target) <= c0; i++)
		usleep(1000);
	_exit(run(cmd) ? 1 : 0);
}

int main(int argc, char **argv)
{
	const char *cmd = NULL, *after = NULL, *attach_err = NULL, *call_err = NULL;
	const char *during_cmd = NULL;
	pid_t child = 0;
	static struct kvblk_desc_result res[MAX_OBJS];
	static struct kvblk_io_desc descs[MAX_OBJS];
	static struct obj objs[MAX_OBJS];
	struct kvblk_load_many lm;
	struct kvblk_buf_reg reg;
	struct kvblk_attach at;
	uint32_t flags = 0;
	uint64_t buf_len = GAP;
	int kfd, tfd, opt, n = 0, rounds = 1, r, i, ret;
	bool preread = false;
	uint8_t *buf;

	while ((opt = getopt(argc, argv, "e:A:Pr:D:R:c:n:")) != -1) {
		switch (opt) {
		case 'e':
			if (!strcmp(optarg, "prp"))
				flags = KVBLK_ATTACH_F_ENGINE_PRP;
			else if (!strcmp(optarg, "bio"))
				flags = KVBLK_ATTACH_F_ENGINE_BIO;
			else
				usage();
			break;
		case 'A':
			attach_err = optarg;
			break;
		case 'r':
			cmd = optarg;
			break;
		case 'D':
			during_cmd = optarg;
			break;
		case 'P':
			preread = true;
			break;
		case 'R':
			after = optarg;
			break;
		case 'c':
			call_err = optarg;
			break;
		case 'n':
			rounds = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind >= argc)
		usage();
	for (i = optind + 1; i < argc; i++) {
		uint64_t off, len, rep = 1, k;
		char *p;

		off = parse_size(argv[i], &p);
		if (*p++ != ':')
			usage();
		len = parse_size(p, &p);
		if (*p == '*')
			rep = strtoull(p + 1, &p, 0);
		for (k = 0; k < rep; k++) {
			struct obj *o = &objs[n];

			if (n == MAX_OBJS)
				usage();
			o->off = off + k * len;
			o->len = len;
			snprintf(o->expect, sizeof(o->expect), "%s", *p == '=' ? p + 1 : "ok");
			o->buf_off = buf_len;
			buf_len += ((o->len + 4095) & ~4095ULL) + GAP;
			n++;
		}
	}

	kfd = open("/dev/kvblk", O_RDWR);
	if (kfd < 0) {
		printf("SKIP: /dev/kvblk: %s\n", strerror(errno));
		return 4;
	}
	tfd = open(argv[optind], O_RDONLY);
	if (tfd < 0) {
		fprintf(stderr, "open %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.flags = flags;
	at.bdev_fd = tfd;
	ret = ioctl(kfd, KVBLK_IOC_ATTACH, &at);
	if (attach_err) {
		CHECK(ret < 0 && errno == errno_of(attach_err),
		      "attach %s: got %s, want %s", argv[optind],
		      ret < 0 ? name_of(errno) : "success", attach_err);
		if (!failures)
			printf("ok: attach %s failed with %s\n", argv[optind], attach_err);
		return failures ? 1 : 0;
	}
	if (ret < 0) {
		fprintf(stderr, "FAIL: attach %s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	printf("attached %s: lba_size %u capacity %llu engine %u engines %#x max_cmd_bytes %u\n",
	       argv[optind], at.lba_size, (unsigned long long)at.capacity,
	       at.engine, at.engines, at.max_cmd_bytes);

	buf = mmap(NULL, buf_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.kind = KVBLK_MEM_HOST;
	reg.addr = (uintptr_t)buf;
	reg.len = buf_len;
	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &reg) < 0) {
		fprintf(stderr, "FAIL: register %" PRIu64 " bytes: %s\n", buf_len,
			strerror(errno));
		return 1;
	}

	for (i = 0; preread && i < n; i++) {
		objs[i].ref = read_ref(argv[optind], &objs[i], i);
		if (!objs[i].ref)
			return 1;
	}
	if (cmd && run(cmd))
		return 1;

	for (r = 0; r < rounds + !!after && n; r++) {
		if (after && r == rounds) {
			if (run(after))
				return 1;
			call_err = NULL;
			for (i = 0; i < n; i++)
				snprintf(objs[i].expect, sizeof(objs[i].expect), "ok");
		}
		memset(buf, GUARD, buf_len);
		memset(descs, 0, sizeof(descs));
		for (i = 0; i < n; i++) {
			descs[i].offset = objs[i].off;
			descs[i].length = objs[i].len;
			descs[i].buf_offset = objs[i].buf_off;
			descs[i].buf_id = reg.buf_id;
			descs[i].tag = i;
		}
		memset(&lm, 0, sizeof(lm));
		lm.size = sizeof(lm);
		lm.nr_descs = n;
		lm.desc_bytes = sizeof(descs[0]);
		lm.descs = (uintptr_t)descs;
		lm.results = (uintptr_t)res;
		lm.result_bytes = sizeof(res[0]);
		if (during_cmd && !r)
			child = during(argv[optind], during_cmd);
		ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
		if (child) {
			int st;

			CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) &&
			      !WEXITSTATUS(st), "-D '%s' failed", during_cmd);
			child = 0;
		}
		if (call_err) {
			CHECK(ret < 0 && errno == errno_of(call_err),
			      "round %d: LOAD_MANY returned %d (%s), want %s",
			      r, ret, ret < 0 ? name_of(errno) : "success", call_err);
			printf("round %d: LOAD_MANY failed with %s, bad_index %d, engine %u\n",
			       r, ret < 0 ? name_of(errno) : "none", lm.bad_index,
			       lm.engine);
			check_guard(buf, buf_len, NULL, 0, "failed call");
			continue;
		}
		if (ret < 0) {
			CHECK(0, "round %d: LOAD_MANY: %s (bad_index %d)", r,
			      strerror(errno), lm.bad_index);
			continue;
		}
		CHECK((uint32_t)ret == lm.nr_ok, "round %d: returned %d, nr_ok %u",
		      r, ret, lm.nr_ok);
		printf("round %d: %u of %d objects ok, engine %u, %llu commands\n",
		       r, lm.nr_ok, n, lm.engine, (unsigned long long)lm.nr_cmds);
		for (i = 0; i < n; i++) {
			/* Long batches: the first object of each run of one status. */
			if (n <= 64 || !i || res[i].status != res[i - 1].status)
				printf("  object %d %" PRIu64 ":%" PRIu64 " status %s bytes %llu\n",
				       i, objs[i].off, objs[i].len, name_of(-res[i].status),
				       (unsigned long long)res[i].bytes);
			CHECK(allowed(objs[i].expect, res[i].status),
			      "round %d object %d: status %s, want %s", r, i,
			      name_of(-res[i].status), objs[i].expect);
			if (res[i].status == 0) {
				CHECK(res[i].bytes == objs[i].len,
				      "object %d: %llu bytes reported", i,
				      (unsigned long long)res[i].bytes);
				check_bytes(argv[optind], buf, &objs[i], i);
			}
		}
		check_guard(buf, buf_len, objs, n, "after the batch");
	}
	if (failures) {
		fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
		return 1;
	}
	printf("PASS\n");
	return 0;
}

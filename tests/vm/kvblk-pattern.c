// SPDX-License-Identifier: MIT
/*
 * kvblk-pattern: writes and checks the kvblk test data pattern (pattern.h).
 *
 *   kvblk-pattern fill FILE SIZE        write a SIZE-byte pattern image
 *   kvblk-pattern check PATH [opts]     read PATH (O_DIRECT) and verify
 *
 * The VM harness builds it on the host into $KVBLK_VM_OUT/bin; guests run the
 * same binary over the 9p root share (exported as $KVBLK_VM_PATTERN_TOOL).
 * Exit status: 0 ok, 1 data mismatch, 2 I/O error or unexpected result,
 * 64 usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pattern.h"

enum { EXIT_MISMATCH = 1, EXIT_IO = 2, EXIT_USAGE = 64 };

struct opts {
	uint64_t offset;
	uint64_t length;	/* 0: to the end */
	uint64_t bs;
	uint64_t align;		/* 0: logical block size (512 for files) */
	unsigned long nr_random;
	unsigned long seed;
	int expect_errno;	/* 0: every read must succeed */
	bool buffered;
	bool quiet;
};

static const struct {
	const char *name;
	int value;
} errno_names[] = {
	{ "EIO", EIO }, { "EINVAL", EINVAL }, { "ENODATA", ENODATA }, { "EILSEQ", EILSEQ },
	{ "EFAULT", EFAULT }, { "ENXIO", ENXIO }, { "EAGAIN", EAGAIN }, { "EPERM", EPERM },
};

static void usage(void)
{
	fprintf(stderr,
		"usage: kvblk-pattern fill FILE SIZE\n"
		"       kvblk-pattern check PATH [-o OFFSET] [-l LENGTH] [-b BS] [-r N [-s SEED]]\n"
		"                                [-a ALIGN] [-e ERRNO] [-B] [-q]\n"
		"  sizes take a K, M or G suffix (powers of 1024)\n"
		"  check reads PATH with O_DIRECT (-B: buffered) and verifies every byte:\n"
		"    -o/-l  device byte range (default: all of PATH)\n"
		"    -b     bytes per read (default 1M)\n"
		"    -r N   N reads at random ALIGN-aligned offsets, random lengths <= BS\n"
		"    -a     alignment of offsets and lengths (default: logical block size)\n"
		"    -e     the range must fail with this errno (EIO or a number): at least\n"
		"           one read fails with it, none fails otherwise, and all data read\n"
		"           is correct\n");
	exit(EXIT_USAGE);
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		usage();
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end)
		usage();
	return v;
}

static int parse_errno(const char *s)
{
	for (size_t i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
		if (!strcmp(s, errno_names[i].name))
			return errno_names[i].value;
	int v = atoi(s);

	if (v <= 0)
		usage();
	return v;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int do_fill(const char *path, uint64_t size)
{
	const size_t chunk = 1 << 20;
	unsigned char *buf = malloc(chunk);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (!buf || fd < 0) {
		fprintf(stderr, "kvblk-pattern: %s: %s\n", path, strerror(errno));
		return EXIT_IO;
	}
	for (uint64_t off = 0; off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;

		kvblk_pattern_fill(buf, off, n);
		if (pwrite(fd, buf, n, off) != (ssize_t)n) {
			fprintf(stderr, "kvblk-pattern: write %s: %s\n", path, strerror(errno));
			return EXIT_IO;
		}
	}
	if (fsync(fd) || close(fd)) {
		fprintf(stderr, "kvblk-pattern: %s: %s\n", path, strerror(errno));
		return EXIT_IO;
	}
	free(buf);
	return 0;
}

/* Size and logical block size of a block device or regular file. */
static int probe(int fd, uint64_t *size, uint64_t *lba)
{
	struct stat st;
	int ssz;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, size) || ioctl(fd, BLKSSZGET, &ssz))
			return -errno;
		*lba = (uint64_t)ssz;
	} else {
		*size = (uint64_t)st.st_size;
		*lba = 512;
	}
	return 0;
}

/* Next value of a small deterministic generator (xorshift64*). */
static uint64_t rnd(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 0x2545f4914f6cdd1dULL;
}

struct tally {
	uint64_t reads, bytes;
	unsigned long failed_expected;
};

/* Reads and checks one range; returns 0 or an EXIT_* code. */
static int check_one(int fd, const char *path, unsigned char *buf, uint64_t off,
		     uint64_t len, const struct opts *o, struct tally *t)
{
	uint64_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, off + done);

		if (n < 0) {
			int err = errno;

			if (o->expect_errno && err == o->expect_errno) {
				t->failed_expected++;
				if (!o->quiet)
					printf("read %s @%" PRIu64 " +%" PRIu64 ": %s (expected)\n",
					       path, off + done, len - done, strerror(err));
				break;
			}
			fprintf(stderr, "kvblk-pattern: read %s @%" PRIu64 " +%" PRIu64 ": %s\n",
				path, off + done, len - done, strerror(err));
			return EXIT_IO;
		}
		if (n == 0) {
			fprintf(stderr, "kvblk-pattern: read %s @%" PRIu64 ": unexpected end of data\n",
				path, off + done);
			return EXIT_IO;
		}
		done += (uint64_t)n;
	}
	t->reads++;
	t->bytes += done;

	ptrdiff_t bad = kvblk_pattern_check(buf, off, done);

	if (bad >= 0) {
		uint64_t at = off + (uint64_t)bad;

		fprintf(stderr, "kvblk-pattern: %s: mismatch at device offset %" PRIu64
			" (0x%" PRIx64 "): got 0x%02x, want 0x%02x (read @%" PRIu64 " +%" PRIu64 ")\n",
			path, at, at, buf[bad], kvblk_pattern_byte(at), off, len);
		return EXIT_MISMATCH;
	}
	return 0;
}

static int do_check(const char *path, struct opts *o)
{
	uint64_t size = 0, lba = 512, end;
	unsigned char *buf;
	struct tally t = { 0 };
	uint64_t state = o->seed ? o->seed : 1;
	int fd, rc = 0;
	double t0;

	fd = open(path, O_RDONLY | (o->buffered ? 0 : O_DIRECT));
	if (fd < 0) {
		fprintf(stderr, "kvblk-pattern: open %s: %s\n", path, strerror(errno));
		return EXIT_IO;
	}
	rc = probe(fd, &size, &lba);
	if (rc) {
		fprintf(stderr, "kvblk-pattern: %s: %s\n", path, strerror(-rc));
		return EXIT_IO;
	}
	if (!o->align)
		o->align = lba;
	end = o->length ? o->offset + o->length : size;
	if (end > size || o->offset >= end || o->bs == 0 || o->bs % o->align) {
		fprintf(stderr, "kvblk-pattern: %s: bad range %" PRIu64 "..%" PRIu64
			" (size %" PRIu64 ") or block size %" PRIu64 " (align %" PRIu64 ")\n",
			path, o->offset, end, size, o->bs, o->align);
		return EXIT_USAGE;
	}
	if (posix_memalign((void **)&buf, 4096, o->bs)) {
		fprintf(stderr, "kvblk-pattern: out of memory\n");
		return EXIT_IO;
	}

	t0 = now_s();
	if (o->nr_random) {
		uint64_t units = (end - o->offset) / o->align;
		uint64_t max_units = o->bs / o->align;

		for (unsigned long i = 0; i < o->nr_random && !rc; i++) {
			uint64_t first = rnd(&state) % units;
			uint64_t n = 1 + rnd(&state) % max_units;

			if (first + n > units)
				n = units - first;
			rc = check_one(fd, path, buf, o->offset + first * o->align, n * o->align, o, &t);
		}
	} else {
		for (uint64_t off = o->offset; off < end && !rc; off += o->bs) {
			uint64_t n = end - off < o->bs ? end - off : o->bs;

			rc = check_one(fd, path, buf, off, n, o, &t);
		}
	}
	double dt = now_s() - t0;

	close(fd);
	free(buf);
	if (rc)
		return rc;
	if (o->expect_errno && !t.failed_expected) {
		fprintf(stderr, "kvblk-pattern: %s: expected %s, but every read succeeded\n",
			path, strerror(o->expect_errno));
		return EXIT_IO;
	}
	if (!o->quiet) {
		printf("check %s: %" PRIu64 " reads, %" PRIu64 " bytes ok", path, t.reads, t.bytes);
		if (o->expect_errno)
			printf(", %lu failed with %s as expected", t.failed_expected,
			       strerror(o->expect_errno));
		printf(" (%.1f MiB/s)\n", dt > 0 ? t.bytes / dt / (1 << 20) : 0.0);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .bs = 1 << 20, .seed = 1 };
	int c;

	if (argc < 3)
		usage();
	if (!strcmp(argv[1], "fill")) {
		if (argc != 4)
			usage();
		return do_fill(argv[2], parse_size(argv[3]));
	}
	if (strcmp(argv[1], "check"))
		usage();

	optind = 3;
	while ((c = getopt(argc, argv, "o:l:b:r:s:a:e:Bq")) != -1) {
		switch (c) {
		case 'o': o.offset = parse_size(optarg); break;
		case 'l': o.length = parse_size(optarg); break;
		case 'b': o.bs = parse_size(optarg); break;
		case 'r': o.nr_random = strtoul(optarg, NULL, 0); break;
		case 's': o.seed = strtoul(optarg, NULL, 0); break;
		case 'a': o.align = parse_size(optarg); break;
		case 'e': o.expect_errno = parse_errno(optarg); break;
		case 'B': o.buffered = true; break;
		case 'q': o.quiet = true; break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	return do_check(argv[2], &o);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_fuzz - an ioctl fuzzer and kill/close storm for kvblk.ko.
 *
 * Fuzz phase: @threads threads share a few /dev/kvblk contexts and, for
 * @iterations operations each, pick at random: open or close a context;
 * ATTACH with random flags, struct sizes and reserved bytes, from the test
 * device, a write-only fd, an O_PATH fd, a pipe, a directory or /dev/null;
 * REGISTER_BUFFER of random kinds, ranges (unaligned, unmapped, read-only,
 * NULL) and reserved bytes; UNREGISTER_BUFFER of random ids; LOAD_MANY with
 * random descriptor counts and contents, descriptor/result sizes and
 * pointers; an ioctl with a random number and size in kvblk's magic on
 * random bytes; munmap and mmap again of the memory it registers; fork, the
 * child using the inherited contexts and exiting or being SIGKILLed. Every
 * call must return (any result is allowed) and the kernel must stay quiet.
 *
 * Storm phase: @kills children that load large batches in a loop and are
 * SIGKILLed at a random moment, and @closes rounds in which one thread
 * closes the context while another is loading through it.
 *
 * Then, with every context closed: the module's reference count and the
 * system's pinned pages are back to their baseline, a fresh context's
 * namespace shows no command in flight, a batch of random objects equals
 * the VM's pattern (tests/vm/pattern.h) byte for byte, and the kernel log
 * of the run has no warning, oops, lockdep, KASAN, UBSAN or leak report.
 *
 * The operation sequence of each thread is a function of the seed (printed
 * first, so `--seed N` repeats a failing run); the interleaving of threads
 * is not.
 *
 * --fail-inject: every call of the fuzz phase into kvblk.ko (each ioctl, and
 * the open and close of a context) runs with the calling thread's
 * /proc/thread-self/fail-nth set to a random N in 1..64: the kernel fails
 * the Nth fault-injection point that this call reaches (an allocation,
 * failslab and fail_page_alloc; a bio, fail_make_request where the disk's
 * make-it-fail is set), whatever those attributes' probabilities are
 * (lib/fault-inject.c, should_fail(); the approach of syzkaller). The call
 * may fail; it must not crash, warn or leak. Mostly kvblk's calls are hit:
 * fail-nth stays armed from the write that arms it until the one that
 * disarms it, so a count that the call did not use up also applies to the
 * few user page faults in between (after a fork, writes to copy-on-write
 * pages: "VM_FAULT_OOM leaked out to the #PF handler", a retried fault) and
 * to the system-call exit work, where glibc's restartable-sequences area is
 * written (a failure there is a SIGSEGV: run with
 * GLIBC_TUNABLES=glibc.pthread.rseq=0, as fault-inject.sh does). The
 * storms and the final checks run without injection. The caller sets the attributes up
 * (tests/vm/cases/fault-inject.sh: failslab and fail_page_alloc including
 * sleeping allocations and order 0). A run in which no call reached its Nth
 * point fails: the injection did not work.
 *
 * --seconds N: the fuzz phase runs for N seconds (each thread stops at its
 * first operation after the deadline) instead of --iterations operations.
 *
 * Usage: kvblk_fuzz [--seed N] [--iterations N | --seconds N] [--threads N]
 *                   [--kills N] [--closes N] [--fail-inject] [DEVICE]
 * DEVICE (default $KVBLK_TEST_DEVICE, else /dev/nvme0n1) holds the VM
 * pattern and is only read. Exit: 0 pass, 1 fail, 4 skip (no /dev/kvblk or
 * device).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "tests/vm/pattern.h"
#include "kvblk_utils.h"

#define SYSFS_ROOT	"/sys/kernel/kvblk"
#define NR_CTX		4
#define ARENA		(2u << 20)	/* per-thread memory it registers */
#define MAX_DESCS	64
#define SETTLE_MS	20000
/*
 * What one LOAD_MANY may write: results for up to max_descs (4096 by
 * default) descriptors at a stride of up to a page. Random calls point their
 * results into such a region, or into g_none, so the kernel never writes
 * over the fuzzer's own memory, whatever the sizes say.
 */
#define RESULTS_SPAN	(4096ul * 4096ul)
#define NONE_SPAN	(1ul << 30)

static const char *g_dev;
static uint64_t g_capacity;	/* of g_dev, bytes */
static uint64_t g_seed;
static atomic_int g_ctx[NR_CTX];
static atomic_ulong g_ops, g_ok, g_children, g_loaded;
static bool g_fail_inject;	/* --fail-inject */
static atomic_ulong g_armed, g_injected;	/* calls run with fail-nth; failed at N */
static uint64_t g_deadline_ms;	/* --seconds: end of the fuzz phase, else 0 */
/* --fail-inject: this thread's (or forked child's) /proc/thread-self/fail-nth. */
static __thread int t_nth_fd = -1;
static unsigned char *g_none;	/* NONE_SPAN bytes of PROT_NONE */

/* ---- helpers --------------------------------------------------------------- */

/* xorshift64*: one stream per thread or child, from the run's seed. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

static void fill_random(uint64_t *s, void *p, size_t len)
{
	unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)rnd(s);
}

/*
 * --fail-inject: opens the calling task's /proc/thread-self/fail-nth (the
 * file names the task that opened it, so a forked child opens its own).
 * Returns 0, or -1 with a message when the kernel has no fault injection.
 */
static int nth_open(void)
{
	if (t_nth_fd >= 0)
		close(t_nth_fd);
	t_nth_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (t_nth_fd < 0)
		fprintf(stderr, "FAIL: --fail-inject: /proc/thread-self/fail-nth: %s (a kernel without CONFIG_FAULT_INJECTION?)\n",
			strerror(errno));
	return t_nth_fd < 0 ? -1 : 0;
}

/* Arms fail-nth with 1..64 for the next call into the kernel (--fail-inject). */
static void nth_arm(uint64_t *s)
{
	char v[16];
	int n;

	if (t_nth_fd < 0)
		return;
	n = snprintf(v, sizeof(v), "%u", (unsigned int)below(s, 1u << below(s, 7)) + 1);
	if (pwrite(t_nth_fd, v, (size_t)n, 0) == n)
		atomic_fetch_add(&g_armed, 1);
}

/*
 * Disarms fail-nth after the call. The file reads 0 when the call reached
 * its Nth fault-injection point, which then failed (the counter runs down
 * to 0 there); whatever it reads, it is set to 0 so that nothing else of
 * this task fails.
 */
static void nth_disarm(void)
{
	char v[16] = "";

	if (t_nth_fd < 0)
		return;
	if (pread(t_nth_fd, v, sizeof(v) - 1, 0) > 0 && atoi(v) == 0)
		atomic_fetch_add(&g_injected, 1);
	if (pwrite(t_nth_fd, "0", 1, 0) != 1)
		fprintf(stderr, "fail-nth: cannot disarm: %s\n", strerror(errno));
}

/* ioctl() on /dev/kvblk, under fail-nth with --fail-inject. */
static int kioctl(uint64_t *s, int fd, unsigned long cmd, void *arg)
{
	int ret, err;

	nth_arm(s);
	ret = ioctl(fd, cmd, arg);
	err = errno;
	nth_disarm();
	errno = err;
	return ret;
}

/* open() of /dev/kvblk, under fail-nth with --fail-inject. */
static int kopen(uint64_t *s)
{
	int fd, err;

	nth_arm(s);
	fd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	err = errno;
	nth_disarm();
	errno = err;
	return fd;
}

/* close() of a context (its release runs here), under fail-nth with --fail-inject. */
static void kclose(uint64_t *s, int fd)
{
	nth_arm(s);
	close(fd);
	nth_disarm();
}

/* Prints and counts the new kernel log records that kmsg_next_bad() flags. */
static int kmsg_scan(int fd)
{
	char msg[1024];
	int bad = 0;

	while (kmsg_next_bad(fd, msg, sizeof(msg)))
		if (bad++ < 20)
			fprintf(stderr, "kernel log: %s\n", msg);
	return bad;
}

/* ---- one random operation ------------------------------------------------- */

struct arena {
	unsigned char *p;	/* ARENA bytes, or NULL while unmapped */
	unsigned char *last;	/* where it was last mapped */
	unsigned char *results;	/* RESULTS_SPAN bytes for LOAD_MANY results */
	/* The last registration that succeeded: well-formed loads use it. */
	int reg_fd;
	uint32_t reg_id;
	uint64_t reg_len;
};

/* A struct size: mostly right, sometimes old, short, long or absurd. */
static uint32_t pick_size(uint64_t *s, uint32_t right)
{
	switch (below(s, 12)) {
	case 0: return 0;
	case 1: return right - 8;
	case 2: return right + 8;
	case 3: return 4096;
	case 4: return (uint32_t)rnd(s);
	default: return right;
	}
}

/* A pointer argument: mostly @good, sometimes NULL, PROT_NONE or kernel. */
static uint64_t pick_ptr(uint64_t *s, const void *good)
{
	switch (below(s, 16)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return 0xffff888000000000ULL;
	case 3: return (uint64_t)(uintptr_t)(g_none + below(s, NONE_SPAN));
	default: return (uint64_t)(uintptr_t)good;
	}
}

static int target_fd(uint64_t *s)
{
	int pfd[2];

	switch (below(s, 12)) {
	case 0: return open(g_dev, O_WRONLY | O_CLOEXEC);
	case 1: return open(g_dev, O_PATH | O_CLOEXEC);
	/*
	 * A directory of devtmpfs, not "/": a child killed during an armed
	 * attach closes its fds at exit with fail-nth still armed, and the
	 * last close of a directory of the VM guests' 9p root then fails its
	 * clunk (every exec after a --fail-inject run failed with EINVAL).
	 */
	case 2: return open("/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	case 3: return open("/dev/null", O_RDONLY | O_CLOEXEC);
	case 4:
		if (pipe2(pfd, O_CLOEXEC))
			return -1;
		close(pfd[1]);
		return pfd[0];
	default: return open(g_dev, O_RDONLY | O_CLOEXEC);
	}
}

static int op_attach(uint64_t *s, int kfd)
{
	struct kvblk_attach a;
	int bfd = target_fd(s), ret;

	memset(&a, 0, sizeof(a));
	if (!below(s, 8))
		fill_random(s, &a, sizeof(a));
	a.size = pick_size(s, sizeof(a));
	a.flags = below(s, 4) ? 0 : (uint32_t)below(s, 8);
	a.bdev_fd = below(s, 20) ? bfd : (int32_t)rnd(s);
	ret = kioctl(s, kfd, KVBLK_IOC_ATTACH, below(s, 20) ? (void *)&a : (void *)1);
	if (bfd >= 0)
		close(bfd);
	return ret;
}

static int op_register(uint64_t *s, int kfd, struct arena *ar)
{
	struct kvblk_buf_reg r;
	uint64_t off = below(s, 4) ? below(s, ARENA / 4096) * 4096 : below(s, ARENA);

	memset(&r, 0, sizeof(r));
	if (!below(s, 10))
		fill_random(s, &r, sizeof(r));
	r.size = pick_size(s, sizeof(r));
	r.kind = below(s, 6) ? KVBLK_MEM_HOST : (uint32_t)below(s, KVBLK_MEM_KIND_MAX + 2);
	r.dmabuf_fd = below(s, 16) ? 0 : (int32_t)rnd(s);
	/* Unmapped: the address it had (registered memory is only ever ours). */
	r.addr = ar->p ? pick_ptr(s, ar->p + off) : (uint64_t)(uintptr_t)(ar->last + off);
	r.len = below(s, 4) ? (below(s, (ARENA - off) / 4096) + 1) * 4096 : rnd(s) >> below(s, 64);
	if (kioctl(s, kfd, KVBLK_IOC_REGISTER_BUFFER, &r))
		return -errno;
	ar->reg_fd = kfd;
	ar->reg_id = r.buf_id;
	ar->reg_len = r.len;
	return (int)r.buf_id;
}

/*
 * A well-formed batch into the last registration (on the context it was
 * made on, which another thread may have closed or replaced meanwhile):
 * 1 to 8 objects of 4 KiB multiples, so that loads run and complete while
 * everything else happens around them.
 */
static int op_load_valid(uint64_t *s, struct arena *ar)
{
	struct kvblk_io_desc d[8];
	struct kvblk_load_many lm = { .size = sizeof(lm) };
	uint32_t n = (uint32_t)below(s, 8) + 1;
	int ret;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t len = (below(s, 16) + 1) * 4096;

		if (len > ar->reg_len)
			len = ar->reg_len;
		d[i] = (struct kvblk_io_desc){
			.offset = below(s, (g_capacity - len) / 4096) * 4096,
			.length = len,
			.buf_offset = below(s, (ar->reg_len - len) / 4096 + 1) * 4096,
			.buf_id = ar->reg_id, .tag = i,
		};
	}
	lm.nr_descs = n;
	lm.desc_bytes = sizeof(d[0]);
	lm.descs = (uintptr_t)d;
	lm.results = (uintptr_t)ar->results;
	lm.result_bytes = sizeof(struct kvblk_desc_result);
	ret = kioctl(s, ar->reg_fd, KVBLK_IOC_LOAD_MANY, &lm);
	if (ret > 0)
		atomic_fetch_add(&g_loaded, (unsigned long)ret);
	return ret;
}

static int op_unregister(uint64_t *s, int kfd)
{
	struct kvblk_buf_unreg u;

	memset(&u, 0, sizeof(u));
	if (!below(s, 10))
		fill_random(s, &u, sizeof(u));
	u.size = pick_size(s, sizeof(u));
	u.buf_id = (uint32_t)below(s, 24);
	return kioctl(s, kfd, KVBLK_IOC_UNREGISTER_BUFFER, &u);
}

static int op_load(uint64_t *s, int kfd, struct arena *ar)
{
	struct kvblk_io_desc d[MAX_DESCS];
	struct kvblk_load_many lm;
	uint32_t n = (uint32_t)below(s, MAX_DESCS + 1);
	int ret;

	for (uint32_t i = 0; i < n; i++) {
		memset(&d[i], 0, sizeof(d[i]));
		if (!below(s, 16)) {
			fill_random(s, &d[i], sizeof(d[i]));
			continue;
		}
		d[i].offset = below(s, 4) ? below(s, 4096) * 4096 : rnd(s) >> below(s, 64);
		d[i].length = below(s, 4) ? (below(s, 32) + 1) * 4096 : below(s, 1 << 20);
		d[i].buf_offset = below(s, 4) ? below(s, 64) * 4096 : rnd(s) >> below(s, 64);
		d[i].buf_id = (uint32_t)below(s, 24);
		d[i].flags = below(s, 16) ? 0 : (uint32_t)rnd(s);
		d[i].tag = i;
	}
	memset(&lm, 0, sizeof(lm));
	if (!below(s, 16))
		fill_random(s, &lm, sizeof(lm));
	lm.size = pick_size(s, sizeof(lm));
	lm.flags = below(s, 8) ? 0 : (uint32_t)rnd(s);
	lm.nr_descs = below(s, 16) ? n : (uint32_t)rnd(s) >> below(s, 32);
	lm.desc_bytes = below(s, 8) ? sizeof(d[0]) : pick_size(s, sizeof(d[0]));
	lm.descs = pick_ptr(s, d);
	lm.results = pick_ptr(s, ar->results);
	lm.result_bytes = below(s, 8) ? sizeof(struct kvblk_desc_result) :
		pick_size(s, sizeof(struct kvblk_desc_result));
	ret = kioctl(s, kfd, KVBLK_IOC_LOAD_MANY, &lm);
	if (ret > 0)
		atomic_fetch_add(&g_loaded, (unsigned long)ret);
	return ret;
}

static int op_raw(uint64_t *s, int kfd, struct arena *ar)
{
	unsigned char buf[8192] __attribute__((aligned(8)));
	unsigned int dir = (unsigned int)below(s, 4);
	unsigned int nr = below(s, 2) ? (unsigned int)below(s, 0x20) : (unsigned int)below(s, 256);
	unsigned int size = (unsigned int)below(s, 4096);
	unsigned long cmd;

	fill_random(s, buf, sizeof(buf));
	/* Sizes that match the real structs make the dispatcher go deeper. */
	if (size > 256 && below(s, 2))
		size = (unsigned int)below(s, 256);
	memcpy(buf, &size, sizeof(size));
	if (nr == _IOC_NR(KVBLK_IOC_LOAD_MANY) && size >= sizeof(struct kvblk_load_many)) {
		/* Results only where writes cannot hurt (see RESULTS_SPAN). */
		uint64_t res = (uint64_t)(uintptr_t)(below(s, 2) ? ar->results : g_none);

		memcpy(buf + offsetof(struct kvblk_load_many, results), &res, sizeof(res));
	}
	cmd = _IOC(dir, KVBLK_IOC_MAGIC, nr, size);
	return kioctl(s, kfd, cmd, below(s, 16) ? (void *)buf : (void *)(uintptr_t)pick_ptr(s, buf));
}

static void op_remap(uint64_t *s, struct arena *ar)
{
	if (ar->p && below(s, 2)) {
		/* Drop the pages, or the whole mapping. */
		if (below(s, 2)) {
			madvise(ar->p, ARENA, MADV_DONTNEED);
			return;
		}
		munmap(ar->p, ARENA);
		ar->p = NULL;
	}
	if (!ar->p) {
		void *p = mmap(NULL, ARENA, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		ar->p = p == MAP_FAILED ? NULL : p;
		if (ar->p)
			ar->last = ar->p;
		if (ar->p && !below(s, 4))
			mprotect(ar->p, ARENA, PROT_READ);
		else if (ar->p)
			memset(ar->p, 0x5a, ARENA);
	}
}

static int pick_ctx(uint64_t *s)
{
	return atomic_load(&g_ctx[below(s, NR_CTX)]);
}

static void one_op(uint64_t *s, struct arena *ar, bool child);

/* A child that uses the inherited contexts; its parent may kill it. */
static void op_fork(uint64_t *s, struct arena *ar)
{
	uint64_t cs = rnd(s) | 1;
	bool kill_it = below(s, 2);
	pid_t pid = fork();

	if (pid < 0)
		return;
	if (pid == 0) {
		if (g_fail_inject && nth_open())
			_exit(1);
		for (int i = 0; i < 40; i++)
			one_op(&cs, ar, true);
		_exit(0);
	}
	atomic_fetch_add(&g_children, 1);
	if (kill_it) {
		usleep((useconds_t)below(s, 5000));
		kill(pid, SIGKILL);
	}
	waitpid(pid, NULL, 0);
}

/*
 * Weights out of 32: mostly registrations and loads (well-formed ones run
 * and complete while the rest happens around them), contexts replaced or
 * closed rarely enough that registrations live for a while. A forked child
 * draws from the first 24 only (no open, close, remap or fork).
 */
static void one_op(uint64_t *s, struct arena *ar, bool child)
{
	unsigned int slot = (unsigned int)below(s, NR_CTX);
	unsigned int op = (unsigned int)below(s, child ? 24 : 32);
	int ret = 0, fd;

	if (op < 3) {
		ret = op_attach(s, pick_ctx(s));
	} else if (op < 8) {
		ret = op_register(s, pick_ctx(s), ar);
	} else if (op < 10) {
		ret = op_unregister(s, pick_ctx(s));
	} else if (op < 13) {
		ret = op_load(s, pick_ctx(s), ar);
	} else if (op < 21) {
		ret = ar->reg_id ? op_load_valid(s, ar) : op_load(s, pick_ctx(s), ar);
	} else if (op < 24) {
		ret = op_raw(s, pick_ctx(s), ar);
	} else if (op < 26) {
		fd = kopen(s);
		if (fd >= 0) {
			int old = atomic_exchange(&g_ctx[slot], fd);

			if (old >= 0)
				kclose(s, old);
		}
	} else if (op < 27) {
		fd = atomic_exchange(&g_ctx[slot], -1);
		if (fd >= 0)
			kclose(s, fd);
	} else if (op < 30) {
		op_remap(s, ar);
	} else if (!below(s, 4)) {
		op_fork(s, ar);
	}
	if (!child) {
		atomic_fetch_add(&g_ops, 1);
		if (ret >= 0)
			atomic_fetch_add(&g_ok, 1);
	}
}

struct fuzzer {
	pthread_t t;
	unsigned int idx;
	unsigned long iterations;
};

static void *fuzz_main(void *arg)
{
	struct fuzzer *f = arg;
	uint64_t s = (g_seed ^ (0x9e3779b97f4a7c15ULL * (f->idx + 1))) | 1;
	struct arena ar = { NULL };

	ar.results = mmap(NULL, RESULTS_SPAN, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ar.results == MAP_FAILED)
		return NULL;
	if (g_fail_inject && nth_open())
		return NULL;
	op_remap(&s, &ar);
	for (unsigned long i = 0; g_deadline_ms ? now_ms() < g_deadline_ms : i < f->iterations; i++)
		one_op(&s, &ar, false);
	if (t_nth_fd >= 0)
		close(t_nth_fd);
	if (ar.p)
		munmap(ar.p, ARENA);
	munmap(ar.results, RESULTS_SPAN);
	return NULL;
}

/* ---- storm: SIGKILL and close during batches -------------------------------- */

struct loader {
	int kfd;
	uint32_t buf_id;
	uint64_t capacity;
	atomic_int started;
};

/* Big batches over the whole device, forever (until killed or closed). */
static void load_forever(int kfd, uint32_t buf_id, uint64_t capacity, atomic_int *started)
{
	struct kvblk_io_desc d[16];
	struct kvblk_desc_result res[16];
	struct kvblk_load_many lm;

	for (unsigned int i = 0; i < 16; i++) {
		d[i] = (struct kvblk_io_desc){
			.offset = (i * 7919ULL * 65536) % (capacity - 65536) & ~4095ULL,
			.length = 65536, .buf_offset = i * 65536ULL,
			.buf_id = buf_id, .tag = i,
		};
	}
	for (;;) {
		memset(&lm, 0, sizeof(lm));
		lm.size = sizeof(lm);
		lm.nr_descs = 16;
		lm.desc_bytes = sizeof(d[0]);
		lm.descs = (uintptr_t)d;
		lm.results = (uintptr_t)res;
		lm.result_bytes = sizeof(res[0]);
		if (started)
			atomic_store(started, 1);
		/* The count of objects loaded, or -1: the context is gone. */
		if (ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm) < 0)
			return;
	}
}

/* Open, attach, register 1 MiB: the context fd (buffer id in *id), or -errno. */
static int ready_ctx(uint32_t *id, uint64_t *capacity, void **mem)
{
	struct kvblk_attach a = { .size = sizeof(a) };
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST };
	int kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC), bfd, ret;
	void *p;

	if (kfd < 0)
		return -errno;
	bfd = open(g_dev, O_RDONLY | O_CLOEXEC);
	if (bfd < 0) {
		ret = -errno;
		close(kfd);
		return ret;
	}
	a.bdev_fd = bfd;
	ret = ioctl(kfd, KVBLK_IOC_ATTACH, &a) ? -errno : 0;
	close(bfd);
	p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!ret && p == MAP_FAILED)
		ret = -ENOMEM;
	if (!ret) {
		r.addr = (uintptr_t)p;
		r.len = 1 << 20;
		ret = ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &r) ? -errno : 0;
	}
	if (ret) {
		close(kfd);
		return ret;
	}
	*id = r.buf_id;
	*capacity = a.capacity;
	if (mem)
		*mem = p;
	return kfd;
}

/* Children killed at a random moment of their batches (after the first starts). */
static int storm_kills(uint64_t *s, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		int status, pfd[2];
		char c;
		pid_t pid;

		if (pipe2(pfd, O_CLOEXEC))
			return -errno;
		pid = fork();
		if (pid < 0)
			return -errno;
		if (pid == 0) {
			uint64_t cap;
			uint32_t id;
			int kfd = ready_ctx(&id, &cap, NULL);

			if (kfd < 0)
				_exit(3);
			if (write(pfd[1], "x", 1) != 1)
				_exit(4);
			load_forever(kfd, id, cap, NULL);
			_exit(2);
		}
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1)
			c = 0;	/* it exited: the status below says why */
		close(pfd[0]);
		usleep((useconds_t)below(s, 20000));
		kill(pid, SIGKILL);
		if (waitpid(pid, &status, 0) != pid)
			return -errno;
		if (WIFEXITED(status)) {
			fprintf(stderr, "FAIL: storm child %u exited %d before its kill\n", i,
				WEXITSTATUS(status));
			return -EIO;
		}
	}
	return 0;
}

static void *loader_main(void *arg)
{
	struct loader *l = arg;

	load_forever(l->kfd, l->buf_id, l->capacity, &l->started);
	return NULL;
}

static int storm_closes(uint64_t *s, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		struct loader l = { 0 };
		void *mem = NULL;
		pthread_t t;
		int kfd = ready_ctx(&l.buf_id, &l.capacity, &mem);

		if (kfd < 0) {
			fprintf(stderr, "FAIL: storm context: %s\n", strerror(-kfd));
			return kfd;
		}
		l.kfd = kfd;
		if (pthread_create(&t, NULL, loader_main, &l))
			return -EAGAIN;
		while (!atomic_load(&l.started))
			usleep(100);
		usleep((useconds_t)below(s, 20000));
		/* The loader's ioctl in flight holds the file; the next one gets EBADF. */
		close(kfd);
		pthread_join(t, NULL);
		munmap(mem, 1 << 20);
	}
	return 0;
}

/* ---- the end state --------------------------------------------------------- */

/* The /sys/kernel/kvblk/<disk> directory of @bdev_fd's disk, or "". */
static void ns_dir(int bdev_fd, char *out, size_t len)
{
	char want[32], path[PATH_MAX], got[64];
	struct dirent *de;
	struct stat st;
	DIR *d;

	out[0] = '\0';
	if (fstat(bdev_fd, &st))
		return;
	snprintf(want, sizeof(want), "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	d = opendir(SYSFS_ROOT);
	if (!d)
		return;
	while ((de = readdir(d))) {
		int fd;
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), SYSFS_ROOT "/%s/dev", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, got, sizeof(got) - 1);
		close(fd);
		if (n > 0) {
			got[n] = '\0';
			got[strcspn(got, "\n")] = '\0';
			if (!strcmp(got, want)) {
				snprintf(out, len, SYSFS_ROOT "/%s", de->d_name);
				break;
			}
		}
	}
	closedir(d);
}

/* Waits until @fn() == @want (bounded); the last value. */
static long long settle(long long (*fn)(void), long long want)
{
	uint64_t end = now_ms() + SETTLE_MS;
	long long v;

	while ((v = fn()) != want && now_ms() < end)
		usleep(50000);
	return v;
}

/* A batch of 256 random objects equals the pattern; 0 or 1. */
static int final_batch(uint64_t *s)
{
	enum { N = 256, OBJ_MAX = 64 << 10 };
	static struct kvblk_io_desc d[N];
	static struct kvblk_desc_result res[N];
	struct kvblk_load_many lm = { .size = sizeof(lm) };
	char dir[PATH_MAX], path[PATH_MAX + 32];
	unsigned char *mem;
	uint32_t id;
	uint64_t cap;
	int kfd, bfd, bad = 0;

	kfd = ready_ctx(&id, &cap, (void **)&mem);
	if (kfd < 0) {
		fprintf(stderr, "FAIL: final context: %s\n", strerror(-kfd));
		return 1;
	}
	bfd = open(g_dev, O_RDONLY | O_CLOEXEC);
	ns_dir(bfd, dir, sizeof(dir));
	close(bfd);
	snprintf(path, sizeof(path), "%s/stats/inflight", dir);
	if (!dir[0] || read_ll(path) != 0) {
		fprintf(stderr, "FAIL: %s: %lld commands in flight with one idle context\n",
			path, read_ll(path));
		bad = 1;
	}
	/* Objects of 4 KiB multiples packed into the 1 MiB buffer. */
	uint64_t at = 0;
	unsigned int n = 0;

	while (n < N) {
		uint64_t len = (below(s, OBJ_MAX / 4096) + 1) * 4096;

		if (at + len > (1 << 20))
			break;
		d[n] = (struct kvblk_io_desc){
			.offset = below(s, (cap - len) / 4096) * 4096, .length = len,
			.buf_offset = at, .buf_id = id, .tag = n,
		};
		at += len;
		n++;
	}
	memset(mem, 0xa5, 1 << 20);
	lm.nr_descs = n;
	lm.desc_bytes = sizeof(d[0]);
	lm.descs = (uintptr_t)d;
	lm.results = (uintptr_t)res;
	lm.result_bytes = sizeof(res[0]);
	if (ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm) < 0) {
		fprintf(stderr, "FAIL: final LOAD_MANY: %s\n", strerror(errno));
		close(kfd);
		return 1;
	}
	for (unsigned int i = 0; i < n; i++) {
		ptrdiff_t at_bad = kvblk_pattern_check(mem + d[i].buf_offset, d[i].offset,
						       d[i].length);

		if (res[i].status || res[i].bytes != d[i].length || at_bad >= 0) {
			if (bad++ < 10)
				fprintf(stderr, "FAIL: final object %u (offset %llu, %llu bytes): status %d, bytes %llu, first wrong byte %td\n",
					i, (unsigned long long)d[i].offset,
					(unsigned long long)d[i].length, res[i].status,
					(unsigned long long)res[i].bytes, at_bad);
		}
	}
	if (lm.nr_ok != n) {
		fprintf(stderr, "FAIL: final batch nr_ok %u of %u\n", lm.nr_ok, n);
		bad++;
	}
	close(kfd);
	munmap(mem, 1 << 20);
	printf("final batch: %u objects, %s\n", n, bad ? "WRONG" : "byte-exact");
	return bad ? 1 : 0;
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "seed", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'i' },
		{ "threads", required_argument, NULL, 't' },
		{ "kills", required_argument, NULL, 'k' },
		{ "closes", required_argument, NULL, 'c' },
		{ "fail-inject", no_argument, NULL, 'f' },
		{ "seconds", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long iterations = 2000, threads = 4, kills = 200, closes = 200, seconds = 0;
	long long pins0, refs0, v;
	uint64_t t0;
	struct fuzzer *f;
	int c, kmsg, rc = 0;
	uint64_t s;

	g_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': g_seed = strtoull(optarg, NULL, 0); break;
		case 'i': iterations = strtoul(optarg, NULL, 0); break;
		case 't': threads = strtoul(optarg, NULL, 0); break;
		case 'k': kills = strtoul(optarg, NULL, 0); break;
		case 'c': closes = strtoul(optarg, NULL, 0); break;
		case 'f': g_fail_inject = true; break;
		case 'S': seconds = strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s [--seed N] [--iterations N | --seconds N] [--threads N] [--kills N] [--closes N] [--fail-inject] [DEVICE]\n",
				argv[0]);
			return 2;
		}
	}
	g_dev = optind < argc ? argv[optind] : getenv("KVBLK_TEST_DEVICE");
	if (!g_dev || !*g_dev)
		g_dev = "/dev/nvme0n1";
	if (threads < 1 || threads > 64) {
		fprintf(stderr, "--threads: 1 to 64\n");
		return 2;
	}
	if (access(KVBLK_NODE, F_OK) || access(g_dev, R_OK)) {
		printf("SKIP: %s or %s missing\n", KVBLK_NODE, g_dev);
		return 4;
	}
	if (seconds)
		printf("kvblk_fuzz --seed 0x%016" PRIx64 " --seconds %lu", g_seed, seconds);
	else
		printf("kvblk_fuzz --seed 0x%016" PRIx64 " --iterations %lu", g_seed, iterations);
	printf(" --threads %lu --kills %lu --closes %lu%s %s\n",
	       threads, kills, closes, g_fail_inject ? " --fail-inject" : "", g_dev);
	fflush(stdout);
	s = g_seed | 1;
	kmsg = kmsg_open();
	g_none = mmap(NULL, NONE_SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (g_none == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	{
		uint32_t id;
		void *mem;
		int kfd = ready_ctx(&id, &g_capacity, &mem);

		if (kfd < 0) {
			fprintf(stderr, "FAIL: first context on %s: %s\n", g_dev, strerror(-kfd));
			return 1;
		}
		close(kfd);
		munmap(mem, 1 << 20);
	}
	pins0 = pins_outstanding();
	refs0 = module_refcnt();
	signal(SIGPIPE, SIG_IGN);

	t0 = now_ms();
	if (seconds)
		g_deadline_ms = t0 + seconds * 1000;
	for (int i = 0; i < NR_CTX; i++)
		atomic_store(&g_ctx[i], open(KVBLK_NODE, O_RDWR | O_CLOEXEC));
	f = calloc(threads, sizeof(*f));
	for (unsigned long i = 0; i < threads; i++) {
		f[i].idx = (unsigned int)i;
		f[i].iterations = iterations;
		if (pthread_create(&f[i].t, NULL, fuzz_main, &f[i])) {
			fprintf(stderr, "FAIL: pthread_create\n");
			return 1;
		}
	}
	for (unsigned long i = 0; i < threads; i++)
		pthread_join(f[i].t, NULL);
	for (int i = 0; i < NR_CTX; i++) {
		int fd = atomic_exchange(&g_ctx[i], -1);

		if (fd >= 0)
			close(fd);
	}
	printf("fuzz: %lu operations (%lu returned >= 0, %lu objects loaded), %lu forked children, %" PRIu64 " ms\n",
	       atomic_load(&g_ops), atomic_load(&g_ok), atomic_load(&g_loaded),
	       atomic_load(&g_children), now_ms() - t0);
	if (g_fail_inject) {
		printf("fail-nth: %lu calls armed, %lu failed at their Nth fault-injection point\n",
		       atomic_load(&g_armed), atomic_load(&g_injected));
		if (!atomic_load(&g_injected)) {
			fprintf(stderr, "FAIL: --fail-inject: no call reached its Nth point (failslab and fail_page_alloc set up?)\n");
			rc = 1;
		}
	}

	t0 = now_ms();
	if (storm_kills(&s, kills))
		rc = 1;
	printf("storm: %lu children SIGKILLed during batches, %" PRIu64 " ms\n", kills, now_ms() - t0);
	t0 = now_ms();
	if (storm_closes(&s, closes))
		rc = 1;
	printf("storm: %lu contexts closed during batches, %" PRIu64 " ms\n", closes, now_ms() - t0);
	fflush(stdout);

	v = settle(module_refcnt, refs0);
	if (v != refs0) {
		fprintf(stderr, "FAIL: /sys/module/kvblk/refcnt %lld, baseline %lld\n", v, refs0);
		rc = 1;
	}
	v = settle(pins_outstanding, pins0);
	if (v != pins0) {
		fprintf(stderr, "FAIL: pinned pages outstanding %lld, baseline %lld\n", v, pins0);
		rc = 1;
	}
	rc |= final_batch(&s);
	if (kmsg >= 0 && kmsg_scan(kmsg)) {
		fprintf(stderr, "FAIL: the kernel log has reports (above)\n");
		rc = 1;
	}
	printf("%s (seed 0x%016" PRIx64 ")\n", rc ? "FAIL" : "PASS", g_seed);
	return rc;
}

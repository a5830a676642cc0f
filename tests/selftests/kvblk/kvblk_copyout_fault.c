// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_copyout_fault - an ioctl never faults on its argument while it holds
 * its context's lock (review L5), for tests/selftests/kvblk/vm-copyout-fault.sh.
 *
 * usage: kvblk_copyout_fault DEV
 *
 * KVBLK_IOC_ATTACH (of DEV, default engine) and then
 * KVBLK_IOC_REGISTER_BUFFER (1 MiB of anonymous memory), each with its
 * argument struct on a page registered with userfaultfd for write-protect
 * faults, present and write-protected: the ioctl reads its struct without a
 * fault, and its first write to it, the copy-out of its results, faults to
 * this process. The fault is held: meanwhile another thread calls
 * KVBLK_IOC_CHECK_BUFFER on the same context for buffer id 0, which never
 * exists: kvblk looks it up under ctx->lock and returns ENOENT. Only once
 * that call has returned, or LIMIT_S seconds passed, is the fault resolved
 * (the page write-enabled).
 *
 * kvblk writes each struct back once before it takes the lock, so the fault
 * comes there, and under the lock only with page faults disabled
 * (kmod/uabi.c, kvblk_copy_out_locked()): the CHECK_BUFFER returns while the
 * fault is held, the held ioctl then succeeds. Had the first write come
 * under the lock, the CHECK_BUFFER would wait for a lock held by an ioctl
 * that waits for this process to serve its fault: that is reported as FAIL
 * after LIMIT_S seconds, and the fault is resolved then, so that both calls
 * end and the program exits instead of hanging.
 *
 * Prints each step; exit 0 pass, 1 fail, 4 skip (no /dev/kvblk, no
 * userfaultfd write-protection for anonymous memory).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/kvblk.h>

#include "kvblk_utils.h"

#define LIMIT_S		5	/* the lock-taking ioctl takes microseconds */
#define FAULT_WAIT_S	30	/* for the held ioctl to reach its copy-out */
#define BUF_LEN		(1 << 20)

static int kfd;

struct call {
	unsigned long req;
	void *arg;
	int ret, err;
	int done_fd;		/* written once the call returned */
};

static void *call_thread(void *p)
{
	struct call *c = p;
	char one = 1;

	c->ret = ioctl(kfd, c->req, c->arg);
	c->err = errno;
	if (write(c->done_fd, &one, 1) != 1)
		abort();
	return NULL;
}

/* Seconds-bounded wait for @fd to become readable: 1 readable, 0 not. */
static int wait_readable(int fd, int seconds)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int ret;

	do {
		ret = poll(&pfd, 1, seconds * 1000);
	} while (ret < 0 && errno == EINTR);
	return ret == 1;
}

static int set_wp(int ufd, void *pg, size_t len, int on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)pg, .len = len },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	return ioctl(ufd, UFFDIO_WRITEPROTECT, &wp);
}

/*
 * Runs ioctl @req with @arg, which lies on the write-protected page @pg,
 * holds its write fault while a CHECK_BUFFER on the same context runs, and
 * returns the number of failed checks. *@ret, *@err: the held ioctl's.
 */
static int held_ioctl(int ufd, unsigned char *pg, size_t psz, unsigned long req,
		      const char *what, int *ret, int *err)
{
	struct kvblk_buf_check chk = { .size = sizeof(chk), .buf_id = 0 };
	struct call held = { .req = req, .arg = pg };
	struct call probe = { .req = KVBLK_IOC_CHECK_BUFFER, .arg = &chk };
	int held_pipe[2], probe_pipe[2], bad = 0, got;
	struct pollfd pfd[2];
	pthread_t th, tp;
	struct uffd_msg msg;
	uint64_t t0;

	if (pipe(held_pipe) || pipe(probe_pipe))
		return 1;
	held.done_fd = held_pipe[1];
	probe.done_fd = probe_pipe[1];
	if (set_wp(ufd, pg, psz, 1)) {
		fprintf(stderr, "FAIL: %s: UFFDIO_WRITEPROTECT: %s\n", what,
			strerror(errno));
		return 1;
	}
	if (pthread_create(&th, NULL, call_thread, &held))
		return 1;

	/* The held ioctl's first write to its struct, or its end. */
	pfd[0] = (struct pollfd){ .fd = ufd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = held_pipe[0], .events = POLLIN };
	got = poll(pfd, 2, FAULT_WAIT_S * 1000);
	if (got <= 0 || !(pfd[0].revents & POLLIN)) {
		fprintf(stderr, "FAIL: %s: %s without a write-protect fault on its argument: the test proves nothing\n",
			what, got > 0 ? "ended" : "no fault in 30 s and not ended");
		set_wp(ufd, pg, psz, 0);
		pthread_join(th, NULL);
		return 1;
	}
	if (read(ufd, &msg, sizeof(msg)) != sizeof(msg) ||
	    msg.event != UFFD_EVENT_PAGEFAULT ||
	    !(msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP)) {
		fprintf(stderr, "FAIL: %s: the userfaultfd message is not a write-protect fault\n",
			what);
		set_wp(ufd, pg, psz, 0);
		pthread_join(th, NULL);
		return 1;
	}
	printf("%s: write-protect fault at +%llu of its argument's page: held\n",
	       what, (unsigned long long)(msg.arg.pagefault.address - (uintptr_t)pg));
	fflush(stdout);

	/* Held: another ioctl of the context that takes ctx->lock. */
	t0 = now_ms();
	if (pthread_create(&tp, NULL, call_thread, &probe))
		return 1;
	if (wait_readable(probe_pipe[0], LIMIT_S)) {
		printf("%s: CHECK_BUFFER on the same context returned in %llu ms while the fault was held\n",
		       what, (unsigned long long)(now_ms() - t0));
	} else {
		fprintf(stderr, "FAIL: %s: CHECK_BUFFER on the same context did not return within %d s while the fault was held: %s took ctx->lock before it wrote its argument (review L5: a fault under the lock blocks the context's other threads until the fault is served); resolving the fault now\n",
			what, LIMIT_S, what);
		bad++;
	}
	fflush(stdout);
	if (set_wp(ufd, pg, psz, 0)) {
		fprintf(stderr, "FAIL: %s: UFFDIO_WRITEPROTECT (resolve): %s\n",
			what, strerror(errno));
		return bad + 1;
	}
	pthread_join(th, NULL);
	pthread_join(tp, NULL);
	if (probe.ret != -1 || probe.err != ENOENT) {
		fprintf(stderr, "FAIL: %s: CHECK_BUFFER of id 0: %d (%s), want ENOENT\n",
			what, probe.ret, strerror(probe.err));
		bad++;
	}
	/* The fault was the only one: the write under the lock did not fault. */
	if (wait_readable(ufd, 0)) {
		fprintf(stderr, "FAIL: %s: a second fault on its argument\n", what);
		bad++;
	}
	*ret = held.ret;
	*err = held.err;
	close(held_pipe[0]);
	close(held_pipe[1]);
	close(probe_pipe[0]);
	close(probe_pipe[1]);
	return bad;
}

int main(int argc, char **argv)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { 0 };
	struct kvblk_attach *a;
	struct kvblk_buf_reg *r;
	size_t psz = page_size();
	unsigned char *pg, *mem;
	int bfd, ufd, ret, err, bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: kvblk_copyout_fault DEV\n");
		return 2;
	}
	/* A deadlock the checks below do not resolve must not hang the VM. */
	alarm(120);
	kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	bfd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (kfd < 0 || bfd < 0) {
		printf("SKIP: open %s or %s: %s\n", KVBLK_NODE, argv[1], strerror(errno));
		return 4;
	}
	ufd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (ufd < 0 || ioctl(ufd, UFFDIO_API, &api)) {
		printf("SKIP: userfaultfd: %s\n", strerror(errno));
		return 4;
	}
	if (!(api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP)) {
		printf("SKIP: userfaultfd without write-protect faults\n");
		return 4;
	}
	pg = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		  -1, 0);
	mem = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (pg == MAP_FAILED || mem == MAP_FAILED)
		return 1;
	memset(pg, 0, psz);	/* present: only writes fault */
	reg.range.start = (uintptr_t)pg;
	reg.range.len = psz;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	if (ioctl(ufd, UFFDIO_REGISTER, &reg)) {
		printf("SKIP: UFFDIO_REGISTER_MODE_WP on anonymous memory: %s\n",
		       strerror(errno));
		return 4;
	}

	a = (struct kvblk_attach *)pg;
	a->size = sizeof(*a);
	a->bdev_fd = bfd;
	bad += held_ioctl(ufd, pg, psz, KVBLK_IOC_ATTACH, "ATTACH", &ret, &err);
	if (ret) {
		fprintf(stderr, "FAIL: ATTACH %s: %s\n", argv[1], strerror(err));
		return 1;
	}
	printf("ATTACH: ok, target %u, lba_size %u\n", a->target, a->lba_size);

	memset(pg, 0, psz);	/* written back: write-enabled until re-protected */
	r = (struct kvblk_buf_reg *)pg;
	r->size = sizeof(*r);
	r->kind = KVBLK_MEM_HOST;
	r->addr = (uintptr_t)mem;
	r->len = BUF_LEN;
	bad += held_ioctl(ufd, pg, psz, KVBLK_IOC_REGISTER_BUFFER,
			  "REGISTER_BUFFER", &ret, &err);
	if (ret) {
		fprintf(stderr, "FAIL: REGISTER_BUFFER: %s\n", strerror(err));
		return 1;
	}
	if (!r->buf_id) {
		fprintf(stderr, "FAIL: REGISTER_BUFFER: buf_id 0 written back\n");
		bad++;
	}
	printf("REGISTER_BUFFER: ok, buf_id %u\n", r->buf_id);
	close(kfd);
	printf("%s\n", bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}

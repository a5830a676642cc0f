// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_fault_hold - a PRP batch held in a page fault that its own process
 * serves (review-2 N3), for tests/selftests/kvblk/vm-fault-removal.sh.
 *
 * usage: kvblk_fault_hold [-r] DEV   (stdin: a line when the fault may be served)
 *
 * Attaches DEV with the PRP engine and registers 1 MiB of anonymous memory
 * (pinned). Then the second half of that range is mapped again
 * (MAP_FIXED: fresh, never touched) and registered with userfaultfd for
 * missing pages, and a thread loads two objects of 64 KiB, one into each
 * half. Before kvblk submits a command it compares the range's pages with
 * the ones it pinned (kmod/batch_check.c), which faults on the second half:
 * the load waits for this process to serve the fault. When the fault is
 * read from the userfaultfd this prints "FAULTED" and waits for a line on
 * stdin: meanwhile the caller removes the PCI function (unbinds nvme),
 * which must not wait for this load. Then the fault is served with zero
 * pages, and the load must end with ESTALE naming descriptor 0 (the first
 * into the buffer whose range no longer maps its pinned pages) or ENODEV
 * (the function went away before the batch entered it); a second load with
 * ENODEV. Prints each
 * outcome; exit 0 pass, 1 fail, 4 skip.
 *
 * -r: the held call is a registration instead. After the PRP attach, 1 MiB
 * of fresh anonymous memory is registered with userfaultfd for missing
 * pages and a thread registers it with kvblk as KVBLK_MEM_P2PDMA. kvblk
 * pins the range's first page to see whether it is P2PDMA memory (it pins
 * before it can tell), which faults: the registration waits for this
 * process. "FAULTED", a line on stdin (the caller unbinds nvme meanwhile),
 * then the fault is served and the registration must end with EINVAL (the
 * page is not P2PDMA memory). Skips where the module has no P2PDMA
 * registrations (GET_FEATURES lacks KVBLK_FEAT_MEM_P2PDMA).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
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

#define LEN	(1 << 20)
#define OBJ	(64 << 10)

static int kfd;
static struct kvblk_load_many lm;
static struct kvblk_io_desc d[2];
static struct kvblk_desc_result res[2];
static int load_ret, load_errno;

static struct kvblk_buf_reg preg = { .size = sizeof(preg), .kind = KVBLK_MEM_P2PDMA };
static volatile int call_done;

/* The held call: ioctl @held_req on @held_arg, from its own thread. */
static unsigned long held_req;
static void *held_arg;

static void *held_call(void *arg)
{
	(void)arg;
	load_ret = ioctl(kfd, held_req, held_arg);
	load_errno = errno;
	call_done = 1;
	return NULL;
}

/* Waits up to 30 s for a fault on @ufd while the call has not ended. */
static int wait_fault(int ufd, struct uffd_msg *msg)
{
	struct pollfd pfd = { .fd = ufd, .events = POLLIN };
	int i;

	for (i = 0; i < 300; i++) {
		if (poll(&pfd, 1, 100) == 1)
			return read(ufd, msg, sizeof(*msg)) == sizeof(*msg) &&
			       msg->event == UFFD_EVENT_PAGEFAULT ? 0 : -1;
		if (call_done) {
			fprintf(stderr, "FAIL: the call ended without a fault: %d (%s)\n",
				load_ret, load_ret ? strerror(load_errno) : "ok");
			return -1;
		}
	}
	fprintf(stderr, "FAIL: the call did not fault on the userfaultfd range in 30 s\n");
	return -1;
}

/* Registers [@addr, @addr + @len) with @ufd for missing pages: 0 or 1 (reported). */
static int uffd_register_missing(int ufd, void *addr, size_t len)
{
	struct uffdio_register reg = { 0 };

	reg.range.start = (uintptr_t)addr;
	reg.range.len = len;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(ufd, UFFDIO_REGISTER, &reg)) {
		fprintf(stderr, "FAIL: UFFDIO_REGISTER: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}

/*
 * Starts the held call (ioctl @req on @arg) in a thread, waits for its fault
 * on @ufd, prints "FAULTED at +N of @what" (N from @base), waits for a line
 * on stdin, then serves [@serve, @serve + @len) with zero pages and joins the
 * thread: 0, or 1 (reported).
 */
static int hold_then_serve(int ufd, unsigned long req, void *arg, const unsigned char *base,
			   const char *what, void *serve, size_t len)
{
	struct uffdio_zeropage zp = { 0 };
	struct uffd_msg msg;
	pthread_t th;
	char line[16];

	held_req = req;
	held_arg = arg;
	if (pthread_create(&th, NULL, held_call, NULL))
		return 1;
	if (wait_fault(ufd, &msg))
		return 1;
	printf("FAULTED at +%llu of %s\n",
	       (unsigned long long)(msg.arg.pagefault.address - (uintptr_t)base), what);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		printf("note: stdin closed: serving the fault\n");
	else
		printf("serving the fault\n");
	fflush(stdout);

	zp.range.start = (uintptr_t)serve;
	zp.range.len = len;
	if (ioctl(ufd, UFFDIO_ZEROPAGE, &zp)) {
		fprintf(stderr, "FAIL: UFFDIO_ZEROPAGE: %s\n", strerror(errno));
		return 1;
	}
	pthread_join(th, NULL);
	return 0;
}

/* -r: a P2PDMA registration held in the fault of its range's first page. */
static int hold_register(int ufd)
{
	unsigned char *mem;
	__u64 feat = 0;

	if (ioctl(kfd, KVBLK_IOC_GET_FEATURES, &feat)) {
		fprintf(stderr, "FAIL: GET_FEATURES: %s\n", strerror(errno));
		return 1;
	}
	if (!(feat & KVBLK_FEAT_MEM_P2PDMA)) {
		printf("SKIP: this module has no P2PDMA registrations (no KVBLK_FEAT_MEM_P2PDMA)\n");
		return 4;
	}
	mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 1;
	if (uffd_register_missing(ufd, mem, LEN))
		return 1;
	preg.addr = (uintptr_t)mem;
	preg.len = LEN;
	if (hold_then_serve(ufd, KVBLK_IOC_REGISTER_BUFFER, &preg, mem,
			    "the range registered as P2PDMA memory", mem, LEN))
		return 1;
	printf("register: %d (%s)\n", load_ret,
	       load_ret ? strerror(load_errno) : "ok");
	if (load_ret >= 0 || load_errno != EINVAL) {
		fprintf(stderr, "FAIL: want EINVAL (anonymous memory is not P2PDMA memory)\n");
		printf("FAIL\n");
		return 1;
	}
	close(kfd);
	printf("PASS\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct kvblk_attach a = { .size = sizeof(a), .flags = KVBLK_ATTACH_F_ENGINE_PRP };
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST };
	struct uffdio_api api = { .api = UFFD_API };
	unsigned char *mem, *half;
	const char *dev;
	int bfd, ufd, i, bad = 0;
	bool reg_mode;

	reg_mode = argc == 3 && !strcmp(argv[1], "-r");
	if (argc != 2 && !reg_mode) {
		fprintf(stderr, "usage: kvblk_fault_hold [-r] DEV\n");
		return 2;
	}
	dev = argv[argc - 1];
	kfd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	bfd = open(dev, O_RDONLY | O_CLOEXEC);
	if (kfd < 0 || bfd < 0) {
		printf("SKIP: open /dev/kvblk or %s: %s\n", dev, strerror(errno));
		return 4;
	}
	ufd = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (ufd < 0 || ioctl(ufd, UFFDIO_API, &api)) {
		printf("SKIP: userfaultfd: %s\n", strerror(errno));
		return 4;
	}
	a.bdev_fd = bfd;
	if (ioctl(kfd, KVBLK_IOC_ATTACH, &a)) {
		fprintf(stderr, "FAIL: attach %s (PRP): %s\n", dev, strerror(errno));
		return 1;
	}
	if (reg_mode)
		return hold_register(ufd);
	mem = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED)
		return 1;
	r.addr = (uintptr_t)mem;
	r.len = LEN;
	if (ioctl(kfd, KVBLK_IOC_REGISTER_BUFFER, &r)) {
		fprintf(stderr, "FAIL: register: %s\n", strerror(errno));
		return 1;
	}
	/* The second half: fresh pages nobody touched, faults served here. */
	half = mmap(mem + LEN / 2, LEN / 2, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (half != mem + LEN / 2) {
		fprintf(stderr, "FAIL: mmap MAP_FIXED: %s\n", strerror(errno));
		return 1;
	}
	if (uffd_register_missing(ufd, half, LEN / 2))
		return 1;

	for (i = 0; i < 2; i++) {
		d[i].offset = (__u64)i * OBJ;
		d[i].length = OBJ;
		d[i].buf_offset = (__u64)i * (LEN / 2);
		d[i].buf_id = r.buf_id;
	}
	lm_init(&lm, d, res, 2);
	if (hold_then_serve(ufd, KVBLK_IOC_LOAD_MANY, &lm, mem, "the registered range", half, LEN / 2))
		return 1;
	printf("load: %d (%s), bad_index %d\n", load_ret,
	       load_ret ? strerror(load_errno) : "ok", lm.bad_index);
	if (!(load_ret < 0 && ((load_errno == ESTALE && lm.bad_index == 0) ||
			       load_errno == ENODEV))) {
		fprintf(stderr, "FAIL: want ESTALE with bad_index 0, or ENODEV\n");
		bad++;
	}
	d[1].buf_offset = OBJ;	/* both in the first half: no fault */
	load_ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	printf("load after the removal: %d (%s)\n", load_ret,
	       load_ret ? strerror(errno) : "ok");
	if (load_ret >= 0 || errno != ENODEV) {
		fprintf(stderr, "FAIL: a load after the removal: want ENODEV\n");
		bad++;
	}
	close(kfd);
	printf("%s\n", bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}

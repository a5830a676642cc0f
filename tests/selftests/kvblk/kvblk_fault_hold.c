// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_fault_hold - a PRP batch held in a page fault that its own process
 * serves (review-2 N3), for tests/selftests/kvblk/vm-fault-removal.sh.
 *
 * usage: kvblk_fault_hold DEV   (stdin: a line when the fault may be served)
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

#define LEN	(1 << 20)
#define OBJ	(64 << 10)

static int kfd;
static struct kvblk_load_many lm;
static struct kvblk_io_desc d[2];
static struct kvblk_desc_result res[2];
static int load_ret, load_errno;

static void *load(void *arg)
{
	(void)arg;
	load_ret = ioctl(kfd, KVBLK_IOC_LOAD_MANY, &lm);
	load_errno = errno;
	return NULL;
}

int main(int argc, char **argv)
{
	struct kvblk_attach a = { .size = sizeof(a), .flags = KVBLK_ATTACH_F_ENGINE_PRP };
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST };
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { 0 };
	struct uffdio_zeropage zp = { 0 };
	struct uffd_msg msg;
	struct pollfd pfd;
	unsigned char *mem, *half;
	pthread_t th;
	char line[16];
	int bfd, ufd, i, bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: kvblk_fault_hold DEV\n");
		return 2;
	}
	kfd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	bfd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (kfd < 0 || bfd < 0) {
		printf("SKIP: open /dev/kvblk or %s: %s\n", argv[1], strerror(errno));
		return 4;
	}
	ufd = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (ufd < 0 || ioctl(ufd, UFFDIO_API, &api)) {
		printf("SKIP: userfaultfd: %s\n", strerror(errno));
		return 4;
	}
	a.bdev_fd = bfd;
	if (ioctl(kfd, KVBLK_IOC_ATTACH, &a)) {
		fprintf(stderr, "FAIL: attach %s (PRP): %s\n", argv[1], strerror(errno));
		return 1;
	}
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
	reg.range.start = (uintptr_t)half;
	reg.range.len = LEN / 2;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	if (ioctl(ufd, UFFDIO_REGISTER, &reg)) {
		fprintf(stderr, "FAIL: UFFDIO_REGISTER: %s\n", strerror(errno));
		return 1;
	}

	for (i = 0; i < 2; i++) {
		d[i].offset = (__u64)i * OBJ;
		d[i].length = OBJ;
		d[i].buf_offset = (__u64)i * (LEN / 2);
		d[i].buf_id = r.buf_id;
	}
	lm_init(&lm, d, res, 2);
	if (pthread_create(&th, NULL, load, NULL))
		return 1;

	pfd.fd = ufd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 30000) != 1 || read(ufd, &msg, sizeof(msg)) != sizeof(msg) ||
	    msg.event != UFFD_EVENT_PAGEFAULT) {
		fprintf(stderr, "FAIL: the load did not fault on the userfaultfd range in 30 s\n");
		return 1;
	}
	printf("FAULTED at +%llu of the registered range\n",
	       (unsigned long long)(msg.arg.pagefault.address - (uintptr_t)mem));
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		printf("note: stdin closed: serving the fault\n");
	else
		printf("serving the fault\n");
	fflush(stdout);

	zp.range.start = (uintptr_t)half;
	zp.range.len = LEN / 2;
	if (ioctl(ufd, UFFDIO_ZEROPAGE, &zp)) {
		fprintf(stderr, "FAIL: UFFDIO_ZEROPAGE: %s\n", strerror(errno));
		return 1;
	}
	pthread_join(th, NULL);
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

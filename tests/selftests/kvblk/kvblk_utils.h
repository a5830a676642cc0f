/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the kvblk selftests (as iommufd_utils.h serves the
 * iommufd tests): the test device, sysfs/procfs values, pinned pages, module
 * references, the kernel log, capabilities. Nothing here includes the uapi
 * header, so the frozen-0.2 program can use it too.
 */
#ifndef KVBLK_SELFTEST_UTILS_H
#define KVBLK_SELFTEST_UTILS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/kvblk.h>

#define KVBLK_NODE		"/dev/kvblk"
#define DEFAULT_TEST_DEVICE	"/dev/nvme0n1"
#define MODULE_DIR		"/sys/module/kvblk"

/* $KVBLK_TEST_DEVICE, else the rig's first namespace. */
static inline const char *test_device(void)
{
	const char *d = getenv("KVBLK_TEST_DEVICE");

	return d && *d ? d : DEFAULT_TEST_DEVICE;
}

/*
 * A LOAD_MANY header (every input field; outputs 0) for @n descriptors @d,
 * results into @res (kvblk_test's, shared since the uring test needed it).
 * Not with the 0.2 header kvblk_abi02_test builds against (its descriptor
 * is struct kvblk_desc, and it predates KVBLK_DESC_SIZE_VER1).
 */
#ifdef KVBLK_DESC_SIZE_VER1
static inline void lm_init(struct kvblk_load_many *lm, struct kvblk_io_desc *d,
			   struct kvblk_desc_result *res, __u32 n)
{
	memset(lm, 0, sizeof(*lm));
	lm->size = sizeof(*lm);
	lm->nr_descs = n;
	lm->desc_bytes = sizeof(*d);
	lm->descs = (uintptr_t)d;
	lm->results = (uintptr_t)res;
	lm->result_bytes = sizeof(*res);
}
#endif

static inline size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* CLOCK_MONOTONIC in milliseconds. */
static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* @path's contents into @buf (NUL-terminated, trailing newlines and spaces cut); 0 or -errno. */
static inline int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

/* Writes @text to @path (a sysfs or procfs file); 0 or -errno. */
static inline int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* A decimal value from sysfs; -1 when the file cannot be read or parsed. */
static inline long long read_ll(const char *path)
{
	char buf[64], *end;
	long long v;

	if (read_text(path, buf, sizeof(buf)))
		return -1;
	errno = 0;
	v = strtoll(buf, &end, 10);
	return errno || end == buf ? -1 : v;
}

/* References to kvblk.ko (every open context holds one); -1 when not loaded. */
static inline long long module_refcnt(void)
{
	return read_ll(MODULE_DIR "/refcnt");
}

/*
 * Pages pinned (FOLL_PIN) system-wide and not yet unpinned. stat_refresh
 * folds the per-CPU deltas first, so the value is exact. LLONG_MIN when the
 * counters are not there.
 */
static inline long long pins_outstanding(void)
{
	long long acq = -1, rel = -1, v;
	char name[64];
	FILE *f;

	write_text("/proc/sys/vm/stat_refresh", "1\n");
	f = fopen("/proc/vmstat", "re");
	if (!f)
		return LLONG_MIN;
	while (fscanf(f, "%63s %lld", name, &v) == 2) {
		if (!strcmp(name, "nr_foll_pin_acquired"))
			acq = v;
		else if (!strcmp(name, "nr_foll_pin_released"))
			rel = v;
	}
	fclose(f);
	return acq < 0 || rel < 0 ? LLONG_MIN : acq - rel;
}

/* ---- the kernel log ------------------------------------------------------ */

/* /dev/kmsg positioned at its end: later reads return only new records; -1 when absent. */
static inline int kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/*
 * The next new kernel log record (from kmsg_open()'s fd) that a selftest fails
 * on: what tests/vm/run-suite.sh fails a case on, plus IOMMU faults, hung
 * tasks and NVMe timeouts. Copies its text (without the record header) into
 * @msg and returns 1; 0 when no such record is left.
 */
static inline int kmsg_next_bad(int fd, char *msg_out, size_t len)
{
	static const char *const bad[] = {
		"BUG:", "WARNING:", "Oops", "lockdep", "possible circular locking",
		"general protection", "KASAN", "UBSAN", "kernel BUG", "Call Trace:",
		"DMAR: DRHD: handling fault", "DMAR: [DMA", "blocked for more than",
		"timeout, aborting", "timeout, reset controller", "refcount_t:",
		"list_add corruption", "list_del corruption", "Bad page",
	};
	char rec[8192];

	for (;;) {
		ssize_t n = read(fd, rec, sizeof(rec) - 1);
		char *msg, *nl;

		if (n < 0) {
			if (errno == EPIPE)	/* records overwritten: go on */
				continue;
			return 0;		/* EAGAIN: no more */
		}
		rec[n] = '\0';
		msg = strchr(rec, ';');
		msg = msg ? msg + 1 : rec;
		nl = strchr(msg, '\n');
		if (nl)
			*nl = '\0';
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			if (strstr(msg, bad[i])) {
				size_t l = strnlen(msg, len - 1);

				memcpy(msg_out, msg, l);
				msg_out[l] = '\0';
				return 1;
			}
		}
	}
}

/* Drops CAP_IPC_LOCK from this process (so RLIMIT_MEMLOCK applies); 0 or -errno. */
static inline int drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	const unsigned int idx = CAP_TO_INDEX(CAP_IPC_LOCK);
	const __u32 mask = CAP_TO_MASK(CAP_IPC_LOCK);

	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	data[idx].effective &= ~mask;
	data[idx].permitted &= ~mask;
	data[idx].inheritable &= ~mask;
	if (syscall(SYS_capset, &hdr, data))
		return -errno;
	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	return (data[idx].effective & mask) ? -EPERM : 0;
}

#endif /* KVBLK_SELFTEST_UTILS_H */

// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk ioctl selftests: every input rule of /dev/kvblk, written from the
 * contract in include/uapi/linux/kvblk.h, one error path per test.
 *
 * Environment:
 *   KVBLK_TEST_DEVICE          NVMe namespace block device (default /dev/nvme0n1).
 *                              Only read, never written.
 *   KVBLK_TEST_PARTITION       a partition of it for the partition tests
 *                              (default: the first partition found in sysfs).
 *   KVBLK_TEST_NONNVME_DEVICE  a block device that is not NVMe (default:
 *                              /dev/ram0, else a loop device on a memfd).
 *   KVBLK_TEST_MD_DEVICE       an NVMe namespace formatted with metadata or
 *                              protection information (test skipped without).
 *
 * The whole program exits 4 (kselftest skip) when /dev/kvblk or the test
 * device is absent. Runs as root (it opens block devices).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/nvme_ioctl.h>

#include <linux/kvblk.h>

/* The 6.1 harness has one unused parameter of its own (its SIGALRM handler). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#include "kvblk_utils.h"

/* Bytes appended to a struct for the size-growth tests. */
#define TAIL_BYTES 24
/* The hard upper bound of the max_descs tunable (header: "at most 65536"). */
#define MAX_DESCS_LIMIT 65536u
#define MAX_BUFFERS 1024	/* header: "1024 per context" */
#define FILL 0xA5		/* destination fill that a read must not touch */
#define GARBAGE 0x5A		/* result fill that the kernel must overwrite */

/* The layout the header promises: sizes, natural alignment, the newest VER constants. */
_Static_assert(sizeof(struct kvblk_attach) == KVBLK_ATTACH_SIZE_VER3, "attach size");
_Static_assert(sizeof(struct kvblk_buf_reg) == KVBLK_BUF_REG_SIZE_VER0, "buf_reg size");
_Static_assert(sizeof(struct kvblk_buf_unreg) == KVBLK_BUF_UNREG_SIZE_VER0, "buf_unreg size");
_Static_assert(sizeof(struct kvblk_load_many) == KVBLK_LOAD_MANY_SIZE_VER1, "load_many size");
_Static_assert(sizeof(struct kvblk_io_desc) == KVBLK_DESC_SIZE_VER1, "desc size");
_Static_assert(sizeof(struct kvblk_desc_result) == KVBLK_DESC_RESULT_SIZE_VER0, "result size");
_Static_assert(offsetof(struct kvblk_attach, capacity) % 8 == 0, "attach capacity aligned");
_Static_assert(offsetof(struct kvblk_buf_reg, addr) % 8 == 0, "buf_reg addr aligned");
_Static_assert(offsetof(struct kvblk_load_many, descs) % 8 == 0, "load_many descs aligned");
_Static_assert(offsetof(struct kvblk_load_many, nr_cmds) % 8 == 0, "load_many nr_cmds aligned");

/*
 * EXPECT_ERRNO(E, call): @call returns -1 with errno E. On a mismatch it logs
 * what came back, with the errno's text. Like every EXPECT_*, it can be
 * followed by TH_LOG(...).
 */
#define EXPECT_ERRNO(expected_errno, call) \
	EXPECT_EQ((expected_errno), errno_check(_metadata, (call), #call, (expected_errno)))

/* ASSERT_OK(call): @call returns >= 0; logs errno otherwise. */
#define ASSERT_OK(call) ASSERT_LE(0, ok_check(_metadata, (call), #call))

/* errno of a failed call (-1), or 0 when it succeeded; logs a mismatch. */
static int errno_check(struct __test_metadata *_metadata, long ret, const char *call, int want)
{
	int err = errno;

	if (ret != -1 || err != want)
		TH_LOG("%s returned %ld, errno %d (%s); want -1 and errno %d (%s)",
		       call, ret, ret == -1 ? err : 0, ret == -1 ? strerror(err) : "-",
		       want, strerror(want));
	return ret == -1 ? err : 0;
}

static long ok_check(struct __test_metadata *_metadata, long ret, const char *call)
{
	int err = errno;

	if (ret < 0)
		TH_LOG("%s failed: %s", call, strerror(err));
	return ret;
}

/* Whole-program skip (exit 4) when the module or the namespace is not there. */
static void __attribute__((constructor)) kvblk_require_nodes(void)
{
	struct stat st;

	if (stat(KVBLK_NODE, &st) != 0)
		ksft_exit_skip(KVBLK_NODE " absent (kvblk.ko not loaded)\n");
	if (stat(test_device(), &st) != 0 || !S_ISBLK(st.st_mode))
		ksft_exit_skip("%s absent or not a block device (set KVBLK_TEST_DEVICE)\n",
			       test_device());
}

/* ---- small helpers ------------------------------------------------------ */

/* An address that no ioctl may read or write: a PROT_NONE page, kept mapped. */
static void *bad_ptr(void)
{
	void *p = mmap(NULL, page_size(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? (void *)8 : p;
}

/* Anonymous read-write mapping of @len bytes, filled with @fill; NULL on failure. */
static unsigned char *map_filled(size_t len, int fill)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, fill, len);
	return p;
}

/* True when every byte of [p, p+len) is @v. */
static bool all_bytes(const unsigned char *p, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

static __u64 round_up_u64(__u64 v, __u64 a)
{
	return (v + a - 1) / a * a;
}

static void attach_init(struct kvblk_attach *a, int bdev_fd)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->bdev_fd = bdev_fd;
}

static void reg_init(struct kvblk_buf_reg *r, const void *addr, __u64 len)
{
	memset(r, 0, sizeof(*r));
	r->size = sizeof(*r);
	r->kind = KVBLK_MEM_HOST;
	r->addr = (__u64)(uintptr_t)addr;
	r->len = len;
}

static void unreg_init(struct kvblk_buf_unreg *u, __u32 buf_id)
{
	memset(u, 0, sizeof(*u));
	u->size = sizeof(*u);
	u->buf_id = buf_id;
}

static int do_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg);
}

/* ---- sysfs -------------------------------------------------------------- */

/* Bytes of command slots the module holds, every open file together. */
#define SLOT_BYTES "/sys/kernel/kvblk/slot_bytes"

struct blkinfo {
	char dir[PATH_MAX];	/* sysfs dir of the device itself */
	char disk[PATH_MAX];	/* sysfs dir of the whole disk */
	bool is_part;
	__u64 part_start;	/* 512-byte sectors, partitions only */
};

static int read_u64(const char *path, __u64 *val)
{
	char buf[64], *end;
	int ret = read_text(path, buf, sizeof(buf));

	if (ret)
		return ret;
	errno = 0;
	*val = strtoull(buf, &end, 0);
	return errno || end == buf ? -EINVAL : 0;
}

static int blkinfo_get(int fd, struct blkinfo *bi)
{
	char link[64], path[PATH_MAX + 16];
	struct stat st;

	memset(bi, 0, sizeof(*bi));
	if (fstat(fd, &st))
		return -errno;
	if (!S_ISBLK(st.st_mode))
		return -ENOTBLK;
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(st.st_rdev), minor(st.st_rdev));
	if (!realpath(link, bi->dir))
		return -errno;
	snprintf(path, sizeof(path), "%s/partition", bi->dir);
	bi->is_part = access(path, F_OK) == 0;
	strcpy(bi->disk, bi->dir);
	if (bi->is_part) {
		char *slash = strrchr(bi->disk, '/');

		if (!slash)
			return -EINVAL;
		*slash = '\0';
		snprintf(path, sizeof(path), "%s/start", bi->dir);
		if (read_u64(path, &bi->part_start))
			return -EINVAL;
	}
	return 0;
}

/* Number of blk-mq hardware queues of the disk (entries of <disk>/mq). */
static int count_hw_queues(const struct blkinfo *bi)
{
	char path[PATH_MAX + 8];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/mq", bi->disk);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] >= '0' && de->d_name[0] <= '9')
			n++;
	closedir(d);
	return n;
}

/*
 * A blk-mq nvme-pci namespace: the PRP engine can serve it (the header:
 * with KVBLK_ATTACH_F_ENGINE_PRP, and without a flag for memory without
 * struct pages). The default engine is the block layer's on every block
 * device.
 */
static bool nvme_pcie(const struct blkinfo *bi)
{
	char path[PATH_MAX + 32], transport[32];

	snprintf(path, sizeof(path), "%s/device/transport", bi->disk);
	return read_text(path, transport, sizeof(transport)) == 0 &&
	       strcmp(transport, "pcie") == 0 && count_hw_queues(bi) > 0;
}

/* /sys/module/kvblk/parameters/max_descs, or 0 when it cannot be read. */
static __u32 max_descs_param(void)
{
	__u64 v;

	if (read_u64("/sys/module/kvblk/parameters/max_descs", &v))
		return 0;
	return (__u32)v;
}

/* Path of a partition of the test device into @out; false when there is none. */
static bool find_partition(int bdev_fd, char *out, size_t len)
{
	const char *env = getenv("KVBLK_TEST_PARTITION");
	struct blkinfo bi;
	struct dirent *de;
	bool found = false;
	DIR *d;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return true;
	}
	if (blkinfo_get(bdev_fd, &bi) || bi.is_part)
		return false;
	d = opendir(bi.disk);
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		char path[PATH_MAX + 300];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/partition", bi.disk, de->d_name);
		if (access(path, F_OK) == 0) {
			snprintf(out, len, "/dev/%s", de->d_name);
			found = true;
		}
	}
	closedir(d);
	return found;
}

/* ---- CAP_IPC_LOCK ------------------------------------------------------- */

/* ---- a non-NVMe block device --------------------------------------------- */

struct other_bdev {
	char path[64];
	int ctl_fd;	/* loop device fd holding the binding, or -1 */
	int backing_fd;
};

/* Finds or makes a block device that is not NVMe; 0, or -errno to skip. */
static int other_bdev_get(struct other_bdev *o)
{
	const char *env = getenv("KVBLK_TEST_NONNVME_DEVICE");
	struct stat st;
	int ctl, n;

	o->ctl_fd = o->backing_fd = -1;
	if (env && *env) {
		snprintf(o->path, sizeof(o->path), "%s", env);
		return 0;
	}
	if (stat("/dev/ram0", &st) == 0 && S_ISBLK(st.st_mode)) {
		snprintf(o->path, sizeof(o->path), "/dev/ram0");
		return 0;
	}
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	n = ioctl(ctl, LOOP_CTL_GET_FREE);
	close(ctl);
	if (n < 0)
		return -errno;
	snprintf(o->path, sizeof(o->path), "/dev/loop%d", n);
	o->backing_fd = memfd_create("kvblk-selftest-loop", MFD_CLOEXEC);
	if (o->backing_fd < 0 || ftruncate(o->backing_fd, 1 << 20))
		return -errno;
	o->ctl_fd = open(o->path, O_RDWR | O_CLOEXEC);
	if (o->ctl_fd < 0)
		return -errno;
	if (ioctl(o->ctl_fd, LOOP_SET_FD, o->backing_fd))
		return -errno;
	return 0;
}

static void other_bdev_put(struct other_bdev *o)
{
	if (o->ctl_fd >= 0) {
		ioctl(o->ctl_fd, LOOP_CLR_FD, 0);
		close(o->ctl_fd);
	}
	if (o->backing_fd >= 0)
		close(o->backing_fd);
}

/* ======================================================================== */
/* Fixture kvblk: a fresh context (not attached) and the namespace, O_RDONLY. */

FIXTURE(kvblk) {
	int fd;
	int bdev_fd;
};

FIXTURE_SETUP(kvblk)
{
	self->fd = -1;
	self->bdev_fd = -1;
	self->fd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", KVBLK_NODE, strerror(errno));
	self->bdev_fd = open(test_device(), O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, self->bdev_fd) TH_LOG("open %s: %s", test_device(), strerror(errno));
}

FIXTURE_TEARDOWN(kvblk)
{
	if (self->bdev_fd >= 0)
		close(self->bdev_fd);
	if (self->fd >= 0)
		close(self->fd);
}

static void attach_ok(struct __test_metadata *_metadata, int fd, int bdev_fd,
		      struct kvblk_attach *out)
{
	attach_init(out, bdev_fd);
	ASSERT_EQ(0, ioctl(fd, KVBLK_IOC_ATTACH, out))
		TH_LOG("attach: %s", strerror(errno));
}

/*
 * After a rejected attach the context must still be unattached: a valid
 * attach then succeeds.
 */
static void expect_attachable(struct __test_metadata *_metadata, int fd, int bdev_fd)
{
	struct kvblk_attach a;

	attach_init(&a, bdev_fd);
	EXPECT_EQ(0, ioctl(fd, KVBLK_IOC_ATTACH, &a))
		TH_LOG("attach after a rejected one: %s", strerror(errno));
}

/* ---- GET_FEATURES and unknown numbers ------------------------------------ */

TEST_F(kvblk, features_prp_engine_and_host_memory)
{
	__u64 feat = ~0ULL;

	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_GET_FEATURES, &feat));
	EXPECT_TRUE(!!(feat & KVBLK_FEAT_PRP_ENGINE)) TH_LOG("features 0x%llx", (unsigned long long)feat);
	EXPECT_TRUE(!!(feat & KVBLK_FEAT_MEM_HOST)) TH_LOG("features 0x%llx", (unsigned long long)feat);
	EXPECT_TRUE(!!(feat & KVBLK_FEAT_TARGETS)) TH_LOG("features 0x%llx", (unsigned long long)feat);
}

TEST_F(kvblk, features_bad_pointer_efault)
{
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, KVBLK_IOC_GET_FEATURES, bad_ptr()));
}

TEST_F(kvblk, unknown_number_in_kvblk_range_enotty)
{
	__u64 arg[16] = { 0 };

	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IO(KVBLK_IOC_MAGIC, 0x7f)));
	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IOWR(KVBLK_IOC_MAGIC, 0x04, __u64[16]), arg));
	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IOWR(KVBLK_IOC_MAGIC, 0x11, __u64[16]), arg));
}

TEST_F(kvblk, unknown_number_other_magic_enotty)
{
	struct termios t;

	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, TCGETS, &t));
	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IOWR('k', 0x01, struct kvblk_attach), &t));
}

/* ---- attach: struct rules ------------------------------------------------ */

TEST_F(kvblk, attach_size_short_einval)
{
	static const __u32 sizes[] = { 0, 4, 8, KVBLK_ATTACH_SIZE_VER0 - 8, KVBLK_ATTACH_SIZE_VER0 - 1 };
	struct kvblk_attach a;

	for (unsigned int i = 0; i < ARRAY_SIZE(sizes); i++) {
		attach_init(&a, self->bdev_fd);
		a.size = sizes[i];
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("size %u", sizes[i]);
	}
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

TEST_F(kvblk, attach_size_long_nonzero_tail_e2big)
{
	struct {
		struct kvblk_attach a;
		unsigned char tail[TAIL_BYTES];
	} big;
	static const unsigned int pos[] = { 0, TAIL_BYTES - 1 };

	for (unsigned int i = 0; i < ARRAY_SIZE(pos); i++) {
		memset(&big, 0, sizeof(big));
		attach_init(&big.a, self->bdev_fd);
		big.a.size = sizeof(big);
		big.tail[pos[i]] = 1;
		EXPECT_ERRNO(E2BIG, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &big)) TH_LOG("tail byte %u", pos[i]);
	}
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

TEST_F(kvblk, attach_size_long_zero_tail_accepted)
{
	struct {
		struct kvblk_attach a;
		unsigned char tail[TAIL_BYTES];
	} big;
	int lba = 0;

	memset(&big, 0, sizeof(big));
	attach_init(&big.a, self->bdev_fd);
	big.a.size = sizeof(big);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &big)) TH_LOG("attach: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(self->bdev_fd, BLKSSZGET, &lba));
	EXPECT_EQ((__u32)lba, big.a.lba_size);
	/* Output is written only up to the kernel's struct size. */
	EXPECT_TRUE(all_bytes(big.tail, sizeof(big.tail), 0));
}

TEST_F(kvblk, attach_unknown_flag_einval)
{
	struct kvblk_attach a;

	for (unsigned int bit = 0; bit < 32; bit++) {
		if (KVBLK_ATTACH_F_ALL & (1u << bit))
			continue;
		attach_init(&a, self->bdev_fd);
		a.flags = 1u << bit;
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("flag bit %u", bit);
	}
	/* The two engine choices exclude each other. */
	attach_init(&a, self->bdev_fd);
	a.flags = KVBLK_ATTACH_F_ENGINE_BIO | KVBLK_ATTACH_F_ENGINE_PRP;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

TEST_F(kvblk, attach_reserved_nonzero_einval)
{
	struct kvblk_attach a;

	attach_init(&a, self->bdev_fd);
	a.reserved = 1;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	attach_init(&a, self->bdev_fd);
	a.reserved = 1ULL << 63;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

TEST_F(kvblk, attach_reserved2_nonzero_einval)
{
	struct kvblk_attach a;

	for (unsigned int i = 0; i < ARRAY_SIZE(a.reserved2); i++) {
		attach_init(&a, self->bdev_fd);
		a.reserved2[i] = 1;
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("reserved2[%u]", i);
	}
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

TEST_F(kvblk, attach_bad_pointer_efault)
{
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, KVBLK_IOC_ATTACH, bad_ptr()));
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

TEST_F(kvblk, attach_out_fields_ignored_on_input)
{
	struct kvblk_attach a;

	attach_init(&a, self->bdev_fd);
	a.nsid = 0xdead;
	a.lba_size = 3;
	a.max_cmd_bytes = 5;
	a.capacity = ~0ULL;
	a.start_lba = ~0ULL;
	a.nr_hw_queues = 7;
	a.engine = 0xff;
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("attach: %s", strerror(errno));
	EXPECT_NE(3U, a.lba_size);
	EXPECT_NE(~0ULL, a.capacity);
}

/* ---- attach: the fd ------------------------------------------------------ */

TEST_F(kvblk, attach_pipe_enotblk)
{
	struct kvblk_attach a;
	int p[2];

	ASSERT_EQ(0, pipe2(p, O_CLOEXEC));
	attach_init(&a, p[0]);
	EXPECT_ERRNO(ENOTBLK, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	close(p[0]);
	close(p[1]);
}

TEST_F(kvblk, attach_char_device_enotblk)
{
	struct kvblk_attach a;
	int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	ASSERT_LE(0, nfd);
	attach_init(&a, nfd);
	EXPECT_ERRNO(ENOTBLK, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	close(nfd);
}

/*
 * A regular file is served by the file engine when its file system sits on
 * a block device and does direct I/O; the test binary's own file lies on
 * the guest's 9p root, which has no block device.
 */
TEST_F(kvblk, attach_regular_file_without_bdev_eopnotsupp)
{
	struct kvblk_attach a;
	int ffd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	ASSERT_LE(0, ffd);
	attach_init(&a, ffd);
	EXPECT_ERRNO(EOPNOTSUPP, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	close(ffd);
}

TEST_F(kvblk, attach_directory_eisdir)
{
	struct kvblk_attach a;
	int dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	ASSERT_LE(0, dfd);
	attach_init(&a, dfd);
	EXPECT_ERRNO(EISDIR, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	close(dfd);
}

TEST_F(kvblk, attach_own_context_fd_enotblk)
{
	struct kvblk_attach a;

	attach_init(&a, self->fd);
	EXPECT_ERRNO(ENOTBLK, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
}

TEST_F(kvblk, attach_wronly_eacces)
{
	struct kvblk_attach a;
	int wfd = open(test_device(), O_WRONLY | O_CLOEXEC);

	ASSERT_LE(0, wfd) TH_LOG("open O_WRONLY: %s", strerror(errno));
	attach_init(&a, wfd);
	EXPECT_ERRNO(EACCES, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	close(wfd);
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

/* Header: "-EACCES it was opened without read access (O_WRONLY or O_PATH)". */
TEST_F(kvblk, attach_opath_eacces)
{
	struct kvblk_attach a;
	int pfd = open(test_device(), O_PATH | O_CLOEXEC);

	ASSERT_LE(0, pfd) TH_LOG("open O_PATH: %s", strerror(errno));
	attach_init(&a, pfd);
	EXPECT_ERRNO(EACCES, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	close(pfd);
}

TEST_F(kvblk, attach_negative_fd_ebadf)
{
	struct kvblk_attach a;

	attach_init(&a, -1);
	EXPECT_ERRNO(EBADF, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	attach_init(&a, INT_MIN);
	EXPECT_ERRNO(EBADF, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
}

TEST_F(kvblk, attach_closed_fd_ebadf)
{
	struct kvblk_attach a;
	int cfd = dup(self->bdev_fd);

	ASSERT_LE(0, cfd);
	ASSERT_EQ(0, close(cfd));
	attach_init(&a, cfd);
	EXPECT_ERRNO(EBADF, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	attach_init(&a, INT_MAX);
	EXPECT_ERRNO(EBADF, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
}

TEST_F(kvblk, attach_twice_ebusy)
{
	struct kvblk_attach a;

	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	attach_init(&a, self->bdev_fd);
	EXPECT_ERRNO(EBUSY, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
}

TEST_F(kvblk, attach_twice_other_fd_ebusy)
{
	struct kvblk_attach a;
	int fd2 = open(test_device(), O_RDONLY | O_CLOEXEC);

	ASSERT_LE(0, fd2);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	attach_init(&a, fd2);
	EXPECT_ERRNO(EBUSY, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	close(fd2);
}

/* ---- several targets per context (KVBLK_ATTACH_F_ADD_TARGET) ------------ */

static int add_target(int fd, int bdev_fd, __u32 flags, struct kvblk_attach *a)
{
	attach_init(a, bdev_fd);
	a->flags = KVBLK_ATTACH_F_ADD_TARGET | flags;
	return ioctl(fd, KVBLK_IOC_ATTACH, a);
}

/* Header: "-EINVAL @size below KVBLK_ATTACH_SIZE_VER2 (the caller could not read the index)". */
TEST_F(kvblk, targets_add_needs_ver2_size_einval)
{
	struct kvblk_attach a;

	attach_init(&a, self->bdev_fd);
	a.flags = KVBLK_ATTACH_F_ADD_TARGET;
	a.size = KVBLK_ATTACH_SIZE_VER1;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	a.reserved4 = 1;
	a.size = sizeof(a);
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

/*
 * The first target may be added with the flag too (index 0); indexes count
 * up in attach order; a refused attach uses none; a plain attach after
 * that is -EBUSY as in 0.2.
 */
TEST_F(kvblk, targets_indexes_in_attach_order)
{
	struct kvblk_attach a;
	int p[2];

	ASSERT_EQ(0, add_target(self->fd, self->bdev_fd, 0, &a)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0U, a.target);
	ASSERT_EQ(0, pipe2(p, O_CLOEXEC));
	EXPECT_ERRNO(ENOTBLK, add_target(self->fd, p[0], 0, &a));
	close(p[0]);
	close(p[1]);
	ASSERT_EQ(0, add_target(self->fd, self->bdev_fd, KVBLK_ATTACH_F_ENGINE_BIO, &a));
	EXPECT_EQ(1U, a.target);
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, a.engine);
	ASSERT_EQ(0, add_target(self->fd, self->bdev_fd, 0, &a));
	EXPECT_EQ(2U, a.target);
	attach_init(&a, self->bdev_fd);
	EXPECT_ERRNO(EBUSY, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
}

/* Header: "-ENOSPC the context has KVBLK_CTX_MAX_TARGETS targets". */
TEST_F(kvblk, targets_limit_enospc)
{
	struct kvblk_attach a;

	for (__u32 i = 0; i < KVBLK_CTX_MAX_TARGETS; i++) {
		ASSERT_EQ(0, add_target(self->fd, self->bdev_fd, KVBLK_ATTACH_F_ENGINE_BIO, &a))
			TH_LOG("target %u: %s", i, strerror(errno));
		ASSERT_EQ(i, a.target);
	}
	EXPECT_ERRNO(ENOSPC, add_target(self->fd, self->bdev_fd, KVBLK_ATTACH_F_ENGINE_BIO, &a));
}

/*
 * One namespace as two targets, one per engine (PRP and block layer): one
 * batch over both reads the same bytes through each, reports
 * KVBLK_ENGINE_MIXED, both engine bits and two targets.
 */
TEST_F(kvblk, targets_one_batch_two_engines)
{
	struct kvblk_attach a0, a1;
	struct kvblk_buf_reg r;
	struct kvblk_io_desc d[4];
	struct kvblk_desc_result res[4];
	struct kvblk_load_many lm;
	size_t len = 4 << 20;
	unsigned char *buf = map_filled(len, FILL);

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a0);
	ASSERT_EQ(0, add_target(self->fd, self->bdev_fd, KVBLK_ATTACH_F_ENGINE_BIO, &a1))
		TH_LOG("%s", strerror(errno));
	ASSERT_EQ(1U, a1.target);
	reg_init(&r, buf, len);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("%s", strerror(errno));
	memset(d, 0, sizeof(d));
	for (int i = 0; i < 4; i++) {
		d[i].target = i % 2;
		d[i].offset = (i / 2) * (1 << 20) + 65536;
		d[i].length = 256 << 10;
		d[i].buf_offset = i * (1 << 20);
		d[i].buf_id = r.buf_id;
	}
	lm_init(&lm, d, res, 4);
	ASSERT_EQ(4, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm)) TH_LOG("%s", strerror(errno));
	if (a0.engine != KVBLK_ENGINE_BIO) {
		EXPECT_EQ((__u32)KVBLK_ENGINE_MIXED, lm.engine);
		EXPECT_EQ((1U << a0.engine) | (1U << KVBLK_ENGINE_BIO), lm.engines);
	} else {
		EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, lm.engine);
	}
	EXPECT_EQ(2U, lm.nr_targets);
	for (int i = 0; i < 4; i++) {
		EXPECT_EQ(0, res[i].status) TH_LOG("object %d", i);
		EXPECT_TRUE(all_bytes(buf + d[i].buf_offset + d[i].length,
				      (1 << 20) - d[i].length, FILL)) TH_LOG("canary after object %d", i);
	}
	/* Target 0 and target 1 are the same bytes. */
	EXPECT_EQ(0, memcmp(buf, buf + (1 << 20), 256 << 10));
	EXPECT_EQ(0, memcmp(buf + (2 << 20), buf + (3 << 20), 256 << 10));
	EXPECT_FALSE(all_bytes(buf, 256 << 10, FILL));
	munmap(buf, len);
}

/* @len bytes at device offset @off through pread(O_DIRECT) into @ref. */
static bool ref_read(void *ref, __u64 off, size_t len)
{
	int dfd = open(test_device(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	bool ok;

	if (dfd < 0)
		return false;
	ok = pread(dfd, ref, len, off) == (ssize_t)len;
	close(dfd);
	return ok;
}

/*
 * One batch of @nr objects of @len bytes on @target: object i from device
 * offset @dev0 + i * @len into @buf at i * (@len + 4096) (a page past the
 * last, so that each command's bio_vec array differs). Every object must
 * succeed and hold what pread(O_DIRECT) reads there.
 */
static void expect_target_batch(struct __test_metadata *_metadata, int fd, __u32 target,
				__u32 buf_id, unsigned char *buf, __u64 dev0, int nr, __u64 len,
				unsigned char *ref)
{
	struct kvblk_io_desc d[64];
	struct kvblk_desc_result res[64];
	struct kvblk_load_many lm;

	ASSERT_GE(64, nr);
	memset(d, 0, sizeof(d));
	for (int i = 0; i < nr; i++) {
		d[i].target = target;
		d[i].offset = dev0 + i * len;
		d[i].length = len;
		d[i].buf_offset = i * (len + 4096);
		d[i].buf_id = buf_id;
		memset(buf + d[i].buf_offset, FILL, len);
	}
	lm_init(&lm, d, res, nr);
	ASSERT_EQ(nr, ioctl(fd, KVBLK_IOC_LOAD_MANY, &lm)) TH_LOG("%s", strerror(errno));
	for (int i = 0; i < nr; i++) {
		EXPECT_EQ(0, res[i].status) TH_LOG("target %u object %d", target, i);
		ASSERT_TRUE(ref_read(ref, d[i].offset, len));
		EXPECT_EQ(0, memcmp(buf + d[i].buf_offset, ref, len))
			TH_LOG("target %u object %d: bytes differ from pread", target, i);
	}
}

/*
 * The slots a batch leaves serve the next batch of its context, with the
 * bvec arrays the block-layer engine kept in them (kmod/batch.c,
 * kvblk_slots_keep()). On one context, in turn: 1 MiB objects through the
 * block layer (slots keep arrays of 256 entries); objects through the PRP
 * engine, whose slots hold PRP lists in the same place (it must release
 * the arrays, not read them as lists); more commands than any batch
 * before (a larger array); the block layer again; one object on each. Each
 * batch reads what pread(O_DIRECT) reads, and closing the file gives back
 * every byte of slot memory (/sys/kernel/kvblk/slot_bytes): an array lost
 * when one engine's state overwrote another's stays counted.
 */
TEST_F(kvblk, slots_reused_across_batches_and_engines)
{
	struct kvblk_attach a0, a1;
	struct kvblk_buf_reg r;
	struct blkinfo bi;
	size_t len = 64 << 20;
	unsigned char *buf = map_filled(len, FILL), *ref = map_filled(1 << 20, 0);
	__u64 before, kept, after;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, ref);
	ASSERT_EQ(0, blkinfo_get(self->bdev_fd, &bi));
	if (!nvme_pcie(&bi))
		SKIP(return, "%s is not a blk-mq nvme-pci namespace", test_device());
	ASSERT_EQ(0, read_u64(SLOT_BYTES, &before)) TH_LOG("%s: %s", SLOT_BYTES, strerror(errno));
	attach_init(&a0, self->bdev_fd);
	a0.flags = KVBLK_ATTACH_F_ENGINE_BIO;
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a0)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, add_target(self->fd, self->bdev_fd, KVBLK_ATTACH_F_ENGINE_PRP, &a1))
		TH_LOG("%s", strerror(errno));
	ASSERT_EQ((__u32)KVBLK_ENGINE_PRP, a1.engine);
	ASSERT_LE(16ULL << 20, a0.capacity);
	reg_init(&r, buf, len);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("%s", strerror(errno));

	expect_target_batch(_metadata, self->fd, 0, r.buf_id, buf, 0, 8, 1 << 20, ref);
	expect_target_batch(_metadata, self->fd, 1, r.buf_id, buf, 8 << 20, 16, 256 << 10, ref);
	expect_target_batch(_metadata, self->fd, 0, r.buf_id, buf, 4 << 20, 64, 128 << 10, ref);
	expect_target_batch(_metadata, self->fd, 1, r.buf_id, buf, 0, 64, 64 << 10, ref);
	expect_target_batch(_metadata, self->fd, 0, r.buf_id, buf, 12 << 20, 1, 1 << 20, ref);
	expect_target_batch(_metadata, self->fd, 1, r.buf_id, buf, 3 << 20, 1, 1 << 20, ref);

	/*
	 * The file keeps its slots and their bvec arrays; closing it frees
	 * every byte of them (/sys/kernel/kvblk/slot_bytes back where it
	 * was before the first batch; only this file ran batches since).
	 */
	ASSERT_EQ(0, read_u64(SLOT_BYTES, &kept));
	EXPECT_LT(before, kept);
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, read_u64(SLOT_BYTES, &after));
	EXPECT_EQ(before, after) TH_LOG("slot bytes %llu before the file's batches, %llu after it closed",
				       before, after);
	munmap(ref, 1 << 20);
	munmap(buf, len);
}

/*
 * A context keeps its last batch for the next (kmod/batch.c,
 * kvblk_batch_keep()), whose objects after the ones it validated still
 * hold the last batch's: 32 objects, then 8 rejected at descriptor 5, then
 * 4. The rejected batch gives back exactly the buffer references it took
 * (5): one too many or too few and the buffer does not unregister (-EBUSY
 * while counted in flight) or its count underflows (a refcount warning
 * fails the case); each good batch reads what pread(O_DIRECT) reads.
 */
TEST_F(kvblk, batch_reused_after_larger_and_rejected)
{
	struct kvblk_desc_result res[8];
	struct kvblk_io_desc d[8];
	struct kvblk_load_many lm;
	struct kvblk_buf_unreg u;
	struct kvblk_buf_reg r;
	struct kvblk_attach a;
	size_t len = 8 << 20;
	unsigned char *buf = map_filled(len, FILL), *ref = map_filled(64 << 10, 0);

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, ref);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	ASSERT_LE(4ULL << 20, a.capacity);
	reg_init(&r, buf, len);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("%s", strerror(errno));
	expect_target_batch(_metadata, self->fd, 0, r.buf_id, buf, 0, 32, 64 << 10, ref);

	memset(d, 0, sizeof(d));
	for (int i = 0; i < 8; i++) {
		d[i].offset = (__u64)i << 16;
		d[i].length = 64 << 10;
		d[i].buf_offset = (__u64)i << 16;
		d[i].buf_id = r.buf_id;
	}
	d[5].length = 100;	/* not a multiple of the logical block size */
	lm_init(&lm, d, res, 8);
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm));
	EXPECT_EQ(5, lm.bad_index);
	EXPECT_EQ(-EINVAL, res[5].status);
	EXPECT_EQ(-ECANCELED, res[4].status);

	unreg_init(&u, r.buf_id);
	EXPECT_EQ(0, ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u))
		TH_LOG("unregister after the rejected batch: %s", strerror(errno));
	reg_init(&r, buf, len);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("%s", strerror(errno));
	expect_target_batch(_metadata, self->fd, 0, r.buf_id, buf, 1 << 20, 4, 64 << 10, ref);
	munmap(ref, 64 << 10);
	munmap(buf, len);
}

TEST_F(kvblk, attach_rdwr_accepted)
{
	struct kvblk_attach a;
	int rw = open(test_device(), O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, rw) TH_LOG("open O_RDWR: %s", strerror(errno));
	attach_ok(_metadata, self->fd, rw, &a);
	close(rw);
}

TEST_F(kvblk, attach_two_contexts_same_namespace)
{
	struct kvblk_attach a, b;
	int fd2 = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, fd2);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	attach_ok(_metadata, fd2, self->bdev_fd, &b);
	EXPECT_EQ(a.nsid, b.nsid);
	EXPECT_EQ(a.capacity, b.capacity);
	close(fd2);
}

/*
 * A block device that is not an NVMe namespace is served by the block-layer
 * engine; asking for the PRP engine there is refused.
 */
TEST_F(kvblk, attach_non_nvme_bio_engine)
{
	struct other_bdev o;
	struct kvblk_attach a;
	unsigned long long bytes = 0;
	int ofd, ret, fd2;

	ret = other_bdev_get(&o);
	if (ret) {
		other_bdev_put(&o);
		SKIP(return, "no non-NVMe block device (brd or loop): %s", strerror(-ret));
	}
	ofd = open(o.path, O_RDONLY | O_CLOEXEC);
	EXPECT_LE(0, ofd) TH_LOG("open %s: %s", o.path, strerror(errno));
	if (ofd >= 0) {
		fd2 = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
		ASSERT_LE(0, fd2);
		attach_init(&a, ofd);
		a.flags = KVBLK_ATTACH_F_ENGINE_PRP;
		EXPECT_ERRNO(EOPNOTSUPP, do_ioctl(fd2, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s", o.path);
		attach_init(&a, ofd);
		ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s: %s", o.path, strerror(errno));
		EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, a.engine);
		EXPECT_EQ(0U, a.nsid);
		EXPECT_EQ(0, ioctl(ofd, BLKGETSIZE64, &bytes));
		EXPECT_EQ(bytes, a.capacity);
		EXPECT_LE(4U, a.buf_align);
		close(fd2);
		close(ofd);
	}
	other_bdev_put(&o);
}

TEST_F(kvblk, attach_metadata_format_eopnotsupp)
{
	const char *md = getenv("KVBLK_TEST_MD_DEVICE");
	struct kvblk_attach a;
	int mfd;

	if (!md || !*md)
		SKIP(return, "KVBLK_TEST_MD_DEVICE not set");
	mfd = open(md, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, mfd) TH_LOG("open %s: %s", md, strerror(errno));
	attach_init(&a, mfd);
	a.flags = KVBLK_ATTACH_F_ENGINE_PRP;
	EXPECT_ERRNO(EOPNOTSUPP, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	/* Without a flag: the block layer alone, which handles the metadata. */
	attach_init(&a, mfd);
	EXPECT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(1U << KVBLK_ENGINE_BIO, a.engines);
	close(mfd);
}

/* ---- attach: what it reports --------------------------------------------- */

TEST_F(kvblk, attach_lba_size_equals_blksszget)
{
	struct kvblk_attach a;
	int lba = 0;

	ASSERT_EQ(0, ioctl(self->bdev_fd, BLKSSZGET, &lba));
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	EXPECT_EQ((__u32)lba, a.lba_size);
}

TEST_F(kvblk, attach_capacity_equals_blkgetsize64)
{
	struct kvblk_attach a;
	__u64 bytes = 0;

	ASSERT_EQ(0, ioctl(self->bdev_fd, BLKGETSIZE64, &bytes));
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	EXPECT_EQ(bytes, a.capacity);
}

TEST_F(kvblk, attach_nsid_equals_nvme_ioctl_id)
{
	struct kvblk_attach a;
	int nsid = ioctl(self->bdev_fd, NVME_IOCTL_ID);

	ASSERT_LT(0, nsid) TH_LOG("NVME_IOCTL_ID: %s", strerror(errno));
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	EXPECT_EQ((__u32)nsid, a.nsid);
}

/*
 * Header: max_cmd_bytes is, for the PRP engine, within the controller's
 * limit (max_hw_sectors_kb); for the block-layer engine (the default) at
 * most the tunable's 8 MiB, the block layer splitting further. Whole LBAs
 * either way.
 */
TEST_F(kvblk, attach_max_cmd_bytes_within_controller_limit)
{
	char path[PATH_MAX + 40];
	struct kvblk_attach a;
	struct blkinfo bi;
	__u64 kb = 0;
	int fd2;

	ASSERT_EQ(0, blkinfo_get(self->bdev_fd, &bi));
	snprintf(path, sizeof(path), "%s/queue/max_hw_sectors_kb", bi.disk);
	ASSERT_EQ(0, read_u64(path, &kb)) TH_LOG("read %s", path);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	EXPECT_LE(a.max_cmd_bytes, 8U << 20);
	EXPECT_LE(a.lba_size, a.max_cmd_bytes);
	/* Objects are split at this size into whole-LBA commands. */
	EXPECT_EQ(0U, a.max_cmd_bytes % a.lba_size);
	if (!nvme_pcie(&bi))
		return;
	fd2 = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd2);
	attach_init(&a, self->bdev_fd);
	a.flags = KVBLK_ATTACH_F_ENGINE_PRP;
	ASSERT_EQ(0, ioctl(fd2, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s", strerror(errno));
	EXPECT_LE((__u64)a.max_cmd_bytes, kb * 1024);
	EXPECT_LE(a.lba_size, a.max_cmd_bytes);
	EXPECT_EQ(0U, a.max_cmd_bytes % a.lba_size);
	close(fd2);
}

TEST_F(kvblk, attach_start_lba_matches_sysfs)
{
	struct kvblk_attach a;
	struct blkinfo bi;

	ASSERT_EQ(0, blkinfo_get(self->bdev_fd, &bi));
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	ASSERT_LT(0U, a.lba_size);
	EXPECT_EQ(bi.part_start * 512 / a.lba_size, a.start_lba);
}

TEST_F(kvblk, attach_nr_hw_queues_equals_blk_mq)
{
	struct kvblk_attach a;
	struct blkinfo bi;
	int nq;

	ASSERT_EQ(0, blkinfo_get(self->bdev_fd, &bi));
	nq = count_hw_queues(&bi);
	ASSERT_LT(0, nq) TH_LOG("%s/mq has no hardware queues", bi.disk);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	EXPECT_EQ((__u32)nq, a.nr_hw_queues);
}

/*
 * Header: without a flag every block device gets the block-layer engine; an
 * nvme-pci namespace also the PRP engine for memory without struct pages
 * (@engines). A batch into host memory is served by the block layer.
 */
TEST_F(kvblk, attach_default_engine_bio_on_nvme_pci)
{
	const size_t len = 1 << 20;
	struct kvblk_desc_result res;
	struct kvblk_load_many lm;
	struct kvblk_buf_reg reg;
	struct kvblk_io_desc d;
	struct kvblk_attach a;
	struct blkinfo bi;
	unsigned char *buf;

	ASSERT_EQ(0, blkinfo_get(self->bdev_fd, &bi));
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, a.engine);
	EXPECT_EQ((1U << KVBLK_ENGINE_BIO) |
		  (nvme_pcie(&bi) ? 1U << KVBLK_ENGINE_PRP : 0), a.engines);
	EXPECT_EQ(0U, a.reserved5);
	EXPECT_EQ(0ULL, a.reserved);
	for (unsigned int i = 0; i < ARRAY_SIZE(a.reserved2); i++) {
		EXPECT_EQ(0ULL, a.reserved2[i]);
	}

	buf = map_filled(len, FILL);
	ASSERT_NE(NULL, buf);
	reg_init(&reg, buf, len);
	ASSERT_OK(ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &reg));
	memset(&d, 0, sizeof(d));
	d.length = 256 << 10;
	d.buf_id = reg.buf_id;
	lm_init(&lm, &d, &res, 1);
	ASSERT_EQ(1, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, lm.engine);
	EXPECT_EQ(1U << KVBLK_ENGINE_BIO, lm.engines);
	EXPECT_EQ(0, res.status);
	munmap(buf, len);
}

/* Header: KVBLK_ATTACH_F_ENGINE_PRP, the opt-in: the PRP engine for all memory. */
TEST_F(kvblk, attach_engine_prp_flag_on_nvme_pci)
{
	struct kvblk_attach a;
	struct blkinfo bi;

	ASSERT_EQ(0, blkinfo_get(self->bdev_fd, &bi));
	if (!nvme_pcie(&bi))
		SKIP(return, "%s is not a blk-mq nvme-pci namespace", test_device());
	attach_init(&a, self->bdev_fd);
	a.flags = KVBLK_ATTACH_F_ENGINE_PRP;
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ((__u32)KVBLK_ENGINE_PRP, a.engine);
	EXPECT_EQ(1U << KVBLK_ENGINE_PRP, a.engines);
	EXPECT_EQ(4U, a.buf_align);
	EXPECT_LT(0U, a.nsid);
}

/* Header: @engines is only written when @size covers it (KVBLK_ATTACH_SIZE_VER3). */
TEST_F(kvblk, attach_ver2_size_leaves_engines)
{
	struct kvblk_attach a;

	attach_init(&a, self->bdev_fd);
	a.size = KVBLK_ATTACH_SIZE_VER2;
	a.engines = 0xdeadbeef;
	a.reserved5 = 0xfeedf00d;
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, a.engine);
	EXPECT_EQ(0xdeadbeefU, a.engines);
	EXPECT_EQ(0xfeedf00dU, a.reserved5);
}

/* Header: reserved5 must be 0. */
TEST_F(kvblk, attach_reserved5_einval)
{
	struct kvblk_attach a;

	attach_init(&a, self->bdev_fd);
	a.reserved5 = 1;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_ATTACH, &a));
	expect_attachable(_metadata, self->fd, self->bdev_fd);
}

/* ---- partitions ---------------------------------------------------------- */

TEST_F(kvblk, partition_attach_geometry)
{
	char part[PATH_MAX];
	struct kvblk_attach a, whole;
	struct blkinfo bi;
	__u64 bytes = 0;
	int pfd, ctx2;

	if (!find_partition(self->bdev_fd, part, sizeof(part)))
		SKIP(return, "%s has no partition", test_device());
	pfd = open(part, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, pfd) TH_LOG("open %s: %s", part, strerror(errno));
	ASSERT_EQ(0, blkinfo_get(pfd, &bi));
	ASSERT_TRUE(bi.is_part);
	ASSERT_EQ(0, ioctl(pfd, BLKGETSIZE64, &bytes));
	attach_ok(_metadata, self->fd, pfd, &a);
	EXPECT_EQ(bytes, a.capacity);
	EXPECT_EQ(bi.part_start * 512 / a.lba_size, a.start_lba);
	ctx2 = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, ctx2);
	attach_ok(_metadata, ctx2, self->bdev_fd, &whole);
	EXPECT_EQ(whole.nsid, a.nsid);
	EXPECT_EQ(whole.lba_size, a.lba_size);
	EXPECT_LT(a.capacity, whole.capacity);
	close(ctx2);
	close(pfd);
}

/* Reads the first and last LBA of the partition; bytes equal pread on it. */
TEST_F(kvblk, partition_load_equals_pread)
{
	char part[PATH_MAX];
	struct kvblk_io_desc d[2];
	struct kvblk_desc_result r[2];
	struct kvblk_load_many lm;
	struct kvblk_buf_reg reg;
	struct kvblk_attach a;
	unsigned char *buf, *ref;
	int pfd, dfd;
	size_t len;

	if (!find_partition(self->bdev_fd, part, sizeof(part)))
		SKIP(return, "%s has no partition", test_device());
	pfd = open(part, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, pfd);
	attach_ok(_metadata, self->fd, pfd, &a);
	len = round_up_u64(2 * a.lba_size, page_size());
	buf = map_filled(len, FILL);
	ref = map_filled(a.lba_size, 0);
	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, ref);
	reg_init(&reg, buf, len);
	ASSERT_OK(ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &reg));
	memset(d, 0, sizeof(d));
	d[0].length = d[1].length = a.lba_size;
	d[1].offset = a.capacity - a.lba_size;
	d[1].buf_offset = a.lba_size;
	d[0].buf_id = d[1].buf_id = reg.buf_id;
	lm_init(&lm, d, r, 2);
	EXPECT_EQ(2, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm)) TH_LOG("load_many: %s", strerror(errno));
	dfd = open(part, O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, dfd);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(0, r[i].status);
		ASSERT_EQ((ssize_t)a.lba_size, pread(dfd, ref, a.lba_size, d[i].offset));
		EXPECT_EQ(0, memcmp(buf + d[i].buf_offset, ref, a.lba_size)) TH_LOG("descriptor %d", i);
	}
	close(dfd);
	close(pfd);
}

/* One LBA past the partition's end is still inside the namespace: -ERANGE. */
TEST_F(kvblk, partition_past_end_erange)
{
	char part[PATH_MAX];
	struct kvblk_io_desc d;
	struct kvblk_desc_result r;
	struct kvblk_load_many lm;
	struct kvblk_buf_reg reg;
	struct kvblk_attach a;
	unsigned char *buf;
	int pfd;
	size_t len;

	if (!find_partition(self->bdev_fd, part, sizeof(part)))
		SKIP(return, "%s has no partition", test_device());
	pfd = open(part, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, pfd);
	attach_ok(_metadata, self->fd, pfd, &a);
	len = round_up_u64(a.lba_size, page_size());
	buf = map_filled(len, FILL);
	ASSERT_NE(NULL, buf);
	reg_init(&reg, buf, len);
	ASSERT_OK(ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &reg));
	memset(&d, 0, sizeof(d));
	d.offset = a.capacity;
	d.length = a.lba_size;
	d.buf_id = reg.buf_id;
	lm_init(&lm, &d, &r, 1);
	EXPECT_ERRNO(ERANGE, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm));
	EXPECT_EQ(0, lm.bad_index);
	EXPECT_EQ(-ERANGE, r.status);
	EXPECT_TRUE(all_bytes(buf, len, FILL));
	close(pfd);
}

/* ---- register: unattached context and memory rules --------------------------- */

TEST_F(kvblk, reg_before_attach_enxio)
{
	struct kvblk_buf_reg r;
	unsigned char *buf = map_filled(page_size(), 0);

	ASSERT_NE(NULL, buf);
	reg_init(&r, buf, page_size());
	EXPECT_ERRNO(ENXIO, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

TEST_F(kvblk, unreg_before_attach_enoent)
{
	struct kvblk_buf_unreg u;

	/* Header lists no -ENXIO for unregister: no buffer exists, so -ENOENT. */
	unreg_init(&u, 0);
	EXPECT_ERRNO(ENOENT, do_ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u));
}

TEST_F(kvblk, load_many_before_attach_enxio)
{
	struct kvblk_io_desc d = { .length = 4096 };
	struct kvblk_desc_result r;
	struct kvblk_load_many lm;

	lm_init(&lm, &d, &r, 1);
	EXPECT_ERRNO(ENXIO, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm));
}

/*
 * Header: once the struct is accepted, results and output fields are written
 * on every return but -EINTR and -EFAULT; a call rejected before submission
 * leaves every result -ECANCELED; @bad_index is -1 unless a descriptor was
 * the reason. -ENXIO is such a return.
 */
TEST_F(kvblk, load_many_before_attach_writes_outputs)
{
	struct kvblk_io_desc d[2] = { { .length = 4096 }, { .offset = 4096, .length = 4096 } };
	struct kvblk_desc_result r[2];
	struct kvblk_load_many lm;

	memset(r, GARBAGE, sizeof(r));
	lm_init(&lm, d, r, 2);
	lm.bad_index = 5;
	lm.nr_ok = 7;
	EXPECT_ERRNO(ENXIO, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm));
	EXPECT_EQ(-1, lm.bad_index);
	EXPECT_EQ(0U, lm.nr_ok);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(-ECANCELED, r[i].status) TH_LOG("result %d", i);
		EXPECT_EQ(0ULL, r[i].bytes) TH_LOG("result %d", i);
		EXPECT_EQ(0U, r[i].reserved) TH_LOG("result %d", i);
	}
}

TEST_F(kvblk, reg_two_buffers_distinct_ids)
{
	struct kvblk_buf_reg r1, r2;
	struct kvblk_attach a;
	unsigned char *buf = map_filled(2 * page_size(), 0);

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	reg_init(&r1, buf, page_size());
	reg_init(&r2, buf + page_size(), page_size());
	r2.buf_id = 0xdeadbeef;	/* out field: ignored on input */
	ASSERT_OK(ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r1));
	ASSERT_OK(ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r2));
	EXPECT_NE(r1.buf_id, r2.buf_id);
	/* Header: @buf_id is never 0. */
	EXPECT_NE(0U, r1.buf_id);
	EXPECT_NE(0U, r2.buf_id);
}

/* RLIMIT_MEMLOCK, for a caller without CAP_IPC_LOCK. Runs in a child. */
struct memlock_outcome {
	int stage;	/* how far the child got */
	int small_ret;	/* register under the limit */
	int small_err;
	int big_ret;	/* register over the limit */
	int big_err;
};

static void memlock_child(int bdev_fd, struct memlock_outcome *out)
{
	const size_t pg = page_size();
	const struct rlimit rl = { .rlim_cur = 16 * pg, .rlim_max = 16 * pg };
	struct kvblk_buf_reg r;
	struct kvblk_attach a;
	unsigned char *small, *big;
	int ctx;

	if (drop_cap_ipc_lock())
		_exit(1);
	out->stage = 1;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(1);
	out->stage = 2;
	ctx = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	attach_init(&a, bdev_fd);
	if (ctx < 0 || ioctl(ctx, KVBLK_IOC_ATTACH, &a))
		_exit(1);
	out->stage = 3;
	small = map_filled(pg, 0);
	big = map_filled(64 * pg, 0);
	if (!small || !big)
		_exit(1);
	out->stage = 4;
	reg_init(&r, small, pg);
	out->small_ret = ioctl(ctx, KVBLK_IOC_REGISTER_BUFFER, &r);
	out->small_err = errno;
	reg_init(&r, big, 64 * pg);
	out->big_ret = ioctl(ctx, KVBLK_IOC_REGISTER_BUFFER, &r);
	out->big_err = errno;
	out->stage = 5;
	_exit(0);
}

TEST_F(kvblk, reg_memlock_rlimit_enomem)
{
	struct memlock_outcome *out;
	int status;
	pid_t pid;

	out = mmap(NULL, sizeof(*out), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, out);
	memset(out, 0, sizeof(*out));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		memlock_child(self->bdev_fd, out);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(5, out->stage) TH_LOG("child stopped at stage %d (1 capset, 2 setrlimit, 3 attach, 4 mmap)",
					 out->stage);
	EXPECT_EQ(0, out->small_ret) TH_LOG("1 page under a 16-page limit: %s", strerror(out->small_err));
	EXPECT_EQ(-1, out->big_ret);
	EXPECT_EQ(ENOMEM, out->big_err) TH_LOG("64 pages over a 16-page limit: %s", strerror(out->big_err));
}

TEST_F_TIMEOUT(kvblk, reg_1025th_buffer_enospc, 300)
{
	const size_t pg = page_size();
	unsigned char *buf = map_filled((MAX_BUFFERS + 1) * pg, 0);
	struct kvblk_buf_unreg u;
	struct kvblk_buf_reg r;
	struct kvblk_attach a;
	__u32 last = 0;

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	for (unsigned int i = 0; i < MAX_BUFFERS; i++) {
		reg_init(&r, buf + (size_t)i * pg, pg);
		ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r))
			TH_LOG("buffer %u: %s", i, strerror(errno));
		ASSERT_NE(0U, r.buf_id);
		last = r.buf_id;
	}
	reg_init(&r, buf + MAX_BUFFERS * pg, pg);
	EXPECT_ERRNO(ENOSPC, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
	/* A slot freed by unregister is usable again. */
	unreg_init(&u, last);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u));
	reg_init(&r, buf + MAX_BUFFERS * pg, pg);
	EXPECT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("%s", strerror(errno));
}

/* ======================================================================== */
/*
 * Fixture kvblk_io: an attached context with one registered destination
 * buffer (filled with FILL), an unregistered spare mapping, and a valid batch
 * of IO_NR descriptors (one LBA each, into separate slots of the buffer).
 */
#define IO_NR 4
#define SLOT (64 * 1024)

FIXTURE(kvblk_io) {
	int fd;
	int bdev_fd;
	struct kvblk_attach at;
	unsigned char *buf;
	size_t buf_len;
	__u32 buf_id;
	unsigned char *spare;
	size_t spare_len;
	struct kvblk_io_desc descs[IO_NR];
	struct kvblk_desc_result res[IO_NR];
	struct kvblk_load_many lm;
};

FIXTURE_SETUP(kvblk_io)
{
	struct kvblk_buf_reg r;

	self->fd = -1;
	self->bdev_fd = -1;
	self->fd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", KVBLK_NODE, strerror(errno));
	self->bdev_fd = open(test_device(), O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, self->bdev_fd) TH_LOG("open %s: %s", test_device(), strerror(errno));
	attach_ok(_metadata, self->fd, self->bdev_fd, &self->at);
	ASSERT_LE(self->at.lba_size, (__u32)SLOT / 2);
	ASSERT_LE((__u64)(8 * IO_NR) * self->at.lba_size, self->at.capacity);

	self->buf_len = IO_NR * SLOT;
	self->buf = map_filled(self->buf_len, FILL);
	ASSERT_NE(NULL, self->buf);
	reg_init(&r, self->buf, self->buf_len);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r))
		TH_LOG("register: %s", strerror(errno));
	self->buf_id = r.buf_id;

	self->spare_len = 16 * page_size();
	self->spare = map_filled(self->spare_len, 0);
	ASSERT_NE(NULL, self->spare);

	memset(self->descs, 0, sizeof(self->descs));
	for (unsigned int i = 0; i < IO_NR; i++) {
		self->descs[i].offset = (__u64)(2 * i + 1) * self->at.lba_size;
		self->descs[i].length = self->at.lba_size;
		self->descs[i].buf_offset = (__u64)i * SLOT;
		self->descs[i].buf_id = self->buf_id;
		self->descs[i].tag = 0x6b76626c00000000ULL | i;
	}
	lm_init(&self->lm, self->descs, self->res, IO_NR);
}

FIXTURE_TEARDOWN(kvblk_io)
{
	if (self->bdev_fd >= 0)
		close(self->bdev_fd);
	if (self->fd >= 0)
		close(self->fd);
}

/*
 * The batch must fail as a whole with @err because of descriptor @bad: the
 * header's rules for a rejected batch (bad_index, the reason in its result,
 * -ECANCELED in all others, nothing read).
 */
static void expect_batch_rejected(struct __test_metadata *_metadata,
				  FIXTURE_DATA(kvblk_io) *self, int err, int bad)
{
	memset(self->res, GARBAGE, sizeof(self->res));
	self->lm.bad_index = 0x7eadbeef;
	self->lm.nr_ok = 0xdead;
	EXPECT_ERRNO(err, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm));
	EXPECT_EQ(bad, self->lm.bad_index);
	EXPECT_EQ(0U, self->lm.nr_ok);
	for (int i = 0; i < IO_NR; i++) {
		EXPECT_EQ(i == bad ? -err : -ECANCELED, self->res[i].status) TH_LOG("result %d", i);
		EXPECT_EQ(0ULL, self->res[i].bytes) TH_LOG("result %d", i);
		EXPECT_EQ(0U, self->res[i].reserved) TH_LOG("result %d", i);
	}
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL))
		TH_LOG("the destination was written by a rejected batch");
}

/* A valid batch: returns IO_NR, every result 0 and whole. */
static void expect_batch_ok(struct __test_metadata *_metadata, FIXTURE_DATA(kvblk_io) *self)
{
	memset(self->res, GARBAGE, sizeof(self->res));
	EXPECT_EQ(IO_NR, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm))
		TH_LOG("load_many: %s", strerror(errno));
	EXPECT_EQ((__u32)IO_NR, self->lm.nr_ok);
	for (int i = 0; i < IO_NR; i++) {
		EXPECT_EQ(0, self->res[i].status) TH_LOG("result %d", i);
		EXPECT_EQ(self->descs[i].length, self->res[i].bytes) TH_LOG("result %d", i);
	}
}

/* ---- register: struct rules (attached context) --------------------------- */

TEST_F(kvblk_io, reg_size_short_einval)
{
	static const __u32 sizes[] = { 0, 4, 8, KVBLK_BUF_REG_SIZE_VER0 - 8, KVBLK_BUF_REG_SIZE_VER0 - 1 };
	struct kvblk_buf_reg r;

	for (unsigned int i = 0; i < ARRAY_SIZE(sizes); i++) {
		reg_init(&r, self->spare, page_size());
		r.size = sizes[i];
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("size %u", sizes[i]);
	}
}

TEST_F(kvblk_io, reg_size_long_nonzero_tail_e2big)
{
	struct {
		struct kvblk_buf_reg r;
		unsigned char tail[TAIL_BYTES];
	} big;
	static const unsigned int pos[] = { 0, TAIL_BYTES - 1 };

	for (unsigned int i = 0; i < ARRAY_SIZE(pos); i++) {
		memset(&big, 0, sizeof(big));
		reg_init(&big.r, self->spare, page_size());
		big.r.size = sizeof(big);
		big.tail[pos[i]] = 0x80;
		EXPECT_ERRNO(E2BIG, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &big)) TH_LOG("tail byte %u", pos[i]);
	}
}

TEST_F(kvblk_io, reg_size_long_zero_tail_accepted)
{
	struct {
		struct kvblk_buf_reg r;
		unsigned char tail[TAIL_BYTES];
	} big;

	memset(&big, 0, sizeof(big));
	reg_init(&big.r, self->spare, page_size());
	big.r.size = sizeof(big);
	big.r.buf_id = self->buf_id;
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &big)) TH_LOG("%s", strerror(errno));
	EXPECT_NE(self->buf_id, big.r.buf_id);
	EXPECT_TRUE(all_bytes(big.tail, sizeof(big.tail), 0));
}

TEST_F(kvblk_io, reg_unknown_flag_einval)
{
	struct kvblk_buf_reg r;

	for (unsigned int bit = 0; bit < 32; bit++) {
		reg_init(&r, self->spare, page_size());
		r.flags = 1u << bit;
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("flag bit %u", bit);
	}
}

TEST_F(kvblk_io, reg_reserved_nonzero_einval)
{
	struct kvblk_buf_reg r;

	reg_init(&r, self->spare, page_size());
	r.reserved = 1;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

TEST_F(kvblk_io, reg_reserved2_nonzero_einval)
{
	struct kvblk_buf_reg r;

	for (unsigned int i = 0; i < ARRAY_SIZE(r.reserved2); i++) {
		reg_init(&r, self->spare, page_size());
		r.reserved2[i] = 1ULL << 40;
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("reserved2[%u]", i);
	}
}

TEST_F(kvblk_io, reg_bad_pointer_efault)
{
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, bad_ptr()));
}

/* ---- register: the range ------------------------------------------------- */

TEST_F(kvblk_io, reg_addr_misaligned_einval)
{
	struct kvblk_buf_reg r;

	reg_init(&r, self->spare + 512, page_size());
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
	reg_init(&r, self->spare + 4, page_size());
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

TEST_F(kvblk_io, reg_len_misaligned_einval)
{
	struct kvblk_buf_reg r;

	reg_init(&r, self->spare, page_size() + 512);
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
	reg_init(&r, self->spare, 512);
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

TEST_F(kvblk_io, reg_len_zero_einval)
{
	struct kvblk_buf_reg r;

	reg_init(&r, self->spare, 0);
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

TEST_F(kvblk_io, reg_addr_len_overflow_einval)
{
	struct kvblk_buf_reg r;

	reg_init(&r, NULL, 2 * page_size());
	r.addr = 0ULL - page_size();	/* page aligned; addr + len wraps */
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

/*
 * Header: "-EINVAL ... @len above 64 GiB". The range past the spare mapping
 * is unmapped, so a module that skips the check answers -EFAULT instead.
 */
TEST_F(kvblk_io, reg_len_over_64g_einval)
{
	struct kvblk_buf_reg r;

	reg_init(&r, self->spare, (64ULL << 30) + page_size());
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

TEST_F(kvblk_io, reg_unmapped_efault)
{
	const size_t len = 4 * page_size();
	struct kvblk_buf_reg r;
	unsigned char *p = map_filled(len, 0);

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, munmap(p, len));
	reg_init(&r, p, len);
	EXPECT_ERRNO(EFAULT, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

TEST_F(kvblk_io, reg_partly_unmapped_efault)
{
	const size_t pg = page_size();
	struct kvblk_buf_reg r;
	unsigned char *p = map_filled(4 * pg, 0);

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, munmap(p + 3 * pg, pg));
	reg_init(&r, p, 4 * pg);
	EXPECT_ERRNO(EFAULT, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
	/* Nothing is left behind: the mapped part registers afterwards. */
	reg_init(&r, p, 3 * pg);
	EXPECT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("%s", strerror(errno));
}

/* Header, common errors: -EFAULT when @addr is "not readable or writable". */
TEST_F(kvblk_io, reg_readonly_mapping_efault)
{
	struct kvblk_buf_reg r;
	void *p = mmap(NULL, page_size(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT_NE(MAP_FAILED, p);
	reg_init(&r, p, page_size());
	EXPECT_ERRNO(EFAULT, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

/* ---- register: kinds ----------------------------------------------------- */

/* Header: "-EINVAL unknown @kind". */
TEST_F(kvblk_io, reg_unknown_kind_einval)
{
	static const __u32 kinds[] = { KVBLK_MEM_KIND_MAX, 0x7fffffff, 0xffffffff };
	struct kvblk_buf_reg r;

	for (unsigned int i = 0; i < ARRAY_SIZE(kinds); i++) {
		reg_init(&r, self->spare, page_size());
		r.kind = kinds[i];
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("kind %u", kinds[i]);
	}
}

static __u64 get_features(int fd)
{
	__u64 feat = 0;

	return ioctl(fd, KVBLK_IOC_GET_FEATURES, &feat) ? 0 : feat;
}

TEST_F(kvblk_io, reg_cuda_without_nvidia_eopnotsupp)
{
	struct kvblk_buf_reg r;

	if (get_features(self->fd) & KVBLK_FEAT_MEM_CUDA)
		SKIP(return, "KVBLK_FEAT_MEM_CUDA is set: nvidia-p2p is present");
	reg_init(&r, NULL, 64 * 1024);
	r.kind = KVBLK_MEM_CUDA;
	r.addr = 0x7f0000000000ULL;	/* 64 KiB aligned */
	EXPECT_ERRNO(EOPNOTSUPP, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

TEST_F(kvblk_io, reg_p2pdma_unavailable_eopnotsupp)
{
	struct kvblk_buf_reg r;

	if (get_features(self->fd) & KVBLK_FEAT_MEM_P2PDMA)
		SKIP(return, "KVBLK_FEAT_MEM_P2PDMA is set");
	reg_init(&r, self->spare, page_size());
	r.kind = KVBLK_MEM_P2PDMA;
	EXPECT_ERRNO(EOPNOTSUPP, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

/*
 * Header: "-EINVAL ... a page of the range is not P2PDMA memory". A context
 * whose only target is KVBLK_ATTACH_F_ENGINE_BIO has no DMA device, so the
 * check runs without one (kvblk_mem_p2pdma_create(NULL, ...)); its
 * kernel-log line once took dev_name(NULL) and oopsed (found by the fuzz
 * case, 7.2 iommu, 2026-12-03).
 */
TEST_F(kvblk, reg_p2pdma_host_memory_bio_only_einval)
{
	size_t len = 4 * page_size();
	unsigned char *mem = map_filled(len, 0x5a);
	struct kvblk_attach a;
	struct kvblk_buf_reg r;

	if (!(get_features(self->fd) & KVBLK_FEAT_MEM_P2PDMA)) {
		munmap(mem, len);
		SKIP(return, "KVBLK_FEAT_MEM_P2PDMA is not set");
	}
	attach_init(&a, self->bdev_fd);
	a.flags = KVBLK_ATTACH_F_ENGINE_BIO;
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("attach: %s", strerror(errno));
	reg_init(&r, mem, len);
	r.kind = KVBLK_MEM_P2PDMA;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
	munmap(mem, len);
}

TEST_F(kvblk_io, reg_dmabuf_unavailable_eopnotsupp)
{
	struct kvblk_buf_reg r;
	int p[2];

	if (get_features(self->fd) & KVBLK_FEAT_MEM_DMABUF)
		SKIP(return, "KVBLK_FEAT_MEM_DMABUF is set");
	ASSERT_EQ(0, pipe2(p, O_CLOEXEC));
	reg_init(&r, NULL, page_size());
	r.kind = KVBLK_MEM_DMABUF;
	r.dmabuf_fd = p[0];
	EXPECT_ERRNO(EOPNOTSUPP, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
	close(p[0]);
	close(p[1]);
}

/* Header: "-EINVAL ... @dmabuf_fd not 0 for another kind". */
TEST_F(kvblk_io, reg_host_with_dmabuf_fd_einval)
{
	struct kvblk_buf_reg r;

	reg_init(&r, self->spare, page_size());
	r.dmabuf_fd = self->bdev_fd;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
	reg_init(&r, self->spare, page_size());
	r.dmabuf_fd = -1;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r));
}

/* ---- unregister ---------------------------------------------------------- */

TEST_F(kvblk_io, unreg_size_short_einval)
{
	static const __u32 sizes[] = { 0, 4, 8, KVBLK_BUF_UNREG_SIZE_VER0 - 4, KVBLK_BUF_UNREG_SIZE_VER0 - 1 };
	struct kvblk_buf_unreg u;

	for (unsigned int i = 0; i < ARRAY_SIZE(sizes); i++) {
		unreg_init(&u, self->buf_id);
		u.size = sizes[i];
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u)) TH_LOG("size %u", sizes[i]);
	}
	expect_batch_ok(_metadata, self);	/* still registered */
}

TEST_F(kvblk_io, unreg_size_long_nonzero_tail_e2big)
{
	struct {
		struct kvblk_buf_unreg u;
		unsigned char tail[TAIL_BYTES];
	} big;
	static const unsigned int pos[] = { 0, TAIL_BYTES - 1 };

	for (unsigned int i = 0; i < ARRAY_SIZE(pos); i++) {
		memset(&big, 0, sizeof(big));
		unreg_init(&big.u, self->buf_id);
		big.u.size = sizeof(big);
		big.tail[pos[i]] = 1;
		EXPECT_ERRNO(E2BIG, do_ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &big)) TH_LOG("tail byte %u", pos[i]);
	}
	expect_batch_ok(_metadata, self);
}

TEST_F(kvblk_io, unreg_size_long_zero_tail_accepted)
{
	struct {
		struct kvblk_buf_unreg u;
		unsigned char tail[TAIL_BYTES];
	} big;
	struct kvblk_buf_unreg u;

	memset(&big, 0, sizeof(big));
	unreg_init(&big.u, self->buf_id);
	big.u.size = sizeof(big);
	EXPECT_EQ(0, ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &big)) TH_LOG("%s", strerror(errno));
	unreg_init(&u, self->buf_id);
	EXPECT_ERRNO(ENOENT, do_ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u));
}

TEST_F(kvblk_io, unreg_unknown_flag_einval)
{
	struct kvblk_buf_unreg u;

	for (unsigned int bit = 0; bit < 32; bit++) {
		unreg_init(&u, self->buf_id);
		u.flags = 1u << bit;
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u)) TH_LOG("flag bit %u", bit);
	}
	expect_batch_ok(_metadata, self);
}

TEST_F(kvblk_io, unreg_reserved_nonzero_einval)
{
	struct kvblk_buf_unreg u;

	unreg_init(&u, self->buf_id);
	u.reserved = 1;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u));
	expect_batch_ok(_metadata, self);
}

TEST_F(kvblk_io, unreg_bad_pointer_efault)
{
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, bad_ptr()));
	expect_batch_ok(_metadata, self);
}

TEST_F(kvblk_io, unreg_unknown_id_enoent)
{
	static const __u32 ids_delta[] = { 1, 1000, 0x7fffffff };
	struct kvblk_buf_unreg u;

	for (unsigned int i = 0; i < ARRAY_SIZE(ids_delta); i++) {
		unreg_init(&u, self->buf_id + ids_delta[i]);
		EXPECT_ERRNO(ENOENT, do_ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u)) TH_LOG("id %u", u.buf_id);
	}
	expect_batch_ok(_metadata, self);
}

TEST_F(kvblk_io, unreg_twice_enoent)
{
	struct kvblk_buf_unreg u;

	unreg_init(&u, self->buf_id);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u)) TH_LOG("%s", strerror(errno));
	unreg_init(&u, self->buf_id);
	EXPECT_ERRNO(ENOENT, do_ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u));
}

/* ---- load_many: struct rules --------------------------------------------- */

TEST_F(kvblk_io, load_many_valid_batch)
{
	expect_batch_ok(_metadata, self);
	EXPECT_EQ(-1, self->lm.bad_index);
}

TEST_F(kvblk_io, load_many_size_short_einval)
{
	static const __u32 sizes[] = { 0, 4, 8, KVBLK_LOAD_MANY_SIZE_VER0 - 8, KVBLK_LOAD_MANY_SIZE_VER0 - 1 };

	for (unsigned int i = 0; i < ARRAY_SIZE(sizes); i++) {
		self->lm.size = sizes[i];
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("size %u", sizes[i]);
	}
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
}

TEST_F(kvblk_io, load_many_size_long_nonzero_tail_e2big)
{
	struct {
		struct kvblk_load_many lm;
		unsigned char tail[TAIL_BYTES];
	} big;
	static const unsigned int pos[] = { 0, TAIL_BYTES - 1 };

	for (unsigned int i = 0; i < ARRAY_SIZE(pos); i++) {
		memset(&big, 0, sizeof(big));
		big.lm = self->lm;
		big.lm.size = sizeof(big);
		big.tail[pos[i]] = 1;
		EXPECT_ERRNO(E2BIG, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &big)) TH_LOG("tail byte %u", pos[i]);
	}
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
}

TEST_F(kvblk_io, load_many_size_long_zero_tail_accepted)
{
	struct {
		struct kvblk_load_many lm;
		unsigned char tail[TAIL_BYTES];
	} big;

	memset(&big, 0, sizeof(big));
	big.lm = self->lm;
	big.lm.size = sizeof(big);
	memset(self->res, GARBAGE, sizeof(self->res));
	EXPECT_EQ(IO_NR, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &big)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ((__u32)IO_NR, big.lm.nr_ok);
	EXPECT_EQ(-1, big.lm.bad_index);
	for (int i = 0; i < IO_NR; i++) {
		EXPECT_EQ(0, self->res[i].status);
	}
	EXPECT_TRUE(all_bytes(big.tail, sizeof(big.tail), 0));
}

TEST_F(kvblk_io, load_many_unknown_flag_einval)
{
	for (unsigned int bit = 0; bit < 32; bit++) {
		if ((1u << bit) & KVBLK_LOAD_F_ALL)
			continue;	/* known: kvblk_store_test */
		self->lm.flags = 1u << bit;
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("flag bit %u", bit);
		/* Unknown beside a known one too. */
		self->lm.flags |= KVBLK_LOAD_F_STORE;
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("flag bit %u", bit);
	}
	/* KVBLK_LOAD_F_DURABLE only qualifies a store. */
	self->lm.flags = KVBLK_LOAD_F_DURABLE;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm));
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
}

TEST_F(kvblk_io, load_many_reserved_nonzero_einval)
{
	for (unsigned int i = 0; i < ARRAY_SIZE(self->lm.reserved); i++) {
		lm_init(&self->lm, self->descs, self->res, IO_NR);
		self->lm.reserved[i] = 1;
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("reserved[%u]", i);
	}
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
}

TEST_F(kvblk_io, load_many_bad_pointer_efault)
{
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, bad_ptr()));
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
}

TEST_F(kvblk_io, load_many_descs_bad_pointer_efault)
{
	self->lm.descs = (__u64)(uintptr_t)bad_ptr();
	EXPECT_ERRNO(EFAULT, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm));
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
}

TEST_F(kvblk_io, load_many_results_bad_pointer_efault)
{
	self->lm.results = (__u64)(uintptr_t)bad_ptr();
	EXPECT_ERRNO(EFAULT, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm));
}

TEST_F(kvblk_io, load_many_out_fields_ignored_on_input)
{
	self->lm.bad_index = 12345;
	self->lm.nr_ok = 777;
	self->lm.engine = 0xff;
	self->lm.nr_cmds = ~0ULL;
	self->lm.elapsed_ns = ~0ULL;
	expect_batch_ok(_metadata, self);
	EXPECT_EQ(-1, self->lm.bad_index);
	EXPECT_GE(self->lm.nr_cmds, (__u64)IO_NR);
	EXPECT_NE(~0ULL, self->lm.nr_cmds);
}

TEST_F(kvblk_io, load_many_nr_descs_zero_einval)
{
	self->lm.nr_descs = 0;
	EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm));
}

TEST_F(kvblk_io, load_many_desc_bytes_short_einval)
{
	static const __u32 sizes[] = { 0, 8, 32, KVBLK_DESC_SIZE_VER0 - 1 };

	for (unsigned int i = 0; i < ARRAY_SIZE(sizes); i++) {
		self->lm.desc_bytes = sizes[i];
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("desc_bytes %u", sizes[i]);
	}
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
}

TEST_F(kvblk_io, load_many_result_bytes_short_einval)
{
	static const __u32 sizes[] = { 0, 8, KVBLK_DESC_RESULT_SIZE_VER0 - 1 };

	for (unsigned int i = 0; i < ARRAY_SIZE(sizes); i++) {
		self->lm.result_bytes = sizes[i];
		EXPECT_ERRNO(EINVAL, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("result_bytes %u", sizes[i]);
	}
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
}

/* @desc_bytes larger than 40 ("as the caller knows it"), zero tails: accepted. */
TEST_F(kvblk_io, load_many_desc_bytes_larger_accepted)
{
	const size_t stride = sizeof(struct kvblk_io_desc) + 16;
	unsigned char *arr = calloc(IO_NR, stride);

	ASSERT_NE(NULL, arr);
	for (int i = 0; i < IO_NR; i++)
		memcpy(arr + i * stride, &self->descs[i], sizeof(self->descs[i]));
	self->lm.descs = (__u64)(uintptr_t)arr;
	self->lm.desc_bytes = stride;
	memset(self->res, GARBAGE, sizeof(self->res));
	EXPECT_EQ(IO_NR, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("%s", strerror(errno));
	for (int i = 0; i < IO_NR; i++) {
		EXPECT_EQ(0, self->res[i].status);
	}
	free(arr);
}

/*
 * @desc_bytes larger than 40 and a non-zero byte past struct kvblk_io_desc in
 * descriptor 2 only. Header: "that descriptor is rejected with -E2BIG".
 */
TEST_F(kvblk_io, load_many_desc_bytes_larger_nonzero_tail_e2big)
{
	const size_t stride = sizeof(struct kvblk_io_desc) + 16;
	unsigned char *arr = calloc(IO_NR, stride);

	ASSERT_NE(NULL, arr);
	for (int i = 0; i < IO_NR; i++)
		memcpy(arr + i * stride, &self->descs[i], sizeof(self->descs[i]));
	arr[2 * stride + stride - 1] = 1;
	self->lm.descs = (__u64)(uintptr_t)arr;
	self->lm.desc_bytes = stride;
	expect_batch_rejected(_metadata, self, E2BIG, 2);
	free(arr);
}

/* @result_bytes larger than 16: results are written at that stride. */
TEST_F(kvblk_io, load_many_result_bytes_larger_accepted)
{
	const size_t stride = sizeof(struct kvblk_desc_result) + 16;
	unsigned char *arr = malloc(IO_NR * stride);

	ASSERT_NE(NULL, arr);
	memset(arr, GARBAGE, IO_NR * stride);
	self->lm.results = (__u64)(uintptr_t)arr;
	self->lm.result_bytes = stride;
	EXPECT_EQ(IO_NR, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("%s", strerror(errno));
	for (int i = 0; i < IO_NR; i++) {
		struct kvblk_desc_result r;

		memcpy(&r, arr + i * stride, sizeof(r));
		EXPECT_EQ(0, r.status) TH_LOG("result %d", i);
		EXPECT_EQ(self->descs[i].length, r.bytes) TH_LOG("result %d", i);
		/* Header: "The kernel writes the first 16 bytes of each result." */
		EXPECT_TRUE(all_bytes(arr + i * stride + sizeof(r), stride - sizeof(r), GARBAGE))
			TH_LOG("result %d: bytes past 16 were written", i);
	}
	free(arr);
}

/* A batch of @nr valid one-LBA descriptors (all into slot 0). */
static struct kvblk_io_desc *make_descs(FIXTURE_DATA(kvblk_io) *self, __u32 nr)
{
	struct kvblk_io_desc *d = calloc(nr, sizeof(*d));

	for (__u32 i = 0; d && i < nr; i++) {
		d[i].offset = (__u64)(i % 64) * self->at.lba_size;
		d[i].length = self->at.lba_size;
		d[i].buf_id = self->buf_id;
	}
	return d;
}

TEST_F_TIMEOUT(kvblk_io, load_many_nr_descs_above_max_descs_e2big, 120)
{
	__u32 max = max_descs_param();
	struct kvblk_desc_result *r;
	struct kvblk_io_desc *d;

	if (!max)
		SKIP(return, "/sys/module/kvblk/parameters/max_descs not readable");
	ASSERT_LE(max, MAX_DESCS_LIMIT);
	d = make_descs(self, max + 1);
	r = calloc(max + 1, sizeof(*r));
	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, r);
	lm_init(&self->lm, d, r, max + 1);
	EXPECT_ERRNO(E2BIG, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm)) TH_LOG("max_descs %u", max);
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
	free(d);
	free(r);
}

TEST_F_TIMEOUT(kvblk_io, load_many_nr_descs_above_65536_e2big, 120)
{
	const __u32 nr = MAX_DESCS_LIMIT + 1;
	struct kvblk_io_desc *d = make_descs(self, nr);
	struct kvblk_desc_result *r = calloc(nr, sizeof(*r));

	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, r);
	lm_init(&self->lm, d, r, nr);
	EXPECT_ERRNO(E2BIG, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm));
	self->lm.nr_descs = UINT32_MAX;
	EXPECT_ERRNO(E2BIG, do_ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &self->lm));
	EXPECT_TRUE(all_bytes(self->buf, self->buf_len, FILL));
	free(d);
	free(r);
}

/* ---- load_many: descriptor rules, only index 2 bad ------------------------ */

TEST_F(kvblk_io, desc_offset_not_lba_multiple_einval)
{
	self->descs[2].offset += self->at.lba_size / 2;
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

TEST_F(kvblk_io, desc_offset_odd_einval)
{
	self->descs[2].offset += 1;
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

TEST_F(kvblk_io, desc_length_not_lba_multiple_einval)
{
	self->descs[2].length += self->at.lba_size / 2;
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

TEST_F(kvblk_io, desc_length_zero_einval)
{
	self->descs[2].length = 0;
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

TEST_F(kvblk_io, desc_buf_offset_not_dword_aligned_einval)
{
	static const __u64 off[] = { 1, 2, 3, 6 };

	for (unsigned int i = 0; i < ARRAY_SIZE(off); i++) {
		self->descs[2].buf_offset = 2 * SLOT + off[i];
		expect_batch_rejected(_metadata, self, EINVAL, 2);
	}
}

TEST_F(kvblk_io, desc_unknown_buf_id_einval)
{
	self->descs[2].buf_id = self->buf_id + 1000;
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

TEST_F(kvblk_io, desc_unregistered_buf_id_einval)
{
	struct kvblk_buf_unreg u;
	struct kvblk_buf_reg r;

	reg_init(&r, self->spare, self->spare_len);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r)) TH_LOG("%s", strerror(errno));
	unreg_init(&u, r.buf_id);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u)) TH_LOG("%s", strerror(errno));
	self->descs[2].buf_id = r.buf_id;
	self->descs[2].buf_offset = 0;
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

TEST_F(kvblk_io, desc_buf_range_exceeded_einval)
{
	/* Starts inside the buffer, ends one LBA past its end. */
	self->descs[2].buf_offset = self->buf_len - self->at.lba_size;
	self->descs[2].length = 2 * self->at.lba_size;
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

TEST_F(kvblk_io, desc_buf_offset_past_buffer_einval)
{
	self->descs[2].buf_offset = self->buf_len;
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

TEST_F(kvblk_io, desc_buf_offset_plus_length_overflow_einval)
{
	self->descs[2].buf_offset = 0ULL - 4;	/* dword aligned; + length wraps */
	expect_batch_rejected(_metadata, self, EINVAL, 2);
}

/*
 * offset + length wraps around 2^64 (offset LBA aligned, length 2 LBAs).
 * Header: "[offset, offset+length) must lie inside the device (else
 * -ERANGE)"; it names no other errno for a range that wraps, and an offset
 * this large is past the device's end whatever the length.
 */
TEST_F(kvblk_io, desc_offset_plus_length_overflow_erange)
{
	self->descs[2].offset = 0ULL - self->at.lba_size;
	self->descs[2].length = 2 * self->at.lba_size;
	expect_batch_rejected(_metadata, self, ERANGE, 2);
}

TEST_F(kvblk_io, desc_past_device_end_erange)
{
	self->descs[2].offset = self->at.capacity - self->at.lba_size;
	self->descs[2].length = 2 * self->at.lba_size;
	expect_batch_rejected(_metadata, self, ERANGE, 2);
}

TEST_F(kvblk_io, desc_at_device_end_erange)
{
	self->descs[2].offset = self->at.capacity;
	expect_batch_rejected(_metadata, self, ERANGE, 2);
}

TEST_F(kvblk_io, desc_flags_nonzero_einval)
{
	for (unsigned int bit = 0; bit < 32; bit++) {
		self->descs[2].flags = 1u << bit;
		expect_batch_rejected(_metadata, self, EINVAL, 2);
	}
}

/* Two bad descriptors: the first one (1, -ERANGE) is reported; 3 is -ECANCELED. */
TEST_F(kvblk_io, desc_first_bad_index_reported)
{
	self->descs[1].offset = self->at.capacity;
	self->descs[3].length = 0;
	expect_batch_rejected(_metadata, self, ERANGE, 1);
}

/* The last descriptor of the batch ending exactly at the device's end is valid. */
TEST_F(kvblk_io, desc_ending_at_device_end_ok)
{
	self->descs[IO_NR - 1].offset = self->at.capacity - self->at.lba_size;
	expect_batch_ok(_metadata, self);
}

/* ---- data ---------------------------------------------------------------- */

/*
 * A valid batch returns nr_descs, every object whole, engine PRP, and the
 * bytes that pread(O_DIRECT) returns for the same ranges; every byte of the
 * destination outside the objects stays untouched. Objects: the first LBA;
 * a multi-command object (2 * max_cmd_bytes + 1 LBA) at an odd LBA into
 * buf_offset 512; one exactly max_cmd_bytes; eight LBAs mid-device into a
 * buf_offset 4 bytes past a page start; one ending at the device end into a
 * buf_offset 4 bytes before a page end.
 */
/*
 * Each of the @nr objects of @d, loaded into @buf (@len bytes, filled with FILL
 * around them), must equal pread(O_DIRECT) of its range, and every other byte
 * of @buf must still be FILL. @shadow (@len bytes of FILL) receives the
 * expected layout; @ref holds the longest object.
 */
static void expect_objects_equal_pread(struct __test_metadata *_metadata,
				       const struct kvblk_io_desc *d, int nr,
				       const unsigned char *buf, unsigned char *shadow,
				       size_t len, unsigned char *ref)
{
	int dfd = open(test_device(), O_RDONLY | O_DIRECT | O_CLOEXEC);

	ASSERT_LE(0, dfd) TH_LOG("open O_DIRECT: %s", strerror(errno));
	for (int i = 0; i < nr; i++) {
		ASSERT_EQ((ssize_t)d[i].length, pread(dfd, ref, d[i].length, d[i].offset))
			TH_LOG("pread object %d: %s", i, strerror(errno));
		memcpy(shadow + d[i].buf_offset, ref, d[i].length);
		EXPECT_EQ(0, memcmp(buf + d[i].buf_offset, ref, d[i].length))
			TH_LOG("object %d: bytes differ from pread", i);
	}
	close(dfd);
	/* Everything else, guard pages and misalignment gaps, untouched. */
	EXPECT_EQ(0, memcmp(buf, shadow, len)) TH_LOG("bytes outside the objects were written");
}

/*
 * Objects laid out for expect_objects_equal_pread(): each of @d's @nr objects
 * gets a buffer offset after a guard page, at misalignment @mis[i] bytes past
 * a page boundary; @g's buffer (registered, its id set in each descriptor)
 * and shadow are filled with FILL, and its reference buffer holds the
 * longest object.
 */
struct guarded_bufs {
	unsigned char *buf, *shadow, *ref;
	size_t len;
};

static void guarded_bufs_setup(struct __test_metadata *_metadata, int fd,
			       struct kvblk_io_desc *d, const __u64 *mis, int nr,
			       struct guarded_bufs *g)
{
	const size_t pg = page_size();
	struct kvblk_buf_reg reg;
	__u64 cursor = 0, longest = 0;

	for (int i = 0; i < nr; i++) {
		cursor = round_up_u64(cursor, pg) + pg + mis[i];
		d[i].buf_offset = cursor;
		cursor += d[i].length;
		if (d[i].length > longest)
			longest = d[i].length;
	}
	g->len = round_up_u64(cursor, pg) + pg;
	g->buf = map_filled(g->len, FILL);
	g->shadow = map_filled(g->len, FILL);
	g->ref = map_filled(round_up_u64(longest, pg), 0);
	ASSERT_NE(NULL, g->buf);
	ASSERT_NE(NULL, g->shadow);
	ASSERT_NE(NULL, g->ref);
	reg_init(&reg, g->buf, g->len);
	ASSERT_OK(ioctl(fd, KVBLK_IOC_REGISTER_BUFFER, &reg));
	for (int i = 0; i < nr; i++)
		d[i].buf_id = reg.buf_id;
}

TEST_F_TIMEOUT(kvblk, load_many_data_equals_pread, 120)
{
	enum { NR = 5 };
	const size_t pg = page_size();
	struct kvblk_desc_result res[NR];
	struct kvblk_io_desc d[NR];
	struct kvblk_load_many lm;
	struct kvblk_attach a;
	struct guarded_bufs g;
	struct blkinfo bi;
	__u64 lba, mc, mc_lba, min_cmds = 0;
	__u64 mis[NR];

	ASSERT_EQ(0, blkinfo_get(self->bdev_fd, &bi));
	/* The PRP engine's lists and splits where it serves (opt-in), else the block layer. */
	attach_init(&a, self->bdev_fd);
	if (nvme_pcie(&bi))
		a.flags = KVBLK_ATTACH_F_ENGINE_PRP;
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("attach: %s", strerror(errno));
	lba = a.lba_size;
	mc = a.max_cmd_bytes;
	ASSERT_LT(0ULL, lba);
	ASSERT_LE(lba, mc);
	mc_lba = mc / lba * lba;	/* LBA multiple for offsets and lengths */
	if (a.capacity < 8 * mc + 64 * lba)
		SKIP(return, "device too small: %llu bytes", (unsigned long long)a.capacity);

	memset(d, 0, sizeof(d));
	d[0].offset = 0;
	d[0].length = lba;
	mis[0] = 0;
	d[1].offset = 3 * lba;
	d[1].length = 2 * mc_lba + lba;
	mis[1] = 512;
	d[2].offset = mc_lba;
	d[2].length = mc_lba;
	mis[2] = 0;
	d[3].offset = a.capacity / 2 / lba * lba;
	d[3].length = 8 * lba;
	mis[3] = 4;
	d[4].offset = a.capacity - 2 * lba;
	d[4].length = 2 * lba;
	mis[4] = pg - 4;

	for (int i = 0; i < NR; i++) {
		d[i].tag = ~0ULL - i;
		min_cmds += (d[i].length + mc - 1) / mc;
	}
	/* Each object starts after a guard page, at its misalignment. */
	guarded_bufs_setup(_metadata, self->fd, d, mis, NR, &g);

	memset(res, GARBAGE, sizeof(res));
	lm_init(&lm, d, res, NR);
	lm.bad_index = 77;
	ASSERT_EQ(NR, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm)) TH_LOG("load_many: %s", strerror(errno));
	EXPECT_EQ((__u32)NR, lm.nr_ok);
	EXPECT_EQ(-1, lm.bad_index);
	EXPECT_EQ(nvme_pcie(&bi) ? (__u32)KVBLK_ENGINE_PRP : (__u32)KVBLK_ENGINE_BIO, lm.engine);
	EXPECT_LE(min_cmds, lm.nr_cmds);
	EXPECT_LT(0ULL, lm.elapsed_ns);
	for (int i = 0; i < NR; i++) {
		EXPECT_EQ(0, res[i].status) TH_LOG("object %d", i);
		EXPECT_EQ(0U, res[i].reserved) TH_LOG("object %d", i);
		EXPECT_EQ(d[i].length, res[i].bytes) TH_LOG("object %d", i);
	}

	expect_objects_equal_pread(_metadata, d, NR, g.buf, g.shadow, g.len, g.ref);
}

/*
 * The block-layer engine's commands are as large as the max_cmd_bytes
 * tunable (1 MiB by default), at any buffer offset: an object of that size
 * is one command even where its buffer spans one page more than the command
 * has pages (each command's bio_vec table is its own, not BIO_MAX_VECS
 * long). Until 2026-12-05 commands stopped at 1020 KiB, and every 1 MiB
 * object was two commands, 1020 KiB and 4 KiB.
 */
TEST_F_TIMEOUT(kvblk, bio_commands_are_max_cmd_bytes_at_any_buffer_offset, 120)
{
	enum { NR = 3 };
	const size_t pg = page_size();
	struct kvblk_desc_result res[NR];
	struct kvblk_io_desc d[NR];
	struct kvblk_load_many lm;
	struct kvblk_attach a;
	struct guarded_bufs g;
	__u64 tunable = 0, mc;
	const __u64 mis[NR] = { 0, 4, pg - 4 };

	ASSERT_EQ(0, read_u64(MODULE_DIR "/parameters/max_cmd_bytes", &tunable));
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	ASSERT_EQ((__u32)KVBLK_ENGINE_BIO, a.engine);
	mc = a.max_cmd_bytes;
	EXPECT_EQ(tunable / a.lba_size * a.lba_size, mc)
		TH_LOG("max_cmd_bytes %llu, tunable %llu", (unsigned long long)mc,
		       (unsigned long long)tunable);
	if (a.capacity < NR * mc)
		SKIP(return, "device too small: %llu bytes", (unsigned long long)a.capacity);
	if (a.buf_align > 4)
		SKIP(return, "buffer alignment %u: no dword offsets", a.buf_align);

	memset(d, 0, sizeof(d));
	for (int i = 0; i < NR; i++) {
		d[i].offset = (NR - 1 - i) * mc;
		d[i].length = mc;
		d[i].tag = i;
	}
	guarded_bufs_setup(_metadata, self->fd, d, mis, NR, &g);

	memset(res, GARBAGE, sizeof(res));
	lm_init(&lm, d, res, NR);
	ASSERT_EQ(NR, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm)) TH_LOG("load_many: %s", strerror(errno));
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, lm.engine);
	/* One command per object: none split below the tunable. */
	EXPECT_EQ((__u64)NR, lm.nr_cmds);
	for (int i = 0; i < NR; i++) {
		EXPECT_EQ(0, res[i].status) TH_LOG("object %d", i);
		EXPECT_EQ(mc, res[i].bytes) TH_LOG("object %d", i);
	}
	expect_objects_equal_pread(_metadata, d, NR, g.buf, g.shadow, g.len, g.ref);
}

/*
 * Pages of [@p, @p + @len) whose successor is the next physical page, from
 * /proc/self/pagemap (PFNs need CAP_SYS_ADMIN); -1 when they cannot be read.
 */
static long contiguous_page_pairs(const void *p, size_t len)
{
	const size_t pg = page_size();
	size_t n = len / pg;
	uint64_t *e = calloc(n, sizeof(*e));
	long pairs = 0;
	int fd;

	if (!e)
		return -1;
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || pread(fd, e, n * sizeof(*e), (uintptr_t)p / pg * sizeof(*e)) !=
	    (ssize_t)(n * sizeof(*e)))
		pairs = -1;
	if (fd >= 0)
		close(fd);
	for (size_t i = 0; pairs >= 0 && i < n; i++) {
		uint64_t pfn = e[i] & ((1ULL << 55) - 1);

		if (!(e[i] >> 63) || !pfn)
			pairs = -1;	/* not present, or PFNs hidden */
		else if (i + 1 < n && (e[i + 1] & ((1ULL << 55) - 1)) == pfn + 1)
			pairs++;
	}
	free(e);
	return pairs;
}

/*
 * A destination in transparent huge pages through the block-layer engine:
 * there runs of physically contiguous pages become one multi-page bio_vec
 * entry (kmod/bvec.c). Objects start inside pages at the device's buffer
 * alignment, span several commands, and one crosses a huge-page boundary
 * (two runs that need not touch). The bytes must equal pread(O_DIRECT)'s and
 * nothing around them may change.
 */
TEST_F_TIMEOUT(kvblk, load_many_huge_pages_equal_pread, 120)
{
	enum { NR = 4 };
	const size_t pg = page_size(), huge = 2 << 20, len = 4 * huge;
	struct kvblk_desc_result res[NR];
	struct kvblk_io_desc d[NR];
	struct kvblk_load_many lm;
	struct kvblk_buf_reg reg;
	struct kvblk_attach a;
	unsigned char *map, *buf, *shadow, *ref;
	__u64 lba, mc, align, cursor, edge;
	long pairs;

	attach_init(&a, self->bdev_fd);
	ASSERT_EQ(0, ioctl(self->fd, KVBLK_IOC_ATTACH, &a)) TH_LOG("attach: %s", strerror(errno));
	if (a.engine != KVBLK_ENGINE_BIO)
		SKIP(return, "the target's default engine is not the block-layer engine");
	lba = a.lba_size;
	align = a.buf_align;
	mc = a.max_cmd_bytes / lba * lba;
	ASSERT_LT(0ULL, mc);
	ASSERT_LT(align, (__u64)pg);
	if (a.capacity < 16 * mc + 64 * pg)
		SKIP(return, "device too small: %llu bytes", (unsigned long long)a.capacity);

	map = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, map);
	buf = (unsigned char *)round_up_u64((uintptr_t)map, huge);
	if (madvise(buf, len, MADV_HUGEPAGE))
		SKIP(return, "madvise(MADV_HUGEPAGE): %s", strerror(errno));
	memset(buf, FILL, len);
	/* Pinned by the registration: the pages below are the ones loaded into. */
	reg_init(&reg, buf, len);
	ASSERT_OK(ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &reg));
	pairs = contiguous_page_pairs(buf, len);
	if (pairs <= 0)
		SKIP(return, "no physically contiguous pages to test (pagemap: %ld)", pairs);
	TH_LOG("%ld of %zu pages followed by the next physical page", pairs, len / pg);

	memset(d, 0, sizeof(d));
	/* One LBA at the buffer alignment. */
	cursor = pg + align;
	d[0].offset = 0;
	d[0].length = lba;
	d[0].buf_offset = cursor;
	/* Three commands' worth from a page-internal offset. */
	cursor = round_up_u64(cursor + d[0].length, pg) + pg + round_up_u64(512, align);
	d[1].offset = 3 * lba;
	d[1].length = 2 * mc + lba;
	d[1].buf_offset = cursor;
	/* Sixteen pages across a huge-page boundary. */
	edge = round_up_u64(cursor + d[1].length + 4 * pg, huge);
	d[2].offset = a.capacity / 2 / lba * lba;
	d[2].length = 16 * pg;
	d[2].buf_offset = edge - 3 * pg + 3 * align;
	/* Up to four commands at the device's end, ending a page short of a boundary. */
	cursor = round_up_u64(d[2].buf_offset + d[2].length, pg) + pg + pg - align;
	d[3].length = (4 * mc < huge - 2 * pg ? 4 * mc : huge - 2 * pg) / lba * lba;
	d[3].offset = (a.capacity - d[3].length) / lba * lba;
	d[3].buf_offset = cursor;
	ASSERT_GE((__u64)len, d[3].buf_offset + d[3].length);

	shadow = map_filled(len, FILL);
	ref = map_filled(round_up_u64(d[1].length > d[3].length ? d[1].length : d[3].length, pg), 0);
	ASSERT_NE(NULL, shadow);
	ASSERT_NE(NULL, ref);
	for (int i = 0; i < NR; i++) {
		d[i].buf_id = reg.buf_id;
		d[i].tag = 0x6875676500000000ULL | i;
	}
	memset(res, GARBAGE, sizeof(res));
	lm_init(&lm, d, res, NR);
	ASSERT_EQ(NR, ioctl(self->fd, KVBLK_IOC_LOAD_MANY, &lm)) TH_LOG("load_many: %s", strerror(errno));
	EXPECT_EQ((__u32)KVBLK_ENGINE_BIO, lm.engine);
	for (int i = 0; i < NR; i++) {
		EXPECT_EQ(0, res[i].status) TH_LOG("object %d", i);
		EXPECT_EQ(d[i].length, res[i].bytes) TH_LOG("object %d", i);
	}

	expect_objects_equal_pread(_metadata, d, NR, buf, shadow, len, ref);
	munmap(map, len + huge);
}

/* ---- processes and remapped host buffers (KVBLK_FEAT_MM_GUARD) ---------- */

static void check_init(struct kvblk_buf_check *c, __u32 buf_id)
{
	memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	c->buf_id = buf_id;
}

/* KVBLK_IOC_CHECK_BUFFER: the state, or -errno. */
static int buf_state(int fd, __u32 buf_id)
{
	struct kvblk_buf_check c;

	check_init(&c, buf_id);
	c.state = 99;
	if (ioctl(fd, KVBLK_IOC_CHECK_BUFFER, &c))
		return -errno;
	return (int)c.state;
}

/* One object of @len bytes from device offset @off into @buf_id at @boff. */
static long load_one(int fd, __u32 buf_id, __u64 off, __u64 len, __u64 boff,
		     struct kvblk_load_many *lm, struct kvblk_desc_result *res)
{
	struct kvblk_io_desc d = {
		.offset = off, .length = len, .buf_offset = boff, .buf_id = buf_id,
	};

	memset(res, GARBAGE, sizeof(*res));
	lm_init(lm, &d, res, 1);
	lm->bad_index = 77;
	return ioctl(fd, KVBLK_IOC_LOAD_MANY, lm);
}

/*
 * Load the first @len bytes of the device into @buf (registered as @buf_id)
 * and compare them with pread(O_DIRECT).
 */
static void expect_exact_load(struct __test_metadata *_metadata, int fd,
			      __u32 buf_id, unsigned char *buf, size_t len)
{
	struct kvblk_desc_result res;
	struct kvblk_load_many lm;
	unsigned char *ref = map_filled(len, 0);

	ASSERT_NE(NULL, ref);
	memset(buf, FILL, len);
	ASSERT_EQ(1, load_one(fd, buf_id, 0, len, 0, &lm, &res))
		TH_LOG("load: %s", strerror(errno));
	EXPECT_EQ(0, res.status);
	EXPECT_EQ((__u64)len, res.bytes);
	ASSERT_TRUE(ref_read(ref, 0, len));
	EXPECT_EQ(0, memcmp(buf, ref, len)) TH_LOG("loaded bytes differ from pread");
	munmap(ref, len);
}

TEST_F(kvblk, mm_feature_reported)
{
	__u64 feat = 0;

	ASSERT_OK(ioctl(self->fd, KVBLK_IOC_GET_FEATURES, &feat));
	EXPECT_NE(0ULL, feat & KVBLK_FEAT_MM_GUARD);
}

/*
 * A forked child using the inherited context: every ioctl fails with
 * -EBADFD and changes nothing; the parent's buffer and loads are intact.
 */
TEST_F(kvblk, mm_fork_child_ebadfd)
{
	const size_t len = 4 * page_size();
	struct kvblk_attach a;
	struct kvblk_buf_reg reg;
	unsigned char *buf = map_filled(len, FILL);
	int status;
	pid_t pid;

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	reg_init(&reg, buf, len);
	ASSERT_OK(ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &reg));

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* Bit n: call n did not fail with EBADFD. */
		struct kvblk_desc_result res;
		struct kvblk_load_many lm;
		struct kvblk_buf_reg r2;
		struct kvblk_buf_unreg u;
		struct kvblk_attach a2;
		__u64 feat;
		int bad = 0;

		if (ioctl(self->fd, KVBLK_IOC_GET_FEATURES, &feat) != -1 || errno != EBADFD)
			bad |= 1;
		if (load_one(self->fd, reg.buf_id, 0, a.lba_size, 0, &lm, &res) != -1 ||
		    errno != EBADFD)
			bad |= 2;
		/* Nothing was written: not even the results. */
		if (res.status != (__s32)0x5A5A5A5A)
			bad |= 4;
		reg_init(&r2, buf, len);
		if (ioctl(self->fd, KVBLK_IOC_REGISTER_BUFFER, &r2) != -1 || errno != EBADFD)
			bad |= 8;
		unreg_init(&u, reg.buf_id);
		if (ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u) != -1 || errno != EBADFD)
			bad |= 16;
		if (buf_state(self->fd, reg.buf_id) != -EBADFD)
			bad |= 32;
		attach_init(&a2, self->bdev_fd);
		if (ioctl(self->fd, KVBLK_IOC_ATTACH, &a2) != -1 || errno != EBADFD)
			bad |= 64;
		close(self->fd);
		_exit(bad);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("child: calls that did not fail with EBADFD: mask 0x%x",
						 WEXITSTATUS(status));
	/* The parent: its buffer is still registered, intact, and loads exactly. */
	EXPECT_EQ(KVBLK_BUF_INTACT, buf_state(self->fd, reg.buf_id));
	expect_exact_load(_metadata, self->fd, reg.buf_id, buf, a.lba_size);
	{
		struct kvblk_buf_unreg u;

		unreg_init(&u, reg.buf_id);
		EXPECT_EQ(0, ioctl(self->fd, KVBLK_IOC_UNREGISTER_BUFFER, &u));
	}
}

/* A context opened in the child is the child's own. */
TEST_F(kvblk, mm_fork_child_own_context)
{
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct kvblk_attach a2;
		int fd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);

		attach_init(&a2, self->bdev_fd);
		_exit(fd < 0 || ioctl(fd, KVBLK_IOC_ATTACH, &a2) != 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/* Register @len bytes of @buf; the id. */
static __u32 reg_ok(struct __test_metadata *_metadata, int fd, void *buf, size_t len)
{
	struct kvblk_buf_reg reg;

	reg_init(&reg, buf, len);
	EXPECT_EQ(0, ioctl(fd, KVBLK_IOC_REGISTER_BUFFER, &reg))
		TH_LOG("register: %s", strerror(errno));
	return reg.buf_id;
}

/* A load into a replaced registration: -ESTALE, index 0, nothing read. */
static void expect_stale(struct __test_metadata *_metadata, int fd, __u32 id,
			 unsigned char *buf, __u64 lba)
{
	struct kvblk_desc_result res;
	struct kvblk_load_many lm;

	memset(buf, FILL, lba);
	EXPECT_EQ(-1, load_one(fd, id, 0, lba, 0, &lm, &res));
	EXPECT_EQ(ESTALE, errno);
	EXPECT_EQ(0, lm.bad_index);
	EXPECT_EQ(-ESTALE, res.status);
	EXPECT_EQ(0ULL, res.bytes);
	EXPECT_EQ(0ULL, lm.nr_cmds);
	EXPECT_TRUE(all_bytes(buf, lba, FILL)) TH_LOG("the new mapping was written");
	EXPECT_EQ(KVBLK_BUF_STALE, buf_state(fd, id));
	/* Sticky. */
	EXPECT_EQ(-1, load_one(fd, id, 0, lba, 0, &lm, &res));
	EXPECT_EQ(ESTALE, errno);
}

/* Unregister the stale id, register the range again: exact loads. */
static void expect_reregister(struct __test_metadata *_metadata, int fd, __u32 id,
			      unsigned char *buf, size_t len, __u64 lba)
{
	struct kvblk_buf_unreg u;
	__u32 id2;

	unreg_init(&u, id);
	ASSERT_EQ(0, ioctl(fd, KVBLK_IOC_UNREGISTER_BUFFER, &u)) TH_LOG("%s", strerror(errno));
	id2 = reg_ok(_metadata, fd, buf, len);
	EXPECT_EQ(KVBLK_BUF_INTACT, buf_state(fd, id2));
	expect_exact_load(_metadata, fd, id2, buf, lba);
}

TEST_F(kvblk, mm_remap_same_address_estale)
{
	const size_t len = 4 * page_size();
	struct kvblk_attach a;
	unsigned char *buf = map_filled(len, FILL);
	void *again;
	__u32 id;

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	id = reg_ok(_metadata, self->fd, buf, len);
	EXPECT_EQ(KVBLK_BUF_INTACT, buf_state(self->fd, id));
	expect_exact_load(_metadata, self->fd, id, buf, a.lba_size);

	ASSERT_EQ(0, munmap(buf, len));
	again = mmap(buf, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ((void *)buf, again);
	expect_stale(_metadata, self->fd, id, buf, a.lba_size);
	expect_reregister(_metadata, self->fd, id, buf, len, a.lba_size);
}

TEST_F(kvblk, mm_dontneed_estale)
{
	const size_t len = 4 * page_size();
	struct kvblk_attach a;
	unsigned char *buf = map_filled(len, FILL);
	__u32 id;

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	id = reg_ok(_metadata, self->fd, buf, len);
	expect_exact_load(_metadata, self->fd, id, buf, a.lba_size);
	/* Only the last page: the check covers the whole range. */
	ASSERT_EQ(0, madvise(buf + len - page_size(), page_size(), MADV_DONTNEED));
	expect_stale(_metadata, self->fd, id, buf, a.lba_size);
	expect_reregister(_metadata, self->fd, id, buf, len, a.lba_size);
}

TEST_F(kvblk, mm_unmapped_range_estale)
{
	const size_t len = 4 * page_size();
	struct kvblk_desc_result res;
	struct kvblk_load_many lm;
	struct kvblk_attach a;
	unsigned char *buf = map_filled(len, FILL);
	__u32 id;

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	id = reg_ok(_metadata, self->fd, buf, len);
	ASSERT_EQ(0, munmap(buf + page_size(), page_size()));
	EXPECT_EQ(KVBLK_BUF_STALE, buf_state(self->fd, id));
	EXPECT_EQ(-1, load_one(self->fd, id, 0, a.lba_size, 0, &lm, &res));
	EXPECT_EQ(ESTALE, errno);
	EXPECT_EQ(0, lm.bad_index);
	EXPECT_EQ(-ESTALE, res.status);
}

/*
 * What keeps the pinned pages mapped never makes a buffer stale: unmapping
 * next to it and elsewhere, mprotect() there and back, a fork() (without
 * MADV_DONTFORK), and MADV_DONTNEED of a shared mapping whose pages stay
 * in the file (the range is invalidated, the comparison finds the same pages).
 */
TEST_F(kvblk, mm_unrelated_changes_intact)
{
	const size_t pg = page_size(), len = 4 * pg;
	unsigned char *area, *buf, *other, *shared;
	struct kvblk_attach a;
	__u32 id, sid;
	int status;
	pid_t pid;

	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	area = map_filled(len + 4 * pg, FILL);	/* [2 pages | buf | 2 pages] */
	other = map_filled(len, FILL);
	ASSERT_NE(NULL, area);
	ASSERT_NE(NULL, other);
	buf = area + 2 * pg;
	id = reg_ok(_metadata, self->fd, buf, len);

	ASSERT_EQ(0, munmap(area, 2 * pg));
	ASSERT_EQ(0, munmap(buf + len, 2 * pg));
	ASSERT_EQ(0, munmap(other, len));
	ASSERT_EQ(0, mprotect(buf, len, PROT_READ));
	ASSERT_EQ(0, mprotect(buf, len, PROT_NONE));
	ASSERT_EQ(0, mprotect(buf, len, PROT_READ | PROT_WRITE));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(buf[0] == FILL ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The parent writes after the fork: its pinned pages stay its own. */
	memset(buf, 0x11, len);
	EXPECT_EQ(KVBLK_BUF_INTACT, buf_state(self->fd, id));
	expect_exact_load(_metadata, self->fd, id, buf, a.lba_size);

	shared = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, shared);
	memset(shared, FILL, len);
	sid = reg_ok(_metadata, self->fd, shared, len);
	ASSERT_EQ(0, madvise(shared, len, MADV_DONTNEED));
	EXPECT_EQ(KVBLK_BUF_INTACT, buf_state(self->fd, sid));
	expect_exact_load(_metadata, self->fd, sid, shared, a.lba_size);
	EXPECT_EQ(KVBLK_BUF_INTACT, buf_state(self->fd, id));
}

/*
 * Pages that cannot be looked up (PROT_NONE) do not make the buffer stale,
 * but are compared again once accessible: a range replaced by a PROT_NONE
 * mapping and then made writable (new pages, faulted in without any
 * notification) is found.
 */
TEST_F(kvblk, mm_prot_none_replacement_found_later)
{
	const size_t len = 4 * page_size();
	struct kvblk_attach a;
	unsigned char *buf = map_filled(len, FILL);
	void *again;
	__u32 id;

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	id = reg_ok(_metadata, self->fd, buf, len);
	ASSERT_EQ(0, munmap(buf, len));
	again = mmap(buf, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	ASSERT_EQ((void *)buf, again);
	EXPECT_EQ(KVBLK_BUF_INTACT, buf_state(self->fd, id));
	ASSERT_EQ(0, mprotect(buf, len, PROT_READ | PROT_WRITE));
	memset(buf, 0x33, len);
	EXPECT_EQ(KVBLK_BUF_STALE, buf_state(self->fd, id));
	expect_stale(_metadata, self->fd, id, buf, a.lba_size);
}

TEST_F(kvblk, mm_check_buffer_errors)
{
	const size_t len = page_size();
	struct kvblk_buf_check c;
	struct kvblk_attach a;
	unsigned char *buf = map_filled(len, FILL);
	__u32 id;

	ASSERT_NE(NULL, buf);
	EXPECT_EQ(-ENOENT, buf_state(self->fd, 1));
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	id = reg_ok(_metadata, self->fd, buf, len);
	EXPECT_EQ(-ENOENT, buf_state(self->fd, id + 1));
	check_init(&c, id);
	c.flags = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, KVBLK_IOC_CHECK_BUFFER, &c));
	check_init(&c, id);
	c.reserved[1] = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, KVBLK_IOC_CHECK_BUFFER, &c));
	check_init(&c, id);
	c.size = KVBLK_BUF_CHECK_SIZE_VER0 - 8;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, KVBLK_IOC_CHECK_BUFFER, &c));
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, KVBLK_IOC_CHECK_BUFFER, bad_ptr()));
	EXPECT_EQ(KVBLK_BUF_INTACT, buf_state(self->fd, id));
}

/* ---- overlapping destinations -------------------------------------------- */

/*
 * Load @nr objects of one LBA each (device offsets i * lba) at the given
 * buffer ids and offsets; expect -EINVAL with @want_bad, or success when
 * @want_bad is -1.
 */
static void expect_overlap(struct __test_metadata *_metadata, int fd, __u64 lba,
			   const __u32 *ids, const __u64 *boffs, const __u64 *lens,
			   int nr, int want_bad)
{
	struct kvblk_desc_result res[8];
	struct kvblk_io_desc d[8];
	struct kvblk_load_many lm;
	long ret;

	memset(d, 0, sizeof(d));
	for (int i = 0; i < nr; i++) {
		d[i].offset = (__u64)i * lba;
		d[i].length = lens ? lens[i] : lba;
		d[i].buf_offset = boffs[i];
		d[i].buf_id = ids[i];
	}
	memset(res, GARBAGE, sizeof(res));
	lm_init(&lm, d, res, nr);
	lm.bad_index = 77;
	ret = ioctl(fd, KVBLK_IOC_LOAD_MANY, &lm);
	if (want_bad < 0) {
		EXPECT_EQ(nr, ret) TH_LOG("%s", strerror(errno));
		EXPECT_EQ(-1, lm.bad_index);
		return;
	}
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(want_bad, lm.bad_index);
	EXPECT_EQ(0ULL, lm.nr_cmds);
	for (int i = 0; i < nr; i++) {
		EXPECT_EQ(i == want_bad ? -EINVAL : -ECANCELED, res[i].status)
			TH_LOG("object %d", i);
	}
}

TEST_F(kvblk, overlap_destinations_einval)
{
	const size_t len = 16 * page_size();
	struct kvblk_attach a;
	unsigned char *buf = map_filled(len, FILL);
	__u64 lba;
	__u32 id, id2;

	ASSERT_NE(NULL, buf);
	attach_ok(_metadata, self->fd, self->bdev_fd, &a);
	lba = a.lba_size;
	ASSERT_LE(4 * lba, (__u64)len / 2);
	id = reg_ok(_metadata, self->fd, buf, len);
	{	/* identical */
		__u32 ids[] = { id, id };
		__u64 o[] = { 0, 0 };

		expect_overlap(_metadata, self->fd, lba, ids, o, NULL, 2, 1);
	}
	{	/* the later one starts inside the earlier one */
		__u32 ids[] = { id, id };
		__u64 o[] = { 0, lba / 2 };
		__u64 l[] = { lba, lba };

		if (lba / 2 % a.buf_align == 0)
			expect_overlap(_metadata, self->fd, lba, ids, o, l, 2, 1);
	}
	{	/* 0 and 2 overlap (2 is out of order), 1 and 3 do not */
		__u32 ids[] = { id, id, id, id };
		__u64 o[] = { lba, 3 * lba, 0, 5 * lba };
		__u64 l[] = { lba, lba, 2 * lba, lba };

		expect_overlap(_metadata, self->fd, lba, ids, o, l, 4, 2);
	}
	{	/* adjacent, in any order: accepted */
		__u32 ids[] = { id, id, id };
		__u64 o[] = { 2 * lba, 0, lba };

		expect_overlap(_metadata, self->fd, lba, ids, o, NULL, 3, -1);
	}
	{	/* ascending (checked in one pass): adjacent accepted, ... */
		__u32 ids[] = { id, id, id };
		__u64 o[] = { 0, lba, 3 * lba };

		expect_overlap(_metadata, self->fd, lba, ids, o, NULL, 3, -1);
	}
	{	/* ... one reaching into the next refused */
		__u32 ids[] = { id, id, id };
		__u64 o[] = { 0, lba, 2 * lba };
		__u64 l[] = { lba, 2 * lba, lba };

		expect_overlap(_metadata, self->fd, lba, ids, o, l, 3, 2);
	}
	/* The same memory under two registrations. */
	id2 = reg_ok(_metadata, self->fd, buf + len / 2, len / 2);
	{
		__u32 ids[] = { id2, id, id };
		__u64 o[] = { 0, 0, len / 2 };

		expect_overlap(_metadata, self->fd, lba, ids, o, NULL, 3, 2);
	}
	/* Nothing was written. */
	EXPECT_TRUE(all_bytes(buf + 6 * lba, len - 6 * lba, FILL));
}

TEST_HARNESS_MAIN

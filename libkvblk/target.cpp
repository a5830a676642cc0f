// SPDX-License-Identifier: MIT
#include "target.hpp"

#include "last_error.hpp"
#include "testing.hpp"

#include <kvblk/kvblk.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace kvblk::detail {
namespace {

/* First line of a small sysfs file, or "" when it cannot be read. */
std::string read_sysfs(const std::string &file)
{
	FILE *f = std::fopen(file.c_str(), "re");
	if (!f)
		return {};
	char line[256] = "";
	if (!std::fgets(line, sizeof(line), f))
		line[0] = '\0';
	std::fclose(f);
	line[strcspn(line, "\n")] = '\0';
	return line;
}

/* /sys/dev/block/M:m of a device number. */
std::string sysfs_dir(dev_t rdev)
{
	return "/sys/dev/block/" + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
}

/* queue/max_hw_sectors_kb in bytes (a partition's queue is its disk's); 0 when unknown. */
uint64_t max_hw_bytes(dev_t rdev)
{
	const std::string dir = sysfs_dir(rdev);
	std::string kb = read_sysfs(dir + "/queue/max_hw_sectors_kb");
	if (kb.empty())
		kb = read_sysfs(dir + "/../queue/max_hw_sectors_kb");
	if (kb.empty())
		return 0;
	char *end = nullptr;
	unsigned long long v = std::strtoull(kb.c_str(), &end, 10);
	if (end == kb.c_str() || v == 0 || v > (UINT64_MAX >> 10))
		return 0;
	return uint64_t(v) << 10;
}

/* A whole namespace (nvmeXnY, not a partition) of an NVMe controller on PCIe. */
bool is_nvme_pcie_namespace(dev_t rdev)
{
	const std::string dir = sysfs_dir(rdev);
	char real[PATH_MAX];
	if (!realpath(dir.c_str(), real))
		return false;
	const char *base = std::strrchr(real, '/');
	base = base ? base + 1 : real;
	if (std::strncmp(base, "nvme", 4) != 0)
		return false;
	if (access((dir + "/partition").c_str(), F_OK) == 0)
		return false;
	return read_sysfs(dir + "/device/transport") == "pcie";
}

int statx_fd(int fd, unsigned mask, struct statx *sx)
{
	std::memset(sx, 0, sizeof(*sx));
	if (statx(fd, "", AT_EMPTY_PATH, mask, sx) != 0)
		return -errno;
	return 0;
}

/* KVBLK_OPEN_CREATE: make @path a regular file of at least @bytes. */
int create_file(const char *path, uint64_t bytes)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		return fail(-e, "open(%s, O_CREAT): %s", path, errno_text(e).c_str());
	}
	struct stat st;
	int ret = 0;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		ret = fail(-e, "fstat(%s): %s", path, errno_text(e).c_str());
	} else if (S_ISREG(st.st_mode) && uint64_t(st.st_size) < bytes) {
		if (bytes > uint64_t(INT64_MAX) || ftruncate(fd, off_t(bytes)) != 0) {
			int e = bytes > uint64_t(INT64_MAX) ? EFBIG : errno;
			ret = fail(-e, "KVBLK_OPEN_CREATE: cannot size %s to %llu bytes: %s", path,
				   (unsigned long long)bytes, errno_text(e).c_str());
		}
	}
	close(fd);
	return ret;
}

int describe_blockdev(Target *t)
{
	int lbs = 0;
	if (ioctl(t->fd, BLKSSZGET, &lbs) != 0 || lbs <= 0) {
		int e = errno ? errno : EINVAL;
		return fail(-e, "%s: BLKSSZGET: %s", t->path.c_str(), errno_text(e).c_str());
	}
	uint64_t size = 0;
	if (ioctl(t->fd, BLKGETSIZE64, &size) != 0) {
		int e = errno;
		return fail(-e, "%s: BLKGETSIZE64: %s", t->path.c_str(), errno_text(e).c_str());
	}
	t->logical_block_size = uint32_t(lbs);
	t->capacity = size;
	t->mem_align = t->logical_block_size;
	struct statx sx;
	if (statx_fd(t->fd, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
	    sx.stx_dio_mem_align)
		t->mem_align = sx.stx_dio_mem_align;
	t->device_max_cmd_bytes = max_hw_bytes(t->rdev);
	t->nvme_pcie_namespace = is_nvme_pcie_namespace(t->rdev);
	return 0;
}

int describe_file(Target *t, const struct stat &st)
{
	t->capacity = uint64_t(st.st_size);
	t->logical_block_size = uint32_t(st.st_blksize > 0 ? st.st_blksize : 4096);
	t->mem_align = t->logical_block_size;
	struct statx sx;
	if (statx_fd(t->fd, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
	    sx.stx_dio_offset_align) {
		t->logical_block_size = sx.stx_dio_offset_align;
		t->mem_align = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : sx.stx_dio_offset_align;
	}
	return 0;
}

/* 0 for a block device or regular file, else -EISDIR or -ENOTSUP with the message set. */
int check_type(const char *path, const struct stat &st)
{
	if (S_ISBLK(st.st_mode) || S_ISREG(st.st_mode))
		return 0;
	if (S_ISDIR(st.st_mode))
		return fail(-EISDIR, "%s is a directory, not a block device or regular file", path);
	return fail(-ENOTSUP, "%s is neither a block device nor a regular file", path);
}

/* open(2), or the error the test seam forces on an O_DIRECT open. */
int open_path(const char *path, int oflags)
{
	if (oflags & O_DIRECT) {
		const testing::Seams *s = testing::active();
		if (s && s->on_open_direct) {
			int forced = s->on_open_direct(path);
			if (forced < 0) {
				errno = -forced;
				return -1;
			}
		}
	}
	return open(path, oflags);
}

} // namespace

int open_target(const char *path, uint32_t flags, uint64_t create_bytes, Target *t)
{
	*t = Target{};
	t->path = path;
	t->buffered = flags & KVBLK_OPEN_BUFFERED;
	t->writable = flags & KVBLK_OPEN_WRITE;

	if (flags & KVBLK_OPEN_CREATE) {
		int ret = create_file(path, create_bytes);
		if (ret)
			return ret;
	}

	const int oflags = (t->writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | (t->buffered ? 0 : O_DIRECT);
	t->fd = open_path(path, oflags);
	if (t->fd < 0) {
		const int e = errno;
		if (e == EINVAL && (oflags & O_DIRECT)) {
			/* EINVAL only with O_DIRECT: no direct I/O here; say why for a usable target. */
			int probe = open(path, oflags & ~O_DIRECT);
			if (probe >= 0) {
				struct stat st;
				int ret = fstat(probe, &st) != 0 ? -errno : check_type(path, st);
				close(probe);
				if (ret)
					return ret;
				return fail(-EOPNOTSUPP,
					    "%s: the file system refuses O_DIRECT (open(2) failed with EINVAL); "
					    "open it with KVBLK_OPEN_BUFFERED to go through the page cache "
					    "(every such batch is counted in stats.buffered_batches)",
					    path);
			}
		}
		return fail(-e, "open(%s): %s", path, errno_text(e).c_str());
	}

	struct stat st;
	int ret = 0;
	if (fstat(t->fd, &st) != 0) {
		int e = errno;
		ret = fail(-e, "fstat(%s): %s", path, errno_text(e).c_str());
	} else if ((ret = check_type(path, st))) {
		/* message set */
	} else if (S_ISBLK(st.st_mode)) {
		t->blockdev = true;
		t->rdev = st.st_rdev;
		ret = describe_blockdev(t);
	} else {
		ret = describe_file(t, st);
	}
	if (ret)
		close_target(t);
	return ret;
}

void close_target(Target *t) noexcept
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
#include "target.hpp"
#include "bio_split.hpp"
#include "sysfs.hpp"

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
#include <sys/utsname.h>
#include <unistd.h>

namespace kvblk::detail {
namespace {

/* /sys/dev/block/M:m of a device number. */
std::string sysfs_dir(dev_t rdev)
{
	return "/sys/dev/block/" + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
}

/* The number in queue/@attr of a block device (a partition's queue is its disk's); 0 when unknown. */
uint64_t queue_u64(dev_t rdev, const char *attr)
{
	const std::string dir = sysfs_dir(rdev);
	const uint64_t v = read_sysfs_u64(dir + "/queue/" + attr);
	return v ? v : read_sysfs_u64(dir + "/../queue/" + attr);
}

/* queue/max_hw_sectors_kb in bytes; 0 when unknown. */
uint64_t max_hw_bytes(dev_t rdev)
{
	const uint64_t kb = queue_u64(rdev, "max_hw_sectors_kb");
	return kb <= (UINT64_MAX >> 10) ? kb << 10 : 0;
}

/* The largest io_uring read from a fixed buffer the block layer takes unsplit (bio_split.hpp). */
uint64_t unsplit_bytes(dev_t rdev)
{
	struct utsname u {};
	const bool coalesces = uname(&u) == 0 && kernel_coalesces_fixed_buffers(u.release);
	return fixed_read_unsplit_bytes(queue_u64(rdev, "max_sectors_kb"), queue_u64(rdev, "max_segments"),
					coalesces);
}

/* Last component of a path. */
std::string base_name(const std::string &p)
{
	const size_t slash = p.rfind('/');
	return slash == std::string::npos ? p : p.substr(slash + 1);
}

/*
 * Whether @t (a block device) is a whole NVMe namespace of a controller on PCIe, the kind
 * kvblk.ko's PRP engine serves; fills t->disk, t->nvme_pcie_namespace and, when it is not,
 * t->not_nvme_pcie with the reason.
 */
void classify_blockdev(Target *t)
{
	const std::string dir = sysfs_dir(t->rdev);
	char real[PATH_MAX];
	if (!realpath(dir.c_str(), real)) {
		t->not_nvme_pcie = "is a block device without a sysfs entry, not a PCIe NVMe namespace";
		return;
	}
	const std::string path = real;
	t->disk = base_name(path);
	const bool partition = access((dir + "/partition").c_str(), F_OK) == 0;
	const std::string whole = partition ? base_name(path.substr(0, path.rfind('/'))) : t->disk;
	if (whole.compare(0, 4, "nvme") != 0) {
		t->not_nvme_pcie = "is a block device (" + t->disk + "), not a PCIe NVMe namespace";
		return;
	}
	if (path.find("/nvme-subsystem/") != std::string::npos) {
		t->not_nvme_pcie = "is an NVMe multipath head (" + whole +
				   ", bio based), not a controller's own namespace: boot with nvme_core.multipath=N";
		return;
	}
	const std::string wdir = partition ? dir + "/.." : dir;
	const std::string transport = read_sysfs(wdir + "/device/transport");
	if (transport != "pcie") {
		t->not_nvme_pcie = "is an NVMe namespace on transport " +
				   (transport.empty() ? std::string("unknown") : transport) + ", not PCIe";
		return;
	}
	if (partition) {
		t->not_nvme_pcie = "is a partition of " + whole +
				   "; AUTO attaches kvblk.ko to whole namespaces only (ask for kmod explicitly)";
		return;
	}
	t->nvme_pcie_namespace = true;
}

/* The NVMe generic char device (class nvme-generic, /dev/ngXnY) with device number @rdev: its name, or "". */
std::string nvme_generic_name(dev_t rdev)
{
	const std::string dir = "/sys/dev/char/" + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
	char real[PATH_MAX], cls[PATH_MAX];
	if (!realpath(dir.c_str(), real) || !realpath((dir + "/subsystem").c_str(), cls))
		return {};
	const std::string name = base_name(real);
	if (base_name(cls) != "nvme-generic" || name.compare(0, 2, "ng") != 0)
		return {};
	return name;
}

/* Size an NVMe generic char device from its namespace's block device (ngXnY -> nvmeXnY). */
int describe_nvme_generic(Target *t, const std::string &ng)
{
	t->nvme_generic = true;
	t->disk = "nvme" + ng.substr(2);
	t->not_nvme_pcie = "is an NVMe generic char device, not a block device";
	const std::string q = "/sys/block/" + t->disk;
	const std::string lbs = read_sysfs(q + "/queue/logical_block_size");
	const std::string sectors = read_sysfs(q + "/size");
	char *e1 = nullptr, *e2 = nullptr;
	const unsigned long v = lbs.empty() ? 0 : std::strtoul(lbs.c_str(), &e1, 10);
	const unsigned long long n = sectors.empty() ? 0 : std::strtoull(sectors.c_str(), &e2, 10);
	if (v == 0 || *e1 || v > (1u << 16) || (v & (v - 1)) || sectors.empty() || *e2)
		return fail(-EOPNOTSUPP,
			    "%s is the NVMe generic char device %s, but %s/queue/logical_block_size and "
			    "%s/size cannot be read to size it",
			    t->path.c_str(), ng.c_str(), q.c_str(), q.c_str());
	t->logical_block_size = uint32_t(v);
	t->mem_align = uint32_t(v);
	t->capacity = uint64_t(n) * 512;
	const std::string kb = read_sysfs(q + "/queue/max_hw_sectors_kb");
	const unsigned long long k = kb.empty() ? 0 : std::strtoull(kb.c_str(), nullptr, 10);
	t->device_max_cmd_bytes = k && k <= (UINT64_MAX >> 10) ? uint64_t(k) << 10 : 0;
	return 0;
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
	t->unsplit_bytes = unsplit_bytes(t->rdev);
	classify_blockdev(t);
	return 0;
}

int describe_file(Target *t, const struct stat &st)
{
	t->not_nvme_pcie = "is a regular file, not a PCIe NVMe namespace";
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

/*
 * 0 for a block device or regular file, else -EISDIR or -ENOTSUP with the message set
 * (NVMe generic char devices are recognised before this check). Used on a stat(2) before
 * anything is opened, so that a FIFO, socket or tty is refused without an open that could
 * block or take a controlling terminal, and again on the opened fd.
 */
int check_type(const char *path, const struct stat &st)
{
	if (S_ISBLK(st.st_mode) || S_ISREG(st.st_mode))
		return 0;
	if (S_ISDIR(st.st_mode))
		return fail(-EISDIR, "%s is a directory, not a block device or regular file", path);
	const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket"
			   : S_ISCHR(st.st_mode)   ? "a char device (not an NVMe generic one)"
						   : "of an unknown file type";
	return fail(-ENOTSUP, "%s is %s, neither a block device nor a regular file", path, what);
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
	/*
	 * O_NONBLOCK: should @path have become a FIFO since it was checked, the open returns at
	 * once (and fstat refuses it). It is cleared again below: io_uring would turn it into
	 * -EAGAIN completions on regular files.
	 */
	const int fd = open(path, oflags | O_NONBLOCK | O_NOCTTY);
	if (fd >= 0 && fcntl(fd, F_SETFL, oflags & ~(O_ACCMODE | O_CLOEXEC | O_CREAT | O_NOCTTY)) != 0) {
		const int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * Open @open_as (a path, or /proc/self/fd/N for a caller's fd) with access mode @acc and fill
 * @t (t->path, ->buffered, ->writable set by the caller; t->path names it in messages).
 */
int open_checked(const char *open_as, int acc, Target *t)
{
	const char *path = t->path.c_str();

	/* What the path is, before opening it: a FIFO or socket is refused here. */
	struct stat pre;
	const bool stat_ok = stat(open_as, &pre) == 0;
	if (stat_ok) {
		/* An NVMe generic char device (/dev/ngXnY): no O_DIRECT (no page cache to bypass). */
		const std::string ng = S_ISCHR(pre.st_mode) ? nvme_generic_name(pre.st_rdev) : std::string();
		if (!ng.empty()) {
			t->fd = open(open_as, acc | O_CLOEXEC);
			if (t->fd < 0) {
				const int e = errno;
				return fail(-e, "open(%s): %s", path, errno_text(e).c_str());
			}
			struct stat st;
			int ret = 0;
			if (fstat(t->fd, &st) != 0 || !S_ISCHR(st.st_mode) || st.st_rdev != pre.st_rdev)
				ret = fail(-ENODEV, "%s changed while it was opened", path);
			else {
				t->rdev = st.st_rdev;
				ret = describe_nvme_generic(t, ng);
			}
			if (ret)
				close_target(t);
			return ret;
		}
		if (int ret = check_type(path, pre))
			return ret;
	}

	int oflags = acc | O_CLOEXEC | (t->buffered ? 0 : O_DIRECT);
	/*
	 * A block device: O_NOATIME, as fio opens one. Every read through the file (O_DIRECT or
	 * not) otherwise calls file_accessed() on the device node (blkdev_read_iter(),
	 * block/fops.c): touch_atime() and current_time() per command, about 2% of the guest CPU
	 * per 4 KiB read on null_blk (make vmbench-cpu, 2026-12-06). A node's atime means
	 * nothing to anyone. open(2) refuses it with EPERM unless the caller owns the node or
	 * has CAP_FOWNER: then without it. Regular files keep their atime (cache eviction may
	 * go by it).
	 */
	const bool noatime = stat_ok && S_ISBLK(pre.st_mode);
	if (noatime)
		oflags |= O_NOATIME;
	t->fd = open_path(open_as, oflags);
	if (t->fd < 0 && noatime && errno == EPERM) {
		oflags &= ~O_NOATIME;
		t->fd = open_path(open_as, oflags);
	}
	if (t->fd < 0) {
		const int e = errno;
		if (e == EINVAL && (oflags & O_DIRECT)) {
			/* EINVAL only with O_DIRECT: no direct I/O here; say why for a usable target. */
			int probe = open(open_as, (oflags & ~(O_DIRECT | O_NOATIME)) | O_NONBLOCK | O_NOCTTY);
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
	t->dev = st.st_dev;
	t->ino = st.st_ino;
	if (ret)
		close_target(t);
	return ret;
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
	return open_checked(path, t->writable ? O_RDWR : O_RDONLY, t);
}

int open_target_fd(int fd, uint32_t flags, Target *t)
{
	*t = Target{};
	t->buffered = flags & KVBLK_OPEN_BUFFERED;
	const int fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
	if (fl < 0)
		return fail(-EBADF, "kvblk_add_target_fd: fd %d is not open", fd);
	if (fl & O_PATH)
		return fail(-EBADF, "kvblk_add_target_fd: fd %d was opened with O_PATH: it grants no reads or writes",
			    fd);
	const int acc = fl & O_ACCMODE;
	const bool can_read = acc == O_RDONLY || acc == O_RDWR;
	const bool can_write = acc == O_WRONLY || acc == O_RDWR;
	const bool want_write = flags & KVBLK_OPEN_WRITE;

	const std::string proc = "/proc/self/fd/" + std::to_string(fd);
	char link[PATH_MAX];
	const ssize_t n = readlink(proc.c_str(), link, sizeof(link) - 1);
	t->path = (n > 0 ? std::string(link, size_t(n)) : std::string("?")) + " (fd " + std::to_string(fd) + ")";

	if (want_write && !can_write)
		return fail(-EBADF, "kvblk_add_target_fd: %s is open read-only: KVBLK_OPEN_WRITE needs O_WRONLY or O_RDWR",
			    t->path.c_str());
	if (!can_read && !want_write)
		return fail(-EBADF, "kvblk_add_target_fd: %s is open write-only: add it with KVBLK_OPEN_WRITE "
				    "(stores only), or pass an fd open for reading",
			    t->path.c_str());
	struct stat st;
	if (fstat(fd, &st) != 0) {
		const int e = errno;
		return fail(-e, "kvblk_add_target_fd: fstat(%s): %s", t->path.c_str(), errno_text(e).c_str());
	}
	if (!(S_ISCHR(st.st_mode) && !nvme_generic_name(st.st_rdev).empty()))
		if (int ret = check_type(t->path.c_str(), st))
			return ret;

	t->readable = can_read;
	t->writable = want_write;
	const int mode = can_read && want_write ? O_RDWR : want_write ? O_WRONLY : O_RDONLY;
	/* Our own open file description of the same file: the caller's flags stay as they are. */
	int ret = open_checked(proc.c_str(), mode, t);
	if (ret)
		return ret;
	if (!t->nvme_generic && (t->dev != st.st_dev || t->ino != st.st_ino)) {
		close_target(t);
		return fail(-EBADF, "kvblk_add_target_fd: fd %d changed while it was reopened", fd);
	}
	return 0;
}

int open_tail_writer(Target *t, int *fd)
{
	if (t->buffered) {
		*fd = t->fd;
		return 0;
	}
	if (t->tail_fd < 0) {
		const std::string proc = "/proc/self/fd/" + std::to_string(t->fd);
		const int w = open(proc.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (w < 0) {
			const int e = errno;
			return fail(-e, "%s: cannot open a buffered descriptor to write the file's last partial block: "
					"open(%s, O_WRONLY): %s",
				    t->path.c_str(), proc.c_str(), errno_text(e).c_str());
		}
		struct stat a, b;
		if (fstat(w, &a) != 0 || fstat(t->fd, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
			close(w);
			return fail(-EBADF, "%s: the buffered descriptor for its last partial block reached another file",
				    t->path.c_str());
		}
		t->tail_fd = w;
	}
	*fd = t->tail_fd;
	return 0;
}

void close_target(Target *t) noexcept
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	if (t->tail_fd >= 0)
		close(t->tail_fd);
	t->tail_fd = -1;
}

} // namespace kvblk::detail

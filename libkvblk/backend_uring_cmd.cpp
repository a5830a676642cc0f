// SPDX-License-Identifier: MIT
// uring_cmd: NVMe Read/Write commands passed through io_uring (IORING_OP_URING_CMD with
// NVME_URING_CMD_IO) to a namespace's generic char device /dev/ngXnY, on rings with
// 128-byte SQEs (the struct nvme_uring_cmd rides in the SQE) and 32-byte CQEs. No block
// layer splitting, merging or page cache: each command is built here.
//
// Target: /dev/ngXnY itself, or the block device /dev/nvmeXnY, which is mapped to its
// generic char device by name (nvme0n1 -> ng0n1, checked against /sys/class/nvme-generic
// and the namespace id of both nodes). A partition, a non-NVMe block device or a regular
// file is refused with -EOPNOTSUPP and the reason.
//
// Limits: a passthrough command cannot be split by the kernel, so commands are at most
// queue/max_hw_sectors_kb of the namespace (the MDTS limit), at most 65536 LBAs (the NVMe
// NLB field), and at most (queue/max_segments - 1) pages, so that a buffer that does not
// start on a page boundary still fits the driver's segment table. The effective size is
// kvblk_dev_info.max_cmd_bytes.
//
// Batches go through the shared ring core (uring_core.hpp): `workers` rings of 128-byte
// SQEs, one thread each, queue_depth commands in flight per ring, no fixed buffers. What is
// this backend's own: an SQE carries a struct nvme_uring_cmd addressed to its object's
// target (per-target char device, nsid and LBA shift, TargetSlots); a CQE's res is 0, a negative
// errno, or a positive NVMe status (which fails the command's object with -EIO). A command
// moves all of its bytes or fails: there are no short transfers.
#include "backend.hpp"
#include "sysfs.hpp"
#include "last_error.hpp"
#include "target_slots.hpp"
#include "testing.hpp"
#include "uring_core.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <liburing.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace kvblk::detail {
namespace {

using ull = unsigned long long;

constexpr uint8_t kNvmeCmdWrite = 0x01;
constexpr uint8_t kNvmeCmdRead = 0x02;
constexpr uint64_t kMaxNlb = 65536; /* NLB is a 0-based 16-bit field */

/* Last path component of the sysfs entry of a device number, or "". */
std::string sysfs_name(const char *cls, dev_t rdev, std::string *real_out = nullptr)
{
	const std::string dir = std::string("/sys/dev/") + cls + "/" + std::to_string(major(rdev)) + ":" +
				std::to_string(minor(rdev));
	char real[PATH_MAX];
	if (!realpath(dir.c_str(), real))
		return {};
	if (real_out)
		*real_out = real;
	const char *base = std::strrchr(real, '/');
	return base ? base + 1 : real;
}

/* "nvme<digits>n<digits>" (a namespace's disk, not a partition or a hidden path). */
bool is_namespace_name(const std::string &s)
{
	size_t i = 4;
	if (s.compare(0, 4, "nvme") != 0)
		return false;
	const size_t d0 = i;
	while (i < s.size() && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i == d0 || i >= s.size() || s[i] != 'n')
		return false;
	const size_t d1 = ++i;
	while (i < s.size() && s[i] >= '0' && s[i] <= '9')
		i++;
	return i > d1 && i == s.size();
}

/* Where a target's commands go: its generic char device, namespace id and LBA size. */
struct TargetNs {
	int fd = -1;
	uint32_t nsid = 0;
	uint32_t lba_shift = 0;
};

class UringCmdBackend final : public UringCore {
public:
	~UringCmdBackend() override
	{
		stop_rings();
		if (own_fd_ >= 0)
			close(own_fd_);
	}

	int start(BackendConfig &cfg)
	{
		cfg_ = cfg;
		const char *path = cfg.path.c_str();
		struct stat st;
		if (fstat(cfg.fd, &st) != 0) {
			const int e = errno;
			return fail(-e, "uring_cmd: fstat(%s): %s", path, errno_text(e).c_str());
		}
		std::string disk; /* the namespace's block device name, for its queue limits */
		if (S_ISREG(st.st_mode)) {
			return fail(-EOPNOTSUPP,
				    "uring_cmd: %s is a regular file: uring_cmd sends NVMe commands to a "
				    "namespace's generic char device (/dev/ngXnY); use uring for files",
				    path);
		} else if (S_ISCHR(st.st_mode)) {
			const std::string ng = sysfs_name("char", st.st_rdev);
			const std::string cls = "/sys/dev/char/" + std::to_string(major(st.st_rdev)) + ":" +
						std::to_string(minor(st.st_rdev)) + "/subsystem";
			char real[PATH_MAX];
			if (ng.compare(0, 2, "ng") != 0 || !realpath(cls.c_str(), real) ||
			    std::strcmp(std::strrchr(real, '/') + 1, "nvme-generic") != 0)
				return fail(-EOPNOTSUPP, "uring_cmd: %s is not an NVMe generic char device", path);
			fd_ = cfg.fd;
			ng_path_ = cfg.path;
			disk = "nvme" + ng.substr(2);
		} else if (S_ISBLK(st.st_mode)) {
			int ret = map_blockdev(cfg, st.st_rdev, &disk);
			if (ret)
				return ret;
		} else {
			return fail(-EOPNOTSUPP, "uring_cmd: %s is neither an NVMe namespace nor its generic char device",
				    path);
		}

		const int id = ioctl(fd_, NVME_IOCTL_ID);
		if (id <= 0) {
			const int e = id < 0 ? errno : EINVAL;
			return fail(-EOPNOTSUPP, "uring_cmd: NVME_IOCTL_ID on %s: %s", ng_path_.c_str(),
				    errno_text(e).c_str());
		}
		nsid_ = uint32_t(id);
		if (cfg.logical_block_size & (cfg.logical_block_size - 1))
			return fail(-EOPNOTSUPP, "uring_cmd: logical block size %u is not a power of two",
				    cfg.logical_block_size);
		lba_shift_ = uint32_t(__builtin_ctz(cfg.logical_block_size));

		/* What one passthrough command may carry (the kernel cannot split it). */
		const std::string q = "/sys/block/" + disk + "/queue/";
		uint64_t limit = cfg.max_cmd_bytes;
		if (uint64_t kb = read_sysfs_u64(q + "max_hw_sectors_kb"))
			limit = std::min(limit, kb << 10);
		const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
		if (uint64_t segs = read_sysfs_u64(q + "max_segments"); segs > 1)
			limit = std::min(limit, (segs - 1) * page);
		limit = std::min(limit, kMaxNlb << lba_shift_);
		limit -= limit % cfg.logical_block_size;
		if (limit < cfg.logical_block_size)
			limit = cfg.logical_block_size;
		cfg.max_cmd_bytes = limit;
		cfg_.max_cmd_bytes = limit;

		RingSetup rs;
		rs.kind = KVBLK_BACKEND_URING_CMD;
		rs.fd = fd_;
		rs.rings = cfg.workers;
		rs.queue_depth = cfg.queue_depth;
		rs.max_cmd_bytes = limit;
		rs.eagain_retries = cfg.eagain_retries;
		rs.ring_flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
		const int ret = create_rings(rs);
		if (ret == -ENOSYS || ret == -EPERM)
			return fail(-ENOSYS,
				    "io_uring is not available: io_uring_setup failed with %s "
				    "(see the sysctl kernel.io_uring_disabled)",
				    errno_text(ret).c_str());
		if (ret == -EINVAL)
			return fail(-EOPNOTSUPP,
				    "uring_cmd: this kernel's io_uring refuses 128-byte SQEs and 32-byte CQEs "
				    "(IORING_SETUP_SQE128 | IORING_SETUP_CQE32 need Linux 5.19)");
		if (ret < 0)
			return fail(ret, "uring_cmd: io_uring_queue_init(%u entries): %s", cfg.queue_depth,
				    errno_text(ret).c_str());
		if (int err = start_threads())
			return err;
		cfg.note = (S_ISBLK(st.st_mode) ? "mapped to " + ng_path_ + ", " : std::string()) + "nsid " +
			   std::to_string(nsid_);
		TargetNs *t0 = ns_.ensure(0);
		if (!t0)
			return fail(-ENOMEM, "uring_cmd: out of memory");
		*t0 = TargetNs{fd_, nsid_, lba_shift_};
		return 0;
	}

	/*
	 * An added target must be an NVMe generic char device whose commands fit this device's
	 * max_cmd_bytes (objects are split at it); each command carries its own nsid and LBA size.
	 */
	int add_target(uint32_t id, BackendConfig &t) noexcept override
	{
		const char *path = t.path.c_str();
		struct stat st;
		if (fstat(t.fd, &st) != 0 || !S_ISCHR(st.st_mode))
			return fail(-EOPNOTSUPP,
				    "uring_cmd: %s is not an NVMe generic char device (/dev/ngXnY): a uring_cmd "
				    "device sends NVMe commands only, open another device for files and block devices",
				    path);
		const std::string ng = sysfs_name("char", st.st_rdev);
		const int nsid = ioctl(t.fd, NVME_IOCTL_ID);
		if (ng.compare(0, 2, "ng") != 0 || nsid <= 0)
			return fail(-EOPNOTSUPP, "uring_cmd: %s is not an NVMe generic char device", path);
		const uint32_t lbs = t.logical_block_size;
		if (lbs == 0 || (lbs & (lbs - 1)) || cfg_.max_cmd_bytes % lbs)
			return fail(-EOPNOTSUPP,
				    "uring_cmd: %s has %u-byte LBAs; commands of this device are %llu bytes",
				    path, lbs, ull(cfg_.max_cmd_bytes));
		const std::string q = "/sys/block/nvme" + ng.substr(2) + "/queue/";
		const uint64_t kb = read_sysfs_u64(q + "max_hw_sectors_kb");
		const uint64_t segs = read_sysfs_u64(q + "max_segments");
		const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
		if ((kb && (kb << 10) < cfg_.max_cmd_bytes) || (segs > 1 && (segs - 1) * page < cfg_.max_cmd_bytes) ||
		    (kMaxNlb << __builtin_ctz(lbs)) < cfg_.max_cmd_bytes)
			return fail(-EOPNOTSUPP,
				    "uring_cmd: %s takes smaller commands than this device's %llu bytes (max_hw_sectors_kb "
				    "%llu, max_segments %llu): open the device with a smaller max_cmd_bytes",
				    path, ull(cfg_.max_cmd_bytes), ull(kb), ull(segs));
		TargetNs *e = ns_.ensure(id);
		if (!e)
			return fail(-ENOMEM, "uring_cmd: out of memory");
		*e = TargetNs{t.fd, uint32_t(nsid), uint32_t(__builtin_ctz(lbs))};
		t.max_cmd_bytes = cfg_.max_cmd_bytes;
		return 0;
	}

	void remove_target(uint32_t id) noexcept override { ns_[id] = TargetNs{}; }

	kvblk_backend kind() const noexcept override { return KVBLK_BACKEND_URING_CMD; }

private:
	void prep(io_uring_sqe *sqe, const RingCmd &c, const IoObject &o, IoDir dir, bool fixed) noexcept override
	{
		(void)fixed;
		std::memset(static_cast<void *>(sqe), 0, 2 * sizeof(*sqe)); /* one 128-byte SQE */
		const TargetNs &t = ns_[o.target]; /* the object's namespace: its char device, nsid, LBA size */
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = t.fd;
		sqe->cmd_op = NVME_URING_CMD_IO;

		const uint64_t slba = (o.offset + c.cmd_off) >> t.lba_shift;
		const uint64_t nlb = c.len >> t.lba_shift;
		nvme_uring_cmd cmd{};
		cmd.opcode = dir == IoDir::read ? kNvmeCmdRead : kNvmeCmdWrite;
		cmd.nsid = t.nsid;
		cmd.addr = uint64_t(uintptr_t(o.mem + c.cmd_off));
		cmd.data_len = uint32_t(c.len);
		cmd.cdw10 = uint32_t(slba);
		cmd.cdw11 = uint32_t(slba >> 32);
		cmd.cdw12 = uint32_t(nlb - 1);
		static_assert(sizeof(cmd) <= 80, "struct nvme_uring_cmd must fit the big SQE's command area");
		std::memcpy(sqe->cmd, &cmd, sizeof(cmd));
	}

	/* 0, -errno, or a positive NVMe status (status code type and code): all bytes, or -errno. */
	int64_t result(const io_uring_cqe *cqe, const RingCmd &c, const IoObject &o, IoDir dir,
		       const testing::Seams *seams) noexcept override
	{
		int64_t res = cqe->res > 0 ? -EIO : cqe->res;
		if (seams) {
			const testing::CommandInfo info{KVBLK_BACKEND_URING_CMD, dir == IoDir::write, c.obj,
							c.cmd_off, c.len, 0, c.attempt, o.offset};
			res = testing::filter_completion(seams, info, res == 0 ? int64_t(c.len) : res);
			res = res < 0 ? res : uint64_t(res) == c.len ? 0 : -EIO;
		}
		return res < 0 ? res : int64_t(c.len);
	}

	/* The generic char device of block device @rdev (a whole NVMe namespace); opens it. */
	int map_blockdev(const BackendConfig &cfg, dev_t rdev, std::string *disk)
	{
		const char *path = cfg.path.c_str();
		std::string real;
		const std::string name = sysfs_name("block", rdev, &real);
		const std::string dir = "/sys/dev/block/" + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
		if (access((dir + "/partition").c_str(), F_OK) == 0) {
			const std::string parent = real.substr(0, real.rfind('/'));
			return fail(-EOPNOTSUPP,
				    "uring_cmd: %s is a partition (%s); passthrough commands address the whole "
				    "namespace: open /dev/%s (or its /dev/ng device) instead",
				    path, name.c_str(), parent.substr(parent.rfind('/') + 1).c_str());
		}
		if (!is_namespace_name(name))
			return fail(-EOPNOTSUPP,
				    "uring_cmd: %s (%s) is not an NVMe namespace: uring_cmd needs /dev/nvmeXnY or "
				    "its generic char device /dev/ngXnY",
				    path, name.empty() ? "no sysfs entry" : name.c_str());
		const std::string ng = "ng" + name.substr(4);
		const std::string cls = "/sys/class/nvme-generic/" + ng + "/dev";
		const std::string devno = read_sysfs(cls);
		unsigned ma = 0, mi = 0;
		if (devno.empty() || std::sscanf(devno.c_str(), "%u:%u", &ma, &mi) != 2)
			return fail(-EOPNOTSUPP,
				    "uring_cmd: %s (%s) has no NVMe generic char device (%s missing: Linux 5.13+ "
				    "creates /dev/%s)",
				    path, name.c_str(), cls.c_str(), ng.c_str());
		ng_path_ = "/dev/" + ng;
		struct stat st;
		if (stat(ng_path_.c_str(), &st) != 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(ma, mi))
			return fail(-EOPNOTSUPP, "uring_cmd: %s (%s): %s is not the char device %u:%u of %s",
				    path, name.c_str(), ng_path_.c_str(), ma, mi, ng.c_str());
		own_fd_ = open(ng_path_.c_str(), (cfg.writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
		if (own_fd_ < 0) {
			const int e = errno;
			return fail(-e, "uring_cmd: open(%s), the generic char device of %s: %s", ng_path_.c_str(),
				    path, errno_text(e).c_str());
		}
		fd_ = own_fd_;
		const int a = ioctl(cfg.fd, NVME_IOCTL_ID), b = ioctl(fd_, NVME_IOCTL_ID);
		if (a <= 0 || a != b)
			return fail(-EOPNOTSUPP, "uring_cmd: %s (nsid %d) and %s (nsid %d) are not the same namespace",
				    path, a, ng_path_.c_str(), b);
		*disk = name;
		return 0;
	}

	BackendConfig cfg_;
	int fd_ = -1;		/* the generic char device */
	int own_fd_ = -1;	/* fd_ when this backend opened it (block device target) */
	std::string ng_path_;
	uint32_t nsid_ = 0;
	uint32_t lba_shift_ = 0;
	TargetSlots<TargetNs> ns_;	/* target 0 and the added generic char devices */
};

} // namespace

std::unique_ptr<Backend> make_uring_cmd_backend(BackendConfig &cfg, int *err)
{
	auto b = std::make_unique<UringCmdBackend>();
	*err = b->start(cfg);
	if (*err)
		return nullptr;
	return b;
}

} // namespace kvblk::detail

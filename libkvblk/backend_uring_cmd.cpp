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
// A batch is a list of commands (every object split at max_cmd_bytes) shared by
// `workers` rings, ring 0 driven by the calling thread and ring i by persistent thread i;
// each ring keeps up to queue_depth commands in flight. The CQE's res is 0, a negative
// errno, or a positive NVMe status (any of which fails the command's object with -EIO).
// -EAGAIN is resubmitted at most eagain_retries times.
#include "backend.hpp"
#include "sysfs.hpp"
#include "last_error.hpp"
#include "ring_workers.hpp"
#include "target_slots.hpp"
#include "testing.hpp"

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

/* Submissions refused for lack of resources (-EAGAIN, -EBUSY, ...) in a row before giving up. */
constexpr unsigned kMaxTransientRefusals = 10000;

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

struct ObjectState {
	std::atomic<uint64_t> pending;
	std::atomic<int32_t> status;
};

/* Where a target's commands go: its generic char device, namespace id and LBA size. */
struct TargetNs {
	int fd = -1;
	uint32_t nsid = 0;
	uint32_t lba_shift = 0;
};

/* One batch, shared by all rings. */
struct Work {
	IoDir dir;
	const IoObject *objs;
	uint32_t n;
	kvblk_result *results;
	uint64_t max_cmd;
	uint32_t eagain_retries;
	const testing::Seams *seams;
	const uint64_t *first_cmd;
	ObjectState *state;
	const TargetSlots<TargetNs> *ns;	/* by IoObject.target */
	std::atomic<uint64_t> next_cmd{0};
	std::atomic<uint64_t> inflight{0};
	std::atomic<uint64_t> peak{0};
	std::atomic<int> fatal{0};

	uint64_t total() const noexcept { return first_cmd[n]; }

	uint32_t object_of(uint64_t c) const noexcept
	{
		return uint32_t(std::upper_bound(first_cmd, first_cmd + n + 1, c) - first_cmd - 1);
	}

	bool grab(uint32_t *obj, uint64_t *off, uint64_t *len) noexcept
	{
		const uint64_t c = next_cmd.fetch_add(1, std::memory_order_relaxed);
		if (c >= total())
			return false;
		*obj = object_of(c);
		*off = (c - first_cmd[*obj]) * max_cmd;
		*len = std::min(max_cmd, objs[*obj].length - *off);
		return true;
	}

	void inflight_add() noexcept
	{
		const uint64_t now = inflight.fetch_add(1, std::memory_order_relaxed) + 1;
		uint64_t p = peak.load(std::memory_order_relaxed);
		while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed))
			;
	}

	void finish_command(uint32_t obj, int32_t err) noexcept
	{
		ObjectState &s = state[obj];
		if (err) {
			int32_t zero = 0;
			s.status.compare_exchange_strong(zero, err, std::memory_order_relaxed);
		}
		if (s.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
			const int32_t st = s.status.load(std::memory_order_relaxed);
			results[obj].status = st;
			results[obj].bytes = st ? 0 : objs[obj].length;
		}
	}
};

struct Slot {
	uint32_t obj;
	bool in_use;
	uint32_t attempt;
	uint64_t cmd_off;
	uint64_t len;
	uint64_t t_submit;
};

/* One SQE128/CQE32 ring and the commands it has in flight. */
class CmdRing {
public:
	~CmdRing() { exit(); }

	int init(int fd, uint32_t nsid, uint32_t lba_shift, uint32_t queue_depth)
	{
		fd_ = fd;
		nsid_ = nsid;
		lba_shift_ = lba_shift;
		io_uring_params p{};
		p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32;
		const int ret = io_uring_queue_init_params(queue_depth, &ring_, &p);
		if (ret < 0)
			return ret;
		live_ = true;
		broken_ = false;
		cap_ = queue_depth;
		slots_.assign(cap_, Slot{});
		free_.reserve(cap_);
		resubmit_.reserve(cap_);
		return 0;
	}

	void exit() noexcept
	{
		if (live_)
			io_uring_queue_exit(&ring_);
		live_ = false;
	}

	[[nodiscard]] bool broken() const noexcept { return broken_; }

	/* Serve commands of @w until none is left for this ring. 0 or a fatal -errno. */
	int run(Work &w, BatchCounters &c) noexcept
	{
		uint32_t used = 0;
		uint64_t in_kernel = 0;
		bool more = true;
		unsigned refusals = 0;
		int fatal = 0;

		free_.clear();
		for (uint32_t i = cap_; i-- > 0;) {
			slots_[i].in_use = false;
			free_.push_back(i);
		}
		resubmit_.clear();

		for (;;) {
			while (!resubmit_.empty() && io_uring_sq_space_left(&ring_)) {
				prep(w, resubmit_.back());
				resubmit_.pop_back();
				c.commands++;
			}
			while (more && resubmit_.empty() && used < cap_ && io_uring_sq_space_left(&ring_)) {
				uint32_t obj;
				uint64_t off, len;
				if (!w.grab(&obj, &off, &len)) {
					more = false;
					break;
				}
				const uint32_t id = free_.back();
				free_.pop_back();
				slots_[id] = Slot{obj, true, 0, off, len, 0};
				used++;
				w.inflight_add();
				prep(w, id);
				c.commands++;
			}
			if (used == 0)
				break;

			const int ret = io_uring_submit_and_wait(&ring_, 1);
			if (ret >= 0) {
				in_kernel += unsigned(ret);
				refusals = 0;
			} else if (ret == -EINTR || ret == -EAGAIN || ret == -EBUSY || ret == -ENOMEM) {
				if (++refusals > kMaxTransientRefusals) {
					fatal = ret;
					break;
				}
				if (in_kernel == 0)
					usleep(1000);
			} else {
				fatal = ret;
				break;
			}
			reap(w, c, &used, &in_kernel);
		}
		if (fatal)
			abandon(w, c, fatal, &used, &in_kernel);
		return fatal;
	}

private:
	void prep(Work &w, uint32_t id) noexcept
	{
		Slot &s = slots_[id];
		const IoObject &o = w.objs[s.obj];
		io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
		if (!sqe)
			__builtin_unreachable(); /* callers checked SQ space */
		std::memset(static_cast<void *>(sqe), 0, 2 * sizeof(*sqe)); /* one 128-byte SQE */
		const TargetNs &t = (*w.ns)[o.target];
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = t.fd;
		sqe->cmd_op = NVME_URING_CMD_IO;
		io_uring_sqe_set_data64(sqe, id);

		const uint64_t slba = (o.offset + s.cmd_off) >> t.lba_shift;
		const uint64_t nlb = s.len >> t.lba_shift;
		nvme_uring_cmd cmd{};
		cmd.opcode = w.dir == IoDir::read ? kNvmeCmdRead : kNvmeCmdWrite;
		cmd.nsid = t.nsid;
		cmd.addr = uint64_t(uintptr_t(o.mem + s.cmd_off));
		cmd.data_len = uint32_t(s.len);
		cmd.cdw10 = uint32_t(slba);
		cmd.cdw11 = uint32_t(slba >> 32);
		cmd.cdw12 = uint32_t(nlb - 1);
		static_assert(sizeof(cmd) <= 80, "struct nvme_uring_cmd must fit the big SQE's command area");
		std::memcpy(sqe->cmd, &cmd, sizeof(cmd));
		s.t_submit = now_ns();
	}

	void complete(Work &w, BatchCounters &c, const io_uring_cqe *cqe, uint64_t now, uint32_t *used) noexcept
	{
		const uint32_t id = uint32_t(io_uring_cqe_get_data64(cqe));
		Slot &s = slots_[id];
		/* 0, -errno, or a positive NVMe status (status code type and code). */
		int64_t res = cqe->res > 0 ? -EIO : cqe->res;
		if (w.seams) {
			const testing::CommandInfo info{KVBLK_BACKEND_URING_CMD, w.dir == IoDir::write, s.obj,
							s.cmd_off, s.len, 0, s.attempt, w.objs[s.obj].offset};
			res = testing::filter_completion(w.seams, info, res == 0 ? int64_t(s.len) : res);
			res = res < 0 ? res : uint64_t(res) == s.len ? 0 : -EIO;
		}
		c.cmd_lat_hist[lat_bucket(now - s.t_submit)]++;
		if (res == -EAGAIN && s.attempt < w.eagain_retries) {
			s.attempt++;
			c.eagain_retries++;
			resubmit_.push_back(id);
			return;
		}
		release(w, id, int32_t(res), used);
	}

	void release(Work &w, uint32_t id, int32_t err, uint32_t *used) noexcept
	{
		Slot &s = slots_[id];
		w.finish_command(s.obj, err);
		s.in_use = false;
		free_.push_back(id);
		(*used)--;
		w.inflight.fetch_sub(1, std::memory_order_relaxed);
	}

	void reap(Work &w, BatchCounters &c, uint32_t *used, uint64_t *in_kernel) noexcept
	{
		unsigned head, seen = 0;
		io_uring_cqe *cqe;
		const uint64_t now = now_ns();
		io_uring_for_each_cqe(&ring_, head, cqe) {
			complete(w, c, cqe, now, used);
			seen++;
		}
		io_uring_cq_advance(&ring_, seen);
		*in_kernel -= seen;
		if (io_uring_cq_has_overflow(&ring_))
			c.cq_overflows++;
	}

	/*
	 * The kernel refused a submission for good: wait for what it accepted (it may still
	 * move data), fail what this ring still holds, and have the ring rebuilt.
	 */
	void abandon(Work &w, BatchCounters &c, int err, uint32_t *used, uint64_t *in_kernel) noexcept
	{
		while (*in_kernel > 0) {
			io_uring_cqe *cqe;
			const int ret = io_uring_wait_cqe(&ring_, &cqe);
			if (ret == -EINTR)
				continue;
			if (ret < 0)
				break;
			reap(w, c, used, in_kernel);
		}
		for (uint32_t id = 0; id < cap_; id++)
			if (slots_[id].in_use)
				release(w, id, err, used);
		resubmit_.clear();
		int zero = 0;
		w.fatal.compare_exchange_strong(zero, err);
		broken_ = true;
	}

	int fd_ = -1;
	uint32_t nsid_ = 0;
	uint32_t lba_shift_ = 0;
	io_uring ring_{};
	bool live_ = false;
	bool broken_ = false;
	uint32_t cap_ = 0;
	std::vector<Slot> slots_;
	std::vector<uint32_t> free_;
	std::vector<uint32_t> resubmit_;
};

class UringCmdBackend final : public Backend {
public:
	~UringCmdBackend() override
	{
		workers_.stop();
		rings_.clear();
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

		for (uint32_t i = 0; i < cfg.workers; i++) {
			auto r = std::make_unique<CmdRing>();
			const int ret = r->init(fd_, nsid_, lba_shift_, cfg.queue_depth);
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
			rings_.push_back(std::move(r));
		}
		try {
			workers_.start(cfg.workers);
		} catch (const std::system_error &e) {
			return fail(-(e.code().value() ? e.code().value() : EAGAIN),
				    "uring_cmd: cannot start %u ring threads: %s", cfg.workers - 1, e.what());
		}
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

	int run(Batch &b) noexcept override
	{
		int ret = rebuild_broken_rings();
		if (ret)
			return ret;
		try {
			first_cmd_.resize(size_t(b.count) + 1);
			if (state_cap_ < b.count) {
				state_.reset(new ObjectState[b.count]);
				state_cap_ = b.count;
			}
		} catch (const std::bad_alloc &) {
			return fail(-ENOMEM, "uring_cmd: out of memory for a batch of %u objects", b.count);
		}
		const uint64_t max_cmd = cfg_.max_cmd_bytes;
		first_cmd_[0] = 0;
		for (uint32_t i = 0; i < b.count; i++) {
			const uint64_t cmds = (b.objects[i].length + max_cmd - 1) / max_cmd;
			first_cmd_[i + 1] = first_cmd_[i] + cmds;
			state_[i].pending.store(cmds, std::memory_order_relaxed);
			state_[i].status.store(0, std::memory_order_relaxed);
		}

		Work w;
		w.dir = b.dir;
		w.objs = b.objects;
		w.n = b.count;
		w.results = b.results;
		w.max_cmd = max_cmd;
		w.eagain_retries = cfg_.eagain_retries;
		w.seams = testing::active();
		w.first_cmd = first_cmd_.data();
		w.state = state_.get();
		w.ns = &ns_;

		counters_.assign(rings_.size(), BatchCounters{});
		auto job = [&](uint32_t i) { rings_[i]->run(w, counters_[i]); };
		workers_.run(job);
		/* Every ring gave up: fail the commands nobody took, so every object completes. */
		if (const int err = w.fatal.load()) {
			for (uint64_t c; (c = w.next_cmd.fetch_add(1)) < w.total();)
				w.finish_command(w.object_of(c), err);
		}
		for (const BatchCounters &c : counters_)
			b.counters.merge(c);
		b.counters.inflight_peak = w.peak.load();
		return 0;
	}

private:
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

	int rebuild_broken_rings() noexcept
	{
		for (auto &ring : rings_) {
			if (!ring->broken())
				continue;
			ring->exit();
			const int ret = ring->init(fd_, nsid_, lba_shift_, cfg_.queue_depth);
			if (ret < 0)
				return fail(ret, "uring_cmd: cannot rebuild a ring after a failed submission: %s",
					    errno_text(ret).c_str());
		}
		return 0;
	}

	BackendConfig cfg_;
	int fd_ = -1;		/* the generic char device */
	int own_fd_ = -1;	/* fd_ when this backend opened it (block device target) */
	std::string ng_path_;
	uint32_t nsid_ = 0;
	uint32_t lba_shift_ = 0;
	std::vector<std::unique_ptr<CmdRing>> rings_;
	std::vector<BatchCounters> counters_;
	RingWorkers workers_; /* batch dispatch to the ring threads */

	std::vector<uint64_t> first_cmd_;
	std::unique_ptr<ObjectState[]> state_;
	uint32_t state_cap_ = 0;
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

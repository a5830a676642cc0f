// SPDX-License-Identifier: MIT
// kvblk_open(): defaults and what get_info reports, option checks, backend choice (explicit,
// KVBLK_BACKEND, AUTO and its reason), path errors, and a real block device (a loop device
// with 4 KiB logical blocks) for BLKSSZGET, BLKGETSIZE64 and the max_hw_sectors_kb clamp.
#include "test_util.hpp"

#include <cstdio>
#include <fstream>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>

using namespace kvblk_test;
using kvblk::testing::Seams;

namespace {

class OpenTest : public StoreTest {
protected:
	int try_open(const kvblk_open_opts &o)
	{
		kvblk_dev *d = nullptr;
		int rc = kvblk_open(path_.c_str(), &o, &d);
		kvblk_close(d);
		return rc;
	}
	static bool says(const std::string &part) { return std::string(kvblk_last_error()).find(part) != std::string::npos; }
};

TEST_F(OpenTest, defaults_and_info)
{
	EnvGuard env("KVBLK_BACKEND", nullptr);
	kvblk_dev *raw = nullptr;
	ASSERT_EQ(kvblk_open(path_.c_str(), nullptr, &raw), 0) << kvblk_last_error();
	DevPtr dev(raw);
	const kvblk_dev_info info = get_info(dev.get());

	/* What the kernel says about this file. */
	struct statx sx {};
	ASSERT_EQ(statx(AT_FDCWD, path_.c_str(), 0, STATX_DIOALIGN | STATX_BASIC_STATS, &sx), 0);
	uint32_t lbs = sx.stx_blksize, mem = sx.stx_blksize;
	if ((sx.stx_mask & STATX_DIOALIGN) && sx.stx_dio_offset_align) {
		lbs = sx.stx_dio_offset_align;
		mem = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : lbs;
	}
	EXPECT_EQ(info.info_size, sizeof(info));
	EXPECT_EQ(info.logical_block_size, lbs);
	EXPECT_EQ(info.mem_align, mem);
	EXPECT_EQ(info.capacity, kObjects * kObjectBytes);
	EXPECT_EQ(info.flags, 0u);
	EXPECT_EQ(info.max_cmd_bytes, KVBLK_DEFAULT_MAX_CMD_BYTES);
	EXPECT_EQ(info.queue_depth, KVBLK_DEFAULT_QUEUE_DEPTH);
	EXPECT_EQ(info.workers, KVBLK_DEFAULT_WORKERS);
	EXPECT_EQ(info.max_descs, KVBLK_DEFAULT_MAX_DESCS);
	EXPECT_EQ(info.backend, uint32_t(KVBLK_BACKEND_URING));
	if (access("/dev/kvblk", F_OK) != 0) {
		EXPECT_STREQ(info.backend_reason, "uring: /dev/kvblk not present (kvblk.ko not loaded)");
	}
}

TEST_F(OpenTest, effective_workers_per_backend)
{
	EXPECT_EQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_THREADPOOL)).get()).workers, KVBLK_DEFAULT_THREADS);
	EXPECT_EQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_THREADPOOL, 3)).get()).workers, 3u);
	EXPECT_EQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_PSYNC, 5, 7)).get()).workers, 1u);
	EXPECT_EQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_PSYNC, 5, 7)).get()).queue_depth, 1u);
	const kvblk_dev_info u = get_info(open_dev(path_, make_opts(KVBLK_BACKEND_URING, 4, 32, 256 * KiB)).get());
	EXPECT_EQ(u.workers, 4u);
	EXPECT_EQ(u.queue_depth, 32u);
	EXPECT_EQ(u.max_cmd_bytes, 256 * KiB);
	EXPECT_STREQ(u.backend_reason, "uring: requested in kvblk_open_opts.backend");
}

TEST_F(OpenTest, bad_options_are_einval)
{
	kvblk_open_opts o = make_opts(KVBLK_BACKEND_URING);
	o.queue_depth = KVBLK_MAX_QUEUE_DEPTH + 1;
	EXPECT_EQ(try_open(o), -EINVAL);
	EXPECT_TRUE(says("queue_depth 4097"));
	o = make_opts(KVBLK_BACKEND_URING, KVBLK_MAX_WORKERS + 1);
	EXPECT_EQ(try_open(o), -EINVAL);
	EXPECT_TRUE(says("workers 65"));
	o = make_opts(KVBLK_BACKEND_URING, 0, 0, 0, 1u << 7);
	EXPECT_EQ(try_open(o), -EINVAL);
	EXPECT_TRUE(says("unknown flags 0x80"));
	o = make_opts(KVBLK_BACKEND_URING, 0, 0, 2048);
	EXPECT_EQ(try_open(o), -EINVAL);
	EXPECT_TRUE(says("below 4096"));
	o = make_opts(KVBLK_BACKEND_URING, 0, 0, 4097);
	EXPECT_EQ(try_open(o), -EINVAL);
	EXPECT_TRUE(says("not a multiple of the logical block size"));
	o = make_opts(KVBLK_BACKEND_URING);
	o.max_descs = KVBLK_MAX_DESCS_LIMIT + 1;
	EXPECT_EQ(try_open(o), -EINVAL);
	o = make_opts(KVBLK_BACKEND_URING);
	o.backend = KVBLK_BACKEND_MAX;
	EXPECT_EQ(try_open(o), -EINVAL);
	o = make_opts(KVBLK_BACKEND_URING);
	o.opts_size = KVBLK_OPEN_OPTS_SIZE_V0_2 - 8; /* below the 0.2 struct */
	EXPECT_EQ(try_open(o), -EINVAL);
	EXPECT_TRUE(says("opts_size"));

	/* A newer caller's struct: longer is fine while the unknown tail is zero. */
	struct Longer {
		kvblk_open_opts o;
		uint64_t future;
	} longer;
	kvblk_open_opts_init(&longer.o, sizeof(longer));
	EXPECT_EQ(longer.future, 0u);
	longer.o.backend = KVBLK_BACKEND_PSYNC;
	EXPECT_EQ(try_open(longer.o), 0);
	longer.future = 1;
	EXPECT_EQ(try_open(longer.o), -EINVAL);

	kvblk_dev *d = nullptr;
	EXPECT_EQ(kvblk_open(nullptr, nullptr, &d), -EINVAL);
	EXPECT_EQ(kvblk_open(path_.c_str(), nullptr, nullptr), -EINVAL);
}

TEST_F(OpenTest, queue_and_command_limits_are_accepted_at_their_bounds)
{
	const kvblk_dev_info i = get_info(open_dev(path_, make_opts(KVBLK_BACKEND_URING, 1, 1, 4096)).get());
	EXPECT_EQ(i.queue_depth, 1u);
	EXPECT_EQ(i.max_cmd_bytes, 4096u);
	const kvblk_dev_info j = get_info(open_dev(path_, make_opts(KVBLK_BACKEND_URING, 1, 0, 4ull << 30)).get());
	EXPECT_EQ(j.max_cmd_bytes, 1ull << 30) << "clamped to 1 GiB";
}

TEST_F(OpenTest, env_overrides_auto_only)
{
	{
		EnvGuard env("KVBLK_BACKEND", "psync");
		DevPtr d = open_dev(path_, make_opts(KVBLK_BACKEND_AUTO));
		const kvblk_dev_info i = get_info(d.get());
		EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_PSYNC));
		EXPECT_STREQ(i.backend_reason, "psync: KVBLK_BACKEND=psync");
		/* An explicit backend wins over the environment. */
		EXPECT_EQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_THREADPOOL)).get()).backend,
			  uint32_t(KVBLK_BACKEND_THREADPOOL));
	}
	{
		EnvGuard env("KVBLK_BACKEND", "threadpool");
		EXPECT_EQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_AUTO)).get()).backend,
			  uint32_t(KVBLK_BACKEND_THREADPOOL));
	}
	{
		EnvGuard env("KVBLK_BACKEND", "fastest");
		EXPECT_EQ(try_open(make_opts(KVBLK_BACKEND_AUTO)), -EINVAL);
		EXPECT_TRUE(says("KVBLK_BACKEND=fastest"));
	}
	{
		EnvGuard env("KVBLK_BACKEND", "kmod");
		EXPECT_EQ(try_open(make_opts(KVBLK_BACKEND_AUTO)), -EOPNOTSUPP);
	}
	{
		EnvGuard env("KVBLK_BACKEND", "auto");
		EXPECT_EQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_AUTO)).get()).backend,
			  uint32_t(KVBLK_BACKEND_URING));
	}
}

TEST_F(OpenTest, auto_explains_why_not_kmod)
{
	EnvGuard env("KVBLK_BACKEND", nullptr);
	Seams s;
	s.kmod_node = "/nonexistent/kvblk";
	{
		SeamGuard g(s);
		EXPECT_STREQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_AUTO)).get()).backend_reason,
			     "uring: /nonexistent/kvblk not present (kvblk.ko not loaded)");
	}
	s.kmod_node = "/dev/null"; /* "kvblk.ko is loaded", but the target is a file */
	{
		SeamGuard g(s);
		const kvblk_dev_info i = get_info(open_dev(path_, make_opts(KVBLK_BACKEND_AUTO)).get());
		EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_URING));
		EXPECT_EQ(std::string(i.backend_reason), "uring: " + path_ + " is a regular file, not a PCIe NVMe namespace");
	}
}

TEST_F(OpenTest, path_errors)
{
	kvblk_dev *d = nullptr;
	EXPECT_EQ(kvblk_open((dir_->path() + "/missing").c_str(), nullptr, &d), -ENOENT);
	EXPECT_TRUE(says("missing"));
	EXPECT_EQ(kvblk_open(dir_->path().c_str(), nullptr, &d), -EISDIR);
	EXPECT_EQ(kvblk_open("/dev/null", nullptr, &d), -ENOTSUP);
	EXPECT_TRUE(says("neither a block device nor a regular file"));
	EXPECT_EQ(d, nullptr);
}

TEST_F(OpenTest, get_info_and_stats_check_sizes)
{
	DevPtr dev = open_dev(path_, make_opts(KVBLK_BACKEND_PSYNC));
	kvblk_dev_info i{};
	i.info_size = KVBLK_DEV_INFO_SIZE_V0_2 - 1; /* below the 0.2 struct */
	EXPECT_EQ(kvblk_get_info(dev.get(), &i), -EINVAL);
	EXPECT_EQ(kvblk_get_info(dev.get(), nullptr), -EINVAL);
	EXPECT_EQ(kvblk_get_info(nullptr, &i), -EINVAL);
	kvblk_stats s{};
	s.stats_size = KVBLK_STATS_SIZE_V0_1 - 8; /* below the 0.1 struct */
	EXPECT_EQ(kvblk_get_stats(dev.get(), &s), -EINVAL);
	EXPECT_EQ(kvblk_reset_stats(nullptr), -EINVAL);

	/* A larger (newer) struct gets our fields and zeros after them. */
	struct {
		kvblk_dev_info info;
		uint64_t tail;
	} big;
	std::memset(&big, 0xFF, sizeof(big));
	big.info.info_size = sizeof(big);
	ASSERT_EQ(kvblk_get_info(dev.get(), &big.info), 0);
	EXPECT_EQ(big.info.info_size, sizeof(big));
	EXPECT_EQ(big.info.backend, uint32_t(KVBLK_BACKEND_PSYNC));
	EXPECT_EQ(big.tail, 0u);
	kvblk_close(nullptr); /* a no-op */
}

/* A loop device with 4 KiB logical blocks over a pattern file; skipped where none can be made. */
class BlockDeviceTest : public StoreTest {
protected:
	void SetUp() override
	{
		StoreTest::SetUp();
		int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
		if (ctl < 0)
			GTEST_SKIP() << "/dev/loop-control: " << std::strerror(errno);
		for (int attempt = 0; attempt < 5 && loop_fd_ < 0; attempt++) {
			int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
			if (nr < 0)
				break;
			loop_path_ = "/dev/loop" + std::to_string(nr);
			int fd = open(loop_path_.c_str(), O_RDWR | O_CLOEXEC);
			if (fd < 0)
				continue;
			int backing = open(path_.c_str(), O_RDWR | O_CLOEXEC);
			loop_config cfg{};
			cfg.fd = uint32_t(backing);
			cfg.block_size = 4096;
			cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
			if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0)
				loop_fd_ = fd;
			else
				close(fd);
			close(backing);
		}
		close(ctl);
		if (loop_fd_ < 0)
			GTEST_SKIP() << "cannot set up a loop device: " << std::strerror(errno);
	}

	void TearDown() override
	{
		if (loop_fd_ >= 0) {
			ioctl(loop_fd_, LOOP_CLR_FD, 0);
			close(loop_fd_);
		}
	}

	/* The loop device's queue/@attr (a number), 0 if unknown. */
	uint64_t queue_attr(const char *attr) const
	{
		std::ifstream f(queue_path(attr));
		uint64_t v = 0;
		f >> v;
		return v;
	}

	std::string queue_path(const char *attr) const
	{
		struct stat st {};
		if (stat(loop_path_.c_str(), &st) != 0)
			return "";
		return "/sys/dev/block/" + std::to_string(major(st.st_rdev)) + ":" +
		       std::to_string(minor(st.st_rdev)) + "/queue/" + attr;
	}

	/*
	 * Load every object of the device in one call into @dst: each exact, and the device's
	 * commands counter says each was cut into commands of @cmd bytes.
	 */
	void load_all_exact(kvblk_dev *dev, uint8_t *dst, uint64_t cmd) const
	{
		std::vector<kvblk_desc> descs;
		for (uint64_t i = 0; i < kObjects; i++)
			descs.push_back(plain_desc(i * kObjectBytes, kObjectBytes, dst + i * kObjectBytes, i));
		std::vector<kvblk_result> res(kObjects);
		ASSERT_EQ(kvblk_load_many(dev, descs.data(), uint32_t(kObjects), res.data(), nullptr), int(kObjects))
			<< kvblk_last_error();
		const auto want = expected_bytes(0, kObjects * kObjectBytes, kObjectBytes);
		EXPECT_EQ(std::memcmp(dst, want.data(), want.size()), 0);
		EXPECT_EQ(get_stats(dev).commands, kObjects * ((kObjectBytes + cmd - 1) / cmd));
	}

	/* queue/max_hw_sectors_kb of the loop device in bytes, 0 if unknown. */
	uint64_t max_hw_bytes() const { return queue_attr("max_hw_sectors_kb") * 1024; }

	/*
	 * What uring's commands are cut at when @asked is asked for: the hardware limit, the soft
	 * limit (max_sectors_kb), and before 6.11 (no coalescing of fixed buffers) max_segments
	 * pages of 4 KiB (libkvblk/bio_split.hpp), in 4 KiB blocks.
	 */
	uint64_t expected_cmd(uint64_t asked) const
	{
		uint64_t v = asked;
		if (uint64_t hw = max_hw_bytes())
			v = std::min(v, hw);
		if (uint64_t soft = queue_attr("max_sectors_kb"))
			v = std::min(v, soft * 1024);
		struct utsname u {};
		unsigned maj = 0, min = 0;
		const bool coalesces = uname(&u) == 0 && std::sscanf(u.release, "%u.%u", &maj, &min) == 2 &&
				       (maj > 6 || (maj == 6 && min >= 11));
		if (uint64_t segs = queue_attr("max_segments"); segs && !coalesces)
			v = std::min(v, segs * 4096);
		return v / 4096 * 4096;
	}

	int loop_fd_ = -1;
	std::string loop_path_;
};

TEST_F(BlockDeviceTest, info_and_exact_bytes)
{
	const uint64_t hw = max_hw_bytes();
	DevPtr dev = open_dev(loop_path_, make_opts(KVBLK_BACKEND_URING, 2, 16, 8 * MiB));
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	EXPECT_TRUE(info.flags & KVBLK_INFO_BLOCKDEV);
	EXPECT_EQ(info.logical_block_size, 4096u);
	EXPECT_EQ(info.capacity, kObjects * kObjectBytes);
	EXPECT_EQ(info.mem_align % 4, 0u);
	if (hw) {
		EXPECT_EQ(info.max_cmd_bytes, expected_cmd(8 * MiB))
			<< "max_hw_sectors_kb, max_sectors_kb, max_segments clamp";
	}

	/* 512-byte granularity is refused: the device's blocks are 4 KiB. */
	AlignedBuf dst(kObjects * kObjectBytes);
	kvblk_desc d = plain_desc(512, 4096, dst.data(), 0);
	kvblk_result r{};
	EXPECT_EQ(kvblk_load_many(dev.get(), &d, 1, &r, nullptr), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("logical block size 4096"), std::string::npos);

	load_all_exact(dev.get(), dst.data(), info.max_cmd_bytes);
}

/*
 * A soft limit (queue/max_sectors_kb) below what is asked: uring's commands are cut at it, so
 * that the block layer never splits one (io_uring would issue the split command again from a
 * worker thread), and backend_reason says so. Bytes exact across the cuts.
 */
TEST_F(BlockDeviceTest, uring_commands_never_exceed_what_the_block_layer_takes_unsplit)
{
	const std::string soft = queue_path("max_sectors_kb");
	const uint64_t old_kb = queue_attr("max_sectors_kb");
	if (soft.empty() || !old_kb)
		GTEST_SKIP() << "no queue/max_sectors_kb for " << loop_path_;
	{
		std::ofstream f(soft);
		f << 64;
		f.flush();
		if (!f || queue_attr("max_sectors_kb") != 64)
			GTEST_SKIP() << "cannot lower " << soft << " (not root?)";
	}
	DevPtr dev = open_dev(loop_path_, make_opts(KVBLK_BACKEND_URING, 1, 8, 1 * MiB));
	std::ofstream(soft) << old_kb;
	ASSERT_TRUE(dev) << kvblk_last_error();
	const kvblk_dev_info info = get_info(dev.get());
	EXPECT_EQ(info.max_cmd_bytes, 64u * 1024);
	EXPECT_NE(std::string(info.backend_reason).find("max_cmd_bytes 1048576 lowered to 65536"), std::string::npos)
		<< info.backend_reason;

	AlignedBuf dst(kObjects * kObjectBytes);
	load_all_exact(dev.get(), dst.data(), 64 * 1024);
}

/*
 * The same limit on a block device added as a second target of a uring device opened on a
 * file: that target's commands are cut at its own queue's limit, not at target 0's
 * max_cmd_bytes, and kvblk_get_target_info() says so; target 0's are not. Bytes exact, and
 * the commands counter counts both cuts in one batch.
 */
TEST_F(BlockDeviceTest, an_added_block_device_gets_its_own_unsplit_limit)
{
	const std::string soft = queue_path("max_sectors_kb");
	const uint64_t old_kb = queue_attr("max_sectors_kb");
	if (soft.empty() || !old_kb)
		GTEST_SKIP() << "no queue/max_sectors_kb for " << loop_path_;
	const std::string file0 = dir_->file("target0");
	write_pattern_file(file0, kObjects, kObjectBytes);
	DevPtr dev = open_dev(file0, make_opts(KVBLK_BACKEND_URING, 1, 8, 1 * MiB));
	ASSERT_TRUE(dev) << kvblk_last_error();
	ASSERT_EQ(get_info(dev.get()).max_cmd_bytes, 1 * MiB);
	{
		std::ofstream f(soft);
		f << 64;
		f.flush();
		if (!f || queue_attr("max_sectors_kb") != 64)
			GTEST_SKIP() << "cannot lower " << soft << " (not root?)";
	}
	uint32_t id = 0;
	const int added = kvblk_add_target(dev.get(), loop_path_.c_str(), 0, &id);
	std::ofstream(soft) << old_kb;
	ASSERT_EQ(added, 0) << kvblk_last_error();
	kvblk_dev_info ti{};
	ti.info_size = sizeof(ti);
	ASSERT_EQ(kvblk_get_target_info(dev.get(), id, &ti), 0) << kvblk_last_error();
	EXPECT_EQ(ti.max_cmd_bytes, 64u * 1024);
	EXPECT_NE(std::string(ti.backend_reason).find("max_cmd_bytes 1048576 lowered to 65536"), std::string::npos)
		<< ti.backend_reason;
	EXPECT_EQ(get_info(dev.get()).max_cmd_bytes, 1 * MiB) << "target 0 keeps its own";

	AlignedBuf dst((kObjects + 1) * kObjectBytes);
	std::vector<kvblk_desc> descs;
	for (uint64_t i = 0; i < kObjects; i++)
		descs.push_back(tdesc(id, i * kObjectBytes, kObjectBytes, dst.data() + i * kObjectBytes, i));
	descs.push_back(tdesc(0, 0, kObjectBytes, dst.data() + kObjects * kObjectBytes, kObjects));
	std::vector<kvblk_result> res(descs.size());
	ASSERT_EQ(kvblk_load_many(dev.get(), descs.data(), uint32_t(descs.size()), res.data(), nullptr),
		  int(descs.size()))
		<< kvblk_last_error();
	const auto want = expected_bytes(0, kObjects * kObjectBytes, kObjectBytes);
	EXPECT_EQ(std::memcmp(dst.data(), want.data(), want.size()), 0);
	EXPECT_EQ(std::memcmp(dst.data() + kObjects * kObjectBytes, want.data(), kObjectBytes), 0);
	EXPECT_EQ(get_stats(dev.get()).commands, kObjects * (kObjectBytes / (64 * 1024)) + 1);
}

/*
 * A block device target is opened O_NOATIME (as fio opens one): no touch_atime() per read.
 * A regular file keeps its atime. Where open(2) refuses O_NOATIME (EPERM: not the node's
 * owner, no CAP_FOWNER) the device opens without it and loads the same bytes.
 */
TEST_F(BlockDeviceTest, a_block_device_is_opened_noatime_a_file_is_not)
{
	const std::vector<int> dev_before = fds_linking_to(loop_path_);
	DevPtr dev = open_dev(loop_path_, make_opts(KVBLK_BACKEND_URING, 1, 8));
	ASSERT_TRUE(dev) << kvblk_last_error();
	std::vector<int> opened;
	for (int fd : fds_linking_to(loop_path_))
		if (std::find(dev_before.begin(), dev_before.end(), fd) == dev_before.end())
			opened.push_back(fd);
	ASSERT_EQ(opened.size(), 1u);
	EXPECT_NE(fdinfo_flags(opened[0]) & O_NOATIME, 0) << "flags 0" << std::oct << fdinfo_flags(opened[0]);

	const std::vector<int> file_before = fds_linking_to(path_);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), path_.c_str(), 0, &id), 0) << kvblk_last_error();
	opened.clear();
	for (int fd : fds_linking_to(path_))
		if (std::find(file_before.begin(), file_before.end(), fd) == file_before.end())
			opened.push_back(fd);
	ASSERT_EQ(opened.size(), 1u);
	EXPECT_EQ(fdinfo_flags(opened[0]) & O_NOATIME, 0) << "flags 0" << std::oct << fdinfo_flags(opened[0]);

	/*
	 * A node of the same device owned by another user, opened without CAP_FOWNER, in a
	 * child forked with no ring thread alive (ThreadSanitizer refuses new threads in a
	 * child of a process that had others).
	 */
	dev.reset();
	struct stat st {};
	ASSERT_EQ(stat(loop_path_.c_str(), &st), 0);
	const std::string node = dir_->file("node");
	if (mknod(node.c_str(), S_IFBLK | 0666, st.st_rdev) != 0 || chown(node.c_str(), 12345, 12345) != 0)
		GTEST_SKIP() << "cannot make a device node in " << node << ": " << std::strerror(errno);
	const ChildReport rep = run_in_child([&](ChildReport &r) {
		const std::string why = drop_capability(CAP_FOWNER);
		if (!why.empty()) {
			r.skip = 1;
			r.say(why);
			return;
		}
		r.v[0] = open(node.c_str(), O_RDONLY | O_NOATIME | O_CLOEXEC) < 0 ? errno : 0;
		DevPtr d = open_dev(node, make_opts(KVBLK_BACKEND_URING, 1, 8));
		if (!d) {
			r.say(std::string("kvblk_open: ") + kvblk_last_error());
			return;
		}
		const std::vector<int> fds = fds_linking_to(node);
		r.v[1] = long(fds.size());
		r.v[2] = fds.empty() ? -1 : fdinfo_flags(fds[0]);
		AlignedBuf b(kObjectBytes);
		const kvblk_desc desc = plain_desc(2 * kObjectBytes, kObjectBytes, b.data(), 1);
		kvblk_result res{};
		r.v[3] = kvblk_load_many(d.get(), &desc, 1, &res, nullptr);
		r.v[4] = std::memcmp(b.data(), expected_bytes(2 * kObjectBytes, kObjectBytes, kObjectBytes).data(),
				     kObjectBytes) == 0;
	});
	ASSERT_TRUE(rep.delivered);
	if (rep.skip)
		GTEST_SKIP() << rep.msg;
	EXPECT_EQ(rep.v[0], EPERM) << "O_NOATIME on another user's node without CAP_FOWNER";
	ASSERT_EQ(rep.v[1], 1) << rep.msg;
	EXPECT_EQ(rep.v[2] & O_NOATIME, 0);
	EXPECT_EQ(rep.v[3], 1) << rep.msg;
	EXPECT_EQ(rep.v[4], 1) << "bytes";
}

} // namespace

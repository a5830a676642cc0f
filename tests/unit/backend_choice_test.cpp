// SPDX-License-Identifier: MIT
// The kmod and uring_cmd backends where no NVMe namespace and no kvblk.ko exist (this
// machine): AUTO's choice and its reason, the exact refusals of an explicit kmod or uring_cmd
// for a regular file, a non-NVMe block device (a loop device), a module node that is not
// kvblk.ko, KVBLK_OPEN_BUFFERED, and that a refused open leaves no file descriptor behind.
// Their data paths run in the QEMU guest (device_test.cpp, tests/vm/cases/libkvblk-device.sh).
#include "test_util.hpp"

#include <dirent.h>
#include <linux/loop.h>
#include <sys/ioctl.h>

using namespace kvblk_test;
using kvblk::testing::Seams;

namespace {

bool says(const std::string &part)
{
	return std::string(kvblk_last_error()).find(part) != std::string::npos;
}

int try_open(const std::string &path, const kvblk_open_opts &o)
{
	kvblk_dev *d = nullptr;
	const int rc = kvblk_open(path.c_str(), &o, &d);
	kvblk_close(d);
	return rc;
}

/* Open file descriptors of this process. */
int count_fds()
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

class BackendChoiceTest : public StoreTest {
protected:
	void SetUp() override
	{
		StoreTest::SetUp();
		env_ = std::make_unique<EnvGuard>("KVBLK_BACKEND", nullptr);
	}
	std::unique_ptr<EnvGuard> env_;
};

TEST_F(BackendChoiceTest, kmod_without_module_is_refused_with_the_reason)
{
	Seams s;
	s.kmod_node = "/nonexistent/kvblk";
	SeamGuard g(s);
	/* The target is checked first: kvblk.ko never reads files. */
	EXPECT_EQ(try_open(path_, make_opts(KVBLK_BACKEND_KMOD)), -EOPNOTSUPP);
	EXPECT_TRUE(says("is a regular file: kvblk.ko reads NVMe namespaces")) << kvblk_last_error();
	EXPECT_TRUE(says(path_)) << kvblk_last_error();
	{
		EnvGuard env("KVBLK_BACKEND", "kmod");
		EXPECT_EQ(try_open(path_, make_opts(KVBLK_BACKEND_AUTO)), -EOPNOTSUPP);
		EXPECT_TRUE(says("is a regular file")) << kvblk_last_error();
	}
}

TEST_F(BackendChoiceTest, uring_cmd_refuses_a_regular_file)
{
	EXPECT_EQ(try_open(path_, make_opts(KVBLK_BACKEND_URING_CMD)), -EOPNOTSUPP);
	EXPECT_TRUE(says("is a regular file: uring_cmd sends NVMe commands to a namespace's generic char "
			 "device (/dev/ngXnY)"))
		<< kvblk_last_error();
	EnvGuard env("KVBLK_BACKEND", "uring_cmd");
	EXPECT_EQ(try_open(path_, make_opts(KVBLK_BACKEND_AUTO)), -EOPNOTSUPP);
}

TEST_F(BackendChoiceTest, buffered_cannot_be_honoured_by_kmod_or_uring_cmd)
{
	for (kvblk_backend b : {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING_CMD}) {
		EXPECT_EQ(try_open(path_, make_opts(b, 0, 0, 0, KVBLK_OPEN_BUFFERED)), -EOPNOTSUPP) << b;
		EXPECT_TRUE(says(std::string("backend ") + kvblk_backend_name(b) +
				 " always bypasses the page cache: KVBLK_OPEN_BUFFERED cannot be honoured"))
			<< kvblk_last_error();
	}
	/* AUTO with a module present still says that a file is no NVMe namespace. */
	Seams s;
	s.kmod_node = "/dev/null";
	SeamGuard g(s);
	DevPtr d = open_dev(path_, make_opts(KVBLK_BACKEND_AUTO, 0, 0, 0, KVBLK_OPEN_BUFFERED));
	ASSERT_TRUE(d);
	const kvblk_dev_info i = get_info(d.get());
	EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_EQ(std::string(i.backend_reason), "uring: " + path_ + " is a regular file, not a PCIe NVMe namespace");
}

TEST_F(BackendChoiceTest, refused_opens_leave_no_descriptor_open)
{
	Seams s;
	s.kmod_node = "/dev/null";
	SeamGuard g(s);
	const int before = count_fds();
	ASSERT_GT(before, 0);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(try_open(path_, make_opts(KVBLK_BACKEND_KMOD)), -EOPNOTSUPP);
		EXPECT_EQ(try_open(path_, make_opts(KVBLK_BACKEND_URING_CMD)), -EOPNOTSUPP);
	}
	EXPECT_EQ(count_fds(), before);
}

TEST_F(BackendChoiceTest, other_char_devices_stay_refused)
{
	/* Only an NVMe generic char device (class nvme-generic) is accepted among char devices. */
	for (kvblk_backend b : {KVBLK_BACKEND_AUTO, KVBLK_BACKEND_URING_CMD, KVBLK_BACKEND_KMOD}) {
		EXPECT_EQ(try_open("/dev/null", make_opts(b)), -ENOTSUP) << b;
		EXPECT_TRUE(says("neither a block device nor a regular file")) << kvblk_last_error();
	}
}

/* A loop device over the pattern store: a block device that is not NVMe. */
class NonNvmeBlockTest : public BackendChoiceTest {
protected:
	void SetUp() override
	{
		BackendChoiceTest::SetUp();
		int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
		if (ctl < 0)
			GTEST_SKIP() << "/dev/loop-control: " << std::strerror(errno);
		for (int attempt = 0; attempt < 5 && loop_fd_ < 0; attempt++) {
			const int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
			if (nr < 0)
				break;
			loop_path_ = "/dev/loop" + std::to_string(nr);
			const int fd = open(loop_path_.c_str(), O_RDWR | O_CLOEXEC);
			if (fd < 0)
				continue;
			const int backing = open(path_.c_str(), O_RDWR | O_CLOEXEC);
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
		name_ = loop_path_.substr(5);
	}

	void TearDown() override
	{
		if (loop_fd_ >= 0) {
			ioctl(loop_fd_, LOOP_CLR_FD, 0);
			close(loop_fd_);
		}
	}

	int loop_fd_ = -1;
	std::string loop_path_;
	std::string name_;
};

TEST_F(NonNvmeBlockTest, auto_says_not_nvme)
{
	Seams s;
	s.kmod_node = "/dev/null"; /* "kvblk.ko is loaded" */
	SeamGuard g(s);
	DevPtr d = open_dev(loop_path_, make_opts(KVBLK_BACKEND_AUTO));
	ASSERT_TRUE(d);
	const kvblk_dev_info i = get_info(d.get());
	EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_EQ(std::string(i.backend_reason),
		  "uring: " + loop_path_ + " is a block device (" + name_ + "), not a PCIe NVMe namespace");
}

TEST_F(NonNvmeBlockTest, kmod_without_module_says_not_loaded)
{
	Seams s;
	s.kmod_node = "/nonexistent/kvblk";
	SeamGuard g(s);
	EXPECT_EQ(try_open(loop_path_, make_opts(KVBLK_BACKEND_KMOD)), -EOPNOTSUPP);
	EXPECT_STREQ(kvblk_last_error(), "kmod: /nonexistent/kvblk not present: kvblk.ko is not loaded (insmod kvblk.ko)");
	/* AUTO: the reason, and uring serves. */
	DevPtr d = open_dev(loop_path_, make_opts(KVBLK_BACKEND_AUTO));
	ASSERT_TRUE(d);
	EXPECT_STREQ(get_info(d.get()).backend_reason, "uring: /nonexistent/kvblk not present (kvblk.ko not loaded)");
}

TEST_F(NonNvmeBlockTest, kmod_with_a_node_that_is_not_kvblk)
{
	Seams s;
	s.kmod_node = "/dev/null";
	SeamGuard g(s);
	EXPECT_EQ(try_open(loop_path_, make_opts(KVBLK_BACKEND_KMOD)), -EOPNOTSUPP);
	EXPECT_TRUE(says("kmod: /dev/null does not answer KVBLK_IOC_GET_FEATURES")) << kvblk_last_error();
}

TEST_F(NonNvmeBlockTest, refused_opens_leave_no_descriptor_open)
{
	Seams s;
	s.kmod_node = "/dev/null"; /* opened, then refused: not kvblk.ko */
	SeamGuard g(s);
	const int before = count_fds();
	ASSERT_GT(before, 0);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(try_open(loop_path_, make_opts(KVBLK_BACKEND_KMOD)), -EOPNOTSUPP);
		EXPECT_EQ(try_open(loop_path_, make_opts(KVBLK_BACKEND_URING_CMD)), -EOPNOTSUPP);
	}
	EXPECT_EQ(count_fds(), before);
}

TEST_F(NonNvmeBlockTest, uring_cmd_says_not_an_nvme_namespace)
{
	EXPECT_EQ(try_open(loop_path_, make_opts(KVBLK_BACKEND_URING_CMD)), -EOPNOTSUPP);
	EXPECT_EQ(std::string(kvblk_last_error()),
		  "uring_cmd: " + loop_path_ + " (" + name_ +
			  ") is not an NVMe namespace: uring_cmd needs /dev/nvmeXnY or its generic char device "
			  "/dev/ngXnY");
	/* The other backends still serve it. */
	DevPtr d = open_dev(loop_path_, make_opts(KVBLK_BACKEND_URING));
	ASSERT_TRUE(d);
	AlignedBuf dst(kObjectBytes);
	kvblk_desc desc = plain_desc(kObjectBytes, kObjectBytes, dst.data(), 7);
	kvblk_result r{};
	EXPECT_EQ(kvblk_load_many(d.get(), &desc, 1, &r, nullptr), 1) << kvblk_last_error();
	const auto want = expected_bytes(kObjectBytes, kObjectBytes, kObjectBytes);
	EXPECT_EQ(std::memcmp(dst.data(), want.data(), want.size()), 0);
}

} // namespace

// SPDX-License-Identifier: MIT
// Helpers of the NVMe device tests (device_test.cpp, device_targets_test.cpp): the
// environment the VM case sets, the kvblk.ko requirement, and the references every load is
// held to (an O_DIRECT pread(2) of the same range, and the VM image's pattern).
#pragma once

#include "test_util.hpp"

#include "tests/vm/pattern.h"

#include <uapi/linux/kvblk.h>

#include <sys/ioctl.h>
#include <unistd.h>

namespace kvblk_test {

inline const char *env(const char *name)
{
	const char *v = std::getenv(name);
	return v && *v ? v : nullptr;
}

inline bool kmod_required()
{
	const char *v = env("KVBLK_TEST_KMOD");
	return v && std::string(v) == "1";
}

inline bool kmod_loaded()
{
	return access("/dev/kvblk", F_OK) == 0;
}

/* KVBLK_IOC_GET_FEATURES of the loaded kvblk.ko; 0 without it. */
inline uint64_t module_features()
{
	__u64 f = 0;
	const int fd = open("/dev/kvblk", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		if (ioctl(fd, KVBLK_IOC_GET_FEATURES, &f) != 0)
			f = 0;
		close(fd);
	}
	return f;
}

/* What kvblk.ko must give unless the test says otherwise; skips (or fails) the test. */
#define REQUIRE_KMOD()                                                                            \
	do {                                                                                      \
		if (!kmod_loaded()) {                                                             \
			if (kmod_required())                                                      \
				FAIL() << "KVBLK_TEST_KMOD=1 but /dev/kvblk is missing";          \
			GTEST_SKIP() << "kvblk.ko is not loaded (/dev/kvblk missing)";            \
		}                                                                                 \
	} while (0)

#define REQUIRE_DEVICE()                                                                          \
	do {                                                                                      \
		if (!env("KVBLK_TEST_DEVICE"))                                                    \
			GTEST_SKIP() << "KVBLK_TEST_DEVICE is not set (an NVMe namespace; the VM "  \
					"case tests/vm/cases/libkvblk-device.sh sets it)";        \
	} while (0)

inline bool says(const std::string &part)
{
	return std::string(kvblk_last_error()).find(part) != std::string::npos;
}

inline int try_open(const std::string &path, const kvblk_open_opts &o)
{
	kvblk_dev *d = nullptr;
	const int rc = kvblk_open(path.c_str(), &o, &d);
	kvblk_close(d);
	return rc;
}

/* O_DIRECT pread(2) of [off, off + len) of @path: the reference every load is held to. */
class Reference {
public:
	explicit Reference(const std::string &path)
	{
		fd_ = open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (fd_ < 0)
			throw std::runtime_error(path + ": " + std::strerror(errno));
	}
	~Reference() { close(fd_); }
	Reference(const Reference &) = delete;
	Reference &operator=(const Reference &) = delete;

	/* True when @got equals what pread(2) reads at @off. */
	::testing::AssertionResult same(const uint8_t *got, uint64_t off, uint64_t len)
	{
		if (!buf_ || buf_->size() < len)
			buf_ = std::make_unique<AlignedBuf>(len, 0);
		uint8_t *want = buf_->data();
		uint64_t done = 0;
		while (done < len) {
			const ssize_t n = pread(fd_, want + done, len - done, off_t(off + done));
			if (n <= 0)
				return ::testing::AssertionFailure() << "pread at " << off + done << ": "
								     << (n < 0 ? std::strerror(errno) : "EOF");
			done += uint64_t(n);
		}
		if (std::memcmp(got, want, len) != 0) {
			uint64_t i = 0;
			while (got[i] == want[i])
				i++;
			return ::testing::AssertionFailure() << "differs from pread at device offset " << off + i;
		}
		return ::testing::AssertionSuccess();
	}

private:
	int fd_ = -1;
	std::unique_ptr<AlignedBuf> buf_;
};

/* In the VM the namespace holds the pattern of tests/vm/pattern.h: check it too. */
inline ::testing::AssertionResult pattern_ok(const uint8_t *got, uint64_t dev_off, uint64_t len)
{
	if (!env("KVBLK_VM_PATTERN_XOR"))
		return ::testing::AssertionSuccess();
	const long bad = kvblk_pattern_check(got, dev_off, len);
	if (bad < 0)
		return ::testing::AssertionSuccess();
	return ::testing::AssertionFailure() << "pattern differs at device offset " << dev_off + uint64_t(bad);
}

} // namespace kvblk_test

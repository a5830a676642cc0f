// SPDX-License-Identifier: MIT
// Helpers of the libkvblk unit tests: temp dirs on the local disk, pattern stores, aligned
// buffers, RAII guards for the environment and the fault-injection seams.
#pragma once

#include <kvblk/kvblk.h>

#include "libkvblk/testing.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <linux/capability.h>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <cstdio>
#include <unistd.h>
#include <vector>

namespace kvblk_test {

inline constexpr uint64_t KiB = 1024;
inline constexpr uint64_t MiB = 1024 * 1024;

/* The 64-bit word at byte @offset (multiple of 8) of object @object. */
inline uint64_t pattern_word(uint64_t object, uint64_t offset)
{
	uint64_t z = object * 0x9E3779B97F4A7C15ull + offset + 0x632BE59BD9B4E019ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Expected bytes of a store of @object_bytes objects at [abs_offset, abs_offset + len). */
inline void fill_pattern(uint8_t *dst, uint64_t abs_offset, uint64_t len, uint64_t object_bytes)
{
	for (uint64_t i = 0; i < len; i += 8) {
		const uint64_t a = abs_offset + i;
		const uint64_t w = pattern_word(a / object_bytes, a % object_bytes);
		std::memcpy(dst + i, &w, std::min<uint64_t>(8, len - i)); /* a last partial word: no further */
	}
}

inline std::vector<uint8_t> expected_bytes(uint64_t abs_offset, uint64_t len, uint64_t object_bytes)
{
	std::vector<uint8_t> v(len);
	fill_pattern(v.data(), abs_offset, len, object_bytes);
	return v;
}

/* A fresh directory under $TMPDIR (else /var/tmp, the local disk), removed with its contents. */
class TempDir {
public:
	explicit TempDir(const char *base = nullptr)
	{
		if (!base)
			base = std::getenv("TMPDIR");
		if (!base || !*base)
			base = "/var/tmp";
		std::string tmpl = std::string(base) + "/kvblk-unit-XXXXXX";
		if (!mkdtemp(tmpl.data()))
			throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
		path_ = tmpl;
	}
	~TempDir()
	{
		std::error_code ec;
		std::filesystem::remove_all(path_, ec);
	}
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;

	[[nodiscard]] const std::string &path() const { return path_; }
	[[nodiscard]] std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
	std::string path_;
};

/* Write a store of @objects objects of @object_bytes with the pattern to @path. */
inline void write_pattern_file(const std::string &path, uint64_t objects, uint64_t object_bytes)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
	const uint64_t total = objects * object_bytes;
	std::vector<uint8_t> chunk(std::min<uint64_t>(total, 4 * MiB));
	for (uint64_t off = 0; off < total; off += chunk.size()) {
		const uint64_t n = std::min<uint64_t>(chunk.size(), total - off);
		fill_pattern(chunk.data(), off, n, object_bytes);
		ASSERT_EQ(pwrite(fd, chunk.data(), n, off_t(off)), ssize_t(n));
	}
	ASSERT_EQ(fsync(fd), 0);
	close(fd);
}

/* Memory aligned to 4096, filled with a sentinel byte. */
class AlignedBuf {
public:
	explicit AlignedBuf(uint64_t len, uint8_t sentinel = 0xA5) : len_(len)
	{
		void *p = nullptr;
		if (posix_memalign(&p, 4096, len ? len : 4096))
			throw std::bad_alloc();
		p_.reset(static_cast<uint8_t *>(p));
		std::memset(p_.get(), sentinel, len);
	}
	[[nodiscard]] uint8_t *data() const { return p_.get(); }
	[[nodiscard]] uint64_t size() const { return len_; }
	[[nodiscard]] uint64_t addr(uint64_t off = 0) const { return uint64_t(uintptr_t(p_.get() + off)); }
	/* All of [off, off+len) equal @b. */
	[[nodiscard]] bool all(uint64_t off, uint64_t len, uint8_t b) const
	{
		for (uint64_t i = 0; i < len; i++)
			if (p_.get()[off + i] != b)
				return false;
		return true;
	}

private:
	struct Free {
		void operator()(uint8_t *p) const { std::free(p); }
	};
	std::unique_ptr<uint8_t, Free> p_;
	uint64_t len_;
};

/* Sets (or unsets, with nullptr) an environment variable for its lifetime. */
class EnvGuard {
public:
	EnvGuard(const char *name, const char *value) : name_(name)
	{
		if (const char *old = std::getenv(name))
			old_ = old;
		if (value)
			setenv(name, value, 1);
		else
			unsetenv(name);
	}
	~EnvGuard()
	{
		if (old_)
			setenv(name_.c_str(), old_->c_str(), 1);
		else
			unsetenv(name_.c_str());
	}

private:
	std::string name_;
	std::optional<std::string> old_;
};

/* Installs fault-injection seams for its lifetime. */
class SeamGuard {
public:
	explicit SeamGuard(const kvblk::testing::Seams &s) : seams_(s) { kvblk::testing::install(&seams_); }
	~SeamGuard() { kvblk::testing::install(nullptr); }

private:
	kvblk::testing::Seams seams_;
};

struct DevCloser {
	void operator()(kvblk_dev *d) const { kvblk_close(d); }
};
using DevPtr = std::unique_ptr<kvblk_dev, DevCloser>;

inline kvblk_open_opts make_opts(kvblk_backend backend, uint32_t workers = 0, uint32_t queue_depth = 0,
				 uint64_t max_cmd_bytes = 0, uint32_t flags = 0)
{
	kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	o.backend = backend;
	o.workers = workers;
	o.queue_depth = queue_depth;
	o.max_cmd_bytes = max_cmd_bytes;
	o.flags = flags;
	return o;
}

/* Open or fail the test. */
inline DevPtr open_dev(const std::string &path, const kvblk_open_opts &o)
{
	kvblk_dev *d = nullptr;
	int rc = kvblk_open(path.c_str(), &o, &d);
	EXPECT_EQ(rc, 0) << "kvblk_open(" << path << "): " << kvblk_last_error();
	return DevPtr(d);
}

inline kvblk_dev_info get_info(kvblk_dev *d)
{
	kvblk_dev_info i{};
	i.info_size = sizeof(i);
	EXPECT_EQ(kvblk_get_info(d, &i), 0);
	return i;
}

inline kvblk_stats get_stats(kvblk_dev *d)
{
	kvblk_stats s{};
	s.stats_size = sizeof(s);
	EXPECT_EQ(kvblk_get_stats(d, &s), 0);
	return s;
}

inline kvblk_batch_info new_batch_info()
{
	kvblk_batch_info b{};
	b.info_size = sizeof(b);
	return b;
}

inline uint64_t hist_sum(const uint64_t (&h)[KVBLK_LAT_BUCKETS])
{
	return std::accumulate(std::begin(h), std::end(h), uint64_t(0));
}

inline kvblk_desc plain_desc(uint64_t offset, uint64_t length, const void *mem, uint64_t tag)
{
	return kvblk_desc{offset, length, uint64_t(uintptr_t(mem)), KVBLK_BUF_NONE, 0, tag};
}

/* A plain descriptor naming target @target (kvblk_add_target()'s id; 0: the device's own). */
inline kvblk_desc tdesc(uint32_t target, uint64_t offset, uint64_t length, const void *mem, uint64_t tag)
{
	kvblk_desc d = plain_desc(offset, length, mem, tag);
	d.target = target;
	return d;
}

/* Writes file @path of @bytes whose content is object @index of the pattern (a chunk file). */
inline void write_chunk(const std::string &path, uint64_t index, uint64_t bytes)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT_GE(fd, 0) << path;
	const std::vector<uint8_t> v = expected_bytes(index * bytes, bytes, bytes);
	ASSERT_EQ(pwrite(fd, v.data(), bytes, 0), ssize_t(bytes));
	close(fd);
}

inline kvblk_desc buf_desc(uint64_t offset, uint64_t length, uint32_t buf, uint64_t buf_off, uint64_t tag)
{
	return kvblk_desc{offset, length, buf_off, buf, 0, tag};
}

/* Commands a backend issues for an object when nothing is injected. */
inline uint64_t commands_for(kvblk_backend b, uint64_t length, uint64_t max_cmd)
{
	return b == KVBLK_BACKEND_THREADPOOL ? 1 : (length + max_cmd - 1) / max_cmd;
}

/*
 * A backend configuration the data-path tests run against.
 */
struct BackendCase {
	const char *name;
	kvblk_backend backend;
	uint32_t workers;
	uint32_t queue_depth;
};

inline const BackendCase kAllBackends[] = {
	{"psync", KVBLK_BACKEND_PSYNC, 0, 0},
	{"threadpool4", KVBLK_BACKEND_THREADPOOL, 4, 0},
	{"uring1", KVBLK_BACKEND_URING, 1, 64},
	{"uring4", KVBLK_BACKEND_URING, 4, 16},
};

inline std::string case_name(const ::testing::TestParamInfo<BackendCase> &i)
{
	return i.param.name;
}

/*
 * Fixture base: a pattern store of kObjects x kObjectBytes in a fresh temp dir.
 */
class StoreTest : public ::testing::Test {
protected:
	static constexpr uint64_t kObjects = 16;
	static constexpr uint64_t kObjectBytes = 1 * MiB;

	void SetUp() override
	{
		dir_ = std::make_unique<TempDir>();
		path_ = dir_->file("store");
		write_pattern_file(path_, kObjects, kObjectBytes);
	}

	std::unique_ptr<TempDir> dir_;
	std::string path_;
};

/* Drop capability @cap from this process (raw capget/capset; run it in a child). "" or why not. */
inline std::string drop_capability(unsigned cap)
{
	__user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct data[2]{};
	if (syscall(SYS_capget, &hdr, data) != 0)
		return std::string("capget: ") + std::strerror(errno);
	const unsigned word = cap / 32, bit = 1u << (cap % 32);
	data[word].effective &= ~bit;
	data[word].permitted &= ~bit;
	data[word].inheritable &= ~bit;
	if (syscall(SYS_capset, &hdr, data) != 0)
		return std::string("capset: ") + std::strerror(errno);
	if (syscall(SYS_capget, &hdr, data) != 0 || (data[word].effective & bit))
		return "capability " + std::to_string(cap) + " is still effective";
	return "";
}

/* This process's fds whose /proc/self/fd link reads @link ("anon_inode:[io_uring]", a path). */
inline std::vector<int> fds_linking_to(const std::string &link)
{
	std::vector<int> out;
	for (const auto &e : std::filesystem::directory_iterator("/proc/self/fd")) {
		std::error_code ec;
		const std::filesystem::path target = std::filesystem::read_symlink(e.path(), ec);
		if (!ec && target.string() == link)
			out.push_back(std::atoi(e.path().filename().c_str()));
	}
	std::sort(out.begin(), out.end());
	return out;
}

/* The "flags:" line of /proc/self/fdinfo/@fd (the open file's f_flags, octal); -1 if none. */
inline long fdinfo_flags(int fd)
{
	FILE *f = std::fopen(("/proc/self/fdinfo/" + std::to_string(fd)).c_str(), "re");
	if (!f)
		return -1;
	char line[256];
	long flags = -1;
	while (std::fgets(line, sizeof(line), f))
		if (std::sscanf(line, "flags: %lo", &flags) == 1)
			break;
	std::fclose(f);
	return flags;
}

} // namespace kvblk_test

namespace kvblk_test {

/*
 * What a forked child reports back: @skip with a reason, or values and a message.
 * Children are for tests that change process-wide state (capabilities, rlimits, mounts).
 */
struct ChildReport {
	int delivered = 0;	/* set by run_in_child() when the report arrived */
	int skip = 0;
	int64_t v[8] = {};
	char msg[512] = "";

	void say(const std::string &s) { std::snprintf(msg, sizeof(msg), "%s", s.c_str()); }
};

/* Run @fn(report) in a forked child and return its report. */
template <class F> ChildReport run_in_child(F fn)
{
	int p[2];
	if (pipe(p) != 0)
		throw std::runtime_error("pipe");
	const pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		ChildReport rep;
		fn(rep);
		const char *b = reinterpret_cast<const char *>(&rep);
		size_t off = 0;
		while (off < sizeof(rep)) {
			ssize_t n = write(p[1], b + off, sizeof(rep) - off);
			if (n <= 0)
				break;
			off += size_t(n);
		}
		_exit(0);
	}
	close(p[1]);
	ChildReport rep;
	char *b = reinterpret_cast<char *>(&rep);
	size_t off = 0;
	while (off < sizeof(rep)) {
		ssize_t n = read(p[0], b + off, sizeof(rep) - off);
		if (n <= 0)
			break;
		off += size_t(n);
	}
	close(p[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	rep.delivered = off == sizeof(rep) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	return rep;
}

} // namespace kvblk_test

// SPDX-License-Identifier: MIT
#include "sysfs.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fcntl.h>
#include <regex>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace kvblkctl {

static std::string env_or(const char *name, const char *def)
{
	const char *v = std::getenv(name);
	return v && *v ? std::string(v) : std::string(def);
}

std::string sysfs_root() { return env_or("KVBLK_SYSFS_ROOT", "/sys"); }
std::string dev_root() { return env_or("KVBLK_DEV_ROOT", "/dev"); }
std::string kvblk_dir() { return sysfs_root() + "/kernel/kvblk"; }
std::string module_dir() { return sysfs_root() + "/module/kvblk"; }

bool path_exists(const std::string &path)
{
	struct stat st;
	return ::stat(path.c_str(), &st) == 0;
}

bool is_dir(const std::string &path)
{
	struct stat st;
	return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int read_text(const std::string &path, std::string &out)
{
	int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	out.clear();
	char buf[4096];
	for (;;) {
		ssize_t n = ::read(fd, buf, sizeof(buf));
		if (n < 0) {
			int err = errno;
			::close(fd);
			return -err;
		}
		if (n == 0)
			break;
		out.append(buf, static_cast<std::size_t>(n));
	}
	::close(fd);
	return 0;
}

static bool parse_u64(const std::string &s, std::uint64_t &out)
{
	std::size_t i = 0, n = s.size();
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		n--;
	if (i == n)
		return false;
	std::uint64_t v = 0;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		std::uint64_t d = static_cast<std::uint64_t>(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	out = v;
	return true;
}

int read_u64(const std::string &path, std::uint64_t &out)
{
	std::string s;
	int ret = read_text(path, s);
	if (ret)
		return ret;
	return parse_u64(s, out) ? 0 : -EINVAL;
}

int write_text(const std::string &path, const std::string &text)
{
	/* O_TRUNC is ignored by sysfs and needed by a fake tree's plain files. */
	int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = ::write(fd, text.data(), text.size());
	int err = n < 0 ? errno : 0;
	if (::close(fd) && !err)
		err = errno;
	if (err)
		return -err;
	return static_cast<std::size_t>(n) == text.size() ? 0 : -EIO;
}

std::vector<std::string> list_dirs(const std::string &path)
{
	std::vector<std::string> out;
	std::error_code ec;
	for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
		if (is_dir(it->path().string()))
			out.push_back(it->path().filename().string());
	}
	std::sort(out.begin(), out.end());
	return out;
}

int read_hist(const std::string &path, std::vector<HistBucket> &out)
{
	std::string s;
	int ret = read_text(path, s);
	if (ret)
		return ret;
	out.clear();
	std::istringstream in(s);
	std::string line;
	while (std::getline(in, line)) {
		if (line.empty())
			continue;
		auto sp = line.find(' ');
		HistBucket b;
		if (sp == std::string::npos || !parse_u64(line.substr(0, sp), b.lower_us) ||
		    !parse_u64(line.substr(sp + 1), b.count))
			return -EINVAL;
		out.push_back(b);
	}
	return 0;
}

std::string disk_name(const std::string &device)
{
	std::string base = device;
	auto slash = base.rfind('/');
	if (slash != std::string::npos)
		base = base.substr(slash + 1);
	static const std::regex part("^(nvme[0-9]+n[0-9]+)p[0-9]+$");
	std::smatch m;
	if (std::regex_match(base, m, part))
		return m[1].str();
	return base;
}

} // namespace kvblkctl

// SPDX-License-Identifier: MIT
/*
 * sysfs.hpp - reading and writing kvblk.ko's files.
 *
 * Every path is built from a root: $KVBLK_SYSFS_ROOT (default "/sys") for
 * /sys/kernel/kvblk and /sys/module/kvblk, $KVBLK_DEV_ROOT (default "/dev")
 * for device nodes. Tests point them at a fake tree.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvblkctl {

/** $KVBLK_SYSFS_ROOT or "/sys". */
std::string sysfs_root();
/** $KVBLK_DEV_ROOT or "/dev". */
std::string dev_root();
/** <sysfs>/kernel/kvblk: one directory per attached namespace. */
std::string kvblk_dir();
/** <sysfs>/module/kvblk: present while the module is loaded. */
std::string module_dir();

bool path_exists(const std::string &path);
bool is_dir(const std::string &path);

/**
 * read_text() - whole content of a (small) file.
 * Return: 0 and @out filled, or -errno of open/read.
 */
int read_text(const std::string &path, std::string &out);

/**
 * read_u64() - one unsigned decimal value (a trailing newline allowed).
 * Return: 0, -errno of open/read, or -EINVAL if the content is not a number.
 */
int read_u64(const std::string &path, std::uint64_t &out);

/**
 * write_text() - write @text to an existing file (sysfs store).
 * Return: 0, or -errno of open/write (a sysfs store's refusal, e.g. -EINVAL).
 */
int write_text(const std::string &path, const std::string &text);

/** Names of the subdirectories of @path, sorted; empty if it is missing. */
std::vector<std::string> list_dirs(const std::string &path);

/** One histogram line "<lower bound us> <count>". */
struct HistBucket {
	std::uint64_t lower_us;
	std::uint64_t count;
};

/**
 * read_hist() - a kvblk latency histogram file.
 * Return: 0, -errno of read, or -EINVAL for a malformed line.
 */
int read_hist(const std::string &path, std::vector<HistBucket> &out);

/**
 * disk_name() - the name of a namespace's directory for a user's DEVICE
 * argument: "/dev/nvme0n1" and "nvme0n1" give "nvme0n1"; a partition
 * "nvme0n1p2" gives its whole disk "nvme0n1".
 */
std::string disk_name(const std::string &device);

} // namespace kvblkctl

// SPDX-License-Identifier: MIT
// Small readers of sysfs attribute files, shared by target detection and the backends.
#pragma once

#include <cstdint>
#include <string>

namespace kvblk::detail {

/* First line of a small sysfs file without its newline, or "" when it cannot be read. */
std::string read_sysfs(const std::string &file);

/* A sysfs file holding one unsigned decimal number; 0 when unreadable or not a number. */
uint64_t read_sysfs_u64(const std::string &file);

} // namespace kvblk::detail

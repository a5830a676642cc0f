// SPDX-License-Identifier: MIT
// What the process's mappings say about a registered range (/proc/self/maps): whether every
// byte of it is mapped and writable. Registration checks it so that read-only memory or a
// range with a hole fails with -EFAULT and says so, on every backend, instead of becoming a
// buffer that fails each load (or an io_uring refusal that looks like RLIMIT_MEMLOCK).
#pragma once

#include <cstdint>
#include <string>

namespace kvblk::detail {

/*
 * 0 when [@addr, @addr + @len) is covered by mappings that are all writable; -EFAULT with
 * *why ("bytes 0x.. to 0x.. are not mapped", "0x..-0x.. is mapped r--p (not writable)")
 * otherwise. 0 as well when /proc/self/maps cannot be read (nothing can be said).
 */
int check_writable_range(const void *addr, uint64_t len, std::string *why);

} // namespace kvblk::detail

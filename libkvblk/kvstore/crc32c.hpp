// SPDX-License-Identifier: MIT
// CRC32C of the store: objects, records, commits, checkpoints, superblocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvblk::kvstore {

/* The CRC32C of @len bytes at @buf, continuing @crc (0 to start). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len) noexcept;

} // namespace kvblk::kvstore

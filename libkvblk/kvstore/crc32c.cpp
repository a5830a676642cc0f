// SPDX-License-Identifier: MIT
// CRC32C (Castagnoli) through ISA-L's crc32_iscsi(), which uses the CPU's crc32 and carry-less
// multiply instructions where the CPU has them (it picks at run time). crc32_iscsi() takes and
// returns the raw register: the standard CRC32C is crc32_iscsi(buf, len, ~crc) inverted.
#include "crc32c.hpp"

#include <kvblk/kvstore.h>

#include <climits>
#include <isa-l/crc.h>

namespace kvblk::kvstore {

uint32_t crc32c(uint32_t crc, const void *buf, size_t len) noexcept
{
	auto *p = static_cast<unsigned char *>(const_cast<void *>(buf));
	uint32_t reg = ~crc;
	while (len) {
		/* crc32_iscsi() takes an int length: at most 1 GiB a call. */
		const size_t n = len > (1u << 30) ? (1u << 30) : len;
		reg = crc32_iscsi(p, int(n), reg);
		p += n;
		len -= n;
	}
	return ~reg;
}

} // namespace kvblk::kvstore

extern "C" uint32_t kvblk_kvstore_crc32c(uint32_t crc, const void *buf, size_t len) noexcept
{
	if (!buf)
		return crc;
	return kvblk::kvstore::crc32c(crc, buf, len);
}

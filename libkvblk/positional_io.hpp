// SPDX-License-Identifier: MIT
// One object moved by pread(2)/pwrite(2) commands: the loop shared by psync and threadpool.
#pragma once

#include "backend.hpp"
#include "testing.hpp"

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace kvblk::detail {

/**
 * struct PositionalIo - how to move objects with pread/pwrite (each on its own IoObject.fd).
 * @dir:            read or write.
 * @backend:        who is calling (for the test seam).
 * @cmd_bytes:      largest command (psync: max_cmd_bytes; threadpool: the whole object).
 * @eagain_retries: resubmissions after -EAGAIN before the object fails with -EAGAIN.
 * @seams:          test seams snapshot (nullptr in production).
 * @inflight:       commands in flight now across threads; @peak the most seen.
 */
struct PositionalIo {
	IoDir dir;
	kvblk_backend backend;
	uint64_t cmd_bytes;
	uint32_t eagain_retries;
	const testing::Seams *seams;
	std::atomic<uint64_t> *inflight;
	std::atomic<uint64_t> *peak;
};

/*
 * Move object @index (@obj) in commands of at most cmd_bytes, resubmitting the rest of
 * short transfers and -EAGAIN (bounded). Returns 0 or the object's -errno: the command's
 * error, -EAGAIN after every retry, -ENODATA when a command made no progress (unless it met
 * the end of the file with obj.min_length bytes in: then 0, see IoObject); with -ENODATA,
 * *valid = the bytes from the object's start that were moved (commands run in order).
 */
int32_t move_object(const PositionalIo &pio, const IoObject &obj, uint32_t index, BatchCounters *c,
		    uint64_t *valid) noexcept;

/* kvblk_result.bytes of an object that ended with @st: its length, the valid prefix, or 0. */
inline uint64_t result_bytes(const IoObject &obj, int32_t st, uint64_t valid) noexcept
{
	return st == 0 ? obj.length : st == -ENODATA ? valid : 0;
}

} // namespace kvblk::detail

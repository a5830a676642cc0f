// SPDX-License-Identifier: MIT
// One object moved by pread(2)/pwrite(2) commands: the loop shared by psync and threadpool.
#pragma once

#include "backend.hpp"
#include "testing.hpp"

#include <atomic>
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
 * the end of the file with obj.min_length bytes in: then 0, see IoObject).
 */
int32_t move_object(const PositionalIo &pio, const IoObject &obj, uint32_t index, BatchCounters *c) noexcept;

} // namespace kvblk::detail

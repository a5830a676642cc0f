// SPDX-License-Identifier: MIT
#include "positional_io.hpp"

#include <algorithm>
#include <cerrno>
#include <unistd.h>

namespace kvblk::detail {
namespace {

void note_inflight(const PositionalIo &pio)
{
	uint64_t now = pio.inflight->fetch_add(1, std::memory_order_relaxed) + 1;
	uint64_t peak = pio.peak->load(std::memory_order_relaxed);
	while (now > peak && !pio.peak->compare_exchange_weak(peak, now, std::memory_order_relaxed))
		;
}

/* One pread/pwrite; bytes or -errno. */
int64_t issue(const PositionalIo &pio, int fd, uint8_t *mem, uint64_t len, uint64_t offset)
{
	note_inflight(pio);
	ssize_t r = pio.dir == IoDir::read ? pread(fd, mem, len, off_t(offset))
					   : pwrite(fd, mem, len, off_t(offset));
	int64_t res = r < 0 ? -int64_t(errno) : int64_t(r);
	pio.inflight->fetch_sub(1, std::memory_order_relaxed);
	return res;
}

} // namespace

int32_t move_object(const PositionalIo &pio, const IoObject &obj, uint32_t index, BatchCounters *c,
		    uint64_t *valid) noexcept
{
	*valid = 0;
	testing::CommandInfo info{pio.backend, pio.dir == IoDir::write, index, 0, 0, 0, 0, obj.offset};

	for (uint64_t cmd_off = 0; cmd_off < obj.length;) {
		const uint64_t cmd_len = std::min(pio.cmd_bytes, obj.length - cmd_off);
		uint64_t done = 0;
		uint32_t attempt = 0, eagains = 0;
		while (done < cmd_len) {
			c->commands++;
			int64_t res = issue(pio, obj.fd, obj.mem + cmd_off + done, cmd_len - done,
					    obj.offset + cmd_off + done);
			if (pio.seams) {
				info.cmd_offset = cmd_off;
				info.cmd_length = cmd_len;
				info.done = done;
				info.attempt = attempt;
				res = testing::filter_completion(pio.seams, info, res);
			}
			attempt++;
			if (res == -EINTR)
				continue;
			if (res == -EAGAIN) {
				if (eagains == pio.eagain_retries)
					return -EAGAIN;
				eagains++;
				c->eagain_retries++;
				continue;
			}
			if (res < 0)
				return int32_t(res);
			done += uint64_t(res);
			if (done < cmd_len && eof_is_complete(obj, cmd_off + done))
				return 0; /* the end of the file, with every byte wanted in */
			if (res == 0) {
				*valid = cmd_off + done; /* the file ended there: all before is in */
				return -ENODATA;
			}
			if (done < cmd_len)
				c->short_resubmits++;
		}
		cmd_off += cmd_len;
	}
	return 0;
}

} // namespace kvblk::detail

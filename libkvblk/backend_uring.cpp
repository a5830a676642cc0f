// SPDX-License-Identifier: MIT
// uring: io_uring reads and writes on the target (O_DIRECT unless buffered), through the
// shared ring core (uring_core.hpp): `workers` rings, one thread each, every command of
// every started batch in flight together up to queue_depth per ring, objects split into
// commands of max_cmd_bytes.
//
// Registered files: every ring has a sparse table of kFixedFiles file slots; target id's fd
// is in slot id from its kvblk_open()/kvblk_add_target() to its removal, and its commands
// name the slot (IOSQE_FIXED_FILE), as fio's registerfiles=1 does.
//
// Fixed buffers: every ring has a sparse table of kMaxBuffers fixed-buffer slots, created at
// open. kvblk_register_buffer() registers the buffer in slot == buffer id of every ring at
// once (not lazily), so the first load into it already skips per-I/O page pinning and a
// refusal (RLIMIT_MEMLOCK) is reported by the registration call itself. A refused buffer is
// served by plain reads/writes and counted once in stats.memlock_fallbacks.
//
// What is this backend's own: an SQE is a plain (or fixed-buffer) read or write of the rest
// of a command on its object's fd (IoObject.fd, so one batch spans any number of targets),
// and a CQE's res is the byte count or -errno.
#include "backend.hpp"
#include "last_error.hpp"
#include "testing.hpp"
#include "uring_core.hpp"

#include <cerrno>
#include <liburing.h>

namespace kvblk::detail {
namespace {

class UringBackend final : public UringCore {
public:
	explicit UringBackend(const BackendConfig &cfg) : cfg_(cfg) {}

	~UringBackend() override { stop_rings(); }

	int start()
	{
		const testing::Seams *s = testing::active();
		RingSetup rs;
		rs.kind = KVBLK_BACKEND_URING;
		rs.fd = cfg_.fd;
		rs.rings = cfg_.workers;
		rs.queue_depth = cfg_.queue_depth;
		rs.overcommit = s ? s->uring_overcommit : 0;
		rs.max_cmd_bytes = cfg_.max_cmd_bytes;
		rs.eagain_retries = cfg_.eagain_retries;
		rs.fixed_buffers = true;
		rs.fixed_files = true;
		const int ret = create_rings(rs);
		if (ret == -ENOSYS || ret == -EPERM)
			return fail(-ENOSYS,
				    "io_uring is not available: io_uring_setup failed with %s "
				    "(see the sysctl kernel.io_uring_disabled); use the threadpool or psync backend",
				    errno_text(ret).c_str());
		if (ret < 0)
			return fail(ret, "io_uring_queue_init(%u entries): %s", cfg_.queue_depth,
				    errno_text(ret).c_str());
		set_fixed_file(0, cfg_.fd);
		return start_threads();
	}

	kvblk_backend kind() const noexcept override { return KVBLK_BACKEND_URING; }

	/* A target's commands name its registered file (RingSetup.fixed_files). */
	int add_target(uint32_t id, BackendConfig &t) noexcept override
	{
		set_fixed_file(id, t.fd);
		return 0;
	}

	void remove_target(uint32_t id) noexcept override { set_fixed_file(id, -1); }

private:
	void prep(io_uring_sqe *sqe, const RingCmd &c, const IoObject &o, IoDir dir, bool fixed) noexcept override
	{
		uint8_t *mem = o.mem + c.cmd_off + c.done;
		const uint64_t off = o.offset + c.cmd_off + c.done;
		const unsigned len = unsigned(c.len - c.done);
		const int fd = o.fd; /* the object's own target: one batch spans any number */
		if (dir == IoDir::read) {
			if (fixed)
				io_uring_prep_read_fixed(sqe, fd, mem, len, off, o.fixed_index);
			else
				io_uring_prep_read(sqe, fd, mem, len, off);
		} else {
			if (fixed)
				io_uring_prep_write_fixed(sqe, fd, mem, len, off, o.fixed_index);
			else
				io_uring_prep_write(sqe, fd, mem, len, off);
		}
	}

	int64_t result(const io_uring_cqe *cqe, const RingCmd &c, const IoObject &o, IoDir dir,
		       const testing::Seams *seams) noexcept override
	{
		if (!seams)
			return cqe->res;
		const testing::CommandInfo info{KVBLK_BACKEND_URING, dir == IoDir::write, c.obj, c.cmd_off,
						c.len, c.done, c.attempt, o.offset};
		return testing::filter_completion(seams, info, cqe->res);
	}

	BackendConfig cfg_;
};

} // namespace

std::unique_ptr<Backend> make_uring_backend(const BackendConfig &cfg, int *err)
{
	auto b = std::make_unique<UringBackend>(cfg);
	*err = b->start();
	if (*err)
		return nullptr;
	return b;
}

} // namespace kvblk::detail

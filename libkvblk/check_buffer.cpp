// SPDX-License-Identifier: MIT
// kvblk_check_buffer(): whether a registered host buffer still maps the pages the kernel
// pinned for it. Loads into an io_uring fixed buffer go to the pages pinned at registration;
// a program that replaced the mapping (munmap + mmap, MADV_DONTNEED, ...) no longer sees
// them. The probe: a token is written through the CPU into 8 bytes of every page of the
// range (the current mapping), then an 8-byte io_uring WRITE_FIXED per page copies those
// bytes from the pinned pages into a memfd; a page whose token does not come back is not
// the one mapped. The 8 bytes are restored. Buffers without pinned pages (psync, threadpool,
// uring_cmd, a fallback) read into whatever is mapped, so only the mapping is checked.
// kvblk.ko compares the pages it pinned itself (KVBLK_IOC_CHECK_BUFFER, Backend::check_buffer());
// a kmod device's stores go through an io_uring writer whose fixed buffer is probed as above.
// The probe writes are a batch of the device's scheduler (a synchronous job, as a
// kvblk_load_many() is), never a call of the backend beside it: a backend that serves batches
// one at a time (the kmod lanes' per-lane scratch, psync, threadpool) gets it in its turn.
#include "device.hpp"
#include "last_error.hpp"
#include "mapping.hpp"

#include <kvblk/kvblk.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace kvblk::detail;

namespace {

using ull = unsigned long long;

/* Mark @id stale (if still live) and fail with @err. */
int stale(kvblk_dev *dev, uint32_t id, int err, const std::string &why)
{
	{
		auto g = dev->buffers.lock();
		if (dev->buffers.find_locked(id))
			dev->buffers.mark_stale_locked(id);
	}
	return fail(err, "kvblk_check_buffer: buffer %u: %s; loads naming it fail with -ESTALE until it is "
			 "unregistered and registered again", id, why.c_str());
}

/* The probe of a fixed buffer: 0, -ESTALE (with *bad the first page replaced), or -errno. */
int probe_pinned(kvblk_dev *dev, const RegisteredBuffer &b, uint64_t *bad)
{
	const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
	const uint64_t base = uint64_t(uintptr_t(b.base));
	/* One 8-byte slot per page the range touches (clipped to the range). */
	std::vector<uint8_t *> at;
	for (uint64_t p = base & ~(page - 1); p < base + b.len; p += page) {
		uint64_t a = std::max(p, base);
		if (a + 8 > base + b.len)
			a = base + b.len >= 8 ? base + b.len - 8 : base;
		at.push_back(reinterpret_cast<uint8_t *>(uintptr_t(a)));
	}
	if (b.len < 8)
		return 0; /* nothing to probe with: too small to tell */
	const int mfd = memfd_create("kvblk-check", MFD_CLOEXEC);
	if (mfd < 0)
		return fail(-errno, "kvblk_check_buffer: memfd_create: %s", errno_text(errno).c_str());
	struct Fd {
		int fd;
		~Fd() { close(fd); }
	} mfd_guard{mfd};
	const size_t n = at.size();
	std::vector<uint64_t> saved(n), token(n), back(n);
	std::vector<kvblk_result> res(n);
	auto job = std::make_unique<Job>(dev->buffers, dev->targets); /* pins nothing: the caller pinned @b */
	job->objects.resize(n);
	job->dir = IoDir::write;
	job->internal = true;
	job->results = res.data();
	job->backend = dev->backend->kind_for(IoDir::write);
	std::mt19937_64 rng(std::random_device{}());
	const uint64_t seed = rng() | 1;
	/* The tokens go back on every way out (an exception included). */
	struct Restore {
		const std::vector<uint8_t *> &at;
		const std::vector<uint64_t> &saved;
		size_t set = 0;
		void now() noexcept
		{
			for (size_t i = 0; i < set; i++)
				std::memcpy(at[i], &saved[i], 8);
			set = 0;
		}
		~Restore() { now(); }
	} restore{at, saved};
	for (size_t i = 0; i < n; i++) {
		std::memcpy(&saved[i], at[i], 8);
		token[i] = seed ^ (uint64_t(i) * 0x9E3779B97F4A7C15ull);
		std::memcpy(at[i], &token[i], 8);
		restore.set = i + 1;
		IoObject &o = job->objects[i];
		o.offset = uint64_t(i) * 8;
		o.length = 8;
		o.mem = at[i];
		o.buf_id = KVBLK_BUF_NONE;
		o.fixed_index = b.fixed_index;
		o.buf_offset = uint64_t(at[i] - b.base);
		o.fd = mfd;
		res[i] = kvblk_result{};
	}
	Scheduler::Outcome out{};
	int ret = dev->sched->run(std::move(job), &out);
	if (!ret && out.fatal)
		ret = fail(out.fatal, "kvblk_check_buffer: the probe writes could not start: %s", out.note.c_str());
	restore.now(); /* before anything else can fail */
	for (size_t i = 0; !ret && i < n; i++)
		if (res[i].status)
			ret = fail(res[i].status, "kvblk_check_buffer: the probe write of page %zu failed: %s", i,
				   errno_text(res[i].status).c_str());
	if (!ret && pread(mfd, back.data(), n * 8, 0) != ssize_t(n * 8))
		ret = fail(-EIO, "kvblk_check_buffer: reading the probe back failed");
	if (ret)
		return ret;
	for (size_t i = 0; i < n; i++) {
		if (back[i] != token[i]) {
			*bad = uint64_t(at[i] - b.base);
			return -ESTALE;
		}
	}
	return 0;
}

int check(kvblk_dev *dev, uint32_t id)
{
	RegisteredBuffer b;
	PinSet pin;
	{
		auto g = dev->buffers.lock();
		const RegisteredBuffer *p = dev->buffers.find_locked(id);
		if (!p)
			return fail(-ENOENT, "kvblk_check_buffer: buffer id %u is not registered", id);
		if (p->kind != KVBLK_MEM_HOST)
			return fail(-EINVAL, "kvblk_check_buffer: buffer %u is not KVBLK_MEM_HOST memory", id);
		if (p->pins)
			return fail(-EBUSY, "kvblk_check_buffer: a batch that names buffer %u is outstanding", id);
		if (p->stale)
			return fail(-ESTALE, "kvblk_check_buffer: buffer %u was found stale before", id);
		b = *p;
		pin.set(id);
		dev->buffers.pin_locked(pin); /* unregistration waits (-EBUSY) until the end */
	}
	struct Unpin {
		kvblk_dev *dev;
		PinSet &pin;
		~Unpin() { dev->buffers.unpin(pin); }
	} unpin{dev, pin};

	std::string why;
	if (int ret = check_writable_range(b.base, b.len, &why))
		return stale(dev, id, ret, "the range is no longer usable: " + why);
	/* Pins of the backend's kernel side (kvblk.ko compares its own: KVBLK_IOC_CHECK_BUFFER). */
	if (int ret = dev->backend->check_buffer(id)) {
		if (ret != -ESTALE)
			return ret;
		return stale(dev, id, -ESTALE,
			     "kvblk.ko found that the range no longer maps the pages it pinned at registration "
			     "(the memory was unmapped and mapped again, or dropped with madvise)");
	}
	if (b.fixed_index < 0)
		return 0; /* no pinned pages: reads go to whatever is mapped */
	uint64_t bad = 0;
	const int ret = probe_pinned(dev, b, &bad);
	if (ret == -ESTALE) {
		char w[200];
		std::snprintf(w, sizeof(w),
			      "byte %llu (%p) is no longer backed by the page io_uring pinned at registration "
			      "(the memory was unmapped and mapped again, or dropped with madvise)",
			      ull(bad), static_cast<void *>(b.base + bad));
		return stale(dev, id, -ESTALE, w);
	}
	return ret;
}

} // namespace

extern "C" {

int kvblk_check_buffer(kvblk_dev *dev, uint32_t id) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_check_buffer") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_check_buffer: NULL dev");
	try {
		return check(dev, id);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_check_buffer: out of memory");
	}
}

} // extern "C"

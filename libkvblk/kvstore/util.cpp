// SPDX-License-Identifier: MIT
// The store's per-thread error message, clocks, aligned buffers, counters, and metadata I/O:
// whole 4 KiB blocks read and written through the store's kvblk_dev (kvblk_load_many(),
// kvblk_store_many(), kvblk_flush()), never around it.
#include "store.hpp"

#include <algorithm>
#include <cerrno>
#include <vector>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <new>
#include <pthread.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace kvblk::kvstore {
namespace {

thread_local char t_error[512];

void vset(const char *fmt, va_list ap)
{
	vsnprintf(t_error, sizeof(t_error), fmt, ap);
}

/* One metadata transfer; libkvblk splits it into commands. */
int meta_io(Store &s, const Drive &d, bool write, uint64_t offset, void *buf, uint64_t len)
{
	/* At most 1 GiB per descriptor, so that a large checkpoint stays within every limit. */
	std::vector<kvblk_desc> descs;
	std::vector<kvblk_result> res;
	for (uint64_t done = 0; done < len;) {
		const uint64_t n = std::min<uint64_t>(len - done, 1ull << 30);
		kvblk_desc x{};
		x.offset = offset + done;
		x.length = n;
		x.addr = uint64_t(uintptr_t(static_cast<uint8_t *>(buf) + done));
		x.buf_id = KVBLK_BUF_NONE;
		x.target = d.target;
		descs.push_back(x);
		done += n;
	}
	res.resize(descs.size());
	const int ret = write ? kvblk_store_many(s.dev, descs.data(), uint32_t(descs.size()), res.data(), nullptr)
			      : kvblk_load_many(s.dev, descs.data(), uint32_t(descs.size()), res.data(), nullptr);
	if (ret < 0)
		return fail(ret, "drive %u (%s): metadata %s of %llu bytes at %llu: %s", d.index, d.path.c_str(),
			    write ? "write" : "read", (unsigned long long)len, (unsigned long long)offset,
			    kvblk_last_error());
	for (const kvblk_result &r : res)
		if (r.status)
			return fail(r.status, "drive %u (%s): metadata %s of %llu bytes at %llu: %s", d.index,
				    d.path.c_str(), write ? "write" : "read", (unsigned long long)len,
				    (unsigned long long)offset, errno_name(r.status).c_str());
	return 0;
}

} // namespace

void set_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(fmt, ap);
	va_end(ap);
}

int fail(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(fmt, ap);
	va_end(ap);
	return err;
}

std::string errno_name(int err)
{
	if (err < 0)
		err = -err;
	const char *name = strerrorname_np(err);
	char buf[96];
	snprintf(buf, sizeof(buf), "%s (%s)", name ? name : "?", strerror(err));
	return buf;
}

uint64_t now_ns() noexcept
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

AlignedBuf::AlignedBuf(size_t n)
{
	const size_t rounded = (n + kBlock - 1) / kBlock * kBlock;
	void *q = nullptr;
	if (posix_memalign(&q, kBlock, rounded ? rounded : kBlock))
		throw std::bad_alloc();
	memset(q, 0, rounded ? rounded : kBlock);
	p = static_cast<uint8_t *>(q);
	len = rounded;
}

AlignedBuf::~AlignedBuf()
{
	free(p);
}

AlignedBuf &AlignedBuf::operator=(AlignedBuf &&o) noexcept
{
	if (this != &o) {
		free(p);
		p = o.p;
		len = o.len;
		o.p = nullptr;
		o.len = 0;
	}
	return *this;
}

void Counters::reset() noexcept
{
	for (auto *c : {&gets, &puts, &exists, &deletes, &hits, &misses, &checksum_failures, &get_errors,
			&put_errors, &evictions, &evictions_dropped, &bytes_read, &bytes_written, &journal_commits,
			&checkpoints, &flushes})
		c->store(0, std::memory_order_relaxed);
}

int read_meta(Store &s, const Drive &d, uint64_t offset, void *buf, uint64_t len)
{
	return meta_io(s, d, false, offset, buf, len);
}

int write_meta(Store &s, const Drive &d, uint64_t offset, const void *buf, uint64_t len)
{
	return meta_io(s, d, true, offset, const_cast<void *>(buf), len);
}

int flush_drive(Store &s, Drive &d)
{
	s.ctr->flushes.fetch_add(1, std::memory_order_relaxed);
	const int ret = kvblk_flush(s.dev, d.target, 0);
	if (ret)
		return fail(ret, "drive %u (%s): flush: %s", d.index, d.path.c_str(), kvblk_last_error());
	return 0;
}

} // namespace kvblk::kvstore

extern "C" const char *kvblk_kvstore_last_error(void) noexcept
{
	return kvblk::kvstore::t_error;
}

namespace kvblk::kvstore {

void stats_attach(Store &s)
{
	const bool publish = !(s.flags & KVBLK_KVSTORE_OPEN_RDONLY);
	if (publish) {
		s.shared_path = "/dev/shm/kvblk-kvstore-" + uuid_text(s.geo.store_uuid);
		const int fd = open(s.shared_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
		if (fd >= 0) {
			void *m = MAP_FAILED;
			if (ftruncate(fd, sizeof(SharedStats)) == 0)
				m = mmap(nullptr, sizeof(SharedStats), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			close(fd);
			if (m != MAP_FAILED) {
				s.shared = new (m) SharedStats{};
				s.shared_mapped = true;
			} else {
				unlink(s.shared_path.c_str());
			}
		}
	}
	if (!s.shared)
		s.shared = new SharedStats{};
	SharedStats &x = *s.shared;
	memcpy(x.magic, "KVBLKSTA", 8);
	x.version = kSharedStatsVersion;
	x.pid = int32_t(getpid());
	memcpy(x.uuid, s.geo.store_uuid.data(), 16);
	x.drives = uint32_t(s.drives.size());
	s.ctr = &x.ctr;
	for (auto &dp : s.drives) {
		dp->dc = &x.drive[dp->index];
		dp->dc->state.store(dp->state.load());
	}
}

void stats_detach(Store &s) noexcept
{
	if (!s.shared)
		return;
	if (s.shared_mapped) {
		munmap(s.shared, sizeof(SharedStats));
		unlink(s.shared_path.c_str());
	} else {
		delete s.shared;
	}
	s.shared = nullptr;
}

} // namespace kvblk::kvstore

namespace kvblk::kvstore {
namespace {

/*
 * The drives' lock descriptors of every store open in this process (fd + 1; 0 is empty). A child
 * made by fork(2) inherits them, and with them the flock(2) locks (they belong to the open file
 * description): the child closes its copies at once, in a pthread_atfork() handler that takes no
 * lock, so that the locks stay the parent's alone (the parent can close and open the store again
 * while the child lives, and the child can open it anew once the parent closed it).
 */
constexpr size_t kMaxLockFds = 4096;
std::atomic<int> g_lock_fds[kMaxLockFds];
std::once_flag g_atfork_once;

void close_inherited_locks() noexcept
{
	for (auto &slot : g_lock_fds) {
		const int v = slot.exchange(0, std::memory_order_relaxed);
		if (v)
			close(v - 1);
	}
}

} // namespace

void lock_fd_add(int fd) noexcept
{
	std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, close_inherited_locks); });
	for (auto &slot : g_lock_fds) {
		int empty = 0;
		if (slot.compare_exchange_strong(empty, fd + 1, std::memory_order_relaxed))
			return;
	}
	/* More than 4096 drives open at once: a fork child keeps this one's lock until it exits. */
}

void lock_fd_close(int fd) noexcept
{
	if (fd < 0)
		return;
	for (auto &slot : g_lock_fds) {
		int mine = fd + 1;
		if (slot.compare_exchange_strong(mine, 0, std::memory_order_relaxed))
			break;
	}
	close(fd);
}

} // namespace kvblk::kvstore

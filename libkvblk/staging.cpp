// SPDX-License-Identifier: MIT
#include "staging.hpp"

#include "last_error.hpp"
#include "testing.hpp"

#include <algorithm>
#include <cerrno>
#include <new>
#include <sys/mman.h>
#include <unistd.h>

namespace kvblk::detail {

Stager::Stager() : nbuf_(KVBLK_DEFAULT_STAGING_BUFFERS), buf_bytes_(KVBLK_DEFAULT_STAGING_BUFFER_BYTES) {}

Stager::~Stager()
{
	/* The device released the pool (release_pool) before its backend went away. */
	if (engine_)
		engine_->close_lanes();
}

int Stager::ensure_engine()
{
	if (engine_)
		return 0;
	const testing::Seams *s = testing::active();
	if (s && s->make_copy_engine) {
		engine_ = s->make_copy_engine();
		if (!engine_)
			return fail(-ENODEV, "staged path: the test's copy engine factory returned none");
		return 0;
	}
	int err = 0;
	std::string why;
	engine_ = make_cuda_copy_engine(&err, &why);
	if (!engine_)
		return fail(err, "%s", why.c_str());
	return 0;
}

void Stager::configure(uint32_t buffers, uint64_t buffer_bytes) noexcept
{
	nbuf_ = buffers;
	buf_bytes_ = buffer_bytes;
}

int Stager::ensure_pool(Backend &be, BufferTable &table, uint32_t logical_block_size, uint32_t mem_align)
{
	if (!pool_.empty())
		return 0;
	if (!engine_)
		return fail(-EINVAL, "staged path: no copy engine");
	const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
	chunk_bytes_ = buf_bytes_ - buf_bytes_ % logical_block_size;
	if (chunk_bytes_ < logical_block_size)
		chunk_bytes_ = logical_block_size;
	mem_align_ = mem_align ? mem_align : 1;
	const size_t len = size_t((chunk_bytes_ + page - 1) / page * page);
	std::string why;
	int err = engine_->open_lanes(nbuf_, &why);
	if (err)
		return fail(err, "staged path: %s", why.c_str());
	pool_.resize(nbuf_);
	for (Bounce &bb : pool_) {
		void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			err = fail(-ENOMEM, "staged path: cannot map a %zu-byte bounce buffer: %s", len,
				   errno_text(errno).c_str());
			break;
		}
		bb.mem = static_cast<uint8_t *>(p);
		bb.len = len;
		if (uintptr_t(p) % mem_align) {
			err = fail(-EINVAL, "staged path: bounce buffer %p is not aligned to mem_align %u", p, mem_align);
			break;
		}
		err = engine_->pin_host(p, len, &why);
		if (err) {
			err = fail(err, "staged path: %s (the pool is %u x %llu bytes; kvblk_set_staging() makes it smaller)",
				   why.c_str(), nbuf_, (unsigned long long)buf_bytes_);
			break;
		}
		bb.pinned = true;
		pool_bytes_.fetch_add(len, std::memory_order_relaxed);
		/* A reserved slot is invisible to descriptors; without one, reads are plain. */
		if (table.reserve(KVBLK_MEM_HOST, bb.mem, len, &bb.slot) == 0)
			bb.fixed = be.register_buffer(bb.slot, bb.mem, len).fixed_index;
		else
			bb.slot = KVBLK_BUF_NONE;
	}
	if (err)
		release_pool(be, table);
	return err;
}

void Stager::release_pool(Backend &be, BufferTable &table) noexcept
{
	if (engine_)
		engine_->close_lanes();
	for (Bounce &bb : pool_) {
		if (bb.slot != KVBLK_BUF_NONE) {
			be.unregister_buffer(bb.slot, bb.fixed);
			table.release(bb.slot);
		}
		if (bb.pinned)
			engine_->unpin_host(bb.mem);
		if (bb.mem)
			munmap(bb.mem, bb.len);
	}
	pool_.clear();
	pool_bytes_.store(0, std::memory_order_relaxed);
}

void Stager::fail_object(uint32_t obj, int32_t st, const std::string &why)
{
	if (status_[obj] == 0)
		status_[obj] = st;
	if (!why.empty() && note_.empty())
		note_ = "object " + std::to_string(obj) + ": " + why;
}

/* Lane @lane finished its copies with @r (0 or -errno): a failure fails all its pieces' objects. */
void Stager::finish_lane(uint32_t lane, int r, const std::string &why)
{
	Bounce &bb = pool_[lane];
	if (r < 0)
		for (uint32_t p : bb.pieces)
			fail_object(pieces_[p].obj, r, "copy to device memory failed: " + why);
	bb.pieces.clear();
	free_.push_back(lane);
}

/* Take back every lane whose copies are done, without blocking. */
void Stager::reap()
{
	for (auto it = busy_.begin(); it != busy_.end();) {
		std::string why;
		const int r = engine_->lane_done(*it, &why);
		if (r == 0) {
			++it;
			continue;
		}
		finish_lane(*it, r < 0 ? r : 0, why);
		it = busy_.erase(it);
	}
}

/*
 * Cut the next pieces of the staged stream into bounce buffer @lane (skipping objects that
 * already failed) and add them to the sub-batch. false when nothing is left to read.
 */
bool Stager::fill(uint32_t lane, const Batch &b)
{
	const Bounce &bb = pool_[lane];
	uint64_t used = 0;
	bool any = false;
	while (cur_ < staged_.size() && used < chunk_bytes_) {
		const uint32_t obj = staged_[cur_];
		const IoObject &o = b.objects[obj];
		if (status_[obj]) {
			cur_++;
			cur_off_ = 0;
			continue;
		}
		const uint64_t len = std::min(chunk_bytes_ - used, o.length - cur_off_);
		pieces_.push_back(Piece{obj, cur_off_, len, used});
		IoObject io{};
		io.offset = o.offset + cur_off_;
		io.length = len;
		io.mem = bb.mem + used;
		io.buf_id = bb.slot;
		io.fixed_index = bb.fixed;
		io.buf_offset = used;
		io.path = KVBLK_PATH_HOST;
		io.fd = o.fd;
		io.target = o.target;
		sub_.push_back(io);
		refs_.push_back(Ref{false, uint32_t(pieces_.size() - 1), lane});
		any = true;
		cur_off_ += len;
		if (cur_off_ == o.length) {
			cur_++;
			cur_off_ = 0;
		}
		/* The next piece starts aligned for the backend's memory rules. */
		used = (used + len + mem_align_ - 1) / mem_align_ * mem_align_;
	}
	return any;
}

void Stager::wait_oldest()
{
	const uint32_t lane = busy_.front();
	busy_.pop_front();
	std::string why;
	finish_lane(lane, engine_->lane_wait(lane, &why), why);
}

int Stager::run(Backend &be, Batch &b) noexcept
{
	try {
		return serve(be, b);
	} catch (const std::bad_alloc &) {
		/* Copies may still be queued: let them land before the buffers are reused. */
		while (!busy_.empty())
			wait_oldest();
		return fail(-ENOMEM, "staged path: out of memory for a batch of %u objects", b.count);
	}
}

int Stager::serve(Backend &be, Batch &b)
{
	const uint32_t n = b.count;
	note_.clear();
	if (pool_.empty() || !engine_)
		return fail(-EINVAL, "staged path: no bounce buffers (register device memory first)");
	status_.assign(n, 0);
	pieces_.clear();
	staged_.clear();
	std::vector<uint32_t> direct;
	for (uint32_t i = 0; i < n; i++)
		(b.objects[i].path == KVBLK_PATH_STAGED ? staged_ : direct).push_back(i);
	cur_ = 0;
	cur_off_ = 0;
	free_.clear();
	for (uint32_t k = uint32_t(pool_.size()); k-- > 0;)
		free_.push_back(k); /* lane 0 is used first */
	busy_.clear();

	bool first = true;
	bool cancel_seen = false;
	for (;;) {
		reap();
		if (!cancel_seen && b.cancelled()) {
			/*
			 * kvblk_cancel() (or kvblk_close()): objects none of whose pieces were read end
			 * -ECANCELED (fill() skips them); one cut in part is read to its end, and the
			 * copies queued land before the batch ends. Seen at the start of a round: a
			 * round is at most buffers * buffer_bytes of reads.
			 */
			cancel_seen = true;
			for (size_t k = cur_ + (cur_off_ ? 1 : 0); k < staged_.size(); k++)
				if (status_[staged_[k]] == 0)
					status_[staged_[k]] = -ECANCELED;
			if (first) {
				for (uint32_t i : direct) {
					b.results[i].status = -ECANCELED;
					b.results[i].bytes = 0;
				}
				direct.clear();
			}
		}
		while (cur_ < staged_.size() && status_[staged_[cur_]]) {
			cur_++; /* its object already failed */
			cur_off_ = 0;
		}
		const bool more = cur_ < staged_.size();
		if (free_.empty() && more) {
			wait_oldest();
			continue;
		}
		sub_.clear();
		refs_.clear();
		if (first) {
			for (uint32_t i : direct) {
				sub_.push_back(b.objects[i]);
				refs_.push_back(Ref{true, i, 0});
			}
			first = false;
		}
		std::vector<uint32_t> filled;
		while (!free_.empty() && fill(free_.back(), b)) {
			filled.push_back(free_.back());
			free_.pop_back();
		}
		if (sub_.empty()) {
			if (busy_.empty())
				break;
			wait_oldest();
			continue;
		}

		subres_.resize(sub_.size());
		for (size_t k = 0; k < sub_.size(); k++)
			subres_[k] = kvblk_result{0, 0, 0, refs_[k].direct ? b.results[refs_[k].index].tag
									 : b.results[pieces_[refs_[k].index].obj].tag};
		Batch sb{b.dir, sub_.data(), uint32_t(sub_.size()), subres_.data(), {}};
		const int ret = be.run(sb);
		b.counters.merge(sb.counters);
		for (size_t k = 0; k < sub_.size(); k++) {
			const Ref &r = refs_[k];
			const int32_t st = ret ? ret : subres_[k].status;
			if (r.direct) {
				b.results[r.index].status = st;
				b.results[r.index].bytes = st ? 0 : b.objects[r.index].length;
			} else if (st) {
				fail_object(pieces_[r.index].obj, st, "");
			}
		}
		/* Copy what was read; a lane with nothing queued is free at once. */
		for (uint32_t lane : filled) {
			Bounce &bb = pool_[lane];
			for (size_t k = 0; k < sub_.size(); k++) {
				const Ref &r = refs_[k];
				if (r.direct || r.lane != lane)
					continue;
				const Piece &p = pieces_[r.index];
				if (status_[p.obj])
					continue;
				std::string why;
				const uint64_t dst = uint64_t(uintptr_t(b.objects[p.obj].mem)) + p.off;
				const int cr = engine_->copy_to_device(lane, dst, bb.mem + p.buf_off, size_t(p.len), &why);
				if (cr) {
					fail_object(p.obj, cr, "copy to device memory failed: " + why);
					continue;
				}
				bb.pieces.push_back(r.index);
				b.counters.staged_copies++;
			}
			if (bb.pieces.empty())
				free_.push_back(lane);
			else
				busy_.push_back(lane);
		}
	}

	for (uint32_t i : staged_) {
		b.results[i].status = status_[i];
		b.results[i].bytes = status_[i] ? 0 : b.objects[i].length;
	}
	return 0;
}

} // namespace kvblk::detail

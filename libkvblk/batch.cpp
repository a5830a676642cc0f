// SPDX-License-Identifier: MIT
// A batch's checks, the same for kvblk_submit(), kvblk_load_many()/kvblk_store_many() and
// the KVBLK_0.1 entry points: every descriptor against its target and buffer, the pins that
// keep both alive until the batch's completion is taken, the batch's path, and unaligned
// objects expanded into aligned parts. The result is a Job the scheduler runs (async.hpp).
#include "device.hpp"
#include "last_error.hpp"
#include "overlap.hpp"

#include <cerrno>
#include <vector>

namespace kvblk::detail {
namespace {

/* Fill every result of a rejected call (if there are results): @bad gets @err, the others -ECANCELED. */
int reject(kvblk_dev *dev, const DescView &descs, uint32_t n, kvblk_result *results, int err, int32_t bad,
	   int32_t *bad_out)
{
	if (results)
		for (uint32_t i = 0; i < n; i++)
			results[i] = kvblk_result{i == uint32_t(bad) ? err : -ECANCELED, 0, 0, descs[i].tag};
	dev->stats.record_rejected();
	*bad_out = bad;
	return err;
}

/*
 * Loads whose destinations intersect, or stores to intersecting ranges of one target: 0, or
 * -EINVAL with the message set and *bad the lowest such descriptor. Under the buffers lock.
 */
int check_overlap(const BufferTable &buffers, IoDir dir, const IoObject *objects, uint32_t n, int32_t *bad)
{
	if (n < 2)
		return 0;
	/*
	 * The spans of this thread's batches, kept between calls: no allocation per batch once
	 * it has grown (up to kScratchSpans; a larger batch's are let go after it).
	 */
	constexpr size_t kScratchSpans = 4096;
	thread_local std::vector<Span> scratch;
	std::vector<Span> &spans = scratch;
	spans.clear();
	spans.reserve(n);
	struct Trim {
		std::vector<Span> &v;
		~Trim()
		{
			if (v.capacity() > kScratchSpans)
				std::vector<Span>().swap(v);
		}
	} trim{spans};
	uint32_t last_id = KVBLK_BUF_NONE;
	uint64_t last_space = 0;
	for (uint32_t i = 0; i < n; i++) {
		const IoObject &o = objects[i];
		/* A load KVBLK_DESC_SHORT_EOF cut to nothing touches no byte: it meets nothing. */
		if (o.length == 0)
			continue;
		uint64_t space = o.target;
		uint64_t start = o.offset;
		if (dir == IoDir::read) {
			space = 0;
			if (o.buf_id != KVBLK_BUF_NONE) {
				if (o.buf_id != last_id) { /* a run of objects into one buffer: one lookup */
					const RegisteredBuffer *b = buffers.find_locked(o.buf_id);
					last_space = 0;
					if (b && b->kind == KVBLK_MEM_CUDA)
						last_space = 1;
					else if (b && b->kind == KVBLK_MEM_DMABUF)
						last_space = 2 + uint64_t(o.buf_id);
					last_id = o.buf_id;
				}
				space = last_space;
			}
			start = uint64_t(uintptr_t(o.mem));
		}
		spans.push_back(Span{space, start, start + o.length, i});
	}
	uint32_t other = 0;
	const int32_t j = first_overlap(spans, &other);
	if (j < 0)
		return 0;
	const IoObject &a = objects[other], &b = objects[j];
	if (dir == IoDir::read)
		set_last_error("descriptor %d: its destination %p + %llu overlaps that of descriptor %u (%p + %llu): "
			       "the bytes would depend on which read completes last",
			       j, static_cast<void *>(b.mem), (unsigned long long)b.length, other,
			       static_cast<void *>(a.mem), (unsigned long long)a.length);
	else
		set_last_error("descriptor %d: target %u bytes [%llu, %llu) overlap those of descriptor %u "
			       "([%llu, %llu)): the stored bytes would depend on which write completes last",
			       j, b.target, (unsigned long long)b.offset, (unsigned long long)(b.offset + b.length),
			       other, (unsigned long long)a.offset, (unsigned long long)(a.offset + a.length));
	*bad = j;
	return -EINVAL;
}

} // namespace

int prepare_batch(kvblk_dev *dev, const char *fn, IoDir dir, const DescView &descs, uint32_t n,
		  kvblk_result *results, std::unique_ptr<Job> *out, int32_t *bad)
{
	*bad = -1;
	if (n > dev->info.max_descs) {
		set_last_error("%s: %u descriptors exceed max_descs %u", fn, n, dev->info.max_descs);
		return reject(dev, descs, n, results, -E2BIG, -1, bad);
	}
	/* Rejections below drop the job, and with it every pin taken so far. */
	auto job = std::make_unique<Job>(dev->buffers, dev->targets);
	job->dir = dir;
	job->backend = dev->backend->kind_for(dir);
	job->objects.resize(n);
	job->geometry.resize(n);
	BatchCheck check{dir, dev->targets.next_serial(), &dev->targets, &dev->buffers, job->objects.data(),
			 job->geometry.data(), &job->pins.buffer_ids, &job->pins.target_ids, false, false};
	kvblk_path path = dev->backend->path();
	{
		auto tlock = dev->targets.lock();
		auto block = dev->buffers.lock();
		int32_t b = -1;
		int ret = validate_descs(descs, n, &check, &b);
		if (ret == -EBADF) /* a store to a read-only target: the whole call, as in 0.2 */
			b = -1;
		if (ret)
			return reject(dev, descs, n, results, ret, b, bad);
		ret = check_overlap(dev->buffers, dir, job->objects.data(), n, &b);
		if (ret)
			return reject(dev, descs, n, results, ret, b, bad);
		/* The batch's path: STAGED over P2P over the backend's own. */
		for (uint32_t i = 0; i < n; i++) {
			const uint32_t p = job->objects[i].path;
			if (p == KVBLK_PATH_HOST)
				continue;
			if (dir == IoDir::write) {
				set_last_error("%s: descriptor %u: stores from device memory (buffer %u) are not "
					       "supported", fn, i, descs[i].buf_id);
				return reject(dev, descs, n, results, -EOPNOTSUPP, int32_t(i), bad);
			}
			if (p == KVBLK_PATH_STAGED || path != KVBLK_PATH_STAGED)
				path = kvblk_path(p);
		}
		dev->buffers.pin_locked(job->pins.buffer_ids);
		job->pins.buffers_pinned();
	}
	job->path = path;
	job->buffered = check.any_buffered;

	/* Unaligned objects become aligned parts; the backend sees only those. */
	if (check.any_unaligned && dir == IoDir::read) {
		int32_t b = -1;
		int ret = job->unaligned.expand(job->objects.data(), job->geometry.data(), n, &b);
		if (ret)
			return reject(dev, descs, n, results, ret, b, bad);
		job->any_unaligned = true;
		job->defer_object_entries = true;
	} else if (check.any_unaligned) {
		/* Stores: edge blocks read, then every part written (unaligned.hpp); the ranges it locks. */
		int32_t b = -1;
		int ret = job->store.expand(job->objects.data(), job->geometry.data(), n, &job->lock, &b);
		if (ret)
			return reject(dev, descs, n, results, ret, b, bad);
		job->split_store = true;
		job->phase = job->store.has_reads() ? Job::Phase::read : Job::Phase::write;
		job->defer_object_entries = true;
	} else if (dir == IoDir::write) {
		/* Aligned stores lock what they write: a later read-modify-write of those blocks waits. */
		job->lock.ranges.reserve(n);
		for (uint32_t i = 0; i < n; i++) {
			const IoObject &o = job->objects[i];
			job->lock.ranges.push_back(LockRange{o.target, o.offset, o.offset + o.length, false});
		}
		job->lock.prepare();
	}
	if (!results) {
		job->own_results.resize(n);
		results = job->own_results.data();
	}
	job->results = results;
	for (uint32_t i = 0; i < n; i++)
		results[i] = kvblk_result{0, 0, 0, descs[i].tag};
	*out = std::move(job);
	return 0;
}

} // namespace kvblk::detail

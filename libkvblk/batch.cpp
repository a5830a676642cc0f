// SPDX-License-Identifier: MIT
// One kvblk_load_many()/kvblk_store_many() call: check every descriptor against its target,
// expand KVBLK_DESC_UNALIGNED objects into aligned parts, hand the batch to the backend (or
// the staged path), fold the parts back and account for it.
#include "device.hpp"
#include "last_error.hpp"
#include "struct_size.hpp"
#include "unaligned.hpp"
#include "validate.hpp"

#include <cerrno>
#include <string>

namespace kvblk::detail {
namespace {

using ull = unsigned long long;

/* Drops a batch's pins of registered buffers and targets when it ends, however it ends. */
class BatchPins {
public:
	BatchPins(BufferTable &b, TargetTable &t) : buffers_(b), targets_(t) {}
	~BatchPins() { release(); }
	BatchPins(const BatchPins &) = delete;
	BatchPins &operator=(const BatchPins &) = delete;

	void release() noexcept
	{
		if (buffers_pinned_)
			buffers_.unpin(buffer_ids);
		buffers_pinned_ = false;
		if (!target_ids.empty())
			targets_.unpin(target_ids);
		target_ids.clear();
	}
	void buffers_pinned() noexcept { buffers_pinned_ = true; }

	PinSet buffer_ids;
	TargetPins target_ids;

private:
	BufferTable &buffers_;
	TargetTable &targets_;
	bool buffers_pinned_ = false;
};

/* Fill every result of a rejected call: @bad gets @err, the others -ECANCELED. */
int reject(kvblk_dev *dev, const DescView &descs, uint32_t n, kvblk_result *results, kvblk_batch_info *info,
	   int err, int32_t bad)
{
	for (uint32_t i = 0; i < n; i++)
		results[i] = kvblk_result{i == uint32_t(bad) ? err : -ECANCELED, 0, 0, descs[i].tag};
	dev->stats.record_rejected();
	info->bad_index = bad;
	info->failed = n;
	return err;
}

} // namespace

int do_batch(kvblk_dev *dev, IoDir dir, const DescView &descs, uint32_t n, kvblk_result *results,
	     kvblk_batch_info *user_info)
{
	const char *fn = dir == IoDir::read ? "kvblk_load_many" : "kvblk_store_many";
	if (!dev || descs.null() || !results)
		return fail(-EINVAL, "%s: NULL %s", fn, !dev ? "dev" : descs.null() ? "descs" : "results");
	if (user_info) {
		int ret = check_output_size(fn, "info_size", user_info->info_size, KVBLK_BATCH_INFO_SIZE_V0_2);
		if (ret)
			return ret;
	}
	if (n == 0)
		return fail(-EINVAL, "%s: n is 0", fn);

	/* Built here and copied out at the end: the caller's struct may be of an older size. */
	kvblk_batch_info info{};
	info.info_size = sizeof(info);
	struct Report {
		kvblk_batch_info *user;
		const kvblk_batch_info &ours;
		~Report()
		{
			if (user)
				copy_out(user, user->info_size, &ours, sizeof(ours));
		}
	} report{user_info, info};

	const uint64_t t0 = now_ns();
	kvblk_path path = dev->backend->path();
	info.backend = dev->backend->kind_for(dir);
	info.path = path;
	info.bad_index = -1;

	std::lock_guard<std::mutex> io(dev->io_mutex);
	if (n > dev->info.max_descs) {
		set_last_error("%s: %u descriptors exceed max_descs %u", fn, n, dev->info.max_descs);
		return reject(dev, descs, n, results, &info, -E2BIG, -1);
	}

	dev->objects.resize(n);
	dev->geometry.resize(n);
	BatchPins pins(dev->buffers, dev->targets);
	BatchCheck check{dir, dev->targets.next_serial(), &dev->targets, &dev->buffers,
			 dev->objects.data(), dev->geometry.data(), &pins.buffer_ids, &pins.target_ids, false, false};
	{
		auto tlock = dev->targets.lock();
		auto block = dev->buffers.lock();
		int32_t bad = -1;
		int ret = validate_descs(descs, n, &check, &bad);
		if (ret == -EBADF) /* a store to a read-only target: the whole call, as in 0.2 */
			bad = -1;
		if (ret)
			return reject(dev, descs, n, results, &info, ret, bad);
		/* The batch's path: STAGED over P2P over the backend's own. */
		for (uint32_t i = 0; i < n; i++) {
			const uint32_t p = dev->objects[i].path;
			if (p == KVBLK_PATH_HOST)
				continue;
			if (dir == IoDir::write) {
				set_last_error("%s: descriptor %u: stores from device memory (buffer %u) are not "
					       "supported", fn, i, descs[i].buf_id);
				return reject(dev, descs, n, results, &info, -EOPNOTSUPP, int32_t(i));
			}
			if (p == KVBLK_PATH_STAGED || path != KVBLK_PATH_STAGED)
				path = kvblk_path(p);
		}
		info.path = path;
		dev->buffers.pin_locked(pins.buffer_ids);
		pins.buffers_pinned();
	}

	for (uint32_t i = 0; i < n; i++)
		results[i] = kvblk_result{0, 0, 0, descs[i].tag};

	/* Unaligned objects become aligned parts; the backend sees only those. */
	UnalignedBatch unaligned;
	Batch batch{dir, dev->objects.data(), n, results, {}};
	if (check.any_unaligned) {
		int32_t bad = -1;
		int ret = unaligned.expand(dev->objects.data(), dev->geometry.data(), n, &bad);
		if (ret)
			return reject(dev, descs, n, results, &info, ret, bad);
		batch.objects = unaligned.parts();
		batch.count = unaligned.part_count();
		batch.results = unaligned.part_results();
	}
	int ret = path == KVBLK_PATH_STAGED ? dev->stager.run(*dev->backend, batch) : dev->backend->run(batch);
	pins.release();
	if (ret)
		return reject(dev, descs, n, results, &info, ret, -1);
	UnalignedTotals ut;
	if (check.any_unaligned)
		unaligned.finish(results, &ut);

	BatchSummary sum{};
	sum.backend = dev->backend->kind_for(dir);
	sum.dir = dir;
	sum.buffered = check.any_buffered;
	sum.path = path;
	sum.objects = n;
	sum.unaligned_objects = ut.objects;
	sum.unaligned_extra_bytes = ut.extra_bytes;
	uint32_t ok = 0, first_failed = n;
	for (uint32_t i = 0; i < n; i++) {
		const int32_t st = results[i].status;
		if (st == 0) {
			ok++;
			sum.bytes_ok += results[i].bytes;
			sum.bytes_by_path[dev->objects[i].path] += results[i].bytes;
			continue;
		}
		if (first_failed == n)
			first_failed = i;
		if (st == -EIO)
			sum.errors_io++;
		else if (st == -EAGAIN)
			sum.errors_eagain++;
		else
			sum.errors_other++;
	}
	sum.elapsed_ns = now_ns() - t0;
	dev->stats.record_batch(sum, batch.counters);

	if (first_failed < n) {
		const std::string &note = path == KVBLK_PATH_STAGED ? dev->stager.copy_note() : std::string();
			const kvblk_desc d = descs[first_failed];
		set_last_error("%s: descriptor %u (target %u, offset %llu, %llu bytes) failed: %s; %u of %u objects "
			       "failed%s%s",
			       fn, first_failed, d.target, ull(d.offset), ull(d.length),
			       errno_text(results[first_failed].status).c_str(),
			       n - ok, n, note.empty() ? "" : "; staged path: ", note.c_str());
	}
	info.failed = n - ok;
	info.bytes = sum.bytes_ok;
	info.bytes_device = check.any_unaligned ? ut.bytes_device : sum.bytes_ok;
	info.commands = batch.counters.commands;
	info.elapsed_ns = sum.elapsed_ns;
	return int(ok);
}

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// Batches: kvblk_submit() (check the descriptors, turn the batch into a Job the scheduler
// owns), kvblk_reap(), kvblk_wait(), kvblk_cancel(), kvblk_event_fd(), and
// kvblk_load_many()/kvblk_store_many() as a submit and a wait.
#include "async.hpp"
#include "device.hpp"
#include "last_error.hpp"
#include "validate.hpp"

#include <kvblk/kvblk.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

using namespace kvblk::detail;

namespace {

using ull = unsigned long long;

/* Fill every result of a rejected call (if there are results): @bad gets @err, the others -ECANCELED. */
void fill_rejected(const kvblk_desc *descs, uint32_t n, kvblk_result *results, int err, int32_t bad)
{
	if (results)
		for (uint32_t i = 0; i < n; i++)
			results[i] = kvblk_result{i == uint32_t(bad) ? err : -ECANCELED, 0, 0, descs[i].tag};
}

int reject(kvblk_dev *dev, const kvblk_desc *descs, uint32_t n, kvblk_result *results, int err, int32_t bad,
	   int32_t *bad_out)
{
	fill_rejected(descs, n, results, err, bad);
	dev->stats.record_rejected();
	*bad_out = bad;
	return err;
}

/*
 * Check a batch exactly as kvblk_load_many() does and turn it into a Job: 0, or -errno with
 * @results (when given) filled as for a rejected call and *bad the rejected descriptor (-1:
 * none). @results NULL: the job writes into its own array.
 */
int prepare(kvblk_dev *dev, const char *fn, IoDir dir, const kvblk_desc *descs, uint32_t n,
	    kvblk_result *results, std::unique_ptr<Job> *out, int32_t *bad)
{
	*bad = -1;
	if (dir == IoDir::write && !dev->target.writable) {
		set_last_error("%s: %s was not opened with KVBLK_OPEN_WRITE", fn, dev->target.path.c_str());
		return reject(dev, descs, n, results, -EBADF, -1, bad);
	}
	if (n > dev->info.max_descs) {
		set_last_error("%s: %u descriptors exceed max_descs %u", fn, n, dev->info.max_descs);
		return reject(dev, descs, n, results, -E2BIG, -1, bad);
	}
	auto job = std::make_unique<Job>();
	job->dir = dir;
	job->backend = dev->backend->kind_for(dir);
	job->objects.resize(n);
	if (!results) {
		job->own_results.resize(n);
		results = job->own_results.data();
	}
	kvblk_path path = dev->backend->path();
	{
		const ValidationLimits lim{dev->target.logical_block_size, dev->target.mem_align,
					   dev->target.capacity};
		auto lock = dev->buffers.lock();
		int32_t b = -1;
		int ret = validate_descs(dir, descs, n, lim, dev->buffers, job->objects.data(), &job->pins, &b);
		if (ret)
			return reject(dev, descs, n, results == job->own_results.data() ? nullptr : results, ret,
				      b, bad);
		/* The batch's path: STAGED over P2P over the backend's own. */
		for (uint32_t i = 0; i < n; i++) {
			const uint32_t p = job->objects[i].path;
			if (p == KVBLK_PATH_HOST)
				continue;
			if (dir == IoDir::write) {
				set_last_error("%s: descriptor %u: stores from device memory (buffer %u) are not "
					       "supported", fn, i, descs[i].buf_id);
				return reject(dev, descs, n, results == job->own_results.data() ? nullptr : results,
					      -EOPNOTSUPP, int32_t(i), bad);
			}
			if (p == KVBLK_PATH_STAGED || path != KVBLK_PATH_STAGED)
				path = kvblk_path(p);
		}
		dev->buffers.pin_locked(job->pins);
	}
	job->path = path;
	job->results = results;
	for (uint32_t i = 0; i < n; i++)
		results[i] = kvblk_result{0, 0, 0, descs[i].tag};
	*out = std::move(job);
	return 0;
}

/* Hand @job to the scheduler; on failure it is undone (pins dropped, results -ECANCELED). */
int submit_job(kvblk_dev *dev, std::unique_ptr<Job> &job, bool nonblock, uint64_t *ticket)
{
	const int ret = dev->sched->submit(job, nonblock, ticket);
	if (ret) {
		for (uint32_t i = 0; i < job->count(); i++)
			job->results[i].status = -ECANCELED;
		if (job->pins.any())
			dev->buffers.unpin(job->pins);
	}
	return ret;
}

/* Fill the report of a completed batch; 0.3 fields only when @info has room for them. */
void fill_info(kvblk_batch_info *info, const Scheduler::Outcome &o, uint64_t elapsed_ns, uint64_t user_data)
{
	info->backend = o.entry.backend;
	info->path = o.entry.path;
	info->bad_index = -1;
	info->failed = o.entry.failed;
	info->bytes = o.entry.bytes;
	info->commands = o.commands;
	info->elapsed_ns = elapsed_ns;
	auto fits = [&](size_t end) { return info->info_size >= end; };
	if (fits(offsetof(kvblk_batch_info, bytes_device) + sizeof(uint64_t)))
		info->bytes_device = o.entry.bytes;
	if (fits(offsetof(kvblk_batch_info, ticket) + sizeof(uint64_t)))
		info->ticket = o.entry.ticket;
	if (fits(offsetof(kvblk_batch_info, user_data) + sizeof(uint64_t)))
		info->user_data = user_data;
}

/* Name the first failed object in kvblk_last_error(). */
void explain_failures(const char *fn, const Scheduler::Outcome &o)
{
	if (!o.entry.failed)
		return;
	const uint32_t n = o.entry.index;
	set_last_error("%s: descriptor %u (offset %llu, %llu bytes) failed: %s; %u of %u objects failed%s%s", fn,
		       o.first_failed, ull(o.failed_offset), ull(o.failed_length), errno_text(o.entry.status).c_str(),
		       o.entry.failed, n, o.note.empty() ? "" : "; staged path: ", o.note.c_str());
}

int check_info(const char *fn, const kvblk_batch_info *info)
{
	if (info && info->info_size < KVBLK_BATCH_INFO_SIZE_V0_2)
		return fail(-EINVAL, "%s: info_size %zu is smaller than %zu", fn, info->info_size,
			    size_t(KVBLK_BATCH_INFO_SIZE_V0_2));
	return 0;
}

/* kvblk_load_many()/kvblk_store_many(): a submit and a wait, the 0.2 contract kept. */
int do_batch(kvblk_dev *dev, IoDir dir, const kvblk_desc *descs, uint32_t n, kvblk_result *results,
	     kvblk_batch_info *info)
{
	const char *fn = dir == IoDir::read ? "kvblk_load_many" : "kvblk_store_many";
	if (!dev || !descs || !results)
		return fail(-EINVAL, "%s: NULL %s", fn, !dev ? "dev" : !descs ? "descs" : "results");
	if (int ret = check_info(fn, info))
		return ret;
	if (n == 0)
		return fail(-EINVAL, "%s: n is 0", fn);

	const uint64_t t0 = now_ns();
	if (info) {
		info->backend = dev->backend->kind_for(dir);
		info->path = dev->backend->path();
		info->bad_index = -1;
		info->failed = 0;
		info->bytes = 0;
		info->commands = 0;
		info->elapsed_ns = 0;
	}
	std::unique_ptr<Job> job;
	int32_t bad = -1;
	int ret = prepare(dev, fn, dir, descs, n, results, &job, &bad);
	if (!ret) {
		if (info)
			info->path = job->path;
		job->sync = true;
		uint64_t ticket = 0;
		ret = submit_job(dev, job, false, &ticket);
		if (!ret) {
			Scheduler::Outcome o{};
			ret = dev->sched->wait(ticket, -1, &o);
			if (ret == 0 && o.fatal) {
				set_last_error("%s: %s", fn, o.note.c_str());
				ret = o.fatal;
			}
			if (ret == 0) {
				explain_failures(fn, o);
				if (info)
					fill_info(info, o, now_ns() - t0, 0);
				return int(n - o.entry.failed);
			}
		}
	}
	if (info) {
		info->bad_index = bad;
		info->failed = n;
	}
	return ret;
}

} // namespace

extern "C" {

void kvblk_submit_opts_init(struct kvblk_submit_opts *opts, size_t size) noexcept
{
	if (!opts || size < sizeof(size_t))
		return;
	std::memset(opts, 0, size);
	opts->opts_size = size;
	if (size >= offsetof(kvblk_submit_opts, bad_index) + sizeof(opts->bad_index))
		opts->bad_index = -1;
}

int kvblk_submit(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n, struct kvblk_submit_opts *opts,
		 uint64_t *ticket) noexcept
{
	if (!dev || !descs || !ticket)
		return fail(-EINVAL, "kvblk_submit: NULL %s", !dev ? "dev" : !descs ? "descs" : "ticket");
	uint32_t flags = 0;
	uint64_t user_data = 0;
	kvblk_result *results = nullptr;
	if (opts) {
		const size_t size = opts->opts_size;
		if (size < sizeof(*opts))
			return fail(-EINVAL, "kvblk_submit: opts_size %zu is smaller than %zu (use kvblk_submit_opts_init)",
				    size, sizeof(*opts));
		const auto *bytes = reinterpret_cast<const unsigned char *>(opts);
		for (size_t i = sizeof(*opts); i < size; i++)
			if (bytes[i])
				return fail(-EINVAL, "kvblk_submit: option byte %zu is beyond what this libkvblk "
						     "knows and is not 0", i);
		opts->bad_index = -1;
		if (opts->flags & ~KVBLK_SUBMIT_FLAGS_ALL)
			return fail(-EINVAL, "kvblk_submit: unknown flags 0x%x", opts->flags & ~KVBLK_SUBMIT_FLAGS_ALL);
		flags = opts->flags;
		user_data = opts->user_data;
		results = opts->results;
	}
	if (n == 0)
		return fail(-EINVAL, "kvblk_submit: n is 0");
	const IoDir dir = flags & KVBLK_SUBMIT_STORE ? IoDir::write : IoDir::read;
	try {
		std::unique_ptr<Job> job;
		int32_t bad = -1;
		int ret = prepare(dev, "kvblk_submit", dir, descs, n, results, &job, &bad);
		if (ret) {
			if (opts)
				opts->bad_index = bad;
			return ret;
		}
		job->flags = flags;
		job->user_data = user_data;
		return submit_job(dev, job, flags & KVBLK_SUBMIT_NONBLOCK, ticket);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_submit: out of memory");
	}
}

int kvblk_reap(kvblk_dev *dev, struct kvblk_cqe *cqes, uint32_t max, uint32_t min_complete,
	       int64_t timeout_ns) noexcept
{
	if (!dev || !cqes)
		return fail(-EINVAL, "kvblk_reap: NULL %s", dev ? "cqes" : "dev");
	if (max == 0)
		return fail(-EINVAL, "kvblk_reap: max is 0");
	if (min_complete > max)
		return fail(-EINVAL, "kvblk_reap: min_complete %u is larger than max %u", min_complete, max);
	try {
		return dev->sched->reap(cqes, max, min_complete, timeout_ns);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_reap: out of memory");
	}
}

int kvblk_wait(kvblk_dev *dev, uint64_t ticket, int64_t timeout_ns, struct kvblk_batch_info *info) noexcept
{
	if (!dev)
		return fail(-EINVAL, "kvblk_wait: NULL dev");
	if (int ret = check_info("kvblk_wait", info))
		return ret;
	try {
		Scheduler::Outcome o{};
		const int ret = dev->sched->wait(ticket, timeout_ns, &o);
		if (ret)
			return ret;
		explain_failures("kvblk_wait", o);
		if (info)
			fill_info(info, o, o.entry.elapsed_ns, o.entry.user_data);
		return int(o.entry.index - o.entry.failed);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_wait: out of memory");
	}
}

int kvblk_cancel(kvblk_dev *dev, uint64_t ticket) noexcept
{
	if (!dev)
		return fail(-EINVAL, "kvblk_cancel: NULL dev");
	return dev->sched->cancel(ticket);
}

int kvblk_event_fd(kvblk_dev *dev) noexcept
{
	if (!dev)
		return fail(-EINVAL, "kvblk_event_fd: NULL dev");
	return dev->sched->event_fd();
}

int kvblk_load_many(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n, struct kvblk_result *results,
		    struct kvblk_batch_info *info) noexcept
{
	try {
		return do_batch(dev, IoDir::read, descs, n, results, info);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_load_many: out of memory");
	}
}

int kvblk_store_many(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n, struct kvblk_result *results,
		     struct kvblk_batch_info *info) noexcept
{
	try {
		return do_batch(dev, IoDir::write, descs, n, results, info);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_store_many: out of memory");
	}
}

} // extern "C"

// SPDX-License-Identifier: MIT
// Batches: kvblk_submit() (prepare_batch() turns the batch into a Job the scheduler owns),
// kvblk_reap(), kvblk_wait(), kvblk_cancel(), kvblk_event_fd(), kvblk_shutdown(), and
// do_batch(): the
// synchronous kvblk_load_many()/kvblk_store_many() (bound in compat.cpp) as a submit and a
// wait.
#include "async.hpp"
#include "device.hpp"
#include "last_error.hpp"
#include "struct_size.hpp"
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

/* Hand @job to the scheduler; on failure the job is dropped (pins with it), results -ECANCELED. */
int submit_job(kvblk_dev *dev, std::unique_ptr<Job> &job, bool nonblock, uint64_t *ticket)
{
	const int ret = dev->sched->submit(job, nonblock, ticket);
	if (ret) {
		for (uint32_t i = 0; i < job->count(); i++)
			job->results[i].status = -ECANCELED;
		job.reset();
	}
	return ret;
}

/* The report of a completed batch, in this library's own (0.3) struct. */
void fill_info(kvblk_batch_info *info, const Scheduler::Outcome &o, uint64_t elapsed_ns, uint64_t user_data)
{
	info->backend = o.entry.backend;
	info->path = o.entry.path;
	info->bad_index = -1;
	info->failed = o.entry.failed;
	info->bytes = o.entry.bytes;
	info->commands = o.commands;
	info->elapsed_ns = elapsed_ns;
	info->bytes_device = o.bytes_device;
	info->ticket = o.entry.ticket;
	info->user_data = user_data;
}

/* Name the first failed object in kvblk_last_error(). */
void explain_failures(const char *fn, const Scheduler::Outcome &o)
{
	if (!o.entry.failed)
		return;
	const uint32_t n = o.entry.index;
	set_last_error("%s: descriptor %u (target %u, offset %llu, %llu bytes) failed: %s; %u of %u objects "
		       "failed%s%s",
		       fn, o.first_failed, o.failed_target, ull(o.failed_offset), ull(o.failed_length),
		       errno_text(o.entry.status).c_str(), o.entry.failed, n, o.note.empty() ? "" : "; staged path: ",
		       o.note.c_str());
}

/*
 * Built here and copied out at the end (kvblk_batch_info of any accepted size): the
 * caller's struct may be of an older or newer size.
 */
struct Report {
	kvblk_batch_info *user;
	kvblk_batch_info ours{};

	explicit Report(kvblk_batch_info *u) : user(u) { ours.info_size = sizeof(ours); }
	~Report()
	{
		if (user)
			copy_out(user, user->info_size, &ours, sizeof(ours));
	}
	Report(const Report &) = delete;
	Report &operator=(const Report &) = delete;
};

} // namespace

namespace kvblk::detail {

/* kvblk_load_many()/kvblk_store_many(): a submit and a wait, the 0.2 contract kept. */
int do_batch(kvblk_dev *dev, IoDir dir, const DescView &descs, uint32_t n, kvblk_result *results,
	     kvblk_batch_info *user_info)
{
	const char *fn = dir == IoDir::read ? "kvblk_load_many" : "kvblk_store_many";
	if (user_info) {
		/* A bad info_size: nothing can be written into it. */
		int ret = check_output_size(fn, "info_size", user_info->info_size, KVBLK_BATCH_INFO_SIZE_V0_2);
		if (ret)
			return ret;
	}
	/* From here every return reports: bad_index -1 unless a descriptor is at fault. */
	Report report(user_info);
	kvblk_batch_info &info = report.ours;
	info.bad_index = -1;
	if (!dev || descs.null() || !results)
		return fail(-EINVAL, "%s: NULL %s", fn, !dev ? "dev" : descs.null() ? "descs" : "results");
	if (int ret = check_owner(dev->owner, fn))
		return ret;
	if (n == 0)
		return fail(-EINVAL, "%s: n is 0", fn);

	const uint64_t t0 = now_ns();
	info.backend = dev->backend->kind_for(dir);
	info.path = dev->backend->path();

	std::unique_ptr<Job> job;
	int32_t bad = -1;
	int ret = prepare_batch(dev, fn, dir, descs, n, results, &job, &bad);
	if (!ret) {
		info.path = job->path;
		job->sync = true;
		uint64_t ticket = 0;
		ret = submit_job(dev, job, false, &ticket);
		if (!ret) {
			Scheduler::Outcome o{};
			ret = dev->sched->wait(ticket, -1, &o, false);
			if (ret == 0 && o.fatal) {
				set_last_error("%s: %s", fn, o.note.c_str());
				ret = o.fatal;
			}
			if (ret == 0) {
				explain_failures(fn, o);
				fill_info(&info, o, now_ns() - t0, 0);
				return int(n - o.entry.failed);
			}
		}
	}
	info.bad_index = bad;
	info.failed = n;
	return ret;
}

} // namespace kvblk::detail

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
	uint32_t flags = 0;
	uint64_t user_data = 0;
	kvblk_result *results = nullptr;
	if (opts) {
		/* Added in 0.3: no older size exists; a newer caller's extra bytes must be 0. */
		int ret = check_input_size("kvblk_submit", "opts_size", opts, opts->opts_size, sizeof(*opts),
					   sizeof(*opts));
		if (ret)
			return ret;
		opts->bad_index = -1; /* from here: -1 unless a descriptor is at fault */
	}
	if (!dev || !descs || !ticket)
		return fail(-EINVAL, "kvblk_submit: NULL %s", !dev ? "dev" : !descs ? "descs" : "ticket");
	if (int ret = check_owner(dev->owner, "kvblk_submit"))
		return ret;
	if (opts) {
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
		int ret = prepare_batch(dev, "kvblk_submit", dir, DescView(descs, sizeof(*descs)), n, results, &job,
					&bad);
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
	if (int owner = dev ? check_owner(dev->owner, "kvblk_reap") : 0)
		return owner;
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
	if (int owner = dev ? check_owner(dev->owner, "kvblk_wait") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_wait: NULL dev");
	if (info) {
		int ret = check_output_size("kvblk_wait", "info_size", info->info_size, KVBLK_BATCH_INFO_SIZE_V0_2);
		if (ret)
			return ret;
	}
	try {
		Scheduler::Outcome o{};
		const int ret = dev->sched->wait(ticket, timeout_ns, &o, true);
		if (ret)
			return ret;
		explain_failures("kvblk_wait", o);
		Report report(info);
		fill_info(&report.ours, o, o.entry.elapsed_ns, o.entry.user_data);
		return int(o.entry.index - o.entry.failed);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_wait: out of memory");
	}
}

int kvblk_cancel(kvblk_dev *dev, uint64_t ticket) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_cancel") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_cancel: NULL dev");
	return dev->sched->cancel(ticket, true);
}

int kvblk_shutdown(kvblk_dev *dev) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_shutdown") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_shutdown: NULL dev");
	dev->sched->shutdown();
	return 0;
}

int kvblk_event_fd(kvblk_dev *dev) noexcept
{
	if (int owner = dev ? check_owner(dev->owner, "kvblk_event_fd") : 0)
		return owner;
	if (!dev)
		return fail(-EINVAL, "kvblk_event_fd: NULL dev");
	return dev->sched->event_fd();
}

} // extern "C"

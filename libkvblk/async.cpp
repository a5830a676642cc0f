// SPDX-License-Identifier: MIT
#include "async.hpp"

#include "last_error.hpp"
#include "threads.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sys/eventfd.h>
#include <system_error>
#include <unistd.h>

namespace kvblk::detail {
namespace {

using Clock = std::chrono::steady_clock; /* CLOCK_MONOTONIC */

Clock::time_point deadline_of(int64_t timeout_ns)
{
	return Clock::now() + std::chrono::nanoseconds(timeout_ns);
}

} // namespace

void Job::object_done(uint32_t i) noexcept
{
	sched->post_object(*this, i);
}

void Job::batch_done(int err) noexcept
{
	sched->complete(*this, err);
}

Scheduler::Scheduler(Backend &be, Stats &stats, uint32_t max_batches, RunSync run_sync)
	: be_(be), stats_(stats), max_batches_(max_batches), run_sync_(std::move(run_sync))
{
}

Scheduler::~Scheduler()
{
	shutdown();
	if (efd_ >= 0)
		close(efd_);
}

int Scheduler::init()
{
	efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (efd_ < 0) {
		const int e = errno;
		return fail(-e, "kvblk_open: eventfd: %s", errno_text(e).c_str());
	}
	return 0;
}

int Scheduler::start_dispatch_locked()
{
	if (dispatcher_.joinable())
		return 0;
	try {
		dispatcher_ = start_library_thread([this] { dispatch_main(); });
	} catch (const std::system_error &e) {
		return fail(-(e.code().value() ? e.code().value() : EAGAIN),
			    "kvblk_submit: cannot start the device's dispatch thread: %s", e.what());
	}
	return 0;
}

int Scheduler::submit(std::unique_ptr<Job> &jp, bool nonblock, uint64_t *ticket)
{
	Job &job = *jp;
	job.sched = this;
	const bool priority = job.flags & KVBLK_SUBMIT_PRIORITY;
	job.batch = Batch{job.dir, job.io_objects(), job.io_count(), job.io_results(), {}, &job, 0, priority};
	job.batch.object_notice = (job.flags & KVBLK_SUBMIT_PER_OBJECT) && !job.defer_object_entries && !job.sync;
	const bool can_start = be_.async_mode() == KVBLK_ASYNC_NATIVE && job.path != KVBLK_PATH_STAGED &&
			       be_.can_start(job.batch);

	std::unique_lock<std::mutex> lk(mu_);
	while (table_.size() >= max_batches_) {
		if (nonblock)
			return fail(-EAGAIN, "kvblk_submit: %u batches are outstanding (max_batches); reap some first",
				    max_batches_);
		submitters_waiting_++;
		slot_cv_.wait(lk);
		submitters_waiting_--;
	}
	/*
	 * A synchronous call with nothing to wait behind on the dispatch path is served on its
	 * own thread (run()), unless the backend starts it (a native one, except kmod, whose
	 * one ioctl is cheaper than a trip through its ring).
	 */
	const bool here = job.sync && job.path != KVBLK_PATH_STAGED && !dispatching_ && prio_q_.empty() &&
			  normal_q_.empty() && (!can_start || be_.run_sync_inline());
	job.native = can_start && !here;
	if (!job.native && !here) {
		const int ret = start_dispatch_locked();
		if (ret)
			return ret;
	}
	table_.reserve(table_.size() + 1); /* the only allocation: before anything changes */
	job.ticket = next_ticket_++;
	job.batch.id = job.ticket;
	job.t_submit = now_ns();
	job.claimed = job.sync;
	table_.emplace(job.ticket, &job);
	running_++;
	stats_.record_submit(priority, table_.size());
	Job *j = jp.release();
	*ticket = j->ticket;
	if (!j->native) {
		if (here) {
			/* Nothing to wait behind: serve it here, one job at a time as ever. */
			dispatching_ = true;
			j->state = Job::State::running;
			lk.unlock();
			j->batch_done(run_sync_(*j));
			lk.lock();
			dispatching_ = false;
			if (!prio_q_.empty() || !normal_q_.empty())
				disp_cv_.notify_one();
			return 0;
		}
		(priority ? prio_q_ : normal_q_).push_back(j);
		disp_cv_.notify_one();
		return 0;
	}
	j->state = Job::State::running;
	lk.unlock();
	/* From here the job may complete, and be taken and freed, on another thread. */
	be_.start(j->batch);
	return 0;
}

void Scheduler::dispatch_main()
{
	std::unique_lock<std::mutex> lk(mu_);
	for (;;) {
		disp_cv_.wait(lk, [&] { return stop_ || (!dispatching_ && (!prio_q_.empty() || !normal_q_.empty())); });
		std::deque<Job *> &q = !prio_q_.empty() ? prio_q_ : normal_q_;
		if (q.empty())
			return; /* stop_ and nothing queued (shutdown() waited for every job) */
		Job *j = q.front();
		q.pop_front();
		j->state = Job::State::running;
		dispatching_ = true;
		lk.unlock();
		j->batch_done(run_sync_(*j));
		lk.lock();
		dispatching_ = false;
	}
}

void Scheduler::set_event_locked(bool readable) noexcept
{
	if (readable) {
		const uint64_t one = 1;
		(void)!write(efd_, &one, sizeof(one));
	} else {
		uint64_t v;
		(void)!read(efd_, &v, sizeof(v)); /* EAGAIN when the caller read it already */
	}
	event_set_ = readable;
}

void Scheduler::post_locked(Job &job, const kvblk_cqe &e)
{
	if (job.claimed) {
		job.held.push_back(e);
		return;
	}
	cq_.push_back(e);
	if (!event_set_)
		set_event_locked(true);
	if (reapers_waiting_)
		cq_cv_.notify_all();
}

void Scheduler::post_object(Job &job, uint32_t i) noexcept
{
	if (!(job.flags & KVBLK_SUBMIT_PER_OBJECT) || job.defer_object_entries)
		return;
	const kvblk_result &r = job.results[i];
	kvblk_cqe e{};
	e.ticket = job.ticket;
	e.user_data = job.user_data;
	e.status = r.status;
	e.flags = KVBLK_CQE_OBJECT;
	e.failed = r.status != 0;
	e.index = i;
	e.bytes = r.bytes;
	e.tag = r.tag;
	e.path = job.objects[i].path;
	e.backend = job.backend;
	job.objects_posted.fetch_add(1, std::memory_order_relaxed);
	try {
		std::lock_guard<std::mutex> g(mu_);
		post_locked(job, e);
	} catch (const std::bad_alloc &) {
		/* The object's result is in the array; only its entry is lost. */
	}
}

void Scheduler::complete(Job &job, int err) noexcept
{
	const uint32_t n = job.count();
	UnalignedTotals ut;
	if (err) {
		/* Nothing was moved. Synchronous calls keep 0.2's -ECANCELED and return @err. */
		job.fatal = err;
		job.note = last_error(); /* the thread that ran the backend set it */
		for (uint32_t i = 0; i < n; i++) {
			job.results[i].status = job.sync ? -ECANCELED : err;
			job.results[i].bytes = 0;
		}
	} else if (job.any_unaligned) {
		/* The parts' results become the objects' and their bounced edges are copied. */
		job.unaligned.finish(job.results, &ut);
	}
	/*
	 * Every object is over and its result final. Per-object entries deferred until now (an
	 * unaligned batch's: the backend only saw its parts) are posted here.
	 */
	if ((job.flags & KVBLK_SUBMIT_PER_OBJECT) &&
	    (job.defer_object_entries || job.objects_posted.load(std::memory_order_relaxed) == 0)) {
		job.defer_object_entries = false;
		for (uint32_t i = 0; i < n; i++)
			post_object(job, i);
	}

	BatchSummary sum{};
	sum.backend = job.backend;
	sum.dir = job.dir;
	sum.buffered = job.buffered;
	sum.path = job.path;
	sum.objects = n;
	sum.unaligned_objects = ut.objects;
	sum.unaligned_extra_bytes = ut.extra_bytes;
	uint32_t ok = 0, cancelled = 0;
	job.first_failed = n;
	for (uint32_t i = 0; i < n; i++) {
		const int32_t st = job.results[i].status;
		if (st == 0) {
			ok++;
			sum.bytes_ok += job.results[i].bytes;
			sum.bytes_by_path[job.objects[i].path] += job.results[i].bytes;
			continue;
		}
		if (job.first_failed == n)
			job.first_failed = i;
		if (st == -EIO)
			sum.errors_io++;
		else if (st == -EAGAIN)
			sum.errors_eagain++;
		else
			sum.errors_other++;
		if (st == -ECANCELED)
			cancelled++;
	}
	const uint64_t t_done = now_ns();
	sum.elapsed_ns = t_done - job.t_submit;
	job.bytes_device = job.any_unaligned ? ut.bytes_device : sum.bytes_ok;
	if (err) {
		stats_.record_rejected();
	} else {
		stats_.record_batch(sum, job.batch.counters);
		if (job.cancelled())
			stats_.record_cancelled(cancelled);
	}

	kvblk_cqe e{};
	e.ticket = job.ticket;
	e.user_data = job.user_data;
	e.status = job.first_failed < n ? job.results[job.first_failed].status : 0;
	e.flags = KVBLK_CQE_BATCH;
	e.failed = n - ok;
	e.index = n;
	e.bytes = sum.bytes_ok;
	e.path = job.path;
	e.backend = job.backend;
	e.elapsed_ns = sum.elapsed_ns;

	std::lock_guard<std::mutex> g(mu_);
	job.state = Job::State::completed;
	job.done_entry = e;
	running_--;
	try {
		post_locked(job, e);
	} catch (const std::bad_alloc &) {
		/* kvblk_wait() still finds done_entry; only a reaper would miss it. */
	}
	if (job.waiters)
		job.cv.notify_all();
	if (running_ == 0)
		idle_cv_.notify_all();
}

void Scheduler::take_locked(Job &job, std::vector<Job *> *to_free)
{
	job.taken = true;
	table_.erase(job.ticket);
	if (submitters_waiting_)
		slot_cv_.notify_one();
	if (job.waiters)
		job.cv.notify_all(); /* they see it taken; the last one frees it */
	else
		to_free->push_back(&job);
}

void Scheduler::free_jobs(const std::vector<Job *> &jobs) noexcept
{
	for (Job *j : jobs)
		delete j; /* drops its pins of buffers and targets */
}

int Scheduler::reap(kvblk_cqe *cqes, uint32_t max, uint32_t min_complete, int64_t timeout_ns)
{
	std::vector<Job *> to_free;
	std::unique_lock<std::mutex> lk(mu_);
	if (cq_.size() < min_complete && timeout_ns != 0) {
		const Clock::time_point dl = timeout_ns > 0 ? deadline_of(timeout_ns) : Clock::time_point::max();
		reapers_waiting_++;
		while (cq_.size() < min_complete) {
			if (timeout_ns < 0)
				cq_cv_.wait(lk);
			else if (cq_cv_.wait_until(lk, dl) == std::cv_status::timeout)
				break;
		}
		reapers_waiting_--;
	}
	const uint32_t k = uint32_t(std::min<size_t>(max, cq_.size()));
	for (uint32_t i = 0; i < k; i++) {
		cqes[i] = cq_.front();
		cq_.pop_front();
		if (cqes[i].flags & KVBLK_CQE_BATCH) {
			auto it = table_.find(cqes[i].ticket);
			if (it != table_.end())
				take_locked(*it->second, &to_free);
		}
	}
	if (cq_.empty()) {
		if (event_set_)
			set_event_locked(false);
	} else if (k) {
		/* Re-arm: the caller may have read the eventfd before reaping only part of the queue. */
		set_event_locked(true);
	}
	lk.unlock();
	free_jobs(to_free);
	return int(k);
}

int Scheduler::wait(uint64_t ticket, int64_t timeout_ns, Outcome *out)
{
	std::vector<Job *> to_free;
	std::unique_lock<std::mutex> lk(mu_);
	auto it = table_.find(ticket);
	if (it == table_.end())
		return fail(-ENOENT, "kvblk_wait: ticket %llu is not outstanding (never submitted, or already "
				     "reaped or waited for)", (unsigned long long)ticket);
	Job &job = *it->second;
	if (job.state != Job::State::completed && timeout_ns == 0)
		return fail(-ETIME, "kvblk_wait: batch %llu has not completed", (unsigned long long)ticket);

	/* Claim the batch: its entries already queued leave the queue, later ones never enter. */
	if (!job.claimed) {
		job.claimed = true;
		const size_t before = cq_.size();
		auto mine = [&](const kvblk_cqe &e) { return e.ticket == ticket; };
		std::copy_if(cq_.begin(), cq_.end(), std::back_inserter(job.held), mine);
		cq_.erase(std::remove_if(cq_.begin(), cq_.end(), mine), cq_.end());
		if (cq_.empty() && before && event_set_)
			set_event_locked(false);
	}
	if (job.state != Job::State::completed) {
		const Clock::time_point dl = timeout_ns > 0 ? deadline_of(timeout_ns) : Clock::time_point::max();
		job.waiters++;
		while (job.state != Job::State::completed && !job.taken) {
			if (timeout_ns < 0)
				job.cv.wait(lk);
			else if (job.cv.wait_until(lk, dl) == std::cv_status::timeout)
				break;
		}
		job.waiters--;
		if (job.taken) { /* another kvblk_wait() of the same ticket took it */
			if (job.waiters == 0)
				to_free.push_back(&job);
			lk.unlock();
			free_jobs(to_free);
			return fail(-ENOENT, "kvblk_wait: batch %llu was taken by another kvblk_wait()",
				    (unsigned long long)ticket);
		}
		if (job.state != Job::State::completed) {
			/* Timed out: the batch stays outstanding and its entries go back to the reapers. */
			if (job.waiters == 0 && !job.sync) {
				job.claimed = false;
				for (const kvblk_cqe &e : job.held)
					cq_.push_back(e);
				job.held.clear();
				if (!cq_.empty()) {
					set_event_locked(true);
					if (reapers_waiting_)
						cq_cv_.notify_all();
				}
			}
			return fail(-ETIME, "kvblk_wait: batch %llu did not complete within %lld ns",
				    (unsigned long long)ticket, (long long)timeout_ns);
		}
	}
	out->entry = job.done_entry;
	out->commands = job.batch.counters.commands;
	out->fatal = job.fatal;
	out->note = std::move(job.note);
	out->bytes_device = job.bytes_device;
	out->first_failed = job.first_failed;
	const uint32_t ff = job.first_failed < job.count() ? job.first_failed : 0;
	out->failed_target = job.objects[ff].target;
	out->failed_offset = job.objects[ff].offset;
	out->failed_length = job.objects[ff].length;
	take_locked(job, &to_free);
	lk.unlock();
	free_jobs(to_free);
	return 0;
}

void Scheduler::cancel_queued(Job &job) noexcept
{
	/* As a backend would: every object (or part) it was to move ends -ECANCELED. */
	Batch &b = job.batch;
	for (uint32_t i = 0; i < b.count; i++) {
		b.results[i].status = -ECANCELED;
		b.results[i].bytes = 0;
		b.object_done(i);
	}
	complete(job, 0);
}

int Scheduler::cancel(uint64_t ticket)
{
	std::unique_lock<std::mutex> lk(mu_);
	auto it = table_.find(ticket);
	if (it == table_.end() || it->second->state == Job::State::completed)
		return fail(-ENOENT, "kvblk_cancel: ticket %llu is not outstanding or has completed",
			    (unsigned long long)ticket);
	Job &job = *it->second;
	job.cancel_requested.store(true, std::memory_order_relaxed);
	if (job.native) {
		lk.unlock();
		be_.cancel(ticket); /* by ticket: the job may complete and go meanwhile */
		return 0;
	}
	if (job.state == Job::State::queued) {
		for (std::deque<Job *> *q : {&prio_q_, &normal_q_}) {
			auto pos = std::find(q->begin(), q->end(), &job);
			if (pos != q->end())
				q->erase(pos);
		}
		job.state = Job::State::running;
		lk.unlock();
		cancel_queued(job);
	}
	/* Running on the dispatch thread: the backend checks cancelled() between objects. */
	return 0;
}

void Scheduler::shutdown() noexcept
{
	std::vector<uint64_t> live;
	{
		std::lock_guard<std::mutex> g(mu_);
		if (stop_)
			return;
		for (const auto &kv : table_)
			if (kv.second->state != Job::State::completed)
				live.push_back(kv.first);
	}
	for (uint64_t t : live)
		(void)cancel(t);
	std::vector<Job *> to_free;
	{
		std::unique_lock<std::mutex> lk(mu_);
		idle_cv_.wait(lk, [&] { return running_ == 0; });
		stop_ = true;
		disp_cv_.notify_all();
	}
	if (dispatcher_.joinable())
		dispatcher_.join();
	std::lock_guard<std::mutex> g(mu_);
	for (const auto &kv : table_)
		to_free.push_back(kv.second);
	table_.clear();
	cq_.clear();
	free_jobs(to_free);
}

} // namespace kvblk::detail

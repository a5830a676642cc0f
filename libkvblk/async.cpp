// SPDX-License-Identifier: MIT
#include "async.hpp"

#include "futex.hpp"
#include "last_error.hpp"
#include "testing.hpp"
#include "threads.hpp"

#include <algorithm>
#include <cerrno>
#include <sys/eventfd.h>
#include <system_error>
#include <unistd.h>

namespace kvblk::detail {
namespace {

/* CLOCK_MONOTONIC deadline of a wait of @timeout_ns (< 0: none). */
uint64_t deadline_of(int64_t timeout_ns) noexcept
{
	if (timeout_ns < 0)
		return kNoDeadline;
	const uint64_t now = now_ns();
	return uint64_t(timeout_ns) >= kNoDeadline - now ? kNoDeadline : now + uint64_t(timeout_ns);
}

} // namespace

void CompletionRing::reserve(size_t n)
{
	if (reserved_ + n > buf_.size()) {
		/* Grow: at least double, so that submits pay O(1) amortised. */
		std::vector<kvblk_cqe> grown(std::max({reserved_ + n, 2 * buf_.size(), size_t(64)}));
		for (size_t i = 0; i < size_; i++)
			grown[i] = buf_[(head_ + i) % buf_.size()];
		buf_.swap(grown);
		head_ = 0;
	}
	reserved_ += n;
}

void CompletionRing::unreserve(size_t n) noexcept
{
	reserved_ -= n;
	/* A ring grown for one large per-object batch need not stay that large once it is empty. */
	if (size_ == 0 && buf_.size() > 4096 && reserved_ < buf_.size() / 8) {
		try {
			std::vector<kvblk_cqe> smaller(std::max(2 * reserved_, size_t(64)));
			buf_.swap(smaller);
			head_ = 0;
		} catch (const std::bad_alloc &) {
			/* keep the larger ring */
		}
	}
}

void CompletionRing::push(const kvblk_cqe &e) noexcept
{
	buf_[(head_ + size_) % buf_.size()] = e;
	size_++;
}

kvblk_cqe CompletionRing::pop() noexcept
{
	const kvblk_cqe e = buf_[head_];
	head_ = (head_ + 1) % buf_.size();
	size_--;
	return e;
}

void CompletionRing::clear() noexcept
{
	head_ = size_ = reserved_ = 0;
}

void Job::object_done(uint32_t i) noexcept
{
	sched->post_object(*this, i);
}

void Job::batch_done(int err) noexcept
{
	/* A native read-modify-write's read phase is over: its writes go next (next_phase()). */
	if (phase == Phase::read && native && !err) {
		sched->next_phase(*this);
		return;
	}
	sched->complete(*this, err);
}

Scheduler::Scheduler(Backend &be, Stats &stats, uint32_t max_batches, RunSync run_sync)
	: be_(be), stats_(stats), max_batches_(max_batches), run_sync_(std::move(run_sync))
{
}

Scheduler::~Scheduler()
{
	close();
	if (efd_ >= 0)
		::close(efd_);
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
	job.batch = Batch{job.io_dir(), job.io_objects(), job.io_count(), job.io_results(), {}, &job, 0, priority};
	job.batch.object_notice = (job.flags & KVBLK_SUBMIT_PER_OBJECT) && !job.defer_object_entries && !job.sync;
	/* A read-modify-write's write phase starts from its read phase's end, where the backend allows it. */
	const bool can_start = be_.async_mode() == KVBLK_ASYNC_NATIVE && job.path != KVBLK_PATH_STAGED &&
			       be_.can_start(job.batch) &&
			       (job.phase != Job::Phase::read || be_.starts_from_batch_done());
	if (job.sync)
		job.held.reserve(job.entries()); /* claimed from birth: its entries go there */
	const testing::Seams *seams = testing::active();

	std::unique_lock<std::mutex> lk(mu_);
	bool waited = false;
	int ret = 0;
	while (!shut_ && table_.size() >= max_batches_) {
		if (nonblock)
			return fail(-EAGAIN, "kvblk_submit: %u batches are outstanding (max_batches); reap some first",
				    max_batches_);
		submitters_waiting_++;
		if (seams && seams->on_slot_wait)
			seams->on_slot_wait();
		slot_cv_.wait(lk);
		submitters_waiting_--;
		waited = true;
	}
	if (shut_)
		ret = fail(-ECANCELED, "kvblk_submit: the handle is shut down (kvblk_shutdown()): nothing is queued");
	if (!ret && waited && seams && seams->on_slot_taken)
		ret = seams->on_slot_taken();
	/*
	 * A store takes its range locks now, in submission order: one that meets an earlier
	 * store's read-modify-write (or whose own meets an earlier store) is parked until those
	 * complete (complete() starts or unparks it).
	 */
	bool locked = false, parked = false;
	if (!ret && !job.lock.empty()) {
		try {
			parked = !locks_.acquire(job.lock);
			locked = true;
		} catch (const std::bad_alloc &) {
			ret = fail(-ENOMEM, "kvblk_submit: out of memory");
		}
	}
	/*
	 * A synchronous call with nothing to wait behind on the dispatch path is served on its
	 * own thread (run()), unless the backend starts it (a native one, except kmod, whose
	 * one ioctl is cheaper than a trip through its ring).
	 */
	const bool here = !parked && job.sync && job.path != KVBLK_PATH_STAGED && !dispatching_ &&
			  prio_q_.empty() && normal_q_.empty() && (!can_start || be_.run_sync_inline());
	job.native = can_start && !here;
	if (!ret && !job.native && !here)
		ret = start_dispatch_locked();
	/*
	 * Every allocation before anything changes: the table's node, the room of its completion
	 * entries, its place in the dispatch queue (a parked job waits there too; the dispatch
	 * thread passes it by until it is unparked).
	 */
	const bool queue = !job.native && !here;
	std::deque<Job *> &q = priority ? prio_q_ : normal_q_;
	if (!ret) {
		bool in_table = false, reserved = false;
		try {
			in_table = table_.try_emplace(next_ticket_, &job).second;
			cq_.reserve(job.entries());
			reserved = true;
			if (queue)
				q.push_back(&job);
		} catch (const std::bad_alloc &) {
			if (reserved)
				cq_.unreserve(job.entries());
			if (in_table)
				table_.erase(next_ticket_);
			ret = fail(-ENOMEM, "kvblk_submit: out of memory");
		}
	}
	if (ret && locked) {
		/* Registered last: no node waits for it yet. */
		LockNode *none = nullptr;
		locks_.release(job.lock, &none);
	}
	if (ret) {
		/* A slot freed for this submitter that it does not take goes to the next one. */
		if (waited && submitters_waiting_ && table_.size() < max_batches_)
			slot_cv_.notify_one();
		return ret;
	}
	job.ticket = next_ticket_++;
	job.batch.id = job.ticket;
	job.t_submit = now_ns();
	job.claimed = job.sync;
	running_++;
	if (!job.internal)
		stats_.record_submit(priority, table_.size());
	Job *j = jp.release();
	*ticket = j->ticket;
	j->parked = parked;
	if (parked && !j->internal)
		stats_.record_range_wait();
	if (parked && job.native)
		return 0; /* started by the complete() that grants it */
	if (queue) {
		disp_cv_.notify_one();
		if (seams && seams->on_queued)
			seams->on_queued(j->ticket);
		return 0;
	}
	if (here) {
		/* Nothing to wait behind: serve it here, one job at a time as ever. */
		dispatching_ = true;
		j->state = Job::State::running;
		lk.unlock();
		j->batch_done(serve(*j));
		lk.lock();
		dispatching_ = false;
		if (!prio_q_.empty() || !normal_q_.empty())
			disp_cv_.notify_one();
		return 0;
	}
	j->state = Job::State::running;
	lk.unlock();
	/* From here the job may complete, and be taken and freed, on another thread. */
	start_native(*j);
	return 0;
}

void Scheduler::start_native(Job &job) noexcept
{
	/* Nothing to move (loads that KVBLK_DESC_SHORT_EOF cut to nothing): over at once. */
	if (job.io_count() == 0) {
		job.batch_done(0);
		return;
	}
	/*
	 * kvblk_cancel() or kvblk_close() since the job left the queue or its range locks (its
	 * backend had nothing to cancel yet): nothing of it is issued. A request after this test
	 * reaches the backend, which cancels what it has not issued.
	 */
	if (job.cancelled()) {
		cancel_queued(job);
		return;
	}
	be_.start(job.batch);
}

bool Scheduler::begin_write(Job &job) noexcept
{
	job.read_counters = job.batch.counters;
	job.batch.counters = BatchCounters{};
	job.store.fill();
	job.phase = Job::Phase::write;
	job.aim_batch();
	if (job.cancelled()) {
		/* kvblk_cancel() (or kvblk_close()) came during the reads: nothing is written. */
		for (uint32_t k = 0; k < job.batch.count; k++)
			job.batch.results[k] = kvblk_result{-ECANCELED, 0, 0, 0};
		return false;
	}
	return job.batch.count != 0;
}

void Scheduler::next_phase(Job &job) noexcept
{
	if (begin_write(job))
		be_.start(job.batch);
	else
		complete(job, 0);
}

int Scheduler::serve(Job &job) noexcept
{
	if (job.io_count() == 0)
		return 0;
	const int ret = run_sync_(job);
	if (ret || job.phase != Job::Phase::read)
		return ret;
	return begin_write(job) ? run_sync_(job) : 0;
}

void Scheduler::grant_locked(LockNode *granted, Job **to_start) noexcept
{
	bool queued = false;
	for (LockNode *n = granted; n; n = n->next_granted) {
		Job &w = *static_cast<Job *>(n->owner);
		if (!w.parked)
			continue; /* cancelled meanwhile (kvblk_cancel(), kvblk_close()) */
		w.parked = false;
		if (w.native) {
			w.state = Job::State::running;
			w.start_link = *to_start;
			*to_start = &w;
		} else {
			queued = true; /* in the dispatch queue already */
		}
	}
	if (queued)
		disp_cv_.notify_one();
}

void Scheduler::start_all(Job *list) noexcept
{
	while (list) {
		Job *next = list->start_link; /* @list may be freed once started */
		start_native(*list);
		list = next;
	}
}

bool Scheduler::pop_runnable_locked(Job **out) noexcept
{
	for (std::deque<Job *> *q : {&prio_q_, &normal_q_}) {
		for (auto it = q->begin(); it != q->end(); ++it) {
			if ((*it)->parked)
				continue;
			*out = *it;
			q->erase(it);
			return true;
		}
	}
	return false;
}

void Scheduler::dispatch_main()
{
	std::unique_lock<std::mutex> lk(mu_);
	for (;;) {
		Job *j = nullptr;
		disp_cv_.wait(lk, [&] { return stop_ || (!dispatching_ && pop_runnable_locked(&j)); });
		if (!j)
			return; /* stop_ and nothing queued (shutdown() waited for every job) */
		j->state = Job::State::running;
		dispatching_ = true;
		lk.unlock();
		j->batch_done(serve(*j));
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

void Scheduler::wake_reapers_locked() noexcept
{
	if (reapers_waiting_) {
		cq_seq_.fetch_add(1, std::memory_order_relaxed);
		futex_wake_all(cq_seq_);
	}
}

void Scheduler::wake_waiters_locked(Job &job) noexcept
{
	if (job.waiters) {
		job.seq.fetch_add(1, std::memory_order_relaxed);
		futex_wake_all(job.seq);
	}
}

void Scheduler::post_locked(Job &job, const kvblk_cqe &e) noexcept
{
	if (job.claimed) {
		/* Room for entries() is reserved when the job is claimed: no allocation. */
		if (job.held.size() < job.held.capacity())
			job.held.push_back(e);
		return;
	}
	cq_.push(e); /* its room was reserved at submit */
	if (!event_set_)
		set_event_locked(true);
	wake_reapers_locked();
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
	std::lock_guard<std::mutex> g(mu_);
	post_locked(job, e);
}

void Scheduler::complete(Job &job, int err) noexcept
{
	const uint32_t n = job.count();
	UnalignedTotals ut;
	StoreTotals st_tot;
	if (job.split_store && job.phase == Job::Phase::read) {
		/*
		 * Ended before its writes (cancelled while parked or queued, or the reads failed
		 * as a whole): none is issued; what fill() does not drop ends -ECANCELED.
		 */
		(void)begin_write(job);
		for (uint32_t k = 0; k < job.batch.count; k++)
			job.batch.results[k] = kvblk_result{-ECANCELED, 0, 0, 0};
	}
	if (job.split_store)
		job.batch.counters.merge(job.read_counters);
	if (err) {
		/* Nothing was moved. Synchronous calls keep 0.2's -ECANCELED and return @err. */
		job.fatal = err;
		try {
			job.note = last_error(); /* the thread that ran the backend set it */
		} catch (const std::bad_alloc &) {
			/* the errno alone, then */
		}
		for (uint32_t i = 0; i < n; i++) {
			job.results[i].status = job.sync ? -ECANCELED : err;
			job.results[i].bytes = 0;
		}
	} else if (job.any_unaligned) {
		/* The parts' results become the objects' and their bounced edges are copied. */
		job.unaligned.finish(job.results, &ut);
	} else if (job.split_store) {
		/* The reads' and writes' results become the objects'. */
		job.store.finish(job.results, &st_tot);
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
	sum.short_eof_objects = ut.short_objects;
	sum.unaligned_stores = st_tot.objects;
	sum.rmw_read_bytes = st_tot.read_bytes;
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
	job.bytes_device = job.any_unaligned ? ut.bytes_device : job.split_store ? st_tot.bytes_device : sum.bytes_ok;
	if (job.internal) {
		/* the library's own batch: not the program's, not counted */
	} else if (err) {
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

	Job *to_start = nullptr;
	{
		std::lock_guard<std::mutex> g(mu_);
		job.state = Job::State::completed;
		job.done_entry = e;
		running_--;
		/* Its range locks go before anyone sees it complete: the stores that waited for it start. */
		if (job.lock.registered) {
			LockNode *granted = nullptr;
			locks_.release(job.lock, &granted);
			grant_locked(granted, &to_start);
		}
		post_locked(job, e);
		wake_waiters_locked(job);
		if (running_ == 0)
			idle_cv_.notify_all();
	}
	/* @job may be taken and freed from here on; the granted jobs are outstanding. */
	start_all(to_start);
}

void Scheduler::take_locked(Job &job, Job **to_free) noexcept
{
	job.taken = true;
	table_.erase(job.ticket);
	cq_.unreserve(job.entries());
	if (submitters_waiting_)
		slot_cv_.notify_one();
	if (job.waiters) {
		/*
		 * Other kvblk_wait()s of the ticket see it taken and the last one frees it, maybe
		 * after this taker returned: the batch's buffers and targets are the caller's again
		 * now, so its pins go here (lock order: mu_, then the tables' locks).
		 */
		job.pins.release();
		wake_waiters_locked(job);
	} else {
		job.link = *to_free;
		*to_free = &job;
	}
}

void Scheduler::free_jobs(Job *list) noexcept
{
	while (list) {
		Job *next = list->link;
		delete list; /* drops its pins of buffers and targets */
		list = next;
	}
}

int Scheduler::reap(kvblk_cqe *cqes, uint32_t max, uint32_t min_complete, int64_t timeout_ns)
{
	Job *to_free = nullptr;
	std::unique_lock<std::mutex> lk(mu_);
	int ended = 0; /* -EINTR or -ECANCELED: why the wait ended early */
	if (cq_.size() < min_complete && timeout_ns != 0) {
		const uint64_t dl = deadline_of(timeout_ns);
		reapers_waiting_++;
		while (cq_.size() < min_complete) {
			if (shut_) {
				ended = -ECANCELED;
				break;
			}
			const uint32_t seen = cq_seq_.load(std::memory_order_relaxed);
			lk.unlock();
			const int r = futex_wait_until(cq_seq_, seen, dl);
			lk.lock();
			if (r == -ETIMEDOUT)
				break;
			if (r == -EINTR) {
				ended = -EINTR;
				break;
			}
		}
		reapers_waiting_--;
	}
	const uint32_t k = uint32_t(std::min<size_t>(max, cq_.size()));
	if (k == 0 && ended == -EINTR)
		return fail(-EINTR, "kvblk_reap: a signal handler ran while it waited; nothing was taken");
	if (k == 0 && ended)
		return fail(-ECANCELED, "kvblk_reap: the handle is shut down (kvblk_shutdown()); nothing was taken");
	for (uint32_t i = 0; i < k; i++) {
		cqes[i] = cq_.pop();
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

int Scheduler::wait(uint64_t ticket, int64_t timeout_ns, Outcome *out, bool external)
{
	Job *to_free = nullptr;
	std::unique_lock<std::mutex> lk(mu_);
	auto it = table_.find(ticket);
	if (it == table_.end() || (external && it->second->sync))
		return fail(-ENOENT, "kvblk_wait: ticket %llu is not outstanding (never submitted, or already "
				     "reaped or waited for)", (unsigned long long)ticket);
	Job &job = *it->second;
	if (job.state != Job::State::completed) {
		if (external && shut_)
			return fail(-ECANCELED, "kvblk_wait: the handle is shut down (kvblk_shutdown()); batch %llu has "
						"not completed and stays outstanding", (unsigned long long)ticket);
		if (timeout_ns == 0)
			return fail(-ETIME, "kvblk_wait: batch %llu has not completed", (unsigned long long)ticket);
	}

	/* Claim the batch: its entries already queued leave the queue, later ones never enter. */
	if (!job.claimed) {
		job.held.reserve(job.entries()); /* may throw: nothing changed yet */
		job.claimed = true;
		const size_t before = cq_.size();
		cq_.extract([&](const kvblk_cqe &e) { return e.ticket == ticket; }, job.held);
		if (cq_.empty() && before && event_set_)
			set_event_locked(false);
	}
	if (job.state != Job::State::completed) {
		const uint64_t dl = deadline_of(timeout_ns);
		const testing::Seams *seams = testing::active();
		int ended = -ETIME;
		job.waiters++;
		while (job.state != Job::State::completed && !job.taken) {
			if (external && shut_) {
				ended = -ECANCELED;
				break;
			}
			if (seams && seams->on_wait_sleep)
				seams->on_wait_sleep(ticket);
			const uint32_t seen = job.seq.load(std::memory_order_relaxed);
			lk.unlock();
			const int r = futex_wait_until(job.seq, seen, dl);
			lk.lock();
			if (r == -ETIMEDOUT)
				break;
			if (r == -EINTR && external) {
				ended = -EINTR;
				break;
			}
		}
		job.waiters--;
		if (job.taken) { /* another kvblk_wait() of the same ticket took it */
			if (job.waiters == 0) {
				job.link = to_free;
				to_free = &job;
			}
			lk.unlock();
			free_jobs(to_free);
			return fail(-ENOENT, "kvblk_wait: batch %llu was taken by another kvblk_wait()",
				    (unsigned long long)ticket);
		}
		if (job.state != Job::State::completed) {
			/* The wait ended early: the batch stays outstanding and its entries go back to the reapers. */
			if (job.waiters == 0 && !job.sync) {
				job.claimed = false;
				for (const kvblk_cqe &e : job.held)
					cq_.push(e); /* their room stayed reserved */
				job.held.clear();
				if (!cq_.empty()) {
					set_event_locked(true);
					wake_reapers_locked();
				}
			}
			if (ended == -EINTR)
				return fail(-EINTR, "kvblk_wait: a signal handler ran while it waited; batch %llu stays "
						    "outstanding", (unsigned long long)ticket);
			if (ended == -ECANCELED)
				return fail(-ECANCELED, "kvblk_wait: the handle was shut down (kvblk_shutdown()) while it "
							"waited; batch %llu stays outstanding", (unsigned long long)ticket);
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

int Scheduler::run(std::unique_ptr<Job> job, Outcome *out)
{
	job->sync = true;
	uint64_t ticket = 0;
	const int ret = submit(job, false, &ticket);
	if (ret)
		return ret;
	return wait(ticket, -1, out, false);
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

int Scheduler::cancel(uint64_t ticket, bool external)
{
	std::unique_lock<std::mutex> lk(mu_);
	auto it = table_.find(ticket);
	if (it == table_.end() || it->second->state == Job::State::completed || (external && it->second->sync))
		return fail(-ENOENT, "kvblk_cancel: ticket %llu is not outstanding or has completed",
			    (unsigned long long)ticket);
	Job &job = *it->second;
	job.cancel_requested.store(true, std::memory_order_relaxed);
	if (job.state == Job::State::queued) {
		/* Queued for the dispatch thread, or parked (range locks; native or not): never started. */
		for (std::deque<Job *> *q : {&prio_q_, &normal_q_}) {
			auto pos = std::find(q->begin(), q->end(), &job);
			if (pos != q->end())
				q->erase(pos);
		}
		job.parked = false;
		job.state = Job::State::running;
		lk.unlock();
		cancel_queued(job);
		return 0;
	}
	if (job.native) {
		lk.unlock();
		be_.cancel(ticket); /* by ticket: the job may complete and go meanwhile */
		return 0;
	}
	/* Running on the dispatch thread: the backend (or the staged path) checks cancelled(). */
	return 0;
}

void Scheduler::shutdown() noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	if (shut_)
		return;
	shut_ = true;
	wake_reapers_locked();
	for (auto &kv : table_)
		wake_waiters_locked(*kv.second);
	slot_cv_.notify_all();
}

void Scheduler::close() noexcept
{
	/* Lists through Job::link: nothing here allocates (kvblk_close() cannot fail). */
	Job *native = nullptr, *queued = nullptr;
	{
		std::lock_guard<std::mutex> g(mu_);
		if (stop_)
			return;
		shut_ = true;
		for (auto &kv : table_) {
			Job &j = *kv.second;
			if (j.state == Job::State::completed)
				continue;
			j.cancel_requested.store(true, std::memory_order_relaxed);
			if (j.state == Job::State::queued) {
				/* Queued or parked: never started (and a grant no longer starts it). */
				j.parked = false;
				j.state = Job::State::running;
				j.link = queued;
				queued = &j;
			} else if (j.native) {
				j.link = native;
				native = &j;
			}
			/* running on the dispatch thread: the backend checks cancelled() */
		}
		prio_q_.clear();
		normal_q_.clear();
	}
	/* Nobody takes a job meanwhile (no other call runs): every Job * stays valid. */
	for (Job *j = native; j; j = j->link)
		be_.cancel(j->ticket);
	for (Job *j = queued; j;) {
		Job *next = j->link;
		cancel_queued(*j);
		j = next;
	}
	std::unordered_map<uint64_t, Job *> jobs;
	{
		std::unique_lock<std::mutex> lk(mu_);
		idle_cv_.wait(lk, [&] { return running_ == 0; });
		stop_ = true;
		disp_cv_.notify_all();
	}
	if (dispatcher_.joinable())
		dispatcher_.join();
	{
		std::lock_guard<std::mutex> g(mu_);
		jobs.swap(table_);
		cq_.clear();
	}
	for (const auto &kv : jobs)
		delete kv.second;
}

} // namespace kvblk::detail

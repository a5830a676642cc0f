// SPDX-License-Identifier: MIT
#include "uring_core.hpp"

#include "last_error.hpp"
#include "threads.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <new>
#include <string>
#include <system_error>
#include <unistd.h>

namespace kvblk::detail {
namespace {

/* Submissions refused for lack of resources (-EAGAIN, -EBUSY, ...) in a row before giving up. */
constexpr unsigned kMaxTransientRefusals = 10000;

BufferRegistration fallback(const char *note) noexcept
{
	BufferRegistration r;
	r.fell_back = true;
	r.set_note(note);
	return r;
}

struct ObjectState {
	std::atomic<uint64_t> pending;	/* commands not yet completed */
	std::atomic<int32_t> status;	/* first error of any of its commands */
	std::atomic<uint64_t> eof_at;	/* lowest object offset where a read met the end of the file */
	std::atomic<bool> other_error;	/* a command failed with something else than -ENODATA */
};

/* Commands run synchronously (run()) are waited for here. */
struct SyncWait {
	std::mutex mu;
	std::condition_variable cv;
	bool done = false;
};

} // namespace

/* One started batch, shared by every ring. */
struct RingBatch {
	Batch *b = nullptr;
	uint64_t id = 0;		/* what cancel() names; 0 for run() */
	bool priority = false;
	SyncWait *waiter = nullptr;	/* run(): told instead of the sink */
	std::vector<uint64_t> first_cmd; /* count + 1 entries: first command of each object */
	std::unique_ptr<ObjectState[]> state;
	uint64_t next_cmd = 0;		/* under qmu_: the next command to take */
	uint32_t next_obj = 0;		/* under qmu_: its object (object_of(next_cmd), kept as it grows) */
	uint64_t end_cmd = 0;		/* under qmu_: commands beyond are not taken (cancel) */
	uint32_t live_end = 0;		/* under qmu_: objects from here on were cancelled */
	std::atomic<uint32_t> objects_left{0};
	std::atomic<uint64_t> commands{0}, short_resubmits{0}, eagain_retries{0}, peak{0};
	std::array<std::atomic<uint64_t>, KVBLK_LAT_BUCKETS> lat{};

	uint32_t object_of(uint64_t c) const noexcept
	{
		return uint32_t(std::upper_bound(first_cmd.begin(), first_cmd.end(), c) - first_cmd.begin() - 1);
	}

	/*
	 * Object of command @c, where @obj is that of an earlier command: commands are taken in
	 * order, so this walks forward (a step per object, 0 or 1 for objects of one command)
	 * where object_of() searches: load() searched once per command, and was a tenth of
	 * libkvblk's own CPU per 4 KiB read in batches of 64 (make vmbench-cpu, 2026-12-06).
	 */
	uint32_t object_from(uint32_t obj, uint64_t c) const noexcept
	{
		while (first_cmd[obj + 1] <= c)
			obj++;
		return obj;
	}
};

/*
 * One ring and the commands it has in flight. Used by whoever holds @drive: its own thread,
 * which lets go of it only while it sleeps idle in grab(), or a synchronous caller that
 * found it idle (UringCore::drive_inline()); the fixed table also under fixed_mu_.
 */
struct Ring {
	std::mutex drive;
	io_uring ring{};
	bool live = false;
	bool broken = false;
	bool overcommit = false;
	uint32_t cq_entries = 0;
	uint32_t cap = 0;
	uint32_t used = 0;
	/*
	 * The submission time issue() gives each command (RingCmd::t_submit): read once per
	 * burst of issues, not per command (one clock read per reap pass, per drive_inline() and
	 * per grab(), which come before every issue()), for the latency histogram.
	 */
	uint64_t issue_ns = 0;
	int fixed_table = -ENODEV;
	int file_table = -ENODEV;
	std::vector<RingCmd> slots;
	std::vector<uint32_t> free;
	std::vector<uint32_t> pending;	/* slots to (re)submit when the SQ has room */
	std::array<std::atomic<bool>, kMaxBuffers> fixed_live{};
	std::array<std::atomic<int>, kFixedFiles> file_fd{};	/* what each file slot holds, or -1 */

	~Ring() { exit(); }

	int init(const RingSetup &s)
	{
		io_uring_params p{};
		const unsigned base = s.ring_flags | (s.overcommit > 1 ? IORING_SETUP_CQSIZE : 0);
		p.flags = base | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL;
		p.cq_entries = s.queue_depth;
		int ret = io_uring_queue_init_params(s.queue_depth, &ring, &p);
		if (ret == -EINVAL) { /* kernel older than 5.19: without the optional flags */
			p = io_uring_params{};
			p.flags = base;
			p.cq_entries = s.queue_depth;
			ret = io_uring_queue_init_params(s.queue_depth, &ring, &p);
		}
		if (ret < 0)
			return ret;
		/*
		 * A child made by fork() gets no mapping of the rings (MADV_DONTFORK through
		 * liburing): a stray write to the inherited copy faults in the child instead of
		 * corrupting the parent's SQ.
		 * The library never uses a handle in a child (fork_guard.hpp); best effort.
		 */
		(void)io_uring_ring_dontfork(&ring);
		live = true;
		broken = false;
		cq_entries = p.cq_entries;
		overcommit = s.overcommit > 1;
		cap = s.queue_depth * std::max(s.overcommit, 1u);
		used = 0;
		slots.assign(cap, RingCmd{});
		free.clear();
		for (uint32_t i = cap; i-- > 0;)
			free.push_back(i);
		pending.clear();
		pending.reserve(cap);
		fixed_table = s.fixed_buffers ? io_uring_register_buffers_sparse(&ring, kMaxBuffers) : -ENODEV;
		for (auto &f : fixed_live)
			f.store(false, std::memory_order_relaxed);
		file_table = s.fixed_files ? io_uring_register_files_sparse(&ring, kFixedFiles) : -ENODEV;
		for (auto &f : file_fd)
			f.store(-1, std::memory_order_relaxed);
		return 0;
	}

	void exit() noexcept
	{
		if (live)
			io_uring_queue_exit(&ring);
		live = false;
	}

	/* Put [base, base+len) into fixed slot @id (len 0: empty the slot). 0 or -errno. */
	int update_fixed(uint32_t id, uint8_t *base, uint64_t len) noexcept
	{
		iovec iov{base, len};
		const int ret = io_uring_register_buffers_update_tag(&ring, id, &iov, nullptr, 1);
		if (ret < 0)
			return ret;
		fixed_live[id].store(len != 0, std::memory_order_release);
		return 0;
	}

	/* Put @fd into registered-file slot @id (-1: empty it); on failure the slot is unused. */
	void update_file(uint32_t id, int fd) noexcept
	{
		if (file_table != 0)
			return;
		const int ret = io_uring_register_files_update(&ring, id, &fd, 1);
		file_fd[id].store(ret == 1 ? fd : -1, std::memory_order_release);
	}
};

UringCore::UringCore() : fixed_(kMaxBuffers, iovec{}), files_(kFixedFiles, -1) {}

UringCore::~UringCore()
{
	stop_rings();
	rings_.clear();
}

int UringCore::create_rings(const RingSetup &s)
{
	setup_ = s;
	for (uint32_t i = 0; i < s.rings; i++) {
		auto r = std::make_unique<Ring>();
		const int ret = r->init(s);
		if (ret < 0)
			return ret;
		rings_.push_back(std::move(r));
	}
	return 0;
}

int UringCore::start_threads()
{
	const RingSetup &s = setup_;
	threads_.reserve(rings_.size()); /* no allocation after a thread started */
	try {
		for (auto &r : rings_)
			threads_.push_back(start_library_thread([this, ring = r.get()] { ring_main(*ring); }));
	} catch (const std::system_error &e) {
		return fail(-(e.code().value() ? e.code().value() : EAGAIN), "%s: cannot start %u ring threads: %s",
			    kvblk_backend_name(s.kind), s.rings, e.what());
	}
	return 0;
}

void UringCore::stop_rings() noexcept
{
	{
		std::lock_guard<std::mutex> g(qmu_);
		stop_ = true;
	}
	qcv_.notify_all();
	for (std::thread &t : threads_)
		t.join();
	threads_.clear();
}

RingBatch *UringCore::make_batch(Batch &b)
{
	auto rb = std::make_unique<RingBatch>();
	rb->b = &b;
	rb->first_cmd.resize(size_t(b.count) + 1);
	rb->state.reset(new ObjectState[b.count]);
	rb->first_cmd[0] = 0;
	for (uint32_t i = 0; i < b.count; i++) {
		const uint64_t max_cmd = cmd_bytes(b.objects[i]);
		const uint64_t cmds = (b.objects[i].length + max_cmd - 1) / max_cmd;
		rb->first_cmd[i + 1] = rb->first_cmd[i] + cmds;
		rb->state[i].pending.store(cmds, std::memory_order_relaxed);
		rb->state[i].status.store(0, std::memory_order_relaxed);
		rb->state[i].eof_at.store(UINT64_MAX, std::memory_order_relaxed);
		rb->state[i].other_error.store(false, std::memory_order_relaxed);
	}
	rb->end_cmd = rb->first_cmd[b.count];
	rb->live_end = b.count;
	rb->objects_left.store(b.count, std::memory_order_relaxed);
	return rb.release();
}

void UringCore::enqueue(RingBatch *rb)
{
	const bool rb_sync = rb->waiter != nullptr; /* @rb may be over once queued */
	{
		std::lock_guard<std::mutex> g(qmu_);
		if (rb->priority)
			queue_.insert(queue_.begin() + std::ptrdiff_t(prio_count_++), rb);
		else
			queue_.push_back(rb);
	}
	qcv_.notify_all();
	const testing::Seams *seams = testing::active();
	if (seams && seams->on_ring_queued)
		seams->on_ring_queued(rb_sync);
}

int UringCore::run(Batch &b) noexcept
{
	SyncWait w;
	try {
		RingBatch *rb = make_batch(b);
		rb->waiter = &w;
		if (drive_inline(rb))
			return 0;
		enqueue(rb);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "%s: out of memory for a batch of %u objects", kvblk_backend_name(setup_.kind),
			    b.count);
	}
	std::unique_lock<std::mutex> lk(w.mu);
	w.cv.wait(lk, [&] { return w.done; });
	return 0;
}

void UringCore::start(Batch &b) noexcept
{
	try {
		RingBatch *rb = make_batch(b);
		rb->id = b.id;
		rb->priority = b.priority;
		enqueue(rb);
	} catch (const std::bad_alloc &) {
		b.sink->batch_done(fail(-ENOMEM, "%s: out of memory for a batch of %u objects",
					kvblk_backend_name(setup_.kind), b.count));
	}
}

void UringCore::cancel(uint64_t id) noexcept
{
	RingBatch *rb = nullptr;
	uint32_t from = 0, to = 0;
	{
		std::lock_guard<std::mutex> g(qmu_);
		auto it = std::find_if(queue_.begin(), queue_.end(), [id](const RingBatch *q) { return q->id == id; });
		if (it == queue_.end() || id == 0)
			return; /* not started by start(), or every command taken */
		rb = *it;
		const uint64_t c = rb->next_cmd;
		const uint32_t obj = rb->object_of(c);
		/* An object with commands taken finishes; the ones after it are cancelled. */
		from = c == rb->first_cmd[obj] ? obj : obj + 1;
		to = rb->live_end;
		if (from >= to)
			return;
		rb->live_end = from;
		rb->end_cmd = rb->first_cmd[from];
		if (rb->next_cmd >= rb->end_cmd) {
			if (rb->priority)
				prio_count_--;
			queue_.erase(it);
		}
	}
	/* None of these has a command in flight, so the batch cannot end before the last of them. */
	for (uint32_t i = from; i < to; i++)
		end_object(rb, i, -ECANCELED);
}

size_t UringCore::grab(Grab *out, size_t max, bool block)
{
	std::unique_lock<std::mutex> lk(qmu_);
	if (block)
		qcv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
	size_t k = 0;
	while (k < max && !queue_.empty()) {
		RingBatch *rb = queue_.front();
		while (k < max && rb->next_cmd < rb->end_cmd) {
			rb->next_obj = rb->object_from(rb->next_obj, rb->next_cmd);
			out[k++] = Grab{rb, rb->next_cmd++, rb->next_obj};
		}
		if (rb->next_cmd >= rb->end_cmd) {
			if (rb->priority)
				prio_count_--;
			queue_.pop_front();
		}
	}
	return k;
}

void UringCore::finish_command(RingBatch *rb, uint32_t obj, int32_t err) noexcept
{
	ObjectState &s = rb->state[obj];
	if (err && err != -ENODATA)
		s.other_error.store(true, std::memory_order_relaxed);
	if (err) {
		int32_t zero = 0;
		s.status.compare_exchange_strong(zero, err, std::memory_order_relaxed);
	}
	if (s.pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
		end_object(rb, obj, s.status.load(std::memory_order_relaxed));
}

void UringCore::end_object(RingBatch *rb, uint32_t obj, int32_t st) noexcept
{
	Batch &b = *rb->b;
	b.results[obj].status = st;
	b.results[obj].bytes = st ? 0 : b.objects[obj].length;
	if (st == -ENODATA) {
		/* The file shrank: every command below the lowest end met succeeded. */
		const ObjectState &s = rb->state[obj];
		const uint64_t eof = s.eof_at.load(std::memory_order_relaxed);
		if (!s.other_error.load(std::memory_order_relaxed) && eof != UINT64_MAX)
			b.results[obj].bytes = eof;
	}
	b.object_done(obj);
	if (rb->objects_left.fetch_sub(1, std::memory_order_acq_rel) == 1)
		finish_batch(rb);
}

void UringCore::finish_batch(RingBatch *rb) noexcept
{
	Batch &b = *rb->b;
	BatchCounters &c = b.counters;
	c.commands = rb->commands.load(std::memory_order_relaxed);
	c.short_resubmits = rb->short_resubmits.load(std::memory_order_relaxed);
	c.eagain_retries = rb->eagain_retries.load(std::memory_order_relaxed);
	c.inflight_peak = rb->peak.load(std::memory_order_relaxed);
	for (unsigned i = 0; i < KVBLK_LAT_BUCKETS; i++)
		c.cmd_lat_hist[i] = rb->lat[i].load(std::memory_order_relaxed);
	c.cq_overflows = overflows_.exchange(0, std::memory_order_relaxed);
	SyncWait *w = rb->waiter;
	delete rb;
	if (w) {
		std::lock_guard<std::mutex> g(w->mu);
		w->done = true;
		w->cv.notify_one();
	} else {
		b.sink->batch_done(0);
	}
}

bool UringCore::sq_room(Ring &r, uint64_t *in_kernel) noexcept
{
	if (io_uring_sq_space_left(&r.ring))
		return true;
	/* A full SQ (only when more commands than SQ entries are in flight): submit it first. */
	const int ret = io_uring_submit(&r.ring);
	if (ret > 0)
		*in_kernel += unsigned(ret);
	return io_uring_sq_space_left(&r.ring) > 0;
}

void UringCore::issue(Ring &r, uint32_t id) noexcept
{
	RingCmd &c = r.slots[id];
	RingBatch *rb = c.batch;
	const IoObject &o = rb->b->objects[c.obj];
	io_uring_sqe *sqe = io_uring_get_sqe(&r.ring); /* callers checked SQ space */
	const bool fixed = setup_.fixed_buffers && o.fixed_index >= 0 &&
			   r.fixed_live[o.fixed_index].load(std::memory_order_acquire);
	prep(sqe, c, o, rb->b->dir, fixed);
	/* Its target's registered file, if the slot holds this very fd (not a tail writer's). */
	if (setup_.fixed_files && o.target < kFixedFiles && !o.positional && o.fd >= 0 &&
	    r.file_fd[o.target].load(std::memory_order_acquire) == o.fd) {
		sqe->fd = int(o.target);
		sqe->flags |= IOSQE_FIXED_FILE;
	}
	io_uring_sqe_set_data64(sqe, id);
	c.t_submit = r.issue_ns;
	rb->commands.fetch_add(1, std::memory_order_relaxed);
}

void UringCore::release(Ring &r, uint32_t id, int32_t err) noexcept
{
	RingCmd &c = r.slots[id];
	RingBatch *rb = c.batch;
	const uint32_t obj = c.obj;
	c.in_use = false;
	c.batch = nullptr;
	r.free.push_back(id);
	r.used--;
	inflight_.fetch_sub(1, std::memory_order_relaxed);
	finish_command(rb, obj, err); /* may end the batch: @rb is gone after it */
}

void UringCore::complete(Ring &r, const io_uring_cqe *cqe, uint64_t now, const testing::Seams *seams) noexcept
{
	const uint32_t id = uint32_t(io_uring_cqe_get_data64(cqe));
	RingCmd &c = r.slots[id];
	RingBatch *rb = c.batch;
	const int64_t res = result(cqe, c, rb->b->objects[c.obj], rb->b->dir, seams);
	rb->lat[lat_bucket(now - c.t_submit)].fetch_add(1, std::memory_order_relaxed);

	if (res == -EAGAIN && c.eagains < setup_.eagain_retries) {
		c.eagains++;
		c.attempt++;
		rb->eagain_retries.fetch_add(1, std::memory_order_relaxed);
		r.pending.push_back(id);
		return;
	}
	if (res >= 0 && uint64_t(res) < c.len - c.done &&
	    eof_is_complete(rb->b->objects[c.obj], c.cmd_off + c.done + uint64_t(res))) {
		release(r, id, 0); /* the end of the file, with every byte wanted in */
		return;
	}
	if (res > 0 && uint64_t(res) < c.len - c.done) {
		c.done += uint64_t(res);
		c.attempt++;
		rb->short_resubmits.fetch_add(1, std::memory_order_relaxed);
		r.pending.push_back(id);
		return;
	}
	if (res == 0) { /* the end of the file: remember where, for the valid prefix */
		std::atomic<uint64_t> &eof = rb->state[c.obj].eof_at;
		uint64_t at = c.cmd_off + c.done, cur = eof.load(std::memory_order_relaxed);
		while (at < cur && !eof.compare_exchange_weak(cur, at, std::memory_order_relaxed))
			;
	}
	release(r, id, res < 0 ? int32_t(res) : res == 0 ? -ENODATA : 0);
}

void UringCore::reap(Ring &r, uint64_t *in_kernel) noexcept
{
	const testing::Seams *seams = testing::active();
	for (unsigned pass = 0; pass < 1024; pass++) {
		unsigned head, seen = 0;
		io_uring_cqe *cqe;
		const uint64_t now = now_ns();
		r.issue_ns = now; /* what the commands issued after this pass were submitted at */
		io_uring_for_each_cqe(&r.ring, head, cqe) {
			complete(r, cqe, now, seams);
			seen++;
		}
		io_uring_cq_advance(&r.ring, seen);
		*in_kernel -= seen;
		if (!io_uring_cq_has_overflow(&r.ring))
			return;
		/* The CQ was full: the kernel kept the rest on its overflow list. */
		overflows_.fetch_add(1, std::memory_order_relaxed);
		const int ret = io_uring_get_events(&r.ring);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && seen == 0)
			return;
	}
}

/* Test seam (uring_overcommit): hold off reaping until the kernel has overflowed. */
void UringCore::wait_for_overflow(Ring &r, uint64_t in_kernel) noexcept
{
	if (in_kernel <= r.cq_entries)
		return;
	for (int i = 0; i < 4000 && !io_uring_cq_has_overflow(&r.ring); i++)
		usleep(250);
}

/*
 * The kernel refused a submission for good. Wait for what it accepted (it may still write
 * into the caller's memory), then fail every command this ring holds. The ring may hold
 * unsubmitted SQEs now: it is rebuilt before it takes more.
 */
void UringCore::abandon(Ring &r, int err, uint64_t *in_kernel) noexcept
{
	while (*in_kernel > 0) {
		io_uring_cqe *cqe;
		const int ret = io_uring_wait_cqe(&r.ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			break;
		reap(r, in_kernel);
	}
	r.pending.clear();
	for (uint32_t id = 0; id < r.cap; id++)
		if (r.slots[id].in_use)
			release(r, id, err);
	r.broken = true;
}

int UringCore::rebuild(Ring &r) noexcept
{
	std::lock_guard<std::mutex> g(fixed_mu_);
	r.exit();
	const int ret = r.init(setup_);
	if (ret < 0)
		return fail(ret, "%s: cannot rebuild a ring after a failed submission: %s",
			    kvblk_backend_name(setup_.kind), errno_text(ret).c_str());
	if (setup_.fixed_buffers && r.fixed_table == 0)
		for (uint32_t id = 0; id < kMaxBuffers; id++)
			if (fixed_[id].iov_len)
				r.update_fixed(id, static_cast<uint8_t *>(fixed_[id].iov_base), fixed_[id].iov_len);
	for (uint32_t id = 0; id < kFixedFiles; id++)
		if (files_[id] >= 0)
			r.update_file(id, files_[id]);
	return 0;
}

void UringCore::set_fixed_file(uint32_t id, int fd) noexcept
{
	if (!setup_.fixed_files || id >= kFixedFiles)
		return;
	std::lock_guard<std::mutex> g(fixed_mu_);
	files_[id] = fd;
	for (auto &ring : rings_)
		if (ring->live)
			ring->update_file(id, fd);
}

void UringCore::issue_pending(Ring &r, uint64_t *in_kernel) noexcept
{
	while (!r.pending.empty() && sq_room(r, in_kernel)) {
		issue(r, r.pending.back());
		r.pending.pop_back();
	}
}

void UringCore::load(Ring &r, RingBatch *rb, uint64_t cmd, uint32_t obj, uint64_t *in_kernel) noexcept
{
	const IoObject &o = rb->b->objects[obj];
	const uint64_t max_cmd = cmd_bytes(o);
	const uint64_t off = (cmd - rb->first_cmd[obj]) * max_cmd;
	const uint32_t id = r.free.back();
	r.free.pop_back();
	RingCmd &c = r.slots[id];
	c = RingCmd{rb, obj, 0, 0, true, off, std::min(max_cmd, o.length - off), 0, 0};
	r.used++;
	const uint64_t now = inflight_.fetch_add(1, std::memory_order_relaxed) + 1;
	uint64_t p = rb->peak.load(std::memory_order_relaxed);
	while (now > p && !rb->peak.compare_exchange_weak(p, now, std::memory_order_relaxed))
		;
	if (sq_room(r, in_kernel))
		issue(r, id);
	else
		r.pending.push_back(id);
}

int UringCore::submit_and_reap(Ring &r, uint64_t *in_kernel, unsigned *refusals) noexcept
{
	unsigned want = 1;
	if (r.overcommit)
		want = unsigned(std::min<uint64_t>(r.cq_entries, *in_kernel + io_uring_sq_ready(&r.ring)));
	const int ret = io_uring_submit_and_wait(&r.ring, want);
	if (ret >= 0) {
		*in_kernel += unsigned(ret);
		*refusals = 0;
	} else if (ret == -EINTR || ret == -EAGAIN || ret == -EBUSY || ret == -ENOMEM) {
		if (++*refusals > kMaxTransientRefusals) {
			abandon(r, ret, in_kernel);
			*refusals = 0;
			return ret;
		}
		if (*in_kernel == 0)
			usleep(1000);
	} else {
		abandon(r, ret, in_kernel);
		return ret;
	}
	if (r.overcommit)
		wait_for_overflow(r, *in_kernel);
	reap(r, in_kernel);
	return 0;
}

bool UringCore::drive_inline(RingBatch *rb) noexcept
{
	const uint64_t end = rb->end_cmd;
	if (end == 0)
		return false;
	for (auto &rp : rings_) {
		Ring &r = *rp;
		/* Several rings share a batch larger than one ring's depth: the queue spreads it. */
		if (rings_.size() > 1 && end > r.cap)
			return false;
		std::unique_lock<std::mutex> drive(r.drive, std::try_to_lock);
		if (!drive.owns_lock() || r.broken || r.used || !r.pending.empty())
			continue;
		{
			/* Queued batches are older: they go first, through the rings' threads. */
			std::lock_guard<std::mutex> g(qmu_);
			if (stop_ || !queue_.empty())
				return false;
		}
		uint64_t next = 0, in_kernel = 0;
		uint32_t obj = 0;
		unsigned refusals = 0;
		r.issue_ns = now_ns();
		for (;;) {
			issue_pending(r, &in_kernel);
			while (r.pending.empty() && r.used < r.cap && next < end) {
				obj = rb->object_from(obj, next);
				load(r, rb, next++, obj, &in_kernel);
			}
			if (r.used == 0)
				break; /* every command completed: the batch is over, @rb is gone */
			const int err = submit_and_reap(r, &in_kernel, &refusals);
			if (err) {
				/* abandon() failed what was in flight; the rest fails alike (the ring thread rebuilds). */
				while (next < end)
					finish_command(rb, rb->object_of(next++), err);
				break;
			}
		}
		return true;
	}
	return false;
}

/* Grabbed commands that will not be issued: fail them (every batch still completes). */
void UringCore::fail_grabbed(const Grab *g, size_t k, int err) noexcept
{
	for (size_t i = 0; i < k; i++)
		finish_command(g[i].batch, g[i].obj, err);
}

void UringCore::ring_main(Ring &r) noexcept
{
	std::vector<Grab> grabbed(r.cap);
	uint64_t in_kernel = 0; /* submitted and not yet reaped */
	unsigned refusals = 0;
	std::unique_lock<std::mutex> drive(r.drive);
	for (;;) {
		if (r.broken) {
			const int err = rebuild(r);
			if (err) {
				/* Take work and fail it, so that every batch completes; retry the rebuild next time. */
				const size_t k = grab(grabbed.data(), grabbed.size(), true);
				if (k == 0)
					return;
				fail_grabbed(grabbed.data(), k, err);
				continue;
			}
			grabbed.resize(r.cap);
			in_kernel = 0;
		}
		issue_pending(r, &in_kernel);
		if (r.pending.empty() && r.used < r.cap) {
			/*
			 * Idle: sleep until a batch is queued, the ring free for a synchronous caller
			 * meanwhile (drive_inline(), which leaves it idle again or broken). Busy: take
			 * what is there and go on.
			 */
			const bool idle = r.used == 0;
			/* Read before letting go: a caller driving the ring meanwhile changes r.used. */
			const size_t room = r.cap - r.used;
			if (idle)
				drive.unlock();
			size_t k = grab(grabbed.data(), room, idle);
			if (idle) {
				drive.lock();
				if (r.broken && k) {
					const int err = rebuild(r);
					if (err) {
						fail_grabbed(grabbed.data(), k, err);
						continue;
					}
					in_kernel = 0;
				}
			}
			if (k)
				r.issue_ns = now_ns(); /* grab() may have slept */
			for (size_t i = 0; i < k; i++)
				load(r, grabbed[i].batch, grabbed[i].cmd, grabbed[i].obj, &in_kernel);
		}
		if (r.used == 0)
			return; /* grab() came back empty: stop_ */
		(void)submit_and_reap(r, &in_kernel, &refusals);
	}
}

BufferRegistration UringCore::register_buffer(uint32_t id, uint8_t *base, uint64_t len) noexcept
{
	if (!setup_.fixed_buffers)
		return {};
	BufferRegistration r;
	char note[400];
	std::lock_guard<std::mutex> g(fixed_mu_);
	for (auto &ring : rings_) {
		if (ring->fixed_table) {
			std::snprintf(note, sizeof(note),
				      "buffer %u (%llu bytes): this kernel gave io_uring no fixed-buffer table "
				      "(%s); loads into it use plain reads (stats.memlock_fallbacks)",
				      id, (unsigned long long)len, ErrnoText(ring->fixed_table).c_str());
			return fallback(note);
		}
	}
	if (len > (1ull << 30)) {
		std::snprintf(note, sizeof(note),
			      "buffer %u (%llu bytes) is larger than io_uring's 1 GiB limit for one fixed "
			      "buffer; loads into it use plain reads (stats.memlock_fallbacks)",
			      id, (unsigned long long)len);
		return fallback(note);
	}
	const testing::Seams *s = testing::active();
	int ret = s && s->on_fixed_register ? s->on_fixed_register(id, len) : 0;
	size_t done = 0;
	for (; ret >= 0 && done < rings_.size(); done++)
		ret = rings_[done]->update_fixed(id, base, len);
	if (ret < 0) {
		for (size_t i = 0; i + 1 < done; i++)
			rings_[i]->update_fixed(id, nullptr, 0);
		const MemlockText limit;
		if (ret == -EFAULT) { /* the range, not a limit: registration fails */
			std::snprintf(note, sizeof(note),
				      "buffer %u (%llu bytes): io_uring could not pin it: EFAULT (part of the "
				      "range is not mapped, or not writable)",
				      id, (unsigned long long)len);
			r.error = -EFAULT;
			r.set_note(note);
			return r;
		}
		if (ret == -ENOMEM)
			std::snprintf(note, sizeof(note),
				      "buffer %u (%llu bytes) could not become an io_uring fixed buffer: "
				      "pinning it exceeds RLIMIT_MEMLOCK, now %s (ENOMEM); loads into it use "
				      "plain reads (stats.memlock_fallbacks). Raise the limit (ulimit -l, "
				      "LimitMEMLOCK=) or grant CAP_IPC_LOCK",
				      id, (unsigned long long)len, limit.s);
		else
			std::snprintf(note, sizeof(note),
				      "buffer %u (%llu bytes) could not become an io_uring fixed buffer: %s "
				      "(RLIMIT_MEMLOCK is %s); loads into it use plain reads "
				      "(stats.memlock_fallbacks)",
				      id, (unsigned long long)len, ErrnoText(ret).c_str(), limit.s);
		return fallback(note);
	}
	fixed_[id] = iovec{base, len};
	r.fixed_index = int32_t(id);
	return r;
}

void UringCore::unregister_buffer(uint32_t id, int32_t fixed_index) noexcept
{
	if (fixed_index < 0 || !setup_.fixed_buffers)
		return;
	std::lock_guard<std::mutex> g(fixed_mu_);
	for (auto &ring : rings_)
		ring->update_fixed(id, nullptr, 0);
	fixed_[id] = iovec{};
}

} // namespace kvblk::detail

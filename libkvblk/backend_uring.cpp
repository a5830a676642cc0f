// SPDX-License-Identifier: MIT
// uring: every object of a batch in flight together, split into commands of max_cmd_bytes,
// up to queue_depth commands per ring; `workers` rings, ring 0 driven by the calling thread
// and ring i by persistent thread i. The rings share the batch's command list: a command is
// the global index c (0..total) over all objects' commands, taken with one atomic add, so
// commands leave in device order and a fast ring simply takes more of them.
//
// Fixed buffers: every ring has a sparse table of kMaxBuffers fixed-buffer slots, created at
// open. kvblk_register_buffer() registers the buffer in slot == buffer id of every ring at
// once (not lazily), so the first load into it already skips per-I/O page pinning and a
// refusal (RLIMIT_MEMLOCK) is reported by the registration call itself. A refused buffer is
// served by plain reads/writes and counted once in stats.memlock_fallbacks.
//
// Completion handling per command: short transfer -> resubmit the rest (counted);
// -EAGAIN -> resubmit, at most eagain_retries times (counted), then the object fails with
// -EAGAIN; 0 bytes -> the object fails with -ENODATA (unless the end of the file came with
// IoObject.min_length bytes in); any other error fails its own object. Each command goes to
// its object's own fd (IoObject.fd): one batch spans any number of targets.
// An object's result is written once, when the last of its commands completes.
#include "backend.hpp"
#include "last_error.hpp"
#include "ring_workers.hpp"
#include "testing.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <liburing.h>
#include <mutex>
#include <sys/resource.h>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace kvblk::detail {
namespace {

/* Submissions refused for lack of resources (-EAGAIN, -EBUSY, ...) in a row before giving up. */
constexpr unsigned kMaxTransientRefusals = 10000;

struct ObjectState {
	std::atomic<uint64_t> pending;	/* commands not yet completed */
	std::atomic<int32_t> status;	/* first error of any of its commands */
};

/* One batch, shared by all rings. */
struct Work {
	IoDir dir;
	const IoObject *objs;
	uint32_t n;
	kvblk_result *results;
	uint64_t max_cmd;
	uint32_t eagain_retries;
	const testing::Seams *seams;
	const uint64_t *first_cmd;	/* n + 1 entries: first global command of each object */
	ObjectState *state;
	std::atomic<uint64_t> next_cmd{0};
	std::atomic<uint64_t> inflight{0};
	std::atomic<uint64_t> peak{0};
	std::atomic<int> fatal{0};

	uint64_t total() const noexcept { return first_cmd[n]; }

	uint32_t object_of(uint64_t c) const noexcept
	{
		return uint32_t(std::upper_bound(first_cmd, first_cmd + n + 1, c) - first_cmd - 1);
	}

	/* Take the next command: its object, byte offset in the object, length. */
	bool grab(uint32_t *obj, uint64_t *off, uint64_t *len) noexcept
	{
		uint64_t c = next_cmd.fetch_add(1, std::memory_order_relaxed);
		if (c >= total())
			return false;
		*obj = object_of(c);
		*off = (c - first_cmd[*obj]) * max_cmd;
		*len = std::min(max_cmd, objs[*obj].length - *off);
		return true;
	}

	void inflight_add() noexcept
	{
		uint64_t now = inflight.fetch_add(1, std::memory_order_relaxed) + 1;
		uint64_t p = peak.load(std::memory_order_relaxed);
		while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed))
			;
	}

	/* One command of @obj is over with @err (0 = all its bytes moved). */
	void finish_command(uint32_t obj, int32_t err) noexcept
	{
		ObjectState &s = state[obj];
		if (err) {
			int32_t zero = 0;
			s.status.compare_exchange_strong(zero, err, std::memory_order_relaxed);
		}
		if (s.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
			int32_t st = s.status.load(std::memory_order_relaxed);
			results[obj].status = st;
			results[obj].bytes = st ? 0 : objs[obj].length;
		}
	}
};

/* A command in flight (or waiting to be resubmitted) on one ring. */
struct Slot {
	uint32_t obj;
	bool in_use;
	uint32_t attempt;
	uint32_t eagains;
	uint64_t cmd_off;	/* offset of the command in its object */
	uint64_t len;		/* bytes of the command */
	uint64_t done;		/* bytes already moved */
	uint64_t t_submit;
};

class Ring {
public:
	~Ring() { exit(); }

	/*
	 * Create the ring: queue_depth SQ entries, at most cap = queue_depth * overcommit
	 * commands in flight, and a sparse fixed-buffer table. 0 or -errno.
	 */
	int init(int fd, uint32_t queue_depth, uint32_t overcommit)
	{
		fd_ = fd;
		io_uring_params p{};
		const uint32_t base_flags = overcommit > 1 ? IORING_SETUP_CQSIZE : 0;
		p.flags = base_flags | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL;
		p.cq_entries = queue_depth;
		int ret = io_uring_queue_init_params(queue_depth, &ring_, &p);
		if (ret == -EINVAL) { /* kernel older than 5.19: plain flags */
			p = io_uring_params{};
			p.flags = base_flags;
			p.cq_entries = queue_depth;
			ret = io_uring_queue_init_params(queue_depth, &ring_, &p);
		}
		if (ret < 0)
			return ret;
		live_ = true;
		cq_entries_ = p.cq_entries;
		overcommit_ = overcommit > 1;
		cap_ = queue_depth * std::max(overcommit, 1u);
		slots_.assign(cap_, Slot{});
		free_.reserve(cap_);
		resubmit_.reserve(cap_);
		fixed_table_ = io_uring_register_buffers_sparse(&ring_, kMaxBuffers);
		for (auto &f : fixed_live_)
			f.store(false, std::memory_order_relaxed);
		broken_ = false;
		return 0;
	}

	void exit() noexcept
	{
		if (live_)
			io_uring_queue_exit(&ring_);
		live_ = false;
	}

	/* 0 when the sparse fixed-buffer table exists, else the -errno that refused it. */
	[[nodiscard]] int fixed_table() const noexcept { return fixed_table_; }
	[[nodiscard]] bool broken() const noexcept { return broken_; }

	/* Put [base, base+len) into fixed slot @id (len 0: empty the slot). 0 or -errno. */
	int update_fixed(uint32_t id, uint8_t *base, uint64_t len) noexcept
	{
		iovec iov{base, len};
		int ret = io_uring_register_buffers_update_tag(&ring_, id, &iov, nullptr, 1);
		if (ret < 0)
			return ret;
		fixed_live_[id].store(len != 0, std::memory_order_release);
		return 0;
	}

	/* Serve commands of @w until none is left for this ring. Returns 0 or a fatal -errno. */
	int run(Work &w, BatchCounters &c) noexcept
	{
		uint32_t used = 0;
		uint64_t in_kernel = 0;	/* submitted and not yet reaped */
		bool more = true;
		unsigned refusals = 0;
		int fatal = 0;

		free_.clear();
		for (uint32_t i = cap_; i-- > 0;) {
			slots_[i].in_use = false;
			free_.push_back(i);
		}
		resubmit_.clear();

		/* Room for one more SQE; a full SQ is submitted first (only when cap > SQ entries). */
		auto sq_room = [&]() -> bool {
			if (io_uring_sq_space_left(&ring_))
				return true;
			int ret = io_uring_submit(&ring_);
			if (ret > 0)
				in_kernel += unsigned(ret);
			return io_uring_sq_space_left(&ring_) > 0;
		};

		for (;;) {
			while (!resubmit_.empty() && sq_room()) {
				prep(w, resubmit_.back());
				resubmit_.pop_back();
				c.commands++;
			}
			while (more && resubmit_.empty() && used < cap_ && sq_room()) {
				uint32_t obj;
				uint64_t off, len;
				if (!w.grab(&obj, &off, &len)) {
					more = false;
					break;
				}
				uint32_t id = free_.back();
				free_.pop_back();
				slots_[id] = Slot{obj, true, 0, 0, off, len, 0, 0};
				used++;
				w.inflight_add();
				prep(w, id);
				c.commands++;
			}
			if (used == 0)
				break;

			unsigned want = 1;
			if (overcommit_)
				want = unsigned(std::min<uint64_t>(cq_entries_, in_kernel + io_uring_sq_ready(&ring_)));
			int ret = io_uring_submit_and_wait(&ring_, want);
			if (ret >= 0) {
				in_kernel += unsigned(ret);
				refusals = 0;
			} else if (ret == -EINTR || ret == -EAGAIN || ret == -EBUSY || ret == -ENOMEM) {
				if (++refusals > kMaxTransientRefusals) {
					fatal = ret;
					break;
				}
				if (in_kernel == 0)
					usleep(1000);
			} else {
				fatal = ret;
				break;
			}
			if (overcommit_)
				wait_for_overflow(in_kernel);
			reap(w, c, &used, &in_kernel);
		}
		if (fatal)
			abandon(w, c, fatal, &used, &in_kernel);
		return fatal;
	}

private:
	void prep(Work &w, uint32_t id) noexcept
	{
		Slot &s = slots_[id];
		const IoObject &o = w.objs[s.obj];
		io_uring_sqe *sqe = io_uring_get_sqe(&ring_); /* callers checked sq space */
		uint8_t *mem = o.mem + s.cmd_off + s.done;
		const uint64_t off = o.offset + s.cmd_off + s.done;
		const unsigned len = unsigned(s.len - s.done);
		const bool fixed = o.fixed_index >= 0 && fixed_live_[o.fixed_index].load(std::memory_order_acquire);
		if (w.dir == IoDir::read) {
			if (fixed)
				io_uring_prep_read_fixed(sqe, o.fd, mem, len, off, o.fixed_index);
			else
				io_uring_prep_read(sqe, o.fd, mem, len, off);
		} else {
			if (fixed)
				io_uring_prep_write_fixed(sqe, o.fd, mem, len, off, o.fixed_index);
			else
				io_uring_prep_write(sqe, o.fd, mem, len, off);
		}
		io_uring_sqe_set_data64(sqe, id);
		s.t_submit = now_ns();
	}

	/* Act on one completion. */
	void complete(Work &w, BatchCounters &c, const io_uring_cqe *cqe, uint64_t now, uint32_t *used) noexcept
	{
		const uint32_t id = uint32_t(io_uring_cqe_get_data64(cqe));
		Slot &s = slots_[id];
		int64_t res = cqe->res;
		if (w.seams) {
			const testing::CommandInfo info{KVBLK_BACKEND_URING, w.dir == IoDir::write, s.obj,
							s.cmd_off, s.len, s.done, s.attempt,
							w.objs[s.obj].offset};
			res = testing::filter_completion(w.seams, info, res);
		}
		c.cmd_lat_hist[lat_bucket(now - s.t_submit)]++;

		if (res == -EAGAIN && s.eagains < w.eagain_retries) {
			s.eagains++;
			s.attempt++;
			c.eagain_retries++;
			resubmit_.push_back(id);
			return;
		}
		if (res >= 0 && uint64_t(res) < s.len - s.done &&
		    eof_is_complete(w.objs[s.obj], s.cmd_off + s.done + uint64_t(res))) {
			release(w, id, 0, used); /* the end of the file, with every byte wanted in */
			return;
		}
		if (res > 0 && uint64_t(res) < s.len - s.done) {
			s.done += uint64_t(res);
			s.attempt++;
			c.short_resubmits++;
			resubmit_.push_back(id);
			return;
		}
		release(w, id, res < 0 ? int32_t(res) : res == 0 ? -ENODATA : 0, used);
	}

	void release(Work &w, uint32_t id, int32_t err, uint32_t *used) noexcept
	{
		Slot &s = slots_[id];
		w.finish_command(s.obj, err);
		s.in_use = false;
		free_.push_back(id);
		(*used)--;
		w.inflight.fetch_sub(1, std::memory_order_relaxed);
	}

	/*
	 * Reap every completion there is, flushing the kernel's overflow list when it has one
	 * (bounded: whatever stays on the list is flushed by the next io_uring_enter anyway).
	 */
	void reap(Work &w, BatchCounters &c, uint32_t *used, uint64_t *in_kernel) noexcept
	{
		for (unsigned pass = 0; pass < 1024; pass++) {
			unsigned head, seen = 0;
			io_uring_cqe *cqe;
			const uint64_t now = now_ns();
			io_uring_for_each_cqe(&ring_, head, cqe) {
				complete(w, c, cqe, now, used);
				seen++;
			}
			io_uring_cq_advance(&ring_, seen);
			*in_kernel -= seen;
			if (!io_uring_cq_has_overflow(&ring_))
				return;
			/* The CQ was full: the kernel kept the rest on its overflow list. */
			c.cq_overflows++;
			int ret = io_uring_get_events(&ring_);
			if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && seen == 0)
				return;
		}
	}

	/* Test seam (uring_overcommit): hold off reaping until the kernel has overflowed. */
	void wait_for_overflow(uint64_t in_kernel) noexcept
	{
		if (in_kernel <= cq_entries_)
			return;
		for (int i = 0; i < 4000 && !io_uring_cq_has_overflow(&ring_); i++)
			usleep(250);
	}

	/*
	 * The kernel refused a submission for good. Wait for what it accepted (it may still
	 * write into the caller's memory), then fail every command this ring still holds.
	 * The ring may hold unsubmitted SQEs now: it is rebuilt before the next batch.
	 */
	void abandon(Work &w, BatchCounters &c, int err, uint32_t *used, uint64_t *in_kernel) noexcept
	{
		while (*in_kernel > 0) {
			io_uring_cqe *cqe;
			int ret = io_uring_wait_cqe(&ring_, &cqe);
			if (ret == -EINTR)
				continue;
			if (ret < 0)
				break;
			reap(w, c, used, in_kernel);
		}
		for (uint32_t id = 0; id < cap_; id++)
			if (slots_[id].in_use)
				release(w, id, err, used);
		resubmit_.clear();
		int zero = 0;
		w.fatal.compare_exchange_strong(zero, err);
		broken_ = true;
	}

	int fd_ = -1;
	io_uring ring_{};
	bool live_ = false;
	bool broken_ = false;
	bool overcommit_ = false;
	uint32_t cq_entries_ = 0;
	uint32_t cap_ = 0;
	int fixed_table_ = -ENODEV;
	std::vector<Slot> slots_;
	std::vector<uint32_t> free_;
	std::vector<uint32_t> resubmit_;
	std::array<std::atomic<bool>, kMaxBuffers> fixed_live_{};
};

std::string rlimit_memlock_text()
{
	rlimit rl{};
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		return "unknown";
	if (rl.rlim_cur == RLIM_INFINITY)
		return "unlimited";
	char buf[64];
	std::snprintf(buf, sizeof(buf), "%llu bytes (%llu KiB)", (unsigned long long)rl.rlim_cur,
		      (unsigned long long)(rl.rlim_cur >> 10));
	return buf;
}

class UringBackend final : public Backend {
public:
	explicit UringBackend(const BackendConfig &cfg) : cfg_(cfg) {}

	~UringBackend() override
	{
		workers_.stop();
	}

	int start()
	{
		const testing::Seams *s = testing::active();
		overcommit_ = s ? s->uring_overcommit : 0;
		for (uint32_t i = 0; i < cfg_.workers; i++) {
			auto r = std::make_unique<Ring>();
			int ret = r->init(cfg_.fd, cfg_.queue_depth, overcommit_);
			if (ret == -ENOSYS || ret == -EPERM)
				return fail(-ENOSYS,
					    "io_uring is not available: io_uring_setup failed with %s "
					    "(see the sysctl kernel.io_uring_disabled); use the threadpool or psync backend",
					    errno_text(ret).c_str());
			if (ret < 0)
				return fail(ret, "io_uring_queue_init(%u entries): %s", cfg_.queue_depth,
					    errno_text(ret).c_str());
			rings_.push_back(std::move(r));
		}
		try {
			workers_.start(cfg_.workers);
		} catch (const std::system_error &e) {
			return fail(-(e.code().value() ? e.code().value() : EAGAIN),
				    "uring: cannot start %u ring threads: %s", cfg_.workers - 1, e.what());
		}
		return 0;
	}

	kvblk_backend kind() const noexcept override { return KVBLK_BACKEND_URING; }

	int run(Batch &b) noexcept override
	{
		int ret = rebuild_broken_rings();
		if (ret)
			return ret;
		try {
			first_cmd_.resize(size_t(b.count) + 1);
			if (state_cap_ < b.count) {
				state_.reset(new ObjectState[b.count]);
				state_cap_ = b.count;
			}
		} catch (const std::bad_alloc &) {
			return fail(-ENOMEM, "uring: out of memory for a batch of %u objects", b.count);
		}
		first_cmd_[0] = 0;
		for (uint32_t i = 0; i < b.count; i++) {
			const uint64_t cmds = (b.objects[i].length + cfg_.max_cmd_bytes - 1) / cfg_.max_cmd_bytes;
			first_cmd_[i + 1] = first_cmd_[i] + cmds;
			state_[i].pending.store(cmds, std::memory_order_relaxed);
			state_[i].status.store(0, std::memory_order_relaxed);
		}

		Work w;
		w.dir = b.dir;
		w.objs = b.objects;
		w.n = b.count;
		w.results = b.results;
		w.max_cmd = cfg_.max_cmd_bytes;
		w.eagain_retries = cfg_.eagain_retries;
		w.seams = testing::active();
		w.first_cmd = first_cmd_.data();
		w.state = state_.get();

		std::vector<BatchCounters> &ctr = counters_;
		ctr.assign(rings_.size(), BatchCounters{});
		auto job = [&](uint32_t i) { rings_[i]->run(w, ctr[i]); };
		workers_.run(job);

		/* Every ring gave up: fail the commands nobody took, so every object completes. */
		if (int err = w.fatal.load()) {
			for (uint64_t c; (c = w.next_cmd.fetch_add(1)) < w.total();)
				w.finish_command(w.object_of(c), err);
		}
		for (const BatchCounters &c : ctr)
			b.counters.merge(c);
		b.counters.inflight_peak = w.peak.load();
		return 0;
	}

	BufferRegistration register_buffer(uint32_t id, uint8_t *base, uint64_t len) noexcept override
	{
		BufferRegistration r;
		char note[400];
		std::lock_guard<std::mutex> g(fixed_mu_);
		for (auto &ring : rings_) {
			if (ring->fixed_table()) {
				std::snprintf(note, sizeof(note),
					      "buffer %u (%llu bytes): this kernel gave io_uring no fixed-buffer table "
					      "(%s); loads into it use plain reads (stats.memlock_fallbacks)",
					      id, (unsigned long long)len, errno_text(ring->fixed_table()).c_str());
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
			const std::string limit = rlimit_memlock_text();
			if (ret == -ENOMEM)
				std::snprintf(note, sizeof(note),
					      "buffer %u (%llu bytes) could not become an io_uring fixed buffer: "
					      "pinning it exceeds RLIMIT_MEMLOCK, now %s (ENOMEM); loads into it use "
					      "plain reads (stats.memlock_fallbacks). Raise the limit (ulimit -l, "
					      "LimitMEMLOCK=) or grant CAP_IPC_LOCK",
					      id, (unsigned long long)len, limit.c_str());
			else
				std::snprintf(note, sizeof(note),
					      "buffer %u (%llu bytes) could not become an io_uring fixed buffer: %s "
					      "(RLIMIT_MEMLOCK is %s); loads into it use plain reads "
					      "(stats.memlock_fallbacks)",
					      id, (unsigned long long)len, errno_text(ret).c_str(), limit.c_str());
			return fallback(note);
		}
		fixed_[id] = iovec{base, len};
		r.fixed_index = int32_t(id);
		return r;
	}

	void unregister_buffer(uint32_t id, int32_t fixed_index) noexcept override
	{
		if (fixed_index < 0)
			return;
		std::lock_guard<std::mutex> g(fixed_mu_);
		for (auto &ring : rings_)
			ring->update_fixed(id, nullptr, 0);
		fixed_[id] = iovec{};
	}

private:
	static BufferRegistration fallback(const char *note)
	{
		BufferRegistration r;
		r.fell_back = true;
		r.note = note;
		return r;
	}

	/* A ring that met a fatal submission error is replaced, fixed buffers and all. */
	int rebuild_broken_rings() noexcept
	{
		std::lock_guard<std::mutex> g(fixed_mu_);
		for (auto &ring : rings_) {
			if (!ring->broken())
				continue;
			ring->exit();
			int ret = ring->init(cfg_.fd, cfg_.queue_depth, overcommit_);
			if (ret < 0)
				return fail(ret, "uring: cannot rebuild a ring after a failed submission: %s",
					    errno_text(ret).c_str());
			for (uint32_t id = 0; id < kMaxBuffers; id++)
				if (fixed_[id].iov_len)
					ring->update_fixed(id, static_cast<uint8_t *>(fixed_[id].iov_base),
							   fixed_[id].iov_len);
		}
		return 0;
	}

	BackendConfig cfg_;
	uint32_t overcommit_ = 0;
	std::vector<std::unique_ptr<Ring>> rings_;
	std::vector<BatchCounters> counters_;
	RingWorkers workers_; /* batch dispatch to the ring threads */

	/* Per-batch bookkeeping, kept between batches. */
	std::vector<uint64_t> first_cmd_;
	std::unique_ptr<ObjectState[]> state_;
	uint32_t state_cap_ = 0;

	/* Registered fixed buffers (for ring rebuilds); guards the rings' tables. */
	std::mutex fixed_mu_;
	std::array<iovec, kMaxBuffers> fixed_{};
};

} // namespace

std::unique_ptr<Backend> make_uring_backend(const BackendConfig &cfg, int *err)
{
	auto b = std::make_unique<UringBackend>(cfg);
	*err = b->start();
	if (*err)
		return nullptr;
	return b;
}

} // namespace kvblk::detail

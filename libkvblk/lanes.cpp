// SPDX-License-Identifier: MIT
#include "lanes.hpp"

#include "last_error.hpp"
#include "threads.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <system_error>
#include <thread>

namespace kvblk::detail {

/*
 * struct Lanes::Lane - one backend and, for lanes >= 1, its thread.
 * @fixed:     this backend's fixed-buffer index per buffer id (-1: plain I/O).
 * @device_ok: device memory buffer ids this backend took (register_device_buffer() == 0).
 * @targets:   targets placed on it; a lane >= 1 left with none is dropped.
 * objs/res/idx/batch/ret: its part of the running batch (idx: the object's index in it).
 */
struct Lanes::Lane {
	/*
	 * The part of a batch a lane runs asks the whole batch whether kvblk_cancel()
	 * came: the lane's backend then ends its objects not yet issued with
	 * -ECANCELED (kvblk.ko between ioctls, psync/threadpool between objects).
	 * Per-object results are taken from the lane when it ends, so object_done()
	 * is not forwarded: the scheduler reports them then.
	 */
	struct CancelSink final : BatchSink {
		const Batch *whole = nullptr;
		void object_done(uint32_t) noexcept override {}
		[[nodiscard]] bool cancelled() const noexcept override { return whole && whole->cancelled(); }
		void batch_done(int) noexcept override {}	/* lanes run(), never start() */
	};

	std::unique_ptr<Backend> be;
	CancelSink sink;
	std::vector<int32_t> fixed = std::vector<int32_t>(kMaxBuffers, -1);
	std::vector<uint8_t> device_ok = std::vector<uint8_t>(kMaxBuffers, 0);
	uint32_t targets = 0;

	std::vector<IoObject> objs;
	std::vector<kvblk_result> res;
	std::vector<uint32_t> idx;
	Batch batch{};
	int ret = 0;

	std::thread th;
	std::mutex mu;
	std::condition_variable cv;
	bool pending = false, done = false, stop = false;

	~Lane()
	{
		if (th.joinable()) {
			{
				std::lock_guard<std::mutex> g(mu);
				stop = true;
			}
			cv.notify_all();
			th.join();
		}
	}

	void start_thread()
	{
		th = start_library_thread([this] {
			std::unique_lock<std::mutex> lk(mu);
			for (;;) {
				cv.wait(lk, [this] { return stop || pending; });
				if (stop)
					return;
				pending = false;
				lk.unlock();
				ret = be->run(batch);
				lk.lock();
				done = true;
				cv.notify_all();
			}
		});
	}

	void post() noexcept
	{
		{
			std::lock_guard<std::mutex> g(mu);
			done = false;
			pending = true;
		}
		cv.notify_all();
	}

	void wait() noexcept
	{
		std::unique_lock<std::mutex> lk(mu);
		cv.wait(lk, [this] { return done; });
	}
};

Lanes::Lanes(std::unique_ptr<Backend> lane0, LanePlacement place) : place_(std::move(place))
{
	auto l = std::make_shared<Lane>();
	l->be = std::move(lane0);
	l->targets = 1;
	lane0_ = l->be.get();
	l0_ = l.get();
	lanes_.push_back(std::move(l));
	regs_.resize(kMaxBuffers);
	if (!placement_.ensure(0))
		throw std::bad_alloc();
}

Lanes::~Lanes() = default;

uint32_t Lanes::add_lane(std::unique_ptr<Backend> be)
{
	auto l = std::make_shared<Lane>();
	l->be = std::move(be);
	l->start_thread();
	/*
	 * The live buffers are registered with it before it is a lane (no batch can reach it
	 * yet), under reg_mu_ so that no registration comes or goes meanwhile.
	 */
	std::lock_guard<std::mutex> r(reg_mu_);
	for (uint32_t id = 0; id < kMaxBuffers; id++)
		if (regs_[id].live)
			register_with(*l, id);
	std::lock_guard<std::mutex> g(mu_);
	for (uint32_t i = 1; i < lanes_.size(); i++) {
		if (!lanes_[i]) {
			lanes_[i] = std::move(l);
			return i;
		}
	}
	lanes_.push_back(std::move(l));
	return uint32_t(lanes_.size() - 1);
}

Backend &Lanes::lane(uint32_t lane) noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	return *lanes_[lane]->be;
}

uint32_t Lanes::lane_count() noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	return uint32_t(lanes_.size());
}

bool Lanes::lane_exists(uint32_t lane) noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	return lane < lanes_.size() && lanes_[lane];
}

uint32_t Lanes::lane_of(uint32_t id) const noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	return id < KVBLK_MAX_TARGETS ? placement_.get(id).lane : 0;
}

kvblk_backend Lanes::kind() const noexcept
{
	return lane0_->kind();
}

kvblk_backend Lanes::kind_for(IoDir dir) const noexcept
{
	return lane0_->kind_for(dir);
}

kvblk_path Lanes::path() const noexcept
{
	return lane0_->path();
}

std::vector<std::shared_ptr<Lanes::Lane>> Lanes::other_lanes()
{
	std::lock_guard<std::mutex> g(mu_);
	std::vector<std::shared_ptr<Lane>> v;
	for (size_t i = 1; i < lanes_.size(); i++)
		if (lanes_[i])
			v.push_back(lanes_[i]);
	return v;
}

/* Register live buffer @id with lane @l (reg_mu_ held). A lane that cannot map it uses plain I/O. */
void Lanes::register_with(Lane &l, uint32_t id) noexcept
{
	const Registration &r = regs_[id];
	if (r.device) {
		/* P2PDMA pages are reached by O_DIRECT reads too: only kvblk.ko needs them registered. */
		if (r.kind == KVBLK_MEM_P2PDMA && l.be->kind() != KVBLK_BACKEND_KMOD)
			l.device_ok[id] = 1;
		else
			l.device_ok[id] = l.be->register_device_buffer(id, r.kind, r.dmabuf_fd, r.addr, r.len) == 0;
		return;
	}
	l.fixed[id] = l.be->register_buffer(id, r.base, r.len).fixed_index;
}

/*
 * Registration calls hold reg_mu_ across the backends' pinning, never mu_: a batch on another
 * thread starts (can_start(), run()) while a large buffer is being pinned. The lanes other
 * than 0 are a snapshot: a lane added meanwhile registers the live buffers itself (add_lane()
 * waits for reg_mu_), and one dropped meanwhile stays alive in the snapshot.
 */
BufferRegistration Lanes::register_buffer(uint32_t id, uint8_t *base, uint64_t len) noexcept
{
	std::lock_guard<std::mutex> r(reg_mu_);
	std::vector<std::shared_ptr<Lane>> others;
	try {
		others = other_lanes();
	} catch (const std::bad_alloc &) {
		BufferRegistration e;
		e.error = -ENOMEM;
		e.set_note("lanes: out of memory");
		return e;
	}
	BufferRegistration r0 = lane0_->register_buffer(id, base, len);
	if (r0.error) /* the range is unusable: nothing registered anywhere */
		return r0;
	l0_->fixed[id] = r0.fixed_index;
	regs_[id] = Registration{true, false, KVBLK_MEM_HOST, -1, base, 0, len};
	for (auto &l : others)
		register_with(*l, id);
	return r0;
}

int Lanes::register_device_buffer(uint32_t id, int kind, int dmabuf_fd, uint64_t addr, uint64_t len) noexcept
{
	std::lock_guard<std::mutex> r(reg_mu_);
	std::vector<std::shared_ptr<Lane>> others;
	try {
		others = other_lanes();
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "lanes: out of memory");
	}
	/* Lane 0 decides, as a single backend would: its refusal is the call's (staged, or an error). */
	const int ret = lane0_->register_device_buffer(id, kind, dmabuf_fd, addr, len);
	if (ret)
		return ret;
	l0_->device_ok[id] = 1;
	regs_[id] = Registration{true, true, kind, dmabuf_fd, nullptr, addr, len};
	for (auto &l : others)
		register_with(*l, id);
	return 0;
}

/*
 * Every lane that pinned host buffer @id compares its own pins (lane 0 always has it; other
 * lanes registered it in register_with()): the first -ESTALE or error is the answer.
 */
int Lanes::check_buffer(uint32_t id) noexcept
{
	std::lock_guard<std::mutex> r(reg_mu_);
	if (int ret = lane0_->check_buffer(id))
		return ret;
	if (regs_[id].device)
		return 0;
	try {
		for (auto &l : other_lanes())
			if (int ret = l->be->check_buffer(id))
				return ret;
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "lanes: out of memory");
	}
	return 0;
}

void Lanes::unregister_buffer(uint32_t id, int32_t fixed_index) noexcept
{
	std::lock_guard<std::mutex> r(reg_mu_);
	lane0_->unregister_buffer(id, fixed_index);
	l0_->fixed[id] = -1;
	l0_->device_ok[id] = 0;
	const bool device = regs_[id].device;
	regs_[id] = Registration{};
	auto undo = [&](Lane &l) {
		if (!device || l.device_ok[id])
			l.be->unregister_buffer(id, l.fixed[id]);
		l.fixed[id] = -1;
		l.device_ok[id] = 0;
	};
	try {
		for (auto &l : other_lanes())
			undo(*l);
	} catch (const std::bad_alloc &) {
		/* No snapshot: under mu_ then (unregistration cannot fail). */
		std::lock_guard<std::mutex> g(mu_);
		for (size_t i = 1; i < lanes_.size(); i++)
			if (lanes_[i])
				undo(*lanes_[i]);
	}
}

int Lanes::add_target(uint32_t id, BackendConfig &t) noexcept
{
	std::string reason;
	int lane;
	try {
		if (!placement_.ensure(id))
			return fail(-ENOMEM, "out of memory for target %u", id);
		lane = place_(*this, id, t, &reason);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "out of memory for a lane of target %u", id);
	} catch (const std::system_error &e) {
		return fail(-(e.code().value() ? e.code().value() : EAGAIN), "cannot start a lane thread: %s", e.what());
	}
	if (lane < 0)
		return lane;
	std::lock_guard<std::mutex> g(mu_);
	Placement &p = placement_[id];
	p.lane = uint32_t(lane);
	try {
		p.reason = std::move(reason);
	} catch (...) {
		p.reason.clear();
	}
	lanes_[size_t(lane)]->targets++;
	if (lane)
		targets_off_lane0_++;
	return 0;
}

void Lanes::remove_target(uint32_t id) noexcept
{
	std::shared_ptr<Lane> drop; /* joined outside the lock */
	{
		std::lock_guard<std::mutex> g(mu_);
		Placement &p = placement_[id];
		const uint32_t lane = p.lane;
		p = Placement{};
		lanes_[lane]->be->remove_target(id);
		lanes_[lane]->targets--;
		if (lane) {
			targets_off_lane0_--;
			if (lanes_[lane]->targets == 0)
				drop = std::move(lanes_[lane]);
		}
	}
	/* A batch that still holds the lane keeps it alive until it ends. */
	drop.reset();
}

kvblk_backend Lanes::target_kind(uint32_t id, IoDir dir, std::string *reason) const noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	const Placement &p = placement_.get(id);
	if (!p.reason.empty())
		*reason = p.reason;
	return lanes_[p.lane]->be->kind_for(dir);
}

kvblk_async Lanes::async_mode() const noexcept
{
	return lane0_->async_mode();
}

bool Lanes::can_start(const Batch &b) const noexcept
{
	{
		std::lock_guard<std::mutex> g(mu_);
		if (targets_off_lane0_)
			for (uint32_t i = 0; i < b.count; i++)
				if (placement_.get(b.objects[i].target).lane != 0)
					return false;
	}
	return lane0_->can_start(b);
}

bool Lanes::run_sync_inline() const noexcept
{
	return lane0_->run_sync_inline();
}

void Lanes::start(Batch &b) noexcept
{
	lane0_->start(b);
}

void Lanes::cancel(uint64_t id) noexcept
{
	lane0_->cancel(id);
}

int Lanes::run(Batch &b) noexcept
{
	std::vector<std::shared_ptr<Lane>> lanes;
	{
		std::lock_guard<std::mutex> g(mu_);
		try {
			if (targets_off_lane0_)
				lanes = lanes_;
		} catch (const std::bad_alloc &) {
			return fail(-ENOMEM, "lanes: out of memory for a batch of %u objects", b.count);
		}
	}
	/* Every target is on lane 0: nothing to split (registrations may run meanwhile). */
	if (lanes.empty())
		return lane0_->run(b);
	try {
		return split_and_run(b, lanes);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "lanes: out of memory for a batch of %u objects", b.count);
	}
}

int Lanes::split_and_run(Batch &b, std::vector<std::shared_ptr<Lane>> &lanes)
{
	for (auto &l : lanes) {
		if (!l)
			continue;
		l->objs.clear();
		l->idx.clear();
	}
	uint32_t refused = 0;
	for (uint32_t i = 0; i < b.count; i++) {
		const IoObject &o = b.objects[i];
		const uint32_t li = placement_.get(o.target).lane;
		Lane *l = li < lanes.size() ? lanes[li].get() : nullptr;
		const bool device = o.buf_id != KVBLK_BUF_NONE && o.path != KVBLK_PATH_HOST;
		if (!l || (device && !l->device_ok[o.buf_id])) {
			/* Device memory this lane's backend could not register (a uring lane and CUDA). */
			b.results[i].status = -EOPNOTSUPP;
			b.results[i].bytes = 0;
			refused++;
			continue;
		}
		IoObject x = o;
		if (o.buf_id != KVBLK_BUF_NONE && !device)
			x.fixed_index = l->fixed[o.buf_id];
		l->objs.push_back(x);
		l->idx.push_back(i);
	}
	if (refused)
		set_last_error("lanes: %u objects have device memory destinations that the backend of their "
			       "target cannot reach (register host memory, or load them from a kvblk.ko target)",
			       refused);

	for (auto &l : lanes) {
		if (!l || l->objs.empty())
			continue;
		l->res.resize(l->objs.size());
		for (size_t k = 0; k < l->objs.size(); k++)
			l->res[k] = kvblk_result{0, 0, 0, b.results[l->idx[k]].tag};
		l->batch = Batch{b.dir, l->objs.data(), uint32_t(l->objs.size()), l->res.data(), {}};
		l->sink.whole = &b;
		l->batch.sink = &l->sink;
		l->batch.priority = b.priority;
		l->ret = 0;
	}
	for (size_t i = 1; i < lanes.size(); i++)
		if (lanes[i] && !lanes[i]->objs.empty())
			lanes[i]->post();
	if (!lanes[0]->objs.empty())
		lanes[0]->ret = lanes[0]->be->run(lanes[0]->batch);
	for (size_t i = 1; i < lanes.size(); i++)
		if (lanes[i] && !lanes[i]->objs.empty())
			lanes[i]->wait();

	int first_err = 0;
	bool any_ran = false;
	for (auto &l : lanes) {
		if (!l || l->objs.empty())
			continue;
		for (size_t k = 0; k < l->objs.size(); k++) {
			kvblk_result &r = b.results[l->idx[k]];
			if (l->ret) {
				r.status = l->ret;
				r.bytes = 0;
			} else {
				r.status = l->res[k].status;
				r.bytes = l->res[k].bytes;
			}
		}
		if (l->ret) {
			if (!first_err)
				first_err = l->ret;
			continue;
		}
		any_ran = true;
		b.counters.merge(l->batch.counters);
		b.counters.served_by |= 1u << l->be->kind_for(b.dir);
	}
	/* Nothing was submitted anywhere: the caller cancels every object, as for one backend. */
	if (!any_ran && first_err && !refused)
		return first_err;
	return 0;
}

namespace {

/*
 * The kmod device's placement: lane 0 when its kvblk.ko context takes the target (one call
 * for every target), else a kmod lane per block device kvblk.ko attaches, else the uring lane.
 */
int place_on_kmod_device(Lanes &lanes, uint32_t id, BackendConfig &t, const BackendConfig &base,
			 std::string *reason)
{
	std::string why, shared;
	if (!t.buffered) {
		BackendConfig k = t;
		if (lanes.lane(0).add_target(id, k) == 0) {
			t.max_cmd_bytes = k.max_cmd_bytes;
			t.queue_depth = k.queue_depth;
			t.workers = k.workers;
			t.mem_align = k.mem_align;
			*reason = "kmod: " + t.path + " is " + k.note;
			return 0;
		}
		/* Why the device's context did not take it: first, so that it survives truncation. */
		shared = last_error();
	}
	if (t.buffered) {
		why = "KVBLK_OPEN_BUFFERED asks for the page cache, which kvblk.ko bypasses";
	} else if (!t.blockdev) {
		why = t.path + " is not a block device (" + shared + ")";
	} else {
		BackendConfig k = t;
		k.queue_depth = base.queue_depth;
		k.workers = base.workers;
		k.eagain_retries = base.eagain_retries;
		k.max_cmd_bytes = base.max_cmd_bytes;
		int err = 0;
		std::unique_ptr<Backend> be = make_kmod_backend(k, &err);
		if (be) {
			t.max_cmd_bytes = k.max_cmd_bytes;
			t.queue_depth = k.queue_depth; /* the namespace's max_inflight */
			t.workers = k.workers;
			*reason = "kmod: " + t.path + " has a kvblk.ko context of its own (" + shared + "; " + k.note + ")";
			return int(lanes.add_lane(std::move(be)));
		}
		why = "kvblk.ko cannot serve it: " + std::string(last_error()) + " (" + shared + ")";
	}
	*reason = "uring: " + why;
	BackendConfig u = base;
	u.fd = -1; /* commands use each object's fd */
	u.path = "(uring lane)";
	u.queue_depth = std::min<uint32_t>(base.queue_depth, KVBLK_MAX_QUEUE_DEPTH);
	u.max_cmd_bytes = std::min<uint64_t>(base.max_cmd_bytes, KVBLK_DEFAULT_MAX_CMD_BYTES);
	t.max_cmd_bytes = u.max_cmd_bytes;
	t.queue_depth = u.queue_depth;
	t.workers = u.workers;
	for (uint32_t i = 1; i < lanes.lane_count(); i++)
		if (lanes.lane_exists(i) && lanes.lane(i).kind() == KVBLK_BACKEND_URING)
			return int(i);
	int err = 0;
	std::unique_ptr<Backend> be = make_uring_backend(u, &err);
	if (!be)
		return err;
	return int(lanes.add_lane(std::move(be)));
}

} // namespace

std::unique_ptr<Backend> make_kmod_lanes(std::unique_ptr<Backend> kmod, const BackendConfig &base)
{
	return std::make_unique<Lanes>(std::move(kmod),
				       [base](Lanes &lanes, uint32_t id, BackendConfig &t, std::string *reason) {
					       return place_on_kmod_device(lanes, id, t, base, reason);
				       });
}

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
#include "kmod_ring.hpp"

#include "fork_guard.hpp"
#include "last_error.hpp"
#include "testing.hpp"
#include "threads.hpp"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

namespace kvblk::detail {

namespace {

/*
 * SQ entries (commands submitted per io_uring_enter() at most), commands in flight at most,
 * and per-object records (provided buffers). The CQ ring holds a final CQE for every command
 * in flight, every record not yet reaped and the eventfd poll's CQE, so that records posted
 * together (kvblk.ko posts what completed since the thread last ran its task work in one go)
 * do not overflow it.
 */
constexpr unsigned kSqEntries = 64;
constexpr unsigned kMaxInflight = 1023;
constexpr unsigned kRecordBufs = 2048;
constexpr unsigned kCqEntries = 4096;
static_assert(kMaxInflight + kRecordBufs + 1 <= kCqEntries);
static_assert((kRecordBufs & (kRecordBufs - 1)) == 0, "a buffer ring's size is a power of 2");

/* The provided-buffer group of the per-object records. */
constexpr uint16_t kRecordGroup = 0x6b76; /* "kv" */

/* sqe->uring_cmd_flags IORING_URING_CMD_MULTISHOT (7.2; Debian 12's uapi header predates it). */
constexpr uint32_t kUringCmdMultishot = 1u << 1;
#ifdef IORING_URING_CMD_MULTISHOT
static_assert(kUringCmdMultishot == IORING_URING_CMD_MULTISHOT);
#endif

/* user_data of the eventfd poll; commands carry their KmodRingCmd pointer. */
constexpr uint64_t kWakeTag = 1;

std::mutex g_mu;
std::weak_ptr<KmodRing> g_ring;	/* the live ring, if any (under g_mu) */
Owner g_owner;			/* the process that made it */

} // namespace

struct KmodRing::Impl {
	io_uring ring{};
	bool ring_live = false;
	int efd = -1;
	std::thread th;

	std::mutex mu;
	std::deque<KmodRingCmd *> prio_q, normal_q;	/* queued, not yet taken */
	bool stop = false;

	/* Ring thread only. */
	uint32_t inflight = 0;	/* commands submitted whose CQE was not yet seen */
	bool poll_armed = false;

	/*
	 * Per-object records: the buffer ring @br (@br_len bytes, mmap()ed: io_uring wants it
	 * page-aligned) over @recs, registered by init() (nullptr: it could not be, @recs_why
	 * says why; per-object commands then go without the flag). Then the ring thread's only.
	 */
	io_uring_buf_ring *br = nullptr;
	size_t br_len = 0;
	std::unique_ptr<kvblk_uring_obj[]> recs;
	std::string recs_why;
	unsigned recs_returned = 0;	/* buffers added since the last advance */

	~Impl()
	{
		if (ring_live)
			io_uring_queue_exit(&ring); /* waits for any batch still in the kernel */
		if (br)
			munmap(br, br_len); /* after the ring: nothing writes a record any more */
		if (efd >= 0)
			close(efd);
	}

	/*
	 * Register the record buffers (init(): before the thread runs). Failing leaves @br
	 * nullptr and @recs_why set: batches still run, with one CQE each.
	 */
	void setup_records() noexcept
	{
		br_len = kRecordBufs * sizeof(io_uring_buf);
		void *m = mmap(nullptr, br_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) {
			recs_why = "mmap: " + errno_text(-errno);
			return;
		}
		recs.reset(new (std::nothrow) kvblk_uring_obj[kRecordBufs]);
		io_uring_buf_reg reg{};
		reg.ring_addr = uint64_t(uintptr_t(m));
		reg.ring_entries = kRecordBufs;
		reg.bgid = kRecordGroup;
		io_uring_buf_ring_init(static_cast<io_uring_buf_ring *>(m));
		const int ret = recs ? io_uring_register_buf_ring(&ring, &reg, 0) : -ENOMEM;
		if (ret) {
			recs_why = "io_uring_register_buf_ring: " + errno_text(ret);
			munmap(m, br_len);
			recs.reset();
			return;
		}
		br = static_cast<io_uring_buf_ring *>(m);
		for (unsigned bid = 0; bid < kRecordBufs; bid++)
			give_back_record(bid);
		io_uring_buf_ring_advance(br, int(recs_returned));
		recs_returned = 0;
	}

	/* Record buffer @bid back into the ring (made visible by the next advance). */
	void give_back_record(unsigned bid) noexcept
	{
		io_uring_buf_ring_add(br, &recs[bid], sizeof(kvblk_uring_obj), uint16_t(bid),
				      io_uring_buf_ring_mask(kRecordBufs), int(recs_returned++));
	}

	/*
	 * A record CQE of @c (IORING_CQE_F_MORE): hand its record over, its buffer back. A
	 * buffer io_uring took for a record it then could not post (the CQ ring overflowed and
	 * no memory for the overflow list) never comes back: the pool is one buffer smaller
	 * until the ring ends (records are an early notice; the final CQE still comes).
	 */
	void record(KmodRingCmd *c, const io_uring_cqe *cqe) noexcept
	{
		const int bid = record_buffer(cqe);
		if (bid < 0)
			return;
		const bool whole = cqe->res >= int(KVBLK_URING_OBJ_SIZE_VER0);
		kvblk_uring_obj rec{};
		if (whole)
			std::memcpy(&rec, &recs[bid], std::min<size_t>(size_t(cqe->res), sizeof(rec)));
		give_back_record(unsigned(bid));
		if (whole)
			c->object(rec);
	}

	/* The record buffer @cqe carries (IORING_CQE_F_BUFFER, one of ours), or -1. */
	int record_buffer(const io_uring_cqe *cqe) const noexcept
	{
		if (!(cqe->flags & IORING_CQE_F_BUFFER) || !br)
			return -1;
		const unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		return bid < kRecordBufs ? int(bid) : -1;
	}

	int init(std::string *why)
	{
		io_uring_params p{};
		p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL;
		p.cq_entries = kCqEntries;
		int ret = io_uring_queue_init_params(kSqEntries, &ring, &p);
		if (ret == -EINVAL) { /* a kernel without the optional flags */
			p = io_uring_params{};
			p.flags = IORING_SETUP_CQSIZE;
			p.cq_entries = kCqEntries;
			ret = io_uring_queue_init_params(kSqEntries, &ring, &p);
		}
		if (ret < 0) {
			*why = "io_uring_queue_init: " + errno_text(ret);
			return ret;
		}
		ring_live = true;
		(void)io_uring_ring_dontfork(&ring); /* as uring_core.cpp: a child never uses it */
		setup_records();
		efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (efd < 0) {
			const int e = errno;
			*why = "eventfd: " + errno_text(e);
			return -e;
		}
		return 0;
	}

	void wake() noexcept
	{
		const uint64_t one = 1;
		(void)!write(efd, &one, sizeof(one));
	}

	/* At most @room commands: those to issue now, and the cancelled ones aside. */
	void take(std::vector<KmodRingCmd *> *issue, std::vector<KmodRingCmd *> *drop, size_t room)
	{
		const testing::Seams *s = testing::active();
		if (s && s->kmod_ring_hold && s->kmod_ring_hold->load())
			return;
		std::lock_guard<std::mutex> g(mu);
		for (std::deque<KmodRingCmd *> *q : {&prio_q, &normal_q}) {
			while (!q->empty() && issue->size() + drop->size() < room) {
				KmodRingCmd *c = q->front();
				q->pop_front();
				(c->cancelled() ? drop : issue)->push_back(c);
			}
		}
	}

	/* Whether the thread may end: stop asked, nothing queued or in flight. */
	bool finished() noexcept
	{
		std::lock_guard<std::mutex> g(mu);
		return stop && inflight == 0 && prio_q.empty() && normal_q.empty();
	}

	void main() noexcept
	{
		std::vector<KmodRingCmd *> issue, drop;
		issue.reserve(kSqEntries);
		drop.reserve(kSqEntries);
		for (;;) {
			if (!poll_armed) {
				io_uring_sqe *sqe = io_uring_get_sqe(&ring);
				if (sqe) {
					io_uring_prep_poll_add(sqe, efd, POLLIN);
					io_uring_sqe_set_data64(sqe, kWakeTag);
					poll_armed = true;
				}
			}
			issue.clear();
			drop.clear();
			const size_t room = std::min<size_t>(io_uring_sq_space_left(&ring), kMaxInflight - inflight);
			try {
				take(&issue, &drop, room);
			} catch (const std::bad_alloc &) {
				/* Cannot happen: both hold kSqEntries >= room. */
			}
			for (KmodRingCmd *c : issue) {
				io_uring_sqe *sqe = io_uring_get_sqe(&ring);
				io_uring_prep_rw(IORING_OP_URING_CMD, sqe, c->fd, nullptr, 0, 0);
				sqe->cmd_op = c->cmd_op;
				kvblk_uring_cmd cmd = c->cmd;
				if (c->per_object && br) {
					cmd.flags |= KVBLK_URING_F_PER_OBJECT;
					sqe->uring_cmd_flags = kUringCmdMultishot;
					sqe->flags |= IOSQE_BUFFER_SELECT;
					sqe->buf_group = kRecordGroup;
				}
				std::memcpy(sqe->cmd, &cmd, sizeof(cmd));
				io_uring_sqe_set_data(sqe, c);
				inflight++;
			}
			for (KmodRingCmd *c : drop)
				c->done(false, -ECANCELED);

			/* Without the poll armed (no SQE was free for it) nothing might wake a wait. */
			const int ret = poll_armed ? io_uring_submit_and_wait(&ring, 1) : io_uring_submit(&ring);
			if (!poll_armed)
				usleep(1000);
			if (ret < 0 && ret != -EINTR && ret != -ETIME) {
				/*
				 * -EAGAIN/-EBUSY (no memory for requests, completions to reap first):
				 * reap what is there and try again; the SQEs stay in the ring.
				 */
				io_uring_cqe *cqe;
				if (io_uring_peek_cqe(&ring, &cqe) != 0)
					usleep(1000);
			}
			unsigned head, seen = 0;
			io_uring_cqe *cqe;
			io_uring_for_each_cqe(&ring, head, cqe) {
				seen++;
				const uint64_t ud = io_uring_cqe_get_data64(cqe);
				if (ud == kWakeTag) {
					poll_armed = false;
					uint64_t v;
					(void)!read(efd, &v, sizeof(v));
					continue;
				}
				KmodRingCmd *c = reinterpret_cast<KmodRingCmd *>(uintptr_t(ud));
				if (cqe->flags & IORING_CQE_F_MORE) {
					record(c, cqe); /* more CQEs of @c follow */
					continue;
				}
				if (const int bid = record_buffer(cqe); bid >= 0)
					give_back_record(unsigned(bid)); /* not kvblk.ko's */
				const int res = cqe->res;
				inflight--;
				c->done(true, res); /* may queue more (an -E2BIG call in halves) */
			}
			io_uring_cq_advance(&ring, seen);
			if (recs_returned) {
				io_uring_buf_ring_advance(br, int(recs_returned));
				recs_returned = 0;
			}
			if (finished())
				return;
		}
	}
};

KmodRing::KmodRing(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

KmodRing::~KmodRing()
{
	{
		std::lock_guard<std::mutex> g(impl_->mu);
		impl_->stop = true;
	}
	impl_->wake();
	if (impl_->th.joinable())
		impl_->th.join();
}

std::shared_ptr<KmodRing> KmodRing::acquire(std::string *why) noexcept
{
	try {
		std::lock_guard<std::mutex> g(g_mu);
		if (!owned_by_caller(g_owner)) {
			/*
			 * A child made by fork() with the parent's ring alive in its copy of memory:
			 * that ring has no thread here. Keep it (never destroyed: joining a thread of
			 * another process is undefined) and make one of this process.
			 */
			if (std::shared_ptr<KmodRing> old = g_ring.lock())
				new std::shared_ptr<KmodRing>(std::move(old));
			g_ring.reset();
		}
		if (std::shared_ptr<KmodRing> r = g_ring.lock())
			return r;
		auto impl = std::make_unique<Impl>();
		if (impl->init(why))
			return nullptr;
		Impl *raw = impl.get();
		std::shared_ptr<KmodRing> r(new KmodRing(std::move(impl)));
		try {
			raw->th = start_library_thread([raw] { raw->main(); });
			/* Named before anyone can look (ps, /proc/PID/task/TID/comm). */
			(void)pthread_setname_np(raw->th.native_handle(), "kvblk-kmod-ring");
		} catch (const std::system_error &e) {
			*why = std::string("cannot start its thread: ") + e.what();
			return nullptr;
		}
		g_ring = r;
		g_owner = current_owner();
		return r;
	} catch (const std::bad_alloc &) {
		*why = "out of memory";
		return nullptr;
	}
}

void KmodRing::queue(KmodRingCmd *const *cmds, size_t n, bool priority)
{
	{
		std::lock_guard<std::mutex> g(impl_->mu);
		std::deque<KmodRingCmd *> &q = priority ? impl_->prio_q : impl_->normal_q;
		const size_t before = q.size();
		try {
			for (size_t i = 0; i < n; i++)
				q.push_back(cmds[i]);
		} catch (...) {
			q.resize(before); /* all or nothing */
			throw;
		}
	}
	impl_->wake();
}

void KmodRing::kick() noexcept
{
	impl_->wake();
}

bool KmodRing::records(std::string *why) const noexcept
{
	if (impl_->br)
		return true;
	try {
		*why = impl_->recs_why;
	} catch (const std::bad_alloc &) {
	}
	return false;
}

} // namespace kvblk::detail

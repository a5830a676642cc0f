// SPDX-License-Identifier: MIT
// The io_uring that carries kvblk.ko's asynchronous batches (KVBLK_URING_CMD_LOAD_MANY, see
// include/uapi/linux/kvblk.h "Asynchronous batches through io_uring") for every kmod device
// of the process: one ring and one thread, created by the first device that asks for them
// and torn down with the last one (refcounted). Each SQE names its own /dev/kvblk context
// fd, so the contexts of any number of devices share the ring.
//
// The thread is the ring's only submitter: kvblk.ko writes a batch's results back, before
// its CQE, in the task that submitted its SQE, so that task must live as long as the
// batch; callers' threads (which may exit) only queue commands and wake the thread (an
// eventfd it polls through the ring). It submits what is queued (priority commands first,
// at most as many in flight as the completion queue holds), waits for completions and
// calls each command's done() on itself. Issuing a command may sleep in the kernel (the
// context's lock; a batch with more NVMe commands than the module's max_inflight waits
// there for its own commands): other commands then wait behind it.
//
// One CQE per descriptor (KVBLK_URING_F_PER_OBJECT, kvblk.ko with KVBLK_FEAT_URING_PER_OBJECT):
// a command with @per_object set is issued as a multishot SQE whose records go to the ring's
// own provided-buffer ring (kRecordBufs records of struct kvblk_uring_obj, group kRecordGroup,
// registered when the ring is made). The thread hands each record to the command's
// object() and gives the buffer straight back, then the final CQE to done() as ever. Records
// that kvblk.ko could not post (no buffer left, the CQ ring full) never come: the final CQE
// and the results array are authoritative, the records only an early notice (see the uapi).
#pragma once

#include <uapi/linux/kvblk.h>

#include <cstdint>
#include <memory>
#include <string>

namespace kvblk::detail {

/*
 * struct KmodRingCmd - one IORING_OP_URING_CMD: @fd, @cmd_op and the 16-byte command area
 * @cmd. Owned by the caller until done() is called (once, on the ring thread).
 */
struct KmodRingCmd {
	int fd = -1;
	uint32_t cmd_op = 0;
	kvblk_uring_cmd cmd{};
	/*
	 * Ask for one record per descriptor (object()): the ring adds KVBLK_URING_F_PER_OBJECT
	 * and the multishot flags when it has its provided buffers, and issues the command
	 * without them otherwise (io_uring refused the buffer ring: no object() calls then).
	 */
	bool per_object = false;

	/* Whether the command should end unissued (checked when the ring takes it). */
	[[nodiscard]] virtual bool cancelled() const noexcept = 0;
	/*
	 * The command ended: @issued and its CQE's @res, or not @issued (cancelled() said so,
	 * or the ring is gone) and @res -ECANCELED. It may queue more commands (queue()).
	 */
	virtual void done(bool issued, int res) noexcept = 0;
	/*
	 * @per_object only: one descriptor of the command completed, @rec its record (fields past
	 * what the module wrote are 0). Called on the ring thread before done(), at most once
	 * per descriptor, in completion order; @rec.index is relative to this command.
	 */
	virtual void object(const kvblk_uring_obj &rec) noexcept { (void)rec; }

protected:
	~KmodRingCmd() = default;
};

class KmodRing {
public:
	/*
	 * The process's ring, created (with its thread) when none is alive: the ring, or
	 * nullptr with *why saying what failed (io_uring_setup()'s or the thread's error).
	 */
	static std::shared_ptr<KmodRing> acquire(std::string *why) noexcept;

	~KmodRing();
	KmodRing(const KmodRing &) = delete;
	KmodRing &operator=(const KmodRing &) = delete;

	/* Queue @n commands (@priority: ahead of the others) and wake the thread. Any thread. */
	void queue(KmodRingCmd *const *cmds, size_t n, bool priority);

	/* Wake the thread so that it looks at the queue (kvblk_cancel()). */
	void kick() noexcept;

	/*
	 * Whether commands with @per_object get their records (the provided buffers are
	 * registered); false with *why saying what io_uring refused.
	 */
	[[nodiscard]] bool records(std::string *why) const noexcept;

	struct Impl;

private:
	explicit KmodRing(std::unique_ptr<Impl> impl) noexcept;
	std::unique_ptr<Impl> impl_;
};

} // namespace kvblk::detail

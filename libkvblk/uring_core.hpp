// SPDX-License-Identifier: MIT
// The io_uring core shared by the uring and uring_cmd backends: rings, one thread per ring,
// a device-wide queue of started batches, fixed buffers, SQE batching, CQE reaping and
// resubmission (-EAGAIN, short transfers). A backend derives from UringCore and says only
// what differs: how a command becomes an SQE (prep) and what its CQE means (result).
//
// Batches: start() (kvblk_submit(), KVBLK_ASYNC_NATIVE) and run() (synchronous: the staged
// path and kmod's stores) put a batch on the queue; its objects are cut into commands of
// max_cmd_bytes (or of their target's smaller limit, IoObject.max_cmd), numbered 0..total in
// object order. Each ring thread takes commands from
// the front of the queue whenever it has free slots (up to queue_depth in flight per ring,
// so the commands of several batches share the rings), in order within a batch; a priority
// batch is queued ahead of every normal one, so its commands are taken before the rest of
// theirs. An object's result is written once, when the last of its commands completes;
// when the last object of a batch is over, the batch is done (BatchSink::batch_done(), or
// run() returns). A synchronous batch (run(): kvblk_load_many() with nothing queued) is
// driven on the caller's thread instead when a ring is idle and the queue empty
// (drive_inline(): the ring's drive lock, which its thread lets go of only while it sleeps
// idle; with several rings only a batch that fits one ring's depth), saving the hand-over to
// the ring's thread and back; batches queued meanwhile wait for it, as behind any batch on
// that ring. cancel() lowers a queued batch's end to the first object none of whose
// commands was taken: those objects end with -ECANCELED at once, the others finish.
//
// Per command: a short transfer resubmits the rest (counted); -EAGAIN resubmits, at most
// eagain_retries times (counted), then the object fails with -EAGAIN; 0 bytes fail the
// object with -ENODATA; a short read (0 bytes included) that meets the end of the file once
// IoObject.min_length bytes are in completes the object, nothing resubmitted; any other
// error fails its own object. A ring whose submission the
// kernel refuses for good waits for what it had in flight, fails those commands, and is
// rebuilt (fixed buffers and all) before it takes more; while it cannot be rebuilt, the
// commands it takes fail with that error, so every batch still completes.
#pragma once

#include "backend.hpp"
#include "testing.hpp"

#include <liburing.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kvblk::detail {

struct RingBatch;
struct Ring;

/**
 * struct RingCmd - one command in flight (or about to be submitted) on a ring.
 * @batch:   its batch.
 * @obj:     its object's index in the batch.
 * @attempt: 0 for the first submission, +1 for each resubmission.
 * @eagains: resubmissions after -EAGAIN.
 * @cmd_off: byte offset of the command in its object (a multiple of max_cmd_bytes).
 * @len:     bytes of the whole command.
 * @done:    bytes of it already moved (short transfers).
 * @t_submit: when it was last submitted (Ring::issue_ns: its burst of issues' time).
 */
struct RingCmd {
	RingBatch *batch = nullptr;
	uint32_t obj = 0;
	uint32_t attempt = 0;
	uint32_t eagains = 0;
	bool in_use = false;
	uint64_t cmd_off = 0;
	uint64_t len = 0;
	uint64_t done = 0;
	uint64_t t_submit = 0;
};

/**
 * struct RingSetup - what a backend asks of the core.
 * @kind:          enum kvblk_backend (reported in the test seams' CommandInfo).
 * @fd:            target 0's file, block device or char device (commands address their
 *                 object's own IoObject.fd or, uring_cmd, its target's char device).
 * @rings:         rings, each with its own thread.
 * @queue_depth:   commands in flight per ring (SQ and CQ entries).
 * @overcommit:    > 1 (test seam uring_overcommit): overcommit * queue_depth in flight per
 *                 ring with a CQ of queue_depth entries, reaped only when full.
 * @max_cmd_bytes: largest command.
 * @eagain_retries: resubmissions after -EAGAIN before the object fails.
 * @ring_flags:    extra IORING_SETUP_* flags (SQE128 | CQE32 for NVMe passthrough).
 * @fixed_buffers: give each ring a sparse fixed-buffer table and register buffers in it.
 * @fixed_files:   give each ring a sparse table of kFixedFiles registered files: target id's
 *                 fd goes into slot id (set_fixed_file()), and a command on that fd names
 *                 the slot (IOSQE_FIXED_FILE), so the kernel takes no file reference per
 *                 command (fget()/fput() and io_file_get_flags(), about 2% of the guest CPU
 *                 per 4 KiB read on null_blk, make vmbench-cpu of 2026-12-06; fio's
 *                 registerfiles=1 does the same). Targets of higher ids, a kernel without
 *                 sparse tables (before 5.19) or a refused table: plain fds.
 */
struct RingSetup {
	kvblk_backend kind = KVBLK_BACKEND_URING;
	int fd = -1;
	uint32_t rings = 1;
	uint32_t queue_depth = 1;
	uint32_t overcommit = 0;
	uint64_t max_cmd_bytes = 0;
	uint32_t eagain_retries = 0;
	unsigned ring_flags = 0;
	bool fixed_buffers = false;
	bool fixed_files = false;
};

/* Registered-file slots per ring (RingSetup.fixed_files): targets 0..kFixedFiles-1. */
inline constexpr uint32_t kFixedFiles = 256;

class UringCore : public Backend {
public:
	~UringCore() override;

	[[nodiscard]] kvblk_async async_mode() const noexcept override { return KVBLK_ASYNC_NATIVE; }
	/* finish_batch() calls batch_done() holding nothing, its batch already forgotten. */
	[[nodiscard]] bool starts_from_batch_done() const noexcept override { return true; }
	/*
	 * A synchronous batch runs on the caller's thread when it can (drive_inline()): no
	 * hand-over to a ring's thread and back (two wake-ups and two context switches a call).
	 */
	[[nodiscard]] bool run_sync_inline() const noexcept override { return true; }
	int run(Batch &b) noexcept override;
	void start(Batch &b) noexcept override;
	void cancel(uint64_t id) noexcept override;
	BufferRegistration register_buffer(uint32_t id, uint8_t *base, uint64_t len) noexcept override;
	void unregister_buffer(uint32_t id, int32_t fixed_index) noexcept override;

protected:
	UringCore();

	/* Create the rings: 0, or io_uring_queue_init's -errno (the caller words the message). */
	int create_rings(const RingSetup &s);

	/* Start one thread per ring: 0, or -errno with kvblk_last_error() set. */
	int start_threads();

	/* Stop and join the ring threads. Derived destructors call it first: threads call prep(). */
	void stop_rings() noexcept;

	/* Fill @sqe for the rest of command @c (bytes c.done.. of it) of object @o. */
	virtual void prep(io_uring_sqe *sqe, const RingCmd &c, const IoObject &o, IoDir dir,
			  bool fixed) noexcept = 0;

	/*
	 * What command @c's CQE means, after the test seams @seams (if any): bytes moved (> 0;
	 * fewer than c.len - c.done is a short transfer), 0 (the device ended), or -errno.
	 */
	virtual int64_t result(const io_uring_cqe *cqe, const RingCmd &c, const IoObject &o, IoDir dir,
			       const testing::Seams *seams) noexcept = 0;

	[[nodiscard]] const RingSetup &setup() const noexcept { return setup_; }

	/*
	 * Put target @id's @fd into registered-file slot @id of every ring (@fd -1: empty it),
	 * with RingSetup.fixed_files; ids >= kFixedFiles are left to plain fds. Called before
	 * the target's first batch and after its last: commands on @fd name the slot while it
	 * holds @fd. A ring that refuses the update goes on with the plain fd.
	 */
	void set_fixed_file(uint32_t id, int fd) noexcept;

	/* Largest command of object @o: max_cmd_bytes, or its target's own limit if smaller. */
	[[nodiscard]] uint64_t cmd_bytes(const IoObject &o) const noexcept
	{
		return o.max_cmd && o.max_cmd < setup_.max_cmd_bytes ? o.max_cmd : setup_.max_cmd_bytes;
	}

private:
	struct Grab {
		RingBatch *batch;
		uint64_t cmd;
		uint32_t obj;	/* the object @cmd is of */
	};

	RingBatch *make_batch(Batch &b);
	void enqueue(RingBatch *rb);
	size_t grab(Grab *out, size_t max, bool block);
	bool drive_inline(RingBatch *rb) noexcept;
	void issue_pending(Ring &r, uint64_t *in_kernel) noexcept;
	void load(Ring &r, RingBatch *rb, uint64_t cmd, uint32_t obj, uint64_t *in_kernel) noexcept;
	int submit_and_reap(Ring &r, uint64_t *in_kernel, unsigned *refusals) noexcept;
	void fail_grabbed(const Grab *g, size_t k, int err) noexcept;
	void ring_main(Ring &r) noexcept;
	bool sq_room(Ring &r, uint64_t *in_kernel) noexcept;
	void issue(Ring &r, uint32_t id) noexcept;
	void complete(Ring &r, const io_uring_cqe *cqe, uint64_t now, const testing::Seams *seams) noexcept;
	void release(Ring &r, uint32_t id, int32_t err) noexcept;
	void reap(Ring &r, uint64_t *in_kernel) noexcept;
	void wait_for_overflow(Ring &r, uint64_t in_kernel) noexcept;
	void abandon(Ring &r, int err, uint64_t *in_kernel) noexcept;
	int rebuild(Ring &r) noexcept;
	void finish_command(RingBatch *rb, uint32_t obj, int32_t err) noexcept;
	void end_object(RingBatch *rb, uint32_t obj, int32_t st) noexcept;
	void finish_batch(RingBatch *rb) noexcept;

	RingSetup setup_;
	std::vector<std::unique_ptr<Ring>> rings_;
	std::vector<std::thread> threads_;

	/* The queue of started batches with commands not yet taken; priority ones first. */
	std::mutex qmu_;
	std::condition_variable qcv_;
	std::deque<RingBatch *> queue_;
	size_t prio_count_ = 0;
	bool stop_ = false;

	std::atomic<uint64_t> inflight_{0};	/* commands in flight on every ring */
	std::atomic<uint64_t> overflows_{0};	/* CQ overflows not yet counted in a batch */

	/* Registered fixed buffers and files (for ring rebuilds); guards the rings' tables. */
	std::mutex fixed_mu_;
	std::vector<iovec> fixed_;
	std::vector<int> files_;
};

} // namespace kvblk::detail

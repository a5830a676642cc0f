// SPDX-License-Identifier: MIT
// kmod: loads through kvblk.ko (/dev/kvblk, include/uapi/linux/kvblk.h). The module reads a
// block device through the block layer (bios over pinned pages; on an nvme-pci namespace
// memory without struct pages, CUDA or dma-buf, goes through NVMe Read commands it builds
// itself, PRPs into pre-mapped memory) and puts every command of a call in flight
// together; this backend only turns a batch into KVBLK_IOC_LOAD_MANY calls and maps the
// results back. It attaches without an engine flag: the module picks the engine per object.
//
// Open: open /dev/kvblk, KVBLK_IOC_GET_FEATURES (the PRP engine and host memory must be
// there), KVBLK_IOC_ATTACH with the target's own fd. The attach reports the namespace's LBA
// size and capacity (checked against what the library found) and the largest command the
// module issues; the module's sysfs directory gives its descriptor and in-flight caps.
//
// Registered buffers become kvblk.ko registrations (pinned once; device memory also
// DMA-mapped once for the namespace's PCI function). The
// module wants page-aligned ranges, the library only mem_align: the page-aligned cover of
// the buffer is registered and descriptors are offset by the distance to its start.
//
// Plain host pointers (KVBLK_BUF_NONE, and buffers the module refused) have no registration:
// for each batch their page ranges are merged (objects in one allocation share one range,
// plan(), for run() and start() alike) and registered around the calls that read into them,
// in passes of at most kTempPerPass ranges, then unregistered. That costs a pin and a DMA
// map per batch and counts against RLIMIT_MEMLOCK while the pass runs; an object whose range
// cannot be registered fails with that errno (-ENOMEM for the memlock limit, -EFAULT for
// memory not mapped), and only that object. kvblk.ko takes KVBLK_MAX_BUFS registrations per
// context, persistent ones included: a range refused with -ENOSPC once its pass holds one
// ends the pass there (a smaller pass; the range goes to the next one), and fails its
// objects only when it is the first of its pass.
//
// Several targets: when the module reports KVBLK_FEAT_TARGETS, add_target() attaches each
// target added to the device (kvblk_add_target(): a block device of any kind, a regular file;
// opened by libkvblk O_DIRECT, O_RDWR when KVBLK_OPEN_WRITE) to this same context with
// KVBLK_ATTACH_F_ADD_TARGET and no engine flag, checked as start() checks target 0 (geometry,
// alignment, command size). A KTarget per libkvblk target id maps it to the module's index
// (kvblk_attach.target) for loads and to its store-capable attach for stores (the same index,
// or a second block-layer attach of its fd when the PRP engine serves it), so one batch over
// any mix of targets is one set of descriptors: one KVBLK_IOC_LOAD_MANY per max_descs, or one
// KVBLK_URING_CMD_LOAD_MANY per max_descs through the ring, and per-object results map back
// as for one target. Per object, what the module would refuse for the whole call stays out
// of it: device memory on a target without the PRP engine fails that object (-EOPNOTSUPP;
// the module says -EXDEV for the call), and a file's last block cut short by its end
// (IoObject.min_length, which the module refuses as past the end) is read with pread(2) on
// the calling thread, and an unaligned store's write-back of that block (IoObject.positional,
// through the file's buffered descriptor) is written with pwrite(2) there. kvblk.ko has no detach: remove_target() forgets the target here, the
// module keeps it attached until the context closes (KVBLK_CTX_MAX_TARGETS attaches in all).
// A refusal (an older module, KVBLK_OPEN_BUFFERED, the module's own) is returned with its
// reason: the lanes (lanes.hpp) then serve that target as before.
//
// Splitting: by default objects go to the module whole and it splits them at its
// max_cmd_bytes (the attach's value, reported as kvblk_dev_info.max_cmd_bytes). A smaller
// kvblk_open_opts.max_cmd_bytes is honoured by handing the module one descriptor per
// command (per target: each has its own attach's value). A call larger than the module's
// max_descs is sent as several ioctls in turn.
//
// Device memory: CUDA ranges and dma-bufs are registered with the module when it reports
// KVBLK_FEAT_MEM_CUDA / KVBLK_FEAT_MEM_DMABUF (loads into them are P2P through the PRP
// engine, which kvblk_attach.engines reports for the namespace);
// otherwise register_device_buffer() says -EOPNOTSUPP and registration.cpp stages CUDA memory.
//
// Stores: when kvblk.ko writes (KVBLK_FEAT_STORE), a device opened with KVBLK_OPEN_WRITE stores
// through it: the same descriptors and calls as a load, with KVBLK_LOAD_F_STORE, reported and
// counted as kmod. The module's PRP engine only reads, so when it serves the namespace the
// same fd (opened O_RDWR) is attached once more to the context through the block-layer engine
// (KVBLK_ATTACH_F_ENGINE_BIO | KVBLK_ATTACH_F_ADD_TARGET, KVBLK_FEAT_TARGETS) and stores name
// that target; registered buffers reach both (the block layer maps each bio itself). Store
// sources are pinned like load destinations (writable anonymous, shmem or hugetlb memory).
// An older kvblk.ko (or one that refuses the second attach) gets a uring backend on the
// same fd for store_many, as before; those batches report and count backend uring.
// kvblk_flush() is fdatasync() of the fd either way: a cache flush of the device.
//
// Asynchronous batches: when the module reports KVBLK_FEAT_URING_CMD the backend is
// KVBLK_ASYNC_NATIVE. start() builds the descriptors run() would send and hands them, as
// KVBLK_URING_CMD_LOAD_MANY commands of at most max_descs descriptors each, to the
// process's one kvblk.ko ring (kmod_ring.hpp: one io_uring and one thread for every kmod
// device of the process, created with the first and ended with the last); the job keeps
// the headers, descriptors and results until the last CQE, which maps the results back as
// run() does (KernelBatch: one code for both) and ends the batch. No thread per device.
// A smaller max_cmd_bytes (one descriptor per command) and a batch of more than max_descs
// descriptors are started the same way (more descriptors, more calls, all in flight); a
// call refused with -E2BIG because max_descs was lowered since open is sent again in
// halves. Stores go to the uring writer's own start().
// KVBLK_SUBMIT_PER_OBJECT (Batch.object_notice) on a module with KVBLK_FEAT_URING_PER_OBJECT:
// the calls ask for one record per descriptor (KmodRingCmd.per_object); the record of an
// object's last descriptor writes its result and tells the scheduler, which posts its entry
// then (NativeJob::heard_from()). The final CQE still writes every result; objects whose
// records did not come (kvblk.ko ran out of the ring's buffers) are told at the batch's end.
// A synchronous call (kvblk_load_many()) that finds no batch queued or being run is still
// run() on the caller's thread (run_sync_inline(): one ioctl, no trip through the ring's
// thread); one that finds the dispatch path busy is started like any other.
// Plain pointers (and buffers the module refused) are started too, pass by pass: start()
// registers the first pass's ranges on the submitting thread and queues all its calls; the
// last call of a pass to end (NativeCall::done(), on the ring thread) unregisters its ranges
// and registers and queues the next pass from there. The temporary registrations of all the
// backend's started batches come out of one budget, kTempBudget slots (of the context's
// KVBLK_MAX_BUFS), so that several batches at once do not fail one another with -ENOSPC: a
// pass that finds no slot free waits in the backend's queue (in order, KVBLK_SUBMIT_PRIORITY
// batches ahead) and the batch that gives slots back starts it (registration and queue, on the ring thread). A waiting batch holds
// no slot and slots are held only by passes in flight, which end: nothing waits for itself,
// and kvblk_close() (the scheduler waits for every batch) ends. Run() on the dispatch thread
// takes no slot (one pass at a time per device; -ENOSPC makes its passes smaller).
// What start() does not take (can_start()) goes to run() on the device's dispatch thread,
// which the scheduler creates only when such a batch comes: loads with an object read with
// pread(2) (a file target's last block cut short by its end, IoObject.min_length). Those
// stay there because the ring (kmod_ring.cpp) only issues IORING_OP_URING_CMD commands of a
// 16-byte kvblk.ko command area, and what move_object() (positional_io.cpp) does for such
// an object is a loop, not one read: commands of at most max_cmd_bytes, each resubmitted on
// a short read and on -EAGAIN (up to eagain_retries) and -EINTR, the file's end judged
// against min_length (0, or -ENODATA with the valid prefix), the on_complete seam and the
// counters per attempt. Doing that on the ring would mean a second kind of ring command
// with its own resubmission state machine on the ring thread, for one object per file per
// batch. Staged CUDA batches never reach the backend. kvblk_cancel() ends the calls the
// ring has not issued yet with -ECANCELED, the passes not started yet, and a batch waiting
// for slots; an issued call runs to its end (the module cannot cancel it). Without
// KVBLK_FEAT_URING_CMD (an older kvblk.ko), or when the ring cannot be made, every batch
// goes through run() on the dispatch thread (KVBLK_ASYNC_THREAD), as before.
#include "backend.hpp"
#include "kmod_ring.hpp"
#include "last_error.hpp"
#include "positional_io.hpp"
#include "sysfs.hpp"
#include "target_slots.hpp"
#include "testing.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <linux/types.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <vector>

#include <uapi/linux/kvblk.h>

namespace kvblk::detail {

namespace {

using ull = unsigned long long;

constexpr const char *kNode = "/dev/kvblk";

/* kvblk.ko limits (include/uapi/linux/kvblk.h). */
constexpr uint64_t kMaxDescBytes = 4ull << 30;	/* one descriptor */
constexpr uint64_t kMaxRegBytes = 64ull << 30;	/* one registration */
constexpr uint64_t kGpuPage = 64ull << 10;	/* nvidia-p2p page size (KVBLK_MEM_CUDA alignment) */
constexpr uint32_t kDefaultKernelDescs = 4096;	/* the module's max_descs default */

/* Temporary registrations (plain pointers) held at once by one pass of a batch. */
constexpr uint32_t kTempPerPass = 256;

/*
 * Temporary registrations held at once by all the asynchronous batches of one backend (one
 * kvblk.ko context, KVBLK_MAX_BUFS registrations in all, persistent ones included).
 */
constexpr uint32_t kTempBudget = 512;

/* Marks a kernel result the module did not write. */
constexpr int32_t kNoResult = INT32_MIN;

/* The whole disk's name (nvme0n1, also for a partition of it) of block device @rdev, or "". */
std::string whole_disk_name(dev_t rdev)
{
	const std::string dir = "/sys/dev/block/" + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
	const bool partition = access((dir + "/partition").c_str(), F_OK) == 0;
	char real[PATH_MAX];
	if (!realpath((partition ? dir + "/.." : dir).c_str(), real))
		return {};
	const char *base = std::strrchr(real, '/');
	return base ? base + 1 : real;
}

/*
 * A buffer id's kvblk.ko registration: @kid (0: none), where the buffer starts in it, and its
 * enum kvblk_mem_kind.
 */
struct KernelBuf {
	uint32_t kid = 0;
	uint64_t delta = 0;
	int kind = KVBLK_MEM_HOST;
};

/**
 * struct KTarget - a libkvblk target that this backend's kvblk.ko context serves.
 * @live:   served here (target 0 from start(), added targets from add_target()).
 * @load:   its kvblk.ko target index (kvblk_attach.target), named by its load descriptors.
 * @store:  the kvblk.ko target its stores name (its own index, or a second block-layer
 *          attach of its fd when the PRP engine serves it), -1: no stores through kvblk.ko.
 * @split:  > 0: one descriptor per command of this size (a max_cmd_bytes below kvblk.ko's).
 * @cmd:    its largest command (kvblk_get_target_info().max_cmd_bytes).
 * @prp:    the PRP engine serves it (default or alternative): memory without struct pages
 *          (CUDA, dma-buf) reaches it.
 * @bdev:   a block device (the bio engine takes P2PDMA pages on a queue that takes them).
 */
struct KTarget {
	bool live = false;
	uint32_t load = 0;
	int32_t store = -1;
	uint64_t split = 0;
	uint64_t cmd = 0;
	bool prp = false;
	bool bdev = false;
};

/* Words for enum kvblk_engine @e. */
std::string engine_words(uint32_t e)
{
	switch (e) {
	case KVBLK_ENGINE_PRP:
		return "prp";
	case KVBLK_ENGINE_BIO:
		return "block-layer";
	case KVBLK_ENGINE_FILE:
		return "block-layer (file)";
	default:
		return "engine " + std::to_string(e);
	}
}

/* A page range registered for one call, and the objects it carries. */
struct TempRange {
	uint64_t start;
	uint64_t end;
	uint32_t kid;
	int32_t err;
};

/*
 * struct Plan - where each object of a batch goes (KmodBackend::plan(), for run() and start()
 * alike): its kvblk.ko target and descriptor size, and for plain destinations the merged page
 * range registered around its pass.
 * @range_of:  index into @ranges, or kInBuf (a buffer kvblk.ko registered), kNotSent
 *             (refused by route()), kPread (read with pread(2) by run(); a store's
 *             IoObject.positional write-back, pwrite(2)).
 * @ranges:    sorted by address; a pass registers [r0, r1) of them and sends their objects.
 */
struct Plan {
	static constexpr int32_t kInBuf = -1;
	static constexpr int32_t kNotSent = -2;
	static constexpr int32_t kPread = -3;

	struct Span {
		uint64_t start;
		uint64_t end;
		uint32_t obj;
	};

	std::vector<int32_t> range_of;
	std::vector<uint32_t> target_of;
	std::vector<uint64_t> split_of;
	std::vector<TempRange> ranges;
	std::vector<Span> spans;	/* plan()'s scratch */
};

/*
 * struct KernelBatch - the kernel side of a batch (of one pass of it, for plain destinations):
 * its kvblk.ko descriptors, the object each belongs to, the results the module writes
 * back, and every object's status so far. Both ways a batch reaches the module use it:
 * run() sends it as KVBLK_IOC_LOAD_MANY calls one after another, start() as
 * KVBLK_URING_CMD_LOAD_MANY commands all in flight at once; each call covers at most
 * max_descs descriptors [pos, pos + nr).
 */
struct KernelBatch {
	uint32_t flags = 0;	/* kvblk_load_many.flags: 0, or KVBLK_LOAD_F_STORE */
	std::vector<kvblk_io_desc> descs;
	std::vector<uint32_t> owner;
	std::vector<kvblk_desc_result> res;
	std::vector<int32_t> status;

	/* Record @st for object @obj: the first real error wins over -ECANCELED. */
	void note_status(uint32_t obj, int32_t st) noexcept
	{
		int32_t &cur = status[obj];
		if (st && (cur == 0 || cur == -ECANCELED))
			cur = st;
	}

	/*
	 * Descriptors for object @i of @b on kvblk.ko target @target into kvblk.ko buffer @kid at
	 * @buf_offset (@split: see KmodBackend).
	 */
	void add_descs(const Batch &b, uint32_t i, uint32_t target, uint32_t kid, uint64_t buf_offset, uint64_t split)
	{
		const IoObject &o = b.objects[i];
		const uint64_t piece = split ? split : kMaxDescBytes;
		for (uint64_t off = 0; off < o.length; off += piece) {
			kvblk_io_desc d{};
			d.offset = o.offset + off;
			d.length = std::min(piece, o.length - off);
			d.buf_offset = buf_offset + off;
			d.buf_id = kid;
			d.tag = b.results[i].tag;
			d.target = target;
			descs.push_back(d);
			owner.push_back(i);
		}
	}

	/* The header of the call of descriptors [@pos, @pos + @nr), their results marked unwritten. */
	struct kvblk_load_many header(size_t pos, uint32_t nr) noexcept
	{
		for (size_t k = pos; k < pos + nr; k++)
			res[k] = kvblk_desc_result{kNoResult, 0, 0};
		struct kvblk_load_many lm{}; /* the ioctl's struct; kvblk_load_many() is the C API call */
		lm.size = sizeof(lm);
		lm.flags = flags;
		lm.nr_descs = nr;
		lm.desc_bytes = sizeof(kvblk_io_desc);
		lm.descs = uint64_t(uintptr_t(&descs[pos]));
		lm.results = uint64_t(uintptr_t(&res[pos]));
		lm.result_bytes = sizeof(kvblk_desc_result);
		lm.bad_index = -1;
		return lm;
	}

	/* Whether a call of @nr descriptors failed (errno @err) only for having more than max_descs. */
	static bool too_many(int err, const struct kvblk_load_many &lm, uint32_t nr) noexcept
	{
		return err == E2BIG && lm.bad_index < 0 && nr > 1;
	}

	/*
	 * The call of descriptors [@pos, @pos + @nr) returned @ret (< 0: failed with errno @err)
	 * and left @lm: count its commands and record every descriptor's status.
	 */
	void ended(Batch &b, size_t pos, uint32_t nr, int ret, int err, const struct kvblk_load_many &lm) noexcept
	{
		if (ret >= 0)
			b.counters.commands += lm.nr_cmds;
		else
			set_last_error("kmod: kvblk.ko refused a KVBLK_IOC_LOAD_MANY of %u descriptors: %s "
				       "(bad_index %d)",
				       nr, errno_text(err).c_str(), lm.bad_index);
		for (size_t k = pos; k < pos + nr; k++) {
			int32_t st = res[k].status;
			if (st == kNoResult)
				st = err ? -err : -EIO;
			else if (st == 0 && res[k].bytes != descs[k].length)
				st = -EIO;
			note_status(owner[k], st);
		}
	}

	/* Descriptors [@from, @to) were never sent: their objects end with @st. */
	void unsent(size_t from, size_t to, int32_t st) noexcept
	{
		for (size_t k = from; k < to; k++)
			note_status(owner[k], st);
	}

	/* Object @i's result from its status. */
	void write_result(Batch &b, uint32_t i) const noexcept
	{
		b.results[i].status = status[i];
		b.results[i].bytes = status[i] ? 0 : b.objects[i].length;
	}

	/* Every object's result from its status. */
	void write_results(Batch &b) const noexcept
	{
		for (uint32_t i = 0; i < b.count; i++)
			write_result(b, i);
	}
};

struct NativeJob;
class KmodBackend;

/* One KVBLK_URING_CMD_LOAD_MANY of a started batch: descriptors [pos, pos + nr) of its job. */
struct NativeCall final : KmodRingCmd {
	NativeJob *job = nullptr;
	size_t pos = 0;
	uint32_t nr = 0;
	struct kvblk_load_many lm{};

	[[nodiscard]] bool cancelled() const noexcept override;
	void done(bool issued, int res) noexcept override;
	void object(const kvblk_uring_obj &rec) noexcept override;
};

/*
 * struct NativeJob - a batch start() handed to the ring: the kernel structs stay here, at
 * fixed addresses, until the last CQE of its calls has arrived. A batch with plain
 * destinations runs in passes: each registers at most kTempPerPass of its ranges (slots of
 * the backend's budget) and sends their objects; the first also sends the objects in
 * registered buffers. The last call of a pass ends it (KmodBackend::pass_ended()).
 * @left:    calls of the current pass not ended yet (the ring thread's once they are queued).
 * @plan:    where each object goes; its ranges [@r0, @r1) are the current pass's.
 * @next:    the first range not yet in a pass.
 * @granted: slots of the budget this job holds (for the current or the next pass).
 * @passes:  passes started.
 * @link:    next job in the backend's wait queue, or in a list of jobs to start.
 * @notice:  Batch.object_notice on a kvblk.ko with per-object CQEs: its calls ask for one
 *           record per descriptor (KVBLK_URING_F_PER_OBJECT), and an object whose
 *           descriptors all reported has its result written and told (object_done()) then.
 * @unheard: per object, descriptors of the current pass without a record yet.
 * @heard:   per descriptor of the current pass, whether its record came.
 * @told:    per object, whether object_done() was called for it.
 */
struct NativeJob {
	Batch *b = nullptr;
	KmodBackend *be = nullptr;
	KmodRing *ring = nullptr;
	std::atomic<uint32_t> *kernel_descs = nullptr;
	int ctl = -1;
	KernelBatch k;
	std::deque<NativeCall> calls;	/* push_back keeps references; freed with the job */
	uint32_t left = 0;
	Plan plan;
	size_t next = 0;
	size_t r0 = 0;
	size_t r1 = 0;
	uint32_t granted = 0;
	uint32_t passes = 0;
	NativeJob *link = nullptr;
	bool notice = false;
	std::vector<uint32_t> unheard;
	std::vector<uint8_t> heard;
	std::vector<uint8_t> told;

	/* Slots the next pass asks for: 0 when no range is left. */
	[[nodiscard]] uint32_t want() const noexcept
	{
		return uint32_t(std::min<size_t>(kTempPerPass, plan.ranges.size() - next));
	}

	/* Add the calls of descriptors [@pos, @end), at most @per each; their pointers into @out. */
	void add_calls(size_t pos, size_t end, uint32_t per, std::vector<KmodRingCmd *> *out)
	{
		while (pos < end) {
			const uint32_t nr = uint32_t(std::min<size_t>(per, end - pos));
			NativeCall &c = calls.emplace_back();
			c.job = this;
			c.pos = pos;
			c.nr = nr;
			c.fd = ctl;
			c.cmd_op = KVBLK_URING_CMD_LOAD_MANY;
			c.per_object = notice;
			c.lm = k.header(pos, nr);
			c.cmd.load_many = uint64_t(uintptr_t(&c.lm));
			out->push_back(&c);
			pos += nr;
		}
	}

	/*
	 * Call @c was refused only for having more descriptors than max_descs (lowered since
	 * open): send them again in calls of half as many. False when that cannot be queued.
	 */
	bool resend(const NativeCall &c) noexcept
	{
		const uint32_t per = std::max<uint32_t>(1, c.nr / 2);
		kernel_descs->store(std::min(kernel_descs->load(std::memory_order_relaxed), per),
				    std::memory_order_relaxed);
		try {
			std::vector<KmodRingCmd *> more;
			add_calls(c.pos, c.pos + c.nr, per, &more);
			left += uint32_t(more.size());
			try {
				ring->queue(more.data(), more.size(), b->priority);
			} catch (...) {
				left -= uint32_t(more.size());
				throw;
			}
		} catch (const std::bad_alloc &) {
			return false;
		}
		return true;
	}

	/* Objects of the ranges from @next on (and, @with_bufs, those in registered buffers) end @st. */
	void end_rest(bool with_bufs, int32_t st) noexcept
	{
		for (uint32_t i = 0; i < b->count; i++) {
			const int32_t r = plan.range_of[i];
			if ((r >= 0 && size_t(r) >= next) || (with_bufs && r == Plan::kInBuf))
				k.note_status(i, st);
		}
		next = plan.ranges.size();
	}

	/*
	 * The pass's descriptors are built (@notice): each object's count of descriptors to hear
	 * from. An object of the pass without any (its range failed) is told when the batch ends.
	 */
	void expect_records()
	{
		heard.assign(k.descs.size(), 0);
		for (uint32_t i : k.owner)
			unheard[i]++;
	}

	/*
	 * Call @c's record @rec (ring thread): note its descriptor's status; the object's last
	 * record writes its result and tells the sink. A record the call cannot have (an index
	 * past it, a second one) is ignored: the final CQE's results stay authoritative.
	 */
	void heard_from(const NativeCall &c, const kvblk_uring_obj &rec) noexcept
	{
		if (!notice || rec.index >= c.nr)
			return;
		const size_t d = c.pos + rec.index;
		if (heard[d])
			return;
		heard[d] = 1;
		const uint32_t i = k.owner[d];
		int32_t st = rec.status;
		if (st == 0 && rec.bytes != k.descs[d].length)
			st = -EIO; /* as ended() judges the results array */
		k.note_status(i, st);
		if (--unheard[i] || told[i])
			return;
		told[i] = 1;
		k.write_result(*b, i);
		b->object_done(i);
	}

	/*
	 * The last call ended: write the results (those not told yet: the others were written
	 * when told, with the same values), tell the rest, free the job, tell the scheduler.
	 */
	static void finish(NativeJob *j) noexcept
	{
		Batch &b = *j->b;
		if (!j->notice) {
			j->k.write_results(b);
		} else {
			for (uint32_t i = 0; i < b.count; i++) {
				if (j->told[i])
					continue;
				j->k.write_result(b, i);
				b.object_done(i);
			}
		}
		delete j;
		b.sink->batch_done(0);
	}
};

bool NativeCall::cancelled() const noexcept
{
	return job->b->cancelled();
}

class KmodBackend final : public Backend {
public:
	~KmodBackend() override
	{
		/* The scheduler waited for every batch: nothing of this device is on the ring. */
		writer_.reset();
		if (ctl_ >= 0)
			close(ctl_); /* the module unregisters and unpins what is left */
		ring_.reset(); /* the last device's ends the ring and its thread */
	}

	int start(BackendConfig &cfg)
	{
		const char *path = cfg.path.c_str();
		struct stat st;
		if (fstat(cfg.fd, &st) != 0) {
			const int e = errno;
			return fail(-e, "kmod: fstat(%s): %s", path, errno_text(e).c_str());
		}
		if (!S_ISBLK(st.st_mode))
			return fail(-EOPNOTSUPP,
				    "kmod: %s is %s: kvblk.ko reads NVMe namespaces (/dev/nvmeXnY); use uring",
				    path, S_ISREG(st.st_mode) ? "a regular file" : "not a block device");

		const testing::Seams *s = testing::active();
		const char *node = s && s->kmod_node ? s->kmod_node : kNode;
		ctl_ = open(node, O_RDWR | O_CLOEXEC);
		if (ctl_ < 0) {
			const int e = errno;
			if (e == ENOENT)
				return fail(-EOPNOTSUPP, "kmod: %s not present: kvblk.ko is not loaded (insmod kvblk.ko)",
					    node);
			return fail(-EOPNOTSUPP, "kmod: open(%s): %s", node, errno_text(e).c_str());
		}
		__u64 feat = 0;
		if (ioctl(ctl_, KVBLK_IOC_GET_FEATURES, &feat) != 0) {
			const int e = errno;
			return fail(-EOPNOTSUPP,
				    "kmod: %s does not answer KVBLK_IOC_GET_FEATURES (%s): not kvblk.ko, or "
				    "a version this libkvblk does not know",
				    node, errno_text(e).c_str());
		}
		feat_ = feat;
		const __u64 need = KVBLK_FEAT_PRP_ENGINE | KVBLK_FEAT_MEM_HOST;
		if ((feat & need) != need)
			return fail(-EOPNOTSUPP,
				    "kmod: kvblk.ko reports features 0x%llx, without the PRP engine or host "
				    "memory this backend needs",
				    ull(feat));

		kvblk_attach a{};
		a.size = sizeof(a);
		a.bdev_fd = cfg.fd;
		if (ioctl(ctl_, KVBLK_IOC_ATTACH, &a) != 0) {
			const int e = errno;
			if (e == EOPNOTSUPP || e == ENOTBLK)
				return fail(-EOPNOTSUPP,
					    "kmod: kvblk.ko refused %s (%s): not a PCIe NVMe namespace, a multipath "
					    "head, or a metadata/PI format; the kernel log names the reason",
					    path, errno_text(e).c_str());
			return fail(-e, "kmod: KVBLK_IOC_ATTACH of %s: %s", path, errno_text(e).c_str());
		}
		if (a.lba_size != cfg.logical_block_size || a.capacity != cfg.capacity)
			return fail(-EOPNOTSUPP,
				    "kmod: kvblk.ko sees %s as %llu bytes of %u-byte LBAs, the block device "
				    "as %llu bytes of %u-byte blocks",
				    path, ull(a.capacity), a.lba_size, ull(cfg.capacity), cfg.logical_block_size);
		if (a.max_cmd_bytes < cfg.logical_block_size || a.max_cmd_bytes % cfg.logical_block_size)
			return fail(-EOPNOTSUPP, "kmod: kvblk.ko reports max_cmd_bytes %u for %u-byte LBAs",
				    a.max_cmd_bytes, a.lba_size);

		/* The module splits at its own size; a smaller one asked for is one descriptor per command. */
		uint64_t split = 0;
		if (cfg.max_cmd_bytes < a.max_cmd_bytes)
			split = cfg.max_cmd_bytes;
		else
			cfg.max_cmd_bytes = a.max_cmd_bytes;

		const std::string sys = "/sys/kernel/kvblk/" + whole_disk_name(st.st_rdev);
		kernel_descs_ = uint32_t(std::min<uint64_t>(read_sysfs_u64(sys + "/max_descs"), UINT32_MAX));
		if (!kernel_descs_)
			kernel_descs_ = kDefaultKernelDescs;
		const uint32_t store_qd = cfg.queue_depth;
		if (uint64_t inflight = read_sysfs_u64(sys + "/max_inflight"))
			cfg.queue_depth = uint32_t(std::min<uint64_t>(inflight, UINT32_MAX));
		queue_depth_ = cfg.queue_depth;
		eagain_retries_ = cfg.eagain_retries;
		no_targets_ = s && s->kmod_no_targets;

		if (cfg.writable) {
			std::string why;
			store_target_ = store_target(cfg, a, s, &why);
			if (store_target_ < 0) {
				BackendConfig w = cfg;
				w.queue_depth = store_qd;
				int err = 0;
				writer_ = make_uring_backend(w, &err);
				if (!writer_)
					return err;
				store_note_ = ", stores through uring (" + why + ")";
			} else {
				store_note_ = store_target_ ? ", stores through kvblk.ko's block-layer engine (target " +
								 std::to_string(store_target_) + ")" :
							     ", stores through kvblk.ko";
			}
		}
		/* Batches through io_uring when the module takes them (and the ring can be made). */
		std::string async = ", batches on a dispatch thread (kvblk.ko without io_uring commands)";
		if ((feat & KVBLK_FEAT_URING_CMD) && !(s && s->kmod_no_uring_cmd)) {
			std::string why;
			ring_ = KmodRing::acquire(&why);
			async = ring_ ? ", batches through io_uring" : ", batches on a dispatch thread (io_uring: " + why + ")";
			if (ring_ && (feat & KVBLK_FEAT_URING_PER_OBJECT)) {
				records_ = ring_->records(&why);
				if (!records_)
					async += ", no per-object CQEs (" + why + ")";
			}
		}
		const char *engine = a.engine == KVBLK_ENGINE_PRP ? "prp" :
				     a.engine == KVBLK_ENGINE_BIO ? "block-layer" : nullptr;
		/* Since KVBLK_ATTACH_SIZE_VER3: the PRP engine beside the default, for device memory. */
		const bool prp_too = a.engine != KVBLK_ENGINE_PRP && (a.engines & (1u << KVBLK_ENGINE_PRP));
		cfg.note = "nsid " + std::to_string(a.nsid) + ", " +
			   (engine ? std::string(engine) : "engine " + std::to_string(a.engine)) +
			   " engine" + (prp_too ? " (prp for device memory)" : "") + async + store_note_;
		page_ = uint64_t(sysconf(_SC_PAGESIZE));
		KTarget *t0 = tgts_.ensure(0);
		if (!t0)
			return fail(-ENOMEM, "kmod: out of memory for the target table");
		*t0 = KTarget{true, a.target, store_target_, split, cfg.max_cmd_bytes, true, true};
		return 0;
	}

	/*
	 * Target @id added to the device: attach its fd to this context (KVBLK_ATTACH_F_ADD_TARGET,
	 * no engine flag: the module picks, as for target 0), with the checks start() makes of
	 * target 0, so that its objects go in the same KVBLK_IOC_LOAD_MANY calls as everyone's.
	 * Refused (-errno, the reason in kvblk_last_error(); the lanes then serve it as before):
	 * a kvblk.ko without KVBLK_FEAT_TARGETS, KVBLK_OPEN_BUFFERED, a writable target when
	 * kvblk.ko cannot store and the device has no uring writer, the module's refusal, a
	 * geometry or alignment libkvblk would not check objects against. A target attached and
	 * then refused here stays attached in the module, unused, until the device closes.
	 */
	int add_target(uint32_t id, BackendConfig &t) noexcept override
	{
		const char *path = t.path.c_str();
		/* Short reasons: the lanes put them in kvblk_dev_info.backend_reason (160 bytes). */
		if (!(feat_ & KVBLK_FEAT_TARGETS) || no_targets_)
			return fail(-EOPNOTSUPP, "kvblk.ko without KVBLK_FEAT_TARGETS (features 0x%llx)",
				    ull(no_targets_ ? feat_ & ~KVBLK_FEAT_TARGETS : feat_));
		if (t.buffered)
			return fail(-EOPNOTSUPP, "KVBLK_OPEN_BUFFERED asks for the page cache, which kvblk.ko bypasses");
		if (t.writable && !writer_ && !(feat_ & KVBLK_FEAT_STORE))
			return fail(-EOPNOTSUPP, "kvblk.ko without KVBLK_FEAT_STORE, and %s is writable", path);
		KTarget *slot = tgts_.ensure(id);
		if (!slot)
			return fail(-ENOMEM, "kmod: out of memory for target %u", id);
		kvblk_attach a{};
		a.size = sizeof(a);
		a.flags = KVBLK_ATTACH_F_ADD_TARGET;
		a.bdev_fd = t.fd;
		if (ioctl(ctl_, KVBLK_IOC_ATTACH, &a) != 0) {
			const int e = errno;
			return fail(-e, "kvblk.ko refused the attach: %s%s", errno_text(e).c_str(),
				    e == ENOSPC ? " (KVBLK_CTX_MAX_TARGETS attaches; removed targets stay attached "
						  "until kvblk_close())" :
						  " (the kernel log may say more)");
		}
		if (a.lba_size == 0 || t.logical_block_size % a.lba_size || a.capacity != t.capacity)
			return fail(-EOPNOTSUPP, "kvblk.ko sees %llu bytes of %u-byte blocks, libkvblk %llu of %u",
				    ull(a.capacity), a.lba_size, ull(t.capacity), t.logical_block_size);
		/*
		 * Destinations: the module wants buf_align (at least 4 through the block layer), the
		 * file system or block device may have said less (statx dio_mem_align, 1 for some
		 * devices): the target's mem_align becomes the larger, which libkvblk then checks.
		 */
		const uint32_t align = std::max(a.buf_align, t.mem_align);
		if (a.buf_align & (a.buf_align - 1) || align % t.mem_align || align > page_)
			return fail(-EOPNOTSUPP, "kvblk.ko's buffer alignment %u does not fit mem_align %u",
				    a.buf_align, t.mem_align);
		if (a.max_cmd_bytes < a.lba_size || a.max_cmd_bytes % a.lba_size)
			return fail(-EOPNOTSUPP, "kvblk.ko reports max_cmd_bytes %u for %u-byte blocks",
				    a.max_cmd_bytes, a.lba_size);
		int32_t store = -1;
		if (t.writable && !writer_) {
			store = int32_t(a.target);
			if (a.engine == KVBLK_ENGINE_PRP) {
				/* The PRP engine only reads: the same fd once more, through the block layer. */
				kvblk_attach w{};
				w.size = sizeof(w);
				w.flags = KVBLK_ATTACH_F_ENGINE_BIO | KVBLK_ATTACH_F_ADD_TARGET;
				w.bdev_fd = t.fd;
				if (ioctl(ctl_, KVBLK_IOC_ATTACH, &w) != 0) {
					const int e = errno;
					return fail(-e, "kvblk.ko refused the block-layer attach of %s for stores: %s", path,
						    errno_text(e).c_str());
				}
				store = int32_t(w.target);
			}
		}
		uint64_t split = 0;
		if (t.max_cmd_bytes < a.max_cmd_bytes)
			split = t.max_cmd_bytes; /* asked for: one descriptor per command */
		else
			t.max_cmd_bytes = a.max_cmd_bytes;
		const bool prp = a.engine == KVBLK_ENGINE_PRP || (a.engines & (1u << KVBLK_ENGINE_PRP));
		t.queue_depth = queue_depth_;
		t.mem_align = align;
		t.note = "target " + std::to_string(a.target) + " of the device's kvblk.ko context, " +
			 engine_words(a.engine) + " engine" +
			 (a.engine != KVBLK_ENGINE_PRP && prp ? " (prp for device memory)" : "");
		if (t.writable)
			t.note += writer_ ? ", stores through uring" :
				  store == int32_t(a.target) ? ", stores through kvblk.ko" :
							       ", stores through kvblk.ko's block-layer engine (target " +
								       std::to_string(store) + ")";
		*slot = KTarget{true, a.target, store, split, t.max_cmd_bytes, prp, t.blockdev};
		added_.store(true, std::memory_order_relaxed);
		return 0;
	}

	/*
	 * kvblk.ko has no detach: the module keeps the target attached (and its file open) until
	 * the context closes with the device; libkvblk forgets it, so no descriptor names it again
	 * (the library refuses its id until it is handed out again, to a new attach).
	 */
	void remove_target(uint32_t id) noexcept override
	{
		if (id && id < KVBLK_MAX_TARGETS && tgts_.get(id).live)
			tgts_[id] = KTarget{};
	}

	kvblk_backend kind() const noexcept override { return KVBLK_BACKEND_KMOD; }

	kvblk_backend kind_for(IoDir dir) const noexcept override
	{
		return dir == IoDir::write && writer_ ? KVBLK_BACKEND_URING : KVBLK_BACKEND_KMOD;
	}

	int run(Batch &b) noexcept override
	{
		if (b.dir == IoDir::write && writer_)
			return writer_->run(b);
		try {
			return load(b);
		} catch (const std::bad_alloc &) {
			return fail(-ENOMEM, "kmod: out of memory for a batch of %u objects", b.count);
		}
	}

	[[nodiscard]] kvblk_async async_mode() const noexcept override
	{
		return ring_ ? KVBLK_ASYNC_NATIVE : KVBLK_ASYNC_THREAD;
	}

	/*
	 * What start() takes: every batch when the ring is there (registered buffers, plain
	 * pointers, buffers the module refused; stores through the uring writer by its own
	 * start()) except loads with an object read with pread(2) (IoObject.min_length: a file's
	 * last block cut short by its end), which go to run() on the dispatch thread (the file
	 * header says why).
	 */
	[[nodiscard]] bool can_start(const Batch &b) const noexcept override
	{
		if (b.dir == IoDir::write && writer_)
			return true;
		if (!ring_)
			return false;
		for (uint32_t i = 0; i < b.count; i++)
			if ((b.dir == IoDir::read && b.objects[i].min_length) || b.objects[i].positional)
				return false;
		return true;
	}

	/* kvblk_load_many() on an idle device: the ioctl on the caller's thread, as ever. */
	[[nodiscard]] bool run_sync_inline() const noexcept override { return true; }

	/*
	 * The batch's descriptors (the ones run() would send) go to the ring as calls of at
	 * most max_descs, all at once; with plain destinations pass by pass (launch()), the
	 * first pass's ranges registered here. The last CQE writes the results and ends the
	 * batch. A batch whose first pass finds no slot of the budget waits for one in the
	 * backend's queue: the batch that gives slots back starts it.
	 */
	void start(Batch &b) noexcept override
	{
		if (b.dir == IoDir::write && writer_) {
			writer_->start(b);
			return;
		}
		NativeJob *j = nullptr;
		try {
			auto up = std::make_unique<NativeJob>();
			up->b = &b;
			up->be = this;
			up->ring = ring_.get();
			up->kernel_descs = &kernel_descs_;
			up->ctl = ctl_;
			up->notice = b.object_notice && records_;
			if (up->notice) {
				up->unheard.assign(b.count, 0);
				up->told.assign(b.count, 0);
			}
			plan(b, up->k, up->plan);
			j = up.release();
		} catch (const std::bad_alloc &) {
			b.sink->batch_done(fail(-ENOMEM, "kmod: out of memory for a batch of %u objects", b.count));
			return;
		}
		if (!take_slots(j))
			return; /* queued: a batch that gives slots back starts it */
		NativeJob *work = nullptr;
		launch(j, &work); /* j is the ring thread's now; it may be gone already */
		if (work)
			drive(work);
	}

	/*
	 * The last call of @j's pass ended (on the ring thread, from NativeCall::done()): end
	 * the pass, then start what was waiting for its slots. @j may be freed.
	 */
	void pass_ended(NativeJob *j) noexcept
	{
		NativeJob *work = nullptr;
		end_pass(j, &work);
		if (work)
			drive(work);
	}

	/*
	 * Calls still queued check BatchSink::cancelled() when the ring takes them: wake it. A
	 * batch waiting for slots of the budget ends here, its objects -ECANCELED.
	 */
	void cancel(uint64_t id) noexcept override
	{
		if (writer_)
			writer_->cancel(id);
		if (!ring_)
			return;
		ring_->kick();
		NativeJob *found = nullptr;
		{
			std::lock_guard<std::mutex> g(temp_mu_);
			for (NativeJob **pp = &wait_head_, *prev = nullptr; *pp; prev = *pp, pp = &(*pp)->link) {
				if ((*pp)->b->id != id)
					continue;
				found = *pp;
				*pp = found->link;
				if (wait_tail_ == found)
					wait_tail_ = prev;
				found->link = nullptr;
				break;
			}
		}
		if (found) {
			NativeJob *work = nullptr;
			launch(found, &work); /* cancelled: ends it, holding no slot */
		}
	}

	BufferRegistration register_buffer(uint32_t id, uint8_t *base, uint64_t len) noexcept override
	{
		BufferRegistration r;
		if (writer_)
			r = writer_->register_buffer(id, base, len);
		const uint64_t start = uint64_t(uintptr_t(base)) & ~(page_ - 1);
		const uint64_t end = (uint64_t(uintptr_t(base)) + len + page_ - 1) & ~(page_ - 1);
		char note[400];
		int err = -E2BIG;
		uint32_t kid = 0;
		if (end - start <= kMaxRegBytes)
			err = register_range(start, end, &kid);
		if (err == 0) {
			bufs_[id] = KernelBuf{kid, uint64_t(uintptr_t(base)) - start, KVBLK_MEM_HOST};
			return r;
		}
		if (err == -EFAULT) { /* the range, not a limit: registration fails */
			if (writer_)
				writer_->unregister_buffer(id, r.fixed_index);
			std::snprintf(note, sizeof(note),
				      "buffer %u (%llu bytes): kvblk.ko could not pin it: EFAULT (part of the range "
				      "is not mapped, or not writable)",
				      id, ull(len));
			BufferRegistration bad;
			bad.error = -EFAULT;
			bad.set_note(note);
			return bad;
		}
		if (err == -E2BIG)
			std::snprintf(note, sizeof(note),
				      "buffer %u (%llu bytes) is larger than kvblk.ko registers at once (64 GiB); "
				      "loads into it are pinned and DMA-mapped for each call instead",
				      id, ull(len));
		else
			std::snprintf(note, sizeof(note),
				      "buffer %u (%llu bytes): kvblk.ko could not register it: %s (RLIMIT_MEMLOCK "
				      "is %s); loads into it are pinned and DMA-mapped for each call instead",
				      id, ull(len), ErrnoText(err).c_str(), MemlockText().s);
		r.fell_back = true;
		r.append_note(note);
		return r;
	}

	/*
	 * CUDA memory, dma-bufs and P2PDMA mappings go to the module when it reports the kind:
	 * the 64 KiB aligned CUDA range rounded up to 64 KiB, the others as given (page aligned).
	 */
	int register_device_buffer(uint32_t id, int kind, int dmabuf_fd, uint64_t addr,
				   uint64_t len) noexcept override
	{
		const bool cuda = kind == KVBLK_MEM_CUDA, p2pdma = kind == KVBLK_MEM_P2PDMA;
		const __u64 bit = cuda ? KVBLK_FEAT_MEM_CUDA : p2pdma ? KVBLK_FEAT_MEM_P2PDMA : KVBLK_FEAT_MEM_DMABUF;
		const char *what = cuda ? "CUDA memory" : p2pdma ? "P2PDMA memory" : "dma-buf";
		if (!(feat_ & bit))
			return fail(-EOPNOTSUPP, "kvblk.ko does not support %s (no %s in its features 0x%llx)", what,
				    cuda ? "KVBLK_FEAT_MEM_CUDA" : p2pdma ? "KVBLK_FEAT_MEM_P2PDMA" : "KVBLK_FEAT_MEM_DMABUF",
				    ull(feat_));
		uint64_t reg_len = len;
		if (cuda) {
			if (addr % kGpuPage)
				return fail(-EINVAL,
					    "kmod: CUDA address 0x%llx is not 64 KiB aligned (nvidia-p2p maps 64 KiB "
					    "GPU pages)", ull(addr));
			reg_len = (len + kGpuPage - 1) / kGpuPage * kGpuPage;
		}
		if (reg_len > kMaxRegBytes)
			return fail(-E2BIG, "kmod: %s range of %llu bytes is larger than kvblk.ko registers (64 GiB)",
				    what, ull(len));
		kvblk_buf_reg reg{};
		reg.size = sizeof(reg);
		reg.kind = cuda ? KVBLK_MEM_CUDA : p2pdma ? KVBLK_MEM_P2PDMA : KVBLK_MEM_DMABUF;
		reg.dmabuf_fd = cuda || p2pdma ? 0 : dmabuf_fd;
		reg.addr = addr;
		reg.len = reg_len;
		if (ioctl(ctl_, KVBLK_IOC_REGISTER_BUFFER, &reg) != 0) {
			const int e = errno;
			return fail(-e, "kmod: kvblk.ko refused to register %s [0x%llx, +%llu): %s (the kernel log "
					"may say more)", what, ull(addr), ull(reg_len), errno_text(e).c_str());
		}
		bufs_[id] = KernelBuf{reg.buf_id, 0, int(reg.kind)};
		return 0;
	}

	/*
	 * KVBLK_IOC_CHECK_BUFFER (KVBLK_FEAT_MM_GUARD): the module compares the pages it pinned
	 * for the buffer with those the range maps now. A buffer the module did not register
	 * (a fallback) is pinned per call: nothing to compare.
	 */
	int check_buffer(uint32_t id) noexcept override
	{
		if (!bufs_[id].kid)
			return 0;
		if (!(feat_ & KVBLK_FEAT_MM_GUARD))
			return fail(-EOPNOTSUPP,
				    "kmod: this kvblk.ko cannot compare its pinned pages with the mapping (no "
				    "KVBLK_FEAT_MM_GUARD in its features 0x%llx)", ull(feat_));
		kvblk_buf_check c{};
		c.size = sizeof(c);
		c.buf_id = bufs_[id].kid;
		if (ioctl(ctl_, KVBLK_IOC_CHECK_BUFFER, &c) != 0) {
			const int e = errno;
			return fail(-e, "kmod: KVBLK_IOC_CHECK_BUFFER of buffer %u: %s", id, errno_text(e).c_str());
		}
		if (c.state == KVBLK_BUF_STALE)
			return fail(-ESTALE,
				    "kmod: buffer %u no longer maps the pages kvblk.ko pinned at registration (the "
				    "memory was unmapped and mapped again, or dropped with madvise)", id);
		return 0;
	}

	void unregister_buffer(uint32_t id, int32_t fixed_index) noexcept override
	{
		if (writer_)
			writer_->unregister_buffer(id, fixed_index);
		if (bufs_[id].kid)
			unregister_range(bufs_[id].kid);
		bufs_[id] = KernelBuf{};
	}

private:
	/*
	 * The kvblk.ko target stores go to (KVBLK_FEAT_STORE): the attached one (@a) unless the
	 * PRP engine serves it, else the same fd attached again through the block-layer engine.
	 * -1 and *why when the module cannot store here.
	 */
	int store_target(const BackendConfig &cfg, const kvblk_attach &a, const testing::Seams *s,
			 std::string *why) noexcept
	{
		if (!(feat_ & KVBLK_FEAT_STORE) || (s && s->kmod_no_store)) {
			*why = "kvblk.ko without KVBLK_FEAT_STORE";
			return -1;
		}
		if (a.engine != KVBLK_ENGINE_PRP)
			return int(a.target);
		if (!(feat_ & KVBLK_FEAT_TARGETS)) {
			*why = "the PRP engine only reads and kvblk.ko takes one target per context";
			return -1;
		}
		kvblk_attach w{};
		w.size = sizeof(w);
		w.flags = KVBLK_ATTACH_F_ENGINE_BIO | KVBLK_ATTACH_F_ADD_TARGET;
		w.bdev_fd = cfg.fd;
		if (ioctl(ctl_, KVBLK_IOC_ATTACH, &w) != 0) {
			*why = "kvblk.ko refused the block-layer attach for stores: " + errno_text(errno);
			return -1;
		}
		if (w.lba_size != a.lba_size || w.capacity != a.capacity) {
			*why = "the block-layer engine sees another geometry";
			return -1;
		}
		return int(w.target);
	}

	/* KVBLK_IOC_REGISTER_BUFFER of a page-aligned host range; 0 and *kid, or -errno. */
	int register_range(uint64_t start, uint64_t end, uint32_t *kid) noexcept
	{
		kvblk_buf_reg reg{};
		reg.size = sizeof(reg);
		reg.kind = KVBLK_MEM_HOST;
		reg.addr = start;
		reg.len = end - start;
		if (ioctl(ctl_, KVBLK_IOC_REGISTER_BUFFER, &reg) != 0)
			return -errno;
		*kid = reg.buf_id;
		return 0;
	}

	void unregister_range(uint32_t kid) noexcept
	{
		kvblk_buf_unreg u{};
		u.size = sizeof(u);
		u.buf_id = kid;
		/* No batch of ours is running on it: -EBUSY only after a killed caller, which is gone. */
		(void)ioctl(ctl_, KVBLK_IOC_UNREGISTER_BUFFER, &u);
	}

	/*
	 * Send k_'s descriptors in calls of at most kernel_descs_ descriptors and record every
	 * descriptor's status. Returns false when the caller is being killed (stop).
	 */
	bool submit(Batch &b)
	{
		KernelBatch &k = k_;
		const size_t total = k.descs.size();
		k.res.resize(total);
		size_t pos = 0;
		while (pos < total) {
			if (b.cancelled()) {
				/* kvblk_cancel(): the descriptors of the ioctls not sent yet end here (also
				 * those of a later pass for plain destinations). */
				k.unsent(pos, total, -ECANCELED);
				return true;
			}
			const uint32_t nr =
				uint32_t(std::min<size_t>(kernel_descs_.load(std::memory_order_relaxed), total - pos));
			struct kvblk_load_many lm = k.header(pos, nr);
			const int ret = ioctl(ctl_, KVBLK_IOC_LOAD_MANY, &lm);
			const int err = ret < 0 ? errno : 0;
			if (KernelBatch::too_many(err, lm, nr)) {
				/* The module's max_descs was lowered since open: use the smaller size. */
				kernel_descs_.store(nr / 2, std::memory_order_relaxed);
				continue;
			}
			if (err == EINTR) {
				/* Only a fatal signal interrupts the module's wait: this process is dying. */
				k.unsent(pos, pos + nr, -EINTR);
				k.unsent(pos + nr, total, -ECANCELED);
				return false;
			}
			k.ended(b, pos, nr, ret, err, lm);
			pos += nr;
		}
		return true;
	}

	/*
	 * The plan of batch @b (for run() and start() alike): each object's kvblk.ko target and
	 * descriptor size (route(); the refused end with their errno in @k), kPread for a load's
	 * object read with pread(2) (and a store's IoObject.positional one, pwrite(2)), and the page ranges of the plain destinations (and of buffers
	 * kvblk.ko refused), merged (objects in one allocation share one range) and sorted.
	 */
	void plan(const Batch &b, KernelBatch &k, Plan &p)
	{
		const uint32_t n = b.count;
		k.flags = b.dir == IoDir::write ? KVBLK_LOAD_F_STORE : 0;
		k.status.assign(n, 0);
		p.range_of.assign(n, Plan::kInBuf);
		p.target_of.resize(n);
		p.split_of.resize(n);
		p.spans.clear();
		for (uint32_t i = 0; i < n; i++) {
			const IoObject &o = b.objects[i];
			if ((o.min_length && b.dir == IoDir::read) || o.positional) {
				p.range_of[i] = Plan::kPread;
			} else if (const int32_t st = route(b, i, &p.target_of[i], &p.split_of[i])) {
				k.note_status(i, st);
				p.range_of[i] = Plan::kNotSent;
			} else if (o.buf_id == KVBLK_BUF_NONE || !bufs_[o.buf_id].kid) {
				const uint64_t a = uint64_t(uintptr_t(o.mem)) & ~(page_ - 1);
				const uint64_t e = (uint64_t(uintptr_t(o.mem)) + o.length + page_ - 1) & ~(page_ - 1);
				p.spans.push_back({a, e, i});
			}
		}
		std::sort(p.spans.begin(), p.spans.end(),
			  [](const Plan::Span &x, const Plan::Span &y) { return x.start < y.start; });
		p.ranges.clear();
		for (const Plan::Span &sp : p.spans) {
			if (p.ranges.empty() || sp.start > p.ranges.back().end ||
			    sp.end - p.ranges.back().start > kMaxRegBytes)
				p.ranges.push_back(TempRange{sp.start, sp.end, 0, 0});
			else
				p.ranges.back().end = std::max(p.ranges.back().end, sp.end);
			p.range_of[sp.obj] = int32_t(p.ranges.size() - 1);
		}
	}

	/*
	 * Register the ranges of a pass of @p: from @r0, at most @max of them. Returns r1, the
	 * end of the pass. A range kvblk.ko refuses keeps its errno in TempRange.err (its objects
	 * fail with it, nothing else). -ENOSPC (the context's KVBLK_MAX_BUFS registrations taken,
	 * persistent ones included) ends the pass there: once the pass holds a range, that range
	 * goes to the next pass (err cleared); as the pass's first range it fails alone, and the
	 * next pass tries the ranges after it (registrations elsewhere may have ended by then).
	 */
	size_t register_ranges(Plan &p, size_t r0, size_t max) noexcept
	{
		const size_t end = std::min(p.ranges.size(), r0 + max);
		size_t r = r0;
		for (; r < end; r++) {
			TempRange &tr = p.ranges[r];
			tr.err = register_range(tr.start, tr.end, &tr.kid);
			if (!tr.err)
				continue;
			if (tr.err == -ENOSPC && r > r0) {
				tr.err = 0;
				break;
			}
			set_last_error("kmod: registering [0x%llx, 0x%llx) for the plain destinations of a load: %s "
				       "(RLIMIT_MEMLOCK is %s)",
				       ull(tr.start), ull(tr.end), errno_text(tr.err).c_str(), MemlockText().s);
			if (tr.err == -ENOSPC)
				return r + 1;
		}
		return r;
	}

	void unregister_ranges(const Plan &p, size_t r0, size_t r1) noexcept
	{
		for (size_t r = r0; r < r1; r++)
			if (!p.ranges[r].err)
				unregister_range(p.ranges[r].kid);
	}

	/*
	 * @k's descriptors for the pass of ranges [@r0, @r1) of @p (@first: and the objects in
	 * registered buffers); objects of a range that failed to register end with its errno.
	 */
	void pass_descs(const Batch &b, KernelBatch &k, const Plan &p, size_t r0, size_t r1, bool first)
	{
		k.descs.clear();
		k.owner.clear();
		for (uint32_t i = 0; i < b.count; i++) {
			const IoObject &o = b.objects[i];
			const int32_t r = p.range_of[i];
			if (r == Plan::kInBuf) {
				if (first)
					k.add_descs(b, i, p.target_of[i], bufs_[o.buf_id].kid,
						    bufs_[o.buf_id].delta + o.buf_offset, p.split_of[i]);
			} else if (r >= 0 && size_t(r) >= r0 && size_t(r) < r1) {
				const TempRange &tr = p.ranges[size_t(r)];
				if (tr.err)
					k.note_status(i, tr.err);
				else
					k.add_descs(b, i, p.target_of[i], tr.kid, uint64_t(uintptr_t(o.mem)) - tr.start,
						    p.split_of[i]);
			}
		}
	}

	int load(Batch &b)
	{
		plan(b, k_, plan_);
		read_ends(b);
		const size_t nr = plan_.ranges.size();
		bool alive = true;
		size_t r0 = 0;
		do {
			/* After kvblk_cancel() (or a fatal signal) the passes left register nothing. */
			const bool go = alive && !(r0 && b.cancelled());
			size_t r1 = nr;
			if (go)
				r1 = register_ranges(plan_, r0, kTempPerPass);
			else
				for (size_t r = r0; r < r1; r++)
					plan_.ranges[r].err = -ECANCELED;
			try {
				pass_descs(b, k_, plan_, r0, r1, r0 == 0);
				if (go && !k_.descs.empty())
					alive = submit(b);
			} catch (...) {
				/* std::bad_alloc: run() fails the batch; nothing stays pinned. */
				unregister_ranges(plan_, r0, r1);
				throw;
			}
			unregister_ranges(plan_, r0, r1);
			r0 = r1;
		} while (r0 < nr);
		k_.write_results(b);
		return 0;
	}

	/*
	 * Slots of the budget for @j's next pass: true with j->granted set (as many as there
	 * are, up to what it wants), or false with @j queued behind the jobs already waiting
	 * (a KVBLK_SUBMIT_PRIORITY batch behind the waiting priority ones only).
	 */
	bool take_slots(NativeJob *j) noexcept
	{
		const uint32_t want = j->want();
		if (!want)
			return true;
		std::lock_guard<std::mutex> g(temp_mu_);
		if (!wait_head_ && temp_free_) {
			j->granted = std::min(want, temp_free_);
			temp_free_ -= j->granted;
			return true;
		}
		NativeJob **pp = &wait_head_, *prev = nullptr;
		if (j->b->priority)
			for (; *pp && (*pp)->b->priority; pp = &(*pp)->link)
				prev = *pp;
		else if (wait_tail_)
			pp = &(prev = wait_tail_)->link;
		j->link = *pp;
		*pp = j;
		if (wait_tail_ == prev)
			wait_tail_ = j;
		return false;
	}

	/* @n slots come back: the waiting jobs they go to (in order) are put on *work to start. */
	void give_back(uint32_t n, NativeJob **work) noexcept
	{
		if (!n)
			return;
		std::lock_guard<std::mutex> g(temp_mu_);
		temp_free_ += n;
		while (wait_head_ && temp_free_) {
			NativeJob *w = wait_head_;
			wait_head_ = w->link;
			if (!wait_head_)
				wait_tail_ = nullptr;
			w->granted = std::min(w->want(), temp_free_);
			temp_free_ -= w->granted;
			w->link = *work;
			*work = w;
		}
	}

	/* Start every job on @work (launching one may add more). */
	void drive(NativeJob *work) noexcept
	{
		while (work) {
			NativeJob *j = work;
			work = j->link;
			j->link = nullptr;
			launch(j, &work);
			/* work: jobs not ended yet, so this backend is still alive when it is not empty */
		}
	}

	/*
	 * Start @j's next pass with the slots it holds: register its ranges (on this thread: the
	 * submitter's for a first pass, the ring's for the others) and queue its calls. A pass with
	 * nothing to send, and a cancelled batch, end here. Jobs given slots meanwhile go on *work.
	 */
	void launch(NativeJob *j, NativeJob **work) noexcept
	{
		Batch &b = *j->b;
		KernelBatch &k = j->k;
		const bool first = j->passes++ == 0;
		if (b.cancelled()) {
			j->end_rest(first, -ECANCELED);
			give_back(j->granted, work);
			j->granted = 0;
			NativeJob::finish(j);
			return;
		}
		j->r0 = j->next;
		j->r1 = register_ranges(j->plan, j->r0, j->granted);
		j->next = j->r1;
		const uint32_t used = uint32_t(j->r1 - j->r0);
		if (j->granted > used) { /* -ENOSPC made the pass smaller */
			give_back(j->granted - used, work);
			j->granted = used;
		}
		try {
			pass_descs(b, k, j->plan, j->r0, j->r1, first);
			if (!k.descs.empty()) {
				k.res.resize(k.descs.size());
				if (j->notice)
					j->expect_records();
				std::vector<KmodRingCmd *> calls;
				j->add_calls(0, k.descs.size(),
					     std::max<uint32_t>(1, kernel_descs_.load(std::memory_order_relaxed)), &calls);
				const testing::Seams *s = testing::active();
				if (s && s->kmod_pass) {
					std::unique_lock<std::mutex> g(temp_mu_);
					const uint32_t held = kTempBudget - temp_free_;
					g.unlock();
					s->kmod_pass(b.id, j->passes - 1, used, held);
				}
				j->left = uint32_t(calls.size());
				ring_->queue(calls.data(), calls.size(), b.priority);
				return; /* the ring thread's now */
			}
		} catch (const std::bad_alloc &) {
			/* Nothing of the pass was queued (KmodRing::queue() is all or nothing). */
			set_last_error("kmod: out of memory for a pass of a batch of %u objects", b.count);
			for (uint32_t i = 0; i < b.count; i++) {
				const int32_t r = j->plan.range_of[i];
				if ((r >= 0 && size_t(r) >= j->r0 && size_t(r) < j->r1) || (first && r == Plan::kInBuf))
					k.note_status(i, -ENOMEM);
			}
			j->left = 0;
		}
		end_pass(j, work);
	}

	/*
	 * @j's pass ended: unregister its ranges, give its slots back, and take slots for its
	 * next pass (on *work once it has them), or end it (the rest -ECANCELED if cancelled).
	 */
	void end_pass(NativeJob *j, NativeJob **work) noexcept
	{
		unregister_ranges(j->plan, j->r0, j->r1);
		j->r0 = j->r1 = j->next;
		give_back(j->granted, work);
		j->granted = 0;
		if (j->next < j->plan.ranges.size()) {
			if (!j->b->cancelled()) {
				if (take_slots(j)) {
					j->link = *work;
					*work = j;
				}
				return;
			}
			j->end_rest(false, -ECANCELED);
		}
		NativeJob::finish(j); /* last: *work holds batches not ended, the backend lives on */
	}

	/*
	 * The KTarget of libkvblk target @id. A backend no target was added to serves one target
	 * whatever the id (a lane of its own for a block device the device's context did not
	 * take, lanes.hpp): its target 0.
	 */
	const KTarget &slot_of(uint32_t id) const noexcept
	{
		return added_.load(std::memory_order_relaxed) ? tgts_.get(id) : tgts_.get(0);
	}

	/*
	 * Where object @i of @b goes: its kvblk.ko target (*target) and descriptor size (*split),
	 * or the -errno it ends with, unsent: -ENOENT a target this context does not serve,
	 * -EBADF a store to a target without a store-capable attach, -EOPNOTSUPP device memory
	 * that the target's engines cannot reach (an added target without the PRP engine: on
	 * another NVMe PCI function, a file, another block device; kvblk.ko would refuse the
	 * whole call with -EXDEV).
	 */
	int32_t route(const Batch &b, uint32_t i, uint32_t *target, uint64_t *split) const noexcept
	{
		const IoObject &o = b.objects[i];
		const KTarget &t = slot_of(o.target);
		if (!t.live)
			return -ENOENT;
		if (b.dir == IoDir::write && t.store < 0)
			return -EBADF;
		if (o.target && o.buf_id != KVBLK_BUF_NONE && bufs_[o.buf_id].kid) {
			const int kind = bufs_[o.buf_id].kind;
			const bool reach = kind == KVBLK_MEM_HOST || t.prp || (kind == KVBLK_MEM_P2PDMA && t.bdev);
			if (!reach) {
				set_last_error("kmod: target %u has no engine of kvblk.ko that reaches device memory "
					       "(no PRP engine: another NVMe PCI function, a file or another block "
					       "device): its objects in buffer %u fail with EOPNOTSUPP",
					       o.target, o.buf_id);
				return -EOPNOTSUPP;
			}
		}
		*target = b.dir == IoDir::write ? uint32_t(t.store) : t.load;
		*split = t.split;
		return 0;
	}

	/*
	 * The objects marked kPread: pread(2) (pwrite(2) for a store's IoObject.positional
	 * write-back of a file's cut-short last block) on the object's own fd, each on this thread.
	 */
	void read_ends(Batch &b) noexcept
	{
		std::atomic<uint64_t> inflight{0}, peak{0};
		for (uint32_t i = 0; i < b.count; i++) {
			if (plan_.range_of[i] != Plan::kPread)
				continue;
			const IoObject &o = b.objects[i];
			const PositionalIo pio{b.dir, KVBLK_BACKEND_KMOD, std::max<uint64_t>(slot_of(o.target).cmd, 4096),
					       eagain_retries_, testing::active(), &inflight, &peak};
			uint64_t valid = 0;
			const int32_t st = b.cancelled() ? -ECANCELED : move_object(pio, o, i, &b.counters, &valid);
			k_.note_status(i, st);
		}
	}

	int ctl_ = -1;
	__u64 feat_ = 0;	/* KVBLK_IOC_GET_FEATURES */
	uint64_t page_ = 4096;
	uint32_t queue_depth_ = 0;	/* target 0's disk's max_inflight: every batch's cap */
	uint32_t eagain_retries_ = 0;
	bool no_targets_ = false;	/* the kmod_no_targets seam */
	TargetSlots<KTarget> tgts_;	/* the targets served here, by libkvblk target id */
	std::atomic<bool> added_{false};	/* add_target() took one: objects name their KTarget */
	std::atomic<uint32_t> kernel_descs_{kDefaultKernelDescs};	/* run() and start() lower it */
	std::unique_ptr<Backend> writer_;	/* stores through uring (no KVBLK_FEAT_STORE) */
	int store_target_ = -1;		/* stores through kvblk.ko: its target index */
	std::string store_note_;	/* backend_reason's words on stores */
	std::array<KernelBuf, kMaxBuffers> bufs_{};
	std::shared_ptr<KmodRing> ring_;	/* set: KVBLK_ASYNC_NATIVE through the process's kvblk.ko ring */
	bool records_ = false;	/* kvblk.ko posts per-object CQEs and ring_ takes them */

	/* run()'s per-batch state, kept between batches. */
	KernelBatch k_;
	Plan plan_;

	/*
	 * start()'s temporary registrations: slots free of kTempBudget, and the jobs waiting
	 * for some (in order, priority ones first, through NativeJob.link). Every waiting job holds none, and jobs wait
	 * only while none is free: slots are held by passes in flight, whose ends give them
	 * back and start the waiting jobs, so every job starts and kvblk_close() ends.
	 */
	std::mutex temp_mu_;
	uint32_t temp_free_ = kTempBudget;
	NativeJob *wait_head_ = nullptr;
	NativeJob *wait_tail_ = nullptr;
};

void NativeCall::object(const kvblk_uring_obj &rec) noexcept
{
	job->heard_from(*this, rec);
}

void NativeCall::done(bool issued, int res) noexcept
{
	NativeJob *j = job;
	if (!issued) {
		j->k.unsent(pos, pos + nr, res); /* kvblk_cancel() came first: -ECANCELED */
	} else {
		const int err = res < 0 ? -res : 0;
		if (!(KernelBatch::too_many(err, lm, nr) && j->resend(*this)))
			j->k.ended(*j->b, pos, nr, res, err, lm);
	}
	if (--j->left == 0)
		j->be->pass_ended(j); /* may free this call too: nothing after it */
}

} // namespace

std::unique_ptr<Backend> make_kmod_backend(BackendConfig &cfg, int *err)
{
	auto b = std::make_unique<KmodBackend>();
	*err = b->start(cfg);
	if (*err)
		return nullptr;
	return b;
}

} // namespace kvblk::detail

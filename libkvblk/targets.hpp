// SPDX-License-Identifier: MIT
// The targets of one device (kvblk_add_target()): target 0 is kvblk_open()'s path, the
// others are files and block devices that descriptors name in kvblk_desc.target. Each has
// its own fd and geometry; batches pin the targets they name so that kvblk_remove_target()
// cannot close an fd a command is using (-EBUSY instead).
#pragma once

#include "target.hpp"

#include <kvblk/kvblk.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kvblk::detail {

/**
 * struct TargetEntry - one target of a device.
 * @t:             the opened target (fd and geometry as found when it was opened).
 * @size:          bytes now: a file is sized again (fstat) when a batch that names it
 *                 starts, so bytes appended after it was added are loadable; a block
 *                 device keeps t.capacity.
 * @max_cmd_bytes: largest command for its objects (what the backend that serves it said,
 *                 lowered to the target's own unsplit limit on a uring device: clamp_to_unsplit()).
 * @cmd_note:      why @max_cmd_bytes was lowered so, or empty (kvblk_get_target_info()).
 * @queue_depth, @workers: those of the backend that serves it (kvblk_get_target_info()).
 * @pins:          batches that name it and have not finished (under the table lock).
 * @mark:          the last batch serial that pinned it (one pin per batch).
 */
struct TargetEntry {
	Target t;
	std::atomic<uint64_t> size{0};
	uint64_t max_cmd_bytes = 0;
	std::string cmd_note;
	uint32_t queue_depth = 0;
	uint32_t workers = 0;
	uint32_t pins = 0;
	uint64_t mark = 0;
};

/* Ids of the targets one batch pinned. */
using TargetPins = std::vector<uint32_t>;

/*
 * class TargetTable - thread safe. Batches take lock(), find targets with find_locked() and
 * pin them with pin_locked(); add and remove reserve a slot first, so the slow parts (open,
 * the backend's checks, close) run without the lock.
 */
class TargetTable {
public:
	TargetTable();
	~TargetTable();
	TargetTable(const TargetTable &) = delete;
	TargetTable &operator=(const TargetTable &) = delete;

	/*
	 * Target 0 (kvblk_open()), installed once before the device is handed out. t0() takes no
	 * lock and reads no slot: reserve() may reallocate slots_ on another thread meanwhile, the
	 * entry itself never moves (and target 0 is never removed).
	 */
	void install0(std::unique_ptr<TargetEntry> e);
	[[nodiscard]] TargetEntry &t0() noexcept { return *t0_; }
	[[nodiscard]] const TargetEntry &t0() const noexcept { return *t0_; }

	/* Reserve the smallest free id >= 1: 0 with *id, or -ENOSPC at KVBLK_MAX_TARGETS. */
	int reserve(uint32_t *id);
	/* Make reserved @id live as @e. */
	void publish(uint32_t id, std::unique_ptr<TargetEntry> e);
	/* Give reserved @id back (a failed add, or the end of a removal). */
	void release(uint32_t id);
	/*
	 * Start removing @id (>= 1): -ENOENT not live, -EBUSY pinned by a batch; else the slot
	 * becomes reserved (invisible to batches) and *out takes the entry (close its fd, then
	 * release(@id)).
	 */
	int begin_remove(uint32_t id, std::unique_ptr<TargetEntry> *out);

	[[nodiscard]] std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mu_); }
	/* With lock() held: the live target @id, or nullptr. */
	[[nodiscard]] TargetEntry *find_locked(uint32_t id) noexcept;
	/*
	 * With lock() held: pin live target @id for the batch with serial @serial (once per
	 * batch: later calls with the same serial do nothing) and size a file again. Adds @id to
	 * @pins the first time; throws std::bad_alloc (nothing pinned then).
	 */
	void pin_locked(uint32_t id, uint64_t serial, TargetPins *pins);
	/* Drop the pins of @pins (takes the lock). */
	void unpin(const TargetPins &pins) noexcept;
	/* A new batch serial (takes no lock: one atomic add). */
	[[nodiscard]] uint64_t next_serial() noexcept { return serial_.fetch_add(1, std::memory_order_relaxed) + 1; }

	/* With lock() held: ids below this may be live (find_locked() says which). */
	[[nodiscard]] uint32_t slots_locked() const noexcept { return uint32_t(state_.size()); }

	/* Live targets, target 0 included. */
	[[nodiscard]] uint32_t count() noexcept;

private:
	enum : uint8_t { kFree, kReserved, kLive };

	std::mutex mu_;
	std::vector<std::unique_ptr<TargetEntry>> slots_;	/* by id; grows, never shrinks */
	TargetEntry *t0_ = nullptr;				/* *slots_[0], fixed from install0() */
	std::vector<uint8_t> state_;
	uint32_t live_ = 0;
	std::atomic<uint64_t> serial_{0};
};

/* fstat(2) size of a regular file target, or its capacity (block devices, failures). */
uint64_t current_size(const Target &t) noexcept;

} // namespace kvblk::detail

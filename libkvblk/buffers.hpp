// SPDX-License-Identifier: MIT
// The table of registered destination buffers of one device.
#pragma once

#include "backend.hpp"

#include <array>
#include <cstdint>
#include <mutex>

namespace kvblk::detail {

/**
 * struct RegisteredBuffer - one slot of the table; the slot index is the buffer id.
 * @state:       free, reserved (being registered or unregistered: invisible to loads), live.
 * @kind:        enum kvblk_mem_kind.
 * @base, @len:  the registered range.
 * @fixed_index: what Backend::register_buffer() returned (-1: plain I/O).
 * @pins:        batches running with this buffer (unregistration waits for none: -EBUSY).
 * @path:        enum kvblk_path of loads into it (HOST; P2P or STAGED for device memory).
 * @stale:       kvblk_check_buffer() found the pages pinned at registration replaced or the
 *               range unmapped: batches naming it fail with -ESTALE until it is
 *               unregistered (under the table lock).
 */
struct RegisteredBuffer {
	enum class State : uint8_t { free, reserved, live };
	State state = State::free;
	int kind = KVBLK_MEM_HOST;
	uint8_t *base = nullptr;
	uint64_t len = 0;
	int32_t fixed_index = -1;
	uint32_t pins = 0;
	uint32_t path = KVBLK_PATH_HOST;
	bool stale = false;
};

/*
 * class PinSet - ids a batch pinned, one bit per buffer id (< kMaxBuffers). for_each() visits
 * the members only, a word at a time: walks over all kMaxBuffers bits (std::bitset's
 * operator[]) in pin_locked() and unpin() were 9% of libkvblk's own CPU per 4 KiB read in
 * batches of 64 (make vmbench-cpu's profile, 6.1 guest, 2026-12-05).
 */
class PinSet {
public:
	void set(uint32_t id) noexcept { w_[id / 64] |= uint64_t(1) << (id % 64); }
	[[nodiscard]] bool test(uint32_t id) const noexcept { return (w_[id / 64] >> (id % 64)) & 1; }
	void reset() noexcept { w_.fill(0); }
	[[nodiscard]] bool none() const noexcept
	{
		for (uint64_t w : w_)
			if (w)
				return false;
		return true;
	}
	/* Call @f(id) for each member, in increasing order. */
	template <class F> void for_each(F &&f) const
	{
		for (size_t i = 0; i < w_.size(); i++)
			for (uint64_t w = w_[i]; w; w &= w - 1)
				f(uint32_t(i * 64 + unsigned(__builtin_ctzll(w))));
	}

private:
	static_assert(kMaxBuffers % 64 == 0, "whole words");
	std::array<uint64_t, kMaxBuffers / 64> w_{};
};

/*
 * class BufferTable - thread safe: registration runs concurrently with loads.
 * Loads take lock(), look buffers up with find_locked(), pin them, and unpin() when done.
 */
class BufferTable {
public:
	/* Reserve a free slot for [base, base+len). Returns 0 with *id, or -ENOSPC. */
	int reserve(int kind, uint8_t *base, uint64_t len, uint32_t *id);
	/* Make a reserved slot live; loads into it take @path. */
	void publish(uint32_t id, int32_t fixed_index, uint32_t path = KVBLK_PATH_HOST);
	/* Give a reserved slot back. */
	void release(uint32_t id);
	/*
	 * Start unregistering @id: -ENOENT unknown, -EBUSY pinned by a running batch; else
	 * the slot becomes reserved (invisible) and *out holds it. Finish with release().
	 */
	int begin_unregister(uint32_t id, RegisteredBuffer *out);

	[[nodiscard]] std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mu_); }
	/* With lock() held: the live buffer @id, or nullptr. */
	[[nodiscard]] const RegisteredBuffer *find_locked(uint32_t id) const noexcept;
	/* With lock() held: pin every id in @ids. */
	void pin_locked(const PinSet &ids) noexcept;
	/* Drop the pins of @ids (takes the lock). */
	void unpin(const PinSet &ids) noexcept;
	/* With lock() held: mark live buffer @id stale (kvblk_check_buffer()). */
	void mark_stale_locked(uint32_t id) noexcept { slots_[id].stale = true; }

private:
	std::mutex mu_;
	std::array<RegisteredBuffer, kMaxBuffers> slots_{};
};

} // namespace kvblk::detail

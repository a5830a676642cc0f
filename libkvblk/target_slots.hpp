// SPDX-License-Identifier: MIT
// TargetSlots: per-target state of a backend (uring_cmd's namespace ids, the kmod lanes'
// placement), indexed by target id (< KVBLK_MAX_TARGETS), in chunks allocated on first use so
// that a device with one target pays for one chunk. An entry is written by add_target()
// before the library publishes the target, under the library's target-table lock, and read
// by batches that found the target under that lock: the lock orders the two, so entries
// themselves need no atomics.
#pragma once

#include <kvblk/kvblk.h>

#include <array>
#include <cstdint>
#include <memory>
#include <new>

namespace kvblk::detail {

template <class T> class TargetSlots {
public:
	static constexpr uint32_t kChunk = 256;
	static_assert(KVBLK_MAX_TARGETS % kChunk == 0, "whole chunks");

	/* The entry of @id, allocating its chunk; nullptr when out of memory or range. */
	T *ensure(uint32_t id) noexcept
	{
		if (id >= KVBLK_MAX_TARGETS)
			return nullptr;
		auto &c = chunks_[id / kChunk];
		if (!c)
			c.reset(new (std::nothrow) T[kChunk]());
		return c ? &c[id % kChunk] : nullptr;
	}

	/* The entry of @id, or a default one when its chunk was never made. */
	const T &get(uint32_t id) const noexcept
	{
		static const T none{};
		if (id >= KVBLK_MAX_TARGETS || !chunks_[id / kChunk])
			return none;
		return chunks_[id / kChunk][id % kChunk];
	}

	/* The entry of an id that ensure() made. */
	T &operator[](uint32_t id) noexcept { return chunks_[id / kChunk][id % kChunk]; }
	const T &operator[](uint32_t id) const noexcept { return chunks_[id / kChunk][id % kChunk]; }

private:
	std::array<std::unique_ptr<T[]>, KVBLK_MAX_TARGETS / kChunk> chunks_{};
};

} // namespace kvblk::detail

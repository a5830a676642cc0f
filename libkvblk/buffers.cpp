// SPDX-License-Identifier: MIT
#include "buffers.hpp"

#include <cerrno>

namespace kvblk::detail {

int BufferTable::reserve(int kind, uint8_t *base, uint64_t len, uint32_t *id)
{
	std::lock_guard<std::mutex> g(mu_);
	for (uint32_t i = 0; i < kMaxBuffers; i++) {
		RegisteredBuffer &b = slots_[i];
		if (b.state != RegisteredBuffer::State::free)
			continue;
		b = RegisteredBuffer{};
		b.state = RegisteredBuffer::State::reserved;
		b.kind = kind;
		b.base = base;
		b.len = len;
		*id = i;
		return 0;
	}
	return -ENOSPC;
}

void BufferTable::publish(uint32_t id, int32_t fixed_index, uint32_t path)
{
	std::lock_guard<std::mutex> g(mu_);
	slots_[id].fixed_index = fixed_index;
	slots_[id].path = path;
	slots_[id].state = RegisteredBuffer::State::live;
}

void BufferTable::release(uint32_t id)
{
	std::lock_guard<std::mutex> g(mu_);
	slots_[id] = RegisteredBuffer{};
}

int BufferTable::begin_unregister(uint32_t id, RegisteredBuffer *out)
{
	std::lock_guard<std::mutex> g(mu_);
	if (id >= kMaxBuffers || slots_[id].state != RegisteredBuffer::State::live)
		return -ENOENT;
	if (slots_[id].pins)
		return -EBUSY;
	slots_[id].state = RegisteredBuffer::State::reserved;
	*out = slots_[id];
	return 0;
}

const RegisteredBuffer *BufferTable::find_locked(uint32_t id) const noexcept
{
	if (id >= kMaxBuffers || slots_[id].state != RegisteredBuffer::State::live)
		return nullptr;
	return &slots_[id];
}

void BufferTable::pin_locked(const PinSet &ids) noexcept
{
	ids.for_each([this](uint32_t id) { slots_[id].pins++; });
}

void BufferTable::unpin(const PinSet &ids) noexcept
{
	if (ids.none())
		return;
	std::lock_guard<std::mutex> g(mu_);
	ids.for_each([this](uint32_t id) { slots_[id].pins--; });
}

} // namespace kvblk::detail

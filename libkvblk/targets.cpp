// SPDX-License-Identifier: MIT
#include "targets.hpp"

#include <sys/stat.h>

namespace kvblk::detail {

TargetTable::TargetTable() = default;

TargetTable::~TargetTable()
{
	for (auto &e : slots_)
		if (e)
			close_target(&e->t);
}

void TargetTable::install0(std::unique_ptr<TargetEntry> e)
{
	std::lock_guard<std::mutex> g(mu_);
	if (slots_.empty()) {
		slots_.resize(1);
		state_.resize(1, kFree);
	}
	slots_[0] = std::move(e);
	t0_ = slots_[0].get();
	state_[0] = kLive;
	live_ = 1;
}

int TargetTable::reserve(uint32_t *id)
{
	std::lock_guard<std::mutex> g(mu_);
	for (uint32_t i = 1; i < state_.size(); i++) {
		if (state_[i] == kFree) {
			state_[i] = kReserved;
			*id = i;
			return 0;
		}
	}
	if (state_.size() >= KVBLK_MAX_TARGETS)
		return -ENOSPC;
	slots_.emplace_back();
	state_.push_back(kReserved);
	*id = uint32_t(state_.size() - 1);
	return 0;
}

void TargetTable::publish(uint32_t id, std::unique_ptr<TargetEntry> e)
{
	std::lock_guard<std::mutex> g(mu_);
	slots_[id] = std::move(e);
	state_[id] = kLive;
	live_++;
}

void TargetTable::release(uint32_t id)
{
	std::lock_guard<std::mutex> g(mu_);
	slots_[id].reset();
	state_[id] = kFree;
}

int TargetTable::begin_remove(uint32_t id, std::unique_ptr<TargetEntry> *out)
{
	std::lock_guard<std::mutex> g(mu_);
	if (id == 0 || id >= state_.size() || state_[id] != kLive)
		return -ENOENT;
	if (slots_[id]->pins)
		return -EBUSY;
	*out = std::move(slots_[id]);
	state_[id] = kReserved;
	live_--;
	return 0;
}

TargetEntry *TargetTable::find_locked(uint32_t id) noexcept
{
	if (id >= state_.size() || state_[id] != kLive)
		return nullptr;
	return slots_[id].get();
}

void TargetTable::pin_locked(uint32_t id, uint64_t serial, TargetPins *pins)
{
	TargetEntry *e = find_locked(id);
	if (!e || e->mark == serial)
		return;
	pins->push_back(id); /* first: it may throw, and a pin must never be lost */
	e->mark = serial;
	e->pins++;
	e->size.store(current_size(e->t), std::memory_order_relaxed);
}

void TargetTable::unpin(const TargetPins &pins) noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	for (uint32_t id : pins)
		if (id < slots_.size() && slots_[id] && slots_[id]->pins)
			slots_[id]->pins--;
}

uint32_t TargetTable::count() noexcept
{
	std::lock_guard<std::mutex> g(mu_);
	return live_;
}

uint64_t current_size(const Target &t) noexcept
{
	struct stat st;
	if (t.blockdev || t.nvme_generic || fstat(t.fd, &st) != 0 || !S_ISREG(st.st_mode))
		return t.capacity;
	return uint64_t(st.st_size);
}

} // namespace kvblk::detail

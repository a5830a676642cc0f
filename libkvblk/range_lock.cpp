// SPDX-License-Identifier: MIT
#include "range_lock.hpp"

#include <algorithm>

namespace kvblk::detail {
namespace {

bool before(const LockRange &a, const LockRange &b) noexcept
{
	return a.target != b.target ? a.target < b.target : a.start < b.start;
}

/* Erase the first @x from @v (order kept; no allocation). */
void erase_one(std::vector<LockNode *> &v, const LockNode *x) noexcept
{
	auto it = std::find(v.begin(), v.end(), x);
	if (it != v.end())
		v.erase(it);
}

} // namespace

void LockNode::prepare() noexcept
{
	any_edge = false;
	if (ranges.empty())
		return;
	if (!std::is_sorted(ranges.begin(), ranges.end(), before))
		std::sort(ranges.begin(), ranges.end(), before);
	size_t k = 0;
	for (size_t i = 1; i < ranges.size(); i++) {
		LockRange &last = ranges[k];
		const LockRange &r = ranges[i];
		if (r.target == last.target && r.start < last.end) {
			/* They meet (a shared edge block): one range, an edge if either is. */
			last.end = std::max(last.end, r.end);
			last.edge = last.edge || r.edge;
		} else {
			ranges[++k] = r;
		}
	}
	ranges.resize(k + 1);
	for (const LockRange &r : ranges)
		any_edge = any_edge || r.edge;
}

bool conflicts(const LockNode &a, const LockNode &b) noexcept
{
	if (!a.any_edge && !b.any_edge)
		return false;
	size_t i = 0, j = 0;
	while (i < a.ranges.size() && j < b.ranges.size()) {
		const LockRange &x = a.ranges[i], &y = b.ranges[j];
		if (x.target != y.target) {
			if (x.target < y.target)
				i++;
			else
				j++;
			continue;
		}
		if (x.start < y.end && y.start < x.end && (x.edge || y.edge))
			return true;
		/* Each list is sorted and its ranges disjoint: drop the one that ends first. */
		if (x.end <= y.end)
			i++;
		else
			j++;
	}
	return false;
}

bool RangeLocks::acquire(LockNode &n)
{
	std::vector<LockNode *> before_n;
	for (LockNode *k : active_)
		if (conflicts(*k, n))
			before_n.push_back(k);
	/* Every allocation first: nothing changes until none can fail. */
	auto room = [](std::vector<LockNode *> &v) {
		if (v.size() == v.capacity())
			v.reserve(std::max<size_t>(8, 2 * v.size()));
	};
	room(active_);
	for (LockNode *k : before_n)
		room(k->waiters);
	for (LockNode *k : before_n)
		k->waiters.push_back(&n);
	n.waits_on = std::move(before_n);
	n.registered = true;
	n.next_granted = nullptr;
	active_.push_back(&n);
	return n.waits_on.empty();
}

void RangeLocks::release(LockNode &n, LockNode **granted) noexcept
{
	if (!n.registered)
		return;
	n.registered = false;
	erase_one(active_, &n);
	/* Still waiting (a parked batch that was cancelled): the nodes before it forget it. */
	for (LockNode *k : n.waits_on)
		erase_one(k->waiters, &n);
	n.waits_on.clear();
	for (LockNode *w : n.waiters) {
		erase_one(w->waits_on, &n);
		if (w->waits_on.empty()) {
			w->next_granted = *granted;
			*granted = w;
		}
	}
	n.waiters.clear();
}

} // namespace kvblk::detail

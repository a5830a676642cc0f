// SPDX-License-Identifier: MIT
// Range locks of one device's stores: what orders a read-modify-write of an edge block
// (an unaligned store, unaligned.hpp) against the other stores of the same handle that touch
// that block, so that no store loses the bytes another one wrote between its read and its
// write.
//
// Every store batch is a Node with the ranges it writes, per target: the covering blocks of
// the edges it reads and writes back ("edge" ranges) and the byte ranges it writes whole
// ("plain" ranges). Nodes are registered in submission order, under the scheduler's mutex;
// a node conflicts with an earlier one still registered when a range of one meets a range of
// the other on the same target and at least one of the two is an edge. Two plain ranges never
// conflict: overlapping aligned stores are not ordered (as before unaligned stores existed).
// A node that conflicts waits (the scheduler parks its batch) until every earlier node it
// conflicts with has been released (its batch completed); it only ever waits for earlier
// nodes, so nothing waits for itself and every batch starts once those before it end.
//
// The graph is explicit: a waiting node keeps the nodes it waits for, each of those keeps
// its waiters, so releasing one costs its own edges, and a node released while it still
// waits (a parked batch cancelled) leaves no dangling edge behind. Conflicts are found with
// a merge walk of two sorted range lists; two nodes without edge ranges are never walked.
// Loads take no locks: a load overlapping a store sees the old bytes, the new ones or a mix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvblk::detail {

/**
 * struct LockRange - bytes [@start, @end) of target @target that a store writes.
 * @edge: a covering block it reads and writes back (read-modify-write), not only writes.
 */
struct LockRange {
	uint32_t target;
	uint64_t start;
	uint64_t end;
	bool edge;
};

/**
 * struct LockNode - one store batch as the range locks see it.
 * @ranges:    what it writes; prepare() sorts them by (target, start) and merges the ones
 *             that meet (an edge block two of its objects share).
 * @any_edge:  some range is an edge.
 * Below: the RangeLocks' own, under its owner's mutex.
 * @registered: acquire() took it and release() has not yet.
 * @waits_on:  earlier nodes it conflicts with that are still registered.
 * @waiters:   later nodes that wait for it.
 * @next_granted: link of release()'s list of nodes that no longer wait.
 * @owner:     the caller's object (the scheduler's Job).
 */
struct LockNode {
	std::vector<LockRange> ranges;
	bool any_edge = false;
	void *owner = nullptr;

	bool registered = false;
	std::vector<LockNode *> waits_on;
	std::vector<LockNode *> waiters;
	LockNode *next_granted = nullptr;

	/* Sort and merge @ranges (throws std::bad_alloc only from the sort's buffer: none). */
	void prepare() noexcept;
	/* Whether it writes anything (loads have no ranges and take no locks). */
	[[nodiscard]] bool empty() const noexcept { return ranges.empty(); }
};

/* Whether @a and @b (both prepare()d) meet on a target where at least one of them is an edge. */
bool conflicts(const LockNode &a, const LockNode &b) noexcept;

/*
 * class RangeLocks - the registered nodes of one device. Not thread safe: the scheduler calls
 * it under its mutex.
 */
class RangeLocks {
public:
	/*
	 * Register @n after every node registered so far. True: it conflicts with none of them
	 * and may run now; false: it waits for n.waits_on (release() of the last of them grants
	 * it). Throws std::bad_alloc with nothing registered.
	 */
	bool acquire(LockNode &n);

	/*
	 * Unregister @n (its batch is over, or never ran): the nodes that waited for it and now
	 * wait for nothing are pushed onto *@granted (through next_granted). Allocates nothing.
	 */
	void release(LockNode &n, LockNode **granted) noexcept;

	/* Nodes registered now. */
	[[nodiscard]] size_t size() const noexcept { return active_.size(); }

private:
	std::vector<LockNode *> active_;	/* in registration order */
};

} // namespace kvblk::detail

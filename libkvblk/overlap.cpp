// SPDX-License-Identifier: MIT
#include "overlap.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

namespace kvblk::detail {
namespace {

bool before(const Span &a, const Span &b) noexcept
{
	return a.space != b.space ? a.space < b.space : a.start < b.start;
}

/* Whether any two spans intersect: sort (unless sorted already) and sweep. */
bool any_overlap(std::vector<Span> &spans)
{
	if (!std::is_sorted(spans.begin(), spans.end(), before))
		std::sort(spans.begin(), spans.end(), before);
	for (size_t k = 1; k < spans.size(); k++) {
		/* Disjoint so far and sorted by start, the ends ascend too: the neighbour decides. */
		const Span &p = spans[k - 1], &c = spans[k];
		if (p.space == c.space && c.start < p.end)
			return true;
	}
	return false;
}

} // namespace

int32_t first_overlap(std::vector<Span> &spans, uint32_t *other)
{
	if (!any_overlap(spans))	/* sorts @spans in place: no copy per batch */
		return -1;
	/*
	 * Rare (a caller's bug): name it exactly. Insert in descriptor order into a map of
	 * disjoint spans (space, start) -> (end, index); the first that meets a neighbour is j.
	 */
	std::sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) { return a.index < b.index; });
	std::map<std::pair<uint64_t, uint64_t>, std::pair<uint64_t, uint32_t>> seen;
	for (const Span &s : spans) {
		auto next = seen.lower_bound({s.space, s.start});
		if (next != seen.end() && next->first.first == s.space && next->first.second < s.end) {
			*other = next->second.second;
			return int32_t(s.index);
		}
		if (next != seen.begin()) {
			auto prev = std::prev(next);
			if (prev->first.first == s.space && prev->second.first > s.start) {
				*other = prev->second.second;
				return int32_t(s.index);
			}
		}
		seen.emplace(std::make_pair(s.space, s.start), std::make_pair(s.end, s.index));
	}
	return -1; /* not reached: any_overlap() found a pair */
}

} // namespace kvblk::detail

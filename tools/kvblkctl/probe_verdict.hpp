// SPDX-License-Identifier: MIT
/*
 * probe_verdict.hpp - `kvblkctl probe`'s verdict from its measurements.
 *
 * The device's ceiling is fio's best point, measured in kRounds rounds
 * (every depth once per round); the ceiling is that point's median round.
 * A verdict compares kvblk's loads with the ceiling, so it is only given
 * when the ceiling itself held still: the spread of the best point's rounds,
 * (max - min) / median, must be at most kMaxSpread. Otherwise the verdict is
 * "unstable" and the reason gives the rounds and their spread: on a device
 * whose own throughput swings (a busy or throttled disk, a file in a
 * cache), any ratio to it says nothing.
 *
 * Verdict, from "of ceiling" = best GB/s of an object size / the ceiling:
 * the smaller of the 2 MiB and 16 MiB ratios decides: fast >= kFast,
 * ok >= kOk, else slow; unknown when no ceiling was measured.
 */
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace kvblkctl {

struct ProbeVerdict {
	std::string verdict;	 // fast, ok, slow, unstable, unknown
	std::string reason;	 // one line
	double ceiling = 0;	 // GB/s: the median round (0: none)
	double spread = 0;	 // (max - min) / median of the rounds
	double deciding = 0;	 // min(ratio 2 MiB, ratio 16 MiB) when a ceiling exists
	bool stable = false;	 // spread <= kMaxSpread with at least two rounds
};

constexpr unsigned kProbeRounds = 3;
constexpr double kProbeMaxSpread = 0.20;
constexpr double kProbeFast = 0.80, kProbeOk = 0.50;

// Median of @v (the lower middle one for an even count); 0 when empty.
inline double probe_median(std::vector<double> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[(v.size() - 1) / 2];
}

/*
 * @rounds: the best fio point's GB/s in each round (empty: no ceiling, with
 * @no_ceiling_note saying why); @best_2m, @best_16m: kvblk's best GB/s at
 * 2 MiB and 16 MiB objects.
 */
inline ProbeVerdict probe_decide(const std::vector<double> &rounds, double best_2m, double best_16m,
				 const std::string &no_ceiling_note)
{
	ProbeVerdict v;
	char b[320];
	if (rounds.empty()) {
		v.verdict = "unknown";
		v.reason = "no device ceiling: " + (no_ceiling_note.empty() ? std::string("every fio point failed")
									    : no_ceiling_note);
		return v;
	}
	v.ceiling = probe_median(rounds);
	const auto [lo, hi] = std::minmax_element(rounds.begin(), rounds.end());
	v.spread = v.ceiling > 0 ? (*hi - *lo) / v.ceiling : 0;
	v.deciding = v.ceiling > 0 ? std::min(best_2m, best_16m) / v.ceiling : 0;
	v.stable = rounds.size() >= 2 && v.ceiling > 0 && v.spread <= kProbeMaxSpread;
	std::string list;
	for (double r : rounds) {
		std::snprintf(b, sizeof(b), "%s%.3f", list.empty() ? "" : ", ", r);
		list += b;
	}
	if (!v.stable) {
		v.verdict = "unstable";
		if (rounds.size() < 2)
			std::snprintf(b, sizeof(b),
				      "the device's ceiling was measured in one round only (%s GB/s): its "
				      "stability is unknown; no verdict",
				      list.c_str());
		else
			std::snprintf(b, sizeof(b),
				      "the device's ceiling was unstable: rounds %s GB/s, spread %.2f of the "
				      "median (more than %.2f); no verdict (probe again on an idle device)",
				      list.c_str(), v.spread, kProbeMaxSpread);
		v.reason = b;
		return v;
	}
	v.verdict = v.deciding >= kProbeFast ? "fast" : (v.deciding >= kProbeOk ? "ok" : "slow");
	std::snprintf(b, sizeof(b),
		      "2 MiB objects reach %.2f and 16 MiB objects %.2f of the device's ceiling "
		      "(%.3f GB/s, rounds %s, spread %.2f); fast >= %.2f, ok >= %.2f",
		      best_2m / v.ceiling, best_16m / v.ceiling, v.ceiling, list.c_str(), v.spread, kProbeFast,
		      kProbeOk);
	v.reason = b;
	return v;
}

} // namespace kvblkctl

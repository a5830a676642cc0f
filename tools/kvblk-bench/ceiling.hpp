// SPDX-License-Identifier: MIT
//
// kvblk-bench's ceiling: a search over fio configurations, not one
// configuration. A full cross product (2 engines x fixed buffers x
// registered files x numjobs x 8 depths) at a second or two per point is too
// slow for a small machine, so the search runs in stages, each from what the
// previous one measured:
//
//   depth   each engine (io_uring with fixed buffers, libaio, psync at depth
//           1 only), one job, iodepth over a geometric list (thorough: 1, 2,
//           4, .. 128; quick: 1, 4, 16, 64); every stage's points read into
//           huge pages where SearchSpec::hugepages says so;
//   jobs    each engine at its best depth D of stage 1: numjobs 2, 4, .. up to
//           the workers kvblk uses, at iodepth D / numjobs (same commands in
//           flight) and at D (more);
//   spread  each engine at its best depth D of stage 1: one job per object
//           in flight (FioKnobs::spread: job j replays the objects at pass
//           positions j, j + numjobs, ..), numjobs 2, 4, .. up to the
//           objects of one kvblk call, at iodepth 1 and D / numjobs: the
//           commands spread over as many regions of the store at once as
//           kvblk's calls can put in flight, which a disk may reward;
//   refine  around the best point so far: the depths halfway (geometrically)
//           to its neighbours in the depth list, never outside the list's
//           range (--fio-qd bounds the whole search); on the best io_uring
//           point, without fixed buffers and with registered files too; and
//           the best point with 4 KiB-page buffers where the search reads
//           into huge pages (SearchSpec::hugepages).
//
// Every point is a separate fio run over the same replay logs (the same
// commands in the same order as one kvblk pass), the same job as a finalist's
// runs in the rounds: one pass, the same cap (run_search()).
// The best `finalists` distinct points, then each stage's best, the best
// spread and the best lean point where they are not among them, are then
// measured again in rounds interleaved with the
// kvblk settings (as many rounds as kvblk's, each point one run per round);
// the median of each is its figure and the best median is the ceiling (see
// judge_ceiling()). A search figure is one short run: a stage's best that its
// re-measurement did not reproduce is reported as such (stage_bests()).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fio.hpp"

namespace kvblk_bench {

using kvblk_tools::FioKnobs;
using kvblk_tools::FioPoint;
using kvblk_tools::FioSweep;

enum class SearchMode { quick, thorough };

struct SearchSpec {
	std::vector<std::string> engines = {"io_uring", "libaio"};
	std::vector<uint32_t> depths; // stage 1, geometric, ascending
	uint32_t depth_factor = 2;    // ratio of neighbouring depths
	uint32_t max_jobs = 1;	      // numjobs up to this (the workers kvblk uses)
	uint32_t spread_jobs = 0;     // spread stage: numjobs up to this (objects per call); < 2: no stage
	unsigned finalists = 3;	      // points measured again in the rounds
	// Every point's buffers in huge pages (FioKnobs::hugepages); the caller
	// sets it when search_hugepages() pages are free. refine
	// then also measures its best point with 4 KiB pages.
	bool hugepages = false;
};

// Huge pages a search under @spec may ask for at once with @cmd_bytes
// commands: the most of any point (each job maps iodepth x cmd_bytes,
// rounded up to whole pages of @page_bytes), over the depths of stage 1 and
// refine's (never above the list's last), numjobs up to max_jobs, and the
// spread stage's jobs at the depth shared out.
uint64_t search_hugepages(const SearchSpec &spec, uint64_t cmd_bytes, uint64_t page_bytes);

// @mode's depths up to @max_depth (thorough x2 from 1, quick x4 from 1),
// @finalists 3 (thorough) or 2 (quick).
SearchSpec make_search_spec(SearchMode mode, uint32_t max_jobs, uint32_t max_depth = 128);

// lo, lo*f, lo*f^2, .. <= hi.
std::vector<uint32_t> geometric(uint32_t lo, uint32_t hi, uint32_t factor);

struct SearchPoint {
	FioPoint pt;
	std::string stage; // depth, jobs, spread, refine
};

class CeilingSearch {
public:
	explicit CeilingSearch(SearchSpec spec) : spec_(std::move(spec)) {}

	// The points of the next stage, never one measured before; empty when
	// the search is over. The caller measures each and record()s it.
	std::vector<FioKnobs> next_stage();
	void record(const FioPoint &pt);

	// The best `finalists` successful points, best first, then each stage's
	// best (stage order), the best spread point and the best lean point,
	// each where it is not among them already.
	[[nodiscard]] std::vector<FioKnobs> finalists() const;
	// Index in points() of each stage's best successful point, in stage order.
	[[nodiscard]] std::vector<size_t> stage_bests() const;
	// GB/s of the median successful point (nearest rank), 0 without one: a
	// stage's best is the highest of several one-run figures, so on a disk
	// whose runs vary it sits above what a typical run of the search read;
	// this is what a typical run read, next to the rounds' medians.
	[[nodiscard]] double median_point_gbps() const;
	[[nodiscard]] const std::vector<SearchPoint> &points() const noexcept { return points_; }
	[[nodiscard]] const SearchSpec &spec() const noexcept { return spec_; }

private:
	[[nodiscard]] bool seen(const FioKnobs &k) const;
	// Index of the best successful point matching @pred, or -1.
	template <class Pred>
	[[nodiscard]] int best_where(Pred pred) const;

	SearchSpec spec_;
	int stage_ = 0;
	std::string stage_name_;
	std::vector<SearchPoint> points_;
};

// Runs every stage of @search with @fio: each point one fio run, exactly the
// job the rounds run again for a finalist (FioSession::run(), the session's
// one cap: --fio-runtime); @on_stage, when set, after each stage with its
// name, its number of points and its best GB/s.
void run_search(CeilingSearch &search, kvblk_tools::FioSession &fio,
		const std::function<void(const std::string &stage, size_t points, double best_gbps)> &on_stage);

// ------------------------------------------------------------ the verdict

// A kvblk figure above this multiple of the ceiling means the search did not
// find the device's ceiling: no ratio against it is printed.
inline constexpr double kCeilingSlack = 1.05;

struct CeilingVerdict {
	bool measured = false; // at least one finalist succeeded
	int best = -1;	       // index of the winning finalist
	double gbps = 0;       // its median
	bool found = false;    // measured, and no kvblk figure above kCeilingSlack x gbps
	double worst_ratio = 0; // highest kvblk GB/s / gbps (0 without a ceiling)
	std::vector<size_t> over; // results above the limit
};

// A search figure (one short run) that the re-measured median of the same
// point falls short of by more than this fraction was not reproduced.
inline constexpr double kReproduceSlack = 0.95;

// Whether @search_gbps of a point was reproduced by its @median: median >=
// kReproduceSlack x search_gbps.
[[nodiscard]] bool reproduced(double search_gbps, double median) noexcept;

// A stage's best search point against the rounds: its own median when it
// was a finalist, else the best finalist median (the ceiling); a search
// figure the rounds fall short of was not reproduced.
struct StageBest {
	size_t point = 0;      // index in CeilingSearch::points()
	int final = -1;	       // index in the finals' points, or -1 (not a finalist)
	double remeasured = 0; // the median it is held to (0: no finalist succeeded)
	bool reproduced = false;
};
std::vector<StageBest> check_stage_bests(const CeilingSearch &search, const FioSweep &finals);

struct RunResult;
CeilingVerdict judge_ceiling(const FioSweep &finals, const std::vector<RunResult> &results);

} // namespace kvblk_bench

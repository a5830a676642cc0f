// SPDX-License-Identifier: MIT
#include "ceiling.hpp"

#include <algorithm>
#include <cmath>

#include "hugepages.hpp"
#include "runner.hpp"

namespace kvblk_bench {

std::vector<uint32_t> geometric(uint32_t lo, uint32_t hi, uint32_t factor)
{
	std::vector<uint32_t> v;
	for (uint64_t d = lo; d <= hi && factor > 1; d *= factor)
		v.push_back(uint32_t(d));
	return v;
}

SearchSpec make_search_spec(SearchMode mode, uint32_t max_jobs, uint32_t max_depth)
{
	SearchSpec s;
	s.depth_factor = mode == SearchMode::thorough ? 2 : 4;
	s.depths = geometric(1, max_depth, s.depth_factor);
	s.max_jobs = std::max(max_jobs, 1u);
	s.finalists = mode == SearchMode::thorough ? 3 : 2;
	return s;
}

// A point of engine @e as the stages start it: io_uring with registered
// buffers (--fixedbufs), as kvblk's uring backend reads into a registered
// buffer. Without them each O_DIRECT command pins its pages: in the demo of
// 2026-12-05 (idle) io_uring QD 16 read 2.764 GB/s plain and 4.521 with
// fixed buffers, medians of 3 rounds, while the search varied everything
// else without them. The refine stage measures the best io_uring point
// without them too (what a program without registered buffers gets).
//
// Buffers in huge pages where the spec allows (free hugetlb pages, see
// SearchSpec::hugepages): a command into one physically contiguous page
// moves as one DMA segment, which some devices reward (fio.hpp's
// FioKnobs::hugepages). The refine stage measures the best point with 4 KiB
// pages too.
static FioKnobs base_knobs(const std::string &e, const SearchSpec &spec)
{
	FioKnobs k;
	k.engine = e;
	k.fixedbufs = e == "io_uring";
	k.hugepages = spec.hugepages;
	return k;
}

uint64_t search_hugepages(const SearchSpec &spec, uint64_t cmd_bytes, uint64_t page_bytes)
{
	const uint64_t hi = spec.depths.empty() ? 1 : spec.depths.back();
	uint64_t most = kvblk_tools::hugepages_needed(hi * cmd_bytes, 1, page_bytes);
	for (uint32_t j : geometric(2, spec.max_jobs, 2))
		most = std::max(most, kvblk_tools::hugepages_needed(hi * cmd_bytes, j, page_bytes));
	for (uint32_t j : geometric(2, spec.spread_jobs, 2))
		most = std::max(most, kvblk_tools::hugepages_needed(std::max<uint64_t>(1, hi / j) * cmd_bytes, j,
								    page_bytes));
	return most;
}

// fio's synchronous engines (one command in flight per job, as each
// thread of kvblk's threadpool backend): no depth of their own to vary,
// nothing to submit together.
static bool sync_engine(const std::string &e)
{
	return e == "psync" || e == "pvsync" || e == "pvsync2" || e == "sync";
}

bool CeilingSearch::seen(const FioKnobs &k) const
{
	return std::any_of(points_.begin(), points_.end(), [&](const SearchPoint &p) { return p.pt.knobs == k; });
}

template <class Pred>
int CeilingSearch::best_where(Pred pred) const
{
	int b = -1;
	for (size_t i = 0; i < points_.size(); i++)
		if (points_[i].pt.ok && pred(points_[i].pt.knobs) &&
		    (b < 0 || points_[i].pt.gbps > points_[size_t(b)].pt.gbps))
			b = int(i);
	return b;
}

void CeilingSearch::record(const FioPoint &pt)
{
	points_.push_back({pt, stage_name_});
}

std::vector<FioKnobs> CeilingSearch::next_stage()
{
	std::vector<FioKnobs> next;
	auto add = [&](const FioKnobs &k) {
		if (!seen(k) && std::find(next.begin(), next.end(), k) == next.end())
			next.push_back(k);
	};
	// A stage whose points were all measured already is skipped.
	while (next.empty() && stage_ < 4) {
		switch (stage_++) {
		case 0:
			stage_name_ = "depth";
			for (const std::string &e : spec_.engines)
				for (uint32_t d : spec_.depths) {
					FioKnobs k = base_knobs(e, spec_);
					k.iodepth = sync_engine(e) ? 1 : d;
					add(k);
				}
			break;
		case 1:
			stage_name_ = "jobs";
			for (const std::string &e : spec_.engines) {
				const int b = best_where([&](const FioKnobs &k) { return k.engine == e && k.numjobs == 1; });
				if (b < 0)
					continue;
				const uint32_t d = points_[size_t(b)].pt.knobs.iodepth;
				for (uint32_t j : geometric(2, spec_.max_jobs, 2))
					for (uint32_t qd : {std::max(1u, d / j), d}) {
						FioKnobs k = base_knobs(e, spec_);
						k.iodepth = qd;
						k.numjobs = j;
						add(k);
					}
			}
			break;
		case 2:
			stage_name_ = "spread";
			for (const std::string &e : spec_.engines) {
				const int b = best_where(
					[&](const FioKnobs &k) { return k.engine == e && k.numjobs == 1 && !k.spread; });
				if (b < 0 || spec_.spread_jobs < 2)
					continue;
				const uint32_t d = points_[size_t(b)].pt.knobs.iodepth;
				// One command in flight per object (as threads reading
				// whole objects) and the best depth shared out.
				for (uint32_t j : geometric(2, spec_.spread_jobs, 2))
					for (uint32_t qd : {1u, std::max(1u, d / j)}) {
						FioKnobs k = base_knobs(e, spec_);
						k.iodepth = qd;
						k.numjobs = j;
						k.spread = true;
						add(k);
					}
			}
			break;
		case 3: {
			stage_name_ = "refine";
			const int b = best_where([](const FioKnobs &) { return true; });
			if (b < 0)
				break;
			const FioKnobs best = points_[size_t(b)].pt.knobs;
			// Halfway to the neighbouring depths, geometrically, never
			// outside the depths stage 1 was given: --fio-qd 1 holds the
			// whole search to one command in flight per job. A
			// synchronous engine has no depth to vary.
			const double half = std::sqrt(double(spec_.depth_factor));
			const uint32_t lo = spec_.depths.empty() ? 1 : spec_.depths.front();
			const uint32_t hi = spec_.depths.empty() ? 1 : spec_.depths.back();
			for (double d : {double(best.iodepth) / half, double(best.iodepth) * half}) {
				if (sync_engine(best.engine))
					break;
				FioKnobs k = best;
				k.iodepth = uint32_t(std::lround(d));
				if (k.iodepth >= std::max(lo, 1u) && k.iodepth <= hi)
					add(k);
			}
			// Commands submitted together (they may merge), on the best
			// point of each stage so far.
			for (const char *st : {"depth", "jobs", "spread"}) {
				int sb = -1;
				for (size_t i = 0; i < points_.size(); i++)
					if (points_[i].stage == st && points_[i].pt.ok &&
					    (sb < 0 || points_[i].pt.gbps > points_[size_t(sb)].pt.gbps))
						sb = int(i);
				if (sb < 0 || sync_engine(points_[size_t(sb)].pt.knobs.engine))
					continue;
				FioKnobs lean = points_[size_t(sb)].pt.knobs;
				lean.lean = true;
				add(lean);
			}
			// The best point with 4 KiB-page buffers, what a program
			// without huge pages gets.
			if (best.hugepages) {
				FioKnobs small = best;
				small.hugepages = false;
				add(small);
			}
			// io_uring's own knobs on its best point: registered files
			// too, and without registered buffers (base_knobs()).
			const int u = best_where([](const FioKnobs &k) { return k.engine == "io_uring"; });
			if (u >= 0)
				for (auto [fb, rf] : {std::pair{false, false}, {true, true}}) {
					FioKnobs k = points_[size_t(u)].pt.knobs;
					k.fixedbufs = fb;
					k.registerfiles = rf;
					add(k);
				}
			break;
		}
		}
	}
	return next;
}

std::vector<FioKnobs> CeilingSearch::finalists() const
{
	std::vector<const SearchPoint *> ok;
	for (const SearchPoint &p : points_)
		if (p.pt.ok)
			ok.push_back(&p);
	std::stable_sort(ok.begin(), ok.end(),
			 [](const SearchPoint *a, const SearchPoint *b) { return a->pt.gbps > b->pt.gbps; });
	std::vector<FioKnobs> f;
	for (const SearchPoint *p : ok)
		if (f.size() < spec_.finalists && std::find(f.begin(), f.end(), p->pt.knobs) == f.end())
			f.push_back(p->pt.knobs);
	// Each stage's best is measured again, so that every "Search stage"
	// line of the report holds a point to its own median. Before this,
	// only the best spread and the best lean point of the whole search
	// were added; refine's lean variant of the spread stage's best is a
	// spread point too, and where its one short run beat the stage's best
	// it took that place: make demo 2026-12-05 07:00 reported the spread
	// stage's best (3.919 GB/s) "not a finalist" for that reason.
	for (size_t i : stage_bests())
		if (std::find(f.begin(), f.end(), points_[i].pt.knobs) == f.end())
			f.push_back(points_[i].pt.knobs);
	// The spread points issue the commands as kvblk's calls spread them,
	// the lean ones submit them together as kvblk's rings do: the best of
	// each is always measured again, however its short run went.
	for (bool spread : {true, false}) {
		const int s = best_where([&](const FioKnobs &k) { return spread ? k.spread : k.lean; });
		if (s >= 0 && std::find(f.begin(), f.end(), points_[size_t(s)].pt.knobs) == f.end())
			f.push_back(points_[size_t(s)].pt.knobs);
	}
	// And each engine's best: one short run on a drifting disk picks the
	// stage bests almost by lot (make demo 2026-12-05 09:47: libaio QD 64
	// at 4.521 GB/s in its short run, 2.126 in the rounds, while io_uring
	// with fixed buffers, 4.521 in the rounds an hour before, was not
	// measured again), and each engine stands for one kvblk backend.
	for (const std::string &e : spec_.engines) {
		const int s = best_where([&](const FioKnobs &k) { return k.engine == e; });
		if (s >= 0 && std::find(f.begin(), f.end(), points_[size_t(s)].pt.knobs) == f.end())
			f.push_back(points_[size_t(s)].pt.knobs);
	}
	return f;
}

std::vector<size_t> CeilingSearch::stage_bests() const
{
	std::vector<size_t> bests;
	std::vector<std::string> stages;
	for (const SearchPoint &p : points_)
		if (std::find(stages.begin(), stages.end(), p.stage) == stages.end())
			stages.push_back(p.stage);
	for (const std::string &st : stages) {
		int b = -1;
		for (size_t i = 0; i < points_.size(); i++)
			if (points_[i].stage == st && points_[i].pt.ok &&
			    (b < 0 || points_[i].pt.gbps > points_[size_t(b)].pt.gbps))
				b = int(i);
		if (b >= 0)
			bests.push_back(size_t(b));
	}
	return bests;
}

void run_search(CeilingSearch &search, kvblk_tools::FioSession &fio,
		const std::function<void(const std::string &, size_t, double)> &on_stage)
{
	// A point is one fio job, in the search and in the rounds alike. Until
	// 2026-12-05 the search capped its runs at --search-runtime (1 s) and
	// the rounds at --fio-runtime (10 s): the same replay otherwise, but a
	// search run of a point slower than one pass per second read only the
	// start of the pass, and its figure was not the rounds' job. (That cap
	// did not make make demo's 4.7 GB/s search runs: they ended after the
	// pass, in under 0.5 s. A stage's best is the highest of several one-run
	// figures, the rounds' figure a median: docs/results.md, 2026-12-05.)
	for (auto stage = search.next_stage(); !stage.empty(); stage = search.next_stage()) {
		for (const FioKnobs &k : stage)
			search.record(fio.run(k));
		if (on_stage) {
			const SearchPoint &last = search.points().back();
			double best = 0;
			for (const SearchPoint &p : search.points())
				if (p.stage == last.stage && p.pt.ok)
					best = std::max(best, p.pt.gbps);
			on_stage(last.stage, stage.size(), best);
		}
	}
}

double CeilingSearch::median_point_gbps() const
{
	std::vector<double> v;
	for (const SearchPoint &p : points_)
		if (p.pt.ok)
			v.push_back(p.pt.gbps);
	return percentile(v, 50);
}

bool reproduced(double search_gbps, double median) noexcept
{
	return median >= kReproduceSlack * search_gbps;
}

std::vector<StageBest> check_stage_bests(const CeilingSearch &search, const FioSweep &finals)
{
	std::vector<StageBest> out;
	const int best = finals.best();
	for (size_t i : search.stage_bests()) {
		StageBest b;
		b.point = i;
		const FioKnobs &k = search.points()[i].pt.knobs;
		for (size_t f = 0; f < finals.points.size(); f++)
			if (finals.points[f].knobs == k)
				b.final = int(f);
		if (b.final >= 0 && finals.points[size_t(b.final)].ok)
			b.remeasured = finals.points[size_t(b.final)].gbps;
		else if (best >= 0)
			b.remeasured = finals.points[size_t(best)].gbps;
		b.reproduced = b.remeasured > 0 && reproduced(search.points()[i].pt.gbps, b.remeasured);
		out.push_back(b);
	}
	return out;
}

CeilingVerdict judge_ceiling(const FioSweep &finals, const std::vector<RunResult> &results)
{
	CeilingVerdict v;
	v.best = finals.best();
	if (v.best < 0)
		return v;
	v.measured = true;
	v.gbps = finals.points[size_t(v.best)].gbps;
	for (size_t i = 0; i < results.size(); i++) {
		const double r = results[i].gbps / v.gbps;
		v.worst_ratio = std::max(v.worst_ratio, r);
		if (r > kCeilingSlack)
			v.over.push_back(i);
	}
	v.found = v.over.empty();
	return v;
}

} // namespace kvblk_bench

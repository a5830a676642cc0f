// SPDX-License-Identifier: MIT
// The ceiling search plan, and the workload's commands and fio replay logs
// against the descriptors the runner builds.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "ceiling.hpp"
#include "hugepages.hpp"
#include "workload.hpp"

using namespace kvblk_bench;

namespace {

// A device model: bandwidth rises with commands in flight up to 32, libaio a
// little ahead, and fixed buffers help io_uring.
FioPoint measure(const FioKnobs &k)
{
	FioPoint p;
	p.knobs = k;
	p.ok = true;
	const double in_flight = std::min<double>(k.in_flight(), 32);
	p.gbps = std::log2(1 + in_flight) * (k.engine == "libaio" ? 1.02 : 1.0) + (k.fixedbufs ? 0.2 : 0.0);
	if (k.in_flight() > 32)
		p.gbps -= 0.01 * double(k.in_flight() - 32) / 32.0;
	p.bw_bytes = uint64_t(p.gbps * 1e9);
	return p;
}

// The whole search, each point measured once by @gbps (a device model).
template <class Model>
std::vector<SearchPoint> run(CeilingSearch &s, Model gbps)
{
	for (auto stage = s.next_stage(); !stage.empty(); stage = s.next_stage())
		for (const FioKnobs &k : stage) {
			FioPoint p;
			p.knobs = k;
			p.ok = true;
			p.gbps = gbps(k);
			p.bw_bytes = uint64_t(p.gbps * 1e9);
			s.record(p);
		}
	return s.points();
}

std::vector<SearchPoint> run(CeilingSearch &s)
{
	return run(s, [](const FioKnobs &k) { return measure(k).gbps; });
}

} // namespace

TEST(SearchPlan, geometric_depths_per_mode)
{
	EXPECT_EQ(geometric(1, 128, 2), (std::vector<uint32_t>{1, 2, 4, 8, 16, 32, 64, 128}));
	EXPECT_EQ(geometric(2, 8, 2), (std::vector<uint32_t>{2, 4, 8}));
	EXPECT_TRUE(geometric(2, 1, 2).empty());
	EXPECT_EQ(make_search_spec(SearchMode::quick, 8).depths, (std::vector<uint32_t>{1, 4, 16, 64}));
	EXPECT_EQ(make_search_spec(SearchMode::thorough, 8).depths.size(), 8u);
	EXPECT_EQ(make_search_spec(SearchMode::quick, 8).finalists, 2u);
	EXPECT_EQ(make_search_spec(SearchMode::thorough, 8).finalists, 3u);
}

TEST(SearchPlan, stages_cover_engines_jobs_and_refine_around_the_best)
{
	CeilingSearch s(make_search_spec(SearchMode::thorough, 4));
	auto pts = run(s);
	std::set<std::string> stages;
	std::vector<FioKnobs> seen;
	for (const SearchPoint &p : pts) {
		stages.insert(p.stage);
		EXPECT_EQ(std::count(seen.begin(), seen.end(), p.pt.knobs), 0) << "measured twice: " << p.pt.knobs.name();
		seen.push_back(p.pt.knobs);
		// Only io_uring has fixed buffers and registered files.
		if (p.pt.knobs.engine == "libaio") {
			EXPECT_FALSE(p.pt.knobs.fixedbufs || p.pt.knobs.registerfiles);
		}
	}
	EXPECT_EQ(stages, (std::set<std::string>{"depth", "jobs", "refine"}));
	// Stage 1: both engines, one job, every depth; io_uring with registered
	// buffers (as kvblk's uring backend), nothing else.
	size_t depth = 0;
	for (const SearchPoint &p : pts)
		if (p.stage == "depth") {
			depth++;
			EXPECT_EQ(p.pt.knobs.numjobs, 1u);
			EXPECT_EQ(p.pt.knobs.fixedbufs, p.pt.knobs.engine == "io_uring");
			EXPECT_FALSE(p.pt.knobs.registerfiles || p.pt.knobs.lean);
		}
	EXPECT_EQ(depth, 16u);
	// Stage 2: jobs 2 and 4 at the engine's best depth (32) split and whole.
	for (const char *e : {"io_uring", "libaio"})
		for (auto [qd, jobs] : {std::pair{16u, 2u}, {32u, 2u}, {8u, 4u}, {32u, 4u}}) {
			FioKnobs k;
			k.engine = e;
			k.iodepth = qd;
			k.numjobs = jobs;
			k.fixedbufs = k.engine == "io_uring";
			EXPECT_EQ(std::count(seen.begin(), seen.end(), k), 1) << k.name();
		}
	// Stage 3: depths halfway to the neighbours of the best (io_uring QD 32
	// with fixed buffers: 5.04 + 0.2 > libaio's 5.15), and io_uring's knobs
	// on io_uring's best point: without registered buffers, and with
	// registered files too.
	std::vector<FioKnobs> refine;
	for (const SearchPoint &p : pts)
		if (p.stage == "refine")
			refine.push_back(p.pt.knobs);
	FioKnobs lo, hi;
	lo.fixedbufs = hi.fixedbufs = true;
	lo.iodepth = 23; // 32 / sqrt(2)
	hi.iodepth = 45; // 32 * sqrt(2)
	EXPECT_EQ(std::count(refine.begin(), refine.end(), lo), 1);
	EXPECT_EQ(std::count(refine.begin(), refine.end(), hi), 1);
	FioKnobs plain, both;
	plain.iodepth = both.iodepth = 32;
	both.fixedbufs = both.registerfiles = true;
	EXPECT_EQ(std::count(refine.begin(), refine.end(), plain), 1);
	EXPECT_EQ(std::count(refine.begin(), refine.end(), both), 1);
	// Commands submitted together on the best point of each stage: depth's
	// io_uring QD 32, jobs' io_uring QD 16 x 2 (the first of the ties).
	FioKnobs lean;
	lean.iodepth = 32;
	lean.fixedbufs = true;
	lean.lean = true;
	EXPECT_EQ(std::count(refine.begin(), refine.end(), lean), 1);
	lean.iodepth = 16;
	lean.numjobs = 2;
	EXPECT_EQ(std::count(refine.begin(), refine.end(), lean), 1);
	EXPECT_EQ(s.points().size(), 16u + 8u + 2u + 2u + 2u);
	EXPECT_TRUE(s.next_stage().empty());

	// Finalists: the three best distinct points, best first (depth's and
	// jobs' bests among them), then the best of each stage that is not
	// among them: refine's, the first lean point of the ties at 5.244.
	auto f = s.finalists();
	ASSERT_EQ(f.size(), 5u);
	EXPECT_EQ(f[4].engine, "libaio"); // each engine's best: libaio's, last
	FioKnobs depth_best, jobs_best;
	depth_best.fixedbufs = jobs_best.fixedbufs = true;
	depth_best.iodepth = 32;
	jobs_best.iodepth = 16;
	jobs_best.numjobs = 2;
	EXPECT_EQ(f[0], depth_best); // 5.04 + 0.2 > libaio's 5.15
	EXPECT_EQ(f[1], jobs_best);
	EXPECT_GE(measure(f[1]).gbps, measure(f[2]).gbps);
	lean.iodepth = 32;
	lean.numjobs = 1;
	EXPECT_EQ(f[3], lean);
}

TEST(SearchPlan, one_worker_skips_the_jobs_stage_and_failures_are_not_finalists)
{
	SearchSpec spec = make_search_spec(SearchMode::quick, 1);
	spec.engines = {"io_uring"};
	CeilingSearch s(spec);
	auto stage = s.next_stage();
	ASSERT_EQ(stage.size(), 4u);
	for (const FioKnobs &k : stage) {
		FioPoint p = measure(k);
		p.ok = k.iodepth != 16; // the best depth fails
		s.record(p);
	}
	stage = s.next_stage();
	ASSERT_FALSE(stage.empty());
	for (const FioKnobs &k : stage) {
		EXPECT_EQ(k.numjobs, 1u);
		EXPECT_EQ(k.engine, "io_uring");
		s.record(measure(k));
	}
	EXPECT_EQ(s.points().back().stage, "refine");
	for (const FioKnobs &k : s.finalists())
		EXPECT_NE(k.iodepth, 16u);
}

TEST(SearchPlan, spread_stage_puts_a_job_on_each_object_and_its_best_is_a_finalist)
{
	SearchSpec spec = make_search_spec(SearchMode::thorough, 1);
	spec.spread_jobs = 4;
	CeilingSearch s(spec);
	std::vector<FioKnobs> spread;
	for (const SearchPoint &p : run(s))
		if (p.stage == "spread")
			spread.push_back(p.pt.knobs);
	// Each engine's best depth of stage 1 is 32: 2 and 4 jobs at 1 and at 32 / jobs.
	std::vector<FioKnobs> want;
	for (const char *e : {"io_uring", "libaio"})
		for (auto [qd, jobs] : {std::pair{1u, 2u}, {16u, 2u}, {1u, 4u}, {8u, 4u}}) {
			FioKnobs k;
			k.engine = e;
			k.iodepth = qd;
			k.numjobs = jobs;
			k.fixedbufs = k.engine == "io_uring";
			k.spread = true;
			want.push_back(k);
		}
	EXPECT_EQ(spread, want);
	// The model neither rewards nor penalises spreading: io_uring's spread
	// points with 32 in flight tie with its QD 32 (5.244 with fixed
	// buffers), so the spread stage's best is among the three best; refine's
	// best (the first lean point of the ties) comes after them.
	auto f = s.finalists();
	ASSERT_EQ(f.size(), 5u);
	EXPECT_EQ(f[4].engine, "libaio"); // each engine's best: libaio's, last
	FioKnobs depth_best;
	depth_best.iodepth = 32;
	depth_best.fixedbufs = true;
	EXPECT_EQ(f[0], depth_best);
	EXPECT_TRUE(f[1].spread);
	EXPECT_EQ(f[1].engine, "io_uring");
	EXPECT_EQ(f[1].in_flight(), 32u);
	EXPECT_TRUE(f[3].lean);
	EXPECT_FALSE(f[3].spread);

	// Without objects to spread over, no stage (the depth stage's and
	// refine's bests are among the three best; libaio's best follows).
	CeilingSearch none(make_search_spec(SearchMode::thorough, 1));
	for (const SearchPoint &p : run(none))
		EXPECT_NE(p.stage, "spread");
	EXPECT_EQ(none.finalists().size(), 4u);

	// A lean point below the three best is measured again too.
	SearchSpec one = make_search_spec(SearchMode::thorough, 1);
	one.engines = {"libaio"};
	CeilingSearch l(one);
	run(l, [](const FioKnobs &k) { return k.lean ? 1.0 : measure(k).gbps; });
	const auto lf = l.finalists();
	ASSERT_EQ(lf.size(), 4u);
	EXPECT_FALSE(lf[0].lean || lf[1].lean || lf[2].lean);
	EXPECT_TRUE(lf[3].lean);
}

TEST(SearchPlan, stage_bests_and_reproduction)
{
	SearchSpec spec = make_search_spec(SearchMode::quick, 2);
	spec.engines = {"io_uring"};
	spec.spread_jobs = 2;
	CeilingSearch s(spec);
	run(s);
	const auto bests = s.stage_bests();
	std::vector<std::string> stages;
	for (size_t i : bests) {
		stages.push_back(s.points()[i].stage);
		for (const SearchPoint &p : s.points())
			if (p.stage == s.points()[i].stage && p.pt.ok) {
				EXPECT_LE(p.pt.gbps, s.points()[i].pt.gbps);
			}
	}
	EXPECT_EQ(stages, (std::vector<std::string>{"depth", "jobs", "spread", "refine"}));
	// The typical search run, next to the stage bests (the highest ones).
	std::vector<double> all;
	for (const SearchPoint &p : s.points())
		all.push_back(p.pt.gbps);
	std::sort(all.begin(), all.end());
	EXPECT_DOUBLE_EQ(s.median_point_gbps(), all[(all.size() + 1) / 2 - 1]);
	EXPECT_DOUBLE_EQ(CeilingSearch(spec).median_point_gbps(), 0.0);
	EXPECT_TRUE(reproduced(3.05, 3.05 * 0.95));
	EXPECT_TRUE(reproduced(3.05, 3.5));
	EXPECT_FALSE(reproduced(3.05, 1.9));
	EXPECT_FALSE(reproduced(3.05, 3.05 * 0.94));
}

TEST(SearchPlan, refine_stays_inside_the_given_depths)
{
	// --fio-qd 1 --fio-engines libaio: every point at one command in flight
	// (the smoke test's forced "ceiling not found" relies on it).
	SearchSpec one = make_search_spec(SearchMode::quick, 1);
	one.engines = {"libaio"};
	one.depths = {1};
	CeilingSearch s1(one);
	for (const SearchPoint &p : run(s1))
		EXPECT_EQ(p.pt.knobs.iodepth, 1u) << p.stage << " " << p.pt.knobs.name();

	// The model peaks at 32 in flight; held to 1..16, the best is QD 16 and
	// refine adds only the depth below it (8 in quick's x4 list), never 32.
	SearchSpec capped = make_search_spec(SearchMode::quick, 1, 16);
	capped.engines = {"libaio"};
	ASSERT_EQ(capped.depths, (std::vector<uint32_t>{1, 4, 16}));
	CeilingSearch s2(capped);
	std::vector<uint32_t> refined;
	for (const SearchPoint &p : run(s2)) {
		EXPECT_LE(p.pt.knobs.iodepth, 16u) << p.stage;
		if (p.stage == "refine")
			refined.push_back(p.pt.knobs.iodepth);
	}
	EXPECT_EQ(refined, (std::vector<uint32_t>{8, 16})); // QD 16 lean
}

TEST(Workload, permutation_is_seeded_and_complete)
{
	auto a = permutation(4096, 1), b = permutation(4096, 1), c = permutation(4096, 2);
	EXPECT_EQ(a, b);
	EXPECT_NE(a, c);
	std::vector<uint64_t> sorted = a;
	std::sort(sorted.begin(), sorted.end());
	for (uint64_t i = 0; i < sorted.size(); i++)
		ASSERT_EQ(sorted[i], i);
	EXPECT_NE(a[0] + 1, a[1]); // not the identity
}

TEST(Workload, presets_match_the_documented_workloads)
{
	const WorkloadPreset *l = find_preset("large"), *s = find_preset("small"), *c = find_preset("chunks");
	ASSERT_TRUE(l && s && c && find_preset("mixed"));
	EXPECT_EQ(l->objects * l->object_bytes, 128ull << 24);
	EXPECT_EQ(l->order, Order::file);
	EXPECT_EQ(s->objects, 4096u);
	EXPECT_EQ(s->object_bytes, 256u << 10);
	EXPECT_EQ(s->order, Order::random);
	EXPECT_TRUE(c->one_file_per_object);
	EXPECT_FALSE(find_preset("nope"));
	Workload m = make_store_workload("m.bin", 256, 0, Order::random, 1);
	std::set<uint64_t> sizes(m.length.begin(), m.length.end());
	EXPECT_EQ(sizes.size(), std::size(kMixedSizes));
	for (uint64_t i = 1; i < m.objects(); i++)
		EXPECT_EQ(m.offset[i], m.offset[i - 1] + m.length[i - 1]);
	EXPECT_EQ(m.store_bytes(), m.total_bytes());
}

namespace {

struct LogLine {
	std::string file, op;
	uint64_t offset = 0, length = 0;
	bool operator==(const LogLine &o) const
	{
		return file == o.file && op == o.op && offset == o.offset && length == o.length;
	}
};

std::vector<LogLine> reads_of(const std::string &log)
{
	std::istringstream in(log);
	std::string line;
	std::getline(in, line);
	EXPECT_EQ(line, "fio version 2 iolog");
	std::vector<LogLine> v;
	while (std::getline(in, line)) {
		std::istringstream ls(line);
		LogLine l;
		ls >> l.file >> l.op;
		if (l.op == "read") {
			ls >> l.offset >> l.length;
			v.push_back(l);
		}
	}
	return v;
}

// What the runner and libkvblk issue: descriptors in load order (the
// runner's loop), each split at cmd_bytes from its start (uring, psync).
std::vector<LogLine> kvblk_commands(const Workload &wl, uint64_t cmd_bytes)
{
	std::vector<LogLine> v;
	for (uint64_t pos = 0; pos < wl.objects(); pos++) {
		const uint64_t obj = wl.order[pos];
		for (uint64_t at = 0; at < wl.length[obj]; at += cmd_bytes)
			v.push_back({wl.path_of(obj), "read", wl.offset[obj] + at, std::min(cmd_bytes, wl.length[obj] - at)});
	}
	return v;
}

} // namespace

TEST(Iolog, same_offsets_in_the_same_order_as_kvblk)
{
	for (uint64_t object_bytes : {uint64_t(256) << 10, uint64_t(0)}) {
		Workload wl = make_store_workload("/data/store.bin", 300, object_bytes, Order::random, 7);
		const auto cmds = pass_commands(wl, 128 << 10);
		std::ostringstream out;
		std::string err;
		ASSERT_TRUE(write_iolog(out, wl, cmds, 0, cmds.size(), err)) << err;
		EXPECT_EQ(reads_of(out.str()), kvblk_commands(wl, 128 << 10));
		EXPECT_NE(out.str().find("/data/store.bin add\n/data/store.bin open\n"), std::string::npos);
		EXPECT_NE(out.str().find("/data/store.bin close\n"), std::string::npos);
	}
}

TEST(Iolog, jobs_split_the_pass_into_contiguous_slices)
{
	EXPECT_EQ(split_jobs(10, 3), (std::vector<std::pair<size_t, size_t>>{{0, 4}, {4, 3}, {7, 3}}));
	EXPECT_EQ(split_jobs(4, 1), (std::vector<std::pair<size_t, size_t>>{{0, 4}}));
	Workload wl = make_store_workload("s.bin", 64, 1 << 20, Order::file, 1);
	const auto cmds = pass_commands(wl, 128 << 10);
	std::vector<LogLine> all;
	for (auto [first, count] : split_jobs(cmds.size(), 4)) {
		std::ostringstream out;
		std::string err;
		ASSERT_TRUE(write_iolog(out, wl, cmds, first, count, err)) << err;
		for (const LogLine &l : reads_of(out.str()))
			all.push_back(l);
	}
	EXPECT_EQ(all, kvblk_commands(wl, 128 << 10));
}

TEST(Iolog, a_job_per_object_reads_every_jobs_th_object_in_pass_order)
{
	// 6 objects of 256 KiB, random order; 128 KiB commands: two per object.
	Workload wl = make_store_workload("/s.bin", 6, 256 << 10, Order::random, 3);
	std::vector<std::vector<Command>> jobs;
	for (uint32_t j = 0; j < 4; j++)
		jobs.push_back(object_job_commands(wl, 128 << 10, j, 4));
	// Job 0: pass positions 0 and 4; job 1: 1 and 5; jobs 2 and 3: one object each.
	ASSERT_EQ(jobs[0].size(), 4u);
	ASSERT_EQ(jobs[1].size(), 4u);
	ASSERT_EQ(jobs[2].size(), 2u);
	ASSERT_EQ(jobs[3].size(), 2u);
	auto is = [&](const Command &c, uint64_t pos, uint64_t half) {
		const uint64_t obj = wl.order[pos];
		return c.object == obj && c.offset == obj * (256 << 10) + half * (128 << 10) && c.length == (128 << 10);
	};
	EXPECT_TRUE(is(jobs[0][0], 0, 0));
	EXPECT_TRUE(is(jobs[0][1], 0, 1));
	EXPECT_TRUE(is(jobs[0][2], 4, 0));
	EXPECT_TRUE(is(jobs[0][3], 4, 1));
	EXPECT_TRUE(is(jobs[1][2], 5, 0));
	EXPECT_TRUE(is(jobs[3][1], 3, 1));
	// The log of job 2: its one object's two reads.
	std::ostringstream out;
	std::string err;
	ASSERT_TRUE(write_iolog(out, wl, jobs[2], 0, jobs[2].size(), err)) << err;
	const uint64_t at = wl.order[2] * (256 << 10);
	EXPECT_EQ(out.str(), "fio version 2 iolog\n/s.bin add\n/s.bin open\n/s.bin read " + std::to_string(at) +
				     " 131072\n/s.bin read " + std::to_string(at + (128 << 10)) +
				     " 131072\n/s.bin close\n");
	// Together: every command of the pass once.
	std::multiset<std::pair<uint64_t, uint64_t>> all, pass;
	for (const auto &j : jobs)
		for (const Command &c : j)
			all.insert({c.offset, c.length});
	for (const Command &c : pass_commands(wl, 128 << 10))
		pass.insert({c.offset, c.length});
	EXPECT_EQ(all, pass);
}

TEST(IssueOrder, objects_in_flight_of_kvblk_calls)
{
	// large: 16 MiB objects, 128 KiB commands (128 per object), 16 per call.
	Workload large = make_store_workload("s", 128, 16 << 20, Order::file, 1);
	EXPECT_EQ(objects_in_flight(large, 128 << 10, 16, 64), 2u);  // the end of one, the start of the next
	EXPECT_EQ(objects_in_flight(large, 128 << 10, 16, 1), 1u);
	EXPECT_EQ(objects_in_flight(large, 128 << 10, 16, 129), 2u);
	EXPECT_EQ(objects_in_flight(large, 128 << 10, 16, 130), 3u); // 1 + 128 + 1
	EXPECT_EQ(objects_in_flight(large, 16 << 20, 16, 64), 16u);  // one command per object: the whole call
	EXPECT_EQ(objects_in_flight(large, 16 << 20, 4, 64), 4u);    // calls do not overlap
	// 1 MiB objects (8 commands): 1 + ceil(63 / 8).
	Workload mib = make_store_workload("s", 64, 1 << 20, Order::file, 1);
	EXPECT_EQ(objects_in_flight(mib, 128 << 10, 16, 64), 9u);
	EXPECT_EQ(objects_in_flight(mib, 128 << 10, 16, 0), 0u);
}

TEST(Iolog, chunk_files_are_named_and_opened)
{
	Workload wl = make_chunk_workload("/d/x.chunks", 3, 256 << 10);
	const auto cmds = pass_commands(wl, 128 << 10);
	std::ostringstream out;
	std::string err;
	ASSERT_TRUE(write_iolog(out, wl, cmds, 0, cmds.size(), err)) << err;
	EXPECT_EQ(reads_of(out.str()), kvblk_commands(wl, 128 << 10));
	EXPECT_NE(out.str().find("/d/x.chunks/chunk-00002.bin open\n"), std::string::npos);
	Workload bad = make_store_workload("/a b/s.bin", 1, 4096, Order::file, 1);
	const auto c2 = pass_commands(bad, 4096);
	EXPECT_FALSE(write_iolog(out, bad, c2, 0, c2.size(), err));
	EXPECT_NE(err.find("whitespace"), std::string::npos);
}

TEST(SearchPlan, a_stage_best_the_rounds_do_not_reproduce_is_flagged)
{
	SearchSpec spec = make_search_spec(SearchMode::quick, 1);
	spec.engines = {"io_uring"};
	spec.depths = {4, 16, 64};
	CeilingSearch s(spec);
	// depth: QD 16 at 3.05 in its short run, QD 4 and 64 at 2.0; refine: QD 8 at 2.5, the rest 2.0.
	run(s, [](const FioKnobs &k) {
		return k.iodepth == 16 && k.fixedbufs && !k.registerfiles && !k.lean ? 3.05
		       : k.iodepth == 8						       ? 2.5
											       : 2.0;
	});
	// The rounds: QD 16's median 1.9, the refine best (QD 8) 2.45.
	FioSweep finals;
	for (const FioKnobs &k : s.finalists()) {
		FioPoint p;
		p.knobs = k;
		p.ok = true;
		p.gbps = k.iodepth == 16 && k.fixedbufs && !k.registerfiles && !k.lean ? 1.9
			 : k.iodepth == 8					      ? 2.45
										      : 1.95;
		p.bw_bytes = uint64_t(p.gbps * 1e9);
		finals.points.push_back(p);
	}
	const auto b = check_stage_bests(s, finals);
	ASSERT_EQ(b.size(), 2u);
	EXPECT_EQ(s.points()[b[0].point].stage, "depth");
	EXPECT_EQ(s.points()[b[0].point].pt.knobs.iodepth, 16u);
	ASSERT_GE(b[0].final, 0);
	EXPECT_DOUBLE_EQ(b[0].remeasured, 1.9);
	EXPECT_FALSE(b[0].reproduced);
	EXPECT_EQ(s.points()[b[1].point].stage, "refine");
	EXPECT_DOUBLE_EQ(b[1].remeasured, 2.45);
	EXPECT_TRUE(b[1].reproduced); // 2.45 >= 0.95 x 2.5
}

TEST(SearchPlan, every_stage_best_is_a_finalist_even_when_its_lean_variant_outran_it)
{
	// make demo, 2026-12-05 07:00: the spread stage's best (libaio QD 4 x 4
	// jobs, a job per object, 3.919 GB/s) was reported "not a finalist":
	// refine measured its lean variant (also a spread point) higher in its
	// one short run, so "the best spread point" was that one, and the spread
	// stage's own best was never measured again.
	SearchSpec spec = make_search_spec(SearchMode::quick, 1);
	spec.engines = {"libaio"};
	spec.spread_jobs = 4;
	CeilingSearch s(spec);
	run(s, [](const FioKnobs &k) {
		const bool qd4x4 = k.spread && k.iodepth == 4 && k.numjobs == 4;
		return k.iodepth == 16 && k.numjobs == 1 ? (k.lean ? 4.668 : 4.699)
		       : qd4x4			   ? (k.lean ? 4.0 : 3.919)
							   : 2.0;
	});
	const std::vector<FioKnobs> f = s.finalists();
	for (size_t i : s.stage_bests()) {
		const SearchPoint &b = s.points()[i];
		EXPECT_NE(std::find(f.begin(), f.end(), b.pt.knobs), f.end())
			<< "stage " << b.stage << "'s best " << b.pt.knobs.name() << " is not a finalist";
	}
	// The rounds then hold each stage's best to its own median.
	FioSweep finals;
	for (const FioKnobs &k : f) {
		FioPoint p;
		p.knobs = k;
		p.ok = true;
		p.gbps = 2.0;
		p.bw_bytes = uint64_t(2e9);
		finals.points.push_back(p);
	}
	for (const StageBest &b : check_stage_bests(s, finals))
		EXPECT_GE(b.final, 0) << s.points()[b.point].stage;
	// The best spread point (its lean variant) is measured again too.
	FioKnobs spread_lean;
	spread_lean.engine = "libaio";
	spread_lean.iodepth = 4;
	spread_lean.numjobs = 4;
	spread_lean.spread = true;
	spread_lean.lean = true;
	EXPECT_NE(std::find(f.begin(), f.end(), spread_lean), f.end());
}

namespace {

// A stand-in for fio: appends its arguments to @dir/argv.log, one line per
// run, and writes a successful one-job JSON document to its --output.
std::string fake_fio(const std::string &dir)
{
	const std::string prog = dir + "/fio";
	std::ofstream f(prog);
	f << "#!/bin/sh\n"
	     "out=\n"
	     "for a; do case \"$a\" in --output=*) out=\"${a#--output=}\";; esac; done\n"
	     "echo \"$*\" >> '"
	  << dir
	  << "/argv.log'\n"
	     "printf '%s' '{\"fio version\": \"fio-fake\", \"jobs\": [{\"error\": 0, \"read\": {\"io_bytes\": 1048576, "
	     "\"total_ios\": 8, \"runtime\": 1, \"bw_bytes\": 1048576000, \"iops\": 8000}}]}' > \"$out\"\n";
	f.close();
	::chmod(prog.c_str(), 0755);
	return prog;
}

} // namespace

TEST(SearchRun, a_search_point_is_the_same_fio_job_as_its_runs_in_the_rounds)
{
	// make demo 2026-12-05: the search read 4.699 GB/s for libaio QD 16
	// (one run), the rounds 2.35 2.13 2.20 for the same point. The one
	// thing that differed in fio's command line was the cap: --runtime=1
	// in the search (--search-runtime), --runtime=10 in the rounds
	// (--fio-runtime). A point is one fio job: the search and the rounds
	// must run the same one.
	char tmpl[] = "/tmp/kvblk-bench-test.XXXXXX";
	ASSERT_NE(mkdtemp(tmpl), nullptr);
	const std::string dir = tmpl;
	kvblk_tools::FioConfig fc;
	fc.fio = fake_fio(dir);
	fc.replays[1] = kvblk_tools::FioReplay{{dir + "/replay.log"}, 8u << 17, 8};
	fc.runtime_s = 10; // --fio-runtime's default, as main sets it
	std::vector<std::string> lines;
	{
		kvblk_tools::FioSession fio(fc);
		ASSERT_TRUE(fio.available()) << fio.note();
		SearchSpec spec = make_search_spec(SearchMode::quick, 1);
		spec.engines = {"libaio"};
		spec.depths = {1, 4};
		CeilingSearch s(spec);
		run_search(s, fio, {});
		ASSERT_FALSE(s.points().empty());
		const std::vector<FioKnobs> finalists = s.finalists();
		ASSERT_FALSE(finalists.empty());
		for (const FioKnobs &k : finalists) // a round, as main runs it
			EXPECT_TRUE(fio.run(k).ok);
		std::ifstream in(dir + "/argv.log");
		for (std::string l; std::getline(in, l);)
			lines.push_back(l);
		ASSERT_EQ(lines.size(), s.points().size() + finalists.size());
		for (size_t f = 0; f < finalists.size(); f++) {
			size_t p = 0;
			while (p < s.points().size() && s.points()[p].pt.knobs != finalists[f])
				p++;
			ASSERT_LT(p, s.points().size());
			EXPECT_EQ(lines[p], lines[s.points().size() + f]) << finalists[f].name();
		}
	}
	for (const std::string &l : lines)
		EXPECT_NE(l.find("--runtime=10 "), std::string::npos) << l;
	::unlink((dir + "/argv.log").c_str());
	::unlink((dir + "/fio").c_str());
	::rmdir(dir.c_str());
}

TEST(SearchPlan, psync_varies_its_jobs_never_its_depth)
{
	// fio's psync is the threadpool backend's counterpart: a job per
	// worker, one command in flight each (in the idle demo of 2026-12-05
	// threadpool W=8 read 1.10 x fio's best, which had no such point).
	SearchSpec spec = make_search_spec(SearchMode::quick, 8);
	spec.engines = {"psync"};
	spec.spread_jobs = 4;
	CeilingSearch s(spec);
	std::vector<std::pair<std::string, uint32_t>> got; // stage, numjobs
	for (const SearchPoint &p : run(s)) {
		EXPECT_EQ(p.pt.knobs.iodepth, 1u) << p.pt.knobs.name();
		EXPECT_FALSE(p.pt.knobs.lean || p.pt.knobs.fixedbufs || p.pt.knobs.registerfiles)
			<< p.pt.knobs.name();
		got.emplace_back(p.stage, p.pt.knobs.numjobs);
	}
	const std::vector<std::pair<std::string, uint32_t>> want = {
		{"depth", 1}, {"jobs", 2}, {"jobs", 4}, {"jobs", 8}, {"spread", 2}, {"spread", 4}};
	EXPECT_EQ(got, want);
	// The finalists: the best of psync's points (8 jobs), and each stage's best.
	auto f = s.finalists();
	ASSERT_FALSE(f.empty());
	EXPECT_EQ(f[0].numjobs, 8u);
	EXPECT_EQ(f[0].engine, "psync");
}

TEST(SearchPlan, huge_pages_on_every_point_and_refine_measures_the_best_without)
{
	SearchSpec spec = make_search_spec(SearchMode::thorough, 4);
	spec.hugepages = true;
	CeilingSearch s(spec);
	// Huge pages read faster, as on the project's virtio disk.
	auto pts = run(s, [](const FioKnobs &k) { return measure(k).gbps * (k.hugepages ? 1.5 : 1.0); });
	size_t small = 0;
	for (const SearchPoint &p : pts) {
		if (p.pt.knobs.hugepages)
			continue;
		small++;
		EXPECT_EQ(p.stage, "refine") << p.pt.knobs.name();
		// The best point (io_uring QD 32, fixed buffers, huge pages) with
		// 4 KiB pages, all else equal.
		FioKnobs best;
		best.iodepth = 32;
		best.fixedbufs = true;
		EXPECT_EQ(p.pt.knobs, best);
	}
	EXPECT_EQ(small, 1u);
	// Without the spec's huge pages no point has them, and refine adds none.
	CeilingSearch plain(make_search_spec(SearchMode::thorough, 4));
	for (const SearchPoint &p : run(plain))
		EXPECT_FALSE(p.pt.knobs.hugepages) << p.pt.knobs.name();
	EXPECT_EQ(plain.points().size(), pts.size() - 1);
}

TEST(SearchPlan, huge_pages_needed_cover_the_largest_point)
{
	const uint64_t page = 2u << 20;
	SearchSpec spec = make_search_spec(SearchMode::quick, 8); // depths 1..64, jobs up to 8
	spec.spread_jobs = 16;
	// jobs: 8 jobs x QD 64 x 128 KiB = 8 MiB each: 4 pages each, 32 in all;
	// spread: 16 jobs x QD 4 x 128 KiB = 512 KiB each: a page each, 16.
	EXPECT_EQ(search_hugepages(spec, 131072, page), 32u);
	// 1 MiB commands: 8 jobs x 64 MiB = 256 pages.
	EXPECT_EQ(search_hugepages(spec, 1u << 20, page), 256u);
	spec.max_jobs = 1;
	spec.spread_jobs = 0;
	EXPECT_EQ(search_hugepages(spec, 131072, page), 4u);
	EXPECT_EQ(search_hugepages(spec, 131072, 0), 0u);
	// Every point the search runs fits in what it asked for.
	spec = make_search_spec(SearchMode::thorough, 8);
	spec.spread_jobs = 16;
	spec.hugepages = true;
	CeilingSearch s(spec);
	const uint64_t budget = search_hugepages(spec, 131072, page);
	for (const SearchPoint &p : run(s))
		EXPECT_LE(kvblk_tools::hugepages_needed(uint64_t(p.pt.knobs.iodepth) * 131072, p.pt.knobs.numjobs, page),
			  budget)
			<< p.pt.knobs.name();
}

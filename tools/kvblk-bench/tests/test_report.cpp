// SPDX-License-Identifier: MIT
// Percentiles, medians, the ceiling verdict (ceiling not found above 1.05 x),
// ratios and the JSON document's required fields.
#include <gtest/gtest.h>

#include "ceiling.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "workload.hpp"

using namespace kvblk_bench;

TEST(Percentile, nearest_rank)
{
	std::vector<double> v;
	for (int i = 100; i >= 1; i--)
		v.push_back(i);
	EXPECT_EQ(percentile(v, 50), 50.0);
	EXPECT_EQ(percentile(v, 99), 99.0);
	EXPECT_EQ(percentile(v, 100), 100.0);
	EXPECT_EQ(percentile(v, 1), 1.0);
	EXPECT_EQ(percentile({7.0}, 99), 7.0);
	EXPECT_EQ(percentile({3.0, 1.0, 2.0, 4.0}, 50), 2.0);
	EXPECT_EQ(percentile({}, 50), 0.0);
}

namespace {

RunResult result(const char *backend, uint32_t w, uint32_t qd, double gbps, double cpu = 0.1)
{
	RunResult r;
	r.backend = r.requested_backend = backend;
	r.workers = w;
	r.queue_depth = qd;
	r.gbps = gbps;
	r.cpu_s_per_gb = cpu;
	r.objects = 128;
	r.object_bytes = 16u << 20;
	r.total_bytes = r.objects * r.object_bytes;
	r.verified = true;
	return r;
}

FioPoint point(const char *engine, uint32_t qd, double gbps, uint32_t jobs = 1)
{
	FioPoint p;
	p.ok = true;
	p.knobs.engine = engine;
	p.knobs.iodepth = qd;
	p.knobs.numjobs = jobs;
	p.queue_depth = qd;
	p.gbps = gbps;
	p.bw_bytes = uint64_t(gbps * 1e9);
	return p;
}

FioSweep finals(std::initializer_list<FioPoint> pts)
{
	FioSweep s;
	s.available = true;
	s.points = pts;
	return s;
}

} // namespace

TEST(Median, finalists_take_the_median_round_and_keep_every_run)
{
	// Three rounds of two finalists: each finalist's figure is its median
	// run, not its best; the ceiling is the best median.
	std::vector<FioSweep> rounds = {finals({point("libaio", 32, 3.0), point("io_uring", 64, 2.0)}),
					finals({point("libaio", 32, 1.0), point("io_uring", 64, 2.5)}),
					finals({point("libaio", 32, 2.0), point("io_uring", 64, 9.0)})};
	FioSweep m = kvblk_tools::median_sweep(rounds);
	ASSERT_EQ(m.points.size(), 2u);
	EXPECT_DOUBLE_EQ(m.points[0].gbps, 2.0);
	EXPECT_DOUBLE_EQ(m.points[1].gbps, 2.5);
	EXPECT_EQ(m.points[1].gbps_repeats, (std::vector<double>{2.0, 2.5, 9.0}));
	CeilingVerdict v = judge_ceiling(m, {result("uring", 1, 64, 2.4)});
	EXPECT_EQ(v.best, 1);
	EXPECT_DOUBLE_EQ(v.gbps, 2.5);
	EXPECT_TRUE(v.found);
}

TEST(Verdict, above_the_slack_is_ceiling_not_found_never_a_ratio)
{
	FioSweep f = finals({point("io_uring", 32, 2.0)});
	// 1.05 x exactly is still a ceiling (within the noise).
	CeilingVerdict at = judge_ceiling(f, {result("uring", 1, 64, 2.1)});
	EXPECT_TRUE(at.found);
	ASSERT_TRUE(fraction_of_ceiling(at, 2.1));
	EXPECT_DOUBLE_EQ(*fraction_of_ceiling(at, 2.1), 1.05);

	std::vector<RunResult> rs = {result("psync", 1, 1, 0.5), result("uring", 1, 64, 2.2)};
	CeilingVerdict v = judge_ceiling(f, rs);
	EXPECT_TRUE(v.measured);
	EXPECT_FALSE(v.found);
	EXPECT_EQ(v.over, std::vector<size_t>{1});
	EXPECT_DOUBLE_EQ(v.worst_ratio, 1.1);
	// No ratio against a ceiling that was not found, for any setting.
	EXPECT_FALSE(fraction_of_ceiling(v, 2.2));
	EXPECT_FALSE(fraction_of_ceiling(v, 0.5));
	Ratios q = compute_ratios(rs, v, {});
	EXPECT_FALSE(q.uring_over_fio);
	ASSERT_TRUE(q.uring_over_psync);
	EXPECT_DOUBLE_EQ(*q.uring_over_psync, 4.4);

	CeilingVerdict none = judge_ceiling(FioSweep{}, rs);
	EXPECT_FALSE(none.measured);
	EXPECT_FALSE(none.found);
	EXPECT_FALSE(fraction_of_ceiling(none, 1.0));
}

TEST(Ratios, best_of_each_backend_cpu_and_queue_depth_gain)
{
	std::vector<RunResult> rs = {result("psync", 1, 1, 0.5, 0.4), result("threadpool", 8, 8, 1.5, 0.2),
				     result("uring", 1, 32, 1.8, 0.05), result("uring", 1, 64, 2.0, 0.08)};
	FioSweep f = finals({point("libaio", 32, 2.1)});
	CeilingVerdict v = judge_ceiling(f, rs);
	ASSERT_TRUE(v.found);
	std::vector<SearchPoint> search = {{point("io_uring", 1, 0.7), "depth"}, {point("libaio", 1, 0.6), "depth"},
					   {point("libaio", 32, 2.3), "depth"}};
	Ratios q = compute_ratios(rs, v, search);
	EXPECT_EQ(q.best_uring, 3);
	EXPECT_EQ(q.psync, 0);
	EXPECT_EQ(q.best_threadpool, 1);
	EXPECT_DOUBLE_EQ(*q.uring_over_fio, 2.0 / 2.1);
	EXPECT_DOUBLE_EQ(*q.uring_over_psync, 4.0);
	EXPECT_DOUBLE_EQ(*q.threadpool_over_psync, 3.0);
	EXPECT_DOUBLE_EQ(*q.uring_cpu_over_threadpool, 0.08 / 0.2);
	// The ceiling (a median) over the best single point at one command in flight.
	EXPECT_DOUBLE_EQ(*q.fio_best_over_qd1, 2.1 / 0.7);
}

TEST(Json, has_the_fields_the_results_need)
{
	Workload wl = make_store_workload("x.bin", 128, 16u << 20, Order::file, 1);
	wl.name = "large";
	Report r;
	r.wl = &wl;
	r.run.cmd_bytes = 131072;
	r.run.repeat = 3;
	r.fio_available = true;
	r.finals = finals({point("libaio", 32, 2.0)});
	r.finals.points[0].gbps_repeats = {1.9, 2.0, 2.2};
	r.results = {result("psync", 1, 1, 0.5), result("uring", 1, 64, 1.9)};
	r.verdict = judge_ceiling(r.finals, r.results);
	nlohmann::json j = render_json(r);
	EXPECT_EQ(j["schema_version"], 2);
	EXPECT_EQ(j["workload"]["name"], "large");
	EXPECT_EQ(j["workload"]["order"], "file");
	EXPECT_EQ(j["ceiling"]["status"], "found");
	EXPECT_DOUBLE_EQ(j["ceiling"]["gbps"].get<double>(), 2.0);
	EXPECT_EQ(j["ceiling"]["config"]["engine"], "libaio");
	EXPECT_EQ(j["ceiling"]["config"]["iodepth"], 32);
	EXPECT_EQ(j["ceiling"]["rounds"], 3);
	ASSERT_EQ(j["results"].size(), 2u);
	for (const char *k : {"backend", "workers", "queue_depth", "in_flight", "objects", "gbps", "fraction_of_ceiling",
			      "cpu_s_per_gb", "p50_ms", "p99_ms", "verified", "objects_per_s", "peak_rss_mib", "commands",
			      "above_ceiling"})
		EXPECT_TRUE(j["results"][1].contains(k)) << k;
	EXPECT_DOUBLE_EQ(j["results"][1]["fraction_of_ceiling"].get<double>(), 0.95);
	EXPECT_DOUBLE_EQ(j["ratios"]["uring_over_psync"].get<double>(), 3.8);
	EXPECT_TRUE(j["search"]["points"].is_array());
	EXPECT_EQ(j["search"]["finalists"].size(), 1u);
	EXPECT_DOUBLE_EQ(j["search"]["median_point_gbps"].get<double>(), 0.0); // no search point

	std::string text = render_text(r);
	EXPECT_NE(text.find("uring / fio best      = 0.95"), std::string::npos) << text;
	EXPECT_NE(text.find("Ceiling: 2.000 GB/s (fio libaio QD 32, median of 3)"), std::string::npos) << text;

	// Above the slack: the table says so instead of a ratio, the JSON has no fraction.
	r.results[1].gbps = 2.2;
	r.verdict = judge_ceiling(r.finals, r.results);
	j = render_json(r);
	EXPECT_EQ(j["ceiling"]["status"], "not_found");
	EXPECT_TRUE(j["results"][1]["fraction_of_ceiling"].is_null());
	EXPECT_TRUE(j["results"][1]["above_ceiling"].get<bool>());
	EXPECT_TRUE(j["ratios"]["uring_over_fio_best"].is_null());
	text = render_text(r);
	EXPECT_NE(text.find("uring / fio best      = ceiling not found"), std::string::npos) << text;
	EXPECT_NE(text.find("Ceiling: NOT FOUND"), std::string::npos) << text;
	EXPECT_EQ(text.find("uring / fio best      = 1.10"), std::string::npos) << text;
}

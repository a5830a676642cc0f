// SPDX-License-Identifier: MIT
// Percentiles, ratios and the JSON document's required fields.
#include <gtest/gtest.h>

#include "report.hpp"
#include "runner.hpp"

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

RunResult result(const char *backend, uint32_t w, uint32_t qd, double gbps)
{
	RunResult r;
	r.backend = r.requested_backend = backend;
	r.workers = w;
	r.queue_depth = qd;
	r.gbps = gbps;
	r.objects = 128;
	r.object_bytes = 16u << 20;
	r.verified = true;
	return r;
}

FioSweep sweep(std::initializer_list<std::pair<uint32_t, double>> pts)
{
	FioSweep s;
	s.available = true;
	for (auto [qd, gbps] : pts) {
		FioPoint p;
		p.ok = true;
		p.queue_depth = qd;
		p.gbps = gbps;
		p.bw_bytes = uint64_t(gbps * 1e9);
		s.points.push_back(p);
	}
	return s;
}

} // namespace

TEST(Ratios, best_uring_against_fio_best_and_psync)
{
	std::vector<RunResult> rs = {result("psync", 1, 1, 0.5), result("threadpool", 8, 8, 1.5),
				     result("uring", 1, 32, 1.8), result("uring", 1, 64, 2.0)};
	FioSweep f = sweep({{1, 0.9}, {32, 2.1}, {64, 2.05}});
	Ratios q = compute_ratios(rs, f);
	EXPECT_EQ(q.best_uring, 3);
	EXPECT_EQ(q.psync, 0);
	EXPECT_EQ(q.best_threadpool, 1);
	ASSERT_TRUE(q.uring_over_fio && q.uring_over_psync);
	EXPECT_DOUBLE_EQ(*q.uring_over_fio, 2.0 / 2.1);
	EXPECT_DOUBLE_EQ(*q.uring_over_psync, 4.0);
	EXPECT_DOUBLE_EQ(*q.threadpool_over_psync, 3.0);
	ASSERT_TRUE(q.target_met);
	EXPECT_TRUE(*q.target_met);
	ASSERT_TRUE(q.fio_best_over_qd1);
	EXPECT_DOUBLE_EQ(*q.fio_best_over_qd1, 2.1 / 0.9);

	rs[0].gbps = 1.0; // uring only 2x psync now
	q = compute_ratios(rs, f);
	EXPECT_FALSE(*q.target_met);
}

TEST(Ratios, absent_without_ceiling_or_psync)
{
	std::vector<RunResult> rs = {result("uring", 1, 64, 2.0)};
	Ratios q = compute_ratios(rs, FioSweep{});
	EXPECT_FALSE(q.uring_over_fio);
	EXPECT_FALSE(q.uring_over_psync);
	EXPECT_FALSE(q.target_met);
	EXPECT_FALSE(fraction_of_ceiling(FioSweep{}, 1.0));
}

TEST(Json, has_the_fields_issue_2_requires)
{
	Report r;
	r.store.path = "x.bin";
	r.store.objects = 128;
	r.store.object_bytes = 16u << 20;
	r.run.cmd_bytes = 131072;
	r.fio = sweep({{8, 2.0}});
	r.results = {result("psync", 1, 1, 0.5), result("uring", 1, 64, 1.9)};
	nlohmann::json j = render_json(r);
	EXPECT_EQ(j["schema_version"], 1);
	EXPECT_EQ(j["ceiling"]["tool"], "fio");
	EXPECT_DOUBLE_EQ(j["ceiling"]["gbps"].get<double>(), 2.0);
	EXPECT_EQ(j["ceiling"]["queue_depth"], 8);
	ASSERT_EQ(j["results"].size(), 2u);
	for (const char *k : {"backend", "workers", "queue_depth", "object_bytes", "objects", "gbps",
			      "fraction_of_ceiling", "cpu_s_per_gb", "p50_ms", "p99_ms", "verified", "objects_per_s",
			      "peak_rss_mib", "commands"})
		EXPECT_TRUE(j["results"][1].contains(k)) << k;
	EXPECT_DOUBLE_EQ(j["results"][1]["fraction_of_ceiling"].get<double>(), 0.95);
	EXPECT_DOUBLE_EQ(j["ratios"]["uring_over_psync"].get<double>(), 3.8);
	EXPECT_TRUE(j["host"].is_object());
	EXPECT_EQ(j["fio"].size(), 1u);

	std::string text = render_text(r);
	EXPECT_NE(text.find("uring / fio best   = 0.95"), std::string::npos) << text;
	EXPECT_NE(text.find("uring / psync      = 3.80"), std::string::npos) << text;
}

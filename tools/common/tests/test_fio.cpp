// SPDX-License-Identifier: MIT
// fio's JSON as kvblk-bench reads it, and the command line it runs.
#include <gtest/gtest.h>

#include <algorithm>

#include "fio.hpp"

using namespace kvblk_tools;

namespace {

const char *kFioJson = R"({
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "kvblk-ceiling",
      "error" : 0,
      "read" : {
        "io_bytes" : 2147483648,
        "bw_bytes" : 2013265920,
        "iops" : 15360.5,
        "runtime" : 1066,
        "clat_ns" : {
          "mean" : 2080000.0,
          "percentile" : { "50.000000" : 1990656, "99.000000" : 4882432 }
        }
      },
      "usr_cpu" : 2.5,
      "sys_cpu" : 17.5
    }
  ]
})";

} // namespace

TEST(FioParse, reads_bandwidth_latency_and_cpu)
{
	FioPoint pt;
	std::string version;
	ASSERT_TRUE(parse_fio_json(kFioJson, pt, &version)) << pt.error;
	EXPECT_TRUE(pt.ok);
	EXPECT_EQ(version, "fio-3.33");
	EXPECT_EQ(pt.bw_bytes, 2013265920u);
	EXPECT_DOUBLE_EQ(pt.gbps, 2.01326592);
	EXPECT_EQ(pt.io_bytes, 2147483648u);
	EXPECT_DOUBLE_EQ(pt.iops, 15360.5);
	EXPECT_DOUBLE_EQ(pt.runtime_s, 1.066);
	EXPECT_DOUBLE_EQ(pt.clat_mean_us, 2080.0);
	EXPECT_DOUBLE_EQ(pt.clat_p50_us, 1990.656);
	EXPECT_DOUBLE_EQ(pt.clat_p99_us, 4882.432);
	// 20% of one CPU for 1.066 s over 2.147483648 GB.
	EXPECT_NEAR(pt.cpu_s_per_gb, 0.2 * 1.066 / 2.147483648, 1e-12);
}

TEST(FioParse, tolerates_notes_before_the_document)
{
	FioPoint pt;
	std::string text = std::string("fio: note: something\n") + kFioJson;
	EXPECT_TRUE(parse_fio_json(text, pt)) << pt.error;
	EXPECT_EQ(pt.bw_bytes, 2013265920u);
}

TEST(FioParse, rejects_garbage_errors_and_empty_reads)
{
	FioPoint a, b, c, d;
	EXPECT_FALSE(parse_fio_json("fio: engine io_uring not loadable", a));
	EXPECT_FALSE(a.ok);
	EXPECT_FALSE(a.error.empty());
	EXPECT_FALSE(parse_fio_json("{\"jobs\": []}", b));
	EXPECT_FALSE(parse_fio_json(R"({"jobs":[{"error":5,"read":{"bw_bytes":1,"io_bytes":1}}]})", c));
	EXPECT_NE(c.error.find("5"), std::string::npos);
	EXPECT_FALSE(parse_fio_json(R"({"jobs":[{"error":0,"read":{"bw_bytes":0,"io_bytes":0}}]})", d));
	EXPECT_FALSE(d.ok);
}

TEST(FioArgv, same_command_size_direct_io_uring_read_only)
{
	FioConfig cfg;
	cfg.path = "/data/a:b.bin";
	cfg.size = 1u << 30;
	cfg.block_bytes = 131072;
	cfg.runtime_s = 7;
	auto a = fio_argv("/usr/bin/fio", cfg, 32, true, "/tmp/x.json");
	auto has = [&](const std::string &s) { return std::find(a.begin(), a.end(), s) != a.end(); };
	EXPECT_EQ(a[0], "/usr/bin/fio");
	EXPECT_TRUE(has("--filename=/data/a\\:b.bin"));
	EXPECT_TRUE(has("--readonly"));
	EXPECT_TRUE(has("--rw=read"));
	EXPECT_TRUE(has("--direct=1"));
	EXPECT_TRUE(has("--ioengine=io_uring"));
	EXPECT_TRUE(has("--bs=131072"));
	EXPECT_TRUE(has("--iodepth=32"));
	EXPECT_TRUE(has("--numjobs=1"));
	EXPECT_TRUE(has("--size=1073741824"));
	EXPECT_TRUE(has("--runtime=7"));
	EXPECT_TRUE(has("--output-format=json"));
	EXPECT_TRUE(has("--output=/tmp/x.json"));
	EXPECT_TRUE(has("--fixedbufs=1"));
	EXPECT_FALSE(has("--iodepth_batch_submit=32"));
	auto b = fio_argv("fio", cfg, 1, false, "o");
	EXPECT_EQ(std::count(b.begin(), b.end(), std::string("--fixedbufs=1")), 0);
	cfg.batch = true;
	auto c = fio_argv("fio", cfg, 64, true, "o");
	EXPECT_EQ(std::count(c.begin(), c.end(), std::string("--iodepth_batch_submit=64")), 1);
	EXPECT_EQ(std::count(c.begin(), c.end(), std::string("--iodepth_batch_complete_min=1")), 1);
}

TEST(FioSweepBest, picks_highest_successful_point)
{
	FioSweep s;
	EXPECT_EQ(s.best(), -1);
	s.points.resize(3);
	s.points[0].ok = true;
	s.points[0].bw_bytes = 10;
	s.points[1].ok = false;
	s.points[1].bw_bytes = 100;
	s.points[2].ok = true;
	s.points[2].bw_bytes = 20;
	EXPECT_EQ(s.best(), 2);
}

TEST(FindProgram, finds_sh_and_not_nonsense)
{
	EXPECT_FALSE(find_program("sh").empty());
	EXPECT_TRUE(find_program("kvblk-no-such-program-xyz").empty());
	EXPECT_TRUE(find_program("/no/such/dir/fio").empty());
}

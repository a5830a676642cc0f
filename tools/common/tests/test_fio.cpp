// SPDX-License-Identifier: MIT
// fio's JSON as kvblk-bench reads it, and the command line it runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

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
        "total_ios" : 16384,
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
	// Bytes over fio's runtime (ms resolution, as fio's own bw_bytes).
	EXPECT_EQ(pt.bw_bytes, uint64_t(2147483648.0 / 1.066));
	EXPECT_DOUBLE_EQ(pt.gbps, double(pt.bw_bytes) / 1e9);
	EXPECT_EQ(pt.io_bytes, 2147483648u);
	EXPECT_EQ(pt.total_ios, 16384u);
	EXPECT_DOUBLE_EQ(pt.iops, 15360.5);
	EXPECT_DOUBLE_EQ(pt.runtime_s, 1.066);
	EXPECT_DOUBLE_EQ(pt.clat_mean_us, 2080.0);
	EXPECT_DOUBLE_EQ(pt.clat_p50_us, 1990.656);
	EXPECT_DOUBLE_EQ(pt.clat_p99_us, 4882.432);
	// CPU comes from wait4() of the fio process, not from the document.
	EXPECT_EQ(pt.cpu_s_per_gb, 0.0);
}

TEST(FioParse, replay_counts_every_completed_command)
{
	// fio 3.33 replaying a log at QD 32 reports io_bytes short by 31
	// commands while total_ios counts all of them.
	const std::string doc = R"({"jobs":[{"error":0,"read":{"io_bytes":532807680,"bw_bytes":1,)"
				R"("total_ios":4096,"runtime":457}}]})";
	FioPoint pt;
	ASSERT_TRUE(parse_fio_json(doc, pt, nullptr, 131072.0)) << pt.error;
	EXPECT_EQ(pt.io_bytes, 4096u * 131072u);
	EXPECT_EQ(pt.bw_bytes, uint64_t(4096.0 * 131072.0 / 0.457));
	FioPoint seq;
	ASSERT_TRUE(parse_fio_json(doc, seq)) << seq.error;
	EXPECT_EQ(seq.io_bytes, 532807680u);
}

TEST(FioParse, tolerates_notes_before_the_document)
{
	FioPoint pt;
	std::string text = std::string("fio: note: something\n") + kFioJson;
	EXPECT_TRUE(parse_fio_json(text, pt)) << pt.error;
	EXPECT_EQ(pt.io_bytes, 2147483648u);
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

namespace {

bool has(const std::vector<std::string> &a, const std::string &s)
{
	return std::find(a.begin(), a.end(), s) != a.end();
}

} // namespace

TEST(FioArgv, sequential_same_command_size_direct_read_only)
{
	FioConfig cfg;
	cfg.path = "/data/a:b.bin";
	cfg.size = 1u << 30;
	cfg.block_bytes = 131072;
	cfg.runtime_s = 7;
	FioKnobs k;
	k.iodepth = 32;
	k.fixedbufs = true;
	auto a = fio_argv("/usr/bin/fio", cfg, k, "/tmp/x.json");
	EXPECT_EQ(a[0], "/usr/bin/fio");
	for (const char *s : {"--filename=/data/a\\:b.bin", "--readonly", "--rw=read", "--direct=1", "--thread",
			      "--ioengine=io_uring", "--bs=131072", "--iodepth=32", "--size=1073741824", "--runtime=7",
			      "--output-format=json", "--output=/tmp/x.json", "--fixedbufs=1"})
		EXPECT_TRUE(has(a, s)) << s;
	EXPECT_FALSE(has(a, "--registerfiles=1"));
	k.fixedbufs = false;
	k.registerfiles = true;
	auto b = fio_argv("fio", cfg, k, "o");
	EXPECT_FALSE(has(b, "--fixedbufs=1"));
	EXPECT_TRUE(has(b, "--registerfiles=1"));
	// libaio has neither knob.
	k.engine = "libaio";
	k.fixedbufs = true;
	auto c = fio_argv("fio", cfg, k, "o");
	EXPECT_TRUE(has(c, "--ioengine=libaio"));
	EXPECT_FALSE(has(c, "--fixedbufs=1"));
	EXPECT_FALSE(has(c, "--registerfiles=1"));
	k.numjobs = 2;
	EXPECT_THROW(fio_argv("fio", cfg, k, "o"), std::invalid_argument);
}

TEST(FioArgv, replay_gives_each_job_its_log)
{
	FioConfig cfg;
	cfg.replays[1] = {{"/t/all.log"}, 1 << 20, 8};
	cfg.replays[2] = {{"/t/j0.log", "/t/j1.log"}, 1 << 20, 8};
	FioKnobs k;
	k.engine = "libaio";
	k.iodepth = 16;
	k.numjobs = 2;
	auto a = fio_argv("fio", cfg, k, "o");
	EXPECT_TRUE(has(a, "--iodepth=16"));
	EXPECT_TRUE(has(a, "--group_reporting"));
	EXPECT_FALSE(has(a, "--rw=read"));
	auto n0 = std::find(a.begin(), a.end(), "--name=kvblk-replay0");
	auto n1 = std::find(a.begin(), a.end(), "--name=kvblk-replay1");
	ASSERT_NE(n0, a.end());
	ASSERT_NE(n1, a.end());
	EXPECT_EQ(*(n0 + 1), "--read_iolog=/t/j0.log");
	EXPECT_EQ(*(n1 + 1), "--read_iolog=/t/j1.log");
	// Global options come before the first job.
	EXPECT_LT(std::find(a.begin(), a.end(), "--iodepth=16"), n0);
	k.numjobs = 4;
	EXPECT_THROW(fio_argv("fio", cfg, k, "o"), std::invalid_argument);
}

TEST(FioArgv, spread_point_uses_the_object_per_job_logs)
{
	FioConfig cfg;
	cfg.replays[2] = {{"/t/j0.log", "/t/j1.log"}, 1 << 20, 8};
	cfg.spread_replays[2] = {{"/t/o0.log", "/t/o1.log"}, 1 << 20, 8};
	FioKnobs k;
	k.numjobs = 2;
	k.spread = true;
	auto a = fio_argv("fio", cfg, k, "o");
	EXPECT_TRUE(has(a, "--read_iolog=/t/o0.log"));
	EXPECT_TRUE(has(a, "--read_iolog=/t/o1.log"));
	EXPECT_FALSE(has(a, "--read_iolog=/t/j0.log"));
	k.spread = false;
	a = fio_argv("fio", cfg, k, "o");
	EXPECT_TRUE(has(a, "--read_iolog=/t/j0.log"));
	EXPECT_FALSE(has(a, "--read_iolog=/t/o0.log"));
	// No spread logs for 4 jobs: refused, not run with the wrong logs.
	cfg.replays[4] = {{"/a", "/b", "/c", "/d"}, 1 << 20, 8};
	k.numjobs = 4;
	k.spread = true;
	EXPECT_THROW(fio_argv("fio", cfg, k, "o"), std::invalid_argument);
	// Spread logs alone are replay mode too.
	FioConfig only;
	only.spread_replays[2] = cfg.spread_replays[2];
	k.numjobs = 2;
	a = fio_argv("fio", only, k, "o");
	EXPECT_TRUE(has(a, "--read_iolog=/t/o1.log"));
	EXPECT_FALSE(has(a, "--rw=read"));
}

TEST(FioArgv, lean_point_submits_together_and_reduces_clock_reads)
{
	FioConfig cfg;
	cfg.replays[1] = {{"/t/all.log"}, 1 << 20, 8};
	FioKnobs k;
	k.iodepth = 64;
	auto a = fio_argv("fio", cfg, k, "o");
	EXPECT_FALSE(has(a, "--gtod_reduce=1"));
	EXPECT_FALSE(has(a, "--iodepth_batch_submit=64"));
	k.lean = true;
	a = fio_argv("fio", cfg, k, "o");
	EXPECT_TRUE(has(a, "--iodepth_batch_submit=64"));
	EXPECT_TRUE(has(a, "--iodepth_batch_complete_max=64"));
	EXPECT_TRUE(has(a, "--gtod_reduce=1"));
	k.iodepth = 2;
	a = fio_argv("fio", cfg, k, "o");
	EXPECT_TRUE(has(a, "--iodepth_batch_submit=2"));
	EXPECT_TRUE(has(a, "--iodepth_batch_complete_max=2"));
}

TEST(FioKnobs, names_and_in_flight)
{
	FioKnobs k;
	k.iodepth = 32;
	EXPECT_EQ(k.name(), "io_uring QD 32");
	k.numjobs = 2;
	k.fixedbufs = k.registerfiles = true;
	EXPECT_EQ(k.name(), "io_uring QD 32 x 2 jobs, fixedbufs, registerfiles");
	EXPECT_EQ(k.in_flight(), 64u);
	FioKnobs s = k;
	s.spread = true;
	EXPECT_EQ(s.name(), "io_uring QD 32 x 2 jobs, a job per object, fixedbufs, registerfiles");
	EXPECT_NE(s, k);
	FioKnobs l = k;
	l.lean = true;
	EXPECT_EQ(l.name(), "io_uring QD 32 x 2 jobs, fixedbufs, registerfiles, lean");
	EXPECT_NE(l, k);
	FioKnobs h = l;
	h.hugepages = true;
	EXPECT_EQ(h.name(), "io_uring QD 32 x 2 jobs, fixedbufs, registerfiles, lean, huge pages");
	EXPECT_NE(h, l);
}

TEST(FioArgv, huge_page_point_maps_its_buffers_from_hugetlb)
{
	FioConfig cfg;
	cfg.replays[1] = {{"/t/all.log"}, 1 << 20, 8};
	FioKnobs k;
	k.engine = "libaio";
	k.iodepth = 16;
	EXPECT_FALSE(has(fio_argv("fio", cfg, k, "o"), "--iomem=mmaphuge"));
	k.hugepages = true;
	const auto a = fio_argv("fio", cfg, k, "o");
	EXPECT_TRUE(has(a, "--iomem=mmaphuge"));
	EXPECT_EQ(std::count_if(a.begin(), a.end(), [](const std::string &x) { return x.rfind("--iomem", 0) == 0; }), 1);
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

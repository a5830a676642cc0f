// SPDX-License-Identifier: MIT
//
// kvblkctl trace: the tracefs text parser and the trace model, fed captured
// lines (Linux 6.1's trace_pipe format, and the older flags column).
#include "trace_model.hpp"
#include "trace_parse.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace kvblkctl;

namespace {

TraceEvent parse_ok(const std::string &line)
{
	TraceEvent ev;
	std::string err;
	EXPECT_EQ(parse_trace_line(line, ev, nullptr, &err), ParseResult::event) << line << ": " << err;
	return ev;
}

std::vector<TraceEvent> parse_all(const std::vector<std::string> &lines)
{
	std::vector<TraceEvent> out;
	for (const auto &l : lines)
		out.push_back(parse_ok(l));
	return out;
}

} // namespace

TEST(TraceParse, batch_start)
{
	TraceEvent e = parse_ok("      kmod_smoke-245     [001] .....    35.123456: kvblk_batch_start: "
				"dev=259:0 batch=3 descs=4 cmds=17 bytes=2162688");
	EXPECT_EQ(e.kind, TraceKind::batch_start);
	EXPECT_EQ(e.task, "kmod_smoke");
	EXPECT_EQ(e.pid, 245);
	EXPECT_EQ(e.cpu, 1);
	EXPECT_EQ(e.ts_ns, 35123456000ull);
	EXPECT_EQ(e.dev_major, 259u);
	EXPECT_EQ(e.dev_minor, 0u);
	EXPECT_EQ(e.batch, 3u);
	EXPECT_EQ(e.descs, 4u);
	EXPECT_EQ(e.cmds, 17u);
	EXPECT_EQ(e.bytes, 2162688u);
}

TEST(TraceParse, batch_end_negative_ret)
{
	TraceEvent e = parse_ok("      kmod_smoke-245     [000] d..1.    35.200001: kvblk_batch_end: "
				"dev=259:0 batch=3 descs=4 ok=3 cmds=17 elapsed_ns=76545 ret=-5");
	EXPECT_EQ(e.kind, TraceKind::batch_end);
	EXPECT_EQ(e.cpu, 0);
	EXPECT_EQ(e.ok, 3u);
	EXPECT_EQ(e.elapsed_ns, 76545u);
	EXPECT_EQ(e.ret, -5);
}

TEST(TraceParse, cmd_submit_hex_tag_and_dashed_task)
{
	// comm may hold '-' and spaces; the pid is after the last '-'.
	TraceEvent e = parse_ok("  kv loader-thr-1-7781  [003] ....  1234.000010: kvblk_cmd_submit: "
				"dev=259:1 batch=18446744073709551615 tag=0xffffffffffffffff obj=4294967295 "
				"slba=123456789 bytes=131072 hwq=2");
	EXPECT_EQ(e.kind, TraceKind::cmd_submit);
	EXPECT_EQ(e.task, "kv loader-thr-1");
	EXPECT_EQ(e.pid, 7781);
	EXPECT_EQ(e.cpu, 3);
	EXPECT_EQ(e.ts_ns, 1234000010000ull);
	EXPECT_EQ(e.dev_minor, 1u);
	EXPECT_EQ(e.batch, UINT64_MAX);
	EXPECT_EQ(e.tag, UINT64_MAX);
	EXPECT_EQ(e.obj, UINT32_MAX);
	EXPECT_EQ(e.slba, 123456789u);
	EXPECT_EQ(e.cmd_bytes, 131072u);
	EXPECT_EQ(e.hwq, 2u);
}

TEST(TraceParse, cmd_complete_in_irq_context_ns_clock)
{
	TraceEvent e = parse_ok("          <idle>-0       [001] d.h1.    36.000000123: kvblk_cmd_complete: "
				"dev=259:0 batch=3 tag=0x2a obj=1 slba=8 bytes=4096 hwq=1 status=-5 lat_ns=91000");
	EXPECT_EQ(e.kind, TraceKind::cmd_complete);
	EXPECT_EQ(e.task, "<idle>");
	EXPECT_EQ(e.pid, 0);
	EXPECT_EQ(e.ts_ns, 36000000123ull);
	EXPECT_EQ(e.tag, 0x2au);
	EXPECT_EQ(e.cmd_bytes, 4096u);
	EXPECT_EQ(e.status, -5);
	EXPECT_EQ(e.lat_ns, 91000u);
}

TEST(TraceParse, other_lines_lost_and_errors)
{
	TraceEvent e;
	std::uint64_t lost = 0;
	std::string err;
	EXPECT_EQ(parse_trace_line("", e, &lost, &err), ParseResult::other);
	EXPECT_EQ(parse_trace_line("# tracer: nop", e, &lost, &err), ParseResult::other);
	EXPECT_EQ(parse_trace_line("#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION", e, &lost, &err),
		  ParseResult::other);
	EXPECT_EQ(parse_trace_line("  bash-1 [000] ..... 1.000000: sched_switch: prev_comm=bash", e, &lost, &err),
		  ParseResult::other);
	EXPECT_EQ(parse_trace_line("CPU:1 [LOST 12 EVENTS]", e, &lost, &err), ParseResult::lost);
	EXPECT_EQ(parse_trace_line("CPU:0 [LOST 3 EVENTS]", e, &lost, &err), ParseResult::lost);
	EXPECT_EQ(lost, 15u);
	EXPECT_EQ(parse_trace_line("  x-1 [000] ..... 1.000000: kvblk_cmd_submit: dev=259:0 batch=1 tag=zz", e, &lost,
				   &err),
		  ParseResult::error);
	EXPECT_EQ(err, "kvblk_cmd_submit: bad value in 'tag=zz'");
	EXPECT_EQ(parse_trace_line("  x-1 [000] ..... 1.000000: kvblk_cmd_submit: tag=0x1", e, &lost, &err),
		  ParseResult::error);
	EXPECT_EQ(err, "kvblk_cmd_submit: no dev= or batch= field");
	EXPECT_EQ(parse_trace_line("  x-1 [000] ..... 1.00000x: kvblk_batch_start: dev=1:2 batch=1", e, &lost, &err),
		  ParseResult::error);
	EXPECT_EQ(parse_trace_line("  x-1 ..... 1.000000: kvblk_batch_start: dev=1:2 batch=1", e, &lost, &err),
		  ParseResult::error);
	EXPECT_EQ(err, "kvblk_batch_start: no [cpu] column");
	// A future kvblk event, or an unknown key of a known one, is not an error.
	EXPECT_EQ(parse_trace_line("  x-1 [000] ..... 1.000000: kvblk_new_thing: dev=1:2", e, &lost, &err),
		  ParseResult::other);
	EXPECT_EQ(parse_trace_line("  x-1 [000] ..... 1.000000: kvblk_batch_start: dev=1:2 batch=1 future=7\r", e,
				   &lost, &err),
		  ParseResult::event);
}

TEST(TracePercentiles, nearest_rank)
{
	Percentiles p = percentiles({ 5, 1, 4, 2, 3, 6, 7, 8, 9, 10 });
	EXPECT_EQ(p.count, 10u);
	EXPECT_EQ(p.min, 1);
	EXPECT_EQ(p.p50, 5);
	EXPECT_EQ(p.p90, 9);
	EXPECT_EQ(p.p99, 10);
	EXPECT_EQ(p.max, 10);
	EXPECT_DOUBLE_EQ(p.mean, 5.5);
	EXPECT_EQ(percentiles({}).count, 0u);
}

namespace {

// One batch of two objects: tag 0xa in two commands on hwq 0 (in flight
// together), tag 0xb in one command on hwq 1. Times in us from 10 s.
const std::vector<std::string> kBatch = {
	"  app-50 [000] ..... 10.000000: kvblk_batch_start: dev=259:0 batch=7 descs=2 cmds=3 bytes=12288",
	"  app-50 [000] ..... 10.000010: kvblk_cmd_submit: dev=259:0 batch=7 tag=0xa obj=0 slba=0 bytes=4096 hwq=0",
	"  app-50 [000] ..... 10.000015: kvblk_cmd_submit: dev=259:0 batch=7 tag=0xa obj=0 slba=1 bytes=4096 hwq=0",
	"  app-50 [000] ..... 10.000030: kvblk_cmd_submit: dev=259:0 batch=7 tag=0xb obj=1 slba=8 bytes=4096 hwq=1",
	"  <idle>-0 [001] d.h1. 10.000110: kvblk_cmd_complete: dev=259:0 batch=7 tag=0xa obj=0 slba=1 bytes=4096 hwq=0 status=0 lat_ns=95000",
	"  <idle>-0 [001] d.h1. 10.000130: kvblk_cmd_complete: dev=259:0 batch=7 tag=0xb obj=1 slba=8 bytes=4096 hwq=1 status=0 lat_ns=100000",
	"  <idle>-0 [001] d.h1. 10.000210: kvblk_cmd_complete: dev=259:0 batch=7 tag=0xa obj=0 slba=0 bytes=4096 hwq=0 status=0 lat_ns=200000",
	"  app-50 [000] ..... 10.000220: kvblk_batch_end: dev=259:0 batch=7 descs=2 ok=2 cmds=3 elapsed_ns=220000 ret=2",
};

std::vector<const nlohmann::ordered_json *> of_cat(const nlohmann::ordered_json &doc, const std::string &cat)
{
	std::vector<const nlohmann::ordered_json *> v;
	for (const auto &e : doc["traceEvents"])
		if (e.value("cat", "") == cat)
			v.push_back(&e);
	return v;
}

} // namespace

TEST(TraceModel, summary_of_one_batch)
{
	nlohmann::ordered_json doc;
	TraceSummary s;
	build_trace(parse_all(kBatch), 0, doc, s);
	EXPECT_EQ(s.events, 8u);
	EXPECT_EQ(s.batches, 1u);
	EXPECT_EQ(s.objects, 2u);
	EXPECT_EQ(s.commands, 3u);
	EXPECT_EQ(s.completions, 3u);
	EXPECT_EQ(s.bytes, 12288u);
	EXPECT_EQ(s.unmatched_completions, 0u);
	EXPECT_EQ(s.incomplete_commands, 0u);
	EXPECT_EQ(s.tag_mismatches, 0u);
	EXPECT_EQ(s.cmds_per_object_min, 1u);
	EXPECT_EQ(s.cmds_per_object_max, 2u);
	EXPECT_DOUBLE_EQ(s.cmds_per_object_mean, 1.5);
	EXPECT_DOUBLE_EQ(s.duration_us, 220);
	// Objects: 0xa 10..210, 0xb 30..130: 2 in flight 30..130 of busy 10..210.
	EXPECT_EQ(s.objects_in_flight_max, 2u);
	EXPECT_NEAR(s.objects_in_flight_mean, (20 * 1 + 100 * 2 + 80 * 1) / 200.0, 1e-9);
	EXPECT_EQ(s.commands_in_flight_max, 3u);
	// Submission gaps 5 and 15 us; device times 95, 100, 200 us.
	EXPECT_EQ(s.submit_gap_us.count, 2u);
	EXPECT_NEAR(s.submit_gap_us.min, 5, 1e-9);
	EXPECT_NEAR(s.submit_gap_us.max, 15, 1e-9);
	EXPECT_EQ(s.device_time_us.count, 3u);
	EXPECT_NEAR(s.device_time_us.p50, 100, 1e-9);
	EXPECT_NEAR(s.device_time_us.max, 200, 1e-9);
	ASSERT_EQ(s.in_flight_over_time.size(), 20u);
	EXPECT_NEAR(s.in_flight_over_time.front().start_us, 10, 1e-9);
	EXPECT_NEAR(s.in_flight_over_time.back().end_us, 210, 1e-9);
	EXPECT_EQ(s.in_flight_over_time.front().objects_max, 1u);	// 10..20 us
	EXPECT_EQ(s.in_flight_over_time[5].objects_max, 2u);		// 60..70 us
	EXPECT_NEAR(s.in_flight_over_time[5].objects_mean, 2, 1e-9);
	auto j = summary_json(s);
	EXPECT_EQ(j["commands"], 3);
	EXPECT_EQ(j["objects_in_flight"]["max"], 2);
}

TEST(TraceModel, chrome_json_slices_tracks_and_counter)
{
	nlohmann::ordered_json doc;
	TraceSummary s;
	build_trace(parse_all(kBatch), 0, doc, s);
	EXPECT_EQ(doc["displayTimeUnit"], "ns");
	EXPECT_EQ(doc["otherData"]["producer"], "kvblkctl trace");

	auto batches = of_cat(doc, "batch");
	ASSERT_EQ(batches.size(), 1u);
	EXPECT_EQ((*batches[0])["ph"], "X");
	EXPECT_EQ((*batches[0])["name"], "batch 7");
	EXPECT_EQ((*batches[0])["ts"], 0.0);
	EXPECT_EQ((*batches[0])["dur"], 220.0);
	EXPECT_EQ((*batches[0])["tid"], 50);
	EXPECT_EQ((*batches[0])["args"]["ok"], 2);

	auto objects = of_cat(doc, "object");
	ASSERT_EQ(objects.size(), 2u);
	std::map<std::string, std::string> obj_tag; // "batch/obj" -> tag
	for (auto *o : objects)
		obj_tag[std::to_string((*o)["args"]["batch"].get<int>()) + "/" +
			std::to_string((*o)["args"]["obj"].get<int>())] = (*o)["args"]["tag"];
	EXPECT_EQ(obj_tag["7/0"], "0xa");
	EXPECT_EQ(obj_tag["7/1"], "0xb");
	EXPECT_EQ((*objects[0])["name"], "tag 0xa");
	EXPECT_EQ((*objects[0])["ts"], 10.0);
	EXPECT_EQ((*objects[0])["dur"], 200.0);
	EXPECT_EQ((*objects[0])["args"]["commands"], 2);

	// Every command carries its object's tag; the two overlapping commands
	// on hwq 0 sit on two lanes, hwq 1 on a third track.
	auto cmds = of_cat(doc, "command");
	ASSERT_EQ(cmds.size(), 3u);
	std::set<int> tids;
	for (auto *c : cmds) {
		const auto &a = (*c)["args"];
		EXPECT_EQ(a["tag"], obj_tag[std::to_string(a["batch"].get<int>()) + "/" + std::to_string(a["obj"].get<int>())]);
		EXPECT_EQ((*c)["pid"], 3);
		tids.insert((*c)["tid"].get<int>());
	}
	EXPECT_EQ(tids.size(), 3u);
	std::map<int, std::string> names; // pid 3 thread names
	for (const auto &e : doc["traceEvents"])
		if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 3)
			names[e["tid"].get<int>()] = e["args"]["name"];
	std::set<std::string> want = { "hwq 0", "hwq 0 #2", "hwq 1" }, got;
	for (auto &[t, n] : names)
		got.insert(n);
	EXPECT_EQ(got, want);
	EXPECT_EQ((*cmds[0])["args"]["slba"], 0);
	EXPECT_EQ((*cmds[0])["args"]["lat_ns"], 200000);
	EXPECT_EQ((*cmds[0])["dur"], 200.0);

	// Counter: the last sample is 0 commands, 0 objects; the peak 3 commands.
	std::vector<const nlohmann::ordered_json *> counters;
	int peak = 0;
	for (const auto &e : doc["traceEvents"])
		if (e["ph"] == "C") {
			counters.push_back(&e);
			peak = std::max(peak, e["args"]["commands"].get<int>());
		}
	ASSERT_FALSE(counters.empty());
	EXPECT_EQ(peak, 3);
	EXPECT_EQ((*counters.back())["args"]["commands"], 0);
	EXPECT_EQ((*counters.back())["args"]["objects"], 0);
	EXPECT_EQ((*counters.back())["ts"], 210.0);
}

TEST(TraceModel, unmatched_incomplete_and_mismatched_tags)
{
	std::vector<std::string> lines = {
		"  a-1 [000] ..... 1.000000: kvblk_cmd_submit: dev=259:0 batch=1 tag=0x1 obj=0 slba=0 bytes=4096 hwq=0",
		"  a-1 [000] ..... 1.000001: kvblk_cmd_submit: dev=259:0 batch=1 tag=0x2 obj=0 slba=1 bytes=4096 hwq=0",
		"  a-1 [000] ..... 1.000002: kvblk_cmd_submit: dev=259:0 batch=1 tag=0x1 obj=1 slba=9 bytes=4096 hwq=0",
		"  a-1 [000] ..... 1.000010: kvblk_cmd_complete: dev=259:0 batch=1 tag=0x3 obj=0 slba=0 bytes=4096 hwq=0 status=0 lat_ns=1",
		"  a-1 [000] ..... 1.000011: kvblk_cmd_complete: dev=259:0 batch=1 tag=0x2 obj=0 slba=1 bytes=4096 hwq=0 status=-5 lat_ns=1",
		"  a-1 [000] ..... 1.000012: kvblk_cmd_complete: dev=259:0 batch=2 tag=0x1 obj=0 slba=0 bytes=4096 hwq=0 status=0 lat_ns=1",
	};
	nlohmann::ordered_json doc;
	TraceSummary s;
	build_trace(parse_all(lines), 4, doc, s);
	EXPECT_EQ(s.lost_events, 4u);
	EXPECT_EQ(s.commands, 3u);
	EXPECT_EQ(s.unmatched_completions, 1u);	// batch 2 was never submitted
	EXPECT_EQ(s.incomplete_commands, 1u);	// obj 1
	EXPECT_EQ(s.tag_mismatches, 2u);	// obj 0's second command 0x2, a completion 0x3
	EXPECT_EQ(s.failed_commands, 1u);
	EXPECT_EQ(doc["otherData"]["lost_events"], 4);
	EXPECT_EQ(of_cat(doc, "command").size(), 2u);
}

TEST(TraceModel, empty_trace)
{
	nlohmann::ordered_json doc;
	TraceSummary s;
	build_trace({}, 0, doc, s);
	EXPECT_EQ(s.commands, 0u);
	EXPECT_TRUE(s.in_flight_over_time.empty());
	EXPECT_TRUE(doc["traceEvents"].is_array());
}

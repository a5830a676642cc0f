// SPDX-License-Identifier: MIT
/*
 * trace_model.cpp - kvblk trace events to Chrome JSON and a summary.
 * See trace_model.hpp for the layout of the timeline.
 */
#include "trace_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <tuple>

namespace kvblkctl {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kPidBatches = 1, kPidObjects = 2, kPidCommands = 3;
constexpr size_t kBins = 20;

std::string hex(std::uint64_t v)
{
	char buf[24];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

std::string dev_name(std::uint32_t major, std::uint32_t minor)
{
	return std::to_string(major) + ":" + std::to_string(minor);
}

/* A command event's target, engine and direction, where kvblk.ko traced them. */
void add_engine_args(Json &args, const TraceEvent &e)
{
	if (e.has_tgt)
		args["tgt"] = e.tgt;
	if (!e.engine.empty())
		args["engine"] = e.engine;
	if (!e.dir.empty())
		args["dir"] = e.dir;
}

struct Batch {
	std::uint64_t start = 0, end = 0;
	bool has_start = false, has_end = false;
	const TraceEvent *start_ev = nullptr, *end_ev = nullptr;
};

struct Object {
	std::uint64_t tag = 0;
	std::uint64_t first_submit = 0, last_complete = 0;
	bool completed = false;
	std::uint64_t cmds = 0;
	std::uint32_t dev_major = 0, dev_minor = 0;
	std::uint64_t batch = 0;
	std::uint32_t obj = 0;
	const TraceEvent *first = nullptr;	/* its first submission */
};

struct Command {
	const TraceEvent *submit = nullptr, *complete = nullptr;
};

/* (dev, batch, obj): unique per object; + slba: per command. */
using ObjKey = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>;
using CmdKey = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t, std::uint64_t>;

std::uint64_t dev_key(const TraceEvent &e)
{
	return (std::uint64_t(e.dev_major) << 32) | e.dev_minor;
}

/* Tracks of one process, with lanes so that slices on a track never overlap. */
class Lanes {
public:
	Lanes(int pid, Json &events) : pid_(pid), events_(events) {}

	/* tid for a slice [start, end] of @key, named @name (lane 2+: "name #n"). */
	int place(const std::string &key, const std::string &name, std::uint64_t start, std::uint64_t end)
	{
		auto &lanes = by_key_[key];
		for (auto &l : lanes) {
			if (l.end <= start) {
				l.end = end;
				return l.tid;
			}
		}
		Lane l{ ++next_tid_, end };
		std::string n = lanes.empty() ? name : name + " #" + std::to_string(lanes.size() + 1);
		events_.push_back({ { "ph", "M" }, { "name", "thread_name" }, { "pid", pid_ }, { "tid", l.tid },
				    { "args", { { "name", n } } } });
		events_.push_back({ { "ph", "M" }, { "name", "thread_sort_index" }, { "pid", pid_ },
				    { "tid", l.tid }, { "args", { { "sort_index", l.tid } } } });
		lanes.push_back(l);
		return l.tid;
	}

private:
	struct Lane {
		int tid;
		std::uint64_t end;
	};
	int pid_;
	Json &events_;
	int next_tid_ = 0;
	std::map<std::string, std::vector<Lane>> by_key_;
};

double us(std::uint64_t ns, std::uint64_t t0)
{
	return double(ns - t0) / 1e3;
}

void process_meta(Json &events, int pid, const char *name)
{
	events.push_back({ { "ph", "M" }, { "name", "process_name" }, { "pid", pid }, { "tid", 0 },
			   { "args", { { "name", name } } } });
	events.push_back({ { "ph", "M" }, { "name", "process_sort_index" }, { "pid", pid }, { "tid", 0 },
			   { "args", { { "sort_index", pid } } } });
}

Json pct_json(const Percentiles &p)
{
	return Json{ { "count", p.count }, { "min", p.min }, { "p50", p.p50 }, { "p90", p.p90 },
		     { "p99", p.p99 },	   { "max", p.max }, { "mean", p.mean } };
}

} // namespace

Percentiles percentiles(std::vector<double> v)
{
	Percentiles p;
	if (v.empty())
		return p;
	std::sort(v.begin(), v.end());
	auto rank = [&](double q) {
		size_t i = size_t(std::ceil(q / 100.0 * double(v.size())));
		return v[std::min(v.size() - 1, i ? i - 1 : 0)];
	};
	double sum = 0;
	for (double x : v)
		sum += x;
	p.count = v.size();
	p.min = v.front();
	p.max = v.back();
	p.p50 = rank(50);
	p.p90 = rank(90);
	p.p99 = rank(99);
	p.mean = sum / double(v.size());
	return p;
}

void build_trace(const std::vector<TraceEvent> &in, std::uint64_t lost_events, Json &chrome, TraceSummary &s)
{
	s = TraceSummary{};
	s.events = in.size();
	s.lost_events = lost_events;

	std::vector<const TraceEvent *> evs;
	evs.reserve(in.size());
	for (const auto &e : in)
		evs.push_back(&e);
	std::stable_sort(evs.begin(), evs.end(),
			 [](const TraceEvent *a, const TraceEvent *b) { return a->ts_ns < b->ts_ns; });
	const std::uint64_t t0 = evs.empty() ? 0 : evs.front()->ts_ns;
	const std::uint64_t t_last = evs.empty() ? 0 : evs.back()->ts_ns;
	s.duration_us = us(t_last, t0);

	std::map<std::pair<std::uint64_t, std::uint64_t>, Batch> batches;
	std::vector<std::pair<std::uint64_t, std::uint64_t>> batch_order;
	std::map<ObjKey, Object> objects;
	std::vector<ObjKey> object_order;
	std::map<CmdKey, std::deque<size_t>> pending;
	std::vector<Command> commands;
	std::map<std::uint64_t, std::uint64_t> last_submit;
	std::vector<double> gaps, dev_times;
	std::map<std::uint64_t, std::string> dev_names;

	for (const TraceEvent *e : evs) {
		dev_names[dev_key(*e)] = dev_name(e->dev_major, e->dev_minor);
		switch (e->kind) {
		case TraceKind::batch_start:
		case TraceKind::batch_end: {
			auto key = std::make_pair(dev_key(*e), e->batch);
			auto [it, fresh] = batches.try_emplace(key);
			if (fresh)
				batch_order.push_back(key);
			Batch &b = it->second;
			if (e->kind == TraceKind::batch_start) {
				b.has_start = true;
				b.start = e->ts_ns;
				b.start_ev = e;
			} else {
				b.has_end = true;
				b.end = e->ts_ns;
				b.end_ev = e;
			}
			break;
		}
		case TraceKind::cmd_submit: {
			s.commands++;
			s.bytes += e->cmd_bytes;
			ObjKey ok{ dev_key(*e), e->batch, e->obj };
			auto [it, fresh] = objects.try_emplace(ok);
			Object &o = it->second;
			if (fresh) {
				object_order.push_back(ok);
				o.tag = e->tag;
				o.first_submit = e->ts_ns;
				o.dev_major = e->dev_major;
				o.dev_minor = e->dev_minor;
				o.batch = e->batch;
				o.obj = e->obj;
				o.first = e;
			} else if (e->tag != o.tag) {
				s.tag_mismatches++;
			}
			o.cmds++;
			auto ls = last_submit.find(dev_key(*e));
			if (ls != last_submit.end())
				gaps.push_back(double(e->ts_ns - ls->second) / 1e3);
			last_submit[dev_key(*e)] = e->ts_ns;
			pending[CmdKey{ dev_key(*e), e->batch, e->obj, e->slba }].push_back(commands.size());
			commands.push_back(Command{ e, nullptr });
			break;
		}
		case TraceKind::cmd_complete: {
			s.completions++;
			auto pit = pending.find(CmdKey{ dev_key(*e), e->batch, e->obj, e->slba });
			if (pit == pending.end() || pit->second.empty()) {
				s.unmatched_completions++;
				break;
			}
			Command &c = commands[pit->second.front()];
			pit->second.pop_front();
			c.complete = e;
			if (e->tag != c.submit->tag)
				s.tag_mismatches++;
			if (e->status != 0)
				s.failed_commands++;
			dev_times.push_back(double(e->lat_ns) / 1e3);
			Object &o = objects[ObjKey{ dev_key(*e), e->batch, e->obj }];
			o.last_complete = std::max(o.last_complete, e->ts_ns);
			o.completed = true;
			break;
		}
		}
	}
	for (const auto &c : commands)
		if (!c.complete)
			s.incomplete_commands++;
	s.batches = batches.size();
	s.objects = objects.size();
	s.submit_gap_us = percentiles(gaps);
	s.device_time_us = percentiles(dev_times);
	if (!objects.empty()) {
		s.cmds_per_object_min = UINT64_MAX;
		for (const auto &[k, o] : objects) {
			s.cmds_per_object_min = std::min(s.cmds_per_object_min, o.cmds);
			s.cmds_per_object_max = std::max(s.cmds_per_object_max, o.cmds);
		}
		s.cmds_per_object_mean = double(s.commands) / double(objects.size());
	}
	const bool many_devs = dev_names.size() > 1;

	Json events = Json::array();
	process_meta(events, kPidBatches, "kvblk batches");
	process_meta(events, kPidObjects, "kvblk objects (one track per tag)");
	process_meta(events, kPidCommands, "NVMe commands (per hardware queue)");

	/* Batches, on the caller's task track. */
	std::map<int, bool> batch_tids;
	for (const auto &key : batch_order) {
		const Batch &b = batches[key];
		const TraceEvent *ref = b.start_ev ? b.start_ev : b.end_ev;
		std::uint64_t start = b.has_start ? b.start : b.end - std::min(b.end - t0, b.end_ev->elapsed_ns);
		std::uint64_t end = b.has_end ? b.end : t_last;
		int tid = ref->pid;
		if (!batch_tids[tid]) {
			batch_tids[tid] = true;
			events.push_back({ { "ph", "M" }, { "name", "thread_name" }, { "pid", kPidBatches }, { "tid", tid },
					   { "args", { { "name", ref->task + "-" + std::to_string(tid) } } } });
		}
		Json args{ { "dev", dev_name(ref->dev_major, ref->dev_minor) }, { "batch", ref->batch } };
		if (!ref->dir.empty())
			args["dir"] = ref->dir;
		if (b.start_ev) {
			args["descs"] = b.start_ev->descs;
			args["cmds"] = b.start_ev->cmds;
			args["bytes"] = b.start_ev->bytes;
		}
		if (b.end_ev) {
			args["ok"] = b.end_ev->ok;
			args["ret"] = b.end_ev->ret;
			args["elapsed_ns"] = b.end_ev->elapsed_ns;
			if (!b.start_ev)
				args["descs"] = b.end_ev->descs;
			if (!b.end_ev->engines.empty())
				args["engines"] = b.end_ev->engines;
			if (b.end_ev->has_tgts)
				args["tgts"] = b.end_ev->tgts;
		}
		if (!b.has_start || !b.has_end)
			args["incomplete"] = true;
		events.push_back({ { "ph", "X" }, { "cat", "batch" }, { "name", "batch " + std::to_string(ref->batch) },
				   { "pid", kPidBatches }, { "tid", tid }, { "ts", us(start, t0) },
				   { "dur", us(end, t0) - us(start, t0) }, { "args", args } });
	}

	/* Objects, on per-tag tracks. */
	Lanes obj_lanes(kPidObjects, events);
	struct Step {
		std::uint64_t ts;
		int dobj, dcmd;
	};
	std::vector<Step> steps;
	for (const auto &key : object_order) {
		const Object &o = objects[key];
		if (!o.completed)
			continue;
		std::string name = "tag " + hex(o.tag);
		int tid = obj_lanes.place(hex(o.tag), name, o.first_submit, o.last_complete);
		Json args{ { "dev", dev_name(o.dev_major, o.dev_minor) },
			   { "batch", o.batch },
			   { "obj", o.obj },
			   { "tag", hex(o.tag) },
			   { "commands", o.cmds } };
		add_engine_args(args, *o.first);
		events.push_back({ { "ph", "X" }, { "cat", "object" }, { "name", name }, { "pid", kPidObjects },
				   { "tid", tid }, { "ts", us(o.first_submit, t0) },
				   { "dur", us(o.last_complete, t0) - us(o.first_submit, t0) }, { "args", args } });
		steps.push_back({ o.first_submit, 1, 0 });
		steps.push_back({ o.last_complete, -1, 0 });
	}

	/* Commands, on per-hardware-queue tracks. */
	Lanes cmd_lanes(kPidCommands, events);
	for (const auto &c : commands) {
		if (!c.complete)
			continue;
		const TraceEvent &sb = *c.submit, &cp = *c.complete;
		std::string q = (many_devs ? dev_name(sb.dev_major, sb.dev_minor) + " " : std::string()) + "hwq " +
				std::to_string(sb.hwq);
		int tid = cmd_lanes.place(q, q, sb.ts_ns, cp.ts_ns);
		Json args{ { "dev", dev_name(sb.dev_major, sb.dev_minor) },
			   { "batch", sb.batch },
			   { "obj", sb.obj },
			   { "tag", hex(cp.tag) },
			   { "slba", sb.slba },
			   { "bytes", sb.cmd_bytes },
			   { "hwq", sb.hwq },
			   { "status", cp.status },
			   { "lat_ns", cp.lat_ns } };
		add_engine_args(args, sb);
		events.push_back({ { "ph", "X" }, { "cat", "command" }, { "name", "tag " + hex(sb.tag) },
				   { "pid", kPidCommands }, { "tid", tid }, { "ts", us(sb.ts_ns, t0) },
				   { "dur", us(cp.ts_ns, t0) - us(sb.ts_ns, t0) }, { "args", args } });
		steps.push_back({ sb.ts_ns, 0, 1 });
		steps.push_back({ cp.ts_ns, 0, -1 });
	}

	/* In-flight counters: ends before starts at one instant. */
	std::stable_sort(steps.begin(), steps.end(), [](const Step &a, const Step &b) {
		if (a.ts != b.ts)
			return a.ts < b.ts;
		return (a.dobj + a.dcmd) < (b.dobj + b.dcmd);
	});
	struct Level {
		std::uint64_t ts;
		std::int64_t objs, cmds;
	};
	std::vector<Level> levels; /* value from ts to the next level's ts */
	std::int64_t objs = 0, cmds = 0;
	for (size_t i = 0; i < steps.size(); i++) {
		objs += steps[i].dobj;
		cmds += steps[i].dcmd;
		s.objects_in_flight_max = std::max<std::uint64_t>(s.objects_in_flight_max, std::uint64_t(objs));
		s.commands_in_flight_max = std::max<std::uint64_t>(s.commands_in_flight_max, std::uint64_t(cmds));
		if (i + 1 < steps.size() && steps[i + 1].ts == steps[i].ts)
			continue;
		levels.push_back({ steps[i].ts, objs, cmds });
		events.push_back({ { "ph", "C" }, { "name", "in flight" }, { "pid", kPidCommands }, { "tid", 0 },
				   { "ts", us(steps[i].ts, t0) }, { "args", { { "commands", cmds }, { "objects", objs } } } });
	}
	if (levels.size() >= 2) {
		const std::uint64_t b0 = levels.front().ts, b1 = levels.back().ts;
		double obj_area = 0, cmd_area = 0;
		for (size_t i = 0; i + 1 < levels.size(); i++) {
			double d = double(levels[i + 1].ts - levels[i].ts);
			obj_area += d * double(levels[i].objs);
			cmd_area += d * double(levels[i].cmds);
		}
		s.objects_in_flight_mean = obj_area / double(b1 - b0 ? b1 - b0 : 1);
		s.commands_in_flight_mean = cmd_area / double(b1 - b0 ? b1 - b0 : 1);
		/* Equal bins of the busy span: the step function's max and mean in each. */
		const double span = double(b1 - b0);
		const size_t nbins = span > 0 ? kBins : 1;
		size_t li = 0;
		for (size_t bi = 0; bi < nbins; bi++) {
			double lo = double(b0) + span * double(bi) / double(nbins);
			double hi = double(b0) + span * double(bi + 1) / double(nbins);
			TraceSummary::Bin bin{ (lo - double(t0)) / 1e3, (hi - double(t0)) / 1e3, 0, 0, 0 };
			while (li + 1 < levels.size() && double(levels[li + 1].ts) <= lo)
				li++;
			double area = 0;
			for (size_t j = li; j + 1 < levels.size() && double(levels[j].ts) < hi; j++) {
				double a = std::max(lo, double(levels[j].ts)), z = std::min(hi, double(levels[j + 1].ts));
				if (z > a)
					area += (z - a) * double(levels[j].objs);
				if (z > a || a == lo) {
					bin.objects_max = std::max<std::uint64_t>(bin.objects_max, std::uint64_t(levels[j].objs));
					bin.commands_max = std::max<std::uint64_t>(bin.commands_max, std::uint64_t(levels[j].cmds));
				}
			}
			bin.objects_mean = hi > lo ? area / (hi - lo) : 0;
			s.in_flight_over_time.push_back(bin);
		}
	}

	chrome = Json{ { "traceEvents", std::move(events) },
		       { "displayTimeUnit", "ns" },
		       { "otherData",
			 { { "producer", "kvblkctl trace" },
			   { "schema_version", 1 },
			   { "clock", "tracefs trace_clock (local), ts in us from the first event" },
			   { "lost_events", lost_events } } } };
}

Json summary_json(const TraceSummary &s)
{
	Json bins = Json::array();
	for (const auto &b : s.in_flight_over_time)
		bins.push_back({ { "start_us", b.start_us },
				 { "end_us", b.end_us },
				 { "objects_max", b.objects_max },
				 { "objects_mean", b.objects_mean },
				 { "commands_max", b.commands_max } });
	return Json{ { "events", s.events },
		     { "lost_events", s.lost_events },
		     { "duration_us", s.duration_us },
		     { "batches", s.batches },
		     { "objects", s.objects },
		     { "commands", s.commands },
		     { "completions", s.completions },
		     { "bytes", s.bytes },
		     { "unmatched_completions", s.unmatched_completions },
		     { "incomplete_commands", s.incomplete_commands },
		     { "tag_mismatches", s.tag_mismatches },
		     { "failed_commands", s.failed_commands },
		     { "commands_per_object",
		       { { "min", s.cmds_per_object_min },
			 { "mean", s.cmds_per_object_mean },
			 { "max", s.cmds_per_object_max } } },
		     { "objects_in_flight", { { "max", s.objects_in_flight_max }, { "mean", s.objects_in_flight_mean } } },
		     { "commands_in_flight",
		       { { "max", s.commands_in_flight_max }, { "mean", s.commands_in_flight_mean } } },
		     { "in_flight_over_time", bins },
		     { "submit_gap_us", pct_json(s.submit_gap_us) },
		     { "device_time_us", pct_json(s.device_time_us) } };
}

} // namespace kvblkctl

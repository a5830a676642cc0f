// SPDX-License-Identifier: MIT
/*
 * trace_model.hpp - from parsed kvblk trace events to a Chrome JSON trace
 * (loadable by Perfetto and chrome://tracing) and a summary. No I/O.
 *
 * Timeline (ts in microseconds from the first event):
 *  - pid 1 "kvblk batches": one slice per batch (kvblk_batch_start to
 *    kvblk_batch_end) on the calling task's track;
 *  - pid 2 "kvblk objects": one slice per object (first command submitted to
 *    last completed) on a track per tag ("tag 0x2a"; a second lane "tag 0x2a
 *    #2" only where two loads of one tag overlap);
 *  - pid 3 "NVMe commands": one slice per command (submit to complete) on
 *    per-hardware-queue tracks ("hwq 1", with lanes "hwq 1 #2", ... for the
 *    commands in flight together on that queue), and the counter track
 *    "in flight" with the series "commands" and "objects".
 * Object and command slices are named after the object's tag, so one
 * object's commands share its colour; args carry dev, batch, obj, tag (hex
 * string), slba, bytes, hwq, status and lat_ns.
 */
#pragma once

#include "trace_parse.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace kvblkctl {

struct Percentiles {
	std::uint64_t count = 0;
	double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

/** Percentiles of @v (nearest rank); all 0 when empty. */
Percentiles percentiles(std::vector<double> v);

struct TraceSummary {
	std::uint64_t events = 0, lost_events = 0;
	std::uint64_t batches = 0, objects = 0;
	std::uint64_t commands = 0;		/* kvblk_cmd_submit events */
	std::uint64_t completions = 0;		/* kvblk_cmd_complete events */
	std::uint64_t unmatched_completions = 0; /* no submission of that batch/obj/slba */
	std::uint64_t incomplete_commands = 0;	/* submitted, never completed in the trace */
	std::uint64_t tag_mismatches = 0;	/* command tag != its object's first tag */
	std::uint64_t failed_commands = 0;	/* status != 0 */
	std::uint64_t bytes = 0;		/* bytes of the submitted commands */
	double duration_us = 0;			/* first to last event */
	/* commands per object */
	std::uint64_t cmds_per_object_min = 0, cmds_per_object_max = 0;
	double cmds_per_object_mean = 0;
	/* objects in flight (first submit to last completion of each object) */
	std::uint64_t objects_in_flight_max = 0;
	double objects_in_flight_mean = 0;	/* time-weighted over the busy time */
	std::uint64_t commands_in_flight_max = 0;
	double commands_in_flight_mean = 0;
	struct Bin {
		double start_us, end_us;
		std::uint64_t objects_max, commands_max;
		double objects_mean;
	};
	std::vector<Bin> in_flight_over_time;	/* up to 20 equal bins of the busy span */
	Percentiles submit_gap_us;		/* between consecutive submissions (per device) */
	Percentiles device_time_us;		/* per command, the module's lat_ns */
};

/**
 * build_trace() - the Chrome JSON document ({"traceEvents": [...],
 * "displayTimeUnit": "ns", "otherData": {...}}) and the summary of @events
 * (in trace order).
 */
void build_trace(const std::vector<TraceEvent> &events, std::uint64_t lost_events,
		 nlohmann::ordered_json &chrome, TraceSummary &summary);

/** The summary as kvblkctl's -o json "summary" object. */
nlohmann::ordered_json summary_json(const TraceSummary &s);

} // namespace kvblkctl

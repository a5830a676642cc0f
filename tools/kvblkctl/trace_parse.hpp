// SPDX-License-Identifier: MIT
/*
 * trace_parse.hpp - parse tracefs text lines (trace, trace_pipe) of kvblk's
 * tracepoints (kmod/trace.h) into events; no I/O, so the host tests feed it
 * captured lines.
 *
 * A line looks like (the flags column differs between kernels):
 *   kmod_smoke-212  [001] d..1.  35.123456: kvblk_cmd_submit: dev=259:0 batch=3 dir=load tgt=0 engine=prp tag=0x2a obj=0 slba=8 bytes=131072 hwq=1
 * Fields are key=value in any order; keys this version does not know are
 * skipped, and dir, tgt, engine, engines and tgts are absent from the lines
 * of a kvblk.ko older than them.
 * The ring buffer's overflow notice "CPU:1 [LOST 12 EVENTS]" is reported as
 * lost events.
 */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvblkctl {

enum class TraceKind { batch_start, batch_end, cmd_submit, cmd_complete };

/** One kvblk tracepoint hit; fields not in its event stay 0. */
struct TraceEvent {
	TraceKind kind = TraceKind::batch_start;
	std::string task;	 /* comm of the task that hit it */
	int pid = 0;
	int cpu = 0;
	std::uint64_t ts_ns = 0; /* trace clock, nanoseconds */
	std::uint32_t dev_major = 0, dev_minor = 0;
	std::uint64_t batch = 0;
	/* batch_start, batch_end */
	std::uint32_t descs = 0;
	std::uint64_t cmds = 0;
	std::uint64_t bytes = 0;	/* batch_start: bytes of the batch */
	std::uint32_t ok = 0;		/* batch_end */
	std::uint64_t elapsed_ns = 0;	/* batch_end */
	int ret = 0;			/* batch_end */
	std::string dir;		/* "load" or "store"; empty when not traced */
	std::string engines;		/* batch_end: "prp|bio|file" as traced */
	std::uint32_t tgts = 0;		/* batch_end: targets named */
	bool has_tgts = false;
	/* cmd_submit, cmd_complete */
	std::uint64_t tag = 0;
	std::uint32_t obj = 0;
	std::uint64_t slba = 0;
	std::uint32_t cmd_bytes = 0;
	std::uint32_t hwq = 0;
	std::string engine;		/* "prp", "bio", "file"; empty when not traced */
	std::uint32_t tgt = 0;		/* the command's target */
	bool has_tgt = false;
	int status = 0;			/* cmd_complete */
	std::uint64_t lat_ns = 0;	/* cmd_complete */
};

enum class ParseResult {
	event,	/* @ev filled */
	other,	/* blank, comment, header, or another subsystem's event */
	lost,	/* "[LOST N EVENTS]": *lost += N */
	error,	/* a kvblk event line that does not parse: *err says why */
};

/** Name of a kind as in tracefs: "kvblk_batch_start", ... */
const char *trace_kind_name(TraceKind k);

/**
 * parse_trace_line() - one line of tracefs text, without its newline.
 * @line: the line.
 * @ev:   receives the event (ParseResult::event only).
 * @lost: incremented by N for a "[LOST N EVENTS]" line; may be NULL.
 * @err:  receives the reason for ParseResult::error; may be NULL.
 */
ParseResult parse_trace_line(std::string_view line, TraceEvent &ev, std::uint64_t *lost,
			     std::string *err);

} // namespace kvblkctl

// SPDX-License-Identifier: MIT
/*
 * trace_parse.cpp - tracefs text of kvblk's tracepoints to TraceEvent.
 * See trace_parse.hpp for the line format.
 */
#include "trace_parse.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace kvblkctl {

namespace {

struct KindName {
	TraceKind kind;
	std::string_view name;
};

constexpr KindName kKinds[] = {
	{ TraceKind::batch_start, "kvblk_batch_start" },
	{ TraceKind::batch_end, "kvblk_batch_end" },
	{ TraceKind::cmd_submit, "kvblk_cmd_submit" },
	{ TraceKind::cmd_complete, "kvblk_cmd_complete" },
};

std::string_view trim(std::string_view s)
{
	while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
		s.remove_prefix(1);
	while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
		s.remove_suffix(1);
	return s;
}

/* An unsigned number, decimal or 0x-hex; the whole of @s. */
bool parse_u64(std::string_view s, std::uint64_t &out)
{
	if (s.empty() || s.front() == '-' || s.front() == '+')
		return false;
	std::string t(s);
	char *end = nullptr;
	errno = 0;
	unsigned long long v = std::strtoull(t.c_str(), &end, 0);
	if (errno || end != t.c_str() + t.size())
		return false;
	out = v;
	return true;
}

bool parse_int(std::string_view s, int &out)
{
	if (s.empty())
		return false;
	std::string t(s);
	char *end = nullptr;
	errno = 0;
	long v = std::strtol(t.c_str(), &end, 10);
	if (errno || end != t.c_str() + t.size() || v < INT32_MIN || v > INT32_MAX)
		return false;
	out = static_cast<int>(v);
	return true;
}

template <typename T>
bool parse_uint(std::string_view s, T &out)
{
	std::uint64_t v;
	if (!parse_u64(s, v) || v > static_cast<std::uint64_t>(T(~T(0))))
		return false;
	out = static_cast<T>(v);
	return true;
}

/* "SECONDS.FRACTION" (6 digits for us clocks, 9 for ns) to nanoseconds. */
bool parse_timestamp(std::string_view s, std::uint64_t &ns)
{
	size_t dot = s.find('.');
	std::uint64_t sec, frac = 0;
	if (dot == std::string_view::npos)
		return parse_u64(s, sec) && (ns = sec * 1000000000ull, true);
	std::string_view fs = s.substr(dot + 1);
	if (fs.empty() || fs.size() > 9 || !parse_u64(s.substr(0, dot), sec))
		return false;
	for (char c : fs) {
		if (c < '0' || c > '9')
			return false;
		frac = frac * 10 + std::uint64_t(c - '0');
	}
	for (size_t i = fs.size(); i < 9; i++)
		frac *= 10;
	ns = sec * 1000000000ull + frac;
	return true;
}

/* An engine's name as kvblk.ko prints it: lower-case letters and digits. */
bool engine_word(std::string_view s)
{
	if (s.empty())
		return false;
	for (char c : s)
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			return false;
	return true;
}

/* "prp|bio": engine names joined by '|'. */
bool engine_list(std::string_view s)
{
	for (;;) {
		size_t bar = s.find('|');
		if (!engine_word(s.substr(0, bar)))
			return false;
		if (bar == std::string_view::npos)
			return true;
		s.remove_prefix(bar + 1);
	}
}

ParseResult bad(std::string *err, const std::string &why)
{
	if (err)
		*err = why;
	return ParseResult::error;
}

} // namespace

const char *trace_kind_name(TraceKind k)
{
	for (const auto &kn : kKinds)
		if (kn.kind == k)
			return kn.name.data();
	return "unknown";
}

ParseResult parse_trace_line(std::string_view line, TraceEvent &ev, std::uint64_t *lost, std::string *err)
{
	line = trim(line);
	if (line.empty() || line.front() == '#')
		return ParseResult::other;
	size_t lp = line.find("[LOST ");
	if (lp != std::string_view::npos && line.substr(0, 4) == "CPU:") {
		std::string_view rest = line.substr(lp + 6);
		size_t sp = rest.find(' ');
		std::uint64_t n;
		if (sp == std::string_view::npos || !parse_u64(rest.substr(0, sp), n))
			return bad(err, "malformed LOST line");
		if (lost)
			*lost += n;
		return ParseResult::lost;
	}

	/* "<task>-<pid> [<cpu>] <flags> <ts>: <event>: <fields>" */
	size_t ep = line.find(": kvblk_");
	if (ep == std::string_view::npos)
		return ParseResult::other;
	std::string_view after = line.substr(ep + 2);
	size_t colon = after.find(':');
	if (colon == std::string_view::npos)
		return ParseResult::other;
	std::string_view name = after.substr(0, colon);
	const KindName *kn = nullptr;
	for (const auto &k : kKinds)
		if (k.name == name)
			kn = &k;
	if (!kn)
		return ParseResult::other; /* a kvblk event this version does not know */
	std::string_view fields = after.substr(colon + 1);

	std::string_view head = trim(line.substr(0, ep));
	size_t tsp = head.find_last_of(" \t");
	if (tsp == std::string_view::npos)
		return bad(err, std::string(name) + ": no timestamp");
	TraceEvent e;
	e.kind = kn->kind;
	if (!parse_timestamp(head.substr(tsp + 1), e.ts_ns))
		return bad(err, std::string(name) + ": bad timestamp '" + std::string(head.substr(tsp + 1)) + "'");
	size_t lb = head.rfind('[');
	size_t rb = lb == std::string_view::npos ? lb : head.find(']', lb);
	if (rb == std::string_view::npos || !parse_int(head.substr(lb + 1, rb - lb - 1), e.cpu))
		return bad(err, std::string(name) + ": no [cpu] column");
	std::string_view taskpid = trim(head.substr(0, lb));
	size_t dash = taskpid.rfind('-');
	if (dash == std::string_view::npos || !parse_int(taskpid.substr(dash + 1), e.pid))
		return bad(err, std::string(name) + ": no task-pid column");
	e.task = std::string(taskpid.substr(0, dash));

	bool have_dev = false, have_batch = false;
	fields = trim(fields);
	while (!fields.empty()) {
		size_t sp = fields.find(' ');
		std::string_view kv = fields.substr(0, sp);
		fields = sp == std::string_view::npos ? std::string_view() : trim(fields.substr(sp));
		size_t eq = kv.find('=');
		if (eq == std::string_view::npos)
			return bad(err, std::string(name) + ": field '" + std::string(kv) + "' is not key=value");
		std::string_view k = kv.substr(0, eq), v = kv.substr(eq + 1);
		bool ok = true;
		if (k == "dev") {
			size_t c = v.find(':');
			ok = c != std::string_view::npos && parse_uint(v.substr(0, c), e.dev_major) &&
			     parse_uint(v.substr(c + 1), e.dev_minor);
			have_dev = ok;
		} else if (k == "batch") {
			ok = parse_u64(v, e.batch);
			have_batch = ok;
		} else if (k == "descs") {
			ok = parse_uint(v, e.descs);
		} else if (k == "cmds") {
			ok = parse_u64(v, e.cmds);
		} else if (k == "bytes") {
			if (e.kind == TraceKind::batch_start || e.kind == TraceKind::batch_end)
				ok = parse_u64(v, e.bytes);
			else
				ok = parse_uint(v, e.cmd_bytes);
		} else if (k == "ok") {
			ok = parse_uint(v, e.ok);
		} else if (k == "elapsed_ns") {
			ok = parse_u64(v, e.elapsed_ns);
		} else if (k == "ret") {
			ok = parse_int(v, e.ret);
		} else if (k == "tag") {
			ok = parse_u64(v, e.tag);
		} else if (k == "obj") {
			ok = parse_uint(v, e.obj);
		} else if (k == "slba") {
			ok = parse_u64(v, e.slba);
		} else if (k == "hwq") {
			ok = parse_uint(v, e.hwq);
		} else if (k == "status") {
			ok = parse_int(v, e.status);
		} else if (k == "lat_ns") {
			ok = parse_u64(v, e.lat_ns);
		} else if (k == "dir") {
			ok = v == "load" || v == "store";
			e.dir = std::string(v);
		} else if (k == "engine") {
			ok = engine_word(v);
			e.engine = std::string(v);
		} else if (k == "engines") {
			ok = engine_list(v);
			e.engines = std::string(v);
		} else if (k == "tgt") {
			ok = parse_uint(v, e.tgt);
			e.has_tgt = ok;
		} else if (k == "tgts") {
			ok = parse_uint(v, e.tgts);
			e.has_tgts = ok;
		} /* unknown keys: a newer module; ignored */
		if (!ok)
			return bad(err, std::string(name) + ": bad value in '" + std::string(kv) + "'");
	}
	if (!have_dev || !have_batch)
		return bad(err, std::string(name) + ": no dev= or batch= field");
	ev = std::move(e);
	return ParseResult::event;
}

} // namespace kvblkctl

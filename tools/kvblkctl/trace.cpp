// SPDX-License-Identifier: MIT
/*
 * trace.cpp - `kvblkctl trace`: record kvblk's tracepoints through tracefs
 * for N seconds or while a command runs, write a Chrome JSON trace
 * (trace_model.hpp) and print a summary.
 *
 * Recording uses a tracefs instance of its own (instances/kvblkctl-<pid>)
 * so that the global buffer and other users' instances are untouched; its
 * trace_pipe is drained by a thread while recording, so the ring buffer
 * only has to hold what arrives between two reads. The instance is removed
 * on every exit path, SIGINT/SIGTERM/SIGHUP included (they end the
 * recording early; the trace is still written).
 *
 * tracefs root: $KVBLK_TRACEFS (tests), else /sys/kernel/tracing, else
 * /sys/kernel/debug/tracing. --input converts tracefs text saved earlier
 * (`cat trace`, trace_pipe) without recording.
 */
#include "common.hpp"
#include "trace_model.hpp"
#include "trace_parse.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace kvblkctl {

namespace {

const char *const kCmd = "trace";

volatile std::sig_atomic_t g_signal = 0;

void on_signal(int sig)
{
	g_signal = sig;
}

bool dir_exists(const std::string &p)
{
	struct stat st;
	return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int write_file(const std::string &path, const std::string &text)
{
	int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = ::write(fd, text.data(), text.size());
	int ret = n < 0 ? -errno : (size_t(n) == text.size() ? 0 : -EIO);
	::close(fd);
	return ret;
}

/* The tracefs root, or "" with @why set. */
std::string find_tracefs(std::string &why)
{
	if (const char *env = std::getenv("KVBLK_TRACEFS"); env && *env) {
		if (dir_exists(std::string(env) + "/instances"))
			return env;
		why = std::string("$KVBLK_TRACEFS=") + env + " is not a tracefs (no instances/)";
		return {};
	}
	for (const char *p : { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" })
		if (dir_exists(std::string(p) + "/instances"))
			return p;
	why = "tracefs not found at /sys/kernel/tracing or /sys/kernel/debug/tracing "
	      "(mount -t tracefs nodev /sys/kernel/tracing)";
	return {};
}

/* A tracefs instance with kvblk's events on; removed by the destructor. */
class Instance {
public:
	~Instance() { remove(); }

	int create(const std::string &root, std::string &why)
	{
		dir_ = root + "/instances/kvblkctl-" + std::to_string(::getpid());
		if (::mkdir(dir_.c_str(), 0750) != 0) {
			int e = errno;
			why = "mkdir " + dir_ + ": " + std::strerror(e);
			dir_.clear();
			return -e;
		}
		if (!dir_exists(dir_ + "/events/kvblk")) {
			why = "no kvblk events in " + root + "/events: is kvblk.ko loaded?";
			return -ENOENT;
		}
		/* Per-CPU buffer; the reader empties it while recording. */
		struct Step {
			const char *file, *value;
		} steps[] = { { "tracing_on", "0" }, { "buffer_size_kb", "8192" }, { "events/kvblk/enable", "1" } };
		for (const auto &s : steps) {
			if (int ret = write_file(dir_ + "/" + s.file, s.value)) {
				why = "write " + dir_ + "/" + s.file + ": " + errstr(ret);
				return ret;
			}
		}
		pipe_fd_ = ::open((dir_ + "/trace_pipe").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (pipe_fd_ < 0) {
			int e = errno;
			why = "open " + dir_ + "/trace_pipe: " + std::strerror(e);
			return -e;
		}
		return 0;
	}

	int set_on(bool on) { return write_file(dir_ + "/tracing_on", on ? "1" : "0"); }
	[[nodiscard]] int pipe_fd() const { return pipe_fd_; }
	[[nodiscard]] const std::string &dir() const { return dir_; }

	void remove()
	{
		if (pipe_fd_ >= 0) {
			::close(pipe_fd_);
			pipe_fd_ = -1;
		}
		if (dir_.empty())
			return;
		write_file(dir_ + "/tracing_on", "0");
		write_file(dir_ + "/events/kvblk/enable", "0");
		for (int i = 0; i < 50 && ::rmdir(dir_.c_str()) != 0 && errno == EBUSY; i++)
			::usleep(20000);
		dir_.clear();
	}

private:
	std::string dir_;
	int pipe_fd_ = -1;
};

/* Reads trace_pipe into events until stopped and drained. */
class Reader {
public:
	explicit Reader(int fd) : fd_(fd) {}
	void set_fd(int fd) { fd_ = fd; }

	void run()
	{
		char buf[1 << 16];
		for (;;) {
			ssize_t n = ::read(fd_, buf, sizeof(buf));
			if (n > 0) {
				feed(buf, size_t(n));
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			/* Empty (EAGAIN) or end: done if stopped, else wait for more. */
			if (stop_.load())
				break;
			struct pollfd p = { fd_, POLLIN, 0 };
			::poll(&p, 1, 50);
		}
		if (!partial_.empty())
			line(partial_);
	}

	void stop() { stop_.store(true); }

	/* Parse saved text (--input) instead of a live pipe. */
	void parse_text(const std::string &text)
	{
		feed(text.data(), text.size());
		if (!partial_.empty())
			line(partial_);
		partial_.clear();
	}

	std::vector<TraceEvent> events;
	std::uint64_t lost = 0, bad_lines = 0;
	std::string first_error;

private:
	void feed(const char *p, size_t n)
	{
		partial_.append(p, n);
		size_t start = 0, nl;
		while ((nl = partial_.find('\n', start)) != std::string::npos) {
			line(std::string_view(partial_).substr(start, nl - start));
			start = nl + 1;
		}
		partial_.erase(0, start);
	}

	void line(std::string_view l)
	{
		TraceEvent ev;
		std::string err;
		if (parse_trace_line(l, ev, &lost, &err) == ParseResult::event) {
			events.push_back(std::move(ev));
		} else if (!err.empty()) {
			if (!bad_lines++)
				first_error = err + ": " + std::string(l);
		}
	}

	int fd_;
	std::atomic<bool> stop_{ false };
	std::string partial_;
};

struct TraceOpts {
	double seconds = 0;
	std::string input;
	std::string out = "kvblk-trace.json";
	std::vector<std::string> command;
};

/* Run @argv; its exit status (128+sig when killed), or -errno if it could not start. */
int run_command(const std::vector<std::string> &argv, std::string &why)
{
	int pfd[2];
	if (::pipe2(pfd, O_CLOEXEC) != 0)
		return -errno;
	pid_t pid = ::fork();
	if (pid < 0) {
		int e = errno;
		::close(pfd[0]);
		::close(pfd[1]);
		return -e;
	}
	if (pid == 0) {
		std::vector<char *> args;
		for (const auto &a : argv)
			args.push_back(const_cast<char *>(a.c_str()));
		args.push_back(nullptr);
		/* The child starts with default dispositions. */
		std::signal(SIGINT, SIG_DFL);
		std::signal(SIGTERM, SIG_DFL);
		std::signal(SIGHUP, SIG_DFL);
		::execvp(args[0], args.data());
		int e = errno;
		ssize_t w = ::write(pfd[1], &e, sizeof(e));
		(void)w;
		_exit(127);
	}
	::close(pfd[1]);
	int exec_errno = 0;
	ssize_t r;
	while ((r = ::read(pfd[0], &exec_errno, sizeof(exec_errno))) < 0 && errno == EINTR) {
	}
	::close(pfd[0]);
	int status = 0;
	bool forwarded = false;
	for (;;) {
		if (::waitpid(pid, &status, 0) == pid)
			break;
		if (errno != EINTR)
			return -errno;
		/* A terminal's ^C reaches the child too; a kill of us alone is passed on. */
		if (g_signal && !forwarded) {
			::kill(pid, g_signal == SIGINT ? SIGINT : SIGTERM);
			forwarded = true;
		}
	}
	if (r == sizeof(exec_errno) && exec_errno) {
		why = argv[0] + ": " + std::strerror(exec_errno);
		return -exec_errno;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string fmt_us(double v)
{
	char b[32];
	std::snprintf(b, sizeof(b), v < 10 ? "%.2f" : (v < 1000 ? "%.1f" : "%.0f"), v);
	return b;
}

void print_pct(const char *what, const Percentiles &p)
{
	std::printf("  %-22s n=%llu  p50 %s  p90 %s  p99 %s  max %s  mean %s us\n", what,
		    static_cast<unsigned long long>(p.count), fmt_us(p.p50).c_str(), fmt_us(p.p90).c_str(),
		    fmt_us(p.p99).c_str(), fmt_us(p.max).c_str(), fmt_us(p.mean).c_str());
}

void print_summary(const TraceSummary &s, const std::string &out)
{
	std::printf("trace      %s (%llu events, %.3f s; open it in https://ui.perfetto.dev)\n", out.c_str(),
		    static_cast<unsigned long long>(s.events), s.duration_us / 1e6);
	std::printf("recorded   %llu batches, %llu objects, %llu commands, %s\n",
		    static_cast<unsigned long long>(s.batches), static_cast<unsigned long long>(s.objects),
		    static_cast<unsigned long long>(s.commands), human_bytes(s.bytes).c_str());
	if (s.lost_events)
		std::printf("WARNING    %llu events lost (ring buffer overflow): counts are low\n",
			    static_cast<unsigned long long>(s.lost_events));
	std::printf("checks     %llu unmatched completions, %llu incomplete commands, %llu tag mismatches, "
		    "%llu failed commands\n",
		    static_cast<unsigned long long>(s.unmatched_completions),
		    static_cast<unsigned long long>(s.incomplete_commands),
		    static_cast<unsigned long long>(s.tag_mismatches),
		    static_cast<unsigned long long>(s.failed_commands));
	std::printf("commands per object   min %llu  mean %.2f  max %llu\n",
		    static_cast<unsigned long long>(s.cmds_per_object_min), s.cmds_per_object_mean,
		    static_cast<unsigned long long>(s.cmds_per_object_max));
	std::printf("objects in flight     max %llu  mean %.2f   (commands in flight: max %llu, mean %.2f)\n",
		    static_cast<unsigned long long>(s.objects_in_flight_max), s.objects_in_flight_mean,
		    static_cast<unsigned long long>(s.commands_in_flight_max), s.commands_in_flight_mean);
	if (!s.in_flight_over_time.empty()) {
		std::printf("objects in flight over time (mean per bin, max in brackets):\n");
		double peak = 0; /* the fullest bin gets the full bar */
		for (const auto &b : s.in_flight_over_time)
			peak = std::max(peak, b.objects_mean);
		for (const auto &b : s.in_flight_over_time) {
			int w = peak > 0 ? int(b.objects_mean / peak * 40 + 0.5) : 0;
			std::printf("  %10s us %6.2f [%3llu] |%s\n", fmt_us(b.start_us).c_str(), b.objects_mean,
				    static_cast<unsigned long long>(b.objects_max), std::string(size_t(w), '#').c_str());
		}
	}
	std::printf("timing:\n");
	print_pct("submission gap", s.submit_gap_us);
	print_pct("command device time", s.device_time_us);
}

/* Record into @reader: tracefs instance, --seconds or COMMAND. Return 0 or an exit status. */
int record(const TraceOpts &o, Reader &reader, std::string &root, int &cmd_status)
{
	std::string why;
	root = find_tracefs(why);
	if (root.empty())
		return fail(kCmd, why);
	if (!dir_exists(root + "/events/kvblk"))
		return fail(kCmd, "no kvblk events in " + root + "/events: is kvblk.ko loaded?");

	struct sigaction sa = {};
	sa.sa_handler = on_signal; /* no SA_RESTART: waits return EINTR */
	struct sigaction old_int, old_term, old_hup;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	struct Restore {
		struct sigaction *i, *t, *h;
		~Restore()
		{
			sigaction(SIGINT, i, nullptr);
			sigaction(SIGTERM, t, nullptr);
			sigaction(SIGHUP, h, nullptr);
		}
	} restore{ &old_int, &old_term, &old_hup };

	Instance inst;
	if (inst.create(root, why) != 0)
		return fail(kCmd, why);
	reader.set_fd(inst.pipe_fd());
	/* Signals go to this thread, not the reader. */
	sigset_t all, prev;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &prev);
	std::thread th([&] { reader.run(); });
	pthread_sigmask(SIG_SETMASK, &prev, nullptr);

	std::string cmd_why;
	if (int ret = inst.set_on(true)) {
		reader.stop();
		th.join();
		return fail(kCmd, "tracing_on: " + errstr(ret));
	}
	if (!o.command.empty()) {
		cmd_status = run_command(o.command, cmd_why);
	} else {
		auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.seconds);
		while (!g_signal && std::chrono::steady_clock::now() < end)
			::usleep(20000);
	}
	inst.set_on(false);
	reader.stop();
	th.join();
	inst.remove();
	if (cmd_status < 0)
		return fail(kCmd, cmd_why.empty() ? errstr(cmd_status) : cmd_why);
	return 0;
}

int trace_main(const Globals &g, const TraceOpts &o)
{
	int modes = (o.seconds > 0) + !o.command.empty() + !o.input.empty();
	if (modes == 0)
		return fail(kCmd, "give --seconds N, -- COMMAND [ARGS...] or --input FILE");
	if (modes > 1)
		return fail(kCmd, "--seconds, --input and a COMMAND exclude each other");
	/* Fail before recording if the output cannot be written. */
	{
		std::ofstream probe(o.out, std::ios::app);
		if (!probe)
			return fail(kCmd, o.out + ": " + std::strerror(errno));
	}
	Reader reader(-1);
	std::string root;
	int cmd_status = 0;
	if (!o.input.empty()) {
		std::ifstream in(o.input);
		if (!in)
			return fail(kCmd, o.input + ": " + std::strerror(errno));
		std::stringstream ss;
		ss << in.rdbuf();
		reader.parse_text(ss.str());
	} else if (int ret = record(o, reader, root, cmd_status)) {
		return ret;
	}

	if (reader.bad_lines)
		std::fprintf(stderr, "kvblkctl: trace: %llu lines not understood, first: %s\n",
			     static_cast<unsigned long long>(reader.bad_lines), reader.first_error.c_str());

	nlohmann::ordered_json chrome;
	TraceSummary s;
	build_trace(reader.events, reader.lost, chrome, s);
	{
		std::ofstream f(o.out, std::ios::trunc);
		f << chrome.dump() << '\n';
		if (!f)
			return fail(kCmd, o.out + ": write failed");
	}
	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["trace_file"] = o.out;
		doc["tracefs"] = root.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(root);
		doc["input"] = o.input.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.input);
		doc["command"] = o.command;
		doc["command_status"] = o.command.empty() ? nlohmann::ordered_json(nullptr)
							  : nlohmann::ordered_json(cmd_status);
		doc["interrupted"] = g_signal != 0;
		doc["summary"] = summary_json(s);
		print_json(doc);
	} else {
		print_summary(s, o.out);
	}
	if (!o.command.empty() && cmd_status != 0) {
		std::fprintf(stderr, "kvblkctl: trace: %s exited with status %d (trace written)\n",
			     o.command[0].c_str(), cmd_status);
		return cmd_status;
	}
	return 0;
}

} // namespace

void register_trace(CLI::App &app, Globals &g, Handler &h)
{
	auto o = std::make_shared<TraceOpts>();
	auto *sub = app.add_subcommand("trace", "Record kvblk's tracepoints into a Perfetto-loadable trace");
	sub->footer("Records kvblk_batch_start/end and kvblk_cmd_submit/complete through a tracefs instance of its\n"
		    "own for --seconds N, or while COMMAND runs, writes Chrome JSON trace events (batches,\n"
		    "objects per tag, NVMe commands per hardware queue, an in-flight counter) to --out and\n"
		    "prints commands per object, objects in flight over time, the gap between submissions\n"
		    "and the device time per command. Needs root and kvblk.ko loaded; --input converts\n"
		    "tracefs text saved earlier (cat trace) instead.\n"
		    "Exit: 0, 1 on an error, or COMMAND's non-zero exit status.\n");
	auto *secs = sub->add_option("-s,--seconds", o->seconds, "Record for this many seconds")
			     ->check(CLI::PositiveNumber);
	auto *input = sub->add_option("--input", o->input,
				      "Convert tracefs text saved earlier (cat trace) instead of recording")
			      ->excludes(secs);
	sub->add_option("--out", o->out, "Chrome JSON trace file to write (default kvblk-trace.json)");
	sub->add_option("command", o->command, "COMMAND [ARGS...] after --: record while it runs")
		->excludes(secs)
		->excludes(input);
	sub->positionals_at_end();
	sub->callback([&g, &h, o] { h = [&g, o] { return trace_main(g, *o); }; });
}

} // namespace kvblkctl

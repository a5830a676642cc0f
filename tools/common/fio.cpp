// SPDX-License-Identifier: MIT
#include "fio.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace kvblk_tools {

int FioSweep::best() const
{
	int b = -1;
	for (size_t i = 0; i < points.size(); i++)
		if (points[i].ok && (b < 0 || points[i].bw_bytes > points[size_t(b)].bw_bytes))
			b = int(i);
	return b;
}

std::string find_program(const std::string &prog)
{
	auto executable = [](const std::string &p) {
		struct stat st;
		return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
	};
	if (prog.find('/') != std::string::npos)
		return executable(prog) ? prog : std::string();
	const char *env = std::getenv("PATH");
	std::string path = env ? env : "/usr/local/bin:/usr/bin:/bin";
	size_t start = 0;
	while (start <= path.size()) {
		size_t end = path.find(':', start);
		if (end == std::string::npos)
			end = path.size();
		std::string dir = path.substr(start, end - start);
		if (dir.empty())
			dir = ".";
		std::string cand = dir + "/" + prog;
		if (executable(cand))
			return cand;
		start = end + 1;
	}
	return {};
}

std::string FioKnobs::name() const
{
	std::string s = fmt::format("{} QD {}", engine, iodepth);
	if (numjobs > 1)
		s += fmt::format(" x {} jobs", numjobs);
	if (spread)
		s += ", a job per object";
	if (fixedbufs)
		s += ", fixedbufs";
	if (registerfiles)
		s += ", registerfiles";
	if (lean)
		s += ", lean";
	if (hugepages)
		s += ", huge pages";
	return s;
}

namespace {

// fio separates file names with ':'; escape it in ours.
std::string fio_file_name(const std::string &path)
{
	std::string file;
	for (char c : path) {
		if (c == ':')
			file += '\\';
		file += c;
	}
	return file;
}

} // namespace

std::vector<std::string> fio_argv(const std::string &program, const FioConfig &cfg, const FioKnobs &k,
				  const std::string &json_out)
{
	std::vector<std::string> a = {
		program,
		"--readonly",
		"--direct=1",
		"--thread",
		"--group_reporting",
		"--ioengine=" + k.engine,
		fmt::format("--iodepth={}", k.iodepth),
		fmt::format("--runtime={}", cfg.runtime_s),
		"--output-format=json",
		"--output=" + json_out,
	};
	if (k.lean) {
		a.push_back(fmt::format("--iodepth_batch_submit={}", k.iodepth));
		a.push_back(fmt::format("--iodepth_batch_complete_max={}", k.iodepth));
		a.push_back("--gtod_reduce=1");
	}
	if (k.hugepages)
		a.push_back("--iomem=mmaphuge");
	if (k.engine == "io_uring") {
		if (k.fixedbufs)
			a.push_back("--fixedbufs=1");
		if (k.registerfiles)
			a.push_back("--registerfiles=1");
	}
	if (!cfg.replays.empty() || !cfg.spread_replays.empty()) {
		// One job per log (global options above apply to every job): the
		// jobs together issue exactly the commands of one kvblk pass.
		const std::map<uint32_t, FioReplay> &logs = k.spread ? cfg.spread_replays : cfg.replays;
		auto it = logs.find(k.numjobs);
		if (it == logs.end() || it->second.logs.size() != k.numjobs)
			throw std::invalid_argument(fmt::format("no {}replay logs for {} fio jobs",
								k.spread ? "object-per-job " : "", k.numjobs));
		for (size_t j = 0; j < it->second.logs.size(); j++) {
			a.push_back(fmt::format("--name=kvblk-replay{}", j));
			a.push_back("--read_iolog=" + it->second.logs[j]);
		}
		return a;
	}
	// Sequential mode (kvblkctl probe): one job reads the range.
	if (k.numjobs != 1)
		throw std::invalid_argument("sequential fio points run one job");
	a.insert(a.end(), {
				  "--name=kvblk-ceiling",
				  "--filename=" + fio_file_name(cfg.path),
				  "--rw=read",
				  fmt::format("--bs={}", cfg.block_bytes),
				  "--offset=0",
				  fmt::format("--size={}", cfg.size),
			  });
	if (cfg.time_based)
		a.push_back("--time_based");
	return a;
}

bool parse_fio_json(const std::string &text, FioPoint &pt, std::string *version, double replay_cmd_bytes)
{
	// Older fio versions may print notes before the document.
	size_t brace = text.find('{');
	if (brace == std::string::npos) {
		pt.error = "no JSON in fio's output";
		return false;
	}
	nlohmann::json j = nlohmann::json::parse(text.begin() + long(brace), text.end(), nullptr, false);
	if (j.is_discarded() || !j.is_object() || !j.contains("jobs") || !j["jobs"].is_array() ||
	    j["jobs"].empty()) {
		pt.error = "fio's output is not the JSON expected (no jobs)";
		return false;
	}
	if (version && j.contains("fio version") && j["fio version"].is_string())
		*version = j["fio version"].get<std::string>();
	const auto &job = j["jobs"][0];
	if (job.value("error", 0) != 0) {
		pt.error = fmt::format("fio job error {} ({})", job.value("error", 0),
				       std::strerror(job.value("error", 0)));
		return false;
	}
	if (!job.contains("read") || !job["read"].is_object()) {
		pt.error = "fio's job has no read section";
		return false;
	}
	const auto &rd = job["read"];
	pt.iops = rd.value("iops", 0.0);
	pt.io_bytes = rd.value("io_bytes", uint64_t(0));
	pt.total_ios = rd.value("total_ios", uint64_t(0));
	pt.runtime_s = double(rd.value("runtime", uint64_t(0))) / 1e3; // ms
	if (replay_cmd_bytes > 0)
		pt.io_bytes = std::max(pt.io_bytes, uint64_t(double(pt.total_ios) * replay_cmd_bytes + 0.5));
	pt.bw_bytes = pt.runtime_s > 0 ? uint64_t(double(pt.io_bytes) / pt.runtime_s) : rd.value("bw_bytes", uint64_t(0));
	pt.gbps = double(pt.bw_bytes) / 1e9;
	if (rd.contains("clat_ns") && rd["clat_ns"].is_object()) {
		const auto &cl = rd["clat_ns"];
		pt.clat_mean_us = cl.value("mean", 0.0) / 1e3;
		if (cl.contains("percentile") && cl["percentile"].is_object()) {
			const auto &pc = cl["percentile"];
			pt.clat_p50_us = pc.value("50.000000", 0.0) / 1e3;
			pt.clat_p99_us = pc.value("99.000000", 0.0) / 1e3;
		}
	}
	if (pt.bw_bytes == 0 || pt.io_bytes == 0) {
		pt.error = "fio read nothing";
		return false;
	}
	pt.ok = true;
	return true;
}

namespace {

// Run @argv, return its exit status (or -errno if it could not start), its
// stdout+stderr in @output and its user + system CPU in @cpu_s (wait4(): the
// process and every thread it ran).
int run_capture(const std::vector<std::string> &argv, std::string &output, double &cpu_s)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(pfd[0]);
		close(pfd[1]);
		return -e;
	}
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		std::vector<char *> args;
		for (const auto &s : argv)
			args.push_back(const_cast<char *>(s.c_str()));
		args.push_back(nullptr);
		execv(args[0], args.data());
		_exit(127);
	}
	close(pfd[1]);
	char buf[4096];
	for (;;) {
		ssize_t n = read(pfd[0], buf, sizeof(buf));
		if (n > 0) {
			if (output.size() < (1u << 20))
				output.append(buf, size_t(n));
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	close(pfd[0]);
	int status = 0;
	struct rusage ru {};
	while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
	}
	auto sec = [](const struct timeval &t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
	cpu_s = sec(ru.ru_utime) + sec(ru.ru_stime);
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string last_lines(const std::string &s, size_t n)
{
	size_t pos = s.size();
	while (n-- && pos > 0) {
		size_t nl = s.rfind('\n', pos - 1);
		if (nl == std::string::npos) {
			pos = 0;
			break;
		}
		pos = nl;
	}
	std::string t = s.substr(pos);
	while (!t.empty() && (t.front() == '\n' || t.front() == ' '))
		t.erase(t.begin());
	while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
		t.pop_back();
	for (char &c : t)
		if (c == '\n')
			c = ' ';
	return t;
}

} // namespace

FioSession::FioSession(const FioConfig &cfg) : cfg_(cfg)
{
	sweep_.program = find_program(cfg.fio);
	if (sweep_.program.empty()) {
		sweep_.note = fmt::format("{} not found on PATH: no device ceiling", cfg.fio);
		return;
	}
	char dir_tmpl[] = "/tmp/kvblk-fio.XXXXXX";
	if (!mkdtemp(dir_tmpl)) {
		sweep_.note = fmt::format("cannot create a temporary directory: {}", std::strerror(errno));
		return;
	}
	tmpdir_ = dir_tmpl;
	sweep_.available = true;
}

FioSession::~FioSession()
{
	if (!tmpdir_.empty()) {
		::unlink((tmpdir_ + "/fio.json").c_str());
		::rmdir(tmpdir_.c_str());
	}
}

FioPoint FioSession::run(const FioKnobs &k)
{
	FioPoint pt;
	pt.knobs = k;
	pt.queue_depth = k.iodepth;
	pt.fixedbufs = k.engine == "io_uring" && k.fixedbufs;
	if (!sweep_.available) {
		pt.error = sweep_.note;
		return pt;
	}
	if (cfg_.progress) {
		std::fprintf(stderr, "\r\x1b[Kfio %s ...", k.name().c_str());
		std::fflush(stderr);
	}
	const FioConfig &cfg = cfg_;
	double cmd_bytes = 0;
	const std::map<uint32_t, FioReplay> &logs = k.spread ? cfg.spread_replays : cfg.replays;
	if (auto it = logs.find(k.numjobs); it != logs.end() && it->second.commands)
		cmd_bytes = double(it->second.bytes) / double(it->second.commands);
	const std::string out = tmpdir_ + "/fio.json";
	::unlink(out.c_str());
	std::string output;
	double cpu_s = 0;
	int rc;
	try {
		rc = run_capture(fio_argv(sweep_.program, cfg, k, out), output, cpu_s);
	} catch (const std::invalid_argument &e) {
		pt.error = e.what();
		return pt;
	}
	std::ifstream in(out);
	std::stringstream ss;
	ss << in.rdbuf();
	if (rc == 0 && parse_fio_json(ss.str(), pt, sweep_.version.empty() ? &sweep_.version : nullptr, cmd_bytes)) {
		pt.cpu_s_per_gb = cpu_s / (double(pt.io_bytes) / 1e9);
	} else {
		if (rc != 0)
			pt.error = fmt::format("fio exited with {}: {}", rc < 0 ? std::strerror(-rc) : std::to_string(rc),
					       last_lines(output, 3));
		pt.ok = false;
	}
	if (cfg_.progress) {
		std::fputs("\r\x1b[K", stderr);
		std::fflush(stderr);
	}
	return pt;
}

FioSweep run_fio_sweep(const FioConfig &cfg)
{
	FioSession session(cfg);
	FioSweep s;
	s.available = session.available();
	s.program = session.program();
	s.note = session.note();
	bool fixedbufs = cfg.fixedbufs;
	for (uint32_t qd : cfg.queue_depths) {
		FioKnobs k;
		k.iodepth = qd;
		k.fixedbufs = fixedbufs;
		FioPoint pt = session.run(k);
		if (!pt.ok && fixedbufs) {
			// Registered buffers can be refused (RLIMIT_MEMLOCK); if fio
			// works without them, the rest of the sweep runs without.
			k.fixedbufs = false;
			FioPoint plain = session.run(k);
			if (plain.ok) {
				s.note = fmt::format("fio refused --fixedbufs=1 ({}); ceiling measured without it", pt.error);
				fixedbufs = false;
				pt = plain;
			}
		}
		s.points.push_back(pt);
	}
	s.version = session.version();
	if (s.available && s.best() < 0 && s.note.empty())
		s.note = "every fio point failed: no device ceiling";
	return s;
}

FioSweep median_sweep(const std::vector<FioSweep> &sweeps)
{
	if (sweeps.empty())
		return {};
	FioSweep out = sweeps.back();
	out.points.clear();
	for (const FioSweep &s : sweeps)
		if (out.version.empty())
			out.version = s.version;
	for (size_t i = 0; i < sweeps.front().points.size(); i++) {
		std::vector<const FioPoint *> ok;
		const FioPoint *last = nullptr;
		for (const FioSweep &s : sweeps) {
			if (i >= s.points.size())
				continue;
			last = &s.points[i];
			if (s.points[i].ok)
				ok.push_back(&s.points[i]);
		}
		if (ok.empty()) {
			out.points.push_back(*last);
			continue;
		}
		std::sort(ok.begin(), ok.end(), [](const FioPoint *a, const FioPoint *b) { return a->bw_bytes < b->bw_bytes; });
		FioPoint p = *ok[(ok.size() - 1) / 2];
		p.gbps_repeats.clear();
		for (const FioSweep &s : sweeps)
			if (i < s.points.size() && s.points[i].ok)
				p.gbps_repeats.push_back(s.points[i].gbps);
		out.points.push_back(p);
	}
	return out;
}

} // namespace kvblk_tools

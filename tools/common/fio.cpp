// SPDX-License-Identifier: MIT
#include "fio.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

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

std::vector<std::string> fio_argv(const std::string &program, const FioConfig &cfg, uint32_t qd, bool fixedbufs,
				  const std::string &json_out)
{
	// fio separates file names with ':'; escape it in ours.
	std::string file;
	for (char c : cfg.path) {
		if (c == ':')
			file += '\\';
		file += c;
	}
	std::vector<std::string> a = {
		program,
		"--name=kvblk-ceiling",
		"--filename=" + file,
		"--readonly",
		"--rw=read",
		"--ioengine=io_uring",
		"--direct=1",
		fmt::format("--bs={}", cfg.block_bytes),
		fmt::format("--iodepth={}", qd),
		"--numjobs=1",
		"--offset=0",
		fmt::format("--size={}", cfg.size),
		fmt::format("--runtime={}", cfg.runtime_s),
		"--output-format=json",
		"--output=" + json_out,
	};
	if (fixedbufs)
		a.push_back("--fixedbufs=1");
	if (cfg.time_based)
		a.push_back("--time_based");
	if (cfg.batch && qd > 1) {
		a.push_back(fmt::format("--iodepth_batch_submit={}", qd));
		a.push_back("--iodepth_batch_complete_min=1");
	}
	return a;
}

bool parse_fio_json(const std::string &text, FioPoint &pt, std::string *version)
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
	pt.bw_bytes = rd.value("bw_bytes", uint64_t(0));
	pt.iops = rd.value("iops", 0.0);
	pt.io_bytes = rd.value("io_bytes", uint64_t(0));
	pt.runtime_s = double(rd.value("runtime", uint64_t(0))) / 1e3; // ms
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
	// usr_cpu/sys_cpu are percentages of one CPU over the job's runtime.
	double cpu_s = (job.value("usr_cpu", 0.0) + job.value("sys_cpu", 0.0)) / 100.0 * pt.runtime_s;
	pt.cpu_s_per_gb = pt.io_bytes ? cpu_s / (double(pt.io_bytes) / 1e9) : 0.0;
	if (pt.bw_bytes == 0 || pt.io_bytes == 0) {
		pt.error = "fio read nothing";
		return false;
	}
	pt.ok = true;
	return true;
}

namespace {

// Run @argv, return its exit status (or -errno if it could not start) and
// its stdout+stderr in @output.
int run_capture(const std::vector<std::string> &argv, std::string &output)
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
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
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

FioSession::FioSession(const FioConfig &cfg) : cfg_(cfg), fixedbufs_(cfg.fixedbufs)
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

const FioPoint &FioSession::run(uint32_t qd)
{
	FioPoint pt;
	pt.queue_depth = qd;
	if (!sweep_.available) {
		pt.error = sweep_.note;
		sweep_.points.push_back(pt);
		return sweep_.points.back();
	}
	if (cfg_.progress) {
		std::fprintf(stderr, "\r\x1b[Kfio io_uring QD=%u bs=%llu ...", qd, (unsigned long long)cfg_.block_bytes);
		std::fflush(stderr);
	}
	const std::string out = tmpdir_ + "/fio.json";
	auto attempt = [&](bool fb) {
		FioPoint p;
		p.queue_depth = qd;
		p.fixedbufs = fb;
		::unlink(out.c_str());
		std::string output;
		int rc = run_capture(fio_argv(sweep_.program, cfg_, qd, fb, out), output);
		std::ifstream in(out);
		std::stringstream ss;
		ss << in.rdbuf();
		if (rc == 0 && parse_fio_json(ss.str(), p, sweep_.version.empty() ? &sweep_.version : nullptr))
			return p;
		if (rc != 0)
			p.error = fmt::format("fio exited with {}: {}", rc < 0 ? std::strerror(-rc) : std::to_string(rc),
					      last_lines(output, 3));
		p.ok = false;
		return p;
	};
	pt = attempt(fixedbufs_);
	if (!pt.ok && fixedbufs_) {
		// Registered buffers can be refused (RLIMIT_MEMLOCK); if fio works
		// without them, the rest of the session runs without, and says so.
		FioPoint plain = attempt(false);
		if (plain.ok) {
			sweep_.note = fmt::format("fio refused --fixedbufs=1 ({}); ceiling measured without it", pt.error);
			fixedbufs_ = false;
			pt = plain;
		}
	}
	if (cfg_.progress) {
		std::fputs("\r\x1b[K", stderr);
		std::fflush(stderr);
	}
	sweep_.points.push_back(pt);
	return sweep_.points.back();
}

FioSweep FioSession::sweep() const
{
	FioSweep s = sweep_;
	if (s.available && s.best() < 0 && s.note.empty())
		s.note = "every fio point failed: no device ceiling";
	return s;
}

FioSweep run_fio_sweep(const FioConfig &cfg)
{
	FioSession session(cfg);
	for (uint32_t qd : cfg.queue_depths)
		session.run(qd);
	return session.sweep();
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

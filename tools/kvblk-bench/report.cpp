// SPDX-License-Identifier: MIT
#include "report.hpp"

#include "cuda_dest.hpp"
#include "dest_window.hpp"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/core.h>

#include <kvblk/kvblk.h>

namespace kvblk_bench {

namespace {

std::string read_line(const std::string &file)
{
	std::ifstream in(file);
	std::string s;
	std::getline(in, s);
	return s;
}

std::string fs_name(unsigned long type)
{
	switch (type) {
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0xF2F52010: return "f2fs";
	case 0x01021994: return "tmpfs";
	case 0x794c7630: return "overlayfs";
	case 0x6969: return "nfs";
	case 0x2fc12fc1: return "zfs";
	case 0x65735546: return "fuse";
	case 0x62656572: return "sysfs";
	default: return fmt::format("0x{:x}", type);
	}
}

std::string fmt_opt(const std::optional<double> &v, const char *spec = "{:.2f}")
{
	return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
}

std::string setting_name(const RunResult &r)
{
	if (r.backend == "psync")
		return "psync";
	if (r.backend == "threadpool")
		return fmt::format("threadpool W={}", r.workers);
	return fmt::format("{} W={} QD={}", r.backend, r.workers, r.queue_depth);
}

// "  runs 1.20 1.35 1.41" when there was more than one run.
std::string runs_str(const std::vector<double> &v)
{
	if (v.size() < 2)
		return {};
	std::string s = "  runs";
	for (double x : v)
		s += fmt::format(" {:.2f}", x);
	return s;
}

std::string size_str(uint64_t bytes)
{
	if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
		return fmt::format("{} MiB", bytes >> 20);
	if (bytes >= 1024 && bytes % 1024 == 0)
		return fmt::format("{} KiB", bytes >> 10);
	return fmt::format("{} B", bytes);
}

} // namespace

HostInfo collect_host(const std::string &path, bool is_blockdev)
{
	HostInfo h;
	char name[256] = "";
	if (gethostname(name, sizeof(name) - 1) == 0)
		h.hostname = name;
	struct utsname u;
	if (uname(&u) == 0) {
		h.kernel = u.release;
		h.machine = u.machine;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	h.cpus = n > 0 ? unsigned(n) : 0;
	{
		std::ifstream in("/proc/cpuinfo");
		std::string line;
		while (std::getline(in, line))
			if (line.rfind("model name", 0) == 0) {
				auto c = line.find(':');
				if (c != std::string::npos)
					h.cpu_model = line.substr(c + 2);
				break;
			}
	}
	{
		std::ifstream in("/proc/meminfo");
		std::string key;
		uint64_t kib = 0;
		while (in >> key >> kib)
			if (key == "MemTotal:") {
				h.mem_total_bytes = kib * 1024;
				break;
			} else
				in.ignore(256, '\n');
	}
	h.libkvblk_version = kvblk_version();
	h.target_kind = is_blockdev ? "blockdev" : "file";

	struct stat st;
	if (::stat(path.c_str(), &st) == 0) {
		dev_t d = is_blockdev ? st.st_rdev : st.st_dev;
		std::string sys = fmt::format("/sys/dev/block/{}:{}", major(d), minor(d));
		std::ifstream ue(sys + "/uevent");
		std::string line;
		while (std::getline(ue, line))
			if (line.rfind("DEVNAME=", 0) == 0)
				h.block_device = "/dev/" + line.substr(8);
		std::string rot = read_line(sys + "/queue/rotational");
		if (rot.empty())
			rot = read_line(sys + "/../queue/rotational"); // a partition
		if (!rot.empty())
			h.rotational = rot == "1";
	}
	if (!is_blockdev) {
		struct statfs sf;
		if (::statfs(path.c_str(), &sf) == 0)
			h.filesystem = fs_name((unsigned long)sf.f_type);
	}
	return h;
}

std::optional<double> fraction_of_ceiling(const FioSweep &fio, double gbps)
{
	int b = fio.best();
	if (b < 0 || fio.points[size_t(b)].gbps <= 0)
		return std::nullopt;
	return gbps / fio.points[size_t(b)].gbps;
}

Ratios compute_ratios(const std::vector<RunResult> &results, const FioSweep &fio)
{
	Ratios q;
	for (size_t i = 0; i < results.size(); i++) {
		const RunResult &r = results[i];
		if (r.failed_calls || r.gbps <= 0)
			continue;
		int idx = int(i);
		if (r.backend == "uring" && (q.best_uring < 0 || r.gbps > results[size_t(q.best_uring)].gbps))
			q.best_uring = idx;
		if (r.backend == "threadpool" &&
		    (q.best_threadpool < 0 || r.gbps > results[size_t(q.best_threadpool)].gbps))
			q.best_threadpool = idx;
		if (r.backend == "psync" && (q.psync < 0 || r.gbps > results[size_t(q.psync)].gbps))
			q.psync = idx;
	}
	auto gb = [&](int i) { return results[size_t(i)].gbps; };
	if (q.best_uring >= 0) {
		q.uring_over_fio = fraction_of_ceiling(fio, gb(q.best_uring));
		if (q.psync >= 0)
			q.uring_over_psync = gb(q.best_uring) / gb(q.psync);
	}
	if (q.best_threadpool >= 0) {
		q.threadpool_over_fio = fraction_of_ceiling(fio, gb(q.best_threadpool));
		if (q.psync >= 0)
			q.threadpool_over_psync = gb(q.best_threadpool) / gb(q.psync);
	}
	const int best = fio.best();
	for (const FioPoint &p : fio.points)
		if (best >= 0 && p.ok && p.queue_depth == 1 && p.gbps > 0)
			q.fio_best_over_qd1 = fio.points[size_t(best)].gbps / p.gbps;
	if (q.uring_over_fio && q.uring_over_psync)
		q.target_met = *q.uring_over_fio >= kTargetOverFio && *q.uring_over_psync >= kTargetOverPsync;
	return q;
}

std::string render_text(const Report &r)
{
	std::string o;
	auto line = [&](const std::string &s) {
		o += s;
		o += '\n';
	};
	const uint64_t total = r.store.objects * r.store.object_bytes;

	line(fmt::format("kvblk-bench: libkvblk {}, {} ({} CPUs, kernel {})", r.host.libkvblk_version, r.host.hostname,
			 r.host.cpus, r.host.kernel));
	std::string where = r.host.target_kind == "file"
				    ? fmt::format("regular file on {}{}", r.host.filesystem,
						  r.host.block_device.empty() ? "" : ", " + r.host.block_device)
				    : "block device";
	line(fmt::format("Store: {} ({}), {} objects x {} = {:.3f} GB, {}", r.store.path, where, r.store.objects,
			 size_str(r.store.object_bytes), double(total) / kGB,
			 r.store_state.created
				 ? fmt::format("written at {:.2f} GB/s ({})", r.store_state.write_gbps, r.store_state.reason)
				 : fmt::format("reused ({})", r.store_state.reason)));
	const uint64_t window = std::min<uint64_t>(r.run.window_objects, r.store.objects);
	line(fmt::format("Loads: {} objects per kvblk_load_many() call, commands of at most {}, O_DIRECT, "
			 "{} objects ({:.3f} GB) loaded back to back, then verified",
			 std::min<uint64_t>(r.run.batch_objects, r.store.objects), size_str(r.run.cmd_bytes), window,
			 double(window * r.store.object_bytes) / kGB));
	line(r.run.dest ? "Destination: " + r.run.dest->describe() : std::string("Destination: host memory"));
	line(fmt::format("Rounds: {} (fio points and settings alternate: fio, setting, fio, setting, ...){}",
			 r.run.repeat, r.run.repeat > 1 ? "; medians shown" : ""));
	line("");

	// The ceiling.
	const int best = r.fio.best();
	if (!r.fio_enabled) {
		line("Device ceiling: not measured (--no-fio)");
	} else if (!r.fio.available) {
		line(fmt::format("Device ceiling: absent: {}", r.fio.note));
	} else {
		line(fmt::format("Device ceiling: {}, ioengine=io_uring, direct=1, rw=read, bs={}, numjobs=1{}",
				 r.fio.version.empty() ? "fio" : r.fio.version, size_str(r.fio_cfg.block_bytes),
				 r.fio_cfg.fixedbufs ? ", fixedbufs" : "") +
			     (r.fio_cfg.batch ? ", iodepth_batch_submit=QD, iodepth_batch_complete_min=1" : ""));
		for (const FioPoint &p : r.fio.points) {
			if (p.ok)
				line(fmt::format("  fio QD {:>4}: {:8.3f} GB/s {:>10.0f} IOPS   clat p50 {:9.1f} us  "
						 "p99 {:9.1f} us  CPU {:.3f} s/GB{}",
						 p.queue_depth, p.gbps, p.iops, p.clat_p50_us, p.clat_p99_us, p.cpu_s_per_gb,
						 p.fixedbufs == r.fio_cfg.fixedbufs ? "" : " (no fixedbufs)") +
				     runs_str(p.gbps_repeats));
			else
				line(fmt::format("  fio QD {:>4}: failed: {}", p.queue_depth, p.error));
		}
		if (best >= 0)
			line(fmt::format("  Ceiling: {:.3f} GB/s (fio, QD {})", r.fio.points[size_t(best)].gbps,
					 r.fio.points[size_t(best)].queue_depth));
		if (!r.fio.note.empty())
			line(fmt::format("  Note: {}", r.fio.note));
	}
	line("");

	// The table.
	const std::string hdr = fmt::format("{:<11} {:<6} {:>7} {:>5} {:>8} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9} "
					    "{:>8} {:>9} {:>8}",
					    "Backend", "Path", "Workers", "QD", "Objects", "Obj MiB", "GB/s", "Objects/s", "p50 ms",
					    "p99 ms", "CPU s/GB", "RSS MiB", "x Ceiling", "Verified");
	line(hdr);
	line(std::string(hdr.size(), '='));
	for (const RunResult &x : r.results) {
		std::string backend = x.backend.empty() ? x.requested_backend : x.backend;
		line(fmt::format("{:<11} {:<6} {:>7} {:>5} {:>8} {:>8.2f} {:>8.3f} {:>10.1f} {:>9.2f} {:>9.2f} "
				 "{:>9.3f} {:>8.1f} {:>9} {:>8}",
				 backend, x.path_mixed ? "mixed" : x.path.empty() ? "-" : x.path, x.workers, x.queue_depth, x.objects, double(x.object_bytes) / kMiB, x.gbps,
				 x.objects_per_s, x.p50_ms, x.p99_ms, x.cpu_s_per_gb, x.peak_rss_mib,
				 fmt_opt(fraction_of_ceiling(r.fio, x.gbps)), x.verified ? "yes" : "NO"));
	}
	line(std::string(hdr.size(), '='));

	// What the table cannot show.
	for (const RunResult &x : r.results) {
		if (!x.error.empty())
			line(fmt::format("! {}: {}", setting_name(x), x.error));
		if (x.requested_backend != "auto" && !x.backend.empty() && x.backend != x.requested_backend)
			line(fmt::format("! asked for {}, served by {} ({})", x.requested_backend, x.backend,
					 x.backend_reason));
		if (x.requested_backend == "auto")
			line(fmt::format("  auto chose {}: {}", x.backend, x.backend_reason));
		if (x.path_mixed || x.path == "staged")
			line(fmt::format("  {}: path {}: {} host-to-device copies; {}", setting_name(x),
					 x.path_mixed ? "mixed" : x.path, x.staged_copies, x.dest_note));
		else if (x.path == "p2p")
			line(fmt::format("  {}: path p2p: NVMe DMA straight into device memory", setting_name(x)));
		if (x.gbps_repeats.size() > 1)
			line(fmt::format("  {}: GB/s{}", setting_name(x), runs_str(x.gbps_repeats).substr(6)));
		if (x.memlock_fallbacks || x.buffered_batches || x.eagain_retries || x.short_resubmits || x.cq_overflows)
			line(fmt::format("  {}: {} memlock fallbacks, {} buffered batches, {} -EAGAIN retries, "
					 "{} short-read resubmits, {} CQ overflows",
					 setting_name(x), x.memlock_fallbacks, x.buffered_batches, x.eagain_retries,
					 x.short_resubmits, x.cq_overflows));
	}

	if (r.latency_level > 0) {
		for (const RunResult &x : r.results) {
			line("");
			line(fmt::format("Batch latency, {} ({} call{} of up to {} objects), Latency(us):",
					 setting_name(x), x.batch_ms.size(), x.batch_ms.size() == 1 ? "" : "s",
					 x.batch_objects));
			line("=================================================================================");
			for (double p : {1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 100.0})
				line(fmt::format("{:9.5f}% : {:9.3f}us", p, percentile(x.batch_ms, p) * 1e3));
			if (r.latency_level > 1) {
				uint64_t all = 0, cum = 0;
				for (uint64_t c : x.cmd_lat_hist)
					all += c;
				line(fmt::format("Command latency histogram (library, {} commands){}", x.commands,
						 all ? ":" : ": not kept by this backend"));
				if (all)
					line("       Range in us     Cumulative    IO count");
				for (size_t b = 0; b < x.cmd_lat_hist.size(); b++) {
					if (!x.cmd_lat_hist[b])
						continue;
					cum += x.cmd_lat_hist[b];
					line(fmt::format("{:>9} - {:>9}: {:9.4f}%  ({:>8})", b ? (uint64_t(1) << b) : 0,
							 uint64_t(1) << (b + 1), all ? 100.0 * double(cum) / double(all) : 0.0,
							 x.cmd_lat_hist[b]));
				}
			}
		}
	}

	// The ratios issue 2 asks about.
	Ratios q = compute_ratios(r.results, r.fio);
	line("");
	line("Ratios (this run):");
	auto gb = [&](int i) { return r.results[size_t(i)].gbps; };
	std::string ceiling_str = best >= 0 ? fmt::format("fio QD {} {:.3f} GB/s", r.fio.points[size_t(best)].queue_depth,
							 r.fio.points[size_t(best)].gbps)
					    : "no ceiling";
	if (q.best_uring >= 0) {
		line(fmt::format("  uring / fio best   = {}   ({} {:.3f} GB/s vs {})", fmt_opt(q.uring_over_fio),
				 setting_name(r.results[size_t(q.best_uring)]), gb(q.best_uring), ceiling_str));
		line(fmt::format("  uring / psync      = {}   ({} vs {})", fmt_opt(q.uring_over_psync),
				 setting_name(r.results[size_t(q.best_uring)]),
				 q.psync >= 0 ? fmt::format("psync {:.3f} GB/s", gb(q.psync)) : "no psync run"));
	} else {
		line("  uring: not run");
	}
	if (q.fio_best_over_qd1)
		line(fmt::format("  fio best / fio QD 1 = {}   (what queue depth alone gains on this device)",
				 fmt_opt(q.fio_best_over_qd1)));
	if (q.best_threadpool >= 0) {
		line(fmt::format("  threadpool / fio best = {}", fmt_opt(q.threadpool_over_fio)));
		line(fmt::format("  threadpool / psync    = {}", fmt_opt(q.threadpool_over_psync)));
	}
	bool all_verified = true;
	for (const RunResult &x : r.results)
		all_verified = all_verified && x.verified;
	auto yn = [](std::optional<bool> b) { return b ? (*b ? "yes" : "NO") : "n/a"; };
	line(fmt::format("Target (issue 2): uring >= {:.1f} x fio best: {}; uring >= {:.1f} x psync: {}; "
			 "every object verified: {}",
			 kTargetOverFio, yn(q.uring_over_fio ? std::optional<bool>(*q.uring_over_fio >= kTargetOverFio) : std::nullopt),
			 kTargetOverPsync,
			 yn(q.uring_over_psync ? std::optional<bool>(*q.uring_over_psync >= kTargetOverPsync) : std::nullopt),
			 all_verified ? "yes" : "NO"));
	line("GB = 1e9 bytes. GB/s and CPU s/GB cover the back-to-back kvblk_load_many() calls, not the "
	     "verification;");
	line("CPU is the whole process (library threads included); RSS is the peak resident set of each setting "
	     "(the load window included).");
	return o;
}

nlohmann::json render_json(const Report &r)
{
	using nlohmann::json;
	json j;
	j["schema_version"] = kSchemaVersion;
	j["tool"] = "kvblk-bench";
	j["host"] = {
		{"hostname", r.host.hostname},
		{"kernel", r.host.kernel},
		{"machine", r.host.machine},
		{"cpus", r.host.cpus},
		{"cpu_model", r.host.cpu_model},
		{"mem_total_bytes", r.host.mem_total_bytes},
		{"libkvblk_version", r.host.libkvblk_version},
	};
	j["target"] = {
		{"path", r.store.path},
		{"kind", r.host.target_kind},
		{"filesystem", r.host.target_kind == "file" ? json(r.host.filesystem) : json(nullptr)},
		{"block_device", r.host.block_device.empty() ? json(nullptr) : json(r.host.block_device)},
		{"rotational", r.host.rotational < 0 ? json(nullptr) : json(r.host.rotational == 1)},
		{"capacity_bytes", r.store_state.capacity},
	};
	j["store"] = {
		{"objects", r.store.objects},
		{"object_bytes", r.store.object_bytes},
		{"total_bytes", r.store.objects * r.store.object_bytes},
		{"pattern", kPatternName},
		{"pattern_version", kPatternVersion},
		{"action", r.store_state.created ? "created" : "reused"},
		{"reason", r.store_state.reason},
		{"write_gbps", r.store_state.created ? json(r.store_state.write_gbps) : json(nullptr)},
	};
	j["config"] = {
		{"cmd_bytes", r.run.cmd_bytes},
		{"batch_objects", r.run.batch_objects},
		{"window_objects", std::min<uint64_t>(r.run.window_objects, r.store.objects)},
		{"repeat", r.run.repeat},
		{"dest", r.run.dest ? r.run.dest->name() : std::string("host")},
		{"cuda_runtime", dynamic_cast<const CudaWindow *>(r.run.dest)
					 ? json(static_cast<const CudaWindow *>(r.run.dest)->runtime())
					 : json(nullptr)},
	};

	const int best = r.fio.best();
	if (best >= 0)
		j["ceiling"] = {{"tool", "fio"},
				{"gbps", r.fio.points[size_t(best)].gbps},
				{"queue_depth", r.fio.points[size_t(best)].queue_depth},
				{"cmd_bytes", r.fio_cfg.block_bytes},
				{"fixedbufs", r.fio.points[size_t(best)].fixedbufs},
				{"batch", r.fio_cfg.batch}};
	else
		j["ceiling"] = nullptr;
	json fio = json::array();
	for (const FioPoint &p : r.fio.points) {
		json e = {{"queue_depth", p.queue_depth}, {"ok", p.ok}, {"fixedbufs", p.fixedbufs}};
		if (p.ok) {
			e["gbps"] = p.gbps;
			e["bw_bytes"] = p.bw_bytes;
			e["iops"] = p.iops;
			e["io_bytes"] = p.io_bytes;
			e["runtime_s"] = p.runtime_s;
			e["clat_mean_us"] = p.clat_mean_us;
			e["clat_p50_us"] = p.clat_p50_us;
			e["clat_p99_us"] = p.clat_p99_us;
			e["cpu_s_per_gb"] = p.cpu_s_per_gb;
			e["gbps_repeats"] = p.gbps_repeats;
		} else {
			e["error"] = p.error;
		}
		fio.push_back(e);
	}
	j["fio"] = fio;
	j["fio_status"] = !r.fio_enabled ? "disabled" : !r.fio.available ? "absent" : best >= 0 ? "ok" : "failed";
	j["fio_version"] = r.fio.version.empty() ? json(nullptr) : json(r.fio.version);
	j["fio_note"] = r.fio.note.empty() ? json(nullptr) : json(r.fio.note);

	json results = json::array();
	bool all_verified = true;
	for (const RunResult &x : r.results) {
		all_verified = all_verified && x.verified;
		auto frac = fraction_of_ceiling(r.fio, x.gbps);
		json lat_hist = json::array();
		for (uint64_t c : x.cmd_lat_hist)
			lat_hist.push_back(c);
		results.push_back({
			{"backend", x.backend.empty() ? x.requested_backend : x.backend},
			{"requested_backend", x.requested_backend},
			{"backend_mixed", x.backend_mixed},
			{"backend_reason", x.backend_reason},
			{"path", x.path.empty() ? json(nullptr) : json(x.path)},
			{"path_mixed", x.path_mixed},
			{"staged_copies", x.staged_copies},
			{"dest_note", x.dest_note.empty() ? json(nullptr) : json(x.dest_note)},
			{"workers", x.workers},
			{"queue_depth", x.queue_depth},
			{"cmd_bytes", x.cmd_bytes},
			{"object_bytes", x.object_bytes},
			{"objects", x.objects},
			{"batch_objects", x.batch_objects},
			{"repeat", x.repeat},
			{"gbps", x.gbps},
			{"gbps_repeats", x.gbps_repeats},
			{"objects_per_s", x.objects_per_s},
			{"fraction_of_ceiling", frac ? json(*frac) : json(nullptr)},
			{"cpu_s_per_gb", x.cpu_s_per_gb},
			{"p50_ms", x.p50_ms},
			{"p99_ms", x.p99_ms},
			{"max_ms", x.max_ms},
			{"mean_ms", x.mean_ms},
			{"load_seconds", x.load_seconds},
			{"peak_rss_mib", x.peak_rss_mib},
			{"verified", x.verified},
			{"mismatched_bytes", x.mismatched_bytes},
			{"failed_objects", x.failed_objects},
			{"failed_calls", x.failed_calls},
			{"error", x.error.empty() ? json(nullptr) : json(x.error)},
			{"commands", x.commands},
			{"eagain_retries", x.eagain_retries},
			{"short_resubmits", x.short_resubmits},
			{"retries", x.eagain_retries + x.short_resubmits},
			{"memlock_fallbacks", x.memlock_fallbacks},
			{"buffered_batches", x.buffered_batches},
			{"fallbacks", x.memlock_fallbacks + x.buffered_batches},
			{"cq_overflows", x.cq_overflows},
			{"inflight_peak", x.inflight_peak},
			{"cmd_lat_hist_us_log2", lat_hist},
		});
	}
	j["results"] = results;

	Ratios q = compute_ratios(r.results, r.fio);
	auto opt = [](const std::optional<double> &v) { return v ? json(*v) : json(nullptr); };
	auto which = [&](int i) {
		if (i < 0)
			return json(nullptr);
		const RunResult &x = r.results[size_t(i)];
		return json{{"backend", x.backend}, {"workers", x.workers}, {"queue_depth", x.queue_depth},
			    {"gbps", x.gbps}};
	};
	j["ratios"] = {
		{"uring_over_fio_best", opt(q.uring_over_fio)},
		{"uring_over_psync", opt(q.uring_over_psync)},
		{"threadpool_over_fio_best", opt(q.threadpool_over_fio)},
		{"threadpool_over_psync", opt(q.threadpool_over_psync)},
		{"fio_best_over_fio_qd1", opt(q.fio_best_over_qd1)},
		{"best_uring", which(q.best_uring)},
		{"best_threadpool", which(q.best_threadpool)},
		{"psync", which(q.psync)},
		{"target_over_fio", kTargetOverFio},
		{"target_over_psync", kTargetOverPsync},
		{"target_met", q.target_met ? json(*q.target_met) : json(nullptr)},
	};
	j["all_verified"] = all_verified;
	return j;
}

} // namespace kvblk_bench

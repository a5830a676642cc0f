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
	if (r.backend == "psync" || r.backend == "file-loop")
		return r.backend;
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
	if (bytes == 0)
		return "mixed";
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

std::optional<double> fraction_of_ceiling(const CeilingVerdict &v, double gbps)
{
	if (!v.found || v.gbps <= 0)
		return std::nullopt;
	return gbps / v.gbps;
}

Ratios compute_ratios(const std::vector<RunResult> &results, const CeilingVerdict &v,
		      const std::vector<SearchPoint> &search)
{
	Ratios q;
	auto better = [&](int cur, size_t i) { return cur < 0 || results[i].gbps > results[size_t(cur)].gbps; };
	for (size_t i = 0; i < results.size(); i++) {
		const RunResult &r = results[i];
		if (r.failed_calls || r.gbps <= 0)
			continue;
		if (r.backend == "uring" && better(q.best_uring, i))
			q.best_uring = int(i);
		if (r.backend == "threadpool" && better(q.best_threadpool, i))
			q.best_threadpool = int(i);
		if (r.backend == "psync" && better(q.psync, i))
			q.psync = int(i);
		if (r.backend == "file-loop" && better(q.file_loop, i))
			q.file_loop = int(i);
		if (r.backend == kBareUringName && better(q.bare_uring, i))
			q.bare_uring = int(i);
	}
	auto at = [&](int i) -> const RunResult & { return results[size_t(i)]; };
	if (q.best_uring >= 0) {
		q.uring_over_fio = fraction_of_ceiling(v, at(q.best_uring).gbps);
		if (q.psync >= 0)
			q.uring_over_psync = at(q.best_uring).gbps / at(q.psync).gbps;
		if (q.best_threadpool >= 0 && at(q.best_threadpool).cpu_s_per_gb > 0)
			q.uring_cpu_over_threadpool = at(q.best_uring).cpu_s_per_gb / at(q.best_threadpool).cpu_s_per_gb;
	}
	if (q.best_threadpool >= 0) {
		q.threadpool_over_fio = fraction_of_ceiling(v, at(q.best_threadpool).gbps);
		if (q.psync >= 0)
			q.threadpool_over_psync = at(q.best_threadpool).gbps / at(q.psync).gbps;
	}
	if (q.file_loop >= 0)
		q.file_loop_over_fio = fraction_of_ceiling(v, at(q.file_loop).gbps);
	if (q.bare_uring >= 0) {
		q.bare_over_fio = fraction_of_ceiling(v, at(q.bare_uring).gbps);
		if (q.best_uring >= 0)
			q.uring_over_bare = at(q.best_uring).gbps / at(q.bare_uring).gbps;
	}
	double qd1 = 0;
	for (const SearchPoint &p : search)
		if (p.pt.ok && p.pt.knobs.in_flight() == 1)
			qd1 = std::max(qd1, p.pt.gbps);
	if (v.measured && qd1 > 0)
		q.fio_best_over_qd1 = v.gbps / qd1;
	return q;
}

namespace {

// "4 KiB pages ..." or "transparent huge pages asked for: 100% given (..)".
std::string host_pages_str(const Report &r)
{
	if (!r.host_huge)
		return "4 KiB pages (--host-pages 4k)";
	const double pct = r.host_bytes ? 100.0 * double(r.host_thp_bytes) / double(r.host_bytes) : 0;
	return fmt::format("transparent huge pages asked for: {:.0f}% given ({} of {} MiB){}", pct,
			   r.host_thp_bytes >> 20, r.host_bytes >> 20,
			   pct < 90 ? "; the rest 4 KiB pages, which some devices read slower (see fio's buffers)" : "");
}

std::string ceiling_cell(const CeilingVerdict &v, double gbps)
{
	if (!v.measured)
		return "-";
	if (!v.found)
		return "not found";
	return fmt::format("{:.2f}", gbps / v.gbps);
}

} // namespace

std::string render_text(const Report &r)
{
	std::string o;
	auto line = [&](const std::string &s) {
		o += s;
		o += '\n';
	};
	const Workload &wl = *r.wl;
	const uint64_t total = wl.total_bytes();

	line(fmt::format("kvblk-bench: libkvblk {}, {} ({} CPUs, kernel {})", r.host.libkvblk_version, r.host.hostname,
			 r.host.cpus, r.host.kernel));
	std::string where = r.host.target_kind == "file"
				    ? fmt::format("regular file{} on {}{}", wl.files ? "s" : "", r.host.filesystem,
						  r.host.block_device.empty() ? "" : ", " + r.host.block_device)
				    : "block device";
	line(fmt::format("Workload {}: {} objects x {} = {:.3f} GB, {} order{}", wl.name, wl.objects(),
			 size_str(wl.mixed ? 0 : wl.length[0]), double(total) / kGB, order_name(wl.order_kind),
			 wl.order_kind == Order::random || wl.mixed ? fmt::format(" (seed {})", wl.seed) : ""));
	line(fmt::format("Store: {} ({}), {}", wl.where(), where,
			 r.store_state.created
				 ? fmt::format("written at {:.2f} GB/s ({})", r.store_state.write_gbps, r.store_state.reason)
				 : fmt::format("reused ({})", r.store_state.reason)));
	line(fmt::format("Loads: {} objects per call, commands of at most {}, O_DIRECT, {} batches loaded back to "
			 "back, then verified",
			 std::min<uint64_t>(r.run.batch_objects, wl.objects()), size_str(r.run.cmd_bytes),
			 r.run.window_batches));
	line(r.run.dest ? "Destination: " + r.run.dest->describe()
			: fmt::format("Destination: host memory, {}", host_pages_str(r)));
	line(fmt::format("Rounds: {} (fio finalists and settings alternate: fio, setting, fio, setting, ..., each round starting one leg later){}",
			 r.run.repeat, r.run.repeat > 1 ? "; medians shown" : ""));
	line("");

	// The ceiling: the search, the finalists, the verdict.
	const CeilingVerdict &v = r.verdict;
	if (!r.fio_enabled) {
		line("Device ceiling: not measured (--no-fio)");
	} else if (!r.fio_available) {
		line(fmt::format("Device ceiling: absent: {}", r.fio_note));
	} else {
		size_t ok = 0;
		for (const SearchPoint &p : r.search.points())
			ok += p.pt.ok;
		line(fmt::format("Ceiling search ({}): {} fio points ({} ok) in {:.1f} s; {}, direct=1, replaying the "
				 "commands of one kvblk pass in its order",
				 r.search_mode == SearchMode::thorough ? "thorough" : "quick", r.search.points().size(), ok,
				 r.search_seconds, r.fio_version.empty() ? "fio" : r.fio_version));
		line(fmt::format("  fio's buffers: {}: {}",
				 r.search.spec().hugepages ? "huge pages" : "4 KiB pages (malloc)",
				 r.fio_hugepages_note.empty() ? "huge pages not asked for (--no-fio-hugepages)"
							      : r.fio_hugepages_note));
		if (ok)
			line(fmt::format("  Search points: one run each, median {:.3f} GB/s (the stage bests below are "
					 "the highest of several such runs)",
					 r.search.median_point_gbps()));
		size_t w = 44; // the names' column: as wide as the longest
		for (const FioPoint &p : r.finals.points)
			w = std::max(w, p.knobs.name().size());
		for (const FioPoint &p : r.finals.points) {
			if (p.ok)
				line(fmt::format("  {:<{}} {:8.3f} GB/s  clat p50 {:9.1f} us  p99 {:9.1f} us  CPU {:.3f} s/GB",
						 p.knobs.name(), w, p.gbps, p.clat_p50_us, p.clat_p99_us, p.cpu_s_per_gb) +
				     runs_str(p.gbps_repeats));
			else
				line(fmt::format("  {:<{}} failed: {}", p.knobs.name(), w, p.error));
		}
		for (const StageBest &b : check_stage_bests(r.search, r.finals)) {
			const SearchPoint &p = r.search.points()[b.point];
			if (b.reproduced || b.remeasured <= 0)
				continue;
			line(fmt::format("  Search stage {}: best {} at {:.3f} GB/s (one short run) NOT reproduced: {} {:.3f} "
					 "GB/s",
					 p.stage, p.pt.knobs.name(), p.pt.gbps,
					 b.final >= 0 ? "its median in the rounds" : "not a finalist; the ceiling",
					 b.remeasured));
		}
		if (v.measured && v.found)
			line(fmt::format("  Ceiling: {:.3f} GB/s (fio {}, median of {})", v.gbps,
					 r.finals.points[size_t(v.best)].knobs.name(),
					 r.finals.points[size_t(v.best)].gbps_repeats.size()));
		else if (v.measured)
			line(fmt::format("  Ceiling: NOT FOUND: a kvblk setting reads {:.2f} x fio's best ({:.3f} GB/s, "
					 "fio {}); above {:.2f} x the search did not find the device's ceiling, so no "
					 "ratio against it is printed",
					 v.worst_ratio, v.gbps, r.finals.points[size_t(v.best)].knobs.name(), kCeilingSlack));
		else
			line("  Ceiling: none: every fio finalist failed");
		if (!r.fio_note.empty())
			line(fmt::format("  Note: {}", r.fio_note));
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
		line(fmt::format("{:<11} {:<6} {:>7} {:>5} {:>8} {:>8} {:>8.3f} {:>10.1f} {:>9.2f} {:>9.2f} "
				 "{:>9.3f} {:>8.1f} {:>9} {:>8}",
				 backend, x.path_mixed ? "mixed" : x.path.empty() ? "-" : x.path, x.workers, x.queue_depth,
				 x.objects, x.object_bytes ? fmt::format("{:.2f}", double(x.object_bytes) / kMiB) : "mixed",
				 x.gbps, x.objects_per_s, x.p50_ms, x.p99_ms, x.cpu_s_per_gb, x.peak_rss_mib,
				 ceiling_cell(v, x.gbps), x.verified ? "yes" : "NO"));
	}
	line(std::string(hdr.size(), '='));

	// What the table cannot show.
	for (size_t i : v.over)
		line(fmt::format("! {}: {:.3f} GB/s is {:.2f} x fio's best: ceiling not found", setting_name(r.results[i]),
				 r.results[i].gbps, r.results[i].gbps / v.gbps));
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

	// The ratios.
	Ratios q = compute_ratios(r.results, v, r.search.points());
	line("");
	line("Ratios (this run):");
	auto gb = [&](int i) { return r.results[size_t(i)].gbps; };
	auto vs_ceiling = [&](const std::optional<double> &f) {
		if (!v.measured)
			return std::string("- (no ceiling)");
		return f ? fmt::format("{:.2f}", *f) : std::string("ceiling not found");
	};
	const std::string ceiling_str =
		v.measured ? fmt::format("fio {:.3f} GB/s", v.gbps) : std::string("no ceiling");
	if (q.best_uring >= 0) {
		line(fmt::format("  uring / fio best      = {}   ({} {:.3f} GB/s vs {})", vs_ceiling(q.uring_over_fio),
				 setting_name(r.results[size_t(q.best_uring)]), gb(q.best_uring), ceiling_str));
		line(fmt::format("  uring / psync         = {}   ({} vs {})", fmt_opt(q.uring_over_psync),
				 setting_name(r.results[size_t(q.best_uring)]),
				 q.psync >= 0 ? fmt::format("psync {:.3f} GB/s", gb(q.psync)) : "no psync run"));
	}
	if (q.bare_uring >= 0) {
		if (q.uring_over_bare)
			line(fmt::format("  uring / bare io_uring = {}   ({} vs bare-uring QD {} {:.3f} GB/s: kvblk's own "
					 "cost, same commands into the same buffer)",
					 fmt_opt(q.uring_over_bare), setting_name(r.results[size_t(q.best_uring)]),
					 r.results[size_t(q.bare_uring)].queue_depth, gb(q.bare_uring)));
		line(fmt::format("  bare io_uring / fio best = {}   (the destination: this run's {} MiB window "
				 "against fio's buffers of iodepth x block size, used again and again)",
				 vs_ceiling(q.bare_over_fio), r.host_bytes >> 20));
	}
	if (q.best_threadpool >= 0) {
		line(fmt::format("  threadpool / fio best = {}", vs_ceiling(q.threadpool_over_fio)));
		line(fmt::format("  threadpool / psync    = {}", fmt_opt(q.threadpool_over_psync)));
	}
	if (q.uring_cpu_over_threadpool)
		line(fmt::format("  uring CPU / threadpool CPU = {}   (CPU s/GB {:.3f} vs {:.3f})",
				 fmt_opt(q.uring_cpu_over_threadpool), r.results[size_t(q.best_uring)].cpu_s_per_gb,
				 r.results[size_t(q.best_threadpool)].cpu_s_per_gb));
	if (q.file_loop >= 0)
		line(fmt::format("  file-loop / fio best  = {}   (one chunk at a time, as LMCache's local disk today)",
				 vs_ceiling(q.file_loop_over_fio)));
	if (q.fio_best_over_qd1)
		line(fmt::format("  fio best / fio at 1 in flight = {}   (what queue depth alone gains on this device)",
				 fmt_opt(q.fio_best_over_qd1)));
	bool all_verified = true;
	for (const RunResult &x : r.results)
		all_verified = all_verified && x.verified;
	line(fmt::format("Every object verified: {}", all_verified ? "yes" : "NO"));
	line("GB = 1e9 bytes. GB/s and CPU s/GB cover the back-to-back load calls, not the verification;");
	line("CPU is the whole process (library threads included; fio: wait4() of its process); RSS is the peak "
	     "resident set of each setting.");
	return o;
}

namespace {

nlohmann::json knobs_json(const FioKnobs &k)
{
	return {{"engine", k.engine},	      {"iodepth", k.iodepth},	  {"numjobs", k.numjobs},
		{"in_flight", k.in_flight()}, {"fixedbufs", k.fixedbufs}, {"registerfiles", k.registerfiles},
		{"spread", k.spread},	      {"lean", k.lean},		  {"hugepages", k.hugepages},
		{"name", k.name()}};
}

nlohmann::json fio_point_json(const FioPoint &p)
{
	nlohmann::json e = {{"config", knobs_json(p.knobs)}, {"ok", p.ok}};
	if (p.ok) {
		e["gbps"] = p.gbps;
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
	return e;
}

} // namespace

nlohmann::json render_json(const Report &r)
{
	using nlohmann::json;
	const Workload &wl = *r.wl;
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
		{"path", wl.where()},
		{"kind", wl.files ? "files" : r.host.target_kind},
		{"filesystem", r.host.target_kind == "file" ? json(r.host.filesystem) : json(nullptr)},
		{"block_device", r.host.block_device.empty() ? json(nullptr) : json(r.host.block_device)},
		{"rotational", r.host.rotational < 0 ? json(nullptr) : json(r.host.rotational == 1)},
		{"capacity_bytes", r.store_state.capacity},
	};
	j["workload"] = {
		{"name", wl.name},
		{"objects", wl.objects()},
		{"object_bytes", wl.mixed ? json(nullptr) : json(wl.length[0])},
		{"mixed_sizes", wl.mixed},
		{"total_bytes", wl.total_bytes()},
		{"order", order_name(wl.order_kind)},
		{"seed", wl.seed},
		{"one_file_per_object", wl.files},
	};
	j["store"] = {
		{"objects", wl.objects()},
		{"total_bytes", wl.total_bytes()},
		{"layout", wl.layout_id()},
		{"pattern", kPatternName},
		{"pattern_version", kPatternVersion},
		{"action", r.store_state.created ? "created" : "reused"},
		{"reason", r.store_state.reason},
		{"write_gbps", r.store_state.created ? json(r.store_state.write_gbps) : json(nullptr)},
	};
	j["config"] = {
		{"cmd_bytes", r.run.cmd_bytes},
		{"batch_objects", r.run.batch_objects},
		{"window_batches", r.run.window_batches},
		{"repeat", r.run.repeat},
		{"dest", r.run.dest ? r.run.dest->name() : std::string("host")},
		{"host_pages", r.host_huge ? "huge" : "4k"},
		{"host_bytes", r.host_bytes},
		{"host_thp_bytes", r.host_thp_bytes},
		{"cuda_runtime", dynamic_cast<const CudaWindow *>(r.run.dest)
					 ? json(static_cast<const CudaWindow *>(r.run.dest)->runtime())
					 : json(nullptr)},
	};

	const CeilingVerdict &v = r.verdict;
	json points = json::array();
	for (const SearchPoint &p : r.search.points()) {
		json e = fio_point_json(p.pt);
		e["stage"] = p.stage;
		points.push_back(e);
	}
	json finals = json::array();
	for (const FioPoint &p : r.finals.points)
		finals.push_back(fio_point_json(p));
	json stage_bests = json::array();
	for (const StageBest &b : check_stage_bests(r.search, r.finals)) {
		const SearchPoint &p = r.search.points()[b.point];
		stage_bests.push_back({{"stage", p.stage},
				       {"config", knobs_json(p.pt.knobs)},
				       {"search_gbps", p.pt.gbps},
				       {"finalist", b.final >= 0},
				       {"remeasured_gbps", b.remeasured > 0 ? json(b.remeasured) : json(nullptr)},
				       {"reproduced", b.reproduced}});
	}
	j["search"] = {
		{"mode", r.search_mode == SearchMode::thorough ? "thorough" : "quick"},
		{"points_run", r.search.points().size()},
		{"seconds", r.search_seconds},
		{"depths", r.search.spec().depths},
		{"max_jobs", r.search.spec().max_jobs},
		{"engines", r.search.spec().engines},
		{"points", points},
		{"finalists", finals},
		{"spread_jobs", r.search.spec().spread_jobs},
		{"stage_bests", stage_bests},
		{"median_point_gbps", r.search.median_point_gbps()},
		{"hugepages", r.search.spec().hugepages},
		{"hugepages_note", r.fio_hugepages_note.empty() ? json(nullptr) : json(r.fio_hugepages_note)},
	};
	j["ceiling"] = {
		{"status", !r.fio_enabled	  ? "disabled"
			   : !r.fio_available ? "absent"
			   : !v.measured      ? "failed"
			   : v.found	      ? "found"
					      : "not_found"},
		{"gbps", v.measured ? json(v.gbps) : json(nullptr)},
		{"config", v.measured ? knobs_json(r.finals.points[size_t(v.best)].knobs) : json(nullptr)},
		{"rounds", v.measured ? json(r.finals.points[size_t(v.best)].gbps_repeats.size()) : json(nullptr)},
		{"cmd_bytes", r.run.cmd_bytes},
		{"slack", kCeilingSlack},
		{"worst_ratio", v.measured ? json(v.worst_ratio) : json(nullptr)},
		{"fio_version", r.fio_version.empty() ? json(nullptr) : json(r.fio_version)},
		{"note", r.fio_note.empty() ? json(nullptr) : json(r.fio_note)},
	};

	json results = json::array();
	bool all_verified = true;
	for (size_t i = 0; i < r.results.size(); i++) {
		const RunResult &x = r.results[i];
		all_verified = all_verified && x.verified;
		auto frac = fraction_of_ceiling(v, x.gbps);
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
			{"in_flight", x.backend == "uring" || x.backend == "uring_cmd" || x.backend == "kmod"
					      ? x.workers * x.queue_depth
					      : x.queue_depth},
			{"cmd_bytes", x.cmd_bytes},
			{"object_bytes", x.object_bytes ? json(x.object_bytes) : json(nullptr)},
			{"objects", x.objects},
			{"total_bytes", x.total_bytes},
			{"batch_objects", x.batch_objects},
			{"repeat", x.repeat},
			{"gbps", x.gbps},
			{"gbps_repeats", x.gbps_repeats},
			{"objects_per_s", x.objects_per_s},
			{"fraction_of_ceiling", frac ? json(*frac) : json(nullptr)},
			{"above_ceiling", std::find(v.over.begin(), v.over.end(), i) != v.over.end()},
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

	Ratios q = compute_ratios(r.results, v, r.search.points());
	auto opt = [](const std::optional<double> &x) { return x ? json(*x) : json(nullptr); };
	auto which = [&](int i) {
		if (i < 0)
			return json(nullptr);
		const RunResult &x = r.results[size_t(i)];
		return json{{"backend", x.backend}, {"workers", x.workers}, {"queue_depth", x.queue_depth},
			    {"gbps", x.gbps}, {"cpu_s_per_gb", x.cpu_s_per_gb}};
	};
	j["ratios"] = {
		{"uring_over_fio_best", opt(q.uring_over_fio)},
		{"uring_over_psync", opt(q.uring_over_psync)},
		{"threadpool_over_fio_best", opt(q.threadpool_over_fio)},
		{"threadpool_over_psync", opt(q.threadpool_over_psync)},
		{"uring_cpu_over_threadpool_cpu", opt(q.uring_cpu_over_threadpool)},
		{"file_loop_over_fio_best", opt(q.file_loop_over_fio)},
		{"fio_best_over_fio_qd1", opt(q.fio_best_over_qd1)},
		{"uring_over_bare_uring", opt(q.uring_over_bare)},
		{"bare_uring_over_fio_best", opt(q.bare_over_fio)},
		{"bare_uring", which(q.bare_uring)},
		{"best_uring", which(q.best_uring)},
		{"best_threadpool", which(q.best_threadpool)},
		{"psync", which(q.psync)},
		{"file_loop", which(q.file_loop)},
	};
	j["all_verified"] = all_verified;
	return j;
}

} // namespace kvblk_bench

// SPDX-License-Identifier: MIT
//
// kvblk-bench: load a workload of KV-cache-sized objects with every libkvblk
// backend, verify every byte, and compare with the device ceiling: the best
// of a search over fio configurations replaying the same commands in the
// same order. See docs/kvblk-bench.md.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <kvblk/kvblk.h>

#include "ceiling.hpp"
#include "cli.hpp"
#include "engine.hpp"
#include "cuda_dest.hpp"
#include "fio.hpp"
#include "hugepages.hpp"
#include "p2pdma_dest.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "store.hpp"
#include "workload.hpp"

using namespace kvblk_bench;
using namespace kvblk_tools;

namespace {

enum Exit {
	kExitOk = 0,
	kExitFailed = 1,    // a load failed or an object did not verify
	kExitSetup = 2,	    // bad arguments, store cannot be prepared, ...
	kExitNoCeiling = 3, // a kvblk figure above 1.05 x fio's best: the ceiling was not found
};

void err(const std::string &msg)
{
	std::fprintf(stderr, "kvblk-bench: %s\n", msg.c_str());
}

// A whole number above 0: the message names the value (CLI11's PositiveNumber printed the
// range of a double, 0 to 1.8e308).
const CLI::Validator kPositive(
	[](std::string &v) {
		char *end = nullptr;
		errno = 0;
		const unsigned long long x = v.empty() || v[0] == '-' ? 0 : std::strtoull(v.c_str(), &end, 10);
		if (errno || !end || *end || x == 0)
			return "must be a whole number above 0, not '" + v + "'";
		return std::string();
	},
	"N>0");

// The first of @list outside [lo, hi], as one usage line; "" when all are in.
std::string out_of_range(const char *opt, const std::vector<uint32_t> &list, uint32_t lo, uint32_t hi)
{
	for (uint32_t v : list)
		if (v < lo || v > hi)
			return fmt::format("{} {}: must be {} to {}", opt, v, lo, hi);
	return {};
}

// Writes the replay logs of one pass for each number of fio jobs the search
// may use into a temporary directory, removed with the object.
class ReplayLogs {
public:
	ReplayLogs() = default;
	ReplayLogs(const ReplayLogs &) = delete;
	ReplayLogs &operator=(const ReplayLogs &) = delete;
	~ReplayLogs()
	{
		for (const auto *m : {&replays_, &spread_})
			for (const auto &[jobs, r] : *m)
				for (const std::string &f : r.logs)
					::unlink(f.c_str());
		if (!dir_.empty())
			::rmdir(dir_.c_str());
	}

	// @job_counts: contiguous slices of the pass (split_jobs()); @spread_counts: a job per
	// object in flight (object_job_commands()).
	bool write(const Workload &wl, uint64_t cmd_bytes, const std::vector<uint32_t> &job_counts,
		   const std::vector<uint32_t> &spread_counts, std::string &why)
	{
		char tmpl[] = "/tmp/kvblk-replay.XXXXXX";
		if (!mkdtemp(tmpl)) {
			why = fmt::format("cannot create a directory for fio's replay logs: {}", std::strerror(errno));
			return false;
		}
		dir_ = tmpl;
		const std::vector<Command> cmds = pass_commands(wl, cmd_bytes);
		uint64_t bytes = 0;
		for (const Command &c : cmds)
			bytes += c.length;
		for (uint32_t jobs : job_counts) {
			FioReplay &r = replays_[jobs];
			r.bytes = bytes;
			r.commands = cmds.size();
			uint32_t j = 0;
			for (auto [first, count] : split_jobs(cmds.size(), jobs)) {
				r.logs.push_back(fmt::format("{}/jobs{}-{}.log", dir_, jobs, j++));
				std::ofstream out(r.logs.back());
				if (!write_iolog(out, wl, cmds, first, count, why))
					return false;
			}
		}
		for (uint32_t jobs : spread_counts) {
			FioReplay &r = spread_[jobs];
			r.bytes = bytes;
			r.commands = cmds.size();
			for (uint32_t j = 0; j < jobs; j++) {
				const std::vector<Command> mine = object_job_commands(wl, cmd_bytes, j, jobs);
				r.logs.push_back(fmt::format("{}/objects{}-{}.log", dir_, jobs, j));
				std::ofstream out(r.logs.back());
				if (!write_iolog(out, wl, mine, 0, mine.size(), why))
					return false;
			}
		}
		return true;
	}
	[[nodiscard]] const std::map<uint32_t, FioReplay> &replays() const noexcept { return replays_; }
	[[nodiscard]] const std::map<uint32_t, FioReplay> &spread() const noexcept { return spread_; }

private:
	std::string dir_;
	std::map<uint32_t, FioReplay> replays_, spread_;
};

// --engine L,C,K: the engine workload (engine.hpp) on the first L x C objects of the store, with
// the first backend of --backends (first ring count and queue depth). Exit 0 when every leg
// verified, kExitFailed otherwise; the two goals are printed, not enforced.
int run_engine(const Workload &wl, const std::vector<uint32_t> &shape, const std::vector<std::string> &backends,
	       const std::vector<uint32_t> &rings, const std::vector<uint32_t> &qds, uint64_t cmd_bytes,
	       unsigned repeat, const std::string &output, bool quiet)
{
	EngineConfig ec;
	ec.path = wl.paths[0];
	ec.layers = shape[0];
	ec.chunks = shape[1];
	ec.ahead = shape[2];
	if (wl.files || wl.mixed || !ec.layers || !ec.chunks || !ec.ahead ||
	    uint64_t(ec.layers) * ec.chunks > wl.objects()) {
		err(fmt::format("--engine {},{},{}: needs L, C, K > 0 and L x C <= the {} objects of a one-store "
				"workload of equal sizes",
				ec.layers, ec.chunks, ec.ahead, wl.objects()));
		return kExitSetup;
	}
	ec.object_bytes = wl.length[0];
	ec.backend = kvblk_backend_from_name(backends.empty() ? "uring" : backends[0].c_str());
	if (ec.backend < 0) {
		err(fmt::format("unknown backend '{}'", backends[0]));
		return kExitSetup;
	}
	ec.workers = rings.empty() ? 0 : rings[0];
	ec.queue_depth = qds.empty() ? 0 : qds[0];
	ec.cmd_bytes = cmd_bytes;
	ec.rounds = std::max(repeat, 3u);
	if (!quiet)
		err(fmt::format("engine workload: {} layers x {} chunks of {} bytes, {} in flight, {} rounds", ec.layers,
				ec.chunks, ec.object_bytes, ec.ahead, ec.rounds));
	EngineReport er;
	const int r = run_engine_workload(ec, er);
	if (output == "json") {
		nlohmann::json legs = nlohmann::json::array();
		for (const EngineLeg &l : er.legs)
			legs.push_back({{"name", l.name}, {"total_ms", l.total_ms}, {"first_layer_ms", l.first_layer_ms},
					{"gbps", l.gbps}, {"cpu_s_per_gb", l.cpu_s_per_gb},
					{"total_ms_rounds", l.total_ms_rounds}, {"verified", l.verified},
					{"error", l.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.error)}});
		nlohmann::json j = {{"workload", "engine"}, {"path", ec.path}, {"layers", ec.layers},
				    {"chunks", ec.chunks}, {"ahead", ec.ahead}, {"object_bytes", ec.object_bytes},
				    {"bytes", er.bytes}, {"backend", er.backend}, {"async", er.async},
				    {"rounds", ec.rounds}, {"legs", legs},
				    {"pipeline_vs_all", er.pipeline_vs_all}, {"first_vs_share", er.first_vs_share},
				    {"goals", {{"pipeline_le_1_05_all", er.pipeline_ok},
					       {"first_layer_le_1_5_share", er.first_layer_ok}}}};
		std::cout << j.dump(2) << "\n";
	} else {
		std::cout << fmt::format("Engine workload: {} layers x {} chunks x {} bytes ({:.1f} MiB), {} layers in "
					 "flight, backend {} ({} async), medians of {} rounds\n",
					 ec.layers, ec.chunks, ec.object_bytes, double(er.bytes) / kMiB, ec.ahead,
					 er.backend, er.async, ec.rounds);
		std::cout << fmt::format("{:<10} {:>10} {:>14} {:>8} {:>9} {}\n", "Leg", "Total ms", "1st layer ms",
					 "GB/s", "CPU s/GB", "Verified");
		for (const EngineLeg &l : er.legs)
			std::cout << fmt::format("{:<10} {:>10.2f} {:>14.2f} {:>8.3f} {:>9.3f} {}\n", l.name, l.total_ms,
						 l.first_layer_ms, l.gbps, l.cpu_s_per_gb,
						 l.verified ? "yes" : "NO: " + l.error);
		std::cout << fmt::format("  pipeline / all = {:.3f} (goal <= 1.05: {});  first layer / (all / L) = "
					 "{:.3f} (goal <= 1.5: {})\n",
					 er.pipeline_vs_all, er.pipeline_ok ? "pass" : "MISS", er.first_vs_share,
					 er.first_layer_ok ? "pass" : "MISS");
	}
	return r < 0 ? kExitFailed : kExitOk;
}

} // namespace

int main(int argc, char **argv)
{
	CLI::App app{"kvblk-bench: load a workload of objects with each libkvblk backend, verify every byte, and\n"
		     "compare GB/s with the device ceiling: the best of a search over fio configurations that\n"
		     "replay the same commands in the same order. GB = 1e9 bytes. Exit status: 0 all verified,\n"
		     "1 a load failed or an object did not verify, 2 setup error, 3 ceiling not found (a kvblk\n"
		     "figure above 1.05 x fio's best; 0 with --allow-no-ceiling).",
		     "kvblk-bench"};
	app.get_formatter()->column_width(36);

	std::string workload = "large", order_opt, path, device;
	uint64_t objects = 0, object_mib = 0, object_kib = 0, seed = 1;
	bool overwrite_device = false;
	std::vector<std::string> backends = {"psync", "threadpool", "uring", "bare-uring"};
	std::vector<uint32_t> workers, threads = {8}, rings = {1}, qds = {32, 64}, fio_qds;
	// psync: the threadpool backend's counterpart (a job per worker, one
	// command in flight each); the search varies its jobs, not its depth.
	std::vector<std::string> fio_engines = {"io_uring", "libaio", "psync"};
	uint64_t cmd_bytes = KVBLK_DEFAULT_MAX_CMD_BYTES;
	uint32_t batch_objects = 16, fio_max_jobs = 0;
	unsigned repeat = 3, fio_runtime = 10;
	uint64_t buffer_mib = 4096;
	bool no_fio = false, allow_no_ceiling = false, quiet = false, keep = false, recreate = false;
	bool no_fio_hugepages = false, reserve_hugepages = false;
	std::string output = "normal", dest = "host", search_mode = "quick", host_pages = "huge";
	int latency = 0;

	const std::string g_store = "Workload and store", g_loads = "Loads", g_fio = "Ceiling (fio search)",
			  g_out = "Output";
	std::string preset_names;
	for (const WorkloadPreset &p : presets())
		preset_names += fmt::format("{}{}: {}", preset_names.empty() ? "" : "; ", p.name, p.what);
	app.add_option("--workload", workload, "Preset: " + preset_names)
		->check(CLI::IsMember({"large", "small", "mixed", "chunks"}))
		->capture_default_str()
		->group(g_store);
	auto *n_opt = app.add_option("-n,--objects", objects, "Objects (default: the workload's)")
			      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 24))
			      ->group(g_store);
	auto *mib = app.add_option("-s,--object-mib", object_mib, "Object size in MiB (default: the workload's)")
			    ->check(kPositive)
			    ->group(g_store);
	auto *kib = app.add_option("--object-kib", object_kib, "Object size in KiB instead, e.g. 256")
			    ->excludes(mib)
			    ->check(kPositive)
			    ->group(g_store);
	auto *order_o = app.add_option("--order", order_opt, "Load order: file or random (default: the workload's)")
				->check(CLI::IsMember({"file", "random"}))
				->group(g_store);
	app.add_option("--seed", seed, "Seed of the random order and of mixed sizes")->capture_default_str()->group(g_store);
	auto *path_opt = app.add_option("-f,--path", path,
					"Store file (created if absent) or block device; chunks: PATH.chunks/ "
					"(default ./kvblk-store.bin, .bin.small, .bin.mixed)")
				 ->group(g_store);
	app.add_option("--device", device, "Store on this block device: read and verify only, unless --i-know-this-overwrites")
		->excludes(path_opt)
		->group(g_store);
	app.add_flag("--i-know-this-overwrites", overwrite_device,
		     "Allow writing the store onto a block device (destroys its first bytes)")
		->group(g_store);
	auto *keep_opt = app.add_flag("--keep", keep, "Use the existing store as is; fail if it does not match")->group(g_store);
	app.add_flag("--recreate", recreate, "Rewrite the store even if it matches")->excludes(keep_opt)->group(g_store);

	app.add_option("--backends", backends,
		       "Backends to run, in order: psync, threadpool, uring (auto, ...); bare-uring: no libkvblk, "
		       "one io_uring at the largest --qd reading the same commands into the same buffer, the "
		       "reference for kvblk's own cost")
				     ->delimiter(',')
				     ->capture_default_str()
				     ->group(g_loads);
	auto *w_opt = app.add_option("--workers", workers, "Sets both --threads and --rings")->delimiter(',')->group(g_loads);
	app.add_option("--threads", threads, "threadpool thread counts to sweep")
		->delimiter(',')
		->capture_default_str()
		->excludes(w_opt)
		->group(g_loads);
	app.add_option("--rings", rings, "uring ring counts (one thread each) to sweep")
		->delimiter(',')
		->capture_default_str()
		->excludes(w_opt)
		->group(g_loads);
	app.add_option("--qd", qds, "uring queue depths (per ring) to sweep")->delimiter(',')->capture_default_str()->group(g_loads);
	app.add_option("--cmd-size", cmd_bytes, "Largest command: kvblk max_cmd_bytes and fio's commands (128K, 1M, ...)")
		->transform(CLI::AsSizeValue(false))
		->capture_default_str()
		->group(g_loads);
	app.add_option("--batch-objects", batch_objects, "Objects per kvblk_load_many() call")
		->capture_default_str()
		->check(CLI::Range(1u, KVBLK_MAX_DESCS_LIMIT))
		->group(g_loads);
	app.add_option("--buffer-mib", buffer_mib,
		       "Host memory loaded back to back before it is verified (whole batches, at least one)")
		->capture_default_str()
		->check(kPositive)
		->group(g_loads);
	app.add_option("--host-pages", host_pages,
		       "Page size of the host buffer loads go to: huge (transparent huge pages where the kernel "
		       "gives them, as fio's buffers get huge pages) or 4k")
		->check(CLI::IsMember({"huge", "4k"}))
		->capture_default_str()
		->group(g_loads);
	app.add_option("--dest", dest,
		       "Load into host memory; into CUDA device memory (staged through pinned host buffers, "
		       "or P2P with kvblk.ko); or into P2PDMA memory, p2pdma:FILE with FILE a "
		       "/sys/bus/pci/devices/<bdf>/p2pmem/allocate file (a device BAR). The path is reported")
		->check([](const std::string &v) {
			return v == "host" || v == "cuda" || (v.rfind("p2pdma:", 0) == 0 && v.size() > 7)
				       ? std::string()
				       : std::string("must be host, cuda or p2pdma:FILE");
		})
		->capture_default_str()
		->group(g_loads);
	app.add_option("--repeat", repeat, "Rounds (fio finalists and settings alternating); medians are reported")
		->capture_default_str()
		->check(CLI::Range(1u, 1000u))
		->group(g_loads);

	app.add_option("--search", search_mode, "Ceiling search: quick (depths x4, 2 finalists) or thorough (x2, 3)")
		->check(CLI::IsMember({"quick", "thorough"}))
		->capture_default_str()
		->group(g_fio);
	app.add_option("--fio-qd", fio_qds, "Depths of the search's first stage instead of the mode's (1,4,16,64 / 1,2,..,128); no point goes outside their range")
		->delimiter(',')
		->group(g_fio);
	app.add_option("--fio-engines", fio_engines, "fio engines to search")
		->delimiter(',')
		->check(CLI::IsMember({"io_uring", "libaio", "psync"}))
		->capture_default_str()
		->group(g_fio);
	app.add_option("--fio-max-jobs", fio_max_jobs, "Most fio jobs to try (default: the most workers of --threads/--rings)")
		->check(CLI::Range(1u, 64u))
		->group(g_fio);
	app.add_option("--fio-runtime", fio_runtime,
		       "Cap in seconds per fio run, search point and finalist alike (each also ends after one pass)")
		->capture_default_str()
		->check(CLI::Range(1u, 3600u))
		->group(g_fio);
	app.add_flag("--allow-no-ceiling", allow_no_ceiling,
		     "Exit 0, not 3, when a kvblk figure is above 1.05 x fio's best (still printed as ceiling not found)")
		->group(g_fio);
	app.add_flag("--no-fio-hugepages", no_fio_hugepages,
		     "fio's buffers in 4 KiB pages only (default: huge pages where enough are free, see "
		     "--reserve-hugepages)")
		->group(g_fio);
	app.add_flag("--reserve-hugepages", reserve_hugepages,
		     "As root: grow vm.nr_hugepages by what fio's buffers need for the run and set it back at "
		     "the end (default: use only huge pages already free)")
		->group(g_fio);
	app.add_flag("--no-fio", no_fio, "Skip the ceiling")->group(g_fio);

	const std::string g_engine = "Engine workload";
	std::vector<uint32_t> engine_shape; // L,C,K
	app.add_option("--engine", engine_shape,
		       "Engine workload instead of the settings and the ceiling: L,C,K = L layers of C objects "
		       "of the store, K layers in flight (pipeline vs a blocking call per layer vs one call for "
		       "all vs a serial per-chunk loop); e.g. 32,16,4")
		->delimiter(',')
		->expected(3)
		->group(g_engine);
	app.add_option("-o,--output", output, "normal: table; json: one JSON document on stdout")
		->check(CLI::IsMember({"normal", "json"}))
		->capture_default_str()
		->group(g_out);
	app.add_flag("-q,--quiet", quiet, "No progress bars or notes on stderr (errors still)")->group(g_out);
	app.add_flag("-L", latency, "Batch-latency percentiles per setting; -LL adds the library's command histogram")
		->group(g_out);

	// Usage errors: one line naming the option and the value, exit 2 (the man page's).
	if (auto rc = kvblk_tools::parse_cli(app, argc, argv, [](const CLI::ParseError &e) {
		    err(e.what());
		    return kExitSetup;
	    }))
		return *rc;

	if (!KVBLK_CHECK_VERSION()) {
		err(fmt::format("libkvblk {} is not compatible with headers {}.{}", kvblk_version(),
				KVBLK_VERSION_MAJOR, KVBLK_VERSION_MINOR));
		return kExitSetup;
	}
	if (!workers.empty())
		threads = rings = workers;
	// Every setting is checked before anything runs: a bad one stops here, with exit 2.
	for (const std::string &bad :
	     {out_of_range("--threads", threads, 1, KVBLK_MAX_WORKERS), out_of_range("--rings", rings, 1, KVBLK_MAX_WORKERS),
	      out_of_range("--qd", qds, 1, KVBLK_MAX_QUEUE_DEPTH), out_of_range("--fio-qd", fio_qds, 1, 65536)}) {
		if (!bad.empty()) {
			err(bad);
			return kExitSetup;
		}
	}
	if (cmd_bytes < 4096 || cmd_bytes > (1ull << 30) || cmd_bytes % 4096) {
		err(fmt::format("--cmd-size {}: must be a multiple of 4 KiB from 4 KiB to 1 GiB", cmd_bytes));
		return kExitSetup;
	}
	for (const auto &b : backends) {
		if (b != kBareUringName && kvblk_backend_from_name(b.c_str()) < 0) {
			err(fmt::format("--backends {}: not a backend (psync, threadpool, uring, auto, kmod, uring_cmd, "
					"bare-uring)",
					b));
			return kExitSetup;
		}
	}

	// The workload: the preset, with any shape given on the command line.
	const WorkloadPreset &preset = *find_preset(workload);
	const bool custom = n_opt->count() || mib->count() || kib->count() || order_o->count();
	const uint64_t n = n_opt->count() ? objects : preset.objects;
	const uint64_t object_bytes = kib->count() ? object_kib << 10 : mib->count() ? object_mib << 20 : preset.object_bytes;
	const Order order = order_o->count() ? (order_opt == "random" ? Order::random : Order::file) : preset.order;
	if (!device.empty()) {
		struct stat st;
		if (preset.one_file_per_object) {
			err("--device: the chunks workload is one file per chunk, not a device");
			return kExitSetup;
		}
		if (::stat(device.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) {
			err(fmt::format("--device {}: not a block device", device));
			return kExitSetup;
		}
		path = device;
	}
	if (path.empty())
		path = workload == "large" || workload == "chunks" ? "./kvblk-store.bin" : "./kvblk-store.bin." + workload;
	if (preset.one_file_per_object && object_bytes == 0) {
		err("the chunks workload needs one chunk size");
		return kExitSetup;
	}
	Workload wl = preset.one_file_per_object ? make_chunk_workload(chunk_dir(path), n, object_bytes)
						 : make_store_workload(path, n, object_bytes, order, seed);
	wl.name = custom ? "custom" : preset.name;
	const bool progress = !quiet && isatty(STDERR_FILENO);

	Report rep;
	rep.wl = &wl;
	rep.latency_level = latency;
	rep.store.wl = &wl;
	rep.store.batch_objects = batch_objects;
	rep.store.cmd_bytes = cmd_bytes;
	rep.store.mode = keep ? StoreSpec::Mode::keep
		       : recreate ? StoreSpec::Mode::recreate
				  : StoreSpec::Mode::reuse_or_create;
	rep.store.allow_device_write = overwrite_device;
	rep.store.progress = progress;

	std::string why;
	if (int r = prepare_store(rep.store, rep.store_state, why); r < 0) {
		err(fmt::format("store: {}", why));
		return kExitSetup;
	}
	if (!quiet)
		err(fmt::format("workload {}: {} {} ({})", wl.name, wl.where(), rep.store_state.created ? "written" : "reused",
				rep.store_state.reason));
	rep.host = collect_host(wl.paths[0], rep.store_state.is_blockdev);

	// Each backend asked for must be able to open the store: say why once and run nothing.
	for (size_t i = 0; i < backends.size(); i++) {
		if (std::find(backends.begin(), backends.begin() + long(i), backends[i]) != backends.begin() + long(i) ||
		    backends[i] == kBareUringName)
			continue;
		kvblk_open_opts o;
		kvblk_open_opts_init(&o, sizeof(o));
		o.backend = uint32_t(kvblk_backend_from_name(backends[i].c_str()));
		kvblk_dev *probe = nullptr;
		if (kvblk_open(wl.paths[0].c_str(), &o, &probe) != 0) {
			err(fmt::format("--backends {}: cannot serve {}: {}", backends[i], wl.paths[0], kvblk_last_error()));
			return kExitSetup;
		}
		kvblk_close(probe);
	}

	if (!engine_shape.empty())
		return run_engine(wl, engine_shape, backends, rings, qds, cmd_bytes, repeat, output, quiet);

	// The settings. The chunk workload also runs the serial file loop (open, pread, close per
	// chunk: what a local-disk cache does today); its libkvblk legs put every chunk file of a
	// batch in flight together (kvblk_add_target(), kvblk_desc.target).
	std::vector<Setting> settings;
	if (wl.files)
		settings.push_back({kBackendFileLoop, 1, 1});
	{
		for (const auto &b : backends) {
			if (b == kBareUringName) {
				settings.push_back({kBackendBareUring, 1, qds.empty() ? 64u : *std::max_element(qds.begin(), qds.end())});
				continue;
			}
			const int id = kvblk_backend_from_name(b.c_str());
			if (id < 0) {
				err(fmt::format("unknown backend '{}' (psync, threadpool, uring, auto, kmod, uring_cmd)", b));
				return kExitSetup;
			}
			if (id == KVBLK_BACKEND_PSYNC) {
				settings.push_back({id, 1, 1});
			} else if (id == KVBLK_BACKEND_THREADPOOL) {
				for (uint32_t t : threads)
					settings.push_back({id, t, 0});
			} else {
				for (uint32_t w : rings)
					for (uint32_t q : qds)
						settings.push_back({id, w, q});
			}
		}
	}

	// The window: as many whole batches as fit in --buffer-mib (at least
	// one), no more than the workload needs.
	rep.run.wl = &wl;
	rep.run.batch_objects = uint32_t(std::min<uint64_t>(batch_objects, wl.objects()));
	rep.run.cmd_bytes = cmd_bytes;
	rep.run.repeat = repeat;
	rep.run.progress = progress;
	const uint64_t batches_needed = (wl.objects() + rep.run.batch_objects - 1) / rep.run.batch_objects;
	rep.run.window_batches =
		std::min(batches_needed, std::max<uint64_t>((buffer_mib << 20) / slot_bytes(rep.run), 1));

	// How many objects kvblk's uring calls read at once (the regions the spread points model).
	if (!quiet)
		for (const Setting &st : settings)
			if (st.backend == KVBLK_BACKEND_URING) {
				const uint32_t w = st.workers ? st.workers : KVBLK_DEFAULT_WORKERS;
				const uint32_t q = st.queue_depth ? st.queue_depth : KVBLK_DEFAULT_QUEUE_DEPTH;
				err(fmt::format("uring W={} QD={}: up to {} of a call's {} objects in flight at once", w, q,
						objects_in_flight(wl, cmd_bytes, rep.run.batch_objects, uint64_t(w) * q),
						rep.run.batch_objects));
			}
	rep.results.resize(settings.size());
	for (size_t i = 0; i < settings.size(); i++)
		init_result(rep.run, settings[i], rep.results[i]);

	rep.host_huge = host_pages == "huge";
	HostBuffer buf(size_t(window_bytes(rep.run)), rep.host_huge ? HostPages::huge : HostPages::small);
	if (!buf) {
		err(fmt::format("cannot allocate a {}-byte load buffer (see --buffer-mib)", window_bytes(rep.run)));
		return kExitSetup;
	}
	rep.host_bytes = buf.size();
	rep.host_thp_bytes = rep.host_huge ? std::min<uint64_t>(buf.thp_bytes(), buf.size()) : 0;
	std::unique_ptr<DeviceWindow> dest_window;
	if (dest == "cuda")
		dest_window = CudaWindow::create(window_bytes(rep.run), &why);
	else if (dest.rfind("p2pdma:", 0) == 0)
		dest_window = P2pdmaWindow::create(dest.substr(7), window_bytes(rep.run), &why);
	if (dest != "host") {
		if (!dest_window) {
			err(fmt::format("--dest {}: {}", dest, why));
			return kExitSetup;
		}
		rep.run.dest = dest_window.get();
	}

	// The ceiling search, over replay logs of one pass. fio's jobs go up to
	// the most workers any kvblk setting uses.
	rep.search_mode = search_mode == "thorough" ? SearchMode::thorough : SearchMode::quick;
	const uint32_t max_jobs = fio_max_jobs ? fio_max_jobs
					       : std::max(*std::max_element(threads.begin(), threads.end()),
							  *std::max_element(rings.begin(), rings.end()));
	SearchSpec spec = make_search_spec(rep.search_mode, max_jobs);
	spec.engines = fio_engines;
	spec.spread_jobs = rep.run.batch_objects;
	if (!fio_qds.empty())
		spec.depths = fio_qds;
	// Held to the end: the finalists run in the rounds with the same pages.
	std::optional<kvblk_tools::HugePageReservation> huge;
	if (!no_fio && !no_fio_hugepages && !kvblk_tools::find_program("fio").empty()) {
		const uint64_t page = kvblk_tools::read_hugepages().page_bytes;
		huge.emplace(search_hugepages(spec, rep.run.cmd_bytes, page), reserve_hugepages);
		spec.hugepages = huge->ok();
		rep.fio_hugepages_note = huge->note();
		if (!quiet && huge->reserved())
			err(fmt::format("fio's buffers: {}", huge->note()));
	}
	rep.search = CeilingSearch(spec);
	rep.fio_enabled = !no_fio;
	ReplayLogs logs;
	std::optional<FioSession> fio;
	if (!no_fio) {
		std::vector<uint32_t> job_counts = {1};
		for (uint32_t j : geometric(2, spec.max_jobs, 2))
			job_counts.push_back(j);
		if (!logs.write(wl, cmd_bytes, job_counts, geometric(2, spec.spread_jobs, 2), why)) {
			err(fmt::format("fio replay logs: {}", why));
			return kExitSetup;
		}
		FioConfig fc;
		fc.replays = logs.replays();
		fc.spread_replays = logs.spread();
		fc.runtime_s = fio_runtime;
		fc.progress = progress;
		fio.emplace(fc);
		rep.fio_available = fio->available();
		rep.fio_note = fio->note();
	}
	if (fio && fio->available()) {
		const uint64_t t0 = now_ns();
		run_search(rep.search, *fio, [&](const std::string &stage, size_t points, double best) {
			if (!quiet)
				err(fmt::format("fio search: stage {}: {} points, best {:.3f} GB/s", stage, points, best));
		});
		rep.search_seconds = double(now_ns() - t0) / 1e9;
	}
	const std::vector<FioKnobs> finalists = fio && fio->available() ? rep.search.finalists() : std::vector<FioKnobs>{};
	if (fio && fio->available() && finalists.empty())
		rep.fio_note = "every fio point of the search failed: no device ceiling";

	// Rounds. In each, the fio finalists and the settings alternate (fio 1,
	// setting 1, fio 2, setting 2, ...), so that the ceiling and the results
	// are measured in the same stretch of time and a device whose speed
	// drifts (a shared or virtual disk) moves both alike; medians are reported.
	// Each round starts one leg later than the one before, so that no leg
	// always runs at the same place in its round. Every finalist runs once
	// per round, as every setting does: the same number of runs for both.
	std::vector<std::pair<bool, size_t>> legs; // (fio, finalist) or (kvblk, setting)
	for (size_t i = 0; i < std::max(finalists.size(), rep.results.size()); i++) {
		if (i < finalists.size())
			legs.emplace_back(true, i);
		if (i < rep.results.size())
			legs.emplace_back(false, i);
	}
	std::vector<FioSweep> rounds;
	for (unsigned round = 0; round < repeat; round++) {
		FioSweep sw;
		sw.points.resize(finalists.size());
		for (size_t l = 0; l < legs.size(); l++) {
			const auto [is_fio, i] = legs[(l + round) % legs.size()];
			if (is_fio) {
				sw.points[i] = fio->run(finalists[i]);
				continue;
			}
			RunResult &res = rep.results[i];
			const int r = res.setting.backend == kBackendFileLoop	 ? run_file_loop_pass(rep.run, buf, res, round)
				      : res.setting.backend == kBackendBareUring ? run_bare_uring_pass(rep.run, buf, res, round)
										 : run_pass(rep.run, buf, res, round);
			if (r < 0)
				res.failed_calls++;
		}
		if (!finalists.empty())
			rounds.push_back(std::move(sw));
	}
	if (!rounds.empty()) {
		rep.finals = median_sweep(rounds);
		rep.fio_version = fio->version();
	}
	bool failed = false;
	for (RunResult &res : rep.results) {
		summarize(res);
		failed = failed || !res.verified;
	}
	rep.verdict = judge_ceiling(rep.finals, rep.results);

	if (output == "json")
		std::cout << render_json(rep).dump(2) << std::endl;
	else
		std::cout << render_text(rep) << std::flush;

	if (failed) {
		for (const RunResult &x : rep.results)
			if (!x.verified)
				err(fmt::format("FAILED: {} W={} QD={}: {} failed calls, {} failed objects, {} bytes differ "
						"from the pattern{}{}",
						x.backend.empty() ? x.requested_backend : x.backend, x.workers,
						x.queue_depth, x.failed_calls, x.failed_objects, x.mismatched_bytes,
						x.error.empty() ? "" : ": ", x.error));
		return kExitFailed;
	}
	if (rep.verdict.measured && !rep.verdict.found) {
		err(fmt::format("ceiling not found: a kvblk setting reads {:.2f} x fio's best (limit {:.2f}){}",
				rep.verdict.worst_ratio, kCeilingSlack,
				allow_no_ceiling ? "; --allow-no-ceiling: exit 0" : "; exit 3 (--allow-no-ceiling: 0)"));
		if (!allow_no_ceiling)
			return kExitNoCeiling;
	}
	return kExitOk;
}

// SPDX-License-Identifier: MIT
//
// kvblk-bench: load a store of KV-cache-sized objects with every libkvblk
// backend, verify every byte, and compare with the device ceiling measured
// by fio on the same file with the same command size. See docs/kvblk-bench.md.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <kvblk/kvblk.h>

#include "cuda_dest.hpp"
#include "p2pdma_dest.hpp"
#include "fio.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "store.hpp"

using namespace kvblk_bench;
using namespace kvblk_tools;

namespace {

enum Exit {
	kExitOk = 0,
	kExitFailed = 1, // a load failed or an object did not verify
	kExitSetup = 2,	 // bad arguments, store cannot be prepared, ...
};

void err(const std::string &msg)
{
	std::fprintf(stderr, "kvblk-bench: %s\n", msg.c_str());
}

} // namespace

int main(int argc, char **argv)
{
	CLI::App app{"kvblk-bench: load a store of N objects with each libkvblk backend, verify every byte, and\n"
		     "compare GB/s with the device ceiling that fio measures on the same file with the same\n"
		     "command size. GB = 1e9 bytes. Exit status: 0 all verified, 1 a load failed or an object\n"
		     "did not verify, 2 setup error.",
		     "kvblk-bench"};
	app.get_formatter()->column_width(36);

	uint64_t objects = 128, object_mib = 16, object_kib = 0;
	std::string path = "./kvblk-store.bin", device;
	bool overwrite_device = false;
	std::vector<std::string> backends = {"psync", "threadpool", "uring"};
	std::vector<uint32_t> workers, threads = {8}, rings = {1}, qds = {32, 64}, fio_qds = {1, 8, 32, 64};
	uint64_t cmd_bytes = KVBLK_DEFAULT_MAX_CMD_BYTES;
	uint32_t batch_objects = 16;
	unsigned repeat = 1, fio_runtime = 10;
	uint64_t buffer_mib = 4096;
	bool no_fio = false, no_fio_fixedbufs = false, fio_batch = false, quiet = false, keep = false, recreate = false;
	std::string output = "normal", dest = "host";
	int latency = 0;

	const std::string g_store = "Store", g_loads = "Loads", g_fio = "Ceiling (fio)", g_out = "Output";
	app.add_option("-n,--objects", objects, "Objects in the store")
		->capture_default_str()
		->check(CLI::Range(uint64_t(1), uint64_t(1) << 24))
		->group(g_store);
	auto *mib = app.add_option("-s,--object-mib", object_mib, "Object size in MiB")
			    ->capture_default_str()
			    ->check(CLI::PositiveNumber)
			    ->group(g_store);
	app.add_option("--object-kib", object_kib, "Object size in KiB instead, e.g. 256")
		->excludes(mib)
		->check(CLI::PositiveNumber)
		->group(g_store);
	auto *path_opt = app.add_option("-f,--path", path, "Store file (created if absent) or block device")
				 ->capture_default_str()
				 ->group(g_store);
	app.add_option("--device", device, "Store on this block device: read and verify only, unless --i-know-this-overwrites")
		->excludes(path_opt)
		->group(g_store);
	app.add_flag("--i-know-this-overwrites", overwrite_device,
		     "Allow writing the store onto a block device (destroys its first N x S bytes)")
		->group(g_store);
	auto *keep_opt = app.add_flag("--keep", keep, "Use the existing store as is; fail if it does not match")->group(g_store);
	app.add_flag("--recreate", recreate, "Rewrite the store even if it matches")->excludes(keep_opt)->group(g_store);

	app.add_option("--backends", backends, "Backends to run, in order: psync, threadpool, uring (auto, ...)")
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
	app.add_option("--cmd-size", cmd_bytes, "Largest command: kvblk max_cmd_bytes and fio --bs (128K, 1M, ...)")
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
		->check(CLI::PositiveNumber)
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
	app.add_option("--repeat", repeat, "Rounds (fio sweep + one pass of every setting); medians are reported")
		->capture_default_str()
		->check(CLI::Range(1u, 1000u))
		->group(g_loads);

	auto *fio_qd_opt = app.add_option("--fio-qd", fio_qds, "fio queue depths to sweep; the best is the ceiling")
				   ->delimiter(',')
				   ->capture_default_str()
				   ->group(g_fio);
	app.add_option("--fio-runtime", fio_runtime, "Cap in seconds per fio point (each also ends after the store)")
		->capture_default_str()
		->check(CLI::Range(1u, 3600u))
		->group(g_fio);
	app.add_flag("--no-fio-fixedbufs", no_fio_fixedbufs, "Run fio without --fixedbufs=1")->group(g_fio);
	app.add_flag("--fio-batch", fio_batch,
		     "fio submits everything queued at once and reaps >= 1 (iodepth_batch_submit=QD), as libkvblk does")
		->group(g_fio);
	app.add_flag("--no-fio", no_fio, "Skip the ceiling")->excludes(fio_qd_opt)->group(g_fio);

	app.add_option("-o,--output", output, "normal: table; json: one JSON document on stdout")
		->check(CLI::IsMember({"normal", "json"}))
		->capture_default_str()
		->group(g_out);
	app.add_flag("-q,--quiet", quiet, "No progress bars or notes on stderr (errors still)")->group(g_out);
	app.add_flag("-L", latency, "Batch-latency percentiles per setting; -LL adds the library's command histogram")
		->group(g_out);

	CLI11_PARSE(app, argc, argv);

	if (!KVBLK_CHECK_VERSION()) {
		err(fmt::format("libkvblk {} is not compatible with headers {}.{}", kvblk_version(),
				KVBLK_VERSION_MAJOR, KVBLK_VERSION_MINOR));
		return kExitSetup;
	}
	if (!workers.empty())
		threads = rings = workers;
	std::vector<int> backend_ids;
	for (const auto &b : backends) {
		int id = kvblk_backend_from_name(b.c_str());
		if (id < 0) {
			err(fmt::format("unknown backend '{}' (psync, threadpool, uring, auto, kmod, uring_cmd)", b));
			return kExitSetup;
		}
		backend_ids.push_back(id);
	}
	for (auto *list : {&threads, &rings, &qds, &fio_qds})
		for (uint32_t v : *list)
			if (v == 0) {
				err("worker, ring and queue-depth counts must be > 0");
				return kExitSetup;
			}
	if (!device.empty()) {
		struct stat st;
		if (::stat(device.c_str(), &st) != 0 || !S_ISBLK(st.st_mode)) {
			err(fmt::format("--device {}: not a block device", device));
			return kExitSetup;
		}
		path = device;
	}
	const uint64_t object_bytes = object_kib ? object_kib << 10 : object_mib << 20;
	const bool progress = !quiet && isatty(STDERR_FILENO);

	Report rep;
	rep.latency_level = latency;
	rep.store.path = path;
	rep.store.objects = objects;
	rep.store.object_bytes = object_bytes;
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
		err(fmt::format("store {}: {} ({})", path, rep.store_state.created ? "written" : "reused",
				rep.store_state.reason));
	rep.host = collect_host(path, rep.store_state.is_blockdev);

	rep.fio_enabled = !no_fio;
	rep.fio_cfg.path = path;
	rep.fio_cfg.size = objects * object_bytes;
	rep.fio_cfg.block_bytes = cmd_bytes;
	rep.fio_cfg.queue_depths = fio_qds;
	rep.fio_cfg.runtime_s = fio_runtime;
	rep.fio_cfg.fixedbufs = !no_fio_fixedbufs;
	rep.fio_cfg.batch = fio_batch;
	rep.fio_cfg.progress = progress;

	// The window: as many whole batches as fit in --buffer-mib (at least
	// one), no more than the store needs.
	const uint64_t per_batch = std::min<uint64_t>(batch_objects, objects);
	const uint64_t batches_needed = (objects + per_batch - 1) / per_batch;
	const uint64_t batches_fit = std::max<uint64_t>((buffer_mib << 20) / (per_batch * object_bytes), 1);
	rep.run.path = path;
	rep.run.objects = objects;
	rep.run.object_bytes = object_bytes;
	rep.run.batch_objects = batch_objects;
	rep.run.window_objects = std::min(batches_needed, batches_fit) * per_batch;
	rep.run.cmd_bytes = cmd_bytes;
	rep.run.repeat = repeat;
	rep.run.progress = progress;

	std::vector<Setting> settings;
	for (int b : backend_ids) {
		if (b == KVBLK_BACKEND_PSYNC) {
			settings.push_back({b, 1, 1});
		} else if (b == KVBLK_BACKEND_THREADPOOL) {
			for (uint32_t t : threads)
				settings.push_back({b, t, 0});
		} else {
			for (uint32_t w : rings)
				for (uint32_t q : qds)
					settings.push_back({b, w, q});
		}
	}
	rep.results.resize(settings.size());
	for (size_t i = 0; i < settings.size(); i++)
		init_result(rep.run, settings[i], rep.results[i]);

	HostBuffer buf(size_t(window_bytes(rep.run)));
	if (!buf) {
		err(fmt::format("cannot allocate a {}-byte load buffer (see --buffer-mib)", window_bytes(rep.run)));
		return kExitSetup;
	}
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

	// Rounds. In each, the fio points and the settings alternate (fio QD1,
	// setting 1, fio QD8, setting 2, ...), so that the ceiling and the
	// results are measured in the same stretch of time and a device whose
	// speed drifts (a shared or virtual disk) moves both alike. --repeat
	// rounds; medians are reported.
	std::vector<FioSweep> sweeps;
	for (unsigned round = 0; round < repeat; round++) {
		std::optional<FioSession> fio;
		if (!no_fio)
			fio.emplace(rep.fio_cfg);
		const size_t n_fio = fio && fio->available() ? fio_qds.size() : 0;
		for (size_t i = 0; i < std::max(n_fio, rep.results.size()); i++) {
			if (i < n_fio)
				fio->run(fio_qds[i]);
			if (i < rep.results.size() && run_pass(rep.run, buf, rep.results[i], round) < 0)
				rep.results[i].failed_calls++;
		}
		if (fio)
			sweeps.push_back(fio->sweep());
	}
	rep.fio = median_sweep(sweeps);
	if (!rep.fio.note.empty() && !quiet)
		err(fmt::format("fio: {}", rep.fio.note));
	bool failed = false;
	for (RunResult &res : rep.results) {
		summarize(res);
		failed = failed || !res.verified;
	}

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
	return kExitOk;
}

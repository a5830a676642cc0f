// SPDX-License-Identifier: MIT
//
// kvblk-bench report: the text table (in the spirit of spdk_nvme_perf),
// the searched ceiling and its verdict, the ratios, and the -o json document.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ceiling.hpp"
#include "fio.hpp"
#include "runner.hpp"
#include "store.hpp"
#include "workload.hpp"

namespace kvblk_bench {

// The fio ceiling lives in tools/common (shared with kvblkctl probe).
using kvblk_tools::FioConfig;
using kvblk_tools::FioPoint;
using kvblk_tools::FioSweep;

inline constexpr int kSchemaVersion = 2;

struct HostInfo {
	std::string hostname, kernel, machine, cpu_model, libkvblk_version;
	unsigned cpus = 0;
	uint64_t mem_total_bytes = 0;
	// The store's target.
	std::string target_kind;  // "file" or "blockdev"
	std::string filesystem;	  // files: ext4, xfs, ...
	std::string block_device; // files: the device holding them; else the device itself
	int rotational = -1;	  // from sysfs; -1 unknown
};

HostInfo collect_host(const std::string &path, bool is_blockdev);

// Ratios of the best setting of each backend (by GB/s), measured in one run.
// Against the ceiling only when it was found (CeilingVerdict::found).
struct Ratios {
	int best_uring = -1, psync = -1, best_threadpool = -1, file_loop = -1, bare_uring = -1; // indexes into results
	std::optional<double> uring_over_fio, uring_over_psync, threadpool_over_psync, threadpool_over_fio;
	std::optional<double> file_loop_over_fio;
	// The best uring setting over the bare io_uring loop (kvblk's own cost,
	// same commands into the same buffer), and the loop over the ceiling
	// (what the destination costs against fio's small reused buffers).
	std::optional<double> uring_over_bare, bare_over_fio;
	// CPU s/GB of the best uring setting over the best threadpool setting's.
	std::optional<double> uring_cpu_over_threadpool;
	// fio's best point at one command in flight over the ceiling: what queue
	// depth alone gains on this device; uring / psync cannot exceed it by much.
	std::optional<double> fio_best_over_qd1;
};

Ratios compute_ratios(const std::vector<RunResult> &results, const CeilingVerdict &v,
		      const std::vector<SearchPoint> &search);

struct Report {
	HostInfo host;
	const Workload *wl = nullptr;
	StoreSpec store;
	StoreState store_state;
	RunConfig run;
	bool fio_enabled = true;
	bool fio_available = false;
	std::string fio_version, fio_note;
	// Whether the search's points read into huge pages (SearchSpec::hugepages),
	// and the pool's state or why not (HugePageReservation::note()).
	std::string fio_hugepages_note;
	// The host buffer: huge pages asked for (--host-pages) and how many
	// bytes of it the kernel gave as transparent huge pages.
	bool host_huge = false;
	uint64_t host_bytes = 0, host_thp_bytes = 0;
	SearchMode search_mode = SearchMode::quick;
	CeilingSearch search{SearchSpec{}};
	double search_seconds = 0;
	FioSweep finals; // the finalists, each the median of the rounds
	CeilingVerdict verdict;
	std::vector<RunResult> results;
	int latency_level = 0; // -L: batch-latency percentiles; -LL: plus command histogram
};

// Fraction of the ceiling, or nullopt without one or when it was not found.
std::optional<double> fraction_of_ceiling(const CeilingVerdict &v, double gbps);

std::string render_text(const Report &r);
nlohmann::json render_json(const Report &r);

} // namespace kvblk_bench

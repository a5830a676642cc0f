// SPDX-License-Identifier: MIT
//
// kvblk-bench report: the text table (in the spirit of spdk_nvme_perf),
// the ratios issue 2 asks about, and the -o json document.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fio.hpp"
#include "runner.hpp"
#include "store.hpp"

namespace kvblk_bench {

// The fio ceiling lives in tools/common (shared with kvblkctl probe).
using kvblk_tools::FioConfig;
using kvblk_tools::FioPoint;
using kvblk_tools::FioSweep;

inline constexpr int kSchemaVersion = 1;

// Targets of issue 2, measured in one run.
inline constexpr double kTargetOverFio = 0.9;
inline constexpr double kTargetOverPsync = 2.5;

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

struct Ratios {
	int best_uring = -1, psync = -1, best_threadpool = -1; // indexes into results
	std::optional<double> uring_over_fio, uring_over_psync, threadpool_over_psync, threadpool_over_fio;
	// fio's best over fio at QD 1: how much queue depth alone gains on this
	// device; uring / psync cannot be expected to exceed it by much.
	std::optional<double> fio_best_over_qd1;
	std::optional<bool> target_met; // both uring ratios present and met
};

Ratios compute_ratios(const std::vector<RunResult> &results, const FioSweep &fio);

struct Report {
	HostInfo host;
	StoreSpec store;
	StoreState store_state;
	RunConfig run;
	bool fio_enabled = true;
	FioConfig fio_cfg;
	FioSweep fio;
	std::vector<RunResult> results;
	int latency_level = 0; // -L: batch-latency percentiles; -LL: plus command histogram
};

// Fraction of the ceiling, or nullopt without one.
std::optional<double> fraction_of_ceiling(const FioSweep &fio, double gbps);

std::string render_text(const Report &r);
nlohmann::json render_json(const Report &r);

} // namespace kvblk_bench

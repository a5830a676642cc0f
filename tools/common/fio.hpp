// SPDX-License-Identifier: MIT
//
// The device ceiling, shared by kvblk-bench and `kvblkctl probe`: fio (found
// on PATH) reading the same file or device with the same command size,
// O_DIRECT, io_uring, one job, over a queue-depth sweep. Its best point is the
// ceiling every kvblk result is measured against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvblk_tools {

struct FioConfig {
	std::string fio = "fio";   // program name or path (searched on PATH)
	std::string path;	   // store file or block device (read only)
	uint64_t size = 0;	   // bytes from offset 0: the store
	uint64_t block_bytes = 0;  // --bs: the command size kvblk uses
	std::vector<uint32_t> queue_depths;
	unsigned runtime_s = 10;   // cap per point; a point also ends after @size bytes
	bool fixedbufs = true;	   // --fixedbufs (registered buffers, as kvblk's uring backend)
	bool batch = false;	   // submit all queued, reap >= 1 (as kvblk's uring backend)
	bool time_based = false;   // run runtime_s, rereading @size as often as it takes
	bool progress = false;	   // one status line on stderr while fio runs
};

struct FioPoint {
	uint32_t queue_depth = 0;
	bool ok = false;
	bool fixedbufs = false;	// run with --fixedbufs=1
	double gbps = 0;	// read.bw_bytes / 1e9
	uint64_t bw_bytes = 0;	// bytes per second
	double iops = 0;
	uint64_t io_bytes = 0;
	double runtime_s = 0;
	double clat_mean_us = 0, clat_p50_us = 0, clat_p99_us = 0;
	double cpu_s_per_gb = 0; // fio's usr+sys CPU per GB (its whole-process share)
	std::vector<double> gbps_repeats; // every run of this point (median_sweep())
	std::string error;
};

struct FioSweep {
	bool available = false; // fio found and at least attempted
	std::string program;	// resolved path
	std::string version;	// "fio-3.33"
	std::string note;	// why absent, or anything the reader must know
	std::vector<FioPoint> points;
	// Index of the best successful point, or -1.
	[[nodiscard]] int best() const;
};

// Absolute path of @prog: itself when it contains '/', else the first
// executable match on $PATH; "" when not found.
std::string find_program(const std::string &prog);

// Command line for one point (argv[0] = @program).
std::vector<std::string> fio_argv(const std::string &program, const FioConfig &cfg, uint32_t qd,
				  bool fixedbufs, const std::string &json_out);

// Parse fio's --output-format=json for one job reading; fills @pt (not
// queue_depth/fixedbufs). Returns false with pt.error set when the text is
// not fio JSON, the job reports an error, or it read nothing.
bool parse_fio_json(const std::string &text, FioPoint &pt, std::string *version = nullptr);

// Runs fio points one at a time, so that the caller can interleave them
// with its own runs. Never fails: a missing fio or a failing point is
// recorded in the sweep. A refusal of --fixedbufs (RLIMIT_MEMLOCK) makes
// the session retry that point, and run the rest, without it.
class FioSession {
public:
	explicit FioSession(const FioConfig &cfg);
	FioSession(const FioSession &) = delete;
	FioSession &operator=(const FioSession &) = delete;
	~FioSession();

	[[nodiscard]] bool available() const noexcept { return sweep_.available; }
	const FioPoint &run(uint32_t queue_depth);	// one point, appended to the sweep
	[[nodiscard]] FioSweep sweep() const;		// the points so far

private:
	FioConfig cfg_;
	bool fixedbufs_;
	std::string tmpdir_;
	FioSweep sweep_;
};

// Every point of cfg.queue_depths, in order.
FioSweep run_fio_sweep(const FioConfig &cfg);

// Combine repeated sweeps point by point (same queue depths, same order):
// each point is the run with the median bandwidth among its successful runs
// (the lower middle one for an even count), with every run's GB/s in
// gbps_repeats. A point with no successful run keeps the last error.
FioSweep median_sweep(const std::vector<FioSweep> &sweeps);

} // namespace kvblk_tools

// SPDX-License-Identifier: MIT
//
// The device ceiling, shared by kvblk-bench and `kvblkctl probe`: fio (found
// on PATH) reading the same file or device with the same command size,
// O_DIRECT. One fio run is a point: an engine (io_uring, libaio or psync), a
// queue depth, a number of jobs, io_uring's fixed buffers and registered
// files on or off, and the buffers' page size. It reads either a range of the target sequentially (kvblkctl
// probe) or replays iologs, one per job, that hold the exact commands a kvblk
// pass issues in the order it issues them (kvblk-bench).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvblk_tools {

// The knobs of one fio point.
struct FioKnobs {
	std::string engine = "io_uring"; // io_uring or libaio
	uint32_t iodepth = 1;		  // per job
	uint32_t numjobs = 1;
	bool fixedbufs = false;	    // io_uring: --fixedbufs=1 (registered buffers, as kvblk's uring backend)
	bool registerfiles = false; // io_uring: --registerfiles=1
	// Replay mode: job j replays the objects at pass positions j, j + numjobs,
	// j + 2 x numjobs, .. (one job per object in flight, the jobs reading as
	// many regions at once) instead of a contiguous slice of the pass.
	bool spread = false;
	// Commands submitted together, as a kvblk ring submits what it took:
	// --iodepth_batch_submit=iodepth and --iodepth_batch_complete_max=iodepth,
	// and --gtod_reduce=1 (no clock reads per command; no latency figures
	// then). fio's default submits one command per call, so the block layer
	// never merges neighbouring commands; submitted together under one plug
	// they merge (a virtio disk behind mq-deadline: 16384 128 KiB reads of one
	// pass became 1173 requests, kvblk uring QD 64's 2577).
	bool lean = false;
	// The job's buffers in hugetlb pages (--iomem=mmaphuge, 2 MiB each on
	// x86-64; /proc/sys/vm/nr_hugepages must hold them, see hugepages.hpp)
	// instead of malloc()ed 4 KiB pages. A command into one physically
	// contiguous page is one DMA segment instead of up to 32 (128 KiB), and
	// some devices are much faster so: on this project's Firecracker virtio
	// disk, io_uring QD 64 with fixedbufs read 1.9-3.0 GB/s into 4 KiB pages
	// and 3.8-3.9 (up to 6.9 on a quiet disk) into huge pages, in
	// alternating runs (2026-12-05), and the 4 KiB figures varied twice as
	// much run to run. kvblk-bench's own buffer is one MAP_POPULATE mapping of
	// the whole window, whose pages the kernel hands out mostly physically
	// contiguous.
	bool hugepages = false;

	// Commands in flight across the jobs: the x axis kvblk settings share.
	[[nodiscard]] uint32_t in_flight() const noexcept { return iodepth * numjobs; }
	// "io_uring QD 32 x 2 jobs, fixedbufs": how the table names a point.
	[[nodiscard]] std::string name() const;
	bool operator==(const FioKnobs &o) const noexcept
	{
		return engine == o.engine && iodepth == o.iodepth && numjobs == o.numjobs &&
		       fixedbufs == o.fixedbufs && registerfiles == o.registerfiles && spread == o.spread &&
		       lean == o.lean && hugepages == o.hugepages;
	}
	bool operator!=(const FioKnobs &o) const noexcept { return !(*this == o); }
};

// A set of replay logs: one per job, together exactly the commands of one
// kvblk pass (see kvblk-bench's workload.hpp, which writes them).
struct FioReplay {
	std::vector<std::string> logs;
	uint64_t bytes = 0;    // bytes of every command of every log
	uint64_t commands = 0; // commands of every log
};

struct FioConfig {
	std::string fio = "fio";   // program name or path (searched on PATH)
	std::string path;	   // sequential mode: file or block device (read only)
	uint64_t size = 0;	   // sequential mode: bytes from offset 0 (split evenly between jobs)
	uint64_t block_bytes = 0;  // --bs: the command size kvblk uses
	// Replay mode (used when not empty): numjobs -> its logs. Every numjobs a
	// point asks for must be present.
	std::map<uint32_t, FioReplay> replays;
	// Replay mode, FioKnobs::spread points: numjobs -> logs of every
	// numjobs-th object of the pass.
	std::map<uint32_t, FioReplay> spread_replays;
	std::vector<uint32_t> queue_depths; // run_fio_sweep(): io_uring, one job, these depths
	unsigned runtime_s = 10;   // cap per point; a point also ends after its bytes
	bool fixedbufs = true;	   // run_fio_sweep(): --fixedbufs
	bool time_based = false;   // sequential mode: run runtime_s, rereading @size as often as it takes
	bool progress = false;	   // one status line on stderr while fio runs
};

struct FioPoint {
	FioKnobs knobs;
	uint32_t queue_depth = 0; // knobs.iodepth (kept for kvblkctl probe's JSON)
	bool ok = false;
	bool fixedbufs = false;	// run with --fixedbufs=1
	double gbps = 0;	// bytes read / runtime, GB = 1e9 B
	uint64_t bw_bytes = 0;	// bytes per second
	double iops = 0;
	uint64_t io_bytes = 0;	// bytes read (replay: total_ios x mean command bytes, see parse_fio_json)
	uint64_t total_ios = 0;
	double runtime_s = 0;
	double clat_mean_us = 0, clat_p50_us = 0, clat_p99_us = 0;
	// User + system CPU of the whole fio process (wait4(), every job thread
	// and fio's own setup) per GB read.
	double cpu_s_per_gb = 0;
	std::vector<double> gbps_repeats; // every run of this point (median_sweep(), kvblk-bench's rounds)
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

// Command line for one point (argv[0] = @program). Jobs run as threads of one
// process (--thread), so that wait4() accounts all of fio's CPU; replay mode
// gives each job its own log. Throws std::invalid_argument when replay mode
// has no logs for k.numjobs (of k.spread's kind).
std::vector<std::string> fio_argv(const std::string &program, const FioConfig &cfg, const FioKnobs &k,
				  const std::string &json_out);

// Parse fio's --output-format=json (one group-reported job); fills @pt's
// bandwidth, latency and I/O fields (not knobs or CPU). @replay_cmd_bytes,
// when not 0, is the mean command size of a replay: fio 3.33 leaves the
// last iodepth-1 completions of a replayed log out of io_bytes (total_ios
// counts them), which would understate the ceiling by up to 3% at QD 128,
// so a replay's bytes are total_ios x that size. Returns false with
// pt.error set when the text is not fio JSON, the job reports an error, or
// it read nothing.
bool parse_fio_json(const std::string &text, FioPoint &pt, std::string *version = nullptr,
		    double replay_cmd_bytes = 0);

// Runs fio points one at a time, so that the caller can interleave them
// with its own runs. Never fails: a missing fio or a failing point is
// recorded in the point. A refusal of --fixedbufs (RLIMIT_MEMLOCK) is a
// failed point like any other: the search keeps the points without it.
class FioSession {
public:
	explicit FioSession(const FioConfig &cfg);
	FioSession(const FioSession &) = delete;
	FioSession &operator=(const FioSession &) = delete;
	~FioSession();

	[[nodiscard]] bool available() const noexcept { return sweep_.available; }
	[[nodiscard]] const std::string &note() const noexcept { return sweep_.note; }
	[[nodiscard]] const std::string &version() const noexcept { return sweep_.version; }
	[[nodiscard]] const std::string &program() const noexcept { return sweep_.program; }
	// One point, capped at the config's runtime_s. There is no other cap:
	// kvblk-bench's search and its rounds run a point as the same fio job.
	FioPoint run(const FioKnobs &k);

private:
	FioConfig cfg_;
	std::string tmpdir_;
	FioSweep sweep_;
};

// kvblkctl probe: io_uring, one job, every depth of cfg.queue_depths in
// order, with cfg.fixedbufs (retried without it where fio refuses it).
FioSweep run_fio_sweep(const FioConfig &cfg);

// Combine repeated sweeps point by point (same points, same order): each
// point is the run with the median bandwidth among its successful runs (the
// lower middle one for an even count), with every run's GB/s in
// gbps_repeats. A point with no successful run keeps the last error.
FioSweep median_sweep(const std::vector<FioSweep> &sweeps);

} // namespace kvblk_tools

// SPDX-License-Identifier: MIT
//
// kvblk-bench runner: one pass of one setting (backend, workers, queue
// depth) loads the whole store with kvblk_load_many() in batches, times
// every call, and verifies every byte against the pattern.
//
// The destination is a window of host memory holding many batches (the
// whole default store), one registered buffer per batch slot. The window
// is loaded with back-to-back calls, so the device sees one continuous
// stream, as it does under fio; only then is the window verified. (Verifying
// after each batch would leave the device idle between calls, and a device
// that recovers during idle time - a throttled virtual disk, an SSD's SLC
// cache - would look faster than under fio's continuous run.)
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <kvblk/kvblk.h>

#include "util.hpp"

namespace kvblk_bench {

class DeviceWindow;

struct Workload;

struct RunConfig {
	const Workload *wl = nullptr;  // the objects and the order a pass loads them in
	uint32_t batch_objects = 16;   // objects per kvblk_load_many() call (consecutive in wl->order)
	uint64_t window_batches = 0;   // batches loaded back to back before verifying
	uint64_t cmd_bytes = 0;	       // max_cmd_bytes; 0: library default
	unsigned repeat = 1;
	bool progress = false;
	unsigned max_reports = 5;      // mismatch/failure messages printed per setting
	// --dest cuda|p2pdma: the window is this device memory (registrations of its kind) and is
	// copied back into the host buffer for verification; nullptr: host memory.
	const DeviceWindow *dest = nullptr;
};

// Setting::backend of the chunk workload's serial open+pread+close loop
// (no libkvblk), named "file-loop" in the report.
inline constexpr int kBackendFileLoop = -1;
// Setting::backend of the bare io_uring loop (no libkvblk), named
// "bare-uring": the reference for what kvblk's uring backend adds.
inline constexpr int kBackendBareUring = -2;
inline constexpr const char *kBareUringName = "bare-uring";

struct Setting {
	int backend = KVBLK_BACKEND_URING; // requested (enum kvblk_backend), kBackendFileLoop or kBackendBareUring
	uint32_t workers = 0;		    // rings or threads; 0: library default
	uint32_t queue_depth = 0;	    // per ring (uring); 0: library default
};

// One pass over the store.
struct Pass {
	bool ran = false;	  // the device opened and the loads were issued
	uint64_t load_ns = 0;	  // wall time of the back-to-back calls (windows summed)
	uint64_t cpu_ns = 0;	  // process CPU over the same time
	uint64_t rss = 0;	  // peak resident set during the pass
	std::vector<double> batch_ms;
	kvblk_stats stats{};
	uint64_t reg_fallbacks = 0; // memlock fallbacks of this pass's registrations
	double gbps = 0;
};

struct RunResult {
	Setting setting;
	std::string requested_backend;
	std::string backend;	    // served every batch (kvblk_batch_info.backend)
	bool backend_mixed = false; // batches were served by more than one backend
	std::string backend_reason; // kvblk_dev_info.backend_reason
	std::string path;	    // kvblk_batch_info.path of the batches: host, p2p, staged
	bool path_mixed = false;    // batches reported more than one path
	std::string dest_note;	    // --dest: what the first registration said (CUDA: staged and why)
	uint32_t workers = 0;	    // effective rings/threads (1 for psync)
	uint32_t queue_depth = 0;   // commands in flight per ring (uring), threads (threadpool), 1 (psync)
	uint64_t cmd_bytes = 0;	    // effective max_cmd_bytes
	uint64_t objects = 0;	    // per pass
	uint64_t object_bytes = 0;  // every object's size; 0: mixed sizes
	uint64_t total_bytes = 0;   // per pass
	uint32_t batch_objects = 0;
	unsigned repeat = 0;
	std::vector<Pass> passes;

	// Of the median pass (by GB/s), filled by summarize().
	double gbps = 0;	  // store bytes / wall time of the calls, GB = 1e9 B
	double objects_per_s = 0;
	double p50_ms = 0, p99_ms = 0, max_ms = 0, mean_ms = 0; // per kvblk_load_many() call
	double cpu_s_per_gb = 0;  // process user+sys CPU during the calls / GB
	double peak_rss_mib = 0;
	double load_seconds = 0;
	std::vector<double> batch_ms;
	std::vector<double> gbps_repeats;
	uint64_t commands = 0;
	uint64_t eagain_retries = 0;
	uint64_t short_resubmits = 0;
	uint64_t memlock_fallbacks = 0;
	uint64_t buffered_batches = 0;
	uint64_t cq_overflows = 0;
	uint64_t inflight_peak = 0;
	uint64_t staged_copies = 0;   // host-to-device copies of the staged path
	std::array<uint64_t, KVBLK_LAT_BUCKETS> cmd_lat_hist{};

	// Over every pass.
	bool verified = false;	       // every byte of every object, every pass
	uint64_t mismatched_bytes = 0;
	uint64_t failed_objects = 0;   // status != 0
	uint64_t failed_calls = 0;     // kvblk_load_many() < 0, or the setting could not start
	std::string error;	       // first error, human readable
	unsigned reported = 0;	       // messages printed so far
};

// Prepare @res for @s (no I/O).
void init_result(const RunConfig &cfg, const Setting &s, RunResult &res);

// Bytes of the largest batch of @cfg (a slot of the window).
uint64_t slot_bytes(const RunConfig &cfg);

// Bytes of the window buffer run_pass() needs.
uint64_t window_bytes(const RunConfig &cfg);

// One pass of @res.setting over @buf (window_bytes(cfg) bytes, page aligned):
// opens the device, registers one buffer per batch slot, loads every object
// in the workload's order and verifies it, appends a Pass to res.passes and
// counts failures in @res.
// Returns 0, or -errno when the setting could not start (res.error says why).
int run_pass(const RunConfig &cfg, HostBuffer &buf, RunResult &res, unsigned pass_no);

// One pass of the chunk workload's serial leg, what LMCache's local disk
// backend does today: for each chunk in order, open(2) its file (O_DIRECT),
// pread(2) the whole chunk, close(2), one chunk at a time. Batches of
// cfg.batch_objects chunks are timed like kvblk_load_many() calls; same
// window, CPU accounting and verification as run_pass().
int run_file_loop_pass(const RunConfig &cfg, HostBuffer &buf, RunResult &res, unsigned pass_no);

// One pass of the bare io_uring loop: the simplest program that reads the
// workload's commands (each object split into cfg.cmd_bytes commands, in the
// load order) into the same window as run_pass(), one ring, @res.setting's
// queue_depth commands in flight without a pause between objects or batches,
// into the window registered as fixed buffers (plain reads where the
// registration is refused: res.backend_reason says so). No libkvblk. Its
// figure against kvblk's uring backend is kvblk's own cost; against fio's
// ceiling, what the destination costs: fio reads into iodepth x block size
// bytes of buffers used again and again, kvblk into a window of whole
// batches, and where the host copies the data (a virtual disk) a
// destination its cache holds is faster (2026-12-05: a loop like this read
// 5.1-6.1 GB/s into 8 MiB and 4.2-4.6 into 2 GiB, alternating). Batches
// are timed from their first command's submission to their last
// completion; same window, CPU accounting and verification as run_pass().
int run_bare_uring_pass(const RunConfig &cfg, HostBuffer &buf, RunResult &res, unsigned pass_no);

// Fill the median-pass fields and res.verified from res.passes.
void summarize(RunResult &res);

// Nearest-rank percentile of @v (need not be sorted), @p in (0, 100]; 0 when empty.
double percentile(std::vector<double> v, double p);

} // namespace kvblk_bench

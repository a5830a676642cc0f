// SPDX-License-Identifier: MIT
//
// kvblk-bench engine workload: what a serving engine does when a prefix hits
// the KV cache. The store's first L x C objects are L layers of C chunks. The
// engine needs layer 0 first, then layer 1, ...; it computes layer i while
// later layers load. Four ways to load the same bytes into the same memory,
// run in interleaved rounds (medians):
//
//   pipeline   kvblk_submit() of layers 0..k-1 (layer 0 with
//              KVBLK_SUBMIT_PRIORITY), then for each layer i: kvblk_wait(i),
//              submit layer i+k, verify layer i (the "compute")
//   per-layer  one blocking kvblk_load_many() per layer
//   all        one blocking kvblk_load_many() of all layers' bytes (the
//              reference: the pipeline may not cost more than this)
//   serial     pread(2) of one chunk at a time, O_DIRECT (what a local-disk
//              cache loop does today)
//
// Goals (checked by the caller): pipeline total <= 1.05 x all, and the
// pipeline's time to layer 0 <= 1.5 x (all / L).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvblk_bench {

struct EngineConfig {
	std::string path;	    // the store (store.hpp layout, pattern verified)
	uint64_t object_bytes = 0;  // one chunk
	uint32_t layers = 32;	    // L
	uint32_t chunks = 16;	    // C chunks per layer
	uint32_t ahead = 4;	    // k layers in flight in the pipeline
	int backend = 0;	    // enum kvblk_backend
	uint32_t queue_depth = 0;   // 0: library default
	uint32_t workers = 0;
	uint64_t cmd_bytes = 0;
	unsigned rounds = 3;
};

// One way of loading, medians over the rounds.
struct EngineLeg {
	std::string name;	      // pipeline, per-layer, all, serial
	double total_ms = 0;	      // until the last layer is in memory
	double first_layer_ms = 0;    // until layer 0 is in memory
	double gbps = 0;	      // L x C x chunk bytes / total
	double cpu_s_per_gb = 0;      // user + system CPU of the process / GB
	std::vector<double> total_ms_rounds;
	bool verified = true;	      // every byte of every layer, every round
	std::string error;
};

struct EngineReport {
	std::string backend;	      // kvblk_batch_info.backend of the kvblk legs
	std::string async;	      // kvblk_dev_info.async: native or thread
	uint64_t bytes = 0;	      // per round and leg
	std::vector<EngineLeg> legs;  // pipeline, per-layer, all, serial
	double pipeline_vs_all = 0;   // pipeline total / all total (goal <= 1.05)
	double first_vs_share = 0;    // pipeline first layer / (all / L) (goal <= 1.5)
	bool pipeline_ok = false;
	bool first_layer_ok = false;
};

// Run the workload on cfg.path, whose first layers x chunks objects hold the
// pattern. Returns 0, or -errno when it could not run (report.legs[i].error).
int run_engine_workload(const EngineConfig &cfg, EngineReport &report);

} // namespace kvblk_bench

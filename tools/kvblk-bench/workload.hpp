// SPDX-License-Identifier: MIT
//
// kvblk-bench workloads: where the objects lie (one store file, or one file
// per chunk), how big each one is, and in which order a pass loads them.
// The kvblk runner and the fio replay logs are both made from the same
// Workload, so the fio ceiling reads the same byte ranges in the same order
// as the kvblk pass it is compared with.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace kvblk_bench {

enum class Order {
	file,	// object 0, 1, 2, ...: ascending offsets (an engine loading a prefix)
	random, // a seeded permutation (a cache hit on scattered objects)
};

const char *order_name(Order o) noexcept;

// Named workloads: each gets its own searched ceiling.
struct WorkloadPreset {
	const char *name;
	uint64_t objects;
	uint64_t object_bytes; // 0: mixed sizes (kMixedSizes)
	Order order;
	bool one_file_per_object; // LMCache-shaped: one file per chunk
	const char *what;
};

// large, small, mixed, chunks; nullptr for an unknown name.
const WorkloadPreset *find_preset(const std::string &name) noexcept;
const std::vector<WorkloadPreset> &presets() noexcept;

// Object sizes of the mixed workload, drawn per object from the seed.
inline constexpr uint64_t kMixedSizes[] = {256u << 10, 1u << 20, 4u << 20, 16u << 20};

struct Workload {
	std::string name;		// preset name, or "custom"
	bool files = false;		// one file per object (paths[i]); else one store at offset[i]
	std::vector<std::string> paths; // files: one per object; else one, the store
	std::vector<uint64_t> offset;	// object i: bytes [offset[i], offset[i] + length[i]) of its file
	std::vector<uint64_t> length;
	std::vector<uint64_t> order;	// objects in the order a pass loads them
	Order order_kind = Order::file;
	uint64_t seed = 0;
	bool mixed = false;

	[[nodiscard]] uint64_t objects() const noexcept { return length.size(); }
	[[nodiscard]] uint64_t total_bytes() const noexcept;
	[[nodiscard]] uint64_t max_length() const noexcept;
	[[nodiscard]] const std::string &path_of(uint64_t object) const { return files ? paths[object] : paths[0]; }
	// The store file, or the directory of the chunk files.
	[[nodiscard]] std::string where() const;
	// Bytes the store file needs (one-store workloads): the end of the last object.
	[[nodiscard]] uint64_t store_bytes() const noexcept;
	// "uniform 128 x 16777216" / "mixed seed 1 (256 objects)": what the sidecar records.
	[[nodiscard]] std::string layout_id() const;
};

// A store of @objects objects back to back from byte 0 of @path: all
// @object_bytes long, or (object_bytes 0) sizes drawn from kMixedSizes with
// @seed. @order file or random (a permutation drawn with @seed).
Workload make_store_workload(const std::string &path, uint64_t objects, uint64_t object_bytes, Order order,
			     uint64_t seed);

// One file per object under @dir (chunk-00000.bin, ...), each @object_bytes
// long, the object at offset 0; loaded in chunk order (an engine loading a
// prefix chunk by chunk).
Workload make_chunk_workload(const std::string &dir, uint64_t objects, uint64_t object_bytes);

// The seeded permutation of 0..n-1 that Order::random uses (Fisher-Yates
// over splitmix64, so that it is the same on every platform and run).
std::vector<uint64_t> permutation(uint64_t n, uint64_t seed);

// One command of a pass: what kvblk's uring and psync backends issue for an
// object split at @cmd_bytes, in the order they issue them.
struct Command {
	uint64_t object;
	uint64_t offset; // in the object's file
	uint64_t length;
};

// Every command of one pass: objects in wl.order, each split into commands
// of at most @cmd_bytes from its start.
std::vector<Command> pass_commands(const Workload &wl, uint64_t cmd_bytes);

// fio "version 2" replay log of commands [first, first + count) of @cmds:
// every file they touch is added and opened first, then the reads in order,
// then the files are closed. Fails (returns false, @err) when a path has
// whitespace, which the log format cannot carry.
bool write_iolog(std::ostream &out, const Workload &wl, const std::vector<Command> &cmds, size_t first,
		 size_t count, std::string &err);

// Split @n commands between @jobs fio jobs: contiguous slices (the first
// n % jobs one longer), each replayed in pass order, so that the jobs
// together issue every command of the pass exactly once. Returns (first,
// count) per job.
std::vector<std::pair<size_t, size_t>> split_jobs(size_t n, uint32_t jobs);

// The commands of fio job @job of @jobs that each read their own objects:
// the objects at pass positions job, job + jobs, job + 2 x jobs, .. in that
// order, each split as pass_commands() splits it. Together the jobs issue
// every command of the pass once, and at any time read @jobs objects (as
// many regions of the store) at once.
std::vector<Command> object_job_commands(const Workload &wl, uint64_t cmd_bytes, uint32_t job, uint32_t jobs);

// How kvblk's uring backend issues one pass (libkvblk's uring core): each
// kvblk_load_many() call of @batch_objects consecutive objects of wl.order
// puts its commands in flight in pass order, at most @in_flight (rings x
// queue depth) at a time, taking the next as one completes; the call returns
// when its last command completes, so calls do not overlap. The result is
// the most objects with commands in flight at once when commands complete in
// order (a slow command kept longer only widens it): the regions of the
// store kvblk reads together.
uint32_t objects_in_flight(const Workload &wl, uint64_t cmd_bytes, uint32_t batch_objects, uint64_t in_flight);

} // namespace kvblk_bench

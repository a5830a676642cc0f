// SPDX-License-Identifier: MIT
#include "workload.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/core.h>

#include "store.hpp"

namespace kvblk_bench {

const char *order_name(Order o) noexcept
{
	return o == Order::random ? "random" : "file";
}

const std::vector<WorkloadPreset> &presets() noexcept
{
	// The benchmark's workloads (docs/kvblk-bench.md). chunks: LMCache's local disk keeps one file per
	// chunk; 32 MiB is one 256-token chunk of Llama-3.1-8B in bf16
	// (2 x 32 layers x 8 KV heads x 128 x 2 bytes x 256 tokens).
	static const std::vector<WorkloadPreset> p = {
		{"large", 128, 16u << 20, Order::file, false, "128 x 16 MiB objects, file order"},
		{"small", 4096, 256u << 10, Order::random, false, "4096 x 256 KiB objects, random order"},
		{"mixed", 256, 0, Order::random, false, "256 objects of 256 KiB..16 MiB, random order"},
		{"chunks", 64, 32u << 20, Order::file, true,
		 "64 x 32 MiB LMCache-shaped chunks, one file each, chunk order"},
	};
	return p;
}

const WorkloadPreset *find_preset(const std::string &name) noexcept
{
	for (const WorkloadPreset &p : presets())
		if (name == p.name)
			return &p;
	return nullptr;
}

uint64_t Workload::total_bytes() const noexcept
{
	return std::accumulate(length.begin(), length.end(), uint64_t(0));
}

uint64_t Workload::max_length() const noexcept
{
	return length.empty() ? 0 : *std::max_element(length.begin(), length.end());
}

std::string Workload::where() const
{
	return files ? paths[0].substr(0, paths[0].rfind('/')) : paths[0];
}

uint64_t Workload::store_bytes() const noexcept
{
	return length.empty() ? 0 : offset.back() + length.back();
}

std::string Workload::layout_id() const
{
	if (mixed)
		return fmt::format("mixed seed {} ({} objects)", seed, objects());
	return fmt::format("uniform {} x {}", objects(), length.empty() ? 0 : length[0]);
}

std::vector<uint64_t> permutation(uint64_t n, uint64_t seed)
{
	std::vector<uint64_t> p(n);
	std::iota(p.begin(), p.end(), uint64_t(0));
	uint64_t state = seed;
	for (uint64_t i = n; i > 1; i--) {
		state += 0x9e3779b97f4a7c15ULL;
		// splitmix64 of the advancing state; the modulo bias (< 2^-40 for
		// any n kvblk-bench accepts) does not matter for a load order.
		const uint64_t j = splitmix64(state) % i;
		std::swap(p[i - 1], p[j]);
	}
	return p;
}

Workload make_store_workload(const std::string &path, uint64_t objects, uint64_t object_bytes, Order order,
			     uint64_t seed)
{
	Workload wl;
	wl.paths = {path};
	wl.order_kind = order;
	wl.seed = seed;
	wl.mixed = object_bytes == 0;
	wl.offset.resize(objects);
	wl.length.resize(objects);
	uint64_t at = 0, state = seed ^ 0x6d69786564ULL; // sizes and order drawn from different streams
	for (uint64_t i = 0; i < objects; i++) {
		uint64_t len = object_bytes;
		if (wl.mixed) {
			state += 0x9e3779b97f4a7c15ULL;
			len = kMixedSizes[splitmix64(state) % std::size(kMixedSizes)];
		}
		wl.offset[i] = at;
		wl.length[i] = len;
		at += len;
	}
	if (order == Order::random) {
		wl.order = permutation(objects, seed);
	} else {
		wl.order.resize(objects);
		std::iota(wl.order.begin(), wl.order.end(), uint64_t(0));
	}
	return wl;
}

Workload make_chunk_workload(const std::string &dir, uint64_t objects, uint64_t object_bytes)
{
	Workload wl;
	wl.files = true;
	wl.order_kind = Order::file;
	for (uint64_t i = 0; i < objects; i++) {
		wl.paths.push_back(fmt::format("{}/chunk-{:05}.bin", dir, i));
		wl.offset.push_back(0);
		wl.length.push_back(object_bytes);
		wl.order.push_back(i);
	}
	return wl;
}

std::vector<Command> pass_commands(const Workload &wl, uint64_t cmd_bytes)
{
	std::vector<Command> cmds;
	for (uint64_t obj : wl.order)
		for (uint64_t at = 0; at < wl.length[obj]; at += cmd_bytes)
			cmds.push_back({obj, wl.offset[obj] + at, std::min(cmd_bytes, wl.length[obj] - at)});
	return cmds;
}

std::vector<Command> object_job_commands(const Workload &wl, uint64_t cmd_bytes, uint32_t job, uint32_t jobs)
{
	std::vector<Command> cmds;
	for (uint64_t pos = job; jobs && pos < wl.order.size(); pos += jobs) {
		const uint64_t obj = wl.order[pos];
		for (uint64_t at = 0; at < wl.length[obj]; at += cmd_bytes)
			cmds.push_back({obj, wl.offset[obj] + at, std::min(cmd_bytes, wl.length[obj] - at)});
	}
	return cmds;
}

uint32_t objects_in_flight(const Workload &wl, uint64_t cmd_bytes, uint32_t batch_objects, uint64_t in_flight)
{
	if (!cmd_bytes || !batch_objects || !in_flight)
		return 0;
	uint32_t most = 0;
	for (uint64_t b0 = 0; b0 < wl.order.size(); b0 += batch_objects) {
		// Commands per object of this call, in pass order.
		std::vector<uint64_t> per;
		for (uint64_t p = b0; p < std::min<uint64_t>(b0 + batch_objects, wl.order.size()); p++)
			per.push_back(std::max<uint64_t>(1, (wl.length[wl.order[p]] + cmd_bytes - 1) / cmd_bytes));
		// With completions in order, what is in flight is a window of
		// consecutive commands. The widest starts at the last command of
		// an object (or at the call's first command) and takes as many
		// following objects as the rest of the window reaches.
		for (size_t i = 0; i < per.size(); i++) {
			uint64_t left = in_flight - (i ? 1 : 0);
			uint32_t n = i ? 1 : 0;
			for (size_t k = i; k < per.size() && left; k++, n++)
				left -= std::min(left, per[k]);
			most = std::max(most, n);
		}
	}
	return most;
}

bool write_iolog(std::ostream &out, const Workload &wl, const std::vector<Command> &cmds, size_t first,
		 size_t count, std::string &err)
{
	// Files in the order the slice first touches them.
	std::vector<const std::string *> files;
	std::set<const std::string *> seen;
	for (size_t i = first; i < first + count; i++) {
		const std::string *p = &wl.path_of(cmds[i].object);
		if (seen.insert(p).second)
			files.push_back(p);
	}
	for (const std::string *p : files)
		if (p->find_first_of(" \t\n") != std::string::npos) {
			err = fmt::format("fio's replay log cannot name a path with whitespace: '{}'", *p);
			return false;
		}
	out << "fio version 2 iolog\n";
	for (const std::string *p : files)
		out << *p << " add\n";
	for (const std::string *p : files)
		out << *p << " open\n";
	for (size_t i = first; i < first + count; i++)
		out << wl.path_of(cmds[i].object) << " read " << cmds[i].offset << ' ' << cmds[i].length << '\n';
	for (const std::string *p : files)
		out << *p << " close\n";
	if (!out) {
		err = "cannot write the replay log";
		return false;
	}
	return true;
}

std::vector<std::pair<size_t, size_t>> split_jobs(size_t n, uint32_t jobs)
{
	std::vector<std::pair<size_t, size_t>> s;
	size_t at = 0;
	for (uint32_t j = 0; j < jobs; j++) {
		const size_t count = n / jobs + (j < n % jobs ? 1 : 0);
		s.emplace_back(at, count);
		at += count;
	}
	return s;
}

} // namespace kvblk_bench

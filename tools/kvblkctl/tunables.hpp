// SPDX-License-Identifier: MIT
/*
 * tunables.hpp - THE table of kvblk.ko's tunables and of kvblkctl's
 * environment variables.
 *
 * One source for: client-side range checks of `kvblkctl tune set`, the
 * ranges and defaults `kvblkctl tune get` prints, and docs/tunables.md
 * (`kvblkctl docs tunables` prints it; the ctest `kvblkctl_docs_tunables`
 * fails when the committed file differs). The values must equal
 * kmod/kvblk.h (KVBLK_MAX_*_{MIN,MAX,DEF}) and kmod/tunables.c's alignment
 * rule; kvblk.ko checks them again and has the last word.
 */
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kvblkctl {

struct Tunable {
	std::string_view name;	  /* sysfs file and module parameter name */
	std::uint64_t min;	  /* smallest accepted value */
	std::uint64_t max;	  /* largest accepted value */
	std::uint64_t align;	  /* value must be a multiple of this (1: any) */
	std::uint64_t def;	  /* module default */
	std::string_view unit;	  /* "bytes", "commands", "descriptors" */
	std::string_view applies; /* when a change takes effect */
	std::string_view help;	  /* one line */
};

inline constexpr std::array<Tunable, 3> kTunables{ {
	{ "max_cmd_bytes", 4096, 8388608, 4096, 1048576, "bytes",
	  "contexts attached later (fixed per context at attach)",
	  "Largest command an object is split into: a bio of the block-layer engines "
	  "(the block layer splits it further to the queue's limits), or an NVMe command "
	  "of the PRP engine, capped by the controller's MDTS (hw_max_cmd_bytes) and 65536 LBAs." },
	{ "max_inflight", 1, 65536, 1, 256, "commands", "the next LOAD_MANY call",
	  "NVMe commands in flight per LOAD_MANY call." },
	{ "max_descs", 1, 65536, 1, 4096, "descriptors", "the next LOAD_MANY call",
	  "Descriptors (objects) accepted per LOAD_MANY call." },
} };

/** Environment variables libkvblk and kvblkctl read. */
struct EnvVar {
	std::string_view name;
	std::string_view def;
	std::string_view help;
};

inline constexpr std::array<EnvVar, 5> kEnvVars{ {
	{ "KVBLK_BACKEND", "auto",
	  "libkvblk: overrides KVBLK_BACKEND_AUTO (auto, uring, threadpool, psync, "
	  "kmod, uring_cmd); the backend that served each batch is still reported." },
	{ "KVBLK_CUDART", "(unset)",
	  "libkvblk: a CUDA runtime library tried before libcudart.so.13, "
	  ".12 and libcudart.so (the staged path and kvblk-bench --dest cuda)." },
	{ "KVBLK_SYSFS_ROOT", "/sys",
	  "Root of the sysfs tree kvblkctl reads (kernel/kvblk, module/kvblk); "
	  "tests point it at a fake tree." },
	{ "KVBLK_DEV_ROOT", "/dev",
	  "Where kvblkctl looks for device nodes (kvblk, ng*) when it lists "
	  "the backends available." },
	{ "KVBLK_TRACEFS", "/sys/kernel/tracing",
	  "tracefs root of `kvblkctl trace` (else /sys/kernel/debug/tracing); "
	  "tests point it at a fake tree." },
} };

inline const Tunable *find_tunable(std::string_view name)
{
	for (const auto &t : kTunables)
		if (t.name == name)
			return &t;
	return nullptr;
}

} // namespace kvblkctl

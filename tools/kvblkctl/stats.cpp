// SPDX-License-Identifier: MIT
/*
 * stats.cpp - `kvblkctl stats [DEVICE] [--watch SECONDS] [--reset]`:
 * a namespace's counters from /sys/kernel/kvblk/<disk>/stats, its two
 * latency histograms as text bars, and with --watch the rates between two
 * samples SECONDS apart.
 */
#include "common.hpp"
#include "sysfs.hpp"

#include <algorithm>
#include <cerrno>
#include <array>
#include <chrono>
#include <cstdio>
#include <string_view>
#include <thread>

namespace kvblkctl {

namespace {

/* The counter files of stats/, in the order they are printed. */
constexpr std::array<std::string_view, 13> kCounters{
	"batches",	    "batches_interrupted", "objects",	       "objects_failed",
	"commands",	    "bytes",		   "bytes_written",    "errors_io",
	"errors_media",	    "errors_transport",	   "errors_other",     "inflight",
	"inflight_peak",
};
/* Counters a kvblk.ko without stores (KVBLK_FEAT_STORE) lacks: read as 0 there. */
constexpr std::string_view kSinceStores = "bytes_written";
constexpr std::array<std::string_view, 2> kHists{ "cmd_latency_us", "batch_latency_us" };

struct Sample {
	std::string disk;
	std::vector<std::uint64_t> counters;
	std::array<std::vector<HistBucket>, 2> hists;
	std::chrono::steady_clock::time_point when;
};

struct StatsOpts {
	std::string device;
	double watch = 0;
	bool reset = false;
};

int read_sample(const std::string &disk, Sample &s, std::string &err)
{
	std::string dir = kvblk_dir() + "/" + disk + "/stats";
	s.disk = disk;
	s.counters.clear();
	for (auto c : kCounters) {
		std::uint64_t v = 0;
		std::string p = dir + "/" + std::string(c);
		int ret = read_u64(p, v);
		if (ret == -ENOENT && c == kSinceStores)
			ret = 0;
		if (ret) {
			err = p + ": " + errstr(ret);
			return ret;
		}
		s.counters.push_back(v);
	}
	for (std::size_t i = 0; i < kHists.size(); i++) {
		std::string p = dir + "/" + std::string(kHists[i]);
		int ret = read_hist(p, s.hists[i]);
		if (ret) {
			err = p + ": " + errstr(ret);
			return ret;
		}
	}
	s.when = std::chrono::steady_clock::now();
	return 0;
}

std::uint64_t counter(const Sample &s, std::string_view name)
{
	for (std::size_t i = 0; i < kCounters.size(); i++)
		if (kCounters[i] == name)
			return s.counters[i];
	return 0;
}

struct Rates {
	double seconds, objects, commands, bytes;
};

Rates rates(const Sample &a, const Sample &b)
{
	double dt = std::chrono::duration<double>(b.when - a.when).count();
	auto d = [&](std::string_view n) {
		std::uint64_t x = counter(a, n), y = counter(b, n);
		/* Went backwards: the namespace was detached and re-attached. */
		return static_cast<double>(y >= x ? y - x : y) / dt;
	};
	return { dt, d("objects"), d("commands"), d("bytes") };
}

/* Latency bucket bound as text, exact: "2048us". */
std::string bound(std::uint64_t us)
{
	return std::to_string(us) + "us";
}

void print_hist(std::string_view name, const std::vector<HistBucket> &h)
{
	std::uint64_t total = 0, peak = 0;
	std::size_t first = h.size(), last = 0;
	for (std::size_t i = 0; i < h.size(); i++) {
		total += h[i].count;
		peak = std::max(peak, h[i].count);
		if (h[i].count) {
			first = std::min(first, i);
			last = i;
		}
	}
	std::printf("  %s (%llu samples)\n", std::string(name).c_str(),
		    static_cast<unsigned long long>(total));
	if (!total)
		return;
	constexpr int kWidth = 40;
	for (std::size_t i = first; i <= last; i++) {
		std::string hi = i + 1 < h.size() ? bound(h[i + 1].lower_us) : "inf";
		int n = static_cast<int>((h[i].count * kWidth + peak - 1) / peak);
		std::printf("    %8s .. %-8s %12llu |%s\n", bound(h[i].lower_us).c_str(),
			    hi.c_str(), static_cast<unsigned long long>(h[i].count),
			    std::string(static_cast<std::size_t>(n), '#').c_str());
	}
}

nlohmann::ordered_json sample_json(const Sample &s)
{
	nlohmann::ordered_json j;
	j["device"] = s.disk;
	for (std::size_t i = 0; i < kCounters.size(); i++)
		j["counters"][std::string(kCounters[i])] = s.counters[i];
	for (std::size_t i = 0; i < kHists.size(); i++) {
		auto arr = nlohmann::ordered_json::array();
		for (const auto &b : s.hists[i])
			arr.push_back({ { "lower_us", b.lower_us }, { "count", b.count } });
		j[std::string(kHists[i])] = arr;
	}
	return j;
}

int run_stats(const Globals &g, const StatsOpts &o)
{
	std::vector<std::string> disks;
	if (!o.device.empty()) {
		std::string d = disk_name(o.device);
		if (!is_dir(kvblk_dir() + "/" + d)) {
			if (!is_dir(module_dir()))
				return fail("stats", d + ": kvblk.ko is not loaded");
			return fail("stats", d + ": not attached to kvblk (no " +
						     kvblk_dir() + "/" + d + ")");
		}
		disks.push_back(d);
	} else {
		if (!is_dir(module_dir()))
			return fail("stats", "kvblk.ko is not loaded");
		disks = list_dirs(kvblk_dir());
	}

	if (o.reset) {
		for (const auto &d : disks) {
			std::string p = kvblk_dir() + "/" + d + "/stats/reset";
			if (!path_exists(p))
				return fail("stats", "reset: not supported by this kvblk.ko");
			int ret = write_text(p, "1\n");
			if (ret)
				return fail("stats", "reset: " + d + ": " + errstr(ret));
		}
		if (g.output == Output::normal)
			for (const auto &d : disks)
				std::printf("%s: counters reset\n", d.c_str());
		return 0;
	}

	std::vector<Sample> first(disks.size()), second;
	std::string err;
	for (std::size_t i = 0; i < disks.size(); i++)
		if (read_sample(disks[i], first[i], err))
			return fail("stats", err);
	if (o.watch > 0) {
		std::this_thread::sleep_for(std::chrono::duration<double>(o.watch));
		second.resize(disks.size());
		for (std::size_t i = 0; i < disks.size(); i++)
			if (read_sample(disks[i], second[i], err))
				return fail("stats", err);
	}
	const auto &now = o.watch > 0 ? second : first;

	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["devices"] = nlohmann::ordered_json::array();
		for (std::size_t i = 0; i < now.size(); i++) {
			auto j = sample_json(now[i]);
			if (o.watch > 0) {
				Rates r = rates(first[i], second[i]);
				j["rates"] = { { "interval_s", r.seconds },
					       { "objects_per_s", r.objects },
					       { "commands_per_s", r.commands },
					       { "bytes_per_s", r.bytes },
					       { "gb_per_s", r.bytes / 1e9 } };
			}
			doc["devices"].push_back(j);
		}
		print_json(doc);
		return 0;
	}
	if (now.empty())
		std::printf("no namespace attached to kvblk\n");
	for (std::size_t i = 0; i < now.size(); i++) {
		const Sample &s = now[i];
		std::printf("%s\n", s.disk.c_str());
		for (std::size_t c = 0; c < kCounters.size(); c++) {
			if (kCounters[c] == "bytes" || kCounters[c] == "bytes_written")
				std::printf("  %-20s %s\n", std::string(kCounters[c]).c_str(),
					    human_bytes(s.counters[c]).c_str());
			else
				std::printf("  %-20s %llu\n", std::string(kCounters[c]).c_str(),
					    static_cast<unsigned long long>(s.counters[c]));
		}
		if (o.watch > 0) {
			Rates r = rates(first[i], second[i]);
			std::printf("  rates over %.2f s: %.1f objects/s, %.1f commands/s, %.3f GB/s\n",
				    r.seconds, r.objects, r.commands, r.bytes / 1e9);
		}
		for (std::size_t h = 0; h < kHists.size(); h++)
			print_hist(kHists[h], s.hists[h]);
	}
	return 0;
}

} // namespace

void register_stats(CLI::App &app, Globals &g, Handler &h)
{
	auto o = std::make_shared<StatsOpts>();
	auto *sub = app.add_subcommand(
		"stats", "Counters and latency histograms of attached namespaces");
	sub->add_option("device", o->device,
			"Namespace (nvme0n1 or /dev/nvme0n1; a partition names its disk); "
			"default: every attached namespace");
	sub->add_option("-w,--watch", o->watch,
			"Take two samples SECONDS apart and print the rates between them")
		->check(CLI::PositiveNumber)
		->option_text("SECONDS");
	auto *reset = sub->add_flag("--reset", o->reset,
				    "Zero the counters, where kvblk.ko supports it");
	reset->excludes("--watch");
	sub->callback([&g, &h, o] { h = [&g, o] { return run_stats(g, *o); }; });
}

} // namespace kvblkctl

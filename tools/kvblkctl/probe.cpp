// SPDX-License-Identifier: MIT
/*
 * probe.cpp - `kvblkctl probe PATH`: will this device be fast for KV loads?
 *
 * Opens PATH through libkvblk exactly as an engine would (backend AUTO,
 * default options), then measures kvblk_load_many() at 256 KiB, 2 MiB and
 * 16 MiB objects, 1 and 8 objects per call, over the first SPAN bytes of
 * PATH (128 MiB .. 1 GiB, as much as PATH holds), and the device's own
 * ceiling: fio, io_uring, O_DIRECT, reading the same span (time based,
 * rereading it) with kvblk's command size at queue depths 1, 16 and 64
 * (tools/common/fio.hpp), in three rounds.
 *
 * Verdict (probe_verdict.hpp): only when the ceiling held still (the best
 * point's rounds within 0.20 of their median), from "of ceiling" = best
 * GB/s of an object size / the ceiling: the smaller of the 2 MiB and
 * 16 MiB ratios decides: fast >= 0.80, ok >= 0.50, else slow; "unstable"
 * with the rounds and their spread when the ceiling swung; unknown when fio
 * could not measure a ceiling.
 *
 * Read only unless --write: then the span is written with a non-zero
 * pattern first (a missing file is created, and removed at the end).
 * --seconds bounds the measurements (the writing comes on top).
 */
#include "common.hpp"
#include "fio.hpp"
#include "probe_verdict.hpp"

#include <kvblk/kvblk.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvblkctl {

namespace {

const char *const kCmd = "probe";

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kObjectSizes[] = { 256ull << 10, 2 * kMiB, 16 * kMiB };
constexpr std::uint32_t kObjectsPerCall[] = { 1, 8 };
constexpr std::uint32_t kFioDepths[] = { 1, 16, 64 };
constexpr std::uint64_t kMinSpan = 16 * kMiB * 8; /* largest object x most per call */
constexpr std::uint64_t kMaxSpan = 1024 * kMiB;

struct ProbeOpts {
	std::string path;
	bool write = false;
	double seconds = 20;
};

struct LoadPoint {
	std::uint64_t object_bytes = 0;
	std::uint32_t per_call = 0;
	std::uint64_t calls = 0, bytes = 0, commands = 0;
	double seconds = 0, gbps = 0;
};

std::string size_name(std::uint64_t b)
{
	if (b >= kMiB && b % kMiB == 0)
		return std::to_string(b / kMiB) + " MiB";
	if (b >= 1024 && b % 1024 == 0)
		return std::to_string(b / 1024) + " KiB";
	return std::to_string(b) + " B";
}

const char *path_name(std::uint32_t p)
{
	switch (p) {
	case KVBLK_PATH_HOST:
		return "host";
	case KVBLK_PATH_P2P:
		return "p2p";
	case KVBLK_PATH_STAGED:
		return "staged";
	}
	return "unknown";
}

/* Size of an existing block device or file; -ENOENT when missing. */
int target_size(const std::string &path, std::uint64_t &size, bool &blockdev)
{
	struct stat st;
	if (::stat(path.c_str(), &st) != 0)
		return -errno;
	blockdev = S_ISBLK(st.st_mode);
	if (S_ISREG(st.st_mode)) {
		size = std::uint64_t(st.st_size);
		return 0;
	}
	if (!blockdev)
		return -ENOTSUP;
	int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int ret = ::ioctl(fd, BLKGETSIZE64, &size) ? -errno : 0;
	::close(fd);
	return ret;
}

/* Write @span bytes of a non-zero pattern at offset 0 (O_DIRECT), then fdatasync. */
int write_scratch(const std::string &path, std::uint64_t span, bool create)
{
	int fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0), 0644);
	if (fd < 0)
		return -errno;
	const std::uint64_t chunk = 16 * kMiB;
	void *buf = ::mmap(nullptr, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		::close(fd);
		return -ENOMEM;
	}
	std::uint64_t x = 0x9e3779b97f4a7c15ull;
	auto *w = static_cast<std::uint64_t *>(buf);
	for (std::uint64_t i = 0; i < chunk / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	int ret = 0;
	for (std::uint64_t off = 0; off < span && !ret; off += chunk) {
		w[0] = off; /* no two chunks alike */
		ssize_t n = ::pwrite(fd, buf, std::min(chunk, span - off), off_t(off));
		if (n < 0)
			ret = -errno;
		else if (std::uint64_t(n) != std::min(chunk, span - off))
			ret = -EIO;
	}
	if (!ret && ::fdatasync(fd))
		ret = -errno;
	::munmap(buf, chunk);
	::close(fd);
	return ret;
}

/* Load objects of @object_bytes, @per_call per kvblk_load_many(), for @seconds. */
int measure(kvblk_dev *dev, std::uint32_t buf_id, void *buf, std::uint64_t span, std::uint64_t object_bytes,
	    std::uint32_t per_call, double seconds, LoadPoint &pt, std::uint32_t &path, std::string &why)
{
	pt = LoadPoint{};
	pt.object_bytes = object_bytes;
	pt.per_call = per_call;
	std::vector<kvblk_desc> descs(per_call);
	std::vector<kvblk_result> results(per_call);
	const std::uint64_t slots = span / object_bytes;
	std::uint64_t next = 0;
	auto t0 = std::chrono::steady_clock::now();
	auto deadline = t0 + std::chrono::duration<double>(seconds);
	do {
		for (std::uint32_t i = 0; i < per_call; i++) {
			descs[i] = kvblk_desc{};
			descs[i].offset = (next++ % slots) * object_bytes;
			descs[i].length = object_bytes;
			descs[i].addr = buf_id == KVBLK_BUF_NONE ? std::uint64_t(uintptr_t(buf)) + i * object_bytes
								  : i * object_bytes;
			descs[i].buf_id = buf_id;
			descs[i].tag = descs[i].offset;
		}
		kvblk_batch_info info{};
		info.info_size = sizeof(info);
		int ret = kvblk_load_many(dev, descs.data(), per_call, results.data(), &info);
		if (ret < 0) {
			why = std::string("load_many: ") + errstr(ret) + " (" + kvblk_last_error() + ")";
			return ret;
		}
		if (std::uint32_t(ret) != per_call) {
			for (const auto &r : results) {
				if (r.status) {
					why = "load_many: object at offset " + std::to_string(r.tag) + ": " +
					      errstr(r.status);
					return r.status;
				}
			}
			why = "load_many: " + std::to_string(per_call - std::uint32_t(ret)) + " objects failed";
			return -EIO;
		}
		path = info.path;
		pt.calls++;
		pt.bytes += info.bytes;
		pt.commands += info.commands;
	} while (std::chrono::steady_clock::now() < deadline);
	pt.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	pt.gbps = double(pt.bytes) / pt.seconds / 1e9;
	return 0;
}

int probe_main(const Globals &g, const ProbeOpts &o)
{
	std::uint64_t size = 0;
	bool blockdev = false, created = false;
	int ret = target_size(o.path, size, blockdev);
	if (ret == -ENOENT && o.write) {
		created = true;
		size = 0;
	} else if (ret == -ENOENT) {
		return fail(kCmd, o.path + ": " + errstr(ret) + " (give --write to create a scratch file)");
	} else if (ret == -ENOTSUP) {
		return fail(kCmd, o.path + ": neither a block device nor a regular file");
	} else if (ret) {
		return fail(kCmd, o.path + ": " + errstr(ret));
	}

	/* The span: all of PATH up to 1 GiB, in whole 16 MiB objects. */
	std::uint64_t span = std::min(size, kMaxSpan) / (16 * kMiB) * (16 * kMiB);
	bool wrote = false;
	if (span < kMinSpan) {
		if (!o.write)
			return fail(kCmd, o.path + ": " + std::to_string(size) + " bytes, the probe reads " +
						  std::to_string(kMinSpan) + ": give --write to write a scratch " +
						  (blockdev ? "region" : "file") + " of that size first");
		if (blockdev)
			return fail(kCmd, o.path + ": a block device of " + std::to_string(size) +
						  " bytes; the probe needs " + std::to_string(kMinSpan));
		span = kMinSpan;
	}
	struct Cleanup {
		const std::string &path;
		bool &created;
		~Cleanup()
		{
			if (created)
				::unlink(path.c_str());
		}
	} cleanup{ o.path, created };
	if (o.write) {
		std::fprintf(stderr, "kvblkctl: probe: writing %s of %s first\n", human_bytes(span).c_str(),
			     o.path.c_str());
		if ((ret = write_scratch(o.path, span, created)))
			return fail(kCmd, o.path + ": writing the scratch " + (blockdev ? "region" : "file") + ": " +
						  errstr(ret));
		wrote = true;
	}

	kvblk_dev *dev = nullptr;
	if ((ret = kvblk_open(o.path.c_str(), nullptr, &dev)))
		return fail(kCmd, o.path + ": open: " + errstr(ret) + " (" + kvblk_last_error() + ")");
	struct Close {
		kvblk_dev *d;
		~Close() { kvblk_close(d); }
	} close_dev{ dev };
	kvblk_dev_info info{};
	info.info_size = sizeof(info);
	if ((ret = kvblk_get_info(dev, &info)))
		return fail(kCmd, "get_info: " + errstr(ret));
	span = std::min(span, info.capacity / (16 * kMiB) * (16 * kMiB));

	/* One destination for the largest call, registered like an engine would. */
	const std::uint64_t buf_bytes = kObjectSizes[2] * kObjectsPerCall[1];
	void *buf = ::mmap(nullptr, buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return fail(kCmd, "mmap " + human_bytes(buf_bytes) + ": " + errstr(-errno));
	struct Unmap {
		void *p;
		std::uint64_t n;
		~Unmap() { ::munmap(p, n); }
	} unmap{ buf, buf_bytes };
	std::uint32_t buf_id = KVBLK_BUF_NONE;
	if (kvblk_register_buffer(dev, KVBLK_MEM_HOST, buf, buf_bytes, &buf_id))
		buf_id = KVBLK_BUF_NONE; /* plain pointers still work */

	const double per_point = o.seconds * 0.6 / double(std::size(kObjectSizes) * std::size(kObjectsPerCall));
	std::vector<LoadPoint> points;
	std::uint32_t data_path = KVBLK_PATH_HOST;
	for (std::uint64_t osz : kObjectSizes) {
		for (std::uint32_t n : kObjectsPerCall) {
			LoadPoint pt;
			std::string why;
			if (measure(dev, buf_id, buf, span, osz, n, per_point, pt, data_path, why))
				return fail(kCmd, o.path + ": " + size_name(osz) + " x " + std::to_string(n) + ": " + why);
			points.push_back(pt);
		}
	}

	/* The device's ceiling: fio with kvblk's command size over the same span. */
	kvblk_tools::FioConfig fc;
	fc.path = o.path;
	fc.size = span;
	fc.block_bytes = info.max_cmd_bytes;
	fc.queue_depths.assign(std::begin(kFioDepths), std::end(kFioDepths));
	fc.runtime_s = std::max(1u, unsigned(o.seconds * 0.4 / double(std::size(kFioDepths) * kProbeRounds)));
	fc.time_based = true; /* as long as a load point, not one pass of the span */
	std::vector<kvblk_tools::FioSweep> rounds;
	for (unsigned r = 0; r < kProbeRounds; r++)
		rounds.push_back(kvblk_tools::run_fio_sweep(fc));
	/* Each point: its median round, every round in gbps_repeats. */
	kvblk_tools::FioSweep sweep = kvblk_tools::median_sweep(rounds);
	const int best = sweep.best();
	const std::vector<double> best_rounds = best >= 0 ? sweep.points[size_t(best)].gbps_repeats : std::vector<double>{};

	struct SizeBest {
		std::uint64_t object_bytes;
		double gbps, of_ceiling;
	};
	std::vector<double> size_best;
	for (std::uint64_t osz : kObjectSizes) {
		double b = 0;
		for (const auto &p : points)
			if (p.object_bytes == osz)
				b = std::max(b, p.gbps);
		size_best.push_back(b);
	}
	const ProbeVerdict pv = probe_decide(best_rounds, size_best[1], size_best[2], sweep.note);
	const double ceiling = pv.ceiling;
	std::vector<SizeBest> sizes;
	for (size_t i = 0; i < size_best.size(); i++)
		sizes.push_back({ kObjectSizes[i], size_best[i], ceiling > 0 ? size_best[i] / ceiling : 0 });
	const std::string &verdict = pv.verdict, &reason = pv.reason;
	const double deciding = pv.deciding;

	if (g.output == Output::json) {
		using J = nlohmann::ordered_json;
		auto doc = json_doc();
		doc["path"] = o.path;
		doc["kind"] = blockdev ? "block_device" : "file";
		doc["capacity"] = info.capacity;
		doc["span_bytes"] = span;
		doc["wrote"] = wrote;
		doc["scratch_file_removed"] = created;
		doc["backend"] = kvblk_backend_name(int(info.backend));
		doc["backend_reason"] = info.backend_reason;
		doc["data_path"] = path_name(data_path);
		doc["logical_block_size"] = info.logical_block_size;
		doc["queue_depth"] = info.queue_depth;
		doc["max_cmd_bytes"] = info.max_cmd_bytes;
		doc["registered_buffer"] = buf_id != KVBLK_BUF_NONE;
		doc["seconds"] = o.seconds;
		J fio_pts = J::array();
		for (const auto &p : sweep.points)
			fio_pts.push_back({ { "queue_depth", p.queue_depth },
					    { "ok", p.ok },
					    { "gbps", p.ok ? J(p.gbps) : J(nullptr) },
					    { "error", p.error } });
		doc["ceiling"] = { { "available", best >= 0 },
				   { "program", sweep.program },
				   { "version", sweep.version },
				   { "block_bytes", fc.block_bytes },
				   { "gbps", best >= 0 ? J(ceiling) : J(nullptr) },
				   { "queue_depth", best >= 0 ? J(sweep.points[size_t(best)].queue_depth) : J(nullptr) },
				   { "note", sweep.note },
				   { "rounds", best_rounds },
				   { "spread", best >= 0 ? J(pv.spread) : J(nullptr) },
				   { "max_spread", kProbeMaxSpread },
				   { "stable", pv.stable },
				   { "points", fio_pts } };
		J loads = J::array();
		for (const auto &p : points)
			loads.push_back({ { "object_bytes", p.object_bytes },
					  { "objects_per_call", p.per_call },
					  { "calls", p.calls },
					  { "bytes", p.bytes },
					  { "commands", p.commands },
					  { "seconds", p.seconds },
					  { "gbps", p.gbps },
					  { "of_ceiling", ceiling > 0 ? J(p.gbps / ceiling) : J(nullptr) } });
		doc["loads"] = loads;
		J sz = J::array();
		for (const auto &s : sizes)
			sz.push_back({ { "object_bytes", s.object_bytes },
				       { "best_gbps", s.gbps },
				       { "of_ceiling", ceiling > 0 ? J(s.of_ceiling) : J(nullptr) } });
		doc["sizes"] = sz;
		doc["verdict"] = verdict;
		doc["verdict_ratio"] = ceiling > 0 ? J(deciding) : J(nullptr);
		doc["verdict_reason"] = reason;
		doc["thresholds"] = { { "fast", kProbeFast }, { "ok", kProbeOk }, { "max_spread", kProbeMaxSpread } };
		print_json(doc);
		return 0;
	}

	std::printf("probe      %s (%s, %s; %s from offset 0%s)\n", o.path.c_str(),
		    blockdev ? "block device" : "file", human_bytes(info.capacity).c_str(), size_name(span).c_str(),
		    wrote ? (created ? ", scratch file written, removed after" : ", written first") : ", read only");
	std::printf("backend    %s (AUTO: %s), data path %s\n", kvblk_backend_name(int(info.backend)),
		    info.backend_reason, path_name(data_path));
	std::printf("           queue depth %u, max command %s, lba %u, %s buffer\n", info.queue_depth,
		    size_name(info.max_cmd_bytes).c_str(), info.logical_block_size,
		    buf_id != KVBLK_BUF_NONE ? "registered" : "plain");
	std::printf("ceiling    %s io_uring O_DIRECT bs=%s:", sweep.version.empty() ? "fio" : sweep.version.c_str(),
		    size_name(fc.block_bytes).c_str());
	for (const auto &p : sweep.points) {
		if (p.ok)
			std::printf("  QD%u %.3f", p.queue_depth, p.gbps);
		else
			std::printf("  QD%u failed", p.queue_depth);
	}
	if (best >= 0)
		std::printf("  -> %.3f GB/s (median of %zu rounds, spread %.2f)\n", ceiling, best_rounds.size(),
			    pv.spread);
	else
		std::printf("  -> none (%s)\n", sweep.note.c_str());
	std::printf("loads      %-10s %12s %10s %8s %11s\n", "object", "objects/call", "GB/s", "calls", "of ceiling");
	for (const auto &p : points) {
		char ofc[16] = "-";
		if (ceiling > 0)
			std::snprintf(ofc, sizeof(ofc), "%.2f", p.gbps / ceiling);
		std::printf("           %-10s %12u %10.3f %8llu %11s\n", size_name(p.object_bytes).c_str(), p.per_call,
			    p.gbps, static_cast<unsigned long long>(p.calls), ofc);
	}
	std::printf("verdict    %s: %s\n", verdict.c_str(), reason.c_str());
	return 0;
}

} // namespace

void register_probe(CLI::App &app, Globals &g, Handler &h)
{
	auto o = std::make_shared<ProbeOpts>();
	auto *sub = app.add_subcommand("probe", "Will this device be fast for KV loads? load_many vs fio's ceiling");
	sub->footer("Measures kvblk_load_many (backend AUTO) at 256 KiB, 2 MiB and 16 MiB objects, 1 and 8 per\n"
		    "call, over the first 128 MiB..1 GiB of PATH, and fio io_uring at the same command size\n"
		    "(queue depths 1, 16, 64; three rounds). A verdict only when fio's best point held still\n"
		    "(rounds within 0.20 of their median; else \"unstable\" with the rounds), from the smaller\n"
		    "of the 2 MiB and 16 MiB ratios to it: fast >= 0.80, ok >= 0.50, else slow. Read only\n"
		    "unless --write.\n");
	sub->add_option("path", o->path, "Block device or regular file")->required();
	sub->add_flag("--write", o->write,
		      "Write the probed span with a pattern first (creates a missing file and removes it "
		      "after; OVERWRITES the first 128 MiB..1 GiB of an existing one)");
	sub->add_option("-s,--seconds", o->seconds, "Bound on the measurements in seconds (default 20)")
		->check(CLI::Range(1.0, 600.0));
	sub->callback([&g, &h, o] { h = [&g, o] { return probe_main(g, *o); }; });
}

} // namespace kvblkctl

// SPDX-License-Identifier: MIT
#include "engine.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>

#include <fmt/core.h>
#include <kvblk/kvblk.h>

#include "runner.hpp"
#include "store.hpp"
#include "util.hpp"

namespace kvblk_bench {
namespace {

enum Leg { kPipeline, kPerLayer, kAll, kSerial, kLegs };
constexpr const char *kLegNames[kLegs] = {"pipeline", "per-layer", "all", "serial"};

// Times of one leg of one round.
struct Timing {
	uint64_t first_ns = 0;
	uint64_t total_ns = 0;
	uint64_t cpu_ns = 0;
};

class Engine {
public:
	Engine(const EngineConfig &cfg, HostBuffer &buf, kvblk_dev *dev, uint32_t buf_id)
		: cfg_(cfg), buf_(buf), dev_(dev)
	{
		const uint32_t n = cfg.layers * cfg.chunks;
		descs_.resize(n);
		results_.resize(n);
		for (uint32_t o = 0; o < n; o++) {
			const uint64_t off = uint64_t(o) * cfg.object_bytes;
			descs_[o] = kvblk_desc{};
			descs_[o].offset = off;
			descs_[o].length = cfg.object_bytes;
			descs_[o].addr = off;
			descs_[o].buf_id = buf_id;
			descs_[o].tag = o;
		}
	}

	// Load every layer the way @leg does; 0 or -errno with @why set.
	int run(Leg leg, Timing &t, std::string &why)
	{
		std::memset(buf_.data(), 0, buf_.size());
		const uint64_t cpu0 = process_cpu_ns(), t0 = now_ns();
		int ret = 0;
		switch (leg) {
		case kPipeline:
			ret = pipeline(t0, t, why);
			break;
		case kPerLayer:
			for (uint32_t l = 0; l < cfg_.layers && !ret; l++) {
				ret = load(l * cfg_.chunks, cfg_.chunks, why);
				if (l == 0)
					t.first_ns = now_ns() - t0;
			}
			break;
		case kAll:
			ret = load(0, cfg_.layers * cfg_.chunks, why);
			t.first_ns = now_ns() - t0;
			break;
		case kSerial:
			ret = serial(t0, t, why);
			break;
		default:
			break;
		}
		t.total_ns = now_ns() - t0;
		t.cpu_ns = process_cpu_ns() - cpu0;
		return ret;
	}

	// Every byte of every layer; a message for the first object that differs.
	bool verify(std::string &why) const
	{
		for (uint32_t o = 0; o < cfg_.layers * cfg_.chunks; o++) {
			const Mismatch m = verify_pattern(buf_.data() + uint64_t(o) * cfg_.object_bytes, o, 0,
							  cfg_.object_bytes);
			if (m.bytes) {
				why = fmt::format("object {}: {} bytes differ, first at offset {}", o, m.bytes,
						  m.first_offset);
				return false;
			}
		}
		return true;
	}

	std::string backend;	// of the last kvblk batch

private:
	int load(uint32_t first, uint32_t n, std::string &why)
	{
		kvblk_batch_info bi{};
		bi.info_size = sizeof(bi);
		const int ret = kvblk_load_many(dev_, &descs_[first], n, &results_[first], &bi);
		if (ret < 0 || uint32_t(ret) != n) {
			why = fmt::format("kvblk_load_many: {}", kvblk_last_error());
			return ret < 0 ? ret : -EIO;
		}
		backend = kvblk_backend_name(int(bi.backend));
		return 0;
	}

	int submit(uint32_t layer, uint64_t *ticket, std::string &why)
	{
		kvblk_submit_opts so;
		kvblk_submit_opts_init(&so, sizeof(so));
		so.flags = layer == 0 ? KVBLK_SUBMIT_PRIORITY : 0;
		so.user_data = layer;
		so.results = &results_[layer * cfg_.chunks];
		const int ret = kvblk_submit(dev_, &descs_[layer * cfg_.chunks], cfg_.chunks, &so, ticket);
		if (ret < 0)
			why = fmt::format("kvblk_submit of layer {}: {}", layer, kvblk_last_error());
		return ret;
	}

	int pipeline(uint64_t t0, Timing &t, std::string &why)
	{
		const uint32_t L = cfg_.layers, k = std::max(1u, std::min(cfg_.ahead, L));
		std::vector<uint64_t> tickets(L, 0);
		uint32_t submitted = 0;
		int ret = 0;
		for (; submitted < k && !ret; submitted++)
			ret = submit(submitted, &tickets[submitted], why);
		for (uint32_t l = 0; l < submitted; l++) {
			kvblk_batch_info bi{};
			bi.info_size = sizeof(bi);
			const int ok = kvblk_wait(dev_, tickets[l], -1, &bi);
			if (ok < 0 || uint32_t(ok) != cfg_.chunks) {
				if (!ret) {
					why = fmt::format("kvblk_wait of layer {}: {}", l, kvblk_last_error());
					ret = ok < 0 ? ok : -EIO;
				}
				continue; /* still wait for what is in flight */
			}
			backend = kvblk_backend_name(int(bi.backend));
			if (l == 0)
				t.first_ns = now_ns() - t0;
			if (!ret && submitted < L) {
				ret = submit(submitted, &tickets[submitted], why);
				if (!ret)
					submitted++;
			}
		}
		return ret;
	}

	int serial(uint64_t t0, Timing &t, std::string &why)
	{
		const int fd = ::open(cfg_.path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (fd < 0) {
			why = fmt::format("open {}: {}", cfg_.path, std::strerror(errno));
			return -errno;
		}
		int ret = 0;
		for (uint32_t o = 0; o < cfg_.layers * cfg_.chunks && !ret; o++) {
			const uint64_t off = uint64_t(o) * cfg_.object_bytes;
			for (uint64_t done = 0; done < cfg_.object_bytes;) {
				const ssize_t n = ::pread(fd, buf_.data() + off + done, cfg_.object_bytes - done,
							  off_t(off + done));
				if (n <= 0) {
					why = fmt::format("pread at {}: {}", off + done,
							  n < 0 ? std::strerror(errno) : "end of file");
					ret = n < 0 ? -errno : -ENODATA;
					break;
				}
				done += uint64_t(n);
			}
			if (o + 1 == cfg_.chunks)
				t.first_ns = now_ns() - t0;
		}
		::close(fd);
		return ret;
	}

	const EngineConfig &cfg_;
	HostBuffer &buf_;
	kvblk_dev *dev_;
	std::vector<kvblk_desc> descs_;
	std::vector<kvblk_result> results_;
};

double median(std::vector<double> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

} // namespace

int run_engine_workload(const EngineConfig &cfg, EngineReport &report)
{
	report = EngineReport{};
	for (int l = 0; l < kLegs; l++)
		report.legs.push_back(EngineLeg{kLegNames[l]});
	auto fail_all = [&](int ret, const std::string &why) {
		for (auto &leg : report.legs) {
			leg.error = why;
			leg.verified = false;
		}
		return ret;
	};
	if (!cfg.layers || !cfg.chunks || !cfg.object_bytes)
		return fail_all(-EINVAL, "the engine workload needs layers, chunks and an object size");
	report.bytes = uint64_t(cfg.layers) * cfg.chunks * cfg.object_bytes;

	kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	o.backend = uint32_t(cfg.backend);
	o.queue_depth = cfg.queue_depth;
	o.workers = cfg.workers;
	o.max_cmd_bytes = cfg.cmd_bytes;
	kvblk_dev *dev = nullptr;
	int ret = kvblk_open(cfg.path.c_str(), &o, &dev);
	if (ret < 0)
		return fail_all(ret, fmt::format("kvblk_open {}: {}", cfg.path, kvblk_last_error()));
	kvblk_dev_info info{};
	info.info_size = sizeof(info);
	kvblk_get_info(dev, &info);
	report.async = info.async == KVBLK_ASYNC_NATIVE ? "native" : "thread";

	HostBuffer buf(report.bytes);
	uint32_t buf_id = KVBLK_BUF_NONE;
	if (!buf || (ret = kvblk_register_buffer(dev, KVBLK_MEM_HOST, buf.data(), buf.size(), &buf_id)) < 0) {
		const std::string why = buf ? fmt::format("kvblk_register_buffer: {}", kvblk_last_error())
					    : fmt::format("cannot map {} bytes", report.bytes);
		kvblk_close(dev);
		return fail_all(buf ? ret : -ENOMEM, why);
	}

	Engine engine(cfg, buf, dev, buf_id);
	std::vector<std::vector<double>> first(kLegs), cpu(kLegs);
	for (unsigned r = 0; r < std::max(1u, cfg.rounds); r++) {
		for (int i = 0; i < kLegs; i++) {
			const int l = (i + int(r)) % kLegs; /* rotate the order: no leg always runs first */
			EngineLeg &leg = report.legs[size_t(l)];
			Timing t;
			std::string why;
			if (engine.run(Leg(l), t, why) < 0 || !engine.verify(why)) {
				leg.verified = false;
				if (leg.error.empty())
					leg.error = why;
				continue;
			}
			leg.total_ms_rounds.push_back(double(t.total_ns) / 1e6);
			first[size_t(l)].push_back(double(t.first_ns) / 1e6);
			cpu[size_t(l)].push_back(double(t.cpu_ns) / 1e9 / (double(report.bytes) / kGB));
		}
	}
	report.backend = engine.backend;
	kvblk_close(dev);

	for (int l = 0; l < kLegs; l++) {
		EngineLeg &leg = report.legs[size_t(l)];
		leg.total_ms = median(leg.total_ms_rounds);
		leg.first_layer_ms = median(first[size_t(l)]);
		leg.cpu_s_per_gb = median(cpu[size_t(l)]);
		leg.gbps = leg.total_ms > 0 ? double(report.bytes) / kGB / (leg.total_ms / 1e3) : 0;
	}
	const EngineLeg &pipe = report.legs[kPipeline], &all = report.legs[kAll];
	if (pipe.total_ms > 0 && all.total_ms > 0) {
		report.pipeline_vs_all = pipe.total_ms / all.total_ms;
		report.first_vs_share = pipe.first_layer_ms / (all.total_ms / cfg.layers);
		report.pipeline_ok = pipe.verified && report.pipeline_vs_all <= 1.05;
		report.first_layer_ok = pipe.verified && report.first_vs_share <= 1.5;
	}
	for (const EngineLeg &leg : report.legs)
		if (!leg.verified)
			return -EIO;
	return 0;
}

} // namespace kvblk_bench

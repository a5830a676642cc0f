// SPDX-License-Identifier: MIT
#include "runner.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include <fmt/core.h>

#include "dest_window.hpp"
#include "progress.hpp"
#include "store.hpp"

namespace kvblk_bench {

double percentile(std::vector<double> v, double p)
{
	if (v.empty())
		return 0.0;
	std::sort(v.begin(), v.end());
	double rank = std::ceil(p / 100.0 * double(v.size()));
	size_t idx = rank < 1 ? 0 : size_t(rank) - 1;
	return v[std::min(idx, v.size() - 1)];
}

namespace {

// Marks one word in every 512 bytes of the window before it is loaded, so
// that a read that never lands cannot pass verification with the bytes an
// earlier pass left behind. (A pattern word equals it with probability 2^-64.)
constexpr uint64_t kPoison = 0xdeadbeefdeadbeefULL;

void poison(unsigned char *p, size_t len) noexcept
{
	for (size_t i = 0; i + 8 <= len; i += 512)
		std::memcpy(p + i, &kPoison, 8);
}

void report(const RunConfig &cfg, RunResult &res, const std::string &msg)
{
	if (res.error.empty())
		res.error = msg;
	if (res.reported++ < cfg.max_reports)
		std::fprintf(stderr, "kvblk-bench: %s: %s\n", res.requested_backend.c_str(), msg.c_str());
}

struct DevGuard {
	kvblk_dev *d = nullptr;
	std::vector<uint32_t> ids;
	~DevGuard()
	{
		for (uint32_t id : ids)
			kvblk_unregister_buffer(d, id);
		kvblk_close(d);
	}
};

} // namespace

uint64_t window_bytes(const RunConfig &cfg)
{
	return cfg.window_objects * cfg.object_bytes;
}

void init_result(const RunConfig &cfg, const Setting &s, RunResult &res)
{
	res = RunResult{};
	res.setting = s;
	res.requested_backend = kvblk_backend_name(s.backend);
	res.objects = cfg.objects;
	res.object_bytes = cfg.object_bytes;
	res.batch_objects = uint32_t(std::min<uint64_t>(cfg.batch_objects, cfg.objects));
	res.repeat = cfg.repeat;
}

int run_pass(const RunConfig &cfg, HostBuffer &buf, RunResult &res, unsigned pass_no)
{
	const Setting &s = res.setting;
	Pass pass;

	struct kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	o.backend = uint32_t(s.backend);
	o.workers = s.workers;
	o.queue_depth = s.queue_depth;
	o.max_cmd_bytes = cfg.cmd_bytes;
	DevGuard dev;
	int r = kvblk_open(cfg.path.c_str(), &o, &dev.d);
	if (r < 0) {
		report(cfg, res, fmt::format("kvblk_open({}, backend {}): {} ({})", cfg.path, res.requested_backend,
					     std::strerror(-r), kvblk_last_error()));
		return r;
	}

	struct kvblk_dev_info info;
	std::memset(&info, 0, sizeof(info));
	info.info_size = sizeof(info);
	if ((r = kvblk_get_info(dev.d, &info)) < 0) {
		report(cfg, res, fmt::format("kvblk_get_info: {}", std::strerror(-r)));
		return r;
	}
	if (res.backend.empty())
		res.backend = kvblk_backend_name(int(info.backend));
	res.backend_reason = info.backend_reason;
	res.cmd_bytes = info.max_cmd_bytes;
	switch (info.backend) {
	case KVBLK_BACKEND_PSYNC:
		res.workers = 1;
		res.queue_depth = 1;
		break;
	case KVBLK_BACKEND_THREADPOOL:
		res.workers = info.workers;
		res.queue_depth = info.workers;
		break;
	default:
		res.workers = info.workers;
		res.queue_depth = info.queue_depth;
		break;
	}

	// One registered buffer per batch slot of the window, as an engine
	// registers its KV pool in chunks (and io_uring caps one fixed buffer at 1 GiB).
	const uint64_t per_batch = res.batch_objects;
	const uint64_t slot_bytes = per_batch * cfg.object_bytes;
	const uint64_t window = std::max<uint64_t>(cfg.window_objects / per_batch, 1) * per_batch;
	const uint64_t slots = window / per_batch;
	if (buf.size() < slots * slot_bytes) {
		report(cfg, res, fmt::format("buffer of {} bytes is smaller than the window ({} bytes)", buf.size(),
					     slots * slot_bytes));
		return -EINVAL;
	}
	uint8_t *window_mem = cfg.dest ? cfg.dest->data() : reinterpret_cast<uint8_t *>(buf.data());
	const int kind = cfg.dest ? cfg.dest->kind() : KVBLK_MEM_HOST;
	for (uint64_t i = 0; i < slots; i++) {
		uint32_t id = KVBLK_BUF_NONE;
		if ((r = kvblk_register_buffer(dev.d, kind, window_mem + i * slot_bytes, slot_bytes, &id)) < 0) {
			report(cfg, res, fmt::format("kvblk_register_buffer({} bytes{}): {} ({})", slot_bytes,
						     cfg.dest ? ", " + cfg.dest->name() : std::string(),
						     std::strerror(-r), kvblk_last_error()));
			return r;
		}
		if (cfg.dest && i == 0)
			res.dest_note = kvblk_last_error();
		dev.ids.push_back(id);
	}
	{
		kvblk_stats st{};
		st.stats_size = sizeof(st);
		if (kvblk_get_stats(dev.d, &st) == 0)
			pass.reg_fallbacks = st.memlock_fallbacks;
	}

	const uint64_t total = cfg.objects * cfg.object_bytes;
	std::vector<kvblk_desc> descs(per_batch);
	std::vector<kvblk_result> results(window);
	std::vector<char> call_ok(slots);
	std::string label = fmt::format("{} W={} QD={}{}", res.backend, res.workers, res.queue_depth,
					cfg.repeat > 1 ? fmt::format(" #{}/{}", pass_no + 1, cfg.repeat) : std::string());
	Progress bar(cfg.progress, label, total);
	reset_peak_rss();
	kvblk_reset_stats(dev.d);
	int first_backend = -1, first_path = -1;
	uint64_t done = 0;
	std::string dest_err;

	for (uint64_t w0 = 0; w0 < cfg.objects; w0 += window) {
		const uint64_t wcount = std::min(window, cfg.objects - w0);
		poison(buf.data(), size_t(wcount * cfg.object_bytes));
		if (cfg.dest && cfg.dest->from_host(buf.data(), 0, wcount * cfg.object_bytes, &dest_err) < 0) {
			report(cfg, res, dest_err);
			return -EIO;
		}

		// Load the window with back-to-back calls.
		const uint64_t c0 = process_cpu_ns(), t0 = now_ns();
		uint64_t t_end = t0;
		for (uint64_t b0 = 0, slot = 0; b0 < wcount; b0 += per_batch, slot++) {
			const uint64_t first = w0 + b0, count = std::min(per_batch, wcount - b0);
			for (uint64_t k = 0; k < count; k++) {
				descs[k] = kvblk_desc{};
				descs[k].offset = (first + k) * cfg.object_bytes;
				descs[k].length = cfg.object_bytes;
				descs[k].addr = k * cfg.object_bytes;
				descs[k].buf_id = dev.ids[slot];
				descs[k].tag = first + k;
			}
			struct kvblk_batch_info bi;
			std::memset(&bi, 0, sizeof(bi));
			bi.info_size = sizeof(bi);
			const uint64_t t1 = now_ns();
			r = kvblk_load_many(dev.d, descs.data(), uint32_t(count), results.data() + b0, &bi);
			t_end = now_ns();
			pass.batch_ms.push_back(double(t_end - t1) / 1e6);
			call_ok[slot] = r >= 0;
			if (r < 0) {
				res.failed_calls++;
				res.failed_objects += count;
				report(cfg, res, fmt::format("kvblk_load_many(objects {}..{}): {} ({})", first,
							     first + count - 1, std::strerror(-r), kvblk_last_error()));
			} else if (first_backend < 0) {
				first_backend = int(bi.backend);
				res.backend = kvblk_backend_name(first_backend);
			} else if (int(bi.backend) != first_backend) {
				res.backend_mixed = true;
			}
			if (r >= 0 && first_path < 0) {
				first_path = int(bi.path);
				res.path = kvblk_path_name(first_path);
			} else if (r >= 0 && int(bi.path) != first_path) {
				res.path_mixed = true;
			}
			done += count * cfg.object_bytes;
			bar.update(done, pass.load_ns + (t_end - t0));
		}
		pass.load_ns += t_end - t0;
		pass.cpu_ns += process_cpu_ns() - c0;

		// Then verify it, outside the timed region (device memory: copied back first).
		if (cfg.dest && cfg.dest->to_host(buf.data(), 0, wcount * cfg.object_bytes, &dest_err) < 0) {
			report(cfg, res, dest_err);
			return -EIO;
		}
		for (uint64_t b0 = 0, slot = 0; b0 < wcount; b0 += per_batch, slot++) {
			if (!call_ok[slot])
				continue;
			const uint64_t count = std::min(per_batch, wcount - b0);
			for (uint64_t k = 0; k < count; k++) {
				const uint64_t obj = w0 + b0 + k;
				const kvblk_result &kr = results[b0 + k];
				if (kr.status != 0) {
					res.failed_objects++;
					report(cfg, res, fmt::format("object {}: {}", obj, std::strerror(-kr.status)));
					continue;
				}
				if (kr.tag != obj || kr.bytes != cfg.object_bytes) {
					res.failed_objects++;
					report(cfg, res, fmt::format("object {}: result has tag {} and {} bytes", obj,
								     kr.tag, kr.bytes));
					continue;
				}
				Mismatch m = verify_pattern(buf.data() + (b0 + k) * cfg.object_bytes, obj, 0,
							    size_t(cfg.object_bytes));
				if (m.bytes) {
					res.mismatched_bytes += m.bytes;
					report(cfg, res,
					       fmt::format("object {}: {} bytes differ from the pattern, first at byte {} "
							   "(expected 0x{:02x}, read 0x{:02x})",
							   obj, m.bytes, m.first_offset, m.expected, m.actual));
				}
			}
		}
	}
	bar.finish();
	pass.rss = peak_rss_bytes();
	pass.stats.stats_size = sizeof(pass.stats);
	kvblk_get_stats(dev.d, &pass.stats);
	pass.gbps = pass.load_ns ? double(total) / double(pass.load_ns) : 0.0;
	pass.ran = true;
	if (res.backend_mixed && res.passes.empty())
		report(cfg, res, fmt::format("batches were served by more than one backend (first: {})", res.backend));
	res.passes.push_back(std::move(pass));
	return 0;
}

void summarize(RunResult &res)
{
	std::vector<const Pass *> ran;
	for (const Pass &p : res.passes)
		if (p.ran)
			ran.push_back(&p);
	res.gbps_repeats.clear();
	for (const Pass *p : ran)
		res.gbps_repeats.push_back(p->gbps);
	res.verified = !ran.empty() && ran.size() == res.repeat && res.mismatched_bytes == 0 &&
		       res.failed_objects == 0 && res.failed_calls == 0;
	if (ran.empty())
		return;

	// The median pass by GB/s (the lower middle one for an even count).
	std::vector<const Pass *> order = ran;
	std::sort(order.begin(), order.end(), [](const Pass *a, const Pass *b) { return a->gbps < b->gbps; });
	const Pass &m = *order[(order.size() - 1) / 2];
	const double gb = double(res.objects * res.object_bytes) / kGB;
	res.gbps = m.gbps;
	res.load_seconds = double(m.load_ns) / 1e9;
	res.objects_per_s = m.load_ns ? double(res.objects) * 1e9 / double(m.load_ns) : 0.0;
	res.batch_ms = m.batch_ms;
	res.p50_ms = percentile(m.batch_ms, 50);
	res.p99_ms = percentile(m.batch_ms, 99);
	res.max_ms = percentile(m.batch_ms, 100);
	res.mean_ms = m.batch_ms.empty()
			      ? 0.0
			      : std::accumulate(m.batch_ms.begin(), m.batch_ms.end(), 0.0) / double(m.batch_ms.size());
	res.cpu_s_per_gb = gb > 0 ? double(m.cpu_ns) / 1e9 / gb : 0.0;
	res.peak_rss_mib = double(m.rss) / kMiB;
	res.commands = m.stats.commands;
	res.eagain_retries = m.stats.eagain_retries;
	res.short_resubmits = m.stats.short_resubmits;
	res.memlock_fallbacks = m.stats.memlock_fallbacks + m.reg_fallbacks;
	res.buffered_batches = m.stats.buffered_batches;
	res.cq_overflows = m.stats.cq_overflows;
	res.inflight_peak = m.stats.inflight_peak;
	res.staged_copies = m.stats.staged_copies;
	std::copy(std::begin(m.stats.cmd_lat_hist), std::end(m.stats.cmd_lat_hist), res.cmd_lat_hist.begin());
}

} // namespace kvblk_bench

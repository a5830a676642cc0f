// SPDX-License-Identifier: MIT
#include "runner.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/core.h>
#include <liburing.h>

#include "dest_window.hpp"
#include "progress.hpp"
#include "store.hpp"
#include "workload.hpp"

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

// Check the window's objects (positions w0 .. w0 + wcount - 1 of the load
// order): their results, then every byte against the pattern. Objects of a
// failed call (@call_ok false for their batch) were counted already.
void verify_window(const RunConfig &cfg, const HostBuffer &buf, RunResult &res, uint64_t w0, uint64_t wcount,
		   const std::vector<kvblk_result> &results, const std::vector<uint64_t> &where,
		   const std::vector<char> &call_ok)
{
	const Workload &wl = *cfg.wl;
	for (uint64_t i = 0; i < wcount; i++) {
		if (!call_ok[i / res.batch_objects])
			continue;
		const uint64_t obj = wl.order[w0 + i];
		const kvblk_result &kr = results[i];
		if (kr.status != 0) {
			res.failed_objects++;
			report(cfg, res, fmt::format("object {}: {}", obj, std::strerror(-kr.status)));
			continue;
		}
		if (kr.tag != obj || kr.bytes != wl.length[obj]) {
			res.failed_objects++;
			report(cfg, res, fmt::format("object {}: result has tag {} and {} bytes", obj, kr.tag, kr.bytes));
			continue;
		}
		Mismatch m = verify_pattern(buf.data() + where[i], obj, 0, size_t(wl.length[obj]));
		if (m.bytes) {
			res.mismatched_bytes += m.bytes;
			report(cfg, res,
			       fmt::format("object {}: {} bytes differ from the pattern, first at byte {} "
					   "(expected 0x{:02x}, read 0x{:02x})",
					   obj, m.bytes, m.first_offset, m.expected, m.actual));
		}
	}
}

// The window a pass loads back to back, then verifies: whole batches (slots) of the
// workload's objects in load order.
struct WindowShape {
	uint64_t n;	    // objects of the workload
	uint64_t per_batch; // objects per call
	uint64_t slot;	    // bytes of the largest call
	uint64_t slots;	    // calls per window
	uint64_t objects;   // objects per window
};

WindowShape window_shape(const RunConfig &cfg, const RunResult &res)
{
	const uint64_t slots = std::max<uint64_t>(cfg.window_batches, 1);
	return {cfg.wl->objects(), res.batch_objects, slot_bytes(cfg), slots, slots * res.batch_objects};
}

// Whether @buf holds @w; reported in @res when not.
bool window_fits(const RunConfig &cfg, const HostBuffer &buf, RunResult &res, const WindowShape &w)
{
	if (buf.size() >= w.slots * w.slot)
		return true;
	report(cfg, res, fmt::format("buffer of {} bytes is smaller than the window ({} bytes)", buf.size(),
				     w.slots * w.slot));
	return false;
}

// One window's objects: each one's result, its byte offset in the window, and whether its
// call succeeded (per call).
struct WindowBook {
	std::vector<kvblk_result> results;
	std::vector<uint64_t> where;
	std::vector<char> call_ok;
	explicit WindowBook(const WindowShape &w) : results(w.objects), where(w.objects), call_ok(w.slots, 1) {}
};

// "NAME #i/N" (only with several rounds) for a pass's progress line.
std::string pass_label(const RunConfig &cfg, const std::string &name, unsigned pass_no)
{
	return name + (cfg.repeat > 1 ? fmt::format(" #{}/{}", pass_no + 1, cfg.repeat) : std::string());
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

uint64_t slot_bytes(const RunConfig &cfg)
{
	const Workload &wl = *cfg.wl;
	uint64_t most = 0;
	for (uint64_t b0 = 0; b0 < wl.objects(); b0 += cfg.batch_objects) {
		uint64_t bytes = 0;
		for (uint64_t p = b0; p < std::min<uint64_t>(b0 + cfg.batch_objects, wl.objects()); p++)
			bytes += wl.length[wl.order[p]];
		most = std::max(most, bytes);
	}
	return most;
}

uint64_t window_bytes(const RunConfig &cfg)
{
	return cfg.window_batches * slot_bytes(cfg);
}

void init_result(const RunConfig &cfg, const Setting &s, RunResult &res)
{
	res = RunResult{};
	res.setting = s;
	res.requested_backend = s.backend == kBackendFileLoop	? "file-loop"
				: s.backend == kBackendBareUring ? "bare-uring"
								 : kvblk_backend_name(s.backend);
	res.objects = cfg.wl->objects();
	res.object_bytes = cfg.wl->mixed ? 0 : cfg.wl->length[0];
	res.total_bytes = cfg.wl->total_bytes();
	res.batch_objects = uint32_t(std::min<uint64_t>(cfg.batch_objects, res.objects));
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
	const Workload &wl = *cfg.wl;
	int r = kvblk_open(wl.paths[0].c_str(), &o, &dev.d);
	if (r < 0) {
		report(cfg, res, fmt::format("kvblk_open({}, backend {}): {} ({})", wl.paths[0], res.requested_backend,
					     std::strerror(-r), kvblk_last_error()));
		return r;
	}

	// One file per object: every other file is a target of the same handle, so one batch
	// names many files and all of their objects are in flight together.
	std::vector<uint32_t> target_of(wl.files ? wl.objects() : 0, 0);
	for (uint64_t obj = 1; obj < target_of.size(); obj++) {
		if ((r = kvblk_add_target(dev.d, wl.paths[obj].c_str(), 0, &target_of[obj])) < 0) {
			report(cfg, res, fmt::format("kvblk_add_target({}): {} ({})", wl.paths[obj], std::strerror(-r),
						     kvblk_last_error()));
			return r;
		}
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
	const WindowShape shape = window_shape(cfg, res);
	const auto [n, per_batch, slot, slots, window] = shape;
	if (!window_fits(cfg, buf, res, shape))
		return -EINVAL;
	uint8_t *window_mem = cfg.dest ? cfg.dest->data() : reinterpret_cast<uint8_t *>(buf.data());
	const int kind = cfg.dest ? cfg.dest->kind() : KVBLK_MEM_HOST;
	for (uint64_t i = 0; i < slots; i++) {
		uint32_t id = KVBLK_BUF_NONE;
		if ((r = kvblk_register_buffer(dev.d, kind, window_mem + i * slot, slot, &id)) < 0) {
			report(cfg, res, fmt::format("kvblk_register_buffer({} bytes{}): {} ({})", slot,
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

	std::vector<kvblk_desc> descs(per_batch);
	WindowBook book(shape);
	auto &[results, where, call_ok] = book;
	Progress bar(cfg.progress,
		     pass_label(cfg, fmt::format("{} W={} QD={}", res.backend, res.workers, res.queue_depth), pass_no),
		     res.total_bytes);
	reset_peak_rss();
	kvblk_reset_stats(dev.d);
	int first_backend = -1, first_path = -1;
	uint64_t done = 0;
	std::string dest_err;

	// Windows of consecutive positions in the load order.
	for (uint64_t w0 = 0; w0 < n; w0 += window) {
		const uint64_t wcount = std::min(window, n - w0);
		const uint64_t used = (wcount + per_batch - 1) / per_batch * slot;
		poison(buf.data(), size_t(used));
		if (cfg.dest && cfg.dest->from_host(buf.data(), 0, used, &dest_err) < 0) {
			report(cfg, res, dest_err);
			return -EIO;
		}

		// Load the window with back-to-back calls.
		const uint64_t c0 = process_cpu_ns(), t0 = now_ns();
		uint64_t t_end = t0;
		for (uint64_t b0 = 0, s = 0; b0 < wcount; b0 += per_batch, s++) {
			const uint64_t count = std::min(per_batch, wcount - b0);
			uint64_t addr = 0;
			for (uint64_t k = 0; k < count; k++) {
				const uint64_t obj = wl.order[w0 + b0 + k];
				descs[k] = kvblk_desc{};
				descs[k].offset = wl.offset[obj];
				descs[k].length = wl.length[obj];
				descs[k].addr = addr;
				descs[k].buf_id = dev.ids[s];
				descs[k].tag = obj;
				descs[k].target = wl.files ? target_of[obj] : 0;
				where[b0 + k] = s * slot + addr;
				addr += wl.length[obj];
			}
			struct kvblk_batch_info bi;
			std::memset(&bi, 0, sizeof(bi));
			bi.info_size = sizeof(bi);
			const uint64_t t1 = now_ns();
			r = kvblk_load_many(dev.d, descs.data(), uint32_t(count), results.data() + b0, &bi);
			t_end = now_ns();
			pass.batch_ms.push_back(double(t_end - t1) / 1e6);
			call_ok[s] = r >= 0;
			if (r < 0) {
				res.failed_calls++;
				res.failed_objects += count;
				report(cfg, res, fmt::format("kvblk_load_many(positions {}..{}): {} ({})", w0 + b0,
							     w0 + b0 + count - 1, std::strerror(-r), kvblk_last_error()));
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
			done += addr;
			bar.update(done, pass.load_ns + (t_end - t0));
		}
		pass.load_ns += t_end - t0;
		pass.cpu_ns += process_cpu_ns() - c0;

		// Then verify it, outside the timed region (device memory: copied back first).
		if (cfg.dest && cfg.dest->to_host(buf.data(), 0, used, &dest_err) < 0) {
			report(cfg, res, dest_err);
			return -EIO;
		}
		verify_window(cfg, buf, res, w0, wcount, results, where, call_ok);
	}
	bar.finish();
	pass.rss = peak_rss_bytes();
	pass.stats.stats_size = sizeof(pass.stats);
	kvblk_get_stats(dev.d, &pass.stats);
	pass.gbps = pass.load_ns ? double(res.total_bytes) / double(pass.load_ns) : 0.0;
	pass.ran = true;
	if (res.backend_mixed && res.passes.empty())
		report(cfg, res, fmt::format("batches were served by more than one backend (first: {})", res.backend));
	res.passes.push_back(std::move(pass));
	return 0;
}

int run_file_loop_pass(const RunConfig &cfg, HostBuffer &buf, RunResult &res, unsigned pass_no)
{
	const Workload &wl = *cfg.wl;
	const WindowShape shape = window_shape(cfg, res);
	const auto [n, per_batch, slot, slots, window] = shape;
	if (!window_fits(cfg, buf, res, shape))
		return -EINVAL;
	res.backend = res.requested_backend;
	res.path = "host";
	res.workers = res.queue_depth = 1;
	res.cmd_bytes = wl.max_length(); // one pread per chunk

	Pass pass;
	WindowBook book(shape);
	auto &[results, where, call_ok] = book;
	Progress bar(cfg.progress, pass_label(cfg, "file-loop", pass_no), res.total_bytes);
	reset_peak_rss();
	uint64_t done = 0;
	for (uint64_t w0 = 0; w0 < n; w0 += window) {
		const uint64_t wcount = std::min(window, n - w0);
		poison(buf.data(), size_t((wcount + per_batch - 1) / per_batch * slot));
		const uint64_t c0 = process_cpu_ns(), t0 = now_ns();
		uint64_t t_end = t0;
		for (uint64_t b0 = 0, s = 0; b0 < wcount; b0 += per_batch, s++) {
			const uint64_t count = std::min(per_batch, wcount - b0), t1 = now_ns();
			uint64_t addr = 0;
			for (uint64_t k = 0; k < count; k++) {
				const uint64_t obj = wl.order[w0 + b0 + k], len = wl.length[obj];
				kvblk_result &kr = results[b0 + k];
				kr = kvblk_result{};
				kr.tag = obj;
				where[b0 + k] = s * slot + addr;
				unsigned char *dst = buf.data() + where[b0 + k];
				int fd = ::open(wl.paths[obj].c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
				uint64_t got = 0;
				while (fd >= 0 && got < len) {
					ssize_t r = ::pread(fd, dst + got, size_t(len - got), off_t(wl.offset[obj] + got));
					if (r < 0 && errno == EINTR)
						continue;
					if (r <= 0) {
						kr.status = r < 0 ? -errno : -ENODATA;
						break;
					}
					got += uint64_t(r);
				}
				if (fd < 0)
					kr.status = -errno;
				else
					::close(fd);
				kr.bytes = kr.status ? 0 : len;
				addr += len;
			}
			t_end = now_ns();
			pass.batch_ms.push_back(double(t_end - t1) / 1e6);
			done += addr;
			bar.update(done, pass.load_ns + (t_end - t0));
		}
		pass.load_ns += t_end - t0;
		pass.cpu_ns += process_cpu_ns() - c0;
		verify_window(cfg, buf, res, w0, wcount, results, where, call_ok);
	}
	bar.finish();
	pass.rss = peak_rss_bytes();
	pass.stats.commands = n;
	pass.gbps = pass.load_ns ? double(res.total_bytes) / double(pass.load_ns) : 0.0;
	pass.ran = true;
	res.passes.push_back(std::move(pass));
	return 0;
}

namespace {

// The window as fixed buffers: io_uring takes at most 1 GiB per iovec
// (io_uring/rsrc.c, io_buffer_validate()), so one iovec per GiB; a
// command that crosses a GiB boundary is a plain read (a fixed read must lie
// within one iovec).
constexpr uint64_t kFixedChunk = uint64_t(1) << 30;

struct BareRing {
	struct io_uring ring {};
	bool up = false, fixed = false;
	~BareRing()
	{
		if (up)
			io_uring_queue_exit(&ring);
	}
};

} // namespace

int run_bare_uring_pass(const RunConfig &cfg, HostBuffer &buf, RunResult &res, unsigned pass_no)
{
	const Workload &wl = *cfg.wl;
	const WindowShape shape = window_shape(cfg, res);
	const auto [n, per_batch, slot, slots, window] = shape;
	const uint64_t cmd = cfg.cmd_bytes ? cfg.cmd_bytes : 131072;
	const uint32_t qd = std::max<uint32_t>(res.setting.queue_depth, 1);
	if (!window_fits(cfg, buf, res, shape))
		return -EINVAL;
	res.backend = res.requested_backend;
	res.path = "host";
	res.workers = 1;
	res.queue_depth = qd;
	res.cmd_bytes = cmd;

	BareRing br;
	int ret = io_uring_queue_init(qd, &br.ring, 0);
	if (ret < 0) {
		report(cfg, res, fmt::format("io_uring_queue_init: {}", std::strerror(-ret)));
		return ret;
	}
	br.up = true;
	std::vector<struct iovec> iov;
	for (uint64_t off = 0; off < slots * slot; off += kFixedChunk)
		iov.push_back({buf.data() + off, size_t(std::min(kFixedChunk, slots * slot - off))});
	ret = io_uring_register_buffers(&br.ring, iov.data(), unsigned(iov.size()));
	br.fixed = ret == 0;
	res.backend_reason = br.fixed ? "the window as fixed buffers"
				      : fmt::format("plain reads: registering the window failed: {}", std::strerror(-ret));
	std::map<std::string, int> fds; // one O_DIRECT fd per file of the store
	std::vector<int> obj_fd(n);
	for (uint64_t obj = 0; obj < n; obj++) {
		const std::string &p = wl.path_of(obj);
		auto it = fds.find(p);
		if (it == fds.end()) {
			const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
			if (fd < 0) {
				ret = -errno;
				for (auto &[name, f] : fds)
					::close(f);
				report(cfg, res, fmt::format("open {}: {}", p, std::strerror(-ret)));
				return ret;
			}
			it = fds.emplace(p, fd).first;
		}
		obj_fd[obj] = it->second;
	}

	Pass pass;
	WindowBook book(shape);
	auto &[results, where, call_ok] = book;
	Progress bar(cfg.progress, pass_label(cfg, "bare-uring", pass_no), res.total_bytes);
	reset_peak_rss();
	uint64_t done = 0;
	for (uint64_t w0 = 0; w0 < n; w0 += window) {
		const uint64_t wcount = std::min(window, n - w0);
		poison(buf.data(), size_t((wcount + per_batch - 1) / per_batch * slot));
		// Every command of the window, in order: (object index in the window, offset in it).
		std::vector<std::pair<uint64_t, uint64_t>> cmds;
		std::vector<uint64_t> left(wcount); // commands not yet completed, per object
		std::vector<uint64_t> batch_left((wcount + per_batch - 1) / per_batch), batch_t0(batch_left.size());
		for (uint64_t b0 = 0, s = 0; b0 < wcount; b0 += per_batch, s++) {
			uint64_t addr = 0;
			for (uint64_t k = b0; k < std::min(wcount, b0 + per_batch); k++) {
				const uint64_t obj = wl.order[w0 + k], len = wl.length[obj];
				results[k] = kvblk_result{};
				results[k].tag = obj;
				where[k] = s * slot + addr;
				for (uint64_t at = 0; at < len; at += cmd)
					cmds.emplace_back(k, at);
				left[k] = (len + cmd - 1) / cmd;
				batch_left[s] += left[k];
				addr += len;
			}
		}
		const uint64_t c0 = process_cpu_ns(), t0 = now_ns();
		size_t next = 0, inflight = 0;
		while (next < cmds.size() || inflight) {
			while (next < cmds.size() && inflight < qd) {
				const auto [k, at] = cmds[next];
				const uint64_t obj = wl.order[w0 + k];
				const uint32_t len = uint32_t(std::min(cmd, wl.length[obj] - at));
				const uint64_t dst = where[k] + at;
				struct io_uring_sqe *sqe = io_uring_get_sqe(&br.ring);
				const int fd = obj_fd[obj];
				const uint64_t off = wl.offset[obj] + at;
				if (br.fixed && dst / kFixedChunk == (dst + len - 1) / kFixedChunk)
					io_uring_prep_read_fixed(sqe, fd, buf.data() + dst, len, off, int(dst / kFixedChunk));
				else
					io_uring_prep_read(sqe, fd, buf.data() + dst, len, off);
				io_uring_sqe_set_data64(sqe, next);
				const uint64_t b = k / per_batch;
				if (!batch_t0[b])
					batch_t0[b] = now_ns();
				next++;
				inflight++;
			}
			ret = io_uring_submit_and_wait(&br.ring, 1);
			if (ret < 0 && ret != -EINTR) {
				report(cfg, res, fmt::format("io_uring_submit_and_wait: {}", std::strerror(-ret)));
				break;
			}
			struct io_uring_cqe *cqe;
			unsigned head, seen = 0;
			io_uring_for_each_cqe(&br.ring, head, cqe)
			{
				const auto [k, at] = cmds[size_t(cqe->user_data)];
				const uint64_t obj = wl.order[w0 + k];
				const int64_t want = int64_t(std::min(cmd, wl.length[obj] - at));
				if (cqe->res != want && !results[k].status)
					results[k].status = cqe->res < 0 ? cqe->res : -ENODATA; // short: not resubmitted
				if (--left[k] == 0 && !results[k].status)
					results[k].bytes = wl.length[obj];
				const uint64_t b = k / per_batch;
				if (--batch_left[b] == 0)
					pass.batch_ms.push_back(double(now_ns() - batch_t0[b]) / 1e6);
				seen++;
			}
			io_uring_cq_advance(&br.ring, seen);
			inflight -= seen;
		}
		const uint64_t t_end = now_ns();
		if (next < cmds.size() || inflight) { // the ring failed: nothing of the window counts
			res.failed_calls++;
			break;
		}
		for (uint64_t k = 0; k < wcount; k++)
			done += wl.length[wl.order[w0 + k]];
		bar.update(done, pass.load_ns + (t_end - t0));
		pass.load_ns += t_end - t0;
		pass.cpu_ns += process_cpu_ns() - c0;
		verify_window(cfg, buf, res, w0, wcount, results, where, call_ok);
	}
	for (auto &[name, f] : fds)
		::close(f);
	bar.finish();
	pass.rss = peak_rss_bytes();
	pass.stats.commands = 0;
	for (uint64_t obj = 0; obj < n; obj++)
		pass.stats.commands += (wl.length[obj] + cmd - 1) / cmd;
	pass.gbps = pass.load_ns ? double(res.total_bytes) / double(pass.load_ns) : 0.0;
	pass.ran = res.failed_calls == 0;
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
	const double gb = double(res.total_bytes) / kGB;
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

// SPDX-License-Identifier: MIT
/*
 * crossover.cpp - `kvblkctl crossover`: does loading a chunk of KV cache
 * from storage beat recomputing it (prefill)?
 *
 *   bytes per chunk = 2 (K and V) x layers x kv_heads x head_dim x dtype_bytes x tokens
 *   bytes per rank  = 2 x layers x max(1, ceil(kv_heads / tp)) x head_dim x dtype_bytes x tokens
 *                     (tensor parallelism splits the KV heads; with tp > kv_heads
 *                     each rank holds one replicated head)
 *   load time       = bytes per rank / load bandwidth        (each rank loads its
 *                     share in parallel through a path of that bandwidth)
 *   recompute time  = tokens / recompute rate (tokens/s of the whole TP group)
 *   ratio           = load time / recompute time; verdict "load" below 1
 *
 * Default recompute rate, an ASSUMPTION printed as such: prefill costs about
 * 2 x parameters FLOP per token (attention's quadratic term ignored, which
 * favours recompute), at --gpu-tflops effective FLOP/s per GPU (default 400
 * TFLOP/s: about 40% of an H100 SXM's 989 dense bf16 TFLOP/s) times tp GPUs.
 *
 * Presets, from each model's published config.json (num_hidden_layers,
 * num_key_value_heads, hidden_size / num_attention_heads) and parameter
 * count: Llama-3.1-8B 32/8/128, 8.03e9; Llama-3.1-70B 80/8/128, 70.6e9;
 * Llama-3.1-405B 126/8/128, 405.9e9.
 */
#include "common.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace kvblkctl {

namespace {

struct Preset {
	const char *name;
	std::uint64_t layers, kv_heads, head_dim;
	double params;
};

constexpr Preset kPresets[] = {
	{ "llama-3.1-8b", 32, 8, 128, 8.03e9 },
	{ "llama-3.1-70b", 80, 8, 128, 70.6e9 },
	{ "llama-3.1-405b", 126, 8, 128, 405.9e9 },
};

struct CrossOpts {
	std::string model;
	std::uint64_t layers = 0, kv_heads = 0, head_dim = 0;
	std::uint64_t dtype_bytes = 2, tokens = 256, tp = 1;
	double params_b = 0;
	double load_gbps = 0;
	std::string measure;
	double measure_seconds = 2;
	double recompute_tps = 0;
	double gpu_tflops = 400;
};

struct Result {
	std::string model;
	std::uint64_t layers, kv_heads, head_dim, dtype_bytes, tokens, tp;
	std::uint64_t bytes_per_chunk, bytes_per_rank;
	double load_gbps, recompute_tps;
	std::string recompute_source;
	double load_s, recompute_s, ratio;
	std::string verdict;
};

/*
 * Sequential-ish read bandwidth of PATH: 4 threads of 1 MiB O_DIRECT
 * pread()s (buffered if O_DIRECT is refused) for @seconds.
 * Return: 0 and @gbps (1e9 bytes/s), or -errno.
 */
int measure_gbps(const std::string &path, double seconds, double &gbps, std::string &how)
{
	bool direct = true;
	int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL) {
		direct = false;
		fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	struct stat st;
	std::uint64_t size = 0;
	if (::fstat(fd, &st)) {
		int e = errno;
		::close(fd);
		return -e;
	}
	if (S_ISBLK(st.st_mode)) {
		if (::ioctl(fd, BLKGETSIZE64, &size)) {
			int e = errno;
			::close(fd);
			return -e;
		}
	} else {
		size = static_cast<std::uint64_t>(st.st_size);
	}
	constexpr std::uint64_t kChunk = 1 << 20;
	constexpr int kThreads = 4;
	std::uint64_t nchunks = size / kChunk;
	if (!nchunks) {
		::close(fd);
		return -ENOSPC;	/* under 1 MiB: nothing to measure */
	}
	std::atomic<std::uint64_t> total{ 0 };
	std::atomic<int> err{ 0 };
	auto t0 = std::chrono::steady_clock::now();
	auto deadline = t0 + std::chrono::duration<double>(seconds);
	std::vector<std::thread> th;
	for (int t = 0; t < kThreads; t++) {
		th.emplace_back([&, t] {
			void *buf = nullptr;
			if (posix_memalign(&buf, 4096, kChunk)) {
				err = -ENOMEM;
				return;
			}
			for (std::uint64_t i = static_cast<std::uint64_t>(t);
			     std::chrono::steady_clock::now() < deadline && !err; i += kThreads) {
				off_t off = static_cast<off_t>((i % nchunks) * kChunk);
				ssize_t n = ::pread(fd, buf, kChunk, off);
				if (n < 0) {
					err = -errno;
					break;
				}
				total += static_cast<std::uint64_t>(n);
			}
			std::free(buf);
		});
	}
	for (auto &x : th)
		x.join();
	double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	::close(fd);
	if (err)
		return err;
	gbps = static_cast<double>(total) / dt / 1e9;
	how = "measured on " + path + ": " + std::to_string(kThreads) + " threads x 1 MiB " +
	      (direct ? "O_DIRECT" : "buffered") + " pread, " + std::to_string(total >> 20) +
	      " MiB in " + std::to_string(dt).substr(0, 5) + " s";
	return 0;
}

Result compute(const CrossOpts &o, const std::string &name, std::uint64_t layers,
	       std::uint64_t kv_heads, std::uint64_t head_dim, double params, double load_gbps)
{
	Result r{};
	r.model = name;
	r.layers = layers;
	r.kv_heads = kv_heads;
	r.head_dim = head_dim;
	r.dtype_bytes = o.dtype_bytes;
	r.tokens = o.tokens;
	r.tp = o.tp;
	std::uint64_t per_token_head = 2 * layers * head_dim * o.dtype_bytes * o.tokens;
	r.bytes_per_chunk = per_token_head * kv_heads;
	std::uint64_t heads_per_rank = std::max<std::uint64_t>(1, (kv_heads + o.tp - 1) / o.tp);
	r.bytes_per_rank = per_token_head * heads_per_rank;
	r.load_gbps = load_gbps;
	if (o.recompute_tps > 0) {
		r.recompute_tps = o.recompute_tps;
		r.recompute_source = "given";
	} else {
		r.recompute_tps = o.gpu_tflops * 1e12 * static_cast<double>(o.tp) / (2.0 * params);
		char buf[160];
		std::snprintf(buf, sizeof(buf),
			      "assumed: %.0f TFLOP/s per GPU x %llu GPU(s) / (2 x %.3g params) "
			      "per token",
			      o.gpu_tflops, static_cast<unsigned long long>(o.tp), params);
		r.recompute_source = buf;
	}
	r.load_s = static_cast<double>(r.bytes_per_rank) / (load_gbps * 1e9);
	r.recompute_s = static_cast<double>(o.tokens) / r.recompute_tps;
	r.ratio = r.load_s / r.recompute_s;
	r.verdict = r.ratio < 1 ? "load" : r.ratio > 1 ? "recompute" : "either";
	return r;
}

int run_crossover(const Globals &g, const CrossOpts &o)
{
	const char *cmd = "crossover";
	if (o.load_gbps <= 0 && o.measure.empty())
		return fail(cmd, "no load bandwidth: give --load-gbps GB/s or --measure PATH");
	if (!o.tokens || !o.dtype_bytes || !o.tp)
		return fail(cmd, "--tokens, --dtype-bytes and --tp must be at least 1");
	bool custom = o.layers || o.kv_heads || o.head_dim;
	std::vector<Preset> models;
	if (!o.model.empty()) {
		const Preset *p = nullptr;
		for (const auto &x : kPresets)
			if (o.model == x.name)
				p = &x;
		if (!p) {
			std::string names;
			for (const auto &x : kPresets)
				names += (names.empty() ? "" : ", ") + std::string(x.name);
			return fail(cmd, "unknown model '" + o.model + "' (presets: " + names + ")");
		}
		Preset m = *p;
		if (o.layers)
			m.layers = o.layers;
		if (o.kv_heads)
			m.kv_heads = o.kv_heads;
		if (o.head_dim)
			m.head_dim = o.head_dim;
		if (o.params_b > 0)
			m.params = o.params_b * 1e9;
		models.push_back(m);
	} else if (custom) {
		if (!o.layers || !o.kv_heads || !o.head_dim)
			return fail(cmd, "a custom model needs --layers, --kv-heads and --head-dim");
		if (o.recompute_tps <= 0 && o.params_b <= 0)
			return fail(cmd, "a custom model needs --recompute-tokens-per-s or --params "
					 "(billions, for the assumed recompute rate)");
		models.push_back({ "custom", o.layers, o.kv_heads, o.head_dim, o.params_b * 1e9 });
	} else {
		models.assign(std::begin(kPresets), std::end(kPresets));
	}

	double gbps = o.load_gbps;
	std::string load_source = "given";
	if (!o.measure.empty()) {
		int ret = measure_gbps(o.measure, o.measure_seconds, gbps, load_source);
		if (ret)
			return fail(cmd, "measure " + o.measure + ": " + errstr(ret));
		if (gbps <= 0)
			return fail(cmd, "measure " + o.measure + ": read nothing");
	}

	std::vector<Result> res;
	for (const auto &m : models)
		res.push_back(compute(o, m.name, m.layers, m.kv_heads, m.head_dim, m.params, gbps));

	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["load_gbps"] = gbps;
		doc["load_source"] = load_source;
		doc["results"] = nlohmann::ordered_json::array();
		for (const auto &r : res)
			doc["results"].push_back({ { "model", r.model },
						   { "layers", r.layers },
						   { "kv_heads", r.kv_heads },
						   { "head_dim", r.head_dim },
						   { "dtype_bytes", r.dtype_bytes },
						   { "tokens", r.tokens },
						   { "tp", r.tp },
						   { "bytes_per_chunk", r.bytes_per_chunk },
						   { "bytes_per_rank", r.bytes_per_rank },
						   { "recompute_tokens_per_s", r.recompute_tps },
						   { "recompute_source", r.recompute_source },
						   { "load_s", r.load_s },
						   { "recompute_s", r.recompute_s },
						   { "ratio", r.ratio },
						   { "verdict", r.verdict } });
		print_json(doc);
		return 0;
	}
	std::printf("load bandwidth   %.3f GB/s per rank (%s)\n", gbps, load_source.c_str());
	for (const auto &r : res) {
		std::printf("\n%s: %llu layers, %llu KV heads, head dim %llu, %llu B/element\n",
			    r.model.c_str(), static_cast<unsigned long long>(r.layers),
			    static_cast<unsigned long long>(r.kv_heads),
			    static_cast<unsigned long long>(r.head_dim),
			    static_cast<unsigned long long>(r.dtype_bytes));
		std::printf("  tokens per chunk %llu, tensor parallel %llu\n",
			    static_cast<unsigned long long>(r.tokens),
			    static_cast<unsigned long long>(r.tp));
		std::printf("  bytes per chunk  %s\n", human_bytes(r.bytes_per_chunk).c_str());
		std::printf("  bytes per rank   %s\n", human_bytes(r.bytes_per_rank).c_str());
		std::printf("  recompute rate   %.0f tokens/s (%s)\n", r.recompute_tps,
			    r.recompute_source.c_str());
		std::printf("  load time        %.3f ms\n", r.load_s * 1e3);
		std::printf("  recompute time   %.3f ms\n", r.recompute_s * 1e3);
		std::printf("  load/recompute   %.3f\n", r.ratio);
		if (r.verdict == "load")
			std::printf("  verdict          load (%.2fx faster than recompute)\n",
				    1.0 / r.ratio);
		else if (r.verdict == "recompute")
			std::printf("  verdict          recompute (%.2fx faster than load)\n",
				    r.ratio);
		else
			std::printf("  verdict          either (equal times)\n");
	}
	return 0;
}

} // namespace

void register_crossover(CLI::App &app, Globals &g, Handler &h)
{
	auto o = std::make_shared<CrossOpts>();
	auto *sub = app.add_subcommand(
		"crossover",
		"Load a KV-cache chunk from storage or recompute it? Bytes per chunk and per "
		"rank, load and recompute times, their ratio and a verdict");
	sub->footer(
		"Formula:\n"
		"  bytes per chunk = 2 (K,V) x layers x kv_heads x head_dim x dtype_bytes x tokens\n"
		"  bytes per rank  = the same with max(1, ceil(kv_heads / tp)) heads\n"
		"  load time       = bytes per rank / load bandwidth (each rank loads its share\n"
		"                    in parallel at that bandwidth)\n"
		"  recompute time  = tokens / recompute rate (tokens/s of the whole TP group)\n"
		"  verdict         = load if load time < recompute time, else recompute\n"
		"Default recompute rate (an ASSUMPTION, printed as such):\n"
		"  gpu_tflops x 1e12 x tp / (2 x params) tokens/s: prefill at ~2 FLOP per\n"
		"  parameter per token, attention's quadratic term ignored; gpu_tflops 400 is\n"
		"  ~40% of an H100 SXM's dense bf16 peak. Give --recompute-tokens-per-s for\n"
		"  a measured rate.\n"
		"Presets (config.json of each model: layers / KV heads / head dim, params):\n"
		"  llama-3.1-8b 32/8/128 8.03e9, llama-3.1-70b 80/8/128 70.6e9,\n"
		"  llama-3.1-405b 126/8/128 405.9e9. No --model and no geometry: all presets.");
	sub->add_option("-m,--model", o->model, "Preset: llama-3.1-8b, llama-3.1-70b, llama-3.1-405b");
	sub->add_option("--layers", o->layers, "Transformer layers")->check(CLI::PositiveNumber);
	sub->add_option("--kv-heads", o->kv_heads, "KV heads (GQA groups)")->check(CLI::PositiveNumber);
	sub->add_option("--head-dim", o->head_dim, "Elements per head")->check(CLI::PositiveNumber);
	sub->add_option("--dtype-bytes", o->dtype_bytes, "Bytes per element (bf16/fp16: 2, fp8: 1)")
		->capture_default_str();
	sub->add_option("--tokens", o->tokens, "Tokens per chunk")->capture_default_str();
	sub->add_option("--tp", o->tp, "Tensor-parallel ranks")->capture_default_str();
	sub->add_option("--params", o->params_b,
			"Parameters in billions (custom model; for the assumed recompute rate)");
	auto *lg = sub->add_option("--load-gbps", o->load_gbps,
				   "Load bandwidth per rank, GB/s (1e9 bytes/s)")
			   ->check(CLI::PositiveNumber);
	auto *ms = sub->add_option("--measure", o->measure,
				   "Measure the load bandwidth by reading PATH (file or block "
				   "device; read-only)")
			   ->option_text("PATH");
	lg->excludes(ms);
	sub->add_option("--measure-seconds", o->measure_seconds, "How long --measure reads")
		->check(CLI::PositiveNumber)
		->capture_default_str();
	sub->add_option("--recompute-tokens-per-s", o->recompute_tps,
			"Measured prefill rate of the TP group, tokens/s (default: assumed, see below)")
		->check(CLI::PositiveNumber);
	sub->add_option("--gpu-tflops", o->gpu_tflops,
			"Effective TFLOP/s per GPU for the assumed recompute rate")
		->check(CLI::PositiveNumber)
		->capture_default_str();
	sub->callback([&g, &h, o] { h = [&g, o] { return run_crossover(g, *o); }; });
}

} // namespace kvblkctl

// SPDX-License-Identifier: MIT
/*
 * kvblk-kvstore-bench - the kvblk store against raw libkvblk on the same drives and bytes.
 *
 * For each chunk size (default 4 MiB and 32 MiB), a store is made over --drives files (or the
 * given devices), a batch of --batch chunks is put, and then, in --rounds interleaved rounds:
 *   raw put    kvblk_store_many() of the same bytes to files of the same size beside the
 *              store's (same file system, same disk), chunk i on file i % drives, then
 *              kvblk_flush() of every file (what durability costs the raw path too);
 *   raw get    kvblk_load_many() of them, one call, every file at once;
 *   store put  kvblk_kvstore_put() of the batch (new slots, flushes, journal commits);
 *   store get  kvblk_kvstore_get() of the batch's keys (CRC32C checked on every object).
 * Each leg: GB/s and CPU s/GB (the process's user + system time over the leg). Printed: the
 * medians, the ratios store/raw with the goals (get >= 0.95, put >= 0.90) and pass/MISS, and
 * --json FILE with every round. Every get is checked byte for byte against what was put.
 * A benchmark, not a test: exit 0 when every goal is met, 1 when one is missed, 2 on an error.
 * --quick: tiny sizes, one round, no goals (ctest checks that it runs and verifies).
 */
#include <kvblk/kvblk.h>
#include <kvblk/kvstore.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace {

struct Opts {
	std::string dir = "/var/tmp";
	uint32_t drives = 2;
	std::vector<uint64_t> chunk_mib = {4, 32};
	uint32_t batch = 32;
	uint32_t rounds = 3;
	std::string backend = "auto";
	std::string json;
	bool quick = false;
};

struct Leg {
	std::vector<double> gbps, cpu_s_per_gb;
};

double now_s()
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_s()
{
	rusage ru{};
	getrusage(RUSAGE_SELF, &ru);
	return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

double median(std::vector<double> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

[[noreturn]] void die(const std::string &what)
{
	std::fprintf(stderr, "kvblk-kvstore-bench: %s\n", what.c_str());
	std::exit(2);
}

uint8_t *alloc(size_t n)
{
	void *p = nullptr;
	if (posix_memalign(&p, 4096, n))
		die("out of memory");
	return static_cast<uint8_t *>(p);
}

struct Result {
	uint64_t chunk = 0;
	Leg raw_get, store_get, raw_put, store_put;
};

Result run_chunk(const Opts &o, uint64_t chunk)
{
	Result R;
	R.chunk = chunk;
	const uint32_t n = o.batch;
	const uint32_t nd = o.drives;
	std::vector<std::string> paths, raw_paths;
	for (uint32_t d = 0; d < nd; d++) {
		const std::string base = o.dir + "/kvblk-kvstore-bench." + std::to_string(getpid()) + "." + std::to_string(d);
		paths.push_back(base);
		raw_paths.push_back(base + ".raw");
	}
	/* Each drive holds the batch twice over (puts take new slots) plus its metadata. */
	const uint64_t per_drive = (2 * uint64_t(n) * chunk + 2 * chunk) / nd + 96 * (1ull << 20);
	kvblk_kvstore_create_opts c;
	kvblk_kvstore_create_opts_init(&c, sizeof(c));
	c.nr_classes = 1;
	c.classes[0] = kvblk_kvstore_class{chunk, 1, 0};
	c.file_bytes = per_drive;
	kvblk_kvstore_open_opts oo;
	kvblk_kvstore_open_opts_init(&oo, sizeof(oo));
	const int be = kvblk_backend_from_name(o.backend.c_str());
	if (be < 0)
		die("unknown backend " + o.backend);
	oo.backend = uint32_t(be);
	std::vector<const char *> pp;
	for (const auto &p : paths)
		pp.push_back(p.c_str());
	kvblk_kvstore *s = nullptr;
	if (kvblk_kvstore_create(pp.data(), nd, &c, &oo, &s))
		die(kvblk_kvstore_last_error());
	kvblk_dev *dev = kvblk_kvstore_dev(s);
	/* The raw legs: files of the same size beside the store's, on the same file system (disk). */
	kvblk_open_opts ro;
	kvblk_open_opts_init(&ro, sizeof(ro));
	ro.backend = uint32_t(be);
	ro.flags = KVBLK_OPEN_WRITE | KVBLK_OPEN_CREATE;
	ro.create_bytes = per_drive;
	kvblk_dev *raw_dev = nullptr;
	if (kvblk_open(raw_paths[0].c_str(), &ro, &raw_dev))
		die(kvblk_last_error());
	for (uint32_t d = 1; d < nd; d++) {
		const int fd = open(raw_paths[d].c_str(), O_RDWR | O_CREAT, 0600);
		if (fd < 0 || posix_fallocate(fd, 0, off_t(per_drive)))
			die("cannot make " + raw_paths[d]);
		close(fd);
		uint32_t id;
		if (kvblk_add_target(raw_dev, raw_paths[d].c_str(), KVBLK_OPEN_WRITE, &id))
			die(kvblk_last_error());
	}
	{
		const int fd = open(raw_paths[0].c_str(), O_RDWR);
		if (fd < 0 || posix_fallocate(fd, 0, off_t(per_drive)))
			die("cannot preallocate " + raw_paths[0]);
		close(fd);
	}
	/* The batch: one source and one destination, n chunks each, registered on both devices. */
	uint8_t *src = alloc(n * chunk), *dst = alloc(n * chunk);
	for (uint64_t i = 0; i < n * chunk; i += 8) {
		uint64_t w = (i + 1) * 0x9E3779B97F4A7C15ull;
		memcpy(src + i, &w, 8);
	}
	memset(dst, 0, n * chunk);
	uint32_t src_id, dst_id, rsrc_id, rdst_id;
	if (kvblk_register_buffer(dev, KVBLK_MEM_HOST, src, n * chunk, &src_id) ||
	    kvblk_register_buffer(dev, KVBLK_MEM_HOST, dst, n * chunk, &dst_id) ||
	    kvblk_register_buffer(raw_dev, KVBLK_MEM_HOST, src, n * chunk, &rsrc_id) ||
	    kvblk_register_buffer(raw_dev, KVBLK_MEM_HOST, dst, n * chunk, &rdst_id))
		die(kvblk_last_error());
	std::vector<std::string> keys;
	for (uint32_t i = 0; i < n; i++)
		keys.push_back("model@8@" + std::to_string(i % 8) + "@" + std::to_string(0x1000 + i) + "@bfloat16");
	std::vector<kvblk_kvstore_op> put_ops(n), get_ops(n);
	std::vector<kvblk_desc> raw_put(n), raw_get(n);
	for (uint32_t i = 0; i < n; i++) {
		put_ops[i] = kvblk_kvstore_op{};
		put_ops[i].key = keys[i].data();
		put_ops[i].key_len = uint32_t(keys[i].size());
		put_ops[i].buf_id = src_id;
		put_ops[i].addr = i * chunk;
		put_ops[i].length = chunk;
		get_ops[i] = put_ops[i];
		get_ops[i].buf_id = dst_id;
		/* Chunk i on drive i % nd, as the store spreads them: every drive busy at once. */
		kvblk_desc x{};
		x.target = i % nd;
		x.offset = (1ull << 20) + uint64_t(i / nd) * chunk;
		x.length = chunk;
		x.buf_id = rsrc_id;
		x.addr = i * chunk;
		raw_put[i] = x;
		x.buf_id = rdst_id;
		raw_get[i] = x;
	}
	std::vector<kvblk_kvstore_result> res(n);
	std::vector<kvblk_result> rr(n);
	const double bytes = double(n) * double(chunk);
	auto leg = [&](Leg &L, auto &&fn) {
		const double c0 = cpu_s(), t0 = now_s();
		fn();
		const double t = now_s() - t0, cpu = cpu_s() - c0;
		L.gbps.push_back(bytes / t / 1e9);
		L.cpu_s_per_gb.push_back(cpu / (bytes / 1e9));
	};
	auto verify = [&](const char *what) {
		if (memcmp(src, dst, n * chunk) != 0)
			die(std::string(what) + ": the bytes read are not the bytes put");
		memset(dst, 0, n * chunk);
	};
	for (uint32_t r = 0; r < o.rounds; r++) {
		leg(R.raw_put, [&] {
			if (kvblk_store_many(raw_dev, raw_put.data(), n, rr.data(), nullptr) != int(n))
				die(std::string("raw put: ") + kvblk_last_error());
			if (kvblk_flush(raw_dev, KVBLK_TARGET_ALL, 0))
				die(std::string("raw put flush: ") + kvblk_last_error());
		});
		leg(R.raw_get, [&] {
			if (kvblk_load_many(raw_dev, raw_get.data(), n, rr.data(), nullptr) != int(n))
				die(std::string("raw get: ") + kvblk_last_error());
		});
		verify("raw get");
		leg(R.store_put, [&] {
			if (kvblk_kvstore_put(s, put_ops.data(), n, res.data()) != int(n))
				die(std::string("store put: ") + kvblk_kvstore_last_error());
		});
		leg(R.store_get, [&] {
			if (kvblk_kvstore_get(s, get_ops.data(), n, res.data()) != int(n))
				die(std::string("store get: ") + kvblk_kvstore_last_error());
		});
		verify("store get");
	}
	kvblk_kvstore_close(s);
	kvblk_close(raw_dev);
	free(src);
	free(dst);
	for (uint32_t d = 0; d < nd; d++) {
		unlink(paths[d].c_str());
		unlink(raw_paths[d].c_str());
	}
	return R;
}

} // namespace

int main(int argc, char **argv)
{
	Opts o;
	CLI::App app{"kvblk-kvstore-bench: the kvblk store against raw libkvblk on the same drives and bytes"};
	app.add_option("--dir", o.dir, "Where the drive files go (default /var/tmp)");
	app.add_option("--drives", o.drives, "Drive files (default 2)")->check(CLI::Range(1u, 64u));
	app.add_option("--chunk-mib", o.chunk_mib, "Chunk sizes in MiB (default 4 32)");
	app.add_option("--batch", o.batch, "Chunks per batch (default 32)")->check(CLI::Range(1u, 4096u));
	app.add_option("--rounds", o.rounds, "Interleaved rounds (default 3)")->check(CLI::Range(1u, 100u));
	app.add_option("--backend", o.backend, "libkvblk backend (default auto)");
	app.add_option("--json", o.json, "Write every round's figures to this file");
	app.add_flag("--quick", o.quick, "Tiny sizes, one round, no goals (a smoke test)");
	CLI11_PARSE(app, argc, argv);
	if (o.quick) {
		o.chunk_mib = {1};
		o.batch = 4;
		o.rounds = 1;
	}
	nlohmann::ordered_json doc;
	doc["batch"] = o.batch;
	doc["drives"] = o.drives;
	doc["backend"] = o.backend;
	bool all_met = true;
	std::printf("kvblk store vs raw libkvblk, %u chunks per batch, %u drive(s), %u interleaved round(s), medians\n",
		    o.batch, o.drives, o.rounds);
	std::printf("%-9s %-10s %8s %10s\n", "chunk", "leg", "GB/s", "CPU s/GB");
	for (uint64_t mib : o.chunk_mib) {
		const Result R = run_chunk(o, mib << 20);
		auto &j = doc["chunks"][std::to_string(mib) + "MiB"];
		const std::pair<const char *, const Leg *> legs[] = {
			{"raw get", &R.raw_get}, {"store get", &R.store_get}, {"raw put", &R.raw_put}, {"store put", &R.store_put}};
		for (const auto &[name, L] : legs) {
			std::printf("%-9s %-10s %8.3f %10.3f\n", (std::to_string(mib) + " MiB").c_str(), name, median(L->gbps),
				    median(L->cpu_s_per_gb));
			j[name] = {{"gbps", L->gbps}, {"cpu_s_per_gb", L->cpu_s_per_gb}};
		}
		const double g = median(R.store_get.gbps) / median(R.raw_get.gbps);
		const double p = median(R.store_put.gbps) / median(R.raw_put.gbps);
		j["get_ratio"] = g;
		j["put_ratio"] = p;
		if (!o.quick) {
			const bool gm = g >= 0.95, pm = p >= 0.90;
			all_met = all_met && gm && pm;
			std::printf("  %llu MiB: store get %.2f x raw get (goal >= 0.95: %s), store put %.2f x raw put (goal >= 0.90: %s)\n",
				    (unsigned long long)mib, g, gm ? "pass" : "MISS", p, pm ? "pass" : "MISS");
		}
	}
	if (!o.json.empty()) {
		FILE *f = std::fopen(o.json.c_str(), "w");
		if (!f)
			die("cannot write " + o.json);
		std::fprintf(f, "%s\n", doc.dump(2).c_str());
		std::fclose(f);
	}
	return all_met ? 0 : 1;
}

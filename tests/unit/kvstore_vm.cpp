// SPDX-License-Identifier: MIT
/*
 * kvstore_vm - the kvblk store's tests that need the QEMU guest (tests/vm/cases/kvstore.sh):
 *
 *   kvstore_vm drives [--remove-cmd CMD --remove DRIVE_INDEX] DRIVE...
 *       A store over the drives (kvblk.ko serves them when it is loaded: backend AUTO);
 *       64 objects put and read back exact. With --remove-cmd: get batches of every key run
 *       while CMD removes drive DRIVE_INDEX (its NVMe function) in the middle of one: every
 *       object is exact or failed (never success with other bytes), only that drive's keys
 *       fail, and after it the store keeps serving (the drive marked failed; puts land on the
 *       others; their gets exact).
 *
 *   kvstore_vm crash-load --manifest FILE --mark-cmd CMD DRIVE
 *       Puts batches of versioned keys into a new store on DRIVE (refuse mode: nothing
 *       evicted) and after each acknowledged batch runs CMD with %V replaced by its version
 *       (dmsetup message ... mark ack-V), writing each batch's keys to FILE first.
 *
 *   kvstore_vm crash-check --log LOGDEV --target DEV --manifest FILE [--seed N]
 *       Replays a dm-log-writes log (drivers/md/dm-log-writes.c's format) onto DEV entry by
 *       entry; at every flush (and every mark) it opens the store read-only on DEV and checks
 *       each key: a hit holds exactly one version that was put, at least the last version
 *       acknowledged before that point; a miss only for keys never acknowledged. At every
 *       flush it also applies a random subset of the writes logged before the next flush
 *       (whole blocks of them: a power cut with part of the cache written), checks the same,
 *       and undoes them.
 * Exit 0 pass, 1 fail (the first failure printed), 2 usage or setup error.
 */
#include <kvblk/kvblk.h>
#include <kvblk/kvstore.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

[[noreturn]] void die(int code, const std::string &m)
{
	std::fprintf(stderr, "%s: %s\n", code == 1 ? "FAIL" : "kvstore_vm", m.c_str());
	std::exit(code);
}

std::vector<uint8_t> bytes_of(const std::string &key, uint64_t v, uint64_t len)
{
	uint64_t h = 1469598103934665603ull ^ (v * 0x9E3779B97F4A7C15ull);
	for (unsigned char c : key)
		h = (h ^ c) * 1099511628211ull;
	std::vector<uint8_t> out(len);
	for (uint64_t i = 0; i < len; i += 8) {
		h += 0x9E3779B97F4A7C15ull;
		uint64_t w = h;
		w = (w ^ (w >> 30)) * 0xBF58476D1CE4E5B9ull;
		w = (w ^ (w >> 27)) * 0x94D049BB133111EBull;
		w ^= w >> 31;
		std::memcpy(out.data() + i, &w, std::min<uint64_t>(8, len - i));
	}
	return out;
}

uint8_t *aligned(size_t n)
{
	void *p = nullptr;
	if (posix_memalign(&p, 4096, (n + 4095) / 4096 * 4096))
		die(2, "out of memory");
	std::memset(p, 0, (n + 4095) / 4096 * 4096);
	return static_cast<uint8_t *>(p);
}

kvblk_kvstore_op op(const std::string &k, const void *a, uint64_t len)
{
	kvblk_kvstore_op o{};
	o.key = k.data();
	o.key_len = uint32_t(k.size());
	o.buf_id = KVBLK_BUF_NONE;
	o.addr = uint64_t(uintptr_t(a));
	o.length = len;
	return o;
}

/* ---------------------------------------------------------------- drives */

int drives_main(const std::vector<std::string> &paths, const std::string &remove_cmd, int remove_ix)
{
	std::vector<const char *> pp;
	for (const auto &p : paths)
		pp.push_back(p.c_str());
	kvblk_kvstore_create_opts c;
	kvblk_kvstore_create_opts_init(&c, sizeof(c));
	c.nr_classes = 1;
	c.classes[0] = kvblk_kvstore_class{1u << 20, 1, 0};
	c.flags = KVBLK_KVSTORE_CREATE_FORCE;
	c.journal_bytes = 4u << 20;
	kvblk_kvstore *s = nullptr;
	if (kvblk_kvstore_create(pp.data(), uint32_t(pp.size()), &c, nullptr, &s))
		die(1, std::string("create: ") + kvblk_kvstore_last_error());
	kvblk_dev_info di{};
	di.info_size = sizeof(di);
	kvblk_get_info(kvblk_kvstore_dev(s), &di);
	std::printf("store over %zu drives, backend %s (%s)\n", paths.size(), kvblk_backend_name(int(di.backend)),
		    di.backend_reason);
	const uint32_t n = 64;
	const uint64_t len = 1000000;
	std::vector<std::string> keys;
	for (uint32_t i = 0; i < n; i++)
		keys.push_back("llama@8@" + std::to_string(i % 8) + "@" + std::to_string(0xabc000 + i));
	std::vector<std::vector<uint8_t>> data;
	std::vector<kvblk_kvstore_op> ops;
	for (uint32_t i = 0; i < n; i++) {
		data.push_back(bytes_of(keys[i], 1, len));
		ops.push_back(op(keys[i], data[i].data(), len));
	}
	std::vector<kvblk_kvstore_result> res(n);
	if (kvblk_kvstore_put(s, ops.data(), n, res.data()) != int(n))
		die(1, std::string("put: ") + kvblk_kvstore_last_error());
	std::map<std::string, uint32_t> where;
	std::vector<int> per(paths.size(), 0);
	for (uint32_t i = 0; i < n; i++) {
		where[keys[i]] = res[i].drive;
		per[res[i].drive]++;
	}
	for (size_t d = 0; d < paths.size(); d++) {
		std::printf("drive %zu (%s): %d keys\n", d, paths[d].c_str(), per[d]);
		if (!per[d])
			die(1, "drive " + std::to_string(d) + " got no key");
	}
	uint8_t *dst = aligned(n * (1u << 20));
	std::vector<kvblk_kvstore_op> g;
	for (uint32_t i = 0; i < n; i++)
		g.push_back(op(keys[i], dst + uint64_t(i) * (1u << 20), 1u << 20));
	auto batch = [&](int round, bool removed_done) -> std::pair<int, int> {
		std::memset(dst, 0xee, n * (1u << 20));
		std::vector<kvblk_kvstore_result> r(n);
		const int hits = kvblk_kvstore_get(s, g.data(), n, r.data());
		if (hits < 0)
			die(1, std::string("get batch: ") + kvblk_kvstore_last_error());
		int failed_removed = 0;
		for (uint32_t i = 0; i < n; i++) {
			const bool on_removed = int(where[keys[i]]) == remove_ix;
			if (r[i].status == 0) {
				if (std::memcmp(dst + uint64_t(i) * (1u << 20), data[i].data(), len) != 0)
					die(1, "round " + std::to_string(round) + ": " + keys[i] + " reported a hit with other bytes");
				continue;
			}
			if (!on_removed)
				die(1, "round " + std::to_string(round) + ": " + keys[i] + " (drive " +
					       std::to_string(where[keys[i]]) + ", not removed) failed: " + std::strerror(-r[i].status));
			if (removed_done && r[i].status != -ENODEV)
				die(1, keys[i] + " after the removal: " + std::strerror(-r[i].status) + ", want ENODEV");
			failed_removed++;
		}
		return {hits, failed_removed};
	};
	auto [h0, f0] = batch(0, false);
	if (h0 != int(n) || f0)
		die(1, "the first batch was not whole");
	std::printf("ok: %u keys exact over %zu drives\n", n, paths.size());
	if (remove_cmd.empty()) {
		kvblk_kvstore_close(s);
		return 0;
	}
	/* Batches back to back while another thread removes the drive. */
	std::atomic<bool> stop{false};
	std::atomic<int> rounds{0}, failed{0};
	std::thread reader([&] {
		for (int round = 1; !stop.load(); round++) {
			auto [h, f] = batch(round, false);
			(void)h;
			failed += f;
			rounds++;
		}
	});
	while (rounds.load() < 1)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	std::printf("removing drive %d: %s\n", remove_ix, remove_cmd.c_str());
	const int rc = std::system(remove_cmd.c_str());
	if (rc)
		die(2, "the removal command failed: " + std::to_string(rc));
	std::this_thread::sleep_for(std::chrono::seconds(2));
	const int before = rounds.load();
	while (rounds.load() < before + 2)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	stop = true;
	reader.join();
	std::printf("ok: %d batches during and after the removal, %d objects of the removed drive failed, every "
		    "other object exact\n", rounds.load(), failed.load());
	if (!failed.load())
		die(1, "no object of the removed drive failed: the removal did not reach the store");
	auto [h1, f1] = batch(1000, true);
	if (h1 != int(n) - per[remove_ix] || f1 != per[remove_ix])
		die(1, "after the removal: " + std::to_string(h1) + " hits");
	kvblk_kvstore_drive_info dr{};
	dr.info_size = sizeof(dr);
	kvblk_kvstore_get_drive_info(s, uint32_t(remove_ix), &dr);
	if (dr.state != KVBLK_KVSTORE_DRIVE_FAILED)
		die(1, "the removed drive's state is " + std::to_string(dr.state) + ", not failed");
	std::printf("ok: drive %d failed (%s); the other %d keys hit\n", remove_ix, dr.why_failed, h1);
	/* The store keeps serving: new keys go to the other drives. */
	std::vector<std::string> nk;
	std::vector<std::vector<uint8_t>> nd;
	std::vector<kvblk_kvstore_op> nops;
	for (int i = 0; i < 12; i++) {
		nk.push_back("after-removal-" + std::to_string(i));
		nd.push_back(bytes_of(nk.back(), 2, len));
	}
	for (int i = 0; i < 12; i++)
		nops.push_back(op(nk[i], nd[i].data(), len));
	std::vector<kvblk_kvstore_result> nr(12);
	if (kvblk_kvstore_put(s, nops.data(), 12, nr.data()) != 12)
		die(1, std::string("puts after the removal: ") + kvblk_kvstore_last_error());
	for (const auto &x : nr)
		if (int(x.drive) == remove_ix)
			die(1, "a put after the removal went to the removed drive");
	for (int i = 0; i < 12; i++)
		nops[i].addr = uint64_t(uintptr_t(dst + uint64_t(i) * (1u << 20))), nops[i].length = 1u << 20;
	if (kvblk_kvstore_get(s, nops.data(), 12, nr.data()) != 12)
		die(1, "gets of the new keys");
	for (int i = 0; i < 12; i++)
		if (std::memcmp(dst + uint64_t(i) * (1u << 20), nd[i].data(), len) != 0)
			die(1, "a new key read back other bytes");
	std::printf("ok: 12 puts after the removal landed on the other drives and read back exact\n");
	kvblk_kvstore_close(s);
	free(dst);
	return 0;
}

/* ------------------------------------------------------------ crash-load */

constexpr int kKeys = 16;

uint64_t crash_len(uint64_t v, int k)
{
	return 4096 + ((v * 7 + uint64_t(k) * 13) % 48) * 4000; /* 4 KiB .. about 192 KiB: both classes */
}

int crash_load(const std::string &drive, const std::string &manifest, const std::string &mark_cmd)
{
	kvblk_kvstore_create_opts c;
	kvblk_kvstore_create_opts_init(&c, sizeof(c));
	c.nr_classes = 2;
	c.classes[0] = kvblk_kvstore_class{64u << 10, 1, 0};
	c.classes[1] = kvblk_kvstore_class{256u << 10, 1, 0};
	c.flags = KVBLK_KVSTORE_CREATE_FORCE;
	c.journal_bytes = 4u << 20;
	kvblk_kvstore_open_opts o;
	kvblk_kvstore_open_opts_init(&o, sizeof(o));
	o.when_full = KVBLK_KVSTORE_REFUSE;
	const char *pp[] = {drive.c_str()};
	kvblk_kvstore *s = nullptr;
	if (kvblk_kvstore_create(pp, 1, &c, &o, &s))
		die(1, std::string("create: ") + kvblk_kvstore_last_error());
	FILE *m = std::fopen(manifest.c_str(), "w");
	if (!m)
		die(2, "cannot write " + manifest);
	std::mt19937 rng(4242);
	for (uint64_t v = 1; v <= 24; v++) {
		std::set<int> pick;
		while (pick.size() < 5)
			pick.insert(int(rng() % kKeys));
		std::vector<std::string> keys;
		std::vector<std::vector<uint8_t>> data;
		std::fprintf(m, "%llu", (unsigned long long)v);
		for (int k : pick) {
			keys.push_back("key" + std::to_string(k));
			data.push_back(bytes_of(keys.back(), v, crash_len(v, k)));
			std::fprintf(m, " %d", k);
		}
		std::fprintf(m, "\n");
		std::fflush(m);
		std::vector<kvblk_kvstore_op> ops;
		for (size_t i = 0; i < keys.size(); i++)
			ops.push_back(op(keys[i], data[i].data(), data[i].size()));
		std::vector<kvblk_kvstore_result> r(keys.size());
		if (kvblk_kvstore_put(s, ops.data(), uint32_t(ops.size()), r.data()) != int(ops.size()))
			die(1, std::string("put: ") + kvblk_kvstore_last_error());
		std::string cmd = mark_cmd;
		const auto at = cmd.find("%V");
		if (at != std::string::npos)
			cmd.replace(at, 2, std::to_string(v));
		if (std::system(cmd.c_str()))
			die(2, "mark command failed: " + cmd);
	}
	std::fclose(m);
	kvblk_kvstore_close(s);
	std::printf("ok: 24 batches put and marked\n");
	return 0;
}

/* ----------------------------------------------------------- crash-check */

/* dm-log-writes' on-disk log (drivers/md/dm-log-writes.c). */
constexpr uint64_t kLogMagic = 0x6a736677736872ull;
enum : uint64_t { kFlush = 1, kFua = 2, kDiscard = 4, kMark = 8 };

struct Entry {
	uint64_t sector = 0, nr_sectors = 0, flags = 0;
	uint64_t data_pos = 0; /* byte offset of the data in the log */
	std::string mark;
};

struct Checker {
	int logfd = -1, tfd = -1;
	std::string target;
	uint32_t bs = 4096;
	std::vector<Entry> entries;
	std::map<uint64_t, std::vector<int>> manifest; /* version -> keys */
	std::map<int, uint64_t> acked;		       /* key -> last acknowledged version so far */
	uint64_t max_v = 0;
	int checks = 0, hits = 0;

	void read_log(const std::string &path)
	{
		logfd = open(path.c_str(), O_RDONLY);
		if (logfd < 0)
			die(2, "open " + path);
		uint8_t sb[4096];
		if (pread(logfd, sb, sizeof(sb), 0) != ssize_t(sizeof(sb)))
			die(2, "read the log's super");
		uint64_t magic, ver, nr;
		std::memcpy(&magic, sb, 8);
		std::memcpy(&ver, sb + 8, 8);
		std::memcpy(&nr, sb + 16, 8);
		std::memcpy(&bs, sb + 24, 4);
		if (magic != kLogMagic || ver != 1 || (bs != 512 && bs != 4096))
			die(2, "not a dm-log-writes log");
		uint64_t pos = bs;
		std::vector<uint8_t> blk(bs);
		for (uint64_t i = 0; i < nr; i++) {
			if (pread(logfd, blk.data(), bs, off_t(pos)) != ssize_t(bs))
				die(2, "read log entry " + std::to_string(i));
			Entry e;
			uint64_t data_len;
			std::memcpy(&e.sector, blk.data(), 8);
			std::memcpy(&e.nr_sectors, blk.data() + 8, 8);
			std::memcpy(&e.flags, blk.data() + 16, 8);
			std::memcpy(&data_len, blk.data() + 24, 8);
			if (e.flags & kMark)
				e.mark.assign(reinterpret_cast<const char *>(blk.data() + 32), std::min<uint64_t>(data_len, bs - 32));
			e.data_pos = pos + bs;
			pos += bs;
			if (!(e.flags & kDiscard) && !(e.flags & kMark))
				pos += e.nr_sectors * bs;
			entries.push_back(e);
		}
		std::printf("log: %zu entries, %u-byte blocks\n", entries.size(), bs);
	}

	void read_manifest(const std::string &path)
	{
		std::ifstream f(path);
		std::string line;
		while (std::getline(f, line)) {
			std::istringstream is(line);
			uint64_t v;
			is >> v;
			int k;
			while (is >> k)
				manifest[v].push_back(k);
			max_v = std::max(max_v, v);
		}
		if (manifest.empty())
			die(2, "empty manifest " + path);
	}

	std::vector<uint8_t> read_blocks(int fd, uint64_t off, uint64_t len)
	{
		uint8_t *b = aligned(len);
		if (pread(fd, b, len, off_t(off)) != ssize_t(len))
			die(2, "read " + std::to_string(len) + " at " + std::to_string(off));
		std::vector<uint8_t> v(b, b + len);
		free(b);
		return v;
	}

	void write_blocks(uint64_t off, const uint8_t *p, uint64_t len)
	{
		uint8_t *b = aligned(len);
		std::memcpy(b, p, len);
		if (pwrite(tfd, b, len, off_t(off)) != ssize_t(len))
			die(2, "write the replay target");
		free(b);
	}

	void apply(const Entry &e, std::vector<std::pair<uint64_t, std::vector<uint8_t>>> *undo = nullptr,
		   uint64_t first = 0, uint64_t count = UINT64_MAX)
	{
		if (e.flags & (kDiscard | kMark) || !e.nr_sectors)
			return;
		const uint64_t n = std::min(count, e.nr_sectors - first);
		const auto data = read_blocks(logfd, e.data_pos + first * bs, n * bs);
		const uint64_t off = (e.sector + first) * bs;
		if (undo)
			undo->emplace_back(off, read_blocks(tfd, off, n * bs));
		write_blocks(off, data.data(), n * bs);
	}

	void check(const char *where, size_t at)
	{
		checks++;
		const char *pp[] = {target.c_str()};
		kvblk_kvstore_open_opts o;
		kvblk_kvstore_open_opts_init(&o, sizeof(o));
		o.flags = KVBLK_KVSTORE_OPEN_RDONLY;
		kvblk_kvstore *s = nullptr;
		const int ret = kvblk_kvstore_open(pp, 1, &o, &s);
		if (ret == -EMEDIUMTYPE && acked.empty())
			return; /* before the store was made: nothing to check */
		if (ret)
			die(1, std::string(where) + " at log entry " + std::to_string(at) + ": open: " + kvblk_kvstore_last_error());
		uint8_t *buf = aligned(256u << 10);
		for (int k = 0; k < kKeys; k++) {
			const std::string key = "key" + std::to_string(k);
			kvblk_kvstore_op g = op(key, buf, 256u << 10);
			kvblk_kvstore_result r{};
			if (kvblk_kvstore_get(s, &g, 1, &r) < 0)
				die(1, std::string("get: ") + kvblk_kvstore_last_error());
			auto a = acked.find(k);
			if (r.status == -ENOENT) {
				if (a != acked.end())
					die(1, std::string(where) + " at log entry " + std::to_string(at) + ": " + key +
						       " acknowledged at version " + std::to_string(a->second) + " is missing");
				continue;
			}
			if (r.status)
				die(1, std::string(where) + ": " + key + ": " + std::strerror(-r.status));
			bool ok = false;
			for (uint64_t v = a == acked.end() ? 1 : a->second; v <= max_v && !ok; v++) {
				const auto &ks = manifest[v];
				if (std::find(ks.begin(), ks.end(), k) == ks.end() || crash_len(v, k) != r.length)
					continue;
				const auto want = bytes_of(key, v, r.length);
				ok = std::memcmp(buf, want.data(), r.length) == 0;
			}
			if (!ok)
				die(1, std::string(where) + " at log entry " + std::to_string(at) + ": " + key +
					       " holds bytes of no version at or after the acknowledged one (length " +
					       std::to_string(r.length) + ")");
			hits++;
		}
		free(buf);
		kvblk_kvstore_close(s);
	}

	int run(uint32_t seed)
	{
		tfd = open(target.c_str(), O_RDWR | O_DIRECT);
		if (tfd < 0)
			die(2, "open " + target);
		std::mt19937 rng(seed);
		std::printf("crash-check: seed %u\n", seed);
		for (size_t i = 0; i < entries.size(); i++) {
			const Entry &e = entries[i];
			apply(e);
			if (e.flags & kMark) {
				if (e.mark.rfind("ack-", 0) == 0) {
					const uint64_t v = std::stoull(e.mark.substr(4));
					for (int k : manifest[v])
						acked[k] = std::max(acked[k], v);
				}
				check("mark", i);
				continue;
			}
			if (!(e.flags & (kFlush | kFua)))
				continue;
			fdatasync(tfd);
			check("flush", i);
			/* A power cut after this flush: some of what the next flush would cover reached the media. */
			std::vector<std::pair<uint64_t, std::vector<uint8_t>>> undo;
			for (size_t j = i + 1; j < entries.size() && !(entries[j].flags & (kFlush | kFua)); j++) {
				const Entry &w = entries[j];
				if (w.flags & (kMark | kDiscard) || !w.nr_sectors || rng() % 2)
					continue;
				/* Whole, or torn: a random run of its blocks. */
				const uint64_t first = rng() % 3 ? 0 : rng() % w.nr_sectors;
				const uint64_t count = rng() % 3 ? w.nr_sectors : 1 + rng() % w.nr_sectors;
				apply(w, &undo, first, count);
			}
			if (!undo.empty()) {
				fdatasync(tfd);
				check("flush + torn cache", i);
				for (auto it = undo.rbegin(); it != undo.rend(); ++it)
					write_blocks(it->first, it->second.data(), it->second.size());
				fdatasync(tfd);
			}
		}
		std::printf("ok: %d crash points checked (%d hits, all exact and at least acknowledged), %zu keys "
			    "acknowledged at the end\n", checks, hits, acked.size());
		if (acked.size() < 8)
			die(1, "too few keys were acknowledged for the check to mean anything");
		return 0;
	}
};

std::string arg_of(int &i, int argc, char **argv)
{
	if (i + 1 >= argc)
		die(2, std::string("missing value of ") + argv[i]);
	return argv[++i];
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2)
		die(2, "usage: kvstore_vm drives|crash-load|crash-check ...");
	const std::string mode = argv[1];
	std::string remove_cmd, manifest, mark_cmd, log, target;
	int remove_ix = -1;
	uint32_t seed = 20261204;
	std::vector<std::string> rest;
	for (int i = 2; i < argc; i++) {
		const std::string a = argv[i];
		if (a == "--remove-cmd")
			remove_cmd = arg_of(i, argc, argv);
		else if (a == "--remove")
			remove_ix = std::stoi(arg_of(i, argc, argv));
		else if (a == "--manifest")
			manifest = arg_of(i, argc, argv);
		else if (a == "--mark-cmd")
			mark_cmd = arg_of(i, argc, argv);
		else if (a == "--log")
			log = arg_of(i, argc, argv);
		else if (a == "--target")
			target = arg_of(i, argc, argv);
		else if (a == "--seed")
			seed = uint32_t(std::stoul(arg_of(i, argc, argv)));
		else
			rest.push_back(a);
	}
	if (mode == "drives") {
		if (rest.empty() || (!remove_cmd.empty() && (remove_ix < 0 || size_t(remove_ix) >= rest.size())))
			die(2, "usage: kvstore_vm drives [--remove-cmd CMD --remove I] DRIVE...");
		return drives_main(rest, remove_cmd, remove_ix);
	}
	if (mode == "crash-load") {
		if (rest.size() != 1 || manifest.empty() || mark_cmd.empty())
			die(2, "usage: kvstore_vm crash-load --manifest FILE --mark-cmd CMD DRIVE");
		return crash_load(rest[0], manifest, mark_cmd);
	}
	if (mode == "crash-check") {
		if (log.empty() || target.empty() || manifest.empty())
			die(2, "usage: kvstore_vm crash-check --log LOGDEV --target DEV --manifest FILE [--seed N]");
		Checker c;
		c.target = target;
		c.read_manifest(manifest);
		c.read_log(log);
		return c.run(seed);
	}
	die(2, "unknown mode " + mode);
}

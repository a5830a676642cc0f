// SPDX-License-Identifier: MIT
// The kvblk store (include/kvblk/kvstore.h) on files of this machine's disk, through the
// shared library as an engine links it: round trips on every userspace backend, reopen,
// overwrite, delete, eviction, several drives, a drive that fails, the asynchronous API,
// fork, and the checks of every input.
#include "kvstore_util.hpp"

#include <algorithm>
#include <csignal>
#include <atomic>
#include <map>
#include <poll.h>
#include <random>
#include <set>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <thread>

using namespace kvs_test;

namespace {

std::string key_of(int i)
{
	return "meta-llama/Llama-3.1-8B@8@" + std::to_string(i % 8) + "@" + std::to_string(i) + "@bfloat16";
}

struct Store {
	kvblk_kvstore *s = nullptr;
	~Store() { kvblk_kvstore_close(s); }
	void close()
	{
		kvblk_kvstore_close(s);
		s = nullptr;
	}
};

class KvstoreBackend : public ::testing::TestWithParam<uint32_t> {
protected:
	TempDir dir;
};

/* Mixed sizes (aligned, unaligned, a slot exactly), host sources and destinations at odd addresses. */
TEST_P(KvstoreBackend, round_trip_mixed_sizes_and_reopen)
{
	const std::string path = dir.file("d0");
	auto c = create_opts({64 * KiB, 1 * MiB, 4 * MiB}, 96 * MiB);
	auto o = open_opts(GetParam());
	Store st;
	ASSERT_EQ(kvblk_kvstore_create(std::vector<const char *>{path.c_str()}.data(), 1, &c, &o, &st.s), 0)
		<< kvblk_kvstore_last_error();
	const std::vector<uint64_t> sizes = {1, 4096, 4097, 65536, 65537, 1 * MiB, 1 * MiB - 1, 3 * MiB + 12345, 4 * MiB};
	std::vector<std::string> keys;
	std::vector<std::vector<uint8_t>> data;
	std::vector<std::string> metas;
	for (size_t i = 0; i < sizes.size(); i++) {
		keys.push_back(key_of(int(i)));
		data.push_back(object_bytes(keys[i], 1, sizes[i]));
		metas.push_back("shape=" + std::to_string(i));
	}
	/* Sources at an odd offset from an aligned buffer: the store bounces them. */
	std::vector<Buf> src;
	std::vector<kvblk_kvstore_op> ops;
	for (size_t i = 0; i < keys.size(); i++) {
		src.emplace_back(sizes[i] + 8);
		const size_t shift = i % 2 ? 3 : 0;
		memcpy(src[i].p + shift, data[i].data(), sizes[i]);
		ops.push_back(op_for(keys[i], src[i].p + shift, sizes[i], 100 + i));
		ops.back().meta = metas[i].data();
		ops.back().meta_len = uint32_t(metas[i].size());
	}
	std::vector<kvblk_kvstore_result> res(ops.size());
	ASSERT_EQ(kvblk_kvstore_put(st.s, ops.data(), uint32_t(ops.size()), res.data()), int(ops.size()))
		<< kvblk_kvstore_last_error();
	for (size_t i = 0; i < ops.size(); i++) {
		EXPECT_EQ(res[i].status, 0);
		EXPECT_EQ(res[i].length, sizes[i]);
		EXPECT_EQ(res[i].tag, 100 + i);
		EXPECT_EQ(res[i].drive, 0u);
	}
	for (int round = 0; round < 2; round++) {
		std::vector<Buf> dst;
		std::vector<kvblk_kvstore_op> g;
		std::vector<std::vector<char>> meta_out(keys.size(), std::vector<char>(64, 0));
		for (size_t i = 0; i < keys.size(); i++) {
			dst.emplace_back(sizes[i] + 4096 + 8);
			const size_t shift = i % 3 == 1 ? 5 : 0;
			g.push_back(op_for(keys[i], dst[i].p + shift, sizes[i] + (i % 3 == 2 ? 4096 : 0), i));
			g.back().meta = meta_out[i].data();
			g.back().meta_len = 64;
		}
		std::vector<kvblk_kvstore_result> gr(g.size());
		ASSERT_EQ(kvblk_kvstore_get(st.s, g.data(), uint32_t(g.size()), gr.data()), int(g.size()))
			<< kvblk_kvstore_last_error();
		for (size_t i = 0; i < keys.size(); i++) {
			const size_t shift = i % 3 == 1 ? 5 : 0;
			EXPECT_EQ(gr[i].status, 0) << i;
			EXPECT_EQ(gr[i].length, sizes[i]);
			EXPECT_EQ(gr[i].meta_len, metas[i].size());
			EXPECT_EQ(std::string(meta_out[i].data(), gr[i].meta_len), metas[i]);
			EXPECT_EQ(0, memcmp(dst[i].p + shift, data[i].data(), sizes[i])) << "object " << i << " round " << round;
			if (shift) {
				EXPECT_EQ(dst[i].p[0], 0) << "a byte before the destination was written";
			}
		}
		/* Round 2 after a close and an open of the same file. */
		st.close();
		ASSERT_EQ(kvblk_kvstore_open(std::vector<const char *>{path.c_str()}.data(), 1, &o, &st.s), 0)
			<< kvblk_kvstore_last_error();
	}
	kvblk_kvstore_info info{};
	info.info_size = sizeof(info);
	ASSERT_EQ(kvblk_kvstore_get_info(st.s, &info), 0);
	EXPECT_EQ(info.objects, keys.size());
	EXPECT_EQ(info.nr_classes, 3u);
	EXPECT_EQ(info.format_version, KVBLK_KVSTORE_FORMAT_VERSION);
	uint64_t total = 0;
	for (uint64_t x : sizes)
		total += x;
	EXPECT_EQ(info.bytes_stored, total);
	kvblk_kvstore_stats stats{};
	stats.stats_size = sizeof(stats);
	ASSERT_EQ(kvblk_kvstore_get_stats(st.s, &stats), 0);
	EXPECT_EQ(stats.hits, 0u) << "counters start at the open";
}

INSTANTIATE_TEST_SUITE_P(Backends, KvstoreBackend,
			 ::testing::Values(uint32_t(KVBLK_BACKEND_URING), uint32_t(KVBLK_BACKEND_THREADPOOL),
					   uint32_t(KVBLK_BACKEND_PSYNC)),
			 [](const auto &info) { return std::string(kvblk_backend_name(int(info.param))); });

class Kvstore : public ::testing::Test {
protected:
	TempDir dir;
	Store st;
	std::string path;
	void make(std::initializer_list<uint64_t> slots, uint64_t bytes, uint32_t when_full = KVBLK_KVSTORE_EVICT_LRU)
	{
		path = dir.file("d0");
		auto c = create_opts(slots, bytes);
		auto o = open_opts();
		o.when_full = when_full;
		ASSERT_EQ(kvblk_kvstore_create(std::vector<const char *>{path.c_str()}.data(), 1, &c, &o, &st.s), 0)
			<< kvblk_kvstore_last_error();
	}
	void reopen(uint32_t flags = 0)
	{
		st.close();
		auto o = open_opts(KVBLK_BACKEND_AUTO, flags);
		ASSERT_EQ(kvblk_kvstore_open(std::vector<const char *>{path.c_str()}.data(), 1, &o, &st.s), 0)
			<< kvblk_kvstore_last_error();
	}
};

TEST_F(Kvstore, overwrite_delete_exists_and_reopen)
{
	make({64 * KiB}, 32 * MiB);
	const std::vector<std::string> k = {"a", "b", "c"};
	ASSERT_EQ(put_keys(st.s, k, 1, 10000), 3);
	ASSERT_EQ(put_keys(st.s, {"b"}, 2, 20000), 1);
	std::vector<kvblk_kvstore_op> ops;
	for (const auto &x : k)
		ops.push_back(op_for(x, nullptr, 0));
	std::vector<kvblk_kvstore_result> r(3);
	ASSERT_EQ(kvblk_kvstore_delete(st.s, &ops[2], 1, r.data()), 1);
	EXPECT_EQ(r[0].status, 0);
	ASSERT_EQ(kvblk_kvstore_delete(st.s, &ops[2], 1, r.data()), 0);
	EXPECT_EQ(r[0].status, -ENOENT);
	for (int round = 0; round < 2; round++) {
		ASSERT_EQ(kvblk_kvstore_exists(st.s, ops.data(), 3, r.data()), 2);
		EXPECT_EQ(r[0].status, 0);
		EXPECT_EQ(r[0].length, 10000u);
		EXPECT_EQ(r[1].status, 0);
		EXPECT_EQ(r[1].length, 20000u);
		EXPECT_EQ(r[2].status, -ENOENT);
		std::vector<uint8_t> out;
		ASSERT_EQ(get_key(st.s, "b", 64 * KiB, &out), 0);
		EXPECT_EQ(out, object_bytes("b", 2, 20000));
		ASSERT_EQ(get_key(st.s, "a", 64 * KiB, &out), 0);
		EXPECT_EQ(out, object_bytes("a", 1, 10000));
		EXPECT_EQ(get_key(st.s, "c", 64 * KiB, &out), -ENOENT);
		reopen();
	}
}

TEST_F(Kvstore, get_into_a_buffer_too_small_is_emsgsize_with_the_length)
{
	make({64 * KiB}, 32 * MiB);
	ASSERT_EQ(put_keys(st.s, {"k"}, 1, 30000), 1);
	std::vector<uint8_t> out;
	kvblk_kvstore_result r{};
	EXPECT_EQ(get_key(st.s, "k", 29999, &out, &r), -EMSGSIZE);
	EXPECT_EQ(r.length, 30000u);
	EXPECT_EQ(get_key(st.s, "k", 30000, &out, &r), 0);
	EXPECT_EQ(out, object_bytes("k", 1, 30000));
}

TEST_F(Kvstore, bad_ops_reject_the_batch_and_name_the_op)
{
	make({64 * KiB}, 32 * MiB);
	std::vector<uint8_t> data(100, 1);
	const std::string big(KVBLK_KVSTORE_DEFAULT_MAX_KEY + 1, 'x');
	const std::string k1 = "one", k2 = "two";
	struct Case {
		uint32_t kind;
		kvblk_kvstore_op bad;
		int err;
	};
	std::vector<Case> cases;
	auto o = [&](const std::string &k, uint64_t len) { return op_for(k, data.data(), len); };
	cases.push_back({KVBLK_KVSTORE_PUT, o(big, 100), -EINVAL});		   /* key too long */
	cases.push_back({KVBLK_KVSTORE_PUT, o(k2, 0), -EINVAL});		   /* length 0 */
	cases.push_back({KVBLK_KVSTORE_PUT, o(k2, 64 * KiB + 1), -EINVAL});   /* over the largest class */
	cases.push_back({KVBLK_KVSTORE_PUT, o(k1, 100), -EINVAL});		   /* the same key twice */
	auto nomem = o(k2, 100);
	nomem.buf_id = 77;
	cases.push_back({KVBLK_KVSTORE_PUT, nomem, -ENOENT}); /* unknown buffer */
	auto flags = o(k2, 100);
	flags.flags = 1;
	cases.push_back({KVBLK_KVSTORE_GET, flags, -EINVAL});
	auto meta = o(k2, 100);
	meta.meta_len = 4;
	cases.push_back({KVBLK_KVSTORE_PUT, meta, -EINVAL}); /* meta NULL with a length */
	for (const Case &c : cases) {
		kvblk_kvstore_op ops[2] = {o(k1, 100), c.bad};
		kvblk_kvstore_result res[2];
		kvblk_kvstore_submit_opts so;
		kvblk_kvstore_submit_opts_init(&so, sizeof(so));
		so.results = res;
		uint64_t t = 0;
		EXPECT_EQ(kvblk_kvstore_submit(st.s, c.kind, ops, 2, &so, &t), c.err) << kvblk_kvstore_last_error();
		EXPECT_EQ(so.bad_index, 1);
		EXPECT_EQ(res[0].status, -ECANCELED);
		EXPECT_EQ(res[1].status, c.err);
		EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("op 1"), std::string::npos)
			<< kvblk_kvstore_last_error();
	}
	/* Nothing was stored by any of them. */
	auto e = o(k1, 0);
	kvblk_kvstore_result r{};
	EXPECT_EQ(kvblk_kvstore_exists(st.s, &e, 1, &r), 0);
	EXPECT_EQ(r.status, -ENOENT);
	uint64_t t;
	EXPECT_EQ(kvblk_kvstore_submit(st.s, 9, &e, 1, nullptr, &t), -EINVAL);
	EXPECT_EQ(kvblk_kvstore_submit(st.s, KVBLK_KVSTORE_GET, &e, 0, nullptr, &t), -EINVAL);
}

TEST_F(Kvstore, lru_eviction_reports_keys_and_spares_recently_read_ones)
{
	/* One class of 4 KiB slots on a drive small enough to hold a few hundred. */
	make({4 * KiB}, 8 * MiB);
	kvblk_kvstore_info info{};
	info.info_size = sizeof(info);
	ASSERT_EQ(kvblk_kvstore_get_info(st.s, &info), 0);
	const uint64_t slots = info.classes[0].slots;
	ASSERT_GT(slots, 10u);
	std::vector<std::string> keys;
	for (uint64_t i = 0; i < slots; i++)
		keys.push_back("k" + std::to_string(i));
	ASSERT_EQ(put_keys(st.s, keys, 1, 4096), int(slots));
	/* Read k0: it becomes the most recent; k1 is now the oldest. */
	std::vector<uint8_t> out;
	ASSERT_EQ(get_key(st.s, "k0", 4096, &out), 0);
	ASSERT_EQ(put_keys(st.s, {"new1", "new2"}, 1, 4096), 2);
	std::vector<kvblk_kvstore_key> ev(8);
	std::vector<char> buf(4096);
	const int n = kvblk_kvstore_evicted(st.s, ev.data(), 8, buf.data(), buf.size());
	ASSERT_EQ(n, 2);
	EXPECT_EQ(std::string(static_cast<const char *>(ev[0].key), ev[0].key_len), "k1");
	EXPECT_EQ(std::string(static_cast<const char *>(ev[1].key), ev[1].key_len), "k2");
	EXPECT_EQ(ev[0].length, 4096u);
	EXPECT_EQ(kvblk_kvstore_evicted(st.s, ev.data(), 8, buf.data(), buf.size()), 0) << "drained";
	EXPECT_EQ(get_key(st.s, "k1", 4096, &out), -ENOENT);
	EXPECT_EQ(get_key(st.s, "k0", 4096, &out), 0);
	EXPECT_EQ(out, object_bytes("k0", 1, 4096));
	EXPECT_EQ(get_key(st.s, "new2", 4096, &out), 0);
	EXPECT_EQ(out, object_bytes("new2", 1, 4096));
	kvblk_kvstore_stats stats{};
	stats.stats_size = sizeof(stats);
	ASSERT_EQ(kvblk_kvstore_get_stats(st.s, &stats), 0);
	EXPECT_EQ(stats.evictions, 2u);
	/* The evictions are durable: after a reopen k1 and k2 stay gone, the rest are there. */
	reopen();
	EXPECT_EQ(get_key(st.s, "k2", 4096, &out), -ENOENT);
	EXPECT_EQ(get_key(st.s, "k3", 4096, &out), 0);
	EXPECT_EQ(out, object_bytes("k3", 1, 4096));
}

TEST_F(Kvstore, refuse_policy_fails_only_the_keys_without_room)
{
	make({4 * KiB}, 8 * MiB, KVBLK_KVSTORE_REFUSE);
	kvblk_kvstore_info info{};
	info.info_size = sizeof(info);
	ASSERT_EQ(kvblk_kvstore_get_info(st.s, &info), 0);
	const uint64_t slots = info.classes[0].slots;
	std::vector<std::string> keys;
	for (uint64_t i = 0; i < slots + 3; i++)
		keys.push_back("k" + std::to_string(i));
	std::vector<kvblk_kvstore_result> r;
	EXPECT_EQ(put_keys(st.s, keys, 1, 4096, &r), int(slots));
	int nospc = 0;
	for (const auto &x : r)
		nospc += x.status == -ENOSPC;
	EXPECT_EQ(nospc, 3);
	/* Delete frees at once: the next put finds room. */
	auto d = op_for("k0", nullptr, 0);
	kvblk_kvstore_result dr{};
	ASSERT_EQ(kvblk_kvstore_delete(st.s, &d, 1, &dr), 1);
	EXPECT_EQ(put_keys(st.s, {"again"}, 1, 4096), 1);
}

TEST_F(Kvstore, freed_slots_are_reused_before_never_written_ones)
{
	make({4 * KiB}, 16 * MiB);
	const auto lay = raw_layout(path);
	ASSERT_EQ(put_keys(st.s, {"a", "b", "c"}, 1, 4096), 3);
	auto d = op_for("b", nullptr, 0);
	kvblk_kvstore_result dr{};
	ASSERT_EQ(kvblk_kvstore_delete(st.s, &d, 1, &dr), 1);
	ASSERT_EQ(put_keys(st.s, {"x"}, 7, 4096), 1);
	/* "x" went into b's slot: the bytes at slot 1 are x's (one drive, slots taken in order). */
	const auto raw = read_at(path, lay.class_offset[0] + 1 * 4096, 4096);
	EXPECT_EQ(raw, object_bytes("x", 7, 4096));
}

TEST_F(Kvstore, list_walks_every_key_once)
{
	make({4 * KiB}, 32 * MiB);
	std::vector<std::string> keys;
	for (int i = 0; i < 500; i++)
		keys.push_back(key_of(i));
	ASSERT_EQ(put_keys(st.s, keys, 1, 100), 500);
	std::multiset<std::string> seen;
	uint64_t cursor = 0;
	std::vector<kvblk_kvstore_key> out(64);
	std::vector<char> buf(64 * 128);
	do {
		const int n = kvblk_kvstore_list(st.s, &cursor, out.data(), 64, buf.data(), buf.size());
		ASSERT_GE(n, 0);
		for (int i = 0; i < n; i++)
			seen.insert(std::string(static_cast<const char *>(out[i].key), out[i].key_len));
	} while (cursor);
	EXPECT_EQ(seen, std::multiset<std::string>(keys.begin(), keys.end()));
}

TEST_F(Kvstore, async_batches_complete_through_the_eventfd)
{
	make({64 * KiB}, 32 * MiB);
	std::vector<std::string> keys;
	for (int i = 0; i < 16; i++)
		keys.push_back(key_of(i));
	ASSERT_EQ(put_keys(st.s, keys, 3, 50000), 16);
	const int efd = kvblk_kvstore_event_fd(st.s);
	ASSERT_GE(efd, 0);
	std::vector<Buf> dst;
	std::vector<std::vector<kvblk_kvstore_op>> ops(4);
	std::vector<std::vector<kvblk_kvstore_result>> res(4, std::vector<kvblk_kvstore_result>(4));
	std::map<uint64_t, int> by_ticket;
	for (int b = 0; b < 4; b++) {
		for (int i = 0; i < 4; i++) {
			dst.emplace_back(64 * KiB);
			ops[b].push_back(op_for(keys[b * 4 + i], dst.back().p, 64 * KiB));
		}
		kvblk_kvstore_submit_opts so;
		kvblk_kvstore_submit_opts_init(&so, sizeof(so));
		so.results = res[b].data();
		so.user_data = 1000 + b;
		uint64_t t;
		ASSERT_EQ(kvblk_kvstore_submit(st.s, KVBLK_KVSTORE_GET, ops[b].data(), 4, &so, &t), 0);
		by_ticket[t] = b;
	}
	int done = 0;
	while (done < 4) {
		pollfd p{efd, POLLIN, 0};
		ASSERT_EQ(poll(&p, 1, 10000), 1);
		kvblk_cqe c[4];
		const int n = kvblk_kvstore_reap(st.s, c, 4, 0, 0);
		ASSERT_GE(n, 0);
		for (int i = 0; i < n; i++) {
			const int b = by_ticket.at(c[i].ticket);
			EXPECT_EQ(c[i].user_data, uint64_t(1000 + b));
			EXPECT_EQ(c[i].status, 0);
			EXPECT_EQ(c[i].failed, 0u);
			EXPECT_EQ(c[i].index, 4u);
			EXPECT_EQ(c[i].bytes, 4u * 50000);
			EXPECT_EQ(c[i].tag, KVBLK_KVSTORE_GET);
			for (int k = 0; k < 4; k++) {
				EXPECT_EQ(res[b][k].status, 0);
				EXPECT_EQ(0, memcmp(dst[b * 4 + k].p, object_bytes(keys[b * 4 + k], 3, 50000).data(), 50000));
			}
			done++;
		}
	}
	kvblk_cqe c;
	EXPECT_EQ(kvblk_kvstore_reap(st.s, &c, 1, 0, 0), 0);
	/* A ticket is taken once: waiting on a reaped one is -ENOENT. */
	EXPECT_EQ(kvblk_kvstore_wait(st.s, by_ticket.begin()->first, 0, nullptr), -ENOENT);
}

TEST_F(Kvstore, eight_threads_put_get_delete_and_every_get_is_a_version_put)
{
	make({16 * KiB}, 64 * MiB);
	std::atomic<int> bad{0}, hits{0};
	std::vector<std::thread> th;
	for (int t = 0; t < 8; t++)
		th.emplace_back([&, t] {
			std::mt19937 rng(uint32_t(t) * 7919u + 1);
			for (int it = 0; it < 60; it++) {
				/* 32 keys shared by all threads; versions encode the writer. */
				std::vector<std::string> keys;
				std::set<int> picked;
				while (picked.size() < 4)
					picked.insert(int(rng() % 32));
				for (int k : picked)
					keys.push_back("shared" + std::to_string(k));
				const uint64_t v = uint64_t(t) * 1000 + uint64_t(it);
				switch (rng() % 3) {
				case 0:
					put_keys(st.s, keys, v, 16 * KiB - 8 * uint64_t(t));
					break;
				case 1:
					for (const auto &k : keys) {
						std::vector<uint8_t> out;
						kvblk_kvstore_result r{};
						if (get_key(st.s, k, 16 * KiB, &out, &r) != 0)
							continue;
						hits++;
						/* Which version? Its writer is told by its length. */
						const uint64_t wt = (16 * KiB - r.length) / 8;
						bool ok = false;
						for (uint64_t vv = wt * 1000; vv < wt * 1000 + 60 && !ok; vv++)
							ok = out == object_bytes(k, vv, r.length);
						if (!ok)
							bad++;
					}
					break;
				default: {
					std::vector<kvblk_kvstore_op> ops;
					for (const auto &k : keys)
						ops.push_back(op_for(k, nullptr, 0));
					std::vector<kvblk_kvstore_result> r(ops.size());
					kvblk_kvstore_delete(st.s, ops.data(), uint32_t(ops.size()), r.data());
				}
				}
			}
		});
	for (auto &x : th)
		x.join();
	EXPECT_EQ(bad.load(), 0);
	EXPECT_GT(hits.load(), 0);
}

TEST_F(Kvstore, a_forked_child_gets_ebadfd_and_closing_its_copy_frees_nothing)
{
	make({64 * KiB}, 32 * MiB);
	ASSERT_EQ(put_keys(st.s, {"k"}, 1, 1000), 1);
	const pid_t pid = fork();
	if (pid == 0) {
		std::vector<uint8_t> out(64 * KiB);
		auto o = op_for("k", out.data(), out.size());
		kvblk_kvstore_result r{};
		int rc = kvblk_kvstore_get(st.s, &o, 1, &r) == -EBADFD ? 0 : 1;
		kvblk_kvstore_close(st.s);
		_exit(rc);
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	std::vector<uint8_t> out;
	ASSERT_EQ(get_key(st.s, "k", 64 * KiB, &out), 0);
	EXPECT_EQ(out, object_bytes("k", 1, 1000));
}

TEST_F(Kvstore, a_second_open_of_the_same_drive_is_ebusy)
{
	make({64 * KiB}, 32 * MiB);
	kvblk_kvstore *other = nullptr;
	auto o = open_opts();
	EXPECT_EQ(kvblk_kvstore_open(std::vector<const char *>{path.c_str()}.data(), 1, &o, &other), -EBUSY);
	EXPECT_EQ(other, nullptr);
}

TEST_F(Kvstore, rdonly_refuses_put_and_delete)
{
	make({64 * KiB}, 32 * MiB);
	ASSERT_EQ(put_keys(st.s, {"k"}, 1, 1000), 1);
	reopen(KVBLK_KVSTORE_OPEN_RDONLY);
	std::vector<kvblk_kvstore_result> r;
	EXPECT_EQ(put_keys(st.s, {"z"}, 1, 1000, &r), -EROFS);
	std::vector<uint8_t> out;
	EXPECT_EQ(get_key(st.s, "k", 64 * KiB, &out), 0);
	EXPECT_EQ(out, object_bytes("k", 1, 1000));
}

/* Several drives: placement spreads keys, one batch reads from all, paths in any order. */
TEST(KvstoreDrives, keys_spread_over_drives_and_a_missing_drive_fails_only_its_keys)
{
	TempDir dir;
	std::vector<std::string> p = {dir.file("a"), dir.file("b"), dir.file("c")};
	std::vector<const char *> pp = {p[0].c_str(), p[1].c_str(), p[2].c_str()};
	auto c = create_opts({64 * KiB}, 48 * MiB);
	auto o = open_opts();
	Store st;
	ASSERT_EQ(kvblk_kvstore_create(pp.data(), 3, &c, &o, &st.s), 0) << kvblk_kvstore_last_error();
	std::vector<std::string> keys;
	for (int i = 0; i < 90; i++)
		keys.push_back(key_of(i));
	std::vector<kvblk_kvstore_result> r;
	ASSERT_EQ(put_keys(st.s, keys, 5, 30000, &r), 90);
	std::map<uint32_t, int> per;
	std::map<std::string, uint32_t> where;
	for (size_t i = 0; i < keys.size(); i++) {
		per[r[i].drive]++;
		where[keys[i]] = r[i].drive;
	}
	ASSERT_EQ(per.size(), 3u) << "every drive got keys";
	for (auto &[d, n] : per)
		EXPECT_GE(n, 15) << "drive " << d;
	for (uint32_t d = 0; d < 3; d++) {
		kvblk_kvstore_drive_info di{};
		di.info_size = sizeof(di);
		ASSERT_EQ(kvblk_kvstore_get_drive_info(st.s, d, &di), 0);
		EXPECT_EQ(di.objects, uint64_t(per[d]));
		EXPECT_EQ(di.state, KVBLK_KVSTORE_DRIVE_OK);
		EXPECT_EQ(std::string(di.path), p[d]);
	}
	st.close();
	/* Another order of the same paths. */
	std::vector<const char *> rev = {pp[2], pp[0], pp[1]};
	ASSERT_EQ(kvblk_kvstore_open(rev.data(), 3, &o, &st.s), 0) << kvblk_kvstore_last_error();
	std::vector<Buf> dst;
	std::vector<kvblk_kvstore_op> g;
	for (const auto &k : keys) {
		dst.emplace_back(64 * KiB);
		g.push_back(op_for(k, dst.back().p, 64 * KiB));
	}
	std::vector<kvblk_kvstore_result> gr(g.size());
	ASSERT_EQ(kvblk_kvstore_get(st.s, g.data(), uint32_t(g.size()), gr.data()), 90);
	for (size_t i = 0; i < keys.size(); i++)
		EXPECT_EQ(0, memcmp(dst[i].p, object_bytes(keys[i], 5, 30000).data(), 30000)) << i;
	st.close();
	/* Drive b missing: refused without DEGRADED; with it, b's keys are misses, the rest hits. */
	std::vector<const char *> two = {pp[0], pp[2]};
	EXPECT_EQ(kvblk_kvstore_open(two.data(), 2, &o, &st.s), -ENODEV);
	EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("missing: drive 1"), std::string::npos)
		<< kvblk_kvstore_last_error();
	auto od = open_opts(KVBLK_BACKEND_AUTO, KVBLK_KVSTORE_OPEN_DEGRADED);
	ASSERT_EQ(kvblk_kvstore_open(two.data(), 2, &od, &st.s), 0) << kvblk_kvstore_last_error();
	for (auto &x : gr)
		x = {};
	const int hits = kvblk_kvstore_get(st.s, g.data(), uint32_t(g.size()), gr.data());
	EXPECT_EQ(hits, 90 - per[1]);
	for (size_t i = 0; i < keys.size(); i++)
		EXPECT_EQ(gr[i].status, where[keys[i]] == 1 ? -ENOENT : 0) << keys[i];
	kvblk_kvstore_stats stats{};
	stats.stats_size = sizeof(stats);
	ASSERT_EQ(kvblk_kvstore_get_stats(st.s, &stats), 0);
	EXPECT_EQ(stats.degraded, 1u);
	/* New puts go to the drives that serve. */
	ASSERT_EQ(put_keys(st.s, {"fresh1", "fresh2", "fresh3"}, 1, 1000, &r), 3);
	for (const auto &x : r)
		EXPECT_NE(x.drive, 1u);
}

TEST(KvstoreDrives, a_drive_cut_short_fails_only_its_keys_and_the_store_keeps_serving)
{
	TempDir dir;
	std::vector<std::string> p = {dir.file("a"), dir.file("b")};
	std::vector<const char *> pp = {p[0].c_str(), p[1].c_str()};
	auto c = create_opts({64 * KiB}, 48 * MiB);
	auto o = open_opts(KVBLK_BACKEND_URING);
	Store st;
	ASSERT_EQ(kvblk_kvstore_create(pp.data(), 2, &c, &o, &st.s), 0) << kvblk_kvstore_last_error();
	std::vector<std::string> keys;
	for (int i = 0; i < 40; i++)
		keys.push_back(key_of(i));
	std::vector<kvblk_kvstore_result> r;
	ASSERT_EQ(put_keys(st.s, keys, 1, 60000, &r), 40);
	std::map<std::string, uint32_t> where;
	int on_b = 0;
	for (size_t i = 0; i < keys.size(); i++) {
		where[keys[i]] = r[i].drive;
		on_b += r[i].drive == 1;
	}
	ASSERT_GT(on_b, 0);
	/* Drive b loses its data area (a file cut short under the store). */
	ASSERT_EQ(truncate(p[1].c_str(), 2 * MiB), 0);
	std::vector<Buf> dst;
	std::vector<kvblk_kvstore_op> g;
	for (const auto &k : keys) {
		dst.emplace_back(64 * KiB);
		g.push_back(op_for(k, dst.back().p, 64 * KiB));
	}
	std::vector<kvblk_kvstore_result> gr(g.size());
	const int hits = kvblk_kvstore_get(st.s, g.data(), uint32_t(g.size()), gr.data());
	EXPECT_EQ(hits, 40 - on_b);
	for (size_t i = 0; i < keys.size(); i++) {
		if (where[keys[i]] == 1) {
			EXPECT_EQ(gr[i].status, -ENODEV) << keys[i];
		} else {
			EXPECT_EQ(gr[i].status, 0) << keys[i];
			EXPECT_EQ(0, memcmp(dst[i].p, object_bytes(keys[i], 1, 60000).data(), 60000));
		}
	}
	kvblk_kvstore_drive_info di{};
	di.info_size = sizeof(di);
	ASSERT_EQ(kvblk_kvstore_get_drive_info(st.s, 1, &di), 0);
	EXPECT_EQ(di.state, KVBLK_KVSTORE_DRIVE_FAILED);
	EXPECT_NE(std::string(di.why_failed), "");
	/* The store keeps serving: puts land on drive a, gets of them hit. */
	ASSERT_EQ(put_keys(st.s, {"after1", "after2"}, 2, 60000, &r), 2);
	EXPECT_EQ(r[0].drive, 0u);
	EXPECT_EQ(r[1].drive, 0u);
	std::vector<uint8_t> out;
	ASSERT_EQ(get_key(st.s, "after2", 64 * KiB, &out), 0);
	EXPECT_EQ(out, object_bytes("after2", 2, 60000));
}

TEST(KvstoreCreate, a_file_larger_than_the_free_space_fails_and_leaves_nothing)
{
	TempDir dir;
	struct statvfs v;
	ASSERT_EQ(statvfs(dir.path().c_str(), &v), 0);
	const uint64_t free_bytes = uint64_t(v.f_bavail) * v.f_frsize;
	const std::string path = dir.file("huge");
	auto c = create_opts({4 * MiB}, free_bytes + 64 * 1024 * MiB);
	kvblk_kvstore *s = nullptr;
	const char *pp[] = {path.c_str()};
	const int r = kvblk_kvstore_create(pp, 1, &c, nullptr, &s);
	EXPECT_TRUE(r == -ENOSPC || r == -EFBIG) << r << " " << kvblk_kvstore_last_error();
	EXPECT_EQ(s, nullptr);
	struct stat st;
	EXPECT_NE(stat(path.c_str(), &st), 0) << "the file was left behind";
	EXPECT_EQ(errno, ENOENT);
}

TEST(KvstoreCreate, a_drive_too_small_for_one_slot_of_every_class_is_enospc)
{
	TempDir dir;
	const std::string path = dir.file("small");
	auto c = create_opts({64 * MiB}, 16 * MiB);
	kvblk_kvstore *s = nullptr;
	const char *pp[] = {path.c_str()};
	EXPECT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), -ENOSPC);
	EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("need"), std::string::npos) << kvblk_kvstore_last_error();
	struct stat st;
	EXPECT_NE(stat(path.c_str(), &st), 0);
}

TEST(KvstoreCreate, over_an_existing_store_is_eexist_unless_forced)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({64 * KiB}, 32 * MiB);
	const char *pp[] = {path.c_str()};
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0);
	ASSERT_EQ(put_keys(s, {"k"}, 1, 100), 1);
	kvblk_kvstore_close(s);
	s = nullptr;
	const auto before = read_at(path, 0, 4 * MiB);
	EXPECT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), -EEXIST);
	EXPECT_EQ(read_at(path, 0, 4 * MiB), before) << "a refused create wrote something";
	c.flags = KVBLK_KVSTORE_CREATE_FORCE;
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0);
	std::vector<uint8_t> out;
	EXPECT_EQ(get_key(s, "k", 64 * KiB, &out), -ENOENT);
	kvblk_kvstore_close(s);
}

TEST(KvstoreCrc, crc32c_matches_the_standard_check_value)
{
	EXPECT_EQ(kvblk_kvstore_crc32c(0, "123456789", 9), 0xE3069283u);
	/* Continuing a CRC gives the CRC of the concatenation. */
	EXPECT_EQ(kvblk_kvstore_crc32c(kvblk_kvstore_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
	EXPECT_EQ(kvblk_kvstore_crc32c(0, "", 0), 0u);
}

} // namespace

namespace {

TEST(KvstoreLimits, max_descs_bounds_a_batch_and_two_waiters_of_one_ticket_are_safe)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({64 * KiB}, 32 * MiB);
	auto o = open_opts();
	o.max_descs = 4;
	const char *pp[] = {path.c_str()};
	Store st;
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, &o, &st.s), 0) << kvblk_kvstore_last_error();
	std::vector<kvblk_kvstore_result> r;
	EXPECT_EQ(put_keys(st.s, {"a", "b", "c", "d", "e"}, 1, 100, &r), -E2BIG);
	EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("max_descs"), std::string::npos);
	ASSERT_EQ(put_keys(st.s, {"a", "b", "c", "d"}, 1, 100), 4);
	/* Two threads wait for one ticket: one takes it, the other is told it is gone. */
	for (int round = 0; round < 20; round++) {
		std::vector<uint8_t> out(64 * KiB);
		const std::string ka = "a";
		auto g = op_for(ka, out.data(), out.size());
		kvblk_kvstore_result gr{};
		kvblk_kvstore_submit_opts so;
		kvblk_kvstore_submit_opts_init(&so, sizeof(so));
		so.results = &gr;
		uint64_t t;
		ASSERT_EQ(kvblk_kvstore_submit(st.s, KVBLK_KVSTORE_GET, &g, 1, &so, &t), 0);
		std::atomic<int> got{0}, gone{0};
		std::vector<std::thread> w;
		for (int i = 0; i < 2; i++)
			w.emplace_back([&] {
				const int rc = kvblk_kvstore_wait(st.s, t, -1, nullptr);
				if (rc == 1)
					got++;
				else if (rc == -ENOENT)
					gone++;
			});
		for (auto &x : w)
			x.join();
		EXPECT_EQ(got.load(), 1);
		EXPECT_EQ(gone.load(), 1);
	}
}

} // namespace

namespace {

/* A fork child does not keep the drives' locks: the parent closes and opens again while it lives,
 * and the child opens the store itself once the parent has closed it. */
TEST(KvstoreFork, a_child_does_not_hold_the_drives_locks)
{
#if defined(__SANITIZE_THREAD__)
	/* The child opens a store (threads): ThreadSanitizer cannot start threads in a child of a
	 * multi-threaded fork ("dup thread with used id"). Run in the plain and ASan builds. */
	GTEST_SKIP() << "ThreadSanitizer: no threads in a child of a multi-threaded fork";
#endif
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({64 * KiB}, 32 * MiB);
	const char *pp[] = {path.c_str()};
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0);
	ASSERT_EQ(put_keys(s, {"k"}, 1, 1000), 1);
	int go[2], done[2];
	ASSERT_EQ(pipe(go), 0);
	ASSERT_EQ(pipe(done), 0);
	int started[2];
	ASSERT_EQ(pipe(started), 0);
	const pid_t pid = fork();
	if (pid == 0) {
		char b = 1;
		/* Running: the fork handlers (which close the inherited locks) have run. */
		if (write(started[1], &b, 1) != 1)
			_exit(2);
		/* Wait until the parent closed the store, then open it here. */
		if (read(go[0], &b, 1) != 1)
			_exit(2);
		kvblk_kvstore *cs = nullptr;
		auto o = open_opts();
		const int rc = kvblk_kvstore_open(pp, 1, &o, &cs);
		std::vector<uint8_t> out;
		const int got = rc == 0 ? get_key(cs, "k", 64 * KiB, &out) : rc;
		kvblk_kvstore_close(cs);
		b = char(got == 0 && out == object_bytes("k", 1, 1000));
		if (write(done[1], &b, 1) != 1)
			_exit(3);
		_exit(0);
	}
	/* The child's ends: a child that dies gives EOF here instead of a read that never ends. */
	close(started[1]);
	close(done[1]);
	/* Whatever happens below, the child is not left waiting. */
	struct Reap {
		pid_t pid;
		int fd;
		~Reap()
		{
			close(fd);
			kill(pid, SIGKILL);
			waitpid(pid, nullptr, 0);
		}
	};
	char st;
	ASSERT_EQ(read(started[0], &st, 1), 1);
	kvblk_kvstore_close(s);
	s = nullptr;
	auto o = open_opts();
	const int reopened = kvblk_kvstore_open(pp, 1, &o, &s);
	if (reopened) {
		Reap r{pid, go[1]};
		FAIL() << "the child kept the lock: " << kvblk_kvstore_last_error();
	}
	kvblk_kvstore_close(s);
	char b = 1;
	ASSERT_EQ(write(go[1], &b, 1), 1);
	ASSERT_EQ(read(done[0], &b, 1), 1);
	EXPECT_EQ(b, 1) << "the child could not open the store the parent closed";
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

} // namespace

// SPDX-License-Identifier: MIT
// The kvblk store against damage and crashes (docs/kvstore-format.md, sections 8 and 10):
// bit flips in objects, superblocks, checkpoints and the journal, foreign and newer formats
// (refused, nothing written), 100 kill -9 runs at random points of put batches (every key
// reads back as an acknowledged version or newer, never torn, never another key's bytes),
// and a store of 100,000 objects reopened.
#include "kvstore_util.hpp"

#include <chrono>
#include <csignal>
#include <map>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <algorithm>

using namespace kvs_test;

namespace {

struct Store {
	kvblk_kvstore *s = nullptr;
	~Store() { kvblk_kvstore_close(s); }
	void close()
	{
		kvblk_kvstore_close(s);
		s = nullptr;
	}
};

int open_one(const std::string &path, kvblk_kvstore **s, uint32_t flags = 0)
{
	auto o = open_opts(KVBLK_BACKEND_AUTO, flags);
	const char *pp[] = {path.c_str()};
	return kvblk_kvstore_open(pp, 1, &o, s);
}

class KvstoreDamage : public ::testing::Test {
protected:
	TempDir dir;
	std::string path;
	Store st;
	void SetUp() override
	{
		path = dir.file("d0");
		auto c = create_opts({64 * KiB}, 32 * MiB, 4 * MiB);
		const char *pp[] = {path.c_str()};
		ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &st.s), 0) << kvblk_kvstore_last_error();
	}
};

/*
 * Objects of 256 KiB and more are checked on the store's checksum threads (get.cpp): in a batch
 * of eight 1 MiB objects, the one with a flipped bit fails -EBADMSG and is counted, every other
 * one is a hit with its bytes, and the batch ends once (its entry waits for the last check).
 */
TEST(KvstoreDamageLarge, a_flipped_bit_in_one_large_object_of_a_batch_fails_only_that_one)
{
	TempDir dir;
	const std::string path = dir.file("d0");
	Store st;
	auto c = create_opts({1 * MiB}, 64 * MiB, 4 * MiB);
	const char *pp[] = {path.c_str()};
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &st.s), 0) << kvblk_kvstore_last_error();
	const std::vector<std::string> keys = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"};
	ASSERT_EQ(put_keys(st.s, keys, 1, MiB), 8) << kvblk_kvstore_last_error();
	/* Which slot holds k3: the one whose first bytes are k3's. */
	const auto lay = raw_layout(path);
	const std::vector<uint8_t> k3 = object_bytes("k3", 1, MiB);
	uint64_t at = UINT64_MAX;
	for (uint64_t i = 0; i < 8 && at == UINT64_MAX; i++)
		if (read_at(path, lay.class_offset[0] + i * MiB, 4096) == std::vector<uint8_t>(k3.begin(), k3.begin() + 4096))
			at = lay.class_offset[0] + i * MiB;
	ASSERT_NE(at, UINT64_MAX) << "k3's slot not found";
	flip_bit(path, at + 777777, 5);

	std::vector<std::vector<uint8_t>> out(keys.size(), std::vector<uint8_t>(MiB, 0));
	std::vector<kvblk_kvstore_op> ops;
	for (size_t i = 0; i < keys.size(); i++)
		ops.push_back(op_for(keys[i], out[i].data(), MiB, i));
	std::vector<kvblk_kvstore_result> res(keys.size());
	ASSERT_GE(kvblk_kvstore_get(st.s, ops.data(), uint32_t(ops.size()), res.data()), 0) << kvblk_kvstore_last_error();
	for (size_t i = 0; i < keys.size(); i++) {
		if (keys[i] == "k3") {
			EXPECT_EQ(res[i].status, -EBADMSG) << "the damaged object";
			continue;
		}
		EXPECT_EQ(res[i].status, 0) << keys[i];
		EXPECT_EQ(res[i].length, MiB) << keys[i];
		EXPECT_TRUE(out[i] == object_bytes(keys[i], 1, MiB)) << keys[i] << ": wrong bytes";
	}
	kvblk_kvstore_stats s{};
	s.stats_size = sizeof(s);
	ASSERT_EQ(kvblk_kvstore_get_stats(st.s, &s), 0);
	EXPECT_EQ(s.checksum_failures, 1u);
	EXPECT_EQ(s.hits, 7u);
}

TEST_F(KvstoreDamage, a_flipped_bit_in_an_object_is_ebadmsg_counted_and_never_a_hit)
{
	ASSERT_EQ(put_keys(st.s, {"a", "b"}, 1, 50000), 2);
	const auto lay = raw_layout(path);
	kvblk_kvstore_result r{};
	std::vector<uint8_t> out;
	ASSERT_EQ(get_key(st.s, "a", 64 * KiB, &out, &r), 0);
	const uint64_t slot_a = lay.class_offset[0] + 0; /* one drive: a got slot 0, b slot 1 */
	ASSERT_EQ(read_at(path, slot_a, 50000), object_bytes("a", 1, 50000));
	for (uint64_t off : {uint64_t(0), uint64_t(12345), uint64_t(49999)}) {
		flip_bit(path, slot_a + off, int(off % 8));
		/* The page cache may hold the old bytes for buffered readers; the store reads O_DIRECT. */
		std::vector<uint8_t> o2;
		EXPECT_EQ(get_key(st.s, "a", 64 * KiB, &o2), -EBADMSG) << "offset " << off;
		/* The key is dropped: the next get is a miss. Put it back for the next offset. */
		EXPECT_EQ(get_key(st.s, "a", 64 * KiB, &o2), -ENOENT);
		ASSERT_EQ(put_keys(st.s, {"a"}, 1, 50000), 1);
		/* a went back into its freed slot 0 (reused first). */
		ASSERT_EQ(read_at(path, slot_a, 50000), object_bytes("a", 1, 50000));
	}
	kvblk_kvstore_stats s{};
	s.stats_size = sizeof(s);
	ASSERT_EQ(kvblk_kvstore_get_stats(st.s, &s), 0);
	EXPECT_EQ(s.checksum_failures, 3u);
	ASSERT_EQ(get_key(st.s, "b", 64 * KiB, &out), 0);
	EXPECT_EQ(out, object_bytes("b", 1, 50000));
	/* kvblk_kvstore_check() finds a flipped object too, and repairs by dropping it. */
	flip_bit(path, lay.class_offset[0] + 64 * KiB + 7);
	kvblk_kvstore_check_report rep{};
	rep.report_size = sizeof(rep);
	EXPECT_EQ(kvblk_kvstore_check(st.s, KVBLK_KVSTORE_CHECK_DATA, &rep), 1);
	EXPECT_EQ(rep.objects, 2u);
	EXPECT_EQ(rep.bad_objects, 1u);
	EXPECT_NE(std::string(rep.first_problem).find("CRC32C"), std::string::npos) << rep.first_problem;
	EXPECT_EQ(kvblk_kvstore_check(st.s, KVBLK_KVSTORE_CHECK_DATA | KVBLK_KVSTORE_CHECK_REPAIR, &rep), 1);
	EXPECT_EQ(rep.repaired, 1u);
	st.close();
	ASSERT_EQ(open_one(path, &st.s), 0) << kvblk_kvstore_last_error();
	EXPECT_EQ(get_key(st.s, "b", 64 * KiB, &out), -ENOENT) << "the repair's delete is durable";
	ASSERT_EQ(get_key(st.s, "a", 64 * KiB, &out), 0);
}

TEST_F(KvstoreDamage, superblock_copies_one_damaged_serves_both_damaged_is_euclean)
{
	ASSERT_EQ(put_keys(st.s, {"k"}, 1, 1000), 1);
	st.close();
	flip_bit(path, 100);
	ASSERT_EQ(open_one(path, &st.s), 0) << kvblk_kvstore_last_error();
	kvblk_kvstore_check_report rep{};
	rep.report_size = sizeof(rep);
	ASSERT_EQ(kvblk_kvstore_check(st.s, 0, &rep), 0);
	EXPECT_EQ(rep.superblocks_bad, 1u);
	std::vector<uint8_t> out;
	ASSERT_EQ(get_key(st.s, "k", 64 * KiB, &out), 0);
	st.close();
	flip_bit(path, 64 * KiB + 100);
	const auto before = read_at(path, 0, 8 * MiB);
	EXPECT_EQ(open_one(path, &st.s), -EUCLEAN);
	EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("superblock"), std::string::npos);
	EXPECT_EQ(read_at(path, 0, 8 * MiB), before) << "a refused open wrote something";
}

TEST_F(KvstoreDamage, a_damaged_newest_checkpoint_falls_back_to_the_older_and_the_journal)
{
	/* Two checkpoints and commits after both: close (checkpoint), open, put, close (checkpoint). */
	ASSERT_EQ(put_keys(st.s, {"a"}, 1, 1000), 1);
	st.close();
	ASSERT_EQ(open_one(path, &st.s), 0);
	ASSERT_EQ(put_keys(st.s, {"b"}, 1, 1000), 1);
	auto d = op_for("a", nullptr, 0);
	kvblk_kvstore_result dr{};
	ASSERT_EQ(kvblk_kvstore_delete(st.s, &d, 1, &dr), 1);
	st.close();
	const auto lay = raw_layout(path);
	const uint64_t s0 = ckpt_seq(path, lay, 0), s1 = ckpt_seq(path, lay, 1);
	ASSERT_NE(s0, ~0ull);
	ASSERT_NE(s1, ~0ull);
	const int newest = s1 > s0 ? 1 : 0;
	/* Damage the newest checkpoint's payload: its CRC fails, the older one + journal serve. */
	flip_bit(path, lay.ckpt_offset + uint64_t(newest) * lay.ckpt_bytes + 4096 + 20);
	ASSERT_EQ(open_one(path, &st.s), 0) << kvblk_kvstore_last_error();
	std::vector<uint8_t> out;
	EXPECT_EQ(get_key(st.s, "a", 64 * KiB, &out), -ENOENT) << "the delete after the older checkpoint replayed";
	ASSERT_EQ(get_key(st.s, "b", 64 * KiB, &out), 0);
	EXPECT_EQ(out, object_bytes("b", 1, 1000));
	kvblk_kvstore_check_report rep{};
	rep.report_size = sizeof(rep);
	ASSERT_EQ(kvblk_kvstore_check(st.s, 0, &rep), 0);
	EXPECT_EQ(rep.checkpoints_bad, 1u);
	st.close();
	/* Both checkpoints damaged: -EUCLEAN. */
	const auto l2 = raw_layout(path);
	flip_bit(path, l2.ckpt_offset + 50);
	flip_bit(path, l2.ckpt_offset + l2.ckpt_bytes + 50);
	EXPECT_EQ(open_one(path, &st.s), -EUCLEAN);
	EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("checkpoint"), std::string::npos)
		<< kvblk_kvstore_last_error();
}

/* Commits of the journal after the newest checkpoint, as (offset, seq) from their headers. */
std::vector<std::pair<uint64_t, uint64_t>> journal_commits(const std::string &path)
{
	const auto lay = raw_layout(path);
	const auto j = read_at(path, lay.journal_offset, lay.journal_bytes);
	std::vector<std::pair<uint64_t, uint64_t>> out;
	for (uint64_t b = 0; b < lay.journal_bytes;) {
		if (memcmp(&j[b], "KVBLKJNL", 8) == 0) {
			const uint32_t blocks = le32(&j[b + 36]);
			out.emplace_back(lay.journal_offset + b, le64(&j[b + 40]));
			b += uint64_t(blocks ? blocks : 1) * 4096;
		} else {
			b += 4096;
		}
	}
	return out;
}

/* kill -9 after puts: commits stay in the journal, nothing checkpointed. */
void puts_then_crash(const std::string &path, const std::vector<std::vector<std::string>> &batches)
{
	const pid_t pid = fork();
	if (pid == 0) {
		kvblk_kvstore *s = nullptr;
		if (open_one(path, &s))
			_exit(2);
		for (const auto &b : batches)
			if (put_keys(s, b, 1, 1000) != int(b.size()))
				_exit(3);
		kill(getpid(), SIGKILL);
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFSIGNALED(status)) << "child status " << status;
}

TEST_F(KvstoreDamage, a_damaged_commit_before_the_journal_end_is_euclean_and_recover_keeps_the_rest)
{
	st.close();
	puts_then_crash(path, {{"a1", "a2"}, {"b1"}, {"c1", "c2"}});
	auto commits = journal_commits(path);
	ASSERT_EQ(commits.size(), 3u);
	std::sort(commits.begin(), commits.end(), [](auto &x, auto &y) { return x.second < y.second; });
	/* Damage the middle commit (b1): commits follow it, so this is not a torn end. */
	flip_bit(path, commits[1].first + 100);
	const auto before = read_at(path, 0, 8 * MiB);
	EXPECT_EQ(open_one(path, &st.s), -EUCLEAN);
	EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("damaged"), std::string::npos)
		<< kvblk_kvstore_last_error();
	EXPECT_EQ(read_at(path, 0, 8 * MiB), before) << "a refused open wrote something";
	ASSERT_EQ(open_one(path, &st.s, KVBLK_KVSTORE_OPEN_RECOVER), 0) << kvblk_kvstore_last_error();
	std::vector<uint8_t> out;
	for (const char *k : {"a1", "a2"}) {
		ASSERT_EQ(get_key(st.s, k, 64 * KiB, &out), 0) << k;
		EXPECT_EQ(out, object_bytes(k, 1, 1000));
	}
	for (const char *k : {"b1", "c1", "c2"})
		EXPECT_EQ(get_key(st.s, k, 64 * KiB, &out), -ENOENT) << k;
	kvblk_kvstore_check_report rep{};
	rep.report_size = sizeof(rep);
	ASSERT_EQ(kvblk_kvstore_check(st.s, 0, &rep), 0);
	EXPECT_NE(std::string(rep.first_problem).find("journal damaged"), std::string::npos) << rep.first_problem;
	/* Recovered stores work on: a put, a reopen, a get. */
	ASSERT_EQ(put_keys(st.s, {"after"}, 1, 1000), 1);
	st.close();
	ASSERT_EQ(open_one(path, &st.s), 0) << kvblk_kvstore_last_error();
	ASSERT_EQ(get_key(st.s, "after", 64 * KiB, &out), 0);
	EXPECT_EQ(out, object_bytes("after", 1, 1000));
	ASSERT_EQ(get_key(st.s, "a2", 64 * KiB, &out), 0);
}

TEST_F(KvstoreDamage, a_damaged_last_commit_is_a_torn_end_discarded)
{
	st.close();
	puts_then_crash(path, {{"a1"}, {"b1", "b2"}});
	auto commits = journal_commits(path);
	ASSERT_EQ(commits.size(), 2u);
	std::sort(commits.begin(), commits.end(), [](auto &x, auto &y) { return x.second < y.second; });
	flip_bit(path, commits[1].first + 200);
	ASSERT_EQ(open_one(path, &st.s), 0) << kvblk_kvstore_last_error();
	std::vector<uint8_t> out;
	ASSERT_EQ(get_key(st.s, "a1", 64 * KiB, &out), 0);
	EXPECT_EQ(get_key(st.s, "b1", 64 * KiB, &out), -ENOENT);
	EXPECT_EQ(get_key(st.s, "b2", 64 * KiB, &out), -ENOENT);
	kvblk_kvstore_check_report rep{};
	rep.report_size = sizeof(rep);
	ASSERT_EQ(kvblk_kvstore_check(st.s, 0, &rep), 0);
	EXPECT_EQ(rep.journal_tail_discarded, 1u);
}

TEST(KvstoreFormat, foreign_and_newer_drives_are_refused_and_left_as_they_were)
{
	TempDir dir;
	const std::string path = dir.file("d");
	/* Random bytes: no magic. */
	{
		std::vector<uint8_t> junk(8 * MiB);
		std::mt19937_64 rng(7);
		for (auto &b : junk)
			b = uint8_t(rng());
		const int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0600);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(write(fd, junk.data(), junk.size()), ssize_t(junk.size()));
		close(fd);
		kvblk_kvstore *s = nullptr;
		EXPECT_EQ(open_one(path, &s), -EMEDIUMTYPE);
		EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("not a kvblk store"), std::string::npos);
		EXPECT_EQ(read_at(path, 0, junk.size()), junk);
		unlink(path.c_str());
	}
	/* A store whose superblocks say version 2 (CRC made right): newer, refused. */
	auto c = create_opts({64 * KiB}, 32 * MiB);
	kvblk_kvstore *s = nullptr;
	const char *pp[] = {path.c_str()};
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0);
	kvblk_kvstore_close(s);
	s = nullptr;
	for (int what = 0; what < 2; what++) {
		for (uint64_t copy : {uint64_t(0), uint64_t(64 * KiB)}) {
			auto sb = read_at(path, copy, 4096);
			if (what == 0)
				sb[8] = 2; /* format_version */
			else
				sb[24] = 1; /* an incompat feature bit */
			memset(&sb[12], 0, 4);
			const uint32_t crc = kvblk_kvstore_crc32c(0, sb.data(), 4096);
			memcpy(&sb[12], &crc, 4);
			write_at(path, copy, sb.data(), 4096);
		}
		const auto before = read_at(path, 0, 8 * MiB);
		EXPECT_EQ(open_one(path, &s), -EPROTONOSUPPORT);
		EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("newer"), std::string::npos)
			<< kvblk_kvstore_last_error();
		EXPECT_EQ(read_at(path, 0, 8 * MiB), before);
		/* Put version 1 back for the second round. */
		for (uint64_t copy : {uint64_t(0), uint64_t(64 * KiB)}) {
			auto sb = read_at(path, copy, 4096);
			sb[8] = 1;
			sb[24] = 0;
			memset(&sb[12], 0, 4);
			const uint32_t crc = kvblk_kvstore_crc32c(0, sb.data(), 4096);
			memcpy(&sb[12], &crc, 4);
			write_at(path, copy, sb.data(), 4096);
		}
	}
	ASSERT_EQ(open_one(path, &s), 0) << kvblk_kvstore_last_error();
	kvblk_kvstore_close(s);
}

TEST(KvstoreFormat, drives_of_two_stores_are_exdev)
{
	TempDir dir;
	const std::string a = dir.file("a"), b = dir.file("b");
	auto c = create_opts({64 * KiB}, 32 * MiB);
	for (const auto &p : {a, b}) {
		const char *pp[] = {p.c_str()};
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0);
		kvblk_kvstore_close(s);
	}
	const char *both[] = {a.c_str(), b.c_str()};
	kvblk_kvstore *s = nullptr;
	auto o = open_opts();
	EXPECT_EQ(kvblk_kvstore_open(both, 2, &o, &s), -EXDEV);
	EXPECT_EQ(s, nullptr);
}

/*
 * 100 kill -9 runs. A child puts batches (each key's version counts up; the store refuses
 * rather than evicts, and nothing is deleted) and reports each batch's acknowledgement on a
 * pipe; the parent kills it at a random moment, reopens, and checks every key: a hit holds
 * exactly the bytes of one version the child put (never torn, never another key's), at least
 * the last acknowledged; a miss only for a key never acknowledged.
 */
TEST(KvstoreCrash, kill9_at_random_points_of_put_batches_never_loses_or_tears_an_acknowledged_put)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({16 * KiB, 64 * KiB}, 48 * MiB, 4 * MiB);
	{
		const char *pp[] = {path.c_str()};
		kvblk_kvstore *s = nullptr;
		auto o = open_opts();
		o.when_full = KVBLK_KVSTORE_REFUSE;
		ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, &o, &s), 0) << kvblk_kvstore_last_error();
		kvblk_kvstore_close(s);
	}
	const int kKeys = 48;
	std::map<std::string, uint64_t> acked;	   /* key -> highest acknowledged version */
	std::map<std::string, uint64_t> attempted; /* key -> highest version ever put */
	std::mt19937 rng(20261204);
	printf("kvstore crash test: seed 20261204\n");
	uint64_t next_v = 1;
	int torn_checks = 0;
	for (int run = 0; run < 100; run++) {
		int fds[2];
		ASSERT_EQ(pipe(fds), 0);
		const uint64_t base_v = next_v;
		const uint32_t seed = rng();
		const pid_t pid = fork();
		if (pid == 0) {
			close(fds[0]);
			kvblk_kvstore *s = nullptr;
			auto o = open_opts();
			o.when_full = KVBLK_KVSTORE_REFUSE;
			const char *pp[] = {path.c_str()};
			if (kvblk_kvstore_open(pp, 1, &o, &s))
				_exit(2);
			std::mt19937 r2(seed);
			for (uint64_t v = base_v;; v++) {
				std::vector<std::string> keys;
				for (int i = 0; i < 6; i++)
					keys.push_back("key" + std::to_string(r2() % kKeys));
				std::sort(keys.begin(), keys.end());
				keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
				/* Announce the attempt {1, v, 0}, put, then acknowledge each key {2, v, id}.
				 * Records of 24 bytes: atomic on a pipe (less than PIPE_BUF). */
				uint64_t msg[3] = {1, v, 0};
				if (write(fds[1], msg, sizeof(msg)) != sizeof(msg))
					_exit(4);
				const uint64_t len = 1000 + (v % 50) * 1000; /* both classes */
				std::vector<kvblk_kvstore_result> res;
				const int n = put_keys(s, keys, v, len, &res);
				if (n != int(keys.size()))
					_exit(5);
				for (const auto &k : keys) {
					uint64_t ack[3] = {2, v, std::stoull(k.substr(3))};
					if (write(fds[1], ack, sizeof(ack)) != sizeof(ack))
						_exit(4);
				}
			}
		}
		close(fds[1]);
		std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 150));
		kill(pid, SIGKILL);
		int status = 0;
		ASSERT_EQ(waitpid(pid, &status, 0), pid);
		ASSERT_TRUE(WIFSIGNALED(status)) << "run " << run << ": child exited " << WEXITSTATUS(status);
		/* The child's log: attempts (an unacknowledged batch may have touched any key) and acks. */
		uint64_t rec[3];
		uint64_t last_attempt = base_v - 1;
		while (read(fds[0], rec, sizeof(rec)) == sizeof(rec)) {
			last_attempt = std::max(last_attempt, rec[1]);
			if (rec[0] == 2) {
				const std::string k = "key" + std::to_string(rec[2]);
				acked[k] = std::max(acked[k], rec[1]);
			}
		}
		close(fds[0]);
		next_v = last_attempt + 1;
		for (int k = 0; k < kKeys; k++) {
			const std::string key = "key" + std::to_string(k);
			attempted[key] = std::max(attempted[key], last_attempt);
		}
		/* Reopen and check every key. */
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(open_one(path, &s), 0) << "run " << run << ": " << kvblk_kvstore_last_error();
		for (int k = 0; k < kKeys; k++) {
			const std::string key = "key" + std::to_string(k);
			std::vector<uint8_t> out;
			kvblk_kvstore_result r{};
			const int st = get_key(s, key, 64 * KiB, &out, &r);
			auto a = acked.find(key);
			if (st == -ENOENT) {
				EXPECT_TRUE(a == acked.end()) << "run " << run << ": " << key << " acknowledged at version "
							      << a->second << " is missing";
				continue;
			}
			ASSERT_EQ(st, 0) << "run " << run << ": " << key;
			/* Which version? Its length tells v mod 50; search the versions that fit. */
			bool ok = false;
			const uint64_t lo = a == acked.end() ? 1 : a->second;
			for (uint64_t v = lo; v <= attempted[key] && !ok; v++)
				if (1000 + (v % 50) * 1000 == r.length)
					ok = out == object_bytes(key, v, r.length);
			torn_checks++;
			EXPECT_TRUE(ok) << "run " << run << ": " << key << " holds bytes of no version in [" << lo << ", "
					<< attempted[key] << "] (length " << r.length << ")";
			if (!ok) {
				kvblk_kvstore_close(s);
				return;
			}
		}
		kvblk_kvstore_close(s);
	}
	EXPECT_GT(torn_checks, 100);
	EXPECT_GT(acked.size(), 10u) << "the children acknowledged too little to mean anything";
}

/* 100,000 objects: all of them back after a reopen; the reopen's time is printed (make bench measures it). */
TEST(KvstoreScale, a_hundred_thousand_objects_reopen_whole)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({4 * KiB}, 768 * MiB);
	const char *pp[] = {path.c_str()};
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0) << kvblk_kvstore_last_error();
	const int N = 100000, B = 5000;
	Buf data(4096);
	for (int b = 0; b < N / B; b++) {
		std::vector<std::string> keys;
		keys.reserve(B);
		std::vector<kvblk_kvstore_op> ops;
		for (int i = 0; i < B; i++) {
			keys.push_back("sglang-page-" + std::to_string(b * B + i) + "_0_8");
			ops.push_back(op_for(keys.back(), data.p, 512 + (i % 7)));
		}
		std::vector<kvblk_kvstore_result> r(B);
		ASSERT_EQ(kvblk_kvstore_put(s, ops.data(), B, r.data()), B) << kvblk_kvstore_last_error();
	}
	kvblk_kvstore_close(s);
	for (const char *how : {"after a clean close", "after kill -9 (journal replay)"}) {
		s = nullptr;
		const auto t0 = std::chrono::steady_clock::now();
		ASSERT_EQ(open_one(path, &s), 0) << kvblk_kvstore_last_error();
		const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
		kvblk_kvstore_info info{};
		info.info_size = sizeof(info);
		ASSERT_EQ(kvblk_kvstore_get_info(s, &info), 0);
		EXPECT_EQ(info.objects, uint64_t(N));
		printf("kvstore: reopen of %llu objects %s: %.1f ms\n", (unsigned long long)info.objects, how, ms);
		std::vector<uint8_t> out;
		ASSERT_EQ(get_key(s, "sglang-page-77777_0_8", 4096, &out), 0);
		EXPECT_EQ(out.size(), size_t(512 + 77777 % B % 7));
		if (std::string(how).find("kill") != std::string::npos) {
			kvblk_kvstore_close(s);
			break;
		}
		/* Leave commits in the journal: rewrite 20,000 objects in a child, kill it. */
		kvblk_kvstore_close(s);
		const pid_t pid = fork();
		if (pid == 0) {
			kvblk_kvstore *cs = nullptr;
			if (open_one(path, &cs))
				_exit(2);
			for (int b = 0; b < 4; b++) {
				std::vector<std::string> keys;
				keys.reserve(B);
				std::vector<kvblk_kvstore_op> ops;
				for (int i = 0; i < B; i++) {
					keys.push_back("sglang-page-" + std::to_string(b * B + i) + "_0_8");
					ops.push_back(op_for(keys.back(), data.p, 512 + (i % 7)));
				}
				std::vector<kvblk_kvstore_result> r(B);
				if (kvblk_kvstore_put(cs, ops.data(), B, r.data()) != B)
					_exit(3);
			}
			kill(getpid(), SIGKILL);
		}
		int status = 0;
		ASSERT_EQ(waitpid(pid, &status, 0), pid);
		ASSERT_TRUE(WIFSIGNALED(status));
	}
}

} // namespace

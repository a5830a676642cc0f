// SPDX-License-Identifier: MIT
// The kvblk store's crash and degraded-session cases that an outside review found
// (/work/notes/kvstore-review.md, E1-E10; each failed before its fix): commit groups and the
// checkpoint, torn earlier commits, DELs of dropped objects, generations and deletions across a
// degraded session, read-only stores, RECOVER without a checkpoint.
#include "kvstore_util.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <sys/wait.h>
#include <thread>

using namespace kvs_test;

namespace {

int open_paths(const std::vector<std::string> &paths, kvblk_kvstore **s, uint32_t flags = 0)
{
	auto o = open_opts(KVBLK_BACKEND_AUTO, flags);
	std::vector<const char *> pp;
	for (auto &p : paths)
		pp.push_back(p.c_str());
	return kvblk_kvstore_open(pp.data(), uint32_t(pp.size()), &o, s);
}

std::string long_key(const char *prefix, int i, size_t len = 1000)
{
	std::string k = std::string(prefix) + std::to_string(i) + "-";
	k.resize(len, 'x');
	return k;
}

/* Put @keys (version v, len bytes) in one batch from one contiguous source. */
int put_many(kvblk_kvstore *s, const std::vector<std::string> &keys, uint64_t v, uint64_t len)
{
	return put_keys(s, keys, v, len);
}

} // namespace

/*
 * E1: a put batch whose records need several commits, and whose later commit makes make_room()
 * write a checkpoint: the checkpoint is taken from the index (the batch not yet published) but
 * claims to cover the batch's earlier commits. kill -9 afterwards loses acknowledged puts.
 */
TEST(KvstoreCrashCases, E1_a_multi_commit_batch_survives_kill9_with_no_checkpoint_inside_it)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({4 * KiB}, 64 * MiB, 4 * MiB);
	c.max_key_bytes = 1024;
	c.max_meta_bytes = UINT32_MAX; /* 0 bytes of metadata: records are 40 + key bytes */
	{
		const char *pp[] = {path.c_str()};
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0) << kvblk_kvstore_last_error();
		kvblk_kvstore_close(s);
	}
	/* Records of 1040 bytes: 1008 fill a 1 MiB commit, 504 make a 512 KiB one. */
	std::vector<std::string> p0, b;
	for (int i = 0; i < 504; i++)
		p0.push_back(long_key("p", i));
	b.push_back(p0[0]); /* an overwrite of p0[0], in the batch's first commit */
	for (int i = 1; i < 3 * 1008 + 504; i++)
		b.push_back(long_key("b", i));
	const pid_t pid = fork();
	if (pid == 0) {
		kvblk_kvstore *s = nullptr;
		if (open_paths({path}, &s))
			_exit(2);
		if (put_many(s, p0, 1, 512) != int(p0.size()))
			_exit(3);
		if (put_many(s, b, 2, 512) != int(b.size()))
			_exit(4);
		/* J takes the slot p0[0]'s old object freed (the most recently freed one). */
		if (put_many(s, {long_key("J", 0)}, 3, 4096) != 1)
			_exit(5);
		kvblk_kvstore_stats st{};
		st.stats_size = sizeof(st);
		kvblk_kvstore_get_stats(s, &st);
		fprintf(stderr, "child: checkpoints %llu journal_commits %llu\n", (unsigned long long)st.checkpoints,
			(unsigned long long)st.journal_commits);
		kill(getpid(), SIGKILL);
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
	const auto lay = raw_layout(path);
	const auto journal_after = read_at(path, lay.journal_offset, lay.journal_bytes);
	{
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(open_paths({path}, &s, KVBLK_KVSTORE_OPEN_RDONLY), 0) << kvblk_kvstore_last_error();
		int missing = 0, first_missing = -1, last_missing = -1;
		for (size_t i = 0; i < b.size(); i++) {
			std::vector<uint8_t> out;
			const int st = get_key(s, b[i], 4096, &out);
			if (st == -ENOENT) {
				missing++;
				if (first_missing < 0)
					first_missing = int(i);
				last_missing = int(i);
			}
		}
		printf("E1: %d of %zu acknowledged keys of the batch missing after kill -9 (ops %d..%d)\n", missing,
		       b.size(), first_missing, last_missing);
		EXPECT_EQ(missing, 0) << "acknowledged puts lost";
		std::vector<uint8_t> out;
		const int st = get_key(s, p0[0], 4096, &out);
		printf("E1: overwritten key p0[0] (acked v2) reads status %d\n", st);
		kvblk_kvstore_close(s);
	}
	/* A legitimate power-cut image: J's data flushed, J's commit (at journal position 4 MiB,
	 * physical 0) not written: zero the block J's commit header sits on. */
	{
		const auto j = read_at(path, lay.journal_offset, 4096);
		ASSERT_EQ(memcmp(j.data(), "KVBLKJNL", 8), 0) << "J's commit not at physical 0?";
		std::vector<uint8_t> zero(4096, 0);
		write_at(path, lay.journal_offset, zero.data(), 4096);
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(open_paths({path}, &s, KVBLK_KVSTORE_OPEN_RDONLY), 0) << kvblk_kvstore_last_error();
		std::vector<uint8_t> out;
		kvblk_kvstore_result r{};
		const int st = get_key(s, p0[0], 4096, &out, &r);
		printf("E1b: after a crash between J's data flush and J's commit, p0[0] (acked v2) reads status %d "
		       "length %llu\n", st, (unsigned long long)r.length);
		EXPECT_NE(st, -EBADMSG) << "p0[0] is present in the index but its slot holds J's bytes";
		kvblk_kvstore_check_report rep{};
		rep.report_size = sizeof(rep);
		const int bad = kvblk_kvstore_check(s, KVBLK_KVSTORE_CHECK_DATA, &rep);
		printf("E1b: check: %d bad objects, first problem: %s\n", bad, rep.first_problem);
		kvblk_kvstore_close(s);
	}
	(void)journal_after;
}

/*
 * E2: a put batch whose records need two commits. Each commit is flushed before the next is
 * written, so a power cut can tear only the last one (discarded as a torn end); a torn earlier
 * commit under a complete later one no longer comes from a crash: it is damage (-EUCLEAN).
 */
TEST(KvstoreCrashCases, E2_each_commit_of_a_group_is_durable_before_the_next)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({4 * KiB}, 64 * MiB, 16 * MiB);
	c.max_key_bytes = 1024;
	c.max_meta_bytes = UINT32_MAX;
	kvblk_kvstore *s = nullptr;
	{
		const char *pp[] = {path.c_str()};
		ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0) << kvblk_kvstore_last_error();
	}
	std::vector<std::string> b;
	for (int i = 0; i < 2 * 1008; i++)
		b.push_back(long_key("b", i));
	kvblk_kvstore_stats before{};
	before.stats_size = sizeof(before);
	ASSERT_EQ(kvblk_kvstore_get_stats(s, &before), 0);
	ASSERT_EQ(put_many(s, b, 1, 512), int(b.size()));
	kvblk_kvstore_stats after{};
	after.stats_size = sizeof(after);
	ASSERT_EQ(kvblk_kvstore_get_stats(s, &after), 0);
	/* One flush for the data, one after each of the two commits. */
	EXPECT_EQ(after.flushes - before.flushes, 3u);
	kvblk_kvstore_close(s);
	s = nullptr;
	const auto lay = raw_layout(path);
	/* After the close's checkpoint the commits are history; damage one of a fresh group. */
	const pid_t pid = fork();
	if (pid == 0) {
		kvblk_kvstore *cs = nullptr;
		if (open_paths({path}, &cs))
			_exit(2);
		std::vector<std::string> k2;
		for (int i = 0; i < 2 * 1008; i++)
			k2.push_back(long_key("c", i));
		if (put_many(cs, k2, 1, 512) != int(k2.size()))
			_exit(4);
		kill(getpid(), SIGKILL);
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFSIGNALED(status));
	/* Find the group's first commit (the lowest seq after the checkpoint) and zero one block. */
	const auto j = read_at(path, lay.journal_offset, lay.journal_bytes);
	uint64_t first = UINT64_MAX, first_seq = UINT64_MAX;
	for (uint64_t o = 0; o < lay.journal_bytes; o += 4096)
		if (memcmp(&j[o], "KVBLKJNL", 8) == 0 && le32(&j[o + 56]) > 0) {
			const uint64_t seq = le64(&j[o + 40]);
			if (seq < first_seq && le64(&j[o + 48]) % lay.journal_bytes == o) {
				first_seq = seq;
				first = o;
			}
		}
	ASSERT_NE(first, UINT64_MAX);
	/* The highest-seq commits are the child's: find its first one (seq of the last minus one). */
	uint64_t last_seq = 0;
	for (uint64_t o = 0; o < lay.journal_bytes; o += 4096)
		if (memcmp(&j[o], "KVBLKJNL", 8) == 0)
			last_seq = std::max(last_seq, le64(&j[o + 40]));
	uint64_t target = UINT64_MAX;
	for (uint64_t o = 0; o < lay.journal_bytes; o += 4096)
		if (memcmp(&j[o], "KVBLKJNL", 8) == 0 && le64(&j[o + 40]) == last_seq - 1)
			target = o;
	ASSERT_NE(target, UINT64_MAX);
	std::vector<uint8_t> zero(4096, 0);
	write_at(path, lay.journal_offset + target + 10 * 4096, zero.data(), 4096);
	const int ret = open_paths({path}, &s);
	EXPECT_EQ(ret, -EUCLEAN) << "a damaged durable commit under a later one is damage, not a torn end: "
				 << kvblk_kvstore_last_error();
	kvblk_kvstore_close(s);
}

/*
 * E3: a get finds K's old object damaged (-EBADMSG) while a put of K runs; the drop's DEL is
 * committed after the put's PUT with a higher generation, and replay applies it to the new
 * object (apply_record's DEL ignores the slot it names).
 */
TEST(KvstoreCrashCases, E3_the_del_of_a_dropped_object_never_deletes_a_newer_put)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({1 * MiB}, 256 * MiB, 0);
	{
		const char *pp[] = {path.c_str()};
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0) << kvblk_kvstore_last_error();
		kvblk_kvstore_close(s);
	}
	int fds[2];
	ASSERT_EQ(pipe(fds), 0);
	const pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		kvblk_kvstore *s = nullptr;
		if (open_paths({path}, &s))
			_exit(2);
		if (put_keys(s, {"K"}, 1, 100000) != 1)
			_exit(3);
		/* Damage K's object (slot 0) on disk. */
		const auto lay = raw_layout(path);
		flip_bit(path, lay.class_offset[0] + 50);
		/* A long put batch with K last; a get of K while it runs. */
		std::vector<std::string> keys;
		for (int i = 0; i < 150; i++)
			keys.push_back("f" + std::to_string(i));
		keys.push_back("K");
		std::vector<std::vector<uint8_t>> data;
		std::vector<kvblk_kvstore_op> ops;
		data.reserve(keys.size());
		for (size_t i = 0; i < keys.size(); i++) {
			data.push_back(object_bytes(keys[i], 2, 1 * MiB));
			ops.push_back(op_for(keys[i], data.back().data(), 1 * MiB, i));
		}
		std::vector<kvblk_kvstore_result> pres(keys.size());
		kvblk_kvstore_submit_opts so;
		kvblk_kvstore_submit_opts_init(&so, sizeof(so));
		so.results = pres.data();
		uint64_t tp = 0, tg = 0;
		if (kvblk_kvstore_submit(s, KVBLK_KVSTORE_PUT, ops.data(), uint32_t(ops.size()), &so, &tp))
			_exit(4);
		std::this_thread::sleep_for(std::chrono::milliseconds(3));
		std::vector<uint8_t> out(1 * MiB);
		static const std::string kK = "K";
		kvblk_kvstore_op g = op_for(kK, out.data(), out.size());
		kvblk_kvstore_result gres{};
		kvblk_kvstore_submit_opts go;
		kvblk_kvstore_submit_opts_init(&go, sizeof(go));
		go.results = &gres;
		if (kvblk_kvstore_submit(s, KVBLK_KVSTORE_GET, &g, 1, &go, &tg))
			_exit(5);
		kvblk_cqe cq{};
		kvblk_kvstore_wait(s, tg, -1, &cq);
		const int got = kvblk_kvstore_wait(s, tp, -1, &cq);
		/* One more put: the drops were committed before it returns. */
		put_keys(s, {"z"}, 1, 1000);
		int64_t msg[2] = {gres.status, got};
		if (write(fds[1], msg, sizeof(msg)) != sizeof(msg))
			_exit(6);
		kill(getpid(), SIGKILL);
	}
	close(fds[1]);
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
	int64_t msg[2] = {1, -1};
	ASSERT_EQ(read(fds[0], msg, sizeof(msg)), ssize_t(sizeof(msg)));
	close(fds[0]);
	printf("E3: the get of K during the put: status %lld; the put stored %lld of 151\n", (long long)msg[0],
	       (long long)msg[1]);
	ASSERT_EQ(msg[1], 151) << "the put was not acknowledged whole";
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(open_paths({path}, &s, KVBLK_KVSTORE_OPEN_RDONLY), 0) << kvblk_kvstore_last_error();
	std::vector<uint8_t> out;
	const int st = get_key(s, "K", 1 * MiB, &out);
	printf("E3: after kill -9, K (acknowledged version 2) reads status %d\n", st);
	if (msg[0] == -EBADMSG) {
		EXPECT_EQ(st, 0) << "the acknowledged put of K was deleted by the drop's DEL at replay";
	}
	kvblk_kvstore_close(s);
}

/* E4: two threads wait for the same ticket: the second must get -ENOENT, not abort the process. */
TEST(KvstoreCrashCases, E4_two_waiters_of_one_ticket)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({4 * MiB}, 512 * MiB, 0);
	const pid_t pid = fork();
	if (pid == 0) {
		const char *pp[] = {path.c_str()};
		kvblk_kvstore *s = nullptr;
		if (kvblk_kvstore_create(pp, 1, &c, nullptr, &s))
			_exit(2);
		std::vector<std::string> keys;
		for (int i = 0; i < 64; i++)
			keys.push_back("k" + std::to_string(i));
		std::vector<uint8_t> data(4 * MiB, 7);
		std::vector<kvblk_kvstore_op> ops;
		for (auto &k : keys)
			ops.push_back(op_for(k, data.data(), data.size()));
		uint64_t t = 0;
		if (kvblk_kvstore_submit(s, KVBLK_KVSTORE_PUT, ops.data(), uint32_t(ops.size()), nullptr, &t))
			_exit(3);
		std::atomic<int> r1{99}, r2{99};
		std::thread a([&] { r1 = kvblk_kvstore_wait(s, t, -1, nullptr); });
		std::thread b([&] { r2 = kvblk_kvstore_wait(s, t, -1, nullptr); });
		a.join();
		b.join();
		fprintf(stderr, "E4 child: waits returned %d and %d\n", r1.load(), r2.load());
		kvblk_kvstore_close(s);
		_exit(0);
	}
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	printf("E4: child %s %d\n", WIFSIGNALED(status) ? "killed by signal" : "exited", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* E5: both checkpoints damaged: there is no index to start from; RECOVER says so (-EUCLEAN). */
TEST(KvstoreCrashCases, E5_recover_with_both_checkpoints_damaged_is_euclean)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({64 * KiB}, 32 * MiB, 4 * MiB);
	{
		const char *pp[] = {path.c_str()};
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0);
		ASSERT_EQ(put_keys(s, {"a", "b"}, 1, 1000), 2);
		kvblk_kvstore_close(s);
	}
	const auto l = raw_layout(path);
	flip_bit(path, l.ckpt_offset + 50);
	flip_bit(path, l.ckpt_offset + l.ckpt_bytes + 50);
	kvblk_kvstore *s = nullptr;
	const int ret = open_paths({path}, &s, KVBLK_KVSTORE_OPEN_RECOVER);
	EXPECT_EQ(ret, -EUCLEAN);
	EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("checkpoint"), std::string::npos);
	kvblk_kvstore_close(s);
}

/* E6: journal_bytes under 4 MiB is refused, as the header says. */
TEST(KvstoreCrashCases, E6_a_journal_under_4_mib_is_refused)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({64 * KiB}, 32 * MiB, 1 * MiB);
	const char *pp[] = {path.c_str()};
	kvblk_kvstore *s = nullptr;
	const int ret = kvblk_kvstore_create(pp, 1, &c, nullptr, &s);
	EXPECT_EQ(ret, -EINVAL);
	EXPECT_NE(std::string(kvblk_kvstore_last_error()).find("4194304"), std::string::npos);
	kvblk_kvstore_close(s);
}

/*
 * E7: generations after a crash and a DEGRADED open: the open takes next_gen from the drives it
 * has, the missing one holds higher generations, and after the full reopen its older object of
 * the key wins over the newer acknowledged one.
 */
TEST(KvstoreCrashCases, E7_generations_grow_across_a_degraded_session_and_the_newest_wins)
{
	TempDir dir;
	const std::string p0 = dir.file("d0"), p1 = dir.file("d1");
	auto c = create_opts({64 * KiB}, 32 * MiB, 4 * MiB);
	{
		const char *pp[] = {p0.c_str(), p1.c_str()};
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(kvblk_kvstore_create(pp, 2, &c, nullptr, &s), 0);
		kvblk_kvstore_close(s);
	}
	int fds[2];
	ASSERT_EQ(pipe(fds), 0);
	const pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		kvblk_kvstore *s = nullptr;
		if (open_paths({p0, p1}, &s))
			_exit(2);
		std::vector<std::string> fill;
		for (int i = 0; i < 10; i++)
			fill.push_back("fill" + std::to_string(i));
		if (put_keys(s, fill, 1, 1000) != 10)
			_exit(3);
		std::vector<kvblk_kvstore_result> r;
		if (put_keys(s, {"K"}, 1, 1000, &r) != 1)
			_exit(4);
		if (put_keys(s, {"K"}, 2, 1000, &r) != 1)
			_exit(4);
		uint32_t drive = r[0].drive;
		if (write(fds[1], &drive, 4) != 4)
			_exit(5);
		kill(getpid(), SIGKILL);
	}
	close(fds[1]);
	int status = 0;
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	uint32_t x = 99;
	ASSERT_EQ(read(fds[0], &x, 4), 4);
	close(fds[0]);
	const std::string other = x == 0 ? p1 : p0;
	{
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(open_paths({other}, &s, KVBLK_KVSTORE_OPEN_DEGRADED), 0) << kvblk_kvstore_last_error();
		std::vector<kvblk_kvstore_result> r;
		ASSERT_EQ(put_keys(s, {"K"}, 3, 1000, &r), 1);
		printf("E7: K v2 was on drive %u; the degraded open put K v3 on drive %u\n", x, r[0].drive);
		kvblk_kvstore_close(s);
	}
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(open_paths({p0, p1}, &s), 0) << kvblk_kvstore_last_error();
	std::vector<uint8_t> out;
	kvblk_kvstore_result r{};
	ASSERT_EQ(get_key(s, "K", 64 * KiB, &out, &r), 0);
	const bool v3 = out == object_bytes("K", 3, 1000), v2 = out == object_bytes("K", 2, 1000);
	printf("E7: after the full reopen K reads version %s (drive %u)\n", v3 ? "3" : v2 ? "2 (stale)" : "?", r.drive);
	EXPECT_TRUE(v3);
	kvblk_kvstore_close(s);
}

/* E8: a key deleted while the drive holding its older copy was missing comes back. */
TEST(KvstoreCrashCases, E8_a_delete_in_a_degraded_session_stays_deleted_at_the_full_reopen)
{
	TempDir dir;
	const std::string p0 = dir.file("d0"), p1 = dir.file("d1");
	auto c = create_opts({64 * KiB}, 32 * MiB, 4 * MiB);
	uint32_t x = 99;
	{
		const char *pp[] = {p0.c_str(), p1.c_str()};
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(kvblk_kvstore_create(pp, 2, &c, nullptr, &s), 0);
		std::vector<kvblk_kvstore_result> r;
		ASSERT_EQ(put_keys(s, {"K"}, 1, 1000, &r), 1);
		x = r[0].drive;
		kvblk_kvstore_close(s);
	}
	const std::string other = x == 0 ? p1 : p0;
	{
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(open_paths({other}, &s, KVBLK_KVSTORE_OPEN_DEGRADED), 0) << kvblk_kvstore_last_error();
		std::vector<kvblk_kvstore_result> pr;
		ASSERT_EQ(put_keys(s, {"K"}, 2, 1000, &pr), 1);
		static const std::string kK = "K";
		auto d = op_for(kK, nullptr, 0);
		kvblk_kvstore_result dr{};
		const int dn = kvblk_kvstore_delete(s, &d, 1, &dr);
		printf("E8: K v1 on drive %u; degraded put K v2 -> drive %u status %d; delete: %d status %d drive %u\n", x,
		       pr[0].drive, pr[0].status, dn, dr.status, dr.drive);
		ASSERT_EQ(dn, 1);
		kvblk_kvstore_close(s);
	}
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(open_paths({p0, p1}, &s), 0) << kvblk_kvstore_last_error();
	std::vector<uint8_t> out;
	const int st = get_key(s, "K", 64 * KiB, &out);
	printf("E8: K (put v2 then deleted, acknowledged) reads %d%s\n", st,
	       st == 0 && out == object_bytes("K", 1, 1000) ? " with version 1's bytes" : "");
	EXPECT_EQ(st, -ENOENT);
	kvblk_kvstore_close(s);
}

/* E9: gets into unaligned host memory: "Alignment: none is required". */
TEST(KvstoreCrashCases, E9_unaligned_host_destinations_over_256_mib_all_land)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({4 * MiB}, 400 * MiB, 0);
	const char *pp[] = {path.c_str()};
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0) << kvblk_kvstore_last_error();
	const int n = 70;
	std::vector<std::string> keys;
	for (int i = 0; i < n; i++)
		keys.push_back("k" + std::to_string(i));
	ASSERT_EQ(put_keys(s, keys, 1, 4 * MiB), n);
	std::vector<uint8_t> big(size_t(n) * 4 * MiB + 4096);
	uint8_t *base = big.data() + (4096 - (uintptr_t(big.data()) % 4096)) % 4096 + 1; /* odd address */
	std::vector<kvblk_kvstore_op> ops;
	for (int i = 0; i < n; i++)
		ops.push_back(op_for(keys[i], base + size_t(i) * 4 * MiB - (i ? 0 : 0), 4 * MiB - 1 + 1));
	/* the last op's room would pass the end: shrink the buffer use by one byte per op is not needed */
	std::vector<kvblk_kvstore_result> res(n);
	const int got = kvblk_kvstore_get(s, ops.data(), n, res.data());
	printf("E9: %d of %d unaligned gets hit; first status %d\n", got, n, res[0].status);
	EXPECT_EQ(got, n);
	kvblk_kvstore_close(s);
}

/* E10: a checksum failure on a store opened read-only: the drop's DEL cannot be written. */
TEST(KvstoreCrashCases, E10_a_checksum_failure_on_a_read_only_store_fails_only_its_key)
{
	TempDir dir;
	const std::string path = dir.file("d");
	auto c = create_opts({64 * KiB}, 32 * MiB, 4 * MiB);
	{
		const char *pp[] = {path.c_str()};
		kvblk_kvstore *s = nullptr;
		ASSERT_EQ(kvblk_kvstore_create(pp, 1, &c, nullptr, &s), 0);
		ASSERT_EQ(put_keys(s, {"a", "b"}, 1, 1000), 2);
		kvblk_kvstore_close(s);
	}
	const auto lay = raw_layout(path);
	flip_bit(path, lay.class_offset[0] + 10); /* a's object */
	const auto before = read_at(path, 0, 16 * MiB);
	kvblk_kvstore *s = nullptr;
	ASSERT_EQ(open_paths({path}, &s, KVBLK_KVSTORE_OPEN_RDONLY), 0);
	std::vector<uint8_t> out;
	EXPECT_EQ(get_key(s, "a", 64 * KiB, &out), -EBADMSG);
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
	kvblk_kvstore_drive_info di{};
	di.info_size = sizeof(di);
	ASSERT_EQ(kvblk_kvstore_get_drive_info(s, 0, &di), 0);
	const int sb = get_key(s, "b", 64 * KiB, &out);
	printf("E10: after one -EBADMSG on a read-only store: drive state %u (%s); get of the intact key b: %d\n",
	       di.state, di.why_failed, sb);
	EXPECT_EQ(di.state, KVBLK_KVSTORE_DRIVE_OK);
	EXPECT_EQ(sb, 0);
	kvblk_kvstore_close(s);
	EXPECT_EQ(read_at(path, 0, 16 * MiB), before) << "a read-only store wrote";
}

// SPDX-License-Identifier: MIT
// The C++ wrapper of the kvblk store (include/kvblk/kvstore.hpp) through the shared library:
// create over files in /var/tmp ($TMPDIR), round trips with the bytes compared, errors thrown
// with the errno and the store's reason, move-only ownership (a moved-over store is closed:
// its drive opens again), reopen, evicted() and list(), the asynchronous calls, info, check,
// identify; and <kvblk/kvstore.h> as C (c_kvstore_header.c) has the layout C++ sees.
#include "kvstore_util.hpp"

#include "c_kvstore_header.h"

#include <kvblk/kvstore.hpp>

#include <algorithm>
#include <poll.h>
#include <set>
#include <sys/wait.h>
#include <type_traits>
#include <unistd.h>

using namespace kvs_test;

namespace {

/* One class of @slot-byte slots over new files of @bytes (the journal: 4 MiB, the least). */
kvblk::KvStoreCreateOptions one_class(uint64_t slot, uint64_t bytes)
{
	kvblk::KvStoreCreateOptions c;
	c.classes = {{slot, 1}};
	c.file_bytes = bytes;
	c.journal_bytes = 4 * MiB;
	return c;
}

/* Run @f, which must throw kvblk::Error: its errno, and what() holding each of @parts. */
template <class F> void expect_error(F &&f, int err, std::initializer_list<const char *> parts)
{
	try {
		f();
		ADD_FAILURE() << "no kvblk::Error thrown (expected errno " << err << ")";
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(e.errno_value(), err) << e.what();
		EXPECT_EQ(e.code(), std::error_code(err, std::generic_category())) << e.what();
		for (const char *p : parts)
			EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
	}
}

/* A regular file of @bytes (sparse: zeros). */
void make_file(const std::string &path, uint64_t bytes)
{
	const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ASSERT_GE(fd, 0) << path;
	EXPECT_EQ(ftruncate(fd, off_t(bytes)), 0);
	close(fd);
}

std::set<std::string> key_set(const std::vector<kvblk::KvStoreKey> &keys)
{
	std::set<std::string> s;
	for (const auto &k : keys)
		s.insert(k.key);
	return s;
}

TEST(KvstoreCxx, c_header_has_the_layout_cxx_sees)
{
	kvblk_c_kvstore_layout c{};
	kvblk_c_kvstore_get_layout(&c);
	EXPECT_EQ(c.cls, sizeof(kvblk_kvstore_class));
	EXPECT_EQ(c.create_opts, sizeof(kvblk_kvstore_create_opts));
	EXPECT_EQ(c.open_opts, sizeof(kvblk_kvstore_open_opts));
	EXPECT_EQ(c.op, sizeof(kvblk_kvstore_op));
	EXPECT_EQ(c.result, sizeof(kvblk_kvstore_result));
	EXPECT_EQ(c.submit_opts, sizeof(kvblk_kvstore_submit_opts));
	EXPECT_EQ(c.key, sizeof(kvblk_kvstore_key));
	EXPECT_EQ(c.drive_info, sizeof(kvblk_kvstore_drive_info));
	EXPECT_EQ(c.class_info, sizeof(kvblk_kvstore_class_info));
	EXPECT_EQ(c.info, sizeof(kvblk_kvstore_info));
	EXPECT_EQ(c.stats, sizeof(kvblk_kvstore_stats));
	EXPECT_EQ(c.identity, sizeof(kvblk_kvstore_identity));
	EXPECT_EQ(c.check_report, sizeof(kvblk_kvstore_check_report));
	EXPECT_EQ(c.off_create_reserved, offsetof(kvblk_kvstore_create_opts, reserved));
	EXPECT_EQ(c.off_open_max_descs, offsetof(kvblk_kvstore_open_opts, max_descs));
	EXPECT_EQ(c.off_open_reserved, offsetof(kvblk_kvstore_open_opts, reserved));
	EXPECT_EQ(c.off_op_tag, offsetof(kvblk_kvstore_op, tag));
	EXPECT_EQ(c.off_result_drive, offsetof(kvblk_kvstore_result, drive));
	EXPECT_EQ(c.off_submit_results, offsetof(kvblk_kvstore_submit_opts, results));
	EXPECT_EQ(c.off_key_gen, offsetof(kvblk_kvstore_key, gen));
	EXPECT_EQ(c.off_drive_why_failed, offsetof(kvblk_kvstore_drive_info, why_failed));
	EXPECT_EQ(c.off_info_classes, offsetof(kvblk_kvstore_info, classes));
	EXPECT_EQ(c.off_stats_degraded, offsetof(kvblk_kvstore_stats, degraded));
	EXPECT_EQ(c.off_identity_superblocks_ok, offsetof(kvblk_kvstore_identity, superblocks_ok));
	EXPECT_EQ(c.off_report_first_problem, offsetof(kvblk_kvstore_check_report, first_problem));
	TempDir dir;
	EXPECT_EQ(kvblk_c_kvstore_smoke(dir.file("missing").c_str()), -ENOENT) << kvblk_kvstore_last_error();
}

TEST(KvstoreCxx, put_get_exists_erase_round_trip)
{
	TempDir dir;
	kvblk::KvStore s = kvblk::KvStore::create({dir.file("d0")}, one_class(64 * KiB, 16 * MiB));
	ASSERT_TRUE(s);
	ASSERT_NE(s.dev(), nullptr);

	/* One key: bytes and metadata back as they were put. */
	const std::vector<uint8_t> a = object_bytes("a", 1, 10000);
	kvblk_kvstore_result r = s.put("a", a.data(), a.size(), "shape=1x2");
	EXPECT_EQ(r.status, 0);
	EXPECT_EQ(r.length, a.size());
	EXPECT_EQ(r.drive, 0u);
	std::vector<uint8_t> out(64 * KiB, 0);
	char meta[32] = {};
	r = s.get("a", out.data(), out.size(), meta, sizeof(meta));
	ASSERT_EQ(r.status, 0);
	EXPECT_EQ(r.length, a.size());
	ASSERT_EQ(r.meta_len, 9u);
	EXPECT_EQ(std::string(meta, r.meta_len), "shape=1x2");
	EXPECT_TRUE(std::equal(a.begin(), a.end(), out.begin())) << "the bytes read differ from the bytes put";
	r = s.get("a", out.data(), a.size() - 1);
	EXPECT_EQ(r.status, -EMSGSIZE);
	EXPECT_EQ(r.length, a.size());

	/* A batch: binary keys, sizes around a block, sources at odd addresses. */
	const std::vector<std::string> keys = {"k0", std::string("bin\0key", 7), "k2", "k3"};
	const std::vector<uint64_t> sizes = {1, 4097, 65536, 12345};
	const std::vector<std::string> metas = {"m0", "", "meta of k2", std::string(KVBLK_KVSTORE_DEFAULT_MAX_META, 'z')};
	std::vector<std::vector<uint8_t>> data, src;
	std::vector<kvblk_kvstore_op> ops;
	for (size_t i = 0; i < keys.size(); i++) {
		data.push_back(object_bytes(keys[i], 2, sizes[i]));
		src.emplace_back(sizes[i] + 3);
		std::copy(data[i].begin(), data[i].end(), src[i].begin() + 3);
		ops.push_back(kvblk::KvStore::put_op(keys[i], src[i].data() + 3, sizes[i], metas[i], 100 + i));
	}
	std::vector<kvblk_kvstore_result> res(ops.size());
	EXPECT_EQ(s.put(ops, res), keys.size());
	for (size_t i = 0; i < keys.size(); i++) {
		EXPECT_EQ(res[i].status, 0) << i;
		EXPECT_EQ(res[i].tag, 100 + i);
		EXPECT_EQ(res[i].length, sizes[i]);
	}
	src.clear(); /* the sources are the caller's again */

	std::vector<std::vector<uint8_t>> dst;
	std::vector<std::vector<char>> meta_out(keys.size(), std::vector<char>(KVBLK_KVSTORE_DEFAULT_MAX_META));
	std::vector<kvblk_kvstore_op> gets;
	for (size_t i = 0; i < keys.size(); i++) {
		dst.emplace_back(sizes[i] + 5, 0);
		gets.push_back(kvblk::KvStore::get_op(keys[i], dst[i].data() + 5, sizes[i], i, meta_out[i].data(),
						      uint32_t(meta_out[i].size())));
	}
	gets.push_back(kvblk::KvStore::get_op("absent", out.data(), out.size(), 99));
	const std::vector<kvblk_kvstore_result> gr = s.get(gets);
	ASSERT_EQ(gr.size(), gets.size());
	for (size_t i = 0; i < keys.size(); i++) {
		ASSERT_EQ(gr[i].status, 0) << i;
		EXPECT_EQ(gr[i].length, sizes[i]);
		EXPECT_TRUE(std::equal(data[i].begin(), data[i].end(), dst[i].begin() + 5)) << "object " << i;
		EXPECT_EQ(dst[i][4], 0) << "a byte before destination " << i << " was written";
		EXPECT_EQ(std::string(meta_out[i].data(), gr[i].meta_len), metas[i]);
	}
	EXPECT_EQ(gr.back().status, -ENOENT);
	EXPECT_EQ(gr.back().tag, 99u);

	/* exists: present with length, absent. */
	const std::vector<kvblk_kvstore_op> ex = {kvblk::KvStore::key_op(keys[1]), kvblk::KvStore::key_op("absent")};
	std::vector<kvblk_kvstore_result> er(ex.size());
	EXPECT_EQ(s.exists(ex, er), 1u);
	EXPECT_EQ(er[0].status, 0);
	EXPECT_EQ(er[0].length, sizes[1]);
	EXPECT_EQ(er[1].status, -ENOENT);
	EXPECT_EQ(s.exists("a").length, a.size());

	/* erase: deleted once, absent after; a batch erase. */
	EXPECT_EQ(s.erase(keys[1]).status, 0);
	EXPECT_EQ(s.erase(keys[1]).status, -ENOENT);
	EXPECT_EQ(s.exists(keys[1]).status, -ENOENT);
	EXPECT_EQ(s.get(keys[1], out.data(), out.size()).status, -ENOENT);
	const std::vector<kvblk_kvstore_op> del = {kvblk::KvStore::key_op("k0"), kvblk::KvStore::key_op("k2")};
	const std::vector<kvblk_kvstore_result> dr = s.erase(del);
	EXPECT_EQ(dr[0].status, 0);
	EXPECT_EQ(dr[1].status, 0);
	EXPECT_EQ(s.info().objects, 2u) << "a and k3 are left";
}

TEST(KvstoreCxx, errors_throw_the_errno_and_the_stores_reason)
{
	TempDir dir;
	const std::string path = dir.file("d0");
	kvblk::KvStore s = kvblk::KvStore::create({path}, one_class(64 * KiB, 16 * MiB));
	const std::vector<uint8_t> a(100, 7);

	/* A bad op rejects the batch: EINVAL, the store's reason in what(), the key not stored. */
	const std::string long_key(KVBLK_KVSTORE_DEFAULT_MAX_KEY + 1, 'x');
	expect_error([&] { (void)s.put(long_key, a.data(), a.size()); }, EINVAL,
		     {"kvblk_kvstore_put", "key of 513 bytes"});
	EXPECT_EQ(s.info().objects, 0u);
	/* The rejected op's result holds the error, the others -ECANCELED. */
	const std::vector<kvblk_kvstore_op> ops = {kvblk::KvStore::put_op("ok", a.data(), a.size()),
						   kvblk::KvStore::put_op("empty", a.data(), 0)};
	std::vector<kvblk_kvstore_result> res(ops.size());
	expect_error([&] { s.put(ops, res); }, EINVAL, {"op 1", "put length 0"});
	EXPECT_EQ(res[0].status, -ECANCELED);
	EXPECT_EQ(res[1].status, -EINVAL);
	/* The wrapper's own check: one result per op. */
	std::vector<kvblk_kvstore_result> short_res(1);
	expect_error([&] { s.put(ops, short_res); }, EINVAL, {"2 ops but 1 results"});

	/* The drive is locked while the store is open; once closed it holds a store. */
	expect_error([&] { (void)kvblk::KvStore::create({path}, one_class(64 * KiB, 16 * MiB)); }, EBUSY,
		     {"kvblk_kvstore_create", "open in another kvblk store"});
	s.close();
	EXPECT_FALSE(s);
	expect_error([&] { (void)kvblk::KvStore::create({path}, one_class(64 * KiB, 16 * MiB)); }, EEXIST,
		     {"already holds a kvblk store"});
	/* Not a store; no such drive. */
	const std::string plain = dir.file("plain");
	make_file(plain, 1 * MiB);
	expect_error([&] { (void)kvblk::KvStore::open({plain}); }, EMEDIUMTYPE, {"kvblk_kvstore_open", "not a kvblk store"});
	try {
		(void)kvblk::KvStore::open({plain});
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(std::string(e.what()).find("kvblk_kvstore_open: kvblk_kvstore_open"), std::string::npos)
			<< "the call named twice: " << e.what();
	}
	expect_error([&] { (void)kvblk::KvStore::open({dir.file("missing")}); }, ENOENT, {"kvblk_kvstore_open"});

	/* KvStoreOptions::max_descs bounds a batch: E2BIG past it. */
	{
		kvblk::KvStoreOptions small;
		small.max_descs = 2;
		kvblk::KvStore m = kvblk::KvStore::open({path}, small);
		const std::vector<kvblk_kvstore_op> three = {kvblk::KvStore::key_op("a"), kvblk::KvStore::key_op("b"),
							     kvblk::KvStore::key_op("c")};
		expect_error([&] { (void)m.exists(three); }, E2BIG, {"kvblk_kvstore_exists", "max_descs"});
		EXPECT_EQ(m.exists(kvblk::Span<const kvblk_kvstore_op>(three.data(), 2)).size(), 2u);
	}
	/* A read-only store refuses puts and deletes with EROFS. */
	kvblk::KvStoreOptions ro;
	ro.read_only = true;
	kvblk::KvStore r = kvblk::KvStore::open({path}, ro);
	expect_error([&] { (void)r.put("k", a.data(), a.size()); }, EROFS, {"read-only"});
	expect_error([&] { (void)r.erase("k"); }, EROFS, {"read-only"});
	expect_error([&] { (void)r.check({.data = false, .repair = true}); }, EROFS, {"kvblk_kvstore_check"});

	/* An empty KvStore: EINVAL from every call that needs a store. */
	kvblk::KvStore none;
	expect_error([&] { (void)none.exists("k"); }, EINVAL, {"kvblk_kvstore_exists", "NULL store"});
	expect_error([&] { (void)none.info(); }, EINVAL, {"kvblk_kvstore_get_info"});
	EXPECT_EQ(none.dev(), nullptr);
}

TEST(KvstoreCxx, move_only_ownership)
{
	static_assert(!std::is_copy_constructible_v<kvblk::KvStore>);
	static_assert(!std::is_copy_assignable_v<kvblk::KvStore>);
	static_assert(std::is_nothrow_move_constructible_v<kvblk::KvStore>);
	static_assert(std::is_nothrow_move_assignable_v<kvblk::KvStore>);
	static_assert(std::is_nothrow_destructible_v<kvblk::KvStore>);

	TempDir dir;
	const std::string d0 = dir.file("d0"), d1 = dir.file("d1");
	const std::vector<uint8_t> a = object_bytes("k", 1, 5000);
	kvblk::KvStore s1 = kvblk::KvStore::create({d0}, one_class(64 * KiB, 16 * MiB));
	ASSERT_EQ(s1.put("k", a.data(), a.size()).status, 0);
	kvblk_kvstore *raw = s1.get();

	kvblk::KvStore s2(std::move(s1));
	EXPECT_FALSE(s1); // NOLINT(bugprone-use-after-move): moved-from is empty by contract
	EXPECT_EQ(s1.get(), nullptr);
	EXPECT_EQ(s2.get(), raw);
	EXPECT_EQ(s2.exists("k").status, 0);
	expect_error([&] { (void)s1.exists("k"); }, EINVAL, {"NULL store"});

	/* Self-move keeps the store. */
	kvblk::KvStore &alias = s2;
	s2 = std::move(alias);
	EXPECT_EQ(s2.get(), raw);

	/* Move-assigning over an open store closes it: its drive opens again (no EBUSY). */
	kvblk::KvStore s3 = kvblk::KvStore::create({d1}, one_class(64 * KiB, 16 * MiB));
	kvblk_kvstore *raw3 = s3.get();
	s2 = std::move(s3);
	EXPECT_EQ(s2.get(), raw3);
	EXPECT_FALSE(s3); // NOLINT(bugprone-use-after-move)
	kvblk::KvStore again = kvblk::KvStore::open({d0});
	std::vector<uint8_t> out(a.size());
	ASSERT_EQ(again.get("k", out.data(), out.size()).status, 0);
	EXPECT_EQ(out, a);

	/* release() and adoption. */
	kvblk_kvstore *h = again.release();
	EXPECT_FALSE(again);
	kvblk::KvStore adopted(h);
	EXPECT_EQ(adopted.exists("k").status, 0);
	adopted.close();
	adopted.close(); /* twice is harmless */
	EXPECT_FALSE(adopted);
}

TEST(KvstoreCxx, a_fork_child_gets_ebadfd_and_its_destructor_frees_nothing)
{
	TempDir dir;
	kvblk::KvStore s = kvblk::KvStore::create({dir.file("d0")}, one_class(64 * KiB, 16 * MiB));
	const std::vector<uint8_t> a = object_bytes("k", 1, 3000);
	ASSERT_EQ(s.put("k", a.data(), a.size()).status, 0);
	const pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int code = 0;
		try {
			(void)s.exists("k");
			code = 1;
		} catch (const kvblk::Error &e) {
			code = e.errno_value() == EBADFD ? 0 : 2;
		}
		s.close(); /* frees nothing in the child */
		_exit(code);
	}
	int st = 0;
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(WEXITSTATUS(st), 0) << "1: no error in the child; 2: another errno than EBADFD";
	/* The parent's store is whole. */
	std::vector<uint8_t> out(a.size());
	ASSERT_EQ(s.get("k", out.data(), out.size()).status, 0);
	EXPECT_EQ(out, a);
}

TEST(KvstoreCxx, reopen_keeps_every_object)
{
	TempDir dir;
	const std::vector<std::string> drives = {dir.file("d0"), dir.file("d1")};
	kvblk::KvStoreCreateOptions c;
	c.classes = {{64 * KiB, 1}, {8 * KiB, 1}};
	c.file_bytes = 16 * MiB;
	c.journal_bytes = 4 * MiB;
	c.max_key_bytes = 64;
	std::vector<std::string> keys;
	std::vector<std::vector<uint8_t>> data;
	kvblk_kvstore_info before{};
	{
		kvblk::KvStore s = kvblk::KvStore::create(drives, c);
		std::vector<kvblk_kvstore_op> ops;
		for (int i = 0; i < 20; i++) {
			keys.push_back("layer" + std::to_string(i));
			data.push_back(object_bytes(keys.back(), 3, uint64_t(1000 + 3000 * i)));
		}
		for (size_t i = 0; i < keys.size(); i++)
			ops.push_back(kvblk::KvStore::put_op(keys[i], data[i].data(), data[i].size(), keys[i]));
		for (const auto &r : s.put(ops))
			ASSERT_EQ(r.status, 0);
		before = s.info();
		EXPECT_EQ(before.drives, 2u);
		EXPECT_EQ(before.nr_classes, 2u);
		EXPECT_EQ(before.classes[0].slot_bytes, 8 * KiB) << "classes are sorted by slot size";
		EXPECT_EQ(before.max_key_bytes, 64u);
	} /* closed here */
	/* The drives in the other order: each superblock says which drive it is. */
	kvblk::KvStore s = kvblk::KvStore::open({drives[1], drives[0]});
	const kvblk_kvstore_info after = s.info();
	EXPECT_EQ(after.objects, keys.size());
	EXPECT_EQ(after.bytes_stored, before.bytes_stored);
	EXPECT_EQ(0, memcmp(after.uuid, before.uuid, 16));
	for (size_t i = 0; i < keys.size(); i++) {
		std::vector<uint8_t> out(data[i].size());
		char meta[64] = {};
		const kvblk_kvstore_result r = s.get(keys[i], out.data(), out.size(), meta, sizeof(meta));
		ASSERT_EQ(r.status, 0) << keys[i];
		EXPECT_EQ(out, data[i]) << keys[i];
		EXPECT_EQ(std::string(meta, r.meta_len), keys[i]);
	}
	const std::vector<kvblk_kvstore_drive_info> d = s.drive_infos();
	ASSERT_EQ(d.size(), 2u);
	EXPECT_EQ(d[0].objects + d[1].objects, keys.size());
	EXPECT_EQ(d[0].state, KVBLK_KVSTORE_DRIVE_OK);
	EXPECT_EQ(std::string(d[0].path), drives[0]) << "drive 0 is the one created first";
	expect_error([&] { (void)s.drive_info(2); }, ENOENT, {"2 drives"});
}

TEST(KvstoreCxx, evicted_and_list)
{
	TempDir dir;
	kvblk::KvStore s = kvblk::KvStore::create({dir.file("d0")}, one_class(1 * MiB, 16 * MiB));
	const uint64_t slots = s.info().classes[0].slots;
	ASSERT_GE(slots, 4u);
	ASSERT_LE(slots, 16u);
	const std::vector<uint8_t> a(4096, 1);
	std::vector<std::string> keys;
	for (uint64_t i = 0; i < slots + 3; i++) {
		keys.push_back("key" + std::to_string(i));
		ASSERT_EQ(s.put(keys.back(), a.data(), a.size()).status, 0) << i;
	}
	/* The three oldest went, oldest first, with what they were. */
	const std::vector<kvblk::KvStoreKey> ev = s.evicted();
	ASSERT_EQ(ev.size(), 3u);
	for (size_t i = 0; i < 3; i++) {
		EXPECT_EQ(ev[i].key, keys[i]);
		EXPECT_EQ(ev[i].length, a.size());
		EXPECT_EQ(ev[i].drive, 0u);
		if (i) {
			EXPECT_GT(ev[i].gen, ev[i - 1].gen);
		}
	}
	EXPECT_TRUE(s.evicted().empty()) << "taken keys leave the list";
	EXPECT_EQ(s.stats().evictions, 3u);

	/* Every key present, once, whole walk and page by page. */
	const std::set<std::string> present(keys.begin() + 3, keys.end());
	const std::vector<kvblk::KvStoreKey> all = s.list();
	EXPECT_EQ(all.size(), present.size());
	EXPECT_EQ(key_set(all), present);
	std::vector<kvblk::KvStoreKey> paged;
	uint64_t cursor = 0;
	int pages = 0;
	do {
		std::vector<kvblk::KvStoreKey> p = s.list(cursor, 3);
		EXPECT_LE(p.size(), 3u);
		paged.insert(paged.end(), p.begin(), p.end());
		ASSERT_LT(++pages, 100) << "the walk does not end";
	} while (cursor != 0);
	EXPECT_EQ(paged.size(), present.size());
	EXPECT_EQ(key_set(paged), present);
	/* evicted(max) takes at most max keys; the rest wait. */
	ASSERT_EQ(s.put("one-more", a.data(), a.size()).status, 0);
	ASSERT_EQ(s.put("and-another", a.data(), a.size()).status, 0);
	const std::vector<kvblk::KvStoreKey> first = s.evicted(1);
	ASSERT_EQ(first.size(), 1u);
	EXPECT_EQ(first[0].key, keys[3]);
	EXPECT_EQ(s.evicted().size(), 1u);
}

TEST(KvstoreCxx, submit_reap_through_the_eventfd_and_wait)
{
	TempDir dir;
	kvblk::KvStore s = kvblk::KvStore::create({dir.file("d0")}, one_class(64 * KiB, 16 * MiB));
	const std::vector<std::string> keys = {"a", "b", "c"};
	std::vector<std::vector<uint8_t>> data;
	std::vector<kvblk_kvstore_op> puts;
	for (const auto &k : keys) {
		data.push_back(object_bytes(k, 1, 30000));
		puts.push_back(kvblk::KvStore::put_op(k, data.back().data(), data.back().size()));
	}
	kvblk_cqe pc{};
	const kvblk::Ticket pt = s.submit(kvblk::KvStoreKind::put, puts, {.results = {}, .user_data = 5});
	ASSERT_TRUE(pt);
	EXPECT_EQ(s.wait(pt, &pc), keys.size());
	EXPECT_EQ(pc.ticket, pt.id);
	EXPECT_EQ(pc.user_data, 5u);
	EXPECT_EQ(pc.tag, uint64_t(KVBLK_KVSTORE_PUT));
	EXPECT_EQ(pc.bytes, 3 * 30000u);
	expect_error([&] { (void)s.wait(pt); }, ENOENT, {"not outstanding"});

	/* A get of three keys and a miss, taken by reap() once the eventfd is readable. */
	std::vector<std::vector<uint8_t>> dst(4, std::vector<uint8_t>(30000, 0));
	std::vector<kvblk_kvstore_op> gets;
	for (size_t i = 0; i < keys.size(); i++)
		gets.push_back(kvblk::KvStore::get_op(keys[i], dst[i].data(), dst[i].size(), i));
	gets.push_back(kvblk::KvStore::get_op("absent", dst[3].data(), dst[3].size(), 3));
	std::vector<kvblk_kvstore_result> res(gets.size());
	const kvblk::Ticket t = s.submit(kvblk::KvStoreKind::get, gets, {.results = res, .user_data = 7});
	pollfd p{s.event_fd(), POLLIN, 0};
	ASSERT_EQ(poll(&p, 1, 5000), 1) << "the eventfd never became readable";
	std::vector<kvblk_cqe> c(4);
	ASSERT_EQ(s.reap(c, 1, std::chrono::seconds(5)), 1u);
	EXPECT_EQ(c[0].ticket, t.id);
	EXPECT_EQ(c[0].user_data, 7u);
	EXPECT_EQ(c[0].flags, uint32_t(KVBLK_CQE_BATCH));
	EXPECT_EQ(c[0].index, 4u);
	EXPECT_EQ(c[0].failed, 1u);
	EXPECT_EQ(c[0].status, -ENOENT);
	EXPECT_EQ(c[0].tag, uint64_t(KVBLK_KVSTORE_GET));
	EXPECT_EQ(c[0].bytes, 3 * 30000u);
	for (size_t i = 0; i < keys.size(); i++) {
		EXPECT_EQ(res[i].status, 0);
		EXPECT_EQ(dst[i], data[i]) << keys[i];
	}
	EXPECT_EQ(res[3].status, -ENOENT);
	EXPECT_EQ(s.reap(c, 0, std::chrono::nanoseconds(0)), 0u) << "nothing left";
	p.revents = 0;
	EXPECT_EQ(poll(&p, 1, 0), 0) << "the eventfd is still readable after reap() emptied the queue";

	/* wait_for(): an exists batch (answered at submit); an unknown ticket throws. */
	const std::vector<kvblk_kvstore_op> ex = {kvblk::KvStore::key_op("a"), kvblk::KvStore::key_op("zz")};
	const kvblk::Ticket et = s.submit(kvblk::KvStoreKind::exists, ex);
	EXPECT_EQ(s.wait_for(et, std::chrono::seconds(5)), std::optional<std::size_t>(1));
	expect_error([&] { (void)s.wait_for(kvblk::Ticket{et.id + 1000}, std::chrono::milliseconds(1)); }, ENOENT,
		     {"kvblk_kvstore_wait"});
	/* The wrapper refuses a results array of another length. */
	std::vector<kvblk_kvstore_result> one(1);
	expect_error([&] { (void)s.submit(kvblk::KvStoreKind::exists, ex, {.results = one}); }, EINVAL,
		     {"2 ops but 1 results"});
}

TEST(KvstoreCxx, info_stats_check_identify_crc32c)
{
	EXPECT_EQ(kvblk::KvStore::crc32c("123456789", 9), 0xE3069283u);
	EXPECT_EQ(kvblk::KvStore::crc32c("6789", 4, kvblk::KvStore::crc32c("12345", 5)), 0xE3069283u);

	TempDir dir;
	const std::string path = dir.file("d0");
	kvblk::KvStoreCreateOptions c = one_class(64 * KiB, 16 * MiB);
	c.max_meta_bytes = 0; /* no metadata at all */
	kvblk::KvStore s = kvblk::KvStore::create({path}, c);
	const kvblk_kvstore_info info = s.info();
	EXPECT_EQ(info.max_meta_bytes, 0u);
	EXPECT_EQ(info.max_key_bytes, KVBLK_KVSTORE_DEFAULT_MAX_KEY);
	EXPECT_EQ(info.format_version, KVBLK_KVSTORE_FORMAT_VERSION);
	EXPECT_EQ(info.when_full, KVBLK_KVSTORE_EVICT_LRU);
	const std::vector<uint8_t> a = object_bytes("x", 1, 20000);
	expect_error([&] { (void)s.put("x", a.data(), a.size(), "m"); }, EINVAL, {"metadata"});
	ASSERT_EQ(s.put("x", a.data(), a.size()).status, 0);
	std::vector<uint8_t> out(a.size());
	ASSERT_EQ(s.get("x", out.data(), out.size()).status, 0);
	EXPECT_EQ(s.get("y", out.data(), out.size()).status, -ENOENT);

	kvblk_kvstore_stats st = s.stats();
	EXPECT_EQ(st.puts, 1u);
	EXPECT_EQ(st.gets, 2u);
	EXPECT_EQ(st.hits, 1u);
	EXPECT_EQ(st.misses, 1u);
	EXPECT_EQ(st.bytes_read, a.size());
	EXPECT_EQ(st.degraded, 0u);

	/* Another process's view: the superblock and the live counters. */
	const kvblk_kvstore_identity id = kvblk::KvStore::identify(path);
	EXPECT_EQ(id.drive_count, 1u);
	EXPECT_EQ(0, memcmp(id.store_uuid, info.uuid, 16));
	EXPECT_EQ(id.live_pid, int32_t(getpid()));
	EXPECT_EQ(id.superblocks_ok, 2u);
	const kvblk::KvStorePeek peek = kvblk::KvStore::peek_stats(path);
	ASSERT_EQ(peek.drives.size(), 1u);
	EXPECT_EQ(peek.stats.hits, 1u);
	EXPECT_EQ(peek.drives[0].bytes_written, s.drive_info(0).bytes_written);

	s.reset_stats();
	st = s.stats();
	EXPECT_EQ(st.gets + st.puts + st.hits + st.bytes_read, 0u);

	const kvblk_kvstore_check_report r = s.check({.data = true, .repair = false});
	EXPECT_EQ(r.objects, 1u);
	EXPECT_EQ(r.bad_objects, 0u);
	EXPECT_EQ(r.bytes_checked, a.size());
	EXPECT_STREQ(r.first_problem, "");

	s.close();
	expect_error([&] { (void)kvblk::KvStore::peek_stats(path); }, ESRCH, {"no process"});
	EXPECT_EQ(kvblk::KvStore::identify(path).live_pid, 0);
}

} // namespace

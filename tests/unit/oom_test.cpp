// SPDX-License-Identifier: MIT
// Out of memory in the C entry points (all noexcept): every allocation a call makes on the
// calling thread is failed in turn (the k-th, k = 0, 1, ... until a call sees none), and each
// time the call must return -ENOMEM or succeed, never reach std::terminate() (an exception
// leaving a noexcept function), and leave the handle whole: nothing pinned for good, no
// batch lost, no slot taken, and the handle still closes.
//
// Its own program (kvblk_oom_tests): it replaces the global operator new and delete with
// ones that fail on request, for the thread that asks only (library threads allocate as
// ever, so each run is deterministic).
#include "kvstore_util.hpp"
#include "test_util.hpp"

#include <atomic>
#include <cstdlib>
#include <new>
#include <sys/mman.h>

namespace {

/* Allocations left on this thread before the one that fails; -1: none fails. */
thread_local long t_fail_in = -1;
/* An allocation was failed since the last sweep step began. */
thread_local bool t_failed = false;

bool should_fail() noexcept
{
	if (t_fail_in < 0)
		return false;
	if (t_fail_in-- == 0) {
		t_fail_in = -1; /* one failure: the allocations after it succeed */
		t_failed = true;
		return true;
	}
	return false;
}

/* No allocation fails while it lives (a call's set-up or follow-up in a sweep step). */
class Unarmed {
public:
	Unarmed() : saved_(t_fail_in) { t_fail_in = -1; }
	~Unarmed() { t_fail_in = saved_; }
	Unarmed(const Unarmed &) = delete;
	Unarmed &operator=(const Unarmed &) = delete;

private:
	long saved_;
};

void *alloc(std::size_t n, std::size_t align = 0)
{
	if (should_fail())
		throw std::bad_alloc();
	void *p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
						     : std::malloc(n ? n : 1);
	if (!p)
		throw std::bad_alloc();
	return p;
}

void *alloc_nothrow(std::size_t n, std::size_t align = 0) noexcept
{
	try {
		return alloc(n, align);
	} catch (const std::bad_alloc &) {
		return nullptr;
	}
}

} // namespace

void *operator new(std::size_t n)
{
	return alloc(n);
}
void *operator new[](std::size_t n)
{
	return alloc(n);
}
void *operator new(std::size_t n, std::align_val_t a)
{
	return alloc(n, std::size_t(a));
}
void *operator new[](std::size_t n, std::align_val_t a)
{
	return alloc(n, std::size_t(a));
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept
{
	return alloc_nothrow(n);
}
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept
{
	return alloc_nothrow(n);
}
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept
{
	return alloc_nothrow(n, std::size_t(a));
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept
{
	return alloc_nothrow(n, std::size_t(a));
}
void operator delete(void *p) noexcept
{
	std::free(p);
}
void operator delete[](void *p) noexcept
{
	std::free(p);
}
void operator delete(void *p, std::size_t) noexcept
{
	std::free(p);
}
void operator delete[](void *p, std::size_t) noexcept
{
	std::free(p);
}
void operator delete(void *p, std::align_val_t) noexcept
{
	std::free(p);
}
void operator delete[](void *p, std::align_val_t) noexcept
{
	std::free(p);
}
void operator delete(void *p, std::size_t, std::align_val_t) noexcept
{
	std::free(p);
}
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept
{
	std::free(p);
}
void operator delete(void *p, const std::nothrow_t &) noexcept
{
	std::free(p);
}
void operator delete[](void *p, const std::nothrow_t &) noexcept
{
	std::free(p);
}

using namespace kvblk_test;

namespace {

constexpr uint64_t kObj = 64 * KiB;

/*
 * Call @fn with the k-th allocation of this thread failing, for k = 0, 1, ... until a call
 * makes fewer than k + 1 allocations (then nothing failed). @check(ret, failed) runs
 * unarmed after each call. Returns how many calls had an allocation failed.
 */
template <class Fn, class Check> int sweep(Fn fn, Check check, long max_k = 2000)
{
	int failed_calls = 0;
	for (long k = 0; k < max_k; k++) {
		t_failed = false;
		t_fail_in = k;
		const int ret = fn();
		t_fail_in = -1;
		const bool failed = t_failed; /* the k-th allocation happened, and failed */
		check(ret, failed);
		if (::testing::Test::HasFatalFailure())
			return failed_calls;
		if (!failed)
			return failed_calls;
		failed_calls++;
	}
	ADD_FAILURE() << "more than " << max_k << " allocations in one call";
	return failed_calls;
}

class OomTest : public StoreTest, public ::testing::WithParamInterface<BackendCase> {
protected:
	DevPtr open(uint32_t max_batches = 0, uint32_t flags = 0)
	{
		kvblk_open_opts o = make_opts(GetParam().backend, GetParam().workers, GetParam().queue_depth, 0, flags);
		o.max_batches = max_batches;
		return open_dev(path_, o);
	}
};

const BackendCase kOomBackends[] = {
	{"psync", KVBLK_BACKEND_PSYNC, 0, 0},
	{"threadpool2", KVBLK_BACKEND_THREADPOOL, 2, 0},
	{"uring", KVBLK_BACKEND_URING, 1, 16},
};

TEST_P(OomTest, open_and_close)
{
	kvblk_open_opts o = make_opts(GetParam().backend, GetParam().workers, GetParam().queue_depth);
	const int n = sweep(
		[&] {
			kvblk_dev *d = nullptr;
			const int r = kvblk_open(path_.c_str(), &o, &d);
			kvblk_close(d);
			return r;
		},
		[](int ret, bool failed) { EXPECT_TRUE(ret == 0 || (failed && ret == -ENOMEM)) << ret; });
	EXPECT_GT(n, 0);
}

/* kvblk_close() of a handle with batches outstanding (completed, queued): never terminates. */
TEST_P(OomTest, close_with_batches_outstanding)
{
	AlignedBuf mem(4 * kObj);
	DevPtr keep;
	const int n = sweep(
		[&] {
			kvblk_dev *d = nullptr;
			{
				Unarmed u;
				kvblk_open_opts o = make_opts(GetParam().backend, GetParam().workers, GetParam().queue_depth);
				if (kvblk_open(path_.c_str(), &o, &d))
					return -1;
				for (uint32_t i = 0; i < 4; i++) {
					const kvblk_desc desc = plain_desc(i * kObj, kObj, mem.data() + i * kObj, i);
					uint64_t t = 0;
					if (kvblk_submit(d, &desc, 1, nullptr, &t))
						return -2;
				}
			}
			kvblk_close(d); /* void: it must simply return */
			return 0;
		},
		[](int ret, bool) { EXPECT_EQ(ret, 0); });
	(void)n; /* close may allocate nothing at all: that is the point */
}

TEST_P(OomTest, submit_wait_reap_and_load_many)
{
	DevPtr dev = open(2);
	AlignedBuf mem(8 * kObj);
	std::vector<kvblk_desc> d;
	for (uint32_t i = 0; i < 4; i++)
		d.push_back(plain_desc(i * kObj, kObj, mem.data() + i * kObj, i));
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	so.flags = KVBLK_SUBMIT_PER_OBJECT;

	/* kvblk_submit(): -ENOMEM queues nothing (the slots stay free), success is a batch. */
	std::vector<kvblk_result> res(4);
	int n = sweep(
		[&] {
			uint64_t t = 0;
			so.results = res.data();
			const int r = kvblk_submit(dev.get(), d.data(), 4, &so, &t);
			Unarmed u;
			so.results = nullptr;
			if (r == 0) {
				/* Queued: it completes, with its data or (the backend could not start it) -ENOMEM. */
				const int ok = kvblk_wait(dev.get(), t, -1, nullptr);
				EXPECT_TRUE(ok == 4 || (ok == 0 && res[0].status == -ENOMEM)) << ok << " " << res[0].status;
			}
			return r;
		},
		[&](int ret, bool failed) {
			EXPECT_TRUE(ret == 0 || (failed && ret == -ENOMEM)) << ret;
			kvblk_cqe c[8];
			const int left = kvblk_reap(dev.get(), c, 8, 0, 0);
			EXPECT_EQ(left, 0) << "nothing is left behind (ret " << ret << ", failed " << failed << ", flags "
					   << (left > 0 ? c[0].flags : 0) << ", ticket " << (left > 0 ? c[0].ticket : 0) << ")";
		});
	EXPECT_GT(n, 0);

	/* kvblk_wait(): -ENOMEM leaves the batch outstanding, whole. */
	n = sweep(
		[&] {
			uint64_t t = 0;
			{
				Unarmed u;
				if (kvblk_submit(dev.get(), d.data(), 4, &so, &t))
					return -1;
			}
			const int r = kvblk_wait(dev.get(), t, -1, nullptr);
			Unarmed u;
			if (r == -ENOMEM) {
				EXPECT_EQ(kvblk_wait(dev.get(), t, -1, nullptr), 4) << "the batch was lost";
			}
			return r;
		},
		[](int ret, bool failed) { EXPECT_TRUE(ret == 4 || (failed && ret == -ENOMEM)) << ret; });

	/* kvblk_reap(): every entry of a batch is taken exactly once, -ENOMEM or not. */
	n = sweep(
		[&] {
			uint64_t t = 0;
			{
				Unarmed u;
				if (kvblk_submit(dev.get(), d.data(), 4, &so, &t))
					return -1;
			}
			kvblk_cqe c[8];
			int got = 0, r, first = 0;
			while ((r = kvblk_reap(dev.get(), c, 8, 1, -1)) != 0) {
				if (!first)
					first = r;
				if (r < 0) {
					EXPECT_EQ(r, -ENOMEM);
					continue;
				}
				got += r;
				if (c[r - 1].flags & KVBLK_CQE_BATCH)
					break;
			}
			Unarmed u;
			EXPECT_EQ(got, 5) << "4 object entries and the batch entry";
			return first;
		},
		[](int, bool) {});

	/* kvblk_load_many(). */
	std::vector<kvblk_result> r(4);
	n = sweep([&] { return kvblk_load_many(dev.get(), d.data(), 4, r.data(), nullptr); },
		  [](int ret, bool failed) { EXPECT_TRUE(ret == 4 || (failed && ret == -ENOMEM)) << ret; });
	EXPECT_GT(n, 0);
	EXPECT_EQ(kvblk_load_many(dev.get(), d.data(), 4, r.data(), nullptr), 4);
	EXPECT_EQ(std::memcmp(mem.data(), expected_bytes(0, 4 * kObj, kObjectBytes).data(), 4 * kObj), 0);
}

TEST_P(OomTest, register_check_and_unregister_buffers)
{
	DevPtr dev = open();
	AlignedBuf reg(4 * kObj);
	int n = sweep(
		[&] {
			uint32_t id = KVBLK_BUF_NONE;
			const int r = kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id);
			Unarmed u;
			if (r == 0) {
				EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
			}
			return r;
		},
		[](int ret, bool failed) { EXPECT_TRUE(ret == 0 || (failed && ret == -ENOMEM)) << ret; });
	(void)n; /* a registration that succeeds may allocate nothing on this thread */
	/* A refused one says why (a message built in a std::string): -EFAULT, or -ENOMEM. */
	void *ro = mmap(nullptr, 4 * kObj, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(ro, MAP_FAILED);
	n = sweep(
		[&] {
			uint32_t id = KVBLK_BUF_NONE;
			return kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, ro, 4 * kObj, &id);
		},
		[](int ret, bool failed) { EXPECT_TRUE(ret == -EFAULT || (failed && ret == -ENOMEM)) << ret; });
	EXPECT_GT(n, 0);
	munmap(ro, 4 * kObj);
	/* A registration the kernel refuses (RLIMIT_MEMLOCK): it falls back and says why. */
	{
		kvblk::testing::Seams s;
		s.on_fixed_register = [](uint32_t, uint64_t) { return -ENOMEM; };
		SeamGuard sg(s);
		sweep(
			[&] {
				uint32_t id = KVBLK_BUF_NONE;
				const int r = kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id);
				Unarmed u;
				if (r == 0) {
					EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
				}
				return r;
			},
			[](int ret, bool failed) { EXPECT_TRUE(ret == 0 || (failed && ret == -ENOMEM)) << ret; });
	}
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0);
	n = sweep([&] { return kvblk_check_buffer(dev.get(), id); },
		  [](int ret, bool failed) { EXPECT_TRUE(ret == 0 || (failed && ret == -ENOMEM)) << ret; });
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0) << "the check left the buffer pinned";
	/* The buffer was unregistered: every slot is free again (1024 fit). */
	std::vector<uint32_t> ids;
	for (uint32_t i = 0; i < 1024; i++) {
		uint32_t b = 0;
		ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), kObj, &b), 0) << i;
		ids.push_back(b);
	}
	for (uint32_t b : ids)
		EXPECT_EQ(kvblk_unregister_buffer(dev.get(), b), 0);
}

/* kvblk_flush() leaves no pin behind (kvblk_remove_target() works after every failure). */
TEST_P(OomTest, flush_and_targets)
{
	DevPtr dev = open(0, KVBLK_OPEN_WRITE);
	uint32_t id = 0;
	int n = sweep(
		[&] {
			const int r = kvblk_add_target(dev.get(), path_.c_str(), KVBLK_OPEN_WRITE, &id);
			Unarmed u;
			if (r == 0) {
				EXPECT_EQ(kvblk_remove_target(dev.get(), id), 0);
			}
			return r;
		},
		[](int ret, bool failed) { EXPECT_TRUE(ret == 0 || (failed && ret == -ENOMEM)) << ret; });
	EXPECT_GT(n, 0);
	for (uint32_t target : {uint32_t(1), uint32_t(KVBLK_TARGET_ALL)}) {
		n = sweep(
			[&] {
				{
					Unarmed u;
					if (kvblk_add_target(dev.get(), path_.c_str(), KVBLK_OPEN_WRITE, &id))
						return -1;
				}
				const int r = kvblk_flush(dev.get(), target == 1 ? id : target, 0);
				Unarmed u;
				EXPECT_EQ(kvblk_remove_target(dev.get(), id), 0) << "kvblk_flush left target " << id << " pinned";
				return r;
			},
			[](int ret, bool failed) { EXPECT_TRUE(ret == 0 || (failed && ret == -ENOMEM)) << ret; });
		EXPECT_GT(n, 0);
	}
	ASSERT_EQ(kvblk_add_target(dev.get(), path_.c_str(), 0, &id), 0);
	kvblk_dev_info info{};
	info.info_size = sizeof(info);
	sweep([&] { return kvblk_get_target_info(dev.get(), id, &info); },
	      [](int ret, bool failed) { EXPECT_TRUE(ret == 0 || (failed && ret == -ENOMEM)) << ret; });
	EXPECT_EQ(kvblk_remove_target(dev.get(), id), 0);
}

/*
 * Unaligned stores (their read-modify-write plan, bounce area and range locks) and loads cut at
 * the end of the file: -ENOMEM or done, and the handle whole afterwards.
 */
TEST_P(OomTest, unaligned_stores_and_short_loads)
{
	DevPtr dev = open(0, KVBLK_OPEN_WRITE);
	AlignedBuf src(4 * kObj);
	for (uint64_t i = 0; i < src.size(); i++)
		src.data()[i] = uint8_t(i * 7 + 3);
	/* Objects 0 and 1 share an edge block; 2 has a misaligned source (its whole blocks bounced). */
	std::vector<kvblk_desc> d = {plain_desc(100, 5000, src.data() + 1, 0), plain_desc(5100, 300, src.data() + 7001, 1),
				     plain_desc(kObj + 3, kObj, src.data() + kObj + 9, 2)};
	for (kvblk_desc &x : d)
		x.flags = KVBLK_DESC_UNALIGNED;
	std::vector<kvblk_result> r(3);
	int n = sweep([&] { return kvblk_store_many(dev.get(), d.data(), 3, r.data(), nullptr); },
		      [](int ret, bool failed) { EXPECT_TRUE(ret == 3 || (failed && ret == -ENOMEM)) << ret; });
	EXPECT_GT(n, 0);
	AlignedBuf back(2 * kObj + 64, 0);
	std::vector<kvblk_desc> l = d;
	for (size_t i = 0; i < l.size(); i++)
		l[i].addr = uint64_t(uintptr_t(back.data() + (i == 2 ? kObj : i * 6000)));
	ASSERT_EQ(kvblk_load_many(dev.get(), l.data(), 3, r.data(), nullptr), 3) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(back.data(), src.data() + 1, 5000), 0);
	EXPECT_EQ(std::memcmp(back.data() + 6000, src.data() + 7001, 300), 0);
	EXPECT_EQ(std::memcmp(back.data() + kObj, src.data() + kObj + 9, kObj), 0);

	/* A load that reaches past the end of the file: cut, or -ENOMEM. */
	kvblk_desc past = plain_desc(kObjects * kObjectBytes - 100, 3000, back.data() + 5, 9);
	past.flags = KVBLK_DESC_UNALIGNED | KVBLK_DESC_SHORT_EOF;
	kvblk_result pr{};
	n = sweep([&] { return kvblk_load_many(dev.get(), &past, 1, &pr, nullptr); },
		  [&](int ret, bool failed) {
			  EXPECT_TRUE(ret == 1 || (failed && ret == -ENOMEM)) << ret;
			  if (ret == 1) {
				  EXPECT_EQ(pr.bytes, 100u);
			  }
		  });
	EXPECT_GT(n, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, OomTest, ::testing::ValuesIn(kOomBackends), case_name);

/*
 * The store's synchronous calls under the same sweep: each put, get, exists and delete of a
 * batch of three keys returns its count, or -ENOMEM when an allocation failed, never
 * terminates; a key whose put or delete was not acknowledged (status 0) keeps what it had,
 * an acknowledged one has the new state, and so does the store reopened.
 */
class KvstoreOomTest : public ::testing::TestWithParam<uint32_t> {
protected:
	kvs_test::TempDir dir;
};

TEST_P(KvstoreOomTest, put_get_exists_delete_lose_nothing)
{
	const std::string path = dir.file("d0");
	const char *paths[] = {path.c_str()};
	auto c = kvs_test::create_opts({64 * kvs_test::KiB}, 32 * kvs_test::MiB);
	auto o = kvs_test::open_opts(GetParam());
	kvblk_kvstore *st = nullptr;
	ASSERT_EQ(kvblk_kvstore_create(paths, 1, &c, &o, &st), 0) << kvblk_kvstore_last_error();
	const std::string keys[3] = {"oom-a", "oom-b", "oom-c"};
	const uint64_t len[3] = {4096, 5000, 64 * kvs_test::KiB};
	uint64_t have[3] = {0, 0, 0}; /* the acknowledged version of each key; 0: none */
	std::vector<kvblk_kvstore_result> r(3);

	/* Each key as the acknowledgements say, read unarmed. */
	auto check_all = [&](const char *when) {
		Unarmed u;
		for (int i = 0; i < 3; i++) {
			kvs_test::Buf b(len[i]);
			kvblk_kvstore_op g = kvs_test::op_for(keys[i], b.p, len[i]);
			kvblk_kvstore_result gr{};
			const int ret = kvblk_kvstore_get(st, &g, 1, &gr);
			if (!have[i]) {
				EXPECT_EQ(gr.status, -ENOENT) << when << " " << keys[i];
				continue;
			}
			ASSERT_EQ(ret, 1) << when << " " << keys[i] << ": " << gr.status;
			EXPECT_EQ(std::vector<uint8_t>(b.p, b.p + len[i]), kvs_test::object_bytes(keys[i], have[i], len[i]))
				<< when << " " << keys[i] << " version " << have[i];
		}
	};

	uint64_t v = 0;
	std::vector<std::vector<uint8_t>> src(3);
	std::vector<kvblk_kvstore_op> ops(3);
	int n = sweep(
		[&] {
			{
				Unarmed u;
				v++;
				for (int i = 0; i < 3; i++) {
					src[i] = kvs_test::object_bytes(keys[i], v, len[i]);
					ops[i] = kvs_test::op_for(keys[i], src[i].data(), len[i]);
				}
			}
			return kvblk_kvstore_put(st, ops.data(), 3, r.data());
		},
		[&](int ret, bool failed) {
			EXPECT_TRUE(ret == 3 || (failed && (ret == -ENOMEM || ret >= 0))) << ret;
			for (int i = 0; ret >= 0 && i < 3; i++) {
				EXPECT_TRUE(r[i].status == 0 || r[i].status == -ENOMEM) << r[i].status;
				if (r[i].status == 0)
					have[i] = v;
			}
			check_all("after a put");
		});
	EXPECT_GT(n, 0);

	std::vector<kvs_test::Buf> dst;
	for (int i = 0; i < 3; i++)
		dst.emplace_back(len[i]);
	n = sweep(
		[&] {
			{
				Unarmed u;
				for (int i = 0; i < 3; i++) {
					memset(dst[i].p, 0, len[i]);
					ops[i] = kvs_test::op_for(keys[i], dst[i].p, len[i]);
				}
			}
			return kvblk_kvstore_get(st, ops.data(), 3, r.data());
		},
		[&](int ret, bool failed) {
			EXPECT_TRUE(ret == 3 || (failed && (ret == -ENOMEM || ret >= 0))) << ret;
			for (int i = 0; ret >= 0 && i < 3; i++) {
				EXPECT_TRUE(r[i].status == 0 || r[i].status == -ENOMEM) << r[i].status;
				if (r[i].status == 0) {
					Unarmed u;
					EXPECT_EQ(std::vector<uint8_t>(dst[i].p, dst[i].p + len[i]),
						  kvs_test::object_bytes(keys[i], have[i], len[i]));
				}
			}
		});
	EXPECT_GT(n, 0);

	/* exists and delete name the keys alone. */
	auto key_ops = [&] {
		Unarmed u;
		for (int i = 0; i < 3; i++)
			ops[i] = kvs_test::op_for(keys[i], nullptr, 0);
	};
	n = sweep(
		[&] {
			key_ops();
			return kvblk_kvstore_exists(st, ops.data(), 3, r.data());
		},
		[&](int ret, bool failed) {
			EXPECT_TRUE(ret == 3 || (failed && (ret == -ENOMEM || ret >= 0))) << ret;
			for (int i = 0; ret >= 0 && i < 3; i++)
				EXPECT_TRUE(r[i].status == 0 || r[i].status == -ENOMEM) << r[i].status;
		});
	EXPECT_GT(n, 0);

	n = sweep(
		[&] {
			key_ops();
			return kvblk_kvstore_delete(st, ops.data(), 3, r.data());
		},
		[&](int ret, bool failed) {
			EXPECT_TRUE(ret >= 0 || (failed && ret == -ENOMEM)) << ret;
			for (int i = 0; ret >= 0 && i < 3; i++) {
				EXPECT_TRUE(r[i].status == 0 || r[i].status == -ENOENT || r[i].status == -ENOMEM)
					<< r[i].status;
				if (r[i].status == 0)
					have[i] = 0;
			}
			check_all("after a delete");
		});
	EXPECT_GT(n, 0);

	/* The index on the drive says the same. */
	kvblk_kvstore_close(st);
	st = nullptr;
	ASSERT_EQ(kvblk_kvstore_open(paths, 1, &o, &st), 0) << kvblk_kvstore_last_error();
	check_all("reopened");
	kvblk_kvstore_close(st);
}

INSTANTIATE_TEST_SUITE_P(Backends, KvstoreOomTest, ::testing::Values(KVBLK_BACKEND_PSYNC, KVBLK_BACKEND_URING),
			 [](const ::testing::TestParamInfo<uint32_t> &i) {
				 return std::string(i.param == KVBLK_BACKEND_PSYNC ? "psync" : "uring");
			 });

} // namespace

// SPDX-License-Identifier: MIT
// kvblk_register_buffer()/kvblk_unregister_buffer(): rules, ids and the limit, -EBUSY while
// a load runs, and the RLIMIT_MEMLOCK fallback both injected and for real.
#include "test_util.hpp"
#include "libkvblk/buffers.hpp"

#include <chrono>
#include <condition_variable>
#include <linux/capability.h>
#include <mutex>
#include <set>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <thread>

using namespace kvblk_test;
using kvblk::testing::CommandInfo;
using kvblk::testing::Seams;

namespace {

class BufferTest : public StoreTest {
protected:
	/* Load objects [0, n) into registered buffer @id and check them. */
	void load_into(kvblk_dev *dev, uint32_t id, const AlignedBuf &buf, uint64_t n)
	{
		std::vector<kvblk_desc> d;
		for (uint64_t i = 0; i < n; i++)
			d.push_back(buf_desc(i * kObjectBytes, kObjectBytes, id, i * kObjectBytes, i));
		std::vector<kvblk_result> r(n);
		ASSERT_EQ(kvblk_load_many(dev, d.data(), uint32_t(n), r.data(), nullptr), int(n)) << kvblk_last_error();
		const auto want = expected_bytes(0, n * kObjectBytes, kObjectBytes);
		EXPECT_EQ(std::memcmp(buf.data(), want.data(), want.size()), 0);
	}
};

TEST_F(BufferTest, registration_rules)
{
	DevPtr dev = open_dev(path_, make_opts(KVBLK_BACKEND_URING));
	const kvblk_dev_info info = get_info(dev.get());
	AlignedBuf buf(64 * KiB);
	uint32_t id = 12345;
	EXPECT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data() + info.mem_align / 2, 4096, &id), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("not aligned to mem_align"), std::string::npos);
	EXPECT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data(), 0, &id), -EINVAL);
	EXPECT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, nullptr, 4096, &id), -EINVAL);
	EXPECT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data(), 4096, nullptr), -EINVAL);
	EXPECT_EQ(kvblk_register_buffer(nullptr, KVBLK_MEM_HOST, buf.data(), 4096, &id), -EINVAL);
	EXPECT_EQ(kvblk_register_buffer(dev.get(), 7, buf.data(), 4096, &id), -EINVAL);
	/* Host memory as CUDA memory: no runtime (-EOPNOTSUPP), no GPU (-ENODEV), not device memory (-EINVAL). */
	const int rc = kvblk_register_buffer(dev.get(), KVBLK_MEM_CUDA, buf.data(), 4096, &id);
	EXPECT_TRUE(rc == -EOPNOTSUPP || rc == -ENODEV || rc == -EINVAL) << rc;
	EXPECT_NE(std::string(kvblk_last_error()).find("CUDA"), std::string::npos) << kvblk_last_error();
	EXPECT_EQ(id, 12345u) << "id written by a failed registration";
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), 3), -ENOENT);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), KVBLK_BUF_NONE), -ENOENT);
	EXPECT_EQ(kvblk_unregister_buffer(nullptr, 0), -EINVAL);
	EXPECT_EQ(get_stats(dev.get()).memlock_fallbacks, 0u);
}

TEST_F(BufferTest, ids_are_unique_reused_and_limited_to_1024)
{
	DevPtr dev = open_dev(path_, make_opts(KVBLK_BACKEND_URING, 2));
	AlignedBuf buf(1025 * 4096);
	std::set<uint32_t> ids;
	for (uint32_t i = 0; i < 1024; i++) {
		uint32_t id = KVBLK_BUF_NONE;
		ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data() + i * 4096, 4096, &id), 0) << i;
		ASSERT_LT(id, 1024u);
		ids.insert(id);
	}
	EXPECT_EQ(ids.size(), 1024u);
	uint32_t id = KVBLK_BUF_NONE;
	EXPECT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data() + 1024 * 4096, 4096, &id), -ENOSPC);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), 500), 0);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), 500), -ENOENT);
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data() + 1024 * 4096, 4096, &id), 0);
	EXPECT_EQ(id, 500u);
	EXPECT_EQ(get_stats(dev.get()).memlock_fallbacks, 0u);

	/* A load through the re-registered slot reaches the new memory. */
	const kvblk_desc d = buf_desc(3 * kObjectBytes, 4096, id, 0, 9);
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(dev.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(buf.data() + 1024 * 4096, expected_bytes(3 * kObjectBytes, 4096, kObjectBytes).data(), 4096), 0);
	EXPECT_TRUE(buf.all(500 * 4096, 4096, 0xA5)) << "the old memory of slot 500 was written";
}

TEST_F(BufferTest, unregister_while_a_load_runs_is_ebusy)
{
	std::mutex m;
	std::condition_variable cv;
	bool in_load = false, release = false;
	Seams s;
	s.on_complete = [&](const CommandInfo &, int64_t res) -> int64_t {
		std::unique_lock<std::mutex> lk(m);
		if (!in_load) {
			in_load = true;
			cv.notify_all();
			cv.wait_for(lk, std::chrono::seconds(20), [&] { return release; });
		}
		return res;
	};
	SeamGuard g(s);
	DevPtr dev = open_dev(path_, make_opts(KVBLK_BACKEND_PSYNC));
	AlignedBuf buf(kObjectBytes), other(4096);
	uint32_t id = KVBLK_BUF_NONE;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data(), buf.size(), &id), 0);

	int rc = 0;
	kvblk_result r{};
	std::thread loader([&] {
		const kvblk_desc d = buf_desc(0, kObjectBytes, id, 0, 1);
		rc = kvblk_load_many(dev.get(), &d, 1, &r, nullptr);
	});
	{
		std::unique_lock<std::mutex> lk(m);
		ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(20), [&] { return in_load; }));
	}
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), -EBUSY);
	EXPECT_NE(std::string(kvblk_last_error()).find("is running"), std::string::npos);
	/* Registration runs concurrently with the load. */
	uint32_t id2 = KVBLK_BUF_NONE;
	EXPECT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, other.data(), other.size(), &id2), 0);
	EXPECT_NE(id2, id);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id2), 0);
	{
		std::lock_guard<std::mutex> lk(m);
		release = true;
	}
	cv.notify_all();
	loader.join();
	EXPECT_EQ(rc, 1);
	EXPECT_EQ(r.status, 0);
	EXPECT_EQ(std::memcmp(buf.data(), expected_bytes(0, kObjectBytes, kObjectBytes).data(), kObjectBytes), 0);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
}

TEST_F(BufferTest, memlock_fallback_injected)
{
	for (uint32_t rings : {1u, 3u}) {
		SCOPED_TRACE(rings);
		std::atomic<int> calls{0};
		Seams s;
		s.on_fixed_register = [&](uint32_t, uint64_t) {
			calls++;
			return -ENOMEM;
		};
		SeamGuard g(s);
		DevPtr dev = open_dev(path_, make_opts(KVBLK_BACKEND_URING, rings));
		AlignedBuf buf(4 * kObjectBytes);
		uint32_t id = KVBLK_BUF_NONE;
		ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data(), buf.size(), &id), 0);
		EXPECT_EQ(calls.load(), 1);
		const std::string note = kvblk_last_error();
		EXPECT_NE(note.find("RLIMIT_MEMLOCK"), std::string::npos) << note;
		EXPECT_NE(note.find("plain reads"), std::string::npos) << note;
		EXPECT_EQ(get_stats(dev.get()).memlock_fallbacks, 1u);
		load_into(dev.get(), id, buf, 4);
		const kvblk_stats st = get_stats(dev.get());
		EXPECT_EQ(st.memlock_fallbacks, 1u);
		EXPECT_EQ(st.bytes_read, 4 * kObjectBytes);
		EXPECT_EQ(st.commands, 4 * (kObjectBytes / get_info(dev.get()).max_cmd_bytes));
	}
}

TEST_F(BufferTest, baselines_have_no_fixed_buffers_to_fall_back_from)
{
	Seams s;
	s.on_fixed_register = [](uint32_t, uint64_t) { return -ENOMEM; };
	SeamGuard g(s);
	for (kvblk_backend b : {KVBLK_BACKEND_PSYNC, KVBLK_BACKEND_THREADPOOL}) {
		DevPtr dev = open_dev(path_, make_opts(b));
		AlignedBuf buf(2 * kObjectBytes);
		uint32_t id = KVBLK_BUF_NONE;
		ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, buf.data(), buf.size(), &id), 0);
		EXPECT_EQ(get_stats(dev.get()).memlock_fallbacks, 0u);
		load_into(dev.get(), id, buf, 2);
	}
}

TEST_F(BufferTest, memlock_fallback_for_real)
{
	const std::string path = path_;
	const ChildReport rep = run_in_child([&](ChildReport &out) {
		const std::string why = drop_capability(CAP_IPC_LOCK);
		if (!why.empty()) {
			out.skip = 1;
			out.say("cannot drop CAP_IPC_LOCK: " + why);
			return;
		}
		const rlimit rl{64 * 1024, 64 * 1024};
		if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
			out.skip = 1;
			out.say(std::string("setrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno));
			return;
		}
		kvblk_open_opts o = make_opts(KVBLK_BACKEND_URING);
		kvblk_dev *dev = nullptr;
		out.v[0] = kvblk_open(path.c_str(), &o, &dev);
		if (out.v[0]) {
			out.say(kvblk_last_error());
			return;
		}
		AlignedBuf buf(4 * kObjectBytes);
		uint32_t id = KVBLK_BUF_NONE;
		out.v[1] = kvblk_register_buffer(dev, KVBLK_MEM_HOST, buf.data(), buf.size(), &id);
		out.say(kvblk_last_error());
		kvblk_stats st{};
		st.stats_size = sizeof(st);
		kvblk_get_stats(dev, &st);
		out.v[2] = int64_t(st.memlock_fallbacks);
		std::vector<kvblk_desc> d;
		for (uint64_t i = 0; i < 4; i++)
			d.push_back(buf_desc(i * kObjectBytes, kObjectBytes, id, i * kObjectBytes, i));
		std::vector<kvblk_result> r(4);
		out.v[3] = kvblk_load_many(dev, d.data(), 4, r.data(), nullptr);
		const auto want = expected_bytes(0, 4 * kObjectBytes, kObjectBytes);
		out.v[4] = std::memcmp(buf.data(), want.data(), want.size()) == 0;
		/* A buffer that fits the limit still becomes a fixed buffer. */
		AlignedBuf small(16 * 1024);
		uint32_t id2 = KVBLK_BUF_NONE;
		out.v[5] = kvblk_register_buffer(dev, KVBLK_MEM_HOST, small.data(), small.size(), &id2);
		kvblk_get_stats(dev, &st);
		out.v[6] = int64_t(st.memlock_fallbacks);
		kvblk_close(dev);
	});
	ASSERT_TRUE(rep.delivered) << "the child died";
	if (rep.skip)
		GTEST_SKIP() << rep.msg;
	ASSERT_EQ(rep.v[0], 0) << rep.msg;
	EXPECT_EQ(rep.v[1], 0) << "register: " << rep.msg;
	EXPECT_EQ(rep.v[2], 1) << "memlock_fallbacks after a 4 MiB registration under a 64 KiB limit";
	const std::string note = rep.msg;
	EXPECT_NE(note.find("RLIMIT_MEMLOCK"), std::string::npos) << note;
	EXPECT_NE(note.find("65536 bytes"), std::string::npos) << note;
	EXPECT_EQ(rep.v[3], 4) << "load into the fallen-back buffer";
	EXPECT_EQ(rep.v[4], 1) << "bytes exact";
	EXPECT_EQ(rep.v[5], 0);
	EXPECT_EQ(rep.v[6], 1) << "the 16 KiB buffer fits under the limit";
}

/* A batch's set of pinned buffer ids: for_each() visits exactly its members, in order. */
TEST(PinSetTest, for_each_visits_exactly_the_members)
{
	kvblk::detail::PinSet p;
	EXPECT_TRUE(p.none());
	const std::vector<uint32_t> ids{0, 1, 63, 64, 127, 500, kvblk::detail::kMaxBuffers - 1};
	for (uint32_t id : ids)
		p.set(id);
	p.set(64); /* twice: still one member */
	EXPECT_FALSE(p.none());
	std::vector<uint32_t> seen;
	p.for_each([&](uint32_t id) { seen.push_back(id); });
	EXPECT_EQ(seen, ids);
	EXPECT_TRUE(p.test(63));
	EXPECT_FALSE(p.test(62));
	EXPECT_FALSE(p.test(65));
	p.reset();
	EXPECT_TRUE(p.none());
	seen.clear();
	p.for_each([&](uint32_t id) { seen.push_back(id); });
	EXPECT_TRUE(seen.empty());
}

} // namespace

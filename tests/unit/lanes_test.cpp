// SPDX-License-Identifier: MIT
// The lane split of a kmod device (libkvblk/lanes.hpp), with userspace backends standing in
// for kvblk.ko contexts (no kvblk.ko here; tests/vm runs the real one): a batch across
// targets on different lanes is split, the lanes run at once, results land on their objects,
// counters merge, every lane's backend is named in served_by, registered buffers reach lanes
// made later, and device memory a lane cannot reach fails only its objects.
#include "gate.hpp"
#include "test_util.hpp"

#include "libkvblk/lanes.hpp"
#include "libkvblk/last_error.hpp"

#include <atomic>
#include <future>
#include <set>
#include <thread>

using namespace kvblk_test;
using namespace kvblk::detail;

namespace {

constexpr uint64_t kBytes = 64 * KiB;

/*
 * "kvblk.ko" for the test: reads with pread, takes device memory (host memory in disguise).
 * Added targets: refused as by a kvblk.ko without KVBLK_FEAT_TARGETS, unless @takes_targets
 * (then every one but @refuse is "attached to its context" as kvblk.ko target 100 + id).
 */
class FakeKmod final : public Backend {
public:
	kvblk_backend kind() const noexcept override { return KVBLK_BACKEND_KMOD; }
	int run(Batch &b) noexcept override
	{
		runs++;
		threads.insert(std::this_thread::get_id());
		for (uint32_t i = 0; i < b.count; i++) {
			if (b.cancelled()) {	/* as psync and kvblk.ko: what is not issued yet ends */
				b.results[i].status = -ECANCELED;
				b.results[i].bytes = 0;
				continue;
			}
			const IoObject &o = b.objects[i];
			const ssize_t n = pread(o.fd, o.mem, o.length, off_t(o.offset));
			b.results[i].status = n == ssize_t(o.length) ? 0 : -EIO;
			b.results[i].bytes = n == ssize_t(o.length) ? o.length : 0;
			b.counters.commands++;
		}
		return 0;
	}
	int register_device_buffer(uint32_t, int, int, uint64_t, uint64_t) noexcept override { return 0; }
	/* Pinning (KVBLK_IOC_REGISTER_BUFFER: seconds per GiB): held at @pin_gate when set. */
	BufferRegistration register_buffer(uint32_t, uint8_t *, uint64_t) noexcept override
	{
		if (pin_gate)
			pin_gate->wait();
		return {};
	}
	Gate *pin_gate = nullptr;
	/* What KVBLK_IOC_CHECK_BUFFER would say of buffer @stale_id. */
	int check_buffer(uint32_t id) noexcept override
	{
		checks++;
		return id == stale_id ? -ESTALE : 0;
	}
	int add_target(uint32_t id, BackendConfig &t) noexcept override
	{
		if (!takes_targets || id == refuse)
			return fail(-EOPNOTSUPP, "kvblk.ko without KVBLK_FEAT_TARGETS");
		t.max_cmd_bytes = 1020 * KiB;
		t.queue_depth = 64;
		t.note = "target " + std::to_string(100 + id) + " of the device's kvblk.ko context, fake engine";
		attached.insert(id);
		return 0;
	}
	void remove_target(uint32_t id) noexcept override { removed.insert(id); }
	std::set<std::thread::id> threads;
	uint32_t stale_id = UINT32_MAX;
	int checks = 0;
	int runs = 0;
	bool takes_targets = false;
	uint32_t refuse = UINT32_MAX;
	std::set<uint32_t> attached, removed;
};

BackendConfig config_of(int fd, uint64_t size)
{
	BackendConfig c;
	c.fd = fd;
	c.path = "test";
	c.logical_block_size = 512;
	c.mem_align = 512;
	c.capacity = size;
	c.max_cmd_bytes = 16 * KiB;
	c.queue_depth = 8;
	c.workers = 2;
	c.eagain_retries = 4;
	return c;
}

class LanesTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		for (int i = 0; i < 3; i++) {
			const std::string p = dir_.file("t" + std::to_string(i));
			write_pattern_file(p, 4, kBytes);
			fds_[i] = open(p.c_str(), O_RDWR | O_CLOEXEC);
			ASSERT_GE(fds_[i], 0);
		}
		auto k = std::make_unique<FakeKmod>();
		kmod_ = k.get();
		/* Target 1 gets a "kvblk.ko" lane of its own, everything else the shared uring lane. */
		lanes_ = std::make_unique<Lanes>(std::move(k), [this](Lanes &l, uint32_t id, BackendConfig &t,
								      std::string *why) -> int {
			int err = 0;
			if (id == 1) {
				*why = "kmod lane";
				auto be = std::make_unique<FakeKmod>();
				kmod1_ = be.get();
				return int(l.add_lane(std::move(be)));
			}
			*why = "uring lane";
			for (uint32_t i = 1; i < l.lane_count(); i++)
				if (l.lane_exists(i) && l.lane(i).kind() == KVBLK_BACKEND_URING)
					return int(i);
			auto be = make_uring_backend(t, &err);
			if (!be)
				return err;
			return int(l.add_lane(std::move(be)));
		});
	}
	void TearDown() override
	{
		lanes_.reset();
		for (int fd : fds_)
			close(fd);
	}

	IoObject obj(uint32_t target, uint64_t offset, uint8_t *mem) const
	{
		IoObject o{};
		o.offset = offset;
		o.length = kBytes;
		o.mem = mem;
		o.buf_id = KVBLK_BUF_NONE;
		o.fixed_index = -1;
		o.fd = fds_[target];
		o.target = target;
		return o;
	}

	int add(uint32_t id)
	{
		BackendConfig c = config_of(fds_[id], 4 * kBytes);
		return lanes_->add_target(id, c);
	}

	TempDir dir_;
	int fds_[3] = {-1, -1, -1};
	std::unique_ptr<Lanes> lanes_;
	FakeKmod *kmod_ = nullptr;
	FakeKmod *kmod1_ = nullptr;
};

TEST_F(LanesTest, batch_split_by_lane_and_merged)
{
	ASSERT_EQ(add(1), 0);
	ASSERT_EQ(add(2), 0);
	EXPECT_EQ(lanes_->lane_of(0), 0u);
	EXPECT_EQ(lanes_->lane_of(1), 1u);
	EXPECT_EQ(lanes_->lane_of(2), 2u);
	std::string why;
	EXPECT_EQ(lanes_->target_kind(2, IoDir::read, &why), KVBLK_BACKEND_URING);
	EXPECT_EQ(why, "uring lane");

	/* Objects of the three targets interleaved: 0,1,2,0,1,2,... */
	constexpr uint32_t kN = 12;
	AlignedBuf dst(kN * kBytes);
	std::vector<IoObject> objs;
	std::vector<kvblk_result> res(kN);
	for (uint32_t i = 0; i < kN; i++) {
		objs.push_back(obj(i % 3, (i / 3) * kBytes, dst.data() + i * kBytes));
		res[i] = kvblk_result{0, 0, 0, 100 + i};
	}
	Batch b{IoDir::read, objs.data(), kN, res.data(), {}};
	ASSERT_EQ(lanes_->run(b), 0);
	for (uint32_t i = 0; i < kN; i++) {
		SCOPED_TRACE(i);
		EXPECT_EQ(res[i].status, 0);
		EXPECT_EQ(res[i].bytes, kBytes);
		EXPECT_EQ(res[i].tag, 100 + i);
		/* Every file holds the same pattern: object i/3 of 4. */
		EXPECT_EQ(std::memcmp(dst.data() + i * kBytes, expected_bytes((i / 3) * kBytes, kBytes, kBytes).data(), kBytes), 0);
	}
	EXPECT_EQ(b.counters.served_by, (1u << KVBLK_BACKEND_KMOD) | (1u << KVBLK_BACKEND_URING));
	/* 4 objects per fake lane (1 command each) + 4 uring objects of 4 commands (16 KiB). */
	EXPECT_EQ(b.counters.commands, 4u + 4u + 4u * 4u);
	/* Lane 0 ran on the calling thread, lane 1 on its own. */
	EXPECT_EQ(kmod_->threads, std::set<std::thread::id>{std::this_thread::get_id()});
	ASSERT_NE(kmod1_, nullptr);
	EXPECT_EQ(kmod1_->threads.size(), 1u);
	EXPECT_EQ(kmod1_->threads.count(std::this_thread::get_id()), 0u);
}

/* kvblk_cancel() of a running batch reaches the part each lane runs. */
TEST_F(LanesTest, cancel_reaches_every_lane)
{
	struct Cancelled final : BatchSink {
		void object_done(uint32_t) noexcept override {}
		bool cancelled() const noexcept override { return true; }
		void batch_done(int) noexcept override {}
	} sink;
	ASSERT_EQ(add(1), 0);
	constexpr uint32_t kN = 6;
	AlignedBuf dst(kN * kBytes);
	std::memset(dst.data(), 0x5a, kN * kBytes);
	std::vector<IoObject> objs;
	std::vector<kvblk_result> res(kN);
	for (uint32_t i = 0; i < kN; i++) {	/* targets 0,1,0,1,...: lane 0 and lane 1 */
		objs.push_back(obj(i % 2, (i / 2) * kBytes, dst.data() + i * kBytes));
		res[i] = kvblk_result{0, 0, 0, i};
	}
	Batch b{IoDir::read, objs.data(), kN, res.data(), {}};
	b.sink = &sink;
	ASSERT_EQ(lanes_->run(b), 0);
	for (uint32_t i = 0; i < kN; i++) {
		SCOPED_TRACE(i);
		EXPECT_EQ(res[i].status, -ECANCELED);
		EXPECT_EQ(res[i].bytes, 0u);
	}
	const std::vector<uint8_t> untouched(kN * kBytes, 0x5a);
	EXPECT_EQ(std::memcmp(dst.data(), untouched.data(), kN * kBytes), 0) << "a cancelled object was read";
}

/*
 * A registration pins its pages with the lanes' registration lock only: while lane 0's
 * backend is pinning (held at a gate), batches are started and split (can_start(), run()),
 * and targets are placed and queried (lane_of(), target_kind()) on other threads.
 */
TEST_F(LanesTest, batches_and_queries_do_not_wait_for_a_registration)
{
	ASSERT_EQ(add(1), 0);
	ASSERT_EQ(add(2), 0);
	Gate pin;
	GateOpener go{pin};
	kmod_->pin_gate = &pin;
	AlignedBuf reg(kBytes);
	auto registering = std::async(std::launch::async, [&] { return lanes_->register_buffer(5, reg.data(), kBytes); });
	ASSERT_TRUE(pin.wait_arrived()) << "lane 0 is pinning";

	AlignedBuf dst(3 * kBytes);
	auto others = std::async(std::launch::async, [&] {
		std::vector<IoObject> objs = {obj(0, 0, dst.data()), obj(1, kBytes, dst.data() + kBytes),
					      obj(2, 2 * kBytes, dst.data() + 2 * kBytes)};
		std::vector<kvblk_result> res(3);
		Batch b{IoDir::read, objs.data(), 3, res.data(), {}};
		std::string why;
		const bool ok = !lanes_->can_start(b) && lanes_->lane_of(2) == 2 &&
				lanes_->target_kind(2, IoDir::read, &why) == KVBLK_BACKEND_URING && lanes_->run(b) == 0;
		return ok && res[0].status == 0 && res[1].status == 0 && res[2].status == 0;
	});
	const bool done = others.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
	pin.open();
	EXPECT_TRUE(done) << "a batch or a query waited for the registration";
	EXPECT_TRUE(others.get());
	EXPECT_EQ(registering.get().error, 0);
	for (uint32_t i = 0; i < 3; i++)
		EXPECT_EQ(std::memcmp(dst.data() + i * kBytes, expected_bytes(i * kBytes, kBytes, kBytes).data(), kBytes), 0) << i;
	lanes_->unregister_buffer(5, -1);
}

TEST_F(LanesTest, all_on_lane_zero_is_not_split)
{
	AlignedBuf dst(kBytes);
	IoObject o = obj(0, 0, dst.data());
	kvblk_result r{};
	Batch b{IoDir::read, &o, 1, &r, {}};
	ASSERT_EQ(lanes_->run(b), 0);
	EXPECT_EQ(r.status, 0);
	EXPECT_EQ(b.counters.served_by, 0u) << "one backend: counted as the device's";
	EXPECT_EQ(b.counters.commands, 1u);
}

TEST_F(LanesTest, buffers_reach_lanes_made_later)
{
	std::atomic<int> fixed_regs{0};
	kvblk::testing::Seams s;
	s.on_fixed_register = [&](uint32_t, uint64_t) {
		fixed_regs++;
		return 0;
	};
	SeamGuard g(s);
	AlignedBuf reg(2 * kBytes);
	BufferRegistration r0 = lanes_->register_buffer(5, reg.data(), reg.size());
	EXPECT_EQ(r0.fixed_index, -1) << "lane 0 (the fake) maps nothing";
	EXPECT_EQ(fixed_regs.load(), 0);
	ASSERT_EQ(add(2), 0); /* makes the uring lane: the buffer is registered with it */
	EXPECT_EQ(fixed_regs.load(), 1);

	IoObject o = obj(2, kBytes, reg.data() + kBytes);
	o.buf_id = 5;
	o.buf_offset = kBytes;
	IoObject o0 = obj(0, 0, reg.data());
	o0.buf_id = 5;
	IoObject both[2] = {o0, o};
	kvblk_result res[2] = {};
	Batch b{IoDir::read, both, 2, res, {}};
	ASSERT_EQ(lanes_->run(b), 0);
	EXPECT_EQ(res[0].status, 0);
	EXPECT_EQ(res[1].status, 0);
	EXPECT_EQ(std::memcmp(reg.data() + kBytes, expected_bytes(kBytes, kBytes, kBytes).data(), kBytes), 0);
	lanes_->unregister_buffer(5, r0.fixed_index);
}

/*
 * kvblk_check_buffer() of a kmod device asks every kvblk.ko context that pinned the buffer:
 * lane 0's and another kmod lane's answers reach the caller (without the lanes' forwarding
 * the default said 0 while kvblk.ko said stale).
 */
TEST_F(LanesTest, check_buffer_asks_every_lane_that_pinned_it)
{
	AlignedBuf reg(2 * kBytes);
	ASSERT_FALSE(lanes_->register_buffer(5, reg.data(), reg.size()).error);
	ASSERT_EQ(add(1), 0); /* a second "kvblk.ko" lane: the buffer is registered with it */
	ASSERT_NE(kmod1_, nullptr);
	EXPECT_EQ(lanes_->check_buffer(5), 0);
	EXPECT_EQ(kmod_->checks, 1);
	EXPECT_EQ(kmod1_->checks, 1);
	kmod_->stale_id = 5;
	EXPECT_EQ(lanes_->check_buffer(5), -ESTALE);
	kmod_->stale_id = UINT32_MAX;
	kmod1_->stale_id = 5;
	EXPECT_EQ(lanes_->check_buffer(5), -ESTALE);
	lanes_->unregister_buffer(5, -1);
}

TEST_F(LanesTest, device_memory_fails_only_on_lanes_that_cannot_reach_it)
{
	ASSERT_EQ(add(1), 0);
	ASSERT_EQ(add(2), 0);
	AlignedBuf mem(3 * kBytes); /* "device memory" the fakes read into */
	ASSERT_EQ(lanes_->register_device_buffer(9, KVBLK_MEM_CUDA, -1, uint64_t(uintptr_t(mem.data())), mem.size()), 0);
	IoObject o[3];
	kvblk_result r[3] = {};
	for (uint32_t t = 0; t < 3; t++) {
		o[t] = obj(t, 0, mem.data() + t * kBytes);
		o[t].buf_id = 9;
		o[t].path = KVBLK_PATH_P2P;
	}
	Batch b{IoDir::read, o, 3, r, {}};
	ASSERT_EQ(lanes_->run(b), 0);
	EXPECT_EQ(r[0].status, 0) << "lane 0 took the registration";
	EXPECT_EQ(r[1].status, 0) << "the second kvblk.ko lane took it when it was made";
	EXPECT_EQ(r[2].status, -EOPNOTSUPP) << "uring cannot DMA into CUDA memory";
	EXPECT_NE(std::string(kvblk_last_error()).find("cannot reach"), std::string::npos) << kvblk_last_error();
	lanes_->unregister_buffer(9, -1);
}

TEST_F(LanesTest, removing_the_last_target_of_a_lane_drops_it)
{
	ASSERT_EQ(add(1), 0);
	ASSERT_EQ(lanes_->lane_count(), 2u);
	EXPECT_TRUE(lanes_->lane_exists(1));
	lanes_->remove_target(1);
	EXPECT_FALSE(lanes_->lane_exists(1));
	EXPECT_EQ(lanes_->lane_of(1), 0u);
	/* The free lane slot is used again. */
	ASSERT_EQ(add(1), 0);
	EXPECT_EQ(lanes_->lane_of(1), 1u);
	AlignedBuf dst(kBytes);
	IoObject o = obj(1, 0, dst.data());
	kvblk_result r{};
	Batch b{IoDir::read, &o, 1, &r, {}};
	ASSERT_EQ(lanes_->run(b), 0);
	EXPECT_EQ(r.status, 0);
	EXPECT_EQ(b.counters.served_by, 1u << KVBLK_BACKEND_KMOD);
}

/*
 * A kmod device's own placement (make_kmod_lanes()): files go to one uring lane made with the
 * device's requested queue depth and workers and the uring command size, and every target on
 * it is told so (kvblk_get_target_info() reports what each target's backend uses), the second
 * one too. Here the "kvblk.ko" of lane 0 reports a larger command and depth than uring takes.
 */
TEST_F(LanesTest, kmod_placement_reports_the_uring_lane_of_every_file)
{
	BackendConfig base = config_of(fds_[0], 4 * kBytes);
	base.max_cmd_bytes = 512 * KiB;	/* kvblk.ko's */
	base.queue_depth = 16;		/* asked for; kvblk.ko's max_inflight is not the lane's */
	base.workers = 2;
	std::unique_ptr<Backend> lanes = make_kmod_lanes(std::make_unique<FakeKmod>(), base);
	auto *l = static_cast<Lanes *>(lanes.get());
	for (uint32_t id : {1u, 2u}) {
		SCOPED_TRACE("target " + std::to_string(id));
		BackendConfig t = config_of(fds_[id], 4 * kBytes);
		t.max_cmd_bytes = base.max_cmd_bytes; /* what kvblk_add_target() passes: the device's */
		t.queue_depth = 256;
		t.workers = 1;
		ASSERT_EQ(l->add_target(id, t), 0) << kvblk_last_error();
		EXPECT_EQ(t.max_cmd_bytes, KVBLK_DEFAULT_MAX_CMD_BYTES);
		EXPECT_EQ(t.queue_depth, 16u);
		EXPECT_EQ(t.workers, 2u);
		std::string why;
		EXPECT_EQ(l->target_kind(id, IoDir::read, &why), KVBLK_BACKEND_URING);
		EXPECT_EQ(why, "uring: test is not a block device (kvblk.ko without KVBLK_FEAT_TARGETS)");
	}
	EXPECT_EQ(l->lane_of(1), l->lane_of(2)) << "one uring lane for every file";
	EXPECT_EQ(l->lane_count(), 2u);

	/* Objects of both files are split at the lane's command size. */
	AlignedBuf dst(2 * kBytes);
	IoObject o[2] = {obj(1, 0, dst.data()), obj(2, kBytes, dst.data() + kBytes)};
	kvblk_result r[2] = {};
	Batch b{IoDir::read, o, 2, r, {}};
	ASSERT_EQ(l->run(b), 0);
	EXPECT_EQ(r[0].status, 0);
	EXPECT_EQ(r[1].status, 0);
	EXPECT_EQ(b.counters.commands, 2 * ((kBytes + KVBLK_DEFAULT_MAX_CMD_BYTES - 1) / KVBLK_DEFAULT_MAX_CMD_BYTES));
	EXPECT_EQ(b.counters.served_by, 1u << KVBLK_BACKEND_URING);
}

/*
 * A kmod device whose kvblk.ko context takes added targets (KVBLK_FEAT_TARGETS): they stay on
 * lane 0, whose backend gets a batch over all of them whole (one run(), no lane thread), and
 * report what it said; a target it refuses still gets the uring lane, saying why; removing a
 * target tells the backend that served it.
 */
TEST_F(LanesTest, kmod_placement_keeps_targets_its_context_takes_on_lane_zero)
{
	BackendConfig base = config_of(fds_[0], 4 * kBytes);
	base.max_cmd_bytes = 512 * KiB;
	base.queue_depth = 16;
	auto k = std::make_unique<FakeKmod>();
	FakeKmod *fake = k.get();
	fake->takes_targets = true;
	fake->refuse = 2;
	std::unique_ptr<Backend> lanes = make_kmod_lanes(std::move(k), base);
	auto *l = static_cast<Lanes *>(lanes.get());
	BackendConfig t1 = config_of(fds_[1], 4 * kBytes);
	t1.max_cmd_bytes = base.max_cmd_bytes;
	ASSERT_EQ(l->add_target(1, t1), 0) << kvblk_last_error();
	EXPECT_EQ(t1.max_cmd_bytes, 1020 * KiB) << "the context's own command size";
	EXPECT_EQ(t1.queue_depth, 64u);
	EXPECT_EQ(l->lane_of(1), 0u);
	EXPECT_EQ(l->lane_count(), 1u) << "no lane made for a target the context took";
	std::string why;
	EXPECT_EQ(l->target_kind(1, IoDir::read, &why), KVBLK_BACKEND_KMOD);
	EXPECT_EQ(why, "kmod: test is target 101 of the device's kvblk.ko context, fake engine");

	/* Objects of targets 0 and 1 interleaved: one run() of lane 0 on this thread, the whole batch. */
	constexpr uint32_t kN = 8;
	AlignedBuf dst(kN * kBytes);
	std::vector<IoObject> objs;
	std::vector<kvblk_result> res(kN);
	for (uint32_t i = 0; i < kN; i++) {
		objs.push_back(obj(i % 2, (i / 2) * kBytes, dst.data() + i * kBytes));
		res[i] = kvblk_result{0, 0, 0, i};
	}
	Batch b{IoDir::read, objs.data(), kN, res.data(), {}};
	EXPECT_TRUE(l->can_start(b)) << "lane 0's own decision: nothing to split";
	ASSERT_EQ(l->run(b), 0);
	for (uint32_t i = 0; i < kN; i++) {
		SCOPED_TRACE(i);
		EXPECT_EQ(res[i].status, 0);
		EXPECT_EQ(std::memcmp(dst.data() + i * kBytes, expected_bytes((i / 2) * kBytes, kBytes, kBytes).data(), kBytes), 0);
	}
	EXPECT_EQ(fake->runs, 1);
	EXPECT_EQ(fake->threads, std::set<std::thread::id>{std::this_thread::get_id()});
	EXPECT_EQ(b.counters.served_by, 0u) << "one backend served it: counted as the device's";
	EXPECT_EQ(b.counters.commands, kN);

	/* Target 2 refused by the context: the uring lane, and the reason names the refusal. */
	BackendConfig t2 = config_of(fds_[2], 4 * kBytes);
	t2.max_cmd_bytes = base.max_cmd_bytes;
	ASSERT_EQ(l->add_target(2, t2), 0) << kvblk_last_error();
	EXPECT_EQ(l->lane_of(2), 1u);
	why.clear();
	EXPECT_EQ(l->target_kind(2, IoDir::read, &why), KVBLK_BACKEND_URING);
	EXPECT_EQ(why, "uring: test is not a block device (kvblk.ko without KVBLK_FEAT_TARGETS)");
	EXPECT_EQ(fake->attached, std::set<uint32_t>{1});

	/* A batch over 0, 1 and 2: lane 0 gets 0's and 1's objects in one run(), the uring lane 2's. */
	for (uint32_t i = 0; i < kN; i++)
		objs[i] = obj(i % 3, (i / 3) * kBytes, dst.data() + i * kBytes);
	Batch b2{IoDir::read, objs.data(), kN, res.data(), {}};
	EXPECT_FALSE(l->can_start(b2));
	ASSERT_EQ(l->run(b2), 0);
	for (uint32_t i = 0; i < kN; i++)
		EXPECT_EQ(res[i].status, 0) << i;
	EXPECT_EQ(fake->runs, 2);
	EXPECT_EQ(b2.counters.served_by, (1u << KVBLK_BACKEND_KMOD) | (1u << KVBLK_BACKEND_URING));

	/* Removal reaches the backend that served the target; the uring lane goes with its last one. */
	l->remove_target(1);
	EXPECT_EQ(fake->removed, std::set<uint32_t>{1});
	l->remove_target(2);
	EXPECT_EQ(fake->removed, std::set<uint32_t>{1}) << "target 2 was the uring lane's";
	EXPECT_FALSE(l->lane_exists(1));
}

} // namespace

// SPDX-License-Identifier: MIT
// The staged path (libkvblk/staging.cpp) through the copy-engine seam: KVBLK_MEM_CUDA
// buffers whose "device memory" is host memory, copied by kvblk::detail::HostCopyEngine
// (memcpy on a worker thread). Bytes, overlap of reads and copies, bounded bounce memory,
// per-object failures of reads and of copies, counters and the reported path; and the
// refusals that need no engine (no CUDA runtime, dma-buf without kvblk.ko, stores).
#include "gate.hpp"
#include "test_util.hpp"

#include <kvblk/kvblk.hpp>

#include "libkvblk/copy_engine.hpp"
#include "libkvblk/cuda_runtime.hpp"

#include <atomic>
#include <dlfcn.h>

using namespace kvblk_test;
using kvblk::detail::HostCopyEngine;
using kvblk::testing::CommandInfo;
using kvblk::testing::Seams;

namespace {

constexpr uint32_t kObjects = 40;
constexpr uint32_t kBuffers = 3;
constexpr uint64_t kBufferBytes = 72 * KiB; /* not a divisor of any object size below */
constexpr uint64_t kGap = 4 * KiB;

/* Object @i: a multiple of 4 KiB between 4 KiB and 200 KiB, most not a multiple of kBufferBytes. */
uint64_t object_bytes(uint32_t i)
{
	return (1 + (uint64_t(i) * 37) % 50) * 4 * KiB;
}

class StagingTest : public ::testing::TestWithParam<BackendCase> {
protected:
	void SetUp() override
	{
		dir_ = std::make_unique<TempDir>();
		path_ = dir_->file("store");
		for (uint32_t i = 0; i < kObjects; i++) {
			file_off_.push_back(total_);
			total_ += object_bytes(i);
		}
		/* Device layout: reverse order, a sentinel gap before every object. */
		uint64_t d = 0;
		dev_off_.resize(kObjects);
		for (uint32_t i = kObjects; i-- > 0;) {
			d += kGap;
			dev_off_[i] = d;
			d += object_bytes(i);
		}
		dev_bytes_ = d + kGap;
		write_pattern_file(path_, 1, total_);
		devmem_ = std::make_unique<AlignedBuf>(dev_bytes_);
	}

	/* A seam whose copy engine is a HostCopyEngine with @o; engine_ points at it once made. */
	Seams host_engine_seam(HostCopyEngine::Options o = {})
	{
		Seams s;
		s.make_copy_engine = [this, o]() -> std::unique_ptr<kvblk::detail::CopyEngine> {
			auto e = std::make_unique<HostCopyEngine>(o);
			engine_ = e.get();
			return e;
		};
		return s;
	}

	DevPtr open(uint32_t flags = 0)
	{
		const BackendCase &c = GetParam();
		DevPtr d = open_dev(path_, make_opts(c.backend, c.workers, c.queue_depth, 0, flags));
		if (d) {
			EXPECT_EQ(kvblk_set_staging(d.get(), kBuffers, kBufferBytes), 0) << kvblk_last_error();
		}
		return d;
	}

	uint32_t register_cuda(kvblk_dev *d)
	{
		uint32_t id = KVBLK_BUF_NONE;
		EXPECT_EQ(kvblk_register_buffer(d, KVBLK_MEM_CUDA, devmem_->data(), dev_bytes_, &id), 0)
			<< kvblk_last_error();
		EXPECT_NE(std::string(kvblk_last_error()).find("staged path"), std::string::npos) << kvblk_last_error();
		return id;
	}

	/* Open, size the pool, register the whole device range as CUDA memory into *buf. */
	DevPtr open_registered(uint32_t *buf, uint32_t flags = 0)
	{
		DevPtr d = open(flags);
		if (d)
			*buf = register_cuda(d.get());
		return d;
	}

	/* Load every object into buffer @buf; returns the call's value. */
	int load_all(kvblk_dev *d, uint32_t buf, std::vector<kvblk_result> *r, kvblk_batch_info *bi = nullptr)
	{
		const std::vector<kvblk_desc> v = descs(buf);
		r->assign(v.size(), kvblk_result{});
		return kvblk_load_many(d, v.data(), uint32_t(v.size()), r->data(), bi);
	}

	std::vector<kvblk_desc> descs(uint32_t buf) const
	{
		std::vector<kvblk_desc> v;
		for (uint32_t i = 0; i < kObjects; i++)
			v.push_back(buf_desc(file_off_[i], object_bytes(i), buf, dev_off_[i], 1000 + i));
		return v;
	}

	[[nodiscard]] bool object_exact(uint32_t i) const
	{
		const auto want = expected_bytes(file_off_[i], object_bytes(i), total_);
		return std::memcmp(devmem_->data() + dev_off_[i], want.data(), want.size()) == 0;
	}

	/* Every gap still holds the sentinel. */
	[[nodiscard]] bool gaps_untouched() const
	{
		for (uint32_t i = 0; i < kObjects; i++)
			if (!devmem_->all(dev_off_[i] - kGap, kGap, 0xA5))
				return false;
		return devmem_->all(dev_bytes_ - kGap, kGap, 0xA5);
	}

	/*
	 * Copies when the objects, in order, are one stream cut into bounce buffers of
	 * @buffer_bytes (small objects share a buffer): one per (object, buffer) overlap.
	 */
	static uint64_t expected_copies(uint64_t buffer_bytes = kBufferBytes)
	{
		uint64_t c = 0, s = 0;
		for (uint32_t i = 0; i < kObjects; i++) {
			const uint64_t len = object_bytes(i);
			c += (s + len - 1) / buffer_bytes - s / buffer_bytes + 1;
			s += len;
		}
		return c;
	}

	std::unique_ptr<TempDir> dir_;
	std::string path_;
	std::vector<uint64_t> file_off_;
	std::vector<uint64_t> dev_off_;
	uint64_t total_ = 0;
	uint64_t dev_bytes_ = 0;
	std::unique_ptr<AlignedBuf> devmem_;
	HostCopyEngine *engine_ = nullptr;
};

TEST_P(StagingTest, bytes_land_at_their_device_offsets)
{
	SeamGuard g(host_engine_seam());
	DevPtr d = open();
	ASSERT_TRUE(d);
	const uint32_t buf = register_cuda(d.get());
	ASSERT_NE(engine_, nullptr);

	/* One host object rides along in the same batch. */
	AlignedBuf host(object_bytes(3));
	std::vector<kvblk_desc> v = descs(buf);
	v.push_back(plain_desc(file_off_[3], object_bytes(3), host.data(), 77));
	std::vector<kvblk_result> r(v.size());
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(d.get(), v.data(), uint32_t(v.size()), r.data(), &bi), int(v.size()))
		<< kvblk_last_error();

	for (uint32_t i = 0; i < kObjects; i++) {
		EXPECT_EQ(r[i].status, 0) << i;
		EXPECT_EQ(r[i].bytes, object_bytes(i)) << i;
		EXPECT_EQ(r[i].tag, 1000u + i) << i;
		EXPECT_TRUE(object_exact(i)) << "object " << i;
	}
	EXPECT_TRUE(gaps_untouched());
	const auto want_host = expected_bytes(file_off_[3], object_bytes(3), total_);
	EXPECT_EQ(std::memcmp(host.data(), want_host.data(), want_host.size()), 0);
	EXPECT_EQ(r[kObjects].status, 0);
	EXPECT_EQ(r[kObjects].tag, 77u);

	uint64_t staged_bytes = 0;
	for (uint32_t i = 0; i < kObjects; i++)
		staged_bytes += object_bytes(i);
	EXPECT_EQ(bi.path, uint32_t(KVBLK_PATH_STAGED));
	EXPECT_EQ(bi.backend, uint32_t(GetParam().backend));
	EXPECT_EQ(bi.failed, 0u);
	EXPECT_EQ(bi.bytes, staged_bytes + object_bytes(3));
	EXPECT_EQ(engine_->copies_done(), expected_copies());
	EXPECT_EQ(engine_->bytes_copied(), staged_bytes);

	const kvblk_stats s = get_stats(d.get());
	EXPECT_EQ(s.batches, 1u);
	EXPECT_EQ(s.batches_by_path[KVBLK_PATH_STAGED], 1u);
	EXPECT_EQ(s.batches_by_path[KVBLK_PATH_HOST], 0u);
	EXPECT_EQ(s.batches_by_path[KVBLK_PATH_P2P], 0u);
	EXPECT_EQ(s.bytes_by_path[KVBLK_PATH_STAGED], staged_bytes);
	EXPECT_EQ(s.bytes_by_path[KVBLK_PATH_HOST], object_bytes(3));
	EXPECT_EQ(s.bytes_read, staged_bytes + object_bytes(3));
	EXPECT_EQ(s.staged_copies, expected_copies());
	EXPECT_EQ(s.p2p_fallbacks, 0u);
	EXPECT_EQ(s.batches_by_backend[GetParam().backend], 1u);
	EXPECT_EQ(s.objects, uint64_t(kObjects + 1));

	/* A batch of host objects only is still a host batch. */
	kvblk_desc hd = plain_desc(file_off_[3], object_bytes(3), host.data(), 5);
	kvblk_result hr{};
	ASSERT_EQ(kvblk_load_many(d.get(), &hd, 1, &hr, &bi), 1);
	EXPECT_EQ(bi.path, uint32_t(KVBLK_PATH_HOST));
	EXPECT_EQ(get_stats(d.get()).batches_by_path[KVBLK_PATH_HOST], 1u);
}

TEST_P(StagingTest, reads_overlap_copies)
{
	HostCopyEngine::Options o;
	o.copy_delay_us = 2000;
	Seams s = host_engine_seam(o);
	std::atomic<uint64_t> completions{0}, during_copy{0};
	s.on_complete = [&](const CommandInfo &, int64_t res) -> int64_t {
		completions++;
		HostCopyEngine *e = engine_;
		if (e && e->copies_running() > 0)
			during_copy++;
		return res;
	};
	SeamGuard g(s);
	uint32_t buf = KVBLK_BUF_NONE;
	DevPtr d = open_registered(&buf);
	ASSERT_TRUE(d);
	std::vector<kvblk_result> r;
	ASSERT_EQ(load_all(d.get(), buf, &r), int(kObjects)) << kvblk_last_error();
	for (uint32_t i = 0; i < kObjects; i++)
		EXPECT_TRUE(object_exact(i)) << "object " << i;
	/* Reads into bounce buffer k+1 completed while the copy of buffer k was running. */
	EXPECT_GT(during_copy.load(), 0u) << "of " << completions.load() << " read completions";
	EXPECT_GT(completions.load(), during_copy.load()) << "the first round has no copy to overlap";
}

TEST_P(StagingTest, bounce_memory_is_bounded)
{
	SeamGuard g(host_engine_seam());
	DevPtr d = open();
	ASSERT_TRUE(d);
	EXPECT_EQ(get_stats(d.get()).staging_pool_bytes, 0u) << "nothing before the first staged registration";
	const uint32_t buf = register_cuda(d.get());
	const uint64_t bound = kBuffers * kBufferBytes; /* 72 KiB is a multiple of the page size */
	EXPECT_EQ(get_stats(d.get()).staging_pool_bytes, bound);
	EXPECT_EQ(engine_->pinned_now(), bound);
	EXPECT_EQ(engine_->lanes_opened(), kBuffers);

	std::vector<kvblk_result> r;
	for (int round = 0; round < 2; round++)
		ASSERT_EQ(load_all(d.get(), buf, &r), int(kObjects));
	EXPECT_EQ(engine_->pinned_peak(), bound);

	/* A smaller pool: freed, then allocated at the new size; loads still exact. */
	ASSERT_EQ(kvblk_set_staging(d.get(), 2, 16 * KiB), 0) << kvblk_last_error();
	EXPECT_EQ(engine_->pinned_now(), 2 * 16 * KiB);
	EXPECT_EQ(get_stats(d.get()).staging_pool_bytes, 2 * 16 * KiB);
	std::memset(devmem_->data(), 0xA5, dev_bytes_);
	kvblk_reset_stats(d.get());
	ASSERT_EQ(load_all(d.get(), buf, &r), int(kObjects));
	for (uint32_t i = 0; i < kObjects; i++)
		EXPECT_TRUE(object_exact(i)) << "object " << i;
	EXPECT_EQ(get_stats(d.get()).staged_copies, expected_copies(16 * KiB));
	EXPECT_EQ(engine_->pinned_peak(), bound) << "never more than the larger pool";

	EXPECT_EQ(kvblk_set_staging(d.get(), KVBLK_MAX_STAGING_BUFFERS + 1, 0), -EINVAL);
	EXPECT_EQ(kvblk_set_staging(d.get(), 0, 1), -EINVAL);
	EXPECT_EQ(kvblk_set_staging(nullptr, 0, 0), -EINVAL);
	ASSERT_EQ(kvblk_unregister_buffer(d.get(), buf), 0);
	EXPECT_EQ(engine_->pinned_now(), 2 * 16 * KiB) << "the pool stays until close";
	d.reset();
	engine_ = nullptr; /* freed with the device */
}

TEST_P(StagingTest, io_error_fails_its_own_object_only)
{
	constexpr uint32_t kBad = 7;
	std::atomic<uint64_t> bad_copies{0};
	HostCopyEngine::Options o;
	const uint64_t lo = devmem_->addr(dev_off_[kBad]), hi = lo + object_bytes(kBad);
	o.on_copy = [&, lo, hi](uint64_t, uint64_t dst, size_t) {
		if (dst >= lo && dst < hi)
			bad_copies++;
		return 0;
	};
	Seams s = host_engine_seam(o);
	const uint64_t bad_lo = file_off_[kBad], bad_hi = file_off_[kBad] + object_bytes(kBad);
	s.on_complete = [=](const CommandInfo &c, int64_t res) -> int64_t {
		const uint64_t at = c.obj_offset + c.cmd_offset;
		return at >= bad_lo && at < bad_hi ? -EIO : res;
	};
	SeamGuard g(s);
	uint32_t buf = KVBLK_BUF_NONE;
	DevPtr d = open_registered(&buf);
	ASSERT_TRUE(d);
	std::vector<kvblk_result> r;
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(load_all(d.get(), buf, &r, &bi), int(kObjects - 1));
	for (uint32_t i = 0; i < kObjects; i++) {
		if (i == kBad) {
			EXPECT_EQ(r[i].status, -EIO);
			EXPECT_EQ(r[i].bytes, 0u);
			continue;
		}
		EXPECT_EQ(r[i].status, 0) << i;
		EXPECT_TRUE(object_exact(i)) << "object " << i;
	}
	EXPECT_EQ(bi.failed, 1u);
	EXPECT_EQ(bi.path, uint32_t(KVBLK_PATH_STAGED));
	EXPECT_NE(std::string(kvblk_last_error()).find("descriptor 7"), std::string::npos) << kvblk_last_error();
	const kvblk_stats st = get_stats(d.get());
	EXPECT_EQ(st.errors_io, 1u);
	EXPECT_EQ(st.errors_other, 0u);
	EXPECT_EQ(bad_copies.load(), 0u) << "no piece of the failed object is copied";
	EXPECT_EQ(st.staged_copies, engine_->copies_done());
	EXPECT_TRUE(devmem_->all(dev_off_[kBad], object_bytes(kBad), 0xA5));
}

/*
 * A copy error is reported per lane (a CUDA stream reports errors per stream), so it fails
 * the objects whose pieces shared that bounce-buffer fill with the bad copy: object 11 and
 * at most the neighbours that share one of its buffers; every other object loads exactly.
 */
TEST_P(StagingTest, copy_error_fails_only_the_objects_of_its_buffer)
{
	constexpr uint32_t kBad = 11;
	HostCopyEngine::Options o;
	const uint64_t lo = devmem_->addr(dev_off_[kBad]), hi = lo + object_bytes(kBad);
	o.on_copy = [=](uint64_t, uint64_t dst, size_t) { return dst >= lo && dst < hi ? -EIO : 0; };
	SeamGuard g(host_engine_seam(o));
	uint32_t buf = KVBLK_BUF_NONE;
	DevPtr d = open_registered(&buf);
	ASSERT_TRUE(d);
	std::vector<kvblk_result> r;
	kvblk_batch_info bi = new_batch_info();
	const int ok = load_all(d.get(), buf, &r, &bi);

	/* Objects that share a bounce buffer with object 11 when the stream is cut in buffers. */
	std::vector<bool> may_fail(kObjects, false);
	uint64_t s = 0;
	std::vector<uint64_t> start(kObjects);
	for (uint32_t i = 0; i < kObjects; i++) {
		start[i] = s;
		s += object_bytes(i);
	}
	const uint64_t w0 = start[kBad] / kBufferBytes, w1 = (start[kBad] + object_bytes(kBad) - 1) / kBufferBytes;
	for (uint32_t i = 0; i < kObjects; i++)
		may_fail[i] = start[i] / kBufferBytes <= w1 && (start[i] + object_bytes(i) - 1) / kBufferBytes >= w0;

	uint32_t failed = 0;
	for (uint32_t i = 0; i < kObjects; i++) {
		if (r[i].status) {
			failed++;
			EXPECT_TRUE(may_fail[i]) << "object " << i << " shares no buffer with object 11";
			EXPECT_EQ(r[i].status, -EIO) << i;
			EXPECT_EQ(r[i].bytes, 0u) << i;
			continue;
		}
		EXPECT_TRUE(object_exact(i)) << "object " << i;
	}
	EXPECT_EQ(r[kBad].status, -EIO);
	EXPECT_TRUE(devmem_->all(dev_off_[kBad], object_bytes(kBad), 0xA5)) << "its copies never ran";
	EXPECT_EQ(ok, int(kObjects - failed));
	EXPECT_EQ(bi.failed, failed);
	EXPECT_LE(failed, 3u);
	const std::string why = kvblk_last_error();
	EXPECT_NE(why.find("copy to device memory failed"), std::string::npos) << why;
	EXPECT_EQ(get_stats(d.get()).errors_io, failed);
}

TEST_P(StagingTest, stores_from_device_memory_are_refused)
{
	SeamGuard g(host_engine_seam());
	uint32_t buf = KVBLK_BUF_NONE;
	DevPtr d = open_registered(&buf, KVBLK_OPEN_WRITE);
	ASSERT_TRUE(d);
	const std::vector<kvblk_desc> v = descs(buf);
	std::vector<kvblk_result> r(v.size());
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_store_many(d.get(), v.data(), kObjects, r.data(), &bi), -EOPNOTSUPP);
	EXPECT_EQ(bi.bad_index, 0);
	EXPECT_EQ(r[0].status, -EOPNOTSUPP);
	EXPECT_EQ(r[1].status, -ECANCELED);
	EXPECT_EQ(engine_->copies_done(), 0u);
}

/*
 * kvblk_cancel() of a staged batch that is running: held on its first read (the first
 * round), cancelled, released. The objects none of whose pieces were read end -ECANCELED,
 * their device memory untouched; the ones read are exact; the batch still completes and
 * the stats count the cancelled objects.
 */
TEST_P(StagingTest, cancel_reaches_a_running_staged_batch)
{
	Gate gate;
	Seams s = host_engine_seam();
	s.on_complete = [&gate](const CommandInfo &c, int64_t res) {
		if (c.obj_offset == 0 && c.cmd_offset == 0 && c.attempt == 0)
			gate.wait();
		return res;
	};
	SeamGuard sg(s);
	uint32_t buf = KVBLK_BUF_NONE;
	DevPtr d = open_registered(&buf);
	ASSERT_TRUE(d);
	GateOpener go{gate};
	const std::vector<kvblk_desc> v = descs(buf);
	std::vector<kvblk_result> r(v.size());
	kvblk_submit_opts o;
	kvblk_submit_opts_init(&o, sizeof(o));
	o.results = r.data();
	uint64_t t = 0;
	ASSERT_EQ(kvblk_submit(d.get(), v.data(), uint32_t(v.size()), &o, &t), 0) << kvblk_last_error();
	ASSERT_TRUE(gate.wait_arrived()) << "the first round's read of object 0 is held";
	EXPECT_EQ(kvblk_cancel(d.get(), t), 0);
	gate.open();
	kvblk_batch_info bi = new_batch_info();
	const int ok = kvblk_wait(d.get(), t, -1, &bi);
	ASSERT_GE(ok, 1) << kvblk_last_error();
	EXPECT_LT(ok, int(kObjects)) << "the objects after the first round were read all the same";
	uint32_t cancelled = 0;
	for (uint32_t i = 0; i < kObjects; i++) {
		SCOPED_TRACE(i);
		EXPECT_EQ(r[i].tag, 1000 + i);
		if (r[i].status == 0) {
			EXPECT_EQ(r[i].bytes, object_bytes(i));
			EXPECT_TRUE(object_exact(i));
			continue;
		}
		EXPECT_EQ(r[i].status, -ECANCELED);
		EXPECT_EQ(r[i].bytes, 0u);
		EXPECT_TRUE(devmem_->all(dev_off_[i], object_bytes(i), 0xA5)) << "a cancelled object was written";
		cancelled++;
	}
	EXPECT_EQ(cancelled + uint32_t(ok), kObjects);
	EXPECT_EQ(r[0].status, 0) << "the object in flight finishes";
	EXPECT_TRUE(gaps_untouched());
	EXPECT_EQ(bi.failed, cancelled);
	EXPECT_EQ(get_stats(d.get()).cancelled_objects, cancelled);
}

INSTANTIATE_TEST_SUITE_P(Backends, StagingTest, ::testing::ValuesIn(kAllBackends), case_name);

/* The refusals below need no copy engine. */
class GpuRefusalTest : public StoreTest {};

TEST(CudaLoaderTest, absent_runtime_names_every_library_tried)
{
	kvblk::detail::CudaRuntime rt{};
	std::string why;
	EXPECT_FALSE(kvblk::detail::load_cuda_runtime({"libkvblk-no-cudart.so.13", "/nonexistent/libcudart.so"}, &rt,
						     &why));
	EXPECT_EQ(why.rfind("CUDA runtime not found (tried libkvblk-no-cudart.so.13: ", 0), 0u) << why;
	EXPECT_NE(why.find(", /nonexistent/libcudart.so: "), std::string::npos) << why;
	EXPECT_EQ(why.back(), ')') << why;
	/* A library without the entry points is passed over, and named. */
	EXPECT_FALSE(kvblk::detail::load_cuda_runtime({"libc.so.6"}, &rt, &why));
	EXPECT_NE(why.find("libc.so.6: no symbol cudaGetDeviceCount"), std::string::npos) << why;
}

/* What this machine has: no runtime (-EOPNOTSUPP), a runtime but no GPU (-ENODEV), or a GPU. */
TEST_F(GpuRefusalTest, cuda_without_a_runtime_or_gpu_says_why)
{
	std::string why;
	const kvblk::detail::CudaRuntime *rt = kvblk::detail::cuda_runtime(&why);
	int ngpu = 0;
	if (rt && rt->get_device_count(&ngpu) == 0 && ngpu > 0)
		GTEST_SKIP() << "a GPU is here (" << rt->library << ")";
	DevPtr d = open_dev(path_, make_opts(KVBLK_BACKEND_URING));
	ASSERT_TRUE(d);
	AlignedBuf mem(64 * KiB);
	uint32_t id = 12345;
	const int rc = kvblk_register_buffer(d.get(), KVBLK_MEM_CUDA, mem.data(), mem.size(), &id);
	const std::string msg = kvblk_last_error();
	if (!rt) {
		EXPECT_EQ(rc, -EOPNOTSUPP);
		EXPECT_EQ(msg.rfind("CUDA runtime not found (tried ", 0), 0u) << msg;
		EXPECT_NE(msg.find("libcudart.so.13"), std::string::npos) << msg;
		EXPECT_NE(msg.find("libcudart.so.12"), std::string::npos) << msg;
	} else {
		EXPECT_EQ(rc, -ENODEV);
		EXPECT_NE(msg.find("found no GPU"), std::string::npos) << msg;
		EXPECT_NE(msg.find(rt->library), std::string::npos) << msg;
	}
	EXPECT_EQ(id, 12345u);
	EXPECT_EQ(get_stats(d.get()).staging_pool_bytes, 0u);
	/* The slot was given back: a host buffer still gets id 0. */
	ASSERT_EQ(kvblk_register_buffer(d.get(), KVBLK_MEM_HOST, mem.data(), mem.size(), &id), 0);
	EXPECT_EQ(id, 0u);
}

TEST_F(GpuRefusalTest, dmabuf_needs_kvblk_ko)
{
	for (kvblk_backend b : {KVBLK_BACKEND_URING, KVBLK_BACKEND_PSYNC, KVBLK_BACKEND_THREADPOOL}) {
		DevPtr d = open_dev(path_, make_opts(b));
		ASSERT_TRUE(d);
		uint32_t id = 0;
		const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
		ASSERT_GE(fd, 0);
		EXPECT_EQ(kvblk_register_dmabuf(d.get(), fd, 0, 64 * KiB, &id), -EOPNOTSUPP);
		const std::string why = kvblk_last_error();
		EXPECT_NE(why.find("no CPU path into a dma-buf"), std::string::npos) << why;
		EXPECT_NE(why.find(kvblk_backend_name(b)), std::string::npos) << why;
		EXPECT_EQ(kvblk_register_dmabuf(d.get(), fd, 100, 64 * KiB, &id), -EINVAL) << "offset not page aligned";
		EXPECT_EQ(kvblk_register_dmabuf(d.get(), fd, 0, 100, &id), -EINVAL) << "length not page aligned";
		EXPECT_EQ(kvblk_register_dmabuf(d.get(), -1, 0, 64 * KiB, &id), -EINVAL);
		EXPECT_EQ(kvblk_register_dmabuf(d.get(), fd, 0, 0, &id), -EINVAL);
		EXPECT_EQ(kvblk_register_dmabuf(d.get(), fd, 0, 64 * KiB, nullptr), -EINVAL);
		/* The dma-buf kind goes through kvblk_register_dmabuf() only. */
		AlignedBuf mem(64 * KiB);
		EXPECT_EQ(kvblk_register_buffer(d.get(), KVBLK_MEM_DMABUF, mem.data(), mem.size(), &id), -EINVAL);
		close(fd);
	}
}

TEST_F(GpuRefusalTest, cxx_wrapper_staging_and_dmabuf)
{
	SeamGuard g([] {
		Seams s;
		s.make_copy_engine = [] { return std::make_unique<HostCopyEngine>(HostCopyEngine::Options{}); };
		return s;
	}());
	kvblk::Options o;
	o.backend = kvblk::Backend::uring;
	kvblk::Device dev(path_, o);
	dev.set_staging(2, 64 * KiB);
	AlignedBuf devmem(kObjectBytes);
	{
		kvblk::Buffer b = dev.register_buffer(devmem.data(), devmem.size(), kvblk::MemKind::cuda);
		std::vector<kvblk_desc> d = {b.desc(0, 0, kObjectBytes, 9)};
		std::vector<kvblk_result> r(1);
		EXPECT_EQ(dev.load_many(d, r), 1u);
		EXPECT_TRUE(std::memcmp(devmem.data(), expected_bytes(0, kObjectBytes, kObjectBytes).data(),
					kObjectBytes) == 0);
		EXPECT_EQ(dev.stats().staging_pool_bytes, 2 * 64 * KiB);
	}
	try {
		dev.set_staging(KVBLK_MAX_STAGING_BUFFERS + 1, 0);
		FAIL() << "no exception";
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(e.errno_value(), EINVAL);
	}
	try {
		(void)dev.register_dmabuf(0, 0, 64 * KiB);
		FAIL() << "no exception";
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(e.errno_value(), EOPNOTSUPP);
		EXPECT_NE(std::string(e.what()).find("dma-buf"), std::string::npos) << e.what();
	}
}

TEST(PathNameTest, names)
{
	EXPECT_STREQ(kvblk_path_name(KVBLK_PATH_HOST), "host");
	EXPECT_STREQ(kvblk_path_name(KVBLK_PATH_P2P), "p2p");
	EXPECT_STREQ(kvblk_path_name(KVBLK_PATH_STAGED), "staged");
	EXPECT_STREQ(kvblk_path_name(KVBLK_PATH_MAX), "unknown");
	EXPECT_STREQ(kvblk_path_name(-1), "unknown");
}

TEST_F(GpuRefusalTest, stats_of_a_0_1_caller)
{
	DevPtr d = open_dev(path_, make_opts(KVBLK_BACKEND_PSYNC));
	ASSERT_TRUE(d);
	AlignedBuf dst(kObjectBytes);
	kvblk_desc desc = plain_desc(0, kObjectBytes, dst.data(), 1);
	kvblk_result r{};
	ASSERT_EQ(kvblk_load_many(d.get(), &desc, 1, &r, nullptr), 1);

	/* A 0.1 caller's struct: the old size, with a canary right after it. */
	struct {
		kvblk_stats s;
		uint64_t canary;
	} old{};
	static_assert(KVBLK_STATS_SIZE_V0_1 < sizeof(kvblk_stats));
	std::memset(&old, 0xEE, sizeof(old));
	old.s.stats_size = KVBLK_STATS_SIZE_V0_1;
	ASSERT_EQ(kvblk_get_stats(d.get(), &old.s), 0) << kvblk_last_error();
	EXPECT_EQ(old.s.batches, 1u);
	EXPECT_EQ(old.s.bytes_read, kObjectBytes);
	EXPECT_EQ(old.s.batches_by_path[0], 0xEEEEEEEEEEEEEEEEull) << "beyond the 0.1 size: untouched";

	kvblk_stats small{};
	small.stats_size = KVBLK_STATS_SIZE_V0_1 - 8;
	EXPECT_EQ(kvblk_get_stats(d.get(), &small), -EINVAL);

	const kvblk_stats now = get_stats(d.get());
	EXPECT_EQ(now.batches_by_path[KVBLK_PATH_HOST], 1u);
	EXPECT_EQ(now.bytes_by_path[KVBLK_PATH_HOST], kObjectBytes);
	EXPECT_EQ(now.staged_copies, 0u);
}

} // namespace

// SPDX-License-Identifier: MIT
// kvblk.hpp: RAII Device and Buffer, Error carrying kvblk_last_error(), spans, stats.
#include <kvblk/kvblk.hpp>

#include "test_util.hpp"

#include <array>
#include <chrono>
#include <thread>
#include <type_traits>

using namespace kvblk_test;

namespace {

static_assert(!std::is_copy_constructible_v<kvblk::Device>);
static_assert(!std::is_copy_assignable_v<kvblk::Device>);
static_assert(std::is_nothrow_move_constructible_v<kvblk::Device>);
static_assert(std::is_nothrow_move_assignable_v<kvblk::Device>);
static_assert(!std::is_copy_constructible_v<kvblk::Buffer>);
static_assert(std::is_nothrow_move_constructible_v<kvblk::Buffer>);
static_assert(std::is_base_of_v<std::system_error, kvblk::Error>);

class CxxWrapperTest : public StoreTest {};

TEST_F(CxxWrapperTest, open_error_throws_with_errno_and_reason)
{
	const std::string missing = dir_->file("missing");
	try {
		kvblk::Device dev(missing);
		FAIL() << "no exception";
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(e.errno_value(), ENOENT);
		EXPECT_EQ(e.code(), std::errc::no_such_file_or_directory);
		const std::string what = e.what();
		EXPECT_NE(what.find("kvblk_open"), std::string::npos) << what;
		EXPECT_NE(what.find(missing), std::string::npos) << what;
	}
	kvblk::Options o;
	o.backend = kvblk::Backend::kmod;
	EXPECT_THROW(kvblk::Device(path_, o), kvblk::Error);
}

TEST_F(CxxWrapperTest, device_info_load_and_stats)
{
	kvblk::Options o;
	o.backend = kvblk::Backend::uring;
	o.queue_depth = 32;
	o.workers = 2;
	kvblk::Device dev(path_, o);
	ASSERT_TRUE(dev);
	const kvblk::Info info = dev.info();
	EXPECT_EQ(info.backend(), kvblk::Backend::uring);
	EXPECT_STREQ(kvblk::to_string(info.backend()), "uring");
	EXPECT_EQ(info.queue_depth(), 32u);
	EXPECT_EQ(info.workers(), 2u);
	EXPECT_EQ(info.capacity(), kObjects * kObjectBytes);
	EXPECT_FALSE(info.block_device());
	EXPECT_FALSE(info.writable());
	EXPECT_EQ(info.backend_reason(), "uring: requested in kvblk_open_opts.backend");

	AlignedBuf mem(4 * kObjectBytes), plain(kObjectBytes);
	kvblk::Buffer buf = dev.register_buffer(mem.data(), mem.size());
	ASSERT_TRUE(buf);
	EXPECT_EQ(buf.data(), mem.data());
	EXPECT_EQ(buf.size(), mem.size());

	std::vector<kvblk_desc> d;
	for (uint64_t i = 0; i < 4; i++)
		d.push_back(buf.desc(i * kObjectBytes, (i + 8) * kObjectBytes, kObjectBytes, i));
	d.push_back(kvblk::desc_to_pointer(plain.data(), 2 * kObjectBytes, kObjectBytes, 4));
	std::vector<kvblk_result> r(d.size());
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(dev.load_many(d, r, &bi), d.size());
	EXPECT_EQ(std::memcmp(mem.data(), expected_bytes(8 * kObjectBytes, 4 * kObjectBytes, kObjectBytes).data(),
			      4 * kObjectBytes),
		  0);
	EXPECT_EQ(std::memcmp(plain.data(), expected_bytes(2 * kObjectBytes, kObjectBytes, kObjectBytes).data(),
			      kObjectBytes),
		  0);
	EXPECT_EQ(r[4].tag, 4u);
	EXPECT_EQ(bi.bytes, 5 * kObjectBytes);

	const kvblk_stats s = dev.stats();
	EXPECT_EQ(s.batches, 1u);
	EXPECT_EQ(s.objects, 5u);
	EXPECT_EQ(s.bytes_read, 5 * kObjectBytes);
	dev.reset_stats();
	EXPECT_EQ(dev.stats().batches, 0u);
}

TEST_F(CxxWrapperTest, spans_from_arrays)
{
	kvblk::Device dev(path_);
	AlignedBuf mem(2 * kObjectBytes);
	const std::array<kvblk_desc, 2> d = {kvblk::desc_to_pointer(mem.data(), 0, kObjectBytes, 1),
					     kvblk::desc_to_pointer(mem.data() + kObjectBytes, kObjectBytes, kObjectBytes, 2)};
	kvblk_result r[2];
	EXPECT_EQ(dev.load_many(d, r), 2u);
	EXPECT_EQ(dev.load_many(kvblk::Span<const kvblk_desc>(d.data(), 1), kvblk::Span<kvblk_result>(r, 1)), 1u);
	EXPECT_EQ(std::memcmp(mem.data(), expected_bytes(0, 2 * kObjectBytes, kObjectBytes).data(), 2 * kObjectBytes), 0);
}

TEST_F(CxxWrapperTest, rejected_batch_throws_and_fills_results)
{
	kvblk::Device dev(path_);
	AlignedBuf mem(kObjectBytes, 0x77);
	std::vector<kvblk_desc> d = {kvblk::desc_to_pointer(mem.data(), 0, 4096, 1),
				     kvblk::desc_to_pointer(mem.data(), kObjects * kObjectBytes, 4096, 2)};
	std::vector<kvblk_result> r(2);
	kvblk_batch_info bi = new_batch_info();
	try {
		(void)dev.load_many(d, r, &bi);
		FAIL() << "no exception";
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(e.errno_value(), ERANGE);
		EXPECT_NE(std::string(e.what()).find("descriptor 1"), std::string::npos) << e.what();
	}
	EXPECT_EQ(bi.bad_index, 1);
	EXPECT_EQ(r[0].status, -ECANCELED);
	EXPECT_EQ(r[1].status, -ERANGE);
	EXPECT_TRUE(mem.all(0, mem.size(), 0x77));

	r.resize(1);
	try {
		(void)dev.load_many(d, r);
		FAIL() << "no exception";
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(e.errno_value(), EINVAL);
	}
}

TEST_F(CxxWrapperTest, per_object_failures_do_not_throw)
{
	kvblk::testing::Seams s;
	s.on_complete = [](const kvblk::testing::CommandInfo &c, int64_t res) -> int64_t {
		return c.object == 1 ? -EIO : res;
	};
	SeamGuard g(s);
	kvblk::Options o;
	o.backend = kvblk::Backend::psync;
	kvblk::Device dev(path_, o);
	AlignedBuf mem(2 * kObjectBytes);
	std::vector<kvblk_desc> d = {kvblk::desc_to_pointer(mem.data(), 0, kObjectBytes, 1),
				     kvblk::desc_to_pointer(mem.data() + kObjectBytes, kObjectBytes, kObjectBytes, 2)};
	std::vector<kvblk_result> r(2);
	EXPECT_EQ(dev.load_many(d, r), 1u);
	EXPECT_EQ(r[0].status, 0);
	EXPECT_EQ(r[1].status, -EIO);
}

TEST_F(CxxWrapperTest, buffer_raii_and_moves)
{
	kvblk::Device dev(path_);
	AlignedBuf mem(64 * KiB);
	uint32_t id;
	{
		kvblk::Buffer a = dev.register_buffer(mem.data(), mem.size());
		id = a.id();
		kvblk::Buffer b = std::move(a);
		EXPECT_FALSE(a);
		EXPECT_EQ(b.id(), id);
		EXPECT_EQ(a.id(), KVBLK_BUF_NONE);
	}
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), -ENOENT) << "the Buffer unregistered itself";

	kvblk::Buffer c = dev.register_buffer(mem.data(), mem.size());
	EXPECT_EQ(dev.check_buffer(c), 0) << kvblk_last_error();
	/* A read-only device: nothing to flush at target 0 (-EBADF), nothing at all for ALL. */
	EXPECT_NO_THROW(dev.flush());
	try {
		dev.flush(0);
		FAIL() << "no exception";
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(e.errno_value(), EBADF);
	}
	const uint32_t kept = c.release();
	EXPECT_FALSE(c);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), kept), 0) << "release() left it registered";

	EXPECT_THROW((void)dev.register_buffer(mem.data(), 0), kvblk::Error);
	try {
		(void)dev.register_buffer(mem.data(), 4096, kvblk::MemKind::cuda);
		FAIL() << "no exception";
	} catch (const kvblk::Error &e) {
		/* No CUDA runtime, no GPU, or host memory is not device memory. */
		EXPECT_TRUE(e.errno_value() == EOPNOTSUPP || e.errno_value() == ENODEV || e.errno_value() == EINVAL)
			<< e.what();
	}

	kvblk::Device moved = std::move(dev);
	EXPECT_FALSE(dev);
	EXPECT_TRUE(moved);
	EXPECT_EQ(moved.info().capacity(), kObjects * kObjectBytes);
	moved.close();
	EXPECT_FALSE(moved);
}

TEST_F(CxxWrapperTest, store_through_the_wrapper)
{
	kvblk::Options o;
	o.write = true;
	o.create = true;
	o.create_bytes = 2 * MiB;
	const std::string path = dir_->file("new");
	kvblk::Device dev(path, o);
	EXPECT_TRUE(dev.info().writable());
	AlignedBuf src(2 * MiB), back(2 * MiB, 0);
	fill_pattern(src.data(), 0, 2 * MiB, kObjectBytes);
	kvblk_desc d = kvblk::desc_to_pointer(src.data(), 0, 2 * MiB, 7);
	kvblk_result r{};
	EXPECT_EQ(dev.store_many(kvblk::Span<const kvblk_desc>(&d, 1), kvblk::Span<kvblk_result>(&r, 1)), 1u);
	d = kvblk::desc_to_pointer(back.data(), 0, 2 * MiB, 8);
	EXPECT_EQ(dev.load_many(kvblk::Span<const kvblk_desc>(&d, 1), kvblk::Span<kvblk_result>(&r, 1)), 1u);
	EXPECT_EQ(std::memcmp(src.data(), back.data(), 2 * MiB), 0);
	EXPECT_EQ(dev.stats().bytes_written, 2 * MiB);
}

} // namespace

namespace {

TEST_F(CxxWrapperTest, submit_reap_wait_cancel_and_event_fd)
{
	kvblk::Options o;
	o.backend = kvblk::Backend::uring;
	kvblk::Device dev(path_, o);
	AlignedBuf mem(2 * kObjectBytes);
	const std::vector<kvblk_desc> d = {kvblk::desc_to_pointer(mem.data(), 0, kObjectBytes, 1),
					   kvblk::desc_to_pointer(mem.data() + kObjectBytes, 3 * kObjectBytes,
								  kObjectBytes, 2)};
	std::vector<kvblk_result> r(2);
	kvblk::SubmitOptions so;
	so.results = r;
	so.user_data = 42;
	so.per_object = true;
	const kvblk::Ticket t = dev.submit(d, so);
	EXPECT_TRUE(t);
	std::vector<kvblk_cqe> c(8);
	size_t got = 0;
	while (got < 3)
		got += dev.reap(kvblk::Span<kvblk_cqe>(c.data() + got, c.size() - got), 1);
	EXPECT_EQ(got, 3u);
	EXPECT_EQ(c[2].flags, KVBLK_CQE_BATCH);
	EXPECT_EQ(c[2].ticket, t.id);
	EXPECT_EQ(c[2].user_data, 42u);
	EXPECT_EQ(c[2].bytes, 2 * kObjectBytes);
	EXPECT_EQ(r[1].tag, 2u);
	EXPECT_EQ(std::memcmp(mem.data() + kObjectBytes,
			      expected_bytes(3 * kObjectBytes, kObjectBytes, kObjectBytes).data(), kObjectBytes),
		  0);

	const kvblk::Ticket t2 = dev.submit(d);
	EXPECT_NE(t2, t);
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(dev.wait(t2, &bi), 2u);
	EXPECT_EQ(bi.ticket, t2.id);
	EXPECT_THROW((void)dev.wait_for(t2, std::chrono::milliseconds(1)), kvblk::Error) << "taken: -ENOENT";
}

TEST_F(CxxWrapperTest, wait_for_times_out_with_nullopt)
{
	kvblk::testing::Seams s;
	s.on_complete = [](const kvblk::testing::CommandInfo &, int64_t res) {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		return res;
	};
	SeamGuard sg(s);
	kvblk::Options o;
	o.backend = kvblk::Backend::psync;
	kvblk::Device dev(path_, o);
	AlignedBuf mem(4096);
	const std::vector<kvblk_desc> d = {kvblk::desc_to_pointer(mem.data(), 0, 4096, 1)};
	const kvblk::Ticket t = dev.submit(d);
	EXPECT_EQ(dev.wait_for(t, std::chrono::milliseconds(1)), std::nullopt);
	EXPECT_EQ(dev.wait_for(t, std::chrono::seconds(10)), std::optional<std::size_t>(1));
}

TEST_F(CxxWrapperTest, async_errors_throw_with_errno)
{
	kvblk::Device dev(path_);
	AlignedBuf mem(kObjectBytes);
	const std::vector<kvblk_desc> d = {kvblk::desc_to_pointer(mem.data(), kObjects * kObjectBytes, 4096, 1)};
	try {
		(void)dev.submit(d);
		FAIL() << "no exception";
	} catch (const kvblk::Error &e) {
		EXPECT_EQ(e.errno_value(), ERANGE);
		EXPECT_NE(std::string(e.what()).find("kvblk_submit"), std::string::npos) << e.what();
	}
	std::vector<kvblk_result> two(2);
	kvblk::SubmitOptions so;
	so.results = two;
	EXPECT_THROW((void)dev.submit(d, so), kvblk::Error) << "results must match the descriptors";
	EXPECT_THROW(dev.cancel(kvblk::Ticket{12345}), kvblk::Error);
	EXPECT_THROW((void)dev.wait(kvblk::Ticket{12345}), kvblk::Error);
	EXPECT_GE(dev.event_fd(), 0);
	std::vector<kvblk_cqe> c(1);
	EXPECT_EQ(dev.reap(c, 0, std::chrono::nanoseconds(0)), 0u);
}

} // namespace

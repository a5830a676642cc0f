// SPDX-License-Identifier: MIT
// KVBLK_DESC_UNALIGNED stores: objects at any offset and length from any host address are
// stored exactly (a later load returns the bytes stored) and the bytes around them in their
// edge blocks are unchanged: each unaligned edge is a read-modify-write of its covering
// block, a file's last partial block is written back up to the end of the file only, and
// stores of one handle that share an edge block are serialised (range locks), so that
// threads storing into the same blocks never lose each other's bytes.
#include "test_util.hpp"

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

using namespace kvblk_test;
using kvblk::testing::CommandInfo;
using kvblk::testing::Seams;

namespace {

constexpr uint8_t kCanary = 0xC7;

class UnalignedStoreTest : public ::testing::TestWithParam<BackendCase> {
protected:
	/* Not a multiple of 4096 (nor of 512): the file's last block is partial. */
	static constexpr uint64_t kSize = 64 * 4096 + 1234;

	void SetUp() override
	{
		dir_ = std::make_unique<TempDir>();
		path_ = dir_->file("store");
		model_ = expected_bytes(0, kSize, 1ull << 40);
		int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(pwrite(fd, model_.data(), kSize, 0), ssize_t(kSize));
		ASSERT_EQ(fsync(fd), 0);
		close(fd);
		const BackendCase &c = GetParam();
		dev_ = open_dev(path_, make_opts(c.backend, c.workers, c.queue_depth, 0, KVBLK_OPEN_WRITE));
		ASSERT_TRUE(dev_);
		const kvblk_dev_info i = get_info(dev_.get());
		b_ = i.logical_block_size;
		a_ = i.mem_align;
		ASSERT_GT(a_, 1u) << "every source is aligned on this file system: nothing to bounce";
		ASSERT_NE(kSize % b_, 0u);
	}

	uint64_t down(uint64_t v) const { return v / b_ * b_; }
	uint64_t up(uint64_t v) const { return (v + b_ - 1) / b_ * b_; }

	/* The file as it is now, read through the page cache (a fresh descriptor). */
	std::vector<uint8_t> file_bytes() const
	{
		std::vector<uint8_t> v(kSize + 4096);
		int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
		EXPECT_GE(fd, 0);
		const ssize_t n = pread(fd, v.data(), v.size(), 0);
		close(fd);
		EXPECT_EQ(n, ssize_t(kSize)) << "the file's size changed";
		v.resize(n > 0 ? size_t(n) : 0);
		return v;
	}

	/* The file equals the model, byte for byte; the first difference is reported. */
	void expect_model(const char *what) const
	{
		const std::vector<uint8_t> f = file_bytes();
		ASSERT_EQ(f.size(), model_.size()) << what;
		const auto mm = std::mismatch(f.begin(), f.end(), model_.begin());
		EXPECT_TRUE(mm.first == f.end()) << what << ": first wrong byte at offset " << (mm.first - f.begin())
						 << " (block " << (mm.first - f.begin()) / b_ << ")";
	}

	/* Device bytes of one unaligned store [o, o + len): edges read and written, whole blocks written. */
	uint64_t device_bytes(uint64_t o, uint64_t len, uint64_t *read) const
	{
		const uint64_t e = o + len, m0 = up(o), m1 = down(e);
		auto edge = [&](uint64_t block) { return std::min<uint64_t>(b_, kSize - block); };
		uint64_t r = 0, w = 0;
		if (o % b_)
			r += edge(down(o));
		if (e % b_ && (o % b_ == 0 || m1 >= m0))
			r += edge(m1);
		if (m0 < m1)
			w = m1 - m0;
		*read = r;
		return 2 * r + w;
	}

	/* Seams that hold the first read of the object at @x back 100 ms (*@held: it was). */
	static Seams hold_first_read(uint64_t x, std::atomic<bool> *held)
	{
		Seams s;
		s.on_complete = [x, held](const CommandInfo &ci, int64_t res) {
			if (!ci.write && ci.obj_offset == x && !held->exchange(true))
				std::this_thread::sleep_for(std::chrono::milliseconds(100));
			return res;
		};
		return s;
	}

	/* Random bytes for a source. */
	void fill_random(uint8_t *p, uint64_t len)
	{
		for (uint64_t i = 0; i < len; i++)
			p[i] = uint8_t(rng_());
	}

	/* Store [o, o + len) from @src (KVBLK_DESC_UNALIGNED), update the model, check the result. */
	void store_one(uint64_t o, uint64_t len, const uint8_t *src, kvblk_batch_info *bi = nullptr)
	{
		kvblk_desc d = plain_desc(o, len, src, 77);
		d.flags = KVBLK_DESC_UNALIGNED;
		kvblk_result r{};
		ASSERT_EQ(kvblk_store_many(dev_.get(), &d, 1, &r, bi), 1) << kvblk_last_error();
		EXPECT_EQ(r.status, 0);
		EXPECT_EQ(r.bytes, len);
		EXPECT_EQ(r.tag, 77u);
		std::memcpy(model_.data() + o, src, len);
	}

	std::unique_ptr<TempDir> dir_;
	std::string path_;
	std::vector<uint8_t> model_;
	DevPtr dev_;
	uint32_t b_ = 0, a_ = 0;
	std::mt19937_64 rng_{20240530};
};

struct StoreCase {
	const char *name;
	uint64_t offset;
	uint64_t length;
	uint64_t shift; /* the source's distance from an address aligned to everything */
};

/* Every shape alone: exact bytes, the rest of the file unchanged, what was read and written. */
TEST_P(UnalignedStoreTest, every_case_alone)
{
	const uint64_t B = b_, S = kSize, tail0 = down(S);
	const StoreCase cases[] = {
		{"head", B + 100, 3 * B - 100, 100},
		{"tail", B, 2 * B + 100, 0},
		{"head_and_tail", B + 100, 3 * B, 100},
		{"head_and_tail_misaligned_source", B + 100, 3 * B, 101},
		{"aligned_misaligned_source", 4 * B, 2 * B, 1},
		{"inside_one_block", 7 * B + 100, 50, 3},
		{"across_one_boundary", 9 * B - 10, 20, 0},
		{"one_byte", 11 * B + 4095 % B, 1, 5},
		{"to_the_last_byte", tail0 - B + 7, S - (tail0 - B + 7), 7},
		{"last_partial_block", tail0, S - tail0, 0},
		{"inside_the_last_partial_block", tail0 + 3, S - tail0 - 5, 9},
		{"middle_of_the_last_partial_block_misaligned", tail0 + 1, 1, 1},
		{"whole_file", 0, S, 0},
	};
	for (const StoreCase &c : cases) {
		SCOPED_TRACE(c.name);
		AlignedBuf src(c.length + 2 * 4096, kCanary);
		fill_random(src.data() + c.shift, c.length);
		std::atomic<uint64_t> read_bytes{0}, write_bytes{0};
		Seams s;
		s.on_complete = [&](const CommandInfo &ci, int64_t res) {
			if (res > 0)
				(ci.write ? write_bytes : read_bytes) += uint64_t(res);
			return res;
		};
		ASSERT_EQ(kvblk_reset_stats(dev_.get()), 0);
		kvblk_batch_info bi = new_batch_info();
		{
			SeamGuard g(s);
			store_one(c.offset, c.length, src.data() + c.shift, &bi);
		}
		expect_model(c.name);
		uint64_t rd = 0;
		const uint64_t dev = device_bytes(c.offset, c.length, &rd);
		EXPECT_EQ(bi.bytes, c.length);
		EXPECT_EQ(bi.bytes_device, dev);
		EXPECT_EQ(read_bytes.load(), rd) << "only the edge blocks are read";
		EXPECT_EQ(write_bytes.load(), dev - rd) << "edge blocks and whole blocks written, cut at the end";
		const kvblk_stats st = get_stats(dev_.get());
		EXPECT_EQ(st.bytes_written, c.length);
		EXPECT_EQ(st.unaligned_stores, 1u);
		EXPECT_EQ(st.rmw_read_bytes, rd);
		EXPECT_EQ(st.store_range_waits, 0u);
		EXPECT_EQ(st.errors_io + st.errors_other, 0u);

		/* A load of the range returns exactly the bytes stored. */
		AlignedBuf back(c.length + 4096, 0);
		kvblk_desc d = plain_desc(c.offset, c.length, back.data() + 3, 1);
		d.flags = KVBLK_DESC_UNALIGNED;
		kvblk_result r{};
		ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
		EXPECT_EQ(std::memcmp(back.data() + 3, src.data() + c.shift, c.length), 0);
	}
	struct stat sb;
	ASSERT_EQ(stat(path_.c_str(), &sb), 0);
	EXPECT_EQ(uint64_t(sb.st_size), kSize) << "a store never grows the file";
}

/* An aligned object with the flag and an aligned source is a plain store: nothing bounced. */
TEST_P(UnalignedStoreTest, aligned_with_the_flag_is_a_plain_store)
{
	AlignedBuf src(2 * b_, 0);
	fill_random(src.data(), 2 * b_);
	kvblk_batch_info bi = new_batch_info();
	store_one(2 * b_, 2 * b_, src.data(), &bi);
	expect_model("aligned");
	EXPECT_EQ(bi.bytes_device, 2u * b_);
	const kvblk_stats st = get_stats(dev_.get());
	EXPECT_EQ(st.unaligned_stores, 0u);
	EXPECT_EQ(st.rmw_read_bytes, 0u);
}

/* Many random offsets, lengths and source shifts, one after another; the file checked often. */
TEST_P(UnalignedStoreTest, random_round_trips)
{
	const uint64_t max_len = 40 * uint64_t(b_);
	AlignedBuf src(max_len + 2 * 4096, 0);
	uint64_t stored = 0;
	for (int round = 0; round < 300; round++) {
		SCOPED_TRACE(round);
		uint64_t len;
		switch (round % 4) {
		case 0: /* inside one block (or across one boundary) */
			len = 1 + rng_() % (b_ - 1);
			break;
		case 1: /* spanning two blocks */
			len = b_ + 1 + rng_() % (b_ - 1);
			break;
		case 2: /* large */
			len = 1 + rng_() % max_len;
			break;
		default: /* a whole number of blocks at an unaligned offset */
			len = b_ * (1 + rng_() % 8);
			break;
		}
		const uint64_t o = rng_() % (kSize - len + 1);
		const uint64_t shift = rng_() % 4096; /* mostly misaligned sources, sometimes congruent */
		fill_random(src.data() + shift, len);
		store_one(o, len, src.data() + shift);
		stored += len;
		if (round % 25 == 24)
			expect_model("after a round");
	}
	expect_model("at the end");
	EXPECT_EQ(get_stats(dev_.get()).bytes_written, stored);
}

/* Objects of one batch that share edge blocks: one read and one write per block, no byte lost. */
TEST_P(UnalignedStoreTest, shared_edge_blocks_in_one_batch)
{
	const uint64_t B = b_;
	/* Four objects in blocks 3..5: the boundaries fall inside blocks 3 (twice), 4 and 5. */
	const uint64_t cuts[] = {3 * B + 10, 3 * B + 100, 3 * B + 200, 4 * B + 7, 5 * B + 300};
	const uint32_t n = 4;
	AlignedBuf src(8 * B, 0);
	fill_random(src.data(), 8 * B);
	std::vector<kvblk_desc> d;
	for (uint32_t i = 0; i < n; i++) {
		d.push_back(plain_desc(cuts[i], cuts[i + 1] - cuts[i], src.data() + cuts[i] - 3 * B + 1, i));
		d.back().flags = KVBLK_DESC_UNALIGNED;
		std::memcpy(model_.data() + cuts[i], src.data() + cuts[i] - 3 * B + 1, cuts[i + 1] - cuts[i]);
	}
	std::vector<kvblk_result> r(n);
	std::atomic<uint32_t> reads{0};
	Seams s;
	s.on_complete = [&](const CommandInfo &ci, int64_t res) {
		if (!ci.write)
			reads++;
		return res;
	};
	kvblk_batch_info bi = new_batch_info();
	{
		SeamGuard g(s);
		ASSERT_EQ(kvblk_store_many(dev_.get(), d.data(), n, r.data(), &bi), int(n)) << kvblk_last_error();
	}
	for (uint32_t i = 0; i < n; i++) {
		EXPECT_EQ(r[i].status, 0);
		EXPECT_EQ(r[i].bytes, cuts[i + 1] - cuts[i]);
		EXPECT_EQ(r[i].tag, i);
	}
	expect_model("shared edges");
	EXPECT_EQ(reads.load(), 3u) << "blocks 3, 4 and 5 are each read once";
	const kvblk_stats st = get_stats(dev_.get());
	EXPECT_EQ(st.rmw_read_bytes, 3 * B);
	EXPECT_EQ(st.unaligned_stores, n);
	EXPECT_EQ(bi.bytes_device, 6 * B) << "three blocks read and written back once each";
}

/* A block that cannot be read is never written back: the bytes around the object keep their values. */
TEST_P(UnalignedStoreTest, failed_edge_read_fails_its_objects_only)
{
	const uint64_t B = b_;
	const uint64_t bad_block = 10 * B;
	AlignedBuf src(8 * B, 0);
	fill_random(src.data(), 8 * B);
	/* 0 and 1 share the bad block; 2 is elsewhere. */
	kvblk_desc d[3] = {plain_desc(8 * B + 5, 2 * B + 10, src.data() + 1, 0),
			   plain_desc(10 * B + 100, 50, src.data() + 3 * B, 1),
			   plain_desc(20 * B + 9, 100, src.data() + 5 * B, 2)};
	for (kvblk_desc &x : d)
		x.flags = KVBLK_DESC_UNALIGNED;
	Seams s;
	s.on_complete = [&](const CommandInfo &ci, int64_t res) {
		return !ci.write && ci.obj_offset + ci.cmd_offset == bad_block ? int64_t(-EIO) : res;
	};
	kvblk_result r[3];
	kvblk_batch_info bi = new_batch_info();
	{
		SeamGuard g(s);
		EXPECT_EQ(kvblk_store_many(dev_.get(), d, 3, r, &bi), 1);
	}
	EXPECT_EQ(r[0].status, -EIO);
	EXPECT_EQ(r[0].bytes, 0u);
	EXPECT_EQ(r[1].status, -EIO) << "it shares the block that could not be read";
	EXPECT_EQ(r[2].status, 0);
	EXPECT_EQ(bi.failed, 2u);
	/* Object 2 is stored; block 10 was never written; object 0's head block (8) may be. */
	std::memcpy(model_.data() + 20 * B + 9, src.data() + 5 * B, 100);
	const std::vector<uint8_t> f = file_bytes();
	ASSERT_EQ(f.size(), kSize);
	EXPECT_EQ(std::memcmp(f.data() + bad_block, model_.data() + bad_block, B), 0) << "block 10 was written";
	EXPECT_EQ(std::memcmp(f.data() + 20 * B, model_.data() + 20 * B, B), 0);
	EXPECT_EQ(std::memcmp(f.data() + 8 * B, model_.data() + 8 * B, 5), 0) << "bytes before object 0 changed";
	const kvblk_stats st = get_stats(dev_.get());
	EXPECT_EQ(st.unaligned_stores, 1u);
	EXPECT_EQ(st.errors_io, 2u);
}

/* A store into a registered host buffer's unaligned offset (fixed buffer for the middle on uring). */
TEST_P(UnalignedStoreTest, registered_host_source)
{
	AlignedBuf reg(16 * b_, 0);
	fill_random(reg.data(), reg.size());
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0);
	const uint64_t o = 5 * b_ + 33, len = 6 * b_ + 17, at = 33;
	kvblk_desc d = buf_desc(o, len, id, at, 5);
	d.flags = KVBLK_DESC_UNALIGNED;
	kvblk_result r{};
	ASSERT_EQ(kvblk_store_many(dev_.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
	std::memcpy(model_.data() + o, reg.data() + at, len);
	expect_model("registered source");
	EXPECT_EQ(kvblk_unregister_buffer(dev_.get(), id), 0);
}

/*
 * An aligned store of a block that an earlier unaligned store is read-modify-writing waits for
 * it: the aligned bytes win. The earlier store's edge read is held back, so that without the
 * range lock the aligned store would land first and be overwritten by the write-back.
 */
TEST_P(UnalignedStoreTest, aligned_store_waits_for_rmw_of_its_block)
{
	const uint64_t B = b_, X = 12 * B;
	AlignedBuf a(B, 0), w(B, 0);
	fill_random(a.data(), B);
	fill_random(w.data(), B);
	std::atomic<bool> held{false};
	Seams s = hold_first_read(X, &held);
	SeamGuard g(s);
	kvblk_desc first = plain_desc(X + 100, 200, a.data() + 1, 1);
	first.flags = KVBLK_DESC_UNALIGNED;
	kvblk_desc second = plain_desc(X, B, w.data(), 2);
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	so.flags = KVBLK_SUBMIT_STORE;
	uint64_t t1 = 0, t2 = 0;
	kvblk_result r1{}, r2{};
	so.results = &r1;
	ASSERT_EQ(kvblk_submit(dev_.get(), &first, 1, &so, &t1), 0) << kvblk_last_error();
	so.results = &r2;
	ASSERT_EQ(kvblk_submit(dev_.get(), &second, 1, &so, &t2), 0) << kvblk_last_error();
	ASSERT_EQ(kvblk_wait(dev_.get(), t2, -1, nullptr), 1);
	ASSERT_EQ(kvblk_wait(dev_.get(), t1, -1, nullptr), 1);
	EXPECT_EQ(r1.status, 0);
	EXPECT_EQ(r2.status, 0);
	std::memcpy(model_.data() + X + 100, a.data() + 1, 200);
	std::memcpy(model_.data() + X, w.data(), B);
	expect_model("the later aligned store wins");
	EXPECT_EQ(get_stats(dev_.get()).store_range_waits, 1u);
}

/* A parked store can be cancelled: it ends -ECANCELED and writes nothing; close does not hang. */
TEST_P(UnalignedStoreTest, parked_store_cancelled_and_closed)
{
	const uint64_t B = b_, X = 30 * B;
	AlignedBuf a(2 * B, 0);
	fill_random(a.data(), 2 * B);
	std::atomic<bool> held{false};
	Seams s = hold_first_read(X, &held);
	SeamGuard g(s);
	kvblk_desc d[3] = {plain_desc(X + 10, 20, a.data(), 1), plain_desc(X + 40, 20, a.data() + 100, 2),
			   plain_desc(X + 70, 20, a.data() + 200, 3)};
	for (kvblk_desc &x : d)
		x.flags = KVBLK_DESC_UNALIGNED;
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	so.flags = KVBLK_SUBMIT_STORE;
	uint64_t t[3];
	kvblk_result r[3];
	for (int i = 0; i < 3; i++) {
		so.results = &r[i];
		ASSERT_EQ(kvblk_submit(dev_.get(), &d[i], 1, &so, &t[i]), 0) << kvblk_last_error();
	}
	ASSERT_EQ(kvblk_cancel(dev_.get(), t[1]), 0);
	EXPECT_EQ(kvblk_wait(dev_.get(), t[1], -1, nullptr), 0);
	EXPECT_EQ(r[1].status, -ECANCELED);
	EXPECT_EQ(r[1].bytes, 0u);
	EXPECT_EQ(kvblk_wait(dev_.get(), t[0], -1, nullptr), 1);
	EXPECT_EQ(r[0].status, 0);
	std::memcpy(model_.data() + X + 10, a.data(), 20);
	/* The third may still be parked or running: closing the device ends it either way. */
	dev_.reset();
	if (r[2].status == 0)
		std::memcpy(model_.data() + X + 70, a.data() + 200, 20);
	else
		EXPECT_EQ(r[2].status, -ECANCELED);
	expect_model("the cancelled store wrote nothing");
}

/*
 * Four threads store byte ranges of their own that share every edge block with the others'
 * (block k: thread t owns its bytes [t*q, (t+1)*q), q = block / 4 minus a little), round after
 * round, each round one batch per thread. Without the range locks, a thread's write-back of a
 * block carries the bytes it read before another thread's write landed, and those are lost.
 */
TEST_P(UnalignedStoreTest, concurrent_overlapping_stores_lose_nothing)
{
	constexpr uint32_t kThreads = 4, kRounds = 150, kBlocks = 24;
	const uint64_t B = b_, q = B / kThreads, base = 16 * B;
	std::vector<std::unique_ptr<AlignedBuf>> src;
	for (uint32_t t = 0; t < kThreads; t++)
		src.push_back(std::make_unique<AlignedBuf>(kBlocks * B + 4096, 0));
	/* Thread t's range in block k: [base + k*B + t*q + 1, + q - 2): never aligned, never touching. */
	auto range_of = [&](uint32_t t, uint32_t k) { return base + k * B + t * q + 1; };
	const uint64_t len = q - 2;
	std::atomic<int> failures{0};
	auto worker = [&](uint32_t t) {
		std::vector<kvblk_desc> d(kBlocks);
		std::vector<kvblk_result> r(kBlocks);
		uint8_t *mem = src[t]->data() + 1 + t;
		for (uint32_t round = 0; round < kRounds; round++) {
			for (uint32_t k = 0; k < kBlocks; k++) {
				uint8_t *p = mem + k * B;
				for (uint64_t i = 0; i < len; i++)
					p[i] = uint8_t(round * 31 + t * 7 + k + i);
			}
			for (uint32_t k = 0; k < kBlocks; k++) {
				/* Blocks in a rotating order, so threads meet in different places. */
				const uint32_t kk = (k + round + t) % kBlocks;
				d[k] = plain_desc(range_of(t, kk), len, mem + kk * B, k);
				d[k].flags = KVBLK_DESC_UNALIGNED;
			}
			if (kvblk_store_many(dev_.get(), d.data(), kBlocks, r.data(), nullptr) != int(kBlocks))
				failures++;
		}
	};
	std::vector<std::thread> th;
	for (uint32_t t = 0; t < kThreads; t++)
		th.emplace_back(worker, t);
	for (std::thread &x : th)
		x.join();
	ASSERT_EQ(failures.load(), 0) << kvblk_last_error();
	for (uint32_t t = 0; t < kThreads; t++)
		for (uint32_t k = 0; k < kBlocks; k++)
			for (uint64_t i = 0; i < len; i++)
				model_[range_of(t, k) + i] = uint8_t((kRounds - 1) * 31 + t * 7 + k + i);
	expect_model("every thread's last round, and the bytes between the ranges as they were");
	const kvblk_stats st = get_stats(dev_.get());
	EXPECT_EQ(st.unaligned_stores, uint64_t(kThreads) * kRounds * kBlocks);
	EXPECT_EQ(st.errors_io + st.errors_other, 0u);
}

TEST_P(UnalignedStoreTest, rules)
{
	AlignedBuf buf(8 * b_, kCanary);
	kvblk_result r{};
	kvblk_batch_info bi = new_batch_info();

	/* Without the flag the alignment rules hold for stores. */
	kvblk_desc d = plain_desc(b_ + 100, b_, buf.data() + 100, 1);
	EXPECT_EQ(kvblk_store_many(dev_.get(), &d, 1, &r, &bi), -EINVAL);
	EXPECT_EQ(bi.bad_index, 0);

	/* Never past the end of the file, not even by a byte. */
	d = plain_desc(kSize - 10, 11, buf.data(), 1);
	d.flags = KVBLK_DESC_UNALIGNED;
	EXPECT_EQ(kvblk_store_many(dev_.get(), &d, 1, &r, &bi), -ERANGE);
	EXPECT_EQ(r.status, -ERANGE);
	d.length = 0;
	EXPECT_EQ(kvblk_store_many(dev_.get(), &d, 1, &r, &bi), -EINVAL);

	/* KVBLK_DESC_SHORT_EOF is for loads. */
	d = plain_desc(0, 10, buf.data(), 1);
	d.flags = KVBLK_DESC_UNALIGNED | KVBLK_DESC_SHORT_EOF;
	EXPECT_EQ(kvblk_store_many(dev_.get(), &d, 1, &r, &bi), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("loads only"), std::string::npos) << kvblk_last_error();

	/* Two objects whose bytes overlap are refused; sharing only a block is fine (above). */
	kvblk_desc two[2] = {plain_desc(100, 50, buf.data(), 1), plain_desc(149, 10, buf.data(), 2)};
	two[0].flags = two[1].flags = KVBLK_DESC_UNALIGNED;
	kvblk_result rr[2];
	EXPECT_EQ(kvblk_store_many(dev_.get(), two, 2, rr, &bi), -EINVAL);
	EXPECT_EQ(bi.bad_index, 1);
	expect_model("nothing was written");
	EXPECT_EQ(get_stats(dev_.get()).rejected_batches, 5u);
}

/* A device opened read-only refuses stores as before, flag or not. */
TEST_P(UnalignedStoreTest, read_only_device)
{
	const BackendCase &c = GetParam();
	DevPtr ro = open_dev(path_, make_opts(c.backend, c.workers, c.queue_depth));
	ASSERT_TRUE(ro);
	AlignedBuf buf(b_, 0);
	kvblk_desc d = plain_desc(10, 10, buf.data(), 1);
	d.flags = KVBLK_DESC_UNALIGNED;
	kvblk_result r{};
	EXPECT_EQ(kvblk_store_many(ro.get(), &d, 1, &r, nullptr), -EBADF);
}

/*
 * A write-only target (an O_WRONLY fd added with KVBLK_OPEN_WRITE): an unaligned store with an
 * edge inside a block is refused before anything is written (it would read that block), the
 * file unchanged; one whose offset and length are whole blocks (only its source misaligned)
 * needs no read and is stored.
 */
TEST_P(UnalignedStoreTest, write_only_target_refuses_edges_before_writing)
{
	const BackendCase &c = GetParam();
	const int fd = open(path_.c_str(), O_WRONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	uint32_t wo = 0;
	ASSERT_EQ(kvblk_add_target_fd(dev_.get(), fd, KVBLK_OPEN_WRITE, &wo), 0) << kvblk_last_error();
	close(fd);
	AlignedBuf src(8 * b_, 0);
	fill_random(src.data(), src.size());
	kvblk_desc d[2] = {plain_desc(2 * b_, 2 * b_, src.data() + 1, 1), plain_desc(4 * b_ + 100, b_ + 50, src.data() + 4 * b_, 2)};
	for (auto &x : d) {
		x.target = wo;
		x.flags = KVBLK_DESC_UNALIGNED;
	}
	kvblk_result r[2];
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_store_many(dev_.get(), d, 2, r, &bi), -EBADF) << c.name;
	EXPECT_EQ(bi.bad_index, -1); /* -EBADF: the target is at fault, not the descriptor (kvblk.h) */
	const std::string why = kvblk_last_error();
	EXPECT_EQ(why.rfind("descriptor 1: ", 0), 0u) << why;
	EXPECT_NE(why.find("write-only"), std::string::npos) << why;
	expect_model("after the refused batch");

	ASSERT_EQ(kvblk_store_many(dev_.get(), d, 1, r, nullptr), 1) << kvblk_last_error();
	EXPECT_EQ(r[0].status, 0);
	std::memcpy(model_.data() + 2 * b_, src.data() + 1, 2 * b_);
	expect_model("after the whole-block store");
}

INSTANTIATE_TEST_SUITE_P(Backends, UnalignedStoreTest, ::testing::ValuesIn(kAllBackends), case_name);

/* A buffered target (KVBLK_OPEN_BUFFERED): the same rules through the page cache. */
TEST(UnalignedStoreBuffered, round_trip_and_last_block)
{
	TempDir dir;
	const std::string path = dir.file("buffered");
	constexpr uint64_t kSize = 8 * 4096 + 77;
	std::vector<uint8_t> model = expected_bytes(0, kSize, 1ull << 40);
	{
		int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0);
		ASSERT_EQ(pwrite(fd, model.data(), kSize, 0), ssize_t(kSize));
		close(fd);
	}
	DevPtr dev = open_dev(path, make_opts(KVBLK_BACKEND_URING, 1, 8, 0, KVBLK_OPEN_WRITE | KVBLK_OPEN_BUFFERED));
	ASSERT_TRUE(dev);
	AlignedBuf src(3 * 4096, 0);
	for (uint64_t i = 0; i < src.size(); i++)
		src.data()[i] = uint8_t(i * 13 + 1);
	const kvblk_desc d[2] = {
		{100, 5000, uint64_t(uintptr_t(src.data() + 1)), KVBLK_BUF_NONE, KVBLK_DESC_UNALIGNED, 1, 0, 0},
		{kSize - 50, 40, uint64_t(uintptr_t(src.data() + 6000)), KVBLK_BUF_NONE, KVBLK_DESC_UNALIGNED, 2, 0, 0},
	};
	kvblk_result r[2];
	ASSERT_EQ(kvblk_store_many(dev.get(), d, 2, r, nullptr), 2) << kvblk_last_error();
	std::memcpy(model.data() + 100, src.data() + 1, 5000);
	std::memcpy(model.data() + kSize - 50, src.data() + 6000, 40);
	std::vector<uint8_t> f(kSize + 100);
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(pread(fd, f.data(), f.size(), 0), ssize_t(kSize));
	close(fd);
	f.resize(kSize);
	EXPECT_TRUE(f == model);
}

} // namespace

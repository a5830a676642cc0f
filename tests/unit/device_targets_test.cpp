// SPDX-License-Identifier: MIT
// Several targets on real namespaces (kvblk_add_target()): a kmod device whose kvblk.ko context
// takes every added target (KVBLK_FEAT_TARGETS: a batch over all of them is one
// KVBLK_IOC_LOAD_MANY, counted with the kvblk_batch_start tracepoint and the per-disk sysfs
// counters); the same device as with a kvblk.ko without KVBLK_FEAT_TARGETS (the
// kmod_no_targets seam), whose batch is split into lanes (lanes.cpp: an added block device
// gets a kvblk.ko context of its own, a regular file the shared uring lane); and a uring_cmd
// device over two generic char devices. They run in the QEMU guest of tests/vm (variant
// two-ns, tests/vm/cases/libkvblk-targets.sh) and skip elsewhere:
//
//   KVBLK_TEST_DEVICE, KVBLK_TEST_NGDEV    namespace A (the data namespace) and its char device
//   KVBLK_TEST_DEVICE2, KVBLK_TEST_NGDEV2  namespace B, on a second controller
//   KVBLK_VM_NS2_OFFSET                    B's byte b holds the image pattern of byte OFFSET + b
//   KVBLK_VM_NS2_BYTES, KVBLK_VM_NS2_LBA   B's capacity and logical block size
//   KVBLK_TEST_FILE_DIR                    a directory on a file system that takes O_DIRECT
//   KVBLK_TEST_FILE_DISK                   the disk under KVBLK_TEST_FILE_DIR's file system
//                                          (kvblk.ko counts a file's batches there), optional
//   KVBLK_TEST_NONNVME_DEVICE              a block device that is no NVMe namespace (null_blk),
//                                          served by kvblk.ko's block-layer engine, optional
//   KVBLK_TEST_LOOP_DEVICE                 a loop device over a file of random bytes, optional
//   KVBLK_TEST_KMOD=1                      kvblk.ko must be loaded (fail instead of skip)
//
// Every object is compared with an O_DIRECT pread(2) of its own target (the block device for
// a generic char device) and with the pattern it must hold; the bytes around every
// destination must stay untouched; results, batch info, target info, the stats and kvblk.ko's
// sysfs directories must equal what was done.
#include "device_util.hpp"

#include <algorithm>
#include <map>
#include <poll.h>
#include <set>
#include <sys/stat.h>

using namespace kvblk_test;

namespace {

/* The test file's byte b holds the pattern of byte kFileBase + b: no namespace holds those. */
constexpr uint64_t kFileBase = 1ull << 30;
constexpr uint64_t kFileBytes = 8 * MiB;
/* Bytes left untouched before and after every destination. */
constexpr uint64_t kGap = 4096;

std::string base_name(const std::string &path)
{
	return path.substr(path.rfind('/') + 1);
}

/* kvblk.ko's directory of a namespace: it exists while some context is attached to it. */
std::string kvblk_sysfs(const std::string &blockdev)
{
	return "/sys/kernel/kvblk/" + base_name(blockdev);
}

bool exists(const std::string &path)
{
	struct stat st;
	return stat(path.c_str(), &st) == 0;
}

std::string read_line(const std::string &path)
{
	std::string s;
	if (FILE *f = std::fopen(path.c_str(), "r")) {
		char buf[256];
		if (std::fgets(buf, sizeof(buf), f))
			s = buf;
		std::fclose(f);
	}
	while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
		s.pop_back();
	return s;
}

kvblk_dev_info target_info(kvblk_dev *d, uint32_t id)
{
	kvblk_dev_info i{};
	i.info_size = sizeof(i);
	EXPECT_EQ(kvblk_get_target_info(d, id, &i), 0) << "target " << id << ": " << kvblk_last_error();
	return i;
}

bool starts_with(const std::string &s, const std::string &prefix)
{
	return s.rfind(prefix, 0) == 0;
}

/* One target of the device under test, as the test sees it. */
struct Tgt {
	uint32_t id = 0;
	std::string ref_path;	/* what pread(2) reads for reference */
	uint64_t pattern_base = 0;
	bool pattern = false;	/* the image's pattern is known for it */
	kvblk_dev_info info{};
	std::unique_ptr<Reference> ref;
};

/* One object of a batch: where it comes from and where it lands in the test's buffer. */
struct Obj {
	size_t tgt;	/* index into the test's targets */
	uint64_t off, len, at;
};

class TargetsTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		REQUIRE_DEVICE();
		if (!env("KVBLK_TEST_DEVICE2"))
			GTEST_SKIP() << "KVBLK_TEST_DEVICE2 is not set (a second NVMe namespace on another "
					"controller: the VM variant two-ns sets it)";
		a_ = env("KVBLK_TEST_DEVICE");
		b_ = env("KVBLK_TEST_DEVICE2");
		if (const char *o = env("KVBLK_VM_NS2_OFFSET")) {
			b_base_ = std::strtoull(o, nullptr, 0);
			b_pattern_ = env("KVBLK_VM_PATTERN_XOR") != nullptr;
		}
	}

	/* A regular file of kFileBytes on KVBLK_TEST_FILE_DIR holding the pattern from kFileBase. */
	void make_file()
	{
		const char *dir = env("KVBLK_TEST_FILE_DIR");
		if (!dir)
			GTEST_SKIP() << "KVBLK_TEST_FILE_DIR is not set (a directory on a file system with O_DIRECT)";
		file_ = std::string(dir) + "/targets-" + std::to_string(getpid());
		const int fd = open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0) << file_ << ": " << std::strerror(errno);
		std::vector<uint8_t> buf(MiB);
		for (uint64_t off = 0; off < kFileBytes; off += buf.size()) {
			kvblk_pattern_fill(buf.data(), kFileBase + off, buf.size());
			ASSERT_EQ(pwrite(fd, buf.data(), buf.size(), off_t(off)), ssize_t(buf.size()));
		}
		ASSERT_EQ(fsync(fd), 0);
		close(fd);
	}

	void TearDown() override
	{
		if (!file_.empty())
			unlink(file_.c_str());
	}

	/* Describe target @id of @dev for the checks; @ref_path is read with pread(2). */
	void track(kvblk_dev *dev, uint32_t id, const std::string &ref_path, bool pattern, uint64_t base)
	{
		Tgt t;
		t.id = id;
		t.ref_path = ref_path;
		t.pattern = pattern;
		t.pattern_base = base;
		t.info = target_info(dev, id);
		t.ref = std::make_unique<Reference>(ref_path);
		tgts_.push_back(std::move(t));
	}

	/*
	 * @n objects interleaved over the targets of @which (indexes into tgts_), of varied sizes
	 * (one block up to several commands), spread over each target, each followed by kGap bytes.
	 */
	std::vector<Obj> plan(const std::vector<size_t> &which, uint32_t n, uint64_t salt = 0)
	{
		std::vector<Obj> objs;
		uint64_t at = kGap;
		for (uint32_t k = 0; k < n; k++) {
			const size_t ti = which[k % which.size()];
			const kvblk_dev_info &i = tgts_[ti].info;
			const uint64_t lbs = std::max<uint64_t>(i.logical_block_size, 512), mc = i.max_cmd_bytes;
			const uint64_t sizes[] = {lbs, 4096, 3 * lbs, mc - lbs, mc, mc + lbs, 2 * mc + 5 * lbs, 256 * KiB};
			uint64_t len = sizes[(k / which.size() + salt) % 8];
			if (len == 0)
				len = lbs;
			const uint64_t slots = 16;
			uint64_t off = (i.capacity / slots) * ((k * 7 + salt * 3) % slots) + (k % 5) * lbs;
			off = std::min(off, i.capacity - len);
			off -= off % lbs;
			objs.push_back(Obj{ti, off, len, at});
			at += (len + kGap - 1) / kGap * kGap + kGap;
		}
		return objs;
	}

	static uint64_t span(const std::vector<Obj> &objs)
	{
		return objs.empty() ? kGap : objs.back().at + (objs.back().len + kGap - 1) / kGap * kGap + kGap;
	}

	std::vector<kvblk_desc> descs_for(const std::vector<Obj> &objs, const AlignedBuf &mem, uint32_t buf_id,
					  uint64_t tag0)
	{
		std::vector<kvblk_desc> d;
		for (size_t k = 0; k < objs.size(); k++) {
			const Obj &o = objs[k];
			kvblk_desc x = buf_id == KVBLK_BUF_NONE ? plain_desc(o.off, o.len, mem.data() + o.at, tag0 + k)
								: buf_desc(o.off, o.len, buf_id, o.at, tag0 + k);
			x.target = tgts_[o.tgt].id;
			d.push_back(x);
		}
		return d;
	}

	/* Bytes, pattern and the untouched gaps of every object of @objs in @mem. */
	void check_bytes(const std::vector<Obj> &objs, const AlignedBuf &mem)
	{
		EXPECT_TRUE(mem.all(0, kGap, 0xA5)) << "the bytes before the first destination were written";
		for (size_t k = 0; k < objs.size(); k++) {
			const Obj &o = objs[k];
			Tgt &t = tgts_[o.tgt];
			SCOPED_TRACE("object " + std::to_string(k) + ": target " + std::to_string(t.id) + " (" +
				     t.ref_path + "), " + std::to_string(o.len) + " bytes at " + std::to_string(o.off));
			EXPECT_TRUE(t.ref->same(mem.data() + o.at, o.off, o.len));
			if (t.pattern) {
				EXPECT_TRUE(pattern_ok(mem.data() + o.at, t.pattern_base + o.off, o.len));
			}
			const uint64_t end = o.at + o.len, next = k + 1 < objs.size() ? objs[k + 1].at : span(objs);
			EXPECT_TRUE(mem.all(end, next - end, 0xA5)) << "the bytes after the object were written";
		}
	}

	/*
	 * Commands the device issues for @objs: each object split at its own target's
	 * max_cmd_bytes; @timed_only: only those of targets whose backend times its commands
	 * (every one but kmod).
	 */
	uint64_t commands(const std::vector<Obj> &objs, bool timed_only = false) const
	{
		uint64_t c = 0;
		for (const Obj &o : objs) {
			const kvblk_dev_info &i = tgts_[o.tgt].info;
			if (!timed_only || i.backend != uint32_t(KVBLK_BACKEND_KMOD))
				c += (o.len + i.max_cmd_bytes - 1) / i.max_cmd_bytes;
		}
		return c;
	}

	static uint64_t bytes(const std::vector<Obj> &objs)
	{
		uint64_t b = 0;
		for (const Obj &o : objs)
			b += o.len;
		return b;
	}

	/*
	 * One kvblk_load_many() of @objs (plain pointers, or registered buffer @buf_id which is
	 * @mem), checked: bytes, results, batch info, and stats moved by one batch per backend in
	 * @served.
	 */
	void load_and_check(kvblk_dev *dev, const std::vector<Obj> &objs, AlignedBuf &mem, uint32_t buf_id,
			    const std::set<kvblk_backend> &served, kvblk_backend first)
	{
		const uint32_t n = uint32_t(objs.size());
		const std::vector<kvblk_desc> d = descs_for(objs, mem, buf_id, 500);
		ASSERT_EQ(kvblk_reset_stats(dev), 0);
		std::vector<kvblk_result> res(n);
		kvblk_batch_info bi = new_batch_info();
		ASSERT_EQ(kvblk_load_many(dev, d.data(), n, res.data(), &bi), int(n)) << kvblk_last_error();
		for (uint32_t k = 0; k < n; k++) {
			EXPECT_EQ(res[k].status, 0) << k;
			EXPECT_EQ(res[k].bytes, objs[k].len) << k;
			EXPECT_EQ(res[k].tag, 500u + k) << k;
		}
		check_bytes(objs, mem);
		EXPECT_EQ(bi.backend, uint32_t(first));
		EXPECT_EQ(bi.path, uint32_t(KVBLK_PATH_HOST));
		EXPECT_EQ(bi.failed, 0u);
		EXPECT_EQ(bi.bytes, bytes(objs));
		EXPECT_EQ(bi.commands, commands(objs));
		const kvblk_stats st = get_stats(dev);
		EXPECT_EQ(st.batches, 1u);
		EXPECT_EQ(st.objects, n);
		EXPECT_EQ(st.commands, commands(objs));
		EXPECT_EQ(st.bytes_read, bytes(objs));
		EXPECT_EQ(st.errors_io + st.errors_eagain + st.errors_other, 0u);
		EXPECT_EQ(st.rejected_batches, 0u);
		for (int b = 0; b < KVBLK_BACKEND_MAX; b++)
			EXPECT_EQ(st.batches_by_backend[b], served.count(kvblk_backend(b)) ? 1u : 0u)
				<< "batches_by_backend[" << kvblk_backend_name(b) << "]";
		EXPECT_EQ(hist_sum(st.batch_lat_hist), 1u);
		/* kvblk.ko's commands are timed by the module (sysfs), the others by libkvblk. */
		EXPECT_EQ(hist_sum(st.cmd_lat_hist), commands(objs, true));
	}

	/* A load naming @id fails with -ENOENT before anything is read. */
	void expect_unknown_target(kvblk_dev *dev, uint32_t id)
	{
		const kvblk_dev_info &i0 = tgts_[0].info;
		AlignedBuf mem(4 * kGap);
		kvblk_desc d[2] = {plain_desc(0, i0.logical_block_size, mem.data() + kGap, 1),
				   plain_desc(0, i0.logical_block_size, mem.data() + 2 * kGap, 2)};
		d[1].target = id;
		kvblk_result r[2];
		ASSERT_EQ(kvblk_reset_stats(dev), 0);
		kvblk_batch_info bi = new_batch_info();
		EXPECT_EQ(kvblk_load_many(dev, d, 2, r, &bi), -ENOENT);
		EXPECT_TRUE(says("target")) << kvblk_last_error();
		EXPECT_EQ(bi.bad_index, 1);
		EXPECT_EQ(r[0].status, -ECANCELED);
		EXPECT_EQ(r[1].status, -ENOENT);
		EXPECT_TRUE(mem.all(0, 4 * kGap, 0xA5)) << "a rejected call read something";
		/* kvblk_submit() refuses it the same way, naming the descriptor. */
		kvblk_submit_opts so;
		kvblk_submit_opts_init(&so, sizeof(so));
		uint64_t ticket = 0;
		EXPECT_EQ(kvblk_submit(dev, d, 2, &so, &ticket), -ENOENT);
		EXPECT_EQ(so.bad_index, 1);
		const kvblk_stats st = get_stats(dev);
		EXPECT_EQ(st.rejected_batches, 2u);
		EXPECT_EQ(st.batches, 0u);
		EXPECT_EQ(st.commands, 0u);
		EXPECT_TRUE(mem.all(0, 4 * kGap, 0xA5)) << "a rejected submit read something";
	}

	std::string a_, b_, file_;
	uint64_t b_base_ = 0;
	bool b_pattern_ = false;
	std::vector<Tgt> tgts_;
};

/* ------------------------------------------- kmod lanes (a kvblk.ko without KVBLK_FEAT_TARGETS) */

/* A kmod device opened as with a kvblk.ko that takes one target per context. */
DevPtr open_lanes_dev(const std::string &path, const kvblk_open_opts &o)
{
	kvblk::testing::Seams s;
	s.kmod_no_targets = true;
	SeamGuard g(s);
	return open_dev(path, o);
}

/* The reason a lane gives when the device's context did not take its target (the seam). */
const char kNotTaken[] = "kvblk.ko without KVBLK_FEAT_TARGETS";

class KmodLanesTargetsTest : public TargetsTest {
protected:
	void SetUp() override
	{
		TargetsTest::SetUp();
		if (IsSkipped())
			return;
		REQUIRE_KMOD();
		make_file();
		if (IsSkipped() || HasFatalFailure())
			return;
		ASSERT_FALSE(exists(kvblk_sysfs(b_))) << b_ << " is attached to kvblk.ko before the test";
		dev_ = open_lanes_dev(a_, make_opts(KVBLK_BACKEND_KMOD));
		ASSERT_TRUE(dev_);
		ASSERT_EQ(get_info(dev_.get()).backend, uint32_t(KVBLK_BACKEND_KMOD));
		/* A buffer registered before the lanes exist: every lane made later registers it. */
		early_ = std::make_unique<AlignedBuf>(8 * MiB);
		ASSERT_EQ(kvblk_register_buffer(dev_.get(), KVBLK_MEM_HOST, early_->data(), early_->size(), &early_id_), 0)
			<< kvblk_last_error();
		ASSERT_EQ(kvblk_add_target(dev_.get(), b_.c_str(), 0, &id_b_), 0) << kvblk_last_error();
		ASSERT_EQ(kvblk_add_target(dev_.get(), file_.c_str(), 0, &id_f_), 0) << kvblk_last_error();
		EXPECT_EQ(id_b_, 1u);
		EXPECT_EQ(id_f_, 2u);
		track(dev_.get(), 0, a_, env("KVBLK_VM_PATTERN_XOR") != nullptr, 0);
		track(dev_.get(), id_b_, b_, b_pattern_, b_base_);
		track(dev_.get(), id_f_, file_, true, kFileBase);
	}

	void TearDown() override
	{
		if (dev_ && early_id_ != KVBLK_BUF_NONE) {
			EXPECT_EQ(kvblk_unregister_buffer(dev_.get(), early_id_), 0) << kvblk_last_error();
		}
		dev_.reset();
		TargetsTest::TearDown();
	}

	DevPtr dev_;
	std::unique_ptr<AlignedBuf> early_;
	uint32_t early_id_ = KVBLK_BUF_NONE;
	uint32_t id_b_ = 0, id_f_ = 0;
};

TEST_F(KmodLanesTargetsTest, target_info_names_each_lane)
{
	kvblk_dev *dev = dev_.get();
	const kvblk_dev_info d = get_info(dev);
	EXPECT_EQ(d.targets, 3u);
	/* Lane 0 decides: kvblk.ko's io_uring commands; batches over several lanes are split on
	 * the dispatch thread. */
	EXPECT_EQ(d.async, uint32_t(module_features() & KVBLK_FEAT_URING_CMD ? KVBLK_ASYNC_NATIVE : KVBLK_ASYNC_THREAD));

	const kvblk_dev_info &a = tgts_[0].info;
	EXPECT_EQ(a.backend, uint32_t(KVBLK_BACKEND_KMOD));
	EXPECT_TRUE(starts_with(a.backend_reason, "kmod: ")) << a.backend_reason;
	EXPECT_EQ(a.capacity, d.capacity);

	const kvblk_dev_info &b = tgts_[1].info;
	EXPECT_EQ(b.backend, uint32_t(KVBLK_BACKEND_KMOD));
	EXPECT_TRUE(starts_with(b.backend_reason, "kmod: " + b_ + " has a kvblk.ko context of its own (" + kNotTaken))
		<< b.backend_reason;
	EXPECT_TRUE(b.flags & KVBLK_INFO_BLOCKDEV);
	EXPECT_FALSE(b.flags & KVBLK_INFO_WRITABLE);
	if (const char *nb = env("KVBLK_VM_NS2_BYTES")) {
		EXPECT_EQ(b.capacity, std::strtoull(nb, nullptr, 0));
	}
	if (const char *lba = env("KVBLK_VM_NS2_LBA")) {
		EXPECT_EQ(b.logical_block_size, std::strtoul(lba, nullptr, 10));
	}
	if (const char *hw = env("KVBLK_VM_MAX_CMD_BYTES")) {
		EXPECT_LE(b.max_cmd_bytes, std::strtoull(hw, nullptr, 10));
	}
	EXPECT_EQ(b.targets, 3u);

	const kvblk_dev_info &f = tgts_[2].info;
	EXPECT_EQ(f.backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_TRUE(starts_with(f.backend_reason, "uring: " + file_ + " is not a block device (" + kNotTaken))
		<< f.backend_reason;
	EXPECT_FALSE(f.flags & KVBLK_INFO_BLOCKDEV);
	EXPECT_FALSE(f.flags & KVBLK_INFO_BUFFERED);
	EXPECT_EQ(f.capacity, kFileBytes);
	EXPECT_EQ(f.max_cmd_bytes, std::min<uint64_t>(d.max_cmd_bytes, KVBLK_DEFAULT_MAX_CMD_BYTES));
	/*
	 * Queue depth and workers of the backend that serves each: kvblk.ko's max_inflight of
	 * each namespace; the uring lane takes the depth asked for (the default here), as the
	 * device's own stores do.
	 */
	EXPECT_EQ(std::to_string(a.queue_depth), read_line(kvblk_sysfs(a_) + "/max_inflight"));
	EXPECT_EQ(std::to_string(b.queue_depth), read_line(kvblk_sysfs(b_) + "/max_inflight"));
	EXPECT_EQ(b.workers, d.workers);
	EXPECT_EQ(f.queue_depth, KVBLK_DEFAULT_QUEUE_DEPTH);
	EXPECT_EQ(f.workers, d.workers);

	/* B has a kvblk.ko context of its own: the module's directory for it, one user. */
	EXPECT_EQ(read_line(kvblk_sysfs(b_) + "/attached"), "1");
	EXPECT_EQ(read_line(kvblk_sysfs(a_) + "/attached"), "1");

	/* A generic char device is for uring_cmd devices only. */
	if (const char *ng = env("KVBLK_TEST_NGDEV2")) {
		uint32_t id = 0;
		EXPECT_EQ(kvblk_add_target(dev, ng, 0, &id), -EOPNOTSUPP);
		EXPECT_TRUE(says("only a uring_cmd device serves it")) << kvblk_last_error();
	}
	kvblk_dev_info none{};
	none.info_size = sizeof(none);
	EXPECT_EQ(kvblk_get_target_info(dev, 3, &none), -ENOENT);
}

/* One batch, objects interleaved A, B, file: plain pointers, then the early registered buffer,
 * then a buffer registered after the lanes were made. */
TEST_F(KmodLanesTargetsTest, interleaved_batch_equals_pread)
{
	kvblk_dev *dev = dev_.get();
	const std::set<kvblk_backend> both = {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING};
	const std::vector<Obj> objs = plan({0, 1, 2}, 24);
	ASSERT_LE(span(objs), early_->size());
	{
		SCOPED_TRACE("plain pointers");
		AlignedBuf mem(span(objs));
		load_and_check(dev, objs, mem, KVBLK_BUF_NONE, both, KVBLK_BACKEND_KMOD);
	}
	{
		SCOPED_TRACE("buffer registered before the targets were added");
		std::memset(early_->data(), 0xA5, early_->size());
		load_and_check(dev, objs, *early_, early_id_, both, KVBLK_BACKEND_KMOD);
	}
	{
		SCOPED_TRACE("buffer registered after the targets were added");
		AlignedBuf mem(span(objs));
		uint32_t id = 0;
		ASSERT_EQ(kvblk_register_buffer(dev, KVBLK_MEM_HOST, mem.data(), mem.size(), &id), 0) << kvblk_last_error();
		load_and_check(dev, objs, mem, id, both, KVBLK_BACKEND_KMOD);
		EXPECT_EQ(kvblk_unregister_buffer(dev, id), 0) << kvblk_last_error();
	}
	/* Batches that leave lanes out count only the backends that served them. */
	{
		SCOPED_TRACE("B and the file only (lane 0 idle)");
		const std::vector<Obj> bf = plan({1, 2}, 10, 1);
		AlignedBuf mem(span(bf));
		load_and_check(dev, bf, mem, KVBLK_BUF_NONE, both, KVBLK_BACKEND_KMOD);
	}
	{
		SCOPED_TRACE("A and B only");
		const std::vector<Obj> ab = plan({0, 1}, 10, 2);
		AlignedBuf mem(span(ab));
		load_and_check(dev, ab, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	}
	{
		SCOPED_TRACE("the file only");
		const std::vector<Obj> f = plan({2}, 5, 3);
		AlignedBuf mem(span(f));
		load_and_check(dev, f, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
	}
}

/* kvblk_remove_target(): -EBUSY while an outstanding batch names it; then B's kvblk.ko context
 * is gone, descriptors naming it are refused before anything is read, and it can come back. */
TEST_F(KmodLanesTargetsTest, remove_target_detaches)
{
	kvblk_dev *dev = dev_.get();
	const std::vector<Obj> objs = plan({0, 1, 2}, 9);
	AlignedBuf mem(span(objs));
	const std::vector<kvblk_desc> d = descs_for(objs, mem, KVBLK_BUF_NONE, 1);
	std::vector<kvblk_result> res(d.size());
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	so.results = res.data();
	so.user_data = 77;
	uint64_t ticket = 0;
	ASSERT_EQ(kvblk_submit(dev, d.data(), uint32_t(d.size()), &so, &ticket), 0) << kvblk_last_error();
	/* Outstanding until waited for or reaped, whether or not its I/O is over. */
	EXPECT_EQ(kvblk_remove_target(dev, id_b_), -EBUSY);
	EXPECT_TRUE(says("a batch that names target")) << kvblk_last_error();
	EXPECT_EQ(kvblk_remove_target(dev, id_f_), -EBUSY);
	EXPECT_TRUE(exists(kvblk_sysfs(b_)));
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_wait(dev, ticket, -1, &bi), int(d.size())) << kvblk_last_error();
	EXPECT_EQ(bi.user_data, 77u);
	for (size_t k = 0; k < d.size(); k++)
		EXPECT_EQ(res[k].status, 0) << k;
	check_bytes(objs, mem);

	ASSERT_EQ(kvblk_remove_target(dev, id_b_), 0) << kvblk_last_error();
	EXPECT_FALSE(exists(kvblk_sysfs(b_))) << "B's kvblk.ko context was not released";
	EXPECT_EQ(read_line(kvblk_sysfs(a_) + "/attached"), "1");
	EXPECT_EQ(kvblk_remove_target(dev, id_b_), -ENOENT);
	EXPECT_EQ(kvblk_remove_target(dev, 0), -EINVAL);
	kvblk_dev_info gone{};
	gone.info_size = sizeof(gone);
	EXPECT_EQ(kvblk_get_target_info(dev, id_b_, &gone), -ENOENT);
	EXPECT_EQ(get_info(dev).targets, 2u);
	expect_unknown_target(dev, id_b_);

	/* A and the file still load, B's lane gone: one kmod and one uring batch. */
	{
		const std::vector<Obj> af = plan({0, 2}, 8, 4);
		AlignedBuf m(span(af));
		load_and_check(dev, af, m, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
	}
	/* The file's removal drops the uring lane: a batch on A is kmod's alone. */
	ASSERT_EQ(kvblk_remove_target(dev, id_f_), 0) << kvblk_last_error();
	expect_unknown_target(dev, id_f_);
	{
		const std::vector<Obj> a = plan({0}, 6, 5);
		AlignedBuf m(span(a));
		load_and_check(dev, a, m, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	}

	/* B comes back under the smallest free id, with a new context. */
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev, b_.c_str(), 0, &id), 0) << kvblk_last_error();
	EXPECT_EQ(id, id_b_);
	EXPECT_EQ(read_line(kvblk_sysfs(b_) + "/attached"), "1");
	EXPECT_EQ(target_info(dev, id).backend, uint32_t(KVBLK_BACKEND_KMOD));
	{
		const std::vector<Obj> ab = plan({0, 1}, 8, 6);
		AlignedBuf m(span(ab));
		load_and_check(dev, ab, m, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	}
	{
		/* The new lane registered the buffer that was registered before it existed. */
		const std::vector<Obj> ab = plan({1, 0}, 8, 7);
		ASSERT_LE(span(ab), early_->size());
		std::memset(early_->data(), 0xA5, early_->size());
		load_and_check(dev, ab, *early_, early_id_, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	}
	/* Closing the device releases every context. */
	ASSERT_EQ(kvblk_unregister_buffer(dev, early_id_), 0);
	early_id_ = KVBLK_BUF_NONE;
	dev_.reset();
	EXPECT_FALSE(exists(kvblk_sysfs(b_)));
	EXPECT_FALSE(exists(kvblk_sysfs(a_)));
}

/* kvblk_submit()/kvblk_reap() over multi-target batches: several outstanding at once, one with
 * per-object entries; every entry once, bytes equal pread, each batch counted per backend. */
TEST_F(KmodLanesTargetsTest, async_batches_over_lanes)
{
	kvblk_dev *dev = dev_.get();
	const int efd = kvblk_event_fd(dev);
	ASSERT_GE(efd, 0);
	constexpr int kBatches = 6;
	std::vector<std::vector<Obj>> plans;
	std::vector<std::unique_ptr<AlignedBuf>> mems;
	std::vector<std::vector<kvblk_result>> res(kBatches);
	std::map<uint64_t, int> by_ticket;
	ASSERT_EQ(kvblk_reset_stats(dev), 0);
	uint64_t want_cmds = 0, want_bytes = 0, want_objs = 0;
	for (int b = 0; b < kBatches; b++) {
		plans.push_back(plan({0, 1, 2}, 6 + 3 * b, 10 + b));
		mems.push_back(std::make_unique<AlignedBuf>(span(plans[b])));
		const std::vector<kvblk_desc> d = descs_for(plans[b], *mems[b], KVBLK_BUF_NONE, 1000 * (b + 1));
		res[b].resize(d.size());
		kvblk_submit_opts so;
		kvblk_submit_opts_init(&so, sizeof(so));
		so.results = res[b].data();
		so.user_data = 900 + b;
		so.flags = b == 2 ? KVBLK_SUBMIT_PER_OBJECT : b == 4 ? KVBLK_SUBMIT_PRIORITY : 0;
		uint64_t t = 0;
		ASSERT_EQ(kvblk_submit(dev, d.data(), uint32_t(d.size()), &so, &t), 0) << kvblk_last_error();
		ASSERT_EQ(by_ticket.count(t), 0u) << "ticket reused";
		by_ticket[t] = b;
		want_cmds += commands(plans[b]);
		want_bytes += bytes(plans[b]);
		want_objs += d.size();
	}
	std::vector<int> batch_entries(kBatches, 0), object_entries(kBatches, 0);
	int done = 0;
	while (done < kBatches) {
		pollfd p{efd, POLLIN, 0};
		ASSERT_EQ(poll(&p, 1, 60000), 1) << "no completion within 60 s";
		kvblk_cqe cq[16];
		const int got = kvblk_reap(dev, cq, 16, 0, 0);
		ASSERT_GE(got, 0) << kvblk_last_error();
		for (int i = 0; i < got; i++) {
			ASSERT_EQ(by_ticket.count(cq[i].ticket), 1u) << "unknown ticket " << cq[i].ticket;
			const int b = by_ticket[cq[i].ticket];
			EXPECT_EQ(cq[i].user_data, 900u + b);
			EXPECT_EQ(cq[i].status, 0);
			EXPECT_EQ(cq[i].failed, 0u);
			EXPECT_EQ(cq[i].path, uint32_t(KVBLK_PATH_HOST));
			if (cq[i].flags & KVBLK_CQE_OBJECT) {
				ASSERT_EQ(b, 2) << "per-object entry of a batch that did not ask";
				ASSERT_LT(cq[i].index, plans[b].size());
				EXPECT_EQ(cq[i].bytes, plans[b][cq[i].index].len);
				EXPECT_EQ(cq[i].tag, 1000u * (b + 1) + cq[i].index);
				EXPECT_EQ(batch_entries[b], 0) << "object entry after its batch entry";
				object_entries[b]++;
				continue;
			}
			ASSERT_TRUE(cq[i].flags & KVBLK_CQE_BATCH);
			EXPECT_EQ(cq[i].backend, uint32_t(KVBLK_BACKEND_KMOD));
			EXPECT_EQ(cq[i].index, plans[b].size());
			EXPECT_EQ(cq[i].bytes, bytes(plans[b]));
			batch_entries[b]++;
			done++;
		}
	}
	for (int b = 0; b < kBatches; b++) {
		SCOPED_TRACE("batch " + std::to_string(b));
		EXPECT_EQ(batch_entries[b], 1);
		EXPECT_EQ(object_entries[b], b == 2 ? int(plans[b].size()) : 0);
		for (size_t k = 0; k < plans[b].size(); k++) {
			EXPECT_EQ(res[b][k].status, 0) << k;
			EXPECT_EQ(res[b][k].bytes, plans[b][k].len) << k;
			EXPECT_EQ(res[b][k].tag, 1000u * (b + 1) + k) << k;
		}
		check_bytes(plans[b], *mems[b]);
	}
	kvblk_cqe extra;
	EXPECT_EQ(kvblk_reap(dev, &extra, 1, 0, 0), 0) << "an entry left over";
	pollfd p{efd, POLLIN, 0};
	EXPECT_EQ(poll(&p, 1, 0), 0) << "the eventfd is readable with nothing to reap";
	const kvblk_stats st = get_stats(dev);
	EXPECT_EQ(st.batches, uint64_t(kBatches));
	EXPECT_EQ(st.objects, want_objs);
	EXPECT_EQ(st.commands, want_cmds);
	EXPECT_EQ(st.bytes_read, want_bytes);
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], uint64_t(kBatches));
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_URING], uint64_t(kBatches));
	EXPECT_EQ(st.priority_batches, 1u);
	/* Nothing outstanding names B now. */
	EXPECT_EQ(kvblk_remove_target(dev, id_b_), 0) << kvblk_last_error();
	EXPECT_FALSE(exists(kvblk_sysfs(b_)));
}

/* More than kvblk.ko takes per ioctl (max_descs, 4096 by default), small objects round robin. */
TEST_F(KmodLanesTargetsTest, many_small_objects_interleaved)
{
	kvblk_dev *dev = dev_.get();
	const uint32_t n = 6000;
	const uint64_t len = 4096;
	AlignedBuf mem(n * len);
	std::vector<kvblk_desc> d;
	std::vector<std::pair<size_t, uint64_t>> where;
	for (uint32_t k = 0; k < n; k++) {
		const size_t ti = k % 3;
		const uint64_t cap = tgts_[ti].info.capacity;
		const uint64_t off = (uint64_t(k) * 13 * len) % (cap - len);
		kvblk_desc x = plain_desc(off - off % len, len, mem.data() + k * len, k);
		x.target = tgts_[ti].id;
		d.push_back(x);
		where.emplace_back(ti, x.offset);
	}
	ASSERT_EQ(kvblk_reset_stats(dev), 0);
	std::vector<kvblk_result> res(n);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev, d.data(), n, res.data(), &bi), int(n)) << kvblk_last_error();
	for (uint32_t k = 0; k < n; k++) {
		ASSERT_EQ(res[k].status, 0) << k;
		ASSERT_EQ(res[k].tag, k);
		Tgt &t = tgts_[where[k].first];
		ASSERT_TRUE(t.ref->same(mem.data() + k * len, where[k].second, len)) << k;
		if (t.pattern) {
			ASSERT_TRUE(pattern_ok(mem.data() + k * len, t.pattern_base + where[k].second, len)) << k;
		}
	}
	EXPECT_EQ(bi.commands, n);
	EXPECT_EQ(bi.bytes, n * len);
	const kvblk_stats st = get_stats(dev);
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], 1u);
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_URING], 1u);
	EXPECT_EQ(st.commands, n);
}

/* KVBLK_DESC_UNALIGNED objects on every lane: exact bytes (buffered pread(2) and the pattern). */
TEST_F(KmodLanesTargetsTest, unaligned_objects_over_lanes)
{
	kvblk_dev *dev = dev_.get();
	const uint64_t shapes[][2] = {{100, 1}, {4095, 2}, {3, 8193}, {5000, 70000}, {0, 4097}, {12345, 300000}};
	std::vector<Obj> objs;
	uint64_t at = kGap;
	for (uint32_t k = 0; k < 18; k++) {
		const size_t ti = k % 3;
		const uint64_t off = (tgts_[ti].info.capacity / 7) * (k % 6) + shapes[k / 3 % 6][0];
		const uint64_t len = shapes[(k + 1) % 6][1];
		objs.push_back(Obj{ti, off, len, at + (k % 4) * 8});
		at += (len + 8 * 4 + kGap - 1) / kGap * kGap + kGap;
	}
	AlignedBuf mem(at + kGap);
	std::vector<kvblk_desc> d = descs_for(objs, mem, KVBLK_BUF_NONE, 1);
	for (kvblk_desc &x : d)
		x.flags = KVBLK_DESC_UNALIGNED;
	std::vector<kvblk_result> res(d.size());
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev, d.data(), uint32_t(d.size()), res.data(), &bi), int(d.size())) << kvblk_last_error();
	EXPECT_EQ(bi.bytes, bytes(objs));
	EXPECT_GT(bi.bytes_device, bi.bytes);
	EXPECT_TRUE(mem.all(0, objs[0].at, 0xA5));
	for (size_t k = 0; k < objs.size(); k++) {
		const Obj &o = objs[k];
		Tgt &t = tgts_[o.tgt];
		SCOPED_TRACE("object " + std::to_string(k) + ": target " + std::to_string(t.id) + ", " +
			     std::to_string(o.len) + " bytes at " + std::to_string(o.off));
		EXPECT_EQ(res[k].status, 0);
		EXPECT_EQ(res[k].bytes, o.len);
		std::vector<uint8_t> want(o.len);
		const int fd = open(t.ref_path.c_str(), O_RDONLY | O_CLOEXEC);
		ASSERT_GE(fd, 0);
		EXPECT_EQ(pread(fd, want.data(), o.len, off_t(o.off)), ssize_t(o.len));
		close(fd);
		EXPECT_EQ(std::memcmp(mem.data() + o.at, want.data(), o.len), 0) << "differs from pread";
		if (t.pattern) {
			EXPECT_TRUE(pattern_ok(mem.data() + o.at, t.pattern_base + o.off, o.len));
		}
		const uint64_t end = o.at + o.len, next = k + 1 < objs.size() ? objs[k + 1].at : mem.size();
		EXPECT_TRUE(mem.all(end, next - end, 0xA5)) << "the bytes after the object were written";
	}
}

/* The same namespace twice: two kvblk.ko contexts on one namespace object (attached 2, then 1). */
TEST_F(KmodLanesTargetsTest, same_namespace_twice_by_path_and_fd)
{
	kvblk_dev *dev = dev_.get();
	const int fd = open(b_.c_str(), O_RDONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0) << b_ << ": " << std::strerror(errno);
	uint32_t id2 = 0;
	ASSERT_EQ(kvblk_add_target_fd(dev, fd, 0, &id2), 0) << kvblk_last_error();
	close(fd);
	EXPECT_EQ(id2, 3u);
	EXPECT_EQ(read_line(kvblk_sysfs(b_) + "/attached"), "2");
	const kvblk_dev_info i2 = target_info(dev, id2);
	EXPECT_EQ(i2.backend, uint32_t(KVBLK_BACKEND_KMOD));
	EXPECT_EQ(i2.capacity, tgts_[1].info.capacity);
	track(dev, id2, b_, b_pattern_, b_base_);
	const std::vector<Obj> objs = plan({3, 0, 1, 2}, 16, 9);
	AlignedBuf mem(span(objs));
	load_and_check(dev, objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
	ASSERT_EQ(kvblk_remove_target(dev, id_b_), 0) << kvblk_last_error();
	EXPECT_EQ(read_line(kvblk_sysfs(b_) + "/attached"), "1");
	const std::vector<Obj> again = plan({3, 0}, 6, 10);
	AlignedBuf m2(span(again));
	load_and_check(dev, again, m2, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	ASSERT_EQ(kvblk_remove_target(dev, id2), 0) << kvblk_last_error();
	EXPECT_FALSE(exists(kvblk_sysfs(b_)));
}

/* kvblk_close() with batches outstanding on every lane: they finish, every context goes. */
TEST_F(KmodLanesTargetsTest, close_with_outstanding_batches)
{
	kvblk_dev *dev = dev_.get();
	std::vector<std::unique_ptr<AlignedBuf>> mems;
	for (int b = 0; b < 4; b++) {
		const std::vector<Obj> objs = plan({0, 1, 2}, 12, 20 + b);
		mems.push_back(std::make_unique<AlignedBuf>(span(objs)));
		const std::vector<kvblk_desc> d = descs_for(objs, *mems.back(), KVBLK_BUF_NONE, 1);
		uint64_t t = 0;
		ASSERT_EQ(kvblk_submit(dev, d.data(), uint32_t(d.size()), nullptr, &t), 0) << kvblk_last_error();
	}
	ASSERT_EQ(kvblk_unregister_buffer(dev, early_id_), 0);
	early_id_ = KVBLK_BUF_NONE;
	dev_.reset();
	EXPECT_FALSE(exists(kvblk_sysfs(b_)));
	EXPECT_FALSE(exists(kvblk_sysfs(a_)));
}

/* Options reach every lane: commands counted at 8 KiB on each target, the uring lane's depth and rings. */
TEST_F(TargetsTest, kmod_lanes_small_max_cmd_bytes)
{
	REQUIRE_KMOD();
	make_file();
	if (IsSkipped() || HasFatalFailure())
		return;
	DevPtr dev = open_lanes_dev(a_, make_opts(KVBLK_BACKEND_KMOD, 2, 16, 8 * KiB));
	ASSERT_TRUE(dev);
	uint32_t id_b = 0, id_f = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), b_.c_str(), 0, &id_b), 0) << kvblk_last_error();
	ASSERT_EQ(kvblk_add_target(dev.get(), file_.c_str(), 0, &id_f), 0) << kvblk_last_error();
	track(dev.get(), 0, a_, env("KVBLK_VM_PATTERN_XOR") != nullptr, 0);
	track(dev.get(), id_b, b_, b_pattern_, b_base_);
	track(dev.get(), id_f, file_, true, kFileBase);
	for (const Tgt &t : tgts_)
		EXPECT_EQ(t.info.max_cmd_bytes, 8 * KiB) << "target " << t.id;
	EXPECT_EQ(tgts_[2].info.queue_depth, 16u);
	EXPECT_EQ(tgts_[2].info.workers, 2u);
	EXPECT_EQ(tgts_[1].info.workers, 2u);
	const std::vector<Obj> objs = plan({0, 1, 2}, 15, 11);
	AlignedBuf mem(span(objs));
	load_and_check(dev.get(), objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
}

/*
 * Stores on a writable kmod device with writable targets: the namespaces' kmod lanes write
 * through kvblk.ko when it writes (KVBLK_FEAT_STORE; else through uring, the batch then
 * counting once, as uring), the file's lane through uring. The bytes written are the bytes
 * that are there (the namespaces keep their pattern); a load reads them back.
 */
TEST_F(TargetsTest, kmod_lanes_store_same_bytes_back)
{
	REQUIRE_KMOD();
	make_file();
	if (IsSkipped() || HasFatalFailure())
		return;
	DevPtr dev = open_lanes_dev(a_, make_opts(KVBLK_BACKEND_KMOD, 0, 0, 0, KVBLK_OPEN_WRITE));
	ASSERT_TRUE(dev);
	uint32_t id_b = 0, id_f = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), b_.c_str(), KVBLK_OPEN_WRITE, &id_b), 0) << kvblk_last_error();
	ASSERT_EQ(kvblk_add_target(dev.get(), file_.c_str(), KVBLK_OPEN_WRITE, &id_f), 0) << kvblk_last_error();
	track(dev.get(), 0, a_, env("KVBLK_VM_PATTERN_XOR") != nullptr, 0);
	track(dev.get(), id_b, b_, b_pattern_, b_base_);
	track(dev.get(), id_f, file_, true, kFileBase);
	EXPECT_TRUE(tgts_[1].info.flags & KVBLK_INFO_WRITABLE);
	const std::vector<Obj> objs = plan({0, 1, 2}, 9, 12);
	AlignedBuf mem(span(objs));
	load_and_check(dev.get(), objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
	const std::vector<kvblk_desc> d = descs_for(objs, mem, KVBLK_BUF_NONE, 1);
	std::vector<kvblk_result> res(d.size());
	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_store_many(dev.get(), d.data(), uint32_t(d.size()), res.data(), &bi), int(d.size()))
		<< kvblk_last_error();
	const bool kmod_stores = module_features() & KVBLK_FEAT_STORE;
	EXPECT_EQ(bi.backend, uint32_t(kmod_stores ? KVBLK_BACKEND_KMOD : KVBLK_BACKEND_URING));
	EXPECT_EQ(bi.bytes, bytes(objs));
	kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.bytes_written, bytes(objs));
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_URING], 1u);
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], kmod_stores ? 1u : 0u);
	AlignedBuf back(span(objs));
	load_and_check(dev.get(), objs, back, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
	/* A target added without KVBLK_OPEN_WRITE refuses stores: the whole call, nothing written. */
	uint32_t ro = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), b_.c_str(), 0, &ro), 0) << kvblk_last_error();
	kvblk_desc w = d[1];
	w.target = ro;
	kvblk_result r{};
	EXPECT_EQ(kvblk_store_many(dev.get(), &w, 1, &r, nullptr), -EBADF);
}

/*
 * A block device that is no NVMe namespace (null_blk): kvblk.ko's block-layer engine
 * serves it, so it gets a kvblk.ko context of its own (a lane of its own), released on remove.
 */
TEST_F(KmodLanesTargetsTest, non_nvme_block_device_gets_a_block_layer_context)
{
	const char *other = env("KVBLK_TEST_NONNVME_DEVICE");
	if (!other)
		GTEST_SKIP() << "KVBLK_TEST_NONNVME_DEVICE is not set";
	kvblk_dev *dev = dev_.get();
	ASSERT_FALSE(exists(kvblk_sysfs(other))) << other << " is attached to kvblk.ko before the test";
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev, other, 0, &id), 0) << kvblk_last_error();
	track(dev, id, other, false, 0);
	const kvblk_dev_info &i = tgts_.back().info;
	EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_KMOD));
	EXPECT_TRUE(starts_with(i.backend_reason, std::string("kmod: ") + other + " has a kvblk.ko context of its own"))
		<< i.backend_reason;
	EXPECT_NE(std::string(i.backend_reason).find("block-layer engine"), std::string::npos) << i.backend_reason;
	EXPECT_TRUE(i.flags & KVBLK_INFO_BLOCKDEV);
	EXPECT_TRUE(exists(kvblk_sysfs(other)));
	/* Its objects interleaved with A's, B's and the file's (the uring lane). */
	const std::vector<Obj> objs = plan({3, 0, 1, 2}, 16, 13);
	AlignedBuf mem(span(objs));
	load_and_check(dev, objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
	ASSERT_EQ(kvblk_remove_target(dev, id), 0) << kvblk_last_error();
	EXPECT_FALSE(exists(kvblk_sysfs(other))) << other << "'s kvblk.ko context was not released";
	/* The file keeps the uring lane. */
	const std::vector<Obj> f = plan({2, 0}, 6, 14);
	AlignedBuf m2(span(f));
	load_and_check(dev, f, m2, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
}

/* ------------------------------------- kmod, every target in the device's kvblk.ko context */

uint64_t read_u64(const std::string &path)
{
	const std::string l = read_line(path);
	return l.empty() ? UINT64_MAX : std::strtoull(l.c_str(), nullptr, 10);
}

bool put(const std::string &path, const char *text)
{
	const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return false;
	const ssize_t n = write(fd, text, std::strlen(text));
	close(fd);
	return n == ssize_t(std::strlen(text));
}

/*
 * kvblk.ko's kvblk_batch_start events while started: one per KVBLK_IOC_LOAD_MANY or
 * KVBLK_URING_CMD_LOAD_MANY that submitted, with its descriptor count.
 */
class BatchTrace {
public:
	~BatchTrace() { (void)put(std::string(kT) + "/events/kvblk/kvblk_batch_start/enable", "0"); }

	bool start()
	{
		const std::string t = kT;
		return put(t + "/tracing_on", "0") && put(t + "/trace", "") &&
		       put(t + "/events/kvblk/kvblk_batch_start/enable", "1") && put(t + "/tracing_on", "1");
	}

	/* descs= of every kvblk_batch_start since start(), in order. */
	std::vector<uint32_t> stop()
	{
		const std::string t = kT;
		(void)put(t + "/tracing_on", "0");
		std::vector<uint32_t> descs;
		if (FILE *f = std::fopen((t + "/trace").c_str(), "r")) {
			char line[512];
			while (std::fgets(line, sizeof(line), f)) {
				const char *e = std::strstr(line, "kvblk_batch_start:");
				const char *d = e ? std::strstr(e, " descs=") : nullptr;
				if (d)
					descs.push_back(uint32_t(std::strtoul(d + 7, nullptr, 10)));
			}
			std::fclose(f);
		}
		(void)put(t + "/events/kvblk/kvblk_batch_start/enable", "0");
		return descs;
	}

private:
	static constexpr const char *kT = "/sys/kernel/tracing";
};

class KmodContextTargetsTest : public TargetsTest {
protected:
	void SetUp() override
	{
		TargetsTest::SetUp();
		if (IsSkipped())
			return;
		REQUIRE_KMOD();
		ASSERT_TRUE(module_features() & KVBLK_FEAT_TARGETS) << "this kvblk.ko takes one target per context";
		make_file();
		if (IsSkipped() || HasFatalFailure())
			return;
		ASSERT_FALSE(exists(kvblk_sysfs(b_))) << b_ << " is attached to kvblk.ko before the test";
		open_all(0);
	}

	/*
	 * The kmod device on A (KVBLK_OPEN_* @flags, @max_cmd_bytes) with B, the file and the
	 * optional devices added.
	 */
	void open_all(uint32_t flags, uint64_t max_cmd_bytes = 0)
	{
		dev_ = open_dev(a_, make_opts(KVBLK_BACKEND_KMOD, 0, 0, max_cmd_bytes, flags));
		ASSERT_TRUE(dev_);
		ASSERT_EQ(get_info(dev_.get()).backend, uint32_t(KVBLK_BACKEND_KMOD));
		track(dev_.get(), 0, a_, env("KVBLK_VM_PATTERN_XOR") != nullptr, 0);
		disks_.push_back(base_name(a_));
		add(b_, flags & KVBLK_OPEN_WRITE, b_pattern_, b_base_, base_name(b_));
		const char *fdisk = env("KVBLK_TEST_FILE_DISK");
		add(file_, flags & KVBLK_OPEN_WRITE, true, kFileBase, fdisk ? fdisk : "");
		if (const char *loop = env("KVBLK_TEST_LOOP_DEVICE"))
			add(loop, 0, false, 0, base_name(loop));
		if (const char *other = env("KVBLK_TEST_NONNVME_DEVICE"))
			add(other, 0, false, 0, base_name(other));
	}

	void add(const std::string &path, uint32_t flags, bool pattern, uint64_t base, const std::string &disk)
	{
		uint32_t id = 0;
		ASSERT_EQ(kvblk_add_target(dev_.get(), path.c_str(), flags, &id), 0) << path << ": " << kvblk_last_error();
		EXPECT_EQ(id, uint32_t(tgts_.size()));
		track(dev_.get(), id, path, pattern, base);
		disks_.push_back(disk);
	}

	/*
	 * @objs cut to at most their target's max_cmd_bytes each, so that every object is one
	 * kvblk.ko descriptor (a smaller max_cmd_bytes than the module's is one descriptor per
	 * command): the module's descriptor counts are then object counts.
	 */
	std::vector<Obj> one_desc_each(std::vector<Obj> objs) const
	{
		for (Obj &o : objs)
			o.len = std::min<uint64_t>(o.len, tgts_[o.tgt].info.max_cmd_bytes);
		return objs;
	}

	std::vector<size_t> all() const
	{
		std::vector<size_t> v;
		for (size_t i = 0; i < tgts_.size(); i++)
			v.push_back(i);
		return v;
	}

	/* stats/batches and stats/objects of every known disk (UINT64_MAX: no directory). */
	std::map<std::string, std::pair<uint64_t, uint64_t>> disk_counts() const
	{
		std::map<std::string, std::pair<uint64_t, uint64_t>> m;
		for (const std::string &d : disks_)
			if (!d.empty())
				m[d] = {read_u64("/sys/kernel/kvblk/" + d + "/stats/batches"),
					read_u64("/sys/kernel/kvblk/" + d + "/stats/objects")};
		return m;
	}

	/* Every disk that @objs read from counted one batch more and its own objects. */
	void expect_one_batch_per_disk(const std::vector<Obj> &objs,
				       const std::map<std::string, std::pair<uint64_t, uint64_t>> &before)
	{
		std::map<std::string, uint64_t> objects;
		for (const Obj &o : objs)
			if (!disks_[o.tgt].empty())
				objects[disks_[o.tgt]]++;
		const auto after = disk_counts();
		for (const auto &[disk, n] : objects) {
			SCOPED_TRACE("disk " + disk);
			ASSERT_NE(after.at(disk).first, UINT64_MAX) << "no kvblk.ko directory";
			EXPECT_EQ(after.at(disk).first - before.at(disk).first, 1u) << "batches";
			EXPECT_EQ(after.at(disk).second - before.at(disk).second, n) << "objects";
		}
	}

	/* Submit @d, reap its one entry; the entry's status and bytes checked. */
	void submit_and_reap(const std::vector<kvblk_desc> &d, std::vector<kvblk_result> &res, uint64_t bytes)
	{
		kvblk_submit_opts so;
		kvblk_submit_opts_init(&so, sizeof(so));
		so.results = res.data();
		so.user_data = 4242;
		uint64_t ticket = 0;
		ASSERT_EQ(kvblk_submit(dev_.get(), d.data(), uint32_t(d.size()), &so, &ticket), 0) << kvblk_last_error();
		kvblk_cqe cq[2];
		const int got = kvblk_reap(dev_.get(), cq, 2, 1, int64_t(60) * 1000000000);
		ASSERT_EQ(got, 1) << kvblk_last_error();
		EXPECT_EQ(cq[0].ticket, ticket);
		EXPECT_EQ(cq[0].user_data, 4242u);
		EXPECT_EQ(cq[0].status, 0);
		EXPECT_EQ(cq[0].failed, 0u);
		EXPECT_EQ(cq[0].backend, uint32_t(KVBLK_BACKEND_KMOD));
		EXPECT_EQ(cq[0].bytes, bytes);
		for (size_t k = 0; k < d.size(); k++) {
			EXPECT_EQ(res[k].status, 0) << k;
			EXPECT_EQ(res[k].tag, d[k].tag) << k;
		}
	}

	void TearDown() override
	{
		dev_.reset();
		TargetsTest::TearDown();
	}

	DevPtr dev_;
	std::vector<std::string> disks_;	/* per tgts_ entry: its disk's name in /sys/kernel/kvblk, or "" */
};

TEST_F(KmodContextTargetsTest, target_info_names_the_context)
{
	kvblk_dev *dev = dev_.get();
	const kvblk_dev_info d = get_info(dev);
	EXPECT_EQ(d.targets, uint32_t(tgts_.size()));
	const std::string inflight = read_line(kvblk_sysfs(a_) + "/max_inflight");
	for (size_t k = 1; k < tgts_.size(); k++) {
		const Tgt &t = tgts_[k];
		SCOPED_TRACE(t.ref_path);
		EXPECT_EQ(t.info.backend, uint32_t(KVBLK_BACKEND_KMOD));
		/* Attached in order: kvblk.ko's target k of the context (no store attaches here). */
		const std::string want = "kmod: " + t.ref_path + " is target " + std::to_string(k) +
					 " of the device's kvblk.ko context, " +
					 (k == 2 ? "block-layer (file) engine" : "block-layer engine");
		EXPECT_TRUE(starts_with(t.info.backend_reason, want)) << t.info.backend_reason;
		/* One context: target 0's disk's max_inflight caps every batch. */
		EXPECT_EQ(std::to_string(t.info.queue_depth), inflight);
		EXPECT_EQ(t.info.max_cmd_bytes, d.max_cmd_bytes);
		EXPECT_EQ(t.info.workers, d.workers);
		if (!disks_[k].empty()) {
			EXPECT_EQ(read_line("/sys/kernel/kvblk/" + disks_[k] + "/attached"), "1");
		}
	}
	EXPECT_EQ(tgts_[2].info.capacity, kFileBytes);
	EXPECT_FALSE(tgts_[2].info.flags & KVBLK_INFO_BLOCKDEV);
	if (const char *lba = env("KVBLK_VM_NS2_LBA")) {
		EXPECT_EQ(tgts_[1].info.logical_block_size, std::strtoul(lba, nullptr, 10));
	}
	EXPECT_EQ(read_line(kvblk_sysfs(a_) + "/attached"), "1");

	/* The page cache is no kvblk.ko's: a buffered target goes to the uring lane, saying so. */
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev, file_.c_str(), KVBLK_OPEN_BUFFERED, &id), 0) << kvblk_last_error();
	const kvblk_dev_info bu = target_info(dev, id);
	EXPECT_EQ(bu.backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_STREQ(bu.backend_reason, "uring: KVBLK_OPEN_BUFFERED asks for the page cache, which kvblk.ko bypasses");
	track(dev, id, file_, true, kFileBase);
	disks_.push_back("");
	const std::vector<Obj> objs = plan(all(), 2 * uint32_t(tgts_.size()), 30);
	AlignedBuf mem(span(objs));
	load_and_check(dev, objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD, KVBLK_BACKEND_URING}, KVBLK_BACKEND_KMOD);
}

/*
 * One batch over A, B, the file (and the loop and null_blk devices when there): one
 * KVBLK_IOC_LOAD_MANY (one kvblk_batch_start, every descriptor in it; one batch more on every
 * disk), byte-exact. Then through kvblk_submit()/kvblk_reap(): into a registered buffer (one
 * io_uring command), and into plain pointers (one io_uring command too, their pages
 * registered around it).
 */
TEST_F(KmodContextTargetsTest, one_call_for_a_mixed_batch)
{
	kvblk_dev *dev = dev_.get();
	const std::vector<Obj> objs = one_desc_each(plan(all(), 4 * uint32_t(tgts_.size()), 21));
	BatchTrace tr;
	{
		SCOPED_TRACE("kvblk_load_many(), plain pointers");
		AlignedBuf mem(span(objs));
		const auto before = disk_counts();
		ASSERT_TRUE(tr.start()) << "tracefs: cannot enable kvblk_batch_start";
		load_and_check(dev, objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
		EXPECT_EQ(tr.stop(), std::vector<uint32_t>{uint32_t(objs.size())}) << "one call, every descriptor";
		expect_one_batch_per_disk(objs, before);
	}
	AlignedBuf reg(span(objs));
	uint32_t buf = 0;
	ASSERT_EQ(kvblk_register_buffer(dev, KVBLK_MEM_HOST, reg.data(), reg.size(), &buf), 0) << kvblk_last_error();
	{
		SCOPED_TRACE("kvblk_load_many(), registered buffer");
		const auto before = disk_counts();
		ASSERT_TRUE(tr.start());
		load_and_check(dev, objs, reg, buf, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
		EXPECT_EQ(tr.stop(), std::vector<uint32_t>{uint32_t(objs.size())});
		expect_one_batch_per_disk(objs, before);
	}
	for (const uint32_t id : {buf, uint32_t(KVBLK_BUF_NONE)}) {
		SCOPED_TRACE(id == KVBLK_BUF_NONE ? "kvblk_submit(), plain pointers" : "kvblk_submit(), registered buffer");
		AlignedBuf plain(span(objs));
		AlignedBuf &mem = id == KVBLK_BUF_NONE ? plain : reg;
		std::memset(mem.data(), 0xA5, mem.size());
		const std::vector<kvblk_desc> d = descs_for(objs, mem, id, 700);
		std::vector<kvblk_result> res(d.size());
		ASSERT_EQ(kvblk_reset_stats(dev), 0);
		const auto before = disk_counts();
		ASSERT_TRUE(tr.start());
		submit_and_reap(d, res, bytes(objs));
		EXPECT_EQ(tr.stop(), std::vector<uint32_t>{uint32_t(objs.size())});
		expect_one_batch_per_disk(objs, before);
		check_bytes(objs, mem);
		const kvblk_stats st = get_stats(dev);
		EXPECT_EQ(st.batches, 1u);
		EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], 1u);
		EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_URING], 0u);
		EXPECT_EQ(st.commands, commands(objs));
	}
	EXPECT_EQ(kvblk_unregister_buffer(dev, buf), 0) << kvblk_last_error();
}

/* More descriptors than kvblk.ko takes per call: max_descs per call, in turn, and nothing else. */
TEST_F(KmodContextTargetsTest, many_small_objects_in_max_descs_calls)
{
	kvblk_dev *dev = dev_.get();
	const uint32_t n = 6000;
	const uint64_t len = 4096;
	const uint64_t per = read_u64(kvblk_sysfs(a_) + "/max_descs");
	ASSERT_GT(per, 0u);
	ASSERT_LT(per, n) << "the test wants more objects than one call takes";
	std::vector<Obj> objs;
	for (uint32_t k = 0; k < n; k++) {
		const size_t ti = k % tgts_.size();
		const uint64_t cap = tgts_[ti].info.capacity;
		const uint64_t off = (uint64_t(k) * 13 * len) % (cap - len);
		objs.push_back(Obj{ti, off - off % len, len, kGap + k * len});
	}
	AlignedBuf mem(span(objs));
	const std::vector<kvblk_desc> d = descs_for(objs, mem, KVBLK_BUF_NONE, 0);
	ASSERT_EQ(kvblk_reset_stats(dev), 0);
	std::vector<kvblk_result> res(n);
	BatchTrace tr;
	ASSERT_TRUE(tr.start());
	ASSERT_EQ(kvblk_load_many(dev, d.data(), n, res.data(), nullptr), int(n)) << kvblk_last_error();
	std::vector<uint32_t> want;
	for (uint64_t left = n; left; left -= std::min<uint64_t>(left, per))
		want.push_back(uint32_t(std::min<uint64_t>(left, per)));
	EXPECT_EQ(tr.stop(), want);
	for (uint32_t k = 0; k < n; k++) {
		ASSERT_EQ(res[k].status, 0) << k;
		Tgt &t = tgts_[objs[k].tgt];
		ASSERT_TRUE(t.ref->same(mem.data() + objs[k].at, objs[k].off, len)) << k;
	}
	const kvblk_stats st = get_stats(dev);
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], 1u);
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_URING], 0u);
	EXPECT_EQ(st.commands, n);
}

/* A max_cmd_bytes below kvblk.ko's: one descriptor per 8 KiB command on every target, one call. */
TEST_F(KmodContextTargetsTest, small_max_cmd_bytes_on_every_target)
{
	dev_.reset();
	tgts_.clear();
	disks_.clear();
	open_all(0, 8 * KiB);
	if (HasFatalFailure())
		return;
	for (const Tgt &t : tgts_) {
		EXPECT_EQ(t.info.max_cmd_bytes, 8 * KiB) << t.ref_path;
		EXPECT_EQ(t.info.backend, uint32_t(KVBLK_BACKEND_KMOD)) << t.ref_path;
	}
	const std::vector<Obj> objs = plan(all(), 3 * uint32_t(tgts_.size()), 26);
	AlignedBuf mem(span(objs));
	BatchTrace tr;
	ASSERT_TRUE(tr.start());
	load_and_check(dev_.get(), objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	const uint64_t descs = commands(objs);
	ASSERT_LE(descs, read_u64(kvblk_sysfs(a_) + "/max_descs")) << "the test wants one call";
	EXPECT_EQ(tr.stop(), std::vector<uint32_t>{uint32_t(descs)});
}

/*
 * kvblk.ko has no detach: a removed target stays attached in the context (its disk's directory
 * stays) and libkvblk refuses its id; added again it is a new kvblk.ko target; the device's
 * close releases them all.
 */
TEST_F(KmodContextTargetsTest, remove_target_forgets_it_until_close)
{
	kvblk_dev *dev = dev_.get();
	const std::vector<Obj> objs = plan(all(), 2 * uint32_t(tgts_.size()), 22);
	AlignedBuf mem(span(objs));
	const std::vector<kvblk_desc> d = descs_for(objs, mem, KVBLK_BUF_NONE, 1);
	std::vector<kvblk_result> res(d.size());
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	so.results = res.data();
	uint64_t ticket = 0;
	ASSERT_EQ(kvblk_submit(dev, d.data(), uint32_t(d.size()), &so, &ticket), 0) << kvblk_last_error();
	EXPECT_EQ(kvblk_remove_target(dev, 1), -EBUSY);
	ASSERT_EQ(kvblk_wait(dev, ticket, -1, nullptr), int(d.size())) << kvblk_last_error();
	check_bytes(objs, mem);

	ASSERT_EQ(kvblk_remove_target(dev, 1), 0) << kvblk_last_error();
	EXPECT_EQ(read_line(kvblk_sysfs(b_) + "/attached"), "1") << "kvblk.ko keeps B attached until close";
	kvblk_dev_info gone{};
	gone.info_size = sizeof(gone);
	EXPECT_EQ(kvblk_get_target_info(dev, 1, &gone), -ENOENT);
	expect_unknown_target(dev, 1);
	{
		const std::vector<Obj> af = plan({0, 2}, 8, 23);
		AlignedBuf m(span(af));
		load_and_check(dev, af, m, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	}
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev, b_.c_str(), 0, &id), 0) << kvblk_last_error();
	EXPECT_EQ(id, 1u);
	const kvblk_dev_info again = target_info(dev, id);
	EXPECT_TRUE(starts_with(again.backend_reason, "kmod: " + b_ + " is target " + std::to_string(tgts_.size()) +
							   " of the device's kvblk.ko context"))
		<< again.backend_reason;
	EXPECT_EQ(read_line(kvblk_sysfs(b_) + "/attached"), "2");
	{
		const std::vector<Obj> ab = plan({1, 0, 2}, 9, 24);
		AlignedBuf m(span(ab));
		load_and_check(dev, ab, m, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	}
	dev_.reset();
	EXPECT_FALSE(exists(kvblk_sysfs(b_)));
	EXPECT_FALSE(exists(kvblk_sysfs(a_)));
}

/*
 * A file whose size is no multiple of its block: its last bytes (KVBLK_DESC_UNALIGNED) beside
 * objects of the namespaces. kvblk.ko refuses a descriptor past a file's end, so the covering
 * block cut short by the end is read with pread(2); the rest goes to the module.
 */
TEST_F(KmodContextTargetsTest, unaligned_file_tail_beside_the_namespaces)
{
	kvblk_dev *dev = dev_.get();
	const std::string odd = file_ + ".odd";
	const uint64_t size = 3 * MiB - 1000;
	{
		const int fd = open(odd.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0);
		std::vector<uint8_t> buf(size);
		kvblk_pattern_fill(buf.data(), kFileBase, size);
		ASSERT_EQ(pwrite(fd, buf.data(), size, 0), ssize_t(size));
		ASSERT_EQ(fsync(fd), 0);
		close(fd);
	}
	uint32_t id = 0;
	const int ret = kvblk_add_target(dev, odd.c_str(), 0, &id);
	unlink(odd.c_str()); /* open files stay readable */
	ASSERT_EQ(ret, 0) << kvblk_last_error();
	const kvblk_dev_info oi = target_info(dev, id);
	EXPECT_EQ(oi.backend, uint32_t(KVBLK_BACKEND_KMOD)) << oi.backend_reason;
	EXPECT_EQ(oi.capacity, size);
	const uint64_t shapes[][3] = {{id, size - 5000, 5000}, {0, 12345, 70000}, {id, size - 1, 1}, {1, 777, 9000},
				      {id, 100, 300000}, {2, 4096, 8192}};
	AlignedBuf mem(16 * MiB);
	std::vector<kvblk_desc> d;
	uint64_t at = kGap + 3;
	for (const auto &sh : shapes) {
		kvblk_desc x = plain_desc(sh[1], sh[2], mem.data() + at, d.size());
		x.target = uint32_t(sh[0]);
		x.flags = KVBLK_DESC_UNALIGNED;
		d.push_back(x);
		at += (sh[2] + kGap - 1) / kGap * kGap + kGap + 5;
	}
	std::vector<kvblk_result> res(d.size());
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev, d.data(), uint32_t(d.size()), res.data(), &bi), int(d.size())) << kvblk_last_error();
	EXPECT_EQ(bi.backend, uint32_t(KVBLK_BACKEND_KMOD));
	for (size_t k = 0; k < d.size(); k++) {
		SCOPED_TRACE("object " + std::to_string(k));
		EXPECT_EQ(res[k].status, 0);
		EXPECT_EQ(res[k].bytes, d[k].length);
		const std::string path = d[k].target == id ? odd : tgts_[d[k].target].ref_path;
		std::vector<uint8_t> want(d[k].length);
		if (d[k].target == id) {
			kvblk_pattern_fill(want.data(), kFileBase + d[k].offset, d[k].length);
		} else {
			const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
			ASSERT_GE(fd, 0) << path;
			EXPECT_EQ(pread(fd, want.data(), want.size(), off_t(d[k].offset)), ssize_t(want.size()));
			close(fd);
		}
		EXPECT_EQ(std::memcmp(reinterpret_cast<const void *>(uintptr_t(d[k].addr)), want.data(), want.size()), 0);
	}
}

/*
 * Stores on a writable device with writable targets: one call over every target (kvblk.ko
 * with KVBLK_FEAT_STORE; else the device's uring writer, as before), the same bytes back.
 */
TEST_F(KmodContextTargetsTest, stores_name_each_target)
{
	dev_.reset();
	tgts_.clear();
	disks_.clear();
	open_all(KVBLK_OPEN_WRITE);
	if (HasFatalFailure())
		return;
	kvblk_dev *dev = dev_.get();
	const std::vector<Obj> objs = plan({0, 1, 2}, 9, 25);
	AlignedBuf mem(span(objs));
	load_and_check(dev, objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	const std::vector<kvblk_desc> d = descs_for(objs, mem, KVBLK_BUF_NONE, 1);
	std::vector<kvblk_result> res(d.size());
	ASSERT_EQ(kvblk_reset_stats(dev), 0);
	const bool kmod_stores = module_features() & KVBLK_FEAT_STORE;
	BatchTrace tr;
	ASSERT_TRUE(tr.start());
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_store_many(dev, d.data(), uint32_t(d.size()), res.data(), &bi), int(d.size()))
		<< kvblk_last_error();
	EXPECT_EQ(tr.stop().size(), kmod_stores ? 1u : 0u);
	EXPECT_EQ(bi.backend, uint32_t(kmod_stores ? KVBLK_BACKEND_KMOD : KVBLK_BACKEND_URING));
	const kvblk_stats st = get_stats(dev);
	EXPECT_EQ(st.bytes_written, bytes(objs));
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], kmod_stores ? 1u : 0u);
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_URING], kmod_stores ? 0u : 1u);
	AlignedBuf back(span(objs));
	load_and_check(dev, objs, back, KVBLK_BUF_NONE, {KVBLK_BACKEND_KMOD}, KVBLK_BACKEND_KMOD);
	/* A target added without KVBLK_OPEN_WRITE refuses stores: the whole call, nothing written. */
	uint32_t ro = 0;
	ASSERT_EQ(kvblk_add_target(dev, b_.c_str(), 0, &ro), 0) << kvblk_last_error();
	kvblk_desc w = d[1];
	w.target = ro;
	kvblk_result r{};
	EXPECT_EQ(kvblk_store_many(dev, &w, 1, &r, nullptr), -EBADF);
}

/* ------------------------------------------------------ uring_cmd, two namespaces */

class UringCmdTargetsTest : public TargetsTest {
protected:
	void SetUp() override
	{
		TargetsTest::SetUp();
		if (IsSkipped())
			return;
		if (!env("KVBLK_TEST_NGDEV") || !env("KVBLK_TEST_NGDEV2"))
			GTEST_SKIP() << "KVBLK_TEST_NGDEV / KVBLK_TEST_NGDEV2 are not set";
		ng_a_ = env("KVBLK_TEST_NGDEV");
		ng_b_ = env("KVBLK_TEST_NGDEV2");
		dev_ = open_dev(ng_a_, make_opts(KVBLK_BACKEND_URING_CMD));
		ASSERT_TRUE(dev_);
		ASSERT_EQ(kvblk_add_target(dev_.get(), ng_b_.c_str(), 0, &id_b_), 0) << kvblk_last_error();
		track(dev_.get(), 0, a_, env("KVBLK_VM_PATTERN_XOR") != nullptr, 0);
		track(dev_.get(), id_b_, b_, b_pattern_, b_base_);
	}

	DevPtr dev_;
	std::string ng_a_, ng_b_;
	uint32_t id_b_ = 0;
};

TEST_F(UringCmdTargetsTest, interleaved_batch_equals_pread)
{
	kvblk_dev *dev = dev_.get();
	const kvblk_dev_info d = get_info(dev);
	EXPECT_EQ(d.backend, uint32_t(KVBLK_BACKEND_URING_CMD));
	EXPECT_EQ(d.targets, 2u);
	const kvblk_dev_info &b = tgts_[1].info;
	EXPECT_EQ(b.backend, uint32_t(KVBLK_BACKEND_URING_CMD));
	EXPECT_STREQ(b.backend_reason, "uring_cmd: serves every target of the device");
	EXPECT_FALSE(b.flags & KVBLK_INFO_BLOCKDEV);
	if (const char *nb = env("KVBLK_VM_NS2_BYTES")) {
		EXPECT_EQ(b.capacity, std::strtoull(nb, nullptr, 0));
	}
	EXPECT_EQ(b.max_cmd_bytes, d.max_cmd_bytes);
	if (const char *lba = env("KVBLK_VM_NS2_LBA")) {
		EXPECT_EQ(b.logical_block_size, std::strtoul(lba, nullptr, 10));
	}

	const std::vector<Obj> objs = plan({0, 1}, 20);
	{
		SCOPED_TRACE("plain pointers");
		AlignedBuf mem(span(objs));
		load_and_check(dev, objs, mem, KVBLK_BUF_NONE, {KVBLK_BACKEND_URING_CMD}, KVBLK_BACKEND_URING_CMD);
	}
	{
		SCOPED_TRACE("registered buffer");
		AlignedBuf mem(span(objs));
		uint32_t id = 0;
		ASSERT_EQ(kvblk_register_buffer(dev, KVBLK_MEM_HOST, mem.data(), mem.size(), &id), 0) << kvblk_last_error();
		load_and_check(dev, objs, mem, id, {KVBLK_BACKEND_URING_CMD}, KVBLK_BACKEND_URING_CMD);
		EXPECT_EQ(kvblk_unregister_buffer(dev, id), 0);
	}
	/* A uring_cmd device sends NVMe commands only: no block device, no file. */
	uint32_t id = 0;
	EXPECT_EQ(kvblk_add_target(dev, b_.c_str(), 0, &id), -EOPNOTSUPP);
	EXPECT_TRUE(says("is not an NVMe generic char device")) << kvblk_last_error();
}

TEST_F(UringCmdTargetsTest, remove_target)
{
	kvblk_dev *dev = dev_.get();
	const std::vector<Obj> objs = plan({1, 0}, 6, 7);
	AlignedBuf mem(span(objs));
	const std::vector<kvblk_desc> d = descs_for(objs, mem, KVBLK_BUF_NONE, 1);
	std::vector<kvblk_result> res(d.size());
	kvblk_submit_opts so;
	kvblk_submit_opts_init(&so, sizeof(so));
	so.results = res.data();
	uint64_t ticket = 0;
	ASSERT_EQ(kvblk_submit(dev, d.data(), uint32_t(d.size()), &so, &ticket), 0) << kvblk_last_error();
	EXPECT_EQ(kvblk_remove_target(dev, id_b_), -EBUSY);
	kvblk_cqe cq[4];
	int got = 0;
	while (got == 0) {
		got = kvblk_reap(dev, cq, 4, 1, int64_t(60) * 1000000000);
		ASSERT_GT(got, 0) << "no completion within 60 s: " << kvblk_last_error();
	}
	ASSERT_EQ(got, 1);
	EXPECT_EQ(cq[0].ticket, ticket);
	EXPECT_EQ(cq[0].status, 0);
	EXPECT_EQ(cq[0].bytes, bytes(objs));
	check_bytes(objs, mem);
	ASSERT_EQ(kvblk_remove_target(dev, id_b_), 0) << kvblk_last_error();
	EXPECT_EQ(get_info(dev).targets, 1u);
	kvblk_dev_info gone{};
	gone.info_size = sizeof(gone);
	EXPECT_EQ(kvblk_get_target_info(dev, id_b_, &gone), -ENOENT);
	expect_unknown_target(dev, id_b_);
	const std::vector<Obj> a = plan({0}, 4, 8);
	AlignedBuf m(span(a));
	load_and_check(dev, a, m, KVBLK_BUF_NONE, {KVBLK_BACKEND_URING_CMD}, KVBLK_BACKEND_URING_CMD);
}

} // namespace

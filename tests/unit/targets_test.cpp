// SPDX-License-Identifier: MIT
// Several targets per handle: kvblk_add_target(), kvblk_add_target_fd(),
// kvblk_remove_target(), kvblk_get_target_info(), kvblk_desc.target, and one batch across
// a thousand chunk files on every host backend.
#include "test_util.hpp"

#include <chrono>
#include <fstream>
#include <linux/loop.h>
#include <map>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

using namespace kvblk_test;

namespace {

/* Raise the soft RLIMIT_NOFILE to at least @want (up to the hard limit); the limit now. */
rlim_t raise_nofile(rlim_t want)
{
	rlimit rl{};
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want) {
		rl.rlim_cur = std::min(want, rl.rlim_max);
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur;
}

class ManyTargetsTest : public ::testing::TestWithParam<BackendCase> {};

/* LMCache's layout: a thousand chunk files, one load_many, every byte checked. */
TEST_P(ManyTargetsTest, thousand_chunk_files_in_one_batch)
{
	constexpr uint32_t kFiles = 1000;
	constexpr uint64_t kChunk = 16 * KiB;
	if (raise_nofile(kFiles + 200) < kFiles + 100)
		GTEST_SKIP() << "RLIMIT_NOFILE too low for " << kFiles << " targets";
	TempDir dir;
	write_chunk(dir.file("base"), 999999, kChunk);
	for (uint32_t i = 0; i < kFiles; i++)
		write_chunk(dir.file("chunk" + std::to_string(i)), i, kChunk);

	const BackendCase &c = GetParam();
	DevPtr dev = open_dev(dir.file("base"), make_opts(c.backend, c.workers, c.queue_depth));
	ASSERT_TRUE(dev);
	std::vector<uint32_t> ids(kFiles);
	for (uint32_t i = 0; i < kFiles; i++)
		ASSERT_EQ(kvblk_add_target(dev.get(), dir.file("chunk" + std::to_string(i)).c_str(), 0, &ids[i]), 0)
			<< i << ": " << kvblk_last_error();
	EXPECT_EQ(ids[0], 1u);
	EXPECT_EQ(ids[kFiles - 1], kFiles);
	EXPECT_EQ(get_info(dev.get()).targets, kFiles + 1);

	/* Backwards, so that descriptor order is not file order. */
	AlignedBuf dst(kFiles * kChunk);
	std::vector<kvblk_desc> d;
	for (uint32_t i = 0; i < kFiles; i++) {
		const uint32_t f = kFiles - 1 - i;
		d.push_back(tdesc(ids[f], 0, kChunk, dst.data() + i * kChunk, 5000 + f));
	}
	std::vector<kvblk_result> r(kFiles);
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), kFiles, r.data(), &bi), int(kFiles)) << kvblk_last_error();
	for (uint32_t i = 0; i < kFiles; i++) {
		const uint32_t f = kFiles - 1 - i;
		ASSERT_EQ(r[i].status, 0) << i;
		ASSERT_EQ(r[i].bytes, kChunk);
		ASSERT_EQ(r[i].tag, 5000u + f);
		ASSERT_EQ(std::memcmp(dst.data() + i * kChunk, expected_bytes(f * kChunk, kChunk, kChunk).data(), kChunk), 0)
			<< "chunk file " << f;
	}
	EXPECT_EQ(bi.failed, 0u);
	EXPECT_EQ(bi.bytes, kFiles * kChunk);
	EXPECT_EQ(bi.bytes_device, kFiles * kChunk);
	EXPECT_EQ(bi.backend, uint32_t(c.backend));
	const kvblk_stats s = get_stats(dev.get());
	EXPECT_EQ(s.objects, kFiles);
	EXPECT_EQ(s.bytes_read, kFiles * kChunk);
	EXPECT_EQ(s.batches_by_backend[c.backend], 1u);
	if (c.backend == KVBLK_BACKEND_URING) {
		EXPECT_GE(s.inflight_peak, std::min<uint64_t>(c.queue_depth * c.workers, kFiles) / 2)
			<< "the chunk files' reads were not in flight together";
	}
}

INSTANTIATE_TEST_SUITE_P(Backends, ManyTargetsTest, ::testing::ValuesIn(kAllBackends), case_name);

class TargetsTest : public StoreTest {
protected:
	void SetUp() override
	{
		StoreTest::SetUp();
		dev_ = open_dev(path_, make_opts(KVBLK_BACKEND_URING, 0, 0, 0, KVBLK_OPEN_WRITE));
		ASSERT_TRUE(dev_);
		lbs_ = get_info(dev_.get()).logical_block_size;
		small_ = dir_->file("small");
		write_chunk(small_, 77, kSmall);
	}

	/* Load [offset, offset + len) of target @t; status of the one object. */
	int32_t load_one(uint32_t t, uint64_t offset, uint64_t len, uint8_t *dst, kvblk_batch_info *bi = nullptr)
	{
		const kvblk_desc d = tdesc(t, offset, len, dst, 1);
		kvblk_result r{};
		const int rc = kvblk_load_many(dev_.get(), &d, 1, &r, bi);
		EXPECT_TRUE(rc == 1 || rc < 0);
		return rc < 0 ? rc : r.status;
	}

	static constexpr uint64_t kSmall = 8 * KiB;
	DevPtr dev_;
	uint32_t lbs_ = 0;
	std::string small_;
};

TEST_F(TargetsTest, target_and_target_zero_in_one_batch)
{
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev_.get(), small_.c_str(), 0, &id), 0) << kvblk_last_error();
	AlignedBuf dst(2 * kSmall);
	const kvblk_desc d[2] = {tdesc(0, 3 * kObjectBytes, kSmall, dst.data(), 1), tdesc(id, 0, kSmall, dst.data() + kSmall, 2)};
	kvblk_result r[2];
	ASSERT_EQ(kvblk_load_many(dev_.get(), d, 2, r, nullptr), 2) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(3 * kObjectBytes, kSmall, kObjectBytes).data(), kSmall), 0);
	EXPECT_EQ(std::memcmp(dst.data() + kSmall, expected_bytes(77 * kSmall, kSmall, kSmall).data(), kSmall), 0);
}

TEST_F(TargetsTest, unknown_target_is_enoent_with_bad_index)
{
	AlignedBuf dst(3 * kSmall, 0xEE);
	kvblk_desc d[3] = {tdesc(0, 0, kSmall, dst.data(), 1), tdesc(7, 0, kSmall, dst.data() + kSmall, 2),
			   tdesc(0, kSmall, kSmall, dst.data() + 2 * kSmall, 3)};
	kvblk_result r[3];
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_load_many(dev_.get(), d, 3, r, &bi), -ENOENT);
	EXPECT_EQ(bi.bad_index, 1);
	EXPECT_EQ(r[0].status, -ECANCELED);
	EXPECT_EQ(r[1].status, -ENOENT);
	EXPECT_EQ(r[2].status, -ECANCELED);
	EXPECT_NE(std::string(kvblk_last_error()).find("descriptor 1: target 7 is not added"), std::string::npos)
		<< kvblk_last_error();
	EXPECT_TRUE(dst.all(0, dst.size(), 0xEE)) << "a rejected batch read something";
}

TEST_F(TargetsTest, reserved_and_unknown_flags_are_einval)
{
	AlignedBuf dst(kSmall);
	kvblk_desc d = tdesc(0, 0, kSmall, dst.data(), 1);
	kvblk_result r{};
	kvblk_batch_info bi = new_batch_info();
	d.reserved = 1;
	EXPECT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, &bi), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("reserved is 1"), std::string::npos) << kvblk_last_error();
	d.reserved = 0;
	d.flags = 0x80;
	EXPECT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, &bi), -EINVAL);
	EXPECT_EQ(bi.bad_index, 0);
	EXPECT_NE(std::string(kvblk_last_error()).find("unknown flags 0x80"), std::string::npos) << kvblk_last_error();
}

TEST_F(TargetsTest, each_target_has_its_own_size)
{
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev_.get(), small_.c_str(), 0, &id), 0);
	AlignedBuf dst(kSmall, 0xEE);
	/* In range of target 0 (16 MiB), past the end of the 8 KiB target. */
	EXPECT_EQ(load_one(id, kSmall, kSmall, dst.data()), -ERANGE);
	EXPECT_NE(std::string(kvblk_last_error()).find("target " + std::to_string(id) + ": capacity 8192 bytes"),
		  std::string::npos) << kvblk_last_error();
	EXPECT_EQ(load_one(0, kSmall, kSmall, dst.data()), 0);
	/* Alignment is checked against the target's own block size. */
	EXPECT_EQ(load_one(id, lbs_ / 2, lbs_, dst.data()), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("of its target"), std::string::npos) << kvblk_last_error();

	kvblk_dev_info ti{};
	ti.info_size = sizeof(ti);
	ASSERT_EQ(kvblk_get_target_info(dev_.get(), id, &ti), 0);
	EXPECT_EQ(ti.capacity, kSmall);
	EXPECT_EQ(ti.flags, 0u) << "added read-only, not buffered, not a block device";
	EXPECT_EQ(ti.backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_EQ(ti.logical_block_size, lbs_);
	EXPECT_EQ(ti.targets, 2u);
	EXPECT_NE(std::string(ti.backend_reason).find("uring"), std::string::npos) << ti.backend_reason;
	ASSERT_EQ(kvblk_get_target_info(dev_.get(), 0, &ti), 0);
	EXPECT_EQ(ti.capacity, kObjects * kObjectBytes);
	EXPECT_EQ(ti.flags, uint32_t(KVBLK_INFO_WRITABLE));
	EXPECT_EQ(kvblk_get_target_info(dev_.get(), id + 1, &ti), -ENOENT);
	ti.info_size = 8;
	EXPECT_EQ(kvblk_get_target_info(dev_.get(), id, &ti), -EINVAL);
}

TEST_F(TargetsTest, buffered_target_on_a_direct_device)
{
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev_.get(), small_.c_str(), KVBLK_OPEN_BUFFERED, &id), 0);
	kvblk_dev_info ti{};
	ti.info_size = sizeof(ti);
	ASSERT_EQ(kvblk_get_target_info(dev_.get(), id, &ti), 0);
	EXPECT_EQ(ti.flags, uint32_t(KVBLK_INFO_BUFFERED));
	AlignedBuf dst(kSmall);
	ASSERT_EQ(load_one(id, 0, kSmall, dst.data()), 0);
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(77 * kSmall, kSmall, kSmall).data(), kSmall), 0);
	EXPECT_EQ(get_stats(dev_.get()).buffered_batches, 1u);
}

/* Files are sized when each batch starts: bytes appended after the add are loadable. */
TEST_F(TargetsTest, file_appended_between_two_loads)
{
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev_.get(), small_.c_str(), 0, &id), 0);
	AlignedBuf dst(kSmall, 0xEE);
	EXPECT_EQ(load_one(id, kSmall, kSmall, dst.data()), -ERANGE);

	int fd = open(small_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	const std::vector<uint8_t> more = expected_bytes(78 * kSmall, kSmall, kSmall);
	ASSERT_EQ(write(fd, more.data(), kSmall), ssize_t(kSmall));
	close(fd);

	ASSERT_EQ(load_one(id, kSmall, kSmall, dst.data()), 0) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(dst.data(), more.data(), kSmall), 0);
	kvblk_dev_info ti{};
	ti.info_size = sizeof(ti);
	ASSERT_EQ(kvblk_get_target_info(dev_.get(), id, &ti), 0);
	EXPECT_EQ(ti.capacity, 2 * kSmall);

	/* Target 0 too: the store file grows by one object. */
	fd = open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	const std::vector<uint8_t> obj = expected_bytes(kObjects * kObjectBytes, kSmall, kObjectBytes);
	ASSERT_EQ(write(fd, obj.data(), kSmall), ssize_t(kSmall));
	close(fd);
	ASSERT_EQ(load_one(0, kObjects * kObjectBytes, kSmall, dst.data()), 0) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(dst.data(), obj.data(), kSmall), 0);
}

TEST_F(TargetsTest, remove_target_rules_and_id_reuse)
{
	EXPECT_EQ(kvblk_remove_target(dev_.get(), 0), -EINVAL);
	EXPECT_EQ(kvblk_remove_target(dev_.get(), 1), -ENOENT);
	EXPECT_EQ(kvblk_remove_target(nullptr, 1), -EINVAL);
	write_chunk(dir_->file("b"), 78, kSmall);
	write_chunk(dir_->file("c"), 79, kSmall);
	uint32_t a = 0, b = 0, c = 0;
	ASSERT_EQ(kvblk_add_target(dev_.get(), small_.c_str(), 0, &a), 0);
	ASSERT_EQ(kvblk_add_target(dev_.get(), dir_->file("b").c_str(), 0, &b), 0);
	EXPECT_EQ(a, 1u);
	EXPECT_EQ(b, 2u);
	EXPECT_EQ(get_info(dev_.get()).targets, 3u);
	ASSERT_EQ(kvblk_remove_target(dev_.get(), a), 0);
	EXPECT_EQ(kvblk_remove_target(dev_.get(), a), -ENOENT);
	EXPECT_EQ(get_info(dev_.get()).targets, 2u);
	AlignedBuf dst(kSmall);
	EXPECT_EQ(load_one(a, 0, kSmall, dst.data()), -ENOENT);

	/* The smallest free id is handed out again, now naming the new file. */
	ASSERT_EQ(kvblk_add_target(dev_.get(), dir_->file("c").c_str(), 0, &c), 0);
	EXPECT_EQ(c, 1u);
	ASSERT_EQ(load_one(c, 0, kSmall, dst.data()), 0);
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(79 * kSmall, kSmall, kSmall).data(), kSmall), 0);
	ASSERT_EQ(load_one(b, 0, kSmall, dst.data()), 0);
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(78 * kSmall, kSmall, kSmall).data(), kSmall), 0);
}

/*
 * Registered files of io_uring ring @ring_fd: slot -> file name, from its fdinfo
 * ("UserFiles:\t<table size>", then "%5u: <path>" per occupied slot, io_uring/fdinfo.c;
 * the kernel lists them only when it gets the ring's lock at once, so a few tries until
 * slot 0, which always holds target 0, is listed).
 */
std::map<uint32_t, std::string> ring_files(int ring_fd)
{
	std::map<uint32_t, std::string> files;
	for (int attempt = 0; attempt < 50; attempt++) {
		std::ifstream in("/proc/self/fdinfo/" + std::to_string(ring_fd));
		std::string line;
		uint32_t nr = 0;
		bool in_files = false;
		files.clear();
		while (std::getline(in, line)) {
			if (std::sscanf(line.c_str(), "UserFiles: %u", &nr) == 1) {
				in_files = true;
				continue;
			}
			unsigned slot;
			char name[256];
			if (in_files && std::sscanf(line.c_str(), " %u: %255s", &slot, name) == 2) {
				if (std::string(name) != "<none>") /* a path: its last part */
					files[slot] = std::filesystem::path(name).filename().string();
			} else {
				in_files = false;
			}
		}
		if (files.count(0))
			return files;
		usleep(10000);
	}
	ADD_FAILURE() << "ring fd " << ring_fd << ": slot 0 not listed in its fdinfo (no registered files?)";
	return files;
}

/*
 * The uring backend's commands name their target's registered file (IOSQE_FIXED_FILE, as
 * fio's registerfiles=1): target id's fd is in slot id of every ring from its add to its
 * removal. Checked in each ring's fdinfo, and by loads from a file added into a slot that
 * held another (a stale slot would read the other file's bytes).
 */
TEST_F(TargetsTest, uring_targets_are_each_rings_registered_files)
{
	const std::vector<int> before = fds_linking_to("anon_inode:[io_uring]");
	DevPtr dev = open_dev(path_, make_opts(KVBLK_BACKEND_URING, 2, 8));
	ASSERT_TRUE(dev);
	std::vector<int> rings;
	for (int fd : fds_linking_to("anon_inode:[io_uring]"))
		if (std::find(before.begin(), before.end(), fd) == before.end())
			rings.push_back(fd);
	ASSERT_EQ(rings.size(), 2u) << "one ring per worker";
	write_chunk(dir_->file("two"), 78, kSmall);
	uint32_t one = 0, two = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), small_.c_str(), 0, &one), 0) << kvblk_last_error();
	ASSERT_EQ(one, 1u);
	for (int r : rings) {
		const auto files = ring_files(r);
		EXPECT_EQ(files, (std::map<uint32_t, std::string>{{0, "store"}, {1, "small"}})) << "ring fd " << r;
	}

	/* Both targets in one batch, through their slots. */
	AlignedBuf dst(kObjectBytes + kSmall);
	const kvblk_desc d[2] = {tdesc(0, 3 * kObjectBytes, kObjectBytes, dst.data(), 1),
				 tdesc(one, 0, kSmall, dst.data() + kObjectBytes, 2)};
	kvblk_result res[2]{};
	ASSERT_EQ(kvblk_load_many(dev.get(), d, 2, res, nullptr), 2) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(3 * kObjectBytes, kObjectBytes, kObjectBytes).data(),
			      kObjectBytes), 0);
	EXPECT_EQ(std::memcmp(dst.data() + kObjectBytes, expected_bytes(77 * kSmall, kSmall, kSmall).data(), kSmall), 0);

	/* Removed: the slot is emptied; the next target takes id 1 and its slot. */
	ASSERT_EQ(kvblk_remove_target(dev.get(), one), 0);
	for (int r : rings)
		EXPECT_EQ(ring_files(r), (std::map<uint32_t, std::string>{{0, "store"}})) << "ring fd " << r;
	ASSERT_EQ(kvblk_add_target(dev.get(), dir_->file("two").c_str(), 0, &two), 0) << kvblk_last_error();
	ASSERT_EQ(two, 1u);
	for (int r : rings)
		EXPECT_EQ(ring_files(r), (std::map<uint32_t, std::string>{{0, "store"}, {1, "two"}})) << "ring fd " << r;
	for (int i = 0; i < 4; i++) { /* several loads: both rings serve some */
		std::memset(dst.data(), 0, kSmall);
		const kvblk_desc d2 = tdesc(two, 0, kSmall, dst.data(), 3);
		kvblk_result r2{};
		ASSERT_EQ(kvblk_load_many(dev.get(), &d2, 1, &r2, nullptr), 1) << kvblk_last_error();
		ASSERT_EQ(std::memcmp(dst.data(), expected_bytes(78 * kSmall, kSmall, kSmall).data(), kSmall), 0) << i;
	}
}

/* A batch that names a target pins it: removing it meanwhile is -EBUSY. */
TEST(TargetsBusyTest, remove_while_a_batch_names_it_is_ebusy)
{
	TempDir dir;
	write_chunk(dir.file("base"), 1, 8 * KiB);
	write_chunk(dir.file("t"), 2, 8 * KiB);
	DevPtr dev = open_dev(dir.file("base"), make_opts(KVBLK_BACKEND_PSYNC));
	ASSERT_TRUE(dev);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev.get(), dir.file("t").c_str(), 0, &id), 0);
	int during = 1;
	kvblk::testing::Seams s;
	s.on_complete = [&](const kvblk::testing::CommandInfo &, int64_t res) {
		if (during == 1)
			during = kvblk_remove_target(dev.get(), id); /* psync: the calling thread, mid-batch */
		return res;
	};
	{
		SeamGuard g(s);
		AlignedBuf dst(8 * KiB);
		const kvblk_desc d = tdesc(id, 0, 8 * KiB, dst.data(), 1);
		kvblk_result r{};
		ASSERT_EQ(kvblk_load_many(dev.get(), &d, 1, &r, nullptr), 1);
	}
	EXPECT_EQ(during, -EBUSY);
	EXPECT_EQ(kvblk_remove_target(dev.get(), id), 0) << "the pin outlived its batch";
}

TEST_F(TargetsTest, add_target_argument_errors)
{
	uint32_t id = 0;
	EXPECT_EQ(kvblk_add_target(nullptr, small_.c_str(), 0, &id), -EINVAL);
	EXPECT_EQ(kvblk_add_target(dev_.get(), nullptr, 0, &id), -EINVAL);
	EXPECT_EQ(kvblk_add_target(dev_.get(), small_.c_str(), 0, nullptr), -EINVAL);
	EXPECT_EQ(kvblk_add_target(dev_.get(), small_.c_str(), KVBLK_OPEN_CREATE, &id), -EINVAL);
	EXPECT_EQ(kvblk_add_target(dev_.get(), small_.c_str(), 1u << 9, &id), -EINVAL);
	EXPECT_EQ(kvblk_add_target(dev_.get(), dir_->file("nope").c_str(), 0, &id), -ENOENT);
	EXPECT_EQ(kvblk_add_target(dev_.get(), dir_->path().c_str(), 0, &id), -EISDIR);
	EXPECT_EQ(get_info(dev_.get()).targets, 1u) << "a failed add left a target behind";
}

/* A FIFO is refused at once: nothing that could wait for a writer is opened. */
TEST_F(TargetsTest, fifo_and_socket_are_enotsup_immediately)
{
	const std::string fifo = dir_->file("fifo");
	ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
	uint32_t id = 0;
	const auto t0 = std::chrono::steady_clock::now();
	EXPECT_EQ(kvblk_add_target(dev_.get(), fifo.c_str(), 0, &id), -ENOTSUP);
	EXPECT_NE(std::string(kvblk_last_error()).find("a FIFO"), std::string::npos) << kvblk_last_error();
	kvblk_dev *other = nullptr;
	EXPECT_EQ(kvblk_open(fifo.c_str(), nullptr, &other), -ENOTSUP);
	/* Every backend: refused from stat(2), before any backend is involved. */
	for (int b = KVBLK_BACKEND_AUTO; b < KVBLK_BACKEND_MAX; b++) {
		const kvblk_open_opts o = make_opts(kvblk_backend(b));
		EXPECT_EQ(kvblk_open(fifo.c_str(), &o, &other), -ENOTSUP) << kvblk_backend_name(b);
		EXPECT_EQ(other, nullptr);
	}
	const int ffd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ASSERT_GE(ffd, 0);
	EXPECT_EQ(kvblk_add_target_fd(dev_.get(), ffd, 0, &id), -ENOTSUP);
	close(ffd);
	EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));

	int sv[2];
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	EXPECT_EQ(kvblk_add_target_fd(dev_.get(), sv[0], 0, &id), -ENOTSUP);
	EXPECT_NE(std::string(kvblk_last_error()).find("a socket"), std::string::npos) << kvblk_last_error();
	close(sv[0]);
	close(sv[1]);
	EXPECT_EQ(get_info(dev_.get()).targets, 1u);
}

TEST_F(TargetsTest, add_by_fd_rights_follow_the_fd)
{
	AlignedBuf src(kSmall), dst(kSmall);
	std::memset(src.data(), 0x3C, kSmall);

	/* O_RDONLY: loads; its own flags stay as they were (no O_DIRECT added). */
	int ro = open(small_.c_str(), O_RDONLY | O_CLOEXEC);
	ASSERT_GE(ro, 0);
	const int fl_before = fcntl(ro, F_GETFL);
	uint32_t id = 0;
	EXPECT_EQ(kvblk_add_target_fd(dev_.get(), ro, KVBLK_OPEN_WRITE, &id), -EBADF);
	EXPECT_NE(std::string(kvblk_last_error()).find("read-only"), std::string::npos) << kvblk_last_error();
	ASSERT_EQ(kvblk_add_target_fd(dev_.get(), ro, 0, &id), 0) << kvblk_last_error();
	EXPECT_EQ(fcntl(ro, F_GETFL), fl_before);
	close(ro); /* the caller may close it: the library has its own */
	ASSERT_EQ(load_one(id, 0, kSmall, dst.data()), 0);
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(77 * kSmall, kSmall, kSmall).data(), kSmall), 0);

	/* A store to it: -EBADF for the whole call, nothing written. */
	const kvblk_desc sd = tdesc(id, 0, kSmall, src.data(), 9);
	kvblk_result r{};
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_store_many(dev_.get(), &sd, 1, &r, &bi), -EBADF);
	EXPECT_EQ(r.status, -ECANCELED);
	EXPECT_EQ(bi.bad_index, -1);
	EXPECT_NE(std::string(kvblk_last_error()).find("KVBLK_OPEN_WRITE"), std::string::npos) << kvblk_last_error();

	/* O_RDWR with KVBLK_OPEN_WRITE: stores and loads. */
	int rw = open(small_.c_str(), O_RDWR | O_CLOEXEC);
	ASSERT_GE(rw, 0);
	uint32_t wid = 0;
	ASSERT_EQ(kvblk_add_target_fd(dev_.get(), rw, KVBLK_OPEN_WRITE, &wid), 0) << kvblk_last_error();
	close(rw);
	const kvblk_desc wd = tdesc(wid, 0, kSmall, src.data(), 9);
	ASSERT_EQ(kvblk_store_many(dev_.get(), &wd, 1, &r, nullptr), 1) << kvblk_last_error();
	ASSERT_EQ(load_one(id, 0, kSmall, dst.data()), 0);
	EXPECT_TRUE(dst.all(0, kSmall, 0x3C));

	/* O_WRONLY: a store-only target with KVBLK_OPEN_WRITE, refused without it. */
	int wo = open(small_.c_str(), O_WRONLY | O_CLOEXEC);
	ASSERT_GE(wo, 0);
	uint32_t woid = 0;
	EXPECT_EQ(kvblk_add_target_fd(dev_.get(), wo, 0, &woid), -EBADF);
	ASSERT_EQ(kvblk_add_target_fd(dev_.get(), wo, KVBLK_OPEN_WRITE, &woid), 0) << kvblk_last_error();
	close(wo);
	EXPECT_EQ(load_one(woid, 0, kSmall, dst.data()), -EBADF);
	EXPECT_NE(std::string(kvblk_last_error()).find("write-only"), std::string::npos) << kvblk_last_error();
}

TEST_F(TargetsTest, add_by_fd_bad_fds_are_ebadf)
{
	uint32_t id = 0;
	EXPECT_EQ(kvblk_add_target_fd(dev_.get(), -1, 0, &id), -EBADF);
	int fd = open(small_.c_str(), O_RDONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	close(fd);
	EXPECT_EQ(kvblk_add_target_fd(dev_.get(), fd, 0, &id), -EBADF);
	EXPECT_NE(std::string(kvblk_last_error()).find("is not open"), std::string::npos) << kvblk_last_error();
	int p = open(small_.c_str(), O_PATH | O_CLOEXEC);
	ASSERT_GE(p, 0);
	EXPECT_EQ(kvblk_add_target_fd(dev_.get(), p, 0, &id), -EBADF);
	EXPECT_NE(std::string(kvblk_last_error()).find("O_PATH"), std::string::npos) << kvblk_last_error();
	close(p);
	int d = open(dir_->path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ASSERT_GE(d, 0);
	EXPECT_EQ(kvblk_add_target_fd(dev_.get(), d, 0, &id), -EISDIR);
	close(d);
	EXPECT_EQ(get_info(dev_.get()).targets, 1u);
}

/* A loop device with 4 KiB logical blocks over @backing_path, or none (path empty). */
class LoopDevice {
public:
	explicit LoopDevice(const std::string &backing_path)
	{
		int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
		if (ctl < 0)
			return;
		for (int attempt = 0; attempt < 5 && fd_ < 0; attempt++) {
			const int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
			if (nr < 0)
				break;
			const std::string p = "/dev/loop" + std::to_string(nr);
			int fd = open(p.c_str(), O_RDWR | O_CLOEXEC);
			if (fd < 0)
				continue;
			int backing = open(backing_path.c_str(), O_RDWR | O_CLOEXEC);
			loop_config cfg{};
			cfg.fd = uint32_t(backing);
			cfg.block_size = 4096;
			cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
			if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
				fd_ = fd;
				path_ = p;
			} else {
				close(fd);
			}
			close(backing);
		}
		close(ctl);
	}
	~LoopDevice()
	{
		if (fd_ >= 0) {
			ioctl(fd_, LOOP_CLR_FD, 0);
			close(fd_);
		}
	}
	[[nodiscard]] const std::string &path() const { return path_; }

private:
	int fd_ = -1;
	std::string path_;
};

/* Each target is checked against its own block size: a 4 KiB loop device next to a file. */
TEST_F(TargetsTest, per_target_block_size_rules)
{
	LoopDevice loop(small_);
	if (loop.path().empty())
		GTEST_SKIP() << "cannot set up a loop device";
	ASSERT_EQ(lbs_, 512u) << "this test wants a file system with 512-byte direct I/O";
	uint32_t id = 0;
	ASSERT_EQ(kvblk_add_target(dev_.get(), loop.path().c_str(), 0, &id), 0) << kvblk_last_error();
	kvblk_dev_info ti{};
	ti.info_size = sizeof(ti);
	ASSERT_EQ(kvblk_get_target_info(dev_.get(), id, &ti), 0);
	EXPECT_EQ(ti.logical_block_size, 4096u);
	EXPECT_EQ(ti.flags, uint32_t(KVBLK_INFO_BLOCKDEV));
	EXPECT_EQ(ti.capacity, kSmall);

	AlignedBuf dst(kSmall, 0xEE);
	/* 512-byte granularity: fine for the file (target 0), not for the loop device. */
	EXPECT_EQ(load_one(0, 512, 512, dst.data()), 0);
	EXPECT_EQ(load_one(id, 512, 512, dst.data()), -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("logical block size 4096 of its target"), std::string::npos)
		<< kvblk_last_error();
	ASSERT_EQ(load_one(id, 4096, 4096, dst.data()), 0);
	EXPECT_EQ(std::memcmp(dst.data(), expected_bytes(77 * kSmall + 4096, 4096, kSmall).data(), 4096), 0);

	/* Unaligned on the loop device: its own 4 KiB covering blocks. */
	std::memset(dst.data(), 0xEE, kSmall);
	kvblk_desc d = tdesc(id, 100, 5000, dst.data() + 1, 3);
	d.flags = KVBLK_DESC_UNALIGNED;
	kvblk_result r{};
	kvblk_batch_info bi = new_batch_info();
	ASSERT_EQ(kvblk_load_many(dev_.get(), &d, 1, &r, &bi), 1) << kvblk_last_error();
	EXPECT_EQ(std::memcmp(dst.data() + 1, expected_bytes(77 * kSmall, kSmall, kSmall).data() + 100, 5000), 0);
	EXPECT_EQ(dst.data()[0], 0xEE);
	EXPECT_EQ(dst.data()[5001], 0xEE);
	EXPECT_EQ(bi.bytes_device, 8192u) << "two 4 KiB blocks cover [100, 5100)";
}

} // namespace

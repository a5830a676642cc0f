// SPDX-License-Identifier: MIT
// A file system that refuses O_DIRECT gives -EOPNOTSUPP with a message saying so; opening
// with KVBLK_OPEN_BUFFERED works and every batch is counted in stats.buffered_batches.
#include "test_util.hpp"

#include <sched.h>
#include <sys/mount.h>

using namespace kvblk_test;
using kvblk::testing::Seams;

namespace {

constexpr uint64_t kObjs = 4;
constexpr uint64_t kObjBytes = 256 * KiB;

/* Does open(2) with O_DIRECT work in @dir? */
bool accepts_o_direct(const std::string &dir)
{
	const std::string f = dir + "/probe";
	int fd = open(f.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	unlink(f.c_str());
	return fd >= 0;
}

/* Open @path without and with KVBLK_OPEN_BUFFERED, load twice; what happened, in @out. */
void refuse_then_buffered(const std::string &path, ChildReport &out)
{
	kvblk_dev *dev = nullptr;
	kvblk_open_opts o = make_opts(KVBLK_BACKEND_URING);
	out.v[0] = kvblk_open(path.c_str(), &o, &dev);
	out.say(kvblk_last_error());
	if (out.v[0] == 0)
		kvblk_close(dev);
	o.flags = KVBLK_OPEN_BUFFERED;
	out.v[1] = kvblk_open(path.c_str(), &o, &dev);
	if (out.v[1])
		return;
	kvblk_dev_info info{};
	info.info_size = sizeof(info);
	kvblk_get_info(dev, &info);
	out.v[2] = info.flags;
	AlignedBuf dst(kObjs * kObjBytes);
	std::vector<kvblk_desc> d;
	for (uint64_t i = 0; i < kObjs; i++)
		d.push_back(plain_desc(i * kObjBytes, kObjBytes, dst.data() + i * kObjBytes, i));
	std::vector<kvblk_result> r(kObjs);
	out.v[3] = kvblk_load_many(dev, d.data(), kObjs, r.data(), nullptr);
	out.v[3] += kvblk_load_many(dev, d.data(), kObjs, r.data(), nullptr);
	const auto want = expected_bytes(0, kObjs * kObjBytes, kObjBytes);
	out.v[4] = std::memcmp(dst.data(), want.data(), want.size()) == 0;
	kvblk_stats st{};
	st.stats_size = sizeof(st);
	kvblk_get_stats(dev, &st);
	out.v[5] = int64_t(st.buffered_batches);
	out.v[6] = int64_t(st.batches);
	kvblk_close(dev);
}

void expect_refused_then_buffered(const ChildReport &rep)
{
	EXPECT_EQ(rep.v[0], -EOPNOTSUPP) << rep.msg;
	const std::string what = rep.msg;
	EXPECT_NE(what.find("refuses O_DIRECT"), std::string::npos) << what;
	EXPECT_NE(what.find("KVBLK_OPEN_BUFFERED"), std::string::npos) << what;
	ASSERT_EQ(rep.v[1], 0) << "buffered open";
	EXPECT_TRUE(rep.v[2] & KVBLK_INFO_BUFFERED);
	EXPECT_EQ(rep.v[3], int64_t(2 * kObjs));
	EXPECT_EQ(rep.v[4], 1) << "bytes exact";
	EXPECT_EQ(rep.v[5], 2) << "buffered_batches";
	EXPECT_EQ(rep.v[6], 2) << "batches";
}

/*
 * For real: tmpfs (/dev/shm) refused O_DIRECT before Linux 6.6; where it accepts it, the
 * child mounts a ramfs (never has direct I/O) in a private mount namespace.
 */
TEST(BufferedTest, odirect_refused_for_real)
{
	const ChildReport rep = run_in_child([](ChildReport &out) {
		std::string dir;
		std::unique_ptr<TempDir> shm;
		try {
			shm = std::make_unique<TempDir>("/dev/shm");
		} catch (const std::exception &) {
		}
		if (shm && !accepts_o_direct(shm->path())) {
			dir = shm->path();
		} else {
			if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
				out.skip = 1;
				out.say(std::string("tmpfs accepts O_DIRECT here and no private mount namespace: ") +
					std::strerror(errno));
				return;
			}
			char tmpl[] = "/tmp/kvblk-ramfs-XXXXXX";
			if (!mkdtemp(tmpl) || mount("kvblk-test", tmpl, "ramfs", 0, nullptr) != 0) {
				out.skip = 1;
				out.say(std::string("cannot mount a ramfs: ") + std::strerror(errno));
				return;
			}
			dir = tmpl;
			if (accepts_o_direct(dir)) {
				out.skip = 1;
				out.say("ramfs accepts O_DIRECT on this kernel");
				return;
			}
		}
		const std::string path = dir + "/store";
		write_pattern_file(path, kObjs, kObjBytes);
		refuse_then_buffered(path, out);
		unlink(path.c_str());
		if (dir.rfind("/tmp/kvblk-ramfs-", 0) == 0) {
			umount(dir.c_str());
			rmdir(dir.c_str());
		}
	});
	ASSERT_TRUE(rep.delivered) << "the child died";
	if (rep.skip)
		GTEST_SKIP() << rep.msg;
	expect_refused_then_buffered(rep);
}

TEST(BufferedTest, odirect_refusal_injected)
{
	TempDir dir;
	const std::string path = dir.file("store");
	write_pattern_file(path, kObjs, kObjBytes);
	Seams s;
	s.on_open_direct = [](const char *) { return -EINVAL; };
	SeamGuard g(s);
	ChildReport rep;
	refuse_then_buffered(path, rep);
	expect_refused_then_buffered(rep);
}

TEST(BufferedTest, other_open_errors_are_not_mistaken_for_odirect_refusal)
{
	Seams s;
	s.on_open_direct = [](const char *) { return -EINVAL; };
	SeamGuard g(s);
	kvblk_dev *dev = nullptr;
	EXPECT_EQ(kvblk_open("/var/tmp/kvblk-unit-no-such-file", nullptr, &dev), -EINVAL);
	EXPECT_EQ(std::string(kvblk_last_error()).find("O_DIRECT"), std::string::npos) << kvblk_last_error();
}

/* Every backend counts its buffered batches, on tmpfs. */
TEST(BufferedTest, buffered_batches_are_counted_for_every_backend)
{
	std::unique_ptr<TempDir> dir;
	try {
		dir = std::make_unique<TempDir>("/dev/shm");
	} catch (const std::exception &e) {
		GTEST_SKIP() << e.what();
	}
	const std::string path = dir->file("store");
	write_pattern_file(path, kObjs, kObjBytes);
	for (const BackendCase &c : kAllBackends) {
		SCOPED_TRACE(c.name);
		DevPtr dev = open_dev(path, make_opts(c.backend, c.workers, c.queue_depth, 0, KVBLK_OPEN_BUFFERED));
		ASSERT_TRUE(dev);
		EXPECT_TRUE(get_info(dev.get()).flags & KVBLK_INFO_BUFFERED);
		AlignedBuf dst(kObjs * kObjBytes);
		std::vector<kvblk_desc> d;
		for (uint64_t i = 0; i < kObjs; i++)
			d.push_back(plain_desc(i * kObjBytes, kObjBytes, dst.data() + i * kObjBytes, i));
		std::vector<kvblk_result> r(kObjs);
		for (int i = 0; i < 3; i++) {
			ASSERT_EQ(kvblk_load_many(dev.get(), d.data(), kObjs, r.data(), nullptr), int(kObjs));
		}
		const auto want = expected_bytes(0, kObjs * kObjBytes, kObjBytes);
		EXPECT_EQ(std::memcmp(dst.data(), want.data(), want.size()), 0);
		const kvblk_stats st = get_stats(dev.get());
		EXPECT_EQ(st.buffered_batches, 3u);
		EXPECT_EQ(st.batches, 3u);
	}
}

} // namespace

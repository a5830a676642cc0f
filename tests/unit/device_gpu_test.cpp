// SPDX-License-Identifier: MIT
// libkvblk's P2P path through kvblk.ko (kvblk_device_tests, in the QEMU guest): a
// KVBLK_MEM_CUDA buffer handed out by the test-only nvidia-p2p exporter
// (tests/kmod-exporters/kvblk_fake_nvp2p.c, /dev/kvblk_fake_gpu) and a dma-buf of the test
// exporter (kvblk_test_dmabuf.c) are registered through the public API on a kmod device;
// loads into them must report KVBLK_PATH_P2P, count as p2p, and land at the right offsets
// (read back through the exporters, compared with pread(2) of the namespace).
//
// Needs KVBLK_TEST_DEVICE, kvblk.ko, and the exporter modules loaded before kvblk.ko (the VM
// case that loads them runs `kvblk_device_tests --gtest_filter='DeviceGpuTest.*'`); skips
// without them.
#include "test_util.hpp"

#include "tests/kmod-exporters/kvblk_fake_nvp2p.h"
#include "tests/kmod-exporters/kvblk_test_dmabuf.h"

#include <sys/ioctl.h>

using namespace kvblk_test;

namespace {

/* Objects of awkward sizes (whole LBAs, not 64 KiB multiples) at scattered device offsets. */
struct Layout {
	std::vector<uint64_t> dev_off, len, buf_off;
	uint64_t buf_bytes = 0;
};

Layout make_layout(const kvblk_dev_info &info, uint64_t align)
{
	Layout l;
	const uint64_t lbs = info.logical_block_size;
	uint64_t at = 0;
	for (uint32_t i = 0; i < 9; i++) {
		const uint64_t len = (1 + i * 29) * lbs + (i % 3) * 64 * KiB;
		uint64_t off = info.capacity / 11 * (i + 1);
		off -= off % lbs;
		l.dev_off.push_back(std::min(off, info.capacity - len));
		l.len.push_back(len);
		at = (at + lbs * (i % 4) + align - 1) / align * align + (i % 2) * align; /* gaps, odd starts */
		l.buf_off.push_back(at);
		at += len;
	}
	l.buf_bytes = (at + 64 * KiB - 1) / (64 * KiB) * (64 * KiB);
	return l;
}

/* pread(2) of the namespace: what every object must hold. */
std::vector<uint8_t> pread_all(const std::string &dev, uint64_t off, uint64_t len)
{
	std::vector<uint8_t> v(len);
	const int fd = open(dev.c_str(), O_RDONLY | O_CLOEXEC);
	EXPECT_GE(fd, 0) << dev;
	for (uint64_t done = 0; fd >= 0 && done < len;) {
		const ssize_t n = pread(fd, v.data() + done, len - done, off_t(off + done));
		if (n <= 0)
			break;
		done += uint64_t(n);
	}
	if (fd >= 0)
		close(fd);
	return v;
}

class DeviceGpuTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		const char *d = std::getenv("KVBLK_TEST_DEVICE");
		if (!d || !*d)
			GTEST_SKIP() << "KVBLK_TEST_DEVICE is not set";
		if (access("/dev/kvblk", F_OK) != 0)
			GTEST_SKIP() << "kvblk.ko is not loaded";
		dev_ = d;
	}

	/* Load the layout into buffer @buf of @dev and check what libkvblk reports. */
	void load_p2p(kvblk_dev *dev, uint32_t buf, const Layout &l)
	{
		std::vector<kvblk_desc> descs;
		uint64_t total = 0;
		for (size_t i = 0; i < l.len.size(); i++) {
			descs.push_back(buf_desc(l.dev_off[i], l.len[i], buf, l.buf_off[i], 500 + i));
			total += l.len[i];
		}
		std::vector<kvblk_result> r(descs.size());
		kvblk_batch_info bi = new_batch_info();
		kvblk_reset_stats(dev);
		ASSERT_EQ(kvblk_load_many(dev, descs.data(), uint32_t(descs.size()), r.data(), &bi), int(descs.size()))
			<< kvblk_last_error();
		EXPECT_EQ(bi.path, uint32_t(KVBLK_PATH_P2P));
		EXPECT_EQ(bi.backend, uint32_t(KVBLK_BACKEND_KMOD));
		EXPECT_EQ(bi.bytes, total);
		const kvblk_stats s = get_stats(dev);
		EXPECT_EQ(s.batches_by_path[KVBLK_PATH_P2P], 1u);
		EXPECT_EQ(s.bytes_by_path[KVBLK_PATH_P2P], total);
		EXPECT_EQ(s.staged_copies, 0u);
		EXPECT_EQ(s.staging_pool_bytes, 0u) << "a P2P buffer needs no bounce buffers";
	}

	/* Every object of @l equals pread in @mem (the buffer read back), gaps still 0. */
	void check(const std::vector<uint8_t> &mem, const Layout &l)
	{
		std::vector<bool> covered(mem.size(), false);
		for (size_t i = 0; i < l.len.size(); i++) {
			const auto want = pread_all(dev_, l.dev_off[i], l.len[i]);
			EXPECT_EQ(std::memcmp(mem.data() + l.buf_off[i], want.data(), l.len[i]), 0) << "object " << i;
			for (uint64_t k = 0; k < l.len[i]; k++)
				covered[l.buf_off[i] + k] = true;
		}
		uint64_t stray = 0;
		for (size_t k = 0; k < mem.size(); k++)
			stray += !covered[k] && mem[k] != 0;
		EXPECT_EQ(stray, 0u) << "bytes written outside the objects";
	}

	/* The exporter's node (-1 if its module is not loaded), a kmod device and the layout. */
	int open_all(const char *node, DevPtr *d, Layout *l)
	{
		const int fd = open(node, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return -1;
		*d = open_dev(dev_, make_opts(KVBLK_BACKEND_KMOD));
		if (*d) {
			const kvblk_dev_info info = get_info(d->get());
			*l = make_layout(info, info.mem_align);
		}
		return fd;
	}

	/* Read the buffer back with @read (0 or -1 with errno) and check it. */
	template <class F> void read_back_and_check(const Layout &l, F read)
	{
		std::vector<uint8_t> back(l.buf_bytes);
		ASSERT_EQ(read(back.data()), 0) << std::strerror(errno);
		check(back, l);
	}

	std::string dev_;
};

TEST_F(DeviceGpuTest, cuda_buffer_loads_p2p_through_kvblk_ko)
{
	Layout l;
	DevPtr d;
	const int gpu = open_all(KVBLK_FAKE_GPU_DEV, &d, &l);
	if (gpu < 0)
		GTEST_SKIP() << KVBLK_FAKE_GPU_DEV << " is missing (kvblk_fake_nvp2p.ko not loaded)";
	ASSERT_TRUE(d);
	kvblk_fake_gpu_alloc a{l.buf_bytes, 0};
	ASSERT_EQ(ioctl(gpu, KVBLK_FAKE_GPU_ALLOC, &a), 0) << std::strerror(errno);

	uint32_t id = KVBLK_BUF_NONE;
	auto *va = reinterpret_cast<void *>(uintptr_t(a.va));
	/* Not on a 64 KiB GPU page: refused before the module sees it. */
	EXPECT_EQ(kvblk_register_buffer(d.get(), KVBLK_MEM_CUDA, static_cast<uint8_t *>(va) + 4096, 64 * KiB, &id),
		  -EINVAL);
	EXPECT_NE(std::string(kvblk_last_error()).find("64 KiB"), std::string::npos) << kvblk_last_error();
	const int rc = kvblk_register_buffer(d.get(), KVBLK_MEM_CUDA, va, l.buf_bytes, &id);
	if (rc == -EOPNOTSUPP || rc == -ENODEV) {
		/* kvblk.ko without KVBLK_FEAT_MEM_CUDA: staged, which needs a CUDA runtime here. */
		close(gpu);
		GTEST_SKIP() << "kvblk.ko did not take CUDA memory: " << kvblk_last_error();
	}
	ASSERT_EQ(rc, 0) << kvblk_last_error();
	EXPECT_EQ(get_stats(d.get()).p2p_fallbacks, 0u);
	load_p2p(d.get(), id, l);

	read_back_and_check(l, [&](uint8_t *p) {
		kvblk_fake_gpu_io io{a.va, 0, l.buf_bytes, uint64_t(uintptr_t(p))};
		return ioctl(gpu, KVBLK_FAKE_GPU_READ, &io);
	});

	EXPECT_EQ(kvblk_unregister_buffer(d.get(), id), 0);
	kvblk_fake_gpu_free f{a.va, 0, 0};
	EXPECT_EQ(ioctl(gpu, KVBLK_FAKE_GPU_FREE, &f), 0) << std::strerror(errno);
	close(gpu);
}

TEST_F(DeviceGpuTest, dmabuf_loads_p2p_through_kvblk_ko)
{
	Layout l;
	DevPtr d;
	const int exp = open_all(KVBLK_TEST_DMABUF_NODE, &d, &l);
	if (exp < 0)
		GTEST_SKIP() << KVBLK_TEST_DMABUF_NODE << " is missing (kvblk_test_dmabuf.ko not loaded)";
	ASSERT_TRUE(d);
	kvblk_test_dmabuf_create c{l.buf_bytes, -1, 0};
	const int fd = ioctl(exp, KVBLK_TEST_DMABUF_CREATE, &c);
	ASSERT_GE(fd, 0) << std::strerror(errno);

	uint32_t id = KVBLK_BUF_NONE;
	const int rc = kvblk_register_dmabuf(d.get(), fd, 0, l.buf_bytes, &id);
	if (rc == -EOPNOTSUPP) {
		close(fd);
		close(exp);
		GTEST_SKIP() << "kvblk.ko did not take the dma-buf: " << kvblk_last_error();
	}
	ASSERT_EQ(rc, 0) << kvblk_last_error();
	load_p2p(d.get(), id, l);

	read_back_and_check(l, [&](uint8_t *p) {
		kvblk_test_dmabuf_rw rw{fd, 0, 0, l.buf_bytes, uint64_t(uintptr_t(p))};
		return ioctl(exp, KVBLK_TEST_DMABUF_READ, &rw);
	});

	EXPECT_EQ(kvblk_unregister_buffer(d.get(), id), 0);
	close(fd);
	close(exp);
}

} // namespace

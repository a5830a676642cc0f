// SPDX-License-Identifier: MIT
// The kmod backend's asynchronous path against the VM's namespace (kvblk.ko loaded; run by
// tests/vm/cases/libkvblk-device.sh with the other device tests, same environment):
// batches submitted with kvblk_submit() go to kvblk.ko as io_uring commands
// (KVBLK_FEAT_URING_CMD) on one ring and one thread for the whole process. Many batches in
// flight, reaped through kvblk_reap() + the eventfd and kvblk_wait(), byte-exact against
// pread(2) with canaries around every object; the threads the process has; a rejected
// descriptor; cancel; kvblk_close() with batches in flight; a call larger than the module's
// max_descs (also lowered after open); plain pointers through the ring too (temporary
// registrations pass by pass, several batches beyond the budget of them, cancel between
// passes, unmapped memory); per-object entries as objects complete (kvblk.ko's per-object
// CQEs on 7.2, at the batch's end elsewhere); and the dispatch path a module without the
// feature gets (a test seam hides the bit).
#include "device_util.hpp"

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <dirent.h>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <poll.h>
#include <sys/mman.h>

using namespace kvblk_test;

namespace {

constexpr const char *kRingThread = "kvblk-kmod-ring";

/*
 * Whether thread @tid is one of io_uring's (PF_IO_WORKER, 0x10 in include/linux/sched.h at
 * 6.1, 6.12 and 7.2: the flags field of /proc/PID/task/TID/stat). Its name alone is not
 * enough: a new io-wq worker carries its creator's name until it renames itself iou-wrk-N,
 * and kvblk.ko's io_uring commands, issued again from io-wq (review-2 N10), make them while a
 * test counts (seen under TCG: 3 threads where 2 were expected).
 */
bool io_uring_thread(const char *tid)
{
	std::ifstream f(std::string("/proc/self/task/") + tid + "/stat");
	std::string st;
	std::getline(f, st);
	const size_t close = st.rfind(')');
	if (close == std::string::npos)
		return false;
	std::istringstream rest(st.substr(close + 1));
	std::string field;
	unsigned long flags = 0;
	for (int i = 0; i < 7 && rest >> field; i++) /* state ppid pgrp session tty_nr tpgid flags */
		if (i == 6)
			flags = std::stoul(field);
	return flags & 0x10;
}

/* Call @fn(tid, name) for every thread of this process. */
template <typename Fn> void for_each_thread(Fn fn)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
		std::string c;
		std::getline(f, c);
		fn(e->d_name, c);
	}
	closedir(d);
}

/*
 * Threads of this process named @comm, or ("") all of them but io_uring's own workers
 * (iou-wrk-*, iou-sqp-*: the kernel's, made and ended by io_uring as it likes).
 */
uint32_t threads(const std::string &comm = "")
{
	uint32_t n = 0;
	for_each_thread([&](const char *tid, const std::string &c) {
		if (comm.empty())
			n += c.rfind("iou-", 0) != 0 && !io_uring_thread(tid);
		else
			n += c == comm;
	});
	return n;
}

/* Every thread of this process as "TID name", io_uring's marked, for failure messages. */
std::string thread_list()
{
	std::string out;
	for_each_thread([&](const char *tid, const std::string &c) {
		out += std::string(" ") + tid + " " + c + (io_uring_thread(tid) ? " (io_uring);" : ";");
	});
	return out;
}

std::string read_line(const std::string &path)
{
	std::ifstream f(path);
	std::string s;
	std::getline(f, s);
	return s;
}

bool write_line(const std::string &path, const std::string &v)
{
	std::ofstream f(path);
	f << v << "\n";
	f.flush();
	return bool(f);
}

/*
 * Pages pinned with FOLL_PIN in the whole system (nr_foll_pin_acquired - nr_foll_pin_released
 * in /proc/vmstat, as the kvblk selftests count them; vm/stat_refresh folds the per-CPU
 * deltas first, so the value is exact): kvblk.ko's registrations pin theirs until
 * unregistered. LLONG_MIN when the kernel does not count them.
 */
long long pinned_pages()
{
	(void)write_line("/proc/sys/vm/stat_refresh", "1");
	std::ifstream f("/proc/vmstat");
	std::string name;
	long long v = 0, acq = LLONG_MIN, rel = LLONG_MIN;
	while (f >> name >> v) {
		if (name == "nr_foll_pin_acquired")
			acq = v;
		else if (name == "nr_foll_pin_released")
			rel = v;
	}
	return acq == LLONG_MIN || rel == LLONG_MIN ? LLONG_MIN : acq - rel;
}

/*
 * pinned_pages() once it has held still for 300 ms, or after three seconds: the baseline a test
 * compares with at its end. Taken at once, it can count pins an earlier test is still
 * dropping: when an earlier test closed its last device, libkvblk's kvblk.ko ring went, and
 * io_uring unpins that ring's provided-buffer ring (2048 x 16 bytes: 8 pages) from its exit
 * work, after io_uring_queue_exit() returned. The test then found 8 pages fewer than "before"
 * (6.1 and 6.12, 2026-12-03).
 */
long long pins_quiet()
{
	long long v = pinned_pages();
	for (int i = 0, same = 0; i < 50 && same < 5; i++) {
		usleep(60000);
		const long long w = pinned_pages();
		same = w == v ? same + 1 : 0;
		v = w;
	}
	return v;
}

/* pinned_pages() once it is @want, or after two seconds (a buffer's last reference may drop late). */
long long pins_settled(long long want)
{
	long long v = pinned_pages();
	for (int i = 0; i < 100 && v != want; i++) {
		usleep(20000);
		v = pinned_pages();
	}
	return v;
}

/*
 * What the kmod_pass seam (@seams, to install) saw: per batch (ticket) the ranges of each
 * pass, and the most temporary registrations held at once; @pins0: pins_quiet() when made.
 */
struct PassLog {
	std::mutex mu;
	std::map<uint64_t, std::vector<uint32_t>> ranges;
	uint32_t max_held = 0;
	kvblk::testing::Seams seams;
	const long long pins0 = pins_quiet();

	PassLog()
	{
		seams.kmod_pass = [this](uint64_t batch, uint32_t pass, uint32_t n, uint32_t held) {
			std::lock_guard<std::mutex> g(mu);
			std::vector<uint32_t> &v = ranges[batch];
			EXPECT_EQ(pass, v.size()) << "passes of batch " << batch << " out of order";
			v.push_back(n);
			max_held = std::max(max_held, held);
		};
	}
};

/* Threads settle after a close (a joined thread leaves /proc/self/task at once; be lenient). */
uint32_t threads_settled(uint32_t want, const std::string &comm = "")
{
	uint32_t n = threads(comm);
	for (int i = 0; i < 100 && n != want; i++) {
		usleep(10000);
		n = threads(comm);
	}
	return n;
}

/*
 * One batch of @n objects in a registered buffer: object k at [at[k], at[k] + len[k]) of
 * the buffer, one canary LBA before the first and after every object.
 */
struct AsyncBatch {
	std::vector<kvblk_desc> descs;
	std::vector<kvblk_result> res;
	std::vector<uint64_t> at;
	uint64_t ticket = 0;
	uint64_t bytes = 0;
	uint64_t cmds = 0;
};

class KmodAsyncTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		REQUIRE_DEVICE();
		REQUIRE_KMOD();
		block_ = env("KVBLK_TEST_DEVICE");
		disk_ = block_.substr(block_.rfind('/') + 1);
		ref_ = std::make_unique<Reference>(block_);
		ASSERT_TRUE(module_features() & KVBLK_FEAT_URING_CMD)
			<< "this kvblk.ko does not take io_uring commands (KVBLK_FEAT_URING_CMD)";
		ASSERT_EQ(threads_settled(0, kRingThread), 0u) << "a kmod ring is left from an earlier test";
		/* Threads an earlier test joined may still be listed for a moment. */
		threads0_ = threads();
		for (int i = 0; i < 50; i++) {
			usleep(20000);
			const uint32_t again = threads();
			if (again == threads0_)
				break;
			threads0_ = again;
		}
	}

	DevPtr open_kmod()
	{
		DevPtr d = open_dev(block_, make_opts(KVBLK_BACKEND_KMOD));
		if (d) {
			const kvblk_dev_info i = get_info(d.get());
			EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_KMOD)) << i.backend_reason;
		}
		return d;
	}

	/*
	 * @nb batches of @per objects (sizes cycling through LBA multiples up to a few commands)
	 * at spread device offsets, laid out in one buffer of *total bytes.
	 */
	std::vector<AsyncBatch> make_batches(const kvblk_dev_info &info, uint32_t nb, uint32_t per, uint32_t buf,
					     uint64_t *total)
	{
		const uint64_t lbs = info.logical_block_size, mc = info.max_cmd_bytes;
		const uint64_t sizes[] = {lbs, 4096, 3 * lbs, 64 * KiB, mc + lbs, 8 * lbs, 2 * mc, 128 * KiB};
		std::vector<AsyncBatch> v(nb);
		uint64_t pos = lbs; /* the canary before the first object */
		uint64_t seq = 0;
		for (uint32_t b = 0; b < nb; b++) {
			for (uint32_t k = 0; k < per; k++, seq++) {
				const uint64_t len = sizes[seq % std::size(sizes)];
				uint64_t off = (seq * 7919 * lbs * 13) % (info.capacity - len);
				off -= off % lbs;
				v[b].descs.push_back(buf_desc(off, len, buf, pos, b * 1000 + k));
				v[b].at.push_back(pos);
				v[b].bytes += len;
				v[b].cmds += (len + mc - 1) / mc;
				pos += len + lbs; /* and its canary */
			}
			v[b].res.assign(per, kvblk_result{});
		}
		*total = pos;
		return v;
	}

	/* Every object of @b: exact, or (when @may_cancel) -ECANCELED and untouched; its canary intact. */
	void check_batch(const AsyncBatch &b, const AlignedBuf &mem, uint64_t lbs, bool may_cancel,
			 uint32_t *cancelled = nullptr)
	{
		for (size_t k = 0; k < b.descs.size(); k++) {
			const kvblk_desc &d = b.descs[k];
			const uint8_t *got = mem.data() + b.at[k];
			SCOPED_TRACE("object " + std::to_string(d.tag) + ": " + std::to_string(d.length) + " bytes at " +
				     std::to_string(d.offset));
			EXPECT_EQ(b.res[k].tag, d.tag);
			if (may_cancel && b.res[k].status == -ECANCELED) {
				EXPECT_EQ(b.res[k].bytes, 0u);
				EXPECT_TRUE(mem.all(b.at[k], d.length, 0xA5)) << "a cancelled object was written";
				if (cancelled)
					(*cancelled)++;
			} else {
				EXPECT_EQ(b.res[k].status, 0);
				EXPECT_EQ(b.res[k].bytes, d.length);
				EXPECT_TRUE(ref_->same(got, d.offset, d.length));
				EXPECT_TRUE(pattern_ok(got, d.offset, d.length));
			}
			EXPECT_TRUE(mem.all(b.at[k] + d.length, lbs, 0xA5)) << "the canary after the object was written";
		}
	}

	/*
	 * A batch of @n plain-pointer objects of one LBA each, object k in page @page0 + 2k of
	 * @mem (a page between: @n page ranges that do not merge), at spread device offsets.
	 */
	AsyncBatch sparse_batch(const kvblk_dev_info &info, const AlignedBuf &mem, uint64_t page0, uint32_t n,
				uint64_t tag0)
	{
		const uint64_t lbs = info.logical_block_size, pg = 4096;
		AsyncBatch b;
		for (uint32_t k = 0; k < n; k++) {
			const uint64_t at = (page0 + 2 * k) * pg + (k * lbs) % pg;
			uint64_t off = ((tag0 + k) * 7919 * lbs * 13) % (info.capacity - lbs);
			off -= off % lbs;
			b.descs.push_back(plain_desc(off, lbs, mem.data() + at, tag0 + k));
			b.at.push_back(at);
			b.bytes += lbs;
			b.cmds++;
		}
		b.res.assign(n, kvblk_result{});
		return b;
	}

	/*
	 * Each object of sparse batch @b: exact, or -ECANCELED and untouched when @cancelled(k)
	 * says so; the rest of its page and the page after it untouched.
	 */
	template <typename F>
	void check_sparse(const AsyncBatch &b, const AlignedBuf &mem, F cancelled)
	{
		const uint64_t pg = 4096;
		for (size_t k = 0; k < b.descs.size(); k++) {
			const kvblk_desc &d = b.descs[k];
			const uint64_t at = b.at[k], page = at - at % pg;
			SCOPED_TRACE("object " + std::to_string(d.tag) + " at " + std::to_string(d.offset));
			ASSERT_EQ(b.res[k].tag, d.tag);
			if (cancelled(k)) {
				ASSERT_EQ(b.res[k].status, -ECANCELED);
				ASSERT_EQ(b.res[k].bytes, 0u);
				ASSERT_TRUE(mem.all(at, d.length, 0xA5)) << "a cancelled object was written";
			} else {
				ASSERT_EQ(b.res[k].status, 0);
				ASSERT_EQ(b.res[k].bytes, d.length);
				ASSERT_TRUE(ref_->same(mem.data() + at, d.offset, d.length));
				ASSERT_TRUE(pattern_ok(mem.data() + at, d.offset, d.length));
			}
			ASSERT_TRUE(mem.all(page, at - page, 0xA5) && mem.all(at + d.length, page + 2 * pg - at - d.length, 0xA5))
				<< "written outside the object";
		}
	}

	static int submit(kvblk_dev *dev, AsyncBatch &b, uint64_t user_data, uint32_t flags = 0)
	{
		kvblk_submit_opts o;
		kvblk_submit_opts_init(&o, sizeof(o));
		o.flags = flags;
		o.user_data = user_data;
		o.results = b.res.data();
		return kvblk_submit(dev, b.descs.data(), uint32_t(b.descs.size()), &o, &b.ticket);
	}

	std::string block_, disk_;
	std::unique_ptr<Reference> ref_;
	uint32_t threads0_ = 0;
};

/*
 * 16 batches in flight at once on registered memory: no thread per device (the process gains
 * exactly the ring thread), every object exact, entries and stats equal what was done.
 */
TEST_F(KmodAsyncTest, sixteen_batches_in_flight_reaped_and_waited)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	EXPECT_EQ(info.async, uint32_t(KVBLK_ASYNC_NATIVE));
	EXPECT_NE(std::string(info.backend_reason).find("batches through io_uring"), std::string::npos)
		<< info.backend_reason;
	EXPECT_EQ(threads(kRingThread), 1u);
	EXPECT_EQ(threads(), threads0_ + 1) << "a kmod device adds the ring thread only";

	const uint64_t lbs = info.logical_block_size;
	const uint32_t nb = 16, per = 8;
	uint64_t total = 0;
	std::vector<AsyncBatch> bs = make_batches(info, nb, per, 0, &total);
	AlignedBuf mem(total);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, mem.data(), total, &id), 0) << kvblk_last_error();
	for (AsyncBatch &b : bs)
		for (kvblk_desc &d : b.descs)
			d.buf_id = id;
	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);

	for (uint32_t b = 0; b < nb; b++)
		ASSERT_EQ(submit(dev.get(), bs[b], 100 + b, b % 4 == 0 ? KVBLK_SUBMIT_PER_OBJECT : 0), 0)
			<< kvblk_last_error();
	EXPECT_EQ(threads(), threads0_ + 1) << "batches in flight started a thread:" << thread_list();
	{
		/* A synchronous call meanwhile (one ioctl on this thread), into the same buffer's end. */
		AlignedBuf tail(4 * lbs);
		kvblk_desc d = plain_desc(info.capacity - 2 * lbs, 2 * lbs, tail.data() + lbs, 7);
		kvblk_result r{};
		ASSERT_EQ(kvblk_load_many(dev.get(), &d, 1, &r, nullptr), 1) << kvblk_last_error();
		EXPECT_TRUE(ref_->same(tail.data() + lbs, d.offset, d.length));
		EXPECT_TRUE(tail.all(0, lbs, 0xA5) && tail.all(3 * lbs, lbs, 0xA5));
		EXPECT_EQ(threads(), threads0_ + 1) << "a synchronous call started a thread:" << thread_list();
	}

	/* The second half by kvblk_wait() (claimed: the reapers never see them)... */
	for (uint32_t b = nb / 2; b < nb; b++) {
		kvblk_batch_info bi = new_batch_info();
		ASSERT_EQ(kvblk_wait(dev.get(), bs[b].ticket, 60'000'000'000LL, &bi), int(per)) << kvblk_last_error();
		EXPECT_EQ(bi.backend, uint32_t(KVBLK_BACKEND_KMOD));
		EXPECT_EQ(bi.bytes, bs[b].bytes);
		EXPECT_EQ(bi.commands, bs[b].cmds);
		EXPECT_EQ(bi.failed, 0u);
		EXPECT_EQ(bi.bad_index, -1);
	}
	/* ... the first half through the eventfd and kvblk_reap(). */
	const int efd = kvblk_event_fd(dev.get());
	ASSERT_GE(efd, 0);
	std::vector<bool> seen(nb, false);
	uint32_t batches_seen = 0, objects_seen = 0;
	while (batches_seen < nb / 2) {
		pollfd p{efd, POLLIN, 0};
		ASSERT_EQ(poll(&p, 1, 60000), 1) << "the eventfd did not become readable";
		kvblk_cqe cqes[16];
		const int got = kvblk_reap(dev.get(), cqes, 16, 0, 0);
		ASSERT_GT(got, 0) << "the eventfd was readable with nothing to reap";
		for (int i = 0; i < got; i++) {
			const kvblk_cqe &e = cqes[i];
			ASSERT_GE(e.user_data, 100u);
			const uint32_t b = uint32_t(e.user_data - 100);
			ASSERT_LT(b, nb / 2) << "an entry of a batch kvblk_wait() took";
			EXPECT_EQ(e.ticket, bs[b].ticket);
			EXPECT_EQ(e.backend, uint32_t(KVBLK_BACKEND_KMOD));
			if (e.flags & KVBLK_CQE_OBJECT) {
				EXPECT_EQ(b % 4, 0u);
				EXPECT_EQ(e.status, 0);
				EXPECT_EQ(e.bytes, bs[b].descs[e.index].length);
				EXPECT_EQ(e.tag, bs[b].descs[e.index].tag);
				objects_seen++;
				continue;
			}
			EXPECT_FALSE(seen[b]);
			seen[b] = true;
			batches_seen++;
			EXPECT_EQ(e.status, 0);
			EXPECT_EQ(e.failed, 0u);
			EXPECT_EQ(e.index, per);
			EXPECT_EQ(e.bytes, bs[b].bytes);
		}
	}
	EXPECT_EQ(objects_seen, 2 * per) << "per-object entries of batches 0 and 4";
	kvblk_cqe rest[1];
	EXPECT_EQ(kvblk_reap(dev.get(), rest, 1, 0, 0), 0) << "an entry too many";

	uint64_t want_bytes = 0, want_cmds = 0;
	for (const AsyncBatch &b : bs) {
		check_batch(b, mem, lbs, false);
		want_bytes += b.bytes;
		want_cmds += b.cmds;
	}
	EXPECT_TRUE(mem.all(0, lbs, 0xA5)) << "the canary before the first object was written";
	/* The 16 batches and the synchronous call (one object, one command). */
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.batches, nb + 1);
	EXPECT_EQ(st.objects, nb * per + 1);
	EXPECT_EQ(st.commands, want_cmds + 1);
	EXPECT_EQ(st.bytes_read, want_bytes + 2 * lbs);
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], nb + 1);
	EXPECT_EQ(st.outstanding_peak, nb + 1);
	EXPECT_EQ(st.rejected_batches + st.errors_io + st.errors_other + st.cancelled_objects, 0u);
	EXPECT_EQ(hist_sum(st.batch_lat_hist), nb + 1);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0) << kvblk_last_error();
	EXPECT_EQ(threads(), threads0_ + 1);
	dev.reset();
	EXPECT_EQ(threads_settled(0, kRingThread), 0u) << "the ring thread outlived the last kmod device";
	EXPECT_EQ(threads_settled(threads0_), threads0_);
}

/* Two devices (two kvblk.ko contexts) share the one ring; it ends with the last of them. */
TEST_F(KmodAsyncTest, devices_share_one_ring)
{
	DevPtr a = open_kmod(), b = open_kmod();
	ASSERT_TRUE(a && b);
	EXPECT_EQ(threads(kRingThread), 1u);
	EXPECT_EQ(threads(), threads0_ + 1);
	const kvblk_dev_info info = get_info(a.get());
	const uint64_t lbs = info.logical_block_size;
	uint64_t total = 0;
	std::vector<AsyncBatch> bs = make_batches(info, 8, 4, 0, &total);
	AlignedBuf mem(total);
	uint32_t ida = 0, idb = 0;
	ASSERT_EQ(kvblk_register_buffer(a.get(), KVBLK_MEM_HOST, mem.data(), total, &ida), 0) << kvblk_last_error();
	ASSERT_EQ(kvblk_register_buffer(b.get(), KVBLK_MEM_HOST, mem.data(), total, &idb), 0) << kvblk_last_error();
	for (size_t k = 0; k < bs.size(); k++) {
		for (kvblk_desc &d : bs[k].descs)
			d.buf_id = k % 2 ? idb : ida;
		ASSERT_EQ(submit(k % 2 ? b.get() : a.get(), bs[k], k), 0) << kvblk_last_error();
	}
	for (size_t k = 0; k < bs.size(); k++)
		ASSERT_EQ(kvblk_wait(k % 2 ? b.get() : a.get(), bs[k].ticket, -1, nullptr), 4) << kvblk_last_error();
	for (const AsyncBatch &x : bs)
		check_batch(x, mem, lbs, false);
	EXPECT_EQ(get_stats(a.get()).batches, 4u);
	EXPECT_EQ(get_stats(b.get()).batches, 4u);
	EXPECT_EQ(kvblk_unregister_buffer(a.get(), ida), 0);
	EXPECT_EQ(kvblk_unregister_buffer(b.get(), idb), 0);
	a.reset();
	EXPECT_EQ(threads(kRingThread), 1u) << "the ring ended while a kmod device was open";
	b.reset();
	EXPECT_EQ(threads_settled(0, kRingThread), 0u);
}

/* A rejected descriptor fails kvblk_submit() before anything is queued or read. */
TEST_F(KmodAsyncTest, rejected_descriptor_submits_nothing)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	AlignedBuf mem(8 * lbs);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, mem.data(), mem.size(), &id), 0);
	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
	AsyncBatch b;
	b.descs = {buf_desc(0, lbs, id, 0, 1), buf_desc(info.capacity - lbs, 2 * lbs, id, lbs, 2),
		   buf_desc(lbs, lbs, id, 4 * lbs, 3)};
	b.res.assign(3, kvblk_result{});
	kvblk_submit_opts o;
	kvblk_submit_opts_init(&o, sizeof(o));
	o.results = b.res.data();
	uint64_t ticket = 777;
	EXPECT_EQ(kvblk_submit(dev.get(), b.descs.data(), 3, &o, &ticket), -ERANGE);
	EXPECT_EQ(o.bad_index, 1);
	EXPECT_EQ(ticket, 777u) << "a rejected submit gave a ticket";
	EXPECT_EQ(b.res[0].status, -ECANCELED);
	EXPECT_EQ(b.res[1].status, -ERANGE);
	EXPECT_EQ(b.res[2].status, -ECANCELED);
	/* A buffer id that is not registered. */
	b.descs[1] = buf_desc(0, lbs, id + 5, 0, 2);
	EXPECT_EQ(kvblk_submit(dev.get(), b.descs.data(), 3, &o, &ticket), -ENOENT);
	EXPECT_EQ(o.bad_index, 1);
	kvblk_cqe e[1];
	EXPECT_EQ(kvblk_reap(dev.get(), e, 1, 0, 0), 0) << "a rejected submit posted an entry";
	EXPECT_TRUE(mem.all(0, mem.size(), 0xA5)) << "a rejected submit read something";
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.rejected_batches, 2u);
	EXPECT_EQ(st.batches, 0u);
	EXPECT_EQ(st.commands, 0u);
	/* The device still loads. */
	b.descs = {buf_desc(lbs, lbs, id, 2 * lbs, 9)};
	b.res.assign(1, kvblk_result{});
	ASSERT_EQ(submit(dev.get(), b, 9), 0) << kvblk_last_error();
	ASSERT_EQ(kvblk_wait(dev.get(), b.ticket, -1, nullptr), 1);
	EXPECT_TRUE(ref_->same(mem.data() + 2 * lbs, lbs, lbs));
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
}

/*
 * kvblk_cancel(): batches the ring has not handed to the kernel end -ECANCELED, untouched
 * (a test seam holds the ring's queue while they are submitted and cancelled); the others
 * are exact; entries and stats count exactly that.
 */
TEST_F(KmodAsyncTest, cancel_ends_what_is_not_issued)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	const uint32_t nb = 9, per = 12;
	uint64_t total = 0;
	std::vector<AsyncBatch> bs = make_batches(info, nb, per, 0, &total);
	AlignedBuf mem(total);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, mem.data(), total, &id), 0) << kvblk_last_error();
	for (AsyncBatch &b : bs)
		for (kvblk_desc &d : b.descs)
			d.buf_id = id;
	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
	std::atomic<bool> hold{true};
	kvblk::testing::Seams s;
	s.kmod_ring_hold = &hold;
	{
		SeamGuard g(s);
		for (uint32_t b = 0; b + 1 < nb; b++)
			ASSERT_EQ(submit(dev.get(), bs[b], b), 0) << kvblk_last_error();
		for (uint32_t b = 1; b + 1 < nb; b += 2)
			EXPECT_EQ(kvblk_cancel(dev.get(), bs[b].ticket), 0) << kvblk_last_error();
		hold = false;
		/* One more wakes the ring: it takes the queue, the cancelled ones end there. */
		ASSERT_EQ(submit(dev.get(), bs[nb - 1], nb - 1), 0) << kvblk_last_error();
		for (uint32_t b = 0; b < nb; b++) {
			SCOPED_TRACE("batch " + std::to_string(b));
			kvblk_batch_info bi = new_batch_info();
			const bool cancelled = b % 2 == 1 && b + 1 < nb;
			EXPECT_EQ(kvblk_wait(dev.get(), bs[b].ticket, 60'000'000'000LL, &bi), cancelled ? 0 : int(per))
				<< kvblk_last_error();
			EXPECT_EQ(bi.failed, cancelled ? per : 0u);
			uint32_t c = 0;
			check_batch(bs[b], mem, lbs, cancelled, &c);
			EXPECT_EQ(c, cancelled ? per : 0u);
		}
	}
	EXPECT_EQ(kvblk_cancel(dev.get(), bs[0].ticket), -ENOENT);
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.cancelled_objects, (nb / 2) * per);
	EXPECT_EQ(st.errors_other, (nb / 2) * per);
	EXPECT_EQ(st.objects, nb * per);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
}

/*
 * kvblk_close() with 16 batches in flight waits for them: afterwards no ring thread, no
 * kvblk.ko reference and no command in flight is left.
 */
TEST_F(KmodAsyncTest, close_with_batches_in_flight_leaves_nothing)
{
	const std::string refcnt = "/sys/module/kvblk/refcnt";
	const std::string ref0 = read_line(refcnt);
	ASSERT_FALSE(ref0.empty());
	const kvblk_dev_info info = [&] {
		DevPtr d = open_kmod();
		return d ? get_info(d.get()) : kvblk_dev_info{};
	}();
	ASSERT_GT(info.capacity, 0u);
	ASSERT_EQ(threads_settled(0, kRingThread), 0u);
	uint64_t total = 0;
	std::vector<AsyncBatch> bs = make_batches(info, 16, 16, 0, &total);
	AlignedBuf mem(total); /* outlives the device */
	{
		DevPtr dev = open_kmod();
		ASSERT_TRUE(dev);
		uint32_t id = 0;
		ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, mem.data(), total, &id), 0)
			<< kvblk_last_error();
		for (AsyncBatch &b : bs) {
			for (kvblk_desc &d : b.descs)
				d.buf_id = id;
			ASSERT_EQ(submit(dev.get(), b, 0), 0) << kvblk_last_error();
		}
		EXPECT_NE(read_line(refcnt), ref0);
		/* dev closes here, every batch outstanding */
	}
	/* Each object ended: exact, or cancelled before it reached the kernel (untouched). */
	uint32_t cancelled = 0;
	for (const AsyncBatch &b : bs)
		check_batch(b, mem, info.logical_block_size, true, &cancelled);
	EXPECT_EQ(threads_settled(0, kRingThread), 0u);
	EXPECT_EQ(threads_settled(threads0_), threads0_);
	EXPECT_EQ(read_line(refcnt), ref0) << "kvblk.ko references left after kvblk_close()";
	const std::string live = "/sys/kernel/kvblk/" + disk_ + "/stats/inflight";
	if (access(live.c_str(), F_OK) == 0) {
		EXPECT_EQ(read_line(live), "0");
	}
}

/*
 * A batch larger than the module's max_descs (several io_uring commands), and max_descs
 * lowered after open (the command says -E2BIG: sent again in halves).
 */
TEST_F(KmodAsyncTest, more_descriptors_than_max_descs)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	const std::string knob = "/sys/kernel/kvblk/" + disk_ + "/max_descs";
	const std::string old = read_line(knob);
	ASSERT_FALSE(old.empty()) << knob;
	for (uint32_t n : {5000u, 1000u}) {
		SCOPED_TRACE(std::to_string(n) + " descriptors");
		if (n == 1000) { /* lowered since open: the first call says -E2BIG */
			ASSERT_TRUE(write_line(knob, "100")) << knob;
		}
		AlignedBuf mem((n + 1) * lbs);
		uint32_t id = 0;
		ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, mem.data(), mem.size(), &id), 0);
		std::vector<kvblk_desc> d;
		for (uint32_t i = 0; i < n; i++) {
			const uint64_t off = (uint64_t(i) * 5 * lbs) % (info.capacity - lbs);
			d.push_back(buf_desc(off - off % lbs, lbs, id, i * lbs, i));
		}
		std::vector<kvblk_result> r(n);
		kvblk_submit_opts o;
		kvblk_submit_opts_init(&o, sizeof(o));
		o.results = r.data();
		uint64_t t = 0;
		ASSERT_EQ(kvblk_submit(dev.get(), d.data(), n, &o, &t), 0) << kvblk_last_error();
		kvblk_batch_info bi = new_batch_info();
		ASSERT_EQ(kvblk_wait(dev.get(), t, -1, &bi), int(n)) << kvblk_last_error();
		for (uint32_t i = 0; i < n; i++) {
			ASSERT_EQ(r[i].status, 0) << i;
			ASSERT_TRUE(ref_->same(mem.data() + i * lbs, d[i].offset, lbs)) << i;
		}
		EXPECT_TRUE(mem.all(n * lbs, lbs, 0xA5));
		EXPECT_EQ(bi.commands, n);
		EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
	}
	EXPECT_TRUE(write_line(knob, old));
	EXPECT_EQ(threads(), threads0_ + 1) << "registered loads started a dispatch thread";
}

/*
 * Plain pointers go through the ring too (their ranges registered around the calls): no
 * dispatch thread, one pass per batch (the seam sees each), exact, nothing left pinned.
 */
TEST_F(KmodAsyncTest, plain_pointers_go_through_the_ring)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	uint64_t total = 0;
	std::vector<AsyncBatch> bs = make_batches(info, 4, 6, 0, &total);
	AlignedBuf mem(total);
	EXPECT_EQ(threads(), threads0_ + 1);
	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
	PassLog log;
	ASSERT_NE(log.pins0, LLONG_MIN) << "no nr_foll_pin_* in /proc/vmstat";
	{
		SeamGuard g(log.seams);
		for (AsyncBatch &b : bs) {
			for (size_t k = 0; k < b.descs.size(); k++)
				b.descs[k] = plain_desc(b.descs[k].offset, b.descs[k].length, mem.data() + b.at[k],
							b.descs[k].tag);
			ASSERT_EQ(submit(dev.get(), b, 0), 0) << kvblk_last_error();
		}
		for (AsyncBatch &b : bs)
			ASSERT_EQ(kvblk_wait(dev.get(), b.ticket, -1, nullptr), 6) << kvblk_last_error();
	}
	for (const AsyncBatch &b : bs) {
		check_batch(b, mem, lbs, false);
		/* One pass of at most 6 ranges (objects in adjacent pages share one). */
		ASSERT_EQ(log.ranges.count(b.ticket), 1u) << "batch " << b.ticket << " did not go through the ring";
		ASSERT_EQ(log.ranges[b.ticket].size(), 1u);
		EXPECT_GE(log.ranges[b.ticket][0], 1u);
		EXPECT_LE(log.ranges[b.ticket][0], 6u);
	}
	EXPECT_EQ(threads(), threads0_ + 1) << "plain pointers started a dispatch thread";
	EXPECT_EQ(get_info(dev.get()).async, uint32_t(KVBLK_ASYNC_NATIVE));
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.batches_by_backend[KVBLK_BACKEND_KMOD], 4u);
	EXPECT_EQ(st.errors_io + st.errors_other, 0u);
	EXPECT_EQ(pins_settled(log.pins0), log.pins0) << "temporary registrations left pinned";
}

/*
 * One batch of 600 plain ranges that do not merge (and objects in a registered buffer):
 * passes of 256, 256 and 88 ranges, the later ones registered and queued from the ring
 * thread; every object exact, nothing written around them, nothing left pinned.
 */
TEST_F(KmodAsyncTest, plain_pointers_in_several_passes)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	const uint32_t n = 600;
	AlignedBuf mem(2 * n * 4096), reg(16 * lbs);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0)
		<< kvblk_last_error();
	AsyncBatch b = sparse_batch(info, mem, 0, n, 1000);
	const uint32_t nreg = 8;
	for (uint32_t k = 0; k < nreg; k++) {
		b.descs.push_back(buf_desc(((k + 3) * 4099 * lbs) % (info.capacity - lbs) / lbs * lbs, lbs, id,
					   2 * k * lbs, 5000 + k));
		b.res.push_back(kvblk_result{});
	}
	PassLog log;
	ASSERT_NE(log.pins0, LLONG_MIN) << "no nr_foll_pin_* in /proc/vmstat";
	{
		SeamGuard g(log.seams);
		ASSERT_EQ(submit(dev.get(), b, 1), 0) << kvblk_last_error();
		kvblk_batch_info bi = new_batch_info();
		ASSERT_EQ(kvblk_wait(dev.get(), b.ticket, 60'000'000'000LL, &bi), int(n + nreg)) << kvblk_last_error();
		EXPECT_EQ(bi.failed, 0u);
		EXPECT_EQ(bi.commands, uint64_t(n + nreg));
	}
	EXPECT_EQ(log.ranges[b.ticket], (std::vector<uint32_t>{256, 256, 88}));
	AsyncBatch plain = b;
	plain.descs.resize(n);
	plain.res.resize(n);
	check_sparse(plain, mem, [](size_t) { return false; });
	for (uint32_t k = 0; k < nreg; k++) {
		const kvblk_desc &d = b.descs[n + k];
		EXPECT_EQ(b.res[n + k].status, 0);
		EXPECT_TRUE(ref_->same(reg.data() + d.addr, d.offset, lbs)) << k;
		EXPECT_TRUE(reg.all(d.addr + lbs, lbs, 0xA5)) << k;
	}
	EXPECT_EQ(threads(), threads0_ + 1) << "a dispatch thread was started";
	EXPECT_EQ(pins_settled(log.pins0), log.pins0) << "temporary registrations left pinned";
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
}

/*
 * KVBLK_SUBMIT_PER_OBJECT: with kvblk.ko's per-object CQEs (KVBLK_FEAT_URING_PER_OBJECT, 7.2) an
 * object's entry comes when its own descriptors completed, not when its batch ends. One batch
 * of 8 objects in a registered buffer and 300 plain ranges runs in two passes (264 objects,
 * then 44); the kmod_pass seam holds the second pass until the test has reaped, so the batch
 * cannot end meanwhile. Reaped then: exactly the first pass's 264 object entries, each
 * object's bytes exact and its results entry equal to its entry when it is reaped. A module
 * without the feature (6.1, 6.12): no entry before the batch ends. Then the rest: the second
 * pass's entries and the batch entry last, every object's entry exactly once.
 */
TEST_F(KmodAsyncTest, per_object_entries_come_as_objects_complete)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const bool live = module_features() & KVBLK_FEAT_URING_PER_OBJECT;
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size;
	const uint32_t n = 300, nreg = 8, first = 256 + nreg;
	AlignedBuf mem(2 * n * 4096), reg(2 * nreg * lbs);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, reg.data(), reg.size(), &id), 0)
		<< kvblk_last_error();
	AsyncBatch b = sparse_batch(info, mem, 0, n, 1000);
	for (uint32_t k = 0; k < nreg; k++) {
		b.descs.push_back(buf_desc(((k + 5) * 4111 * lbs) % (info.capacity - lbs) / lbs * lbs, lbs, id,
					   2 * k * lbs, 7000 + k));
		b.res.push_back(kvblk_result{});
	}
	/* Whether object @i is loaded, canaries aside (check_sparse() checks those at the end). */
	auto exact = [&](uint32_t i) {
		const kvblk_desc &d = b.descs[i];
		const uint8_t *p = i < n ? mem.data() + b.at[i] : reg.data() + d.addr;
		return ref_->same(p, d.offset, d.length) && pattern_ok(p, d.offset, d.length);
	};

	std::mutex mu;
	std::condition_variable cv;
	bool held = false, released = false;
	PassLog log;
	ASSERT_NE(log.pins0, LLONG_MIN) << "no nr_foll_pin_* in /proc/vmstat";
	kvblk::testing::Seams seams = log.seams;
	seams.kmod_pass = [&](uint64_t batch, uint32_t pass, uint32_t r, uint32_t h) {
		log.seams.kmod_pass(batch, pass, r, h);
		if (pass != 1)
			return;
		std::unique_lock<std::mutex> g(mu); /* on the ring thread: the batch waits here */
		held = true;
		cv.notify_all();
		cv.wait_for(g, std::chrono::seconds(120), [&] { return released; });
	};
	SeamGuard sg(seams);
	/* Let the second pass go and close (waits for the batch) before the seam goes, on any exit. */
	struct Release {
		std::mutex &mu;
		std::condition_variable &cv;
		bool &released;
		DevPtr &dev;
		void go()
		{
			std::lock_guard<std::mutex> g(mu);
			released = true;
			cv.notify_all();
		}
		~Release()
		{
			go();
			dev.reset();
		}
	} release{mu, cv, released, dev};

	ASSERT_EQ(submit(dev.get(), b, 7, KVBLK_SUBMIT_PER_OBJECT), 0) << kvblk_last_error();
	{
		std::unique_lock<std::mutex> g(mu);
		ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(120), [&] { return held; }))
			<< "the second pass never started";
	}
	/* The first pass ended: its records (which come before its calls' final CQEs) were all seen. */
	std::vector<uint32_t> seen(n + nreg, 0);
	std::vector<kvblk_cqe> cq(2 * (n + nreg));
	const int early = kvblk_reap(dev.get(), cq.data(), uint32_t(cq.size()), 0, 0);
	ASSERT_GE(early, 0) << kvblk_last_error();
	for (int e = 0; e < early; e++) {
		const kvblk_cqe &c = cq[e];
		ASSERT_EQ(c.flags, uint32_t(KVBLK_CQE_OBJECT)) << "entry " << e << " before the batch ended";
		ASSERT_EQ(c.ticket, b.ticket);
		EXPECT_EQ(c.user_data, 7u);
		ASSERT_LT(c.index, n + nreg);
		const uint32_t i = c.index;
		EXPECT_EQ(seen[i]++, 0u) << "object " << i << " has two entries";
		EXPECT_TRUE(i < 256 || i >= n) << "object " << i << " of the held pass has an entry";
		EXPECT_EQ(c.status, 0) << i;
		EXPECT_EQ(c.failed, 0u) << i;
		EXPECT_EQ(c.bytes, b.descs[i].length) << i;
		EXPECT_EQ(c.tag, b.descs[i].tag) << i;
		EXPECT_EQ(b.res[i].status, c.status) << "results entry of " << i << " not written with its entry";
		EXPECT_EQ(b.res[i].bytes, c.bytes) << i;
		EXPECT_TRUE(exact(i)) << "object " << i << " not loaded when its entry came";
	}
	EXPECT_EQ(uint32_t(early), live ? first : 0u)
		<< (live ? "kvblk.ko has KVBLK_FEAT_URING_PER_OBJECT: the first pass's objects should have "
			   "their entries"
			 : "without KVBLK_FEAT_URING_PER_OBJECT entries come when the batch ends");

	release.go();
	uint32_t late = 0;
	bool ended = false;
	while (!ended) {
		const int got = kvblk_reap(dev.get(), cq.data(), uint32_t(cq.size()), 1, 60'000'000'000LL);
		ASSERT_GT(got, 0) << "the batch did not end: " << kvblk_last_error();
		for (int e = 0; e < got; e++) {
			const kvblk_cqe &c = cq[e];
			ASSERT_FALSE(ended) << "an entry after the batch entry";
			ASSERT_EQ(c.ticket, b.ticket);
			if (c.flags == KVBLK_CQE_BATCH) {
				EXPECT_EQ(c.status, 0);
				EXPECT_EQ(c.failed, 0u);
				EXPECT_EQ(c.index, n + nreg);
				EXPECT_EQ(c.bytes, uint64_t(n + nreg) * lbs);
				ended = true;
				continue;
			}
			ASSERT_EQ(c.flags, uint32_t(KVBLK_CQE_OBJECT));
			ASSERT_LT(c.index, n + nreg);
			EXPECT_EQ(seen[c.index]++, 0u) << "object " << c.index << " has two entries";
			EXPECT_EQ(c.status, 0) << c.index;
			EXPECT_EQ(c.tag, b.descs[c.index].tag) << c.index;
			late++;
		}
	}
	EXPECT_EQ(late, n + nreg - uint32_t(early));
	for (uint32_t i = 0; i < n + nreg; i++)
		ASSERT_EQ(seen[i], 1u) << "object " << i;
	EXPECT_EQ(log.ranges[b.ticket], (std::vector<uint32_t>{256, 44}));
	AsyncBatch plain = b;
	plain.descs.resize(n);
	plain.res.resize(n);
	check_sparse(plain, mem, [](size_t) { return false; });
	for (uint32_t k = 0; k < nreg; k++) {
		EXPECT_TRUE(exact(n + k)) << k;
		EXPECT_TRUE(reg.all(b.descs[n + k].addr + lbs, lbs, 0xA5)) << k;
	}
	EXPECT_EQ(pins_settled(log.pins0), log.pins0) << "temporary registrations left pinned";
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
}

/*
 * Six batches of 300 ranges each in flight at once: passes of 256 ranges each would take
 * 1536 of the context's 1024 registrations (KVBLK_MAX_BUFS). The backend's budget holds
 * them to 512 at once: with the ring held, the first two batches' first passes take it all
 * and the other four wait (nothing registered for them); released, every batch runs, each
 * pass started by the end of another's, and every object is exact.
 */
TEST_F(KmodAsyncTest, plain_batches_beyond_the_registration_budget)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint32_t nb = 6, n = 300;
	AlignedBuf mem(uint64_t(nb) * 2 * n * 4096);
	std::vector<AsyncBatch> bs;
	for (uint32_t i = 0; i < nb; i++)
		bs.push_back(sparse_batch(info, mem, uint64_t(i) * 2 * n, n, 10000 * (i + 1)));
	PassLog log;
	ASSERT_NE(log.pins0, LLONG_MIN) << "no nr_foll_pin_* in /proc/vmstat";
	std::atomic<bool> hold{true};
	log.seams.kmod_ring_hold = &hold;
	AlignedBuf small(2 * info.logical_block_size);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, small.data(), small.size(), &id), 0)
		<< kvblk_last_error();
	AsyncBatch wake;
	wake.descs = {buf_desc(0, info.logical_block_size, id, 0, 1)};
	wake.res.assign(1, kvblk_result{});
	{
		SeamGuard g(log.seams);
		for (uint32_t i = 0; i < nb; i++)
			ASSERT_EQ(submit(dev.get(), bs[i], i), 0) << kvblk_last_error();
		{
			std::lock_guard<std::mutex> lg(log.mu);
			EXPECT_EQ(log.ranges.size(), 2u) << "batches started beyond the budget";
			EXPECT_EQ(log.max_held, 512u);
		}
		hold = false;
		/* A batch in a registered buffer needs no slot: queued at once, it wakes the ring. */
		ASSERT_EQ(submit(dev.get(), wake, 99), 0) << kvblk_last_error();
		ASSERT_EQ(kvblk_wait(dev.get(), wake.ticket, 60'000'000'000LL, nullptr), 1) << kvblk_last_error();
		for (uint32_t i = 0; i < nb; i++)
			ASSERT_EQ(kvblk_wait(dev.get(), bs[i].ticket, 60'000'000'000LL, nullptr), int(n))
				<< "batch " << i << ": " << kvblk_last_error();
	}
	for (uint32_t i = 0; i < nb; i++) {
		SCOPED_TRACE("batch " + std::to_string(i));
		check_sparse(bs[i], mem, [](size_t) { return false; });
		const std::vector<uint32_t> &v = log.ranges[bs[i].ticket];
		uint32_t sum = 0;
		for (uint32_t r : v) {
			EXPECT_GE(r, 1u);
			EXPECT_LE(r, 256u);
			sum += r;
		}
		EXPECT_EQ(sum, n);
		EXPECT_GE(v.size(), 2u);
	}
	EXPECT_EQ(log.max_held, 512u) << "temporary registrations beyond the backend's budget";
	EXPECT_TRUE(ref_->same(small.data(), 0, info.logical_block_size));
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
	EXPECT_EQ(threads(), threads0_ + 1) << "a dispatch thread was started";
	EXPECT_EQ(pins_settled(log.pins0), log.pins0) << "registrations left pinned";
}

/*
 * kvblk_close() with plain batches beyond the budget outstanding (two with their first pass
 * queued on the ring, four waiting for slots): it ends, each object exact or -ECANCELED and
 * untouched, no ring thread and nothing pinned left.
 */
TEST_F(KmodAsyncTest, close_with_plain_batches_waiting_for_slots)
{
	const uint32_t nb = 6, n = 300;
	std::vector<AsyncBatch> bs;
	AlignedBuf mem(uint64_t(nb) * 2 * n * 4096); /* outlives the device */
	PassLog log;
	ASSERT_NE(log.pins0, LLONG_MIN) << "no nr_foll_pin_* in /proc/vmstat";
	std::atomic<bool> hold{true};
	log.seams.kmod_ring_hold = &hold;
	{
		DevPtr dev = open_kmod();
		ASSERT_TRUE(dev);
		const kvblk_dev_info info = get_info(dev.get());
		for (uint32_t i = 0; i < nb; i++)
			bs.push_back(sparse_batch(info, mem, uint64_t(i) * 2 * n, n, 20000 * (i + 1)));
		SeamGuard g(log.seams);
		for (uint32_t i = 0; i < nb; i++)
			ASSERT_EQ(submit(dev.get(), bs[i], i), 0) << kvblk_last_error();
		EXPECT_EQ(log.ranges.size(), 2u) << "batches started beyond the budget";
		hold = false; /* the ring takes its queue when woken: by the close's cancels */
		/* dev closes here, every batch outstanding */
	}
	for (uint32_t i = 0; i < nb; i++) {
		SCOPED_TRACE("batch " + std::to_string(i));
		const AsyncBatch &b = bs[i];
		check_sparse(b, mem, [&b](size_t k) { return b.res[k].status == -ECANCELED; });
	}
	EXPECT_EQ(threads_settled(0, kRingThread), 0u);
	EXPECT_EQ(pins_settled(log.pins0), log.pins0) << "registrations left after kvblk_close()";
}

/*
 * kvblk_cancel() of a batch of three passes while its second pass is queued, not issued
 * (the seam holds the ring as that pass is queued): the first pass's objects are exact,
 * the others -ECANCELED and untouched, and every temporary registration is gone.
 */
TEST_F(KmodAsyncTest, cancel_between_passes_ends_the_unsent_ones)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint32_t n = 600;
	AlignedBuf mem(2 * n * 4096);
	AsyncBatch b = sparse_batch(info, mem, 0, n, 1);
	ASSERT_EQ(kvblk_reset_stats(dev.get()), 0);
	std::atomic<bool> hold{false}, second{false};
	PassLog log;
	ASSERT_NE(log.pins0, LLONG_MIN) << "no nr_foll_pin_* in /proc/vmstat";
	kvblk::testing::Seams s = log.seams;
	s.kmod_ring_hold = &hold;
	s.kmod_pass = [&](uint64_t batch, uint32_t pass, uint32_t r, uint32_t held) {
		log.seams.kmod_pass(batch, pass, r, held);
		if (pass == 1) {
			hold = true; /* before its calls are queued: they stay there */
			second = true;
		}
	};
	{
		SeamGuard g(s);
		ASSERT_EQ(submit(dev.get(), b, 0), 0) << kvblk_last_error();
		for (int i = 0; i < 6000 && !second; i++)
			usleep(10000);
		ASSERT_TRUE(second) << "the second pass was never queued";
		EXPECT_GT(pinned_pages(), log.pins0) << "the second pass's ranges are not registered";
		EXPECT_EQ(kvblk_cancel(dev.get(), b.ticket), 0) << kvblk_last_error();
		hold = false;
		/* The ring looks at its queue when woken: kvblk_cancel() wakes it (the batch is still outstanding). */
		EXPECT_EQ(kvblk_cancel(dev.get(), b.ticket), 0) << kvblk_last_error();
		kvblk_batch_info bi = new_batch_info();
		EXPECT_EQ(kvblk_wait(dev.get(), b.ticket, 60'000'000'000LL, &bi), 256) << kvblk_last_error();
		EXPECT_EQ(bi.failed, n - 256);
	}
	EXPECT_EQ(log.ranges[b.ticket], (std::vector<uint32_t>{256, 256})) << "the third pass was started";
	/* Ranges are registered in address order: objects 0..255 are the first pass's. */
	check_sparse(b, mem, [](size_t k) { return k >= 256; });
	const kvblk_stats st = get_stats(dev.get());
	EXPECT_EQ(st.cancelled_objects, n - 256);
	EXPECT_EQ(st.errors_io, 0u);
	EXPECT_EQ(pins_settled(log.pins0), log.pins0) << "registrations left after the cancel";
}

/*
 * The context's KVBLK_MAX_BUFS (1024) registrations nearly all persistent: with 1021 buffers
 * registered, a plain batch of 5 page ranges registers 3, meets -ENOSPC and ends its pass
 * there; the next pass takes the other 2 (passes {3, 2}), every object exact. With all 1024
 * taken, each plain range fails alone as the first of its own pass (its object -ENOSPC; the
 * first pass counts one range, not three) while the batch's object in a registered buffer is
 * exact.
 */
TEST_F(KmodAsyncTest, registrations_running_out_make_passes_smaller)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size, pg = 4096;
	const uint32_t nmax = 1024;
	AlignedBuf held(uint64_t(nmax) * pg), mem(2 * 8 * pg);
	PassLog log;
	ASSERT_NE(log.pins0, LLONG_MIN) << "no nr_foll_pin_* in /proc/vmstat";
	std::vector<uint32_t> ids;
	for (uint32_t i = 0; i < nmax - 3; i++) {
		uint32_t id = 0;
		ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, held.data() + uint64_t(i) * pg, pg, &id), 0)
			<< i << ": " << kvblk_last_error();
		ids.push_back(id);
	}
	ASSERT_GE(pinned_pages(), log.pins0 + nmax - 3)
		<< "kvblk.ko did not take every persistent registration (each pins its page)";
	{
		SeamGuard g(log.seams);
		AsyncBatch b = sparse_batch(info, mem, 0, 5, 100);
		ASSERT_EQ(submit(dev.get(), b, 1), 0) << kvblk_last_error();
		ASSERT_EQ(kvblk_wait(dev.get(), b.ticket, 60'000'000'000LL, nullptr), 5) << kvblk_last_error();
		EXPECT_EQ(log.ranges[b.ticket], (std::vector<uint32_t>{3, 2}));
		check_sparse(b, mem, [](size_t) { return false; });
	}
	for (uint32_t i = nmax - 3; i < nmax; i++) {
		uint32_t id = 0;
		ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, held.data() + uint64_t(i) * pg, pg, &id), 0)
			<< i << ": " << kvblk_last_error();
		ids.push_back(id);
	}
	ASSERT_GE(pinned_pages(), log.pins0 + nmax);
	std::memset(mem.data(), 0xA5, mem.size());
	{
		SeamGuard g(log.seams);
		AsyncBatch b = sparse_batch(info, mem, 0, 3, 200);
		b.descs.push_back(buf_desc(7 * lbs, lbs, ids[0], 0, 999));
		b.res.push_back(kvblk_result{});
		std::memset(held.data(), 0xA5, pg);
		ASSERT_EQ(submit(dev.get(), b, 2), 0) << kvblk_last_error();
		kvblk_batch_info bi = new_batch_info();
		ASSERT_EQ(kvblk_wait(dev.get(), b.ticket, 60'000'000'000LL, &bi), 1) << kvblk_last_error();
		EXPECT_EQ(bi.failed, 3u);
		/* The seam sees passes that send something: the first (its range refused, the
		 * registered object sent); the two after it have nothing left to send. */
		EXPECT_EQ(log.ranges[b.ticket], (std::vector<uint32_t>{1}));
		for (uint32_t k = 0; k < 3; k++) {
			SCOPED_TRACE("plain object " + std::to_string(k));
			EXPECT_EQ(b.res[k].tag, 200 + k);
			EXPECT_EQ(b.res[k].status, -ENOSPC);
			EXPECT_EQ(b.res[k].bytes, 0u);
			EXPECT_TRUE(mem.all(0, mem.size(), 0xA5)) << "a refused object was written";
		}
		EXPECT_EQ(b.res[3].status, 0);
		EXPECT_TRUE(ref_->same(held.data(), 7 * lbs, lbs));
		EXPECT_TRUE(held.all(lbs, pg - lbs, 0xA5)) << "written past the object in a registered buffer";
	}
	for (uint32_t id : ids)
		EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
	EXPECT_EQ(pins_settled(log.pins0), log.pins0) << "registrations left pinned";
}

/*
 * A plain pointer into memory that is not mapped: kvblk.ko cannot pin its range, so that
 * object fails with -EFAULT and only it; the others of the batch are exact.
 */
TEST_F(KmodAsyncTest, unmapped_plain_pointer_fails_only_its_object)
{
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	const uint64_t lbs = info.logical_block_size, pg = 4096;
	uint8_t *m = static_cast<uint8_t *>(mmap(nullptr, 8 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	ASSERT_NE(m, MAP_FAILED);
	std::memset(m, 0xA5, 8 * pg);
	ASSERT_EQ(munmap(m + 4 * pg, pg), 0);
	const long long pins0 = pins_quiet();
	ASSERT_NE(pins0, LLONG_MIN) << "no nr_foll_pin_* in /proc/vmstat";
	AsyncBatch b;
	for (uint32_t k = 0; k < 4; k++) {
		const uint64_t off = (k + 1) * 977 * lbs % (info.capacity - lbs) / lbs * lbs;
		b.descs.push_back(plain_desc(off, lbs, m + 2 * k * pg, k));
	}
	b.res.assign(4, kvblk_result{});
	ASSERT_EQ(submit(dev.get(), b, 0), 0) << kvblk_last_error();
	kvblk_batch_info bi = new_batch_info();
	EXPECT_EQ(kvblk_wait(dev.get(), b.ticket, 60'000'000'000LL, &bi), 3) << kvblk_last_error();
	EXPECT_EQ(bi.failed, 1u);
	for (uint32_t k = 0; k < 4; k++) {
		SCOPED_TRACE("object " + std::to_string(k));
		if (k == 2) {
			EXPECT_EQ(b.res[k].status, -EFAULT);
			EXPECT_EQ(b.res[k].bytes, 0u);
			continue;
		}
		EXPECT_EQ(b.res[k].status, 0);
		EXPECT_TRUE(ref_->same(m + 2 * k * pg, b.descs[k].offset, lbs));
		EXPECT_TRUE(std::all_of(m + 2 * k * pg + lbs, m + (2 * k + 1) * pg, [](uint8_t c) { return c == 0xA5; }));
	}
	EXPECT_EQ(threads(), threads0_ + 1) << "a dispatch thread was started";
	EXPECT_EQ(pins_settled(pins0), pins0);
	munmap(m, 4 * pg);
	munmap(m + 5 * pg, 3 * pg);
}

/* A kvblk.ko without io_uring commands (the bit hidden): the dispatch thread, as before. */
TEST_F(KmodAsyncTest, without_the_feature_batches_use_the_dispatch_thread)
{
	kvblk::testing::Seams s;
	s.kmod_no_uring_cmd = true;
	SeamGuard g(s);
	DevPtr dev = open_kmod();
	ASSERT_TRUE(dev);
	const kvblk_dev_info info = get_info(dev.get());
	EXPECT_EQ(info.async, uint32_t(KVBLK_ASYNC_THREAD));
	EXPECT_NE(std::string(info.backend_reason).find("batches on a dispatch thread"), std::string::npos)
		<< info.backend_reason;
	EXPECT_EQ(threads(kRingThread), 0u);
	const uint64_t lbs = info.logical_block_size;
	uint64_t total = 0;
	std::vector<AsyncBatch> bs = make_batches(info, 6, 5, 0, &total);
	AlignedBuf mem(total);
	uint32_t id = 0;
	ASSERT_EQ(kvblk_register_buffer(dev.get(), KVBLK_MEM_HOST, mem.data(), total, &id), 0);
	for (AsyncBatch &b : bs) {
		for (kvblk_desc &d : b.descs)
			d.buf_id = id;
		ASSERT_EQ(submit(dev.get(), b, 0), 0) << kvblk_last_error();
	}
	for (AsyncBatch &b : bs)
		ASSERT_EQ(kvblk_wait(dev.get(), b.ticket, -1, nullptr), 5) << kvblk_last_error();
	for (const AsyncBatch &b : bs)
		check_batch(b, mem, lbs, false);
	EXPECT_EQ(threads(), threads0_ + 1) << "the dispatch thread only";
	EXPECT_EQ(get_stats(dev.get()).batches, 6u);
	EXPECT_EQ(kvblk_unregister_buffer(dev.get(), id), 0);
}

} // namespace

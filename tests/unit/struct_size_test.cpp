// SPDX-License-Identifier: MIT
// Growth of the sized structs (kvblk_open_opts, kvblk_dev_info, kvblk_batch_info,
// kvblk_stats): one table of sizes for all of them. An older caller's smaller size works and
// nothing beyond it is touched; a newer caller's larger size works when its unknown input
// bytes are 0 (outputs get them zeroed); a size of 0 or beyond 64 KiB is -EINVAL without a
// byte read or written (the struct sits right before a PROT_NONE page).
#include "test_util.hpp"

#include <functional>
#include <sys/mman.h>

using namespace kvblk_test;

namespace {

constexpr size_t kPage = 4096;
constexpr uint8_t kFill = 0x5A;

/* One or more pages followed by a PROT_NONE page: a struct placed at end() - n that is read or
 * written past its n bytes faults. */
class GuardedMem {
public:
	explicit GuardedMem(size_t bytes)
	{
		len_ = (bytes + kPage - 1) / kPage * kPage;
		void *p = mmap(nullptr, len_ + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			throw std::bad_alloc();
		base_ = static_cast<uint8_t *>(p);
		mprotect(base_ + len_, kPage, PROT_NONE);
	}
	~GuardedMem() { munmap(base_, len_ + kPage); }
	/* @n bytes ending at the guard page, filled with @fill. */
	uint8_t *tail(size_t n, uint8_t fill)
	{
		std::memset(base_, fill, len_);
		return base_ + len_ - n;
	}

private:
	uint8_t *base_;
	size_t len_;
};

/*
 * One struct: @current its size now, @oldest the smallest accepted, @input whether the
 * library reads it (options) or writes it (info, stats), @call runs the function on a
 * struct at @p whose size field says @size.
 */
struct SizedStruct {
	const char *name;
	size_t current;
	size_t oldest;
	bool input;
	std::function<int(void *p, size_t size)> call;
};

enum class Tail { none, zero, nonzero };

struct SizeCase {
	const char *name;
	int kind; /* 0: 0 bytes; 1: oldest; 2: current; 3: larger; 4: 2^40; 5: 64 KiB + 1 */
	Tail tail;
};

class StructSizeTest : public StoreTest {
protected:
	void SetUp() override
	{
		StoreTest::SetUp();
		dev_ = open_dev(path_, make_opts(KVBLK_BACKEND_PSYNC));
		ASSERT_TRUE(dev_);
	}

	std::vector<SizedStruct> structs()
	{
		kvblk_dev *dev = dev_.get();
		const std::string path = path_;
		uint8_t *dst = dst_.data();
		return {
			{"kvblk_open_opts", sizeof(kvblk_open_opts), KVBLK_OPEN_OPTS_SIZE_V0_2, true,
			 [path](void *p, size_t size) {
				 auto *o = static_cast<kvblk_open_opts *>(p);
				 o->opts_size = size;
				 o->backend = KVBLK_BACKEND_PSYNC;
				 kvblk_dev *d = nullptr;
				 const int rc = kvblk_open(path.c_str(), o, &d);
				 kvblk_close(d);
				 return rc;
			 }},
			{"kvblk_dev_info", sizeof(kvblk_dev_info), KVBLK_DEV_INFO_SIZE_V0_2, false,
			 [dev](void *p, size_t size) {
				 static_cast<kvblk_dev_info *>(p)->info_size = size;
				 return kvblk_get_info(dev, static_cast<kvblk_dev_info *>(p));
			 }},
			{"kvblk_dev_info (target)", sizeof(kvblk_dev_info), KVBLK_DEV_INFO_SIZE_V0_2, false,
			 [dev](void *p, size_t size) {
				 static_cast<kvblk_dev_info *>(p)->info_size = size;
				 return kvblk_get_target_info(dev, 0, static_cast<kvblk_dev_info *>(p));
			 }},
			{"kvblk_batch_info", sizeof(kvblk_batch_info), KVBLK_BATCH_INFO_SIZE_V0_2, false,
			 [dev, dst](void *p, size_t size) {
				 static_cast<kvblk_batch_info *>(p)->info_size = size;
				 const kvblk_desc d = plain_desc(0, 4096, dst, 1);
				 kvblk_result r{};
				 const int rc = kvblk_load_many(dev, &d, 1, &r, static_cast<kvblk_batch_info *>(p));
				 return rc == 1 ? 0 : rc;
			 }},
			{"kvblk_stats", sizeof(kvblk_stats), KVBLK_STATS_SIZE_V0_1, false,
			 [dev](void *p, size_t size) {
				 static_cast<kvblk_stats *>(p)->stats_size = size;
				 return kvblk_get_stats(dev, static_cast<kvblk_stats *>(p));
			 }},
		};
	}

	DevPtr dev_;
	AlignedBuf dst_{4096};
};

TEST_F(StructSizeTest, one_table_for_every_sized_struct)
{
	const SizeCase cases[] = {
		{"zero", 0, Tail::none},
		{"oldest", 1, Tail::none},
		{"current", 2, Tail::none},
		{"larger_zero_tail", 3, Tail::zero},
		{"larger_nonzero_tail", 3, Tail::nonzero},
		{"2^40", 4, Tail::none},
		{"64KiB+1", 5, Tail::none},
	};
	GuardedMem mem(2 * kPage);
	for (const SizedStruct &st : structs()) {
		for (const SizeCase &c : cases) {
			SCOPED_TRACE(std::string(st.name) + " " + c.name);
			const size_t size = c.kind == 0 ? 0 : c.kind == 1 ? st.oldest : c.kind == 2 ? st.current
					  : c.kind == 3 ? st.current + 64 : c.kind == 4 ? size_t(1) << 40 : (64 << 10) + 1;
			/* The struct's real bytes: what an accepted size says (the library may touch no
			 * more), else room for the fields the call itself sets, before the guard. */
			const size_t real = size >= st.oldest && size <= st.current + 64 ? size : st.current + 64;
			const uint8_t fill = st.input ? 0 : kFill;
			uint8_t *p = mem.tail(real, fill);
			if (c.tail == Tail::nonzero)
				p[st.current + 7] = 0x01;
			const int rc = st.call(p, size);

			const bool ok = c.kind == 1 || c.kind == 2 || (c.kind == 3 && (c.tail == Tail::zero || !st.input));
			EXPECT_EQ(rc, ok ? 0 : -EINVAL) << kvblk_last_error();
			if (st.input || !ok)
				continue;
			/* Outputs: the size field kept, the bytes known filled, the rest of a larger one zeroed. */
			size_t got;
			std::memcpy(&got, p, sizeof(got));
			EXPECT_EQ(got, size);
			bool written = false;
			for (size_t i = sizeof(size_t); i < std::min(size, st.current); i++)
				written |= p[i] != kFill;
			EXPECT_TRUE(written) << "nothing was reported";
			for (size_t i = st.current; i < size; i++)
				ASSERT_EQ(p[i], 0) << "byte " << i << " of a larger struct was not zeroed";
		}
	}
}

/* An older caller's struct: exactly its bytes are written, nothing after them. */
TEST_F(StructSizeTest, old_sizes_write_nothing_beyond_them)
{
	GuardedMem mem(2 * kPage);
	for (const SizedStruct &st : structs()) {
		if (st.input)
			continue;
		SCOPED_TRACE(st.name);
		uint8_t *p = mem.tail(st.current, kFill);
		ASSERT_EQ(st.call(p, st.oldest), 0);
		for (size_t i = st.oldest; i < st.current; i++)
			ASSERT_EQ(p[i], kFill) << "byte " << i << " beyond the old size was written";
	}
}

/* A 0.2 caller's kvblk_open_opts: the 0.3 fields take their defaults. */
TEST_F(StructSizeTest, old_open_opts_get_the_new_defaults)
{
	kvblk_open_opts o;
	kvblk_open_opts_init(&o, KVBLK_OPEN_OPTS_SIZE_V0_2);
	o.backend = KVBLK_BACKEND_PSYNC;
	o.max_batches = 0xDEAD; /* beyond the old size: must not be read */
	kvblk_dev *d = nullptr;
	ASSERT_EQ(kvblk_open(path_.c_str(), &o, &d), 0) << kvblk_last_error();
	DevPtr dev(d);
	EXPECT_EQ(get_info(d).max_batches, KVBLK_DEFAULT_MAX_BATCHES);
	EXPECT_EQ(get_info(d).targets, 1u);
}

} // namespace

// SPDX-License-Identifier: MIT
// The store pattern: known answers, fill/verify agreement, and a single
// flipped byte found exactly once wherever it is.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "store.hpp"

using namespace kvblk_bench;

TEST(Pattern, splitmix64_known_answers)
{
	// First outputs of the reference splitmix64 generator seeded with 0
	// (state advanced by the golden gamma before mixing).
	EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafULL);
	EXPECT_EQ(splitmix64(0x9e3779b97f4a7c15ULL), 0x6e789e6aa1b965f4ULL);
	EXPECT_EQ(pattern_word(0, 0), splitmix64(0));
	EXPECT_EQ(pattern_word(3, 4096), splitmix64((uint64_t(3) << 40) ^ 4096));
}

TEST(Pattern, fill_then_verify_is_clean)
{
	std::vector<unsigned char> buf(64 * 1024);
	for (uint64_t obj : {uint64_t(0), uint64_t(1), uint64_t(127), uint64_t(1) << 23}) {
		fill_pattern(buf.data(), obj, 0, buf.size());
		Mismatch m = verify_pattern(buf.data(), obj, 0, buf.size());
		EXPECT_EQ(m.bytes, 0u) << "object " << obj;
	}
}

TEST(Pattern, words_are_little_endian_pattern_words)
{
	unsigned char buf[16];
	fill_pattern(buf, 9, 8192, sizeof(buf));
	uint64_t w = pattern_word(9, 8192 + 8);
	for (int b = 0; b < 8; b++)
		EXPECT_EQ(buf[8 + b], uint8_t(w >> (8 * b)));
}

TEST(Pattern, slice_equals_window_of_whole_object)
{
	std::vector<unsigned char> whole(16384), part(4096);
	fill_pattern(whole.data(), 5, 0, whole.size());
	fill_pattern(part.data(), 5, 8192, part.size());
	EXPECT_EQ(std::memcmp(whole.data() + 8192, part.data(), part.size()), 0);
	EXPECT_EQ(verify_pattern(whole.data() + 8192, 5, 8192, 4096).bytes, 0u);
	// The same bytes at another offset or of another object do not verify.
	EXPECT_GT(verify_pattern(whole.data() + 8192, 5, 4096, 4096).bytes, 4000u);
	EXPECT_GT(verify_pattern(whole.data() + 8192, 6, 8192, 4096).bytes, 4000u);
}

TEST(Pattern, single_flipped_byte_is_counted_once_wherever_it_is)
{
	constexpr size_t kLen = 3 * 512 + 64; // several verifier chunks and a partial one
	std::vector<unsigned char> buf(kLen);
	for (size_t pos : {size_t(0), size_t(7), size_t(8), size_t(511), size_t(512), size_t(1000), kLen - 1}) {
		fill_pattern(buf.data(), 42, 65536, kLen);
		const uint8_t orig = buf[pos];
		buf[pos] ^= 0x10;
		Mismatch m = verify_pattern(buf.data(), 42, 65536, kLen);
		EXPECT_EQ(m.bytes, 1u) << "pos " << pos;
		EXPECT_EQ(m.first_offset, 65536 + pos) << "pos " << pos;
		EXPECT_EQ(m.expected, orig);
		EXPECT_EQ(m.actual, uint8_t(orig ^ 0x10));
	}
}

TEST(Pattern, several_flips_report_the_first_and_count_all)
{
	std::vector<unsigned char> buf(4096);
	fill_pattern(buf.data(), 1, 0, buf.size());
	buf[3000] ^= 1;
	buf[100] ^= 0xff;
	buf[101] ^= 0x01; // same word as 100
	Mismatch m = verify_pattern(buf.data(), 1, 0, buf.size());
	EXPECT_EQ(m.bytes, 3u);
	EXPECT_EQ(m.first_offset, 100u);
}

TEST(Pattern, zeroed_block_is_all_mismatch)
{
	std::vector<unsigned char> buf(4096, 0);
	Mismatch m = verify_pattern(buf.data(), 0, 0, buf.size());
	// A zero byte can match the pattern by chance (about 1 in 256).
	EXPECT_GT(m.bytes, 4000u);
	EXPECT_LE(m.bytes, 4096u);
}

/* SPDX-License-Identifier: MIT */
/*
 * kvblk test data pattern: the contents of every disk image the VM harness
 * (tests/vm) gives the guest's emulated NVMe namespace.
 *
 * Formula: the 8-byte little-endian word at every device byte offset o that
 * is a multiple of 8 holds
 *
 *	o ^ KVBLK_PATTERN_XOR        (KVBLK_PATTERN_XOR = 0x6b76626c6b000000)
 *
 * so byte b of the device is byte (b & 7) (little-endian) of
 * ((b & ~7) ^ KVBLK_PATTERN_XOR). Any byte range of the device can be
 * predicted from its offset alone: a test that reads N bytes at device
 * offset D into a buffer checks it with kvblk_pattern_check(buf, D, N).
 * The high bytes spell "kvblk" so that pattern data is easy to spot in a
 * hex dump, and every 8-byte word is unique on a device below 16 TiB, so a
 * read from the wrong LBA or into the wrong buffer offset never matches.
 *
 * Header-only, C99 and C++ compatible, no dependencies beyond libc.
 *
 * Copyright (c) 2025 the kvblk authors
 *
 * Permission is hereby granted, free of charge, to any person obtaining a copy
 * of this software and associated documentation files (the "Software"), to deal
 * in the Software without restriction, including without limitation the rights
 * to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 * copies of the Software, and to permit persons to whom the Software is
 * furnished to do so, subject to the following conditions:
 *
 * The above copyright notice and this permission notice shall be included in
 * all copies or substantial portions of the Software.
 *
 * THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 * IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 * FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 * AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 * LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
 * OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
 * THE SOFTWARE.
 */
#ifndef KVBLK_TESTS_VM_PATTERN_H
#define KVBLK_TESTS_VM_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KVBLK_PATTERN_XOR 0x6b76626c6b000000ULL

/* The 8-byte word at device byte offset @off (@off must be a multiple of 8). */
static inline uint64_t kvblk_pattern_word(uint64_t off)
{
	return off ^ KVBLK_PATTERN_XOR;
}

/* The byte at device byte offset @off (any offset). */
static inline uint8_t kvblk_pattern_byte(uint64_t off)
{
	return (uint8_t)(kvblk_pattern_word(off & ~7ULL) >> (8 * (off & 7)));
}

/* Stores @word at @p as 8 little-endian bytes, whatever the host's byte order. */
static inline void kvblk_pattern_store_le64(unsigned char *p, uint64_t word)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(p, &word, 8);
#else
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(word >> (8 * i));
#endif
}

/*
 * Fills @len bytes at @buf with the pattern of the device range that starts at
 * byte offset @dev_off. Any @dev_off and @len (no alignment needed).
 */
static inline void kvblk_pattern_fill(void *buf, uint64_t dev_off, size_t len)
{
	unsigned char *p = (unsigned char *)buf;
	size_t i = 0;

	for (; i < len && ((dev_off + i) & 7); i++)
		p[i] = kvblk_pattern_byte(dev_off + i);
	for (; i + 8 <= len; i += 8)
		kvblk_pattern_store_le64(p + i, kvblk_pattern_word(dev_off + i));
	for (; i < len; i++)
		p[i] = kvblk_pattern_byte(dev_off + i);
}

/*
 * Checks that @len bytes at @buf equal the pattern of the device range that
 * starts at byte offset @dev_off. Any @dev_off and @len.
 * Returns -1 when every byte matches, else the index in @buf (0-based) of the
 * first byte that differs.
 */
static inline ptrdiff_t kvblk_pattern_check(const void *buf, uint64_t dev_off, size_t len)
{
	const unsigned char *p = (const unsigned char *)buf;
	unsigned char want[8];
	size_t i = 0;

	for (; i < len && ((dev_off + i) & 7); i++)
		if (p[i] != kvblk_pattern_byte(dev_off + i))
			return (ptrdiff_t)i;
	for (; i + 8 <= len; i += 8) {
		kvblk_pattern_store_le64(want, kvblk_pattern_word(dev_off + i));
		if (memcmp(p + i, want, 8) != 0)
			break; /* the byte loop below finds which byte */
	}
	for (; i < len; i++)
		if (p[i] != kvblk_pattern_byte(dev_off + i))
			return (ptrdiff_t)i;
	return -1;
}

#endif /* KVBLK_TESTS_VM_PATTERN_H */

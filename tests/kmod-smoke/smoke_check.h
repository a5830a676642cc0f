/* SPDX-License-Identifier: MIT */
/*
 * What the kmod-smoke programs share: CHECK() counts a failed assertion in
 * @failures and says where, and rnd() is a xorshift64 generator whose seed
 * each program that draws random shapes sets (SMOKE_SEED, defined before this
 * header) so that its runs repeat; without SMOKE_SEED there is no rnd().
 */
#ifndef KVBLK_SMOKE_CHECK_H
#define KVBLK_SMOKE_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int failures;

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);			\
			fputc('\n', stderr);				\
			failures++;					\
		}							\
	} while (0)

#ifdef SMOKE_SEED
static uint64_t rnd_state = SMOKE_SEED;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}
#endif /* SMOKE_SEED */

#endif

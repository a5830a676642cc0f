// SPDX-License-Identifier: MIT
// The growth rules of the public structs that start with a size_t *_size field: a caller
// built against an older header passes a smaller size (at least the oldest this library
// accepts), a newer one a larger size; nothing beyond kMaxStructBytes is ever read or written.
#pragma once

#include <cstddef>

namespace kvblk::detail {

/* Largest *_size accepted: a sane bound, so that a garbage size fails instead of faulting. */
inline constexpr size_t kMaxStructBytes = 64 << 10;

/*
 * An input struct (options): 0 when @size is in [@min, kMaxStructBytes] and every byte of
 * the caller's struct beyond @ours is 0 (a newer caller's fields this library does not know
 * must be unused), else -EINVAL with the message naming @fn, @what and the byte.
 */
int check_input_size(const char *fn, const char *what, const void *caller, size_t size, size_t min, size_t ours);

/* An output struct (info, stats): 0 when @size is in [@min, kMaxStructBytes], else -EINVAL. */
int check_output_size(const char *fn, const char *what, size_t size, size_t min);

/*
 * Copy @ours (@our_size bytes, starting with its size_t field) into the caller's struct of
 * @caller_size bytes: the size field stays, min(sizes) bytes are copied, the rest is zeroed.
 */
void copy_out(void *caller, size_t caller_size, const void *ours, size_t our_size) noexcept;

/* Copy the caller's input struct into @ours: min(sizes) bytes; ours keeps its defaults beyond. */
void copy_in(void *ours, size_t our_size, const void *caller, size_t caller_size) noexcept;

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
#include "struct_size.hpp"

#include "last_error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvblk::detail {

int check_input_size(const char *fn, const char *what, const void *caller, size_t size, size_t min, size_t ours)
{
	if (size < min || size > kMaxStructBytes)
		return fail(-EINVAL, "%s: %s %zu is out of range %zu..%zu (use the *_init() function)", fn, what, size,
			    min, kMaxStructBytes);
	const auto *p = static_cast<const unsigned char *>(caller);
	for (size_t i = ours; i < size; i++)
		if (p[i])
			return fail(-EINVAL, "%s: byte %zu is beyond what this libkvblk knows (%zu bytes) and is not 0",
				    fn, i, ours);
	return 0;
}

int check_output_size(const char *fn, const char *what, size_t size, size_t min)
{
	if (size < min || size > kMaxStructBytes)
		return fail(-EINVAL, "%s: %s %zu is out of range %zu..%zu", fn, what, size, min, kMaxStructBytes);
	return 0;
}

void copy_out(void *caller, size_t caller_size, const void *ours, size_t our_size) noexcept
{
	const size_t n = std::min(caller_size, our_size);
	std::memcpy(static_cast<char *>(caller) + sizeof(size_t), static_cast<const char *>(ours) + sizeof(size_t),
		    n - sizeof(size_t));
	if (caller_size > n)
		std::memset(static_cast<char *>(caller) + n, 0, caller_size - n);
}

void copy_in(void *ours, size_t our_size, const void *caller, size_t caller_size) noexcept
{
	const size_t n = std::min(caller_size, our_size);
	std::memcpy(static_cast<char *>(ours) + sizeof(size_t), static_cast<const char *>(caller) + sizeof(size_t),
		    n - sizeof(size_t));
}

} // namespace kvblk::detail

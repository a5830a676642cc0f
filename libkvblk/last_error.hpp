// SPDX-License-Identifier: MIT
// The per-thread message behind kvblk_last_error(), and helpers that set it.
#pragma once

#include <string>

namespace kvblk::detail {

/* Replace this thread's message (printf format). */
void set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Set this thread's message and return @err (a negative errno) for `return fail(...)`. */
int fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* This thread's message; "" if none was set. */
const char *last_error() noexcept;

/* "EINVAL (Invalid argument)" for 22 or -22. */
std::string errno_text(int err);

/* errno_text() in a buffer of its own, for noexcept paths: ErrnoText(err).c_str(). */
class ErrnoText {
public:
	explicit ErrnoText(int err) noexcept;
	[[nodiscard]] const char *c_str() const noexcept { return s_; }

private:
	char s_[96];
};

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
#include "last_error.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace kvblk::detail {
namespace {

thread_local char g_message[512];

void vset(const char *fmt, va_list ap)
{
	std::vsnprintf(g_message, sizeof(g_message), fmt, ap);
}

} // namespace

void set_last_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(fmt, ap);
	va_end(ap);
}

int fail(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(fmt, ap);
	va_end(ap);
	return err;
}

const char *last_error() noexcept
{
	return g_message;
}

ErrnoText::ErrnoText(int err) noexcept
{
	if (err < 0)
		err = -err;
	const char *name = strerrorname_np(err);
	const char *desc = strerrordesc_np(err);
	if (name)
		std::snprintf(s_, sizeof(s_), "%s (%s)", name, desc ? desc : "unknown error");
	else
		std::snprintf(s_, sizeof(s_), "E%d (%s)", err, desc ? desc : "unknown error");
}

std::string errno_text(int err)
{
	if (err < 0)
		err = -err;
	const char *name = strerrorname_np(err);
	std::string s = name ? name : "E" + std::to_string(err);
	s += " (";
	s += strerrordesc_np(err) ? strerrordesc_np(err) : "unknown error";
	s += ")";
	return s;
}

} // namespace kvblk::detail

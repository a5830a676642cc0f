// SPDX-License-Identifier: MIT
#include "errors.hpp"

#include <kvblk/kvblk.h>

namespace kvblkpy {

void raise_error(int neg_errno, const std::string &message, int64_t bad_index)
{
	const int err = neg_errno < 0 ? -neg_errno : neg_errno;
	/* kvblk._errors is imported by kvblk/__init__.py before the extension is used; the import
	 * here is a dictionary lookup in sys.modules. */
	py::object cls = py::module_::import("kvblk._errors").attr("Error");
	py::object exc = cls(err, message, bad_index);
	PyErr_SetObject(cls.ptr(), exc.ptr());
	throw py::error_already_set();
}

void raise_call_error(int neg_errno, const char *call, const std::string &last_error, int64_t bad_index)
{
	/* libkvblk's messages often start with the call's name already: do not say it twice. */
	std::string msg(call);
	if (last_error.rfind(msg, 0) == 0)
		msg = last_error;
	else if (!last_error.empty())
		msg += ": " + last_error;
	raise_error(neg_errno, msg, bad_index);
}

std::string last_error()
{
	const char *s = kvblk_last_error();
	return s ? std::string(s) : std::string();
}

} // namespace kvblkpy

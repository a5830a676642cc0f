// SPDX-License-Identifier: MIT
// Raising kvblk.Error (python/kvblk/_errors.py, an OSError subclass) from the bindings.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

namespace kvblkpy {

namespace py = pybind11;

/*
 * Raise kvblk.Error(errno, message, bad_index) as a C++ exception pybind11 passes on.
 * @neg_errno: a libkvblk return value (-errno; a positive value is taken as is).
 * @bad_index: the descriptor or object the error is about, -1 for none.
 */
[[noreturn]] void raise_error(int neg_errno, const std::string &message, int64_t bad_index = -1);

/* As raise_error(), message "<call>: <kvblk_last_error()>" (read on this thread, right after the call). */
[[noreturn]] void raise_call_error(int neg_errno, const char *call, const std::string &last_error,
				   int64_t bad_index = -1);

/* kvblk_last_error() copied: call it on the thread that made the failing call, before anything else. */
std::string last_error();

/*
 * Runs @call (a libkvblk call: >= 0 or -errno) with the GIL released, so other Python
 * threads run while it blocks; on failure copies last_error() into @why on this thread.
 */
template <class Call>
int call_nogil(Call &&call, std::string &why)
{
	py::gil_scoped_release nogil;
	const int ret = call();
	if (ret < 0)
		why = last_error();
	return ret;
}

} // namespace kvblkpy

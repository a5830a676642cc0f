// SPDX-License-Identifier: MIT
// Descriptor, result and completion arrays passed from Python: any 1-D C-contiguous buffer of
// the C struct's size (numpy arrays of kvblk.DESC_DTYPE, RESULT_DTYPE, CQE_DTYPE), read in
// place, so a batch costs no Python object per descriptor.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

namespace kvblkpy {

namespace py = pybind11;

/* StructArray - a held buffer view of @count items of @itemsize bytes (PyBuffer_Release on destruction). */
class StructArray {
public:
	/*
	 * @what: argument name for messages ("descs", "results"); @c_name: "struct kvblk_desc".
	 * Errors: TypeError not a 1-D C-contiguous buffer of items of @itemsize bytes;
	 * ValueError (from the exporter) read-only with @writable.
	 */
	StructArray(py::handle obj, size_t itemsize, bool writable, const char *what, const char *c_name);
	~StructArray() { PyBuffer_Release(&view_); }
	StructArray(const StructArray &) = delete;
	StructArray &operator=(const StructArray &) = delete;

	template <typename T> T *data() const { return static_cast<T *>(view_.buf); }
	size_t count() const { return count_; }

private:
	Py_buffer view_{};
	size_t count_ = 0;
};

} // namespace kvblkpy

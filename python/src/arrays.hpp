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

/*
 * StructArray - @count items of @itemsize bytes of a Python object, valid while the object
 * (the caller's argument) lives. numpy arrays are read from the array struct (a few field
 * reads: the hot path); other exporters through a held buffer view.
 */
class StructArray {
public:
	/*
	 * @what: argument name for messages ("descs", "results"); @c_name: "struct kvblk_desc".
	 * Errors: TypeError not a 1-D C-contiguous buffer of items of @itemsize bytes;
	 * ValueError (from the exporter) read-only with @writable.
	 */
	StructArray(py::handle obj, size_t itemsize, bool writable, const char *what, const char *c_name);
	~StructArray()
	{
		if (has_view_)
			PyBuffer_Release(&view_);
	}
	StructArray(const StructArray &) = delete;
	StructArray &operator=(const StructArray &) = delete;

	template <typename T> T *data() const { return static_cast<T *>(data_); }
	size_t count() const { return count_; }

private:
	Py_buffer view_{};
	bool has_view_ = false;
	void *data_ = nullptr;
	size_t count_ = 0;
};

} // namespace kvblkpy

// SPDX-License-Identifier: MIT
// Destinations (sources for stores) given as Python objects: what memory they name, and a
// holder that keeps that memory valid while libkvblk may use it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>

namespace kvblkpy {

namespace py = pybind11;

/*
 * Dest - one resolved destination. Holds what keeps the memory alive and in place: the
 * buffer-protocol view (so a bytearray cannot be resized under a load), the DLPack capsule
 * (its producer frees the tensor only when the capsule dies) or the object itself
 * (__cuda_array_interface__). release() gives them back early; the destructor does it anyway
 * (pybind11 destroys holders with the GIL held).
 */
class Dest {
public:
	Dest() = default;
	Dest(const Dest &) = delete;
	Dest &operator=(const Dest &) = delete;
	~Dest();

	void release();

	uint64_t addr = 0;	/* start address (host virtual, or CUDA device address) */
	uint64_t nbytes = 0;	/* bytes from addr */
	int kind = 0;		/* enum kvblk_mem_kind */
	bool readonly = false;	/* the producer said the memory must not be written */
	std::string source;	/* "buffer", "cuda_array_interface", "dlpack", "address" */

private:
	friend std::shared_ptr<Dest> resolve_dest(py::handle, bool, int64_t);
	Py_buffer view_{};
	bool has_view_ = false;
	py::object capsule_;
	py::object owner_;
};

/*
 * resolve_dest() - what memory @obj names. Accepted, in this order: a 2-tuple (address,
 * nbytes) of ints (host memory; the caller keeps it valid); an object with
 * __cuda_array_interface__ (CUDA memory, C-contiguous, no mask); an object with the buffer
 * protocol (host memory, C- or Fortran-contiguous: numpy, bytearray, memoryview, mmap); an
 * object with __dlpack__ (CPU or CUDA-host tensors as host memory, CUDA tensors as CUDA
 * memory; compact strides).
 * @writable: the memory will be written (loads): read-only memory is refused.
 * @index:    the descriptor index for error messages and bad_index, -1 for none.
 * Errors: kvblk.Error(EINVAL) read-only or not contiguous or an unsupported device, with
 * bad_index = @index; TypeError for an object of no supported kind.
 */
std::shared_ptr<Dest> resolve_dest(py::handle obj, bool writable, int64_t index);

void bind_dest(py::module_ &m);

} // namespace kvblkpy

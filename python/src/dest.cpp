// SPDX-License-Identifier: MIT
#include "dest.hpp"

#include "errors.hpp"

#include <kvblk/kvblk.h>

#include <cerrno>
#include <string>

namespace kvblkpy {
namespace {

/* The DLPack ABI (dlpack.h, v0.8 and v1.x), declared here: Debian has no dlpack header package. */
struct DLDevice {
	int32_t device_type;
	int32_t device_id;
};
struct DLDataType {
	uint8_t code;
	uint8_t bits;
	uint16_t lanes;
};
struct DLTensor {
	void *data;
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;
	uint64_t byte_offset;
};
struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(DLManagedTensor *);
};
struct DLPackVersion {
	uint32_t major;
	uint32_t minor;
};
struct DLManagedTensorVersioned {
	DLPackVersion version;
	void *manager_ctx;
	void (*deleter)(DLManagedTensorVersioned *);
	uint64_t flags;
	DLTensor dl_tensor;
};
constexpr uint64_t DLPACK_FLAG_BITMASK_READ_ONLY = 1;
enum : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };

std::string where(int64_t index)
{
	return index >= 0 ? "descriptor " + std::to_string(index) + ": " : std::string();
}

std::string type_name(py::handle obj)
{
	return py::str(py::type::handle_of(obj).attr("__qualname__"));
}

/* Bytes of a tensor with @ndim dims @shape and element size @elem, or -1 when @strides (in
 * elements, or bytes when @strides_in_bytes) are not those of a compact row-major layout. */
int64_t compact_bytes(int ndim, const int64_t *shape, const int64_t *strides, int64_t elem, bool strides_in_bytes)
{
	int64_t count = 1;
	for (int i = 0; i < ndim; i++)
		count *= shape[i];
	if (!strides || count == 0)
		return count * elem;
	int64_t expect = strides_in_bytes ? elem : 1;
	for (int i = ndim - 1; i >= 0; i--) {
		if (shape[i] != 1 && strides[i] != expect)
			return -1;
		expect *= shape[i];
	}
	return count * elem;
}

} // namespace

Dest::~Dest()
{
	release();
}

void Dest::release()
{
	if (has_view_) {
		PyBuffer_Release(&view_);
		has_view_ = false;
	}
	capsule_ = py::object();
	owner_ = py::object();
}

std::shared_ptr<Dest> resolve_dest(py::handle obj, bool writable, int64_t index)
{
	auto d = std::make_shared<Dest>();
	const char *use = writable ? "destination" : "source";

	/* (address, nbytes): plain host memory the caller owns. */
	if (py::isinstance<py::tuple>(obj) && py::len(obj) == 2) {
		py::tuple t = py::reinterpret_borrow<py::tuple>(obj);
		if (py::isinstance<py::int_>(t[0]) && py::isinstance<py::int_>(t[1])) {
			d->addr = t[0].cast<uint64_t>();
			d->nbytes = t[1].cast<uint64_t>();
			d->kind = KVBLK_MEM_HOST;
			d->source = "address";
			return d;
		}
	}

	/* __cuda_array_interface__ (Numba, CuPy, torch CUDA tensors): version 0..3. */
	if (py::hasattr(obj, "__cuda_array_interface__")) {
		py::dict cai = obj.attr("__cuda_array_interface__");
		py::tuple data = cai["data"];
		py::tuple shape_t = cai["shape"];
		std::string typestr = py::str(cai["typestr"]);
		if (cai.contains("mask") && !cai["mask"].is_none())
			raise_error(-EINVAL, where(index) + use + " " + type_name(obj) +
						     ": __cuda_array_interface__ with a mask is not supported",
				    index);
		int64_t elem = typestr.size() > 2 ? std::stoll(typestr.substr(2)) : 0;
		std::vector<int64_t> shape, strides;
		for (auto s : shape_t)
			shape.push_back(s.cast<int64_t>());
		bool have_strides = cai.contains("strides") && !cai["strides"].is_none();
		if (have_strides)
			for (auto s : py::tuple(cai["strides"]))
				strides.push_back(s.cast<int64_t>());
		int64_t bytes = compact_bytes(int(shape.size()), shape.data(), have_strides ? strides.data() : nullptr,
					      elem, true);
		if (bytes < 0 || elem <= 0)
			raise_error(-EINVAL, where(index) + use + " " + type_name(obj) +
						     ": __cuda_array_interface__ memory is not C-contiguous",
				    index);
		d->addr = data[0].cast<uint64_t>();
		d->readonly = data[1].cast<bool>();
		d->nbytes = uint64_t(bytes);
		d->kind = KVBLK_MEM_CUDA;
		d->source = "cuda_array_interface";
		d->owner_ = py::reinterpret_borrow<py::object>(obj);
	} else if (PyObject_CheckBuffer(obj.ptr())) {
		const int flags = PyBUF_ANY_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
		if (PyObject_GetBuffer(obj.ptr(), &d->view_, flags) != 0) {
			/* Say why: read-only (the common mistake) or not contiguous. */
			py::error_already_set original;
			Py_buffer probe;
			if (writable && PyObject_GetBuffer(obj.ptr(), &probe, PyBUF_ANY_CONTIGUOUS) == 0) {
				PyBuffer_Release(&probe);
				raise_error(-EINVAL, where(index) + "destination " + type_name(obj) +
							     " is read-only; loads need a writable buffer",
					    index);
			}
			PyErr_Clear();
			raise_error(-EINVAL, where(index) + use + " " + type_name(obj) +
						     " cannot be used as one contiguous byte range: " + original.what(),
				    index);
		}
		d->has_view_ = true;
		d->addr = uint64_t(reinterpret_cast<uintptr_t>(d->view_.buf));
		d->nbytes = uint64_t(d->view_.len);
		d->readonly = d->view_.readonly != 0;
		d->kind = KVBLK_MEM_HOST;
		d->source = "buffer";
	} else if (py::hasattr(obj, "__dlpack__")) {
		/* Ask for a versioned capsule (read-only flag); producers before DLPack 1.0 refuse the
		 * keyword with TypeError and give the classic one. */
		py::object cap;
		try {
			cap = obj.attr("__dlpack__")(py::arg("max_version") = py::make_tuple(1, 0));
		} catch (py::error_already_set &e) {
			if (!e.matches(PyExc_TypeError))
				throw;
			cap = obj.attr("__dlpack__")();
		}
		const DLTensor *t;
		bool ro = false;
		if (PyCapsule_IsValid(cap.ptr(), "dltensor_versioned")) {
			auto *m = static_cast<DLManagedTensorVersioned *>(PyCapsule_GetPointer(cap.ptr(), "dltensor_versioned"));
			t = &m->dl_tensor;
			ro = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
		} else if (PyCapsule_IsValid(cap.ptr(), "dltensor")) {
			t = &static_cast<DLManagedTensor *>(PyCapsule_GetPointer(cap.ptr(), "dltensor"))->dl_tensor;
		} else {
			raise_error(-EINVAL, where(index) + use + " " + type_name(obj) +
						     ": __dlpack__() did not return a DLPack capsule",
				    index);
		}
		switch (t->device.device_type) {
		case kDLCPU:
		case kDLCUDAHost:
			d->kind = KVBLK_MEM_HOST;
			break;
		case kDLCUDA:
		case kDLCUDAManaged:
			d->kind = KVBLK_MEM_CUDA;
			break;
		default:
			raise_error(-EINVAL, where(index) + use + " " + type_name(obj) + ": DLPack device type " +
						     std::to_string(t->device.device_type) +
						     " is not supported (CPU, CUDA host or CUDA memory only)",
				    index);
		}
		const int64_t elem = (int64_t(t->dtype.bits) * t->dtype.lanes + 7) / 8;
		const int64_t bytes = compact_bytes(t->ndim, t->shape, t->strides, elem, false);
		if (bytes < 0)
			raise_error(-EINVAL, where(index) + use + " " + type_name(obj) +
						     ": DLPack tensor is not C-contiguous",
				    index);
		d->addr = uint64_t(reinterpret_cast<uintptr_t>(t->data)) + t->byte_offset;
		d->nbytes = uint64_t(bytes);
		d->readonly = ro;
		d->source = "dlpack";
		/* Not consumed (not renamed "used_dltensor"): the producer's capsule destructor frees
		 * the tensor reference when this holder lets the capsule go. */
		d->capsule_ = cap;
		d->owner_ = py::reinterpret_borrow<py::object>(obj);
	} else {
		throw py::type_error(where(index) + use + " of type " + type_name(obj) +
				     " is not supported: expected an object with the buffer protocol (numpy "
				     "array, bytearray, memoryview), __cuda_array_interface__ or __dlpack__, "
				     "or an (address, nbytes) tuple");
	}
	if (writable && d->readonly)
		raise_error(-EINVAL, where(index) + "destination " + type_name(obj) +
					     " is read-only; loads need writable memory",
			    index);
	return d;
}

void bind_dest(py::module_ &m)
{
	py::class_<Dest, std::shared_ptr<Dest>>(m, "Dest",
						"Memory named by a Python object, held valid until release().")
		.def_readonly("addr", &Dest::addr, "Start address (host virtual or CUDA device address).")
		.def_readonly("nbytes", &Dest::nbytes, "Bytes from addr.")
		.def_readonly("kind", &Dest::kind, "kvblk.MEM_HOST or kvblk.MEM_CUDA.")
		.def_readonly("readonly", &Dest::readonly, "The producer marked the memory read-only.")
		.def_readonly("source", &Dest::source,
			      "How it was found: 'buffer', 'cuda_array_interface', 'dlpack' or 'address'.")
		.def("release", &Dest::release, "Give back the view/capsule now (idempotent).");
	m.def("resolve_dest", &resolve_dest, py::arg("obj"), py::arg("writable"), py::arg("index") = -1,
	      "Resolve a destination (writable=True) or source object into a Dest (see kvblk.resolve).");
}

} // namespace kvblkpy

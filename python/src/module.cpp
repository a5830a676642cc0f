// SPDX-License-Identifier: MIT
// kvblk._kvblk: the pybind11 extension under the kvblk package. It exposes the C API's
// handle, constants and struct layouts; kvblk/*.py builds the public surface on it.
#include "defaults.hpp"
#include "dest.hpp"
#include "device.hpp"
#include "kvstore.hpp"

#include <kvblk/kvblk.h>

#include <cstddef>

namespace py = pybind11;

namespace {

/* {field: offset} plus the struct's size: kvblk/_layout.py checks its numpy dtypes against these. */
#define KVBLK_PY_FIELD(d, type, field) d[#field] = offsetof(struct type, field)

py::dict desc_layout()
{
	py::dict d;
	KVBLK_PY_FIELD(d, kvblk_desc, offset);
	KVBLK_PY_FIELD(d, kvblk_desc, length);
	KVBLK_PY_FIELD(d, kvblk_desc, addr);
	KVBLK_PY_FIELD(d, kvblk_desc, buf_id);
	KVBLK_PY_FIELD(d, kvblk_desc, flags);
	KVBLK_PY_FIELD(d, kvblk_desc, tag);
	KVBLK_PY_FIELD(d, kvblk_desc, target);
	KVBLK_PY_FIELD(d, kvblk_desc, reserved);
	return d;
}

py::dict result_layout()
{
	py::dict d;
	KVBLK_PY_FIELD(d, kvblk_result, status);
	KVBLK_PY_FIELD(d, kvblk_result, reserved);
	KVBLK_PY_FIELD(d, kvblk_result, bytes);
	KVBLK_PY_FIELD(d, kvblk_result, tag);
	return d;
}

py::dict cqe_layout()
{
	py::dict d;
	KVBLK_PY_FIELD(d, kvblk_cqe, ticket);
	KVBLK_PY_FIELD(d, kvblk_cqe, user_data);
	KVBLK_PY_FIELD(d, kvblk_cqe, status);
	KVBLK_PY_FIELD(d, kvblk_cqe, flags);
	KVBLK_PY_FIELD(d, kvblk_cqe, failed);
	KVBLK_PY_FIELD(d, kvblk_cqe, index);
	KVBLK_PY_FIELD(d, kvblk_cqe, bytes);
	KVBLK_PY_FIELD(d, kvblk_cqe, tag);
	KVBLK_PY_FIELD(d, kvblk_cqe, path);
	KVBLK_PY_FIELD(d, kvblk_cqe, backend);
	KVBLK_PY_FIELD(d, kvblk_cqe, elapsed_ns);
	return d;
}

#undef KVBLK_PY_FIELD

} // namespace

PYBIND11_MODULE(_kvblk, m)
{
	m.doc() = "libkvblk bindings (use the kvblk package, not this module)";

	m.def("version", &kvblk_version, "The loaded libkvblk's version, 'MAJOR.MINOR.PATCH'.");
	m.def("check_version", [] { return kvblk_check_version(KVBLK_VERSION_MAJOR, KVBLK_VERSION_MINOR) == 1; },
	      "True when the loaded libkvblk is ABI-compatible with the header the module was built against.");
	m.attr("HEADER_VERSION") = py::make_tuple(KVBLK_VERSION_MAJOR, KVBLK_VERSION_MINOR, KVBLK_VERSION_PATCH);

	py::list backends, paths;
	for (int b = 0; b < KVBLK_BACKEND_MAX; b++)
		backends.append(kvblk_backend_name(b));
	for (int p = 0; p < KVBLK_PATH_MAX; p++)
		paths.append(kvblk_path_name(p));
	m.attr("BACKEND_NAMES") = backends; /* index = enum kvblk_backend */
	m.attr("PATH_NAMES") = paths;	    /* index = enum kvblk_path */

	m.attr("MEM_HOST") = int(KVBLK_MEM_HOST);
	m.attr("MEM_CUDA") = int(KVBLK_MEM_CUDA);
	m.attr("MEM_DMABUF") = int(KVBLK_MEM_DMABUF);
	m.attr("MEM_P2PDMA") = int(KVBLK_MEM_P2PDMA);
	m.attr("BUF_NONE") = uint32_t(KVBLK_BUF_NONE);
	m.attr("TARGET_ALL") = uint32_t(KVBLK_TARGET_ALL);
	m.attr("OPEN_WRITE") = KVBLK_OPEN_WRITE;
	m.attr("OPEN_BUFFERED") = KVBLK_OPEN_BUFFERED;
	m.attr("OPEN_CREATE") = KVBLK_OPEN_CREATE;
	m.attr("DESC_UNALIGNED") = KVBLK_DESC_UNALIGNED;
	m.attr("DESC_SHORT_EOF") = KVBLK_DESC_SHORT_EOF;
	m.attr("SUBMIT_STORE") = KVBLK_SUBMIT_STORE;
	m.attr("SUBMIT_PRIORITY") = KVBLK_SUBMIT_PRIORITY;
	m.attr("SUBMIT_NONBLOCK") = KVBLK_SUBMIT_NONBLOCK;
	m.attr("SUBMIT_PER_OBJECT") = KVBLK_SUBMIT_PER_OBJECT;
	m.attr("CQE_BATCH") = KVBLK_CQE_BATCH;
	m.attr("CQE_OBJECT") = KVBLK_CQE_OBJECT;

	m.attr("DESC_SIZE") = sizeof(struct kvblk_desc);
	m.attr("DESC_OFFSETS") = desc_layout();
	m.attr("RESULT_SIZE") = sizeof(struct kvblk_result);
	m.attr("RESULT_OFFSETS") = result_layout();
	m.attr("CQE_SIZE") = sizeof(struct kvblk_cqe);
	m.attr("CQE_OFFSETS") = cqe_layout();

	kvblkpy::bind_defaults(m);
	kvblkpy::bind_dest(m);
	kvblkpy::bind_device(m);
	kvblkpy::bind_kvstore(m);
}

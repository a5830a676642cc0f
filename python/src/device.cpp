// SPDX-License-Identifier: MIT
#include "device.hpp"

#include "arrays.hpp"
#include "async.hpp"
#include "errors.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <pthread.h>
#include <string>
#include <unistd.h>

/* Weak, as the asynchronous API in async.cpp: a libkvblk without targets still loads the
 * module, and Device.add_target() says ENOSYS. */
#pragma weak kvblk_add_target
#pragma weak kvblk_add_target_fd
#pragma weak kvblk_remove_target
#pragma weak kvblk_get_target_info
/* libkvblk 0.4; without it close() waits for a reaper as 0.3 did. */
#pragma weak kvblk_shutdown

namespace kvblkpy {
namespace {

std::atomic<uint64_t> g_fork_gen{0};

void on_fork_child() noexcept
{
	g_fork_gen.fetch_add(1, std::memory_order_relaxed);
}

void require_targets()
{
	if (!&kvblk_add_target || !&kvblk_add_target_fd || !&kvblk_remove_target || !&kvblk_get_target_info)
		raise_error(-ENOSYS, "the loaded libkvblk has no targets API (kvblk_add_target)");
}

const char *async_name(uint32_t a)
{
	switch (a) {
	case KVBLK_ASYNC_NATIVE:
		return "native";
	case KVBLK_ASYNC_THREAD:
		return "thread";
	default:
		return "none";
	}
}

py::dict info_dict(const kvblk_dev_info &i)
{
	py::dict d;
	d["backend"] = kvblk_backend_name(int(i.backend));
	d["backend_reason"] = std::string(i.backend_reason, strnlen(i.backend_reason, sizeof(i.backend_reason)));
	d["blockdev"] = bool(i.flags & KVBLK_INFO_BLOCKDEV);
	d["buffered"] = bool(i.flags & KVBLK_INFO_BUFFERED);
	d["writable"] = bool(i.flags & KVBLK_INFO_WRITABLE);
	d["logical_block_size"] = i.logical_block_size;
	d["mem_align"] = i.mem_align;
	d["capacity"] = i.capacity;
	d["max_cmd_bytes"] = i.max_cmd_bytes;
	d["queue_depth"] = i.queue_depth;
	d["workers"] = i.workers;
	d["max_descs"] = i.max_descs;
	d["async"] = async_name(i.async);
	d["max_batches"] = i.max_batches;
	d["targets"] = i.targets;
	return d;
}

template <size_t N> py::list u64_list(const uint64_t (&a)[N])
{
	py::list l;
	for (size_t k = 0; k < N; k++)
		l.append(a[k]);
	return l;
}

py::dict stats_dict(const kvblk_stats &s)
{
	py::dict d;
#define KVBLK_PY_STAT(f) d[#f] = s.f
	KVBLK_PY_STAT(batches);
	KVBLK_PY_STAT(objects);
	KVBLK_PY_STAT(commands);
	KVBLK_PY_STAT(bytes_read);
	KVBLK_PY_STAT(bytes_written);
	KVBLK_PY_STAT(rejected_batches);
	KVBLK_PY_STAT(errors_io);
	KVBLK_PY_STAT(errors_eagain);
	KVBLK_PY_STAT(errors_other);
	KVBLK_PY_STAT(eagain_retries);
	KVBLK_PY_STAT(short_resubmits);
	KVBLK_PY_STAT(memlock_fallbacks);
	KVBLK_PY_STAT(buffered_batches);
	KVBLK_PY_STAT(cq_overflows);
	KVBLK_PY_STAT(inflight_peak);
	KVBLK_PY_STAT(staged_copies);
	KVBLK_PY_STAT(staging_pool_bytes);
	KVBLK_PY_STAT(p2p_fallbacks);
	KVBLK_PY_STAT(priority_batches);
	KVBLK_PY_STAT(cancelled_objects);
	KVBLK_PY_STAT(outstanding_peak);
	KVBLK_PY_STAT(unaligned_objects);
	KVBLK_PY_STAT(unaligned_extra_bytes);
	KVBLK_PY_STAT(unaligned_stores);
	KVBLK_PY_STAT(rmw_read_bytes);
	KVBLK_PY_STAT(store_range_waits);
	KVBLK_PY_STAT(short_eof_objects);
#undef KVBLK_PY_STAT
	py::dict by_backend, by_path, bytes_path;
	for (int b = 0; b < KVBLK_BACKEND_MAX; b++)
		by_backend[kvblk_backend_name(b)] = s.batches_by_backend[b];
	for (int p = 0; p < KVBLK_PATH_MAX; p++) {
		by_path[kvblk_path_name(p)] = s.batches_by_path[p];
		bytes_path[kvblk_path_name(p)] = s.bytes_by_path[p];
	}
	d["batches_by_backend"] = by_backend;
	d["batches_by_path"] = by_path;
	d["bytes_by_path"] = bytes_path;
	d["batch_lat_hist"] = u64_list(s.batch_lat_hist);
	d["cmd_lat_hist"] = u64_list(s.cmd_lat_hist);
	return d;
}

/* The per-call report as a tuple (kvblk/_device.py's Batch reads it by position):
 * (ok, backend, path, failed, bytes, commands, elapsed_ns, bytes_device, ticket, user_data). */
py::tuple batch_tuple(int ok, const kvblk_batch_info &bi)
{
	return py::make_tuple(ok, bi.backend, bi.path, bi.failed, bi.bytes, bi.commands, bi.elapsed_ns,
			      bi.bytes_device, bi.ticket, bi.user_data);
}

} // namespace

StructArray::StructArray(py::handle obj, size_t itemsize, bool writable, const char *what, const char *c_name)
{
	auto shape_error = [&](long ndim, long isz) {
		return py::type_error(std::string(what) + " must be a 1-D C-contiguous array of " +
				      std::to_string(itemsize) + "-byte " + c_name + " items (got ndim " +
				      std::to_string(ndim) + ", itemsize " + std::to_string(isz) + ")");
	};
	if (py::isinstance<py::array>(obj)) {
		auto a = py::reinterpret_borrow<py::array>(obj);
		if (a.ndim() != 1 || size_t(a.itemsize()) != itemsize ||
		    !(a.flags() & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_))
			throw shape_error(long(a.ndim()), long(a.itemsize()));
		if (writable && !a.writeable())
			throw py::value_error(std::string(what) + " is a read-only array");
		data_ = const_cast<void *>(a.data());
		count_ = size_t(a.shape(0));
		return;
	}
	const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
	if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0)
		throw py::error_already_set();
	has_view_ = true;
	if (view_.ndim != 1 || size_t(view_.itemsize) != itemsize)
		throw shape_error(long(view_.ndim), long(view_.itemsize));
	data_ = view_.buf;
	count_ = size_t(view_.shape[0]);
}

uint64_t fork_generation() noexcept
{
	static std::once_flag once;
	std::call_once(once, [] { pthread_atfork(nullptr, nullptr, on_fork_child); });
	return g_fork_gen.load(std::memory_order_relaxed);
}

bool Device::inherited() const noexcept
{
	return fork_gen_ != g_fork_gen.load(std::memory_order_relaxed) || pid_ != getpid();
}

Device::Use::Use(Device &d) : lk_(d.mu_, std::defer_lock)
{
	/* Before the lock: in a child of fork() it may be held for good by a parent thread. */
	if (d.inherited())
		raise_error(-EBADFD, "kvblk device " + d.path_ + " was opened by process " + std::to_string(d.pid_) +
					     " and inherited through fork(): it cannot be used in process " +
					     std::to_string(getpid()) + "; open it again here");
	if (d.closing_.load())
		throw py::value_error("kvblk device " + d.path_ + " is closed");
	/* close() holds the lock exclusively with the GIL released: block only without the GIL. */
	if (!lk_.try_lock()) {
		py::gil_scoped_release nogil;
		lk_.lock();
	}
	dev = d.dev_.load();
	if (!dev)
		throw py::value_error("kvblk device " + d.path_ + " is closed");
}

Device::Device(const std::string &path, uint32_t backend, uint32_t queue_depth, uint32_t workers, uint32_t flags,
	       uint64_t max_cmd_bytes, uint32_t max_descs, uint32_t eagain_retries, uint64_t create_bytes,
	       uint32_t max_batches)
	: path_(path), pid_(getpid()), fork_gen_(fork_generation())
{
	kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	o.backend = backend;
	o.queue_depth = queue_depth;
	o.workers = workers;
	o.flags = flags;
	o.max_cmd_bytes = max_cmd_bytes;
	o.max_descs = max_descs;
	o.eagain_retries = eagain_retries;
	o.create_bytes = create_bytes;
	o.max_batches = max_batches;
	std::string why;
	kvblk_dev *d = nullptr;
	/* open(2), statx, io_uring setup, a file's fallocate */
	int ret = call_nogil([&] { return kvblk_open(path.c_str(), &o, &d); }, why);
	if (ret < 0)
		raise_call_error(ret, ("kvblk_open " + path).c_str(), why);
	dev_.store(d);
}

Device::~Device()
{
	/* Nothing else uses it (no Python reference is left); kvblk_close() of an inherited copy
	 * returns at once. */
	if (kvblk_dev *d = dev_.exchange(nullptr)) {
		py::gil_scoped_release nogil;
		kvblk_close(d);
	}
}

void Device::shutdown()
{
	Use u(*this);
	if (&kvblk_shutdown)
		kvblk_shutdown(u.dev); /* takes the scheduler's lock only: no wait */
}

void Device::close()
{
	if (inherited()) {
		/* The parent's handle: free nothing, touch no lock (one may be held for good). */
		if (kvblk_dev *d = dev_.exchange(nullptr))
			kvblk_close(d); /* returns at once in a child */
		return;
	}
	closing_.store(true); /* calls that start from now on raise ValueError */
	py::gil_scoped_release nogil;
	{
		/* Wake the threads waiting in libkvblk on the handle (they hold the shared lock). */
		std::shared_lock<std::shared_mutex> lk(mu_);
		if (kvblk_dev *d = dev_.load(); d && &kvblk_shutdown)
			kvblk_shutdown(d);
	}
	std::unique_lock<std::shared_mutex> lk(mu_);
	if (kvblk_dev *d = dev_.exchange(nullptr))
		kvblk_close(d);
}

namespace {

py::dict get_info(Device &self)
{
	Device::Use u(self);
	kvblk_dev_info i{};
	i.info_size = sizeof(i);
	int ret = kvblk_get_info(u.dev, &i);
	if (ret < 0)
		raise_call_error(ret, "kvblk_get_info", last_error());
	return info_dict(i);
}

py::dict get_stats(Device &self)
{
	Device::Use u(self);
	kvblk_stats s{};
	s.stats_size = sizeof(s);
	int ret = kvblk_get_stats(u.dev, &s);
	if (ret < 0)
		raise_call_error(ret, "kvblk_get_stats", last_error());
	return stats_dict(s);
}

void reset_stats(Device &self)
{
	Device::Use u(self);
	int ret = kvblk_reset_stats(u.dev);
	if (ret < 0)
		raise_call_error(ret, "kvblk_reset_stats", last_error());
}

/* Returns (id, note): note is kvblk_last_error() after a successful call (a memlock fallback
 * or the staged path says why there). */
py::tuple register_buffer(Device &self, int kind, uint64_t addr, uint64_t len)
{
	Device::Use u(self);
	uint32_t id = KVBLK_BUF_NONE;
	int ret;
	std::string why;
	{
		py::gil_scoped_release nogil; /* pins pages; a staged registration loads the CUDA runtime */
		ret = kvblk_register_buffer(u.dev, kind, reinterpret_cast<void *>(uintptr_t(addr)), len, &id);
		why = last_error();
	}
	if (ret < 0)
		raise_call_error(ret, "kvblk_register_buffer", why);
	return py::make_tuple(id, why);
}

void unregister_buffer(Device &self, uint32_t id)
{
	Device::Use u(self);
	std::string why;
	int ret = call_nogil([&] { return kvblk_unregister_buffer(u.dev, id); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_unregister_buffer", why);
}

void check_buffer(Device &self, uint32_t id)
{
	Device::Use u(self);
	std::string why;
	/* probes every page of the buffer */
	int ret = call_nogil([&] { return kvblk_check_buffer(u.dev, id); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_check_buffer", why);
}

void flush(Device &self, uint32_t target)
{
	Device::Use u(self);
	std::string why;
	/* fdatasync or an NVMe Flush: milliseconds */
	int ret = call_nogil([&] { return kvblk_flush(u.dev, target, 0); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_flush", why);
}

void set_staging(Device &self, uint32_t buffers, uint64_t buffer_bytes)
{
	Device::Use u(self);
	std::string why;
	/* may wait for a running load and allocate the pool */
	int ret = call_nogil([&] { return kvblk_set_staging(u.dev, buffers, buffer_bytes); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_set_staging", why);
}

uint32_t add_target(Device &self, py::object where, uint32_t flags)
{
	require_targets();
	Device::Use u(self);
	uint32_t id = 0;
	std::string why;
	const bool is_fd = py::isinstance<py::int_>(where);
	const std::string path = is_fd ? std::string() : py::str(where).cast<std::string>();
	const int fd = is_fd ? where.cast<int>() : -1;
	/* open(2), statx, kvblk.ko attach */
	int ret = call_nogil(
		[&] {
			return is_fd ? kvblk_add_target_fd(u.dev, fd, flags, &id)
				     : kvblk_add_target(u.dev, path.c_str(), flags, &id);
		},
		why);
	if (ret < 0)
		raise_call_error(ret, is_fd ? "kvblk_add_target_fd" : "kvblk_add_target", why);
	return id;
}

void remove_target(Device &self, uint32_t id)
{
	require_targets();
	Device::Use u(self);
	std::string why;
	int ret = call_nogil([&] { return kvblk_remove_target(u.dev, id); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_remove_target", why);
}

py::dict target_info(Device &self, uint32_t id)
{
	require_targets();
	Device::Use u(self);
	kvblk_dev_info i{};
	i.info_size = sizeof(i);
	std::string why;
	/* fstat of a file target; takes the locks that registrations and batches take */
	int ret = call_nogil([&] { return kvblk_get_target_info(u.dev, id, &i); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_get_target_info", why);
	return info_dict(i);
}

/* load_many / store_many over a descriptor array and a results array of the same length. */
py::tuple run_batch(Device &self, py::handle descs, py::handle results, bool store)
{
	const char *call = store ? "kvblk_store_many" : "kvblk_load_many";
	StructArray d(descs, sizeof(kvblk_desc), false, "descs", "struct kvblk_desc");
	StructArray r(results, sizeof(kvblk_result), true, "results", "struct kvblk_result");
	if (r.count() != d.count())
		throw py::value_error(std::string("results has ") + std::to_string(r.count()) +
				      " items for " + std::to_string(d.count()) + " descriptors");
	if (d.count() > UINT32_MAX)
		raise_error(-E2BIG, std::string(call) + ": " + std::to_string(d.count()) +
					    " descriptors exceed the C API's 32-bit count");
	Device::Use u(self);
	kvblk_batch_info bi{};
	bi.info_size = sizeof(bi);
	std::string why;
	kvblk_desc *dv = d.data<kvblk_desc>();
	kvblk_result *rv = r.data<kvblk_result>();
	const auto n = uint32_t(d.count());
	int ret = call_nogil(
		[&] {
			return store ? kvblk_store_many(u.dev, dv, n, rv, &bi) : kvblk_load_many(u.dev, dv, n, rv, &bi);
		},
		why);
	if (ret < 0)
		raise_call_error(ret, call, why, bi.bad_index);
	return batch_tuple(ret, bi);
}

} // namespace

void bind_device(py::module_ &m)
{
	py::class_<Device> cls(m, "Device", "A libkvblk device handle (use kvblk.open()).");
	bind_async(m, cls);
	cls
		.def(py::init<const std::string &, uint32_t, uint32_t, uint32_t, uint32_t, uint64_t, uint32_t,
			      uint32_t, uint64_t, uint32_t>(),
		     py::arg("path"), py::arg("backend") = 0, py::arg("queue_depth") = 0, py::arg("workers") = 0,
		     py::arg("flags") = 0, py::arg("max_cmd_bytes") = 0, py::arg("max_descs") = 0,
		     py::arg("eagain_retries") = 0, py::arg("create_bytes") = 0, py::arg("max_batches") = 0)
		.def("close", &Device::close,
		     "kvblk_shutdown() (waiting threads return), then kvblk_close() once the calls in progress on "
		     "other threads have returned. In a child of fork(): forgets the parent's handle at once.")
		.def("shutdown", &Device::shutdown,
		     "kvblk_shutdown(): every reap/wait/submit waiting on the handle returns (ECANCELED), later ones "
		     "do not wait.")
		.def_property_readonly("closed", &Device::closed)
		.def_property_readonly("inherited", &Device::inherited,
				       "True in a child of fork(): the handle is the parent's (every call raises EBADFD).")
		.def_property_readonly(
			"_handle", [](Device &d) { return uint64_t(reinterpret_cast<uintptr_t>(d.dev_.load())); },
			"The kvblk_dev pointer as an int (0 when closed), for C code run on the same handle "
			"(python/bench); never use it after close().")
		.def("info", &get_info, "kvblk_get_info() as a dict.")
		.def("stats", &get_stats, "kvblk_get_stats() as a dict.")
		.def("reset_stats", &reset_stats)
		.def("add_target", &add_target, py::arg("path_or_fd"), py::arg("flags") = 0,
		     "kvblk_add_target() for a str path, kvblk_add_target_fd() for an int fd; returns the id.")
		.def("remove_target", &remove_target, py::arg("id"))
		.def("target_info", &target_info, py::arg("id"), "kvblk_get_target_info() as a dict.")
		.def("register_buffer", &register_buffer, py::arg("kind"), py::arg("addr"), py::arg("nbytes"),
		     "kvblk_register_buffer(); returns (id, note).")
		.def("unregister_buffer", &unregister_buffer, py::arg("id"))
		.def("check_buffer", &check_buffer, py::arg("id"), "kvblk_check_buffer(); raises on -errno.")
		.def("flush", &flush, py::arg("target"), "kvblk_flush(target, 0); raises on -errno.")
		.def("set_staging", &set_staging, py::arg("buffers"), py::arg("buffer_bytes"))
		.def("load_many", [](Device &s, py::handle d, py::handle r) { return run_batch(s, d, r, false); },
		     py::arg("descs"), py::arg("results"),
		     "kvblk_load_many() over a DESC_DTYPE array into a RESULT_DTYPE array; returns the batch tuple.")
		.def("store_many", [](Device &s, py::handle d, py::handle r) { return run_batch(s, d, r, true); },
		     py::arg("descs"), py::arg("results"));
}

} // namespace kvblkpy

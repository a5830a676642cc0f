// SPDX-License-Identifier: MIT
// The asynchronous API (libkvblk 0.3): kvblk_submit, kvblk_wait, kvblk_reap, kvblk_cancel,
// kvblk_event_fd. Waits release the GIL; a submit does too (it may wait for a free batch slot).
#include "async.hpp"

#include "arrays.hpp"
#include "errors.hpp"

#include <kvblk/kvblk.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <string>

/* Weak: the module still loads on a libkvblk built without the asynchronous API (a 0.3
 * library always has it; this keeps a mismatched build diagnosable instead of an ImportError
 * about an undefined symbol). has_async() tells the Python layer. */
#pragma weak kvblk_submit_opts_init
#pragma weak kvblk_submit
#pragma weak kvblk_reap
#pragma weak kvblk_wait
#pragma weak kvblk_cancel
#pragma weak kvblk_event_fd

namespace kvblkpy {
namespace {

/* CLOCK_MONOTONIC now, ns. */
int64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/*
 * Run a wait of libkvblk (@call(timeout_ns), GIL released) as Python's own waits do (PEP 475):
 * when a signal handler interrupted it (-EINTR: a signal for this thread, Ctrl-C on the main
 * thread), run the Python handlers; one that raises ends the wait with its exception, else
 * the wait goes on for the rest of @timeout_ns (< 0: no limit).
 */
template <class Call> int interruptible_wait(int64_t timeout_ns, std::string &why, Call &&call)
{
	const int64_t deadline = timeout_ns > 0 ? now_ns() + timeout_ns : 0;
	for (;;) {
		int64_t left = timeout_ns;
		if (timeout_ns > 0)
			left = std::max<int64_t>(deadline - now_ns(), 0);
		const int ret = call_nogil([&] { return call(left); }, why);
		if (ret != -EINTR)
			return ret;
		if (PyErr_CheckSignals() != 0)
			throw py::error_already_set();
	}
}

bool has_async()
{
	return &kvblk_submit && &kvblk_reap && &kvblk_wait && &kvblk_cancel && &kvblk_event_fd &&
	       &kvblk_submit_opts_init;
}

void require_async()
{
	if (!has_async())
		raise_error(-ENOSYS, "the loaded libkvblk has no asynchronous API (kvblk_submit)");
}

/* Returns the ticket. @results must stay valid until the batch's completion is taken: the
 * Python layer's Ticket holds the array. */
uint64_t submit(Device &self, py::handle descs, py::handle results, uint32_t flags, uint64_t user_data)
{
	require_async();
	StructArray d(descs, sizeof(kvblk_desc), false, "descs", "struct kvblk_desc");
	StructArray r(results, sizeof(kvblk_result), true, "results", "struct kvblk_result");
	if (r.count() != d.count())
		throw py::value_error("results has " + std::to_string(r.count()) + " items for " +
				      std::to_string(d.count()) + " descriptors");
	if (d.count() > UINT32_MAX)
		raise_error(-E2BIG, "kvblk_submit: " + std::to_string(d.count()) +
					    " descriptors exceed the C API's 32-bit count");
	Device::Use u(self);
	kvblk_submit_opts o;
	kvblk_submit_opts_init(&o, sizeof(o));
	o.flags = flags;
	o.user_data = user_data;
	o.results = r.data<kvblk_result>();
	uint64_t ticket = 0;
	std::string why;
	/* waits for a batch slot unless KVBLK_SUBMIT_NONBLOCK */
	int ret = call_nogil(
		[&] { return kvblk_submit(u.dev, d.data<kvblk_desc>(), uint32_t(d.count()), &o, &ticket); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_submit", why, o.bad_index);
	return ticket;
}

/* The batch tuple (as load_many), or None when @timeout_ns passed (-ETIME). */
py::object wait(Device &self, uint64_t ticket, int64_t timeout_ns)
{
	require_async();
	Device::Use u(self);
	kvblk_batch_info bi{};
	bi.info_size = sizeof(bi);
	std::string why;
	int ret = interruptible_wait(timeout_ns, why, [&](int64_t t) { return kvblk_wait(u.dev, ticket, t, &bi); });
	if (ret == -ETIME)
		return py::none();
	if (ret < 0)
		raise_call_error(ret, "kvblk_wait", why);
	return py::make_tuple(ret, bi.backend, bi.path, bi.failed, bi.bytes, bi.commands, bi.elapsed_ns,
			      bi.bytes_device, bi.ticket, bi.user_data);
}

/* Fills @cqes (a CQE_DTYPE array; its length is the maximum); returns the count. */
int reap(Device &self, py::handle cqes, uint32_t min_complete, int64_t timeout_ns)
{
	require_async();
	StructArray c(cqes, sizeof(kvblk_cqe), true, "cqes", "struct kvblk_cqe");
	if (c.count() == 0 || c.count() > UINT32_MAX)
		throw py::value_error("cqes must hold 1..2^32-1 entries");
	Device::Use u(self);
	std::string why;
	int ret = interruptible_wait(timeout_ns, why, [&](int64_t t) {
		return kvblk_reap(u.dev, c.data<kvblk_cqe>(), uint32_t(c.count()), min_complete, t);
	});
	if (ret < 0)
		raise_call_error(ret, "kvblk_reap", why);
	return ret;
}

/* True when the request was taken, False when the batch had completed (-ENOENT). */
bool cancel(Device &self, uint64_t ticket)
{
	require_async();
	Device::Use u(self);
	int ret = kvblk_cancel(u.dev, ticket); /* takes a lock and flags the batch: no wait */
	if (ret == -ENOENT)
		return false;
	if (ret < 0)
		raise_call_error(ret, "kvblk_cancel", last_error());
	return true;
}

int event_fd(Device &self)
{
	require_async();
	Device::Use u(self);
	int ret = kvblk_event_fd(u.dev);
	if (ret < 0)
		raise_call_error(ret, "kvblk_event_fd", last_error());
	return ret;
}

} // namespace

void bind_async(py::module_ &m, py::class_<Device> &cls)
{
	m.attr("HAVE_ASYNC") = has_async();
	cls.def("submit", &submit, py::arg("descs"), py::arg("results"), py::arg("flags") = 0,
		py::arg("user_data") = 0, "kvblk_submit(); returns the ticket.")
		.def("wait", &wait, py::arg("ticket"), py::arg("timeout_ns") = -1,
		     "kvblk_wait(); the batch tuple, or None when the time ran out. A signal handler that "
		     "raises (Ctrl-C) ends the wait with its exception; kvblk.Error ECANCELED when the device "
		     "is being closed.")
		.def("reap", &reap, py::arg("cqes"), py::arg("min_complete") = 0, py::arg("timeout_ns") = -1,
		     "kvblk_reap() into a CQE_DTYPE array; returns the count. Waits as wait() does.")
		.def("cancel", &cancel, py::arg("ticket"), "kvblk_cancel(); False when already completed.")
		.def("event_fd", &event_fd, "kvblk_event_fd().");
}

} // namespace kvblkpy

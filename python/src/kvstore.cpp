// SPDX-License-Identifier: MIT
// The kvblk store's C API (<kvblk/kvstore.h>) as kvblk._kvblk.KVStore and KVStoreBatch; the
// public class is kvblk.KVStore (kvblk/_kvstore.py).
//
// Every call that may block (create, open, close, submit, wait, reap, the synchronous batches,
// check, list, buffer registration) runs with the GIL released. A handle inherited through
// fork() raises kvblk.Error(EBADFD) at once, before taking the handle's lock (a parent thread
// may have held it at the fork: waiting for it would hang the child forever), and its close()
// and destructor free nothing, as kvblk_kvstore_close() does in a child. Waits without a time
// limit are made of 50 ms waits, the lock given back between them, so that close() on another
// thread never waits behind a reaper or a waiter, and Ctrl-C reaches Python.
#include "kvstore.hpp"

#include "dest.hpp"
#include "errors.hpp"

#include <kvblk/kvstore.h>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

namespace kvblkpy {
namespace {

constexpr int64_t kSliceNs = 50'000'000;

std::string store_error()
{
	const char *s = kvblk_kvstore_last_error();
	return s ? std::string(s) : std::string();
}

/* Runs a store call with the GIL released; on failure copies kvblk_kvstore_last_error() (this thread). */
template <class Call>
int nogil(Call &&call, std::string &why)
{
	py::gil_scoped_release release;
	const int ret = call();
	if (ret < 0)
		why = store_error();
	return ret;
}

std::string type_name(py::handle obj)
{
	return py::str(py::type::handle_of(obj).attr("__qualname__"));
}

/*
 * Store - owns one kvblk_kvstore. Calls share the handle (a shared lock: the store is thread
 * safe); close() takes the lock exclusively, so kvblk_kvstore_close() never races another call.
 */
class Store {
public:
	Store(bool create, const std::vector<std::string> &paths,
	      const std::vector<std::pair<uint64_t, uint32_t>> &classes, uint64_t file_bytes, uint64_t journal_bytes,
	      uint32_t max_key_bytes, uint32_t max_meta_bytes, uint32_t create_flags, uint32_t open_flags,
	      uint32_t backend, uint32_t queue_depth, uint32_t workers, uint32_t when_full, uint32_t max_batches,
	      uint64_t drive_budget_bytes, uint64_t max_cmd_bytes);
	~Store();
	Store(const Store &) = delete;
	Store &operator=(const Store &) = delete;

	void close();
	bool closed() const { return st_ == nullptr || closing_.load(); }
	bool forked() const { return owner_ != getpid(); }

	class Use {
	public:
		explicit Use(Store &s);
		kvblk_kvstore *st;

	private:
		std::shared_lock<std::shared_mutex> lk_;
	};

	kvblk_kvstore *st_ = nullptr;
	std::shared_mutex mu_;
	std::atomic<bool> closing_{false};
	pid_t owner_ = 0;
	std::string name_;
};

[[noreturn]] void raise_forked(const Store &s)
{
	raise_error(-EBADFD, "kvblk store " + s.name_ + " was opened by process " + std::to_string(s.owner_) +
				     "; a child made by fork() cannot use it (open the store anew in the child, "
				     "after the parent has closed it)");
}

Store::Use::Use(Store &s) : lk_(s.mu_, std::defer_lock)
{
	if (s.forked())
		raise_forked(s);
	if (s.closed())
		throw py::value_error("kvblk store " + s.name_ + " is closed");
	/* close() holds the lock exclusively with the GIL released: block only without the GIL. */
	if (!lk_.try_lock()) {
		py::gil_scoped_release release;
		lk_.lock();
	}
	if (!s.st_)
		throw py::value_error("kvblk store " + s.name_ + " is closed");
	st = s.st_;
}

Store::Store(bool create, const std::vector<std::string> &paths,
	     const std::vector<std::pair<uint64_t, uint32_t>> &classes, uint64_t file_bytes, uint64_t journal_bytes,
	     uint32_t max_key_bytes, uint32_t max_meta_bytes, uint32_t create_flags, uint32_t open_flags,
	     uint32_t backend, uint32_t queue_depth, uint32_t workers, uint32_t when_full, uint32_t max_batches,
	     uint64_t drive_budget_bytes, uint64_t max_cmd_bytes)
	: owner_(getpid())
{
	for (size_t i = 0; i < paths.size(); i++)
		name_ += (i ? "," : "") + paths[i];
	if (classes.size() > KVBLK_KVSTORE_MAX_CLASSES)
		raise_error(-EINVAL, "kvblk store: " + std::to_string(classes.size()) + " classes (at most " +
					     std::to_string(KVBLK_KVSTORE_MAX_CLASSES) + ")");
	std::vector<const char *> cp;
	for (const auto &p : paths)
		cp.push_back(p.c_str());
	kvblk_kvstore_open_opts oo;
	kvblk_kvstore_open_opts_init(&oo, sizeof(oo));
	oo.flags = open_flags;
	oo.backend = backend;
	oo.queue_depth = queue_depth;
	oo.workers = workers;
	oo.when_full = when_full;
	oo.max_batches = max_batches;
	oo.drive_budget_bytes = drive_budget_bytes;
	oo.max_cmd_bytes = max_cmd_bytes;
	std::string why;
	int ret;
	if (create) {
		kvblk_kvstore_create_opts co;
		kvblk_kvstore_create_opts_init(&co, sizeof(co));
		co.flags = create_flags;
		co.nr_classes = uint32_t(classes.size());
		for (size_t i = 0; i < classes.size(); i++) {
			co.classes[i].slot_bytes = classes[i].first;
			co.classes[i].weight = classes[i].second;
		}
		co.file_bytes = file_bytes;
		co.journal_bytes = journal_bytes;
		co.max_key_bytes = max_key_bytes;
		co.max_meta_bytes = max_meta_bytes;
		/* writes and flushes every drive's metadata */
		ret = nogil([&] { return kvblk_kvstore_create(cp.data(), uint32_t(cp.size()), &co, &oo, &st_); }, why);
	} else {
		/* reads every drive's superblocks, checkpoint and journal; writes a checkpoint */
		ret = nogil([&] { return kvblk_kvstore_open(cp.data(), uint32_t(cp.size()), &oo, &st_); }, why);
	}
	if (ret < 0)
		raise_call_error(ret, create ? "kvblk_kvstore_create" : "kvblk_kvstore_open", why);
}

Store::~Store()
{
	if (st_ && !forked()) {
		py::gil_scoped_release release;
		kvblk_kvstore_close(st_);
	}
	st_ = nullptr;
}

void Store::close()
{
	if (forked()) {
		/* The parent's store: kvblk_kvstore_close() frees nothing in a child; never touch the lock. */
		st_ = nullptr;
		return;
	}
	closing_ = true;
	std::unique_lock<std::shared_mutex> lk(mu_, std::defer_lock);
	py::gil_scoped_release release;
	lk.lock();
	if (st_) {
		/* finishes every batch (queued ones end -ECANCELED), writes a checkpoint */
		kvblk_kvstore_close(st_);
		st_ = nullptr;
	}
}

/*
 * Batch - one store batch as the C API takes it: ops, results, the keys' and metadata's bytes,
 * room for the metadata gets and exists return, and what keeps the destinations (sources)
 * valid: the Dest holders and the buffers registered for this batch (CUDA memory), given back
 * by release() once the batch is over.
 */
struct Batch {
	uint32_t kind = 0;
	std::vector<kvblk_kvstore_op> ops;
	std::vector<kvblk_kvstore_result> results;
	std::string keybuf;
	std::string metabuf;
	std::vector<uint8_t> meta_out;
	uint32_t meta_room = 0;
	std::vector<std::shared_ptr<Dest>> holders;
	std::vector<uint32_t> temp_ids;
	uint32_t device_ops = 0; /* ops whose destination is device memory */

	void release(Store &s);
	size_t size() const { return ops.size(); }
};

void Batch::release(Store &s)
{
	if (!temp_ids.empty() && !s.forked() && !s.closed()) {
		std::shared_lock<std::shared_mutex> lk(s.mu_, std::defer_lock);
		py::gil_scoped_release release;
		lk.lock();
		if (s.st_) {
			kvblk_dev *dev = kvblk_kvstore_dev(s.st_);
			for (uint32_t id : temp_ids)
				kvblk_unregister_buffer(dev, id);
		}
	}
	temp_ids.clear();
	holders.clear();
}

/* Appends the bytes of key @k (str as UTF-8, bytes, or any buffer) to @buf; returns its length. */
size_t append_key(std::string &buf, py::handle k, size_t i)
{
	if (PyUnicode_Check(k.ptr())) {
		Py_ssize_t n;
		const char *p = PyUnicode_AsUTF8AndSize(k.ptr(), &n);
		if (!p)
			throw py::error_already_set();
		buf.append(p, size_t(n));
		return size_t(n);
	}
	if (PyBytes_Check(k.ptr())) {
		buf.append(PyBytes_AS_STRING(k.ptr()), size_t(PyBytes_GET_SIZE(k.ptr())));
		return size_t(PyBytes_GET_SIZE(k.ptr()));
	}
	if (PyObject_CheckBuffer(k.ptr()) && !PyUnicode_Check(k.ptr())) {
		Py_buffer v;
		if (PyObject_GetBuffer(k.ptr(), &v, PyBUF_C_CONTIGUOUS) != 0)
			throw py::error_already_set();
		buf.append(static_cast<const char *>(v.buf), size_t(v.len));
		const size_t n = size_t(v.len);
		PyBuffer_Release(&v);
		return n;
	}
	throw py::type_error("keys[" + std::to_string(i) + "] is a " + type_name(k) +
			     ": keys are str (stored as UTF-8) or bytes");
}

/*
 * make_batch() - check and copy one batch.
 * @kind:      KVBLK_KVSTORE_GET ... _DELETE.
 * @keys:      a sequence of str or bytes.
 * @dests:     get: destinations, put: sources (anything resolve_dest() takes, or a
 *             (buf_id, offset, nbytes) tuple naming a buffer registered on the store); None
 *             for exists and delete.
 * @metas:     put: None or a sequence of bytes-like (or None) per key.
 * @meta_room: get, exists: bytes of metadata to take back per key.
 */
std::unique_ptr<Batch> make_batch(Store &self, uint32_t kind, py::sequence keys, py::object dests, py::object metas,
				  uint32_t meta_room)
{
	auto b = std::make_unique<Batch>();
	b->kind = kind;
	const size_t n = py::len(keys);
	b->ops.resize(n);
	b->results.resize(n);
	const bool io = kind == KVBLK_KVSTORE_GET || kind == KVBLK_KVSTORE_PUT;
	py::sequence dseq, mseq;
	if (io) {
		if (dests.is_none())
			throw py::type_error(std::string(kind == KVBLK_KVSTORE_GET ? "dests" : "sources") +
					     " are required");
		dseq = py::reinterpret_borrow<py::sequence>(dests);
		if (py::len(dseq) != n)
			throw py::value_error(std::to_string(n) + " keys but " + std::to_string(py::len(dseq)) + " " +
					      (kind == KVBLK_KVSTORE_GET ? "dests" : "sources"));
	}
	const bool put_meta = kind == KVBLK_KVSTORE_PUT && !metas.is_none();
	if (put_meta) {
		mseq = py::reinterpret_borrow<py::sequence>(metas);
		if (py::len(mseq) != n)
			throw py::value_error(std::to_string(n) + " keys but " + std::to_string(py::len(mseq)) + " metas");
	}
	std::vector<size_t> klen(n), mlen(n, 0);
	for (size_t i = 0; i < n; i++)
		klen[i] = append_key(b->keybuf, keys[i], i);
	if (put_meta) {
		for (size_t i = 0; i < n; i++) {
			py::handle m = mseq[i];
			if (m.is_none())
				continue;
			Py_buffer v;
			if (PyObject_GetBuffer(m.ptr(), &v, PyBUF_C_CONTIGUOUS) != 0) {
				PyErr_Clear();
				throw py::type_error("metas[" + std::to_string(i) + "] is a " + type_name(m) +
						     ": metadata is bytes (or any buffer) or None");
			}
			b->metabuf.append(static_cast<const char *>(v.buf), size_t(v.len));
			mlen[i] = size_t(v.len);
			PyBuffer_Release(&v);
		}
	}
	if ((kind == KVBLK_KVSTORE_GET || kind == KVBLK_KVSTORE_EXISTS) && meta_room) {
		b->meta_room = meta_room;
		b->meta_out.assign(size_t(meta_room) * n, 0);
	}
	size_t koff = 0, moff = 0;
	for (size_t i = 0; i < n; i++) {
		kvblk_kvstore_op &op = b->ops[i];
		op.key = b->keybuf.data() + koff;
		op.key_len = uint32_t(std::min<size_t>(klen[i], UINT32_MAX));
		koff += klen[i];
		op.buf_id = KVBLK_BUF_NONE;
		op.tag = i;
		if (put_meta && mlen[i]) {
			op.meta = const_cast<char *>(b->metabuf.data()) + moff;
			op.meta_len = uint32_t(std::min<size_t>(mlen[i], UINT32_MAX));
			moff += mlen[i];
		}
		if (b->meta_room) {
			op.meta = b->meta_out.data() + size_t(b->meta_room) * i;
			op.meta_len = b->meta_room;
		}
	}
	if (!io)
		return b;

	const bool get = kind == KVBLK_KVSTORE_GET;
	try {
		for (size_t i = 0; i < n; i++) {
			kvblk_kvstore_op &op = b->ops[i];
			py::handle d = dseq[i];
			if (py::isinstance<py::tuple>(d) && py::len(d) == 3) {
				/* (buf_id, offset, nbytes): a buffer registered on the store (kvblk/_kvstore.py) */
				py::tuple t = py::reinterpret_borrow<py::tuple>(d);
				op.buf_id = t[0].cast<uint32_t>();
				op.addr = t[1].cast<uint64_t>();
				op.length = t[2].cast<uint64_t>();
				continue;
			}
			auto h = resolve_dest(d, get, int64_t(i));
			b->holders.push_back(h);
			op.length = h->nbytes;
			if (h->kind == KVBLK_MEM_HOST) {
				op.addr = h->addr;
				continue;
			}
			if (!get)
				raise_error(-EOPNOTSUPP,
					    "sources[" + std::to_string(i) + "] is device memory (" + h->source +
						    "): puts come from host memory",
					    int64_t(i));
			/* Device memory: registered on the store's kvblk_dev for this batch. */
			Store::Use u(self);
			uint32_t id = KVBLK_BUF_NONE;
			std::string why;
			const int kind_mem = h->kind;
			const uint64_t addr = h->addr, len = h->nbytes;
			int ret;
			{
				py::gil_scoped_release release; /* pins, or loads the CUDA runtime (staged) */
				ret = kvblk_register_buffer(kvblk_kvstore_dev(u.st), kind_mem,
							    reinterpret_cast<void *>(uintptr_t(addr)), len, &id);
				if (ret < 0)
					why = last_error();
			}
			if (ret < 0)
				raise_call_error(ret, ("dests[" + std::to_string(i) + "]: kvblk_register_buffer").c_str(), why,
						 int64_t(i));
			b->temp_ids.push_back(id);
			b->device_ops++;
			op.buf_id = id;
			op.addr = 0;
		}
	} catch (...) {
		b->release(self);
		throw;
	}
	return b;
}

py::tuple cqe_tuple(const kvblk_cqe &c)
{
	return py::make_tuple(c.ticket, c.user_data, c.status, c.failed, c.index, c.bytes, c.tag, c.path, c.backend,
			      c.elapsed_ns);
}

uint64_t submit(Store &self, Batch &b, uint32_t flags, uint64_t user_data)
{
	if (b.ops.empty())
		throw py::value_error("a batch needs at least one key");
	Store::Use u(self);
	kvblk_kvstore_submit_opts o;
	kvblk_kvstore_submit_opts_init(&o, sizeof(o));
	o.flags = flags;
	o.user_data = user_data;
	o.results = b.results.data();
	uint64_t ticket = 0;
	std::string why;
	const auto n = uint32_t(b.ops.size());
	/* may wait for a batch slot (max_batches) unless NONBLOCK */
	int ret = nogil([&] { return kvblk_kvstore_submit(u.st, b.kind, b.ops.data(), n, &o, &ticket); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_kvstore_submit", why, o.bad_index);
	return ticket;
}

/* The synchronous call of b.kind: the number of keys with status 0. */
int run(Store &self, Batch &b)
{
	if (b.ops.empty())
		throw py::value_error("a batch needs at least one key");
	Store::Use u(self);
	std::string why;
	const auto n = uint32_t(b.ops.size());
	int ret = nogil(
		[&] {
			switch (b.kind) {
			case KVBLK_KVSTORE_GET:
				return kvblk_kvstore_get(u.st, b.ops.data(), n, b.results.data());
			case KVBLK_KVSTORE_PUT:
				return kvblk_kvstore_put(u.st, b.ops.data(), n, b.results.data());
			case KVBLK_KVSTORE_EXISTS:
				return kvblk_kvstore_exists(u.st, b.ops.data(), n, b.results.data());
			default:
				return kvblk_kvstore_delete(u.st, b.ops.data(), n, b.results.data());
			}
		},
		why);
	if (ret < 0) {
		/* A rejected batch: the rejected op's result holds its error, the others -ECANCELED. */
		int64_t bad = -1;
		for (size_t i = 0; i < b.results.size(); i++)
			if (b.results[i].status && b.results[i].status != -ECANCELED) {
				bad = int64_t(i);
				break;
			}
		raise_call_error(ret, "kvblk_kvstore_submit", why, bad);
	}
	return ret;
}

/* kvblk_kvstore_wait(): the completion tuple, or None when @timeout_ns (< 0: none) passed. */
py::object wait(Store &self, uint64_t ticket, int64_t timeout_ns)
{
	int64_t left = timeout_ns;
	for (;;) {
		const int64_t slice = (left < 0 || left > kSliceNs) ? kSliceNs : left;
		kvblk_cqe c{};
		std::string why;
		int ret;
		{
			Store::Use u(self);
			ret = nogil([&] { return kvblk_kvstore_wait(u.st, ticket, slice, &c); }, why);
		}
		if (ret >= 0)
			return cqe_tuple(c);
		if (ret != -ETIME)
			raise_call_error(ret, "kvblk_kvstore_wait", why);
		if (left >= 0) {
			left -= slice;
			if (left <= 0)
				return py::none();
		}
		if (PyErr_CheckSignals() != 0)
			throw py::error_already_set();
	}
}

/* kvblk_kvstore_reap(): a list of completion tuples (empty when @timeout_ns passed). */
py::list reap(Store &self, uint32_t max, uint32_t min_complete, int64_t timeout_ns)
{
	if (max == 0)
		throw py::value_error("max must be at least 1");
	std::vector<kvblk_cqe> cqes(max);
	int64_t left = min_complete ? timeout_ns : 0;
	for (;;) {
		const int64_t slice = (left < 0 || left > kSliceNs) ? kSliceNs : left;
		std::string why;
		int ret;
		{
			Store::Use u(self);
			const uint32_t mc = std::min(min_complete, max);
			ret = nogil([&] { return kvblk_kvstore_reap(u.st, cqes.data(), max, mc, slice); }, why);
		}
		if (ret < 0)
			raise_call_error(ret, "kvblk_kvstore_reap", why);
		if (ret > 0 || left == 0) {
			py::list out;
			for (int i = 0; i < ret; i++)
				out.append(cqe_tuple(cqes[size_t(i)]));
			return out;
		}
		if (left > 0) {
			left -= slice;
			if (left <= 0)
				left = 0;
		}
		if (PyErr_CheckSignals() != 0)
			throw py::error_already_set();
	}
}

int event_fd(Store &self)
{
	Store::Use u(self);
	const int fd = kvblk_kvstore_event_fd(u.st);
	if (fd < 0)
		raise_call_error(fd, "kvblk_kvstore_event_fd", store_error());
	return fd;
}

std::string uuid_str(const uint8_t (&u)[16])
{
	static const char hex[] = "0123456789abcdef";
	std::string s;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			s += '-';
		s += hex[u[i] >> 4];
		s += hex[u[i] & 15];
	}
	return s;
}

py::dict get_info(Store &self)
{
	Store::Use u(self);
	kvblk_kvstore_info i{};
	i.info_size = sizeof(i);
	std::string why;
	int ret = nogil([&] { return kvblk_kvstore_get_info(u.st, &i); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_kvstore_get_info", why);
	py::dict d;
	d["format_version"] = i.format_version;
	d["drives"] = i.drives;
	d["drives_ok"] = i.drives_ok;
	d["uuid"] = uuid_str(i.uuid);
	d["max_key_bytes"] = i.max_key_bytes;
	d["max_meta_bytes"] = i.max_meta_bytes;
	d["objects"] = i.objects;
	d["bytes_stored"] = i.bytes_stored;
	d["journal_bytes"] = i.journal_bytes;
	d["readonly"] = bool(i.flags & KVBLK_KVSTORE_OPEN_RDONLY);
	d["degraded_open"] = bool(i.flags & KVBLK_KVSTORE_OPEN_DEGRADED);
	d["when_full"] = i.when_full == KVBLK_KVSTORE_REFUSE ? "refuse" : "evict";
	py::list classes;
	for (uint32_t c = 0; c < i.nr_classes && c < KVBLK_KVSTORE_MAX_CLASSES; c++) {
		py::dict cd;
		cd["slot_bytes"] = i.classes[c].slot_bytes;
		cd["slots"] = i.classes[c].slots;
		cd["slots_free"] = i.classes[c].slots_free;
		cd["objects"] = i.classes[c].objects;
		classes.append(cd);
	}
	d["classes"] = classes;
	/* What the store's kvblk_dev says (backend, limits). */
	kvblk_dev_info di{};
	di.info_size = sizeof(di);
	if (kvblk_get_info(kvblk_kvstore_dev(u.st), &di) == 0) {
		d["backend"] = kvblk_backend_name(int(di.backend));
		d["backend_reason"] = std::string(di.backend_reason, strnlen(di.backend_reason, sizeof(di.backend_reason)));
		d["max_descs"] = di.max_descs;
		d["mem_align"] = di.mem_align;
		d["logical_block_size"] = di.logical_block_size;
		d["max_batches_dev"] = di.max_batches;
		d["queue_depth"] = di.queue_depth;
		d["workers"] = di.workers;
	}
	return d;
}

const char *drive_state(uint32_t s)
{
	switch (s) {
	case KVBLK_KVSTORE_DRIVE_OK:
		return "ok";
	case KVBLK_KVSTORE_DRIVE_FAILED:
		return "failed";
	case KVBLK_KVSTORE_DRIVE_MISSING:
		return "missing";
	default:
		return "unknown";
	}
}

py::dict drive_dict(const struct kvblk_kvstore_drive_info &i)
{
	py::dict d;
	d["index"] = i.index;
	d["state"] = drive_state(i.state);
	d["uuid"] = uuid_str(i.uuid);
	d["path"] = std::string(i.path, strnlen(i.path, sizeof(i.path)));
	d["bytes"] = i.bytes;
	d["data_bytes"] = i.data_bytes;
	d["objects"] = i.objects;
	d["slots"] = i.slots;
	d["slots_free"] = i.slots_free;
	d["bytes_read"] = i.bytes_read;
	d["bytes_written"] = i.bytes_written;
	d["read_errors"] = i.read_errors;
	d["write_errors"] = i.write_errors;
	d["why_failed"] = std::string(i.why_failed, strnlen(i.why_failed, sizeof(i.why_failed)));
	return d;
}

py::dict drive_info(Store &self, uint32_t index)
{
	Store::Use u(self);
	struct kvblk_kvstore_drive_info i{};
	i.info_size = sizeof(i);
	std::string why;
	int ret = nogil([&] { return kvblk_kvstore_get_drive_info(u.st, index, &i); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_kvstore_get_drive_info", why);
	return drive_dict(i);
}

py::dict stats_dict(const kvblk_kvstore_stats &s)
{
	py::dict d;
#define KVBLK_PY_STAT(f) d[#f] = s.f
	KVBLK_PY_STAT(gets);
	KVBLK_PY_STAT(puts);
	KVBLK_PY_STAT(exists);
	KVBLK_PY_STAT(deletes);
	KVBLK_PY_STAT(hits);
	KVBLK_PY_STAT(misses);
	KVBLK_PY_STAT(checksum_failures);
	KVBLK_PY_STAT(get_errors);
	KVBLK_PY_STAT(put_errors);
	KVBLK_PY_STAT(evictions);
	KVBLK_PY_STAT(evictions_dropped);
	KVBLK_PY_STAT(bytes_read);
	KVBLK_PY_STAT(bytes_written);
	KVBLK_PY_STAT(journal_commits);
	KVBLK_PY_STAT(checkpoints);
	KVBLK_PY_STAT(flushes);
	KVBLK_PY_STAT(degraded);
#undef KVBLK_PY_STAT
	return d;
}

py::dict get_stats(Store &self)
{
	Store::Use u(self);
	kvblk_kvstore_stats s{};
	s.stats_size = sizeof(s);
	std::string why;
	int ret = nogil([&] { return kvblk_kvstore_get_stats(u.st, &s); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_kvstore_get_stats", why);
	return stats_dict(s);
}

/* kvblk_kvstore_identify(): what drive @path's superblock says (no open, no lock). */
py::dict identify(const std::string &path)
{
	kvblk_kvstore_identity id{};
	id.identity_size = sizeof(id);
	std::string why;
	int ret = nogil([&] { return kvblk_kvstore_identify(path.c_str(), &id); }, why);
	if (ret < 0)
		raise_call_error(ret, ("kvblk_kvstore_identify " + path).c_str(), why);
	py::dict d;
	d["format_version"] = id.format_version;
	d["drive_index"] = id.drive_index;
	d["drive_count"] = id.drive_count;
	d["store_uuid"] = uuid_str(id.store_uuid);
	d["drive_uuid"] = uuid_str(id.drive_uuid);
	d["drive_bytes"] = id.drive_bytes;
	d["created_ns"] = id.created_ns;
	d["journal_bytes"] = id.journal_bytes;
	d["max_key_bytes"] = id.max_key_bytes;
	d["max_meta_bytes"] = id.max_meta_bytes;
	py::list classes;
	for (uint32_t c = 0; c < id.nr_classes && c < KVBLK_KVSTORE_MAX_CLASSES; c++) {
		py::dict cd;
		cd["slot_bytes"] = id.slot_bytes[c];
		cd["slots"] = id.slots[c];
		classes.append(cd);
	}
	d["classes"] = classes;
	d["live_pid"] = id.live_pid;
	d["superblocks_ok"] = id.superblocks_ok;
	return d;
}

/* kvblk_kvstore_peek_stats(): (stats, [drive dicts]) of the process that has the store open. */
py::tuple peek_stats(const std::string &path)
{
	kvblk_kvstore_stats s{};
	s.stats_size = sizeof(s);
	std::vector<struct kvblk_kvstore_drive_info> drives(KVBLK_KVSTORE_MAX_DRIVES);
	for (auto &d : drives)
		d.info_size = sizeof(d);
	std::string why;
	int ret = nogil(
		[&] { return kvblk_kvstore_peek_stats(path.c_str(), &s, drives.data(), uint32_t(drives.size())); },
		why);
	if (ret < 0)
		raise_call_error(ret, ("kvblk_kvstore_peek_stats " + path).c_str(), why);
	py::list dl;
	for (int k = 0; k < ret && k < int(drives.size()); k++)
		dl.append(drive_dict(drives[size_t(k)]));
	return py::make_tuple(stats_dict(s), dl);
}

void reset_stats(Store &self)
{
	Store::Use u(self);
	std::string why;
	int ret = nogil([&] { return kvblk_kvstore_reset_stats(u.st); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_kvstore_reset_stats", why);
}

py::tuple key_tuple(const kvblk_kvstore_key &k)
{
	return py::make_tuple(py::bytes(static_cast<const char *>(k.key), k.key_len), k.drive, k.length, k.gen);
}

constexpr uint32_t kKeysPerCall = 4096;

/* kvblk_kvstore_evicted() until empty: [(key bytes, drive, length, gen)], oldest first. */
py::list evicted(Store &self, size_t max_keys)
{
	py::list out;
	std::vector<kvblk_kvstore_key> keys(kKeysPerCall);
	std::vector<char> buf(size_t(kKeysPerCall) * KVBLK_KVSTORE_MAX_KEY);
	while (max_keys == 0 || py::len(out) < max_keys) {
		const uint32_t want = max_keys == 0 ? kKeysPerCall
						    : uint32_t(std::min<size_t>(kKeysPerCall, max_keys - py::len(out)));
		std::string why;
		int ret;
		{
			Store::Use u(self);
			ret = nogil([&] { return kvblk_kvstore_evicted(u.st, keys.data(), want, buf.data(), buf.size()); },
				    why);
		}
		if (ret < 0)
			raise_call_error(ret, "kvblk_kvstore_evicted", why);
		for (int i = 0; i < ret; i++)
			out.append(key_tuple(keys[size_t(i)]));
		if (ret < int(want))
			break;
	}
	return out;
}

/* One kvblk_kvstore_list() step: ([(key, drive, length, gen)], cursor); cursor 0 = walk over. */
py::tuple list_keys(Store &self, uint64_t cursor, uint32_t max)
{
	if (max == 0)
		throw py::value_error("max must be at least 1");
	std::vector<kvblk_kvstore_key> keys(max);
	std::vector<char> buf(size_t(max) * KVBLK_KVSTORE_MAX_KEY);
	std::string why;
	int ret;
	{
		Store::Use u(self);
		ret = nogil([&] { return kvblk_kvstore_list(u.st, &cursor, keys.data(), max, buf.data(), buf.size()); },
			    why);
	}
	if (ret < 0)
		raise_call_error(ret, "kvblk_kvstore_list", why);
	py::list out;
	for (int i = 0; i < ret; i++)
		out.append(key_tuple(keys[size_t(i)]));
	return py::make_tuple(out, cursor);
}

py::dict check(Store &self, uint32_t flags)
{
	Store::Use u(self);
	kvblk_kvstore_check_report r{};
	r.report_size = sizeof(r);
	std::string why;
	/* reads every object with KVBLK_KVSTORE_CHECK_DATA */
	int ret = nogil([&] { return kvblk_kvstore_check(u.st, flags, &r); }, why);
	if (ret < 0)
		raise_call_error(ret, "kvblk_kvstore_check", why);
	py::dict d;
	d["bad"] = ret;
	d["objects"] = r.objects;
	d["bad_objects"] = r.bad_objects;
	d["bytes_checked"] = r.bytes_checked;
	d["repaired"] = r.repaired;
	d["superblocks_bad"] = r.superblocks_bad;
	d["checkpoints_bad"] = r.checkpoints_bad;
	d["journal_tail_discarded"] = r.journal_tail_discarded;
	d["first_problem"] = std::string(r.first_problem, strnlen(r.first_problem, sizeof(r.first_problem)));
	return d;
}

/* kvblk_register_buffer() on the store's kvblk_dev: (id, note). */
py::tuple register_buffer(Store &self, int kind, uint64_t addr, uint64_t len)
{
	Store::Use u(self);
	uint32_t id = KVBLK_BUF_NONE;
	int ret;
	std::string why;
	{
		py::gil_scoped_release release;
		ret = kvblk_register_buffer(kvblk_kvstore_dev(u.st), kind, reinterpret_cast<void *>(uintptr_t(addr)), len,
					    &id);
		why = last_error();
	}
	if (ret < 0)
		raise_call_error(ret, "kvblk_register_buffer", why);
	return py::make_tuple(id, why);
}

void unregister_buffer(Store &self, uint32_t id)
{
	Store::Use u(self);
	int ret;
	std::string why;
	{
		py::gil_scoped_release release;
		ret = kvblk_unregister_buffer(kvblk_kvstore_dev(u.st), id);
		if (ret < 0)
			why = last_error();
	}
	if (ret < 0)
		raise_call_error(ret, "kvblk_unregister_buffer", why);
}

/* Result columns of a batch: (status int32[n], meta_len uint32[n], length uint64[n], drive uint32[n],
 * room uint64[n]: the op's length, the destination's bytes for a get). */
py::tuple columns(const Batch &b)
{
	const size_t n = b.results.size();
	py::array_t<int32_t> st(n);
	py::array_t<uint32_t> ml(n);
	py::array_t<uint64_t> len(n);
	py::array_t<uint32_t> drv(n);
	py::array_t<uint64_t> room(n);
	auto r2 = room.mutable_unchecked<1>();
	auto s = st.mutable_unchecked<1>();
	auto m = ml.mutable_unchecked<1>();
	auto l = len.mutable_unchecked<1>();
	auto d = drv.mutable_unchecked<1>();
	for (size_t i = 0; i < n; i++) {
		const kvblk_kvstore_result &r = b.results[i];
		s(py::ssize_t(i)) = r.status;
		m(py::ssize_t(i)) = r.meta_len;
		l(py::ssize_t(i)) = r.length;
		d(py::ssize_t(i)) = r.drive;
		r2(py::ssize_t(i)) = b.ops[i].length;
	}
	return py::make_tuple(st, ml, len, drv, room);
}

/* Key @i's metadata as a get or exists found it (cut to meta_room), or None when the key was not found. */
py::object meta(const Batch &b, size_t i)
{
	if (i >= b.results.size())
		throw py::index_error("key index " + std::to_string(i) + " out of range");
	if (!b.meta_room)
		return py::none();
	const kvblk_kvstore_result &r = b.results[i];
	if (r.status == -ENOENT || r.status == -ECANCELED || r.drive == UINT32_MAX)
		return py::none();
	const size_t n = std::min<size_t>(r.meta_len, b.meta_room);
	return py::bytes(reinterpret_cast<const char *>(b.meta_out.data() + size_t(b.meta_room) * i), n);
}

} // namespace

void bind_kvstore(py::module_ &m)
{
	m.attr("KVSTORE_GET") = KVBLK_KVSTORE_GET;
	m.attr("KVSTORE_PUT") = KVBLK_KVSTORE_PUT;
	m.attr("KVSTORE_EXISTS") = KVBLK_KVSTORE_EXISTS;
	m.attr("KVSTORE_DELETE") = KVBLK_KVSTORE_DELETE;
	m.attr("KVSTORE_SUBMIT_NONBLOCK") = KVBLK_KVSTORE_SUBMIT_NONBLOCK;
	m.attr("KVSTORE_SUBMIT_PRIORITY") = KVBLK_KVSTORE_SUBMIT_PRIORITY;
	m.attr("KVSTORE_SUBMIT_VERIFY") = KVBLK_KVSTORE_SUBMIT_VERIFY;
	m.attr("KVSTORE_CREATE_FORCE") = KVBLK_KVSTORE_CREATE_FORCE;
	m.attr("KVSTORE_OPEN_RDONLY") = KVBLK_KVSTORE_OPEN_RDONLY;
	m.attr("KVSTORE_OPEN_DEGRADED") = KVBLK_KVSTORE_OPEN_DEGRADED;
	m.attr("KVSTORE_OPEN_RECOVER") = KVBLK_KVSTORE_OPEN_RECOVER;
	m.attr("KVSTORE_EVICT_LRU") = KVBLK_KVSTORE_EVICT_LRU;
	m.attr("KVSTORE_REFUSE") = KVBLK_KVSTORE_REFUSE;
	m.attr("KVSTORE_CHECK_DATA") = KVBLK_KVSTORE_CHECK_DATA;
	m.attr("KVSTORE_CHECK_REPAIR") = KVBLK_KVSTORE_CHECK_REPAIR;
	m.attr("KVSTORE_MAX_DRIVES") = KVBLK_KVSTORE_MAX_DRIVES;
	m.attr("KVSTORE_MAX_CLASSES") = KVBLK_KVSTORE_MAX_CLASSES;
	m.attr("KVSTORE_MAX_KEY") = KVBLK_KVSTORE_MAX_KEY;
	m.attr("KVSTORE_MAX_META") = KVBLK_KVSTORE_MAX_META;
	m.attr("KVSTORE_DEFAULT_MAX_KEY") = KVBLK_KVSTORE_DEFAULT_MAX_KEY;
	m.attr("KVSTORE_DEFAULT_MAX_META") = KVBLK_KVSTORE_DEFAULT_MAX_META;
	m.attr("KVSTORE_SLOT_ALIGN") = KVBLK_KVSTORE_SLOT_ALIGN;
	m.attr("KVSTORE_FORMAT_VERSION") = KVBLK_KVSTORE_FORMAT_VERSION;
	m.attr("KVSTORE_MAX_BATCHES") = KVBLK_MAX_BATCHES;
	m.attr("MAX_BOUNCE_BYTES") = uint64_t(KVBLK_MAX_BOUNCE_BYTES);

	m.def(
		"kvstore_crc32c",
		[](py::buffer data, uint32_t crc) {
			py::buffer_info bi = data.request();
			const auto *p = bi.ptr;
			const size_t n = size_t(bi.size) * size_t(bi.itemsize);
			py::gil_scoped_release release;
			return kvblk_kvstore_crc32c(crc, p, n);
		},
		py::arg("data"), py::arg("crc") = 0, "kvblk_kvstore_crc32c(): the store's object checksum (CRC32C).");

	m.def("kvstore_identify", &identify, py::arg("path"), "kvblk_kvstore_identify() as a dict.");
	m.def("kvstore_peek_stats", &peek_stats, py::arg("path"),
	      "kvblk_kvstore_peek_stats(): (stats dict, [drive dicts]).");

	py::class_<Batch>(m, "KVStoreBatch", "One store batch as the C API takes it (kvblk/_kvstore.py makes them).")
		.def_property_readonly("kind", [](const Batch &b) { return b.kind; })
		.def_property_readonly("device_ops", [](const Batch &b) { return b.device_ops; },
				       "Keys whose destination is device memory (registered for this batch).")
		.def("__len__", &Batch::size)
		.def("columns", &columns, "(status, meta_len, length, drive, room) arrays.")
		.def("meta", &meta, py::arg("i"), "Key i's metadata (bytes), or None.")
		.def("release", &Batch::release, py::arg("store"),
		     "Unregister the buffers registered for the batch and give back its views (the batch is over).");

	py::class_<Store>(m, "KVStore", "A kvblk_kvstore handle (use kvblk.KVStore).")
		.def(py::init<bool, const std::vector<std::string> &, const std::vector<std::pair<uint64_t, uint32_t>> &,
			      uint64_t, uint64_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t,
			      uint32_t, uint32_t, uint64_t, uint64_t>(),
		     py::arg("create"), py::arg("paths"), py::arg("classes"), py::arg("file_bytes"),
		     py::arg("journal_bytes"), py::arg("max_key_bytes"), py::arg("max_meta_bytes"),
		     py::arg("create_flags"), py::arg("open_flags"), py::arg("backend"), py::arg("queue_depth"),
		     py::arg("workers"), py::arg("when_full"), py::arg("max_batches"), py::arg("drive_budget_bytes"),
		     py::arg("max_cmd_bytes"))
		.def("close", &Store::close, "kvblk_kvstore_close(); waits for calls in progress on other threads.")
		.def_property_readonly("closed", &Store::closed)
		.def_property_readonly("forked", &Store::forked, "True in a child made by fork() after the open.")
		.def_property_readonly(
			"_handle", [](Store &s) { return uint64_t(reinterpret_cast<uintptr_t>(s.st_)); },
			"The kvblk_kvstore pointer as an int (0 when closed), for C code on the same store "
			"(python/bench); never use it after close().")
		.def("make_batch", &make_batch, py::arg("kind"), py::arg("keys"), py::arg("dests") = py::none(),
		     py::arg("metas") = py::none(), py::arg("meta_room") = 0)
		.def("submit", &submit, py::arg("batch"), py::arg("flags") = 0, py::arg("user_data") = 0,
		     "kvblk_kvstore_submit(); returns the ticket.")
		.def("run", &run, py::arg("batch"), "kvblk_kvstore_get/put/exists/delete(); keys with status 0.")
		.def("wait", &wait, py::arg("ticket"), py::arg("timeout_ns") = -1,
		     "kvblk_kvstore_wait(): the completion tuple, or None when the time ran out.")
		.def("reap", &reap, py::arg("max"), py::arg("min_complete") = 0, py::arg("timeout_ns") = -1,
		     "kvblk_kvstore_reap(): a list of completion tuples.")
		.def("event_fd", &event_fd)
		.def("info", &get_info)
		.def("drive_info", &drive_info, py::arg("index"))
		.def("stats", &get_stats)
		.def("reset_stats", &reset_stats)
		.def("evicted", &evicted, py::arg("max_keys") = 0)
		.def("list_keys", &list_keys, py::arg("cursor"), py::arg("max"))
		.def("check", &check, py::arg("flags") = 0)
		.def("register_buffer", &register_buffer, py::arg("kind"), py::arg("addr"), py::arg("nbytes"))
		.def("unregister_buffer", &unregister_buffer, py::arg("id"));
}

} // namespace kvblkpy

// SPDX-License-Identifier: MIT
/*
 * kvblk.hpp: header-only C++ wrapper of libkvblk (C++17 or later).
 *
 *   kvblk::Options o;
 *   o.backend = kvblk::Backend::uring;
 *   kvblk::Device dev("/dev/nvme0n1", o);             // throws kvblk::Error
 *   kvblk::Buffer buf = dev.register_buffer(mem, bytes); // unregistered when it goes out of scope
 *   std::vector<kvblk_desc> d = {buf.desc(0, dev_off, len, tag)};
 *   std::vector<kvblk_result> r(d.size());
 *   std::size_t ok = dev.load_many(d, r);               // per-object status in r[i].status
 *
 * Errors of a whole call throw kvblk::Error, a std::system_error whose code() is the errno
 * (std::generic_category()) and whose what() carries kvblk_last_error(). Per-object failures
 * of load_many()/store_many() do not throw: they are in the results, and the return value
 * counts the objects that succeeded.
 *
 * Asynchronous batches (0.3):
 *
 *   kvblk::Ticket t = dev.submit(d, {.results = r, .user_data = 7}); // returns at once
 *   ... std::vector<kvblk_cqe> c(16); std::size_t n = dev.reap(c, 1); // or dev.wait(t)
 *
 * Lifetimes: a Buffer must not outlive the Device it was registered on. The destinations
 * and the results of a submitted batch belong to the library until its completion is
 * reaped or waited for (Device::close() cancels what is queued and waits for the rest).
 * close() (and the destructor) must not race any other call: threads waiting in reap()
 * or wait() are woken with shutdown() first (they throw Error ECANCELED), then joined.
 */
#ifndef KVBLK_KVBLK_HPP
#define KVBLK_KVBLK_HPP

#include <kvblk/kvblk.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <type_traits>
#include <optional>
#include <utility>

namespace kvblk {

/** kvblk::Error - a failed call: code() is the errno, what() names the call and the reason. */
class Error : public std::system_error {
public:
	/* @neg_errno: the call's return value (-errno); @what: what was being done. */
	Error(int neg_errno, const std::string &what)
		: std::system_error(neg_errno < 0 ? -neg_errno : neg_errno, std::generic_category(), what)
	{
	}

	/** The positive errno value. */
	[[nodiscard]] int errno_value() const noexcept { return code().value(); }
};

namespace detail {

/* Throw Error for a negative return @rc of @call, with kvblk_last_error() in the message. */
[[noreturn]] inline void throw_error(int rc, const char *call)
{
	std::string msg(call);
	const char *why = kvblk_last_error();
	if (why && *why) {
		msg += ": ";
		msg += why;
	}
	throw Error(rc, msg);
}

inline int check(int rc, const char *call)
{
	if (rc < 0)
		throw_error(rc, call);
	return rc;
}

} // namespace detail

/** kvblk::Span - a pointer and a count; made from any contiguous container (vector, array, std::span). */
template <class T> class Span {
public:
	constexpr Span() noexcept = default;
	constexpr Span(T *data, std::size_t size) noexcept : data_(data), size_(size) {}
	template <std::size_t N> constexpr Span(T (&a)[N]) noexcept : data_(a), size_(N) {}
	template <class C, class = std::enable_if_t<std::is_convertible_v<
				   decltype(std::declval<C &>().data()), T *>>>
	constexpr Span(C &&c) noexcept(noexcept(c.data())) : data_(c.data()), size_(c.size())
	{
	}

	[[nodiscard]] constexpr T *data() const noexcept { return data_; }
	[[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
	[[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }
	[[nodiscard]] constexpr T &operator[](std::size_t i) const noexcept { return data_[i]; }
	[[nodiscard]] constexpr T *begin() const noexcept { return data_; }
	[[nodiscard]] constexpr T *end() const noexcept { return data_ + size_; }

private:
	T *data_ = nullptr;
	std::size_t size_ = 0;
};

/** enum kvblk_backend as a scoped enum. */
enum class Backend : uint32_t {
	automatic = KVBLK_BACKEND_AUTO,
	uring = KVBLK_BACKEND_URING,
	threadpool = KVBLK_BACKEND_THREADPOOL,
	psync = KVBLK_BACKEND_PSYNC,
	kmod = KVBLK_BACKEND_KMOD,
	uring_cmd = KVBLK_BACKEND_URING_CMD,
};

/** The name of a backend ("uring", ...). */
[[nodiscard]] inline const char *to_string(Backend b) noexcept
{
	return kvblk_backend_name(int(b));
}

/** enum kvblk_mem_kind as a scoped enum. */
enum class MemKind : int { host = KVBLK_MEM_HOST, cuda = KVBLK_MEM_CUDA, dmabuf = KVBLK_MEM_DMABUF };

/** kvblk::Options - kvblk_open_opts with names; 0 means the library default. */
struct Options {
	Backend backend = Backend::automatic;
	uint32_t queue_depth = 0;
	uint32_t workers = 0;
	uint64_t max_cmd_bytes = 0;
	uint32_t max_descs = 0;
	uint32_t eagain_retries = 0;
	bool write = false;		/* KVBLK_OPEN_WRITE */
	bool buffered = false;		/* KVBLK_OPEN_BUFFERED */
	bool create = false;		/* KVBLK_OPEN_CREATE with create_bytes */
	uint64_t create_bytes = 0;

	/** The C option struct. */
	[[nodiscard]] kvblk_open_opts to_c() const noexcept
	{
		kvblk_open_opts o;
		kvblk_open_opts_init(&o, sizeof(o));
		o.backend = uint32_t(backend);
		o.queue_depth = queue_depth;
		o.workers = workers;
		o.flags = (write ? KVBLK_OPEN_WRITE : 0u) | (buffered ? KVBLK_OPEN_BUFFERED : 0u) |
			  (create ? KVBLK_OPEN_CREATE : 0u);
		o.max_cmd_bytes = max_cmd_bytes;
		o.max_descs = max_descs;
		o.eagain_retries = eagain_retries;
		o.create_bytes = create_bytes;
		return o;
	}
};

/** kvblk::Info - kvblk_dev_info with accessors. */
class Info {
public:
	explicit Info(const kvblk_dev_info &i) noexcept : i_(i) {}
	[[nodiscard]] Backend backend() const noexcept { return Backend(i_.backend); }
	[[nodiscard]] std::string backend_reason() const { return i_.backend_reason; }
	[[nodiscard]] bool block_device() const noexcept { return i_.flags & KVBLK_INFO_BLOCKDEV; }
	[[nodiscard]] bool buffered() const noexcept { return i_.flags & KVBLK_INFO_BUFFERED; }
	[[nodiscard]] bool writable() const noexcept { return i_.flags & KVBLK_INFO_WRITABLE; }
	[[nodiscard]] uint32_t logical_block_size() const noexcept { return i_.logical_block_size; }
	[[nodiscard]] uint32_t mem_align() const noexcept { return i_.mem_align; }
	[[nodiscard]] uint64_t capacity() const noexcept { return i_.capacity; }
	[[nodiscard]] uint64_t max_cmd_bytes() const noexcept { return i_.max_cmd_bytes; }
	[[nodiscard]] uint32_t queue_depth() const noexcept { return i_.queue_depth; }
	[[nodiscard]] uint32_t workers() const noexcept { return i_.workers; }
	[[nodiscard]] uint32_t max_descs() const noexcept { return i_.max_descs; }
	[[nodiscard]] const kvblk_dev_info &raw() const noexcept { return i_; }

private:
	kvblk_dev_info i_;
};

/** A descriptor into a plain host pointer. */
[[nodiscard]] inline kvblk_desc desc_to_pointer(void *mem, uint64_t dev_offset, uint64_t length, uint64_t tag = 0) noexcept
{
	return kvblk_desc{dev_offset, length, uint64_t(reinterpret_cast<uintptr_t>(mem)), KVBLK_BUF_NONE, 0, tag};
}

/** A descriptor into registered buffer @buf_id at @buf_offset. */
[[nodiscard]] inline kvblk_desc desc_to_buffer(uint32_t buf_id, uint64_t buf_offset, uint64_t dev_offset,
					       uint64_t length, uint64_t tag = 0) noexcept
{
	return kvblk_desc{dev_offset, length, buf_offset, buf_id, 0, tag};
}

/** kvblk::Ticket - a submitted batch (kvblk_submit()'s ticket; never 0 for a real one). */
struct Ticket {
	uint64_t id = 0;

	[[nodiscard]] explicit operator bool() const noexcept { return id != 0; }
	friend bool operator==(Ticket a, Ticket b) noexcept { return a.id == b.id; }
	friend bool operator!=(Ticket a, Ticket b) noexcept { return a.id != b.id; }
};

/**
 * kvblk::SubmitOptions - kvblk_submit_opts with names (C++20 designated initializers work:
 * {.results = r, .priority = true}).
 * @results:    empty, or one kvblk_result per descriptor, written as objects complete; must
 *              stay valid until the batch's completion is reaped or waited for.
 * @user_data:  returned in every kvblk_cqe of the batch.
 * @store:      KVBLK_SUBMIT_STORE;  @priority: KVBLK_SUBMIT_PRIORITY;
 * @nonblock:   KVBLK_SUBMIT_NONBLOCK (submit() then throws Error with EAGAIN at max_batches);
 * @per_object: KVBLK_SUBMIT_PER_OBJECT.
 */
struct SubmitOptions {
	Span<kvblk_result> results = {};
	uint64_t user_data = 0;
	bool store = false;
	bool priority = false;
	bool nonblock = false;
	bool per_object = false;
};

/** kvblk::Buffer - a registered buffer, unregistered on destruction. Move-only. */
class Buffer {
public:
	Buffer() noexcept = default;
	Buffer(kvblk_dev *dev, uint32_t id, void *addr, uint64_t len) noexcept
		: dev_(dev), id_(id), addr_(addr), len_(len)
	{
	}
	Buffer(const Buffer &) = delete;
	Buffer &operator=(const Buffer &) = delete;
	Buffer(Buffer &&o) noexcept { swap(o); }
	Buffer &operator=(Buffer &&o) noexcept
	{
		if (this != &o) {
			reset();
			swap(o);
		}
		return *this;
	}
	~Buffer() noexcept { reset(); }

	/** Unregister now (errors ignored); the Buffer becomes empty. */
	void reset() noexcept
	{
		if (dev_)
			(void)kvblk_unregister_buffer(dev_, id_);
		dev_ = nullptr;
		id_ = KVBLK_BUF_NONE;
	}

	/** Give up ownership: the id stays registered until the caller unregisters it. */
	[[nodiscard]] uint32_t release() noexcept
	{
		uint32_t id = id_;
		dev_ = nullptr;
		id_ = KVBLK_BUF_NONE;
		return id;
	}

	[[nodiscard]] uint32_t id() const noexcept { return id_; }
	[[nodiscard]] void *data() const noexcept { return addr_; }
	[[nodiscard]] uint64_t size() const noexcept { return len_; }
	[[nodiscard]] explicit operator bool() const noexcept { return dev_ != nullptr; }

	/** A descriptor for @length bytes at @dev_offset into this buffer at @buf_offset. */
	[[nodiscard]] kvblk_desc desc(uint64_t buf_offset, uint64_t dev_offset, uint64_t length,
				      uint64_t tag = 0) const noexcept
	{
		return desc_to_buffer(id_, buf_offset, dev_offset, length, tag);
	}

private:
	void swap(Buffer &o) noexcept
	{
		std::swap(dev_, o.dev_);
		std::swap(id_, o.id_);
		std::swap(addr_, o.addr_);
		std::swap(len_, o.len_);
	}

	kvblk_dev *dev_ = nullptr;
	uint32_t id_ = KVBLK_BUF_NONE;
	void *addr_ = nullptr;
	uint64_t len_ = 0;
};

/** kvblk::Device - an opened block device or file, closed on destruction. Move-only. */
class Device {
public:
	Device() noexcept = default;

	/** Open @path (throws Error). */
	explicit Device(const std::string &path, const Options &opts = Options())
	{
		const kvblk_open_opts o = opts.to_c();
		detail::check(kvblk_open(path.c_str(), &o, &dev_), "kvblk_open");
	}

	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;
	Device(Device &&o) noexcept : dev_(std::exchange(o.dev_, nullptr)) {}
	Device &operator=(Device &&o) noexcept
	{
		if (this != &o) {
			close();
			dev_ = std::exchange(o.dev_, nullptr);
		}
		return *this;
	}
	~Device() noexcept { close(); }

	/** Close now; the Device becomes empty. */
	void close() noexcept
	{
		kvblk_close(dev_);
		dev_ = nullptr;
	}

	[[nodiscard]] kvblk_dev *get() const noexcept { return dev_; }
	[[nodiscard]] explicit operator bool() const noexcept { return dev_ != nullptr; }

	/** What the library reports about the device (throws Error). */
	[[nodiscard]] Info info() const
	{
		kvblk_dev_info i{};
		i.info_size = sizeof(i);
		detail::check(kvblk_get_info(dev_, &i), "kvblk_get_info");
		return Info(i);
	}

	/** Register [addr, addr+len) (throws Error). A memlock fallback is not an error: see stats(). */
	[[nodiscard]] Buffer register_buffer(void *addr, uint64_t len, MemKind kind = MemKind::host)
	{
		uint32_t id = KVBLK_BUF_NONE;
		detail::check(kvblk_register_buffer(dev_, int(kind), addr, len, &id), "kvblk_register_buffer");
		return Buffer(dev_, id, addr, len);
	}

	/**
	 * Register bytes [offset, offset+len) of dma-buf @fd (kmod backend only; throws Error).
	 * The Buffer's address is null: descriptors give offsets into the registered range.
	 */
	[[nodiscard]] Buffer register_dmabuf(int fd, uint64_t offset, uint64_t len)
	{
		uint32_t id = KVBLK_BUF_NONE;
		detail::check(kvblk_register_dmabuf(dev_, fd, offset, len, &id), "kvblk_register_dmabuf");
		return Buffer(dev_, id, nullptr, len);
	}

	/** Size the staged path's bounce-buffer pool (0: default); throws Error. */
	void set_staging(uint32_t buffers, uint64_t buffer_bytes)
	{
		detail::check(kvblk_set_staging(dev_, buffers, buffer_bytes), "kvblk_set_staging");
	}

	/**
	 * Load descs.size() objects; results must be as long. Returns the number that succeeded
	 * (per-object status in @results). Throws Error when the whole call is rejected
	 * (@results then hold the reason and -ECANCELED, and info->bad_index the bad one).
	 */
	std::size_t load_many(Span<const kvblk_desc> descs, Span<kvblk_result> results,
			      kvblk_batch_info *info = nullptr)
	{
		return batch(descs, results, info, kvblk_load_many, "kvblk_load_many");
	}

	/** Store descs.size() objects (device opened with Options::write); as load_many(). */
	std::size_t store_many(Span<const kvblk_desc> descs, Span<kvblk_result> results,
			       kvblk_batch_info *info = nullptr)
	{
		return batch(descs, results, info, kvblk_store_many, "kvblk_store_many");
	}

	/**
	 * Queue a batch and return its ticket at once (kvblk_submit()). Throws Error when the
	 * batch is refused (nothing queued; EAGAIN with nonblock at max_batches); the message
	 * names a bad descriptor's index.
	 */
	[[nodiscard]] Ticket submit(Span<const kvblk_desc> descs, const SubmitOptions &o = SubmitOptions())
	{
		if (!o.results.empty() && o.results.size() != descs.size())
			throw Error(-EINVAL, "kvblk_submit: " + std::to_string(descs.size()) + " descriptors but " +
						     std::to_string(o.results.size()) + " results");
		if (descs.size() > UINT32_MAX)
			throw Error(-E2BIG, "kvblk_submit: too many descriptors");
		kvblk_submit_opts c;
		kvblk_submit_opts_init(&c, sizeof(c));
		c.flags = (o.store ? KVBLK_SUBMIT_STORE : 0u) | (o.priority ? KVBLK_SUBMIT_PRIORITY : 0u) |
			  (o.nonblock ? KVBLK_SUBMIT_NONBLOCK : 0u) | (o.per_object ? KVBLK_SUBMIT_PER_OBJECT : 0u);
		c.user_data = o.user_data;
		c.results = o.results.empty() ? nullptr : o.results.data();
		Ticket t;
		detail::check(kvblk_submit(dev_, descs.data(), uint32_t(descs.size()), &c, &t.id), "kvblk_submit");
		return t;
	}

	/**
	 * Take up to cqes.size() completions, waiting until @min_complete are there or @timeout
	 * passed (negative: no limit); returns how many were taken (kvblk_reap(); throws Error).
	 */
	std::size_t reap(Span<kvblk_cqe> cqes, uint32_t min_complete = 0,
			 std::chrono::nanoseconds timeout = std::chrono::nanoseconds(-1))
	{
		const uint32_t max = cqes.size() > UINT32_MAX ? UINT32_MAX : uint32_t(cqes.size());
		return std::size_t(detail::check(kvblk_reap(dev_, cqes.data(), max, min_complete, timeout.count()),
						  "kvblk_reap"));
	}

	/** Wait for batch @t and take it; returns the objects that succeeded (throws Error). */
	std::size_t wait(Ticket t, kvblk_batch_info *info = nullptr)
	{
		return std::size_t(detail::check(kvblk_wait(dev_, t.id, -1, info), "kvblk_wait"));
	}

	/** As wait(), at most @timeout: std::nullopt when it passed (the batch stays outstanding). */
	std::optional<std::size_t> wait_for(Ticket t, std::chrono::nanoseconds timeout, kvblk_batch_info *info = nullptr)
	{
		const int rc = kvblk_wait(dev_, t.id, timeout.count(), info);
		if (rc == -ETIME)
			return std::nullopt;
		return std::size_t(detail::check(rc, "kvblk_wait"));
	}

	/**
	 * Wake every thread waiting in reap() or wait() on this Device and keep later ones from
	 * waiting (they throw Error ECANCELED unless there is something to take); submit() and
	 * load_many() throw it too (kvblk_shutdown(), since 0.4). Safe while other threads use the
	 * Device; call it, join them, then close(). Throws Error.
	 */
	void shutdown() { detail::check(kvblk_shutdown(dev_), "kvblk_shutdown"); }

	/** Cancel what of batch @t is not issued yet (kvblk_cancel(); throws Error). */
	void cancel(Ticket t) { detail::check(kvblk_cancel(dev_, t.id), "kvblk_cancel"); }

	/** The eventfd readable while completions wait (owned by the Device; throws Error). */
	[[nodiscard]] int event_fd() const { return detail::check(kvblk_event_fd(dev_), "kvblk_event_fd"); }

	/** The counters (throws Error). */
	[[nodiscard]] kvblk_stats stats() const
	{
		kvblk_stats s{};
		s.stats_size = sizeof(s);
		detail::check(kvblk_get_stats(dev_, &s), "kvblk_get_stats");
		return s;
	}

	/** Zero the counters (throws Error). */
	void reset_stats() { detail::check(kvblk_reset_stats(dev_), "kvblk_reset_stats"); }

	/** kvblk_flush(): completed stores to @target (KVBLK_TARGET_ALL: every writable one) made durable (throws Error). */
	void flush(uint32_t target = KVBLK_TARGET_ALL) { detail::check(kvblk_flush(dev_, target, 0), "kvblk_flush"); }

	/** kvblk_check_buffer(): 0 intact, or the -errno (-ESTALE, -EFAULT, ...); never throws. */
	[[nodiscard]] int check_buffer(const Buffer &b) noexcept { return kvblk_check_buffer(dev_, b.id()); }

private:
	using BatchFn = int (*)(kvblk_dev *, const kvblk_desc *, uint32_t, kvblk_result *, kvblk_batch_info *);

	std::size_t batch(Span<const kvblk_desc> descs, Span<kvblk_result> results, kvblk_batch_info *info,
			  BatchFn fn, const char *call)
	{
		if (results.size() != descs.size())
			throw Error(-EINVAL, std::string(call) + ": " + std::to_string(descs.size()) +
						     " descriptors but " + std::to_string(results.size()) + " results");
		if (descs.size() > UINT32_MAX)
			throw Error(-E2BIG, std::string(call) + ": too many descriptors");
		return std::size_t(detail::check(fn(dev_, descs.data(), uint32_t(descs.size()), results.data(), info),
						  call));
	}

	kvblk_dev *dev_ = nullptr;
};

} // namespace kvblk

#endif /* KVBLK_KVBLK_HPP */

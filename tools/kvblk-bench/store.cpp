// SPDX-License-Identifier: MIT
#include "store.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <kvblk/kvblk.h>

#include "progress.hpp"
#include "util.hpp"
#include "workload.hpp"

namespace kvblk_bench {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the pattern is defined on little-endian words");

void fill_pattern(void *buf, uint64_t object, uint64_t offset, size_t len) noexcept
{
	auto *p = static_cast<unsigned char *>(buf);
	const uint64_t base = object << 40;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = splitmix64(base ^ (offset + i));
		std::memcpy(p + i, &w, 8);
	}
}

Mismatch verify_pattern(const void *buf, uint64_t object, uint64_t offset, size_t len) noexcept
{
	const auto *p = static_cast<const unsigned char *>(buf);
	const uint64_t base = object << 40;
	constexpr size_t kChunk = 512; // bytes checked before branching
	Mismatch m;
	for (size_t c = 0; c < len; c += kChunk) {
		size_t n = std::min(kChunk, len - c);
		uint64_t diff = 0;
		for (size_t i = c; i < c + n; i += 8) {
			uint64_t w;
			std::memcpy(&w, p + i, 8);
			diff |= w ^ splitmix64(base ^ (offset + i));
		}
		if (diff == 0)
			continue;
		for (size_t i = c; i < c + n; i += 8) {
			uint64_t w, e = splitmix64(base ^ (offset + i));
			std::memcpy(&w, p + i, 8);
			if (w == e)
				continue;
			for (unsigned b = 0; b < 8; b++) {
				uint8_t got = uint8_t(w >> (8 * b)), want = uint8_t(e >> (8 * b));
				if (got == want)
					continue;
				if (m.bytes == 0) {
					m.first_offset = offset + i + b;
					m.expected = want;
					m.actual = got;
				}
				m.bytes++;
			}
		}
	}
	return m;
}

std::string meta_path(const std::string &store_path)
{
	return store_path + ".meta";
}

std::string chunk_dir(const std::string &store_path)
{
	return store_path + ".chunks";
}

namespace {

constexpr size_t kSampleBytes = 4096;
constexpr uint64_t kMaxSamples = 16;

struct Fd {
	int fd = -1;
	explicit Fd(int f) : fd(f) {}
	Fd(const Fd &) = delete;
	Fd &operator=(const Fd &) = delete;
	~Fd()
	{
		if (fd >= 0)
			::close(fd);
	}
};

// The sidecar: next to the store file, or in the chunk directory.
std::string sidecar(const Workload &wl)
{
	return wl.files ? wl.where() + "/kvblk-chunks.meta" : meta_path(wl.paths[0]);
}

// Read the first and last kSampleBytes (or the whole object when smaller)
// of up to kMaxSamples objects spread over the store and check them.
// Direct I/O when the file system allows it, so that a stale page cache
// cannot vouch for bytes that are not on the disk.
bool sample_matches(const Workload &wl, std::string &why)
{
	HostBuffer buf(kSampleBytes);
	if (!buf) {
		why = "out of memory";
		return false;
	}
	const uint64_t n = wl.objects(), samples = std::min(kMaxSamples, n);
	for (uint64_t s = 0; s < samples; s++) {
		const uint64_t obj = samples > 1 ? s * (n - 1) / (samples - 1) : 0;
		const std::string &path = wl.path_of(obj);
		int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (fd < 0 && errno == EINVAL)
			fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			why = fmt::format("cannot open {}: {}", path, std::strerror(errno));
			return false;
		}
		Fd guard(fd);
		const size_t chunk = size_t(std::min<uint64_t>(kSampleBytes, wl.length[obj]));
		for (uint64_t in_obj : {uint64_t(0), wl.length[obj] - chunk}) {
			ssize_t r = ::pread(fd, buf.data(), chunk, off_t(wl.offset[obj] + in_obj));
			if (r != ssize_t(chunk)) {
				why = r < 0 ? fmt::format("reading object {}: {}", obj, std::strerror(errno))
					    : fmt::format("object {} is short", obj);
				return false;
			}
			Mismatch m = verify_pattern(buf.data(), obj, in_obj, chunk);
			if (m.bytes) {
				why = fmt::format("object {} does not carry the pattern at byte {}", obj,
						  m.first_offset);
				return false;
			}
		}
	}
	why = fmt::format("pattern v{} found in {} sampled objects", kPatternVersion, samples);
	return true;
}

// Does the sidecar describe this store?
bool meta_matches(const Workload &wl, std::string &why)
{
	std::ifstream in(sidecar(wl));
	if (!in) {
		why = fmt::format("no {}", sidecar(wl));
		return false;
	}
	nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
	if (j.is_discarded() || !j.is_object()) {
		why = fmt::format("{} is not valid JSON", sidecar(wl));
		return false;
	}
	auto num = [&](const char *k) { return j.contains(k) && j[k].is_number_unsigned() ? j[k].get<uint64_t>() : 0; };
	if (num("pattern_version") != uint64_t(kPatternVersion)) {
		why = fmt::format("pattern version {} != {}", num("pattern_version"), kPatternVersion);
		return false;
	}
	const std::string layout = j.contains("layout") && j["layout"].is_string() ? j["layout"].get<std::string>() : "";
	if (layout != wl.layout_id()) {
		why = fmt::format("store has layout '{}', asked for '{}'", layout, wl.layout_id());
		return false;
	}
	for (uint64_t i = 0; i < (wl.files ? wl.objects() : 1); i++) {
		struct stat st;
		const uint64_t need = wl.files ? wl.length[i] : wl.store_bytes();
		if (::stat(wl.paths[i].c_str(), &st) != 0 || uint64_t(st.st_size) < need) {
			why = fmt::format("{} is missing or shorter than {} bytes", wl.paths[i], need);
			return false;
		}
	}
	return true;
}

int write_meta(const Workload &wl, std::string &err)
{
	char when[64] = "";
	std::time_t t = std::time(nullptr);
	std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
	nlohmann::json j = {
		{"tool", "kvblk-bench"},
		{"pattern", kPatternName},
		{"pattern_version", kPatternVersion},
		{"layout", wl.layout_id()},
		{"objects", wl.objects()},
		{"total_bytes", wl.total_bytes()},
		{"created", when},
	};
	const std::string path = sidecar(wl), tmp = path + ".tmp";
	{
		std::ofstream out(tmp, std::ios::trunc);
		out << j.dump(2) << '\n';
		if (!out) {
			err = fmt::format("cannot write {}", tmp);
			return -EIO;
		}
	}
	if (std::rename(tmp.c_str(), path.c_str()) != 0) {
		int e = errno;
		err = fmt::format("cannot rename {}: {}", tmp, std::strerror(e));
		return -e;
	}
	return 0;
}

// Size a regular file to exactly @total bytes and allocate its blocks up
// front so that the store is laid out as contiguously as the file system
// allows (an unallocated tail would make reads of it return zeros fast).
int size_regular_file(const std::string &path, uint64_t total, std::string &err)
{
	int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		err = fmt::format("cannot create {}: {}", path, std::strerror(e));
		return -e;
	}
	Fd guard(fd);
	if (ftruncate(fd, off_t(total)) != 0) {
		int e = errno;
		err = fmt::format("cannot size {} to {} bytes: {}", path, total, std::strerror(e));
		return -e;
	}
	int r = posix_fallocate(fd, 0, off_t(total));
	if (r != 0 && r != EOPNOTSUPP && r != EINVAL) {
		err = fmt::format("cannot allocate {} bytes for {}: {}", total, path, std::strerror(r));
		return -r;
	}
	return 0;
}

// Write the whole store with kvblk_store_many(), uring backend, filling
// the next batch on a second thread while the current one is written.
int write_store(const StoreSpec &spec, StoreState &state, std::string &err)
{
	const Workload &wl = *spec.wl;
	const std::string &path = wl.paths[0];
	struct kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	o.backend = KVBLK_BACKEND_URING;
	o.flags = KVBLK_OPEN_WRITE;
	o.max_cmd_bytes = spec.cmd_bytes;
	kvblk_dev *dev = nullptr;
	int r = kvblk_open(path.c_str(), &o, &dev);
	if (r < 0) {
		err = fmt::format("kvblk_open({}) for writing: {} ({})", path, std::strerror(-r), kvblk_last_error());
		return r;
	}
	struct DevGuard {
		kvblk_dev *d;
		~DevGuard() { kvblk_close(d); }
	} dev_guard{dev};

	struct kvblk_dev_info info;
	std::memset(&info, 0, sizeof(info));
	info.info_size = sizeof(info);
	if ((r = kvblk_get_info(dev, &info)) < 0) {
		err = fmt::format("kvblk_get_info: {}", std::strerror(-r));
		return r;
	}
	for (uint64_t len : wl.length)
		if (len % info.logical_block_size) {
			err = fmt::format("object size {} is not a multiple of the logical block size {} of {}", len,
					  info.logical_block_size, path);
			return -EINVAL;
		}

	// Batches of objects in file order; the buffers hold the largest batch.
	const uint64_t n = wl.objects(), per_batch = std::min<uint64_t>(spec.batch_objects, n);
	uint64_t buf_bytes = 0;
	for (uint64_t first = 0; first < n; first += per_batch) {
		const uint64_t last = std::min(first + per_batch, n);
		buf_bytes = std::max(buf_bytes, wl.offset[last - 1] + wl.length[last - 1] - wl.offset[first]);
	}
	HostBuffer bufs[2] = {HostBuffer(size_t(buf_bytes)), HostBuffer(size_t(buf_bytes))};
	uint32_t ids[2] = {KVBLK_BUF_NONE, KVBLK_BUF_NONE};
	for (int i = 0; i < 2; i++) {
		if (!bufs[i]) {
			err = fmt::format("cannot allocate {} bytes of buffer", buf_bytes);
			return -ENOMEM;
		}
		if ((r = kvblk_register_buffer(dev, KVBLK_MEM_HOST, bufs[i].data(), buf_bytes, &ids[i])) < 0) {
			err = fmt::format("kvblk_register_buffer: {} ({})", std::strerror(-r), kvblk_last_error());
			return r;
		}
	}

	// Objects of a batch lie back to back in the buffer as on the device.
	auto fill = [&](int which, uint64_t first, uint64_t count) {
		for (uint64_t k = first; k < first + count; k++)
			fill_pattern(bufs[which].data() + (wl.offset[k] - wl.offset[first]), k, 0, wl.length[k]);
	};

	Progress bar(spec.progress, "writing store", wl.total_bytes());
	std::vector<kvblk_desc> descs(per_batch);
	std::vector<kvblk_result> results(per_batch);
	uint64_t t0 = now_ns(), done = 0;
	fill(0, 0, per_batch);
	for (uint64_t first = 0, b = 0; first < n; first += per_batch, b++) {
		const int cur = int(b & 1);
		const uint64_t count = std::min(per_batch, n - first);
		const uint64_t next = first + count;
		std::thread filler;
		if (next < n)
			filler = std::thread(fill, cur ^ 1, next, std::min(per_batch, n - next));
		for (uint64_t k = 0; k < count; k++) {
			descs[k] = kvblk_desc{};
			descs[k].offset = wl.offset[first + k];
			descs[k].length = wl.length[first + k];
			descs[k].addr = wl.offset[first + k] - wl.offset[first];
			descs[k].buf_id = ids[cur];
			descs[k].tag = first + k;
			done += wl.length[first + k];
		}
		r = kvblk_store_many(dev, descs.data(), uint32_t(count), results.data(), nullptr);
		if (filler.joinable())
			filler.join();
		if (r < 0) {
			err = fmt::format("kvblk_store_many (objects {}..{}): {} ({})", first, first + count - 1,
					  std::strerror(-r), kvblk_last_error());
			return r;
		}
		for (uint64_t k = 0; k < count; k++)
			if (results[k].status != 0) {
				err = fmt::format("writing object {} failed: {}", first + k,
						  std::strerror(-results[k].status));
				return results[k].status;
			}
		bar.update(done);
	}
	bar.finish();
	// Make the data and the file's extent map durable before anything vouches for them.
	{
		Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
		if (fd.fd < 0 || fsync(fd.fd) != 0) {
			int e = errno;
			err = fmt::format("fsync {}: {}", path, std::strerror(e));
			return -e;
		}
	}
	uint64_t ns = now_ns() - t0;
	state.write_seconds = double(ns) / 1e9;
	state.write_gbps = ns ? double(wl.total_bytes()) / double(ns) : 0.0;
	return 0;
}

// Write one file per object (chunk workloads) with plain write(2) and
// fsync(2): setup, not a measured path.
int write_chunks(const StoreSpec &spec, StoreState &state, std::string &err)
{
	const Workload &wl = *spec.wl;
	HostBuffer buf(size_t(wl.max_length()));
	if (!buf) {
		err = fmt::format("cannot allocate {} bytes of buffer", wl.max_length());
		return -ENOMEM;
	}
	Progress bar(spec.progress, "writing chunks", wl.total_bytes());
	const uint64_t t0 = now_ns();
	uint64_t done = 0;
	for (uint64_t i = 0; i < wl.objects(); i++) {
		fill_pattern(buf.data(), i, 0, size_t(wl.length[i]));
		Fd fd(::open(wl.paths[i].c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
		uint64_t at = 0;
		while (fd.fd >= 0 && at < wl.length[i]) {
			ssize_t w = ::write(fd.fd, buf.data() + at, size_t(wl.length[i] - at));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;
			at += uint64_t(w);
		}
		if (fd.fd < 0 || at != wl.length[i] || fsync(fd.fd) != 0) {
			int e = errno ? errno : EIO;
			err = fmt::format("writing {}: {}", wl.paths[i], std::strerror(e));
			return -e;
		}
		done += wl.length[i];
		bar.update(done);
	}
	bar.finish();
	const uint64_t ns = now_ns() - t0;
	state.write_seconds = double(ns) / 1e9;
	state.write_gbps = ns ? double(wl.total_bytes()) / double(ns) : 0.0;
	return 0;
}

} // namespace

int prepare_store(const StoreSpec &spec, StoreState &state, std::string &err)
{
	const Workload &wl = *spec.wl;
	if (wl.objects() == 0) {
		err = "the workload has no objects";
		return -EINVAL;
	}
	for (uint64_t len : wl.length)
		if (len == 0 || len % 8) {
			err = "object sizes must be > 0 and multiples of 8 bytes";
			return -EINVAL;
		}
	if (wl.objects() > (uint64_t(1) << 24) || wl.max_length() > (uint64_t(1) << 40)) {
		err = "the pattern supports at most 2^24 objects of at most 1 TiB";
		return -EINVAL;
	}

	if (wl.files) {
		const std::string dir = wl.where();
		if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
			int e = errno;
			err = fmt::format("cannot create {}: {}", dir, std::strerror(e));
			return -e;
		}
		state.capacity = wl.total_bytes();
	} else {
		const std::string &path = wl.paths[0];
		struct stat st;
		if (::stat(path.c_str(), &st) != 0) {
			if (errno != ENOENT) {
				int e = errno;
				err = fmt::format("{}: {}", path, std::strerror(e));
				return -e;
			}
		} else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
			err = fmt::format("{} is neither a regular file nor a block device", path);
			return -ENOTSUP;
		} else {
			state.is_blockdev = S_ISBLK(st.st_mode);
			state.capacity = uint64_t(st.st_size);
		}
		if (state.is_blockdev) {
			Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
			uint64_t cap = 0;
			if (fd.fd < 0 || ioctl(fd.fd, BLKGETSIZE64, &cap) != 0) {
				int e = errno;
				err = fmt::format("{}: cannot read the device size: {}", path, std::strerror(e));
				return -e;
			}
			state.capacity = cap;
			if (wl.store_bytes() > cap) {
				err = fmt::format("{} holds {} bytes; the store needs {}", path, cap, wl.store_bytes());
				return -ENOSPC;
			}
		}
	}

	// Decide between reuse and (re)write.
	std::string why;
	bool matches = false;
	if (spec.mode == StoreSpec::Mode::recreate)
		why = "--recreate";
	else if (state.is_blockdev || meta_matches(wl, why))
		matches = sample_matches(wl, why);
	if (matches) {
		state.reason = why;
		return 0;
	}
	if (spec.mode == StoreSpec::Mode::keep) {
		err = fmt::format("{}: the store does not match and --keep forbids rewriting it: {}",
				  wl.files ? wl.where() : wl.paths[0], why);
		return -ENODATA;
	}
	if (state.is_blockdev && !spec.allow_device_write) {
		err = fmt::format("{}: block device without the kvblk-bench pattern ({}); refusing to write "
				  "without --i-know-this-overwrites (it destroys the first {} bytes)",
				  wl.paths[0], why, wl.store_bytes());
		return -ENODATA;
	}

	::unlink(sidecar(wl).c_str()); // no stale sidecar may vouch for a half-written store
	int r;
	if (wl.files) {
		r = write_chunks(spec, state, err);
	} else {
		if (!state.is_blockdev) {
			if ((r = size_regular_file(wl.paths[0], wl.store_bytes(), err)) < 0)
				return r;
			state.capacity = wl.store_bytes();
		}
		r = write_store(spec, state, err);
	}
	if (r < 0)
		return r;
	if (!state.is_blockdev && (r = write_meta(wl, err)) < 0)
		return r;
	state.created = true;
	state.reason = why;
	return 0;
}

} // namespace kvblk_bench

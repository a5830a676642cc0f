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

// Read the first and last kSampleBytes (or the whole object when smaller)
// of up to kMaxSamples objects spread over the store and check them.
// Direct I/O when the file system allows it, so that a stale page cache
// cannot vouch for bytes that are not on the disk.
bool sample_matches(const StoreSpec &spec, std::string &why)
{
	int fd = ::open(spec.path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL)
		fd = ::open(spec.path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		why = fmt::format("cannot open {}: {}", spec.path, std::strerror(errno));
		return false;
	}
	Fd guard(fd);
	const size_t chunk = size_t(std::min<uint64_t>(kSampleBytes, spec.object_bytes));
	HostBuffer buf(kSampleBytes);
	if (!buf) {
		why = "out of memory";
		return false;
	}
	const uint64_t samples = std::min(kMaxSamples, spec.objects);
	for (uint64_t s = 0; s < samples; s++) {
		uint64_t obj = samples > 1 ? s * (spec.objects - 1) / (samples - 1) : 0;
		for (uint64_t in_obj : {uint64_t(0), spec.object_bytes - chunk}) {
			uint64_t off = obj * spec.object_bytes + in_obj;
			ssize_t r = ::pread(fd, buf.data(), chunk, off_t(off));
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
bool meta_matches(const StoreSpec &spec, uint64_t file_size, std::string &why)
{
	std::ifstream in(meta_path(spec.path));
	if (!in) {
		why = fmt::format("no {}", meta_path(spec.path));
		return false;
	}
	nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
	if (j.is_discarded() || !j.is_object()) {
		why = fmt::format("{} is not valid JSON", meta_path(spec.path));
		return false;
	}
	auto num = [&](const char *k) { return j.contains(k) && j[k].is_number_unsigned() ? j[k].get<uint64_t>() : 0; };
	if (num("pattern_version") != uint64_t(kPatternVersion)) {
		why = fmt::format("pattern version {} != {}", num("pattern_version"), kPatternVersion);
		return false;
	}
	if (num("objects") != spec.objects || num("object_bytes") != spec.object_bytes) {
		why = fmt::format("store has {} x {} bytes, asked for {} x {} bytes", num("objects"),
				  num("object_bytes"), spec.objects, spec.object_bytes);
		return false;
	}
	if (file_size < spec.objects * spec.object_bytes) {
		why = fmt::format("file is {} bytes, store needs {}", file_size, spec.objects * spec.object_bytes);
		return false;
	}
	return true;
}

int write_meta(const StoreSpec &spec, std::string &err)
{
	char when[64] = "";
	std::time_t t = std::time(nullptr);
	std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
	nlohmann::json j = {
		{"tool", "kvblk-bench"},
		{"pattern", kPatternName},
		{"pattern_version", kPatternVersion},
		{"objects", spec.objects},
		{"object_bytes", spec.object_bytes},
		{"total_bytes", spec.objects * spec.object_bytes},
		{"created", when},
	};
	std::string tmp = meta_path(spec.path) + ".tmp";
	{
		std::ofstream out(tmp, std::ios::trunc);
		out << j.dump(2) << '\n';
		if (!out) {
			err = fmt::format("cannot write {}", tmp);
			return -EIO;
		}
	}
	if (std::rename(tmp.c_str(), meta_path(spec.path).c_str()) != 0) {
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
	struct kvblk_open_opts o;
	kvblk_open_opts_init(&o, sizeof(o));
	o.backend = KVBLK_BACKEND_URING;
	o.flags = KVBLK_OPEN_WRITE;
	o.max_cmd_bytes = spec.cmd_bytes;
	kvblk_dev *dev = nullptr;
	int r = kvblk_open(spec.path.c_str(), &o, &dev);
	if (r < 0) {
		err = fmt::format("kvblk_open({}) for writing: {} ({})", spec.path, std::strerror(-r),
				  kvblk_last_error());
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
	if (spec.object_bytes % info.logical_block_size) {
		err = fmt::format("object size {} is not a multiple of the logical block size {} of {}",
				  spec.object_bytes, info.logical_block_size, spec.path);
		return -EINVAL;
	}

	const uint64_t per_batch = std::min<uint64_t>(spec.batch_objects, spec.objects);
	const size_t buf_bytes = size_t(per_batch * spec.object_bytes);
	HostBuffer bufs[2] = {HostBuffer(buf_bytes), HostBuffer(buf_bytes)};
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

	auto fill = [&](int which, uint64_t first, uint64_t count) {
		for (uint64_t k = 0; k < count; k++)
			fill_pattern(bufs[which].data() + k * spec.object_bytes, first + k, 0, spec.object_bytes);
	};

	const uint64_t total = spec.objects * spec.object_bytes;
	Progress bar(spec.progress, "writing store", total);
	std::vector<kvblk_desc> descs(per_batch);
	std::vector<kvblk_result> results(per_batch);
	uint64_t t0 = now_ns(), done = 0;
	fill(0, 0, per_batch);
	for (uint64_t first = 0, b = 0; first < spec.objects; first += per_batch, b++) {
		const int cur = int(b & 1);
		const uint64_t count = std::min(per_batch, spec.objects - first);
		const uint64_t next = first + count;
		std::thread filler;
		if (next < spec.objects)
			filler = std::thread(fill, cur ^ 1, next, std::min(per_batch, spec.objects - next));
		for (uint64_t k = 0; k < count; k++) {
			descs[k] = kvblk_desc{};
			descs[k].offset = (first + k) * spec.object_bytes;
			descs[k].length = spec.object_bytes;
			descs[k].addr = k * spec.object_bytes;
			descs[k].buf_id = ids[cur];
			descs[k].tag = first + k;
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
		done += count * spec.object_bytes;
		bar.update(done);
	}
	bar.finish();
	// Make the data and the file's extent map durable before anything vouches for them.
	{
		Fd fd(::open(spec.path.c_str(), O_WRONLY | O_CLOEXEC));
		if (fd.fd < 0 || fsync(fd.fd) != 0) {
			int e = errno;
			err = fmt::format("fsync {}: {}", spec.path, std::strerror(e));
			return -e;
		}
	}
	uint64_t ns = now_ns() - t0;
	state.write_seconds = double(ns) / 1e9;
	state.write_gbps = ns ? double(total) / double(ns) : 0.0;
	return 0;
}

} // namespace

int prepare_store(const StoreSpec &spec, StoreState &state, std::string &err)
{
	if (spec.objects == 0 || spec.object_bytes == 0 || spec.object_bytes % 8) {
		err = "objects and object size must be > 0 and the size a multiple of 8 bytes";
		return -EINVAL;
	}
	if (spec.objects > (uint64_t(1) << 24) || spec.object_bytes > (uint64_t(1) << 40)) {
		err = "the pattern supports at most 2^24 objects of at most 1 TiB";
		return -EINVAL;
	}
	const uint64_t total = spec.objects * spec.object_bytes;

	struct stat st;
	bool exists = ::stat(spec.path.c_str(), &st) == 0;
	if (!exists && errno != ENOENT) {
		int e = errno;
		err = fmt::format("{}: {}", spec.path, std::strerror(e));
		return -e;
	}
	if (exists && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		err = fmt::format("{} is neither a regular file nor a block device", spec.path);
		return -ENOTSUP;
	}
	state.is_blockdev = exists && S_ISBLK(st.st_mode);
	state.capacity = exists ? uint64_t(st.st_size) : 0;
	if (state.is_blockdev) {
		Fd fd(::open(spec.path.c_str(), O_RDONLY | O_CLOEXEC));
		uint64_t cap = 0;
		if (fd.fd < 0 || ioctl(fd.fd, BLKGETSIZE64, &cap) != 0) {
			int e = errno;
			err = fmt::format("{}: cannot read the device size: {}", spec.path, std::strerror(e));
			return -e;
		}
		state.capacity = cap;
		if (total > cap) {
			err = fmt::format("{} holds {} bytes; the store needs {}", spec.path, cap, total);
			return -ENOSPC;
		}
	}

	// Decide between reuse and (re)write.
	std::string why;
	bool matches = false;
	if (spec.mode != StoreSpec::Mode::recreate && exists) {
		if (state.is_blockdev || meta_matches(spec, state.capacity, why))
			matches = sample_matches(spec, why);
	} else if (!exists) {
		why = "no store yet";
	} else {
		why = "--recreate";
	}
	if (matches) {
		state.reason = why;
		return 0;
	}
	if (spec.mode == StoreSpec::Mode::keep) {
		err = fmt::format("{}: the store does not match and --keep forbids rewriting it: {}", spec.path, why);
		return -ENODATA;
	}
	if (state.is_blockdev && !spec.allow_device_write) {
		err = fmt::format("{}: block device without the kvblk-bench pattern ({}); refusing to write "
				  "without --i-know-this-overwrites (it destroys the first {} bytes)",
				  spec.path, why, total);
		return -ENODATA;
	}

	if (!state.is_blockdev) {
		::unlink(meta_path(spec.path).c_str()); // no stale sidecar may vouch for a half-written store
		int r = size_regular_file(spec.path, total, err);
		if (r < 0)
			return r;
		state.capacity = total;
	}
	int r = write_store(spec, state, err);
	if (r < 0)
		return r;
	if (!state.is_blockdev && (r = write_meta(spec, err)) < 0)
		return r;
	state.created = true;
	state.reason = why;
	return 0;
}

} // namespace kvblk_bench

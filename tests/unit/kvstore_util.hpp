// SPDX-License-Identifier: MIT
// Helpers of the kvblk store's tests: temporary drives (preallocated files), objects whose
// bytes follow from (key, version), batch builders, and raw access to a drive's on-disk
// structures at the offsets docs/kvstore-format.md gives (to damage them on purpose).
#pragma once

#include <kvblk/kvstore.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace kvs_test {

inline constexpr uint64_t KiB = 1024;
inline constexpr uint64_t MiB = 1024 * 1024;

/* A fresh directory under $TMPDIR (else /var/tmp: the local disk, O_DIRECT works), removed at the end. */
class TempDir {
public:
	TempDir()
	{
		const char *base = getenv("TMPDIR");
		std::string tmpl = std::string(base && *base ? base : "/var/tmp") + "/kvblk-kvstore.XXXXXX";
		std::vector<char> b(tmpl.begin(), tmpl.end());
		b.push_back('\0');
		if (!mkdtemp(b.data()))
			throw std::runtime_error("mkdtemp failed");
		path_ = b.data();
	}
	~TempDir()
	{
		std::error_code ec;
		std::filesystem::remove_all(path_, ec);
	}
	[[nodiscard]] std::string file(const std::string &name) const { return path_ + "/" + name; }
	[[nodiscard]] const std::string &path() const { return path_; }

private:
	std::string path_;
};

/* The bytes of version @v of key @key, @len long: a function of all three. */
inline std::vector<uint8_t> object_bytes(const std::string &key, uint64_t v, uint64_t len)
{
	uint64_t h = 1469598103934665603ull ^ (v * 0x9E3779B97F4A7C15ull);
	for (unsigned char c : key)
		h = (h ^ c) * 1099511628211ull;
	std::vector<uint8_t> out(len);
	uint64_t z = h;
	for (uint64_t i = 0; i < len; i += 8) {
		z += 0x9E3779B97F4A7C15ull;
		uint64_t w = z;
		w = (w ^ (w >> 30)) * 0xBF58476D1CE4E5B9ull;
		w = (w ^ (w >> 27)) * 0x94D049BB133111EBull;
		w ^= w >> 31;
		memcpy(out.data() + i, &w, std::min<uint64_t>(8, len - i));
	}
	return out;
}

/* A page-aligned heap buffer (O_DIRECT-friendly), zeroed. */
struct Buf {
	uint8_t *p = nullptr;
	size_t n = 0;
	explicit Buf(size_t len) : n(len)
	{
		void *q = nullptr;
		if (posix_memalign(&q, 4096, len ? (len + 4095) / 4096 * 4096 : 4096))
			throw std::bad_alloc();
		memset(q, 0, len ? (len + 4095) / 4096 * 4096 : 4096);
		p = static_cast<uint8_t *>(q);
	}
	~Buf() { free(p); }
	Buf(const Buf &) = delete;
	Buf &operator=(const Buf &) = delete;
	Buf(Buf &&o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
};

/* One op for a key (the key's bytes must outlive the op: a literal, or a string that lives on). */
inline kvblk_kvstore_op op_for(std::string_view key, const void *addr, uint64_t len, uint64_t tag = 0)
{
	kvblk_kvstore_op o{};
	o.key = key.data();
	o.key_len = uint32_t(key.size());
	o.buf_id = KVBLK_BUF_NONE;
	o.addr = uint64_t(uintptr_t(addr));
	o.length = len;
	o.tag = tag;
	return o;
}

/* Create options with the given classes (slot sizes; weights 1). */
inline kvblk_kvstore_create_opts create_opts(std::initializer_list<uint64_t> slots, uint64_t file_bytes,
					     uint64_t journal = 0)
{
	kvblk_kvstore_create_opts c;
	kvblk_kvstore_create_opts_init(&c, sizeof(c));
	for (uint64_t s : slots)
		c.classes[c.nr_classes++] = kvblk_kvstore_class{s, 1, 0};
	c.file_bytes = file_bytes;
	c.journal_bytes = journal;
	return c;
}

inline kvblk_kvstore_open_opts open_opts(uint32_t backend = KVBLK_BACKEND_AUTO, uint32_t flags = 0)
{
	kvblk_kvstore_open_opts o;
	kvblk_kvstore_open_opts_init(&o, sizeof(o));
	o.backend = backend;
	o.flags = flags;
	return o;
}

/* Raw file access for damaging a drive on purpose. */
inline std::vector<uint8_t> read_at(const std::string &path, uint64_t off, size_t len)
{
	std::vector<uint8_t> b(len);
	const int fd = open(path.c_str(), O_RDONLY);
	EXPECT_GE(fd, 0);
	EXPECT_EQ(pread(fd, b.data(), len, off_t(off)), ssize_t(len));
	close(fd);
	return b;
}

inline void write_at(const std::string &path, uint64_t off, const void *data, size_t len)
{
	const int fd = open(path.c_str(), O_WRONLY);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(pwrite(fd, data, len, off_t(off)), ssize_t(len));
	fsync(fd);
	close(fd);
}

inline void flip_bit(const std::string &path, uint64_t off, int bit = 3)
{
	auto b = read_at(path, off, 1);
	b[0] ^= uint8_t(1u << bit);
	write_at(path, off, b.data(), 1);
}

inline uint64_t le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}
inline uint32_t le32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* A drive's layout as its superblock (copy A, docs/kvstore-format.md section 3) says. */
struct RawLayout {
	uint64_t ckpt_offset = 0, ckpt_bytes = 0, journal_offset = 0, journal_bytes = 0;
	uint32_t nr_classes = 0;
	uint64_t slot_bytes[16] = {}, nr_slots[16] = {}, class_offset[16] = {};
};

inline RawLayout raw_layout(const std::string &path)
{
	const auto b = read_at(path, 0, 4096);
	RawLayout l;
	l.nr_classes = le32(&b[36]);
	l.ckpt_offset = le64(&b[88]);
	l.ckpt_bytes = le64(&b[96]);
	l.journal_offset = le64(&b[104]);
	l.journal_bytes = le64(&b[112]);
	for (uint32_t c = 0; c < l.nr_classes && c < 16; c++) {
		l.slot_bytes[c] = le64(&b[128 + 24 * c]);
		l.nr_slots[c] = le64(&b[128 + 24 * c + 8]);
		l.class_offset[c] = le64(&b[128 + 24 * c + 16]);
	}
	return l;
}

/* A checkpoint area's seq (offset 40 of its header), or ~0 when its magic is absent. */
inline uint64_t ckpt_seq(const std::string &path, const RawLayout &l, int area)
{
	const auto h = read_at(path, l.ckpt_offset + uint64_t(area) * l.ckpt_bytes, 64);
	if (memcmp(h.data(), "KVBLKCKP", 8) != 0)
		return ~0ull;
	return le64(&h[40]);
}

/* Put @keys (version @v, @len bytes each) in one batch; returns the number stored. */
inline int put_keys(kvblk_kvstore *s, const std::vector<std::string> &keys, uint64_t v, uint64_t len,
		    std::vector<kvblk_kvstore_result> *res_out = nullptr)
{
	std::vector<std::vector<uint8_t>> data;
	std::vector<kvblk_kvstore_op> ops;
	data.reserve(keys.size());
	for (size_t i = 0; i < keys.size(); i++) {
		data.push_back(object_bytes(keys[i], v, len));
		ops.push_back(op_for(keys[i], data.back().data(), len, i));
	}
	std::vector<kvblk_kvstore_result> res(keys.size());
	const int r = kvblk_kvstore_put(s, ops.data(), uint32_t(ops.size()), res.data());
	if (res_out)
		*res_out = res;
	return r;
}

/* Get @key into a fresh buffer: its status, and the bytes in *out. */
inline int get_key(kvblk_kvstore *s, const std::string &key, uint64_t room, std::vector<uint8_t> *out,
		   kvblk_kvstore_result *res_out = nullptr)
{
	out->assign(room, 0);
	kvblk_kvstore_op o = op_for(key, out->data(), room);
	kvblk_kvstore_result r{};
	const int n = kvblk_kvstore_get(s, &o, 1, &r);
	if (res_out)
		*res_out = r;
	if (n < 0)
		return n;
	if (r.status == 0)
		out->resize(r.length);
	return r.status;
}

} // namespace kvs_test

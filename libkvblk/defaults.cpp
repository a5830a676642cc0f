// SPDX-License-Identifier: MIT
// Process-wide defaults: the table, the environment, kvblk_set_default() (defaults.hpp).
#include "defaults.hpp"

#include "last_error.hpp"
#include "struct_size.hpp"

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace kvblk::detail;

namespace {

using ull = unsigned long long;

enum class Kind : uint8_t { number, bytes, backend };

/*
 * One default. @set_value holds the value kvblk_set_default() set, or kUnset; atomic, so
 * any thread may set while others open.
 */
struct Setting {
	const char *name;
	const char *env;
	const char *unit;
	const char *doc;
	Kind kind;
	uint64_t builtin, min, max;
};

constexpr uint64_t kUnset = UINT64_MAX;

/* The table: kvblk.h ("process-wide defaults") and docs/defaults.md list it in this order. */
constexpr Setting kSettings[] = {
	{"backend", "KVBLK_BACKEND", "backend",
	 "backend of kvblk_open() when its options say auto: auto, uring, threadpool, psync, kmod or uring_cmd",
	 Kind::backend, KVBLK_BACKEND_AUTO, KVBLK_BACKEND_AUTO, KVBLK_BACKEND_MAX - 1},
	{"queue_depth", "KVBLK_QUEUE_DEPTH", "commands",
	 "commands in flight per ring (uring, uring_cmd; a kmod device's stores through uring)", Kind::number,
	 KVBLK_DEFAULT_QUEUE_DEPTH, 1, KVBLK_MAX_QUEUE_DEPTH},
	{"rings", "KVBLK_RINGS", "rings", "io_uring rings, each with its thread (uring, uring_cmd)", Kind::number,
	 KVBLK_DEFAULT_WORKERS, 1, KVBLK_MAX_WORKERS},
	{"threads", "KVBLK_THREADS", "threads", "threads reading whole objects (threadpool)", Kind::number,
	 KVBLK_DEFAULT_THREADS, 1, KVBLK_MAX_WORKERS},
	{"max_cmd_bytes", "KVBLK_MAX_CMD_BYTES", "bytes",
	 "largest read or write command (every backend but kmod, which uses kvblk.ko's limit unless this is set)",
	 Kind::bytes, KVBLK_DEFAULT_MAX_CMD_BYTES, 4096, 1ull << 30},
	{"max_descs", "KVBLK_MAX_DESCS", "descriptors", "descriptors accepted per call", Kind::number,
	 KVBLK_DEFAULT_MAX_DESCS, 1, KVBLK_MAX_DESCS_LIMIT},
	{"max_batches", "KVBLK_MAX_BATCHES", "batches", "batches outstanding at once (submitted, not yet reaped)",
	 Kind::number, KVBLK_DEFAULT_MAX_BATCHES, 1, KVBLK_MAX_BATCHES},
	{"eagain_retries", "KVBLK_EAGAIN_RETRIES", "retries",
	 "resubmissions of a command that completes with EAGAIN before its object fails", Kind::number,
	 KVBLK_DEFAULT_EAGAIN_RETRIES, 1, 65536},
	{"staging_buffers", "KVBLK_STAGING_BUFFERS", "buffers",
	 "bounce buffers of the staged CUDA path, each its own copy stream", Kind::number,
	 KVBLK_DEFAULT_STAGING_BUFFERS, 1, KVBLK_MAX_STAGING_BUFFERS},
	{"staging_buffer_bytes", "KVBLK_STAGING_BUFFER_BYTES", "bytes",
	 "bytes per bounce buffer of the staged CUDA path", Kind::bytes, KVBLK_DEFAULT_STAGING_BUFFER_BYTES, 4096,
	 KVBLK_MAX_STAGING_BUFFER_BYTES},
};
constexpr uint32_t kCount = sizeof(kSettings) / sizeof(kSettings[0]);

enum Index : uint32_t {
	kBackend,
	kQueueDepth,
	kRings,
	kThreads,
	kMaxCmdBytes,
	kMaxDescs,
	kMaxBatches,
	kEagainRetries,
	kStagingBuffers,
	kStagingBufferBytes,
};
static_assert(kCount == kStagingBufferBytes + 1, "kSettings and enum Index disagree");

std::atomic<uint64_t> g_set[kCount] = {kUnset, kUnset, kUnset, kUnset, kUnset,
				       kUnset, kUnset, kUnset, kUnset, kUnset};
static_assert(sizeof(g_set) / sizeof(g_set[0]) == kCount, "one g_set slot per setting");

int find(const char *name)
{
	if (name)
		for (uint32_t i = 0; i < kCount; i++)
			if (std::strcmp(kSettings[i].name, name) == 0)
				return int(i);
	return -1;
}

std::string range_text(const Setting &s)
{
	if (s.kind == Kind::backend)
		return "auto, uring, threadpool, psync, kmod, uring_cmd";
	char b[64];
	std::snprintf(b, sizeof(b), "%llu..%llu", ull(s.min), ull(s.max));
	return b;
}

/* Parse @text for @s: 0 and *out, or -EINVAL with *why set. */
int parse(const Setting &s, const char *text, uint64_t *out, std::string *why)
{
	if (s.kind == Kind::backend) {
		const int b = kvblk_backend_from_name(text);
		if (b < 0) {
			*why = "not a backend (" + range_text(s) + ")";
			return -EINVAL;
		}
		*out = uint64_t(b);
		return 0;
	}
	const char *p = text;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9') {
		*why = "not a number";
		return -EINVAL;
	}
	errno = 0;
	char *end = nullptr;
	unsigned long long v = std::strtoull(p, &end, 10);
	if (errno == ERANGE) {
		*why = "too large";
		return -EINVAL;
	}
	uint64_t mult = 1;
	if (s.kind == Kind::bytes && *end) {
		switch (*end) {
		case 'k': case 'K': mult = 1ull << 10; break;
		case 'm': case 'M': mult = 1ull << 20; break;
		case 'g': case 'G': mult = 1ull << 30; break;
		default: mult = 0; break;
		}
		if (mult) {
			end++;
			if (std::strcmp(end, "iB") == 0 || std::strcmp(end, "B") == 0)
				end += std::strlen(end);
		}
	}
	while (*end == ' ' || *end == '\t')
		end++;
	if (*end || !mult) {
		*why = s.kind == Kind::bytes ? "not a size (bytes, or a number with K, M or G)" : "not a number";
		return -EINVAL;
	}
	if (__builtin_mul_overflow(uint64_t(v), mult, out)) {
		*why = "too large";
		return -EINVAL;
	}
	if (*out < s.min || *out > s.max) {
		*why = "out of range " + range_text(s);
		return -EINVAL;
	}
	return 0;
}

/*
 * The effective value of setting @i: 0 with *value and *source, or -EINVAL (variable set and
 * invalid: *value is the built-in value, *why says what is wrong).
 */
int effective(uint32_t i, uint64_t *value, uint32_t *source, std::string *why)
{
	const Setting &s = kSettings[i];
	const uint64_t set = g_set[i].load(std::memory_order_acquire);
	if (set != kUnset) {
		*value = set;
		*source = KVBLK_DEFAULT_SET;
		return 0;
	}
	*value = s.builtin;
	*source = KVBLK_DEFAULT_BUILTIN;
	const char *env = std::getenv(s.env);
	if (!env || !*env)
		return 0;
	uint64_t v = 0;
	if (parse(s, env, &v, why))
		return -EINVAL;
	*value = v;
	*source = KVBLK_DEFAULT_ENV;
	return 0;
}

int fail_env(const char *fn, uint32_t i, const std::string &why)
{
	const char *env = std::getenv(kSettings[i].env);
	return fail(-EINVAL, "%s: %s=%s is %s", fn, kSettings[i].env, env ? env : "", why.c_str());
}

} // namespace

namespace kvblk::detail {

int snapshot_defaults(const char *fn, DefaultsSnapshot *out)
{
	uint64_t v[kCount];
	uint32_t src[kCount];
	for (uint32_t i = 0; i < kCount; i++) {
		std::string why;
		if (effective(i, &v[i], &src[i], &why))
			return fail_env(fn, i, why);
	}
	DefaultsSnapshot &s = *out;
	s.backend = uint32_t(v[kBackend]);
	s.queue_depth = uint32_t(v[kQueueDepth]);
	s.rings = uint32_t(v[kRings]);
	s.threads = uint32_t(v[kThreads]);
	s.max_cmd_bytes = v[kMaxCmdBytes];
	s.max_cmd_bytes_set = src[kMaxCmdBytes] != KVBLK_DEFAULT_BUILTIN;
	s.max_descs = uint32_t(v[kMaxDescs]);
	s.max_batches = uint32_t(v[kMaxBatches]);
	s.eagain_retries = uint32_t(v[kEagainRetries]);
	s.staging_buffers = uint32_t(v[kStagingBuffers]);
	s.staging_buffer_bytes = v[kStagingBufferBytes];
	s.backend_origin[0] = '\0';
	if (src[kBackend] == KVBLK_DEFAULT_ENV)
		std::snprintf(s.backend_origin, sizeof(s.backend_origin), "KVBLK_BACKEND=%s",
			      std::getenv("KVBLK_BACKEND") ? std::getenv("KVBLK_BACKEND") : "");
	else if (src[kBackend] == KVBLK_DEFAULT_SET)
		std::snprintf(s.backend_origin, sizeof(s.backend_origin), "kvblk_set_default(\"backend\")");
	return 0;
}

} // namespace kvblk::detail

extern "C" {

int kvblk_get_default(const char *name, uint64_t *value) noexcept
{
	if (!name || !value)
		return fail(-EINVAL, "kvblk_get_default: NULL %s", name ? "value" : "name");
	const int i = find(name);
	if (i < 0)
		return fail(-ENOENT, "kvblk_get_default: no default is called \"%s\"", name);
	uint32_t source;
	std::string why;
	try {
		if (effective(uint32_t(i), value, &source, &why))
			return fail_env("kvblk_get_default", uint32_t(i), why);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_get_default: out of memory");
	}
	return 0;
}

int kvblk_set_default(const char *name, uint64_t value) noexcept
{
	if (!name)
		return fail(-EINVAL, "kvblk_set_default: NULL name");
	const int i = find(name);
	if (i < 0)
		return fail(-ENOENT, "kvblk_set_default: no default is called \"%s\"", name);
	const Setting &s = kSettings[i];
	if (value < s.min || value > s.max) {
		if (s.kind == Kind::backend)
			return fail(-EINVAL, "kvblk_set_default: backend %llu is not an enum kvblk_backend (0..%llu)",
				    ull(value), ull(s.max));
		return fail(-EINVAL, "kvblk_set_default: %s %llu is out of range %llu..%llu", name, ull(value),
			    ull(s.min), ull(s.max));
	}
	g_set[i].store(value, std::memory_order_release);
	return 0;
}

int kvblk_reset_default(const char *name) noexcept
{
	if (!name) {
		for (auto &v : g_set)
			v.store(kUnset, std::memory_order_release);
		return 0;
	}
	const int i = find(name);
	if (i < 0)
		return fail(-ENOENT, "kvblk_reset_default: no default is called \"%s\"", name);
	g_set[i].store(kUnset, std::memory_order_release);
	return 0;
}

int kvblk_get_default_info(uint32_t index, struct kvblk_default_info *info) noexcept
{
	if (!info)
		return fail(-EINVAL, "kvblk_get_default_info: NULL info");
	if (int ret = check_output_size("kvblk_get_default_info", "info_size", info->info_size,
					sizeof(kvblk_default_info)))
		return ret;
	if (index >= kCount)
		return fail(-ENOENT, "kvblk_get_default_info: index %u is past the last default (%u)", index,
			    kCount - 1);
	const Setting &s = kSettings[index];
	kvblk_default_info d{};
	d.info_size = sizeof(d);
	d.name = s.name;
	d.env = s.env;
	d.unit = s.unit;
	d.doc = s.doc;
	d.builtin = s.builtin;
	d.min = s.min;
	d.max = s.max;
	try {
		std::string why;
		d.error = effective(index, &d.value, &d.source, &why);
	} catch (const std::bad_alloc &) {
		return fail(-ENOMEM, "kvblk_get_default_info: out of memory");
	}
	copy_out(info, info->info_size, &d, sizeof(d));
	return 0;
}

} // extern "C"

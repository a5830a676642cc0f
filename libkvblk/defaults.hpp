// SPDX-License-Identifier: MIT
// The process-wide defaults (kvblk_get_default() and friends, kvblk.h "process-wide
// defaults"): one table, each entry a name, an environment variable, a built-in value and a
// range. kvblk_open() takes a Snapshot of all of them; Python's kvblk.defaults and
// docs/defaults.md read the same table through kvblk_get_default_info().
#pragma once

#include <kvblk/kvblk.h>

#include <cstdint>

namespace kvblk::detail {

/**
 * struct DefaultsSnapshot - every default's effective value at one moment.
 * @max_cmd_bytes_set: max_cmd_bytes came from the program or the environment, not the
 *                     built-in value (kmod splits at kvblk.ko's own limit otherwise).
 */
struct DefaultsSnapshot {
	uint32_t backend;
	uint32_t queue_depth;
	uint32_t rings;
	uint32_t threads;
	uint64_t max_cmd_bytes;
	bool max_cmd_bytes_set;
	uint32_t max_descs;
	uint32_t max_batches;
	uint32_t eagain_retries;
	uint32_t staging_buffers;
	uint64_t staging_buffer_bytes;
	/* For backend_reason: where the backend default came from ("KVBLK_BACKEND=psync"). */
	char backend_origin[96];
};

/*
 * Fill @s with the effective defaults: 0, or -EINVAL when an environment variable is set and
 * invalid (kvblk_last_error(): "@fn: KVBLK_X=...: why").
 */
int snapshot_defaults(const char *fn, DefaultsSnapshot *s);

} // namespace kvblk::detail

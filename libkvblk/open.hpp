// SPDX-License-Identifier: MIT
// Opening a device: the options, the backend choice (explicit, KVBLK_BACKEND, else AUTO from
// the target), the backend's set-up and the batch scheduler. kvblk_open() (core.cpp) calls it.
#pragma once

#include <kvblk/kvblk.h>

struct kvblk_dev;

namespace kvblk::detail {

struct BackendConfig;
struct Target;

/* kvblk_open() after its NULL checks: 0 and *@out, or -errno with the message set. */
int open_device(const char *path, const kvblk_open_opts *user_opts, kvblk_dev **out);

/*
 * A block device that backend @b (KVBLK_BACKEND_URING) reads with direct I/O: no command larger
 * than its block layer takes from a fixed buffer without a split (Target.unsplit_bytes,
 * bio_split.hpp), for io_uring would issue each such command again from an io-wq thread, at
 * several times the CPU per byte. Lowers cfg.max_cmd_bytes to that limit (a multiple of the
 * block size) and says so in cfg.note; returns whether it did. Applied to target 0 at
 * kvblk_open() (the note is kvblk_dev_info.backend_reason) and to each target added to such a
 * device (kvblk_get_target_info()'s backend_reason; IoObject.max_cmd cuts its objects).
 */
bool clamp_to_unsplit(kvblk_backend b, const Target &t, BackendConfig &cfg);

} // namespace kvblk::detail

// SPDX-License-Identifier: MIT
// Opening a device: the options, the backend choice (explicit, KVBLK_BACKEND, else AUTO from
// the target), the backend's set-up and the batch scheduler. kvblk_open() (core.cpp) calls it.
#pragma once

#include <kvblk/kvblk.h>

struct kvblk_dev;

namespace kvblk::detail {

/* kvblk_open() after its NULL checks: 0 and *@out, or -errno with the message set. */
int open_device(const char *path, const kvblk_open_opts *user_opts, kvblk_dev **out);

} // namespace kvblk::detail

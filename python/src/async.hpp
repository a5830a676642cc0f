// SPDX-License-Identifier: MIT
// Bindings of the asynchronous API on kvblk._kvblk.Device.
#pragma once

#include "device.hpp"

namespace kvblkpy {

/* Adds submit/wait/reap/cancel/event_fd to @cls and kvblk._kvblk.HAVE_ASYNC to @m. */
void bind_async(py::module_ &m, py::class_<Device> &cls);

} // namespace kvblkpy

// SPDX-License-Identifier: MIT
// The process-wide defaults (kvblk_get_default() and friends) for kvblk/_defaults.py.
#pragma once

#include <pybind11/pybind11.h>

namespace kvblkpy {

void bind_defaults(pybind11::module_ &m);

} // namespace kvblkpy

// SPDX-License-Identifier: MIT
// kvblk._kvblk.KVStore: the kvblk store (<kvblk/kvstore.h>) for kvblk/_kvstore.py.
#pragma once

#include <pybind11/pybind11.h>

namespace kvblkpy {

namespace py = pybind11;

/* Adds KVStore, KVStoreBatch, kvstore_crc32c() and the KVSTORE_* constants to @m. */
void bind_kvstore(py::module_ &m);

} // namespace kvblkpy

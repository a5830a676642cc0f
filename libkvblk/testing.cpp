// SPDX-License-Identifier: MIT
#include "testing.hpp"

namespace kvblk::testing::internal {

std::atomic<const Seams *> g_seams{nullptr};

} // namespace kvblk::testing::internal
